/**
 * The search index filled with the batches (capture-db.ts insert, "inline"): while the index has no backlog, a
 * written batch is in the index in the same transaction, so the index mark follows the entries with no index
 * steps; while indexing is paused, or a backlog remains, the batches are left to the index steps, and search is
 * exact throughout.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { CaptureWriter, ftsTable } from "../../src/store/capture-db.ts";
import { CaptureStore } from "../../src/store/capture-store.ts";
import { BatchBuilder, batchBytes, type DecodedBatch, decodeBatch } from "../../src/store/entry-codec.ts";
import type { NewEntry } from "../../src/store/types.ts";
import { tempDir } from "../helpers/tapwire-process.ts";

const enc = new TextEncoder();
const open: CaptureStore[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

function entry(n: number): NewEntry {
  const body = enc.encode(JSON.stringify({ text: `item ${n} word${n % 13} ${"filler ".repeat(n % 300)}` }));
  return {
    method: "GET",
    url: `https://h${n % 5}.example/p/${n}`,
    host: `h${n % 5}.example`,
    status_code: 200,
    content_type: "application/json",
    duration_ms: 1,
    timestamp: 1_700_000_000_000 + n,
    client_addr: "curl",
    has_response: true,
    req_headers: [["Host", `h${n % 5}.example`]],
    res_headers: [["Content-Type", "application/json"]],
    req_body: null,
    req_body_size: 0,
    res_body: body,
    res_body_size: body.length,
  };
}

test("batches are indexed as they are written while there is no backlog; paused indexing leaves them to the steps", async () => {
  const s = await CaptureStore.open(":memory:", { maxEntries: 2500, maxPending: 100 });
  open.push(s);
  const ids: number[] = [];
  const expectSearch = async (word: string) => {
    const exp = ids.filter((id, i) => i % 13 === Number(word.slice(4))).reverse();
    const got = await s.list({ search: `${word} `, limit: 500 });
    expect({ word, total: got.total, ids: got.items.map((x) => x.id) }).toEqual({ word, total: exp.length, ids: exp.slice(0, 500) });
  };
  for (let n = 0; n < 1500; n++) ids.push(s.add(entry(n)));
  await s.flush();
  let st = await s.writerStatus();
  // no waitIndexed: the index mark is already at the last entry, and no index step ran
  expect(st.indexedUpto).toBe(st.maxId);
  expect(st.inlineIndexedRows).toBe(1500);
  expect(st.indexedRows).toBe(0);
  expect(st.generations).toBe(2); // generations of 1,000 ids (maxEntries 2,500 / 4, at least 1,000)
  await expectSearch("word7");

  await s.setIndexing(false);
  for (let n = 1500; n < 1800; n++) ids.push(s.add(entry(n)));
  await s.flush();
  st = await s.writerStatus();
  expect(st.indexedUpto).toBe(ids[1499]);
  await expectSearch("word3");

  // indexing again: the backlog goes through the steps, then batches are indexed as they come again
  await s.setIndexing(true);
  await s.waitIndexed();
  for (let n = 1800; n < 2000; n++) ids.push(s.add(entry(n)));
  await s.flush();
  st = await s.writerStatus();
  expect(st.indexedUpto).toBe(st.maxId);
  expect(st.indexedRows).toBe(300);
  expect(st.inlineIndexedRows).toBe(1700);
  for (const w of ["word0", "word12", "word5"]) await expectSearch(w);
});

describe("several journal records in one transaction (CaptureWriter.inOneTransaction)", () => {
  const batchOf = (b: BatchBuilder, from: number, n: number, bad = -1): DecodedBatch => {
    for (let id = from; id < from + n; id++) {
      // a null method passes the encoding but SQLite refuses it (NOT NULL): that entry fails alone
      b.add(id, { ...entry(id), method: id === bad ? (null as unknown as string) : "GET" });
    }
    const t = b.take()!;
    const bytes = batchBytes(b.ring, t).slice();
    if (!t.data) b.release();
    return decodeBatch(bytes);
  };
  const ftsRows = (w: CaptureWriter) =>
    (w.db.query("SELECT gen FROM fts_gens").all() as { gen: number }[]).reduce(
      (sum, { gen }) => sum + (w.db.query(`SELECT COUNT(*) AS n FROM ${ftsTable(gen)}`).get() as { n: number }).n,
      0,
    );

  test("a bad entry costs only itself; the rows go into the search index when the group ends; a failed group leaves nothing", () => {
    const w = new CaptureWriter(join(tempDir(), "g.db"), { maxEntries: 10_000, assigned: 0, idReserve: 100 });
    try {
      const b = new BatchBuilder();
      const res = w.inOneTransaction(() => [
        w.writeBatch(batchOf(b, 1, 50), 300),
        w.writeBatch(batchOf(b, 51, 50, 75), 300),
        w.writeBatch(batchOf(b, 101, 50), 300),
      ]);
      expect(res.map((r) => r.failed)).toEqual([0, 1, 0]);
      expect(w.stored).toBe(149);
      expect(w.indexedUpto).toBe(150);
      expect(w.backlog).toBe(false);
      expect(w.stats.inlineIndexedRows).toBe(149);
      expect(w.stats.indexSteps).toBe(0);
      expect(ftsRows(w)).toBe(149);
      expect(w.db.query("SELECT COUNT(*) AS n FROM entries WHERE id = 75").get()).toEqual({ n: 0 });

      // a group that fails midway (here: thrown after a batch) leaves nothing behind; the ids it saw stay taken,
      // so the next batch is left to the index steps (the mark is behind them), after which batches are indexed
      // with their write again
      expect(() =>
        w.inOneTransaction(() => {
          w.writeBatch(batchOf(b, 151, 50), 300);
          throw new Error("disk full");
        }),
      ).toThrow("disk full");
      expect(w.stored).toBe(149);
      expect(w.indexedUpto).toBe(150);
      expect(ftsRows(w)).toBe(149);
      expect(w.db.query("SELECT COUNT(*) AS n FROM entries WHERE id > 150").get()).toEqual({ n: 0 });
      w.writeBatch(batchOf(b, 201, 50), 300);
      expect(w.stored).toBe(199);
      expect(w.backlog).toBe(true);
      while (w.indexStep(100, 1000) > 0);
      expect(w.indexedUpto).toBe(250);
      expect(ftsRows(w)).toBe(199);
      w.writeBatch(batchOf(b, 251, 50), 400);
      expect(w.indexedUpto).toBe(300);
      expect(w.stats.inlineIndexedRows).toBe(199);
      expect(ftsRows(w)).toBe(249);
    } finally {
      w.close(300);
    }
  });
});

/** Polls the writer (each a round trip to its thread) until it has written every id up to `last`. */
async function writtenUpTo(s: CaptureStore, last: number) {
  const deadline = Date.now() + 60_000;
  let st = await s.writerStatus();
  while (st.maxId < last && Date.now() < deadline) {
    await new Promise((r) => setImmediate(r));
    st = await s.writerStatus();
  }
  return st;
}

test("the backlog of sustained traffic goes into the tables first once it pauses, the search index after; a short burst is indexed with its rows; search is exact throughout", async () => {
  // traffic counts as flowing for a second after a batch: the writer leaves what comes in its journal until then
  const s = await CaptureStore.open(":memory:", { maxEntries: 20_000, busyWindowMs: 1000 });
  open.push(s);
  const ids: number[] = [];
  // a short burst (well under CATCH_UP_TRAFFIC_MS, 2 s, of traffic), then the pause: written and indexed together
  for (let n = 0; n < 6000; n++) ids.push(s.add(entry(n)));
  let st = await writtenUpTo(s, ids[ids.length - 1]!);
  expect(st.inlineIndexedRows).toBe(6000);
  expect(st.indexedUpto).toBe(st.maxId);
  // traffic for 2.5 s without a pause (a batch every 50 ms), then the pause: the backlog (at least
  // CATCH_UP_ENTRIES, 5,000) goes into the tables without its index entries
  const began = Date.now();
  let n = 6000;
  while (Date.now() - began < 2500 || n < 12_000) {
    for (let k = 0; k < 250; k++) ids.push(s.add(entry(n++)));
    await new Promise((r) => setTimeout(r, 50));
  }
  const last = ids[ids.length - 1]!;
  st = await writtenUpTo(s, last);
  expect(st.maxId).toBe(last);
  expect(st.inlineIndexedRows).toBe(6000);
  const exp = ids.filter((_, i) => i % 13 === 4).reverse();
  const before = await s.list({ search: "word4 ", limit: 500 });
  expect({ total: before.total, ids: before.items.map((x) => x.id) }).toEqual({ total: exp.length, ids: exp.slice(0, 500) });
  await s.waitIndexed();
  st = await s.writerStatus();
  expect(st.indexedUpto).toBe(last);
  expect(st.indexedRows).toBe(ids.length - 6000);
  const after = await s.list({ search: "word4 ", limit: 500 });
  expect({ total: after.total, ids: after.items.map((x) => x.id) }).toEqual({ total: exp.length, ids: exp.slice(0, 500) });
}, 60_000);
