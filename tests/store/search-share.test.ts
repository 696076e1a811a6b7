// Issue 20 (first search at 1M entries): a search's candidates checked by the reader and a helper on two read
// connections (src/store/search-share.ts). The helper reads another snapshot; the result must be the reader's
// snapshot's exact answer whatever happened in between: eviction of the oldest (its missing rows checked again by
// the reader), a delete/clear/open (another cache_epoch: the helper refuses), a helper that never starts, fails,
// or takes every chunk. Each answer is compared with a plain filter over what was added.
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { CaptureStore } from "../../src/store/capture-store.ts";
import { F_UNKNOWN, helpVerify, SHARE_CHUNK, SHARE_MIN_CANDIDATES, substringCheck, verifyCandidates, type VerifyMessage } from "../../src/store/search-share.ts";
import type { NewEntry } from "../../src/store/types.ts";
import { tempDirs } from "../helpers/temp-dirs.ts";

const tmp = tempDirs("tapwire-search-share-");
const enc = new TextEncoder();
const N = 3000;

interface Known {
  id: number;
  url: string;
  text: string;
}
const known: Known[] = [];
let path = "";

function entry(i: number): { e: NewEntry; url: string; text: string } {
  // bodies: the word as is, in capitals, split so that every trigram is there but not the string (a false
  // candidate), or absent; every third body passes 1 KiB (stored compressed: checked in JavaScript)
  const word = ["needlework", "NeedleWork", "needlew lework", "hay"][i % 4]!;
  const text = `{"i":${i},"w":"${word}","pad":"${"z".repeat(i % 3 === 0 ? 1200 : 20)}"}`;
  // a URL holding the word on every fifth entry, and one that holds a string found only in URLs on every seventh
  const url = `https://h${i % 5}.test/${i % 5 === 0 ? "needlework" : "p"}/${i % 7 === 0 ? "onlyinurls" : "x"}/${i}`;
  const body = enc.encode(text);
  return {
    e: {
      method: "GET", url, host: `h${i % 5}.test`, status_code: 200, content_type: "application/json", duration_ms: 1,
      timestamp: 1_700_000_000_000 + i, client_addr: "curl", has_response: true, req_headers: [["Host", "h"]],
      res_headers: [["Content-Type", "application/json"]], req_body: null, req_body_size: 0, res_body: body, res_body_size: body.length,
    },
    url,
    text,
  };
}

function expected(search: string, from = 1): number[] {
  const lower = (x: string) => x.replace(/[A-Z]/g, (c) => c.toLowerCase());
  return known.filter((k) => k.id >= from && [k.url, k.text].some((t) => lower(t).includes(lower(search)))).map((k) => k.id);
}

beforeAll(async () => {
  path = join(tmp(), "capture.db");
  const s = await CaptureStore.open(path);
  for (let i = 1; i <= N; i++) {
    const { e, url, text } = entry(i);
    expect(s.add(e)).toBe(i);
    known.push({ id: i, url, text });
  }
  await s.flush();
  await s.waitIndexed();
  await s.close();
}, 60_000);

const open: Database[] = [];
afterAll(() => {
  for (const d of open) d.close();
});
function connect(readonly = true): Database {
  const d = new Database(path, readonly ? { readonly: true, strict: true } : { strict: true });
  d.run("PRAGMA busy_timeout = 5000");
  open.push(d);
  return d;
}

const epochOf = (d: Database) => (d.query("SELECT value FROM meta WHERE key = 'cache_epoch'").get() as { value: number } | null)?.value ?? 0;

/**
 * Runs the reader's side on its own snapshot (every stored id a candidate: the check is exact for any superset of
 * the matches), with `post` as the helper; returns the result and what the helper's job ended as.
 */
function run(search: string, post: (m: VerifyMessage) => boolean): number[] {
  const reader = connect();
  reader.run("BEGIN");
  try {
    const ids = (reader.query("SELECT id FROM entries ORDER BY id").all() as { id: number }[]).map((r) => r.id);
    return verifyCandidates(reader, substringCheck(search), ids, epochOf(reader), post, 1);
  } finally {
    reader.run("COMMIT");
  }
}

const ctl = (m: VerifyMessage) => new Int32Array(m.sab, 0, 4);
const flags = (m: VerifyMessage) => new Uint8Array(m.sab, 16 + 8 * m.n, m.n);

describe("candidates checked on two connections", () => {
  test("the helper takes some chunks, or all, or none: the same exact answer", () => {
    const helperDb = connect();
    for (const search of ["needlework", "NEEDLEWORK", "onlyinurls", "needlew lework", "nothing-like-it"]) {
      const want = expected(search);
      for (const limit of [0, 2, Infinity]) {
        let taken = -1;
        const got = run(search, (m) => {
          helpVerify(helperDb, m, limit);
          taken = Math.min(ctl(m)[0]!, Math.ceil(m.n / SHARE_CHUNK));
          expect(ctl(m)[2]).toBe(0);
          return true;
        });
        expect({ search, limit, got }).toEqual({ search, limit, got: want });
        expect(taken).toBe(limit === Infinity ? Math.ceil(N / SHARE_CHUNK) : limit);
      }
    }
    expect(expected("needlework").length).toBeGreaterThan(1000);
    expect(expected("onlyinurls").length).toBe(Math.floor(N / 7));
    expect(expected("needlew lework").length).toBe(N / 4);
  }, 30_000);

  test("entries evicted between the two snapshots: the helper's missing rows are checked in the reader's", () => {
    const helperDb = connect();
    const writer = connect(false);
    const want = expected("needlework");
    let unknown = 0;
    const got = run("needlework", (m) => {
      // what eviction does to the oldest (cache_epoch unchanged)
      writer.run("DELETE FROM entries WHERE id <= 1000");
      writer.run("DELETE FROM bodies WHERE id <= 1000");
      helpVerify(helperDb, m, 3);
      unknown = flags(m).filter((f) => f === F_UNKNOWN).length;
      return true;
    });
    expect(unknown).toBeGreaterThan(0);
    expect(got).toEqual(want);
    // the next search sees the store as it is now
    expect(run("needlework", () => false)).toEqual(expected("needlework", 1001));
  });

  test("another cache_epoch (a delete, a clear, a writer's open): the helper refuses and the reader checks all", () => {
    const helperDb = connect();
    const writer = connect(false);
    const want = expected("needlework", 1001);
    let result = -1;
    const got = run("needlework", (m) => {
      // a clear, then ids used again: the helper would see other entries under the same ids
      writer.run("DELETE FROM bodies WHERE id > 2000");
      writer.run("UPDATE meta SET value = value + 1 WHERE key = 'cache_epoch'");
      helpVerify(helperDb, m);
      result = ctl(m)[2]!;
      expect(ctl(m)[0]).toBe(0);
      return true;
    });
    expect(result).toBe(1);
    expect(got).toEqual(want);
  });

  test("a helper that never starts is cancelled; one that fails is redone by the reader", () => {
    const later: VerifyMessage[] = [];
    const want = run("needlework", () => false);
    expect(run("needlework", (m) => (later.push(m), true))).toEqual(want);
    // the job was cancelled when the reader had taken every chunk: the helper takes none
    const helperDb = connect();
    helpVerify(helperDb, later[0]!);
    expect(ctl(later[0]!)[1]).toBe(3);
    const broken = connect();
    broken.close();
    expect(run("needlework", (m) => (helpVerify(broken, m), true))).toEqual(want);
  });
});

describe("through the store (the reader Worker and its helper)", () => {
  test("a search with more candidates than the sharing threshold: exact totals and pages", async () => {
    const p = join(tmp(), "capture.db");
    const s = await CaptureStore.open(p);
    try {
      const ids: number[] = [];
      const n = SHARE_MIN_CANDIDATES * 3;
      for (let i = 1; i <= n; i++) {
        const { e, url, text } = entry(i);
        s.add(e);
        if ([url, text].some((t) => t.toLowerCase().includes("needlework"))) ids.push(i);
      }
      await s.flush();
      await s.waitIndexed();
      expect(ids.length).toBeGreaterThan(SHARE_MIN_CANDIDATES);
      for (const search of ["needlework", "eedlewor", "NeedleWork"]) {
        const r = await s.list({ search, limit: 20, offset: 5 });
        expect({ search, total: r.total, page: r.items.map((x) => x.id) }).toEqual({
          search, total: ids.length, page: ids.slice().reverse().slice(5, 25),
        });
      }
    } finally {
      await s.close();
    }
  }, 60_000);
});
