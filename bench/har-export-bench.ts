/**
 * HAR export benchmark: GET /api/v1/traffic/export.har of 100,000 entries streams without holding the export in
 * memory. A service runs in this process on a temporary data directory; its capture store is filled with N
 * realistic entries (1-3 KiB bodies, some binary, some gzip-decoded); then the export is read through the API by curl
 * (its own process, writing to /dev/null), while this process's RSS is sampled every 20 ms. Target: peak RSS growth
 * under 64 MB. The anonymous part is printed too: the rest is SQLite's memory-mapped database file (page cache).
 *
 * Reference, in the same run: the in-memory way (every detail fetched, buildHar, JSON.stringify), as `tapwire run
 * --har` did before, measured on N/10 entries (the full N would need several GB).
 *
 *   node_modules/.bin/bun bench/har-export-bench.ts [entries]
 */
import { rmSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { buildHar } from "../src/features/traffic/har.ts";
import { DEFAULTS, type ServiceConfig } from "../src/service/config.ts";
import { TapwireService } from "../src/service/service.ts";
import type { EntryDetail, NewEntry } from "../src/store/types.ts";
import { tempDir } from "../tests/helpers/tapwire-process.ts";

const N = Number(process.argv[2] ?? 100_000);
const MB = 1024 * 1024;

let seed = 0x1234567;
function rnd(): number {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) / 0x100000000;
}
const enc = new TextEncoder();

function entry(i: number): NewEntry {
  const kind = rnd();
  const size = 1024 + Math.floor(rnd() * 2048);
  const text = JSON.stringify({ id: i, items: Array.from({ length: Math.floor(size / 40) }, (_, k) => ({ k, v: `value-${i}-${k}` })) });
  let resBody: Uint8Array = enc.encode(text);
  const resHeaders: [string, string][] = [["Content-Type", "application/json"], ["Date", new Date().toUTCString()]];
  if (kind < 0.1) {
    resBody = new Uint8Array(size).map(() => Math.floor(rnd() * 256));
    resHeaders[0] = ["Content-Type", "image/png"];
  } else if (kind < 0.3) {
    resBody = gzipSync(resBody);
    resHeaders.push(["Content-Encoding", "gzip"]);
  }
  resHeaders.push(["Content-Length", String(resBody.length)]);
  const host = `api${i % 7}.example.test`;
  return {
    method: i % 5 === 0 ? "POST" : "GET",
    url: `https://${host}/v1/items/${i}?page=${i % 10}`,
    host,
    status_code: i % 13 === 0 ? 404 : 200,
    content_type: resHeaders[0]![1],
    duration_ms: 5 + (i % 50),
    timestamp: Date.now() - (N - i) * 10,
    client_addr: "bench",
    has_response: true,
    req_headers: [["Host", host], ["User-Agent", "bench/1"], ["Accept", "*/*"], ["Cookie", "sid=abc; theme=dark"]],
    res_headers: resHeaders,
    req_body: i % 5 === 0 ? enc.encode(`a=${i}&b=two`) : null,
    req_body_size: i % 5 === 0 ? `a=${i}&b=two`.length : 0,
    res_body: resBody,
    res_body_size: resBody.length,
    extra: { timings: { blocked: 0.1, dns: -1, connect: -1, ssl: -1, send: 0.05, wait: 3, receive: 1 }, server_ip: "10.0.0.1", connection_id: String(i % 32), http_version: "HTTP/1.1" },
  };
}

function rss(): number {
  return process.memoryUsage().rss;
}

/** RssAnon and RssFile of /proc/self/status (bytes): heap and other private memory vs mapped files (SQLite's mmap). */
function rssParts(): { anon: number; file: number } {
  const s = require("node:fs").readFileSync("/proc/self/status", "utf8") as string;
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, "m").exec(s)?.[1] ?? 0) * 1024;
  return { anon: kb("RssAnon"), file: kb("RssFile") + kb("RssShmem") };
}

/** Runs fn while sampling RSS every 20 ms; returns fn's result and the peak RSS seen. */
async function sampled<T>(fn: () => Promise<T>): Promise<{ value: T; peak: number; peakAnon: number }> {
  let peak = rss();
  let peakAnon = rssParts().anon;
  const sample = () => {
    peak = Math.max(peak, rss());
    peakAnon = Math.max(peakAnon, rssParts().anon);
  };
  const timer = setInterval(sample, 20);
  try {
    const value = await fn();
    sample();
    return { value, peak, peakAnon };
  } finally {
    clearInterval(timer);
  }
}

const dataDir = tempDir("tapwire-har-bench-");
const config: ServiceConfig = { ...DEFAULTS, dataDir, proxyPort: 0, upstreamInsecure: false, upstreamCa: [], mockPort: null, maxEntries: Math.max(N, 100_000) } as ServiceConfig;
const svc = new TapwireService(config, () => {});
await svc.start();
const url = (p: string) => `http://127.0.0.1:${svc.apiPort}/api/v1${p}`;
const auth = { authorization: `Bearer ${svc.token}` };

try {
  let t = performance.now();
  for (let i = 1; i <= N; i++) {
    svc.store.add(entry(i));
    if (i % 5000 === 0) await svc.store.flush();
  }
  await svc.store.flush();
  // the writer Worker indexes bodies for search in the background (same process): let it finish first
  await svc.store.waitIndexed();
  console.log(`filled ${N} entries in ${((performance.now() - t) / 1000).toFixed(1)} s`);

  Bun.gc(true);
  await Bun.sleep(200);
  const base = rss();
  const baseAnon = rssParts().anon;
  t = performance.now();
  // the client is curl in its own process: what is measured is the service's memory alone
  const { value: bytes, peak, peakAnon } = await sampled(async () => {
    const p = Bun.spawn(["curl", "-sS", "--fail", "-o", "/dev/null", "-w", "%{size_download}", "-H", `Authorization: Bearer ${svc.token}`, url("/traffic/export.har")], { stdout: "pipe", stderr: "pipe" });
    const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
    if (code !== 0) throw new Error(`curl failed (${code}): ${err}`);
    return Number(out);
  });
  const secs = (performance.now() - t) / 1000;
  const streamGrowth = (peak - base) / MB;
  const streamAnon = (peakAnon - baseAnon) / MB;

  // reference: the in-memory way on N/10 entries
  const M = Math.max(1, Math.floor(N / 10));
  Bun.gc(true);
  await Bun.sleep(200);
  const base2 = rss();
  const baseAnon2 = rssParts().anon;
  const t2 = performance.now();
  const { value: refBytes, peak: peak2, peakAnon: peakAnon2 } = await sampled(async () => {
    const details: EntryDetail[] = [];
    for (let id = 1; id <= M; id++) {
      const r = await fetch(url(`/traffic/${id}`), { headers: auth });
      details.push((await r.json()) as EntryDetail);
    }
    return JSON.stringify(buildHar(details, { version: svc.version })).length;
  });
  const secs2 = (performance.now() - t2) / 1000;
  const refGrowth = (peak2 - base2) / MB;
  const refAnon = (peakAnon2 - baseAnon2) / MB;

  console.log("");
  console.log(`                                 entries   HAR size    time   RSS growth (peak)  of it anonymous`);
  console.log(
    `streamed GET /traffic/export.har ${String(N).padStart(7)}  ${(bytes / MB).toFixed(0).padStart(6)} MB  ${secs.toFixed(1).padStart(5)} s  ${streamGrowth.toFixed(1).padStart(9)} MB  ${streamAnon.toFixed(1).padStart(9)} MB   (target < 64 MB)`,
  );
  console.log(
    `reference: in memory (buildHar)  ${String(M).padStart(7)}  ${(refBytes / MB).toFixed(0).padStart(6)} MB  ${secs2.toFixed(1).padStart(5)} s  ${refGrowth.toFixed(1).padStart(9)} MB  ${refAnon.toFixed(1).padStart(9)} MB   (~${((refGrowth * N) / M).toFixed(0)} MB at ${N})`,
  );
  console.log(`\nstreamed export: ${(N / secs).toFixed(0)} entries/s, ${(bytes / MB / secs).toFixed(1)} MB/s; ${streamGrowth < 64 ? "PASS" : "FAIL"}: RSS growth ${streamGrowth.toFixed(1)} MB`);
} finally {
  await svc.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
