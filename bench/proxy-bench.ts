#!/usr/bin/env bun
/**
 * Proxy throughput and latency, tapwire against its peers, in ONE run (all rows measured with `hey`):
 *   (a) direct to the upstream (HTTP keep-alive, 1 KB body; also HTTPS for reference)
 *   (b) through tapwire, plain HTTP (absolute-form)
 *   (c) through tapwire, HTTPS via CONNECT (upstream is HTTPS too)
 *   the same (b)/(c) through http-mitm-proxy, mockttp and mitmdump (mitmproxy)
 * plus, unless --no-extra, tapwire with capture stopped (where the time goes), and with --wrk the plain-HTTP rows
 * again with wrk. Prints a table, what limited each row (a saturated proxy or upstream event loop, or all cores in
 * use), the goal ratios, RSS, and which processes shared the CPU cores. The "cpu us/req"
 * column (CPU time of the proxy, or of the upstream for direct rows, per successful request) is the figure least
 * disturbed by other load on the machine. After tapwire's capturing rows it times how long until every captured entry
 * is queryable (the store may defer writing while traffic is heavy) and tapwire's CPU meanwhile, and how many of
 * the HTTP row's requests went on a pooled upstream connection (its newest captured entries, read in detail).
 * --tapwire-cpu-prof DIR runs tapwire under `bun --cpu-prof --cpu-prof-md` and leaves the profile (written when
 * tapwire stops) in DIR. On a shared machine, --repeat N keeps the best of N
 * measured runs per row and --wait-quiet SECS first waits (at most SECS) for other processes to go quiet.
 *
 * Paired rounds (--pairs N, default 3; 0 leaves them out): the rows above are measured one after the other, a minute
 * or more apart, and this machine's speed drifts by 20-25% from minute to minute (http-mitm-proxy alone was seen
 * at 5.9k and 8.2k req/s in two runs). So the HTTP goals are measured again in N rounds of three back-to-back runs,
 * direct, tapwire (capturing) and the fastest HTTP peer, in a rotating order, with tapwire and the peer both
 * running; each round gives its own ratios, and the goals are judged on their median. After each tapwire run the
 * next one waits until tapwire is idle again (it writes its capture journal into SQLite and indexes it once the
 * traffic stops): that work must not slow down the run after it, and it is reported as tapwire's own cost.
 *
 *   node_modules/.bin/bun bench/proxy-bench.ts [--duration 5] [--connections 32] [--warmup 1] [--skip-peers]
 *                                              [--no-extra] [--wrk] [--max-entries N] [--keep-tmp] [--pairs N]
 *                                              [--repeat N] [--wait-quiet SECS] [--tapwire-cpu-prof DIR]
 *
 * Installs what is missing on first use: hey (and wrk, mitmproxy) with apt-get (needs root), the npm peers with
 * `npm install --prefix bench/peers`. Every process it starts runs in its own process group and is stopped in a
 * finally block (and on SIGINT/SIGTERM); every step has a timeout, and a global watchdog ends a stuck run.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { children, killAllNow, killGroup, run, startChild, stopAll, stopChild, type Child } from "./processes.ts";
import { generateCA } from "../src/core/tls/ca.ts";
import { LeafCertCache } from "../src/core/tls/leaf.ts";

// ------------------------------------------------------------------------------------------------ options

/** How many of (b)'s newest captured entries poolReuse() reads in detail. */
const POOL_SAMPLE = 100;

const { values: opt } = parseArgs({
  args: Bun.argv.slice(2),
  strict: true,
  options: {
    duration: { type: "string", default: "5" },
    connections: { type: "string", default: "32" },
    warmup: { type: "string", default: "1" },
    "skip-peers": { type: "boolean", default: false },
    "no-extra": { type: "boolean", default: false },
    wrk: { type: "boolean", default: false },
    "max-entries": { type: "string" },
    "keep-tmp": { type: "boolean", default: false },
    "tapwire-cpu-prof": { type: "string" },
    repeat: { type: "string", default: "1" },
    pairs: { type: "string", default: "3" },
    "wait-quiet": { type: "string", default: "0" },
    help: { type: "boolean", short: "h", default: false },
  },
});
if (opt.help) {
  console.log(readFileSync(import.meta.path, "utf8").split("*/")[0]!.replace(/^#!.*\n\/\*\*\n/, "").replace(/^ \* ?/gm, ""));
  process.exit(0);
}
const DURATION = Math.max(1, Number(opt.duration));
const CONNS = Math.max(1, Math.floor(Number(opt.connections)));
const WARMUP = Math.max(0, Number(opt.warmup));
const REPEAT = Math.max(1, Math.floor(Number(opt.repeat)));
const PAIRS = Math.max(0, Math.floor(Number(opt.pairs)));
const WAIT_QUIET = Math.max(0, Number(opt["wait-quiet"]) || 0);
const SKIP_PEERS = opt["skip-peers"]!;
const EXTRA = !opt["no-extra"];
const WITH_WRK = opt.wrk!;
if (!Number.isFinite(DURATION) || !Number.isFinite(WARMUP) || !Number.isFinite(CONNS) || !Number.isFinite(REPEAT) || !Number.isFinite(PAIRS)) {
  console.error("proxy-bench: --duration, --connections, --warmup, --repeat and --pairs take numbers");
  process.exit(2);
}

const ROOT = join(import.meta.dir, "..");
const PEERS_DIR = join(import.meta.dir, "peers");
const BUN = process.execPath;
const TMP = mkdtempSync(join(tmpdir(), "tapwire-proxy-bench-"));
const NCPU = navigator.hardwareConcurrency ?? 0;

const log = (s: string): void => void process.stderr.write(`[bench] ${s}\n`);

// ------------------------------------------------------------------------------------------------ processes

function cleanupTmp(): void {
  if (opt["keep-tmp"]) return log(`kept ${TMP}`);
  try {
    rmSync(TMP, { recursive: true, force: true });
  } catch {}
}

for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.on(sig, () => {
    log(`${sig}: stopping everything`);
    killAllNow();
    cleanupTmp();
    process.exit(130);
  });
}


function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let t: Timer;
  return Promise.race([
    p.finally(() => clearTimeout(t)),
    new Promise<T>((_, rej) => (t = setTimeout(() => rej(new Error(`${what}: timed out after ${ms / 1000} s`)), ms))),
  ]);
}

async function canConnect(port: number): Promise<boolean> {
  try {
    const s = await withTimeout(Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {} } }), 1000, "connect");
    s.end();
    return true;
  } catch {
    return false;
  }
}

async function waitForPort(c: Child, port: number, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (c.proc.exitCode !== null || c.proc.signalCode) throw new Error(`${c.name} exited (${c.proc.exitCode ?? c.proc.signalCode}):\n${c.err.text()}\n${c.out.text()}`);
    if (await canConnect(port)) return;
    await Bun.sleep(100);
  }
  throw new Error(`${c.name} did not listen on ${port} within ${timeoutMs / 1000} s:\n${c.err.text()}\n${c.out.text()}`);
}

function freePort(): number {
  const l = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const p = l.port;
  l.stop(true);
  return p;
}

// ------------------------------------------------------------------------------------------------ installs

async function ensureApt(wanted: { bin: string; pkg: string }[]): Promise<void> {
  const missing = wanted.filter((w) => !Bun.which(w.bin));
  if (!missing.length) return;
  const pkgs = [...new Set(missing.map((m) => m.pkg))];
  if (process.getuid?.() !== 0) throw new Error(`missing ${missing.map((m) => m.bin).join(", ")}: run 'apt-get install -y ${pkgs.join(" ")}' as root`);
  const env = { DEBIAN_FRONTEND: "noninteractive" };
  const install = () => run(["apt-get", "install", "-y", "--no-install-recommends", ...pkgs], 900_000, { env });
  log(`installing ${pkgs.join(", ")} with apt-get`);
  let r = await install();
  if (r.code !== 0 || missing.some((m) => !Bun.which(m.bin))) {
    log("apt-get install failed; running apt-get update once and retrying");
    const u = await run(["apt-get", "update"], 600_000, { env });
    if (u.code !== 0) throw new Error(`apt-get update failed:\n${u.err.slice(-2000)}`);
    r = await install();
  }
  const still = missing.filter((m) => !Bun.which(m.bin));
  if (r.code !== 0 || still.length) throw new Error(`apt-get install ${pkgs.join(" ")} failed (missing: ${still.map((m) => m.bin).join(", ")}):\n${r.err.slice(-2000)}`);
}

async function ensurePeersInstalled(): Promise<void> {
  const need = ["http-mitm-proxy", "mockttp"].filter((p) => !existsSync(join(PEERS_DIR, "node_modules", p, "package.json")));
  if (!need.length) return;
  if (!Bun.which("npm") || !Bun.which("node")) throw new Error("node and npm are needed for the peers http-mitm-proxy and mockttp (or pass --skip-peers)");
  log(`installing ${need.join(", ")} into bench/peers (npm install --prefix bench/peers)`);
  const r = await run(["npm", "install", "--prefix", PEERS_DIR, "--no-audit", "--no-fund"], 900_000);
  const still = ["http-mitm-proxy", "mockttp"].filter((p) => !existsSync(join(PEERS_DIR, "node_modules", p, "package.json")));
  if (r.code !== 0 || still.length) throw new Error(`npm install --prefix bench/peers failed:\n${(r.err || r.out).slice(-2000)}`);
}

function pkgVersion(name: string): string {
  try {
    return JSON.parse(readFileSync(join(PEERS_DIR, "node_modules", name, "package.json"), "utf8")).version;
  } catch {
    return "?";
  }
}

// ------------------------------------------------------------------------------------------------ /proc sampling

const CLK_TCK = 100;

interface CpuSnap {
  t: number;
  machineBusy: number; // jiffies, all cores
  groups: Map<number, number>; // pgid -> utime+stime jiffies
}

function readMachineBusy(): number {
  const f = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal
  const idle = (f[3] ?? 0) + (f[4] ?? 0);
  const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
  return total - idle;
}

function procStat(pid: string): { pgid: number; ticks: number } | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8");
    const rest = s.slice(s.lastIndexOf(")") + 2).split(" ");
    return { pgid: Number(rest[2]), ticks: Number(rest[11]) + Number(rest[12]) };
  } catch {
    return null;
  }
}

function cpuSnap(pgids: number[]): CpuSnap {
  const groups = new Map<number, number>(pgids.map((g) => [g, 0]));
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    const st = procStat(pid);
    if (st && groups.has(st.pgid)) groups.set(st.pgid, groups.get(st.pgid)! + st.ticks);
  }
  return { t: performance.now(), machineBusy: readMachineBusy(), groups };
}

/** Resident memory of a process group: the sum of VmRSS, and the leader's peak (VmHWM), in MiB. */
function groupRss(pgid: number): { rssMiB: number; leaderPeakMiB: number } {
  let rss = 0;
  let peak = 0;
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    const st = procStat(pid);
    if (!st || st.pgid !== pgid) continue;
    try {
      const s = readFileSync(`/proc/${pid}/status`, "utf8");
      rss += Number(/VmRSS:\s+(\d+)/.exec(s)?.[1] ?? 0);
      if (Number(pid) === pgid) peak = Number(/VmHWM:\s+(\d+)/.exec(s)?.[1] ?? 0);
    } catch {}
  }
  return { rssMiB: rss / 1024, leaderPeakMiB: peak / 1024 };
}

// ------------------------------------------------------------------------------------------------ load tools

interface LoadResult {
  rps: number;
  p50ms: number;
  p99ms: number;
  ok: number;
  bad: number; // non-200 responses + transport errors
  size: number | null;
  problems: string[];
  toolCpuSec: number;
}

function parseHey(out: string): Omit<LoadResult, "toolCpuSec"> {
  const num = (re: RegExp) => {
    const m = re.exec(out);
    return m ? Number(m[1]) : NaN;
  };
  const pct = (p: number) => num(new RegExp(`\\b${p}%+ in ([\\d.]+) secs`)) * 1000;
  let ok = 0;
  let bad = 0;
  const problems: string[] = [];
  for (const m of out.matchAll(/\[(\d{3})\]\s+(\d+) responses/g)) {
    if (m[1] === "200") ok += Number(m[2]);
    else {
      bad += Number(m[2]);
      problems.push(`${m[2]}x HTTP ${m[1]}`);
    }
  }
  const errSection = out.split("Error distribution:")[1];
  if (errSection) {
    for (const m of errSection.matchAll(/^\s*\[(\d+)\]\s+(.*)$/gm)) {
      bad += Number(m[1]);
      problems.push(`${m[1]}x ${m[2]!.slice(0, 160)}`);
    }
  }
  const sz = num(/Size\/request:\s+(\d+) bytes/);
  return { rps: num(/Requests\/sec:\s+([\d.]+)/), p50ms: pct(50), p99ms: pct(99), ok, bad, size: Number.isFinite(sz) ? sz : null, problems };
}

async function hey(url: string, proxy: string | null, seconds: number, extra: string[] = [], conns = CONNS): Promise<LoadResult> {
  const cmd = ["hey", "-z", `${seconds}s`, "-c", String(conns), ...extra, ...(proxy ? ["-x", proxy] : []), url];
  const r = await run(cmd, (seconds + 60) * 1000);
  if (r.timedOut) return { rps: NaN, p50ms: NaN, p99ms: NaN, ok: 0, bad: 0, size: null, problems: [`hey timed out after ${seconds + 60} s`], toolCpuSec: r.cpuSec };
  if (r.code !== 0) return { rps: NaN, p50ms: NaN, p99ms: NaN, ok: 0, bad: 0, size: null, problems: [`hey exited ${r.code}: ${(r.err || r.out).slice(0, 300)}`], toolCpuSec: r.cpuSec };
  return { ...parseHey(r.out), toolCpuSec: r.cpuSec };
}

function wrkMs(v: string, unit: string): number {
  const n = Number(v);
  return unit === "us" ? n / 1000 : unit === "s" ? n * 1000 : unit === "m" ? n * 60000 : n;
}

async function wrk(url: string, proxy: string | null, seconds: number, _extra: string[] = []): Promise<LoadResult> {
  const cmd = ["wrk", "-t1", `-c${CONNS}`, `-d${seconds}s`, "--latency", "--timeout", "10s"];
  let env: Record<string, string> | undefined;
  if (proxy) {
    // wrk has no proxy option: connect to the proxy and send absolute-form request lines (bench/abs.lua)
    cmd.push("-s", join(import.meta.dir, "abs.lua"), proxy);
    env = { TARGET: url };
  } else cmd.push(url);
  const r = await run(cmd, (seconds + 60) * 1000, { env });
  const fail = (why: string): LoadResult => ({ rps: NaN, p50ms: NaN, p99ms: NaN, ok: 0, bad: 0, size: null, problems: [why], toolCpuSec: r.cpuSec });
  if (r.timedOut) return fail("wrk timed out");
  if (r.code !== 0) return fail(`wrk exited ${r.code}: ${(r.err || r.out).slice(0, 300)}`);
  const out = r.out;
  const lat = (p: number) => {
    const m = new RegExp(`^\\s*${p}%\\s+([\\d.]+)(us|ms|s|m)\\s*$`, "m").exec(out);
    return m ? wrkMs(m[1]!, m[2]!) : NaN;
  };
  const total = Number(/(\d+) requests in/.exec(out)?.[1] ?? NaN);
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const sockErr = sock ? sock.slice(1).reduce((a, b) => a + Number(b), 0) : 0;
  const problems: string[] = [];
  if (non2xx) problems.push(`${non2xx}x non-2xx`);
  if (sockErr) problems.push(`socket errors: ${sock![0]}`);
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? NaN),
    p50ms: lat(50),
    p99ms: lat(99),
    ok: total - non2xx,
    bad: non2xx + sockErr,
    size: null,
    problems,
    toolCpuSec: r.cpuSec,
  };
}

// ------------------------------------------------------------------------------------------------ rows

interface Row {
  id: string;
  label: string;
  tool: "hey" | "wrk";
  res: LoadResult | null;
  error?: string;
  cpu?: { proxy: number | null; upstream: number; tool: number; foreign: number; machine: number; usPerReq: number };
}

const rows: Row[] = [];
/** A row whose 'other' CPU (processes outside the bench) exceeds this share of one core is flagged as noisy. */
const NOISY_PCT = 30;
const checks: string[] = [];
let upstreamPgid = 0;

async function measure(
  id: string,
  label: string,
  url: string,
  /** The process under test; `url: null` when clients reach it without -x (the bare relay), CPU still counted. */
  proxy: { url: string | null; pgid: number } | null,
  tool: "hey" | "wrk" = "hey",
  extra: string[] = [],
): Promise<Row> {
  const row: Row = { id, label, tool, res: null };
  rows.push(row);
  const load = tool === "hey" ? hey : wrk;
  log(`${id} ${label} [${tool}]: warm-up ${WARMUP}s, then ${DURATION}s at ${CONNS} connections`);
  try {
    if (WARMUP > 0) {
      const w = await load(url, proxy?.url ?? null, WARMUP, extra);
      if (w.ok === 0) throw new Error(`warm-up got no 200 response: ${w.problems.slice(0, 3).join("; ") || "no output"}`);
    }
    const pgids = [upstreamPgid, ...(proxy ? [proxy.pgid] : [])];
    // --repeat N: N measured runs, the one with the most req/s is kept (the least disturbed by other load)
    for (let i = 0; i < REPEAT; i++) {
      const a = cpuSnap(pgids);
      const res = await load(url, proxy?.url ?? null, DURATION, extra);
      const b = cpuSnap(pgids);
      const secs = (b.t - a.t) / 1000;
      const pct = (ticks: number) => (ticks / CLK_TCK / secs) * 100;
      const up = pct(b.groups.get(upstreamPgid)! - a.groups.get(upstreamPgid)!);
      const px = proxy ? pct(b.groups.get(proxy.pgid)! - a.groups.get(proxy.pgid)!) : null;
      const machine = pct(b.machineBusy - a.machineBusy);
      const toolPct = (res.toolCpuSec / secs) * 100;
      const servedBy = (px ?? up) / 100; // cores used by the proxy (or, direct, the upstream)
      const usPerReq = res.ok > 0 ? ((servedBy * secs) / res.ok) * 1e6 : NaN;
      const cpu = { proxy: px, upstream: up, tool: toolPct, machine, foreign: Math.max(0, machine - up - (px ?? 0) - toolPct), usPerReq };
      if (REPEAT > 1) log(`${id} run ${i + 1}/${REPEAT}: ${res.rps.toFixed(0)} req/s, p99 ${res.p99ms.toFixed(2)} ms, other ${cpu.foreign.toFixed(0)}%`);
      if (!row.res || !(row.res.rps >= res.rps)) {
        row.res = res;
        row.cpu = cpu;
      }
    }
    const res = row.res!;
    if (row.cpu!.foreign > NOISY_PCT) res.problems.push(`noisy: other processes used ${row.cpu!.foreign.toFixed(0)}% of a core meanwhile`);
    if (res.ok === 0) row.error = res.problems.slice(0, 3).join("; ") || "no successful response";
    else if (res.size !== null && res.size !== 1024) res.problems.push(`body size ${res.size} B, expected 1024`);
  } catch (e) {
    row.error = (e as Error).message;
  }
  if (row.error) log(`${id}: FAILED: ${row.error}`);
  else log(`${id}: ${row.res!.rps.toFixed(0)} req/s, p50 ${row.res!.p50ms.toFixed(2)} ms, p99 ${row.res!.p99ms.toFixed(2)} ms`);
  return row;
}

// ------------------------------------------------------------------------------------------------ targets

interface ProxyTarget {
  name: string;
  child: Child;
  port: number;
}

async function startUpstream(certFile: string, keyFile: string): Promise<{ child: Child; http: number; https: number; https443: boolean }> {
  const child = startChild("upstream", [BUN, join(import.meta.dir, "bench-upstream.ts"), certFile, keyFile]);
  const line = await withTimeout(child.out.wait((l) => l.startsWith("{")), 30_000, "upstream start").catch((e) => {
    throw new Error(`${e.message}\n${child.err.text()}`);
  });
  const ports = JSON.parse(line) as { http: number; https: number; https443: boolean };
  return { child, ...ports };
}

/** Longest wait for the captured entries to become queryable after the capturing rows (see capture catch-up). */
const CATCH_UP_TIMEOUT_MS = 120_000;
/** What the first search after the capturing rows looks for: in no entry of the bench (its bodies are x...x). */
const FIRST_SEARCH = "zanzibarquux";

async function startTapwire(
  upstreamCaFile: string,
  dataName = "tapwire-data",
): Promise<{ target: ProxyTarget; dataDir: string; api: (path: string, init?: RequestInit, timeoutMs?: number) => Promise<Response> }> {
  const dataDir = join(TMP, dataName);
  const prof = opt["tapwire-cpu-prof"] ? ["--cpu-prof", "--cpu-prof-md", `--cpu-prof-dir=${resolve(opt["tapwire-cpu-prof"])}`] : [];
  const args = [BUN, ...prof, join(ROOT, "src/cli/main.ts"), "start", "--data-dir", dataDir, "--port", "0", "--upstream-ca", upstreamCaFile];
  if (opt["max-entries"]) args.push("--max-entries", opt["max-entries"]);
  const child = startChild("tapwire", args);
  await withTimeout(
    Promise.race([
      child.err.wait((l) => l.includes("API http://")),
      child.proc.exited.then((c) => {
        throw new Error(`tapwire exited ${c}`);
      }),
    ]),
    30_000,
    "tapwire start",
  ).catch((e) => {
    throw new Error(`${e.message}\n${child.err.text()}`);
  });
  const hs = JSON.parse(readFileSync(join(dataDir, "api-handshake.json"), "utf8")) as { port: number; token: string; proxy_port: number | null };
  if (!hs.proxy_port) throw new Error(`tapwire handshake has no proxy_port: ${JSON.stringify(hs)}`);
  const api = (path: string, init: RequestInit = {}, timeoutMs = 10_000) =>
    withTimeout(fetch(`http://127.0.0.1:${hs.port}${path}`, { ...init, headers: { authorization: `Bearer ${hs.token}`, ...(init.headers ?? {}) } }), timeoutMs, `API ${path}`);
  return { target: { name: "tapwire", child, port: hs.proxy_port }, dataDir, api };
}

async function startPeer(name: "http-mitm-proxy" | "mockttp" | "mitmdump", upstreamCaFile: string): Promise<ProxyTarget> {
  const port = freePort();
  const dir = join(TMP, `peer-${name}`);
  let child: Child;
  if (name === "http-mitm-proxy") {
    child = startChild(name, ["node", join(PEERS_DIR, "hmp-proxy.mjs")], { cwd: PEERS_DIR, env: { PORT: String(port), CA_DIR: dir, UPSTREAM_CA: upstreamCaFile } });
  } else if (name === "mockttp") {
    child = startChild(name, ["node", join(PEERS_DIR, "mockttp-proxy.mjs")], { cwd: PEERS_DIR, env: { PORT: String(port), CONF: dir, UPSTREAM_CA: upstreamCaFile } });
  } else {
    child = startChild(name, ["mitmdump", "--listen-host", "127.0.0.1", "-p", String(port), "--set", `confdir=${dir}`, "--set", `ssl_verify_upstream_trusted_ca=${upstreamCaFile}`, "-q"]);
  }
  await waitForPort(child, port, 90_000);
  return { name, child, port };
}

// ------------------------------------------------------------------------------------------------ report

const f0 = (n: number | null | undefined) => (n === null || n === undefined || !Number.isFinite(n) ? "-" : n.toFixed(0));
const f2 = (n: number | null | undefined) => (n === null || n === undefined || !Number.isFinite(n) ? "-" : n.toFixed(2));
const pad = (s: string, n: number) => (s.length >= n ? s : s + " ".repeat(n - s.length));
const lpad = (s: string, n: number) => (s.length >= n ? s : " ".repeat(n - s.length) + s);

function printTable(): void {
  const head = ["row", "target", "tool", "req/s", "p50 ms", "p99 ms", "ok", "bad", "cpu us/req", "cpu% proxy", "cpu% upstr", "cpu% load", "cpu% other"];
  const widths = [7, 42, 4, 8, 7, 7, 8, 5, 10, 10, 10, 9, 10];
  const line = (cells: string[]) => cells.map((c, i) => (i < 3 ? pad(c, widths[i]!) : lpad(c, widths[i]!))).join("  ");
  console.log(line(head));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const r of rows) {
    const x = r.res;
    if (r.error) {
      console.log(line([r.id, r.label, r.tool, "FAILED", "", "", "", "", "", "", "", "", ""]) + `  ${r.error.split("\n")[0]!.slice(0, 200)}`);
      continue;
    }
    console.log(
      line([r.id, r.label, r.tool, f0(x!.rps), f2(x!.p50ms), f2(x!.p99ms), String(x!.ok), String(x!.bad), f0(r.cpu?.usPerReq), f0(r.cpu?.proxy), f0(r.cpu?.upstream), f0(r.cpu?.tool), f0(r.cpu?.foreign)]) +
        (x!.problems.length ? `  ! ${x!.problems.slice(0, 2).join("; ")}` : ""),
    );
  }
}

/**
 * What limited a row, from its cpu% columns: a single-threaded process (the upstream's event loop, a proxy's main
 * thread) near a full core, else the machine's cores all in use (the load generator, proxy, upstream and other
 * processes share them: every process's CPU per request counts then), else none of them (latency-bound).
 */
function boundBy(c: NonNullable<Row["cpu"]>): string {
  const cap = Math.max(1, NCPU) * 100;
  const split = `load ${c.tool.toFixed(0)}%, proxy ${c.proxy === null ? "-" : `${c.proxy.toFixed(0)}%`}, upstream ${c.upstream.toFixed(0)}%, other ${c.foreign.toFixed(0)}%`;
  if (c.proxy !== null && c.proxy >= 90) return `the proxy: ${c.proxy.toFixed(0)}% of a core (its event loop is saturated; ${split})`;
  if (c.upstream >= 90) return `the upstream: ${c.upstream.toFixed(0)}% of a core (its event loop is saturated; ${split})`;
  if (c.machine >= 0.9 * cap) return `the ${NCPU} cores: ${c.machine.toFixed(0)}% of ${cap}% in use (${split})`;
  return `no process and not the cores (${c.machine.toFixed(0)}% of ${cap}% in use: latency-bound; ${split})`;
}

function printBounds(): void {
  console.log("\nWhat limited each row (cpu% of one core over the measured seconds; see the CPU note at the end):");
  for (const r of rows) if (!r.error && r.cpu) console.log(`  ${pad(r.id, 8)} ${boundBy(r.cpu)}`);
}

/** tapwire CPU seconds of a row's measured run (cpu us/req x ok requests), or null. */
function rowCpuSec(r: Row | undefined): number | null {
  if (!r || r.error || !r.res || !r.cpu || !Number.isFinite(r.cpu.usPerReq)) return null;
  return (r.cpu.usPerReq * r.res.ok) / 1e6;
}

/** After tapwire's capturing rows: how long until every entry was queryable, and tapwire's CPU meanwhile. */
let catchUp: { secs: number; cpuSec: number; entries: number; searchSecs: number; dropped: number } | null = null;

function get(id: string): LoadResult | null {
  const r = rows.find((r) => r.id === id && r.tool === "hey");
  return r && !r.error ? r.res : null;
}

type PeerName = "http-mitm-proxy" | "mockttp" | "mitmdump";
const PEER_NAMES: Record<string, PeerName> = { hmp: "http-mitm-proxy", mtp: "mockttp", mitm: "mitmdump" };

/** The peer with the most req/s in its (b) or (c) row. */
function fastestPeer(suffix: "b" | "c"): { name: PeerName; rps: number } | null {
  let best: { name: PeerName; rps: number } | null = null;
  for (const [id, name] of Object.entries(PEER_NAMES)) {
    const r = get(`${id}-${suffix}`);
    if (r && Number.isFinite(r.rps) && (!best || r.rps > best.rps)) best = { name, rps: r.rps };
  }
  return best;
}

function median(xs: number[]): number {
  const v = [...xs].sort((x, y) => x - y);
  const m = v.length >> 1;
  return v.length % 2 ? v[m]! : (v[m - 1]! + v[m]!) / 2;
}

function printGoals(): void {
  const a = get("a");
  const b = get("b");
  const c = get("c");
  const mark = (ok: boolean | null) => (ok === null ? "n/a " : ok ? "PASS" : "FAIL");
  const ratioLine = (what: string, v: number | null, goal: string, ok: boolean | null) => console.log(`  ${mark(ok)}  ${pad(what, 58)} ${lpad(v === null ? "-" : v.toFixed(2), 8)}   (goal ${goal})`);
  const pr = pairing && pairing.rounds.length > 0 ? pairing : null;
  if (pr) {
    const n = pr.rounds.length;
    console.log(`\nGoals, HTTP: median of ${n} paired round${n > 1 ? "s" : ""} (see above)${pr.error ? " (the rounds were cut short)" : ""}:`);
    const ba = median(pr.rounds.map((r) => r.tapwire.rps / r.direct.rps));
    ratioLine("(b)/(a)  tapwire HTTP req/s / direct req/s", ba, ">= 0.60", ba >= 0.6);
    const bp = median(pr.rounds.map((r) => r.tapwire.rps / r.peer.rps));
    ratioLine(`(b)/fastest peer HTTP (${pr.peer})`, bp, ">= 4x", bp >= 4);
    const added = median(pr.rounds.map((r) => r.tapwire.p99ms - r.direct.p99ms));
    ratioLine(`added p99 latency (b) - (a), ms, at ${CONNS} connections`, added, "< 2 ms", added < 2);
  }
  console.log(`\nGoals (hey rows${pr ? ", one run each" : ""}):`);
  const ba = a && b ? b.rps / a.rps : null;
  ratioLine("(b)/(a)  tapwire HTTP req/s / direct req/s", ba, ">= 0.60", ba === null ? null : ba >= 0.6);
  const ph = fastestPeer("b");
  const bp = b && ph ? b.rps / ph.rps : null;
  ratioLine(`(b)/fastest peer HTTP (${ph?.name ?? "no peer"})`, bp, ">= 4x", bp === null ? null : bp >= 4);
  const ps = fastestPeer("c");
  const cp = c && ps ? c.rps / ps.rps : null;
  ratioLine(`(c)/fastest peer HTTPS (${ps?.name ?? "no peer"})`, cp, ">= 2x", cp === null ? null : cp >= 2);
  const added = a && b ? b.p99ms - a.p99ms : null;
  ratioLine(`added p99 latency (b) - (a), ms, at ${CONNS} connections`, added, `< 2 ms${CONNS === 32 ? "" : "; the goal is stated for 32 connections"}`, added === null ? null : added < 2);
  const a2 = get("a2");
  if (a2 && c) console.log(`  info  ${pad("(c)/(a2)  tapwire HTTPS req/s / direct HTTPS req/s", 58)} ${lpad((c.rps / a2.rps).toFixed(2), 8)}`);
  const ar = get("a-relay");
  if (a && ar) console.log(`  info  ${pad("(a-relay)/(a)  bare Bun TCP relay / direct req/s", 58)} ${lpad((ar.rps / a.rps).toFixed(2), 8)}   (what any Bun process in the path allows here)`);
  if (b && ar) console.log(`  info  ${pad("(b)/(a-relay)  tapwire (capturing) / bare Bun relay req/s", 58)} ${lpad((b.rps / ar.rps).toFixed(2), 8)}`);
  const bn = get("b-nocap");
  const cn = get("c-nocap");
  if (b && bn) console.log(`  info  ${pad("(b) with capture / (b) capture stopped", 58)} ${lpad((b.rps / bn.rps).toFixed(2), 8)}`);
  if (a && bn) console.log(`  info  ${pad("(b, capture stopped)/(a)", 58)} ${lpad((bn.rps / a.rps).toFixed(2), 8)}`);
  if (bn && ph) console.log(`  info  ${pad(`(b, capture stopped)/fastest peer HTTP (${ph.name})`, 58)} ${lpad((bn.rps / ph.rps).toFixed(2), 8)}`);
  if (a && bn) console.log(`  info  ${pad("added p99 (b, capture stopped) - (a), ms", 58)} ${lpad((bn.p99ms - a.p99ms).toFixed(2), 8)}`);
  if (c && cn) console.log(`  info  ${pad("(c) with capture / (c) capture stopped", 58)} ${lpad((c.rps / cn.rps).toFixed(2), 8)}`);
  // tapwire's CPU in the measured runs of its capturing rows plus the catch-up after them, per ok request of those
  // rows (warm-ups and the time between rows are not counted; with --wrk, wrk's capturing row is included)
  const capturing = rows.filter((r) => (r.id === "b" || r.id === "c") && !r.error);
  const rowSecs = capturing.map(rowCpuSec);
  const okReqs = capturing.reduce((n, r) => n + (r.res?.ok ?? 0), 0);
  if (catchUp && capturing.length >= 2 && rowSecs.every((x) => x !== null) && okReqs > 0) {
    const us = ((rowSecs.reduce((a, x) => a + x!, 0) + catchUp.cpuSec) / okReqs) * 1e6;
    const what = `(b) capturing, CPU us/req including the catch-up${WITH_WRK ? " (rows b, c, wrk b)" : ""}`;
    console.log(`  info  ${pad(what, 58)} ${lpad(us.toFixed(1), 8)}   ((b)+(c) tapwire CPU + catch-up CPU, / ok requests of (b)+(c))`);
  }
}

// ------------------------------------------------------------------------------------------------ paired rounds

interface PairRound {
  order: string[];
  direct: LoadResult;
  tapwire: LoadResult;
  peer: LoadResult;
  /** After tapwire's run: seconds until it was idle again, and its CPU seconds meanwhile. */
  idleSecs: number;
  idleCpuSec: number;
}

let pairing: { peer: PeerName; rounds: PairRound[]; error?: string } | null = null;

/** Waits (at most 60 s) until a process group uses under 3% of a core over half a second. */
async function waitIdle(pgid: number): Promise<{ secs: number; cpuSec: number }> {
  const t0 = cpuSnap([pgid]);
  let prev = t0;
  for (const until = performance.now() + 60_000; performance.now() < until; ) {
    await Bun.sleep(500);
    const now = cpuSnap([pgid]);
    const pct = ((now.groups.get(pgid)! - prev.groups.get(pgid)!) / CLK_TCK / ((now.t - prev.t) / 1000)) * 100;
    prev = now;
    if (pct < 3) break;
  }
  return { secs: (prev.t - t0.t) / 1000, cpuSec: (prev.groups.get(pgid)! - t0.groups.get(pgid)!) / CLK_TCK };
}

/** Direct, tapwire (capturing) and the fastest HTTP peer, back to back, PAIRS times, in a rotating order. */
async function pairedRounds(httpUrl: string, caFile: string): Promise<void> {
  const peer = fastestPeer("b");
  if (!peer) {
    checks.push("paired rounds: left out, no peer's HTTP row succeeded");
    return;
  }
  log(`paired rounds: ${PAIRS} x (direct, tapwire, ${peer.name}), ${DURATION}s each`);
  const rounds: PairRound[] = [];
  pairing = { peer: peer.name, rounds };
  const tw = await startTapwire(caFile, "tapwire-pairs");
  let p: ProxyTarget | null = null;
  try {
    p = await startPeer(peer.name, caFile);
    const urls = { direct: null, tapwire: `http://127.0.0.1:${tw.target.port}`, peer: `http://127.0.0.1:${p.port}` };
    const twPgid = tw.target.child.proc.pid;
    // a full-length warm-up for each proxy: a peer whose JIT is still warming in the first round would flatter tapwire
    for (const u of [urls.tapwire, urls.peer]) await hey(httpUrl, u, Math.max(WARMUP, DURATION));
    await waitIdle(twPgid);
    const kinds = ["direct", "tapwire", "peer"] as const;
    for (let r = 0; r < PAIRS; r++) {
      const order = kinds.map((_, i) => kinds[(i + r) % kinds.length]!);
      const got: Partial<Record<(typeof kinds)[number], LoadResult>> = {};
      let idle = { secs: 0, cpuSec: 0 };
      for (const k of order) {
        const res = await hey(httpUrl, urls[k], DURATION);
        if (res.ok === 0) throw new Error(`round ${r + 1}, ${k}: no successful response (${res.problems.slice(0, 2).join("; ") || "no output"})`);
        got[k] = res;
        if (k === "tapwire") idle = await waitIdle(twPgid);
      }
      const round: PairRound = { order: [...order], direct: got.direct!, tapwire: got.tapwire!, peer: got.peer!, idleSecs: idle.secs, idleCpuSec: idle.cpuSec };
      rounds.push(round);
      log(`round ${r + 1}: direct ${f0(round.direct.rps)}, tapwire ${f0(round.tapwire.rps)}, ${peer.name} ${f0(round.peer.rps)} req/s; tapwire idle ${round.idleSecs.toFixed(1)} s later`);
    }
  } catch (e) {
    pairing.error = (e as Error).message;
    checks.push(`paired rounds: FAILED after ${rounds.length}: ${pairing.error.split("\n")[0]}`);
  } finally {
    await stopChild(tw.target.child, 3000);
    if (p) await stopChild(p.child);
  }
}

function printPairs(): void {
  if (!pairing || pairing.rounds.length === 0) return;
  console.log(
    `\nPaired rounds: direct, tapwire (capturing) and ${pairing.peer}, ${DURATION}s each, back to back in the order shown, both proxies running; ` +
      "after tapwire's run, the next waited until tapwire was idle (its CPU meanwhile: writing the journal into SQLite, indexing)",
  );
  const head = ["round", "order", "direct", "tapwire", "peer", "(b)/(a)", "(b)/peer", "+p99 ms", "idle after", "its cpu s"];
  const widths = [5, 22, 8, 8, 8, 8, 8, 8, 10, 9];
  const line = (cells: string[]) => cells.map((c, i) => (i < 2 ? pad(c, widths[i]!) : lpad(c, widths[i]!))).join("  ");
  console.log(line(head));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  pairing.rounds.forEach((r, i) =>
    console.log(
      line([
        String(i + 1),
        r.order.join(" "),
        f0(r.direct.rps),
        f0(r.tapwire.rps),
        f0(r.peer.rps),
        f2(r.tapwire.rps / r.direct.rps),
        f2(r.tapwire.rps / r.peer.rps),
        f2(r.tapwire.p99ms - r.direct.p99ms),
        `${r.idleSecs.toFixed(1)} s`,
        r.idleCpuSec.toFixed(2),
      ]),
    ),
  );
}

// ------------------------------------------------------------------------------------------------ main

const memNotes: string[] = [];

/**
 * Upstream connection reuse in row (b), from what tapwire captured: the newest POOL_SAMPLE entries to 127.0.0.1 (the
 * HTTPS row goes to localhost) read in detail. With keep-alive clients a pooled connection carries nearly every
 * request, and about one upstream connection per client connection is open.
 */
async function poolReuse(tw: { api: (path: string, init?: RequestInit, timeoutMs?: number) => Promise<Response> }): Promise<string> {
  const list = (await (await tw.api(`/api/v1/traffic?host=127.0.0.1&limit=${POOL_SAMPLE}`)).json()) as { items: { id: number }[] };
  if (!Array.isArray(list.items) || list.items.length === 0) throw new Error("no captured entry to 127.0.0.1");
  let reused = 0;
  let timed = 0;
  const conns = new Set<string>();
  for (const { id } of list.items) {
    const e = (await (await tw.api(`/api/v1/traffic/${id}`)).json()) as { timings?: { connect: number }; connection_id?: number | string };
    if (e.connection_id !== undefined) conns.add(String(e.connection_id));
    if (!e.timings) continue;
    timed++;
    if (e.timings.connect === -1) reused++;
  }
  if (timed === 0) throw new Error("the sampled entries carry no timings");
  return (
    `upstream pool reuse in (b): ${((100 * reused) / timed).toFixed(1)}% of ${timed} sampled requests went on a pooled connection ` +
    `(${conns.size} distinct upstream connections among them, ${CONNS} client connections)`
  );
}

async function main(): Promise<number> {
  // 1. tools
  const apt = [{ bin: "hey", pkg: "hey" }];
  if (WITH_WRK) apt.push({ bin: "wrk", pkg: "wrk" });
  if (!SKIP_PEERS) apt.push({ bin: "mitmdump", pkg: "mitmproxy" });
  await ensureApt(apt);
  if (!SKIP_PEERS) await ensurePeersInstalled();
  if (WITH_WRK && !existsSync(join(import.meta.dir, "abs.lua"))) throw new Error("bench/abs.lua is missing");

  // Global watchdog from here on: nothing below may take longer than this.
  const perRow = WARMUP + REPEAT * (DURATION + 10) + 60;
  const nRows = 4 + (EXTRA ? 2 : 0) + (SKIP_PEERS ? 0 : 6) + (WITH_WRK ? (SKIP_PEERS ? 2 : 5) : 0);
  // paired rounds: three runs and at most 60 s of waiting for tapwire to go idle per round, and two starts
  const pairsSec = SKIP_PEERS ? 0 : PAIRS * (3 * (DURATION + 10) + 60) + 2 * Math.max(WARMUP, DURATION) + 180;
  const budgetSec = nRows * perRow + (SKIP_PEERS ? 60 : 360) + WAIT_QUIET + CATCH_UP_TIMEOUT_MS / 1000 + pairsSec;
  const watchdog = setTimeout(() => {
    console.error(`proxy-bench: watchdog: the run took longer than ${budgetSec} s; stopping everything`);
    killAllNow();
    cleanupTmp();
    process.exit(3);
  }, budgetSec * 1000);
  watchdog.unref?.();

  // 2. upstream CA + certificate, upstream process
  const ca = generateCA();
  const leaf = new LeafCertCache(ca).get("localhost");
  const caFile = join(TMP, "upstream-ca.pem");
  const certFile = join(TMP, "upstream-cert.pem");
  const keyFile = join(TMP, "upstream-key.pem");
  writeFileSync(caFile, ca.certPem);
  writeFileSync(certFile, leaf.cert);
  writeFileSync(keyFile, leaf.key);
  const up = await startUpstream(certFile, keyFile);
  upstreamPgid = up.child.proc.pid;
  const httpUrl = `http://127.0.0.1:${up.http}/1k.txt`;
  // hey sends the URL's "host:port" as TLS SNI; an upstream on 443 gives a URL without port, so a plain host name.
  const sniPortUrl = `https://localhost:${up.https}/1k.txt`;
  const httpsUrl = up.https443 ? "https://localhost/1k.txt" : sniPortUrl;
  /** hey flags for tapwire's HTTPS rows: only needed when the upstream could not get port 443 (see checks). */
  const twHttpsArgs = up.https443 ? [] : ["-host", "localhost"];
  log(`upstream (bun, own process) on ${httpUrl} and ${httpsUrl}`);
  if (!up.https443) checks.push(`port 443 unavailable: the HTTPS rows use ${httpsUrl}; tapwire's get 'hey -host localhost' (Host and SNI without port)`);
  const busyNow = async () => {
    const s0 = cpuSnap([]);
    await Bun.sleep(1000);
    const s1 = cpuSnap([]);
    return ((s1.machineBusy - s0.machineBusy) / CLK_TCK / ((s1.t - s0.t) / 1000)) * 100;
  };
  let idleBusy = await busyNow();
  for (const until = Date.now() + WAIT_QUIET * 1000; idleBusy > NOISY_PCT && Date.now() < until; ) {
    log(`waiting for the machine to go quiet (other processes use ${idleBusy.toFixed(0)}% of a core)`);
    await Bun.sleep(2000);
    idleBusy = await busyNow();
  }
  checks.push(`before the run, the machine was ${idleBusy.toFixed(0)}% busy (of ${NCPU * 100}%) with processes that are not the bench's${idleBusy > NOISY_PCT ? ": NOISY, results are pessimistic" : ""}`);

  /** A few requests through a proxy with hey's "host:port" SNI (tapwire passes the SNI upstream as it is). */
  const sniProbe = async (name: string, proxyUrl: string) => {
    const r = await run(["hey", "-n", "4", "-c", "1", "-x", proxyUrl, sniPortUrl], 60_000);
    const p = parseHey(r.out);
    checks.push(`SNI "localhost:${up.https}" (hey's, port included) via ${name}: ${p.ok} of 4 OK${p.problems.length ? ` (${p.problems.join("; ")})` : ""}`);
  };

  // 3. direct
  await measure("a", "direct, HTTP keep-alive", httpUrl, null);
  await measure("a2", "direct, HTTPS keep-alive (reference)", httpsUrl, null);
  if (WITH_WRK) await measure("a", "direct, HTTP keep-alive", httpUrl, null, "wrk");

  // 3b. the floor for any Bun process in the path: a bare TCP relay in front of the upstream (no HTTP, no capture)
  {
    const relay = startChild("bun-relay", [BUN, join(import.meta.dir, "peers/bun-relay.ts"), String(up.http)]);
    try {
      const line = await Promise.race([relay.out.wait((l) => l.startsWith("PORT ")), Bun.sleep(15_000).then(() => null)]);
      if (line === null) throw new Error(`bun-relay did not start: ${relay.err.text(5)}`);
      const relayUrl = `http://127.0.0.1:${Number(line.slice(5))}/1k.txt`;
      await measure("a-relay", "bare Bun TCP relay before the upstream (floor)", relayUrl, { url: null, pgid: relay.proc.pid });
    } catch (e) {
      rows.push({ id: "a-relay", label: "bare Bun TCP relay before the upstream (floor)", tool: "hey", res: null, error: (e as Error).message });
    } finally {
      await stopChild(relay);
    }
  }

  // 4. tapwire
  {
    const tw = await startTapwire(caFile);
    const px = { url: `http://127.0.0.1:${tw.target.port}`, pgid: tw.target.child.proc.pid };
    log(`tapwire on ${px.url} (data dir ${tw.dataDir})`);
    try {
      const rssIdle = groupRss(px.pgid);
      await sniProbe("tapwire", px.url);
      if (EXTRA) {
        // capture stopped first: the rows then measure the proxy alone (measured after the capturing rows they
        // would share the machine with the capture writer still indexing its backlog)
        const s = await tw.api("/api/v1/capture/stop", { method: "POST" });
        if (!s.ok) throw new Error(`POST /api/v1/capture/stop answered ${s.status}`);
        await measure("b-nocap", "tapwire, HTTP, capture stopped", httpUrl, px);
        await measure("c-nocap", "tapwire, HTTPS, capture stopped", httpsUrl, px, "hey", twHttpsArgs);
        const on = await tw.api("/api/v1/capture/start", { method: "POST" });
        if (!on.ok) throw new Error(`POST /api/v1/capture/start answered ${on.status}`);
      }
      await measure("b", "tapwire, HTTP absolute-form (capturing)", httpUrl, px);
      await measure("c", "tapwire, HTTPS via CONNECT (capturing)", httpsUrl, px, "hey", twHttpsArgs);
      if (WITH_WRK) await measure("b", "tapwire, HTTP absolute-form (capturing)", httpUrl, px, "wrk");
      // the catch-up window starts when the last capturing row ends (the samples below take a few ms)
      const cu0 = cpuSnap([px.pgid]);
      const rssLoaded = groupRss(px.pgid);
      let entries = "?";
      try {
        const st = (await (await tw.api("/api/v1/capture/status")).json()) as { capturing: boolean; entry_count: number };
        entries = String(st.entry_count);
      } catch (e) {
        entries = `? (${(e as Error).message})`;
      }
      memNotes.push(
        `tapwire RSS: ${rssIdle.rssMiB.toFixed(0)} MiB idle before load; ${rssLoaded.rssMiB.toFixed(0)} MiB after the capturing rows (peak ${rssLoaded.leaderPeakMiB.toFixed(0)} MiB), ` +
          `store holding ${entries} entries (max ${opt["max-entries"] ?? "100000 default"})`,
      );
      // capture catch-up: the list answers once every entry added before the call is stored, so its answer marks
      // the moment all captured traffic is queryable (a store that defers writing under load pays here)
      try {
        const r = await tw.api("/api/v1/traffic?limit=1", {}, CATCH_UP_TIMEOUT_MS);
        const cu1 = cpuSnap([px.pgid]);
        if (!r.ok) throw new Error(`GET /api/v1/traffic answered ${r.status}`);
        await r.arrayBuffer();
        const secs = (cu1.t - cu0.t) / 1000;
        const cpuSec = (cu1.groups.get(px.pgid)! - cu0.groups.get(px.pgid)!) / CLK_TCK;
        // then the first search (a string no entry holds: every candidate the search index gives, and every entry
        // it has not indexed yet, is checked): the issue's "lag: ... then the first search answers"
        const sr = await tw.api(`/api/v1/traffic?search=${FIRST_SEARCH}&limit=1`, {}, CATCH_UP_TIMEOUT_MS);
        const cu2 = cpuSnap([px.pgid]);
        if (!sr.ok) throw new Error(`GET /api/v1/traffic?search= answered ${sr.status}`);
        const found = ((await sr.json()) as { total: number }).total;
        if (found !== 0) throw new Error(`the search for ${FIRST_SEARCH} found ${found} entries; none holds it`);
        const searchSecs = (cu2.t - cu0.t) / 1000;
        const st = (await (await tw.api("/api/v1/capture/status")).json()) as { entry_count: number; dropped: number };
        catchUp = { secs, cpuSec, entries: st.entry_count, searchSecs, dropped: st.dropped };
        checks.push(
          `capture catch-up after the capturing rows: ${st.entry_count} entries queryable after ${secs.toFixed(2)} s (tapwire CPU ${cpuSec.toFixed(2)} s during the wait); ` +
            `the first search answered after ${searchSecs.toFixed(2)} s; entries dropped by the capture queue: ${st.dropped}`,
        );
      } catch (e) {
        checks.push(`capture catch-up after the capturing rows: FAILED: ${(e as Error).message.split("\n")[0]}`);
      }
      // upstream connection reuse under load: the captured entries of (b) name the upstream connection each
      // request used and whether it was opened for it (timings.connect is -1 on a pooled one)
      try {
        checks.push(await poolReuse(tw));
      } catch (e) {
        checks.push(`upstream pool reuse in (b): FAILED: ${(e as Error).message.split("\n")[0]}`);
      }

    } finally {
      await stopChild(tw.target.child, opt["tapwire-cpu-prof"] ? 30_000 : 3000); // the profile is written at exit
      if (opt["tapwire-cpu-prof"]) checks.push(`tapwire CPU profile (all its rows): ${resolve(opt["tapwire-cpu-prof"])}`);
    }
  }

  // 5. peers, one at a time (an idle peer would still take memory and timers from the rows after it)
  if (!SKIP_PEERS) {
    const peers = [
      { id: "hmp", name: "http-mitm-proxy" as const },
      { id: "mtp", name: "mockttp" as const },
      { id: "mitm", name: "mitmdump" as const },
    ];
    for (const p of peers) {
      let t: ProxyTarget;
      try {
        log(`starting ${p.name}`);
        t = await startPeer(p.name, caFile);
      } catch (e) {
        const msg = (e as Error).message;
        rows.push({ id: `${p.id}-b`, label: `${p.name}, HTTP`, tool: "hey", res: null, error: `start failed: ${msg}` });
        rows.push({ id: `${p.id}-c`, label: `${p.name}, HTTPS via CONNECT`, tool: "hey", res: null, error: `start failed: ${msg.split("\n")[0]}` });
        log(`${p.name} failed to start: ${msg}`);
        continue;
      }
      try {
        const px = { url: `http://127.0.0.1:${t.port}`, pgid: t.child.proc.pid };
        await measure(`${p.id}-b`, `${p.name}, HTTP absolute-form`, httpUrl, px);
        await measure(`${p.id}-c`, `${p.name}, HTTPS via CONNECT`, httpsUrl, px);
        await sniProbe(p.name, px.url);
        if (WITH_WRK) await measure(`${p.id}-b`, `${p.name}, HTTP absolute-form`, httpUrl, px, "wrk");
        const rss = groupRss(px.pgid);
        memNotes.push(`${p.name} RSS after its rows: ${rss.rssMiB.toFixed(0)} MiB`);
      } finally {
        await stopChild(t.child);
      }
    }
  }
  // 6. paired rounds (see the header)
  if (!SKIP_PEERS && PAIRS > 0) await pairedRounds(httpUrl, caFile);
  clearTimeout(watchdog);
  return 0;
}

let exitCode = 1;
const started = Date.now();
try {
  exitCode = await main();
} catch (e) {
  console.error(`proxy-bench: ${(e as Error).message}`);
  exitCode = 1;
} finally {
  await stopAll();
  cleanupTmp();
}

if (rows.length) {
  const peerVersions = SKIP_PEERS
    ? "peers skipped"
    : `http-mitm-proxy ${pkgVersion("http-mitm-proxy")}, mockttp ${pkgVersion("mockttp")}, ${(Bun.spawnSync(["mitmdump", "--version"]).stdout.toString().split("\n")[0] ?? "mitmdump ?").trim()}`;
  console.log(
    `\nproxy-bench: hey -z ${DURATION}s -c ${CONNS} (after a ${WARMUP}s warm-up per row${REPEAT > 1 ? `; best of ${REPEAT} runs` : ""}), GET of a 1 KB body, keep-alive; ` +
      `bun ${Bun.version}, node ${Bun.which("node") ? Bun.spawnSync(["node", "--version"]).stdout.toString().trim() : "-"}; ${peerVersions}\n`,
  );
  printTable();
  printBounds();
  printPairs();
  printGoals();
  console.log("\nChecks:");
  for (const c of checks) console.log(`  ${c}`);
  console.log("\nMemory:");
  for (const m of memNotes) console.log(`  ${m}`);
  console.log(
    `\nCPU: this machine has ${NCPU} cores. During every row the load generator (hey, Go, all cores), the upstream (one Bun process) and, for ` +
      `proxied rows, the proxy under test (tapwire: one Bun process; http-mitm-proxy, mockttp: one node process; mitmdump: one Python process) ` +
      `shared them. The cpu% columns are each process group's share of ONE core over the measured seconds; 'other' is what the rest ` +
      `of the machine (other users, kernel) used at the same time, so a large value marks a noisy row (flagged above ${NOISY_PCT}%). ` +
      `'cpu us/req' is the proxy's CPU time (for direct rows the upstream's) per successful request: the figure least disturbed by ` +
      `noise. Compare ratios from one run, not absolute numbers across runs.`,
  );
  console.log(`\n(${((Date.now() - started) / 1000).toFixed(0)} s in all)`);
}
process.exit(exitCode || (rows.some((r) => r.error) ? 1 : 0));
