/**
 * The capture journal: batches are appended there at once and written into SQLite later (capture-writer.ts).
 * Unit tests of the segment files, then the store's guarantees with a journal backlog: reads see every entry,
 * kill -9 loses nothing journaled, clear and delete reach journaled entries, ids are never reused.
 * The store is opened with a long busyWindowMs, so nothing is written into SQLite unless a reader asks:
 * the backlog is there when the test looks, whatever the machine's speed.
 */
import { afterEach, describe, expect, jest, test } from "bun:test";
import { Database } from "bun:sqlite";
import { appendFileSync, existsSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CaptureJournal, HEADER_BYTES } from "../../src/store/capture-journal.ts";
import { CaptureStore, type CaptureStoreOptions } from "../../src/store/capture-store.ts";
import { BatchBuilder, batchBytes } from "../../src/store/entry-codec.ts";
import type { NewEntry } from "../../src/store/types.ts";
import { tempDirs } from "../helpers/temp-dirs.ts";

const enc = new TextEncoder();
const tempDir = tempDirs("tapwire-journal-");

const stores: CaptureStore[] = [];
/** Nothing is written into SQLite unless a reader waits (or the store closes). */
const DEFERRED: CaptureStoreOptions = { busyWindowMs: 600_000, flushIntervalMs: 1, maxPending: 10 };
async function mkStore(path: string, opts: CaptureStoreOptions = {}): Promise<CaptureStore> {
  const s = await CaptureStore.open(path, { ...DEFERRED, ...opts });
  stores.push(s);
  return s;
}
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

function entry(n: number): NewEntry {
  const body = enc.encode(`journal body ${n}`);
  return {
    method: "POST",
    url: `https://journal.example/item/${n}`,
    host: "journal.example",
    status_code: 201,
    content_type: "text/plain",
    duration_ms: 3,
    timestamp: 1_700_000_000_000 + n,
    client_addr: "curl",
    has_response: true,
    req_headers: [["Host", "journal.example"], ["X-N", String(n)]],
    res_headers: [["Content-Type", "text/plain"]],
    req_body: enc.encode(`request ${n}`),
    req_body_size: `request ${n}`.length,
    res_body: body,
    res_body_size: body.length,
  };
}

/** The encoded form of entries first..last (entry-codec.ts), as the store posts it. */
function payload(first: number, last: number): Uint8Array {
  const b = new BatchBuilder(new SharedArrayBuffer(64 * 1024));
  for (let n = first; n <= last; n++) expect(b.add(n, entry(n))).toBe(true);
  return batchBytes(b.ring, b.take()!).slice();
}

/** A record as tapwire 0.1 wrote it ("TWJ1": rows JSON, then the bodies back to back). */
function jsonRecord(rows: unknown[], bodies: Uint8Array, count: number, first: number, last: number, ceiling: number): Buffer {
  const json = Buffer.from(JSON.stringify(rows));
  const head = Buffer.alloc(HEADER_BYTES);
  head.writeUInt32LE(0x314a5754, 0);
  head.writeUInt32LE(json.length, 4);
  head.writeUInt32LE(bodies.length, 8);
  head.writeUInt32LE(count, 12);
  head.writeDoubleLE(first, 16);
  head.writeDoubleLE(last, 24);
  head.writeDoubleLE(ceiling, 32);
  return Buffer.concat([head, json, bodies]);
}

function rowsOnDisk(path: string): number {
  const db = new Database(path, { readonly: true });
  try {
    return (db.query("SELECT COUNT(*) AS n FROM entries").get() as { n: number }).n;
  } finally {
    db.close();
  }
}

function segments(dbPath: string): string[] {
  const dir = `${dbPath}.journal`;
  return existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith(".twj")) : [];
}

describe("journal segment files", () => {
  test("records read back as written; release deletes what is done; a reopen finds the rest", () => {
    const dir = join(tempDir(), "j");
    const j = CaptureJournal.open(dir);
    j.append(1, payload(1, 3), 3, 1, 3, 100);
    j.append(2, payload(4, 5), 2, 4, 5, 105);
    expect(j.entries).toBe(5);
    expect(j.queue.map((r) => [r.seq, r.firstId, r.lastId])).toEqual([[1, 1, 3], [2, 4, 5]]);
    const r = j.read(j.queue[0]!);
    expect(r.rows.map((row) => [row[0], row[2], row[11]])).toEqual([1, 2, 3].map((n) => [n, `https://journal.example/item/${n}`, entry(n).req_headers]));
    expect(new TextDecoder().decode(r.resBodies[2]!)).toBe("journal body 3");
    expect(new TextDecoder().decode(r.reqBodies[0]!)).toBe("request 1");
    expect(r.failed).toBe(0);
    j.close();

    const again = CaptureJournal.open(dir);
    expect(again.queue.map((x) => [x.seq, x.firstId, x.lastId, x.count, x.ceiling])).toEqual([[0, 1, 3, 3, 100], [0, 4, 5, 2, 105]]);
    expect(again.maxId).toBe(5);
    expect(again.maxCeiling).toBe(105);
    again.release(3);
    expect(again.queue.map((x) => x.firstId)).toEqual([4]);
    expect(again.entries).toBe(2);
    again.release(5);
    expect(again.queue).toEqual([]);
    expect(readdirSync(dir)).toEqual([]); // every segment was done with
    again.close();
  });

  test("a record cut short by a crash is cut off at open; the records before it stay", () => {
    const dir = join(tempDir(), "j");
    const j = CaptureJournal.open(dir);
    j.append(1, payload(1, 1), 1, 1, 1, 10);
    j.close();
    const [seg] = readdirSync(dir);
    const file = join(dir, seg!);
    const good = statSync(file).size;
    // half of a second record: its header promises more than follows
    const head = Buffer.alloc(HEADER_BYTES);
    head.writeUInt32LE(0x324a5754, 0);
    head.writeUInt32LE(1000, 4);
    appendFileSync(file, Buffer.concat([head, payload(2, 2)]));
    const again = CaptureJournal.open(dir);
    expect(again.queue.map((r) => r.lastId)).toEqual([1]);
    expect(statSync(file).size).toBe(good);
    // garbage is cut off too
    appendFileSync(file, Buffer.from("not a record at all, not even a header"));
    again.close();
    expect(CaptureJournal.open(dir).queue.length).toBe(1);
  });

  test("a new segment starts when the current one is full; emptied segments are deleted", () => {
    const dir = join(tempDir(), "j");
    const j = CaptureJournal.open(dir);
    const big = new Uint8Array(40 * 1024 * 1024);
    j.append(1, big, 1, 1, 1, 1);
    j.append(2, big, 1, 2, 2, 2); // 80 MiB would not fit in one 64 MiB segment
    expect(readdirSync(dir).length).toBe(2);
    j.release(1);
    expect(readdirSync(dir).length).toBe(1);
    j.release(2);
    // the segment being appended to is emptied in place
    expect(readdirSync(dir).map((f) => statSync(join(dir, f)).size)).toEqual([0]);
    j.close();
    expect(readdirSync(dir)).toEqual([]);
  });

  test("records of the first format (TWJ1, rows as JSON) are still read", () => {
    const dir = join(tempDir(), "j");
    CaptureJournal.open(dir).close();
    const rows = [
      [7, "GET", "http://old.example/a", "old.example", 200, "text/plain", 4, 1_700_000_000_007, "curl", true, null, [["Host", "old.example"]], [["Content-Type", "text/plain"]], -1, 0, 5, 5, { reason: "OK" }],
      [8, "POST", "http://old.example/b", "old.example", 0, null, 9, 1_700_000_000_008, "curl", false, "refused", [], null, 3, 3, -1, null, null],
    ];
    writeFileSync(join(dir, "0000000000000001.twj"), jsonRecord(rows, enc.encode("hello" + "abc"), 2, 7, 8, 50));
    const j = CaptureJournal.open(dir);
    expect(j.queue.map((r) => [r.format, r.firstId, r.lastId, r.count])).toEqual([[1, 7, 8, 2]]);
    const r = j.read(j.queue[0]!);
    expect(r.rows).toEqual(rows as never);
    expect(r.reqBodies.map((b) => b && new TextDecoder().decode(b))).toEqual([null, "abc"]);
    expect(r.resBodies.map((b) => b && new TextDecoder().decode(b))).toEqual(["hello", null]);
    j.close();
  });
});

describe("the store with a journal backlog", () => {
  test("a journal left by tapwire 0.1 (TWJ1 records) is written into the database at open", async () => {
    const path = join(tempDir(), "old.db");
    CaptureJournal.open(`${path}.journal`).close();
    const rows = [[3, "GET", "http://old.example/x?q=1", "old.example", 404, "text/html", 12, 1_700_000_000_003, "wget", true, null, [["Host", "old.example"]], [["Content-Type", "text/html"]], -1, 0, 9, 9, { reason: "Not Found" }]];
    writeFileSync(join(`${path}.journal`, "0000000000000001.twj"), jsonRecord(rows, enc.encode("<p>no</p>"), 1, 3, 3, 100));
    const s = await mkStore(path);
    const d = (await s.get(3))!;
    expect([d.url, d.status_code, d.client_addr, d.res_body, d.reason]).toEqual(["http://old.example/x?q=1", 404, "wget", "<p>no</p>", "Not Found"]);
    const next = s.add(entry(1));
    expect(next).toBeGreaterThan(3);
    expect((await s.list({})).items.map((e) => e.id)).toEqual([next, 3]);
  });

  test("batches wait in the journal; the next read writes them and sees every entry", async () => {
    const path = join(tempDir(), "c.db");
    const s = await mkStore(path);
    for (let i = 1; i <= 35; i++) s.add(entry(i));
    const st = await s.writerStatus(); // answered after every batch before it: all journaled
    expect(st.journalEntries).toBe(35);
    expect(st.stored).toBe(35);
    expect(s.count()).toBe(35);
    expect(rowsOnDisk(path)).toBe(0);
    expect(segments(path).length).toBe(1);

    const page = await s.list({ limit: 500 });
    expect(page.total).toBe(35);
    expect(page.items.map((i) => i.id)).toEqual(Array.from({ length: 35 }, (_, i) => 35 - i));
    expect(rowsOnDisk(path)).toBe(35);
    const d = (await s.get(7))!;
    expect(d.req_headers).toEqual([["Host", "journal.example"], ["X-N", "7"]]);
    expect(d.req_body).toBe("request 7");
    expect(d.res_body).toBe("journal body 7");
    expect((await s.list({ search: "journal body 3" })).items.map((i) => i.id)).toEqual([35, 34, 33, 32, 31, 30, 3]);
    expect((await s.writerStatus()).journalEntries).toBe(0);
  });

  test("a small ring: batches handed over early and in buffers of their own; every entry arrives intact", async () => {
    const path = join(tempDir(), "ring.db");
    // about 4 entries fit in the ring: the store meets every path of the ring while adding these
    const s = await mkStore(path, { ringBytes: 4096, maxPending: 10, flushIntervalMs: 60_000 });
    const big = (n: number) => ({ ...entry(n), res_body: enc.encode(`big ${n} `.repeat(120 + (n % 7) * 40)), res_body_size: 0 });
    const ids: number[] = [];
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 40; i++) {
        const n = round * 40 + i + 1;
        ids.push(s.add(n % 5 === 0 ? big(n) : entry(n)));
      }
      // the writer answers what it has (releasing the ring runs) before the next round
      await s.writerStatus();
    }
    expect(s.lastFlushError).toBeNull();
    const page = await s.list({ limit: 500 });
    expect(page.items.map((i) => i.id)).toEqual([...ids].reverse());
    for (const n of [1, 5, 6, 40, 41, 85, 119, 120]) {
      const d = (await s.get(ids[n - 1]!))!;
      expect(d.url).toBe(`https://journal.example/item/${n}`);
      expect(d.req_body).toBe(`request ${n}`);
      expect(d.res_body).toBe(n % 5 === 0 ? `big ${n} `.repeat(120 + (n % 7) * 40) : `journal body ${n}`);
      expect(d.req_headers).toEqual([["Host", "journal.example"], ["X-N", String(n)]]);
    }
  });

  test("get, delete and search reach entries still in the journal", async () => {
    const path = join(tempDir(), "c.db");
    const s = await mkStore(path);
    for (let i = 1; i <= 12; i++) s.add(entry(i));
    await s.writerStatus();
    expect(rowsOnDisk(path)).toBe(0);
    expect(await s.delete(5)).toBe(true);
    expect(await s.get(5)).toBeNull();
    expect((await s.get(12))!.url).toBe("https://journal.example/item/12");
    for (let i = 13; i <= 20; i++) s.add(entry(i));
    expect((await s.list({ search: "JOURNAL BODY 1", limit: 500 })).items.map((i) => i.id)).toEqual([19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 1]);
  });

  test("kill -9 with a journal backlog: every journaled entry is found after restart, ids are not reused", async () => {
    const path = join(tempDir(), "crash.db");
    const script = join(tempDir(), "child.ts");
    const storeModule = join(import.meta.dir, "..", "..", "src", "store", "capture-store.ts");
    writeFileSync(
      script,
      `import { writeSync } from "node:fs";
import { CaptureStore } from ${JSON.stringify(storeModule)};
const s = await CaptureStore.open(${JSON.stringify(path)}, ${JSON.stringify(DEFERRED)});
const enc = new TextEncoder();
let last = 0;
for (let i = 1; i <= 500; i++) {
  const b = enc.encode("crash body " + i);
  last = s.add({ method: "GET", url: "https://crash.example/" + i, host: "crash.example", status_code: 200,
    content_type: "text/plain", duration_ms: 1, timestamp: i, client_addr: "t", has_response: true,
    req_headers: [], res_headers: [["Content-Type", "text/plain"]], req_body: null, req_body_size: 0,
    res_body: b, res_body_size: b.length });
}
const st = await s.writerStatus();
writeSync(1, JSON.stringify({ journaled: st.journalEntries, committed: s.committedId, assigned: last }) + "\\n");
process.kill(process.pid, "SIGKILL");
`,
    );
    const proc = Bun.spawn([process.execPath, script], { stdout: "pipe", stderr: "pipe" });
    const out = await new Response(proc.stdout).text();
    await proc.exited;
    expect(proc.signalCode).toBe("SIGKILL");
    const child = JSON.parse(out) as { journaled: number; committed: number; assigned: number };
    expect(child).toEqual({ journaled: 500, committed: 0, assigned: 500 });
    expect(rowsOnDisk(path)).toBe(0);

    const s = await mkStore(path);
    expect(s.count()).toBe(500);
    const page = await s.list({ limit: 500, order: "asc" });
    expect(page.total).toBe(500);
    expect(page.items.map((i) => i.id)).toEqual(Array.from({ length: 500 }, (_, i) => i + 1));
    expect((await s.get(500))!.res_body).toBe("crash body 500");
    expect((await s.list({ search: "crash body 49" })).total).toBe(11);
    expect(s.add(entry(1))).toBeGreaterThan(500);
    await s.close();
    expect(segments(path)).toEqual([]);
  });

  test("a writer that dies with a journal backlog: the next one writes it, readers wait for it", async () => {
    const path = join(tempDir(), "c.db");
    const s = await mkStore(path);
    const spy = jest.spyOn(console, "error").mockImplementation(() => {});
    try {
      for (let i = 1; i <= 40; i++) s.add(entry(i));
      expect((await s.writerStatus()).journalEntries).toBe(40);
      await s.killWriterForTest();
      expect(s.lastFlushError).toBeInstanceOf(Error);
      const page = await s.list({ limit: 500 });
      expect(page.total).toBe(40);
      expect(page.items.map((i) => i.id)).toEqual(Array.from({ length: 40 }, (_, i) => 40 - i));
      expect((await s.get(40))!.res_body).toBe("journal body 40");
      expect(s.add(entry(41))).toBeGreaterThan(40);
    } finally {
      spy.mockRestore();
    }
  });

  test("clear drops journaled entries for good, across a restart", async () => {
    const path = join(tempDir(), "c.db");
    const s = await mkStore(path);
    for (let i = 1; i <= 25; i++) s.add(entry(i));
    await s.writerStatus();
    await s.clear();
    expect(s.count()).toBe(0);
    expect((await s.list({})).total).toBe(0);
    const next = s.add(entry(26));
    expect(next).toBe(26);
    await s.close();
    const again = await mkStore(path);
    expect((await again.list({})).items.map((i) => i.id)).toEqual([26]);
    expect(again.add(entry(27))).toBeGreaterThan(26);
  });

  test("more than maxEntries in the journal: only the newest are written", async () => {
    const path = join(tempDir(), "c.db");
    const s = await mkStore(path, { maxEntries: 15 });
    for (let i = 1; i <= 10; i++) s.add(entry(i));
    await s.flush(); // 1..10 in SQLite
    for (let i = 11; i <= 60; i++) s.add(entry(i));
    expect((await s.writerStatus()).stored).toBe(15);
    const page = await s.list({ limit: 500 });
    expect(page.total).toBe(15);
    expect(page.items.map((i) => i.id)).toEqual(Array.from({ length: 15 }, (_, i) => 60 - i));
    expect((await s.get(46))!.res_body).toBe("journal body 46");
    expect(rowsOnDisk(path)).toBe(15);
  });

  test("close writes the journal into the database and leaves no segment behind", async () => {
    const path = join(tempDir(), "c.db");
    const s = await mkStore(path);
    for (let i = 1; i <= 30; i++) s.add(entry(i));
    await s.writerStatus();
    expect(rowsOnDisk(path)).toBe(0);
    await s.close();
    expect(rowsOnDisk(path)).toBe(30);
    expect(segments(path)).toEqual([]);
  });

  test("without readers the journal is written once traffic pauses", async () => {
    const path = join(tempDir(), "c.db");
    const s = await mkStore(path, { busyWindowMs: 30 });
    for (let i = 1; i <= 20; i++) s.add(entry(i));
    // waitCommitted does not hurry: the entries become readable once the writer has seen 30 ms without a batch
    await s.waitCommitted(20);
    expect(rowsOnDisk(path)).toBe(20);
    expect((await s.writerStatus()).journalEntries).toBe(0);
  });
});
