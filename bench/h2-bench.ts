/**
 * HTTP/2 through the proxy: requests/s with 100 concurrent streams over one client connection, printed side by
 * side in one run for
 *   direct    node:http2 client -> h2 origin
 *   tapwire   client -> CONNECT + TLS (ALPN h2) -> tapwire (capture on) -> h2 origin
 *   mitmdump  the same through mitmproxy's mitmdump (apt-get install -y mitmproxy), if installed
 * Goal (issue 22): tapwire >= 3x mitmdump and >= 40% of direct.
 *
 * The origin (node:http2, 1 KiB body), tapwire and mitmdump each run in their own process; the client runs here.
 * Usage: bun bench/h2-bench.ts [--seconds 5] [--streams 100] [--no-mitm] [--no-capture] [--tapwire-cpu-prof DIR]
 */
import http2 from "node:http2";
import net from "node:net";
import tls from "node:tls";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { generateCA } from "../src/core/tls/ca.ts";
import { LeafCertCache } from "../src/core/tls/leaf.ts";

const { values: opt } = parseArgs({ options: { seconds: { type: "string", default: "5" }, streams: { type: "string", default: "100" }, "no-mitm": { type: "boolean", default: false }, "tapwire-cpu-prof": { type: "string" }, "no-capture": { type: "boolean", default: false } } });
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

const ca = generateCA();
const leaf = new LeafCertCache(ca).get("localhost");
const originCaFile = join(TMP, "origin-ca.pem");
writeFileSync(originCaFile, ca.certPem);
writeFileSync(join(TMP, "cert.pem"), leaf.cert);
writeFileSync(join(TMP, "key.pem"), leaf.key);
writeFileSync(
  join(TMP, "origin.ts"),
  `import http2 from "node:http2";
import { readFileSync } from "node:fs";
const body = Buffer.alloc(1024, 120);
const srv = http2.createSecureServer({ cert: readFileSync(${JSON.stringify(join(TMP, "cert.pem"))}), key: readFileSync(${JSON.stringify(join(TMP, "key.pem"))}), settings: { maxConcurrentStreams: 1000 } });
srv.on("stream", (s) => { s.on("error", () => {}); s.respond({ ":status": 200, "content-type": "text/plain", "content-length": "1024" }); s.end(body); });
srv.listen(0, "127.0.0.1", () => console.log(JSON.stringify({ port: srv.address().port })));
`,
);

let originPid: number | undefined;
async function startOrigin(): Promise<number> {
  const child = Bun.spawn([BUN, join(TMP, "origin.ts")], { stdout: "pipe", stderr: "inherit" });
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

async function startTapwire(): Promise<{ port: number; caPem: string; pid: number }> {
  const dataDir = join(TMP, "tapwire-data");
  const prof = opt["tapwire-cpu-prof"] ? ["--cpu-prof", "--cpu-prof-md", `--cpu-prof-dir=${opt["tapwire-cpu-prof"]}`] : [];
  const child = Bun.spawn([BUN, ...prof, join(ROOT, "src/cli/main.ts"), "start", "--data-dir", dataDir, "--port", "0", "--upstream-ca", originCaFile], { stdout: "ignore", stderr: "pipe" });
  children.push(child);
  const hs = await waitFor("tapwire handshake", 30_000, () => {
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

/** A TLS socket to the origin: direct, or through a proxy's CONNECT; ALPN h2. */
async function connectTls(originPort: number, caPem: string, proxyPort: number | null): Promise<tls.TLSSocket> {
  let socket: net.Socket | undefined;
  if (proxyPort !== null) {
    const raw = net.connect(proxyPort, "127.0.0.1");
    await new Promise<void>((res, rej) => raw.once("connect", res).once("error", rej));
    raw.write(`CONNECT localhost:${originPort} HTTP/1.1\r\nHost: localhost:${originPort}\r\n\r\n`);
    await new Promise<void>((res, rej) => {
      let got = "";
      const onData = (d: Buffer) => {
        got += d.toString("latin1");
        if (!got.includes("\r\n\r\n")) return;
        raw.off("data", onData);
        if (/^HTTP\/1\.[01] 200/.test(got)) res();
        else rej(new Error(`CONNECT refused: ${got.split("\r\n")[0]}`));
      };
      raw.on("data", onData);
      raw.once("error", rej);
    });
    socket = raw;
  }
  const t = tls.connect({ ...(socket ? { socket } : { host: "127.0.0.1", port: originPort }), servername: "localhost", ca: caPem, ALPNProtocols: ["h2"] } as tls.ConnectionOptions);
  await new Promise<void>((res, rej) => t.once("secureConnect", res).once("error", rej));
  if (t.alpnProtocol !== "h2") throw new Error(`ALPN picked ${t.alpnProtocol}, not h2`);
  return t;
}

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

interface Result {
  /** CPU microseconds per request of the proxy process and of the origin during the measured run */
  proxyUs: number | null;
  originUs: number | null;
  rps: number;
  ok: number;
  errors: number;
  p50: number;
  p99: number;
}

async function load(originPort: number, caPem: string, proxyPort: number | null, proxyPid?: number): Promise<Result> {
  const sock = await connectTls(originPort, caPem, proxyPort);
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
  const p0 = cpuSec(proxyPid);
  const o0 = cpuSec(originPid);
  const t0 = performance.now();
  const { ok, errors } = await run(SECONDS * 1000, lat);
  const secs = (performance.now() - t0) / 1000;
  const p1 = cpuSec(proxyPid);
  const o1 = cpuSec(originPid);
  const perReq = (a: number | null, b: number | null) => (a === null || b === null || ok === 0 ? null : ((b - a) * 1e6) / ok);
  session.close();
  lat.sort((a, b) => a - b);
  return { proxyUs: perReq(p0, p1), originUs: perReq(o0, o1), rps: ok / secs, ok, errors, p50: lat[Math.floor(lat.length * 0.5)] ?? NaN, p99: lat[Math.floor(lat.length * 0.99)] ?? NaN };
}

// ------------------------------------------------------------------------------------------------ main

const originPort = await startOrigin();
log(`origin (node:http2) on ${originPort}`);
const tw = await startTapwire();
log(`tapwire on ${tw.port}`);
const mitm = opt["no-mitm"] ? null : await startMitmdump();
if (mitm) log(`${mitm.version} on ${mitm.port}`);

const rows: { name: string; r: Result | null; error?: string }[] = [];
for (const [name, ca, port, pid] of [
  ["direct", originCa(), null, undefined],
  ["tapwire", tw.caPem, tw.port, tw.pid],
  ...(mitm ? [["mitmdump", mitm.caPem, mitm.port, mitm.pid] as const] : []),
] as [string, string, number | null, number | undefined][]) {
  try {
    log(`${name}: ${SECONDS} s, ${STREAMS} concurrent streams on one connection...`);
    rows.push({ name, r: await load(originPort, ca, port, pid) });
  } catch (e) {
    rows.push({ name, r: null, error: (e as Error).message });
  }
}

function originCa(): string {
  return ca.certPem;
}

const f = (n: number, d = 0) => (Number.isFinite(n) ? n.toFixed(d) : "-");
console.log(`\nHTTP/2, ${STREAMS} concurrent streams over one connection, 1 KiB responses, ${SECONDS} s per row (tapwire ${opt["no-capture"] ? "with capture stopped" : "capturing every request"})`);
console.log(["target", "req/s", "p50 ms", "p99 ms", "ok", "errors", "proxy cpu us/req", "origin cpu us/req"].map((c, i) => (i === 0 ? c.padEnd(10) : c.padStart(i >= 6 ? 18 : 9))).join(" "));
for (const row of rows) {
  if (!row.r) {
    console.log(`${row.name.padEnd(10)} FAILED: ${row.error}`);
    continue;
  }
  const r = row.r;
  console.log([row.name.padEnd(10), f(r.rps).padStart(9), f(r.p50, 2).padStart(9), f(r.p99, 2).padStart(9), String(r.ok).padStart(9), String(r.errors).padStart(9), f(r.proxyUs ?? NaN).padStart(18), f(r.originUs ?? NaN).padStart(18)].join(" "));
}
const get = (n: string) => rows.find((r) => r.name === n)?.r?.rps ?? NaN;
const twRps = get("tapwire");
console.log(`\ntapwire / direct   = ${f((twRps / get("direct")) * 100)}%   (goal >= 40%)`);
if (mitm) console.log(`tapwire / mitmdump = ${f(twRps / get("mitmdump"), 2)}x  (goal >= 3x)`);
else console.log("tapwire / mitmdump = - (mitmdump not installed)");
cleanup();
await Promise.race([Promise.all(children.map((c) => c.exited)), Bun.sleep(5000)]);
process.exit(0);
