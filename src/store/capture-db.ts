/**
 * The write side of the capture store, used only by the writer Worker (capture-writer.ts): opening (and recovering)
 * the database, the schema, batch inserts with body decoding, eviction, delete and clear, and the lazy search index.
 *
 * - Tables: `entries` (the summary columns, plus path, host_lc and error: narrow, so scans stay cheap),
 *   `details` (header lists, extras), `bodies` (stored bodies and their flags), `meta` (schema version, id
 *   ceiling, entry_count, fts_indexed_upto), and the search index: FTS5 trigram tables over url + text bodies
 *   (used to find candidates for `search`), one per generation of consecutive ids (`fts_gens` lists them).
 * - The search index is filled lazily, in small steps (indexStep): every stored entry with an id up to
 *   meta.fts_indexed_upto is in the index, none above it is. Readers use the index for ids up to it and scan
 *   the rest, in one read transaction, so search is exact whatever the backlog.
 * - Generations: FTS5 pays dearly for deletions (tombstoned segments get rewritten: measured 0.25-4 s per
 *   200-entry batch at 20k entries when the oldest entries were deleted from one big index). Eviction is always
 *   of the oldest ids, so the index is cut into generations of about maxEntries/4 ids: an evicted entry is
 *   tombstoned in its generation and a generation whose ids are all evicted is dropped whole. Deleted and
 *   evicted entries leave the index at once; a segment of a generation is rewritten without its tombstoned rows
 *   once half of them are (deletemerge 50: the store bench at 200,000 went from 2,065 to 2,027 bytes per entry
 *   after its rounds at capacity, longest writer batch 226 -> 341 ms; at 1,000,000: 1,957 bytes, longest batch
 *   337 ms, the event-loop stall unchanged); the rest is freed when the generation is dropped.
 * - Ids: increasing, never reused, also across clear() and crashes: `meta.id_ceiling` is kept ahead of every id
 *   the main thread can have handed out (it reserves `idReserve` ids ahead at each write); close() writes it exactly.
 * - WAL + synchronous=NORMAL: every committed batch survives kill -9.
 * - Damage: an open reads the header, the schema and each table's first and last pages only (start-up does not
 *   grow with the store); probeStep reads the rest after open, a step at a time; checkAll reads the whole file on
 *   demand. Damage found at open or later takes one path: the file is moved aside, what can be read is salvaged.
 */
import { Database } from "bun:sqlite";
import { chmodSync, closeSync, copyFileSync, existsSync, openSync, renameSync, rmSync, statSync } from "node:fs";
import { decodeBodyBytes, type DecodedBodyBytes } from "./body-decode.ts";
import { packBody, unpackText, Z_NONE } from "./body-pack.ts";
import type { WireRow, WriterStatus } from "./capture-protocol.ts";
import type { DecodedBatch } from "./entry-codec.ts";
import { packHeaders } from "./header-pack.ts";
import { STORED_BODIES_KEY, type HeaderList, type StoredBodies } from "./types.ts";

/**
 * 2: the search index may lag behind the entries (meta.fts_indexed_upto).
 * 3: bodies may be stored compressed (bodies.req_z / res_z, body-pack.ts); meta.entry_count is kept exact, so an
 *    open reads it instead of counting. A version 2 file is migrated at open (two ALTER TABLEs and one count: no
 *    rewrite of the rows); its bodies stay uncompressed.
 * 4: header lists may be packed BLOBs (details.req_headers / res_headers, header-pack.ts) beside the JSON text of
 *    earlier rows, which stays as it is (readers take both: nothing to migrate); a new file has 16 KiB pages.
 * 5: entries.host is '' when it equals host_lc (readers take host_lc then: ENTRY_HOST in capture-query.ts); header
 *    lists may be packed with coded values (header-pack.ts V2); bodies are compressed from 256 bytes (was 1 KiB); a
 *    new file indexes the time filter with entries_time (timestamp) instead of the covering entries_timestamp.
 *    Earlier rows stay as they are (readers take both: nothing to migrate).
 */
export const SCHEMA_VERSION = 5;

type Param = string | number | null | Uint8Array;

/** About this many search index generations cover maxEntries. */
const GENERATIONS = 4;
const MIN_GEN_SIZE = 1000;
/** With a size bound that holds few entries, generations may be this small. */
const MIN_GEN_SIZE_BOUNDED = 50;

/** A search index generation: an FTS5 table holding entries firstId..lastId (n of them were indexed). */
interface Gen {
  gen: number;
  firstId: number;
  lastId: number;
  n: number;
}

/** The FTS5 table of a generation (0: the single index of a database from before generations). */
export function ftsTable(gen: number): string {
  return gen === 0 ? "entries_fts" : `entries_fts_${Math.trunc(gen)}`;
}

/** Runs a statement that is not kept in the statement cache (it names a generation's table). */
function runOnce(db: Database, sql: string, ...params: Param[]): void {
  const st = db.prepare(sql);
  try {
    st.run(...params);
  } finally {
    st.finalize();
  }
}

function createFtsTable(db: Database, name: string): void {
  // contentless: the text lives once, in bodies; contentless_delete (SQLite >= 3.43) allows deleting rows.
  // detail=none: rowids only (no positions): half the indexing time, a fraction of the size; the
  // index only selects candidates, the substring itself is checked on the stored text.
  db.run(`CREATE VIRTUAL TABLE ${name} USING fts5(url, req_body, res_body,
    content='', contentless_delete=1, detail=none, tokenize='trigram')`);
  // merge segments 8 at a time instead of 4: measured at 100k entries, about half the indexing cost, searches
  // barely slower. A segment is merged again once half its rows are tombstoned (deletemerge 50; 20
  // gave 1,993 bytes per entry at 200,000 but writer batches
  // up to 2 s and the 20,000 writes at capacity acknowledged after 20.7 s instead of 11.3). The single index of a
  // database from before generations keeps 0: there, deletions rewrote the one big index (seconds per batch).
  db.run(`INSERT INTO ${name} (${name}, rank) VALUES ('automerge', 8)`);
  db.run(`INSERT INTO ${name} (${name}, rank) VALUES ('deletemerge', 50)`);
}

/** URL path without query or fragment, as it appears in the URL (not normalised). "" for authority-form (CONNECT). */
export function urlPath(url: string): string {
  let rest: string;
  const m = /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\/[^/?#]*/.exec(url);
  if (m) rest = url.slice(m[0].length);
  else if (url.startsWith("/")) rest = url;
  else return "";
  const cut = rest.search(/[?#]/);
  const path = cut >= 0 ? rest.slice(0, cut) : rest;
  return path === "" ? "/" : path;
}

const ENTRY_TABLES = ["entries", "details", "bodies"] as const;
/** Ids read per query while salvaging; a range that fails is read id by id. */
const SALVAGE_CHUNK = 256;

/**
 * Reads every entry that can still be read from a corrupt database (moved aside) into the fresh one: the ids are
 * walked in ranges, a range whose pages are damaged is read id by id, and an entry is kept only when its row in
 * each table could be read. Returns how many were saved and how many ids could not be read (left behind in the
 * moved-aside file). The search index picks the saved entries up like new ones.
 */
export function salvageInto(from: string, to: Database): { saved: number; lost: number } {
  let src: Database;
  try {
    src = new Database(from, { readonly: true, strict: true });
  } catch {
    return { saved: 0, lost: 0 };
  }
  let saved = 0;
  let lost = 0;
  try {
    const top = (sql: string): number => {
      try {
        return ((src.query(sql).get() as { m: number | null } | null)?.m ?? 0) || 0;
      } catch {
        return 0;
      }
    };
    let maxId = top("SELECT MAX(id) AS m FROM entries");
    if (maxId === 0) maxId = top("SELECT value AS m FROM meta WHERE key = 'id_ceiling'");
    const insert = new Map<string, (row: Record<string, unknown>) => void>();
    const inserter = (table: string, row: Record<string, unknown>) => {
      const cols = Object.keys(row);
      const key = `${table}:${cols.join(",")}`;
      let f = insert.get(key);
      if (!f) {
        const stmt = to.prepare(`INSERT OR IGNORE INTO ${table} (${cols.join(", ")}) VALUES (${cols.map(() => "?").join(", ")})`);
        f = (r) => stmt.run(...(cols.map((c) => r[c]) as never[]));
        insert.set(key, f);
      }
      f(row);
    };
    const readRange = (lo: number, hi: number): Map<string, Record<string, unknown>[]> => {
      const out = new Map<string, Record<string, unknown>[]>();
      for (const t of ENTRY_TABLES) out.set(t, src.query(`SELECT * FROM ${t} WHERE id BETWEEN ? AND ? ORDER BY id`).all(lo, hi) as Record<string, unknown>[]);
      return out;
    };
    const keep = (rows: Map<string, Record<string, unknown>[]>) => {
      const byId = (t: string) => new Map((rows.get(t) ?? []).map((r) => [r.id as number, r]));
      const d = byId("details");
      const b = byId("bodies");
      for (const e of rows.get("entries") ?? []) {
        const id = e.id as number;
        if (!d.has(id) || !b.has(id)) {
          lost++;
          continue;
        }
        inserter("entries", e);
        inserter("details", d.get(id)!);
        inserter("bodies", b.get(id)!);
        saved++;
      }
    };
    to.transaction(() => {
      for (let lo = 1; lo <= maxId; lo += SALVAGE_CHUNK) {
        const hi = Math.min(maxId, lo + SALVAGE_CHUNK - 1);
        try {
          keep(readRange(lo, hi));
        } catch {
          for (let id = lo; id <= hi; id++) {
            try {
              keep(readRange(id, id));
            } catch {
              lost++;
            }
          }
        }
      }
      to.run("INSERT OR REPLACE INTO meta (key, value) VALUES ('id_ceiling', max(COALESCE((SELECT value FROM meta WHERE key = 'id_ceiling'), 0), ?))", [maxId]);
    })();
  } finally {
    src.close();
  }
  return { saved, lost };
}

export function isCorruptionError(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return code === "SQLITE_NOTADB" || code === "SQLITE_CORRUPT";
}

/** Page size of a new database file (bytes). */
const NEW_PAGE_SIZE = 16 * 1024;

/** Page cache of each connection (KiB): bounded, so the process's memory does not grow with the store. */
const CACHE_KIB = 16 * 1024;
/**
 * The reader maps at most this much of the file: reads through the map are about twice as fast for body scans
 * (search verification), and mapped pages count in the process's RSS, so it is bounded too. The writer does
 * not map the file (it mostly appends; its reads are the index steps).
 */
export const READER_MMAP_BYTES = 64 * 1024 * 1024;

/** Connection settings of the writer ("writer") and the readers ("reader"): bounded caches. */
export function tuneConnection(db: Database, role: "writer" | "reader" = "reader"): void {
  db.run("PRAGMA busy_timeout = 5000");
  db.run("PRAGMA temp_store = MEMORY");
  db.run(`PRAGMA cache_size = -${CACHE_KIB}`);
  db.run(`PRAGMA mmap_size = ${role === "reader" ? READER_MMAP_BYTES : 0}`);
}

interface Row {
  id: number;
  entry: Param[];
  detail: Param[];
  body: Param[];
  /** What the search index takes of the entry: url, request and response text ("" for a binary body). */
  text: [string, string, string];
}

/** An entry as the search index takes it: id, url, request text, response text. */
type IndexRow = [number, string, string, string];

function str(v: unknown, name: string): string {
  if (typeof v !== "string") throw new TypeError(`entry field ${name} is not a string`);
  return v;
}

function num(v: unknown, name: string): number {
  if (typeof v !== "number" || !Number.isFinite(v)) throw new TypeError(`entry field ${name} is not a number`);
  return v;
}

/** NewEntry.stored_bodies, taken out of the extras it travelled in (null for captured traffic). */
function storedBodiesOf(extra: Record<string, unknown> | null | undefined): Partial<StoredBodies> | null {
  if (!extra || !(STORED_BODIES_KEY in extra)) return null;
  const v = extra[STORED_BODIES_KEY];
  delete extra[STORED_BODIES_KEY];
  return v && typeof v === "object" ? (v as Partial<StoredBodies>) : null;
}

const lenientUtf8 = new TextDecoder("utf-8", { ignoreBOM: true });

/** An imported body kept in the form it came in (already decoded): UTF-8 text or bytes. */
function asStored(raw: Uint8Array | null, encoding: unknown, decodedFrom: unknown): DecodedBodyBytes {
  const from = typeof decodedFrom === "string" ? decodedFrom : "";
  if (!raw || raw.length === 0) return { encoding: "utf8", text: "", decodedFrom: from };
  if (encoding === "base64") return { encoding: "base64", bytes: raw, decodedFrom: from };
  return { encoding: "utf8", text: lenientUtf8.decode(raw), decodedFrom: from };
}

/** The column values of one entry: bodies decoded here, in the writer, never on the proxy's thread. */
function prepareRow(r: WireRow, reqRaw: Uint8Array | null, resRaw: Uint8Array | null): Row {
  const [id, method, url, host, status, ct, duration, ts, client, hasResponse, error, reqH, resH, , reqSize, , resSize, extraObj] = r;
  const reqHeaders: HeaderList = reqH ?? [];
  const resHeaders: HeaderList = resH ?? [];
  const reqBodySize = reqSize ?? 0;
  const resBodySize = resSize ?? 0;
  const stored = storedBodiesOf(extraObj);
  const reqTrunc = stored ? stored.req_truncated === true : reqRaw !== null && reqRaw.length < reqBodySize;
  const resTrunc = stored ? stored.res_truncated === true : resRaw !== null && resRaw.length < resBodySize;
  const req = stored ? asStored(reqRaw, stored.req_encoding, stored.req_decoded_from) : decodeBodyBytes(reqRaw, reqHeaders, reqTrunc);
  const res = stored ? asStored(resRaw, stored.res_encoding, stored.res_decoded_from) : decodeBodyBytes(resRaw, resHeaders, resTrunc);
  const reqPacked = req.encoding === "utf8" ? packBody(req.text, req.utf8) : packBody(req.bytes);
  const resPacked = res.encoding === "utf8" ? packBody(res.text, res.utf8) : packBody(res.bytes);
  let extra: string | null = null;
  if (extraObj && Object.keys(extraObj).length > 0) extra = JSON.stringify(extraObj);
  const u = str(url, "url");
  const h = str(host, "host");
  const hl = h.toLowerCase();
  return {
    id: num(id, "id"),
    entry: [
      id,
      Math.round(num(ts, "timestamp")),
      method, // NOT NULL in SQLite: a missing method is refused there
      u,
      // schema 5: '' when the host is its lower-cased form (nearly always): readers take host_lc then
      h === hl ? "" : h,
      hl,
      urlPath(u),
      Math.trunc(num(status, "status_code")),
      ct ?? "",
      Math.round(num(duration, "duration_ms")),
      client,
      hasResponse ? 1 : 0,
      error ?? null,
    ],
    detail: [id, packHeaders(reqHeaders, h), packHeaders(resHeaders, h), extra],
    body: [
      id,
      reqPacked.value,
      req.encoding,
      reqBodySize,
      reqTrunc ? 1 : 0,
      req.decodedFrom,
      reqPacked.z,
      resPacked.value,
      res.encoding,
      resBodySize,
      resTrunc ? 1 : 0,
      res.decodedFrom,
      resPacked.z,
    ],
    text: [u, req.encoding === "utf8" ? req.text : "", res.encoding === "utf8" ? res.text : ""],
  };
}

/** Rows whose ids increase, all above `above`: what the search index takes in one go. */
function increasing(rows: Row[], above: number): boolean {
  let last = above;
  for (const r of rows) {
    if (!(r.id > last)) return false;
    last = r.id;
  }
  return true;
}

export interface BatchResult {
  written: number;
  failed: number;
  error: string | null;
}

export interface WriterOptions {
  maxEntries: number;
  /** Size bound of the database (pages in use, search index included): oldest entries are evicted above it. */
  maxStoreBytes?: number;
  /** Highest id handed out by the main thread so far. */
  assigned: number;
  idReserve: number;
}

export class CaptureWriter {
  /** Where a corrupt database file was moved at open (`<path>.corrupt-<ms>`), else null. */
  recoveredFrom: string | null = null;
  /** After a corrupt file was moved aside: entries read back from it into the new one, and ids that could not be read. */
  salvage: { saved: number; lost: number } | null = null;
  /** The database file existed but was empty (0 bytes): the capture starts empty, and the caller says so. */
  wasEmpty = false;
  db: Database;
  hasFts = false;
  /**
   * Batches written while the search index has no backlog are indexed in their own transaction (writeBatch);
   * false (indexing paused): the index is only filled by indexStep.
   */
  inlineIndex = true;
  private readonly path: string;
  /** Rows in the entries table (kept in memory so count and eviction need no COUNT(*)). */
  stored = 0;
  /** Highest id ever written (or handed out before this open). */
  maxId = 0;
  /** The next id to hand out, as known from the database at open (and the journal: raiseNextId). */
  nextId = 0;
  private readonly idReserve: number;
  indexedUpto = 0;
  /** Every journal record with ids up to this one is in the tables (or was dropped): meta.journal_upto. */
  journalUpto = 0;
  private ceiling = 0;
  private readonly maxEntries: number;
  private readonly maxStoreBytes: number;
  /** Entries per search index generation (recomputed from the size bound as entries come: newGen). */
  private genSize: number;
  private pageSize = 4096;
  /** The search index generations, oldest first (mirror of fts_gens). */
  private gens: Gen[] = [];
  readonly stats = { batches: 0, batchMsTotal: 0, batchMsMax: 0, indexSteps: 0, indexedRows: 0, indexMsTotal: 0, indexMsMax: 0, evictions: 0, inlineIndexedRows: 0 };

  constructor(dbPath: string, opts: WriterOptions) {
    this.path = dbPath;
    this.maxEntries = Math.max(1, Math.floor(opts.maxEntries));
    this.maxStoreBytes = Math.max(1024 * 1024, Math.floor(opts.maxStoreBytes ?? Number.MAX_SAFE_INTEGER));
    this.genSize = Math.max(MIN_GEN_SIZE, Math.ceil(this.maxEntries / GENERATIONS));
    this.idReserve = Math.max(0, opts.idReserve);
    this.db = this.openDb(false, opts.assigned);
  }

  /**
   * Opens the database: at start-up (corrupt false: a file whose header, schema or first and last pages cannot be
   * read is moved aside), or, corrupt true, after damage was found while running (probeStep, a failed write, a
   * reader's error): the file is moved aside at once and what can be read is salvaged into a new one.
   */
  private openDb(corrupt: boolean, assigned: number): Database {
    const dbPath = this.path;
    let db: Database | null = null;
    // every captured cookie and token lives here: owner-only, the -wal and -shm files too (SQLite gives them
    // the main file's mode); a file an older version left 0644 is narrowed
    try {
      if (existsSync(dbPath)) this.wasEmpty = !corrupt && statSync(dbPath).size === 0;
      else closeSync(openSync(dbPath, "a", 0o600));
      for (const suffix of ["", "-wal", "-shm"]) if (existsSync(dbPath + suffix)) chmodSync(dbPath + suffix, 0o600);
    } catch {
      // not ours to change: SQLite reports what it cannot open
    }
    try {
      if (corrupt) throw Object.assign(new Error("damaged database"), { code: "SQLITE_CORRUPT" });
      db = new Database(dbPath, { create: true, strict: true });
      this.init(db);
      // bounded: the header and schema (init), and the first and last pages of each table (one seek each); the
      // rest is read in the background after open (probeStep), so start-up does not grow with the store
      // (each a seek on the table's own b-tree: MIN and MAX in one query would scan it)
      for (const t of ENTRY_TABLES) {
        db.query(`SELECT id FROM ${t} NOT INDEXED ORDER BY id ASC LIMIT 1`).get();
        db.query(`SELECT id FROM ${t} NOT INDEXED ORDER BY id DESC LIMIT 1`).get();
      }
    } catch (e) {
      const corrupt = isCorruptionError(e);
      const movedTo = `${dbPath}.corrupt-${Date.now()}`;
      // SQLite deletes the -wal file when the connection closes: keep a copy of it with the corrupt file
      if (corrupt && existsSync(`${dbPath}-wal`)) copyFileSync(`${dbPath}-wal`, `${movedTo}-wal`);
      try {
        db?.close();
      } catch {
        // already unusable
      }
      if (!corrupt) throw e;
      renameSync(dbPath, movedTo);
      for (const suffix of ["-wal", "-shm"]) rmSync(dbPath + suffix, { force: true });
      this.recoveredFrom = movedTo;
      this.hasFts = false;
      this.gens = [];
      closeSync(openSync(dbPath, "a", 0o600));
      db = new Database(dbPath, { create: true, strict: true });
      this.init(db);
      this.salvage = salvageInto(movedTo, db);
      if (this.salvage.saved > 0) {
        // what the writer keeps beside the rows: the exact count and the hosts table of the host filter
        db.run("INSERT OR REPLACE INTO meta (key, value) SELECT 'entry_count', COUNT(*) FROM entries");
        db.run("DELETE FROM hosts");
        db.run("INSERT INTO hosts (host_lc, n) SELECT host_lc, COUNT(*) FROM entries GROUP BY host_lc");
      }
    }
    this.db = db;
    this.pageSize = (db.query("PRAGMA page_size").get() as { page_size: number }).page_size;
    // MAX(id) is one seek; the count is kept in meta (no scan that grows with the store)
    const maxRow = db.query("SELECT MAX(id) AS m FROM entries").get() as { m: number | null };
    const ceil = this.meta("id_ceiling") ?? 0;
    // while running (corrupt): ids already handed out stay taken, and the journal's progress is kept
    const before = { nextId: this.nextId ?? 0, maxId: this.maxId, journalUpto: this.journalUpto, ceiling: this.ceiling };
    this.ceiling = 0;
    this.nextId = Math.max(maxRow.m ?? 0, ceil, assigned, before.nextId - 1) + 1;
    this.stored = this.meta("entry_count") ?? 0;
    this.maxId = Math.max(maxRow.m ?? 0, assigned, before.maxId);
    this.journalUpto = Math.max(this.meta("journal_upto") ?? 0, before.journalUpto);
    if (this.journalUpto > 0) this.setMeta("journal_upto", this.journalUpto);
    this.writeCeiling(Math.max(this.nextId - 1 + this.idReserve, before.ceiling));
    this.writeCount();
    this.bumpCacheEpoch();
    this.probedUpto = 0;
    return db;
  }

  /**
   * Damage was found while running: the file is moved aside and what can be read is salvaged into a new one
   * (as at open). The caller tells the readers to open the new file.
   */
  recover(): void {
    try {
      this.db.close();
    } catch {
      // unusable already
    }
    this.recoveredFrom = null;
    this.salvage = null;
    this.db = this.openDb(true, 0);
  }

  /**
   * Reads the whole file on a connection of its own (no page cached by this one can hide damage): SQLite's
   * quick_check (every page, overflow pages included) and each table. Throws a corruption error when damage shows.
   * O(size of the store): only on demand (a reader met an error that says the file is damaged, or a test asks).
   */
  checkAll(): void {
    const c = new Database(this.path, { readonly: true, strict: true });
    try {
      c.run("PRAGMA cache_size = -2048");
      c.run("PRAGMA mmap_size = 0");
      const r = c.query("PRAGMA quick_check(1)").values() as [string][];
      if (r[0]?.[0] !== "ok") throw Object.assign(new Error(`quick_check: ${r[0]?.[0] ?? "no answer"}`), { code: "SQLITE_CORRUPT" });
      for (const t of ENTRY_TABLES) c.query(`SELECT COUNT(*) AS c FROM ${t} NOT INDEXED WHERE id > 0`).get();
    } finally {
      c.close();
    }
    this.probedUpto = this.maxId;
  }

  /** The background probe has read every entry up to this id (in each table), without damage. */
  probedUpto = 0;

  /** True while some stored entry has not been read by the background probe since open. */
  get probing(): boolean {
    return this.probedUpto < this.maxId;
  }

  /**
   * Reads the next ids of each table (entries, details, bodies: their pages), at most `ids` of them: damage shows
   * as a corruption error, thrown (the caller recovers). Replaces the scans an open used to make (#21): start-up
   * stays short however big the store, and a damaged page is still found soon after it (or at the first read
   * that meets it). NOT INDEXED: the table's own pages, not an index that holds the same ids.
   */
  probeStep(ids: number): void {
    if (!this.probing) return;
    const lo = this.probedUpto;
    const hi = Math.min(this.maxId, lo + ids);
    for (const t of ENTRY_TABLES) this.db.query(`SELECT COUNT(*) AS c FROM ${t} NOT INDEXED WHERE id > ? AND id <= ?`).get(lo, hi);
    this.probedUpto = hi;
  }

  /** Ids below n are taken (found in the journal): the next id handed out is at least n. */
  raiseNextId(n: number): void {
    if (!(n > this.nextId)) return;
    this.nextId = n;
    this.writeCeiling(n - 1 + this.idReserve);
  }

  private init(db: Database): void {
    // first: a connection that is closing elsewhere (the last one checkpoints with the file locked) must be waited
    // for, not answered with SQLITE_BUSY; the page_count and journal_mode statements below take locks too
    db.run("PRAGMA busy_timeout = 5000");
    // a new file gets 16 KiB pages (SQLite's default is 4 KiB): rows of a few KB pack with less waste, and the
    // b-trees are shallower; an existing file keeps its page size (changing it would rewrite the whole file)
    if ((db.query("PRAGMA page_count").get() as { page_count: number }).page_count === 0) db.run(`PRAGMA page_size = ${NEW_PAGE_SIZE}`);
    db.run("PRAGMA journal_mode = WAL");
    db.run("PRAGMA synchronous = NORMAL");
    tuneConnection(db, "writer");
    db.transaction(() => {
      db.run(`CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID`);
      // a file written by a newer tapwire is refused, not misread (its rows may be coded in ways this build does not
      // know); the transaction rolls back, so nothing in it changes
      const written = (db.query("SELECT value FROM meta WHERE key = 'schema_version'").get() as { value: number } | null)?.value;
      if (written !== undefined && written > SCHEMA_VERSION) {
        const msg = `capture store ${this.path} was written by a newer tapwire (schema ${written}; this build reads schemas up to ${SCHEMA_VERSION}): start that version, or use another --data-dir`;
        throw Object.assign(new Error(msg), { code: "TAPWIRE_NEWER_SCHEMA" });
      }
      db.run(`CREATE TABLE IF NOT EXISTS entries (
        id INTEGER PRIMARY KEY,
        timestamp INTEGER NOT NULL,
        method TEXT NOT NULL,
        url TEXT NOT NULL,
        host TEXT NOT NULL,
        host_lc TEXT NOT NULL,
        path TEXT NOT NULL,
        status_code INTEGER NOT NULL,
        content_type TEXT NOT NULL,
        duration_ms INTEGER NOT NULL,
        client_addr TEXT NOT NULL,
        has_response INTEGER NOT NULL,
        error TEXT
      )`);
      // detail-only columns live apart so that scans of entries stay narrow (no header lists in the way);
      // req_headers / res_headers: JSON text, or (schema 4) a packed BLOB (header-pack.ts)
      db.run(`CREATE TABLE IF NOT EXISTS details (
        id INTEGER PRIMARY KEY,
        req_headers TEXT NOT NULL,
        res_headers TEXT NOT NULL,
        extra TEXT
      )`);
      // Each index holds every filter column, so a count (and the id list of a page) is answered from the
      // index alone, whatever the combination: no per-row table lookups (measured 40 ms+ at 100k rows).
      // Substring filters (host, path) are evaluated on the index entries; no index can seek on them.
      db.run(
        "CREATE INDEX IF NOT EXISTS entries_method ON entries (method COLLATE NOCASE, status_code, host_lc, path, timestamp)",
      );
      db.run("CREATE INDEX IF NOT EXISTS entries_status ON entries (status_code, host_lc, path, timestamp)");
      // the time filter (since): the timestamp alone (schema 5), 62 -> ~20 bytes per entry. Combined with a host,
      // method or status filter, SQLite evaluates it on those indexes, which end with the timestamp. A file from
      // schema 4 or earlier keeps its covering entries_timestamp (timestamp, status_code, host_lc, path, method).
      const hasWideTimeIndex = db.query("SELECT 1 AS x FROM sqlite_master WHERE type = 'index' AND name = 'entries_timestamp'").get() !== null;
      if (!hasWideTimeIndex) db.run("CREATE INDEX IF NOT EXISTS entries_time ON entries (timestamp)");
      // body: TEXT when encoding is utf8, BLOB (raw bytes, served as base64) when base64
      db.run(`CREATE TABLE IF NOT EXISTS bodies (
        id INTEGER PRIMARY KEY,
        req_body, req_encoding TEXT NOT NULL, req_size INTEGER NOT NULL, req_truncated INTEGER NOT NULL,
        req_decoded_from TEXT NOT NULL,
        res_body, res_encoding TEXT NOT NULL, res_size INTEGER NOT NULL, res_truncated INTEGER NOT NULL,
        res_decoded_from TEXT NOT NULL, req_z INTEGER NOT NULL DEFAULT 0, res_z INTEGER NOT NULL DEFAULT 0
      )`);
      const version = (db.query("SELECT value FROM meta WHERE key = 'schema_version'").get() as { value: number } | null)?.value;
      if (version !== undefined && version < 3) this.migrateTo3(db, version);
      else if (version === undefined) db.run(`INSERT OR IGNORE INTO meta (key, value) VALUES ('entry_count', 0)`);
      db.run(
        `INSERT INTO meta (key, value) VALUES ('schema_version', ${SCHEMA_VERSION})
         ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)`,
      );
    })();
    this.initHosts(db);
    this.hasFts = this.initSearchIndex(db);
    this.indexedUpto = this.hasFts ? (this.meta("fts_indexed_upto", db) ?? 0) : 0;
  }

  /**
   * From version 1 or 2 (inside the schema transaction): the compression columns are added (no rewrite: SQLite
   * adds a column with a default in place) and meta.entry_count, which older versions did not always keep, is
   * counted once. Logged, since the count scans the table.
   */
  private migrateTo3(db: Database, from: number): void {
    const t0 = performance.now();
    const cols = new Set((db.query("PRAGMA table_info(bodies)").all() as { name: string }[]).map((c) => c.name));
    if (!cols.has("req_z")) db.run("ALTER TABLE bodies ADD COLUMN req_z INTEGER NOT NULL DEFAULT 0");
    if (!cols.has("res_z")) db.run("ALTER TABLE bodies ADD COLUMN res_z INTEGER NOT NULL DEFAULT 0");
    db.run(`INSERT OR REPLACE INTO meta (key, value) SELECT 'entry_count', COUNT(*) FROM entries`);
    console.error(`capture store: database migrated from schema ${from} to ${SCHEMA_VERSION} in ${Math.round(performance.now() - t0)} ms`);
  }

  /**
   * The host filter (a substring of the host) is answered from `hosts` (every stored host_lc with its number of
   * entries, kept by the writer) and the index entries_host (host_lc, id): the matching hosts are found in the
   * small table, then their entries by index seeks, instead of testing every entry. A database without the table
   * gets it filled at open (one scan of the entries, logged).
   */
  private initHosts(db: Database): void {
    const exists = db.query("SELECT 1 AS x FROM sqlite_master WHERE type = 'table' AND name = 'hosts'").get() !== null;
    if (exists) return;
    const t0 = performance.now();
    db.transaction(() => {
      db.run("CREATE TABLE hosts (host_lc TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID");
      db.run("CREATE INDEX IF NOT EXISTS entries_host ON entries (host_lc, id)");
      db.run("INSERT INTO hosts (host_lc, n) SELECT host_lc, COUNT(*) FROM entries GROUP BY host_lc");
    })();
    const ms = performance.now() - t0;
    if (ms > 100) console.error(`capture store: host index built in ${Math.round(ms)} ms`);
  }

  /** Adds `by` to the entry count of each host (removing hosts left with none). */
  private countHosts(counts: Map<string, number>, sign: 1 | -1): void {
    const up = this.db.query("INSERT INTO hosts (host_lc, n) VALUES (?, ?) ON CONFLICT (host_lc) DO UPDATE SET n = n + excluded.n");
    for (const [h, n] of counts) up.run(h, sign * n);
    if (sign < 0) this.db.run("DELETE FROM hosts WHERE n <= 0");
  }

  /** Sets up the search index (false: this SQLite lacks FTS5, trigram or contentless_delete: searches scan). */
  private initSearchIndex(db: Database): boolean {
    const table = (name: string) => db.query("SELECT 1 AS x FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== null;
    try {
      db.transaction(() => {
        if (!table("fts_gens")) {
          db.run(`CREATE TABLE fts_gens (gen INTEGER PRIMARY KEY, first_id INTEGER NOT NULL, last_id INTEGER NOT NULL,
            n INTEGER NOT NULL)`);
          if (table("entries_fts")) {
            // a database from before the lazy index: its one index holds every entry: generation 0
            db.run(`INSERT INTO fts_gens (gen, first_id, last_id, n)
              SELECT 0, COALESCE(MIN(id), 0), COALESCE(MAX(id), 0), COUNT(*) FROM entries`);
            db.run(`INSERT OR REPLACE INTO meta (key, value) SELECT 'fts_indexed_upto', COALESCE(MAX(id), 0) FROM entries`);
            db.run(`INSERT INTO entries_fts (entries_fts, rank) VALUES ('deletemerge', 0)`);
          } else {
            // this SQLite can build the index? (the probe is rolled back with the rest if not)
            createFtsTable(db, "entries_fts_probe");
            db.run("DROP TABLE entries_fts_probe");
            // entries written by a SQLite that had no FTS5 get indexed lazily, like new ones
            db.run(`INSERT OR REPLACE INTO meta (key, value) VALUES ('fts_indexed_upto', 0)`);
          }
        }
      })();
    } catch {
      return false;
    }
    this.gens = db.query("SELECT gen, first_id AS firstId, last_id AS lastId, n FROM fts_gens ORDER BY gen").all() as Gen[];
    return true;
  }

  /** Starts a new search index generation whose first entry is firstId. */
  /**
   * With a size bound, generations are cut from the number of entries that fit in it (at their current average
   * size, search index included), not from maxEntries: a size bound that holds fewer entries still evicts whole
   * generations, and never rewrites a big index.
   */
  private sizeGenerations(): void {
    if (this.maxStoreBytes >= Number.MAX_SAFE_INTEGER || this.stored < 4 * MIN_GEN_SIZE_BOUNDED) return;
    const fit = Math.floor((this.stored * this.maxStoreBytes) / Math.max(1, this.usedBytes()));
    const floor = Math.min(MIN_GEN_SIZE, Math.max(MIN_GEN_SIZE_BOUNDED, Math.floor(fit / (2 * GENERATIONS))));
    this.genSize = Math.max(floor, Math.ceil(Math.min(this.maxEntries, fit) / GENERATIONS));
  }

  private newGen(firstId: number): Gen {
    const gen = (this.gens.length ? this.gens[this.gens.length - 1]!.gen : 0) + 1;
    createFtsTable(this.db, ftsTable(gen));
    this.db.query("INSERT INTO fts_gens (gen, first_id, last_id, n) VALUES (?, ?, ?, 0)").run(gen, firstId, firstId);
    const g: Gen = { gen, firstId, lastId: firstId, n: 0 };
    this.gens.push(g);
    return g;
  }

  private meta(key: string, db: Database = this.db): number | null {
    const r = db.query("SELECT value FROM meta WHERE key = ?").get(key) as { value: number } | null;
    return r ? r.value : null;
  }

  private setMeta(key: string, value: number): void {
    this.db
      .query("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value")
      .run(key, value);
  }

  /** Highest id that may have been handed out before the next write: ids are never reused after a crash. */
  private writeCeiling(value: number): void {
    if (value === this.ceiling) return;
    this.setMeta("id_ceiling", value);
    this.ceiling = value;
  }

  /** A write transaction; the in-memory mirrors of meta (count, ceiling, index mark) are restored if it fails. */
  private tx(fn: () => void): void {
    const before = {
      stored: this.stored,
      indexedUpto: this.indexedUpto,
      ceiling: this.ceiling,
      journalUpto: this.journalUpto,
      gens: this.gens.map((g) => ({ ...g })),
    };
    try {
      this.db.transaction(fn)();
    } catch (e) {
      this.stored = before.stored;
      this.indexedUpto = before.indexedUpto;
      this.ceiling = before.ceiling;
      this.journalUpto = before.journalUpto;
      this.gens = before.gens;
      throw e;
    }
  }

  /**
   * Runs fn in one write transaction (the batches written inside it nest as savepoints); its value is returned.
   * The rows those batches put into the search index go in at the end, in one go: FTS5 writes its pending
   * rows out as a new segment at every savepoint, so indexing each batch in its own would cost as many small
   * segments as before (bench/writer-bench.ts --group: 159 µs per entry against 134 µs with one segment per
   * 1,000 entries).
   */
  inOneTransaction<T>(fn: () => T): T {
    let out!: T;
    const outer = !this.grouping;
    this.grouping = true;
    try {
      this.tx(() => {
        out = fn();
        if (outer && this.deferred.length > 0) this.indexNow(this.deferred);
      });
    } finally {
      if (outer) {
        this.grouping = false;
        this.deferred = [];
      }
    }
    return out;
  }

  /** Inside inOneTransaction: rows to index when it ends. */
  private grouping = false;
  private deferred: Row[] = [];

  /** meta.entry_count: the number of entries, read by the main thread with the first page of an unfiltered list. */
  private writeCount(): void {
    this.setMeta("entry_count", this.stored);
  }

  /**
   * meta.cache_epoch: readers keep the ids a search matched and only search the entries added since (capture-query.ts
   * searchMatches), which holds while entries are only appended above the highest id and evicted oldest first. Every
   * other change bumps it: delete, clear, and each open (a journal replay after a crash writes entries again).
   */
  private bumpCacheEpoch(): void {
    this.db.run("INSERT INTO meta (key, value) VALUES ('cache_epoch', 1) ON CONFLICT (key) DO UPDATE SET value = value + 1");
  }

  /** Inside a transaction: the journal records up to this id are done with. */
  private setJournalUpto(value: number): void {
    if (value <= this.journalUpto) return;
    this.setMeta("journal_upto", value);
    this.journalUpto = value;
  }

  /** Marks the journal records up to this id as done with (skipped, or every entry failed). */
  markJournalUpto(value: number): void {
    if (value > this.journalUpto) this.tx(() => this.setJournalUpto(value));
  }

  private setIndexedUpto(value: number): void {
    if (!this.hasFts || value === this.indexedUpto) return;
    this.setMeta("fts_indexed_upto", value);
    this.indexedUpto = value;
  }

  /**
   * Writes a batch in one transaction, then evicts the oldest above maxEntries.
   * An entry that cannot be written (malformed, or SQLite refuses it) is dropped and reported; the others are
   * written: entries are never retried, so a bad one cannot block the queue. journalUpto: the batch is a journal
   * record whose ids go up to this one; committed with the rows.
   */
  writeBatch(batch: DecodedBatch, ceiling: number, journalUpto = 0): BatchResult {
    const t0 = performance.now();
    let error: string | null = null;
    let failed = 0;
    const prepared: Row[] = [];
    const rows = batch.rows;
    for (let i = 0; i < rows.length; i++) {
      try {
        prepared.push(prepareRow(rows[i]!, batch.reqBodies[i] ?? null, batch.resBodies[i] ?? null));
      } catch (err) {
        failed++;
        error ??= err instanceof Error ? err.message : String(err);
      }
    }
    // no entry stored before this batch is waiting for the search index: the batch is indexed in its own
    // transaction, with the text at hand (see insert)
    const mark = this.deferred.length > 0 ? this.deferred[this.deferred.length - 1]!.id : this.indexedUpto;
    const inline = this.inlineIndex && this.hasFts && mark >= this.maxId && increasing(prepared, mark);
    for (const r of rows) if (typeof r[0] === "number" && r[0] > this.maxId) this.maxId = r[0];
    let written = 0;
    if (prepared.length > 0) {
      try {
        this.insert(prepared, ceiling, journalUpto, inline);
        written = prepared.length;
      } catch (err) {
        // a damaged file is no entry's fault: the caller recovers, and the batch is written again
        if (isCorruptionError(err)) throw err;
        if (prepared.length === 1) {
          failed++;
          error ??= err instanceof Error ? err.message : String(err);
        } else {
          // find the culprit(s): the others are written one by one
          for (const r of prepared) {
            try {
              this.insert([r], ceiling, 0, inline);
              written++;
            } catch (err1) {
              if (isCorruptionError(err1)) throw err1;
              failed++;
              error ??= err1 instanceof Error ? err1.message : String(err1);
            }
          }
        }
      }
    } else if (ceiling > this.ceiling) {
      this.tx(() => this.writeCeiling(ceiling));
    }
    this.markJournalUpto(journalUpto);
    const ms = performance.now() - t0;
    this.stats.batches++;
    this.stats.batchMsTotal += ms;
    if (ms > this.stats.batchMsMax) this.stats.batchMsMax = ms;
    return { written, failed, error };
  }

  /**
   * inline: the rows go into the search index in the same transaction (the index mark moves to the last of them).
   * Measured in process (bench/writer-bench.ts): cheaper than indexing them later in steps, which read every
   * body back and decompress it, and write the index in small transactions (many small segments to merge).
   */
  private insert(rows: Row[], ceiling: number, journalUpto = 0, inline = false): void {
    const db = this.db;
    const insEntry = db.query(
      `INSERT INTO entries (id, timestamp, method, url, host, host_lc, path, status_code, content_type, duration_ms,
        client_addr, has_response, error) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)`,
    );
    const insDetail = db.query("INSERT INTO details (id, req_headers, res_headers, extra) VALUES (?,?,?,?)");
    const insBody = db.query(
      `INSERT INTO bodies (id, req_body, req_encoding, req_size, req_truncated, req_decoded_from, req_z,
        res_body, res_encoding, res_size, res_truncated, res_decoded_from, res_z) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)`,
    );
    this.tx(() => {
      for (const r of rows) {
        insEntry.run(...r.entry);
        insDetail.run(...r.detail);
        insBody.run(...r.body);
      }
      this.stored += rows.length;
      const hosts = new Map<string, number>();
      for (const r of rows) {
        const h = r.entry[5] as string;
        hosts.set(h, (hosts.get(h) ?? 0) + 1);
      }
      this.countHosts(hosts, 1);
      if (ceiling > this.ceiling) this.writeCeiling(ceiling);
      this.setJournalUpto(journalUpto);
      if (this.stored > this.maxEntries) this.evictOldest(this.stored - this.maxEntries);
      if (inline && !this.grouping) this.indexNow(rows);
      this.evictForSize();
      this.writeCount();
    });
    // in a group, the rows are indexed when it ends (see inOneTransaction), once their savepoint has held
    if (inline && this.grouping) this.deferred.push(...rows);
  }

  /**
   * Inside a transaction: rows written with no index backlog go into the search index. After the eviction (which
   * moves the index mark past what it evicted): only rows still stored go in, and a generation whose entries were
   * all evicted is dropped before new rows could land in it.
   */
  private indexNow(rows: Row[]): void {
    const from = rows.findIndex((r) => r.id > this.indexedUpto);
    if (from < 0) return;
    this.sizeGenerations();
    this.ftsAdd(rows.length - from, (i) => {
      const r = rows[from + i]!;
      return [r.id, r.text[0], r.text[1], r.text[2]];
    }, null);
    this.setIndexedUpto(rows[rows.length - 1]!.id);
    this.stats.inlineIndexedRows += rows.length - from;
  }

  /** Evicts the n oldest entries. */
  private evictOldest(n: number): void {
    if (n <= 0) return;
    const cut = this.db.query("SELECT id FROM entries ORDER BY id ASC LIMIT 1 OFFSET ?").get(n - 1) as { id: number } | null;
    if (cut) this.deleteUpTo(cut.id);
    else this.deleteUpTo(this.maxId);
  }

  /** Bytes of the database in use: its pages minus the free ones (O(1): both counts are in the file header). */
  usedBytes(): number {
    const pages = (this.db.query("PRAGMA page_count").get() as { page_count: number }).page_count;
    const free = (this.db.query("PRAGMA freelist_count").get() as { freelist_count: number }).freelist_count;
    return (pages - free) * this.pageSize;
  }

  /**
   * Above nine tenths of the size bound: the oldest entries go, as many as the average entry size says, down to
   * 85% of it, so that eviction runs once in a while and not at every batch. The tenth left is the margin for
   * what grows the file between two checks: a batch, an index step, and the search index's segment merges, which
   * write the merged segment before freeing the old ones (a test with a 4 MiB bound and a twentieth of margin
   * saw the file pass the bound by 16 KiB). The file only grows when no freed page is left. Freed pages are
   * reused by the next inserts. Search index rows of evicted entries are tombstones until their generation is
   * dropped, so a second round is made while that is still too much.
   */
  private evictForSize(): void {
    if (this.maxStoreBytes >= Number.MAX_SAFE_INTEGER) return;
    const high = this.maxStoreBytes * 0.9;
    const low = this.maxStoreBytes * 0.85;
    let used = this.usedBytes();
    if (used <= high || this.stored === 0) return;
    this.stats.evictions++;
    this.evictOldest(Math.max(1, Math.ceil((used - low) / (used / this.stored))));
    // still above: the search rows of the evicted entries are tombstones, freed when their generation goes:
    // the rest of the oldest generation is evicted with it (oldest first still), then per entry again
    for (let round = 0; round < 2 * GENERATIONS && this.stored > 0; round++) {
      used = this.usedBytes();
      if (used <= high) return;
      const oldest = this.gens[0];
      if (this.hasFts && oldest && this.gens.length > 1) this.deleteUpTo(oldest.lastId);
      else this.evictOldest(Math.max(1, Math.ceil((used - low) / (used / this.stored))));
    }
  }

  private deleteUpTo(maxId: number): void {
    const gone = this.db.query("SELECT host_lc AS h, COUNT(*) AS c FROM entries WHERE id <= ? GROUP BY host_lc").all(maxId) as { h: string; c: number }[];
    this.countHosts(new Map(gone.map((g) => [g.h, g.c])), -1);
    const n = this.db.query("DELETE FROM entries WHERE id <= ?").run(maxId).changes;
    this.db.query("DELETE FROM details WHERE id <= ?").run(maxId);
    this.db.query("DELETE FROM bodies WHERE id <= ?").run(maxId);
    if (this.hasFts) {
      const keep: Gen[] = [];
      for (const g of this.gens) {
        if (g.firstId > maxId) keep.push(g);
        else if (g.lastId <= maxId) {
          // every entry of this generation is gone: the whole index table goes
          this.db.run(`DROP TABLE IF EXISTS ${ftsTable(g.gen)}`);
          this.db.query("DELETE FROM fts_gens WHERE gen = ?").run(g.gen);
        } else {
          runOnce(this.db, `DELETE FROM ${ftsTable(g.gen)} WHERE rowid <= ?`, maxId);
          keep.push(g);
        }
      }
      this.gens = keep;
      // nothing at or below maxId is left to index
      if (this.indexedUpto < maxId) this.setIndexedUpto(maxId);
    }
    this.stored -= n;
  }

  /** Deletes one entry; false when there is no such entry. */
  delete(id: number): boolean {
    let n = 0;
    this.tx(() => {
      const host = this.db.query("SELECT host_lc AS h FROM entries WHERE id = ?").get(id) as { h: string } | null;
      n = this.db.query("DELETE FROM entries WHERE id = ?").run(id).changes;
      if (n > 0) {
        if (host) this.countHosts(new Map([[host.h, 1]]), -1);
        this.db.query("DELETE FROM details WHERE id = ?").run(id);
        this.db.query("DELETE FROM bodies WHERE id = ?").run(id);
        const g = this.hasFts && id <= this.indexedUpto ? this.gens.find((x) => x.firstId <= id && id <= x.lastId) : undefined;
        if (g) runOnce(this.db, `DELETE FROM ${ftsTable(g.gen)} WHERE rowid = ?`, id);
        this.stored -= n;
        this.writeCount();
        this.bumpCacheEpoch();
      }
    });
    return n > 0;
  }

  /** Drops every entry (and the journal records up to journalUpto). Ids keep increasing. */
  clear(ceiling: number, journalUpto = 0): void {
    this.tx(() => {
      this.setJournalUpto(journalUpto);
      this.db.run("DELETE FROM entries");
      this.db.run("DELETE FROM details");
      this.db.run("DELETE FROM bodies");
      this.db.run("DELETE FROM hosts");
      if (this.hasFts) {
        for (const g of this.gens) this.db.run(`DROP TABLE IF EXISTS ${ftsTable(g.gen)}`);
        this.db.run("DELETE FROM fts_gens");
        this.gens = [];
        this.setIndexedUpto(this.maxId);
      }
      if (ceiling > this.ceiling) this.writeCeiling(ceiling);
      this.stored = 0;
      this.writeCount();
      this.bumpCacheEpoch();
    });
  }

  /** True when some stored entry is not in the search index yet. */
  get backlog(): boolean {
    return this.hasFts && this.indexedUpto < this.maxId;
  }

  /**
   * Indexes the next entries above fts_indexed_upto, for at most about budgetMs (and at most maxRows rows),
   * in one transaction. Returns the number of entries indexed.
   */
  indexStep(budgetMs: number, maxRows: number): number {
    if (!this.backlog) return 0;
    const t0 = performance.now();
    this.sizeGenerations();
    const db = this.db;
    let done = 0;
    this.tx(() => {
      const rows = db
        .query(
          `SELECT e.id AS id, e.url AS url,
            CASE WHEN b.req_encoding = 'utf8' THEN b.req_body ELSE '' END AS req, b.req_z AS reqZ,
            CASE WHEN b.res_encoding = 'utf8' THEN b.res_body ELSE '' END AS res, b.res_z AS resZ
          FROM entries e LEFT JOIN bodies b ON b.id = e.id WHERE e.id > ? ORDER BY e.id LIMIT ?`,
        )
        .all(this.indexedUpto, maxRows) as {
        id: number;
        url: string;
        req: string | Uint8Array | null;
        reqZ: number | null;
        res: string | Uint8Array | null;
        resZ: number | null;
      }[];
      done = this.ftsAdd(rows.length, (i) => {
        const r = rows[i]!;
        return [r.id, r.url, unpackText(r.req, r.reqZ ?? Z_NONE), unpackText(r.res, r.resZ ?? Z_NONE)];
      }, () => performance.now() - t0 >= budgetMs);
      const last = done > 0 ? rows[done - 1]!.id : this.indexedUpto;
      // every row up to maxId was seen when the last query returned fewer rows than asked and all were indexed
      this.setIndexedUpto(done === rows.length && rows.length < maxRows ? Math.max(last, this.maxId) : last);
      // the index grows the database too
      if (done > 0) {
        const before = this.stored;
        this.evictForSize();
        if (this.stored !== before) this.writeCount();
      }
    });
    const ms = performance.now() - t0;
    this.stats.indexSteps++;
    this.stats.indexedRows += done;
    this.stats.indexMsTotal += ms;
    if (ms > this.stats.indexMsMax) this.stats.indexMsMax = ms;
    return done;
  }

  /**
   * Inside a transaction: adds `count` entries (ids increasing, above the index mark) to the search index, each in
   * the newest generation while it has room, else in a new one. Stops early when `stop` says so (checked after
   * each entry). Returns how many were added; the caller moves the index mark.
   */
  private ftsAdd(count: number, row: (i: number) => IndexRow, stop: (() => boolean) | null): number {
    const db = this.db;
    let g = this.gens[this.gens.length - 1];
    // statements naming a generation's table are not cached: the names change as generations come and go
    const insertInto = (gen: Gen) => db.prepare(`INSERT INTO ${ftsTable(gen.gen)} (rowid, url, req_body, res_body) VALUES (?,?,?,?)`);
    let ins = g && g.n < this.genSize ? insertInto(g) : null;
    let done = 0;
    try {
      for (let i = 0; i < count; i++) {
        const [id, url, req, res] = row(i);
        if (!g || !ins || g.n >= this.genSize) {
          if (g) db.query("UPDATE fts_gens SET last_id = ?, n = ? WHERE gen = ?").run(g.lastId, g.n, g.gen);
          ins?.finalize();
          g = this.newGen(id);
          ins = insertInto(g);
        }
        ins.run(id, url, req, res);
        g.n++;
        g.lastId = id;
        done++;
        if (stop?.()) break;
      }
    } finally {
      ins?.finalize();
    }
    if (g && done > 0) db.query("UPDATE fts_gens SET last_id = ?, n = ? WHERE gen = ?").run(g.lastId, g.n, g.gen);
    return done;
  }

  status(indexing: boolean): Omit<WriterStatus, "journalEntries" | "journalBytes"> {
    return {
      hasFts: this.hasFts,
      indexedUpto: this.indexedUpto,
      maxId: this.maxId,
      stored: this.stored,
      indexing,
      generations: this.gens.length,
      usedBytes: this.usedBytes(),
      probedUpto: this.probedUpto,
      ...this.stats,
    };
  }

  /** Writes the exact id ceiling and closes the database. */
  close(ceiling: number): void {
    this.writeCeiling(ceiling);
    this.db.close();
  }
}
