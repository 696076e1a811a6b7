/**
 * Messages between the capture store (main thread, capture-store.ts) and its writer Worker (capture-writer.ts).
 * A batch of entries travels in the binary form of entry-codec.ts: as a run of the ring the writer was given at
 * open (the message only names it), or, when the ring had no room, in an ArrayBuffer of its own that is
 * transferred; the writer reads it back into WireRows.
 */
import type { HeaderList } from "./types.ts";

/** One entry as the writer reads it back (entry-codec.ts); req_len / res_len: body lengths, -1 for none. */
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

// ---------------------------------------------------------------------------------------------------------------

export interface OpenRequest {
  t: "open";
  path: string;
  maxEntries: number;
  /** Size bound of the database in bytes (capture-db.ts evictForSize). */
  maxStoreBytes: number;
  /** Highest id the main thread has handed out (0 at first open): the id ceiling is written above it. */
  assigned: number;
  /** Ids reserved ahead in meta.id_ceiling, so that a crash never lets an id handed out be reused. */
  idReserve: number;
  indexing: boolean;
  /** Traffic counts as flowing while batches come closer than this: the journal then waits (capture-writer.ts). */
  busyWindowMs: number;
  /** The ring batches are written into (entry-codec.ts): a batch without data of its own is a run of it. */
  ring: SharedArrayBuffer;
}

export type WriterRequest =
  | OpenRequest
  /**
   * Entries encoded by entry-codec.ts: `length` bytes at `start` of the ring, or of `data` (transferred) when the
   * batch has a buffer of its own. A ring run is the main thread's again once the batch is answered (journaled).
   */
  | { t: "batch"; seq: number; data?: ArrayBuffer; start: number; length: number; first: number; count: number; upto: number; ceiling: number }
  | { t: "delete"; seq: number; id: number }
  | { t: "clear"; seq: number; ceiling: number }
  | { t: "status"; seq: number }
  | { t: "indexed"; seq: number }
  | { t: "indexing"; seq: number; on: boolean }
  | { t: "close"; seq: number; ceiling: number }
  /** Write the journal's backlog into SQLite now (a reader waits for it); answered by progress replies. */
  | { t: "hurry" }
  /**
   * The main thread has opened its own connections to the file: the background probe may start (it may move a
   * damaged file aside, and the path must not be missing while the main thread opens it).
   */
  | { t: "probe" }
  /**
   * A reader met a damaged page (or a test asks): every table is read now (the rest of the background probe) and,
   * if damage shows, the file is moved aside and salvaged (a "recovered" message, then the reply: value true).
   */
  | { t: "check"; seq: number };

export interface OpenedReply {
  t: "opened";
  ok: boolean;
  error?: string;
  code?: string;
  nextId?: number;
  stored?: number;
  recoveredFrom?: string | null;
  /** After a corrupt file was moved aside: entries read back from it, and ids that could not be read. */
  salvage?: { saved: number; lost: number } | null;
  /** The database file was there but empty (0 bytes). */
  wasEmpty?: boolean;
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

/**
 * Damage was found while running: the file was moved aside (recoveredFrom) and what could be read was salvaged into
 * a new one at the same path: readers must open it again.
 */
export interface RecoveredReply {
  t: "recovered";
  recoveredFrom: string | null;
  salvage: { saved: number; lost: number } | null;
  stored: number;
  hasFts: boolean;
}

export type WriterReply = OpenedReply | Reply | JournaledReply | ProgressReply | RecoveredReply;

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
  /** Entries indexed with their batch, in its transaction (no backlog then), not by index steps. */
  inlineIndexedRows: number;
  /** Bytes of the database in use (pages minus free pages). */
  usedBytes: number;
  /** Times the size bound made the writer evict. */
  evictions: number;
  /** The background probe for damaged pages has read every entry up to this id since open. */
  probedUpto: number;
}

// --- the reader Worker (capture-reader.ts) -----------------------------------------------------------------------

/** Requests to the reader Worker: queries that can take long, run off the proxy's thread on connections of its own. */
export type ReaderRequest =
  | { t: "open"; path: string; hasFts: boolean }
  /** After the writer moved a corrupt file aside: the connections are opened again on the new file. */
  | { t: "reopen"; hasFts: boolean }
  | { t: "list"; seq: number; q: import("./types.ts").ListQuery }
  /** An export with a search: every matching id up to `upto`, oldest first. */
  | { t: "search-ids"; seq: number; q: import("./types.ts").ListQuery; upto: number }
  /** An export's next page without search (q.since_id: the cursor). */
  | { t: "details-page"; seq: number; q: import("./types.ts").ListQuery; upto: number; n: number; skip: number }
  | { t: "details-ids"; seq: number; ids: number[] }
  | { t: "close"; seq: number };

export type ReaderReply =
  | { t: "opened"; ok: boolean; error?: string }
  | { t: "reply"; seq: number; value?: unknown; error?: string; code?: string };
