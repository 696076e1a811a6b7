#!/usr/bin/env bun
/**
 * Where a plain-HTTP request's CPU goes in a proxy (docs/performance.md, "Plain HTTP: where the time goes"):
 * runs `hey -n N -c C` (keep-alive, GET of bench/bench-upstream.ts's 1 KiB body) through tapwire or through the
 * bare relay (bench/peers/bun-relay.ts), natively, and prints the proxy's CPU per request per thread (from
 * /proc/PID/task/TID/stat, clock ticks: run enough requests). Optionally under `strace -c -f` (syscalls per request,
 * instead of the CPU figures) or `bun --cpu-prof --cpu-prof-md` (the profile's directory is printed).
 *
 *   bun bench/http1-breakdown.ts [--dir CHECKOUT] [--relay] [--no-capture] [--requests 40000] [--connections 32]
 *                                [--warmup 10000] [--strace] [--cpu-prof DIR]
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { benchScratch, firstLine, startHttpUpstream, type Kid } from "./callgrind-common.ts";

const { values: opt } = parseArgs({
  options: {
    dir: { type: "string", default: join(import.meta.dir, "..") },
    relay: { type: "boolean", default: false },
    "no-capture": { type: "boolean", default: false },
    requests: { type: "string", default: "40000" },
    warmup: { type: "string", default: "10000" },
    connections: { type: "string", default: "32" },
    strace: { type: "boolean", default: false },
    "cpu-prof": { type: "string" },
  },
});
const { tmp: TMP, kids, log } = benchScratch("http1-breakdown");

const upPort = await startHttpUpstream(TMP, kids);

const straceOut = join(TMP, "strace.txt");
const wrap = opt.strace ? ["strace", "-c", "-f", "-o", straceOut] : [];
const prof = opt["cpu-prof"] ? ["--cpu-prof", "--cpu-prof-md", `--cpu-prof-dir=${resolve(opt["cpu-prof"])}`] : [];
let proxy: Kid;
let port: number;
if (opt.relay) {
  proxy = Bun.spawn([...wrap, process.execPath, ...prof, join(opt.dir!, "bench/peers/bun-relay.ts"), String(upPort)], { stdout: "pipe", stderr: "inherit" });
  kids.push(proxy);
  port = Number(/PORT (\d+)/.exec(await firstLine(proxy, /PORT \d+\n/))![1]);
} else {
  const dataDir = join(TMP, "data");
  proxy = Bun.spawn([...wrap, process.execPath, ...prof, join(opt.dir!, "src/cli/main.ts"), "start", "--data-dir", dataDir, "--port", "0"], { stdout: "ignore", stderr: "inherit" });
  kids.push(proxy);
  let hs: { proxy_port: number | null; port: number; token: string } | null = null;
  while (hs === null) {
    await Bun.sleep(100);
    if (proxy.exitCode !== null) throw new Error("tapwire exited");
    try {
      const j = JSON.parse(readFileSync(join(dataDir, "api-handshake.json"), "utf8"));
      if (j.proxy_port) hs = j;
    } catch {}
  }
  port = hs.proxy_port!;
  if (opt["no-capture"]) {
    const r = await fetch(`http://127.0.0.1:${hs.port}/api/v1/capture/stop`, { method: "POST", headers: { authorization: `Bearer ${hs.token}` } });
    if (r.status !== 204) throw new Error(`capture/stop: ${r.status}`);
  }
}

/** The proxy's own pid (strace's child when wrapped). */
function proxyPid(): number {
  if (!opt.strace) return proxy.pid;
  const kids = readFileSync(`/proc/${proxy.pid}/task/${proxy.pid}/children`, "utf8").trim().split(/\s+/);
  return Number(kids[0]);
}
const TICK_US = 1e6 / 100;
function threads(pid: number): Map<string, { name: string; ticks: number }> {
  const m = new Map<string, { name: string; ticks: number }>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const s = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
      const name = s.slice(s.indexOf("(") + 1, s.lastIndexOf(")"));
      const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
      m.set(tid, { name, ticks: Number(f[11]) + Number(f[12]) }); // utime + stime
    } catch {}
  }
  return m;
}
function hey(n: number): number {
  const url = opt.relay ? `http://127.0.0.1:${port}/1k.txt` : `http://127.0.0.1:${upPort}/1k.txt`;
  const args = ["hey", "-n", String(n), "-c", opt.connections!, ...(opt.relay ? [] : ["-x", `http://127.0.0.1:${port}`]), url];
  const r = Bun.spawnSync(args);
  const text = r.stdout.toString();
  const ok = Number(/\[200\]\s+(\d+) responses/.exec(text)?.[1] ?? 0);
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(text)?.[1];
  log(`hey -n ${n}: ${ok} x 200, ${rps} req/s`);
  return ok;
}

hey(Number(opt.warmup));
await Bun.sleep(2000); // let the capture writer catch up with the warm-up
const pid = proxyPid();
const before = threads(pid);
const load0 = readFileSync("/proc/loadavg", "utf8").split(" ")[0];
const ok = hey(Number(opt.requests));
const after = threads(pid);
const label = opt.relay ? "relay" : `tapwire${opt["no-capture"] ? " (capture stopped)" : ""} (${opt.dir})`;
if (!opt.strace) {
  let total = 0;
  const rows: string[] = [];
  for (const [tid, a] of after) {
    const d = a.ticks - (before.get(tid)?.ticks ?? 0);
    total += d;
    if (d > 0) rows.push(`  ${a.name.padEnd(16)} ${tid.padStart(7)}: ${((d * TICK_US) / ok).toFixed(1)} µs/req`);
  }
  console.log(`${label}: ${ok} requests, load average ${load0}; CPU per request, all threads ${((total * TICK_US) / ok).toFixed(1)} µs`);
  for (const r of rows) console.log(r);
}
// under strace, stop the traced proxy itself: strace then writes its summary and exits
process.kill(pid, "SIGINT");
await proxy.exited;
if (opt.strace) {
  // strace -c counts the warm-up too: per request over warm-up + measured
  const text = readFileSync(straceOut, "utf8");
  const all = Number(opt.warmup) + ok;
  console.log(`${label}: syscalls per request under strace -c -f (warm-up and measured, ${all} requests; start-up included)`);
  for (const line of text.split("\n")) {
    const f = line.trim().split(/\s+/);
    if (f.length >= 5 && /^\d/.test(f[0]!) && f[0] !== "100.00" && Number(f[3]) / all >= 0.01) console.log(`  ${(f[f.length - 1] ?? "").padEnd(16)} ${(Number(f[3]) / all).toFixed(2)}`);
    if (line.trim().startsWith("100.00")) console.log(`  total            ${(Number(f[3]) / all).toFixed(2)}`);
  }
}
if (opt["cpu-prof"]) console.log(`profile in ${resolve(opt["cpu-prof"])}`);
process.exit(0);
