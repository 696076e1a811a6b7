/**
 * The capture store's own memory after a query mix, in a process that holds nothing else: opens a kept store
 * (e.g. the one bench/store-bench.ts just filled and closed), writes 20,000 more entries at capacity (the writer
 * evicting and indexing; each entry is generated when added and not kept), runs the query mix of store-bench.ts
 * (pages, filters, since_id polls, searches, first-time and repeated, scanning ones, get(id)), collects the
 * garbage, and reads the process's RSS: the main thread, the writer and the reader Workers, SQLite's page caches
 * and its memory-mapped pages (file-backed resident pages count in RSS). Ends with `RESULT {json}`.
 *
 *   node_modules/.bin/bun bench/store-rss.ts DB_PATH [maxEntries]
 *
 * store-bench.ts runs it on its database once its own store is closed: its own process holds its 20,000
 * generated entries (~90 MiB of heap), which are the bench's, not the store's.
 */
import { readFileSync } from "node:fs";
import { CaptureStore } from "../src/store/capture-store.ts";
import { entryMix, RARE_WORD } from "./store-mix.ts";

const dbPath = process.argv[2];
if (!dbPath) {
  console.error("usage: bench/store-rss.ts DB_PATH [maxEntries]");
  process.exit(2);
}
const NO_SIZE_BOUND = 64 * 1024 ** 3;

/** VmRSS and its parts (anonymous, file-backed: the memory map, shared) from /proc/self/status, in MiB (Linux). */
function rssParts(): Record<string, number> {
  const out: Record<string, number> = {};
  try {
    for (const line of readFileSync("/proc/self/status", "latin1").split("\n")) {
      const m = /^(VmRSS|RssAnon|RssFile|RssShmem|VmHWM):\s+(\d+) kB/.exec(line);
      if (m) out[m[1]!] = Number(m[2]) / 1024;
    }
  } catch {
    // not Linux: process.memoryUsage() only
  }
  return out;
}

const before = process.memoryUsage().rss;
// maxEntries: given, or what the store holds (then it is opened twice)
let N = Number(process.argv[3]);
if (!(N > 0)) {
  const probe = await CaptureStore.open(dbPath, { maxEntries: Number.MAX_SAFE_INTEGER, maxStoreBytes: NO_SIZE_BOUND });
  N = probe.count();
  await probe.close();
}
const store = await CaptureStore.open(dbPath, { maxEntries: N, maxStoreBytes: NO_SIZE_BOUND });
const rssOpen = process.memoryUsage().rss;

// 20,000 entries written at capacity, generated one by one (none kept)
const mix = entryMix(0x1234567);
const now = Date.now();
for (let i = 0; i < 20_000; i += 100) {
  for (let j = i; j < i + 100; j++) store.add(mix(j, now, N));
  if (i % 5000 === 4900) await store.flush();
  else await new Promise((r) => setImmediate(r));
}
await store.flush();
await store.waitIndexed();

const lastId = (await store.list({ limit: 1 })).items[0]!.id;
const hostFragments = ["api", "github", "example", "amazonaws", "stripe", "google", "slack", "localhost"];
const statusRanges: [number, number][] = [[200, 299], [400, 499], [300, 399], [500, 599]];
const t0 = performance.now();
for (let r = 0; r < 20; r++) {
  await store.list({});
  await store.list({ host: hostFragments[r % hostFragments.length] });
  await store.list({
    host: hostFragments[r % hostFragments.length],
    method: r % 3 === 0 ? "post" : "GET",
    status_min: statusRanges[r % statusRanges.length]![0],
    status_max: statusRanges[r % statusRanges.length]![1],
  });
  await store.list({ path: r % 2 ? "/users" : "/orders/" });
  await store.list({ since_id: lastId - 20 - (r % 5) });
  await store.list({ since_id: lastId - 2000 });
  await store.list({ has_error: true, offset: 100 });
  await store.list({ since: now - N * 10 });
}
const fresh = [9, 10, 11].flatMap((n) => Array.from({ length: RARE_WORD.length - n + 1 }, (_, i) => RARE_WORD.slice(i, i + n)));
for (const s of fresh) await store.list({ search: s });
for (let r = 0; r < 20; r++) {
  await store.list({ search: RARE_WORD, offset: 50 * (r % 20) });
  await store.list({ search: RARE_WORD, host: hostFragments[r % hostFragments.length] });
}
await store.list({ search: "invoice" });
await store.list({ search: "zq" });
await store.list({ search: "qx" });
for (let r = 0; r < 200; r++) await store.get(lastId - Math.floor((r * 7919) % N));
const mixMs = performance.now() - t0;

Bun.gc(true);
const rss = process.memoryUsage().rss;
const parts = rssParts();
const count = store.count();
await store.close();
const mib = (b: number) => b / 1048576;
console.log(
  `store RSS after 20,000 writes at capacity and the query mix (${(mixMs / 1000).toFixed(1)} s), ${count} entries: ` +
    `${mib(rss).toFixed(0)} MiB (anonymous ${parts.RssAnon?.toFixed(0) ?? "?"}, file-backed incl. the memory map ` +
    `${parts.RssFile?.toFixed(0) ?? "?"}, shared ${parts.RssShmem?.toFixed(0) ?? "?"}; peak ${parts.VmHWM?.toFixed(0) ?? "?"}); ` +
    `at start ${mib(before).toFixed(0)} MiB, after open ${mib(rssOpen).toFixed(0)} MiB`,
);
console.log(`RESULT ${JSON.stringify({ entries: count, rss_mib: mib(rss), rss_anon_mib: parts.RssAnon ?? null, rss_file_mib: parts.RssFile ?? null, rss_peak_mib: parts.VmHWM ?? null, rss_start_mib: mib(before) })}`);
process.exit(0);
