/**
 * A search's candidates verified on two threads (issue 20: the first search of a string at 1,000,000 entries).
 *
 * The reader Worker (capture-reader.ts) takes a search's candidates from the trigram index (capture-query.ts
 * searchCondition) and checks each one for the real substring: one bodies row read, and for most one zstd
 * decompression, per candidate. That work is cut into chunks of consecutive candidates; the reader and a helper
 * Worker with a read connection of its own take chunks from a shared counter (Atomics.add) until none is left, and
 * write each candidate's verdict into shared memory. A helper that is busy, not started yet or slow costs nothing:
 * the reader takes the chunks it does not, and cancels it when it has not begun.
 *
 * Exactness across the two connections: the helper reads another snapshot (WAL: its own read transaction, begun
 * later). Entries are never changed once written; between two snapshots with the same meta.cache_epoch the store
 * only gained entries above the highest id and lost its oldest ones (a delete, a clear or a writer's open bumps the
 * epoch: capture-db.ts bumpCacheEpoch). So the helper refuses the job when its epoch differs (the reader then checks
 * the helper's part itself), and a candidate it finds no row for (evicted since) is marked unknown and checked again
 * by the reader in the reader's own snapshot. Every other verdict is the same in both snapshots.
 */
import type { Database } from "bun:sqlite";
import { bodyFinder } from "./body-pack.ts";

type Param = string | number | null | Uint8Array;

/** LIKE refuses patterns over 50,000 bytes (SQLite's default SQLITE_MAX_LIKE_PATTERN_LENGTH). */
const MAX_LIKE_PATTERN_BYTES = 40_000;

/** Candidates per chunk: small enough that the two threads end close together, large enough that a chunk's statements cost little. */
export const SHARE_CHUNK = 256;
/** Searches with fewer candidates are checked by the reader alone. */
export const SHARE_MIN_CANDIDATES = 1024;
/**
 * A thread reads the bodies of this many candidates before it judges whether the string is found in bodies (go on)
 * or mostly in URLs (its next chunks through the joined check, which reads the URL first).
 */
export const BODIES_FIRST_PROBE = 256;
/** How long the reader waits for a helper that has begun before it checks the helper's chunks itself. */
const HELPER_WAIT_MS = 10_000;

/** A search's substring check, split between SQL (url and uncompressed bodies) and JavaScript (compressed ones). */
export interface SubstringCheck {
  /** True when the candidate's URL (x.url) holds the string. */
  url: string;
  urlParams: Param[];
  /** True when an uncompressed text body (the column given) holds the string; one parameter: `arg`. */
  body: (col: string) => string;
  arg: Param;
  /** The search string, for compressed bodies. */
  needle: string;
}

/** The check of `search` as a substring of the URL or of a text body, ASCII letters compared case-insensitively (SQLite's LIKE). */
export function substringCheck(search: string): SubstringCheck {
  const pattern = `%${search.replace(/[\\%_]/g, "\\$&")}%`;
  if (Buffer.byteLength(pattern) <= MAX_LIKE_PATTERN_BYTES) {
    // LIKE: case-insensitive for ASCII letters, no lower-cased copy of each body
    return { url: "x.url LIKE ? ESCAPE '\\'", urlParams: [pattern], body: (col) => `${col} LIKE ? ESCAPE '\\'`, arg: pattern, needle: search };
  }
  // LIKE refuses patterns over 50,000 bytes; same semantics, slower
  const lowered = search.replace(/[A-Z]+/g, (m) => m.toLowerCase());
  return { url: "instr(lower(x.url), ?) > 0", urlParams: [lowered], body: (col) => `instr(lower(${col}), ?) > 0`, arg: lowered, needle: search };
}

/** A candidate's verdict in VerifyJob.flags. */
export const F_UNCHECKED = 0;
export const F_MATCH = 1;
/** No row in the checking thread's snapshot (the helper's: evicted since the reader's); the reader checks it again. */
export const F_UNKNOWN = 2;
export const F_NO = 3;

// VerifyJob.ctl slots
const NEXT = 0;
const STATE = 1;
const RESULT = 2;
const S_POSTED = 0;
const S_RUNNING = 1;
const S_DONE = 2;
const S_CANCELLED = 3;

/** What the reader posts to the helper: all in one SharedArrayBuffer, plus the search string and the reader's epoch. */
export interface VerifyMessage {
  t: "verify";
  sab: SharedArrayBuffer;
  n: number;
  needle: string;
  epoch: number;
}

/** A verification shared between threads: control words, the candidates (ascending) and their verdicts. */
export class VerifyJob {
  readonly ctl: Int32Array;
  readonly ids: Float64Array;
  readonly flags: Uint8Array;
  readonly chunks: number;

  constructor(readonly sab: SharedArrayBuffer, readonly n: number) {
    this.ctl = new Int32Array(sab, 0, 4);
    this.ids = new Float64Array(sab, 16, n);
    this.flags = new Uint8Array(sab, 16 + 8 * n, n);
    this.chunks = Math.ceil(n / SHARE_CHUNK);
  }

  static create(cands: number[]): VerifyJob {
    const sab = new SharedArrayBuffer(16 + 9 * cands.length);
    const job = new VerifyJob(sab, cands.length);
    job.ids.set(cands);
    return job;
  }

  /** The next chunk to check, or -1 when none is left. */
  claim(): number {
    const c = Atomics.add(this.ctl, NEXT, 1);
    return c < this.chunks ? c : -1;
  }
}

/** Per thread: how many candidates it read bodies-first and how many of those its URL had to decide. */
interface ChunkStats {
  seen: number;
  byUrl: number;
  joined: boolean;
}

/** Prepared statements of one check on one connection (the SQL depends on LIKE or instr only). */
function statements(db: Database, c: SubstringCheck) {
  const bodiesFirst = db.query(`SELECT k.value AS id, b.id IS NULL AS nb,
      CASE WHEN b.req_z = 0 AND b.req_encoding = 'utf8' THEN ${c.body("b.req_body")} END AS rql,
      CASE WHEN b.res_z = 0 AND b.res_encoding = 'utf8' THEN ${c.body("b.res_body")} END AS rsl,
      CASE WHEN b.req_z <> 0 AND b.req_encoding = 'utf8' THEN b.req_body END AS rq, b.req_z AS rqz,
      CASE WHEN b.res_z <> 0 AND b.res_encoding = 'utf8' THEN b.res_body END AS rs, b.res_z AS rsz
    FROM json_each(?) k LEFT JOIN bodies b ON b.id = k.value`);
  const urls = db.query(`SELECT x.id AS id, ${c.url} AS u FROM entries x WHERE x.id IN (SELECT value FROM json_each(?))`);
  const joined = db.query(`SELECT x.id AS id, ${c.url} AS u,
      CASE WHEN b.req_z = 0 AND b.req_encoding = 'utf8' THEN ${c.body("b.req_body")} END AS rql,
      CASE WHEN b.res_z = 0 AND b.res_encoding = 'utf8' THEN ${c.body("b.res_body")} END AS rsl,
      CASE WHEN ${c.url} THEN NULL WHEN b.req_z <> 0 AND b.req_encoding = 'utf8' THEN b.req_body END AS rq, b.req_z AS rqz,
      CASE WHEN ${c.url} THEN NULL WHEN b.res_z <> 0 AND b.res_encoding = 'utf8' THEN b.res_body END AS rs, b.res_z AS rsz
    FROM (SELECT id, url FROM entries WHERE id IN (SELECT value FROM json_each(?))) x LEFT JOIN bodies b ON b.id = x.id`);
  return { bodiesFirst, urls, joined };
}

interface BodyRow {
  id: number;
  nb?: number;
  u?: number;
  rql: number | null;
  rsl: number | null;
  rq: Uint8Array | null;
  rqz: number | null;
  rs: Uint8Array | null;
  rsz: number | null;
}

/** The index of `id` in the ascending ids[from, to), or -1. */
function indexIn(ids: Float64Array, from: number, to: number, id: number): number {
  let a = from;
  let b = to;
  while (a < b) {
    const m = (a + b) >>> 1;
    const v = ids[m]!;
    if (v === id) return m;
    if (v < id) a = m + 1;
    else b = m;
  }
  return -1;
}

/**
 * Checks candidates ids[from, to) (ascending) on `db` and writes their verdicts: F_MATCH, F_NO, or `absent` for a
 * candidate without an entries row in this snapshot. Bodies first: each candidate's bodies row is read and checked
 * (uncompressed text in SQL, compressed text here), and the entries row (the URL) only for those whose bodies do
 * not hold the string: one random page read per candidate for a string found in bodies. Once most candidates of
 * this thread needed their URL (a string found in URLs: bodies decompressed for nothing), its next chunks go through
 * the joined check, which reads the URL first and fetches no compressed body when it matched.
 */
function checkRange(
  db: Database,
  st: ReturnType<typeof statements>,
  c: SubstringCheck,
  holds: ReturnType<typeof bodyFinder>,
  ids: Float64Array,
  flags: Uint8Array,
  from: number,
  to: number,
  absent: number,
  stats: ChunkStats,
): void {
  const list = JSON.stringify(Array.from(ids.subarray(from, to)));
  const body = (r: BodyRow) => r.rql || r.rsl || holds(r.rq, r.rqz, r.rs, r.rsz);
  if (stats.joined) {
    for (const r of st.joined.iterate(...c.urlParams, c.arg, c.arg, ...c.urlParams, ...c.urlParams, list) as IterableIterator<BodyRow>) {
      const i = indexIn(ids, from, to, r.id);
      if (i >= 0) flags[i] = r.u || body(r) ? F_MATCH : F_NO;
    }
  } else {
    const byUrl: number[] = [];
    let i = from;
    for (const r of st.bodiesFirst.iterate(c.arg, c.arg, list) as IterableIterator<BodyRow>) {
      // json_each gives the rows in the list's order; looked up when not
      const at = ids[i] === r.id ? i : indexIn(ids, from, to, r.id);
      i = at + 1;
      if (at < 0) continue;
      if (!r.nb && body(r)) flags[at] = F_MATCH;
      else byUrl.push(r.id);
    }
    stats.seen += to - from;
    stats.byUrl += byUrl.length;
    if (stats.seen >= BODIES_FIRST_PROBE && stats.byUrl * 2 > stats.seen) stats.joined = true;
    if (byUrl.length > 0) {
      for (const r of st.urls.iterate(...c.urlParams, JSON.stringify(byUrl)) as IterableIterator<{ id: number; u: number }>) {
        const at = indexIn(ids, from, to, r.id);
        if (at >= 0) flags[at] = r.u ? F_MATCH : F_NO;
      }
    }
  }
  // no entries row in this snapshot
  for (let k = from; k < to; k++) if (flags[k] === F_UNCHECKED) flags[k] = absent;
}

/** Posts a job to the helper Worker; false when there is none (or it cannot be reached). */
export type HelperPost = (m: VerifyMessage) => boolean;

/**
 * The reader's side: the ids (ascending) among `cands` (ascending, from the reader's snapshot on `db`, which is in a
 * read transaction) that match. With a helper and enough candidates the work is shared (see the file's comment);
 * else, or when the helper fails, the reader checks every candidate itself. `epoch`: meta.cache_epoch in the
 * reader's snapshot. minShared: fewer candidates are checked here alone (tests share smaller ones).
 */
export function verifyCandidates(
  db: Database,
  c: SubstringCheck,
  cands: number[],
  epoch: number,
  helper: HelperPost | null,
  minShared = SHARE_MIN_CANDIDATES,
): number[] {
  if (cands.length === 0) return [];
  const job = VerifyJob.create(cands);
  const st = statements(db, c);
  const holds = bodyFinder(c.needle);
  const stats: ChunkStats = { seen: 0, byUrl: 0, joined: false };
  const mine = new Uint8Array(job.chunks);
  const shared = helper !== null && cands.length >= minShared && helper({ t: "verify", sab: job.sab, n: job.n, needle: c.needle, epoch });
  const run = (chunk: number) => {
    mine[chunk] = 1;
    const from = chunk * SHARE_CHUNK;
    checkRange(db, st, c, holds, job.ids, job.flags, from, Math.min(job.n, from + SHARE_CHUNK), F_NO, stats);
  };
  for (let k = job.claim(); k >= 0; k = job.claim()) run(k);
  if (shared && Atomics.compareExchange(job.ctl, STATE, S_POSTED, S_CANCELLED) !== S_POSTED) {
    // the helper has begun: wait for its chunks
    const until = Date.now() + HELPER_WAIT_MS;
    let ok = true;
    while (Atomics.load(job.ctl, STATE) === S_RUNNING) {
      const left = until - Date.now();
      if (left <= 0) {
        ok = false;
        break;
      }
      Atomics.wait(job.ctl, STATE, S_RUNNING, left);
    }
    if (!ok || Atomics.load(job.ctl, RESULT) !== 0) {
      // refused (another epoch), failed or too slow: its chunks are checked here
      for (let k = 0; k < job.chunks; k++) {
        if (mine[k]) continue;
        job.flags.fill(F_UNCHECKED, k * SHARE_CHUNK, Math.min(job.n, (k + 1) * SHARE_CHUNK));
        run(k);
      }
    }
  }
  // candidates the helper found no row for (evicted since this snapshot): checked in this one
  const again: number[] = [];
  for (let k = 0; k < job.n; k++) if (job.flags[k] === F_UNKNOWN) again.push(cands[k]!);
  if (again.length > 0) {
    const sub = VerifyJob.create(again);
    checkRange(db, st, c, holds, sub.ids, sub.flags, 0, sub.n, F_NO, stats);
    let j = 0;
    for (let k = 0; k < job.n; k++) if (job.flags[k] === F_UNKNOWN) job.flags[k] = sub.flags[j++]!;
  }
  const out: number[] = [];
  for (let k = 0; k < job.n; k++) if (job.flags[k] === F_MATCH) out.push(cands[k]!);
  return out;
}

/**
 * The helper's side (capture-reader.ts, a Worker of the reader's): unless the reader has cancelled the job, takes
 * chunks until none is left, on its own connection and snapshot; refuses (RESULT 1) when its meta.cache_epoch is
 * not the reader's. `limit`: at most this many chunks (tests).
 */
export function helpVerify(db: Database, m: VerifyMessage, limit = Infinity): void {
  const job = new VerifyJob(m.sab, m.n);
  if (Atomics.compareExchange(job.ctl, STATE, S_POSTED, S_RUNNING) !== S_POSTED) return;
  let result = 1;
  try {
    db.run("BEGIN");
    try {
      const r = db.query("SELECT value FROM meta WHERE key = 'cache_epoch'").get() as { value: number } | null;
      if ((r ? r.value : 0) === m.epoch) {
        const c = substringCheck(m.needle);
        const st = statements(db, c);
        const holds = bodyFinder(c.needle);
        const stats: ChunkStats = { seen: 0, byUrl: 0, joined: false };
        for (let done = 0; done < limit; done++) {
          const k = job.claim();
          if (k < 0) break;
          const from = k * SHARE_CHUNK;
          checkRange(db, st, c, holds, job.ids, job.flags, from, Math.min(job.n, from + SHARE_CHUNK), F_UNKNOWN, stats);
        }
        result = 0;
      }
    } finally {
      db.run("COMMIT");
    }
  } catch (e) {
    console.error(`capture reader: search helper failed: ${e instanceof Error ? e.message : String(e)}`);
    result = 1;
  } finally {
    Atomics.store(job.ctl, RESULT, result);
    Atomics.store(job.ctl, STATE, S_DONE);
    Atomics.notify(job.ctl, STATE);
  }
}
