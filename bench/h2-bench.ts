/**
 * HTTP/2 through the proxy: requests/s with 100 concurrent streams over one client connection, printed side by
 * side in one run for
 *   direct         node:http2 client -> h2 origin
 *   relay          client -> TLS (ALPN h2) -> a bare node:http2 relay in Bun (bench/peers/bun-h2-relay.ts) -> origin:
 *                  what any Bun process in the path reaches (two HTTP/2 endpoints, two TLS sockets, nothing else)
 *   relay-batched  the same relay with the writes of one turn batched into one socket write, as tapwire does
 *   tapwire        client -> CONNECT + TLS (ALPN h2) -> tapwire (capture on) -> h2 origin
 *   tapwire-ref    the same with another checkout's tapwire (--tapwire-ref DIR): before/after pairs in one run
 *   mitmdump       the same through mitmproxy's mitmdump (apt-get install -y mitmproxy), if installed
 * Goal (issue 22): tapwire >= 3x mitmdump and >= 40% of direct.
 *
 * The origin (node:http2, 1 KiB body), the relays, tapwire and mitmdump each run in their own process; the client
 * runs here. With --rounds N the targets are measured N times, interleaved (round 1: every target, round 2: ...),
 * and each figure is the median over the rounds, so that a shared machine's load drifts over all rows alike.
 * --instructions: also count the instructions each proxy process retires during its measured run (`perf stat`),
 * per request: unlike req/s and CPU time, that figure does not move with the load other processes put on the machine.
 * Usage: bun bench/h2-bench.ts [--seconds 5] [--streams 100] [--rounds 1] [--no-mitm] [--no-relay] [--no-capture]
 *                              [--tapwire-ref DIR] [--tapwire-cpu-prof DIR] [--relay-cpu-prof DIR] [--instructions]
 */
import http2 from "node:http2";
import net from "node:net";
import { existsSync, mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { connectTls, type Via, writeH2Origin } from "./h2-common.ts";

const { values: opt } = parseArgs({
  options: {
    seconds: { type: "string", default: "5" },
    streams: { type: "string", default: "100" },
    rounds: { type: "string", default: "1" },
    "no-mitm": { type: "boolean", default: false },
    "no-relay": { type: "boolean", default: false },
    "tapwire-cpu-prof": { type: "string" },
    "relay-cpu-prof": { type: "string" },
    "tapwire-ref": { type: "string" },
    "no-capture": { type: "boolean", default: false },
    instructions: { type: "boolean", default: false },
  },
});
const ROUNDS = Math.max(1, Number(opt.rounds));
const CORES = navigator.hardwareConcurrency;
const SECONDS = Number(opt.seconds);
const STREAMS = Number(opt.streams);
const ROOT = join(import.meta.dir, "..");
const BUN = process.execPath;
const TMP = mkdtempSync(join(tmpdir(), "tapwire-h2-bench-"));
const children: ReturnType<typeof Bun.spawn>[] = [];
const log = (s: string) => console.error(`[h2-bench] ${s}`);

function cleanup(): void {
  for (const c of children) {
    try {
      c.kill("SIGINT"); // tapwire writes its --cpu-prof profile on a clean stop
    } catch {}
  }
}
process.on("exit", cleanup);

function freePort(): number {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const p = s.port;
  s.stop(true);
  return p;
}

async function waitFor<T>(what: string, ms: number, f: () => T | null | Promise<T | null>): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== null && v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(50);
  }
}

async function portOpen(port: number): Promise<boolean> {
  return new Promise((res) => {
    const s = net.connect(port, "127.0.0.1");
    s.once("connect", () => {
      s.destroy();
      res(true);
    });
    s.once("error", () => res(false));
  });
}

// ------------------------------------------------------------------------------------------------ origin

const { ca, caFile: originCaFile, script: originScript } = writeH2Origin(TMP, "origin-ca.pem");

let originPid: number | undefined;
async function startOrigin(): Promise<number> {
  const child = Bun.spawn([BUN, originScript], { stdout: "pipe", stderr: "inherit" });
  children.push(child);
  originPid = child.pid;
  const reader = child.stdout.getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error("origin exited");
    text += new TextDecoder().decode(value);
  }
  return JSON.parse(text.split("\n")[0]!).port;
}

// ------------------------------------------------------------------------------------------------ proxies

async function startTapwire(root: string, name: string, profDir?: string): Promise<{ port: number; caPem: string; pid: number }> {
  const dataDir = join(TMP, `${name}-data`);
  const prof = profDir ? ["--cpu-prof", "--cpu-prof-md", `--cpu-prof-dir=${profDir}`] : [];
  const child = Bun.spawn([BUN, ...prof, join(root, "src/cli/main.ts"), "start", "--data-dir", dataDir, "--port", "0", "--upstream-ca", originCaFile], { stdout: "ignore", stderr: "pipe" });
  children.push(child);
  const hs = await waitFor(`${name} handshake`, 30_000, () => {
    const f = join(dataDir, "api-handshake.json");
    if (!existsSync(f)) return null;
    try {
      const j = JSON.parse(readFileSync(f, "utf8")) as { proxy_port: number | null };
      return j.proxy_port ? j : null;
    } catch {
      return null;
    }
  });
  if (opt["no-capture"]) {
    const h = JSON.parse(readFileSync(join(dataDir, "api-handshake.json"), "utf8")) as { port: number; token: string };
    const r = await fetch(`http://127.0.0.1:${h.port}/api/v1/capture/stop`, { method: "POST", headers: { authorization: `Bearer ${h.token}` } });
    if (r.status !== 204) throw new Error(`capture/stop: ${r.status}`);
  }
  return { port: hs.proxy_port!, caPem: readFileSync(join(dataDir, "ca.pem"), "utf8"), pid: child.pid };
}

/** The bare HTTP/2 relay (bench/peers/bun-h2-relay.ts), TLS with the origin's certificate. */
async function startRelay(batched: boolean): Promise<{ port: number; pid: number }> {
  const profDir = opt["relay-cpu-prof"];
  const prof = profDir ? ["--cpu-prof", "--cpu-prof-md", `--cpu-prof-dir=${join(profDir, batched ? "batched" : "native")}`] : [];
  const args = [BUN, ...prof, join(ROOT, "bench/peers/bun-h2-relay.ts"), String(originPort), join(TMP, "cert.pem"), join(TMP, "key.pem"), originCaFile, ...(batched ? ["--batched"] : [])];
  const child = Bun.spawn(args, { stdout: "pipe", stderr: "inherit" });
  children.push(child);
  const reader = child.stdout.getReader();
  let text = "";
  while (!/PORT \d+\n/.test(text)) {
    const { value, done } = await reader.read();
    if (done) throw new Error("the relay exited before listening");
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return { port: Number(/PORT (\d+)/.exec(text)![1]), pid: child.pid };
}

async function startMitmdump(): Promise<{ port: number; caPem: string; version: string; pid: number } | null> {
  const which = Bun.spawnSync(["which", "mitmdump"]);
  if (which.exitCode !== 0) {
    log("mitmdump is not installed (apt-get install -y mitmproxy): its row is skipped");
    return null;
  }
  const version = Bun.spawnSync(["mitmdump", "--version"]).stdout.toString().split("\n")[0]!.trim();
  const port = freePort();
  const dir = join(TMP, "mitm");
  mkdirSync(dir, { recursive: true });
  const child = Bun.spawn(["mitmdump", "--listen-host", "127.0.0.1", "-p", String(port), "--set", `confdir=${dir}`, "--set", `ssl_verify_upstream_trusted_ca=${originCaFile}`, "-q"], { stdout: "ignore", stderr: "ignore" });
  children.push(child);
  await waitFor("mitmdump port", 90_000, async () => ((await portOpen(port)) ? true : null));
  const caFile = join(dir, "mitmproxy-ca-cert.pem");
  await waitFor("mitmdump CA", 10_000, () => (existsSync(caFile) ? true : null));
  return { port, caPem: readFileSync(caFile, "utf8"), version, pid: child.pid };
}

// ------------------------------------------------------------------------------------------------ client

/** CPU seconds (user + system) a process has used so far, from /proc (null where there is no /proc). */
function cpuSec(pid: number | undefined): number | null {
  if (!pid) return null;
  try {
    const f = readFileSync(`/proc/${pid}/stat`, "utf8");
    const rest = f.slice(f.lastIndexOf(")") + 2).split(" ");
    return (Number(rest[11]) + Number(rest[12])) / 100; // utime, stime in clock ticks (USER_HZ = 100)
  } catch {
    return null;
  }
}

/** Starts `perf stat` on a process; the function it returns stops it and answers the instructions counted (null: no perf). */
function startInstructionCount(pid: number): () => Promise<number | null> {
  const p = Bun.spawn(["perf", "stat", "-x", ",", "-e", "instructions", "-p", String(pid)], { stdout: "ignore", stderr: "pipe" });
  return async () => {
    p.kill("SIGINT");
    const text = await new Response(p.stderr).text();
    await p.exited;
    const line = text.split("\n").find((l) => /,instructions/.test(l));
    const n = line ? Number(line.split(",")[0]) : NaN;
    return Number.isFinite(n) ? n : null;
  };
}

interface Result {
  /** CPU microseconds per request of the proxy process and of the origin during the measured run */
  proxyUs: number | null;
  /** CPU microseconds per request of this process (the client) */
  clientUs: number | null;
  /** instructions per request the proxy process retired during the measured run (--instructions) */
  proxyInsn: number | null;
  originUs: number | null;
  rps: number;
  ok: number;
  errors: number;
  p50: number;
  p99: number;
}

async function load(originPort: number, caPem: string, via: Via, proxyPid?: number): Promise<Result> {
  const sock = await connectTls(originPort, caPem, via);
  const session = http2.connect(`https://localhost:${originPort}`, { createConnection: () => sock });
  session.on("error", () => {});
  const one = () =>
    new Promise<boolean>((resolve) => {
      const req = session.request({ ":method": "GET", ":path": "/1k" });
      let n = 0;
      let status = 0;
      req.on("response", (h) => (status = Number(h[":status"])));
      req.on("data", (c: Buffer) => (n += c.length));
      req.on("end", () => resolve(status === 200 && n === 1024));
      req.on("error", () => resolve(false));
      req.end();
    });
  const run = async (ms: number, lat: number[] | null) => {
    let ok = 0;
    let errors = 0;
    const end = performance.now() + ms;
    await Promise.all(
      Array.from({ length: STREAMS }, async () => {
        while (performance.now() < end) {
          const t0 = performance.now();
          if (await one()) ok++;
          else errors++;
          lat?.push(performance.now() - t0);
        }
      }),
    );
    return { ok, errors };
  };
  await run(1000, null); // warm-up: sessions, leaf certificates, JIT
  const lat: number[] = [];
  const counter = opt.instructions && proxyPid ? startInstructionCount(proxyPid) : null;
  const p0 = cpuSec(proxyPid);
  const o0 = cpuSec(originPid);
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const { ok, errors } = await run(SECONDS * 1000, lat);
  const secs = (performance.now() - t0) / 1000;
  const c1 = process.cpuUsage(c0);
  const p1 = cpuSec(proxyPid);
  const o1 = cpuSec(originPid);
  const insn = counter ? await counter() : null;
  const perReq = (a: number | null, b: number | null) => (a === null || b === null || ok === 0 ? null : ((b - a) * 1e6) / ok);
  session.close();
  lat.sort((a, b) => a - b);
  return { proxyUs: perReq(p0, p1), clientUs: ok === 0 ? null : (c1.user + c1.system) / ok, proxyInsn: insn === null || ok === 0 ? null : insn / ok, originUs: perReq(o0, o1), rps: ok / secs, ok, errors, p50: lat[Math.floor(lat.length * 0.5)] ?? NaN, p99: lat[Math.floor(lat.length * 0.99)] ?? NaN };
}

// ------------------------------------------------------------------------------------------------ main

const originPort = await startOrigin();
log(`origin (node:http2) on ${originPort}`);
const relay = opt["no-relay"] ? null : await startRelay(false);
const relayB = opt["no-relay"] ? null : await startRelay(true);
if (relay && relayB) log(`h2 relays on ${relay.port} (native sockets), ${relayB.port} (batched writes)`);
const tw = await startTapwire(ROOT, "tapwire", opt["tapwire-cpu-prof"]);
log(`tapwire on ${tw.port}`);
const twRef = opt["tapwire-ref"] ? await startTapwire(opt["tapwire-ref"], "tapwire-ref") : null;
if (twRef) log(`tapwire-ref (${opt["tapwire-ref"]}) on ${twRef.port}`);
const mitm = opt["no-mitm"] ? null : await startMitmdump();
if (mitm) log(`${mitm.version} on ${mitm.port}`);

interface Target {
  name: string;
  ca: string;
  via: Via;
  pid?: number;
}
const targets: Target[] = [
  { name: "direct", ca: ca.certPem, via: { kind: "direct" } },
  ...(relay ? [{ name: "relay", ca: ca.certPem, via: { kind: "relay", port: relay.port }, pid: relay.pid } as Target] : []),
  ...(relayB ? [{ name: "relay-batched", ca: ca.certPem, via: { kind: "relay", port: relayB.port }, pid: relayB.pid } as Target] : []),
  { name: "tapwire", ca: tw.caPem, via: { kind: "connect", port: tw.port }, pid: tw.pid },
  ...(twRef ? [{ name: "tapwire-ref", ca: twRef.caPem, via: { kind: "connect", port: twRef.port }, pid: twRef.pid } as Target] : []),
  ...(mitm ? [{ name: "mitmdump", ca: mitm.caPem, via: { kind: "connect", port: mitm.port }, pid: mitm.pid } as Target] : []),
];

/**
 * Waits until the machine's part of this bench is quiet: no child (proxies, origin) using more than 5% of a core
 * over 250 ms (at most 30 s). A tapwire row leaves work behind (its capture writer stores the entries of the row
 * in its own thread for seconds after), which would otherwise slow the next row down, whichever it is.
 */
async function settle(): Promise<number> {
  const pids = [originPid, ...targets.map((t) => t.pid)].filter((p): p is number => p !== undefined);
  const total = () => pids.reduce((a, p) => a + (cpuSec(p) ?? 0), 0);
  const t0 = performance.now();
  let prev = total();
  while (performance.now() - t0 < 30_000) {
    await Bun.sleep(250);
    const now = total();
    if (now - prev <= 0.0125) break;
    prev = now;
  }
  return (performance.now() - t0) / 1000;
}

const results = new Map<string, Result[]>(targets.map((t) => [t.name, []]));
const failures = new Map<string, string>();
for (let round = 1; round <= ROUNDS; round++) {
  for (const t of targets) {
    if (failures.has(t.name)) continue;
    try {
      const waited = await settle();
      log(`${ROUNDS > 1 ? `round ${round}/${ROUNDS}, ` : ""}${t.name}: ${SECONDS} s, ${STREAMS} concurrent streams on one connection (after ${waited.toFixed(1)} s for the processes to go quiet)...`);
      results.get(t.name)!.push(await load(originPort, t.ca, t.via, t.pid));
    } catch (e) {
      failures.set(t.name, (e as Error).message);
    }
  }
}

const median = (xs: number[]) => {
  const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const m = v.length >> 1;
  return v.length % 2 ? v[m]! : (v[m - 1]! + v[m]!) / 2;
};
const f = (n: number, d = 0) => (Number.isFinite(n) ? n.toFixed(d) : "-");
const med = (name: string, k: keyof Result) => median((results.get(name) ?? []).map((r) => (r[k] as number | null) ?? NaN));
console.log(`\nHTTP/2, ${STREAMS} concurrent streams over one connection, 1 KiB responses, ${SECONDS} s per row${ROUNDS > 1 ? `, median of ${ROUNDS} interleaved rounds` : ""} (tapwire ${opt["no-capture"] ? "with capture stopped" : "capturing every request"})`);
console.log([...["target", "req/s", "p50 ms", "p99 ms", "ok", "errors", "proxy cpu us/req", "origin cpu us/req", "client cpu us/req", "cpu-bound req/s"], ...(opt.instructions ? ["proxy insn/req"] : [])].map((c, i) => (i === 0 ? c.padEnd(14) : c.padStart(i >= 6 ? 18 : 9))).join(" "));
for (const t of targets) {
  const rs = results.get(t.name)!;
  if (rs.length === 0) {
    console.log(`${t.name.padEnd(14)} FAILED: ${failures.get(t.name)}`);
    continue;
  }
  const sum = (k: "ok" | "errors") => rs.reduce((a, r) => a + r[k], 0);
  console.log([t.name.padEnd(14), f(med(t.name, "rps")).padStart(9), f(med(t.name, "p50"), 2).padStart(9), f(med(t.name, "p99"), 2).padStart(9), String(sum("ok")).padStart(9), String(sum("errors")).padStart(9), f(med(t.name, "proxyUs")).padStart(18), f(med(t.name, "originUs")).padStart(18), f(med(t.name, "clientUs")).padStart(18), f(bound(t.name)).padStart(18), ...(opt.instructions ? [f(med(t.name, "proxyInsn")).padStart(18)] : [])].join(" "));
  if (failures.has(t.name)) console.log(`${"".padEnd(14)} (failed in a later round: ${failures.get(t.name)})`);
}
if (ROUNDS > 1) {
  console.log("\nper round (req/s, proxy cpu us/req):");
  for (const t of targets) console.log(`  ${t.name.padEnd(14)} ${(results.get(t.name) ?? []).map((r) => `${f(r.rps)} (${f(r.proxyUs ?? NaN)}${opt.instructions ? `, ${f((r.proxyInsn ?? NaN) / 1000)}k insn` : ""})`).join("  ")}`);
}
const get = (n: string) => med(n, "rps");
/**
 * What the CPU allows: client, origin and proxy are three processes on CORES cores, each needing its CPU time per
 * request; the run cannot go faster than CORES / (client + origin + proxy) requests per second, nor faster than its
 * busiest process alone (1 / max). Direct has two processes: 1 / max(client, origin) on two cores or more.
 */
function bound(name: string): number {
  const c = med(name, "clientUs");
  const o = med(name, "originUs");
  const p = med(name, "proxyUs");
  const parts = [c, o, ...(Number.isFinite(p) ? [p] : [])];
  if (parts.some((x) => !Number.isFinite(x))) return NaN;
  const sum = parts.reduce((a, b) => a + b, 0);
  return 1e6 * Math.min(CORES / sum, 1 / Math.max(...parts));
}
const twRps = get("tapwire");
console.log(`\ntapwire / direct   = ${f((twRps / get("direct")) * 100)}%   (goal >= 40%)`);
console.log(`cpu-bound ratios on ${CORES} cores: tapwire / direct = ${f((bound("tapwire") / bound("direct")) * 100)}%${relay ? `, relay-batched / direct = ${f((bound("relay-batched") / bound("direct")) * 100)}%` : ""} (what the CPU times measured allow, whatever the load)`);
if (relay) {
  console.log(`relay / direct     = ${f((get("relay") / get("direct")) * 100)}%   relay-batched / direct = ${f((get("relay-batched") / get("direct")) * 100)}%   (what a bare Bun h2 relay reaches)`);
  console.log(`tapwire / relay    = ${f((twRps / get("relay")) * 100)}%   tapwire / relay-batched = ${f((twRps / get("relay-batched")) * 100)}%`);
}
if (twRef) console.log(`tapwire / tapwire-ref = ${f((twRps / get("tapwire-ref")) * 100)}%   cpu us/req ${f(med("tapwire", "proxyUs"), 1)} vs ${f(med("tapwire-ref", "proxyUs"), 1)}${opt.instructions ? `   insn/req ${f(med("tapwire", "proxyInsn"))} vs ${f(med("tapwire-ref", "proxyInsn"))}` : ""}`);
if (mitm) console.log(`tapwire / mitmdump = ${f(twRps / get("mitmdump"), 2)}x  (goal >= 3x)`);
else console.log("tapwire / mitmdump = - (mitmdump not installed or --no-mitm)");
cleanup();
await Promise.race([Promise.all(children.map((c) => c.exited)), Bun.sleep(5000)]);
process.exit(0);
