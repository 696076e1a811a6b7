/**
 * Messages between the capture store (main thread, capture-store.ts) and its writer Worker (capture-writer.ts),
 * and the wire form of a batch of entries.
 *
 * A batch travels as one JSON string (one array per entry, bodies left out) plus one ArrayBuffer holding every
 * body of the batch back to back, which is transferred, not cloned: the main thread pays one JSON.stringify and one
 * memcpy per body, nothing per header or per field. The caller's body arrays are copied, never detached (a body
 * may still be in use elsewhere, e.g. a Map Local file served again).
 */
import type { HeaderList, NewEntry } from "./types.ts";

/** One entry on the wire; body lengths index into the batch's body buffer (-1: no body). */
export type WireRow = [
  id: number,
  method: string,
  url: string,
  host: string,
  status_code: number,
  content_type: string | null,
  duration_ms: number,
  timestamp: number,
  client_addr: string,
  has_response: boolean,
  error: string | null,
  req_headers: HeaderList | null,
  res_headers: HeaderList | null,
  req_len: number,
  req_body_size: number | null,
  res_len: number,
  res_body_size: number | null,
  extra: Record<string, unknown> | null,
];

export interface Queued {
  id: number;
  e: NewEntry;
}

export interface EncodedBatch {
  rows: string;
  bodies: ArrayBuffer;
  /** Entries in `rows`, and the id of the first (0 if none). */
  count: number;
  first: number;
  /** Entries that could not be encoded (dropped); the first error is reported with the batch. */
  failed: number;
  error: string | null;
}

function bodyLength(b: unknown): number {
  if (b === null || b === undefined) return -1;
  if (!ArrayBuffer.isView(b)) throw new TypeError("body is not a byte array");
  return b.byteLength;
}

function toRow(id: number, e: NewEntry, reqLen: number, resLen: number, withExtra: boolean): WireRow {
  return [
    id,
    e.method,
    e.url,
    e.host,
    e.status_code,
    e.content_type ?? null,
    e.duration_ms,
    e.timestamp,
    e.client_addr,
    !!e.has_response,
    e.error ?? null,
    e.req_headers ?? null,
    e.res_headers ?? null,
    reqLen,
    e.req_body_size ?? null,
    resLen,
    e.res_body_size ?? null,
    withExtra && e.extra && typeof e.extra === "object" ? e.extra : null,
  ];
}

/**
 * Encodes queued entries for the writer. Never throws: an entry that cannot be encoded is left out and counted
 * in `failed`; extras that are not JSON-serialisable are dropped rather than the entry (as before the worker).
 */
export function encodeBatch(items: Queued[]): EncodedBatch {
  const rows: WireRow[] = [];
  const bodies: Uint8Array[] = [];
  let total = 0;
  let failed = 0;
  let error: string | null = null;
  for (let i = 0; i < items.length; i++) {
    const { id, e } = items[i]!;
    try {
      const reqLen = bodyLength(e.req_body);
      const resLen = bodyLength(e.res_body);
      rows.push(toRow(id, e, reqLen, resLen, true));
      if (reqLen > 0) {
        bodies.push(e.req_body!);
        total += reqLen;
      }
      if (resLen > 0) {
        bodies.push(e.res_body!);
        total += resLen;
      }
    } catch (err) {
      failed++;
      error ??= err instanceof Error ? err.message : String(err);
    }
  }
  let json: string;
  try {
    json = JSON.stringify(rows);
  } catch {
    // some entry is not serialisable (a BigInt, a cycle in extra...): find it, keep the others
    const parts: string[] = [];
    const kept: Uint8Array[] = [];
    total = 0;
    let b = 0;
    for (const row of rows) {
      const mine: Uint8Array[] = [];
      if (row[13] > 0) mine.push(bodies[b++]!);
      if (row[15] > 0) mine.push(bodies[b++]!);
      let s: string | null = null;
      try {
        s = JSON.stringify(row);
      } catch {
        row[17] = null; // the extras go first
        try {
          s = JSON.stringify(row);
        } catch (err) {
          failed++;
          error ??= err instanceof Error ? err.message : String(err);
        }
      }
      if (s === null) continue;
      parts.push(s);
      for (const m of mine) {
        kept.push(m);
        total += m.byteLength;
      }
    }
    json = `[${parts.join(",")}]`;
    bodies.length = 0;
    bodies.push(...kept);
    rows.length = parts.length;
  }
  // not zero-filled, not from the shared pool (its ArrayBuffer is its own, so it can be transferred): measured
  // about 3x faster than new Uint8Array(total) + set() for batches of 200 entries of ~2 KB
  const buf = Buffer.allocUnsafeSlow(total);
  let off = 0;
  for (const body of bodies) {
    buf.set(body, off);
    off += body.byteLength;
  }
  const bodiesBuf = buf.byteOffset === 0 && buf.buffer.byteLength === total ? (buf.buffer as ArrayBuffer) : buf.buffer.slice(buf.byteOffset, buf.byteOffset + total) as ArrayBuffer;
  return { rows: json, bodies: bodiesBuf, count: rows.length, first: rows.length ? rows[0]![0] : 0, failed, error };
}

// ---------------------------------------------------------------------------------------------------------------

export interface OpenRequest {
  t: "open";
  path: string;
  maxEntries: number;
  /** Highest id the main thread has handed out (0 at first open): the id ceiling is written above it. */
  assigned: number;
  /** Ids reserved ahead in meta.id_ceiling, so that a crash never lets an id handed out be reused. */
  idReserve: number;
  indexing: boolean;
  /** Traffic counts as flowing while batches come closer than this: the journal then waits (capture-writer.ts). */
  busyWindowMs: number;
}

export type WriterRequest =
  | OpenRequest
  | { t: "batch"; seq: number; rows: string; bodies: ArrayBuffer; first: number; count: number; upto: number; ceiling: number }
  | { t: "delete"; seq: number; id: number }
  | { t: "clear"; seq: number; ceiling: number }
  | { t: "status"; seq: number }
  | { t: "indexed"; seq: number }
  | { t: "indexing"; seq: number; on: boolean }
  | { t: "close"; seq: number; ceiling: number }
  /** Write the journal's backlog into SQLite now (a reader waits for it); answered by progress replies. */
  | { t: "hurry" };

export interface OpenedReply {
  t: "opened";
  ok: boolean;
  error?: string;
  code?: string;
  nextId?: number;
  stored?: number;
  recoveredFrom?: string | null;
  hasFts?: boolean;
  /** Every id up to this one is readable (the journal found at open may hold later ones). */
  readable?: number;
}

export interface Reply {
  t: "reply";
  seq: number;
  /** Rows in the entries table after this request. */
  stored: number;
  /** First error of the request (a batch: entries that could not be written, which were dropped). */
  error: string | null;
  /** Entries of a batch that were dropped. */
  failed?: number;
  value?: unknown;
  /** Every id up to this one is in SQLite (or was dropped): readers may go ahead. */
  readable: number;
}

/**
 * A batch is in the journal: durable, and no longer held by the main thread. Its "reply" follows once it is
 * in SQLite (readable).
 */
export interface JournaledReply {
  t: "journaled";
  seq: number;
  stored: number;
}

/** The readable mark moved (journal records written into SQLite that no batch of this run is waiting for). */
export interface ProgressReply {
  t: "progress";
  stored: number;
  readable: number;
}

export type WriterReply = OpenedReply | Reply | JournaledReply | ProgressReply;

/** What status() reports about the writer. */
export interface WriterStatus {
  hasFts: boolean;
  /** Every stored entry with an id up to this one is in the search index; later ones are searched by a scan. */
  indexedUpto: number;
  /** Highest id written. */
  maxId: number;
  /** Entries (and their stored size) waiting in the journal to be written into SQLite. */
  journalEntries: number;
  journalBytes: number;
  /** Entries stored, those still in the journal included (at most maxEntries). */
  stored: number;
  indexing: boolean;
  /** Search index generations (FTS tables) in use. */
  generations: number;
  batches: number;
  batchMsTotal: number;
  batchMsMax: number;
  indexSteps: number;
  indexedRows: number;
  indexMsTotal: number;
  indexMsMax: number;
}
