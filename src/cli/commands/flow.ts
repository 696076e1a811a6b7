import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import type { FlowSummary, RunReport } from "../../features/flows/schema.ts";
import { resolveDataDir } from "../../service/datadir.ts";
import { AlreadyRunningError } from "../../service/handshake.ts";
import { TapwireService } from "../../service/service.ts";
import { START_OPTIONS, startConfig, type StartValues } from "../args.ts";
import { ApiClient, NotRunningError } from "../client.ts";
import {
  CliFailure,
  dataDirHelp,
  DATA_DIR_OPTION,
  formatDuration,
  JSON_OPTION,
  parse,
  printJson,
  str,
  table,
  UsageError,
  type Command,
  type Io,
  type Options,
  type Subcommand,
  type Values,
  runSubcommand,
} from "../command.ts";
import { flowSuites } from "../report/flow-junit.ts";
import { flowText } from "../report/flow-text.ts";
import { junitXml } from "../report/junit.ts";
import { apiErrorMessage, callJson, connect } from "../service-call.ts";

const REPORTERS = ["cli", "json", "junit"] as const;
type Reporter = (typeof REPORTERS)[number];

const RUN_USAGE = `usage: tapwire flow run FILE|ID [--env NAME=VALUE]... [--reporter cli,json,junit] [--out DIR] [options]

Runs a flow and reports it: FILE is a flow file (docs/flows.md), ID a flow stored in the data directory's flows/.
It uses the tapwire running on the data directory (its rules apply, its capture records the requests); when none
runs, it starts one inside this process on a temporary data directory holding a copy of the data directory's
flows and compose collections (so subflows and request references resolve), and removes it afterwards.

Exits 0 when the run passed, 1 when it failed (an assertion or a test did not hold), 2 on an error (a request
could not be sent, a script threw, the flow is not valid, the run timed out, no such flow, a usage error).

options:
  --env NAME=VALUE       a variable override for this run (repeatable); the value is a string
  --reporter LIST        comma-separated (repeatable): cli (steps, readable; the default), json (the run report
                         of POST /api/v1/flows/{id}/run), junit (JUnit XML for CI)
  --out DIR              write the json and junit reports to DIR/<flow id>.report.json and DIR/<flow id>.junit.xml
                         (without it they go to stdout, and cli goes to stderr; only one of them may then be given)
  --flow-timeout SECS    time limit of the run in an embedded tapwire (default 120); a running tapwire has its own
  --verbose              show the embedded tapwire's own log lines on stderr
${dataDirHelp(25)}
  start options          --upstream-ca FILE, --upstream-insecure, --script-timeout MS... as for \`tapwire start\`;
                         they configure an embedded tapwire only
  -h, --help             show this text

examples:
  tapwire flow run docs/examples/flows/login.json --env baseUrl=http://127.0.0.1:8000
  tapwire flow run smoke --reporter cli,junit --out reports/`;

const LIST_USAGE = `usage: tapwire flow list [--json] [--data-dir DIR]

Lists the flows stored in the running tapwire's data directory: id, name, node and edge counts, last change; with
--json, GET /api/v1/flows's answer.

options:
  --json             JSON
${dataDirHelp(21)}
  -h, --help         show this text

example:
  tapwire flow list --json | jq -r '.flows[].id'`;

const FLOW_USAGE = `usage: tapwire flow <command> [options]

Stored API flows (docs/flows.md) and tapwire's built-in runner.

commands:
  run    run a flow file or a stored flow and report it (exit 0 passed, 1 failed, 2 error)
  list   list the stored flows

options:
  -h, --help   show this text

examples:
  tapwire flow run login.json --env baseUrl=http://127.0.0.1:8000 --reporter cli,junit --out reports/
  tapwire flow list`;

const RUN_ONLY = {
  env: { type: "string", multiple: true },
  reporter: { type: "string", multiple: true },
  out: { type: "string" },
  verbose: { type: "boolean" },
} as const;
const RUN_OPTIONS: Options = { ...START_OPTIONS, ...RUN_ONLY };
const LIST_OPTIONS: Options = { ...JSON_OPTION, ...DATA_DIR_OPTION };

/** `--env NAME=VALUE`s as an object. */
export function parseEnvFlags(list: string[] | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of list ?? []) {
    const eq = item.indexOf("=");
    if (eq <= 0) throw new UsageError(`--env takes NAME=VALUE, got '${item}'`, RUN_USAGE);
    out[item.slice(0, eq)] = item.slice(eq + 1);
  }
  return out;
}

/** The reporters asked for (default cli); a name outside cli, json, junit is a usage error. */
export function parseReporters(list: string[] | undefined): Reporter[] {
  const names = (list ?? ["cli"]).flatMap((x) => x.split(",")).map((x) => x.trim()).filter(Boolean);
  const out: Reporter[] = [];
  for (const n of names) {
    if (!(REPORTERS as readonly string[]).includes(n)) throw new UsageError(`--reporter takes ${REPORTERS.join(", ")}; got '${n}'`, RUN_USAGE);
    if (!out.includes(n as Reporter)) out.push(n as Reporter);
  }
  return out.length ? out : ["cli"];
}

type Target = { kind: "file"; path: string; flow: Record<string, unknown> } | { kind: "id"; id: string };

function target(arg: string): Target {
  if (existsSync(arg) && statSync(arg).isFile()) {
    let flow: unknown;
    try {
      flow = JSON.parse(readFileSync(arg, "utf8"));
    } catch (e) {
      throw new CliFailure(`${arg} is not a flow file: not valid JSON (${(e as Error).message})`, 2);
    }
    if (!flow || typeof flow !== "object" || Array.isArray(flow)) throw new CliFailure(`${arg} is not a flow file: it holds no JSON object`, 2);
    const f = flow as Record<string, unknown>;
    // a file without an id runs under its file name
    if (f.id === undefined) f.id = basename(arg).replace(/\.json$/i, "").replace(/[^A-Za-z0-9_-]/g, "-").slice(0, 128) || "flow";
    return { kind: "file", path: arg, flow: f };
  }
  if (/[/\\]|\.json$/i.test(arg)) throw new CliFailure(`no such flow file: ${arg}`, 2);
  return { kind: "id", id: arg };
}

/** A tapwire inside this process, on a temporary data directory with a copy of the flows and collections. */
async function embedded(values: Values, io: Io): Promise<{ client: ApiClient; close: () => Promise<void> }> {
  const source = resolveDataDir(str(values, "data-dir"), io.env);
  const temp = mkdtempSync(join(tmpdir(), "tapwire-flow-"));
  for (const dir of ["flows", "compose"]) {
    const from = join(source, dir);
    if (existsSync(from)) cpSync(from, join(temp, dir), { recursive: true });
  }
  const config = startConfig({ ...(values as StartValues), "data-dir": temp }, io.env, { proxyPort: 0 });
  const service = new TapwireService(config, (l) => {
    if (values.verbose) io.err(l);
  });
  try {
    await service.start();
  } catch (e) {
    rmSync(temp, { recursive: true, force: true });
    if (e instanceof AlreadyRunningError) throw new CliFailure(e.message, 2);
    throw e;
  }
  return {
    client: ApiClient.fromDataDir(temp, io.env),
    close: async () => {
      await service.stop();
      rmSync(temp, { recursive: true, force: true });
    },
  };
}

async function runFlow(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parse(argv, RUN_OPTIONS, RUN_USAGE, [1, 1]);
  const environment = parseEnvFlags(values.env as string[] | undefined);
  const reporters = parseReporters(values.reporter as string[] | undefined);
  const outDir = str(values, "out");
  const toStdout = reporters.filter((r) => r !== "cli");
  if (!outDir && toStdout.length > 1) throw new UsageError(`--reporter ${toStdout.join(",")}: only one of json and junit can go to stdout; give --out DIR`, RUN_USAGE);
  const what = target(positionals[0]!);

  let client: ApiClient | null = null;
  let close: (() => Promise<void>) | null = null;
  try {
    client = ApiClient.fromDataDir(str(values, "data-dir"), io.env);
  } catch (e) {
    if (!(e instanceof NotRunningError)) throw e;
  }
  if (!client) ({ client, close } = await embedded(values, io));

  let report: RunReport;
  try {
    const env = Object.keys(environment).length ? { environment } : {};
    const a =
      what.kind === "file"
        ? await client.request("POST", "/flows/run", { flow: what.flow, ...env })
        : await client.request("POST", `/flows/${encodeURIComponent(what.id)}/run`, Object.keys(env).length ? env : undefined);
    if (a.status !== 200) {
      const code = (a.json as { error?: { code?: string } } | undefined)?.error?.code;
      const why = a.status === 404 ? `no flow '${what.kind === "id" ? what.id : what.path}' (or its file is corrupt)` : a.status === 504 ? "the run timed out and was cancelled" : a.status === 503 ? "the flow runner of this tapwire is off (--no-flow-runner) or it is stopping" : "";
      throw new CliFailure(`${why ? `${why}: ` : ""}${apiErrorMessage(a)}${code && !why ? ` [${code}]` : ""}`, 2);
    }
    report = a.json as RunReport;
  } finally {
    if (close) await close();
  }

  const name = what.kind === "file" && typeof what.flow.name === "string" && what.flow.name ? what.flow.name : report.flowId;
  if (outDir) mkdirSync(outDir, { recursive: true });
  const machine = !outDir && toStdout.length === 1;
  for (const r of reporters) {
    if (r === "cli") {
      const lines = flowText(report, name);
      for (const l of lines) (machine ? io.err : io.out)(l);
    } else {
      const text = r === "json" ? `${JSON.stringify(report, null, 2)}\n` : junitXml(flowSuites(report, name), `tapwire flow ${name}`);
      if (outDir) {
        const file = join(outDir, `${report.flowId}.${r === "json" ? "report.json" : "junit.xml"}`);
        writeFileSync(file, text);
        io.err(`tapwire: wrote ${file}`);
      } else io.write(text);
    }
  }
  return report.status === "passed" ? 0 : report.status === "failed" ? 1 : 2;
}

async function listFlows(argv: string[], io: Io): Promise<number> {
  const { values } = parse(argv, LIST_OPTIONS, LIST_USAGE);
  const r = await callJson<{ flows: FlowSummary[] }>(connect(values, io), "GET", "/flows");
  if (values.json) {
    printJson(io, r);
    return 0;
  }
  if (!io.isTTY) {
    for (const f of r.flows) io.out([f.id, f.name, f.nodeCount, f.edgeCount, new Date(f.updatedAt).toISOString()].join("\t"));
    return 0;
  }
  if (r.flows.length === 0) {
    io.err("tapwire: no flows stored");
    return 0;
  }
  const now = Date.now();
  for (const l of table(["ID", "NODES", "EDGES", "CHANGED", "NAME"], r.flows.map((f) => [f.id, String(f.nodeCount), String(f.edgeCount), `${formatDuration(now - f.updatedAt)} ago`, f.name]), io.columns)) io.out(l);
  return 0;
}

const dirHint = { "data-dir": "dir" } as const;
const SUBCOMMANDS: (Subcommand & { run: (argv: string[], io: Io) => Promise<number> })[] = [
  { name: "run", summary: "run a flow file or a stored flow and report it", usage: RUN_USAGE, options: RUN_OPTIONS, values: { ...dirHint, out: "dir", reporter: REPORTERS, "upstream-ca": "file" }, run: runFlow },
  { name: "list", summary: "list the stored flows", usage: LIST_USAGE, options: LIST_OPTIONS, values: dirHint, run: listFlows },
];

export const flowCommand: Command = {
  name: "flow",
  summary: "run stored API flows or flow files headless (CI reports: json, junit)",
  usage: FLOW_USAGE,
  options: {} as Options,
  subcommands: SUBCOMMANDS,
  run: (argv: string[], io: Io) => runSubcommand("flow", FLOW_USAGE, SUBCOMMANDS, argv, io),
};
