import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { clientEnv, ensureClientFiles } from "../../service/client-env.ts";
import { AlreadyRunningError } from "../../service/handshake.ts";
import { TapwireService } from "../../service/service.ts";
import type { EntryDetail, EntrySummary, ListResult } from "../../store/types.ts";
import { VERSION } from "../../version.ts";
import { START_OPTIONS, startConfig, type StartValues } from "../args.ts";
import { ApiClient, NotRunningError } from "../client.ts";
import { CliFailure, HELP_OPTION, UsageError, parse, str, type Command, type Io, type Options, type Values } from "../command.ts";
import { callJson } from "../service-call.ts";
import { exportHar } from "./har.ts";
import { newestId } from "./traffic.ts";

export const RUN_USAGE = `usage: tapwire run [--har FILE] [--jsonl FILE] [--tab NAME] [--fail-on-http-error] [--port P] [--isolated] [start options] [--] COMMAND [ARGS...]

Runs COMMAND with the variables of \`tapwire env\`, so that its HTTP and HTTPS requests go through tapwire with
verified TLS, and records the traffic captured while it runs (the entries that arrive after it starts, whoever
sent them). It uses the tapwire running on the data directory; when none runs, it starts one inside this process
for the duration, on the data directory (its CA and its rules apply), with the proxy on --port or a free port.
COMMAND also gets TAPWIRE_DATA_DIR, so tapwire commands inside it talk to that tapwire.

Exits with COMMAND's exit code: 128+N when signal N ended it, 127 when it could not be started. Without --har or
--jsonl nothing is written; a one-line summary goes to stderr either way.

options:
  --har FILE             write the captured traffic as a HAR 1.2 file (one page holding every entry)
  --jsonl FILE           write it as JSON lines: one entry per line, as GET /api/v1/traffic/ID gives it
  --tab NAME             the HAR's page title and creator comment (default: the command line)
  --fail-on-http-error   exit 1 when COMMAND succeeded but a captured response had a 5xx status or a connection
                         failed (those entries are listed on stderr)
  --port P               proxy port of an embedded tapwire (default: a free port)
  --isolated             always start an embedded tapwire, on a temporary data directory (a new CA, no rules),
                         removed afterwards
  --quiet                print only errors of tapwire's own on stderr
  --data-dir DIR         data directory (default: $TAPWIRE_DATA_DIR, else the per-user data folder)
  start options          --upstream-ca FILE, --upstream-insecure, --body-limit BYTES... as for \`tapwire start\`;
                         they configure an embedded tapwire only
  -h, --help             show this text

examples:
  tapwire run --har traffic.har -- npm test
  tapwire run --fail-on-http-error --jsonl calls.jsonl -- python3 smoke.py
  tapwire run --isolated --upstream-ca test-ca.pem --har out.har -- curl https://localhost:8443/`;

const RUN_ONLY = {
  har: { type: "string" },
  jsonl: { type: "string" },
  tab: { type: "string" },
  "fail-on-http-error": { type: "boolean" },
  isolated: { type: "boolean" },
  quiet: { type: "boolean" },
} as const;
const OPTIONS: Options = { ...START_OPTIONS, ...RUN_ONLY };

/** Splits `tapwire run` arguments into its own flags and the command: at `--`, else at the first word that is no flag or flag value. */
export function splitCommand(argv: string[], options: Options): { flags: string[]; command: string[] } {
  const dd = argv.indexOf("--");
  if (dd >= 0) return { flags: argv.slice(0, dd), command: argv.slice(dd + 1) };
  const all: Options = { ...options, ...HELP_OPTION };
  const takesValue = (flag: string): boolean => {
    if (flag.startsWith("--")) return !flag.includes("=") && all[flag.slice(2)]?.type === "string";
    const short = Object.values(all).find((o) => o.short === flag.slice(1, 2));
    return flag.length === 2 && short?.type === "string";
  };
  let i = 0;
  while (i < argv.length && argv[i]!.startsWith("-") && argv[i] !== "-") i += takesValue(argv[i]!) ? 2 : 1;
  return { flags: argv.slice(0, i), command: argv.slice(i) };
}

/** Every entry with an id above `since`, oldest first. */
async function entriesSince(client: ApiClient, since: number): Promise<EntrySummary[]> {
  const out: EntrySummary[] = [];
  for (;;) {
    const r = await callJson<ListResult>(client, "GET", `/traffic?since_id=${since}&limit=500&order=asc`);
    out.push(...r.items);
    if (r.items.length < 500) return out;
    since = r.items.at(-1)!.id;
  }
}

/** Their details, a few requests at a time; entries deleted meanwhile are skipped. */
async function details(client: ApiClient, items: EntrySummary[]): Promise<EntryDetail[]> {
  const out: (EntryDetail | null)[] = new Array(items.length).fill(null);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      const a = await client.request("GET", `/traffic/${items[i]!.id}`);
      if (a.status === 200) out[i] = a.json as EntryDetail;
    }
  };
  await Promise.all(Array.from({ length: Math.min(8, items.length) }, worker));
  return out.filter((e): e is EntryDetail => e !== null);
}

function failed(e: EntrySummary): boolean {
  return e.status_code >= 500 || e.status_code === 0 || !!e.error;
}

/** Runs the child with inherited stdio; signals this process gets are passed on. Resolves to its exit code. */
async function runChild(command: string[], env: Record<string, string | undefined>, io: Io): Promise<number> {
  let child: ReturnType<typeof Bun.spawn>;
  try {
    child = Bun.spawn(command, { stdin: "inherit", stdout: "inherit", stderr: "inherit", env: env as Record<string, string> });
  } catch (e) {
    io.err(`tapwire: cannot run ${command[0]}: ${(e as Error).message}`);
    return 127;
  }
  const signals = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
  const forward = signals.map((sig) => {
    const h = () => {
      try {
        child.kill(sig);
      } catch {}
    };
    process.on(sig, h);
    return () => process.off(sig, h);
  });
  try {
    return await child.exited;
  } finally {
    for (const off of forward) off();
  }
}

/** Collects the entries captured since `since`, writes the files asked for, and works out the exit code. */
async function record(client: ApiClient, since: number, code: number, command: string[], values: Values, io: Io, log: (l: string) => void): Promise<number> {
  const items = await entriesSince(client, since);
  const bad = items.filter(failed);
  const har = str(values, "har");
  const jsonl = str(values, "jsonl");
  if (har || jsonl) {
    const full = await details(client, items);
    if (har) {
      // the service's HAR export (features/traffic/har.ts): the same file `tapwire har export` writes
      const title = str(values, "tab") ?? command.join(" ");
      await exportHar(client, { since_id: since, title }, har, io);
    }
    if (jsonl) writeFileSync(jsonl, full.map((e) => JSON.stringify(e) + "\n").join(""));
  }
  const wrote = [har, jsonl].filter(Boolean).join(" and ");
  log(`tapwire: ${items.length} entr${items.length === 1 ? "y" : "ies"} captured${bad.length ? ` (${bad.length} failed or 5xx)` : ""}${wrote ? `; wrote ${wrote}` : ""}`);
  if (code === 0 && values["fail-on-http-error"] && bad.length) {
    for (const e of bad) io.err(`  #${e.id} ${e.method} ${e.url} -> ${e.status_code || "no response"}${e.error ? ` (${e.error})` : ""}`);
    io.err(`tapwire: --fail-on-http-error: ${bad.length} captured response(s) failed`);
    return 1;
  }
  return code;
}

export const runCommand: Command = {
  name: "run",
  summary: "run a command through tapwire and record its traffic (HAR, JSON lines)",
  usage: RUN_USAGE,
  options: OPTIONS,
  values: { har: "file", jsonl: "file", "data-dir": "dir", "upstream-ca": "file" },
  async run(argv: string[], io: Io): Promise<number> {
    const { flags, command } = splitCommand(argv, OPTIONS);
    const { values } = parse(flags, OPTIONS, RUN_USAGE);
    if (command.length === 0) throw new UsageError("missing COMMAND", RUN_USAGE);
    const log = (l: string) => {
      if (!values.quiet) io.err(l);
    };
    const startValues = values as StartValues;

    let client: ApiClient | null = null;
    let service: TapwireService | null = null;
    let tempData: string | null = null;
    if (!values.isolated) {
      try {
        client = ApiClient.fromDataDir(str(values, "data-dir"), io.env);
        const ignored = Object.keys(START_OPTIONS).filter((k) => k !== "data-dir" && values[k] !== undefined);
        if (ignored.length) log(`tapwire: using the running tapwire (pid ${client.handshake.pid}); ${ignored.map((k) => `--${k}`).join(", ")} apply only to an embedded one`);
      } catch (e) {
        if (!(e instanceof NotRunningError)) throw e;
      }
    }
    if (!client) {
      if (values.isolated) tempData = mkdtempSync(join(tmpdir(), "tapwire-run-"));
      const config = startConfig({ ...startValues, ...(tempData ? { "data-dir": tempData } : {}) }, io.env, { proxyPort: 0 });
      service = new TapwireService(config, (l) => log(l));
      try {
        await service.start();
      } catch (e) {
        if (tempData) rmSync(tempData, { recursive: true, force: true });
        if (e instanceof AlreadyRunningError) throw new CliFailure(e.message);
        throw e;
      }
      client = ApiClient.fromDataDir(config.dataDir, io.env);
    }

    try {
      const port = client.proxyPort;
      if (!port) throw new CliFailure(`the proxy of tapwire (pid ${client.handshake.pid}) is not listening`);
      const files = ensureClientFiles(client.dataDir);
      const since = await newestId(client);
      const env: Record<string, string | undefined> = {
        ...io.env,
        ...Object.fromEntries(clientEnv({ proxyPort: port, files, nodeOptions: io.env.NODE_OPTIONS })),
        TAPWIRE_DATA_DIR: client.dataDir,
      };
      const code = await runChild(command, env, io);
      try {
        return await record(client, since, code, command, values, io, log);
      } catch (e) {
        // tapwire went away during the run (stopped by someone else), or the files cannot be written
        io.err(`tapwire: could not record the traffic: ${(e as Error).message}`);
        return code !== 0 ? code : 1;
      }
    } finally {
      if (service) await service.stop();
      if (tempData) rmSync(tempData, { recursive: true, force: true });
    }
  },
};
