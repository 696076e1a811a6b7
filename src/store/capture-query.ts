/**
 * The read side of the capture store: the SQL of list(), search and exports, on a read-only connection. Used by the
 * reader Worker (capture-reader.ts), which runs every query that can take long off the proxy's thread, and by the
 * main thread when that worker is not available (capture-store.ts). Schema and write rules: capture-db.ts.
 *
 * - Search uses the FTS index for ids up to meta.fts_indexed_upto and checks the later ones directly, in one read
 *   transaction: exact whatever the indexing backlog.
 * - A search's matching ids are kept (searchMatches): its next pages, its polls (since_id) and the same search again
 *   check only the entries added since; `total` stays exact (every candidate was checked once).
 * - Filters without search: the count comes from the hosts table (host alone) or index seeks (host with method or
 *   status: seekPlan); the page from a walk in id order that stops once the page is full when matches are dense,
 *   else from an index (pageFiltered).
 */
import type { Database } from "bun:sqlite";
import { bodyFinder, unpackForApi } from "./body-pack.ts";
import { ftsTable } from "./capture-db.ts";
import { storedHeaders } from "./header-pack.ts";
import { type HelperPost, substringCheck, verifyCandidates } from "./search-share.ts";
import type { EntryDetail, EntrySummary, HeaderList, ListQuery, ListResult } from "./types.ts";

export const LIST_LIMIT_DEFAULT = 50;
export const LIST_LIMIT_MAX = 500;

/** Search strings shorter than this (in code points) cannot use the trigram index. */
const TRIGRAM_MIN = 3;
/** At most this many trigrams of a long search string are looked up in the index. */
const MAX_QUERY_TRIGRAMS = 16;
/**
 * A search's matching ids are kept (per search and filters) so that the next page, a poll (since_id) or the same
 * search again verifies only the entries added since: at most this many searches, and this many ids in all
 * (8 bytes each).
 */
const SEARCH_CACHE_ENTRIES = 8;
const SEARCH_CACHE_IDS = 1_000_000;
/** At most this many ids above the last search (or since_id) are checked one by one instead of through the index. */
const DIRECT_CHECK_IDS = 500;
/** A host/method/status filter seeks on the status codes present when there are at most this many in its range. */
const MAX_STATUS_SEEKS = 64;

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

/**
 * A search candidate: its URL and uncompressed text bodies checked by SQL (1, 0, or null when not such a body), its
 * compressed text bodies (null when not such a body, or when the URL matched) to be checked here.
 */
interface CandidateRow {
  id: number;
  u: number;
  rql: number | null;
  rsl: number | null;
  rq: Uint8Array | null;
  rqz: number | null;
  rs: Uint8Array | null;
  rsz: number | null;
}

/** The filters of a query, as the planner of list() sees them (capture-query.ts countFiltered, pageFiltered). */
interface FilterInfo {
  /** lower-cased host substring */
  host?: string;
  method?: string;
  /** status_code bounds from status, status_min, status_max and has_error (inclusive; infinite when open) */
  lo: number;
  hi: number;
  status: boolean;
  /** path, since, since_id or client: filters no count table or index seek answers */
  other: boolean;
  sinceId?: number;
}

/** An index plan for host with method and/or status (seekPlan): FROM and WHERE with their parameters. */
interface SeekPlan {
  from: string;
  where: string;
  params: Param[];
}

/** A search's matching ids, ascending: every stored id above `from` and up to `upto` that matches. */
interface CachedSearch {
  from: number;
  upto: number;
  /** meta.cache_epoch when computed: a delete, a clear or a writer's open changes it */
  epoch: number;
  ids: number[];
}

/** A search's substring check, split between SQL (url and uncompressed bodies) and JavaScript (compressed ones). */
interface SearchCheck {
  /** True when the candidate's URL holds the string, or the index alone decides (over x.id, x.url: searchIds). */
  url: string;
  urlParams: Param[];
  /** True when an uncompressed text body (the column given) holds the string; one parameter: `arg`. */
  body: (col: string) => string;
  arg: Param;
  /** The search string, for compressed bodies. */
  needle: string;
  /**
   * The candidates alone (ids ascending: the index's generations in order, then the ids above its mark), when the
   * check must verify them and no filter but since_id applies: searchIds reads their bodies rows first and their
   * entries rows (the URL) only for those whose bodies do not hold the string (searchBodiesFirst).
   */
  candidates?: { sql: string; params: Param[] };
}

const RESERVED_DETAIL_KEYS = new Set([
  "id", "method", "url", "host", "status_code", "content_type", "duration_ms", "timestamp", "client_addr",
  "has_response", "error", "req_headers", "req_body", "res_headers", "res_body", "req_body_encoding",
  "res_body_encoding", "req_body_size", "res_body_size", "req_body_truncated", "res_body_truncated",
  "req_body_decoded_from", "res_body_decoded_from",
]);

/** entries.host: '' when it is host_lc (schema 5, capture-db.ts). */
const ENTRY_HOST = (t: string) => `CASE WHEN ${t}host = '' THEN ${t}host_lc ELSE ${t}host END AS host`;

const SUMMARY_COLUMNS =
  `id, method, url, ${ENTRY_HOST("")}, status_code, ` +
  "content_type, duration_ms, timestamp, client_addr, has_response, error, " +
  // extension res_body_size (the web UI's size column): one primary-key look-up per listed row
  "(SELECT res_size FROM bodies WHERE bodies.id = entries.id) AS res_size";

/** The index of the first id above `id` in an ascending list (its length when none). */
function firstAbove(ids: number[], id: number): number {
  let a = 0;
  let b = ids.length;
  while (a < b) {
    const m = (a + b) >>> 1;
    if (ids[m]! > id) b = m;
    else a = m + 1;
  }
  return a;
}

export function finiteOrUndefined(n: number | undefined): number | undefined {
  return typeof n === "number" && Number.isFinite(n) ? n : undefined;
}

/** A stored header list: JSON text, or packed bytes (schema 4, header-pack.ts; schema 5 with the entry's host). */
function parseHeaders(stored: string | Uint8Array | null, host: string): HeaderList {
  return storedHeaders(stored, host);
}


/** Entries per page of an export (details). */
export const EXPORT_PAGE = 200;

export class CaptureQuery {
  /** hasFts: the database has the search index (capture-db.ts initSearchIndex). */
  constructor(readonly hasFts: boolean) {}

  /**
   * Posts a search's candidates to a helper Worker that checks part of them on the other core (search-share.ts;
   * set by the reader Worker, capture-reader.ts); null: this thread checks them all.
   */
  helper: HelperPost | null = null;

  /** Searches done lately (key: searchKey), most recently used last. */
  private readonly searches = new Map<string, CachedSearch>();
  private cachedIds = 0;

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
    opts: { direct?: boolean } = {},
  ): { sql: string; params: Param[]; filtered: boolean; volatile: boolean; check: SearchCheck | null; info: FilterInfo } {
    const conds: string[] = [];
    const params: Param[] = [];
    const info: FilterInfo = { lo: -Infinity, hi: Infinity, status: false, other: false };
    const bound = (lo: number, hi: number) => {
      info.lo = Math.max(info.lo, lo);
      info.hi = Math.min(info.hi, hi);
      info.status = true;
    };
    if (typeof q.host === "string" && q.host !== "") {
      // the matching hosts come from the small hosts table, their entries from entries_host (capture-db.ts)
      conds.push("host_lc IN (SELECT host_lc FROM hosts WHERE instr(host_lc, ?) > 0)");
      params.push(q.host.toLowerCase());
      info.host = q.host.toLowerCase();
    }
    if (typeof q.method === "string" && q.method !== "") {
      conds.push("method = ? COLLATE NOCASE");
      params.push(q.method);
      info.method = q.method;
    }
    const status = finiteOrUndefined(q.status);
    if (status !== undefined) {
      conds.push("status_code = ?");
      params.push(status);
      bound(status, status);
    }
    const smin = finiteOrUndefined(q.status_min);
    if (smin !== undefined) {
      conds.push("status_code >= ?");
      params.push(smin);
      bound(smin, Infinity);
    }
    const smax = finiteOrUndefined(q.status_max);
    if (smax !== undefined) {
      conds.push("status_code <= ?");
      params.push(smax);
      bound(-Infinity, smax);
    }
    if (typeof q.path === "string" && q.path !== "") {
      conds.push("instr(path, ?) > 0");
      params.push(q.path);
      info.other = true;
    }
    if (typeof q.has_error === "boolean") {
      conds.push(q.has_error ? "status_code >= 400" : "status_code < 400");
      if (q.has_error) bound(400, Infinity);
      else bound(-Infinity, 399);
    }
    const sinceId = finiteOrUndefined(q.since_id);
    if (sinceId !== undefined) {
      conds.push("id > ?");
      params.push(sinceId);
      info.other = true;
      info.sinceId = sinceId;
    }
    const since = finiteOrUndefined(q.since);
    if (since !== undefined) {
      conds.push("timestamp >= ?");
      params.push(since);
      info.other = true;
    }
    if (typeof q.client === "string" && q.client !== "") {
      conds.push("client_addr = ?");
      params.push(q.client);
      info.other = true;
    }
    let volatile = false;
    let check: SearchCheck | null = null;
    if (typeof q.search === "string" && q.search !== "") {
      const s = this.searchCondition(db, q.search, conds, params, sinceId, opts.direct === true);
      volatile = s.volatile;
      check = s.check;
      // other filters than since_id need the entries row of each candidate anyway
      if (info.host !== undefined || info.method !== undefined || info.status || conds.length > (sinceId !== undefined ? 2 : 1)) delete check.candidates;
    }
    return {
      sql: conds.length ? `WHERE ${conds.join(" AND ")}` : "",
      params,
      filtered: conds.length > 0 || check !== null,
      volatile,
      check,
      info,
    };
  }

  /**
   * search = substring of the URL or of a text body, case-insensitive for ASCII letters.
   * With 3+ characters the trigram index yields the candidates among the indexed ids (rows holding every trigram
   * of the string), and every id above the index mark is a candidate too; the candidates are then checked for the
   * real substring. Shorter strings (and SQLite without FTS5) scan.
   */
  private searchCondition(
    db: Database,
    search: string,
    conds: string[],
    params: Param[],
    sinceId: number | undefined,
    direct: boolean,
  ): { volatile: boolean; check: SearchCheck } {
    const cps = [...search];
    let verify = true;
    let indexedUpto = 0;
    let volatile = false;
    let candidates: { sql: string; params: Param[] } | undefined;
    // direct: the few ids above since_id are checked one by one, no index look-up
    if (this.hasFts && cps.length >= TRIGRAM_MIN && !direct) indexedUpto = this.metaValue(db, "fts_indexed_upto");
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
      const gens = db.query("SELECT gen, last_id AS lastId FROM fts_gens ORDER BY gen").all() as { gen: number; lastId: number }[];
      const parts: string[] = [];
      const ftsParams: Param[] = [];
      for (const { gen, lastId } of gens) {
        const t = ftsTable(gen);
        if (sinceId === undefined) {
          parts.push(`SELECT rowid AS id FROM ${t} WHERE ${t} MATCH ?`);
          ftsParams.push(match);
        } else if (lastId > sinceId) {
          // a generation holds consecutive ids up to its last_id: one entirely at or below since_id is skipped,
          // and FTS5 skips the rowids at or below it in the others
          parts.push(`SELECT rowid AS id FROM ${t} WHERE ${t} MATCH ? AND rowid > ?`);
          ftsParams.push(match, sinceId);
        }
      }
      const tail = "SELECT id FROM entries WHERE id > ?";
      conds.push(`id IN (${[...parts, tail].join(" UNION ALL ")})`);
      params.push(...ftsParams, indexedUpto);
      // the same candidates alone, since_id applied to the ids above the mark too (the condition above has its own)
      candidates = { sql: [...parts, tail].join(" UNION ALL "), params: [...ftsParams, Math.max(indexedUpto, sinceId ?? -Infinity)] };
      volatile = gens.length > 0;
      // a single ASCII trigram is matched exactly by the index, unless it holds a k or an s: the tokenizer folds
      // case by Unicode's rules, which map exactly two other characters into ASCII (U+212A KELVIN SIGN to k, U+017F
      // LONG S to s: every code point tried), where the search folds ASCII letters only. Longer strings always
      // need the check: the AND of their trigrams is no substring test ("abcd" vs "abc bcd", or across columns).
      verify = !(cps.length === TRIGRAM_MIN && /^[\x00-\x7f]*$/.test(search) && !/[ks]/i.test(search));
    }
    // the URL check over x (searchIds: the candidates' id and url), and the one of an uncompressed text body
    const { url, body, arg, needle } = substringCheck(search);
    if (verify) return { volatile, check: { url, urlParams: [arg], body, arg, needle, candidates } };
    // indexed candidates are exact; the unindexed ones are checked
    return { volatile, check: { url: `(x.id <= ? OR ${url})`, urlParams: [indexedUpto, arg], body, arg, needle } };
  }

  /**
   * The ids (in `dir` order) of the entries matching the filters and the search: candidates are checked in SQL
   * (URL, uncompressed bodies); those SQL cannot decide (compressed text bodies) are decompressed and checked here.
   */
  searchIds(db: Database, w: { sql: string; params: Param[]; volatile: boolean; check: SearchCheck }, dir: string): number[] {
    if (dir === "ASC" && w.check.candidates) return this.searchBodiesFirst(db, w, w.check.candidates);
    return this.searchJoined(db, w, dir, null);
  }

  /**
   * The joined check: each candidate's entries row (url) and bodies row are read once; SQL checks the URL and the
   * uncompressed text bodies, the compressed ones come along (unless the URL matched) and are checked here.
   * only: check these ids (ascending) instead of the candidates of w (searchBodiesFirst's fallback).
   */
  private searchJoined(db: Database, w: { sql: string; params: Param[]; volatile: boolean; check: SearchCheck }, dir: string, only: number[] | null): number[] {
    const c = w.check;
    const source = only === null ? `entries ${w.sql}` : "entries WHERE id IN (SELECT value FROM json_each(?))";
    const sql = `SELECT x.id AS id, ${c.url} AS u,
        CASE WHEN b.req_z = 0 AND b.req_encoding = 'utf8' THEN ${c.body("b.req_body")} END AS rql,
        CASE WHEN b.res_z = 0 AND b.res_encoding = 'utf8' THEN ${c.body("b.res_body")} END AS rsl,
        CASE WHEN ${c.url} THEN NULL WHEN b.req_z <> 0 AND b.req_encoding = 'utf8' THEN b.req_body END AS rq, b.req_z AS rqz,
        CASE WHEN ${c.url} THEN NULL WHEN b.res_z <> 0 AND b.res_encoding = 'utf8' THEN b.res_body END AS rs, b.res_z AS rsz
      FROM (SELECT id, url FROM ${source}) x LEFT JOIN bodies b ON b.id = x.id
      ORDER BY x.id ${dir}`;
    const once = w.volatile || only !== null;
    const st = once ? db.prepare(sql) : db.query(sql);
    const ids: number[] = [];
    const holds = bodyFinder(c.needle);
    try {
      // parameters bind in the order they appear: the checks' (select list), then the filters' (in x)
      const params = [...c.urlParams, c.arg, c.arg, ...c.urlParams, ...c.urlParams, ...(only === null ? w.params : [JSON.stringify(only)])];
      for (const r of st.iterate(...params) as IterableIterator<CandidateRow>) {
        // base64 (binary) bodies are never searched
        if (r.u || r.rql || r.rsl || holds(r.rq, r.rqz, r.rs, r.rsz)) ids.push(r.id);
      }
    } finally {
      if (once) st.finalize();
    }
    return ids;
  }

  /**
   * The check when only the search filters (since_id aside): the candidates come from the index alone (its rows are
   * exactly the stored ids up to its mark, and every id above the mark is one), and each one is checked bodies first
   * (search-share.ts checkRange): for a string found in bodies, one random page read per candidate; a string found
   * in URLs goes through the joined check after the first few hundred. With many candidates, a helper Worker
   * (this.helper) checks part of them on the other core, on a read connection of its own (search-share.ts: exact
   * across the two snapshots).
   */
  private searchBodiesFirst(db: Database, w: { sql: string; params: Param[]; volatile: boolean; check: SearchCheck }, cand: { sql: string; params: Param[] }): number[] {
    const st = db.prepare(cand.sql);
    let cands: number[];
    try {
      cands = (st.all(...cand.params) as { id: number }[]).map((r) => r.id);
    } finally {
      st.finalize();
    }
    for (let i = 1; i < cands.length; i++) {
      if (cands[i]! <= cands[i - 1]!) {
        cands.sort((a, b) => a - b);
        break;
      }
    }
    if (cands.length === 0) return [];
    return verifyCandidates(db, w.check, cands, this.metaValue(db, "cache_epoch"), this.helper);
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
      let total: number;
      let rows: SummaryRow[] = [];
      if (typeof q.search === "string" && q.search !== "") {
        const m = this.searchMatches(db, q);
        total = m.ids.length - m.start;
        // the page, from the ascending ids (those above since_id start at m.start)
        const page: number[] = [];
        if (limit > 0) {
          if (dir === "ASC") for (let i = m.start + offset; i < m.ids.length && page.length < limit; i++) page.push(m.ids[i]!);
          else for (let i = m.ids.length - 1 - offset; i >= m.start && page.length < limit; i--) page.push(m.ids[i]!);
        }
        if (page.length > 0) {
          rows = db
            .query(`SELECT ${SUMMARY_COLUMNS} FROM entries WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id ${dir}`)
            .all(JSON.stringify(page)) as SummaryRow[];
        }
        return { items: rows.map(toSummary), total, offset, limit };
      }
      const w = this.whereClause(db, q);
      if (!w.filtered) {
        total = this.metaValue(db, "entry_count");
        if (limit > 0 && offset < total) {
          rows = db
            .query(`SELECT ${SUMMARY_COLUMNS} FROM entries ORDER BY id ${dir} LIMIT ? OFFSET ?`)
            .all(limit, offset) as SummaryRow[];
        }
      } else {
        const seek = this.seekPlan(db, w.info);
        total = this.countFiltered(db, w, seek);
        if (limit > 0 && offset < total) rows = this.pageFiltered(db, w, seek, total, limit, offset, dir);
      }
      return { items: rows.map(toSummary), total, offset, limit };
    });
  }

  /**
   * The number of entries matching filters without search. A host filter alone is answered from the hosts table
   * (each host's entry count, kept by the writer in the same transactions as the entries); host with method or
   * status seeks on an index for each (method, status code, host) instead of walking a whole status range (seekPlan);
   * the rest is SQLite's COUNT.
   */
  private countFiltered(db: Database, w: { sql: string; params: Param[]; info: FilterInfo }, seek: SeekPlan | null): number {
    const f = w.info;
    if (f.host !== undefined && f.method === undefined && !f.status && !f.other) {
      const r = db.query("SELECT COALESCE(SUM(n), 0) AS n FROM hosts WHERE instr(host_lc, ?) > 0").get(f.host) as { n: number };
      return r.n;
    }
    if (seek) return (db.query(`SELECT COUNT(*) AS n FROM ${seek.from} WHERE ${seek.where}`).get(...seek.params) as { n: number }).n;
    return (db.query(`SELECT COUNT(*) AS n FROM entries ${w.sql}`).get(...w.params) as { n: number }).n;
  }

  /**
   * Host with method and/or status: the status codes present in the range (one index seek each) make the filter
   * equalities on (method, status_code, host_lc) of entries_method, or (status_code, host_lc) of entries_status, so
   * SQLite seeks to each matching run of index entries instead of testing every entry of the status range.
   * Null when no such plan applies (no host, other filters, too many status codes).
   */
  private seekPlan(db: Database, f: FilterInfo): SeekPlan | null {
    if (f.host === undefined || f.other || (f.method === undefined && !f.status)) return null;
    const codes: number[] = [];
    if (f.lo <= f.hi) {
      const next = db.query(
        "SELECT status_code AS s FROM entries INDEXED BY entries_status WHERE status_code >= ? ORDER BY status_code LIMIT 1",
      );
      let at = f.lo === -Infinity ? Number.MIN_SAFE_INTEGER : Math.ceil(f.lo);
      for (;;) {
        const r = next.get(at) as { s: number } | null;
        if (!r || r.s > f.hi) break;
        if (codes.length === MAX_STATUS_SEEKS) return null;
        codes.push(r.s);
        at = Math.floor(r.s) + 1;
      }
    }
    const inList = codes.length ? codes.join(", ") : "NULL";
    const hostCond = "host_lc IN (SELECT host_lc FROM hosts WHERE instr(host_lc, ?) > 0)";
    // status codes are integers read from the index, written into the SQL (no user text)
    if (f.method !== undefined) {
      return {
        from: "entries INDEXED BY entries_method",
        where: `method = ? COLLATE NOCASE AND status_code IN (${inList}) AND ${hostCond}`,
        params: [f.method, f.host],
      };
    }
    return { from: "entries INDEXED BY entries_status", where: `status_code IN (${inList}) AND ${hostCond}`, params: [f.host] };
  }

  /**
   * One page of a filtered list without search. When the matches are dense (the page is expected within a few
   * thousand of the newest, or oldest, entries), the entries are walked in id order from that end and the walk stops
   * once the page is full, within a window of ids sized from the density (and the index plan answers if the window
   * held too few: matches are not spread evenly). Else the matching ids come from an index (SQLite's choice, or the
   * seek plan) and the page is cut from them: the cost follows the number of matches, not the store.
   */
  private pageFiltered(
    db: Database,
    w: { sql: string; params: Param[]; info: FilterInfo },
    seek: SeekPlan | null,
    total: number,
    limit: number,
    offset: number,
    dir: string,
  ): SummaryRow[] {
    const want = Math.min(limit, total - offset);
    const byId = (sub: string) => `SELECT ${SUMMARY_COLUMNS} FROM entries WHERE id IN (${sub}) ORDER BY id ${dir}`;
    if (w.info.sinceId === undefined) {
      const count = this.metaValue(db, "entry_count");
      const walk = ((offset + want) * count) / total;
      if (walk * 4 < total || walk < 2000) {
        const edge = (sql: string) => (db.query(sql).get() as { id: number | null } | null)?.id ?? null;
        const lo = edge("SELECT id FROM entries ORDER BY id ASC LIMIT 1");
        const hi = edge("SELECT id FROM entries ORDER BY id DESC LIMIT 1");
        if (lo !== null && hi !== null && count > 0) {
          const span = Math.ceil(((walk * 3 + 1000) * (hi - lo + 1)) / count);
          const cond = dir === "DESC" ? "id >= ?" : "id <= ?";
          const edgeId = dir === "DESC" ? hi - span : lo + span;
          const where = w.sql ? `${w.sql} AND ${cond}` : `WHERE ${cond}`;
          const rows = db
            .query(byId(`SELECT id FROM entries NOT INDEXED ${where} ORDER BY id ${dir} LIMIT ? OFFSET ?`))
            .all(...w.params, edgeId, limit, offset) as SummaryRow[];
          if (rows.length >= want || (dir === "DESC" ? edgeId <= lo : edgeId >= hi)) return rows;
        }
      }
    }
    // ids first (answerable from a covering index, sorting only integers), then the 'limit' rows
    if (seek) {
      return db
        .query(byId(`SELECT id FROM ${seek.from} WHERE ${seek.where} ORDER BY id ${dir} LIMIT ? OFFSET ?`))
        .all(...seek.params, limit, offset) as SummaryRow[];
    }
    return db.query(byId(`SELECT id FROM entries ${w.sql} ORDER BY id ${dir} LIMIT ? OFFSET ?`)).all(...w.params, limit, offset) as SummaryRow[];
  }

  /** The cache key of a search: its string and filters, as whereClause reads them (not since_id, order or paging). */
  private searchKey(q: ListQuery): string {
    const str = (v: unknown) => (typeof v === "string" && v !== "" ? v : null);
    return JSON.stringify([
      q.search,
      str(q.host)?.toLowerCase() ?? null,
      // COLLATE NOCASE folds ASCII letters only
      str(q.method)?.replace(/[a-z]+/g, (m) => m.toUpperCase()) ?? null,
      finiteOrUndefined(q.status) ?? null,
      finiteOrUndefined(q.status_min) ?? null,
      finiteOrUndefined(q.status_max) ?? null,
      str(q.path),
      typeof q.has_error === "boolean" ? q.has_error : null,
      finiteOrUndefined(q.since) ?? null,
      str(q.client),
    ]);
  }

  /**
   * The ids (ascending) of the entries matching a search and its filters; those above since_id start at `start`.
   * Exact: the ids found by an earlier search with the same string and filters are kept (in this snapshot: the
   * evicted ones dropped, the ids added since searched and appended), as long as nothing but eviction of the
   * oldest and new entries above the highest id changed the store: a delete, a clear or a writer's open changes
   * meta.cache_epoch (capture-db.ts), which drops them. Entries never change once written, so a kept id's match
   * holds.
   */
  searchMatches(db: Database, q: ListQuery): { ids: number[]; start: number } {
    const sinceId = finiteOrUndefined(q.since_id);
    const edge = (sql: string) => (db.query(sql).get() as { id: number | null } | null)?.id ?? null;
    const hi = edge("SELECT id FROM entries ORDER BY id DESC LIMIT 1");
    if (hi === null) return { ids: [], start: 0 };
    // every stored id is at least lo (eviction takes the oldest)
    const lo = edge("SELECT id FROM entries ORDER BY id ASC LIMIT 1")!;
    const epoch = this.metaValue(db, "cache_epoch");
    const key = this.searchKey(q);
    const need = Math.max(sinceId ?? -Infinity, lo - 1);
    let c = this.searches.get(key);
    if (c && (c.epoch !== epoch || c.upto > hi || c.from > need)) {
      this.dropSearch(key, c);
      c = undefined;
    }
    if (c) {
      this.searches.delete(key);
      this.cachedIds -= c.ids.length;
      const gone = firstAbove(c.ids, lo - 1);
      if (gone > 0) c.ids.splice(0, gone);
      if (hi > c.upto) {
        const more = this.searchRange(db, q, Math.max(c.upto, c.from), hi);
        for (const id of more) c.ids.push(id);
        c.upto = hi;
      }
    } else {
      const from = sinceId ?? -Infinity;
      c = { from, upto: hi, epoch, ids: this.searchRange(db, q, sinceId, hi) };
    }
    this.keepSearch(key, c);
    return { ids: c.ids, start: sinceId === undefined ? 0 : firstAbove(c.ids, sinceId) };
  }

  /** The ids (ascending) matching q's search and filters above `from` (all when undefined), up to `upto` (the highest stored). */
  private searchRange(db: Database, q: ListQuery, from: number | undefined, upto: number): number[] {
    const direct = from !== undefined && upto - from <= DIRECT_CHECK_IDS;
    const w = this.whereClause(db, { ...q, since_id: from }, { direct });
    return this.searchIds(db, { ...w, check: w.check! }, "ASC");
  }

  private keepSearch(key: string, c: CachedSearch): void {
    if (c.ids.length > SEARCH_CACHE_IDS) return;
    this.searches.set(key, c);
    this.cachedIds += c.ids.length;
    for (const [k, old] of this.searches) {
      if (this.searches.size <= SEARCH_CACHE_ENTRIES && this.cachedIds <= SEARCH_CACHE_IDS) break;
      if (k === key) continue;
      this.dropSearch(k, old);
    }
  }

  private dropSearch(key: string, c: CachedSearch): void {
    if (this.searches.get(key) === c) {
      this.searches.delete(key);
      this.cachedIds -= c.ids.length;
    }
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

const DETAIL_SELECT = `SELECT e.id, e.method, e.url, ${ENTRY_HOST("e.")}, e.status_code, e.content_type, e.duration_ms, e.timestamp, e.client_addr,
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
    req_headers: parseHeaders(row.req_headers, row.host),
    req_body: unpackForApi(row.req_body, row.req_z, row.req_encoding),
    res_headers: parseHeaders(row.res_headers, row.host),
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

