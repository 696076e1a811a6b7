import { resolveDataDir } from "../../service/datadir.ts";
import { ApiClient, NotRunningError } from "../client.ts";
import { dataDirHelp, DATA_DIR_OPTION, JSON_OPTION, delay, formatDuration, parse, parseDuration, printJson, str, type Command, type Io } from "../command.ts";
import { callJson } from "../service-call.ts";

export const STATUS_USAGE = `usage: tapwire status [--json] [--wait DURATION] [--data-dir DIR]

Tells whether tapwire runs on the data directory and, when it does, its pid, version, ports, uptime and counts.
Exits 0 when it runs, 1 when it does not.

options:
  --wait DURATION  wait up to this long for it to come up (30s, 500ms, 2m), e.g. after starting it in the background
  --json           one JSON object: running, data_dir, and the fields of GET /api/v1/health
${dataDirHelp(19)}
  -h, --help       show this text

examples:
  tapwire status
  tapwire start --port 0 & tapwire status --wait 30s`;

const OPTIONS = { wait: { type: "string" }, ...JSON_OPTION, ...DATA_DIR_OPTION } as const;

/** Fields of the health record shown on their own lines; the others are listed after them. */
const KNOWN = new Set(["status", "version", "capturing", "entry_count", "uptime_secs", "api_port", "proxy_port", "pid"]);

export const statusCommand: Command = {
  name: "status",
  summary: "is it running: pid, version, ports, counts (exit 1 when not running)",
  usage: STATUS_USAGE,
  options: OPTIONS,
  values: { "data-dir": "dir" },
  async run(argv: string[], io: Io): Promise<number> {
    const { values } = parse(argv, OPTIONS, STATUS_USAGE);
    const waitMs = values.wait === undefined ? 0 : parseDuration(str(values, "wait")!, "--wait", STATUS_USAGE);
    const dataDir = resolveDataDir(str(values, "data-dir"), io.env);
    const deadline = Date.now() + waitMs;
    let reason = "";
    for (;;) {
      try {
        const client = ApiClient.fromDataDir(dataDir, io.env);
        const health = await callJson<Record<string, unknown>>(client, "GET", "/health");
        show(io, !!values.json, dataDir, health);
        return 0;
      } catch (e) {
        if (!(e instanceof NotRunningError)) throw e;
        reason = e.message;
      }
      if (Date.now() >= deadline) break;
      await delay(Math.min(100, Math.max(0, deadline - Date.now())));
    }
    if (values.json) printJson(io, { running: false, data_dir: dataDir, reason });
    else io.out(reason);
    return 1;
  },
};

function show(io: Io, json: boolean, dataDir: string, h: Record<string, unknown>): void {
  if (json) {
    printJson(io, { running: true, data_dir: dataDir, ...h });
    return;
  }
  const lines = [
    `tapwire ${h.version} is running (pid ${h.pid}, up ${Number(h.uptime_secs) < 60 ? `${h.uptime_secs}s` : formatDuration(Number(h.uptime_secs) * 1000)})`,
    `  proxy         ${h.proxy_port ? `127.0.0.1:${h.proxy_port}` : "not listening"}`,
    `  API           http://127.0.0.1:${h.api_port}/api/v1`,
    `  data dir      ${dataDir}`,
    `  capture       ${h.capturing ? "on" : "off"}, ${h.entry_count} entries`,
  ];
  for (const [k, v] of Object.entries(h)) if (!KNOWN.has(k)) lines.push(`  ${k.replaceAll("_", " ").padEnd(13)} ${typeof v === "object" ? JSON.stringify(v) : String(v)}`);
  for (const l of lines) io.out(l);
}
