#!/usr/bin/env bun
/**
 * Instructions per request of a proxy's main thread under valgrind's callgrind, for HTTP/2 with bursts of
 * concurrent streams over one connection (the shape of h2-bench.ts). Unlike CPU time, an instruction count does
 * not move with the load other processes put on a shared machine (h2-bench's CPU per request swung 2x between
 * rounds at load average 9-16); GC and JIT tiering still move it by up to ~10% between runs of 1,000 requests,
 * less over more requests: compare runs of a few thousand requests, and repeat.
 *
 * The proxy runs under `valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes`; instrumentation is
 * switched on (callgrind_control) only after the warm-up, for the measured requests; the origin (node:http2, 1 KiB
 * bodies) and this client run natively.
 *
 *   bun bench/h2-callgrind.ts [--dir CHECKOUT] [--requests 2000] [--warmup 3000] [--streams 100]
 *                             [--no-capture] [--relay] [--jitdump] [--keep]
 *     --dir       the tapwire checkout to measure (default: this one)
 *     --relay     measure bench/peers/bun-h2-relay.ts --batched instead of tapwire (the floor for a Bun h2 relay)
 *     --jitdump   also write JSC's jitdump (BUN_JSC_useJITDump) next to the callgrind files, to name JIT code
 *     --keep      keep the callgrind files (their directory is printed) for callgrind_annotate
 * Needs valgrind (apt-get install -y valgrind). Under callgrind the proxy handles ~10-20 requests a second: 2,000
 * requests take 3-6 minutes. Only the main thread's figure is comparable with production: at that rate the capture
 * writer commits tiny batches and the JIT threads run longer than they would.
 */
import http2 from "node:http2";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { connectTls, writeH2Origin } from "./h2-common.ts";
import { benchScratch, firstLine, measured, printPerRequest, requireCallgrind, startRelay, startTapwire } from "./callgrind-common.ts";

const { values: opt } = parseArgs({
  options: {
    dir: { type: "string", default: join(import.meta.dir, "..") },
    requests: { type: "string", default: "2000" },
    warmup: { type: "string", default: "3000" },
    streams: { type: "string", default: "100" },
    "no-capture": { type: "boolean", default: false },
    relay: { type: "boolean", default: false },
    jitdump: { type: "boolean", default: false },
    keep: { type: "boolean", default: false },
  },
});
const N = Number(opt.streams);
const BURSTS = Math.max(1, Math.round(Number(opt.requests) / N));
const WARM = Math.max(1, Math.round(Number(opt.warmup) / N));
const { tmp: TMP, kids, log } = benchScratch("h2-callgrind", opt.keep);
const OUT = join(TMP, "callgrind");
mkdirSync(OUT);
requireCallgrind();

const { ca, caFile, script: originScript } = writeH2Origin(TMP);

const origin = Bun.spawn([process.execPath, originScript], { stdout: "pipe", stderr: "inherit" });
kids.push(origin);
const originPort = JSON.parse(await firstLine(origin, /\n/)).port as number;

const started = opt.relay
  ? await startRelay(kids, OUT, opt.jitdump!, [join(opt.dir!, "bench/peers/bun-h2-relay.ts"), String(originPort), join(TMP, "cert.pem"), join(TMP, "key.pem"), caFile, "--batched"])
  : await startTapwire(kids, OUT, opt.jitdump!, opt.dir!, join(TMP, "data"), ["--upstream-ca", caFile], opt["no-capture"]!);
const proxy = { pid: started.pid, port: started.port, caPem: opt.relay ? ca.certPem : readFileSync(join(started.dataDir!, "ca.pem"), "utf8"), relay: opt.relay! };
log(`${opt.relay ? "relay" : "tapwire"} under callgrind (pid ${proxy.pid}), origin on ${originPort}`);

async function connect(): Promise<http2.ClientHttp2Session> {
  const t = await connectTls(originPort, proxy.caPem, proxy.relay ? { kind: "relay", port: proxy.port } : { kind: "connect", port: proxy.port });
  const s = http2.connect(`https://localhost:${originPort}`, { createConnection: () => t });
  s.on("error", () => {});
  return s;
}
/** Why requests failed (status, short body, stream error), counted: failed requests make the per-request figure meaningless. */
const failures = new Map<string, number>();
const failed = (why: string) => failures.set(why, (failures.get(why) ?? 0) + 1);
const one = (s: http2.ClientHttp2Session) =>
  new Promise<boolean>((res) => {
    const q = s.request({ ":method": "GET", ":path": "/1k" });
    let n = 0;
    let status = 0;
    q.on("response", (h) => (status = Number(h[":status"])));
    q.on("data", (c: Buffer) => (n += c.length));
    q.on("end", () => {
      if (n !== 1024) failed(`status ${status}, ${n} body bytes`);
      res(n === 1024);
    });
    q.on("error", (e: Error) => {
      failed(`stream error: ${e.message}`);
      res(false);
    });
    q.end();
  });
const burst = async (s: http2.ClientHttp2Session) => (await Promise.all(Array.from({ length: N }, () => one(s)))).filter(Boolean).length;

const session = await connect();
log(`warm-up: ${WARM} bursts of ${N}...`);
for (let i = 0; i < WARM; i++) await burst(session);
await Bun.sleep(1000);
log(`measuring: ${BURSTS} bursts of ${N}...`);
const { result: ok, secs } = await measured(proxy.pid, async () => {
  let n = 0;
  for (let i = 0; i < BURSTS; i++) n += await burst(session);
  return n;
});
if (failures.size) console.log(`FAILED requests (the figures below count successful ones only): ${[...failures].map(([w, n]) => `${n} x ${w}`).join("; ")}`);
printPerRequest(opt.relay ? "relay-batched" : `tapwire (${opt.dir})${opt["no-capture"] ? ", capture stopped" : ", capturing"}`, ok, secs, OUT, opt.keep!);
if (!existsSync(OUT)) process.exit(1);
process.exit(0);
