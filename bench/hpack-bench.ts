#!/usr/bin/env bun
/**
 * HPACK micro-benchmark (src/core/http2/hpack.ts): CPU ns per header block for decoding and encoding typical heads,
 * and the bytes per block, with tapwire's HTTP/1 head parser on the same heads as the reference (same run).
 *
 * Workloads (each a sequence of N blocks on one connection, so the dynamic table is used as it is in practice):
 *   browser-req   a Chromium-like GET (12 fields) whose :path differs in every request
 *   browser-res   a 200 with a date that changes, an etag and content-length per response (11 fields)
 *   grpc-req      a gRPC unary call (9 fields, the same method each time)
 *   grpc-res      a gRPC response head (3 fields)
 * For decode, the blocks are encoded once beforehand (with Huffman); one pass decodes the N blocks with a fresh
 * decoder. For encode, one pass encodes the N field lists with a fresh encoder (Huffman on, and off).
 * The reference, "h1-parse", parses the same head written as HTTP/1.1 (parseRequestHead / parseResponseHead).
 *
 * Time is main-thread CPU (process.threadCpuUsage(), read after process.cpuUsage()), per round; the median of
 * --rounds rounds (default 7) of --ms milliseconds each (default 300) is printed, with the min and max, the
 * workloads interleaved within each round.
 *
 * Usage: bun bench/hpack-bench.ts [--rounds 7] [--ms 300] [--n 100]
 */
import { parseArgs } from "node:util";
import { parseRequestHead, parseResponseHead } from "../src/core/http1/parse.ts";
import { HpackDecoder, HpackEncoder } from "../src/core/http2/hpack.ts";

const { values: args } = parseArgs({
  options: { rounds: { type: "string", default: "7" }, ms: { type: "string", default: "300" }, n: { type: "string", default: "100" } },
});
const ROUNDS = Number(args.rounds);
const MS = Number(args.ms);
const N = Number(args.n);

function cpuNs(): number {
  process.cpuUsage(); // brings the running thread's runtime up to date for threadCpuUsage()
  const t = process.threadCpuUsage();
  return (t.user + t.system) * 1000;
}

const UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
function browserReq(i: number): string[] {
  return [
    ":method", "GET", ":authority", "static.example.com", ":scheme", "https", ":path", `/assets/js/chunk-${(i * 7919) % 100000}.js?v=3`,
    "sec-ch-ua", '"Chromium";v="131", "Not_A Brand";v="24"', "sec-ch-ua-mobile", "?0", "user-agent", UA,
    "sec-ch-ua-platform", '"Linux"', "accept", "*/*", "sec-fetch-site", "same-site", "sec-fetch-mode", "no-cors",
    "sec-fetch-dest", "script", "referer", "https://www.example.com/", "accept-encoding", "gzip, deflate, br, zstd",
    "accept-language", "en-US,en;q=0.9",
  ];
}
function browserRes(i: number): string[] {
  return [
    ":status", "200", "date", `Sun, 29 Nov 2026 07:${String(10 + (i % 50)).padStart(2, "0")}:${String(i % 60).padStart(2, "0")} GMT`,
    "content-type", "application/javascript; charset=utf-8", "content-length", String(10000 + ((i * 131) % 90000)),
    "cache-control", "public, max-age=31536000, immutable", "etag", `"${(i * 2654435761 >>> 0).toString(16)}-5f3a"`,
    "last-modified", "Tue, 24 Nov 2026 10:00:00 GMT", "server", "nginx", "vary", "Accept-Encoding",
    "access-control-allow-origin", "*", "x-content-type-options", "nosniff",
  ];
}
function grpcReq(_i: number): string[] {
  return [
    ":method", "POST", ":scheme", "http", ":path", "/helloworld.Greeter/SayHello", ":authority", "localhost:50051",
    "content-type", "application/grpc", "te", "trailers", "grpc-accept-encoding", "identity,deflate,gzip",
    "user-agent", "grpc-node-js/1.12.0", "grpc-timeout", "10S",
  ];
}
function grpcRes(_i: number): string[] {
  return [":status", "200", "content-type", "application/grpc", "grpc-accept-encoding", "identity,deflate,gzip"];
}

function h1(fields: string[]): Uint8Array {
  const isReq = fields[0] === ":method";
  let s = "";
  let auth = "";
  for (let i = 0; i < fields.length; i += 2) if (fields[i] === ":authority") auth = fields[i + 1];
  if (isReq) s = `${fields[1]} ${fields[fields.indexOf(":path") + 1]} HTTP/1.1\r\nhost: ${auth}\r\n`;
  else s = `HTTP/1.1 ${fields[1]} OK\r\n`;
  for (let i = 0; i < fields.length; i += 2) if (fields[i][0] !== ":") s += `${fields[i]}: ${fields[i + 1]}\r\n`;
  return Buffer.from(s + "\r\n", "latin1");
}

interface Workload { name: string; lists: string[][]; blocks: Uint8Array[]; h1: Uint8Array[]; isReq: boolean }
const workloads: Workload[] = [
  ["browser-req", browserReq],
  ["browser-res", browserRes],
  ["grpc-req", grpcReq],
  ["grpc-res", grpcRes],
].map(([name, make]) => {
  const lists = Array.from({ length: N }, (_, i) => (make as (i: number) => string[])(i));
  const e = new HpackEncoder();
  const blocks = lists.map((l) => e.encode(l));
  // check: the blocks decode back to the lists
  const d = new HpackDecoder();
  for (let i = 0; i < N; i++) {
    const out: string[] = [];
    d.decode(blocks[i], 1 << 20, out);
    if (out.join("\n") !== lists[i].join("\n")) throw new Error(`${name}: block ${i} does not round trip`);
  }
  return { name: name as string, lists, blocks, h1: lists.map(h1), isReq: (name as string).endsWith("req") };
});

let sink = 0;
const ops: Record<string, (w: Workload) => void> = {
  decode(w) {
    const d = new HpackDecoder();
    const out: string[] = [];
    for (let i = 0; i < N; i++) {
      out.length = 0;
      d.decode(w.blocks[i], 1 << 20, out);
    }
    sink += out.length;
  },
  "encode-huffman"(w) {
    const e = new HpackEncoder();
    for (let i = 0; i < N; i++) sink += e.encodeView(w.lists[i]).length;
  },
  "encode-raw"(w) {
    const e = new HpackEncoder();
    e.huffman = false;
    for (let i = 0; i < N; i++) sink += e.encodeView(w.lists[i]).length;
  },
  "encode-copy"(w) {
    const e = new HpackEncoder();
    for (let i = 0; i < N; i++) sink += e.encode(w.lists[i]).length;
  },
  "h1-parse-ref"(w) {
    if (w.isReq) for (let i = 0; i < N; i++) sink += parseRequestHead(w.h1[i])!.end;
    else for (let i = 0; i < N; i++) sink += parseResponseHead(w.h1[i])!.end;
  },
};

// warm-up
for (const w of workloads) for (const op of Object.values(ops)) for (let k = 0; k < 200; k++) op(w);

const results = new Map<string, number[]>();
for (let r = 0; r < ROUNDS; r++) {
  for (const w of workloads) {
    for (const [opName, op] of Object.entries(ops)) {
      const budget = (MS / workloads.length / Object.keys(ops).length) * 1e6;
      let passes = 0;
      const t0 = cpuNs();
      let t = t0;
      while (t - t0 < budget) {
        for (let k = 0; k < 10; k++) op(w);
        passes += 10;
        t = cpuNs();
      }
      const key = `${w.name}\t${opName}`;
      if (!results.has(key)) results.set(key, []);
      results.get(key)!.push((t - t0) / (passes * N));
    }
  }
}

const med = (a: number[]) => [...a].sort((x, y) => x - y)[a.length >> 1];
console.log(`hpack-bench: ${N} blocks per pass, ${ROUNDS} rounds of ${MS} ms, main-thread CPU ns per block (median [min-max])`);
for (const w of workloads) {
  const raw = new HpackEncoder();
  raw.huffman = false;
  const rawBytes = w.lists.reduce((s, l) => s + raw.encode(l).length, 0) / N;
  const hBytes = w.blocks.reduce((s, b) => s + b.length, 0) / N;
  const h1Bytes = w.h1.reduce((s, b) => s + b.length, 0) / N;
  console.log(`\n${w.name}: ${w.lists[0].length / 2} fields; bytes per block: HPACK ${hBytes.toFixed(1)} (first ${w.blocks[0].length}), without Huffman ${rawBytes.toFixed(1)}, HTTP/1 head ${h1Bytes.toFixed(1)}`);
  for (const opName of Object.keys(ops)) {
    const a = results.get(`${w.name}\t${opName}`)!;
    console.log(`  ${opName.padEnd(16)} ${med(a).toFixed(0).padStart(6)} ns  [${Math.min(...a).toFixed(0)}-${Math.max(...a).toFixed(0)}]`);
  }
}
if (sink === 42) console.log("");
