/**
 * The search index filled with the batches (capture-db.ts insert, "inline"): while the index has no backlog, a
 * written batch is in the index in the same transaction, so the index mark follows the entries with no index
 * steps; while indexing is paused, or a backlog remains, the batches are left to the index steps, and search is
 * exact throughout.
 */
import { afterEach, expect, test } from "bun:test";
import { CaptureStore } from "../../src/store/capture-store.ts";
import type { NewEntry } from "../../src/store/types.ts";

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
