/**
 * The capture store's limits that matter for correctness (issue 20): the size bound evicts oldest first and
 * keeps the database under it; compressed bodies come back byte for byte and stay searchable; a database of
 * schema 2 is migrated at open; a 1 GiB body through the proxy with capture on stores a copy that stops at its cap.
 * No timing here: the figures are in bench/.
 */
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { randomBytes } from "node:crypto";
import { statSync } from "node:fs";
import { join } from "node:path";
import { COMPRESS_MIN_BYTES } from "../../src/store/body-pack.ts";
import { SCHEMA_VERSION } from "../../src/store/capture-db.ts";
import { CaptureStore, type CaptureStoreOptions } from "../../src/store/capture-store.ts";
import type { ListQuery, NewEntry } from "../../src/store/types.ts";
import { startService } from "../helpers/service.ts";
import { tempDir } from "../helpers/tapwire-process.ts";
import { curl, startUpstream } from "../helpers/upstream.ts";

const enc = new TextEncoder();
const open: CaptureStore[] = [];

async function mkStore(path: string, opts: CaptureStoreOptions = {}): Promise<CaptureStore> {
  const s = await CaptureStore.open(path, opts);
  open.push(s);
  return s;
}
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

function entry(res: Uint8Array | null, contentType = "application/json", url = "https://api.example.com/v1/items"): NewEntry {
  return {
    method: "GET",
    url,
    host: new URL(url).hostname,
    status_code: 200,
    content_type: contentType,
    duration_ms: 3,
    timestamp: 1_700_000_000_000,
    client_addr: "curl",
    has_response: true,
    req_headers: [["Host", new URL(url).hostname]],
    res_headers: [["Content-Type", contentType]],
    req_body: null,
    req_body_size: 0,
    res_body: res,
    res_body_size: res?.length ?? 0,
  };
}

async function ids(s: CaptureStore, q: ListQuery): Promise<number[]> {
  return (await s.list({ limit: 500, ...q })).items.map((e) => e.id);
}

describe("size bound", () => {
  test("a size-limited store evicts the oldest entries and stays under its limit", async () => {
    const path = join(tempDir(), "capture.db");
    const limit = 4 * 1024 * 1024;
    // batches much smaller than the bound's margin (a tenth): the file never has to grow past it
    const s = await mkStore(path, { maxStoreBytes: limit, maxPending: 8, busyWindowMs: 0 });
    const total = 1200;
    for (let i = 0; i < total; i++) {
      // half binary (incompressible), half text (compressible, search-indexed): about 11 MB in all
      const e =
        i % 2 === 0
          ? entry(new Uint8Array(randomBytes(8192)), "application/octet-stream")
          : entry(enc.encode(`marker-${i} ${randomBytes(4096).toString("hex")}`), "text/plain");
      s.add(e);
      if (i % 100 === 99) await s.flush();
    }
    await s.flush();
    await s.waitIndexed();
    const st = await s.writerStatus();
    expect(st.evictions).toBeGreaterThan(0);
    expect(st.usedBytes).toBeLessThanOrEqual(limit);
    const n = s.count();
    expect(n).toBeGreaterThan(50);
    expect(n).toBeLessThan(total);
    // the survivors are exactly the newest ones
    const kept = await ids(s, { order: "asc", limit: 500 });
    const first = kept[0]!;
    expect(kept.slice(0, 5)).toEqual([first, first + 1, first + 2, first + 3, first + 4]);
    expect((await s.list({ limit: 1 })).items[0]!.id).toBe(total);
    expect((await s.list({ limit: 0 })).total).toBe(total - first + 1);
    expect(await s.get(first - 1)).toBeNull();
    expect(await s.get(1)).toBeNull();
    // search sees only what is kept: an evicted marker is gone, a kept one is found
    // entry id i + 1 holds marker-i (text entries have even ids)
    const keptText = first % 2 === 0 ? first : first + 1;
    expect(await ids(s, { search: `marker-${keptText - 1} ` })).toEqual([keptText]);
    expect(await ids(s, { search: "marker-1 " })).toEqual([]);
    expect(statSync(path).size).toBeLessThanOrEqual(limit);
    await s.close();
    // checkpointed into the file at close: the file itself is under the bound
    expect(statSync(path).size).toBeLessThanOrEqual(limit);
  }, 60_000);

  test("the bound holds across a reopen (the count comes from meta, not a scan)", async () => {
    const path = join(tempDir(), "capture.db");
    const limit = 2 * 1024 * 1024;
    const s = await mkStore(path, { maxStoreBytes: limit, maxPending: 4 });
    for (let i = 0; i < 400; i++) s.add(entry(new Uint8Array(randomBytes(8192)), "application/octet-stream"));
    await s.flush();
    const n = s.count();
    expect(n).toBeLessThan(400);
    await s.close();
    const s2 = await mkStore(path, { maxStoreBytes: limit, maxPending: 4 });
    expect(s2.count()).toBe(n);
    expect((await s2.list({ limit: 0 })).total).toBe(n);
    for (let i = 0; i < 100; i++) s2.add(entry(new Uint8Array(randomBytes(8192)), "application/octet-stream"));
    await s2.flush();
    expect((await s2.writerStatus()).usedBytes).toBeLessThanOrEqual(limit);
    expect((await s2.list({ limit: 1 })).items[0]!.id).toBe(500);
  }, 60_000);
});

describe("host filter", () => {
  test("the host table keeps up with adds, eviction, delete and clear: host filters count what a scan counts", async () => {
    const path = join(tempDir(), "capture.db");
    const s = await mkStore(path, { maxEntries: 40, maxPending: 7 });
    const hosts = ["a.example.com", "b.example.com", "API.Other.net", "c.example.com"];
    for (let i = 0; i < 100; i++) s.add(entry(null, "text/plain", `https://${hosts[i % (i < 60 ? 4 : 2)]}/p/${i}`));
    await s.flush();
    expect(await s.delete(99)).toBe(true);
    const db = new Database(path, { readonly: true });
    const scan = (frag: string) =>
      (db.query("SELECT COUNT(*) AS n FROM entries WHERE instr(host_lc, ?) > 0").get(frag.toLowerCase()) as { n: number }).n;
    try {
      for (const frag of ["a.example", "b.example", "other", "c.example", "example", "API", "zzz"]) {
        expect((await s.list({ host: frag, limit: 0 })).total).toBe(scan(frag));
      }
      expect((await s.list({ host: "c.example", limit: 0 })).total).toBe(0); // evicted with the oldest
      expect((await s.list({ host: "a.example", limit: 0 })).total).toBe(19);
      const ids = (await s.list({ host: "b.example", limit: 500 })).items.map((e) => e.id);
      expect(ids[0]).toBe(100);
      expect(ids.every((id) => id > 60)).toBe(true);
    } finally {
      db.close();
    }
    await s.clear();
    expect((await s.list({ host: "example", limit: 0 })).total).toBe(0);
    s.add(entry(null, "text/plain", "https://a.example.com/again"));
    expect((await s.list({ host: "a.example" })).items.map((e) => e.url)).toEqual(["https://a.example.com/again"]);
  });
});

describe("compressed bodies", () => {
  test("large bodies are stored compressed and come back byte for byte; search finds text inside them", async () => {
    const path = join(tempDir(), "capture.db");
    const s = await mkStore(path, { indexing: false });
    const text = `{"items":[${Array.from({ length: 200 }, (_, i) => `{"id":${i},"name":"Item ${i}","note":"ÜNICODE ✓"}`).join(",")}],"tail":"NeedleInTheHaystack"}`;
    const binary = new Uint8Array(COMPRESS_MIN_BYTES * 4).map((_, i) => i % 7);
    const small = `{"ok":true,"word":"tinyneedle"}`;
    const idText = s.add(entry(enc.encode(text)));
    const idBin = s.add(entry(binary, "application/octet-stream"));
    const idSmall = s.add(entry(enc.encode(small)));
    await s.flush();
    const db = new Database(path, { readonly: true });
    try {
      const z = db.query("SELECT id, res_z, typeof(res_body) AS t, length(res_body) AS n FROM bodies ORDER BY id").all() as {
        id: number;
        res_z: number;
        t: string;
        n: number;
      }[];
      expect(z.map((r) => r.res_z)).toEqual([1, 1, 0]);
      expect(z[0]!.t).toBe("blob");
      expect(z[0]!.n).toBeLessThan(enc.encode(text).length / 2);
      expect(z[2]!.t).toBe("text");
    } finally {
      db.close();
    }
    const d = await s.get(idText);
    expect(d!.res_body).toBe(text);
    expect(d!.res_body_encoding).toBe("utf8");
    const b = await s.get(idBin);
    expect(b!.res_body_encoding).toBe("base64");
    expect(Buffer.from(b!.res_body, "base64").equals(Buffer.from(binary))).toBe(true);
    expect((await s.get(idSmall))!.res_body).toBe(small);
    // not indexed yet: the scan decompresses; case-insensitive for ASCII like LIKE, exact for the rest
    expect(await ids(s, { search: "needleinthehaystack" })).toEqual([idText]);
    expect(await ids(s, { search: "ünicode ✓" })).toEqual([]);
    expect(await ids(s, { search: "ÜNICODE ✓" })).toEqual([idText]);
    expect(await ids(s, { search: "tinyneedle" })).toEqual([idSmall]);
    // trigrams all present but not the string: a candidate of the index, refused by the check
    expect(await ids(s, { search: "Haystack\"}x" })).toEqual([]);
    await s.setIndexing(true);
    await s.waitIndexed();
    expect(await ids(s, { search: "NeedleInTheHaystack" })).toEqual([idText]);
    expect((await s.list({ search: "Item 19", limit: 0 })).total).toBe(1);
    expect(await ids(s, { search: "tinyneedle", host: "example" })).toEqual([idSmall]);
    expect(await ids(s, { search: "NeedleInTheHaystack", host: "nomatch" })).toEqual([]);
  });
});

describe("migration", () => {
  test("a schema 2 database (bodies without compression columns, no entry count) opens, is migrated and keeps working", async () => {
    const path = join(tempDir(), "capture.db");
    const s = await mkStore(path);
    for (let i = 0; i < 5; i++) s.add(entry(enc.encode(`{"old":${i},"word":"oldword${i}"}`)));
    await s.close();
    // the layout of schema 2: bodies without req_z / res_z, meta without entry_count
    const db = new Database(path);
    db.run(`CREATE TABLE bodies2 (id INTEGER PRIMARY KEY,
      req_body, req_encoding TEXT NOT NULL, req_size INTEGER NOT NULL, req_truncated INTEGER NOT NULL,
      req_decoded_from TEXT NOT NULL,
      res_body, res_encoding TEXT NOT NULL, res_size INTEGER NOT NULL, res_truncated INTEGER NOT NULL,
      res_decoded_from TEXT NOT NULL)`);
    db.run(`INSERT INTO bodies2 SELECT id, req_body, req_encoding, req_size, req_truncated, req_decoded_from,
      res_body, res_encoding, res_size, res_truncated, res_decoded_from FROM bodies`);
    db.run("DROP TABLE bodies");
    db.run("ALTER TABLE bodies2 RENAME TO bodies");
    db.run("DELETE FROM meta WHERE key = 'entry_count'");
    db.run("UPDATE meta SET value = 2 WHERE key = 'schema_version'");
    db.close();

    const s2 = await mkStore(path);
    expect(s2.count()).toBe(5);
    expect((await s2.get(3))!.res_body).toBe(`{"old":2,"word":"oldword2"}`);
    expect(await ids(s2, { search: "oldword4" })).toEqual([5]);
    const big = `{"new":"${"x".repeat(COMPRESS_MIN_BYTES * 2)}","word":"newword"}`;
    s2.add(entry(enc.encode(big)));
    await s2.flush();
    expect((await s2.get(6))!.res_body).toBe(big);
    expect(await ids(s2, { search: "newword" })).toEqual([6]);
    await s2.close();
    const check = new Database(path, { readonly: true });
    try {
      expect((check.query("SELECT value FROM meta WHERE key = 'schema_version'").get() as { value: number }).value).toBe(SCHEMA_VERSION);
      expect((check.query("SELECT value FROM meta WHERE key = 'entry_count'").get() as { value: number }).value).toBe(6);
      expect((check.query("SELECT res_z FROM bodies WHERE id = 6").get() as { res_z: number }).res_z).toBe(1);
    } finally {
      check.close();
    }
  });
});

describe("through the proxy", () => {
  const up = startUpstream();
  afterAll(() => up.stop());

  test("a 1 GiB download with capture on passes whole; the stored copy stops at the body cap", async () => {
    const cap = 64 * 1024;
    const svc = await startService({ bodyLimit: cap });
    try {
      const n = 1024 ** 3;
      const r = await curl(["-x", `http://127.0.0.1:${svc.proxyPort}`, "-o", "/dev/null", "-w", "%{http_code} %{size_download}", `${up.httpUrl}/bytes?n=${n}`]);
      expect(r.code).toBe(0);
      expect(r.out).toBe(`200 ${n}`);
      const list = (await (await svc.call("/api/v1/traffic?path=/bytes")).json()) as { items: { id: number }[] };
      expect(list.items.length).toBe(1);
      const d = (await (await svc.call(`/api/v1/traffic/${list.items[0]!.id}`)).json()) as Record<string, unknown>;
      expect(d.res_body_size).toBe(n);
      expect(d.res_body_truncated).toBe(true);
      // no Content-Type: kept as bytes (base64), exactly the first `cap` of them
      expect(d.res_body_encoding).toBe("base64");
      expect(Buffer.from(d.res_body as string, "base64").equals(Buffer.alloc(cap, "a"))).toBe(true);
      const status = (await (await svc.call("/api/v1/capture/status")).json()) as Record<string, unknown>;
      expect(status).toEqual({ capturing: true, entry_count: 1, dropped: 0 });
    } finally {
      await svc.stop();
    }
  }, 90_000);
});
