#!/usr/bin/env bun
/**
 * Soak: N minutes of mixed traffic through a tapwire process, printing its RSS and open file descriptors every
 * sample interval and, at the end, the slope of each after warm-up (least squares over the samples after the
 * warm-up, default 3 minutes: the capture store fills to its bound in about the first 2). Goal (issue 21): flat, under 1 MiB/min of RSS growth and no fd growth.
 *
 * Traffic, all through the proxy at once:
 *   - plain HTTP GETs of 1 KiB (keep-alive), 8 loops
 *   - HTTPS GETs through CONNECT (intercepted), 4 loops
 *   - large bodies: an 8 MiB download and a 2 MiB upload, each about twice a second
 *   - WebSocket: 4 connections sending a masked text message every 50 ms and reading the echo, each
 *     reconnecting every 20 s
 *   - slow clients: 2 downloads of 16 MiB read in bursts with 1 s pauses (backpressure all the way up)
 *   - hostile ones: every second a client that sends `GET ` and nothing more (cut by the head deadline)
 *
 *   bun bench/soak.ts [--minutes 10] [--sample-secs 60] [--warmup-secs 180] [--root OTHER_CHECKOUT] [--no-capture] [--only http,https,big,ws,slow,hostile]
 *
 * --no-capture stops capture first (traffic is proxied, nothing stored): the proxy's own memory, without the store's.
 * --root runs another checkout's tapwire (say, main before a change) under the same traffic: a reference to read
 * the figures against.
 */
import net from "node:net";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { startTapwire, tempDir } from "../tests/helpers/tapwire-process.ts";
import { generateCA } from "../src/core/tls/ca.ts";
import { LeafCertCache } from "../src/core/tls/leaf.ts";

const { values } = parseArgs({
  args: Bun.argv.slice(2),
  options: { minutes: { type: "string" }, "sample-secs": { type: "string" }, "warmup-secs": { type: "string" }, root: { type: "string" }, "no-capture": { type: "boolean" }, only: { type: "string" } },
});
const minutes = Number(values.minutes ?? 10);
const sampleSecs = Number(values["sample-secs"] ?? 60);
// the capture store fills to its bound (--max-entries 20000, large bodies) in about the first 2 minutes
const warmupSecs = Number(values["warmup-secs"] ?? 180);
/** Another checkout to soak instead (a reference run: the same traffic, the same figures). */
const root = values.root ?? null;
/** Capture stopped (traffic is proxied, nothing stored): tells the proxy's own memory from the capture store's. */
const noCapture = values["no-capture"] ?? false;
/** --only http,https,big,ws,slow,hostile: just these kinds of traffic (to find which one a growth comes with). */
const only = values.only ? new Set(values.only.split(",")) : null;
const on = (kind: string) => only === null || only.has(kind);

// ---------------------------------------------------------------- upstream (this process)
const leaf = new LeafCertCache(generateCA()).get("localhost");
const ONE_K = "x".repeat(1023) + "\n";
const BIG = new Uint8Array(16 * 1024 * 1024).fill(97);
const handler = async (req: Request, server: import("bun").Server<unknown>) => {
  const u = new URL(req.url);
  if (u.pathname === "/ws" && server.upgrade(req, { data: undefined })) return undefined as unknown as Response;
  if (u.pathname === "/1k") return new Response(ONE_K);
  if (u.pathname === "/big") return new Response(BIG.subarray(0, Number(u.searchParams.get("n") ?? BIG.length)));
  if (u.pathname === "/sink") return Response.json({ got: (await req.arrayBuffer()).byteLength });
  return new Response("nf", { status: 404 });
};
const websocket = { message(ws: import("bun").ServerWebSocket<unknown>, m: string | Buffer) { ws.send(m); } };
const http = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: handler, websocket, maxRequestBodySize: 64 * 1024 * 1024 });
const https = Bun.serve({ port: 0, hostname: "127.0.0.1", tls: { cert: leaf.cert, key: leaf.key }, fetch: handler, websocket });
const H = `127.0.0.1:${http.port}`;

// ---------------------------------------------------------------- tapwire (child process)
const dataDir = tempDir("tapwire-soak-");
const tw = await startTapwire({
  dataDir,
  // a reference checkout may predate --client-header-timeout: its hostile clients then wait for the idle timer
  args: ["--upstream-insecure", "--max-entries", "20000", ...(root ? [] : ["--client-header-timeout", "5"])],
  ...(root ? { cmd: [process.execPath, join(root, "src/cli/main.ts")], cwd: root } : {}),
});
const pid = tw.proc.pid;
if (noCapture && (await tw.api("/api/v1/capture/stop", { method: "POST" })).status !== 204) throw new Error("could not stop capture");
const proxy = `http://127.0.0.1:${tw.handshake.proxy_port}`;
const proxyPort = tw.handshake.proxy_port!;
console.log(`tapwire pid ${pid}${root ? ` (${root})` : ""}${noCapture ? ", capture stopped" : ""}, proxy ${proxy}, upstream http ${http.port} https ${https.port}; ${minutes} min, sample every ${sampleSecs} s`);

const counts = { http: 0, https: 0, big: 0, upload: 0, ws: 0, slow: 0, hostile: 0, errors: 0 };
let running = true;
const endAt = Date.now() + minutes * 60_000;

async function loop(fn: () => Promise<void>): Promise<void> {
  while (running) {
    try {
      await fn();
    } catch {
      counts.errors++;
      await Bun.sleep(50);
    }
  }
}

const get = async (url: string, key: keyof typeof counts) => {
  const r = await fetch(url, { proxy, tls: { rejectUnauthorized: false } });
  await r.arrayBuffer();
  if (r.status !== 200) throw new Error(String(r.status));
  counts[key]++;
};

/** One WebSocket session through the proxy on a raw socket: upgrade, then masked messages and their echoes. */
function wsSession(ms: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const s = net.connect(proxyPort, "127.0.0.1");
    let upgraded = false;
    let buf = Buffer.alloc(0);
    let timer: ReturnType<typeof setInterval> | null = null;
    const done = (e?: Error) => {
      if (timer) clearInterval(timer);
      s.destroy();
      e ? reject(e) : resolve();
    };
    s.on("connect", () =>
      s.write(`GET http://${H}/ws HTTP/1.1\r\nHost: ${H}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${Buffer.from("soak-soak-soak-1").toString("base64")}\r\n\r\n`),
    );
    s.on("data", (d: Buffer) => {
      if (!upgraded) {
        buf = Buffer.concat([buf, d]);
        const i = buf.indexOf("\r\n\r\n");
        if (i < 0) return;
        if (!buf.subarray(0, 12).toString().includes("101")) return done(new Error("no 101"));
        upgraded = true;
        timer = setInterval(() => {
          const payload = Buffer.from(`soak message ${counts.ws}`);
          const mask = Buffer.from([1, 2, 3, 4]);
          const masked = Buffer.from(payload.map((b, k) => b ^ mask[k & 3]!));
          s.write(Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, masked]));
        }, 50);
        setTimeout(() => done(), ms);
        return;
      }
      counts.ws++;
    });
    s.on("error", (e) => done(e));
    s.on("close", () => done());
  });
}

/** A download read in bursts with pauses: the proxy holds back (backpressure), the client gets every byte. */
function slowDownload(n: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const s = net.connect(proxyPort, "127.0.0.1");
    let got = -1;
    let head = "";
    s.on("connect", () => s.write(`GET http://${H}/big?n=${n} HTTP/1.1\r\nHost: ${H}\r\nConnection: close\r\n\r\n`));
    const t = setInterval(() => {
      s.pause();
      setTimeout(() => s.resume(), 1000);
    }, 1500);
    s.on("data", (d: Buffer) => {
      if (got < 0) {
        head += d.toString("latin1");
        const i = head.indexOf("\r\n\r\n");
        if (i >= 0) got = head.length - i - 4;
      } else got += d.length;
    });
    s.on("close", () => {
      clearInterval(t);
      if (got === n) {
        counts.slow++;
        resolve();
      } else reject(new Error(`slow download got ${got} of ${n}`));
    });
    s.on("error", () => {});
  });
}

function hostile(): Promise<void> {
  return new Promise((resolve) => {
    const s = net.connect(proxyPort, "127.0.0.1");
    s.on("connect", () => s.write("GET "));
    s.on("data", () => {});
    s.on("close", () => {
      counts.hostile++;
      resolve();
    });
    s.on("error", () => {});
  });
}

const loops: Promise<void>[] = [];
if (on("http")) for (let i = 0; i < 8; i++) loops.push(loop(() => get(`http://${H}/1k`, "http")));
if (on("https")) for (let i = 0; i < 4; i++) loops.push(loop(() => get(`https://localhost:${https.port}/1k`, "https")));
// large bodies at a steady pace (2 per second each): a realistic mix, not a throughput test of the capture store
if (on("big")) loops.push(
  loop(async () => {
    await get(`http://${H}/big?n=${8 * 1024 * 1024}`, "big");
    await Bun.sleep(500);
  }),
);
if (on("big")) loops.push(
  loop(async () => {
    const r = await fetch(`http://${H}/sink`, { proxy, method: "POST", body: BIG.subarray(0, 2 * 1024 * 1024) });
    await r.arrayBuffer();
    counts.upload++;
    await Bun.sleep(500);
  }),
);
if (on("ws")) for (let i = 0; i < 4; i++) loops.push(loop(() => wsSession(20_000)));
if (on("slow")) for (let i = 0; i < 2; i++) loops.push(loop(() => slowDownload(16 * 1024 * 1024)));
if (on("hostile")) loops.push(
  loop(async () => {
    void hostile();
    await Bun.sleep(1000);
  }),
);

// ---------------------------------------------------------------- sampling
function sample(): { rssMiB: number; fds: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const rssKiB = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return { rssMiB: rssKiB / 1024, fds: readdirSync(`/proc/${pid}/fd`).length };
}
const t0 = Date.now();
const samples: { min: number; rssMiB: number; fds: number }[] = [];
const fmt = (n: number, d = 1) => n.toFixed(d);
console.log("   min    RSS MiB   fds   http  https  big  upload    ws  slow  hostile  errors");
while (Date.now() < endAt) {
  await Bun.sleep(Math.min(sampleSecs * 1000, Math.max(0, endAt - Date.now())));
  if (tw.proc.exitCode !== null || tw.proc.signalCode !== null) {
    console.log(`tapwire exited (code ${tw.proc.exitCode}, signal ${tw.proc.signalCode}); its stderr ends with:\n${tw.stderr.slice(-40).join("\n")}`);
    process.exit(1);
  }
  const s = { min: (Date.now() - t0) / 60_000, ...sample() };
  samples.push(s);
  const c = counts;
  console.log(`${fmt(s.min, 2).padStart(6)} ${fmt(s.rssMiB).padStart(10)} ${String(s.fds).padStart(5)} ${String(c.http).padStart(6)} ${String(c.https).padStart(6)} ${String(c.big).padStart(4)} ${String(c.upload).padStart(7)} ${String(c.ws).padStart(5)} ${String(c.slow).padStart(5)} ${String(c.hostile).padStart(8)} ${String(c.errors).padStart(7)}`);
}
running = false;

/** Least-squares slope of y over x. */
function slope(points: [number, number][]): number {
  const n = points.length;
  if (n < 2) return NaN;
  const mx = points.reduce((a, p) => a + p[0], 0) / n;
  const my = points.reduce((a, p) => a + p[1], 0) / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? NaN : num / den;
}
const after = samples.filter((s) => s.min * 60 >= warmupSecs);
const rssSlope = slope(after.map((s) => [s.min, s.rssMiB]));
const fdSlope = slope(after.map((s) => [s.min, s.fds]));
console.log(`\nafter ${warmupSecs} s of warm-up (${after.length} samples): RSS slope ${fmt(rssSlope, 2)} MiB/min (goal < 1), fds slope ${fmt(fdSlope, 2)} /min (goal 0)`);
console.log(rssSlope < 1 && fdSlope <= 0.5 ? "flat: goal met" : "NOT flat: goal not met (or too few samples: run longer)");

await tw.stop();
await Promise.race([Promise.all(loops), Bun.sleep(5000)]);
http.stop(true);
https.stop(true);
rmSync(dataDir, { recursive: true, force: true });
process.exit(0);
