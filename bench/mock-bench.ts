#!/usr/bin/env bun
/**
 * Mock Server throughput: tapwire's mock listener with 1,000 rules loaded (the matching one last) against a bare
 * Bun.serve returning the same bytes, in ONE run, with the same load tool (`hey -z 5s -c 32 URL`). Each server runs
 * in its own process, apart from the load generator; rules are loaded and the listener started through the API.
 * Prints requests/s of each row, the CPU time each server spent per request, and the ratio mock / bare (goal: at
 * least 80%). Rows: bare Bun.serve; mock listener with capture stopped (like for like: answering only); mock
 * listener with capture on (every request also becomes a traffic entry in SQLite, in the same process; the traffic
 * store is emptied before each such run, so it stays below its cap).
 *
 *   node_modules/.bin/bun bench/mock-bench.ts [--duration 5] [--connections 32] [--warmup 1] [--repeat 1]
 *                                             [--rules 1000] [--keep-tmp]
 *
 * --repeat N measures every row N times (rows interleaved: one round = bare, mock off, mock on) and reports the best
 * of each row, and, less sensitive to other load on a shared machine, the median over rounds of the ratio measured
 * within a round (adjacent runs) and the ratio of CPU time per request (bare / mock). hey is installed with apt-get (needs root) when missing. Every process started here runs in
 * its own process group and is stopped in a finally block, on SIGINT/SIGTERM, and by a global watchdog.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { children, killAllNow, run, startChild, stopChild, waitLine, type Child } from "./processes.ts";

const BODY = JSON.stringify({ id: 42, name: "mocked item", tags: ["a", "b"], ok: true });
/** A fixed Date header on the mock side, so both servers send byte-for-byte the same amount (Bun.serve adds Date). */
const FIXED_DATE = "Mon, 01 Jan 2024 00:00:00 GMT";

// ------------------------------------------------------------------------------------------------ bare server mode

if (Bun.argv.includes("--serve-bare")) {
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: () => new Response(BODY, { headers: { "Content-Type": "application/json" } }),
  });
  process.stdout.write(`PORT ${server.port}\n`);
  process.on("SIGTERM", () => {
    server.stop(true);
    process.exit(0);
  });
  await new Promise(() => {});
}

// ------------------------------------------------------------------------------------------------ options

const { values: opt } = parseArgs({
  args: Bun.argv.slice(2),
  strict: true,
  options: {
    duration: { type: "string", default: "5" },
    connections: { type: "string", default: "32" },
    warmup: { type: "string", default: "1" },
    repeat: { type: "string", default: "1" },
    rules: { type: "string", default: "1000" },
    "keep-tmp": { type: "boolean", default: false },
    help: { type: "boolean", short: "h", default: false },
  },
});
if (opt.help) {
  console.log(readFileSync(import.meta.path, "utf8").split("*/")[0]!.replace(/^#!.*\n\/\*\*\n/, "").replace(/^ \* ?/gm, ""));
  process.exit(0);
}
const DURATION = Number(opt.duration);
const CONNS = Math.floor(Number(opt.connections));
const WARMUP = Number(opt.warmup);
const REPEAT = Math.floor(Number(opt.repeat));
const RULES = Math.floor(Number(opt.rules));
if (![DURATION, CONNS, WARMUP, REPEAT, RULES].every(Number.isFinite) || DURATION < 1 || CONNS < 1 || WARMUP < 0 || REPEAT < 1 || RULES < 1) {
  console.error("mock-bench: --duration, --connections, --warmup, --repeat and --rules take positive numbers");
  process.exit(2);
}

const ROOT = join(import.meta.dir, "..");
const BUN = process.execPath;
const TMP = mkdtempSync(join(tmpdir(), "tapwire-mock-bench-"));
const log = (s: string): void => void process.stderr.write(`[mock-bench] ${s}\n`);

// ------------------------------------------------------------------------------------------------ processes

function cleanupTmp(): void {
  if (opt["keep-tmp"]) return log(`kept ${TMP}`);
  rmSync(TMP, { recursive: true, force: true });
}

for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.on(sig, () => {
    log(`${sig}: stopping everything`);
    killAllNow();
    cleanupTmp();
    process.exit(130);
  });
}


/** utime + stime of a process, in seconds (Linux /proc); null elsewhere. */
function cpuSeconds(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100; // USER_HZ is 100 on Linux
  } catch {
    return null;
  }
}

// ------------------------------------------------------------------------------------------------ hey

async function ensureHey(): Promise<void> {
  if (Bun.which("hey")) return;
  log("hey is missing: installing it with apt-get (needs root)");
  let r = await run(["apt-get", "install", "-y", "hey"], 300_000);
  if (r.code !== 0) {
    await run(["apt-get", "update"], 300_000);
    r = await run(["apt-get", "install", "-y", "hey"], 300_000);
  }
  if (r.code !== 0 || !Bun.which("hey")) throw new Error(`could not install hey:\n${r.err.slice(-2000)}`);
}

interface HeyResult {
  rps: number;
  ok: number;
  other: string;
}

async function hey(url: string, seconds: number): Promise<HeyResult> {
  const r = await run(["hey", "-z", `${seconds}s`, "-c", String(CONNS), url], (seconds + 60) * 1000);
  if (r.code !== 0) throw new Error(`hey failed (${r.code}):\n${r.err || r.out}`);
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(r.out)?.[1]);
  const ok = Number(/\[200\]\s+(\d+) responses/.exec(r.out)?.[1] ?? 0);
  const codes = [...r.out.matchAll(/\[(\d{3})\]\s+(\d+) responses/g)].filter((m) => m[1] !== "200").map((m) => `${m[1]}x${m[2]}`);
  const errors = /Error distribution:\n([\s\S]*)$/.exec(r.out)?.[1]?.trim();
  return { rps, ok, other: [...codes, ...(errors ? [`errors: ${errors.split("\n").slice(0, 3).join("; ")}`] : [])].join(" ") };
}

// ------------------------------------------------------------------------------------------------ setup

interface Handshake {
  port: number;
  token: string;
}

async function startTapwire(): Promise<{ child: Child; api: (path: string, method?: string, body?: unknown) => Promise<any> }> {
  const dataDir = join(TMP, "data");
  const child = startChild("tapwire", [BUN, join(ROOT, "src/cli/main.ts"), "start", "--data-dir", dataDir, "--port", "0"]);
  await waitLine(child, (l) => l.includes("API http://127.0.0.1:"), 30_000);
  const hs = JSON.parse(readFileSync(join(dataDir, "api-handshake.json"), "utf8")) as Handshake;
  const api = async (path: string, method = "GET", body?: unknown) => {
    const r = await fetch(`http://127.0.0.1:${hs.port}${path}`, {
      method,
      headers: { authorization: `Bearer ${hs.token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
    return r.status === 204 ? null : await r.json();
  };
  return { child, api };
}

/** RULES-1 rules that do not match the benchmark URL (a realistic mix), then the one that does, last. */
function benchRules(): Record<string, unknown>[] {
  const rules: Record<string, unknown>[] = [];
  for (let i = 0; rules.length < RULES - 1; i++) {
    const kind = i % 5;
    const url_pattern =
      kind === 0 ? `/api/v1/items/${i}` : kind === 1 ? `/api/v1/items/${i}/*` : kind === 2 ? `/svc${i}/**` : kind === 3 ? `/search${i}?q=*` : i % 50 === 4 ? `**/never-${i}` : `/bench/hello-${i}`;
    rules.push({ id: `r${i}`, name: `rule ${i}`, method: i % 7 === 0 ? "POST" : "", url_pattern, status_code: 200, headers: [["Content-Type", "text/plain"]], body: `rule ${i}` });
  }
  rules.push({
    id: "bench",
    name: "the benchmarked rule",
    method: "GET",
    url_pattern: "/bench/*",
    status_code: 200,
    headers: [["Content-Type", "application/json"], ["Date", FIXED_DATE]],
    body: BODY,
  });
  return rules;
}

/** The raw response (head and Content-Length body) to one keep-alive GET, for the "same bytes" check. */
async function rawResponse(port: number, path: string): Promise<string> {
  return await new Promise((resolve, reject) => {
    let got = "";
    const timer = setTimeout(() => reject(new Error(`no complete response from port ${port}: ${JSON.stringify(got)}`)), 10_000);
    void Bun.connect({
      hostname: "127.0.0.1",
      port,
      socket: {
        open(s) {
          s.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
        },
        data(s, d) {
          got += Buffer.from(d).toString("latin1");
          const end = got.indexOf("\r\n\r\n");
          const len = Number(/\r\ncontent-length: *(\d+)/i.exec(got)?.[1] ?? NaN);
          if (end >= 0 && got.length >= end + 4 + len) {
            clearTimeout(timer);
            s.end();
            resolve(got);
          }
        },
        error(_s, e) {
          clearTimeout(timer);
          reject(e);
        },
      },
    });
  });
}

// ------------------------------------------------------------------------------------------------ main

interface Row {
  name: string;
  url: string;
  pid: number;
  before?: () => Promise<void>;
  best: { rps: number; cpuUsPerReq: number | null; other: string } | null;
  runs: { rps: number; cpuUsPerReq: number | null }[];
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

async function main(): Promise<void> {
  await ensureHey();
  log(`${navigator.hardwareConcurrency ?? "?"} CPU cores; hey -z ${DURATION}s -c ${CONNS}; ${RULES} mock rules`);

  const bare = startChild("bare Bun.serve", [BUN, import.meta.path, "--serve-bare"]);
  const barePort = Number((await waitLine(bare, (l) => l.startsWith("PORT "), 15_000)).slice(5));

  const tw = await startTapwire();
  const rules = benchRules();
  const t0 = performance.now();
  for (const r of rules) await tw.api("/api/v1/mock/rules", "POST", r);
  log(`loaded ${rules.length} rules through the API in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  const mockPort = (await tw.api("/api/v1/mock/start", "POST", { port: 0 })).port as number;
  const path = "/bench/hello?x=1";
  const match = await tw.api(`/api/v1/mock/match?method=GET&path=${encodeURIComponent(path)}`);
  if (match.rule?.id !== "bench") throw new Error(`the benchmark URL should match the last rule, matched ${JSON.stringify(match.rule?.id)}`);

  // same bytes: the two responses differ only in the Date value and header order
  const rb = await rawResponse(barePort, path);
  const rm = await rawResponse(mockPort, path);
  const norm = (s: string) => s.replace(/\r\nDate: [^\r]*/i, "").split("\r\n\r\n");
  const [bh, bb] = norm(rb);
  const [mh, mb] = norm(rm);
  const headSet = (h: string) => h.split("\r\n").map((l) => l.toLowerCase()).sort().join("|");
  if (bb !== mb || headSet(bh!) !== headSet(mh!) || rb.length !== rm.length) {
    throw new Error(`the two servers do not answer the same bytes:\n--- bare\n${rb}\n--- mock\n${rm}`);
  }
  log(`both answer ${rm.length} bytes; the mock's:\n${rm.replace(/\r\n/g, "\\r\\n\n")}`);

  const rows: Row[] = [
    { name: "bare Bun.serve", url: `http://127.0.0.1:${barePort}${path}`, pid: bare.proc.pid, best: null, runs: [] },
    {
      name: "mock listener, capture off",
      url: `http://127.0.0.1:${mockPort}${path}`,
      pid: tw.child.proc.pid,
      before: async () => void (await tw.api("/api/v1/capture/stop", "POST")),
      best: null,
      runs: [],
    },
    {
      name: "mock listener, capture on",
      url: `http://127.0.0.1:${mockPort}${path}`,
      pid: tw.child.proc.pid,
      // each round starts from an empty store: at its cap (--max-entries, 100,000) every flush also evicts,
      // which is the capture store's cost, not the listener's
      before: async () => {
        await tw.api("/api/v1/traffic", "DELETE");
        await tw.api("/api/v1/capture/start", "POST");
      },
      best: null,
      runs: [],
    },
  ];

  for (let round = 0; round < REPEAT; round++) {
    for (const row of rows) {
      await row.before?.();
      if (WARMUP > 0) await hey(row.url, WARMUP);
      const c0 = cpuSeconds(row.pid);
      const r = await hey(row.url, DURATION);
      const c1 = cpuSeconds(row.pid);
      const cpuUsPerReq = c0 !== null && c1 !== null && r.ok > 0 ? ((c1 - c0) * 1e6) / r.ok : null;
      log(`${row.name}: ${r.rps.toFixed(0)} req/s${cpuUsPerReq !== null ? `, ${cpuUsPerReq.toFixed(1)} cpu us/req` : ""}${r.other ? ` (${r.other})` : ""}`);
      if (r.other) throw new Error(`${row.name}: responses other than 200 or errors: ${r.other}`);
      row.runs.push({ rps: r.rps, cpuUsPerReq });
      if (row.best === null || r.rps > row.best.rps) row.best = { rps: r.rps, cpuUsPerReq, other: r.other };
    }
  }
  const entries = (await tw.api("/api/v1/capture/status")).entry_count as number;

  const [b, off, on] = rows.map((r) => r.best!);
  const [bareRow, offRow, onRow] = rows as [Row, Row, Row];
  const paired = (row: Row) => median(row.runs.map((r, i) => r.rps / bareRow.runs[i]!.rps));
  const cpuRatio = (row: Row) => {
    const m = median(row.runs.map((r) => r.cpuUsPerReq ?? NaN));
    const base = median(bareRow.runs.map((r) => r.cpuUsPerReq ?? NaN));
    return Number.isFinite(m) && Number.isFinite(base) ? `${((base / m) * 100).toFixed(1)}%` : "-";
  };
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  const cpu = (r: { cpuUsPerReq: number | null }) => (r.cpuUsPerReq === null ? "-" : r.cpuUsPerReq.toFixed(1));
  const cols = (a: string, b2: string, c: string, d: string, e: string, f: string) =>
    `${a.padEnd(28)} ${b2.padStart(9)} ${c.padStart(11)} ${d.padStart(10)} ${e.padStart(14)} ${f.padStart(10)}`;
  console.log(`\nmock listener vs bare Bun.serve — ${RULES} rules (match: rule ${RULES} of ${RULES}), hey -z ${DURATION}s -c ${CONNS}, ${REPEAT} round(s), ${navigator.hardwareConcurrency ?? "?"} cores`);
  console.log(cols("row", "best rps", "cpu us/req", "best/best", "median paired", "cpu ratio"));
  console.log(cols(bareRow.name, b!.rps.toFixed(0), cpu(b!), "100%", "100%", "100%"));
  console.log(cols(offRow.name, off!.rps.toFixed(0), cpu(off!), pct(off!.rps / b!.rps), pct(paired(offRow)), cpuRatio(offRow)));
  console.log(cols(onRow.name, on!.rps.toFixed(0), cpu(on!), pct(on!.rps / b!.rps), pct(paired(onRow)), cpuRatio(onRow)));
  console.log("(median paired: median over rounds of mock rps / bare rps measured back to back; cpu ratio: bare cpu us/req / mock cpu us/req, medians)");
  const goal = paired(offRow);
  console.log(`\nratio, mock (capture off) / bare: ${pct(goal)} (median paired) — goal ≥ 80%: ${goal >= 0.8 ? "met" : "NOT met"}`);
  console.log(`ratio, mock (capture on) / bare: ${pct(paired(onRow))}; traffic entries recorded: ${entries}`);
}

const watchdog = setTimeout(() => {
  log("watchdog: the run took too long; stopping everything");
  killAllNow();
  cleanupTmp();
  process.exit(3);
}, (REPEAT * 3 * (DURATION + WARMUP + 30) + 600) * 1000);

let code = 0;
try {
  await main();
} catch (e) {
  log(`failed: ${(e as Error).stack ?? e}`);
  code = 1;
} finally {
  clearTimeout(watchdog);
  await Promise.all([...children].map((c) => stopChild(c)));
  cleanupTmp();
}
process.exit(code);
