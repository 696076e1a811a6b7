/**
 * The capture store's writer Worker: owns the write connection (capture-db.ts). Requests (capture-protocol.ts)
 * are handled in the order they were posted, each answered with a reply carrying its seq; batch replies are
 * the acknowledgements the main thread waits for before it reads.
 *
 * Between requests it fills the search index in small steps (a few ms each, so a batch never waits long):
 * back to back while no batch has arrived for BUSY_WINDOW_MS, spaced out by BUSY_STEP_DELAY_MS while traffic
 * flows (indexing then takes at most a small share of a core, which the proxy needs more).
 *
 * Built as an extra entrypoint of the compiled binary (build.ts). Never throws out of a handler: an uncaught
 * exception would end the worker (the store restarts it once, see capture-store.ts).
 */
import { CaptureWriter } from "./capture-db.ts";
import type { WireRow, WriterReply, WriterRequest } from "./capture-protocol.ts";

declare const self: Worker;

/** Work per index step: stops after this long (or STEP_MAX_ROWS entries), then commits. */
const STEP_BUDGET_MS = 4;
const STEP_MAX_ROWS = 256;
/** A batch within this window means traffic is flowing: index steps are then spaced out. */
const BUSY_WINDOW_MS = 100;
const BUSY_STEP_DELAY_MS = 25;

let writer: CaptureWriter | null = null;
let indexing = true;
let lastBatchAt = -Infinity;
let indexTimer: ReturnType<typeof setTimeout> | null = null;
/** "indexed" requests, answered once the index has caught up. */
let indexedWaiters: number[] = [];

function send(m: WriterReply): void {
  self.postMessage(m);
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function reply(seq: number, error: string | null, value?: unknown, failed?: number): void {
  send({ t: "reply", seq, stored: writer?.stored ?? 0, error, value, failed });
}

function answerIndexedWaiters(): void {
  if (indexedWaiters.length === 0 || (writer?.backlog && indexing)) return;
  const w = indexedWaiters;
  indexedWaiters = [];
  for (const seq of w) reply(seq, writer?.backlog ? "indexing is paused" : null);
}

function scheduleIndexing(): void {
  if (indexTimer !== null || !writer || !indexing || !writer.backlog) return;
  const busy = performance.now() - lastBatchAt < BUSY_WINDOW_MS;
  indexTimer = setTimeout(indexStep, busy ? BUSY_STEP_DELAY_MS : 0);
}

function indexStep(): void {
  indexTimer = null;
  if (!writer || !indexing) return;
  try {
    writer.indexStep(STEP_BUDGET_MS, STEP_MAX_ROWS);
  } catch (e) {
    // e.g. the disk is full: try again later; search stays exact (the rest is scanned)
    console.error(`capture writer: indexing failed: ${errorText(e)}`);
    indexTimer = setTimeout(indexStep, 1000);
    return;
  }
  if (writer.backlog) scheduleIndexing();
  else answerIndexedWaiters();
}

function handle(m: WriterRequest): void {
  if (m.t === "open") {
    try {
      writer = new CaptureWriter(m.path, { maxEntries: m.maxEntries, assigned: m.assigned, idReserve: m.idReserve });
      indexing = m.indexing;
      send({ t: "opened", ok: true, nextId: writer.nextId, stored: writer.stored, recoveredFrom: writer.recoveredFrom, hasFts: writer.hasFts });
      scheduleIndexing();
    } catch (e) {
      send({ t: "opened", ok: false, error: errorText(e), code: (e as { code?: string }).code });
    }
    return;
  }
  if (!writer) {
    reply(m.seq, "capture writer is not open");
    return;
  }
  try {
    switch (m.t) {
      case "batch": {
        lastBatchAt = performance.now();
        let rows: WireRow[];
        try {
          rows = JSON.parse(m.rows) as WireRow[];
        } catch (e) {
          reply(m.seq, `unreadable batch: ${errorText(e)}`, undefined, -1);
          return;
        }
        const r = writer.writeBatch(rows, new Uint8Array(m.bodies), m.ceiling);
        reply(m.seq, r.error, undefined, r.failed);
        break;
      }
      case "delete":
        reply(m.seq, null, writer.delete(m.id));
        break;
      case "clear":
        writer.clear(m.ceiling);
        reply(m.seq, null);
        break;
      case "status":
        reply(m.seq, null, writer.status(indexing));
        break;
      case "indexed":
        indexedWaiters.push(m.seq);
        answerIndexedWaiters();
        break;
      case "indexing":
        indexing = m.on;
        reply(m.seq, null);
        answerIndexedWaiters();
        break;
      case "close": {
        if (indexTimer !== null) clearTimeout(indexTimer);
        indexTimer = null;
        indexing = false;
        answerIndexedWaiters();
        const w = writer;
        writer = null;
        w.close(m.ceiling);
        send({ t: "reply", seq: m.seq, stored: w.stored, error: null });
        self.onmessage = null;
        return;
      }
    }
  } catch (e) {
    reply(m.seq, errorText(e));
  }
  scheduleIndexing();
}

self.onmessage = (ev: MessageEvent<WriterRequest>) => handle(ev.data);
