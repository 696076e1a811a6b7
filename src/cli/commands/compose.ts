import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Collection, Folder, SendResult } from "../../features/compose/schema.ts";
import { resolveDataDir } from "../../service/datadir.ts";
import { AlreadyRunningError } from "../../service/handshake.ts";
import { TapwireService } from "../../service/service.ts";
import { VERSION } from "../../version.ts";
import { START_OPTIONS, startConfig, type StartValues } from "../args.ts";
import { ApiClient, NotRunningError } from "../client.ts";
import { CliFailure, UsageError, intFlag, parse, str, type Command, type Io, type Options, type Subcommand, type Values, runSubcommand } from "../command.ts";
import { DataFileError, readDataFile, type DataRow } from "../data-file.ts";
import { type FileReporter, type RunReport, type RunStep, runFailed, runStats, stepFailed, stepName, writeReports } from "../report/run-report.ts";
import { CLEAR_LINE, progressLine, stepLines, summaryLines } from "../report/summary.ts";
import { apiErrorMessage, callJson } from "../service-call.ts";

export const COMPOSE_RUN_USAGE = `usage: tapwire compose run COLLECTION [-e ENV] [--folder NAME]... [--iterations N] [--data FILE]
                           [--bail] [--reporter cli,json,junit] [--out DIR] [--data-dir DIR] [start options]

Runs every request of a collection in order, like newman: the folders of each level first (depth-first, in
order), then the level's own requests; with their pre-request and test scripts. Each request goes through
tapwire's pipeline (POST /api/v1/compose/send), so it is captured and rules apply.

COLLECTION is a Postman collection file (v2.0/v2.1), a tapwire collection file (the JSON of GET
/api/v1/compose/collections/ID), or the id of a collection of the running tapwire. A file is imported for the run
and deleted afterwards. When no tapwire runs on the data directory, one is started inside this process on a
temporary data directory for the run (an id is then read from the data directory's compose/ folder); start
options (--upstream-ca FILE, --upstream-insecure, --script-timeout MS, ...) configure that one only.

options:
  -e, --environment ENV  an environment of the collection by name, or an environment file (Postman's, or
                         tapwire's {name, variables}); a file makes the run use a temporary copy of the collection
  --folder NAME          run only this folder (the first one of that name, depth-first) with its sub-folders;
                         repeatable
  --iterations N         run the collection N times (default: the data file's row count, else 1)
  --data FILE            iteration data: CSV with a header row, or a JSON array of objects; iteration i binds row
                         i (the last row again when there are more iterations than rows) as variables between the
                         local scope and the environment, and as pm.iterationData
  --bail                 stop at the first request that fails (failed test, script error, no response)
  --reporter LIST        cli, json, junit (comma-separated or repeated; default cli, plus json and junit with --out)
  --out DIR              where the json and junit reports go (default ./tapwire-reports): compose-report.json,
                         compose-junit.xml
  --data-dir DIR         data directory of the running tapwire (default: $TAPWIRE_DATA_DIR, else the per-user data
                         folder)
  -h, --help             show this text

Prints a line per request (method, URL, status, time, size, tests) with its failed tests and errors under it, and
a summary table; a progress line on a terminal. Exit codes: 0 every request answered and every test passed;
1 a test failed, a script failed or a request got no response; 2 a usage error (also a COLLECTION, environment,
folder or data file that cannot be found or read); 130 interrupted.

examples:
  tapwire compose run users-api.postman_collection.json -e local.postman_environment.json
  tapwire compose run 1d99f6f8-5b0c-4c1e-9a43-2f6d1c9e0a11 -e dev --folder Admin --reporter cli,junit --out reports
  tapwire compose run api.json --data users.csv --bail --upstream-ca test-ca.pem`;

const COMPOSE_USAGE = `usage: tapwire compose <command> [options]

Compose collections (GET /api/v1/compose/collections and the routes beside it).

commands:
  run    run a collection's requests with their scripts and tests, like newman (reports: cli, json, junit)

options:
  -h, --help   show this text (tapwire compose run --help: the runner's options)

example:
  tapwire compose run users-api.postman_collection.json -e local.postman_environment.json --out reports`;

const RUN_OPTIONS: Options = {
  ...START_OPTIONS,
  environment: { type: "string", short: "e" },
  folder: { type: "string", multiple: true },
  iterations: { type: "string" },
  data: { type: "string" },
  bail: { type: "boolean" },
  reporter: { type: "string", multiple: true },
  out: { type: "string" },
};

const REPORTERS = ["cli", "json", "junit"] as const;
type Reporter = (typeof REPORTERS)[number];

type Obj = Record<string, unknown>;
const isObj = (x: unknown): x is Obj => typeof x === "object" && x !== null && !Array.isArray(x);
const ID_RE = /^[A-Za-z0-9_-]{1,128}$/;

function reporters(values: Values): Reporter[] {
  const given = values.reporter as string[] | undefined;
  if (!given) return str(values, "out") === undefined ? ["cli"] : ["cli", "json", "junit"];
  const out: Reporter[] = [];
  for (const r of given.flatMap((x) => x.split(",")).map((x) => x.trim()).filter(Boolean)) {
    if (!(REPORTERS as readonly string[]).includes(r)) throw new UsageError(`--reporter: unknown reporter '${r}' (cli, json, junit)`, COMPOSE_RUN_USAGE);
    if (!out.includes(r as Reporter)) out.push(r as Reporter);
  }
  if (!out.length) throw new UsageError("--reporter: name at least one of cli, json, junit", COMPOSE_RUN_USAGE);
  return out;
}

function readJsonFile(path: string, what: string): unknown {
  try {
    return JSON.parse(readFileSync(path, "utf8"));
  } catch (e) {
    throw new UsageError(`cannot read ${what} ${path}: ${(e as Error).message}`, COMPOSE_RUN_USAGE);
  }
}

const isFile = (p: string) => existsSync(p) && statSync(p).isFile();

/** Where the collection comes from: a Postman document, one of ours (to create), or an id of the running service. */
type Source = { postman: Obj } | { ours: Obj } | { id: string };

function collectionSource(target: string, lookupDir: string | null): Source {
  if (isFile(target)) {
    const doc = readJsonFile(target, "collection file");
    if (isObj(doc) && isObj(doc.info)) return { postman: doc };
    if (isObj(doc) && typeof doc.name === "string" && (Array.isArray(doc.requests) || Array.isArray(doc.folders))) return { ours: doc };
    throw new UsageError(`${target} is neither a Postman collection (no 'info') nor a tapwire collection ('name' with 'requests' or 'folders')`, COMPOSE_RUN_USAGE);
  }
  if (lookupDir === null) return { id: target };
  const stored = join(lookupDir, "compose", `${target}.json`);
  if (ID_RE.test(target) && isFile(stored)) return { ours: readJsonFile(stored, "collection file") as Obj };
  throw new UsageError(`no file ${target}, and no collection of that id in ${join(lookupDir, "compose")} (no tapwire is running there to ask)`, COMPOSE_RUN_USAGE);
}

/** The fields a create takes, from a full collection (ids are assigned again; environments keep their current values). */
function createBody(c: Obj): Obj {
  const keys = ["name", "requests", "folders", "environments", "variables", "defaultHeaders", "defaultAuth", "scripts"];
  return Object.fromEntries(keys.filter((k) => c[k] !== undefined).map((k) => [k, c[k]]));
}

/** Calls the API; a 4xx answer is a usage error (what the user gave was refused), anything else >= 400 a failure. */
async function callInput<T>(client: ApiClient, method: string, path: string, body: unknown, what: string): Promise<T> {
  const a = await client.request(method, path, body);
  if (a.status >= 400 && a.status < 500) throw new UsageError(`${what}: ${apiErrorMessage(a)}`, COMPOSE_RUN_USAGE);
  if (a.status >= 400) throw new CliFailure(`${what}: ${apiErrorMessage(a)}`);
  return a.json as T;
}

interface Planned {
  id: string;
  method: string;
  path: string[];
}

/** Every request in run order: at each level its folders first (depth-first), then its own requests. */
function plan(container: { requests: Collection["requests"]; folders: Folder[] }, path: string[], out: Planned[] = []): Planned[] {
  for (const f of container.folders) plan(f, [...path, f.name], out);
  for (const r of container.requests) out.push({ id: r.id, method: r.method, path: [...path, r.name] });
  return out;
}

/** The first folder of this name, depth-first, with the names of the folders around it. */
function findFolder(folders: Folder[], name: string, path: string[] = []): { folder: Folder; path: string[] } | null {
  for (const f of folders) {
    if (f.name === name) return { folder: f, path: [...path, f.name] };
    const inner = findFolder(f.folders, name, [...path, f.name]);
    if (inner) return inner;
  }
  return null;
}

function step(p: Planned, iteration: number, startedAt: Date, r: SendResult): RunStep {
  return {
    path: p.path,
    iteration,
    started_at: startedAt.toISOString(),
    method: p.method,
    url: r.resolved_url,
    status: r.status,
    status_text: r.status_text,
    duration_ms: r.duration_ms,
    size_bytes: r.size_bytes,
    traffic_id: r.traffic_id,
    tests: r.tests,
    script_errors: r.errors.map((e) => ({ source: e.source, event: e.event, message: e.message })),
    // the script error is listed already: say only what it caused
    error: r.status === null && r.errors.some((e) => e.event === "prerequest") ? "not sent: its pre-request script failed" : r.error,
    console: r.console.map((l) => ({ level: l.level, message: l.message })),
  };
}

async function run(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parse(argv, RUN_OPTIONS, COMPOSE_RUN_USAGE, [1, 1]);
  const target = positionals[0]!;
  const which = reporters(values);
  const fileReporters = which.filter((r): r is FileReporter => r !== "cli");
  const cli = which.includes("cli");
  const iterationsFlag = intFlag(values, "iterations", COMPOSE_RUN_USAGE, 1, 1_000_000);
  let rows: DataRow[] | null = null;
  const dataFile = str(values, "data");
  if (dataFile !== undefined) {
    try {
      rows = readDataFile(dataFile);
    } catch (e) {
      if (e instanceof DataFileError) throw new UsageError(e.message, COMPOSE_RUN_USAGE);
      throw e;
    }
    if (!rows.length) throw new UsageError(`data file ${dataFile} has no rows`, COMPOSE_RUN_USAGE);
  }
  const iterations = iterationsFlag ?? rows?.length ?? 1;
  const envArg = str(values, "environment");
  const envDoc = envArg !== undefined && isFile(envArg) ? readJsonFile(envArg, "environment file") : undefined;
  if (envDoc !== undefined && !(isObj(envDoc) && typeof envDoc.name === "string" && (Array.isArray(envDoc.values) || Array.isArray(envDoc.variables) || envDoc.variables === undefined))) {
    throw new UsageError(`${envArg} is neither a Postman environment ('name' and 'values') nor a tapwire environment ('name' and 'variables')`, COMPOSE_RUN_USAGE);
  }

  let client: ApiClient | null = null;
  try {
    client = ApiClient.fromDataDir(str(values, "data-dir"), io.env);
  } catch (e) {
    if (!(e instanceof NotRunningError)) throw e;
  }
  const source = collectionSource(target, client ? null : resolveDataDir(str(values, "data-dir"), io.env));

  let service: TapwireService | null = null;
  let tempData: string | null = null;
  let tempCollection: string | null = null;
  let interrupted = false;
  const onSignal = () => {
    interrupted = true;
  };
  process.on("SIGINT", onSignal);
  try {
    if (!client) {
      tempData = mkdtempSync(join(tmpdir(), "tapwire-compose-run-"));
      const config = startConfig({ ...(values as StartValues), "data-dir": tempData }, io.env, { proxyPort: 0 });
      service = new TapwireService(config, () => {});
      try {
        await service.start();
      } catch (e) {
        if (e instanceof AlreadyRunningError) throw new CliFailure(e.message);
        throw e;
      }
      client = ApiClient.fromDataDir(tempData, io.env);
    }
    const api = client;

    // the collection the run uses: the one of that id, or a temporary one (a file; an id with an environment file)
    let collectionId: string;
    if ("postman" in source) {
      const r = await callInput<{ collection: Collection; warnings: string[] }>(api, "POST", "/compose/import", source.postman, `cannot import ${target}`);
      collectionId = tempCollection = r.collection.id;
      for (const w of r.warnings) io.err(`tapwire: import: ${w}`);
    } else if ("ours" in source) {
      collectionId = tempCollection = (await callInput<Collection>(api, "POST", "/compose/collections", createBody(source.ours), `cannot create a collection from ${target}`)).id;
    } else {
      const a = await api.request("GET", `/compose/collections/${encodeURIComponent(source.id)}`);
      if (a.status === 404) throw new UsageError(`no file ${source.id}, and no collection of that id in the running tapwire`, COMPOSE_RUN_USAGE);
      if (a.status >= 400) throw new CliFailure(`GET collection ${source.id}: ${apiErrorMessage(a)}`);
      collectionId = source.id;
      if (envDoc !== undefined) collectionId = tempCollection = (await callJson<Collection>(api, "POST", "/compose/collections", createBody(a.json as Obj))).id;
    }

    let envName: string | undefined;
    if (isObj(envDoc)) {
      envName = envDoc.name as string;
      // a temporary collection: the file's environment replaces one of the same name
      await api.request("DELETE", `/compose/collections/${collectionId}/environments/${encodeURIComponent(envName)}`);
      if (Array.isArray(envDoc.values)) await callInput(api, "POST", `/compose/import?collection_id=${collectionId}`, envDoc, `cannot import ${envArg}`);
      else await callInput(api, "POST", `/compose/collections/${collectionId}/environments`, envDoc, `cannot add the environment of ${envArg}`);
    }
    const full = await callJson<Collection>(api, "GET", `/compose/collections/${collectionId}`);
    if (envArg !== undefined && envName === undefined) {
      if (!full.environments.some((e) => e.name === envArg)) {
        const names = full.environments.map((e) => e.name);
        throw new UsageError(`no environment or file '${envArg}' (the collection's environments: ${names.length ? names.join(", ") : "none"})`, COMPOSE_RUN_USAGE);
      }
      envName = envArg;
    }

    let planned: Planned[];
    const folders = values.folder as string[] | undefined;
    if (folders?.length) {
      planned = [];
      for (const name of folders) {
        const found = findFolder(full.folders, name);
        if (!found) throw new UsageError(`--folder: no folder '${name}' in collection '${full.name}'`, COMPOSE_RUN_USAGE);
        plan(found.folder, found.path, planned);
      }
    } else planned = plan(full, []);

    const started = new Date();
    const steps: RunStep[] = [];
    let bailed = false;
    const progress = io.isTTY && cli;
    const total = planned.length * iterations;
    if (cli) io.out(`${full.name}${envName !== undefined ? ` · environment ${envName}` : ""}${iterations > 1 ? ` · ${iterations} iterations` : ""}${service ? " · embedded tapwire" : ""}`);
    outer: for (let it = 0; it < iterations; it++) {
      if (cli && iterations > 1) io.out(`\niteration ${it + 1}/${iterations}`);
      const row = rows ? rows[Math.min(it, rows.length - 1)] : undefined;
      for (const p of planned) {
        if (interrupted) break outer;
        if (progress) io.write(CLEAR_LINE + progressLine(steps.length, total, `${p.method} ${stepName(p)}`, io.columns));
        const at = new Date();
        const res = await callJson<SendResult>(api, "POST", "/compose/send", {
          collection_id: collectionId,
          request_id: p.id,
          ...(envName !== undefined ? { environment: envName } : {}),
          ...(row ? { data: row } : {}),
          iteration: { index: it, count: iterations },
        });
        const s = step(p, it, at, res);
        steps.push(s);
        if (progress) io.write(CLEAR_LINE);
        if (cli) for (const l of stepLines(s)) io.out(`  ${l}`);
        if (values.bail && stepFailed(s)) {
          bailed = true;
          break outer;
        }
      }
    }
    const finished = new Date();
    const report: RunReport = {
      tool: "tapwire compose run",
      version: VERSION,
      name: full.name,
      meta: { collection_id: tempCollection ? null : collectionId, source: target, environment: envName ?? null, embedded: service !== null },
      started_at: started.toISOString(),
      finished_at: finished.toISOString(),
      duration_ms: finished.getTime() - started.getTime(),
      iterations,
      bailed,
      interrupted,
      stats: runStats(steps),
      steps,
    };
    if (cli) {
      io.out("");
      for (const l of summaryLines(report)) io.out(l);
    }
    const written = writeReports(report, fileReporters, str(values, "out") ?? "tapwire-reports", "compose");
    if (written.length) io.err(`tapwire: wrote ${written.join(" and ")}`);
    if (interrupted) return 130;
    return runFailed(report) ? 1 : 0;
  } finally {
    process.off("SIGINT", onSignal);
    if (tempCollection && client && !service) await client.request("DELETE", `/compose/collections/${tempCollection}`).catch(() => undefined);
    if (service) await service.stop();
    if (tempData) rmSync(tempData, { recursive: true, force: true });
  }
}

const SUBCOMMANDS: (Subcommand & { run: (argv: string[], io: Io) => Promise<number> })[] = [
  {
    name: "run",
    summary: "run a collection's requests, scripts and tests, like newman",
    usage: COMPOSE_RUN_USAGE,
    options: RUN_OPTIONS,
    values: { environment: "file", data: "file", out: "dir", "data-dir": "dir", "upstream-ca": "file", reporter: REPORTERS },
    run,
  },
];

export const composeCommand: Command = {
  name: "compose",
  summary: "run compose collections like newman (compose run)",
  usage: COMPOSE_USAGE,
  options: {} as Options,
  subcommands: SUBCOMMANDS,
  run: (argv: string[], io: Io) => runSubcommand("compose", COMPOSE_USAGE, SUBCOMMANDS, argv, io),
};
