/**
 * The capture store: every finished (or failed) flow the proxy sees, in SQLite. Main-thread side.
 *
 * - add() is the proxy hot path: it assigns the id and encodes the entry into the batch ring shared with the
 *   writer Worker (entry-codec.ts), nothing else. Batches go to the writer (capture-writer.ts) every
 *   flushIntervalMs, or at once when maxPending are queued, as a small message naming their run of the ring.
 *   Every write (body decoding, inserts, eviction, delete, clear, search indexing) happens in the worker, in the
 *   order posted; schema and write rules are in capture-db.ts.
 * - Reads (list, get) run here, on a read-only connection of their own (WAL: they never wait for the writer),
 *   after the worker has acknowledged every entry added before the call: a client that got its response finds
 *   its entry in the next API call.
 * - Search uses the FTS index for ids up to meta.fts_indexed_upto and checks the later ones directly, in one read
 *   transaction: exact whatever the indexing backlog.
 * - If the worker dies, the error is logged and kept in lastFlushError, and the worker is started again, once;
 *   batches it had not acknowledged are lost unless committed. add() never throws because of the writer.
 * - Durability: every entry is also appended, as it is added, to a write-ahead file of the main thread
 *   (`<db>.journal/wal-0.twm` / `wal-1.twm`, one write() of the bytes already encoded, no fsync): the proxy adds
 *   the entry before it sends the response's last byte, so a flow whose response a client received survives
 *   kill -9 (the kernel has the bytes). The writer's first open moves those records into its journal. What the
 *   worker acknowledged survives as before (journal, WAL, synchronous=NORMAL). Ids are never reused, crash or not.
 * - ":memory:" (or "") is a private temporary file, removed by close().
 */
import { Database } from "bun:sqlite";
import { closeSync, ftruncateSync, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bodyFinder, unpackForApi } from "./body-pack.ts";
import { ftsTable, tuneConnection } from "./capture-db.ts";
import type { WriterReply, WriterRequest, WriterStatus } from "./capture-protocol.ts";
import { BatchBuilder, RING_BYTES } from "./entry-codec.ts";
import { HEADER_BYTES, WAL_FILES, writeRecordHeader } from "./capture-journal.ts";

/** The write-ahead file in use is switched for the other once it holds this much and the other is all journaled. */
const WAL_ROTATE_BYTES = 8 * 1024 * 1024;
/** The write-ahead queue's buffer to start with; one grown past WAL_BUF_KEEP_BYTES (a burst) is let go after its flush. */
const WAL_BUF_BYTES = 256 * 1024;
const WAL_BUF_KEEP_BYTES = 4 * 1024 * 1024;

/** The main thread's two write-ahead files (see the durability note above). */
interface Wal {
  fds: [number, number];
  size: [number, number];
  /** Highest id written to each. */
  maxId: [number, number];
  cur: 0 | 1;
  /** Every id up to this one is in the writer's journal (or SQLite). */
  journaled: number;
}
import type { EntryDetail, EntrySummary, HeaderList, ListQuery, ListResult, NewEntry } from "./types.ts";

export { urlPath } from "./capture-db.ts";
export type { WriterStatus } from "./capture-protocol.ts";

export interface CaptureStoreOptions {
  /** Oldest entries are evicted after a write when more are stored. Default 100_000. */
  maxEntries?: number;
  /**
   * Size bound of the database file in bytes (search index included; the WAL and the writer's journal are
   * apart): oldest entries are evicted by the writer to stay under it. Default DEFAULT_MAX_STORE_BYTES (2 GiB).
   */
  maxStoreBytes?: number;
  /** Queued entries are posted to the writer at most this long after add(). Default 15. */
  flushIntervalMs?: number;
  /** Post at once (inside add) when this many entries are queued. Default 200. */
  maxPending?: number;
  /** Fill the search index in the background. Default true (false: every search scans; see setIndexing). */
  indexing?: boolean;
  /**
   * Batches are journaled at once and written into SQLite when no batch has come for this long (or a reader
   * needs them, or the journal is large). Default 100.
   */
  busyWindowMs?: number;
  /** Size of the ring batches are encoded into (entry-codec.ts). Default RING_BYTES (8 MiB); tests use small ones. */
  ringBytes?: number;
}

export const DEFAULT_MAX_STORE_BYTES = 2 * 1024 ** 3;
export const LIST_LIMIT_DEFAULT = 50;
export const LIST_LIMIT_MAX = 500;

/** Ids reserved ahead in meta.id_ceiling: a crash skips at most this many ids, and never reuses one. */
const ID_RESERVE = 100_000;
/**
 * Above this much unacknowledged data (the writer is far behind: a stalled disk...), new entries are dropped
 * (and counted, and reported) rather than held in memory without bound.
 */
const MAX_UNACKED_ENTRIES = 50_000;
const MAX_UNACKED_BYTES = 256 * 1024 * 1024;

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
  req_z: number | null;
  res_z: number | null;
}

/** A stored body's text that SQL cannot read (compressed): checked here. */
interface BodyRow {
  req_body: string | Uint8Array | null;
  req_encoding: string;
  req_z: number;
  res_body: string | Uint8Array | null;
  res_encoding: string;
  res_z: number;
}

/** A search's substring check, split between SQL (url and uncompressed bodies) and JavaScript (compressed ones). */
interface SearchCheck {
  /** True when the URL or an uncompressed text body holds the string (or the index alone decides). */
  sql: string;
  params: Param[];
  /** The search string, for compressed bodies. */
  needle: string;
}

/** An entry with a compressed text body: the SQL check cannot tell. */
const UNDECIDED = `EXISTS (SELECT 1 FROM bodies b WHERE b.id = entries.id AND
  ((b.req_z <> 0 AND b.req_encoding = 'utf8') OR (b.res_z <> 0 AND b.res_encoding = 'utf8')))`;

/** A batch posted to the writer and not acknowledged yet. */
interface BatchInFlight {
  kind: "batch";
  /** Highest id in the batch. */
  upto: number;
  count: number;
  bytes: number;
  /** Posted by flush(): its error goes to that caller, not to the log. */
  foreground: boolean;
  /** In the writer's journal: durable, no longer counted against the unacknowledged bounds. */
  journaled: boolean;
  /** Its entries are a run of the ring (entry-codec.ts), held until the writer answers the batch. */
  inRing: boolean;
  /** Entries that could not even be encoded (dropped on this side). */
  encodeError: string | null;
  /** Set when acknowledged (or lost): the first error, if any. */
  error: string | null;
}

/** Any other request: answered in order (except "indexed", answered when the index has caught up). */
interface OpInFlight {
  kind: "op";
  msg: WriterRequest;
  resolve: (r: { stored: number; value?: unknown }) => void;
  reject: (e: Error) => void;
}

type InFlight = BatchInFlight | OpInFlight;

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

function finiteOrUndefined(n: number | undefined): number | undefined {
  return typeof n === "number" && Number.isFinite(n) ? n : undefined;
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

/** Where the writer's code is: next to this file from source; an extra entrypoint of the compiled binary (build.ts). */
const WRITER_URL = new URL("./capture-writer.ts", import.meta.url);

export class CaptureStore {
  /** Where a corrupt database file was moved at open (`<path>.corrupt-<ms>`), else null. */
  recoveredFrom: string | null = null;
  /** With recoveredFrom: entries read back from the corrupt file, and ids that could not be read. */
  salvage: { saved: number; lost: number } | null = null;
  /** The database file was there but empty (0 bytes) at open: the capture started empty. */
  wasEmpty = false;
  /**
   * The last error of a write nobody waited for (timer, maxPending, reads), or of the writer itself (it died, it
   * is behind and entries are dropped); flush() rejects instead. Null again after a good background write.
   */
  lastFlushError: Error | null = null;

  private readonly path: string;
  private readonly tempDir: string | null;
  private readonly maxEntries: number;
  private readonly maxStoreBytes: number;
  private readonly flushIntervalMs: number;
  private readonly maxPending: number;
  private readonly busyWindowMs: number;
  /** Whether the writer indexes in the background (the option, then setIndexing; a restarted writer keeps it). */
  private indexing: boolean;
  private reader: Database | null = null;
  private hasFts = false;

  private worker: Worker | null = null;
  private workerRefd = false;
  private restarts = 0;
  /** Set when the writer died a second time: nothing is written any more (reads still work). */
  private dead: Error | null = null;
  private seq = 0;
  private readonly inflight = new Map<number, InFlight>();
  private inflightEntries = 0;
  private inflightBytes = 0;

  /** Entries added since the last post, already encoded (entry-codec.ts). */
  private readonly pending: BatchBuilder;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private nextId = 1;
  /** Highest id that was queued for writing (ids of dropped entries are not). */
  private lastQueued = 0;
  /** Every id up to this one is settled: written, or known lost. */
  private acked = 0;
  private ackWaiters: { id: number; resolve: () => void }[] = [];
  /** Rows in the entries table, as of the writer's last reply. */
  private stored = 0;
  /** Entries dropped because the writer was far behind (or dead), since the last report. */
  private dropped = 0;
  /** Entries dropped because the writer was far behind (or dead), since open. */
  private droppedTotal = 0;
  private overloaded = false;
  private closed = false;
  private closing: Promise<void> | null = null;
  /** Set while a writer opens the database: told if it fails or dies meanwhile. */
  private openWaiter: { reject: (e: Error) => void } | null = null;
  /** killWriterForTest's caller, told when the writer's end has been dealt with. */
  private afterWriterStopped: (() => void) | null = null;
  private wal: Wal | null = null;

  private constructor(dbPath: string, opts: CaptureStoreOptions) {
    this.maxEntries = Math.max(1, Math.floor(opts.maxEntries ?? 100_000));
    this.maxStoreBytes = Math.max(1024 * 1024, Math.floor(opts.maxStoreBytes ?? DEFAULT_MAX_STORE_BYTES));
    this.flushIntervalMs = Math.max(0, opts.flushIntervalMs ?? 15);
    this.maxPending = Math.max(1, Math.floor(opts.maxPending ?? 200));
    this.indexing = opts.indexing ?? true;
    this.busyWindowMs = Math.max(0, opts.busyWindowMs ?? 100);
    this.pending = new BatchBuilder(new SharedArrayBuffer(Math.max(1024, Math.floor(opts.ringBytes ?? RING_BYTES))));
    // the ring has no room left mid-batch: post what is there, the entry starts the next batch
    this.pending.onFull = () => this.post(false);
    if (dbPath === ":memory:" || dbPath === "") {
      this.tempDir = mkdtempSync(join(tmpdir(), "tapwire-capture-"));
      this.path = join(this.tempDir, "capture.db");
    } else {
      this.tempDir = null;
      this.path = dbPath;
    }
  }

  /** Opens (creating or recovering) the database at dbPath; ":memory:" is a temporary file removed at close. */
  static async open(dbPath: string, opts: CaptureStoreOptions = {}): Promise<CaptureStore> {
    const s = new CaptureStore(dbPath, opts);
    try {
      const opened = await s.startWriter();
      s.nextId = opened.nextId;
      s.lastQueued = opened.nextId - 1;
      // entries found in the writer's journal become readable once it has written them
      s.acked = Math.min(opened.readable, s.lastQueued);
      s.stored = opened.stored;
      s.recoveredFrom = opened.recoveredFrom;
      s.salvage = opened.salvage;
      s.wasEmpty = opened.wasEmpty;
      s.hasFts = opened.hasFts;
      const reader = new Database(s.path, { readonly: true, strict: true });
      tuneConnection(reader, "reader");
      s.reader = reader;
      s.openWal();
    } catch (e) {
      s.closed = true;
      s.worker?.terminate();
      if (s.tempDir) rmSync(s.tempDir, { recursive: true, force: true });
      throw e;
    }
    s.updateRef();
    return s;
  }

  // --- the writer ------------------------------------------------------------------------------------------------

  private startWriter(): Promise<{ nextId: number; stored: number; recoveredFrom: string | null; salvage: { saved: number; lost: number } | null; wasEmpty: boolean; hasFts: boolean; readable: number }> {
    const w = new Worker(WRITER_URL);
    this.worker = w;
    this.workerRefd = true;
    let lastError = "";
    w.addEventListener("error", (ev: Event) => {
      lastError = (ev as ErrorEvent).message || "uncaught error";
    });
    w.addEventListener("close", (ev: Event) => {
      if (this.worker !== w) return;
      this.writerStopped(lastError || `exit code ${(ev as CloseEvent).code}`);
    });
    w.addEventListener("messageerror", () => {
      lastError = "unreadable message";
    });
    return new Promise((resolve, reject) => {
      this.openWaiter = { reject };
      w.onmessage = (ev: MessageEvent<WriterReply>) => {
        if (this.worker !== w) return; // a late message of a writer that was replaced
        const m = ev.data;
        if (m.t !== "opened") return this.onReply(m);
        const waiter = this.openWaiter;
        this.openWaiter = null;
        if (!m.ok) {
          const err = Object.assign(new Error(m.error ?? "capture writer failed to open the database"), m.code ? { code: m.code } : {});
          this.worker = null; // its close event is no death
          w.terminate();
          waiter?.reject(err);
          return;
        }
        this.stored = m.stored ?? 0;
        const nextId = m.nextId ?? 1;
        resolve({ nextId, stored: m.stored ?? 0, recoveredFrom: m.recoveredFrom ?? null, salvage: m.salvage ?? null, wasEmpty: m.wasEmpty === true, hasFts: m.hasFts === true, readable: m.readable ?? nextId - 1 });
      };
      w.postMessage({
        t: "open",
        path: this.path,
        maxEntries: this.maxEntries,
        maxStoreBytes: this.maxStoreBytes,
        assigned: this.nextId - 1,
        idReserve: ID_RESERVE,
        indexing: this.indexing,
        busyWindowMs: this.busyWindowMs,
        ring: this.pending.ring,
      } satisfies WriterRequest);
    });
  }

  /** The worker ended without being asked to: report, settle what it had, start another one (once). */
  private writerStopped(reason: string): void {
    this.worker = null;
    if (this.openWaiter) {
      // it died while opening the database
      const w = this.openWaiter;
      this.openWaiter = null;
      w.reject(new Error(`capture writer stopped while opening the database: ${reason}`));
      return;
    }
    const err = new Error(`capture writer stopped unexpectedly (${reason})`);
    const ops = this.settleInFlight(err);
    if (this.closed) {
      for (const op of ops) op.reject(new Error("capture store is closed"));
      return;
    }
    if (this.restarts >= 1) {
      for (const op of ops) this.inflight.set((op.msg as { seq: number }).seq, op);
      this.becomeDead(new Error(`${err.message}; not restarted again: captured traffic is no longer stored`));
      return;
    }
    this.restarts++;
    this.lastFlushError = err;
    console.error(`capture store: ${err.message}; restarting it`);
    this.startWriter().then(
      (opened) => {
        this.stored = opened.stored;
        // journaled batches of the dead writer are written by this one: readers wait for them
        this.advanceReadable(opened.readable);
        if (this.ackWaiters.length > 0) this.hurry();
        this.updateRef();
        this.notifyWriterStopped();
      },
      (e: Error) => this.becomeDead(new Error(`capture writer could not be restarted: ${e.message}`)),
    );
    // requests the dead worker had not answered go to the new one, in order, after what it opens with
    for (const op of ops) this.postOp(op);
    this.updateRef();
  }

  /**
   * Settles what the writer had not answered: batches are lost (unless it committed them: the next writer finds
   * those), their ids settled; the other requests are returned, to be sent again or refused.
   */
  private settleInFlight(err: Error): OpInFlight[] {
    const ops: OpInFlight[] = [];
    // a journaled batch is not lost: the next writer finds it in the journal, and says when it is readable
    let journaled = false;
    for (const rec of this.inflight.values()) if (rec.kind === "batch" && rec.journaled) journaled = true;
    for (const rec of this.inflight.values()) {
      if (rec.kind === "batch") {
        rec.error = rec.journaled ? null : err.message;
        this.release(rec);
        if (!journaled && rec.upto > this.acked) this.acked = rec.upto;
      } else {
        ops.push(rec);
      }
    }
    this.inflight.clear();
    // the writer is gone: nobody reads the ring runs it held any more
    this.pending.releaseAll();
    this.wakeAckWaiters();
    return ops;
  }

  /** No writer any more: nothing is written from now on; reads keep working. */
  private becomeDead(err: Error): void {
    this.dead = err;
    this.lastFlushError = err;
    console.error(`capture store: ${err.message}`);
    const w = this.worker;
    this.worker = null;
    w?.terminate();
    for (const op of this.settleInFlight(err)) op.reject(err);
    this.pending.discard();
    this.cancelTimer();
    this.acked = Math.max(this.acked, this.lastQueued);
    this.wakeAckWaiters();
    this.notifyWriterStopped();
  }

  private notifyWriterStopped(): void {
    const f = this.afterWriterStopped;
    this.afterWriterStopped = null;
    f?.();
  }

  /** The worker keeps the process alive only while something waits for it. */
  private updateRef(): void {
    const w = this.worker;
    if (!w) return;
    const want = this.inflight.size > 0 || this.openWaiter !== null;
    if (want !== this.workerRefd) {
      this.workerRefd = want;
      if (want) w.ref();
      else w.unref();
    }
  }

  /** The writer answered the batch (journaled, or written): it is done reading its ring run. */
  private releaseRing(rec: BatchInFlight): void {
    if (!rec.inRing) return;
    rec.inRing = false;
    this.pending.release();
  }

  /** A batch no longer held here (journaled, answered or lost): it stops counting against the bounds. */
  private release(rec: BatchInFlight): void {
    if (rec.journaled) return;
    rec.journaled = true;
    this.inflightEntries -= rec.count;
    this.inflightBytes -= rec.bytes;
  }

  private onReply(m: WriterReply): void {
    if (m.t === "opened") return;
    if (m.t === "progress") {
      this.stored = m.stored;
      this.advanceReadable(m.readable);
      return;
    }
    const rec = this.inflight.get(m.seq);
    if (!rec) return;
    if (rec.kind === "batch") this.releaseRing(rec);
    if (m.t === "journaled") {
      if (rec.kind === "batch") {
        this.stored = m.stored;
        this.release(rec);
        this.walTrim(rec.upto);
        this.checkCaughtUp();
      }
      return;
    }
    this.inflight.delete(m.seq);
    if (rec.kind === "batch") {
      this.stored = m.stored;
      this.release(rec);
      this.walTrim(rec.upto);
      if (rec.upto > this.acked) this.acked = rec.upto;
      rec.error = rec.encodeError ?? m.error;
      if (!rec.foreground) {
        if (rec.error !== null) {
          this.lastFlushError = new Error(rec.error);
          console.error(`capture store: write failed: ${rec.error}`);
        } else if (this.dead === null && !this.overloaded) {
          this.lastFlushError = null;
        }
      }
      this.checkCaughtUp();
      this.advanceReadable(m.readable);
    } else {
      if (rec.msg.t !== "indexed") this.stored = m.stored;
      this.advanceReadable(m.readable);
      if (m.error !== null) rec.reject(new Error(m.error));
      else rec.resolve({ stored: m.stored, value: m.value });
    }
    this.updateRef();
  }

  private checkCaughtUp(): void {
    if (this.overloaded && this.inflightEntries + this.pending.count < MAX_UNACKED_ENTRIES / 2 && this.inflightBytes + this.pending.bytes < MAX_UNACKED_BYTES / 2) {
      this.overloaded = false;
      console.error(`capture store: the writer caught up; ${this.dropped} entries were dropped meanwhile`);
      this.dropped = 0;
    }
  }

  /** The writer says every id up to `readable` is in SQLite (or was dropped). */
  private advanceReadable(readable: number | undefined): void {
    if (typeof readable === "number" && readable > this.acked) this.acked = Math.min(readable, this.lastQueued);
    this.wakeAckWaiters();
  }

  /** Asks the writer to write its journal into SQLite now: a reader waits for entries up to lastQueued. */
  private hurry(): void {
    if (this.worker && this.lastQueued > this.acked) this.worker.postMessage({ t: "hurry" } satisfies WriterRequest);
  }

  private wakeAckWaiters(): void {
    if (this.ackWaiters.length === 0) return;
    const still: typeof this.ackWaiters = [];
    for (const w of this.ackWaiters) {
      if (w.id <= this.acked) w.resolve();
      else still.push(w);
    }
    this.ackWaiters = still;
  }

  private postOp(op: OpInFlight): void {
    if (!this.worker) {
      op.reject(this.dead ?? new Error("capture store is closed"));
      return;
    }
    const seq = (op.msg as { seq: number }).seq;
    this.inflight.set(seq, op);
    this.worker.postMessage(op.msg);
    this.updateRef();
  }

  /** Sends a request to the writer (after everything queued before it) and resolves with its answer. */
  private request(msg: WriterRequest): Promise<{ stored: number; value?: unknown }> {
    if (this.dead) return Promise.reject(this.dead);
    this.post(false);
    return new Promise((resolve, reject) => this.postOp({ kind: "op", msg, resolve, reject }));
  }

  private nextSeq(): number {
    return ++this.seq;
  }

  /** Posts the queued entries to the writer as one batch. */
  private post(foreground: boolean): BatchInFlight | null {
    this.cancelTimer();
    if (!this.worker) return null;
    const batch = this.pending.take();
    if (batch === null) return null;
    const seq = this.nextSeq();
    const rec: BatchInFlight = {
      kind: "batch",
      upto: this.lastQueued,
      count: batch.count,
      bytes: batch.length,
      foreground,
      journaled: false,
      inRing: batch.data === undefined,
      encodeError: batch.error,
      error: null,
    };
    this.inflight.set(seq, rec);
    this.inflightEntries += rec.count;
    this.inflightBytes += rec.bytes;
    const msg: WriterRequest = {
      t: "batch",
      seq,
      data: batch.data,
      start: batch.start,
      length: batch.length,
      first: batch.first,
      count: batch.count,
      upto: rec.upto,
      ceiling: this.nextId - 1 + ID_RESERVE,
    };
    if (batch.data) this.worker.postMessage(msg, [batch.data]);
    else this.worker.postMessage(msg);
    this.updateRef();
    return rec;
  }

  private cancelTimer(): void {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
  }

  /** Resolves once every id up to `id` is settled (written, or known lost). */
  private waitAcked(id: number): Promise<void> {
    if (id <= this.acked) return Promise.resolve();
    return new Promise((resolve) => this.ackWaiters.push({ id, resolve }));
  }

  /** Before a read: everything added so far is posted and acknowledged. */
  private sync(): Promise<void> {
    if (this.lastQueued <= this.acked) return Promise.resolve();
    this.post(false);
    this.hurry();
    return this.waitAcked(this.lastQueued);
  }

  private assertOpen(): void {
    if (this.closed) throw new Error("capture store is closed");
  }

  // --- writing ---------------------------------------------------------------------------------------------------

  /** Queues an entry and returns its id. Cheap: no SQLite work; posts to the writer when maxPending are queued. */
  add(e: NewEntry): number {
    this.assertOpen();
    const id = this.nextId++;
    if (this.dead) return id;
    const queued = this.pending.count;
    if (
      this.inflightEntries + queued >= MAX_UNACKED_ENTRIES ||
      (this.inflightBytes + this.pending.bytes > MAX_UNACKED_BYTES && this.inflightEntries + queued > 0)
    ) {
      this.dropped++;
      this.droppedTotal++;
      if (!this.overloaded) {
        this.overloaded = true;
        this.lastFlushError = new Error("capture store: the writer is far behind; new entries are dropped until it catches up");
        console.error(this.lastFlushError.message);
      }
      return id;
    }
    // encoded now, while the flow's data is fresh in the caches; an entry that cannot be encoded is reported with
    // its batch (flush() rejects with it), the others go on
    if (this.pending.add(id, e) && this.wal !== null) this.walAppend(id);
    this.lastQueued = id;
    if (this.pending.count >= this.maxPending) {
      this.post(false);
    } else if (this.timer === null) {
      this.timer = setTimeout(() => {
        this.timer = null;
        if (!this.closed) this.post(false);
      }, this.flushIntervalMs);
      (this.timer as { unref?: () => void }).unref?.();
    }
    return id;
  }

  /**
   * Posts every queued entry and resolves once the writer has acknowledged all entries added so far.
   * Rejects with the first error of the entries it posted (an entry that cannot be written is dropped alone).
   */
  async flush(): Promise<void> {
    this.assertOpen();
    const rec = this.post(true);
    this.hurry();
    await this.waitAcked(this.lastQueued);
    if (rec?.error) throw new Error(rec.error);
    if (this.dead) throw this.dead;
  }

  /** Highest id acknowledged by the writer (every id up to it is stored, or was dropped / deleted). */
  get committedId(): number {
    return this.acked;
  }

  /** Resolves once the entry `id` (and every earlier one) has been written, without hurrying the batch timer. */
  waitCommitted(id: number): Promise<void> {
    return this.waitAcked(Math.min(id, this.lastQueued));
  }

  // --- the main thread's write-ahead files ---------------------------------------------------------------------

  /** Fresh write-ahead files (the writer's first open took in what the last run left). Not for a temporary store. */
  private openWal(): void {
    if (this.tempDir !== null) return;
    const dir = `${this.path}.journal`;
    try {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      const fds = WAL_FILES.map((n) => openSync(join(dir, n), "w", 0o600)) as [number, number];
      this.wal = { fds, size: [0, 0], maxId: [0, 0], cur: 0, journaled: 0 };
    } catch (e) {
      console.error(`capture store: no write-ahead file (${(e as Error).message}); entries rely on the writer's journal alone`);
    }
  }

  /** The write-ahead queue: records appended in place (walLen bytes), written with one write() per flush. */
  private walBuf: Buffer = Buffer.allocUnsafe(WAL_BUF_BYTES);
  private walLen = 0;
  private walMax = 0;
  private walDone: Promise<void> | null = null;
  private walResolve: (() => void) | null = null;

  /**
   * Queues the entry just encoded for the write-ahead file; the queue is written with one write() in the same
   * event-loop iteration (setImmediate), or at once by durable(true). The proxy holds a response's last byte until
   * durable() settles, so entries finishing together share one system call.
   */
  private walAppend(id: number): void {
    const payload = this.pending.lastEntry();
    // copied into the queue's buffer (a view would not do: the ring run may be reused, or a batch buffer of its own
    // transferred to the writer (detached), before the queue is written); no allocation per entry
    const need = this.walLen + HEADER_BYTES + payload.byteLength;
    if (need > this.walBuf.length) {
      const grown = Buffer.allocUnsafe(Math.max(need, this.walBuf.length * 2));
      grown.set(this.walBuf.subarray(0, this.walLen));
      this.walBuf = grown;
    }
    writeRecordHeader(this.walBuf, this.walLen, payload.byteLength, 1, id, id, this.nextId - 1 + ID_RESERVE);
    this.walBuf.set(payload, this.walLen + HEADER_BYTES);
    this.walLen = need;
    this.walMax = id;
    if (this.walDone === null) {
      this.walDone = new Promise<void>((r) => (this.walResolve = r));
      setImmediate(() => this.flushWal());
    }
  }

  /**
   * Every entry added so far is in the write-ahead file once this settles (undefined: already there, or no file).
   * `now`: write the queue at once and return undefined.
   */
  durable(now = false): Promise<void> | undefined {
    if (this.walDone === null) return undefined;
    if (!now) return this.walDone;
    this.flushWal();
    return undefined;
  }

  private flushWal(): void {
    const resolve = this.walResolve;
    this.walDone = null;
    this.walResolve = null;
    const len = this.walLen;
    this.walLen = 0;
    const w = this.wal;
    if (w !== null && len > 0) {
      if (w.size[w.cur] > WAL_ROTATE_BYTES) {
        const other = (1 - w.cur) as 0 | 1;
        if (w.maxId[other] <= w.journaled) {
          this.walTruncate(other);
          w.cur = other;
        }
      }
      const fd = w.fds[w.cur];
      const pos = w.size[w.cur];
      try {
        const all = this.walBuf;
        let done = 0;
        while (done < len) done += writeSync(fd, all, done, len - done, pos + done);
        w.size[w.cur] = pos + len;
        w.maxId[w.cur] = this.walMax;
      } catch (e) {
        // a disk that refuses the write: the entries still go to the writer; a partial record ends the file
        try {
          ftruncateSync(fd, pos);
        } catch {}
        this.lastFlushError = new Error(`capture store: write-ahead file: ${(e as Error).message}`);
      }
    }
    if (this.walBuf.length > WAL_BUF_KEEP_BYTES) this.walBuf = Buffer.allocUnsafe(WAL_BUF_BYTES);
    resolve?.();
  }

  /** The writer journaled every id up to `upto`: files holding nothing newer are emptied. */
  private walTrim(upto: number): void {
    const w = this.wal;
    if (w === null) return;
    if (upto > w.journaled) w.journaled = upto;
    for (const i of [0, 1] as const) if (w.size[i] > 0 && w.maxId[i] <= w.journaled && (i !== w.cur || w.maxId[1 - i]! <= w.journaled)) this.walTruncate(i);
  }

  private walTruncate(i: 0 | 1): void {
    const w = this.wal!;
    if (w.size[i] === 0) return;
    try {
      ftruncateSync(w.fds[i], 0);
      w.size[i] = 0;
    } catch {}
  }

  private closeWal(remove: boolean): void {
    const w = this.wal;
    if (w === null) return;
    this.wal = null;
    for (const fd of w.fds) {
      try {
        closeSync(fd);
      } catch {}
    }
    if (remove) for (const n of WAL_FILES) rmSync(join(`${this.path}.journal`, n), { force: true });
  }

  /** Deletes one entry; false when there is no such entry. */
  async delete(id: number): Promise<boolean> {
    this.assertOpen();
    const r = await this.request({ t: "delete", seq: this.nextSeq(), id });
    return r.value === true;
  }

  /** Drops every entry, queued ones too. Ids keep increasing. */
  async clear(): Promise<void> {
    this.assertOpen();
    this.cancelTimer();
    const dropped = this.lastQueued;
    this.pending.discard();
    // what the write-ahead files hold is cleared too (a crash must not bring it back)
    if (this.wal) {
      this.walLen = 0;
      this.walTruncate(0);
      this.walTruncate(1);
    }
    await this.request({ t: "clear", seq: this.nextSeq(), ceiling: this.nextId - 1 + ID_RESERVE });
    // the queued entries that were dropped are settled too
    if (dropped > this.acked) this.acked = dropped;
    this.wakeAckWaiters();
  }

  /**
   * Entries not stored since open because the writer was far behind (its queue is bounded: MAX_UNACKED_*) or
   * gone: the queue's overflow, counted, never held.
   */
  get droppedCount(): number {
    return this.droppedTotal;
  }

  /** Number of entries: stored ones (as of the writer's last answer) plus queued and in-flight ones. */
  count(): number {
    this.assertOpen();
    return this.stored + this.pending.count + this.inflightEntries;
  }

  /** What the writer reports: search index progress and write / index timings. */
  async writerStatus(): Promise<WriterStatus> {
    this.assertOpen();
    return (await this.request({ t: "status", seq: this.nextSeq() })).value as WriterStatus;
  }

  /** Resolves once every entry written so far is in the search index (rejects while indexing is paused). */
  async waitIndexed(): Promise<void> {
    this.assertOpen();
    await this.request({ t: "indexed", seq: this.nextSeq() });
  }

  /** Pauses (false) or resumes (true) background search indexing; search stays exact either way. */
  async setIndexing(on: boolean): Promise<void> {
    this.assertOpen();
    this.indexing = on;
    await this.request({ t: "indexing", seq: this.nextSeq(), on });
  }

  /**
   * Test hook: ends the writer Worker as a crash would; resolves once the store has dealt with it (a new writer
   * is open, or the store gave up on writing).
   */
  killWriterForTest(): Promise<void> {
    const w = this.worker;
    if (!w) return Promise.resolve();
    return new Promise((resolve) => {
      this.afterWriterStopped = resolve;
      w.terminate();
    });
  }

  /** Posts what is queued, waits for the writer to write it and close the database, then ends the worker. */
  close(): Promise<void> {
    if (this.closing) return this.closing;
    this.closed = true;
    this.cancelTimer();
    this.closing = (async () => {
      // the reader goes first: the writer's connection, closing last, checkpoints and removes the WAL
      this.reader?.close();
      this.reader = null;
      if (!this.dead && this.worker) {
        try {
          await this.request({ t: "close", seq: this.nextSeq(), ceiling: this.nextId - 1 });
        } catch (e) {
          console.error(`capture store: closing the writer failed: ${(e as Error).message}`);
        }
      }
      const w = this.worker;
      this.worker = null;
      w?.terminate();
      // everything was handed to the writer and closed with it: the write-ahead files are not needed any more
      this.flushWal();
      this.closeWal(!this.dead);
      this.acked = Math.max(this.acked, this.lastQueued);
      this.wakeAckWaiters();
      if (this.tempDir) rmSync(this.tempDir, { recursive: true, force: true });
    })();
    return this.closing;
  }

  // --- reading ---------------------------------------------------------------------------------------------------

  private get db(): Database {
    if (!this.reader) throw new Error("capture store is closed");
    return this.reader;
  }

  /** Runs reads in one read transaction: one snapshot for the count, the index mark and the page. */
  private snapshot<T>(fn: (db: Database) => T): T {
    const db = this.db;
    db.run("BEGIN");
    try {
      return fn(db);
    } finally {
      db.run("COMMIT");
    }
  }

  private metaValue(db: Database, key: string): number {
    const r = db.query("SELECT value FROM meta WHERE key = ?").get(key) as { value: number } | null;
    return r ? r.value : 0;
  }

  /**
   * Builds the WHERE clause for a query; values are always bound, never interpolated (only the names of the
   * search index tables are, which come from fts_gens). `volatile`: the SQL names index generations, which come
   * and go: not worth keeping in the statement cache.
   */
  private whereClause(
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
  private searchIds(db: Database, w: { sql: string; params: Param[]; volatile: boolean; check: SearchCheck }, dir: string): number[] {
    const sql = `SELECT id, ok FROM (SELECT id, ${w.check.sql} AS ok, ${UNDECIDED} AS u FROM entries ${w.sql})
      WHERE ok OR u ORDER BY id ${dir}`;
    const st = w.volatile ? db.prepare(sql) : db.query(sql);
    let rows: [number, number][];
    try {
      // parameters bind in the order they appear: the check's (select list) come before the filters' (WHERE)
      rows = st.values(...w.check.params, ...w.params) as [number, number][];
    } finally {
      if (w.volatile) st.finalize();
    }
    const bodyOf = db.query("SELECT req_body, req_encoding, req_z, res_body, res_encoding, res_z FROM bodies WHERE id = ?");
    const ids: number[] = [];
    const holds = bodyFinder(w.check.needle);
    for (const [id, ok] of rows) {
      if (ok) {
        ids.push(id);
        continue;
      }
      const b = bodyOf.get(id) as BodyRow | null;
      if (!b) continue;
      // uncompressed ones were checked by SQL already; base64 (binary) bodies are never searched
      if (
        (b.req_z !== 0 && b.req_encoding === "utf8" && holds(b.req_body, b.req_z)) ||
        (b.res_z !== 0 && b.res_encoding === "utf8" && holds(b.res_body, b.res_z))
      ) {
        ids.push(id);
      }
    }
    return ids;
  }

  /**
   * One page of summaries. limit: default 50, capped at 500, 0 gives no items but the right total;
   * offset default 0. Order id DESC, or id ASC when since_id is given; q.order overrides.
   * Sees every entry added before the call.
   */
  async list(q: ListQuery = {}): Promise<ListResult> {
    this.assertOpen();
    await this.sync();
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

    return this.snapshot((db) => {
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

  /** The detail form, or null when the id is unknown (or evicted / deleted). Sees every entry added before. */
  async get(id: number): Promise<EntryDetail | null> {
    this.assertOpen();
    if (id > this.acked && id <= this.lastQueued) {
      this.post(false);
      this.hurry();
      await this.waitAcked(id);
    }
    const row = this.db.query(`${DETAIL_SELECT} WHERE e.id = ?`).get(id) as DetailRow | null;
    return row ? toDetail(row) : null;
  }

  /**
   * Every entry matching `q` (its filters; limit, offset and order are `opts`'), oldest first, as details: for
   * exports of any size. Reads a page of ids and then their details at a time, on a read connection of its own
   * with a small page cache and no memory map, so a long export neither holds its entries nor fills the process
   * with the database file; entries with ids above `opts.upto` (captured after the export began) are left out.
   */
  async *details(q: ListQuery, opts: { upto?: number; offset?: number; limit?: number } = {}): AsyncGenerator<EntryDetail> {
    this.assertOpen();
    await this.sync();
    const conn = new Database(this.path, { readonly: true, strict: true });
    try {
      conn.run("PRAGMA busy_timeout = 5000");
      conn.run("PRAGMA cache_size = -2048");
      conn.run("PRAGMA mmap_size = 0");
      let cursor = finiteOrUndefined(q.since_id) ?? 0;
      let skip = Math.max(0, Math.floor(opts.offset ?? 0));
      let left = opts.limit === undefined ? Infinity : Math.max(0, Math.floor(opts.limit));
      const upto = opts.upto ?? Number.MAX_SAFE_INTEGER;
      const PAGE = 200;
      // a search is decided partly outside SQL (compressed bodies, searchIds): its ids are found once, up front
      let searched: number[] | null = null;
      if (typeof q.search === "string" && q.search !== "") {
        searched = this.snapshotOn(conn, (db) => {
          const w = this.whereClause(db, { ...q, since_id: cursor });
          return w.check ? this.searchIds(db, { ...w, check: w.check }, "ASC").filter((id) => id <= upto) : null;
        });
      }
      let at = 0;
      while (left > 0 && !this.closed) {
        const rows = this.snapshotOn(conn, (db) => {
          let ids: number[];
          if (searched) {
            at += skip;
            ids = searched.slice(at, at + Math.min(PAGE, left));
            at += ids.length;
          } else {
            const w = this.whereClause(db, { ...q, since_id: cursor });
            const sql = `SELECT id FROM entries ${w.sql ? `${w.sql} AND` : "WHERE"} id <= ? ORDER BY id ASC LIMIT ? OFFSET ?`;
            const stmt = db.prepare(sql);
            ids = (stmt.all(...w.params, upto, Math.min(PAGE, left), skip) as { id: number }[]).map((r) => r.id);
            stmt.finalize();
          }
          if (ids.length === 0) return [];
          return db.query(`${DETAIL_SELECT} WHERE e.id IN (${ids.map(() => "?").join(",")}) ORDER BY e.id`).all(...ids) as DetailRow[];
        });
        skip = 0;
        if (rows.length === 0) return;
        for (const r of rows) {
          cursor = r.id;
          left--;
          yield toDetail(r);
        }
      }
    } finally {
      conn.close();
    }
  }

  /** snapshot() on another connection. */
  private snapshotOn<T>(db: Database, fn: (db: Database) => T): T {
    db.run("BEGIN");
    try {
      return fn(db);
    } finally {
      db.run("COMMIT");
    }
  }
}

const DETAIL_SELECT = `SELECT e.id, e.method, e.url, e.host, e.status_code, e.content_type, e.duration_ms, e.timestamp, e.client_addr,
  e.has_response, e.error, d.extra, d.req_headers, d.res_headers,
  b.req_body, b.req_encoding, b.req_size, b.req_truncated, b.req_decoded_from, b.req_z,
  b.res_body, b.res_encoding, b.res_size, b.res_truncated, b.res_decoded_from, b.res_z
  FROM entries e LEFT JOIN details d ON d.id = e.id LEFT JOIN bodies b ON b.id = e.id`;

function toDetail(row: DetailRow): EntryDetail {
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
  if (typeof r.res_size === "number") s.res_body_size = r.res_size;
  return s;
}
