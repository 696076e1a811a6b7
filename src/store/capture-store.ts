/**
 * The capture store: every finished (or failed) flow the proxy sees, in SQLite. Main-thread side.
 *
 * - add() is the proxy hot path: it assigns the id and encodes the entry into the batch ring shared with the
 *   writer Worker (entry-codec.ts), nothing else. Batches go to the writer (capture-writer.ts) every
 *   flushIntervalMs, or at once when maxPending are queued, as a small message naming their run of the ring.
 *   Every write (body decoding, inserts, eviction, delete, clear, search indexing) happens in the worker, in the
 *   order posted; schema and write rules are in capture-db.ts.
 * - Reads run after the writer has acknowledged every entry added before the call (a client that got its
 *   response finds its entry in the next API call), on read-only connections (WAL: they never wait for the
 *   writer): list, search and export pages in the reader Worker (capture-reader.ts, the SQL is capture-query.ts),
 *   so that a long one never stalls the proxy; get(id), one row, here. Without the reader Worker (it could not
 *   start, or died twice) the same code runs here.
 * - Search uses the FTS index for ids up to meta.fts_indexed_upto and checks the later ones directly, in one read
 *   transaction: exact whatever the indexing backlog.
 * - A damaged database met while running (the writer's background probe, a failed write, a read's corruption
 *   error) is moved aside and salvaged by the writer, as at open; the readers then open the new file.
 * - If the worker dies, the error is logged and kept in lastFlushError, and the worker is started again, once;
 *   batches it had not acknowledged are lost unless committed. add() never throws because of the writer.
 * - Durability: every entry is also appended, as it is added, to a write-ahead file of the main thread
 *   (`<db>.journal/wal-0.twm` / `wal-1.twm`, the bytes already encoded, copied into the files' shared mapping, or
 *   one write() per event-loop iteration for what does not fit there; no fsync): the proxy adds
 *   the entry before it sends the response's last byte, so a flow whose response a client received survives
 *   kill -9 (the kernel has the bytes). The writer's first open moves those records into its journal. What the
 *   worker acknowledged survives as before (journal, WAL, synchronous=NORMAL). Ids are never reused, crash or not.
 * - ":memory:" (or "") is a private temporary file, removed by close().
 */
import { Database } from "bun:sqlite";
import { closeSync, ftruncateSync, mkdirSync, mkdtempSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { tuneConnection } from "./capture-db.ts";
import type { ReaderReply, ReaderRequest, WriterReply, WriterRequest, WriterStatus } from "./capture-protocol.ts";
import { CaptureQuery, EXPORT_PAGE, finiteOrUndefined } from "./capture-query.ts";
import { BatchBuilder, RING_BYTES } from "./entry-codec.ts";
import { HEADER_BYTES, RECORD_MAGIC, WAL_FILES, WAL_NEXT, writeRecordFields, writeRecordHeader } from "./capture-journal.ts";

/** The write-ahead file in use is switched for the other once it holds this much and the other is all journaled. */
const WAL_ROTATE_BYTES = 8 * 1024 * 1024;
/** The write-ahead queue's buffer to start with; one grown past WAL_BUF_KEEP_BYTES (a burst) is let go after its flush. */
const WAL_BUF_BYTES = 256 * 1024;
const WAL_BUF_KEEP_BYTES = 4 * 1024 * 1024;
/**
 * Each write-ahead file's first bytes are mapped shared (Bun.mmap): a record stored there is in the kernel's page
 * cache as soon as it is copied (it survives kill -9 like a write() would) without a system call, so the response's
 * last byte need not wait. The files are filled with zeros to this size at open (their blocks allocated: a full disk
 * cannot fault a write into the mapping later). What does not fit goes through the write() queue.
 */
const WAL_MAP_BYTES = WAL_ROTATE_BYTES;
const ZERO_WORD = new Uint8Array(4);

/** The main thread's two write-ahead files (see the durability note above). */
interface Wal {
  fds: [number, number];
  size: [number, number];
  /** Highest id written to each. */
  maxId: [number, number];
  cur: 0 | 1;
  /** Every id up to this one is in the writer's journal (or SQLite). */
  journaled: number;
  /** The files' first WAL_MAP_BYTES, mapped shared; null when mapping failed (then every record is written). */
  maps: [Uint8Array, Uint8Array] | null;
  /** DataViews of the two mappings (a record's header is stored through them, with no buffer in between). */
  views: [DataView, DataView] | null;
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
  /**
   * Bound of the queue of entries the writer has not acknowledged (nor journaled): above it new entries are dropped
   * and counted (droppedCount). Default MAX_UNACKED_ENTRIES (50,000); tests use small ones.
   */
  maxUnackedEntries?: number;
  /**
   * Do not boot the reader Worker at open: startReaderWorker() does, later (queries run on this thread until it
   * is ready). The service starts it once it has started, so that the Worker's boot does not take a core from the
   * writer's and its own start-up. Default false.
   */
  deferReader?: boolean;
}

export const DEFAULT_MAX_STORE_BYTES = 2 * 1024 ** 3;
export { LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX } from "./capture-query.ts";

/** Ids reserved ahead in meta.id_ceiling: a crash skips at most this many ids, and never reuses one. */
const ID_RESERVE = 100_000;
/**
 * Above this much unacknowledged data (the writer is far behind: a stalled disk...), new entries are dropped
 * (and counted, and reported) rather than held in memory without bound.
 */
const MAX_UNACKED_ENTRIES = 50_000;
const MAX_UNACKED_BYTES = 256 * 1024 * 1024;

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

/** Where the writer's code is: next to this file from source; an extra entrypoint of the compiled binary (build.ts). */
const WRITER_URL = new URL("./capture-writer.ts", import.meta.url);
/** Likewise the reader Worker's (capture-reader.ts). */
const READER_URL = new URL("./capture-reader.ts", import.meta.url);

/** A query the reader Worker has not answered yet; `local` runs it on this thread if that worker dies. */
interface ReadInFlight {
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
  local: (db: Database) => unknown;
}

export class CaptureStore {
  /** Where a corrupt database file was moved at open (`<path>.corrupt-<ms>`), else null. */
  recoveredFrom: string | null = null;
  /** How many times the file was found damaged while running and replaced (see retryIfDamaged). */
  private recoveries = 0;
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
  /** This thread's read connection: get(id), and every query when the reader Worker is not available. */
  private reader: Database | null = null;
  private hasFts = false;
  private query = new CaptureQuery(false);
  /** Runs list, search and export pages off this thread (capture-reader.ts); null: they run here. */
  private readerWorker: Worker | null = null;
  private readerSeq = 0;
  private readonly readerPending = new Map<number, ReadInFlight>();
  private readerRestarts = 0;
  /** Settles once the reader Worker is ready (or known unavailable). */
  private readerStarting: Promise<void> = Promise.resolve();

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
  private readonly maxUnackedEntries: number;

  private constructor(dbPath: string, opts: CaptureStoreOptions) {
    this.maxEntries = Math.max(1, Math.floor(opts.maxEntries ?? 100_000));
    this.maxStoreBytes = Math.max(1024 * 1024, Math.floor(opts.maxStoreBytes ?? DEFAULT_MAX_STORE_BYTES));
    this.flushIntervalMs = Math.max(0, opts.flushIntervalMs ?? 15);
    this.maxPending = Math.max(1, Math.floor(opts.maxPending ?? 200));
    this.maxUnackedEntries = Math.max(1, Math.floor(opts.maxUnackedEntries ?? MAX_UNACKED_ENTRIES));
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
    // the reader Worker boots while the writer opens the database (it opens its connections after)
    const readerBoot = opts.deferReader ? null : s.bootReader();
    let wal: Wal | null = null;
    try {
      const writing = s.startWriter();
      // this thread's write-ahead files are prepared while the writer Worker boots and opens the database
      wal = s.prepareWal();
      const opened = await writing;
      s.nextId = opened.nextId;
      s.lastQueued = opened.nextId - 1;
      // entries found in the writer's journal become readable once it has written them
      s.acked = Math.min(opened.readable, s.lastQueued);
      s.stored = opened.stored;
      s.recoveredFrom = opened.recoveredFrom;
      s.salvage = opened.salvage;
      s.wasEmpty = opened.wasEmpty;
      s.hasFts = opened.hasFts;
      s.query = new CaptureQuery(s.hasFts);
      const reader = new Database(s.path, { readonly: true, strict: true });
      tuneConnection(reader, "reader");
      s.reader = reader;
      s.installWal(wal);
      if (!opts.deferReader) s.beginReader(readerBoot);
    } catch (e) {
      s.closed = true;
      s.worker?.terminate();
      readerBoot?.terminate();
      if (wal !== null && s.wal === null) s.discardWal(wal);
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

  /** Starts the reader Worker of a store opened with deferReader (once; nothing otherwise). */
  startReaderWorker(): void {
    if (!this.readerBegun && !this.closed) this.beginReader(this.bootReader());
  }

  private readerBegun = false;

  private beginReader(booted: Worker | null): void {
    this.readerBegun = true;
    // not waited for: start-up does not wait for a second worker; queries run here until it is ready
    this.readerStarting = this.startReader(booted);
    // only once this thread and the reader Worker have their connections may the writer's background probe move a
    // damaged file aside (a connection opened while the path is missing fails)
    void this.readerStarting.finally(() => {
      if (!this.closed) this.worker?.postMessage({ t: "probe" } satisfies WriterRequest);
    });
  }

  private bootReader(): Worker | null {
    try {
      return new Worker(READER_URL);
    } catch (e) {
      console.error(`capture store: no reader worker (${(e as Error).message}); queries run on the main thread`);
      return null;
    }
  }

  /**
   * Starts the reader Worker and waits until its connections are open. If it cannot start, queries run on this
   * thread (the same code): slower for the proxy, never wrong.
   */
  private startReader(booted: Worker | null = this.bootReader()): Promise<void> {
    const w = booted;
    if (!w) return Promise.resolve();
    return new Promise<void>((resolve) => {
      let opened = false;
      w.addEventListener("close", () => {
        if (!opened) {
          console.error("capture store: the reader worker ended while opening; queries run on the main thread");
          resolve();
        }
        if (this.readerWorker === w) this.readerStopped();
      });
      w.onmessage = (ev: MessageEvent<ReaderReply>) => {
        const m = ev.data;
        if (m.t === "opened") {
          opened = true;
          if (m.ok) {
            // (if the store is closing meanwhile, stopReader, which waits for this, ends it)
            this.readerWorker = w;
            w.unref();
          } else {
            console.error(`capture store: the reader worker could not open the database (${m.error}); queries run on the main thread`);
            w.terminate();
          }
          resolve();
          return;
        }
        const rec = this.readerPending.get(m.seq);
        if (!rec) return;
        this.readerPending.delete(m.seq);
        if (this.readerPending.size === 0) w.unref();
        if (m.error !== undefined) rec.reject(Object.assign(new Error(m.error), m.code ? { code: m.code } : {}));
        else rec.resolve(m.value);
      };
      w.postMessage({ t: "open", path: this.path, hasFts: this.hasFts } satisfies ReaderRequest);
    });
  }

  /** The reader Worker ended without being asked to: its queries run here; another one is started (once). */
  private readerStopped(): void {
    this.readerWorker = null;
    const pending = [...this.readerPending.values()];
    this.readerPending.clear();
    for (const rec of pending) {
      try {
        rec.resolve(rec.local(this.db));
      } catch (e) {
        rec.reject(e as Error);
      }
    }
    if (this.closed) return;
    if (this.readerRestarts++ >= 1) {
      console.error("capture store: the reader worker stopped again; queries run on the main thread");
      return;
    }
    console.error("capture store: the reader worker stopped unexpectedly; restarting it");
    // (close() waits for this one's open too, then ends it: a reader left opening would keep its connections)
    this.readerStarting = this.startReader();
  }

  /** Ends the reader Worker after the queries it was given (its connections closed first). */
  private async stopReader(): Promise<void> {
    await this.readerStarting;
    const w = this.readerWorker;
    if (!w) return;
    this.readerWorker = null;
    const seq = ++this.readerSeq;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(done, 10_000);
      this.readerPending.set(seq, { resolve: done, reject: done, local: () => undefined });
      w.ref();
      w.postMessage({ t: "close", seq } satisfies ReaderRequest);
    });
    w.terminate();
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
    if (m.t === "recovered") return this.onRecovered(m);
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

  /** The writer found damage while running, moved the file aside and salvaged it: the readers open the new file. */
  private onRecovered(m: Extract<WriterReply, { t: "recovered" }>): void {
    this.recoveries++;
    this.recoveredFrom = m.recoveredFrom;
    this.salvage = m.salvage;
    this.stored = m.stored;
    this.hasFts = m.hasFts;
    this.query = new CaptureQuery(m.hasFts);
    const counts = m.salvage ? `; ${m.salvage.saved} entries were read back from it, ${m.salvage.lost} could not be read and were left behind` : "";
    console.error(`capture store: the capture database was damaged; moved aside to ${m.recoveredFrom}${counts}`);
    if (this.reader) {
      try {
        this.reader.close();
      } catch {
        // unusable already
      }
      const reader = new Database(this.path, { readonly: true, strict: true });
      tuneConnection(reader, "reader");
      this.reader = reader;
    }
    this.readerWorker?.postMessage({ t: "reopen", hasFts: m.hasFts } satisfies ReaderRequest);
  }

  /**
   * Reads every table of the database now (what the writer's background probe does after open, a step at a time);
   * if a page is damaged the file is moved aside and what can be read is salvaged (recoveredFrom, salvage). True
   * when that happened. Reads that meet damage call it themselves.
   */
  async checkIntegrity(): Promise<boolean> {
    this.assertOpen();
    return (await this.request({ t: "check", seq: this.nextSeq() })).value === true;
  }

  /**
   * A read failed: if SQLite says the file is damaged, the writer checks it and moves it aside (salvaging what can
   * be read); the read is then made once more, on the new file. Any other error is the caller's.
   */
  private async retryIfDamaged<T>(e: unknown, again: () => Promise<T> | T): Promise<T> {
    const code = (e as { code?: unknown } | null)?.code;
    if ((code !== "SQLITE_CORRUPT" && code !== "SQLITE_NOTADB") || this.closed || this.dead) throw e;
    // The writer's background probe may have met the same damage and replaced the file while this read ran (or
    // while the check below waited behind that recovery): then the check finds nothing, and the read is made again.
    const began = (e as { storeRecoveries?: unknown }).storeRecoveries;
    const replaced = () => typeof began === "number" && began !== this.recoveries;
    if (replaced()) return again();
    if (!(await this.checkIntegrity()) && !replaced()) throw e;
    return again();
  }

  /** Marks a failed read with how many recoveries had happened when it began (see retryIfDamaged). */
  private stamp(e: unknown, recoveries: number): unknown {
    if (e !== null && typeof e === "object") (e as { storeRecoveries?: number }).storeRecoveries = recoveries;
    return e;
  }

  private checkCaughtUp(): void {
    if (this.overloaded && this.inflightEntries + this.pending.count < this.maxUnackedEntries / 2 && this.inflightBytes + this.pending.bytes < MAX_UNACKED_BYTES / 2) {
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
    if (this.dead) {
      // nothing is written any more: counted as dropped, like the queue's overflow
      this.dropped++;
      this.droppedTotal++;
      return id;
    }
    const queued = this.pending.count;
    if (
      this.inflightEntries + queued >= this.maxUnackedEntries ||
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

  /**
   * Creates this thread's two fresh write-ahead files under their prepared names (WAL_NEXT), filled with zeros to
   * WAL_MAP_BYTES and mapped. The writer, meanwhile, reads the files of the previous run (WAL_FILES) into its
   * journal and removes them; installWal renames these into their place once it has. A crash before that leaves
   * only zeros under the prepared names, which the next start overwrites. Null with a temporary store, or when the
   * files cannot be made (logged: entries then rely on the writer's journal alone).
   */
  private prepareWal(): Wal | null {
    if (this.tempDir !== null) return null;
    const dir = `${this.path}.journal`;
    try {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      const fds = WAL_NEXT.map((n) => openSync(join(dir, n), "w+", 0o600)) as [number, number];
      let maps: [Uint8Array, Uint8Array] | null = null;
      try {
        const zeros = new Uint8Array(1024 * 1024);
        for (const fd of fds) for (let at = 0; at < WAL_MAP_BYTES; at += zeros.length) writeSync(fd, zeros, 0, zeros.length, at);
        maps = WAL_NEXT.map((n) => Bun.mmap(join(dir, n), { shared: true })) as [Uint8Array, Uint8Array];
        if (maps[0].length < WAL_MAP_BYTES || maps[1].length < WAL_MAP_BYTES) throw new Error("short mapping");
      } catch (e) {
        maps = null;
        for (const fd of fds) ftruncateSync(fd, 0);
        console.error(`capture store: write-ahead files not mapped (${(e as Error).message}); each flush is a write()`);
      }
      const views = maps === null ? null : (maps.map((m) => new DataView(m.buffer, m.byteOffset, m.byteLength)) as [DataView, DataView]);
      return { fds, size: [0, 0], maxId: [0, 0], cur: 0, journaled: 0, maps, views };
    } catch (e) {
      console.error(`capture store: no write-ahead file (${(e as Error).message}); entries rely on the writer's journal alone`);
      return null;
    }
  }

  /** Puts the prepared write-ahead files in place (the writer has taken the previous run's) and starts using them. */
  private installWal(wal: Wal | null): void {
    if (wal === null) return;
    const dir = `${this.path}.journal`;
    try {
      for (let i = 0; i < WAL_FILES.length; i++) renameSync(join(dir, WAL_NEXT[i]!), join(dir, WAL_FILES[i]!));
      this.wal = wal;
    } catch (e) {
      this.discardWal(wal);
      console.error(`capture store: no write-ahead file (${(e as Error).message}); entries rely on the writer's journal alone`);
    }
  }

  /** Closes prepared write-ahead files that were not put in place, and removes them. */
  private discardWal(wal: Wal): void {
    this.wal = wal;
    this.closeWal(false);
    for (const n of WAL_NEXT) rmSync(join(`${this.path}.journal`, n), { force: true });
  }

  /** The write-ahead queue: records appended in place (walLen bytes), written with one write() per flush. */
  private walBuf: Buffer = Buffer.allocUnsafe(WAL_BUF_BYTES);
  /** A DataView of walBuf (record headers are written through it). */
  private walView = new DataView(this.walBuf.buffer, this.walBuf.byteOffset, this.walBuf.byteLength);

  private setWalBuf(b: Buffer): void {
    this.walBuf = b;
    this.walView = new DataView(b.buffer, b.byteOffset, b.byteLength);
  }
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
    const len = this.pending.lastLength;
    // straight into the mapped file when nothing waits in the queue (records keep their order)
    if (this.walLen === 0 && this.wal !== null && this.wal.maps !== null && this.mapAppend(this.wal, this.wal.maps, this.wal.views!, id, len)) return;
    // copied into the queue's buffer (a view would not do: the ring run may be reused, or a batch buffer of its own
    // transferred to the writer (detached), before the queue is written); no allocation per entry
    const need = this.walLen + HEADER_BYTES + len;
    if (need > this.walBuf.length) {
      const grown = Buffer.allocUnsafe(Math.max(need, this.walBuf.length * 2));
      grown.set(this.walBuf.subarray(0, this.walLen));
      this.setWalBuf(grown);
    }
    writeRecordHeader(this.walView, this.walLen, len, 1, id, id, this.nextId - 1 + ID_RESERVE);
    this.pending.copyLastEntry(this.walBuf, this.walLen + HEADER_BYTES);
    this.walLen = need;
    this.walMax = id;
    if (this.walDone === null) {
      this.walDone = new Promise<void>((r) => (this.walResolve = r));
      setImmediate(() => this.flushWal());
    }
  }

  /**
   * Stores one record in the current file's mapping. The order of the stores makes a record whole or absent for a
   * reader after kill -9: the fields after the magic word, the payload and a zero word after it first, the magic
   * word (where the reader stops while it is zero) last. False when it does not fit (the write() queue takes it).
   */
  private mapAppend(w: Wal, maps: [Uint8Array, Uint8Array], views: [DataView, DataView], id: number, len: number): boolean {
    const rec = HEADER_BYTES + len;
    if (w.size[w.cur] + rec + ZERO_WORD.length > WAL_MAP_BYTES) {
      const other = (1 - w.cur) as 0 | 1;
      if (w.maxId[other] > w.journaled) return false;
      this.walTruncate(other);
      if (rec + ZERO_WORD.length > WAL_MAP_BYTES) return false;
      w.cur = other;
    }
    const dv = views[w.cur];
    const pos = w.size[w.cur];
    // through the DataView (no header buffer, no views of it); the magic word last
    writeRecordFields(dv, pos, len, 1, id, id, this.nextId - 1 + ID_RESERVE);
    this.pending.copyLastEntry(maps[w.cur], pos + HEADER_BYTES);
    dv.setUint32(pos + rec, 0, true);
    dv.setUint32(pos, RECORD_MAGIC, true);
    w.size[w.cur] = pos + rec;
    w.maxId[w.cur] = id;
    return true;
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
        // a zero word after it: a reader at open stops there (older records may lie behind it in a reused file)
        if (w.maps !== null) writeSync(fd, ZERO_WORD, 0, ZERO_WORD.length, pos + len);
        w.size[w.cur] = pos + len;
        w.maxId[w.cur] = this.walMax;
      } catch (e) {
        // a disk that refuses the write: the entries still go to the writer; a partial record ends the file
        try {
          // never below the mapped size (a store into a mapped page past the end of the file faults)
          if (w.maps !== null) writeSync(fd, ZERO_WORD, 0, ZERO_WORD.length, pos);
          else ftruncateSync(fd, pos);
        } catch {}
        this.lastFlushError = new Error(`capture store: write-ahead file: ${(e as Error).message}`);
      }
    }
    if (this.walBuf.length > WAL_BUF_KEEP_BYTES) this.setWalBuf(Buffer.allocUnsafe(WAL_BUF_BYTES));
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
    if (w.maps !== null) {
      // a mapped file keeps its size (and its blocks): a zero magic word at the start empties it for a reader
      w.maps[i].set(ZERO_WORD, 0);
      w.size[i] = 0;
      w.maxId[i] = 0;
      return;
    }
    try {
      ftruncateSync(w.fds[i], 0);
      w.size[i] = 0;
    } catch {}
  }

  private closeWal(remove: boolean): void {
    const w = this.wal;
    if (w === null) return;
    this.wal = null;
    w.maps = null; // unmapped once collected
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

  /** Test hook: ends the reader Worker (as asked, not a crash): queries run on this thread from then on. */
  stopReaderForTest(): Promise<void> {
    return this.stopReader();
  }

  /** Resolves once the reader Worker is ready (or known unavailable: queries then run on this thread). */
  whenReaderReady(): Promise<void> {
    return this.readerStarting;
  }

  /** True while queries run in the reader Worker (capture-reader.ts), off this thread. */
  get readsOffThread(): boolean {
    return this.readerWorker !== null;
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
      // the readers go first: the writer's connection, closing last, checkpoints and removes the WAL
      await this.stopReader();
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

  /**
   * Runs a query in the reader Worker (off this thread); on this thread, with the same code, when that worker is
   * not available (it failed to start, or died twice).
   */
  private read<T>(msg: DistributiveOmit<Exclude<ReaderRequest, { t: "open" | "reopen" | "close" }>, "seq">, local: (db: Database) => T): Promise<T> {
    const w = this.readerWorker;
    const began = this.recoveries;
    if (!w)
      return Promise.resolve()
        .then(() => local(this.db))
        .catch((e) => {
          throw this.stamp(e, began);
        });
    const seq = ++this.readerSeq;
    return new Promise<T>((resolve, reject) => {
      const fail = (e: unknown) => reject(this.stamp(e, began));
      this.readerPending.set(seq, { resolve: resolve as (v: unknown) => void, reject: fail, local: local as (db: Database) => unknown });
      if (this.readerPending.size === 1) w.ref();
      w.postMessage({ ...msg, seq } as ReaderRequest);
    });
  }

  /**
   * One page of summaries. limit: default 50, capped at 500, 0 gives no items but the right total;
   * offset default 0. Order id DESC, or id ASC when since_id is given; q.order overrides.
   * Sees every entry added before the call. Runs in the reader Worker.
   */
  async list(q: ListQuery = {}): Promise<ListResult> {
    this.assertOpen();
    await this.sync();
    this.assertOpen();
    const run = () => this.read({ t: "list", q: cloneable(q) }, (db) => this.query.list(db, q));
    try {
      return await run();
    } catch (e) {
      return this.retryIfDamaged(e, run);
    }
  }

  /** The detail form, or null when the id is unknown (or evicted / deleted). Sees every entry added before. */
  async get(id: number): Promise<EntryDetail | null> {
    this.assertOpen();
    if (id > this.acked && id <= this.lastQueued) {
      this.post(false);
      this.hurry();
      await this.waitAcked(id);
    }
    const began = this.recoveries;
    try {
      return this.query.get(this.db, id);
    } catch (e) {
      return this.retryIfDamaged(this.stamp(e, began), () => this.query.get(this.db, id));
    }
  }

  /**
   * Every entry matching `q` (its filters; limit, offset and order are `opts`'), oldest first, as details: for
   * exports of any size. Reads a page of ids and then their details at a time, in the reader Worker, on a read
   * connection of its own with a small page cache and no memory map, so a long export neither holds its entries
   * nor fills the process with the database file; entries with ids above `opts.upto` (captured after the export
   * began) are left out.
   */
  async *details(q: ListQuery, opts: { upto?: number; offset?: number; limit?: number } = {}): AsyncGenerator<EntryDetail> {
    this.assertOpen();
    await this.sync();
    let cursor = finiteOrUndefined(q.since_id) ?? 0;
    let skip = Math.max(0, Math.floor(opts.offset ?? 0));
    let left = opts.limit === undefined ? Infinity : Math.max(0, Math.floor(opts.limit));
    const upto = opts.upto ?? Number.MAX_SAFE_INTEGER;
    const base = cloneable(q);
    // a search is decided partly outside SQL (compressed bodies): its ids are found once, up front
    let searched: number[] | null = null;
    if (typeof q.search === "string" && q.search !== "") {
      const sq = { ...base, since_id: cursor };
      const run = () => this.read({ t: "search-ids", q: sq, upto }, (db) => this.query.searchIdsUpto(db, sq, upto));
      searched = await run().catch((e) => this.retryIfDamaged(e, run));
    }
    let at = 0;
    while (left > 0 && !this.closed) {
      let rows: EntryDetail[];
      const n = Math.min(EXPORT_PAGE, left);
      if (searched) {
        at += skip;
        const ids = searched.slice(at, at + n);
        at += ids.length;
        const run = () => this.read({ t: "details-ids", ids }, (db) => this.query.detailsByIds(db, ids));
        rows = ids.length === 0 ? [] : await run().catch((e) => this.retryIfDamaged(e, run));
      } else {
        const pq = { ...base, since_id: cursor };
        const s = skip;
        const run = () => this.read({ t: "details-page", q: pq, upto, n, skip: s }, (db) => this.query.detailsPage(db, pq, upto, n, s));
        rows = await run().catch((e) => this.retryIfDamaged(e, run));
      }
      skip = 0;
      if (rows.length === 0) return;
      for (const r of rows) {
        cursor = r.id;
        left--;
        yield r;
      }
    }
  }
}

/** A list query as a message can carry it (only the fields a query reads; no functions, no prototypes). */
function cloneable(q: ListQuery): ListQuery {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(q)) if (v === null || ["string", "number", "boolean"].includes(typeof v)) out[k] = v;
  return out as ListQuery;
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
