#!/usr/bin/env bun
/**
 * Instructions per request of a proxy's main thread under valgrind's callgrind, for plain HTTP/1.1 keep-alive
 * (the shape of proxy-bench.ts's HTTP row: GET of a 1 KiB body from bench/bench-upstream.ts, absolute-form
 * through tapwire, origin-form through the bare relay). The HTTP/1 twin of bench/h2-callgrind.ts; an instruction
 * count does not move with the load other processes put on a shared machine, but GC and JIT tiering move it by
 * several % between runs: compare runs of a few thousand requests, and repeat.
 *
 *   bun bench/http1-callgrind.ts [--dir CHECKOUT] [--requests 4000] [--warmup 4000] [--connections 8]
 *                                [--no-capture] [--relay] [--jitdump] [--keep]
 *     --dir          the tapwire checkout to measure (default: this one)
 *     --connections  keep-alive client connections, each with one request in flight
 *     --relay        measure bench/peers/bun-relay.ts instead of tapwire (the floor for a Bun process in the path)
 *     --jitdump      also write JSC's jitdump (BUN_JSC_useJITDump) next to the callgrind files, to name JIT code:
 *                    the main thread's instructions are then also printed by area (HTTP/1 parse, capture, ...)
 *     --keep         keep the callgrind files (their directory is printed) for callgrind_annotate
 * The upstream and this client run natively. Only the main thread's figure is comparable with production: under
 * callgrind the capture writer commits tiny batches and the JIT threads run longer than they would.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { Socket } from "bun";
import { benchScratch, measured, printAreas, printPerRequest, requireCallgrind, startHttpUpstream, startRelay, startTapwire, type UnderCallgrind } from "./callgrind-common.ts";

const { values: opt } = parseArgs({
  options: {
    dir: { type: "string", default: join(import.meta.dir, "..") },
    requests: { type: "string", default: "4000" },
    warmup: { type: "string", default: "4000" },
    connections: { type: "string", default: "8" },
    "no-capture": { type: "boolean", default: false },
    relay: { type: "boolean", default: false },
    jitdump: { type: "boolean", default: false },
    keep: { type: "boolean", default: false },
  },
});
const C = Math.max(1, Number(opt.connections));
const { tmp: TMP, kids, log } = benchScratch("http1-callgrind", opt.keep);
const OUT = join(TMP, "callgrind");
mkdirSync(OUT);
requireCallgrind();

const upPort = await startHttpUpstream(TMP, kids);

const proxy: UnderCallgrind = opt.relay
  ? await startRelay(kids, OUT, opt.jitdump!, [join(opt.dir!, "bench/peers/bun-relay.ts"), String(upPort)])
  : await startTapwire(kids, OUT, opt.jitdump!, opt.dir!, join(TMP, "data"), [], opt["no-capture"]!);
log(`${opt.relay ? "relay" : "tapwire"} under callgrind (pid ${proxy.pid}), upstream on ${upPort}`);

const target = opt.relay ? "/1k.txt" : `http://127.0.0.1:${upPort}/1k.txt`;
const REQUEST = new TextEncoder().encode(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1:${upPort}\r\nUser-Agent: http1-callgrind\r\nAccept: */*\r\n\r\n`);

/** One keep-alive connection sending its requests one at a time; counts responses with a 200 and 1,024 body bytes. */
interface Conn {
  buf: string;
  left: number;
  ok: number;
  done: () => void;
}
/** Status lines of the responses that were not a 200 with 1,024 bytes, and connections that ended early. */
const notOk: string[] = [];
let endedEarly = 0;
function finishResponse(s: Socket<Conn>): void {
  const c = s.data;
  for (;;) {
    const end = c.buf.indexOf("\r\n\r\n");
    if (end < 0) return;
    const m = /\r\ncontent-length: *(\d+)/i.exec(c.buf.slice(0, end));
    const len = m ? Number(m[1]) : 0;
    if (c.buf.length < end + 4 + len) return;
    if (c.buf.startsWith("HTTP/1.1 200") && len === 1024) c.ok++;
    else notOk.push(c.buf.slice(0, c.buf.indexOf("\r\n")));
    c.buf = c.buf.slice(end + 4 + len);
    if (--c.left > 0) s.write(REQUEST);
    else return c.done();
  }
}
async function run(total: number): Promise<number> {
  const per = Math.ceil(total / C);
  const counts = await Promise.all(
    Array.from(
      { length: C },
      () =>
        new Promise<number>((resolve, reject) => {
          const data: Conn = { buf: "", left: per, ok: 0, done: () => {} };
          Bun.connect<Conn>({
            hostname: "127.0.0.1",
            port: proxy.port,
            data,
            socket: {
              open(s) {
                s.data.done = () => {
                  s.end();
                  resolve(s.data.ok);
                };
                s.write(REQUEST);
              },
              data(s, d) {
                s.data.buf += d.toString("latin1");
                finishResponse(s);
              },
              close(s) {
                if (s.data.left > 0) {
                  endedEarly++;
                  resolve(s.data.ok);
                }
              },
              error(_s, e) {
                reject(e);
              },
            },
          }).catch(reject);
        }),
    ),
  );
  return counts.reduce((a, b) => a + b, 0);
}

log(`warm-up: ${opt.warmup} requests on ${C} connections...`);
await run(Number(opt.warmup));
await Bun.sleep(1000);
log(`measuring: ${opt.requests} requests on ${C} connections...`);
const { result: ok, secs } = await measured(proxy.pid, () => run(Number(opt.requests)));
const label = opt.relay ? "relay (bench/peers/bun-relay.ts)" : `tapwire (${opt.dir})${opt["no-capture"] ? ", capture stopped" : ", capturing"}`;
if (notOk.length || endedEarly) log(`not counted: ${notOk.length} responses other than 200 with 1,024 bytes (${[...new Set(notOk)].slice(0, 3).join("; ")}), ${endedEarly} connections ended before their last request`);
printPerRequest(label, ok, secs, OUT, opt.keep!);
printAreas(OUT, ok, join(opt.dir!, "src"));
process.exit(ok > 0 ? 0 : 1);
