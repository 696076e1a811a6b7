/**
 * The read side of the capture store: the SQL of list(), search and exports, on a read-only connection. Used by the
 * reader Worker (capture-reader.ts), which runs every query that can take long off the proxy's thread, and by the
 * main thread when that worker is not available (capture-store.ts). Schema and write rules: capture-db.ts.
 *
 * - Search uses the FTS index for ids up to meta.fts_indexed_upto and checks the later ones directly, in one read
 *   transaction: exact whatever the indexing backlog.
 */
import type { Database } from "bun:sqlite";
import { bodyFinder, unpackForApi } from "./body-pack.ts";
import { ftsTable } from "./capture-db.ts";
import { storedHeaders } from "./header-pack.ts";
import type { EntryDetail, EntrySummary, HeaderList, ListQuery, ListResult } from "./types.ts";

export const LIST_LIMIT_DEFAULT = 50;
export const LIST_LIMIT_MAX = 500;

/** Search strings shorter than this (in code points) cannot use the trigram index. */
const TRIGRAM_MIN = 3;
/** At most this many trigrams of a long search string are looked up in the index. */
const MAX_QUERY_TRIGRAMS = 16;
/** SQLite's default SQLITE_MAX_LIKE_PATTERN_LENGTH is 50,000 bytes. */
const MAX_LIKE_PATTERN_BYTES = 40_000;

type Param = string | number | null | Uint8Array;

/** An entries row: the summary fields as SQLite returns them (booleans as 0/1, no optional fields). */
type SummaryRow = Omit<EntrySummary, "has_response" | "error"> & { has_response: number; error: string | null; res_size?: number | null };

interface DetailRow extends SummaryRow {
  extra: string | null;
  req_headers: string | Uint8Array | null;
  res_headers: string | Uint8Array | null;
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
  req_z: number | null;
  res_z: number | null;
}

/** A search candidate: decided by SQL (ok), or with the compressed text bodies SQL cannot read, checked here. */
interface UndecidedRow {
  id: number;
  ok: number;
  rq: Uint8Array | null;
  rqz: number | null;
  rs: Uint8Array | null;
  rsz: number | null;
}

/** A search's substring check, split between SQL (url and uncompressed bodies) and JavaScript (compressed ones). */
interface SearchCheck {
  /** True when the URL or an uncompressed text body holds the string (or the index alone decides). */
  sql: string;
  params: Param[];
  /** The search string, for compressed bodies. */
  needle: string;
}



const RESERVED_DETAIL_KEYS = new Set([
  "id", "method", "url", "host", "status_code", "content_type", "duration_ms", "timestamp", "client_addr",
  "has_response", "error", "req_headers", "req_body", "res_headers", "res_body", "req_body_encoding",
  "res_body_encoding", "req_body_size", "res_body_size", "req_body_truncated", "res_body_truncated",
  "req_body_decoded_from", "res_body_decoded_from",
]);

const SUMMARY_COLUMNS =
  "id, method, url, host, status_code, content_type, duration_ms, timestamp, client_addr, has_response, error, " +
  // extension res_body_size (the web UI's size column): one primary-key look-up per listed row
  "(SELECT res_size FROM bodies WHERE bodies.id = entries.id) AS res_size";

export function finiteOrUndefined(n: number | undefined): number | undefined {
  return typeof n === "number" && Number.isFinite(n) ? n : undefined;
}

/** A stored header list: JSON text, or packed bytes (schema 4, header-pack.ts). */
function parseHeaders(stored: string | Uint8Array | null): HeaderList {
  return storedHeaders(stored);
}


/** Entries per page of an export (details). */
export const EXPORT_PAGE = 200;

export class CaptureQuery {
  /** hasFts: the database has the search index (capture-db.ts initSearchIndex). */
  constructor(readonly hasFts: boolean) {}

  /** Runs reads in one read transaction: one snapshot for the count, the index mark and the page. */
  snapshot<T>(db: Database, fn: (db: Database) => T): T {
    db.run("BEGIN");
    try {
      return fn(db);
    } finally {
      db.run("COMMIT");
    }
  }

  metaValue(db: Database, key: string): number {
    const r = db.query("SELECT value FROM meta WHERE key = ?").get(key) as { value: number } | null;
    return r ? r.value : 0;
  }

  /**
   * Builds the WHERE clause for a query; values are always bound, never interpolated (only the names of the
   * search index tables are, which come from fts_gens). `volatile`: the SQL names index generations, which come
   * and go: not worth keeping in the statement cache.
   */
  whereClause(
    db: Database,
    q: ListQuery,
  ): { sql: string; params: Param[]; filtered: boolean; volatile: boolean; check: SearchCheck | null } {
    const conds: string[] = [];
    const params: Param[] = [];
    if (typeof q.host === "string" && q.host !== "") {
      // the matching hosts come from the small hosts table, their entries from entries_host (capture-db.ts)
      conds.push("host_lc IN (SELECT host_lc FROM hosts WHERE instr(host_lc, ?) > 0)");
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
    if (typeof q.client === "string" && q.client !== "") {
      conds.push("client_addr = ?");
      params.push(q.client);
    }
    let volatile = false;
    let check: SearchCheck | null = null;
    if (typeof q.search === "string" && q.search !== "") {
      const s = this.searchCondition(db, q.search, conds, params);
      volatile = s.volatile;
      check = s.check;
    }
    return { sql: conds.length ? `WHERE ${conds.join(" AND ")}` : "", params, filtered: conds.length > 0 || check !== null, volatile, check };
  }

  /**
   * search = substring of the URL or of a text body, case-insensitive for ASCII letters.
   * With 3+ characters the trigram index yields the candidates among the indexed ids (rows holding every trigram
   * of the string), and every id above the index mark is a candidate too; the candidates are then checked for the
   * real substring. Shorter strings (and SQLite without FTS5) scan.
   */
  private searchCondition(db: Database, search: string, conds: string[], params: Param[]): { volatile: boolean; check: SearchCheck } {
    const cps = [...search];
    let verify = true;
    let indexedUpto = 0;
    let volatile = false;
    if (this.hasFts && cps.length >= TRIGRAM_MIN) indexedUpto = this.metaValue(db, "fts_indexed_upto");
    if (indexedUpto > 0) {
      const grams = new Set<string>();
      for (let i = 0; i + TRIGRAM_MIN <= cps.length; i++) grams.add(cps.slice(i, i + TRIGRAM_MIN).join(""));
      let list = [...grams];
      if (list.length > MAX_QUERY_TRIGRAMS) {
        // a spread-out subset narrows the candidates as well; the substring check keeps the result exact
        const step = (list.length - 1) / (MAX_QUERY_TRIGRAMS - 1);
        list = Array.from({ length: MAX_QUERY_TRIGRAMS }, (_, i) => list[Math.round(i * step)]!);
      }
      // the index (its generations together) holds exactly the stored ids <= indexedUpto; the ones above are
      // all candidates
      const match = list.map((g) => `"${g.replaceAll('"', '""')}"`).join(" AND ");
      const gens = db.query("SELECT gen FROM fts_gens ORDER BY gen").all() as { gen: number }[];
      const parts: string[] = [];
      for (const { gen } of gens) {
        const t = ftsTable(gen);
        parts.push(`SELECT rowid FROM ${t} WHERE ${t} MATCH ?`);
        params.push(match);
      }
      parts.push("SELECT id FROM entries WHERE id > ?");
      params.push(indexedUpto);
      conds.push(`id IN (${parts.join(" UNION ALL ")})`);
      volatile = gens.length > 0;
      // a single ASCII trigram is matched exactly by the index (its case folding equals ASCII lowering)
      verify = !(cps.length === TRIGRAM_MIN && /^[\x00-\x7f]*$/.test(search));
    }
    let check: string;
    const checkParams: Param[] = [];
    const pattern = `%${search.replace(/[\\%_]/g, "\\$&")}%`;
    if (Buffer.byteLength(pattern) <= MAX_LIKE_PATTERN_BYTES) {
      // LIKE: case-insensitive for ASCII letters, no lower-cased copy of each body
      check = `(url LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM bodies b WHERE b.id = entries.id AND (
        (b.req_encoding = 'utf8' AND b.req_z = 0 AND b.req_body LIKE ? ESCAPE '\\') OR
        (b.res_encoding = 'utf8' AND b.res_z = 0 AND b.res_body LIKE ? ESCAPE '\\'))))`;
      checkParams.push(pattern, pattern, pattern);
    } else {
      // LIKE refuses patterns over 50,000 bytes; same semantics, slower
      const needle = search.replace(/[A-Z]+/g, (m) => m.toLowerCase());
      check = `(instr(lower(url), ?) > 0 OR EXISTS (SELECT 1 FROM bodies b WHERE b.id = entries.id AND (
        (b.req_encoding = 'utf8' AND b.req_z = 0 AND instr(lower(b.req_body), ?) > 0) OR
        (b.res_encoding = 'utf8' AND b.res_z = 0 AND instr(lower(b.res_body), ?) > 0))))`;
      checkParams.push(needle, needle, needle);
    }
    const needle = search;
    if (verify) return { volatile, check: { sql: check, params: checkParams, needle } };
    // indexed candidates are exact; the unindexed ones are checked
    return { volatile, check: { sql: `(id <= ? OR ${check})`, params: [indexedUpto, ...checkParams], needle } };
  }

  /**
   * The ids (in `dir` order) of the entries matching the filters and the search: candidates are checked in SQL
   * (URL, uncompressed bodies); those SQL cannot decide (compressed text bodies) are decompressed and checked here.
   */
  searchIds(db: Database, w: { sql: string; params: Param[]; volatile: boolean; check: SearchCheck }, dir: string): number[] {
    // the check is computed once per candidate (MATERIALIZED: not copied into the outer query's expressions); the
    // compressed text bodies of those it cannot decide come with the same row, streamed, one body row read each
    const sql = `WITH x AS MATERIALIZED (SELECT id, ${w.check.sql} AS ok FROM entries ${w.sql})
      SELECT x.id AS id, x.ok AS ok,
        CASE WHEN x.ok THEN NULL WHEN b.req_z <> 0 AND b.req_encoding = 'utf8' THEN b.req_body END AS rq, b.req_z AS rqz,
        CASE WHEN x.ok THEN NULL WHEN b.res_z <> 0 AND b.res_encoding = 'utf8' THEN b.res_body END AS rs, b.res_z AS rsz
      FROM x LEFT JOIN bodies b ON b.id = x.id
      WHERE x.ok OR (b.req_z <> 0 AND b.req_encoding = 'utf8') OR (b.res_z <> 0 AND b.res_encoding = 'utf8')
      ORDER BY x.id ${dir}`;
    const st = w.volatile ? db.prepare(sql) : db.query(sql);
    const ids: number[] = [];
    const holds = bodyFinder(w.check.needle);
    try {
      // parameters bind in the order they appear: the check's (select list) come before the filters' (WHERE)
      for (const r of st.iterate(...w.check.params, ...w.params) as IterableIterator<UndecidedRow>) {
        // uncompressed ones were checked by SQL already; base64 (binary) bodies are never searched
        if (r.ok || (r.rq !== null && holds(r.rq, r.rqz)) || (r.rs !== null && holds(r.rs, r.rsz))) ids.push(r.id);
      }
    } finally {
      if (w.volatile) st.finalize();
    }
    return ids;
  }

  /**
   * One page of summaries. limit: default 50, capped at 500, 0 gives no items but the right total;
   * offset default 0. Order id DESC, or id ASC when since_id is given; q.order overrides.
   */
  list(db: Database, q: ListQuery): ListResult {
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

    return this.snapshot(db, (db) => {
      const w = this.whereClause(db, q);
      let total: number;
      let rows: SummaryRow[] = [];
      if (!w.filtered) {
        total = this.metaValue(db, "entry_count");
        if (limit > 0 && offset < total) {
          rows = db
            .query(`SELECT ${SUMMARY_COLUMNS} FROM entries ORDER BY id ${dir} LIMIT ? OFFSET ?`)
            .all(limit, offset) as SummaryRow[];
        }
      } else if (w.check) {
        const ids = this.searchIds(db, { ...w, check: w.check }, dir);
        total = ids.length;
        const page = limit > 0 ? ids.slice(offset, offset + limit) : [];
        if (page.length > 0) {
          rows = db
            .query(`SELECT ${SUMMARY_COLUMNS} FROM entries WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id ${dir}`)
            .all(JSON.stringify(page)) as SummaryRow[];
        }
      } else {
        const stmt = (sql: string) => (w.volatile ? db.prepare(sql) : db.query(sql));
        const countStmt = stmt(`SELECT COUNT(*) AS n FROM entries ${w.sql}`);
        total = (countStmt.get(...w.params) as { n: number }).n;
        if (w.volatile) countStmt.finalize();
        if (limit > 0 && offset < total) {
          // ids first (answerable from a covering index, sorting only integers), then the 'limit' rows
          const pageStmt = stmt(
            `SELECT ${SUMMARY_COLUMNS} FROM entries WHERE id IN
              (SELECT id FROM entries ${w.sql} ORDER BY id ${dir} LIMIT ? OFFSET ?) ORDER BY id ${dir}`,
          );
          rows = pageStmt.all(...w.params, limit, offset) as SummaryRow[];
          if (w.volatile) pageStmt.finalize();
        }
      }
      return { items: rows.map(toSummary), total, offset, limit };
    });
  }

  /** The ids of the entries matching a search and the filters of `q`, oldest first, up to `upto` (an export's). */
  searchIdsUpto(db: Database, q: ListQuery, upto: number): number[] {
    return this.snapshot(db, (db) => {
      const w = this.whereClause(db, q);
      return w.check ? this.searchIds(db, { ...w, check: w.check }, "ASC").filter((id) => id <= upto) : [];
    });
  }

  /** The next page of an export without search: at most n entries matching `q` (since_id: the cursor), up to `upto`. */
  detailsPage(db: Database, q: ListQuery, upto: number, n: number, skip: number): EntryDetail[] {
    return this.snapshot(db, (db) => {
      const w = this.whereClause(db, q);
      const sql = `SELECT id FROM entries ${w.sql ? `${w.sql} AND` : "WHERE"} id <= ? ORDER BY id ASC LIMIT ? OFFSET ?`;
      const stmt = db.prepare(sql);
      let ids: number[];
      try {
        ids = (stmt.all(...w.params, upto, n, skip) as { id: number }[]).map((r) => r.id);
      } finally {
        stmt.finalize();
      }
      return this.detailsOf(db, ids);
    });
  }

  /** The details of these ids (those still stored), oldest first. */
  detailsByIds(db: Database, ids: number[]): EntryDetail[] {
    return this.snapshot(db, (db) => this.detailsOf(db, ids));
  }

  private detailsOf(db: Database, ids: number[]): EntryDetail[] {
    if (ids.length === 0) return [];
    const rows = db.query(`${DETAIL_SELECT} WHERE e.id IN (${ids.map(() => "?").join(",")}) ORDER BY e.id`).all(...ids) as DetailRow[];
    return rows.map(toDetail);
  }

  /** One entry's detail, or null. */
  get(db: Database, id: number): EntryDetail | null {
    const row = db.query(`${DETAIL_SELECT} WHERE e.id = ?`).get(id) as DetailRow | null;
    return row ? toDetail(row) : null;
  }
}

const DETAIL_SELECT = `SELECT e.id, e.method, e.url, e.host, e.status_code, e.content_type, e.duration_ms, e.timestamp, e.client_addr,
  e.has_response, e.error, d.extra, d.req_headers, d.res_headers,
  b.req_body, b.req_encoding, b.req_size, b.req_truncated, b.req_decoded_from, b.req_z,
  b.res_body, b.res_encoding, b.res_size, b.res_truncated, b.res_decoded_from, b.res_z
  FROM entries e LEFT JOIN details d ON d.id = e.id LEFT JOIN bodies b ON b.id = e.id`;

export function toDetail(row: DetailRow): EntryDetail {
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
    req_body: unpackForApi(row.req_body, row.req_z, row.req_encoding),
    res_headers: parseHeaders(row.res_headers),
    res_body: unpackForApi(row.res_body, row.res_z, row.res_encoding),
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

export function toSummary(r: SummaryRow): EntrySummary {
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
  if (typeof r.res_size === "number") s.res_body_size = r.res_size;
  return s;
}

