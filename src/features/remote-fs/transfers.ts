import { randomBytes } from "node:crypto";
import { closeSync, createReadStream, existsSync, openSync, statSync, unlinkSync, renameSync } from "node:fs";
import { basename, dirname, isAbsolute, join, posix } from "node:path";
import { Readable, Transform } from "node:stream";
import { ApiError, badRequest } from "../../api/errors.ts";
import type { RemoteConnection, RemoteConnections } from "./connections.ts";
import { checkAborted } from "./backend.ts";
import { RemoteError, remoteError } from "./errors.ts";

/** How long cancel, pause and stop wait for a transfer's work to stop before they leave it behind (see start()). */
const STUCK_GRACE_MS = 2000;

export type TransferState = "queued" | "running" | "paused" | "done" | "error" | "cancelled";
export type TransferKind = "download" | "upload";

/** GET /remote-fs/transfers item: spec 2.18 plus totalBytes, error, startedAt, finishedAt (extensions). */
export interface TransferView {
  transferId: string;
  connectionId: string;
  kind: TransferKind;
  state: TransferState;
  remotePath: string;
  localPath: string;
  bytesDone: number;
  totalBytes: number | null;
  error: { code: string; message: string } | null;
  startedAt: number | null;
  finishedAt: number | null;
}

/**
 * Transitions (docs/remote-files.md):
 *
 *   queued  --slot free-->  running  --all bytes, renamed into place-->  done
 *   running --failure--> error        running --cancel--> cancelled     running --pause--> paused
 *   queued  --pause-->   paused       queued  --cancel--> cancelled
 *   paused  --resume-->  queued       paused  --cancel--> cancelled
 *
 * done, error and cancelled are final. Cancelling a cancelled transfer is 409 `cancelled`; any other move not in
 * the table is 409 `conflict`.
 */
const FINAL: TransferState[] = ["done", "error", "cancelled"];
export const MAX_RUNNING_PER_CONNECTION = 2;
/** Finished transfers kept in the list (the oldest finished ones are dropped first). */
const KEEP_FINISHED = 500;

interface Job {
  view: TransferView;
  /** Where a download's bytes land until it succeeds (kept while paused, so resume continues from its size). */
  tempPath: string | null;
  abort: AbortController | null;
  /** What an abort of the running work means. */
  stopAs: "paused" | "cancelled" | null;
  /** Settles when the running work has finished cleaning up. */
  settled: Promise<void> | null;
}

/**
 * A transfer turns every byte into short-lived buffers several times over (the protocol library's socket, decrypt
 * and framing buffers, ours), and the engine's garbage collector lets such external memory pile up long before it
 * runs by itself: hundreds of MB for one large file. So every CHECK_EVERY bytes moved (all transfers together):
 *
 * - a young-generation collection runs (Bun.gc(false): about 0.2 ms, it frees most of the buffers that died since
 *   the previous one), so the full collections below are rarely needed;
 * - the process's RSS is read (cheap), and when it stands more than RSS_ALLOWANCE above the lowest RSS seen while
 *   transferring (and AFTER_GC_MARGIN above what it was right after the previous full collection, since freed pages
 *   go back with a delay), a full collection runs instead (15-30 ms with tapwire's heap).
 *
 * With full collections alone (every ~15 MB moved) a 200 MB transfer lost up to half its throughput to them; the
 * young collections cut their number by 3-4x. Memory stays flat whatever the file's size (bench/remote-bench.ts
 * prints the peaks; docs/remote-files.md "Performance").
 */
const CHECK_EVERY = 2 * 1024 * 1024;
const RSS_ALLOWANCE = 32 * 1024 * 1024;
/** After a collection, freed pages go back to the system with a delay: wait for this much more before the next. */
const AFTER_GC_MARGIN = 16 * 1024 * 1024;
let sinceCheck = 0;
let floor = Infinity;
let afterGc = 0;

function countForGc(n: number): void {
  sinceCheck += n;
  if (sinceCheck < CHECK_EVERY) return;
  sinceCheck = 0;
  const bun = (globalThis as { Bun?: { gc(full: boolean): void } }).Bun;
  if (!bun) return;
  const rss = process.memoryUsage.rss();
  if (rss < floor) floor = rss;
  if (rss - floor < RSS_ALLOWANCE || rss < afterGc + AFTER_GC_MARGIN) {
    bun.gc(false);
    return;
  }
  bun.gc(true);
  afterGc = process.memoryUsage.rss();
  floor = Math.min(floor, afterGc);
}

/** A pass-through that adds what goes through it to the transfer's bytesDone (counting without consuming). */
function byteCounter(j: Job): Transform {
  return new Transform({
    highWaterMark: 256 * 1024,
    transform(chunk: Buffer, _enc, cb) {
      j.view.bytesDone += chunk.length;
      countForGc(chunk.length);
      cb(null, chunk);
    },
  });
}

/**
 * Writes a download's bytes to the local file through Bun's FileSink (native buffered writes on the descriptor,
 * 1 MiB buffer), counting them into bytesDone. A node:fs WriteStream fed by stream.pipeline did the same at a half
 * to a third of the speed under Bun 1.4.5, which made the sink, not the protocol, the bottleneck of a download.
 * Backpressure: the next chunk is read only after this one is handed to the sink (and, when the sink answers with a
 * promise, once it has drained). A resumed download appends (the temporary file holds exactly `offset` bytes).
 */
async function writeToFile(j: Job, source: Readable | ReadableStream<Uint8Array>, path: string, offset: number, signal: AbortSignal): Promise<void> {
  const fd = openSync(path, offset > 0 ? "a" : "w");
  const sink = Bun.file(fd).writer({ highWaterMark: 1024 * 1024 });
  // a web stream (fetch body) fails by itself when the request's signal aborts; leaving the loop cancels it
  const stop = (e?: Error) => {
    if (source instanceof Readable) source.destroy(e);
  };
  const onAbort = () => stop(remoteError("cancelled", "transfer cancelled"));
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    checkAborted(signal);
    for await (const chunk of source as AsyncIterable<Uint8Array>) {
      const w = sink.write(chunk);
      if (w instanceof Promise) await w;
      j.view.bytesDone += chunk.byteLength;
      countForGc(chunk.byteLength);
    }
    const e = sink.end();
    if (e instanceof Promise) await e;
  } catch (e) {
    stop();
    // hand the sink's buffered bytes (in order, so a resume can continue after them) to the file before the
    // descriptor closes, so nothing is written to it later
    try {
      const end = sink.end();
      if (end instanceof Promise) await end.catch(() => {});
    } catch {}
    if (signal.aborted) throw remoteError("cancelled", "transfer cancelled");
    throw e;
  } finally {
    signal.removeEventListener("abort", onAbort);
    closeSync(fd);
  }
}

function transferId(): string {
  return `tr_rest_${randomBytes(9).toString("base64url")}`;
}

function errorOf(e: unknown): { code: string; message: string } {
  if (e instanceof RemoteError) return { code: e.remoteCode, message: e.message };
  if (e instanceof ApiError) return { code: e.code, message: e.message };
  const err = e as NodeJS.ErrnoException;
  if (err?.code === "ENOENT") return { code: "notFound", message: `local file: ${err.message}` };
  if (err?.code === "EACCES" || err?.code === "EPERM") return { code: "permissionDenied", message: `local file: ${err.message}` };
  return { code: "io", message: String(err?.message ?? e) };
}

/**
 * The transfer queue: downloads and uploads run in the background, at most MAX_RUNNING_PER_CONNECTION at a time per
 * connection, the rest wait in FIFO order. Bytes stream end to end with backpressure (never a whole file in
 * memory). A download is written to a temporary file beside local_path and renamed into place only once complete;
 * an upload goes to a temporary name beside the target and is renamed over it at the end (S3 objects appear only
 * once complete anyway), so a failed or cancelled transfer never leaves a partial file under the final name.
 */
export class TransferQueue {
  private jobs = new Map<string, Job>();

  constructor(private readonly conns: RemoteConnections, private readonly maxRunning = MAX_RUNNING_PER_CONNECTION) {}

  list(): TransferView[] {
    return [...this.jobs.values()].map((j) => ({ ...j.view }));
  }

  get(id: string): TransferView {
    return { ...this.job(id).view };
  }

  private job(id: string): Job {
    const j = this.jobs.get(id);
    if (!j) throw new RemoteError("notFound", `no transfer '${id}'`);
    return j;
  }

  /** Validates and enqueues; answers the transferId at once (the work runs in the background). */
  enqueue(kind: TransferKind, connectionId: string, remotePath: string, localPath: string): { transferId: string } {
    const conn = this.conns.get(connectionId);
    if (typeof localPath !== "string" || !isAbsolute(localPath)) throw badRequest(`local_path must be an absolute path, got ${JSON.stringify(localPath)}`);
    if (remotePath === "") throw badRequest("remote_path must not be empty");
    if (kind === "upload") {
      let st;
      try {
        st = statSync(localPath);
      } catch {
        throw new RemoteError("notFound", `local_path ${localPath} does not exist`);
      }
      if (!st.isFile()) throw badRequest(`local_path ${localPath} is not a regular file`);
    } else {
      if (!existsSync(dirname(localPath))) throw new RemoteError("notFound", `the folder of local_path (${dirname(localPath)}) does not exist`);
      if (existsSync(localPath) && statSync(localPath).isDirectory()) throw badRequest(`local_path ${localPath} is a folder; give the file's path`);
    }
    const id = transferId();
    const job: Job = {
      view: {
        transferId: id,
        connectionId: conn.config.id,
        kind,
        state: "queued",
        remotePath,
        localPath,
        bytesDone: 0,
        totalBytes: null,
        error: null,
        startedAt: null,
        finishedAt: null,
      },
      tempPath: null,
      abort: null,
      stopAs: null,
      settled: null,
    };
    this.jobs.set(id, job);
    this.trim();
    this.schedule(conn.config.id);
    return { transferId: id };
  }

  async cancel(id: string): Promise<TransferView> {
    const j = this.job(id);
    const s = j.view.state;
    if (s === "cancelled") throw new RemoteError("cancelled", `transfer ${id} is already cancelled`);
    if (FINAL.includes(s)) throw new ApiError(409, "conflict", `transfer ${id} is ${s}; only a queued, running or paused transfer can be cancelled`);
    if (s === "running") {
      j.stopAs = "cancelled";
      j.abort?.abort();
      await j.settled;
      if (j.view.state === "done") throw new ApiError(409, "conflict", `transfer ${id} finished before it could be cancelled`);
    } else {
      this.removeTemp(j);
      this.finish(j, "cancelled", null);
    }
    return { ...j.view };
  }

  async pause(id: string): Promise<TransferView> {
    const j = this.job(id);
    const s = j.view.state;
    if (s === "paused") return { ...j.view };
    if (s !== "queued" && s !== "running") throw new ApiError(409, "conflict", `transfer ${id} is ${s}; only a queued or running transfer can be paused`);
    if (s === "running") {
      j.stopAs = "paused";
      j.abort?.abort();
      await j.settled;
      if (j.view.state === "done") throw new ApiError(409, "conflict", `transfer ${id} finished before it could be paused`);
    } else j.view.state = "paused";
    return { ...j.view };
  }

  resume(id: string): TransferView {
    const j = this.job(id);
    if (j.view.state !== "paused") throw new ApiError(409, "conflict", `transfer ${id} is ${j.view.state}; only a paused transfer can be resumed`);
    j.view.state = "queued";
    j.view.error = null;
    this.schedule(j.view.connectionId);
    return { ...j.view };
  }

  /** Cancels everything still running (service stop). */
  async stop(): Promise<void> {
    const running = [...this.jobs.values()].filter((j) => j.view.state === "running" || j.view.state === "queued" || j.view.state === "paused");
    await Promise.all(running.map((j) => this.cancel(j.view.transferId).catch(() => {})));
  }

  private trim(): void {
    const finished = [...this.jobs.values()].filter((j) => FINAL.includes(j.view.state));
    for (let i = 0; i < finished.length - KEEP_FINISHED; i++) this.jobs.delete(finished[i]!.view.transferId);
  }

  private schedule(connectionId: string): void {
    const all = [...this.jobs.values()].filter((j) => j.view.connectionId === connectionId);
    let running = all.filter((j) => j.view.state === "running").length;
    for (const j of all) {
      if (running >= this.maxRunning) break;
      if (j.view.state !== "queued") continue;
      running++;
      this.start(j);
    }
  }

  private finish(j: Job, state: TransferState, error: { code: string; message: string } | null): void {
    j.view.state = state;
    j.view.error = error;
    if (FINAL.includes(state)) j.view.finishedAt = Date.now();
  }

  private removeTemp(j: Job): void {
    if (j.view.kind === "download" && j.tempPath) {
      try {
        unlinkSync(j.tempPath);
      } catch {}
      j.tempPath = null;
    }
  }

  private start(j: Job): void {
    j.view.state = "running";
    j.view.startedAt ??= Date.now();
    j.stopAs = null;
    const abort = new AbortController();
    j.abort = abort;
    let conn: RemoteConnection;
    try {
      conn = this.conns.get(j.view.connectionId);
    } catch (e) {
      this.finish(j, "error", errorOf(e));
      return;
    }
    // a transfer stuck before its first byte (a server that accepts and never answers) may not watch the signal:
    // a work that has not stopped STUCK_GRACE_MS after the abort is left behind (it checks the signal after each
    // step before it touches a file), so cancel, pause and stop always answer; a work that stops in time has
    // cleaned up its temporary files first
    const aborted = new Promise<never>((_, reject) =>
      abort.signal.addEventListener("abort", () => setTimeout(() => reject(remoteError("cancelled", "transfer cancelled")), STUCK_GRACE_MS), { once: true }),
    );
    const work = Promise.race([j.view.kind === "download" ? this.download(j, conn, abort.signal) : this.upload(j, conn, abort.signal), aborted]);
    j.settled = work.then(
      () => this.finish(j, "done", null),
      (e) => {
        if (j.stopAs === "paused") {
          j.view.state = "paused";
          return;
        }
        this.removeTemp(j);
        if (j.stopAs === "cancelled") this.finish(j, "cancelled", null);
        else this.finish(j, "error", errorOf(e));
      },
    ).finally(() => {
      j.abort = null;
      this.schedule(j.view.connectionId);
    });
  }

  private async download(j: Job, conn: RemoteConnection, signal: AbortSignal): Promise<void> {
    const remote = await conn.resolve(j.view.remotePath);
    checkAborted(signal);
    j.view.remotePath = remote;
    const st = await conn.run((b) => b.stat(remote));
    checkAborted(signal);
    if (!st) throw remoteError("notFound", `download: ${remote} does not exist`);
    if (st.isDir) throw remoteError("protocol", `download: ${remote} is a folder`);
    j.view.totalBytes = st.size;
    // resume from the bytes a paused download already has
    j.tempPath ??= join(dirname(j.view.localPath), `.${basename(j.view.localPath)}.${j.view.transferId}.part`);
    let offset = 0;
    try {
      offset = statSync(j.tempPath).size;
    } catch {}
    if (offset > st.size) offset = 0;
    j.view.bytesDone = offset;
    const source = await conn.run((b) => b.read(remote, offset, signal));
    await writeToFile(j, source, j.tempPath, offset, signal);
    if (signal.aborted) throw remoteError("cancelled", "transfer cancelled");
    if (j.view.bytesDone !== st.size) throw remoteError("io", `download ${remote}: got ${j.view.bytesDone} bytes, the server listed ${st.size} (the file changed during the transfer?)`);
    renameSync(j.tempPath, j.view.localPath);
    j.tempPath = null;
  }

  private async upload(j: Job, conn: RemoteConnection, signal: AbortSignal): Promise<void> {
    const remote = await conn.resolve(j.view.remotePath);
    checkAborted(signal);
    j.view.remotePath = remote;
    const size = statSync(j.view.localPath).size;
    j.view.totalBytes = size;
    j.view.bytesDone = 0; // uploads restart from the beginning after a pause
    // read once the connection is open: the backend's module is loaded by its first connect (backends/index.ts)
    const atomicWrite = await conn.run(async (b) => b.atomicWrite);
    const target = atomicWrite ? posix.join(posix.dirname(remote), `.${posix.basename(remote)}.${j.view.transferId}.part`) : remote;
    const source = createReadStream(j.view.localPath, { highWaterMark: 256 * 1024 });
    const counter = byteCounter(j);
    source.on("error", (e) => counter.destroy(e));
    source.pipe(counter);
    const stopReading = () => {
      source.destroy();
      counter.destroy();
    };
    try {
      await conn.run((b) => b.write(target, counter as Readable, size, signal), false);
      if (signal.aborted) throw remoteError("cancelled", "transfer cancelled");
      if (j.view.bytesDone !== size) throw remoteError("io", `upload ${remote}: read ${j.view.bytesDone} bytes of the local file, ${size} expected (it changed during the transfer?)`);
      if (target !== remote) await conn.run((b) => b.replace(target, remote));
    } catch (e) {
      stopReading();
      if (target !== remote) await conn.run((b) => b.remove(target, false)).catch(() => {});
      throw signal.aborted ? remoteError("cancelled", "transfer cancelled") : e;
    }
    stopReading();
  }
}
