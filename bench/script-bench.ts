#!/usr/bin/env bun
/**
 * What a script rule costs the proxy: one tapwire (from source, its own process) in front of a 1 KiB upstream (its
 * own process), with one script rule matching every request whose request script is one line
 * (`pm.request.headers.upsert({key: "X-Bench", value: "1"})`). Rows, measured in the same run and interleaved
 * round by round on the same process (only the master switch changes between them):
 *   off  scripting_enabled = false: the rule is there but nothing runs (the proxy's own cost)
 *   on   scripting_enabled = true: every request is buffered and runs the script in a QuickJS worker
 * For each row: requests/s with `hey -z Ds -c C` (plain HTTP through the proxy), and latency p50/p99 with one
 * keep-alive connection sending N requests one after another (timed in this process, µs resolution). Prints the added latency (on - off) and the throughput kept (on / off) for each
 * round and their medians, and the CPU time tapwire's threads spent per request in the throughput runs (from /proc:
 * on a shared machine the figure to compare between two builds). Goals (issue 14): added p50 under 150 µs, throughput at least 50% of off.
 *
 *   node_modules/.bin/bun bench/script-bench.ts [--duration 5] [--connections 32] [--requests 3000] [--rounds 3]
 *
 * hey is installed with apt-get (needs root) when missing. Every process started here runs in its own process
 * group and is stopped in a finally block.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { killAllNow, run, startChild, stopAll, waitLine } from "./processes.ts";

if (Bun.argv.includes("--serve-upstream")) {
  const body = "x".repeat(1023) + "\n";
  const server = Bun.serve({ hostname: "127.0.0.1", port: 0, reusePort: false, fetch: () => new Response(body, { headers: { "content-type": "text/plain" } }) });
  process.stdout.write(`PORT ${server.port}\n`);
  await new Promise(() => {});
}

const { values: opt } = parseArgs({
  args: Bun.argv.slice(2),
  strict: true,
  options: {
    duration: { type: "string", default: "5" },
    connections: { type: "string", default: "32" },
    requests: { type: "string", default: "3000" },
    rounds: { type: "string", default: "3" },
    help: { type: "boolean", short: "h", default: false },
  },
});
if (opt.help) {
  console.log(readFileSync(import.meta.path, "utf8").split("*/")[0]!.replace(/^#!.*\n\/\*\*\n/, "").replace(/^ \* ?/gm, ""));
  process.exit(0);
}
const DURATION = Number(opt.duration);
const CONNS = Number(opt.connections);
const REQUESTS = Number(opt.requests);
const ROUNDS = Number(opt.rounds);
const ROOT = join(import.meta.dir, "..");
const BUN = process.execPath;
const TMP = mkdtempSync(join(tmpdir(), "tapwire-script-bench-"));

async function ensureHey(): Promise<void> {
  if (Bun.which("hey")) return;
  console.error("hey is missing: installing it with apt-get");
  let r = await run(["apt-get", "install", "-y", "hey"], 300_000);
  if (r.code !== 0) {
    await run(["apt-get", "update"], 300_000);
    r = await run(["apt-get", "install", "-y", "hey"], 300_000);
  }
  if (r.code !== 0 || !Bun.which("hey")) throw new Error(`could not install hey:\n${r.err.slice(-2000)}`);
}

interface Load {
  rps: number;
  non200: number;
  /** CPU time of tapwire's threads per request (µs), from /proc (load elsewhere on the machine hardly moves it). */
  cpu: Cpu | null;
}

interface Cpu {
  main: number;
  workers: number;
  other: number;
}

/** CPU time (ns) of a process's threads so far: its main thread, its Worker threads, all the others (Linux). */
function threadCpu(pid: number): Cpu | null {
  const out = { main: 0, workers: 0, other: 0 };
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        const ns = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
        const name = readFileSync(`/proc/${pid}/task/${tid}/comm`, "utf8").trim();
        if (tid === String(pid)) out.main += ns;
        else if (name === "Worker") out.workers += ns;
        else out.other += ns;
      } catch {
        // a thread that ended meanwhile
      }
    }
  } catch {
    return null;
  }
  return out;
}

let tapwirePid = 0;

/** Runs hey through the proxy and reads its summary; any non-200 answer is counted and shown. */
async function hey(args: string[], url: string, proxy: string): Promise<Load> {
  const cpu0 = threadCpu(tapwirePid);
  const r = await run(["hey", ...args, "-x", proxy, url], (DURATION + 120) * 1000);
  const cpu1 = threadCpu(tapwirePid);
  if (r.code !== 0) throw new Error(`hey failed (${r.code}):\n${r.err || r.out}`);
  const num = (re: RegExp) => Number(re.exec(r.out)?.[1] ?? NaN);
  const codes = [...r.out.matchAll(/\[(\d{3})\]\s+(\d+) responses/g)];
  const non200 = codes.filter((m) => m[1] !== "200").reduce((n, m) => n + Number(m[2]), 0) + (/Error distribution/.test(r.out) ? 1 : 0);
  const requests = codes.reduce((n, m) => n + Number(m[2]), 0);
  const per = (a: number, b: number) => (b - a) / 1000 / requests;
  const cpu = cpu0 && cpu1 && requests > 0 ? { main: per(cpu0.main, cpu1.main), workers: per(cpu0.workers, cpu1.workers), other: per(cpu0.other, cpu1.other) } : null;
  return { rps: num(/Requests\/sec:\s+([\d.]+)/), non200, cpu };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/**
 * Latency with microsecond resolution (hey prints 0.1 ms steps): one keep-alive connection to the proxy sends
 * absolute-form GETs one after another and times each from the write to the last byte of the 1 KiB response.
 */
async function latency(proxyPort: number, url: string, n: number): Promise<{ p50us: number; p99us: number }> {
  const target = new URL(url);
  const req = new TextEncoder().encode(`GET ${url} HTTP/1.1\r\nHost: ${target.host}\r\nUser-Agent: script-bench\r\n\r\n`);
  let pending: ((ok: boolean) => void) | null = null;
  let got = 0;
  let need = -1;
  let head = "";
  const socket = await Bun.connect({
    hostname: "127.0.0.1",
    port: proxyPort,
    socket: {
      data(_s, d) {
        if (need < 0) {
          head += new TextDecoder("latin1").decode(d);
          const end = head.indexOf("\r\n\r\n");
          if (end < 0) return;
          const len = Number(/content-length:\s*(\d+)/i.exec(head.slice(0, end))?.[1] ?? NaN);
          if (!head.startsWith("HTTP/1.1 200")) return pending?.(false);
          need = end + 4 + len;
          got = Buffer.byteLength(head, "latin1");
        } else got += d.length;
        if (got >= need) {
          need = -1;
          head = "";
          got = 0;
          pending?.(true);
        }
      },
      close() {
        pending?.(false);
      },
    },
  });
  const times: number[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const done = new Promise<boolean>((r) => (pending = r));
      const t0 = performance.now();
      socket.write(req);
      if (!(await done)) throw new Error("latency probe: the proxy answered other than 200 or closed");
      times.push((performance.now() - t0) * 1000);
    }
  } finally {
    socket.end();
  }
  times.sort((a, b) => a - b);
  return { p50us: times[Math.floor(n * 0.5)]!, p99us: times[Math.floor(n * 0.99)]! };
}

async function main(): Promise<void> {
  await ensureHey();
  const upstream = startChild("upstream", [BUN, import.meta.path, "--serve-upstream"]);
  const upPort = Number((await waitLine(upstream, (l) => l.startsWith("PORT "), 30_000)).slice(5));
  const dataDir = join(TMP, "data");
  const tw = startChild("tapwire", [BUN, join(ROOT, "src/cli/main.ts"), "start", "--data-dir", dataDir, "--port", "0"]);
  tapwirePid = tw.proc.pid;
  await waitLine(tw, (l) => l.includes("API http://127.0.0.1:"), 30_000);
  const hs = JSON.parse(readFileSync(join(dataDir, "api-handshake.json"), "utf8")) as { port: number; token: string; proxy_port: number };
  const api = async (path: string, method: string, body: unknown) => {
    const r = await fetch(`http://127.0.0.1:${hs.port}${path}`, { method, headers: { authorization: `Bearer ${hs.token}`, "content-type": "application/json" }, body: JSON.stringify(body) });
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
  };
  // capture stays on in both rows; the store is bounded, and the rows differ only by the script
  await api("/api/v1/script-rules", "POST", {
    id: "bench",
    name: "bench",
    method: "",
    url_pattern: "**",
    request_script: `pm.request.headers.upsert({key: "X-Bench", value: "1"})`,
    response_script: "",
    apply_to_request: true,
    apply_to_response: false,
    enabled: true,
  });
  const proxy = `http://127.0.0.1:${hs.proxy_port}`;
  const url = `http://127.0.0.1:${upPort}/1k.txt`;
  const setScripting = (enabled: boolean) => api("/api/v1/script-rules/toggle", "PUT", { enabled });

  console.log(`script-bench: hey -z ${DURATION}s -c ${CONNS} (throughput), ${REQUESTS} sequential requests on one connection (latency), ${ROUNDS} rounds, plain HTTP, 1 KiB responses`);
  // warm-up: workers, JIT, pool
  for (const on of [false, true]) {
    await setScripting(on);
    await hey(["-n", "2000", "-c", "8"], url, proxy);
  }
  type Lat = { p50us: number; p99us: number };
  const rows: { off: Load; offLat: Lat; on: Load; onLat: Lat }[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    await setScripting(false);
    const off = await hey(["-z", `${DURATION}s`, "-c", String(CONNS)], url, proxy);
    const offLat = await latency(hs.proxy_port, url, REQUESTS);
    await setScripting(true);
    const on = await hey(["-z", `${DURATION}s`, "-c", String(CONNS)], url, proxy);
    const onLat = await latency(hs.proxy_port, url, REQUESTS);
    rows.push({ off, offLat, on, onLat });
    const bad = off.non200 + on.non200;
    console.log(
      `round ${i + 1}: off ${off.rps.toFixed(0)} req/s, p50 ${offLat.p50us.toFixed(0)} µs, p99 ${offLat.p99us.toFixed(0)} µs | ` +
        `on ${on.rps.toFixed(0)} req/s, p50 ${onLat.p50us.toFixed(0)} µs, p99 ${onLat.p99us.toFixed(0)} µs | ` +
        `added p50 ${(onLat.p50us - offLat.p50us).toFixed(0)} µs, p99 ${(onLat.p99us - offLat.p99us).toFixed(0)} µs, kept ${((on.rps / off.rps) * 100).toFixed(1)}%` +
        (bad ? `  (${bad} non-200 answers or errors!)` : ""),
    );
  }
  const addedP50 = median(rows.map((r) => r.onLat.p50us - r.offLat.p50us));
  const addedP99 = median(rows.map((r) => r.onLat.p99us - r.offLat.p99us));
  const kept = median(rows.map((r) => r.on.rps / r.off.rps)) * 100;
  console.log("");
  console.log(`median over rounds: off ${median(rows.map((r) => r.off.rps)).toFixed(0)} req/s, on ${median(rows.map((r) => r.on.rps)).toFixed(0)} req/s`);
  console.log(`  added latency p50 ${addedP50.toFixed(0)} µs (goal < 150 µs: ${addedP50 < 150 ? "met" : "NOT met"}), p99 ${addedP99.toFixed(0)} µs`);
  console.log(`  throughput kept ${kept.toFixed(1)}% (goal >= 50%: ${kept >= 50 ? "met" : "NOT met"})`);
  const cpuRow = (pick: (r: (typeof rows)[number]) => Load) => {
    const c = rows.map(pick).map((l) => l.cpu);
    if (c.some((x) => x === null)) return "n/a (no /proc)";
    const m = (f: (x: Cpu) => number) => median(c.map((x) => f(x!))).toFixed(1);
    return `main thread ${m((x) => x.main)} µs, workers ${m((x) => x.workers)} µs, other threads ${m((x) => x.other)} µs, total ${m((x) => x.main + x.workers + x.other)} µs`;
  };
  console.log(`  tapwire CPU per request (throughput runs, median over rounds; load elsewhere hardly moves it):`);
  console.log(`    off: ${cpuRow((r) => r.off)}`);
  console.log(`    on:  ${cpuRow((r) => r.on)}`);
}

const watchdog = setTimeout(() => {
  console.error("script-bench: watchdog expired");
  killAllNow();
  process.exit(1);
}, (ROUNDS * (2 * DURATION + 60) + 300) * 1000);
try {
  await main();
} finally {
  clearTimeout(watchdog);
  await stopAll();
  rmSync(TMP, { recursive: true, force: true });
}
process.exit(0);
