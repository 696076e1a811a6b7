// Issue 20: queries that can take long (list, search, export pages) run in the reader Worker, off the proxy's
// thread; with that worker gone they run on the main thread with the same code and the same answers.
import { afterAll, expect, test } from "bun:test";
import { existsSync, readdirSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { CaptureStore } from "../../src/store/capture-store.ts";
import type { ListQuery, NewEntry } from "../../src/store/types.ts";
import { tempDirs } from "../helpers/temp-dirs.ts";

const tmp = tempDirs("tapwire-reader-");
const stores: CaptureStore[] = [];
afterAll(async () => {
  for (const s of stores) await s.close();
});

const enc = new TextEncoder();
const WORDS = ["alpha", "beta", "Gamma", "delta", "invoice", "naïve", "ÉCOLE", "zq"];
function entry(i: number): NewEntry {
  // bodies above 1 KiB are stored compressed (checked in JavaScript by a search), smaller ones are not (SQL)
  const big = i % 3 !== 0;
  const text = `{"n":${i},"w":"${WORDS[i % WORDS.length]}","pad":"${(i % 7 === 0 ? "Needle-" : "") + "x".repeat(big ? 1500 : 50)}"}`;
  const body = enc.encode(text);
  return {
    method: i % 4 === 0 ? "POST" : "GET", url: `https://h${i % 5}.reader.test/p/${i}?q=${WORDS[(i + 3) % WORDS.length]}`,
    host: `h${i % 5}.reader.test`, status_code: i % 9 === 0 ? 404 : 200, content_type: "application/json", duration_ms: i % 50,
    timestamp: 1_700_000_000_000 + i, client_addr: "curl", has_response: true, req_headers: [["Host", "x"]],
    res_headers: [["Content-Type", "application/json"]], req_body: null, req_body_size: 0, res_body: body, res_body_size: body.length,
  };
}

const QUERIES: ListQuery[] = [
  {}, { limit: 7, offset: 30 }, { host: "H2" }, { method: "post", status_min: 200, status_max: 299 }, { path: "/p/1" },
  { search: "needle" }, { search: "NEEDLE", host: "h1" }, { search: "zq" }, { search: "a" }, { search: "école" },
  { search: "ÉCOLE" }, { search: "naïve" }, { search: "invoice", order: "asc", limit: 3 }, { since_id: 400 },
  { has_error: true, limit: 0 }, { search: "nothing-like-this" },
];

test("list and search answer the same in the reader worker and on the main thread; the event loop turns meanwhile", async () => {
  const s = await CaptureStore.open(join(tmp(), "capture.db"));
  stores.push(s);
  for (let i = 1; i <= 3000; i++) s.add(entry(i));
  await s.flush();
  // open() does not wait for the reader worker (queries run on the main thread until it is ready)
  await s.whenReaderReady();
  expect(s.readsOffThread).toBe(true);
  const inWorker = [];
  for (const q of QUERIES) inWorker.push(await s.list(q));
  // a search over every compressed body: the main thread's event loop turns while the worker works (an immediate
  // queued before the request runs before the answer can come; a search done on this thread inside list() would
  // settle in a microtask first, and no immediate would run). A timer here raced a fast answer.
  let ticks = 0;
  let turning = true;
  const tick = () => {
    ticks++;
    if (turning) setImmediate(tick);
  };
  setImmediate(tick);
  const scan = await s.list({ search: "q=" });
  turning = false;
  expect(scan.total).toBe(3000);
  expect(ticks).toBeGreaterThan(0);
  const exported: number[] = [];
  for await (const d of s.details({ search: "needle" })) exported.push(d.id);

  await s.stopReaderForTest();
  expect(s.readsOffThread).toBe(false);
  for (let i = 0; i < QUERIES.length; i++) expect({ q: QUERIES[i], r: await s.list(QUERIES[i]) }).toEqual({ q: QUERIES[i], r: inWorker[i] });
  const exportedHere: number[] = [];
  for await (const d of s.details({ search: "needle" })) exportedHere.push(d.id);
  expect(exportedHere).toEqual(exported);
  expect(exported.length).toBe(inWorker[5]!.total);
  // the answers are not trivially empty
  expect(inWorker[5]!.total).toBeGreaterThan(300);
  expect(inWorker[7]!.total).toBe(750); // in 375 bodies and 375 URLs
  expect(inWorker[9]!.total).toBe(0); // LIKE folds ASCII letters only: "école" does not find "ÉCOLE"
  expect(inWorker[10]!.total).toBe(750);
});

test("deferReader: no reader worker until startReaderWorker(); queries answer on the main thread meanwhile, the same after", async () => {
  const s = await CaptureStore.open(join(tmp(), "capture.db"), { deferReader: true });
  stores.push(s);
  for (let i = 1; i <= 300; i++) s.add(entry(i));
  await s.flush();
  await s.whenReaderReady(); // nothing to wait for: none was started
  expect(s.readsOffThread).toBe(false);
  const here = [];
  for (const q of QUERIES) here.push(await s.list(q));
  s.startReaderWorker();
  s.startReaderWorker(); // once
  await s.whenReaderReady();
  expect(s.readsOffThread).toBe(true);
  for (let i = 0; i < QUERIES.length; i++) expect({ q: QUERIES[i], r: await s.list(QUERIES[i]) }).toEqual({ q: QUERIES[i], r: here[i] });
  expect(here[5]!.total).toBeGreaterThan(30);
});

/** This process's open descriptors on the file at `path` (its -wal and -shm counted apart). */
function fdsOn(path: string): number {
  let n = 0;
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`) === path) n++;
    } catch {
      // closed meanwhile
    }
  }
  return n;
}

/** A file store in a new folder holding entries 1..n, all written, its reader Worker ready. */
async function filledStore(n: number): Promise<{ s: CaptureStore; path: string }> {
  const path = join(tmp(), "capture.db");
  const s = await CaptureStore.open(path);
  for (let i = 1; i <= n; i++) s.add(entry(i));
  await s.flush();
  await s.whenReaderReady();
  return { s, path };
}

/** Turns the event loop until `done()` holds (or 30 s have passed: the caller's expect then fails). */
async function until(done: () => boolean): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!done() && Date.now() < deadline) await new Promise((r) => setImmediate(r));
}

test.if(process.platform === "linux")("close() waits for the search helper to close its connection: no descriptor is left and the writer, closing last, removes the WAL", async () => {
  const { s, path } = await filledStore(50);
  const before = fdsOn(path);
  // the first page answered starts the helper (a second reader Worker with a connection of its own)
  await s.list({});
  await until(() => fdsOn(path) > before);
  expect(fdsOn(path)).toBeGreaterThan(before);
  await s.close();
  // a helper terminated with its connection open kept the file (and the WAL, not the last connection's) open;
  // a writer opening the file while that connection closed met SQLITE_BUSY
  expect(fdsOn(path)).toBe(0);
  expect(existsSync(path + "-wal")).toBe(false);
  const again = await CaptureStore.open(path);
  expect(again.count()).toBe(50);
  await again.close();
});

test.if(process.platform === "linux")("a reader Worker that dies is restarted; whenReaderReady and close() wait for the new one (no connection left behind)", async () => {
  const { s, path } = await filledStore(20);
  expect(s.readsOffThread).toBe(true);
  // a crash of the reader's thread (as the store sees it: the Worker ends without being asked to)
  (s as unknown as { readerWorker: Worker }).readerWorker.terminate();
  await until(() => !s.readsOffThread);
  expect(s.readsOffThread).toBe(false);
  // queries answer on this thread meanwhile, then in the new Worker
  expect((await s.list({ limit: 0 })).total).toBe(20);
  await s.whenReaderReady();
  expect(s.readsOffThread).toBe(true);
  expect((await s.list({ limit: 0 })).total).toBe(20);
  await s.close();
  expect(fdsOn(path)).toBe(0);
});
