/**
 * Capture store benchmark: fills a file-backed store with 100,000 realistic entries, then measures
 * - the main thread's cost of add() (µs/entry, including the postMessage of the batches to the writer Worker),
 * - the main thread's event-loop stall while 20,000 entries are written at full speed (max gap of a 1 ms
 *   setInterval), the writer evicting (store at capacity) and indexing meanwhile, and while scanning searches run
 *   (in the reader worker),
 * - list() latency (p50/p95 over 200 runs) for the queries the UI and pollers make, once indexed, and body
 *   search with an index backlog,
 * - the writer's own figures (batch transaction times, search indexing throughput).
 *
 * - the store's RSS after the query mix (SQLite's page cache and memory map are bounded: capture-db.ts), read in a
 *   process of its own that opens the kept database (bench/store-rss.ts: this one holds its 20,000 generated
 *   entries), the database's size per entry, and the time to open the full store again (no scan that grows with
 *   the store),
 * and ends with a line `RESULT {json}` (read by bench/all.ts).
 *
 *   node_modules/.bin/bun bench/store-bench.ts [entries] [keep-dir]
 *   node_modules/.bin/bun bench/store-bench.ts 1000000 /tmp/kept --stall-only [rounds]
 *
 * The second form fills the kept store only the first time (it reopens it after that), then measures the stall
 * at capacity `rounds` times, then again after a few reads, with the main thread's heap figures: for repeated
 * stall measurements at a size that takes minutes to fill. On Linux, each stall figure says how much of the
 * longest gap the main thread spent on a core (tapwire's own work, GC) and waiting for one (the machine's other
 * threads and processes had both cores): /proc/<pid>/task/<pid>/schedstat.
 */
import { ALLOCATOR_ENV } from "../src/cli/allocator.ts";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CaptureStore } from "../src/store/capture-store.ts";
import type { ListQuery, NewEntry } from "../src/store/types.ts";
import { entryMix, RARE_WORD } from "./store-mix.ts"; // RARE_WORD: in ~1% of response bodies

const N = Number(process.argv[2] ?? 100_000);
const RUNS = 200;
const NO_SIZE_BOUND = 64 * 1024 ** 3;

// the seeded entry mix (runs are comparable)
let rareCount = 0;
const mix = entryMix(undefined, () => rareCount++);
const makeEntry = (i: number, now: number): NewEntry => mix(i, now, N);

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

interface Row { name: string; p50: number; p95: number; max: number; items: string; total: string; runs: number }
const rows: Row[] = [];

async function measure(name: string, store: CaptureStore, makeQuery: (run: number) => ListQuery, runs = RUNS): Promise<Row> {
  const times: number[] = [];
  let items = 0, total = 0;
  await store.list(makeQuery(0)); // warm the statement cache
  for (let r = 0; r < runs; r++) {
    const q = makeQuery(r);
    const t0 = Bun.nanoseconds();
    const res = await store.list(q);
    times.push((Bun.nanoseconds() - t0) / 1e6);
    items += res.items.length;
    total += res.total;
  }
  times.sort((a, b) => a - b);
  const row = { name, p50: pct(times, 50), p95: pct(times, 95), max: times[times.length - 1]!, items: (items / runs).toFixed(0), total: (total / runs).toFixed(0), runs };
  rows.push(row);
  return row;
}

/** Main-thread time of `n` add() calls in a row (batches are posted inside add when maxPending are queued). */
function addCost(store: CaptureStore, entries: NewEntry[], n: number): number {
  const t0 = Bun.nanoseconds();
  for (let i = 0; i < n; i++) store.add(entries[i % entries.length]!);
  return (Bun.nanoseconds() - t0) / 1e3 / n;
}

/** The main thread's [ms on a core, ms waiting for one] so far (/proc/<pid>/task/<pid>/schedstat), or null. */
function schedReader(): (() => number[]) | null {
  const path = `/proc/${process.pid}/task/${process.pid}/schedstat`;
  try {
    readFileSync(path);
  } catch {
    return null;
  }
  return () => readFileSync(path, "latin1").split(" ").slice(0, 2).map((v) => Number(v) / 1e6);
}

function schedText(s: number[] | null, gap: number): string {
  if (!s) return "no scheduler figures here";
  return `${s[0]!.toFixed(1)} ms on a core, ${s[1]!.toFixed(1)} ms waiting for one, ${Math.max(0, gap - s[0]! - s[1]!).toFixed(1)} ms asleep or blocked`;
}

/**
 * Writes `n` entries as fast as the main thread allows, 100 per event-loop turn, while a 1 ms setInterval
 * records how late it fires: the largest gap is the longest the event loop was blocked.
 */
async function stall(store: CaptureStore, entries: NewEntry[], n: number): Promise<{ maxGap: number; p99Gap: number; writeMs: number; ackMs: number; maxAddMs: number; maxGapAt: number; maxGapSched: number[] | null }> {
  const gaps: number[] = [];
  let last = performance.now();
  let maxGapAt = 0;
  let maxGap = 0;
  // the main thread's scheduler figures (Linux), to tell, for the longest gap, time it ran (its own work or GC)
  // from time it waited for a core (run queue: other threads and processes had them) and time it was blocked
  const sched = schedReader();
  let lastSched = sched?.() ?? [0, 0];
  let maxGapSched = [0, 0];
  const iv = setInterval(() => {
    const now = performance.now();
    const ss = sched?.() ?? [0, 0];
    if (now - last > maxGap) {
      maxGap = now - last;
      maxGapAt = now - t0;
      maxGapSched = [ss[0]! - lastSched[0]!, ss[1]! - lastSched[1]!];
    }
    lastSched = ss;
    gaps.push(now - last);
    last = now;
  }, 1);
  const t0 = performance.now();
  let maxAddMs = 0; // the longest run of 100 add() (the store's own synchronous work on this thread)
  for (let i = 0; i < n; i += 100) {
    const ta = performance.now();
    for (let j = i; j < Math.min(n, i + 100); j++) store.add(entries[j % entries.length]!);
    maxAddMs = Math.max(maxAddMs, performance.now() - ta);
    await new Promise((r) => setImmediate(r));
  }
  const writeMs = performance.now() - t0;
  await store.flush(); // the writer has them all
  const ackMs = performance.now() - t0;
  clearInterval(iv);
  gaps.sort((a, b) => a - b);
  return { maxGap: gaps[gaps.length - 1]!, p99Gap: pct(gaps, 99), writeMs, ackMs, maxAddMs, maxGapAt, maxGapSched: sched ? maxGapSched : null };
}

// a second argument: keep the database in that directory (to measure a reopen later, e.g. after a change)
const KEEP = process.argv[3]?.startsWith("--") ? undefined : process.argv[3];
// `--stall-only [rounds]` (with a keep-dir): fill only if the kept store holds fewer than N entries, then measure
// the event-loop stall at capacity `rounds` times (default 3) with the heap figures around it, and stop
const STALL_AT = process.argv.indexOf("--stall-only");
const STALL_ONLY = STALL_AT > 0 && KEEP !== undefined;
const STALL_ROUNDS = Number(process.argv[STALL_AT + 1]) || 3;
const dir = KEEP ?? mkdtempSync(join(tmpdir(), "tapwire-store-bench-"));
try {
  const dbPath = join(dir, "capture.db");
  const now = Date.now();
  // entries are generated 10,000 at a time, between the timed parts of the fill (a million entries held at once
  // would need about 12 GB); the first 20,000 are kept for the later steps
  const entries: NewEntry[] = [];
  let genMs = 0;
  // the size bound (default 2 GiB) is lifted: the figures are for N entries stored, none evicted by size
  const store = await CaptureStore.open(dbPath, { maxEntries: N, maxStoreBytes: NO_SIZE_BOUND });
  let fillMs = 0;
  let fillMainMs = 0;
  let chunk: NewEntry[] = [];
  const skipFill = STALL_ONLY && store.count() >= N;
  if (skipFill) for (let j = 0; j < 20_000; j++) entries.push(makeEntry(j, now));
  for (let i = skipFill ? N : 0; i < N; i += 1000) {
    if (i % 10_000 === 0) {
      const tg = Bun.nanoseconds();
      chunk = [];
      for (let j = i; j < Math.min(N, i + 10_000); j++) chunk.push(makeEntry(j, now));
      if (entries.length < 20_000) entries.push(...chunk.slice(0, 20_000 - entries.length));
      genMs += (Bun.nanoseconds() - tg) / 1e6;
    }
    const tm = Bun.nanoseconds();
    for (const e of chunk.slice(i % 10_000, (i % 10_000) + 1000)) store.add(e);
    fillMainMs += (Bun.nanoseconds() - tm) / 1e6;
    // no faster than the writer: beyond 50,000 unacknowledged entries the store would drop new ones
    if (i % 10_000 === 9000 || i + 1000 >= N) await store.flush();
    else await new Promise((r) => setImmediate(r));
    fillMs += (Bun.nanoseconds() - tm) / 1e6;
  }
  chunk = [];
  if (!skipFill) console.log(`generated ${N} entries in ${(genMs / 1000).toFixed(1)} s (not counted in the fill)`);
  const ti = Bun.nanoseconds();
  await store.waitIndexed();
  const indexedMs = fillMs + (Bun.nanoseconds() - ti) / 1e6;
  const afterFill = await store.writerStatus();

  if (STALL_ONLY) {
    const { heapStats } = await import("bun:jsc");
    const mib = (b: number) => (b / 1048576).toFixed(0);
    const heap = () => {
      const h = heapStats();
      const m = process.memoryUsage();
      return `heap ${mib(h.heapSize)} MiB (${h.objectCount.toLocaleString("en")} objects), external ${mib(m.external)} MiB, rss ${mib(m.rss)} MiB`;
    };
    console.log(`store holds ${store.count()} (filled now: ${!skipFill}); before: ${heap()}`);
    for (let r = 0; r < STALL_ROUNDS * 2; r++) {
      if (r === STALL_ROUNDS) {
        // then the same after reads like the full run's (get(id) on this thread, pages and searches in the reader)
        const top = (await store.list({ limit: 1 })).items[0]!.id;
        for (let k = 0; k < 200; k++) await store.get(top - ((k * 7919) % N));
        for (let k = 0; k < 20; k++) await store.list({ host: "api" });
        for (let k = 0; k < 5; k++) await store.list({ search: RARE_WORD });
        await store.list({ search: "invoice" });
        await store.list({ search: "zq" });
        console.log(`after get(id) x200, 20 host pages, 7 searches: ${heap()}`);
      }
      const tg = performance.now();
      Bun.gc(true);
      const gcMs = performance.now() - tg;
      const s1 = await stall(store, entries, 20_000);
      await store.waitIndexed();
      console.log(`stall round ${r + 1}: max gap ${s1.maxGap.toFixed(1)} ms at ${s1.maxGapAt.toFixed(0)} ms, p99 ${s1.p99Gap.toFixed(1)} ms, (main thread in it: ${schedText(s1.maxGapSched, s1.maxGap)}), longest 100 add() ${s1.maxAddMs.toFixed(1)} ms, added in ${(s1.writeMs / 1000).toFixed(2)} s, acked ${(s1.ackMs / 1000).toFixed(2)} s; full GC before it ${gcMs.toFixed(0)} ms; ${heap()}`);
    }
    await store.close();
    process.exit(0);
  }

  const lastId = (await store.list({ limit: 1 })).items[0]!.id;
  const hostFragments = ["api", "github", "example", "amazonaws", "stripe", "google", "slack", "localhost"];
  const statusRanges: [number, number][] = [[200, 299], [400, 499], [300, 399], [500, 599]];

  const firstPage = await measure("first page, no filter", store, () => ({}));
  const hostOnly = await measure("host filter only", store, (r) => ({ host: hostFragments[r % hostFragments.length] }));
  const filtered = await measure("filtered: host+method+status range", store, (r) => ({
    host: hostFragments[r % hostFragments.length],
    method: r % 3 === 0 ? "post" : "GET",
    status_min: statusRanges[r % statusRanges.length]![0],
    status_max: statusRanges[r % statusRanges.length]![1],
  }));
  await measure("path filter (/users)", store, (r) => ({ path: r % 2 ? "/users" : "/orders/" }));
  await measure("since_id poll (20 new)", store, (r) => ({ since_id: lastId - 20 - (r % 5) }));
  await measure("since_id poll (2,000 behind)", store, () => ({ since_id: lastId - 2000 }));
  // a search string not searched before each run (substrings of the rare word: the same ~1% of the entries), so
  // that nothing the reader kept from an earlier search helps: what the first request of a search costs
  let freshAt = 0; // measure() warms up with one of them first
  const fresh = [9, 10, 11].flatMap((n) => Array.from({ length: RARE_WORD.length - n + 1 }, (_, i) => RARE_WORD.slice(i, i + n)));
  const coldSearch = await measure(`body search, first time (${fresh.length - 1} new substrings of ${RARE_WORD})`, store, () => ({ search: fresh[freshAt++ % fresh.length] }), fresh.length - 1);
  const search = await measure(`body search (${RARE_WORD}, ~1%), repeated`, store, () => ({ search: RARE_WORD }));
  await measure(`body search (${RARE_WORD}), next pages`, store, (r) => ({ search: RARE_WORD, offset: 50 * (1 + (r % 20)) }));
  await measure("body search + host filter", store, (r) => ({ search: RARE_WORD, host: hostFragments[r % hostFragments.length] }));
  await measure("search, common word (invoice, ~75%)", store, () => ({ search: "invoice" }), 20);
  await measure("search, 2 chars (full scan)", store, (r) => ({ search: r % 2 ? "zq" : "qx" }), 20);
  await measure("has_error=true, page 3", store, () => ({ has_error: true, offset: 100 }));
  await measure("since (last 10% of time range)", store, () => ({ since: now - N * 10 }));

  const getTimes: number[] = [];
  for (let r = 0; r < RUNS; r++) {
    const id = lastId - Math.floor((r * 7919) % N);
    const t = Bun.nanoseconds();
    await store.get(id);
    getTimes.push((Bun.nanoseconds() - t) / 1e6);
  }
  getTimes.sort((a, b) => a - b);
  rows.push({ name: "get(id) detail", p50: pct(getTimes, 50), p95: pct(getTimes, 95), max: getTimes[getTimes.length - 1]!, items: "1", total: "-", runs: RUNS });

  // the main thread's cost of add(), postMessage included: the store is at capacity, the writer evicts
  const addUs: number[] = [];
  for (let r = 0; r < 5; r++) {
    addUs.push(addCost(store, entries, 4000));
    await store.flush();
  }
  addUs.sort((a, b) => a - b);
  await store.waitIndexed();

  // event-loop stall while 20,000 entries are written (writer inserting, evicting and indexing meanwhile)
  const st = await stall(store, entries, 20_000);
  await store.waitIndexed();

  // event-loop stall while searches that scan run (a 2-character search: every compressed body decompressed), in
  // the reader worker: the main thread only waits for the answer
  const searchGaps: number[] = [];
  {
    let last = performance.now();
    const iv = setInterval(() => {
      const now = performance.now();
      searchGaps.push(now - last);
      last = now;
    }, 1);
    for (let r = 0; r < 3; r++) await store.list({ search: r % 2 ? "zq" : "qx" });
    clearInterval(iv);
    searchGaps.sort((a, b) => a - b);
  }
  const searchStall = searchGaps[searchGaps.length - 1] ?? 0;

  // an index backlog of 10,000 entries: searched by a scan of those, then caught up
  await store.setIndexing(false);
  for (const e of entries.slice(0, 10_000)) store.add(e);
  await store.flush();
  const backlogStatus = await store.writerStatus();
  const backlogSearch = await measure(`body search, ${backlogStatus.maxId - backlogStatus.indexedUpto} not indexed`, store, () => ({ search: RARE_WORD }), 20);
  await store.setIndexing(true);
  const tc = Bun.nanoseconds();
  await store.waitIndexed();
  const catchUpMs = (Bun.nanoseconds() - tc) / 1e6;

  const ws = await store.writerStatus();
  const count = store.count();
  Bun.gc(true);
  const rssAfterQueries = process.memoryUsage().rss;
  if (store.lastFlushError) console.log(`!! the store reported: ${store.lastFlushError.message}`);
  await store.close();
  const size = statSync(dbPath).size;
  // open again: the count comes from meta, nothing is scanned
  const to = Bun.nanoseconds();
  const reopened = await CaptureStore.open(dbPath, { maxEntries: N, maxStoreBytes: NO_SIZE_BOUND });
  const firstAfterOpen = await reopened.list({ limit: 50 });
  const reopenMs = (Bun.nanoseconds() - to) / 1e6;
  if (firstAfterOpen.total !== count) console.log(`!! reopened store counts ${firstAfterOpen.total}, expected ${count}`);
  await reopened.close();

  // the store's own RSS: this process holds its 20,000 generated entries, so another one opens the store, writes
  // 20,000 entries at capacity (not kept), runs the query mix and reads its RSS (bench/store-rss.ts)
  // with the allocator setting `tapwire start` runs with (src/cli/allocator.ts)
  const rssRun = Bun.spawnSync([process.execPath, join(import.meta.dir, "store-rss.ts"), dbPath, String(N)], { stderr: "inherit", env: { ...process.env, ...ALLOCATOR_ENV } });
  const rssOut = rssRun.stdout.toString();
  const rssLine = /^RESULT (.*)$/m.exec(rssOut);
  const storeRss = rssLine ? (JSON.parse(rssLine[1]!) as { rss_mib: number; rss_anon_mib: number | null; rss_file_mib: number | null }) : null;
  if (!storeRss) console.log(`!! bench/store-rss.ts gave no result (exit ${rssRun.exitCode}): ${rssOut.slice(-500)}`);

  const w = Math.max(...rows.map((r) => r.name.length));
  console.log();
  console.log(`entries: ${count} (rare word in ${rareCount} entries), db file ${(size / 1048576).toFixed(0)} MB, ${RUNS} runs per query unless noted`);
  console.log(`fill: ${N} add() in ${(fillMs / 1000).toFixed(2)} s = ${Math.round(N / (fillMs / 1000)).toLocaleString("en")} entries/s written (decode + insert; main thread busy ${(fillMainMs / 1000).toFixed(2)} s), indexed after ${(indexedMs / 1000).toFixed(2)} s`);
  console.log(`writer during fill: ${afterFill.batches} batches, avg ${(afterFill.batchMsTotal / afterFill.batches).toFixed(1)} ms, max ${afterFill.batchMsMax.toFixed(1)} ms; ${afterFill.indexSteps} index steps, max ${afterFill.indexMsMax.toFixed(1)} ms, ${afterFill.indexSteps ? Math.round(afterFill.indexedRows / (afterFill.indexMsTotal / 1000)).toLocaleString("en") : 0} entries/s indexed; ${afterFill.inlineIndexedRows ?? 0} indexed with their batch`);
  console.log(`add() on the main thread (postMessage included, at capacity): p50 ${pct(addUs, 50).toFixed(2)} µs/entry, worst of 5 runs ${addUs[addUs.length - 1]!.toFixed(2)} µs/entry`);
  console.log(`event-loop stall while 20,000 entries are written: max gap ${st.maxGap.toFixed(1)} ms (main thread in it: ${schedText(st.maxGapSched, st.maxGap)}), p99 gap ${st.p99Gap.toFixed(1)} ms (1 ms interval); added in ${(st.writeMs / 1000).toFixed(2)} s, all acknowledged after ${(st.ackMs / 1000).toFixed(2)} s`);
  console.log(`event-loop stall while 3 scanning searches run (reader worker): max gap ${searchStall.toFixed(1)} ms (1 ms interval)`);
  console.log(`index backlog of 10,000 caught up in ${(catchUpMs / 1000).toFixed(2)} s; writer totals: ${ws.batches} batches (max ${ws.batchMsMax.toFixed(1)} ms), ${ws.indexSteps} index steps (max ${ws.indexMsMax.toFixed(1)} ms)`);
  console.log();
  console.log(`${"query".padEnd(w)} | runs | p50 ms  | p95 ms  | max ms  | items | total`);
  console.log(`${"-".repeat(w)}-|------|---------|---------|---------|-------|------`);
  for (const r of rows) {
    console.log(`${r.name.padEnd(w)} | ${String(r.runs).padStart(4)} | ${r.p50.toFixed(2).padStart(7)} | ${r.p95.toFixed(2).padStart(7)} | ${r.max.toFixed(2).padStart(7)} | ${r.items.padStart(5)} | ${r.total}`);
  }
  console.log();
  console.log(`goal filtered page p50 < 10 ms: ${filtered.p50.toFixed(2)} ms ${filtered.p50 < 10 ? "OK" : "MISSED"}`);
  console.log(`goal body search p50 < 50 ms (indexed), first time: ${coldSearch.p50.toFixed(2)} ms ${coldSearch.p50 < 50 ? "OK" : "MISSED"}; repeated: ${search.p50.toFixed(2)} ms`);
  console.log(`body search with the backlog: p50 ${backlogSearch.p50.toFixed(2)} ms (slower, never wrong)`);
  console.log(`RSS after the query mix: this process ${(rssAfterQueries / 1048576).toFixed(0)} MiB (its 20,000 generated entries included); reopen + first page ${reopenMs.toFixed(0)} ms; disk ${(size / count).toFixed(0)} bytes/entry`);
  if (storeRss) console.log(`goal RSS < 300 MiB, the store alone (bench/store-rss.ts: 20,000 writes at capacity and the query mix in a process of its own): ${storeRss.rss_mib.toFixed(0)} MiB (anonymous ${storeRss.rss_anon_mib?.toFixed(0) ?? "?"}, file-backed incl. mapped pages ${storeRss.rss_file_mib?.toFixed(0) ?? "?"}) ${storeRss.rss_mib < 300 ? "OK" : "MISSED"}`);
  const result = {
    entries: count,
    fill_per_s: Math.round(N / (fillMs / 1000)),
    index_lag_s: (indexedMs - fillMs) / 1000,
    first_page_p50_ms: firstPage.p50,
    host_filter_p50_ms: hostOnly.p50,
    filtered_p50_ms: filtered.p50,
    search_p50_ms: coldSearch.p50,
    search_repeat_p50_ms: search.p50,
    stall_max_ms: st.maxGap,
    // of the longest gap: the main thread's time on a core (tapwire's work, GC) and waiting for one (the machine)
    stall_on_core_ms: st.maxGapSched?.[0] ?? null,
    stall_runqueue_ms: st.maxGapSched?.[1] ?? null,
    stall_blocked_ms: st.maxGapSched ? Math.max(0, st.maxGap - st.maxGapSched[0]! - st.maxGapSched[1]!) : null,
    search_stall_max_ms: searchStall,
    // the store alone (bench/store-rss.ts), and this process (which holds its 20,000 generated entries)
    rss_mib: storeRss?.rss_mib ?? null,
    rss_bench_process_mib: rssAfterQueries / 1048576,
    bytes_per_entry: size / count,
    reopen_ms: reopenMs,
  };
  console.log(`RESULT ${JSON.stringify(result)}`);
} finally {
  if (!KEEP) rmSync(dir, { recursive: true, force: true });
}
