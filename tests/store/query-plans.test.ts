// Issue 20 (queries at 1M entries): the plans list() picks by the density of the matches (an id-ordered walk that
// stops once the page is full, or an index), the host filter's count from the hosts table, host+method+status
// seeks, and the kept ids of a search (extended with new entries, trimmed by eviction, dropped on delete, clear
// and reopen). Every answer is compared with a plain filter over what was added.
import { afterAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { CaptureStore } from "../../src/store/capture-store.ts";
import type { ListQuery, NewEntry } from "../../src/store/types.ts";
import { tempDirs } from "../helpers/temp-dirs.ts";

const tmp = tempDirs("tapwire-query-plans-");
const stores: CaptureStore[] = [];
afterAll(async () => {
  for (const s of stores) await s.close().catch(() => undefined);
});

const enc = new TextEncoder();

interface Known {
  id: number;
  host: string;
  method: string;
  status: number;
  text: string;
  url: string;
}

function make(i: number, host: string, word: string): { e: NewEntry; k: Omit<Known, "id"> } {
  const method = ["GET", "GET", "POST", "delete"][i % 4]!;
  const status = [200, 201, 404, 500, 200, 302][i % 6]!;
  // every third body passes 1 KiB: stored compressed, checked in JavaScript by a search
  const text = `{"i":${i},"w":"${word}","pad":"${"z".repeat(i % 3 === 0 ? 1200 : 20)}"}`;
  const body = enc.encode(text);
  const url = `https://${host}/p/${i}`;
  return {
    e: {
      method, url, host, status_code: status, content_type: "application/json", duration_ms: 1, timestamp: 1_700_000_000_000 + i,
      client_addr: "curl", has_response: true, req_headers: [["Host", host]], res_headers: [["Content-Type", "application/json"]],
      req_body: null, req_body_size: 0, res_body: body, res_body_size: body.length,
    },
    k: { host, method, status, text, url },
  };
}

function expected(known: Known[], q: ListQuery): number[] {
  const lower = (x: string) => x.replace(/[A-Z]/g, (c) => c.toLowerCase());
  const m = known.filter((k) => {
    if (q.host !== undefined && !k.host.toLowerCase().includes(q.host.toLowerCase())) return false;
    if (q.method !== undefined && k.method.toLowerCase() !== q.method.toLowerCase()) return false;
    if (q.status !== undefined && k.status !== q.status) return false;
    if (q.status_min !== undefined && k.status < q.status_min) return false;
    if (q.status_max !== undefined && k.status > q.status_max) return false;
    if (q.has_error !== undefined && (k.status >= 400) !== q.has_error) return false;
    if (q.since_id !== undefined && !(k.id > q.since_id)) return false;
    if (q.search !== undefined && ![k.url, k.text].some((t) => lower(t).includes(lower(q.search!)))) return false;
    return true;
  });
  const asc = q.order ? q.order === "asc" : q.since_id !== undefined;
  return m.map((k) => k.id).sort((a, b) => (asc ? a - b : b - a));
}

async function check(s: CaptureStore, known: Known[], q: ListQuery, pages: [number, number][] = [[50, 0], [7, 3]]): Promise<number> {
  const exp = expected(known, q);
  for (const [limit, offset] of pages) {
    const r = await s.list({ ...q, limit, offset });
    expect({ q, limit, offset, ids: r.items.map((i) => i.id), total: r.total }).toEqual({
      q, limit, offset, ids: exp.slice(offset, offset + limit), total: exp.length,
    });
  }
  return exp.length;
}

describe("plans by density (6,000 entries: old hosts first, new hosts last, a rare host spread out)", () => {
  const known: Known[] = [];
  let s: CaptureStore;

  test("fill", async () => {
    s = await CaptureStore.open(join(tmp(), "capture.db"));
    stores.push(s);
    for (let i = 1; i <= 6000; i++) {
      // matches clustered at either end: a window of the newest (or oldest) ids holds none of them
      const host = i % 200 === 7 ? "rare.spread.test" : i <= 3000 ? `old${i % 3}.cluster.test` : `new${i % 3}.cluster.test`;
      const { e, k } = make(i, host, i % 50 === 0 ? "Needle" : "hay");
      expect(s.add(e)).toBe(i);
      known.push({ id: i, ...k });
    }
    await s.flush();
    await s.waitIndexed();
  });

  test("host alone: dense, clustered at the other end, rare, none, all", async () => {
    expect(await check(s, known, { host: "new" })).toBe(2985);
    expect(await check(s, known, { host: "OLD" })).toBe(2985);
    expect(await check(s, known, { host: "old", order: "asc" })).toBe(2985);
    expect(await check(s, known, { host: "new", order: "asc" })).toBe(2985);
    expect(await check(s, known, { host: "new1.cluster" })).toBeGreaterThan(900);
    expect(await check(s, known, { host: "old2.cluster" }, [[50, 0], [50, 980], [500, 700]])).toBeGreaterThan(900);
    expect(await check(s, known, { host: "rare" })).toBe(30);
    expect(await check(s, known, { host: "nowhere" })).toBe(0);
    expect(await check(s, known, { host: "." }, [[50, 0], [50, 5990], [20, 2990]])).toBe(6000);
    expect(await check(s, known, { host: "new" }, [[0, 0], [3, 2984]])).toBe(2985);
  });

  test("host with method and status: seeks on the status codes present", async () => {
    expect(await check(s, known, { host: "old", method: "get", status_min: 200, status_max: 299 })).toBeGreaterThan(500);
    expect(await check(s, known, { host: "new", method: "POST", status: 201 })).toBe(0); // POST: i even; 201: i odd
    expect(await check(s, known, { host: "cluster", method: "Delete" })).toBeGreaterThan(1000);
    expect(await check(s, known, { host: "rare", status_min: 400 })).toBeGreaterThan(0);
    expect(await check(s, known, { host: "cluster", has_error: true, status_max: 450 })).toBeGreaterThan(0);
    expect(await check(s, known, { host: "cluster", has_error: false, method: "get" })).toBeGreaterThan(0);
    expect(await check(s, known, { host: "old", status_min: 199.5, status_max: 201.5 })).toBeGreaterThan(0);
    expect(await check(s, known, { host: "old", status_min: 600 })).toBe(0);
    expect(await check(s, known, { host: "old", status_min: 300, status_max: 200 })).toBe(0);
    expect(await check(s, known, { host: "new", method: "GET", since_id: 5500 })).toBeGreaterThan(0);
  });

  test("method and status without host, dense and clustered", async () => {
    expect(await check(s, known, { method: "GET" })).toBe(3000);
    expect(await check(s, known, { status: 302, order: "asc" })).toBe(1000);
    expect(await check(s, known, { method: "post", status: 200 })).toBeGreaterThan(0);
    expect(await check(s, known, { method: "post", status: 201 })).toBe(0);
  });
});

describe("a search's kept ids", () => {
  test("extended with new entries, trimmed by eviction, dropped by delete, clear and reopen; polls and pages exact", async () => {
    const path = join(tmp(), "capture.db");
    const max = 1500;
    let s = await CaptureStore.open(path, { maxEntries: max });
    stores.push(s);
    let known: Known[] = [];
    let next = 1;
    const add = (n: number) => {
      for (let i = 0; i < n; i++) {
        const id = next++;
        const { e, k } = make(id, `h${id % 4}.kept.test`, id % 7 === 0 ? "NeedleWord" : id % 11 === 0 ? "needle-other" : "hay");
        expect(s.add(e)).toBe(id);
        known.push({ id, ...k });
      }
      if (known.length > max) known = known.slice(known.length - max);
    };
    const queries: ListQuery[] = [
      { search: "needleword" },
      { search: "NEEDLE" },
      { search: "needle", host: "h1" },
      { search: "Needle", method: "get", status_min: 200, status_max: 299 },
      { search: "kept.test/p/1" },
    ];
    const all = async () => {
      for (const q of queries) await check(s, known, q, [[500, 0], [7, 3]]);
    };
    add(600);
    await s.flush();
    await all(); // first time: searched in full
    await all(); // again: kept
    for (let round = 0; round < 6; round++) {
      // a poller's view: since_id of the last id it saw
      const seen = next - 1;
      add(round === 3 ? 700 : 40 + round * 13); // a large step goes through the index, a small one is checked directly
      if (round % 2 === 0) await s.waitIndexed();
      else await s.flush(); // searched with an index backlog
      for (const q of queries) await check(s, known, { ...q, since_id: seen }, [[500, 0], [5, 2]]);
      await all();
    }
    // evicted: past maxEntries, the oldest went (kept ids below the oldest stored are dropped)
    expect(known[0]!.id).toBeGreaterThan(1);
    expect((await s.list({ limit: 0 })).total).toBe(max);
    // deleted: a matching entry in the middle of the kept ids
    const victim = expected(known, { search: "needleword" })[5]!;
    expect(await s.delete(victim)).toBe(true);
    known = known.filter((k) => k.id !== victim);
    await all();
    // cleared, then new entries with higher ids
    await s.clear();
    known = [];
    await all();
    add(120);
    await s.flush();
    await all();
    // reopened (a new writer: its open changes the epoch too)
    await s.close();
    stores.pop();
    s = await CaptureStore.open(path, { maxEntries: max });
    stores.push(s);
    await all();
    add(30);
    await s.flush();
    await all();
  });
});

test("a 3-character search is exact where the index folds other characters into ASCII (KELVIN SIGN, LONG S)", async () => {
  const s = await CaptureStore.open(join(tmp(), "capture.db"));
  stores.push(s);
  const texts = ["\u212Aab", "\u017Fab", "Kab", "xsab", "nothing"];
  const ids = texts.map((t, i) => s.add(make(i, "fold.test", t).e));
  await s.flush();
  await s.waitIndexed();
  const found = async (q: string) => (await s.list({ search: q })).items.map((i) => i.id).sort((a, b) => a - b);
  expect(await found("kab")).toEqual([ids[2]!]);
  expect(await found("SAB")).toEqual([ids[3]!]);
  expect(await found("\u212Aab")).toEqual([ids[0]!]);
  expect(await found("\u017Fab")).toEqual([ids[1]!]);
  expect(await found("not")).toEqual([ids[4]!]);
});

test("a search reads bodies first and URLs only where bodies do not hold the string; mostly-URL matches switch to the joined check: both exact", async () => {
  const s = await CaptureStore.open(join(tmp(), "capture.db"));
  stores.push(s);
  const known: Known[] = [];
  for (let i = 1; i <= 1500; i++) {
    const kind = i % 10;
    // 0: in the URL only; 1, 5: in a compressed body (other case); 2, 6, 7: in a short body; 3: every trigram in the
    // body but not the string; 4: its trigrams split between URL and body; the rest: nowhere
    const path = kind === 0 ? `quartz-lime/${i}` : kind === 4 ? `quartz-li/${i}` : `p/${i}`;
    const word = kind === 1 || kind === 5 ? "QUARTZ-LIME" : kind === 2 || kind === 6 || kind === 7 ? "quartz-lime" : kind === 3 ? "quartz-lix tz-lime" : kind === 4 ? "tz-lime" : "hay";
    const host = `h${i % 3}.bodies-first.test`;
    const { e, k } = make(kind === 1 || kind === 5 ? 3 * i : 3 * i + 1, host, word);
    e.url = k.url = `https://${host}/${path}`;
    expect(s.add(e)).toBe(i);
    known.push({ id: i, ...k });
  }
  await s.flush();
  await s.waitIndexed();
  // candidates: 6 in 10 hold the string in a body, 1 in its URL, 2 hold its trigrams only
  expect(await check(s, known, { search: "quartz-lime" }, [[500, 0], [7, 3], [50, 600]])).toBe(900);
  expect(await check(s, known, { search: "QUARTZ-LIME", since_id: 700 }, [[500, 0], [9, 4]])).toBe(480);
  // only URLs hold it (more than the probe's 256 candidates): the rest goes through the joined check
  expect(await check(s, known, { search: "test/quartz" }, [[500, 0], [7, 3]])).toBe(300);
  expect(await check(s, known, { search: "bodies-first.test/quartz-li" }, [[500, 0], [7, 3]])).toBe(300);
  // with a host filter (the joined check), the same answers
  expect(await check(s, known, { search: "quartz-lime", host: "h1" }, [[500, 0]])).toBe(300);
  // the ids above the index mark are candidates too
  await s.setIndexing(false);
  for (let i = 1501; i <= 1800; i++) {
    const { e, k } = make(3 * i, "h9.bodies-first.test", i % 2 ? "Quartz-Lime" : "hay");
    expect(s.add(e)).toBe(i);
    known.push({ id: i, ...k });
  }
  await s.flush();
  expect(await check(s, known, { search: "quartz-lime" }, [[500, 0], [7, 3]])).toBe(1050);
  expect(await check(s, known, { search: "quartz-lime", since_id: 1400 }, [[500, 0]])).toBe(210);
});
