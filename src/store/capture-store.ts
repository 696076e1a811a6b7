/**
 * The capture store: every finished (or failed) flow the proxy sees, in SQLite.
 *
 * - add() is the proxy hot path: it assigns the id and queues the entry, nothing else.
 *   Queued entries are written in one transaction every flushIntervalMs (or at once when maxPending are queued);
 *   body decoding (Content-Encoding, text/base64) and search indexing happen there, not on the request path.
 * - Tables: `entries` (the summary columns, plus path, host_lc and error: narrow, so scans stay cheap),
 *   `details` (header lists, extras), `bodies` (stored bodies and their flags), `entries_fts` (FTS5 trigram
 *   index over url + text bodies, used to find candidates for `search`), `meta` (schema version, id ceiling).
 * - Ids: increasing, never reused, also across clear() and crashes: `meta.id_ceiling` records, at each write,
 *   the highest id that can be handed out before the next write (at most maxPending more).
 * - WAL + synchronous=NORMAL: every committed flush survives kill -9. What was queued but not yet flushed
 *   at a crash (at most flushIntervalMs of traffic, at most maxPending entries) is lost.
 */
import { Database } from "bun:sqlite";
import { copyFileSync, existsSync, renameSync, rmSync } from "node:fs";
import { decodeBodyBytes } from "./body-decode.ts";
import type { EntryDetail, EntrySummary, HeaderList, ListQuery, ListResult, NewEntry } from "./types.ts";

export interface CaptureStoreOptions {
  /** Oldest entries are evicted after a flush when more are stored. Default 100_000. */
  maxEntries?: number;
  /** Queued entries are written at most this long after add(). Default 50. */
  flushIntervalMs?: number;
  /** Flush at once (inside add) when this many entries are queued. Default 500. */
  maxPending?: number;
}

export const LIST_LIMIT_DEFAULT = 50;
export const LIST_LIMIT_MAX = 500;

const SCHEMA_VERSION = 1;

/** Search strings shorter than this (in code points) cannot use the trigram index. */
const TRIGRAM_MIN = 3;
/** At most this many trigrams of a long search string are looked up in the index. */
const MAX_QUERY_TRIGRAMS = 16;
/** SQLite's default SQLITE_MAX_LIKE_PATTERN_LENGTH is 50,000 bytes. */
const MAX_LIKE_PATTERN_BYTES = 40_000;

type Param = string | number | null | Uint8Array;

interface SummaryRow {
  id: number;
  method: string;
  url: string;
  host: string;
  status_code: number;
  content_type: string;
  duration_ms: number;
  timestamp: number;
  client_addr: string;
  has_response: number;
  error: string | null;
}

interface DetailRow extends SummaryRow {
  extra: string | null;
  req_headers: string | null;
  res_headers: string | null;
  req_body: string | Uint8Array | null;
  req_encoding: string | null;
  req_size: number | null;
  req_truncated: number | null;
  req_decoded_from: string | null;
  res_body: string | Uint8Array | null;
  res_encoding: string | null;
  res_size: number | null;
  res_truncated: number | null;
  res_decoded_from: string | null;
}

interface Pending {
  id: number;
  e: NewEntry;
}

const RESERVED_DETAIL_KEYS = new Set([
  "id", "method", "url", "host", "status_code", "content_type", "duration_ms", "timestamp", "client_addr",
  "has_response", "error", "req_headers", "req_body", "res_headers", "res_body", "req_body_encoding",
  "res_body_encoding", "req_body_size", "res_body_size", "req_body_truncated", "res_body_truncated",
  "req_body_decoded_from", "res_body_decoded_from",
]);

const SUMMARY_COLUMNS =
  "id, method, url, host, status_code, content_type, duration_ms, timestamp, client_addr, has_response, error";

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

function isCorruptionError(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return code === "SQLITE_NOTADB" || code === "SQLITE_CORRUPT";
}

function finiteOrUndefined(n: number | undefined): number | undefined {
  return typeof n === "number" && Number.isFinite(n) ? n : undefined;
}

/** Stored body: TEXT for utf8 bodies, BLOB for base64 ones. */
function bodyToString(body: string | Uint8Array | null): string {
  if (body === null) return "";
  if (typeof body === "string") return body;
  return Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("base64");
}

function parseHeaders(json: string | null): HeaderList {
  if (json === null) return [];
  try {
    const v = JSON.parse(json);
    return Array.isArray(v) ? (v as HeaderList) : [];
  } catch {
    return [];
  }
}

export class CaptureStore {
  /** Where a corrupt database file was moved at open (`<path>.corrupt-<ms>`), else null. */
  readonly recoveredFrom: string | null = null;
  /** The last error of a flush started by the timer or by maxPending (flush() throws instead); null after a good one. */
  lastFlushError: Error | null = null;

  private db: Database;
  private readonly maxEntries: number;
  private readonly flushIntervalMs: number;
  private readonly maxPending: number;
  private pending: Pending[] = [];
  private timer: ReturnType<typeof setTimeout> | null = null;
  private nextId = 1;
  /** Rows in the entries table (kept in memory so count() and eviction need no COUNT(*)). */
  private stored = 0;
  private hasFts = false;
  private closed = false;

  constructor(dbPath: string, opts: CaptureStoreOptions = {}) {
    this.maxEntries = Math.max(1, Math.floor(opts.maxEntries ?? 100_000));
    this.flushIntervalMs = Math.max(0, opts.flushIntervalMs ?? 50);
    this.maxPending = Math.max(1, Math.floor(opts.maxPending ?? 500));

    let db: Database | null = null;
    try {
      db = new Database(dbPath, { create: true, strict: true });
      this.init(db);
    } catch (e) {
      const corrupt = dbPath !== ":memory:" && dbPath !== "" && isCorruptionError(e);
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
      db = new Database(dbPath, { create: true, strict: true });
      this.init(db);
    }
    this.db = db;
  }

  private init(db: Database): void {
    db.run("PRAGMA journal_mode = WAL");
    db.run("PRAGMA synchronous = NORMAL");
    db.run("PRAGMA busy_timeout = 5000");
    db.run("PRAGMA temp_store = MEMORY");
    db.run("PRAGMA cache_size = -32768"); // 32 MiB
    // reads through a memory map: about twice as fast for body scans (search verification); writes still use write()
    db.run("PRAGMA mmap_size = 1073741824");
    db.transaction(() => {
      db.run(`CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID`);
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
      // detail-only columns live apart so that scans of entries stay narrow (no header JSON in the way)
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
      db.run("CREATE INDEX IF NOT EXISTS entries_timestamp ON entries (timestamp, status_code, host_lc, path, method)");
      // body: TEXT when encoding is utf8, BLOB (raw bytes, served as base64) when base64
      db.run(`CREATE TABLE IF NOT EXISTS bodies (
        id INTEGER PRIMARY KEY,
        req_body, req_encoding TEXT NOT NULL, req_size INTEGER NOT NULL, req_truncated INTEGER NOT NULL,
        req_decoded_from TEXT NOT NULL,
        res_body, res_encoding TEXT NOT NULL, res_size INTEGER NOT NULL, res_truncated INTEGER NOT NULL,
        res_decoded_from TEXT NOT NULL
      )`);
      db.run(`INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ${SCHEMA_VERSION})`);
    })();
    const fts = db.query("SELECT 1 AS x FROM sqlite_master WHERE type = 'table' AND name = 'entries_fts'").get();
    if (fts) {
      this.hasFts = true;
    } else {
      try {
        db.transaction(() => {
          // contentless: the text lives once, in bodies; contentless_delete (SQLite >= 3.43) allows deleting rows.
          // detail=none: rowids only (no positions): half the indexing time, a fraction of the size; the
          // index only selects candidates, the substring itself is checked on the stored text.
          db.run(`CREATE VIRTUAL TABLE entries_fts USING fts5(url, req_body, res_body,
            content='', contentless_delete=1, detail=none, tokenize='trigram')`);
          // entries written by a SQLite that had no FTS5 get indexed now
          db.run(`INSERT INTO entries_fts (rowid, url, req_body, res_body)
            SELECT e.id, e.url,
              CASE WHEN b.req_encoding = 'utf8' THEN b.req_body ELSE '' END,
              CASE WHEN b.res_encoding = 'utf8' THEN b.res_body ELSE '' END
            FROM entries e LEFT JOIN bodies b ON b.id = e.id`);
        })();
        this.hasFts = true;
      } catch {
        // SQLite without FTS5 / trigram / contentless_delete: every search scans (same results, slower)
        this.hasFts = false;
      }
    }
    if (this.hasFts) {
      // merge index segments 8 at a time instead of 4: measured at 100k entries with 20-entry flushes,
      // about half the flush cost and p95 flush time down from ~220 ms to ~90 ms; searches barely slower
      db.run("INSERT INTO entries_fts (entries_fts, rank) VALUES ('automerge', 8)");
    }
    const maxRow = db.query("SELECT MAX(id) AS m, COUNT(*) AS c FROM entries").get() as { m: number | null; c: number };
    const ceil = db.query("SELECT value FROM meta WHERE key = 'id_ceiling'").get() as { value: number } | null;
    this.nextId = Math.max(maxRow.m ?? 0, ceil?.value ?? 0) + 1;
    this.stored = maxRow.c;
  }

  private assertOpen(): void {
    if (this.closed) throw new Error("capture store is closed");
  }

  /** Queues an entry and returns its id. Cheap: no SQLite work unless maxPending entries are queued. */
  add(e: NewEntry): number {
    this.assertOpen();
    const id = this.nextId++;
    this.pending.push({ id, e });
    if (this.pending.length >= this.maxPending) {
      this.backgroundFlush();
    } else if (this.timer === null) {
      this.timer = setTimeout(() => {
        this.timer = null;
        this.backgroundFlush();
      }, this.flushIntervalMs);
      (this.timer as { unref?: () => void }).unref?.();
    }
    return id;
  }

  /** A flush nobody waits for (timer, maxPending): a failure is recorded and logged, never thrown at the proxy. */
  private backgroundFlush(): void {
    if (this.closed) return;
    try {
      this.flush();
      this.lastFlushError = null;
    } catch (err) {
      this.lastFlushError = err instanceof Error ? err : new Error(String(err));
      console.error(`capture store: flush failed: ${this.lastFlushError.message}`);
    }
  }

  private cancelTimer(): void {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
  }

  /** Highest id that may have been handed out before the next write: ids are never reused after a crash. */
  private writeIdCeiling(value: number): void {
    this.db.query("INSERT INTO meta (key, value) VALUES ('id_ceiling', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value").run(value);
  }

  /**
   * Writes every queued entry in one transaction, then evicts the oldest above maxEntries.
   * An entry that cannot be written (malformed, or SQLite refuses it) is dropped and the error thrown after
   * the others are written; queued entries are never retried, so a bad one cannot block the queue.
   */
  flush(): void {
    this.assertOpen();
    this.cancelTimer();
    if (this.pending.length === 0) return;
    const batch = this.pending;
    this.pending = [];

    let firstError: unknown = null;
    const rows: Row[] = [];
    for (const { id, e } of batch) {
      try {
        rows.push(prepareRow(id, e));
      } catch (err) {
        firstError ??= err;
      }
    }
    if (rows.length > 0) {
      const storedBefore = this.stored;
      try {
        this.writeBatch(rows);
      } catch (err) {
        this.stored = storedBefore;
        if (rows.length === 1) {
          firstError ??= err;
        } else {
          // find the culprit(s): the others are written one by one
          for (const r of rows) {
            const before = this.stored;
            try {
              this.writeBatch([r]);
            } catch (err1) {
              this.stored = before;
              firstError ??= err1;
            }
          }
        }
      }
    }
    if (firstError !== null) throw firstError;
  }

  private writeBatch(rows: Row[]): void {
    const db = this.db;
    const insEntry = db.query(
      `INSERT INTO entries (id, timestamp, method, url, host, host_lc, path, status_code, content_type, duration_ms,
        client_addr, has_response, error) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)`,
    );
    const insDetail = db.query("INSERT INTO details (id, req_headers, res_headers, extra) VALUES (?,?,?,?)");
    const insBody = db.query(
      `INSERT INTO bodies (id, req_body, req_encoding, req_size, req_truncated, req_decoded_from,
        res_body, res_encoding, res_size, res_truncated, res_decoded_from) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
    );
    const insFts = this.hasFts ? db.query("INSERT INTO entries_fts (rowid, url, req_body, res_body) VALUES (?,?,?,?)") : null;
    db.transaction(() => {
      for (const r of rows) {
        insEntry.run(...r.entry);
        insDetail.run(...r.detail);
        insBody.run(...r.body);
        insFts?.run(...r.fts);
      }
      this.stored += rows.length;
      this.writeIdCeiling(this.nextId - 1 + this.maxPending);
      if (this.stored > this.maxEntries) {
        const excess = this.stored - this.maxEntries;
        const cut = db.query("SELECT id FROM entries ORDER BY id ASC LIMIT 1 OFFSET ?").get(excess - 1) as { id: number } | null;
        if (cut) this.deleteUpTo(cut.id);
      }
    })();
  }

  private deleteUpTo(maxId: number): void {
    const n = this.db.query("DELETE FROM entries WHERE id <= ?").run(maxId).changes;
    this.db.query("DELETE FROM details WHERE id <= ?").run(maxId);
    this.db.query("DELETE FROM bodies WHERE id <= ?").run(maxId);
    if (this.hasFts) this.db.query("DELETE FROM entries_fts WHERE rowid <= ?").run(maxId);
    this.stored -= n;
  }

  /** Builds the WHERE clause for a query; values are always bound, never interpolated. */
  private whereClause(q: ListQuery): { sql: string; params: Param[]; filtered: boolean } {
    const conds: string[] = [];
    const params: Param[] = [];
    if (typeof q.host === "string" && q.host !== "") {
      conds.push("instr(host_lc, ?) > 0");
      params.push(q.host.toLowerCase());
    }
    if (typeof q.method === "string" && q.method !== "") {
      conds.push("method = ? COLLATE NOCASE");
      params.push(q.method);
    }
    const status = finiteOrUndefined(q.status);
    if (status !== undefined) {
      conds.push("status_code = ?");
      params.push(status);
    }
    const smin = finiteOrUndefined(q.status_min);
    if (smin !== undefined) {
      conds.push("status_code >= ?");
      params.push(smin);
    }
    const smax = finiteOrUndefined(q.status_max);
    if (smax !== undefined) {
      conds.push("status_code <= ?");
      params.push(smax);
    }
    if (typeof q.path === "string" && q.path !== "") {
      conds.push("instr(path, ?) > 0");
      params.push(q.path);
    }
    if (typeof q.has_error === "boolean") {
      conds.push(q.has_error ? "status_code >= 400" : "status_code < 400");
    }
    const sinceId = finiteOrUndefined(q.since_id);
    if (sinceId !== undefined) {
      conds.push("id > ?");
      params.push(sinceId);
    }
    const since = finiteOrUndefined(q.since);
    if (since !== undefined) {
      conds.push("timestamp >= ?");
      params.push(since);
    }
    if (typeof q.search === "string" && q.search !== "") {
      this.searchCondition(q.search, conds, params);
    }
    return { sql: conds.length ? `WHERE ${conds.join(" AND ")}` : "", params, filtered: conds.length > 0 };
  }

  /**
   * search = substring of the URL or of a text body, case-insensitive for ASCII letters.
   * With 3+ characters the trigram index yields the candidates (rows holding every trigram of the string);
   * the candidates are then checked for the real substring. Shorter strings (and SQLite without FTS5) scan.
   */
  private searchCondition(search: string, conds: string[], params: Param[]): void {
    const cps = [...search];
    let verify = true;
    if (this.hasFts && cps.length >= TRIGRAM_MIN) {
      const grams = new Set<string>();
      for (let i = 0; i + TRIGRAM_MIN <= cps.length; i++) grams.add(cps.slice(i, i + TRIGRAM_MIN).join(""));
      let list = [...grams];
      if (list.length > MAX_QUERY_TRIGRAMS) {
        // a spread-out subset narrows the candidates as well; the substring check keeps the result exact
        const step = (list.length - 1) / (MAX_QUERY_TRIGRAMS - 1);
        list = Array.from({ length: MAX_QUERY_TRIGRAMS }, (_, i) => list[Math.round(i * step)]!);
      }
      conds.push("id IN (SELECT rowid FROM entries_fts WHERE entries_fts MATCH ?)");
      params.push(list.map((g) => `"${g.replaceAll('"', '""')}"`).join(" AND "));
      // a single ASCII trigram is matched exactly by the index (its case folding equals ASCII lowering)
      verify = !(cps.length === TRIGRAM_MIN && /^[\x00-\x7f]*$/.test(search));
    }
    if (verify) {
      const pattern = `%${search.replace(/[\\%_]/g, "\\$&")}%`;
      if (Buffer.byteLength(pattern) <= MAX_LIKE_PATTERN_BYTES) {
        // LIKE: case-insensitive for ASCII letters, no lower-cased copy of each body
        conds.push(`(url LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM bodies b WHERE b.id = entries.id AND (
          (b.req_encoding = 'utf8' AND b.req_body LIKE ? ESCAPE '\\') OR
          (b.res_encoding = 'utf8' AND b.res_body LIKE ? ESCAPE '\\'))))`);
        params.push(pattern, pattern, pattern);
      } else {
        // LIKE refuses patterns over 50,000 bytes; same semantics, slower
        const needle = search.replace(/[A-Z]+/g, (m) => m.toLowerCase());
        conds.push(`(instr(lower(url), ?) > 0 OR EXISTS (SELECT 1 FROM bodies b WHERE b.id = entries.id AND (
          (b.req_encoding = 'utf8' AND instr(lower(b.req_body), ?) > 0) OR
          (b.res_encoding = 'utf8' AND instr(lower(b.res_body), ?) > 0))))`);
        params.push(needle, needle, needle);
      }
    }
  }

  /**
   * One page of summaries. limit: default 50, capped at 500, 0 gives no items but the right total;
   * offset default 0. Order id DESC, or id ASC when since_id is given; q.order overrides.
   */
  list(q: ListQuery = {}): ListResult {
    this.assertOpen();
    this.flush();
    const rawLimit = finiteOrUndefined(q.limit);
    const limit = rawLimit === undefined ? LIST_LIMIT_DEFAULT : Math.min(LIST_LIMIT_MAX, Math.max(0, Math.floor(rawLimit)));
    const rawOffset = finiteOrUndefined(q.offset);
    const offset = rawOffset === undefined ? 0 : Math.max(0, Math.floor(rawOffset));
    const dir =
      q.order === "asc" || q.order === "desc"
        ? q.order.toUpperCase()
        : finiteOrUndefined(q.since_id) !== undefined
          ? "ASC"
          : "DESC";

    const w = this.whereClause(q);
    let total: number;
    let rows: SummaryRow[] = [];
    if (!w.filtered) {
      total = this.stored;
      if (limit > 0 && offset < total) {
        rows = this.db
          .query(`SELECT ${SUMMARY_COLUMNS} FROM entries ORDER BY id ${dir} LIMIT ? OFFSET ?`)
          .all(limit, offset) as SummaryRow[];
      }
    } else {
      total = (this.db.query(`SELECT COUNT(*) AS n FROM entries ${w.sql}`).get(...w.params) as { n: number }).n;
      if (limit > 0 && offset < total) {
        // ids first (answerable from a covering index, sorting only integers), then the 'limit' rows
        rows = this.db
          .query(
            `SELECT ${SUMMARY_COLUMNS} FROM entries WHERE id IN
              (SELECT id FROM entries ${w.sql} ORDER BY id ${dir} LIMIT ? OFFSET ?) ORDER BY id ${dir}`,
          )
          .all(...w.params, limit, offset) as SummaryRow[];
      }
    }
    return { items: rows.map(toSummary), total, offset, limit };
  }

  /** The detail form, or null when the id is unknown (or evicted / deleted). */
  get(id: number): EntryDetail | null {
    this.assertOpen();
    if (this.pending.length > 0 && id >= this.pending[0]!.id) this.flush();
    const row = this.db
      .query(
        `SELECT e.id, e.method, e.url, e.host, e.status_code, e.content_type, e.duration_ms, e.timestamp, e.client_addr,
          e.has_response, e.error, d.extra, d.req_headers, d.res_headers,
          b.req_body, b.req_encoding, b.req_size, b.req_truncated, b.req_decoded_from,
          b.res_body, b.res_encoding, b.res_size, b.res_truncated, b.res_decoded_from
        FROM entries e LEFT JOIN details d ON d.id = e.id LEFT JOIN bodies b ON b.id = e.id WHERE e.id = ?`,
      )
      .get(id) as DetailRow | null;
    if (!row) return null;
    let extra: Record<string, unknown> = {};
    if (row.extra) {
      try {
        const v = JSON.parse(row.extra);
        if (v && typeof v === "object" && !Array.isArray(v)) extra = v;
      } catch {
        // unreadable extras are left out
      }
    }
    const detail: EntryDetail = {
      ...toSummary(row),
      req_headers: parseHeaders(row.req_headers),
      req_body: bodyToString(row.req_body),
      res_headers: parseHeaders(row.res_headers),
      res_body: bodyToString(row.res_body),
      req_body_encoding: row.req_encoding === "base64" ? "base64" : "utf8",
      res_body_encoding: row.res_encoding === "base64" ? "base64" : "utf8",
      req_body_size: row.req_size ?? 0,
      res_body_size: row.res_size ?? 0,
      req_body_truncated: row.req_truncated === 1,
      res_body_truncated: row.res_truncated === 1,
      req_body_decoded_from: row.req_decoded_from ?? "",
      res_body_decoded_from: row.res_decoded_from ?? "",
    };
    // extras never overwrite a spec field ("error" included: it only appears when the flow failed)
    for (const [k, v] of Object.entries(extra)) {
      if (!RESERVED_DETAIL_KEYS.has(k)) detail[k] = v;
    }
    return detail;
  }

  /** Deletes one entry; false when there is no such entry. */
  delete(id: number): boolean {
    this.assertOpen();
    if (this.pending.length > 0 && id >= this.pending[0]!.id) this.flush();
    let n = 0;
    this.db.transaction(() => {
      n = this.db.query("DELETE FROM entries WHERE id = ?").run(id).changes;
      if (n > 0) {
        this.db.query("DELETE FROM details WHERE id = ?").run(id);
        this.db.query("DELETE FROM bodies WHERE id = ?").run(id);
        if (this.hasFts) this.db.query("DELETE FROM entries_fts WHERE rowid = ?").run(id);
      }
    })();
    this.stored -= n;
    return n > 0;
  }

  /** Drops every entry, queued ones too. Ids keep increasing. */
  clear(): void {
    this.assertOpen();
    this.cancelTimer();
    this.pending = [];
    this.db.transaction(() => {
      this.db.run("DELETE FROM entries");
      this.db.run("DELETE FROM details");
      this.db.run("DELETE FROM bodies");
      if (this.hasFts) this.db.run("INSERT INTO entries_fts (entries_fts) VALUES ('delete-all')");
      this.writeIdCeiling(this.nextId - 1 + this.maxPending);
    })();
    this.stored = 0;
  }

  /** Number of entries, queued ones included. */
  count(): number {
    this.assertOpen();
    return this.stored + this.pending.length;
  }

  /** Flushes and closes the database. Further calls throw. */
  close(): void {
    if (this.closed) return;
    this.flush();
    this.writeIdCeiling(this.nextId - 1);
    this.closed = true;
    this.cancelTimer();
    this.db.close();
  }
}

interface Row {
  entry: Param[];
  detail: Param[];
  body: Param[];
  fts: Param[];
}

/** The column values of one entry: bodies decoded here (flush time), never on the proxy's request path. */
function prepareRow(id: number, e: NewEntry): Row {
  const reqTrunc = e.req_body != null && e.req_body.length < e.req_body_size;
  const resTrunc = e.res_body != null && e.res_body.length < e.res_body_size;
  const req = decodeBodyBytes(e.req_body ?? null, e.req_headers ?? [], reqTrunc);
  const res = decodeBodyBytes(e.res_body ?? null, e.res_headers ?? [], resTrunc);
  let extra: string | null = null;
  if (e.extra && Object.keys(e.extra).length > 0) {
    try {
      extra = JSON.stringify(e.extra);
    } catch {
      extra = null; // not serialisable: the extras are dropped rather than the entry
    }
  }
  return {
    entry: [
      id,
      Math.round(e.timestamp),
      e.method,
      e.url,
      e.host,
      e.host.toLowerCase(),
      urlPath(e.url),
      Math.trunc(e.status_code),
      e.content_type ?? "",
      Math.round(e.duration_ms),
      e.client_addr,
      e.has_response ? 1 : 0,
      e.error ?? null,
    ],
    detail: [id, JSON.stringify(e.req_headers ?? []), JSON.stringify(e.res_headers ?? []), extra],
    body: [
      id,
      req.encoding === "utf8" ? req.text : req.bytes,
      req.encoding,
      e.req_body_size ?? 0,
      reqTrunc ? 1 : 0,
      req.decodedFrom,
      res.encoding === "utf8" ? res.text : res.bytes,
      res.encoding,
      e.res_body_size ?? 0,
      resTrunc ? 1 : 0,
      res.decodedFrom,
    ],
    fts: [id, e.url, req.encoding === "utf8" ? req.text : "", res.encoding === "utf8" ? res.text : ""],
  };
}

function toSummary(r: SummaryRow): EntrySummary {
  const s: EntrySummary = {
    id: r.id,
    method: r.method,
    url: r.url,
    host: r.host,
    status_code: r.status_code,
    content_type: r.content_type,
    duration_ms: r.duration_ms,
    timestamp: r.timestamp,
    client_addr: r.client_addr,
    has_response: r.has_response === 1,
  };
  if (r.error !== null) s.error = r.error;
  return s;
}
