/**
 * The capture store's writer Worker: owns the write connection (capture-db.ts) and the journal
 * (capture-journal.ts). Requests (capture-protocol.ts) are handled in the order they were posted.
 *
 * A batch is appended to the journal at once and acknowledged ("journaled": durable, the main thread lets go of
 * it); it is written into SQLite ("materialised") later, and its "reply" then tells the main thread the entries
 * are readable. Materialising costs some 140 µs of CPU per entry with the search index (bench/writer-bench.ts),
 * appending about 1 µs, and on a busy machine that CPU is the proxy's, so the journal is materialised:
 *   - at once when a reader waits ("hurry": list, get, flush, delete...),
 *   - when the traffic pauses (no batch for busyWindowMs),
 *   - and while the journal holds more than journalMaxBytes, whatever the traffic.
 * When the journal holds more than maxEntries entries, the oldest records are skipped instead: the store would
 * evict them as soon as the newer ones were written. Materialising runs in steps of MATERIALIZE_STEP_MS, each
 * one transaction of consecutive records (at most GROUP_MAX_ENTRIES entries), so batches keep being journaled
 * meanwhile.
 *
 * Records written while the search index has no backlog are indexed in the same transaction (capture-db.ts
 * insert, inOneTransaction). Otherwise (indexing was paused, or a backlog after a crash), between requests, it
 * fills the search index in steps (a few ms each while traffic flows, so a batch never waits long, spaced out by
 * BUSY_STEP_DELAY_MS; longer ones back to back while no batch has arrived for busyWindowMs); never while the
 * journal has a backlog.
 *
 * Built as an extra entrypoint of the compiled binary (build.ts). Never throws out of a handler: an uncaught
 * exception would end the worker (the store restarts it once, see capture-store.ts).
 */
import { CaptureWriter, isCorruptionError } from "./capture-db.ts";
import { CaptureJournal, type JournalRecord } from "./capture-journal.ts";
import type { WriterReply, WriterRequest } from "./capture-protocol.ts";
import { batchBytes, type DecodedBatch, decodeBatch } from "./entry-codec.ts";

declare const self: Worker;

/** Work per index step: stops after this long (or STEP_MAX_ROWS entries), then commits. */
const STEP_BUDGET_MS = 4;
const STEP_MAX_ROWS = 256;
/**
 * With no traffic, steps are longer (fewer transactions, bigger index segments): bench/writer-bench.ts measured
 * 137 against 153 µs of CPU per entry indexed (25 ms / 2,048 rows against 4 ms / 256).
 */
const IDLE_STEP_BUDGET_MS = 25;
const IDLE_STEP_MAX_ROWS = 2048;
/** A batch within this window means traffic is flowing: materialising waits, index steps are spaced out. */
let busyWindowMs = 100;
const BUSY_STEP_DELAY_MS = 25;
/** Materialising works in steps of about this long (whole journal records). */
const MATERIALIZE_STEP_MS = 50;
/** At most this many entries (whole journal records) are materialised in one SQLite transaction. */
const GROUP_MAX_ENTRIES = 1000;
/**
 * A catch-up (see materializeSome): once traffic that flowed for at least CATCH_UP_TRAFFIC_MS without a pause has
 * stopped, a journal holding at least CATCH_UP_ENTRIES entries is written without the rows' search-index entries,
 * which index steps add once the journal is empty.
 */
const CATCH_UP_ENTRIES = 5000;
const CATCH_UP_TRAFFIC_MS = 2000;
/** Ids read per step of the background probe for damaged pages (each of the three tables). */
const PROBE_STEP_IDS = 2000;
/** Above this much journal, records are materialised even while traffic flows (less with a small size bound: open). */
let journalMaxBytes = 512 * 1024 * 1024;

let writer: CaptureWriter | null = null;
let journal: CaptureJournal | null = null;
let maxEntries = 1;
let indexing = true;
let lastBatchAt = -Infinity;
/** When the traffic now flowing (or last flowing) began: the first batch after a pause of busyWindowMs or more. */
let trafficSince = -Infinity;
let indexTimer: ReturnType<typeof setTimeout> | null = null;
let probeTimer: ReturnType<typeof setTimeout> | null = null;
/** Set once the main thread has opened its connections (a "probe" message): the probe waits until then. */
let probeAllowed = false;
let materializeTimer: ReturnType<typeof setTimeout> | null = null;
/** materializeTimer is a step due at once (not one waiting for the traffic to pause). */
let materializeSoon = false;
/** A reader waits for every entry up to this id. */
let hurryUpto = 0;
/** Highest id of every batch seen (journaled or written directly). */
let lastSeenId = 0;
/** "indexed" requests, answered once the journal is written and the index has caught up. */
let indexedWaiters: number[] = [];
let lastReadable = -1;

/** The main thread's batch ring (entry-codec.ts): read only between a batch's arrival and its answer. */
let ring: SharedArrayBuffer | null = null;

function send(m: WriterReply): void {
  self.postMessage(m);
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** Entries stored, the journal's included: what the main thread counts. */
function storedCount(): number {
  if (!writer) return 0;
  return Math.min(maxEntries, writer.stored + (journal?.entries ?? 0));
}

/** Every id up to this one is in SQLite, or was dropped. */
function readable(): number {
  const head = journal?.queue[0];
  return head ? head.firstId - 1 : lastSeenId;
}

function reply(seq: number, error: string | null, value?: unknown, failed?: number): void {
  lastReadable = readable();
  send({ t: "reply", seq, stored: storedCount(), error, value, failed, readable: lastReadable });
}

function progress(): void {
  const r = readable();
  if (r === lastReadable) return;
  lastReadable = r;
  send({ t: "progress", stored: storedCount(), readable: r });
}

function answerIndexedWaiters(): void {
  if (indexedWaiters.length === 0) return;
  if (journal?.queue.length) return;
  if (writer?.backlog && indexing) return;
  const w = indexedWaiters;
  indexedWaiters = [];
  for (const seq of w) reply(seq, writer?.backlog ? "indexing is paused" : null);
}

function busy(): boolean {
  return performance.now() - lastBatchAt < busyWindowMs;
}

// --- damage found while running ------------------------------------------------------------------------------

/**
 * If `e` says the database file is damaged: it is moved aside and salvaged (as at open), the main thread is told
 * (its readers open the new file) and true is returned; the work that failed can be done again.
 */
function recoverIf(e: unknown): boolean {
  const w = writer;
  if (!w || !isCorruptionError(e)) return false;
  console.error(`capture writer: the database is damaged (${errorText(e)}); moving it aside and salvaging what can be read`);
  w.recover();
  send({ t: "recovered", recoveredFrom: w.recoveredFrom, salvage: w.salvage, stored: storedCount(), hasFts: w.hasFts });
  return true;
}

/** Reads the rest of every table now (a reader met damage, or a test asks); recovers if damage shows. */
function checkNow(): boolean {
  if (!writer) return false;
  try {
    writer.checkAll();
    return false;
  } catch (e) {
    if (recoverIf(e)) return true;
    throw e;
  }
}

/** The background probe: a step at a time, only while no traffic flows and nothing else waits. */
function scheduleProbe(): void {
  if (!probeAllowed || probeTimer !== null || !writer || !writer.probing || journal?.queue.length) return;
  probeTimer = setTimeout(probeStep, busy() ? busyWindowMs : 0);
}

function probeStep(): void {
  probeTimer = null;
  if (!writer || journal?.queue.length) return;
  if (!busy()) {
    try {
      writer.probeStep(PROBE_STEP_IDS);
    } catch (e) {
      if (!recoverIf(e)) {
        console.error(`capture writer: reading the database failed: ${errorText(e)}`);
        return;
      }
      scheduleMaterialize();
      scheduleIndexing();
    }
  }
  scheduleProbe();
}

// --- materialising the journal -------------------------------------------------------------------------------

/** What writing one journal record gave: its batch's answer. */
interface Written {
  rec: JournalRecord;
  error: string | null;
  failed: number;
}

/** Writes one journal record into SQLite (or marks it skipped), inside the caller's transaction. */
function writeRecord(rec: JournalRecord, skip: boolean): Written {
  const w = writer!;
  if (skip) {
    w.markJournalUpto(rec.lastId);
    return { rec, error: null, failed: 0 };
  }
  let batch: DecodedBatch | null = null;
  try {
    batch = journal!.read(rec);
  } catch (e) {
    w.markJournalUpto(rec.lastId);
    return { rec, error: `unreadable journal record: ${errorText(e)}`, failed: rec.count };
  }
  const r = w.writeBatch(batch, rec.ceiling, rec.lastId);
  return { rec, error: batch.error ?? r.error, failed: batch.failed + r.failed };
}

/** Once their transaction is committed: the journal lets go of the records, and their batches are answered. */
function answerWritten(done: Written[]): void {
  journal!.release(writer!.journalUpto);
  for (const { rec, error, failed } of done) {
    if (rec.seq > 0) reply(rec.seq, error, undefined, failed);
    else if (error !== null) console.error(`capture writer: ${error}`);
  }
}

/**
 * Materialises (or skips) whole records from the head of the journal for about budgetMs (Infinity: all of it).
 * Consecutive records are written in one transaction, up to GROUP_MAX_ENTRIES entries or the budget: measured
 * (bench/writer-bench.ts --inline --group 5), 142 against 166 µs of CPU per entry written and indexed with one
 * transaction per record (fewer commits, fewer and bigger search index segments: capture-db.ts
 * inOneTransaction). Nothing is answered or released before its commit.
 * A failing SQLite (disk full...) throws: the records stay queued and are tried again later.
 */
function materializeSome(budgetMs: number): void {
  const j = journal;
  const w = writer;
  if (!w || !j) return;
  const t0 = performance.now();
  // A catch-up (the backlog that sustained traffic left while the writer waited for it to pause): the rows go into
  // the tables first, so that every entry is listed, filtered and searched (searches read what the index does not
  // hold yet) sooner; the trigram index, most of a small entry's cost, follows in index steps. Indexing with the
  // rows costs less CPU in all, so writing while traffic flows, small backlogs and short bursts keep it: a writer
  // that is the bottleneck (bursts, each waited for) would otherwise leave the index ever further behind.
  w.inlineIndex = indexing && !catchingUp(j);
  try {
    materializeRecords(j, w, t0, budgetMs);
  } finally {
    w.inlineIndex = indexing;
  }
  progress();
  answerIndexedWaiters();
}

function catchingUp(j: CaptureJournal): boolean {
  return !busy() && j.entries >= CATCH_UP_ENTRIES && lastBatchAt - trafficSince >= CATCH_UP_TRAFFIC_MS;
}

function materializeRecords(j: CaptureJournal, w: CaptureWriter, t0: number, budgetMs: number): void {
  while (j.queue.length > 0) {
    const head = j.queue[0]!;
    // with more than maxEntries entries queued, the oldest would be evicted as soon as the others are written
    if (j.entries - head.count >= maxEntries) {
      answerWritten([w.inOneTransaction(() => writeRecord(head, true))]);
      continue;
    }
    const done = w.inOneTransaction(() => {
      const out: Written[] = [];
      let n = 0;
      // the records after the head are never skipped: fewer entries are queued behind each of them
      for (let i = 0; i < j.queue.length; i++) {
        const rec = j.queue[i]!;
        if (out.length > 0 && (n + rec.count > GROUP_MAX_ENTRIES || performance.now() - t0 >= budgetMs)) break;
        out.push(writeRecord(rec, false));
        n += rec.count;
      }
      return out;
    });
    answerWritten(done);
    if (performance.now() - t0 >= budgetMs) break;
  }
}

function wantMaterialize(): "now" | "later" | "no" {
  const j = journal;
  if (!writer || !j || j.queue.length === 0) return "no";
  if (hurryUpto >= j.queue[0]!.firstId || j.bytes > journalMaxBytes || !busy()) return "now";
  return "later";
}

function scheduleMaterialize(): void {
  const want = wantMaterialize();
  if (materializeTimer !== null) {
    // a step is due anyway, or one was set for when the traffic pauses and now it is wanted at once
    if (materializeSoon || want !== "now") return;
    clearTimeout(materializeTimer);
  }
  if (want === "no") return;
  materializeSoon = want === "now";
  const delay = materializeSoon ? 0 : Math.max(1, busyWindowMs - (performance.now() - lastBatchAt));
  materializeTimer = setTimeout(materializeStep, delay);
}

function materializeStep(): void {
  materializeTimer = null;
  if (wantMaterialize() === "now") {
    try {
      materializeSome(MATERIALIZE_STEP_MS);
    } catch (e) {
      if (recoverIf(e)) {
        materializeTimer = setTimeout(materializeStep, 0);
        return;
      }
      console.error(`capture writer: writing the journal into the database failed: ${errorText(e)}`);
      materializeTimer = setTimeout(materializeStep, 1000);
      return;
    }
  }
  scheduleMaterialize();
  scheduleIndexing();
  scheduleProbe();
}

/** Everything journaled is written before requests that read or change the tables. */
function materializeAll(): void {
  materializeSome(Infinity);
}

// --- the search index ----------------------------------------------------------------------------------------

function scheduleIndexing(): void {
  if (indexTimer !== null || !writer || !indexing || !writer.backlog || journal?.queue.length) return;
  indexTimer = setTimeout(indexStep, busy() ? BUSY_STEP_DELAY_MS : 0);
}

function indexStep(): void {
  indexTimer = null;
  if (!writer || !indexing || journal?.queue.length) return;
  try {
    const idle = !busy();
    writer.indexStep(idle ? IDLE_STEP_BUDGET_MS : STEP_BUDGET_MS, idle ? IDLE_STEP_MAX_ROWS : STEP_MAX_ROWS);
  } catch (e) {
    if (recoverIf(e)) {
      scheduleIndexing();
      return;
    }
    // e.g. the disk is full: try again later; search stays exact (the rest is scanned)
    console.error(`capture writer: indexing failed: ${errorText(e)}`);
    indexTimer = setTimeout(indexStep, 1000);
    return;
  }
  if (writer.backlog) scheduleIndexing();
  else {
    answerIndexedWaiters();
    scheduleProbe();
  }
}

// --- requests ------------------------------------------------------------------------------------------------

function open(m: Extract<WriterRequest, { t: "open" }>): void {
  try {
    // the main thread's write-ahead files are read at the first open only (later it is writing them)
    const j = CaptureJournal.open(`${m.path}.journal`, m.assigned === 0);
    const w = new CaptureWriter(m.path, { maxEntries: m.maxEntries, maxStoreBytes: m.maxStoreBytes, assigned: m.assigned, idReserve: m.idReserve });
    // the journal is disk beside the bound: at most an eighth of it
    journalMaxBytes = Math.max(1024 * 1024, Math.min(journalMaxBytes, Math.floor(m.maxStoreBytes / 8)));
    // ids found in the journal (and the ceilings reserved with them) are taken too
    w.raiseNextId(Math.max(j.maxId, j.maxCeiling) + 1);
    j.release(w.journalUpto);
    writer = w;
    journal = j;
    ring = m.ring;
    maxEntries = Math.max(1, m.maxEntries);
    indexing = m.indexing;
    w.inlineIndex = indexing;
    busyWindowMs = Math.max(0, m.busyWindowMs);
    lastSeenId = w.nextId - 1;
    lastReadable = readable();
    send({ t: "opened", ok: true, nextId: w.nextId, stored: storedCount(), recoveredFrom: w.recoveredFrom, salvage: w.salvage, wasEmpty: w.wasEmpty, hasFts: w.hasFts, readable: lastReadable });
    if (j.queue.length > 0) console.error(`capture writer: ${j.entries} entries found in the journal are written into the database`);
    scheduleMaterialize();
    scheduleIndexing();
    scheduleProbe();
  } catch (e) {
    send({ t: "opened", ok: false, error: errorText(e), code: (e as { code?: string }).code });
  }
}

function batch(m: Extract<WriterRequest, { t: "batch" }>): void {
  const now = performance.now();
  if (now - lastBatchAt >= busyWindowMs) trafficSince = now;
  lastBatchAt = now;
  const data = batchBytes(ring, m);
  if (m.count > 0) {
    try {
      journal!.append(m.seq, data, m.count, m.first, m.upto, m.ceiling);
      lastSeenId = Math.max(lastSeenId, m.upto);
      send({ t: "journaled", seq: m.seq, stored: storedCount() });
      return;
    } catch (e) {
      // the journal refuses it (disk full...): try the database directly
      console.error(`capture writer: journal append failed (${errorText(e)}); writing the batch directly`);
    }
  }
  // written directly (or nothing to write: every entry failed to encode), behind everything journaled before it:
  // its answer tells the main thread that every id up to its last is readable
  materializeAll();
  const decoded = decodeBatch(data);
  const r = writer!.writeBatch(decoded, m.ceiling);
  lastSeenId = Math.max(lastSeenId, m.upto);
  reply(m.seq, decoded.error ?? r.error, undefined, decoded.failed + r.failed);
}

function handle(m: WriterRequest): void {
  if (m.t === "open") return open(m);
  if (m.t === "probe") {
    probeAllowed = true;
    scheduleProbe();
    return;
  }
  if (m.t === "hurry") {
    hurryUpto = Math.max(hurryUpto, lastSeenId);
    scheduleMaterialize();
    return;
  }
  if (!writer) {
    send({ t: "reply", seq: m.seq, stored: 0, error: "capture writer is not open", readable: lastSeenId });
    return;
  }
  try {
    switch (m.t) {
      case "batch":
        batch(m);
        break;
      case "delete":
        materializeAll();
        reply(m.seq, null, writer.delete(m.id));
        break;
      case "clear": {
        // the journal's entries are dropped unwritten; their batches are answered (nothing to read)
        const dropped = journal?.dropAll() ?? [];
        writer.clear(m.ceiling, lastSeenId);
        for (const rec of dropped) if (rec.seq > 0) reply(rec.seq, null);
        reply(m.seq, null);
        break;
      }
      case "status":
        reply(m.seq, null, { ...writer.status(indexing), stored: storedCount(), journalEntries: journal?.entries ?? 0, journalBytes: journal?.bytes ?? 0 });
        break;
      case "indexed":
        indexedWaiters.push(m.seq);
        hurryUpto = Math.max(hurryUpto, lastSeenId);
        answerIndexedWaiters();
        break;
      case "check": {
        materializeAll();
        reply(m.seq, null, checkNow());
        break;
      }
      case "indexing":
        indexing = m.on;
        writer.inlineIndex = m.on;
        reply(m.seq, null);
        answerIndexedWaiters();
        break;
      case "close": {
        if (indexTimer !== null) clearTimeout(indexTimer);
        if (materializeTimer !== null) clearTimeout(materializeTimer);
        if (probeTimer !== null) clearTimeout(probeTimer);
        indexTimer = materializeTimer = probeTimer = null;
        indexing = false;
        const w = writer;
        let error: string | null = null;
        try {
          materializeAll();
        } catch (e) {
          // what is left stays in the journal: the next open writes it
          error = `writing the journal into the database failed: ${errorText(e)}`;
        }
        answerIndexedWaiters();
        writer = null;
        journal?.close();
        journal = null;
        w.close(m.ceiling);
        send({ t: "reply", seq: m.seq, stored: w.stored, error, readable: lastSeenId });
        self.onmessage = null;
        return;
      }
    }
  } catch (e) {
    // a damaged file: moved aside and salvaged; the request fails once (its caller may try again)
    recoverIf(e);
    reply(m.seq, errorText(e));
  }
  scheduleMaterialize();
  scheduleIndexing();
  scheduleProbe();
}

self.onmessage = (ev: MessageEvent<WriterRequest>) => handle(ev.data);
