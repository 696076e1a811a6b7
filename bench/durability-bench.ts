#!/usr/bin/env bun
/**
 * What the kill -9 promise costs (issue 21 finding 7: "under 5% throughput"). Two tapwire processes run side by
 * side from the same sources: "durable" is this tree; "no write-ahead" is a copy of src/ with the one line that
 * queues each finished entry for the write-ahead file patched out (CaptureStore.add no longer calls walAppend, so
 * durable() has nothing to wait for and the last byte of a response leaves at once, as before finding 7). Both
 * capture every flow into their own data directory; only the write-ahead write and its barrier differ.
 *
 * Paired rounds: each round runs `hey -z Ns -c C -x <proxy> <upstream>/1k.txt` against both (order alternating),
 * then waits until each tapwire is idle again (it writes its journal into SQLite once traffic stops) and counts
 * that CPU too. Per side: requests/s, the tapwire process's CPU time per request (all its threads, from /proc)
 * during the run, and including the catch-up. Per round: the ratios durable / no write-ahead. Printed: medians, the
 * mean ratio with a 95% confidence interval over rounds (Student t), and the cost in % of throughput.
 *
 *   node_modules/.bin/bun bench/durability-bench.ts [--rounds 10] [--duration 5] [--connections 32] [--keep-tmp]
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { killAllNow, run, startChild, stopAll, type Child } from "./processes.ts";
import { generateCA } from "../src/core/tls/ca.ts";
import { LeafCertCache } from "../src/core/tls/leaf.ts";

const { values: opt } = parseArgs({
  options: {
    rounds: { type: "string", default: "10" },
    duration: { type: "string", default: "5" },
    connections: { type: "string", default: "32" },
    "keep-tmp": { type: "boolean", default: false },
  },
});
const ROUNDS = Math.max(2, Number(opt.rounds));
const DURATION = Math.max(1, Number(opt.duration));
const CONNS = Math.max(1, Number(opt.connections));
const ROOT = join(import.meta.dir, "..");
const BUN = process.execPath;
const TMP = mkdtempSync(join(tmpdir(), "tapwire-durability-"));
const TICK_US = 1e6 / 100; // /proc CPU times are in clock ticks (USER_HZ, 100 on Linux)

/** The line that makes a finished entry durable before its last byte goes out (src/store/capture-store.ts). */
const WAL_LINE = "if (this.pending.add(id, e) && this.wal !== null) this.walAppend(id);";

process.on("SIGINT", () => {
  killAllNow();
  process.exit(130);
});

function cpuTicks(pid: number): number {
  const s = readFileSync(`/proc/${pid}/stat`, "utf8");
  const rest = s.slice(s.lastIndexOf(")") + 2).split(" ");
  return Number(rest[11]) + Number(rest[12]);
}

/** A copy of this tree's src/ with the write-ahead write patched out. */
function noWalTree(): string {
  const dir = join(TMP, "no-wal");
  cpSync(join(ROOT, "src"), join(dir, "src"), { recursive: true });
  for (const f of ["package.json", "tsconfig.json", "bunfig.toml"]) cpSync(join(ROOT, f), join(dir, f));
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  const file = join(dir, "src/store/capture-store.ts");
  const text = readFileSync(file, "utf8");
  if (!text.includes(WAL_LINE)) throw new Error(`src/store/capture-store.ts no longer holds the line this bench patches:\n  ${WAL_LINE}`);
  writeFileSync(file, text.replace(WAL_LINE, "this.pending.add(id, e);"));
  return dir;
}

interface Side {
  name: string;
  child: Child;
  pid: number;
  proxy: number;
}

async function startTapwire(name: string, root: string): Promise<Side> {
  const dataDir = join(TMP, `data-${name.replace(/\W+/g, "-")}`);
  const child = startChild(name, [BUN, join(root, "src/cli/main.ts"), "start", "--data-dir", dataDir, "--port", "0"], { cwd: root });
  const deadline = Date.now() + 30_000;
  await Promise.race([
    child.err.wait((l) => l.includes("API http://")),
    child.proc.exited.then((c) => {
      throw new Error(`${name} exited ${c}: ${child.err.text()}`);
    }),
    Bun.sleep(30_000).then(() => {
      if (Date.now() >= deadline) throw new Error(`${name} did not start: ${child.err.text()}`);
    }),
  ]);
  const hs = JSON.parse(readFileSync(join(dataDir, "api-handshake.json"), "utf8")) as { proxy_port: number };
  return { name, child, pid: child.proc.pid, proxy: hs.proxy_port };
}

/** Waits until the process uses under 2% of a core over 300 ms (its capture catch-up is done); at most 60 s. */
async function idle(pid: number): Promise<void> {
  const until = Date.now() + 60_000;
  let last = cpuTicks(pid);
  while (Date.now() < until) {
    await Bun.sleep(300);
    const now = cpuTicks(pid);
    if (now - last <= 0) return;
    last = now;
  }
}

interface Run {
  rps: number;
  ok: number;
  cpuUs: number;
  catchUpUs: number;
}

async function load(side: Side, url: string): Promise<Run> {
  const t0 = cpuTicks(side.pid);
  const r = await run(["hey", "-z", `${DURATION}s`, "-c", String(CONNS), "-x", `http://127.0.0.1:${side.proxy}`, url], (DURATION + 60) * 1000, { quiet: true });
  const t1 = cpuTicks(side.pid);
  await idle(side.pid);
  const t2 = cpuTicks(side.pid);
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(r.out)?.[1] ?? NaN);
  const ok = Number(/\[200\]\s+(\d+) responses/.exec(r.out)?.[1] ?? 0);
  const other = [...r.out.matchAll(/\[(\d{3})\]\s+(\d+) responses/g)].filter((m) => m[1] !== "200");
  if (!(ok > 0) || other.length > 0 || /Error distribution/.test(r.out)) throw new Error(`${side.name}: hey reported errors:\n${r.out.slice(-1500)}`);
  return { rps, ok, cpuUs: ((t1 - t0) * TICK_US) / ok, catchUpUs: ((t2 - t0) * TICK_US) / ok };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
/** Two-sided 95% Student t quantiles by degrees of freedom (1..30; above: 2.0). */
const T95 = [12.71, 4.3, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.2, 2.18, 2.16, 2.14, 2.13, 2.12, 2.11, 2.1, 2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06, 2.05, 2.05, 2.05, 2.04];
function meanCi(xs: number[]): { mean: number; half: number } {
  const n = xs.length;
  const mean = xs.reduce((a, b) => a + b, 0) / n;
  const sd = Math.sqrt(xs.reduce((a, b) => a + (b - mean) ** 2, 0) / (n - 1));
  return { mean, half: ((T95[n - 2] ?? 2.0) * sd) / Math.sqrt(n) };
}
const pct = (r: number) => `${((r - 1) * 100).toFixed(1)}%`;

try {
  if (!Bun.which("hey")) throw new Error("hey is missing (apt-get install hey)");
  const ca = generateCA();
  const leaf = new LeafCertCache(ca).get("localhost");
  writeFileSync(join(TMP, "cert.pem"), leaf.cert);
  writeFileSync(join(TMP, "key.pem"), leaf.key);
  const up = startChild("upstream", [BUN, join(import.meta.dir, "bench-upstream.ts"), join(TMP, "cert.pem"), join(TMP, "key.pem")]);
  const ports = JSON.parse(await up.out.wait((l) => l.startsWith("{"))) as { http: number };
  const url = `http://127.0.0.1:${ports.http}/1k.txt`;
  const sides = [await startTapwire("durable", ROOT), await startTapwire("no write-ahead", noWalTree())];
  console.log(`kill -9 durability cost: ${ROUNDS} paired rounds of hey -z ${DURATION}s -c ${CONNS} (1 KiB responses, plain HTTP, capture on); bun ${Bun.version}; ${navigator.hardwareConcurrency} cores`);
  for (const s of sides) await load(s, url); // warm-up (JIT, pool, store)
  const runs: Record<string, Run[]> = { durable: [], "no write-ahead": [] };
  const rpsRatio: number[] = [];
  const cpuRatio: number[] = [];
  const totalRatio: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const order = i % 2 ? [...sides].reverse() : sides;
    const got: Record<string, Run> = {};
    for (const s of order) got[s.name] = await load(s, url);
    const on = got.durable!;
    const off = got["no write-ahead"]!;
    runs.durable!.push(on);
    runs["no write-ahead"]!.push(off);
    rpsRatio.push(on.rps / off.rps);
    cpuRatio.push(on.cpuUs / off.cpuUs);
    totalRatio.push(on.catchUpUs / off.catchUpUs);
    console.log(`round ${i + 1}: req/s ${on.rps.toFixed(0)} vs ${off.rps.toFixed(0)} (${pct(on.rps / off.rps)}), CPU µs/req ${on.cpuUs.toFixed(1)} vs ${off.cpuUs.toFixed(1)} (${pct(on.cpuUs / off.cpuUs)})`);
  }
  console.log("\n| tapwire | req/s median | CPU µs/req median (run) | CPU µs/req median (with catch-up) |");
  console.log("|---|---|---|---|");
  for (const s of sides) {
    const rs = runs[s.name]!;
    console.log(`| ${s.name} | ${median(rs.map((r) => r.rps)).toFixed(0)} | ${median(rs.map((r) => r.cpuUs)).toFixed(1)} | ${median(rs.map((r) => r.catchUpUs)).toFixed(1)} |`);
  }
  const line = (what: string, xs: number[]) => {
    const { mean, half } = meanCi(xs);
    console.log(`${what}: median ${pct(median(xs))}, mean ${pct(mean)} ± ${(half * 100).toFixed(1)} pts (95% CI over ${xs.length} rounds)`);
  };
  console.log("\ndurable / no write-ahead, within-round ratios:");
  line("throughput (req/s)", rpsRatio);
  line("CPU per request (run)", cpuRatio);
  line("CPU per request (with catch-up)", totalRatio);
} finally {
  await stopAll();
  if (!opt["keep-tmp"]) rmSync(TMP, { recursive: true, force: true });
}
