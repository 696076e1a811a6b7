/**
 * ScriptEngine: runs Postman-style scripts in QuickJS, in a small pool of Bun Workers (script-worker.ts), so a
 * script never blocks the proxy's event loop. A service: it knows nothing of HTTP routes or of the proxy.
 *
 * - Workers start on the first run (or start()), each with its own QuickJS runtime and context, reused run after
 *   run. A run is posted at once to a ready worker (up to PIPELINE each; beyond, it waits in a FIFO queue here); a
 *   worker does its runs one after another. Keeping runs in flight matters: a message to an idle worker costs
 *   ~20-40 µs of thread wake-up each way on our machines (and ~20 µs of the worker's CPU), while messages to a busy
 *   one cost ~1-3 µs, so under load the pool never sleeps between runs. For the same reason quick scripts are kept
 *   on the first worker whose line of them should clear within LINE_MS (leastLoaded()), rather than waking an idle
 *   worker; other runs go to the worker with the fewest runs in flight.
 * - Memory limit: a worker's WebAssembly memory is built with a maximum (quickjs.ts), so each worker serves one
 *   memory limit. A run asking for another limit than the engine's restarts an idle worker with it (keep the
 *   limit constant: that restart costs ~150-400 ms of CPU). A run that ran out of memory has its worker replaced
 *   (WebAssembly memory never shrinks).
 * - Time limit: the host's timer (one per worker, armTimer()), firing by the deadline of the run at the head of a
 *   worker's line (the one it is doing: it started when the previous one answered, or when it was posted to an idle
 *   worker). When a run passes its deadline its
 *   worker is terminated (a hard stop: QuickJS's own interrupt is not one, builtins can run for seconds between
 *   checks), the run ends with "Script timed out after N ms", the runs waiting behind it in that worker go back to
 *   the front of the queue (they had not started), and a new worker is started.
 * - run() never rejects: a throw, a syntax error, a timeout, running out of memory, a crash of the sandbox, even a
 *   closed engine, all come back as entries in output.errors (then with the input unchanged when nothing of the
 *   script's effects can be trusted: timeout, out of memory, crash).
 * - pm.sendRequest: the worker asks, the host calls RunOptions.sendRequest and answers.
 */
import { failureOutput, invalidInputOutput, mergeChanges, parseOutput, type PreparedRun, prepareRun, readChanges, UNREADABLE_OUTPUT } from "./output.ts";
import { type HostToWorker, type RunBatchWire, type RunWire, type SendResult, type WorkerToHost } from "./protocol.ts";
import type { RunOptions, ScriptInput, ScriptOutput, ScriptRequest, ScriptResponse } from "./types.ts";

const WORKER_URL = new URL("./script-worker.ts", import.meta.url);

export interface ScriptEngineOptions {
  /** Workers in the pool. Default 2. */
  workers?: number;
  /** Default time limit of a run. Default 1000 ms. */
  timeoutMs?: number;
  /** Default memory limit of a run: about what the script's heap may take (quickjs.ts). Default 64 MiB. */
  memoryBytes?: number;
}

export const DEFAULT_TIMEOUT_MS = 1000;
export const DEFAULT_MEMORY_BYTES = 64 * 1024 * 1024;
const DEFAULT_WORKERS = 2;
/** A run's memory limit is at least this (below it, the sandbox itself would not fit)... */
const MIN_MEMORY_BYTES = 8 * 1024 * 1024;
/** ...and at most this (WebAssembly's 2 GiB, less the worker's own part: quickjs.ts). */
const MAX_MEMORY_BYTES = 2040 * 1024 * 1024;
/** After this many workers in a row failed to start, queued runs end with the reason instead of waiting. */
const MAX_INIT_FAILURES = 3;
/** Runs posted to one worker and not yet answered, at most. */
const PIPELINE = 16;
/** A script whose last run took less than this (ms, posting to answer) is quick: see leastLoaded(). */
const QUICK_MS = 0.5;
/** A run goes behind a busy worker's line only if that line's runs should all be done within this (ms). */
const LINE_MS = 1;
/** Scripts whose last run time is kept (all forgotten when full). */
const MAX_TIMED_SCRIPTS = 256;

/**
 * How a run ends: the sandbox's answer as an object (parseOutput(): read it with readChanges()), or, when the run did
 * not end normally, null and the failure's message (the script's effects are then not to be trusted); ms: from the
 * run's start to its end.
 */
export type RunEnd = (output: Record<string, unknown> | null, failure: string | null, ms: number) => void;

/**
 * A run whose input its caller built itself (output.ts inputText(): the proxy's script addon keeps the parts that
 * rarely change as text between runs), and is answerable for: it goes to the worker as it is.
 */
export interface RawRun {
  script: string;
  /** The sandbox's input text (inputText()); its head's memoryBytes should be memoryLimitFor(opts.memoryBytes). */
  input: string;
  requestBody: string;
  responseBody: string | null;
}

interface Job {
  id: number;
  script: string;
  input: string;
  requestBody: string;
  responseBody: string | null;
  timeoutMs: number;
  memoryBytes: number;
  sendRequest: RunOptions["sendRequest"];
  end: RunEnd;
  started: number;
  /** started + timeoutMs (performance.now() time), once started. */
  deadline: number;
}

interface Slot {
  worker: Worker;
  /** The memory limit this worker was built for (runs it takes have this one). */
  memoryBytes: number;
  ready: boolean;
  /** Runs posted to this worker, in order; the first is the one it is doing. */
  jobs: Job[];
  /** Runs dispatched in this turn of the event loop, posted together at its end (one wake-up of the worker). */
  outbox: RunWire[];
  /** Runs posted to the worker and not answered yet. */
  posted: number;
  /**
   * The time-limit timer (see armTimer()): it fires at timerAt, no later than the head run's deadline. Unref'd: the
   * workers themselves keep the process alive while they have runs (updateRefs()).
   */
  timer: ReturnType<typeof setTimeout> | null;
  timerAt: number;
}

const elapsed = (since: number) => performance.now() - since;

export class ScriptEngine {
  private readonly size: number;
  private readonly timeoutMs: number;
  private readonly memoryBytes: number;
  private readonly slots: Slot[] = [];
  private readonly queue: Job[] = [];
  private nextId = 1;
  private closed = false;
  private referenced = false;
  private initFailures = 0;
  private readyWaiters: (() => void)[] = [];
  /** How long each script's last run took (ms), for leastLoaded(). */
  private readonly lastRunMs = new Map<string, number>();

  constructor(opts: ScriptEngineOptions = {}) {
    this.size = Math.max(1, Math.floor(opts.workers ?? DEFAULT_WORKERS));
    this.timeoutMs = positive(opts.timeoutMs, DEFAULT_TIMEOUT_MS);
    this.memoryBytes = memoryLimit(opts.memoryBytes, DEFAULT_MEMORY_BYTES);
  }

  /** Starts the workers now rather than on the first run; resolves when they are ready (or failed to start). */
  start(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.fillPool();
    if (this.slots.every((s) => s.ready)) return Promise.resolve();
    return new Promise((resolve) => {
      this.readyWaiters.push(resolve);
      this.updateRefs();
    });
  }

  run(input: ScriptInput, opts: RunOptions = {}): Promise<ScriptOutput> {
    const memoryBytes = memoryLimit(opts.memoryBytes, this.memoryBytes);
    let prepared: PreparedRun | { error: string };
    try {
      prepared = prepareRun(input, memoryBytes);
    } catch (e) {
      prepared = { error: e instanceof Error ? e.message : String(e) };
    }
    if ("error" in prepared) return Promise.resolve(invalidInputOutput(input, prepared.error));
    if (this.closed) return Promise.resolve(failureOutput(prepared, "Script engine is closed", 0));
    const p = prepared;
    return new Promise((resolve) => {
      this.enqueue(p.script, p.inputJson, p.request.body, p.response ? p.response.body : null, opts, memoryBytes, (out, failure, ms) =>
        resolve(out !== null ? mergeChanges(p, readChanges(out), ms) : failureOutput(p, failure ?? "Script failed", ms)),
      );
    });
  }

  /**
   * run() for a caller that builds the sandbox's input itself and wants only what the script changed (RawRun,
   * RunEnd): no promise, no copy of the input, no merged output. end is called once, never synchronously.
   */
  runRaw(run: RawRun, opts: RunOptions, end: RunEnd): void {
    if (this.closed) {
      queueMicrotask(() => end(null, "Script engine is closed", 0));
      return;
    }
    this.enqueue(run.script, run.input, run.requestBody, run.responseBody, opts, memoryLimit(opts.memoryBytes, this.memoryBytes), end);
  }

  /** The memory limit a run asking for this one gets (the engine's default when undefined; clamped to what fits). */
  memoryLimitFor(memoryBytes: number | undefined): number {
    return memoryLimit(memoryBytes, this.memoryBytes);
  }

  private enqueue(script: string, input: string, requestBody: string, responseBody: string | null, opts: RunOptions, memoryBytes: number, end: RunEnd): void {
    this.queue.push({
      id: this.nextId++,
      script,
      input,
      requestBody,
      responseBody,
      timeoutMs: positive(opts.timeoutMs, this.timeoutMs),
      memoryBytes,
      sendRequest: opts.sendRequest,
      end,
      started: 0,
      deadline: 0,
    });
    this.fillPool();
    this.pump();
  }

  /** Terminates the workers; runs still queued or running end with "Script engine is closed". */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const closing: Promise<void>[] = [];
    for (const slot of this.slots.splice(0)) {
      this.disarm(slot);
      for (const job of slot.jobs.splice(0)) job.end(null, "Script engine is closed", job.started ? elapsed(job.started) : 0);
      closing.push(terminated(slot.worker));
    }
    for (const job of this.queue.splice(0)) job.end(null, "Script engine is closed", 0);
    for (const w of this.readyWaiters.splice(0)) w();
    await Promise.all(closing);
  }

  // ---- pool ----

  /** Starts workers up to the pool size, built for the memory limit the next queued run needs. */
  private fillPool(): void {
    while (!this.closed && this.slots.length < this.size) this.spawn(this.queue[0]?.memoryBytes ?? this.memoryBytes);
  }

  private spawn(memoryBytes: number): void {
    const worker = new Worker(WORKER_URL);
    const slot: Slot = { worker, memoryBytes, ready: false, jobs: [], outbox: [], posted: 0, timer: null, timerAt: 0 };
    this.slots.push(slot);
    if (this.referenced) worker.ref();
    else worker.unref();
    worker.onmessage = (ev: MessageEvent<WorkerToHost>) => this.onMessage(slot, ev.data);
    worker.addEventListener("error", (ev: Event) => {
      const message = (ev as ErrorEvent).message || "unknown error";
      this.onWorkerLost(slot, `Script worker crashed (${message})`);
    });
    worker.addEventListener("close", () => this.onWorkerLost(slot, "Script worker exited"));
    const init: HostToWorker = { t: "init", memoryBytes };
    worker.postMessage(init);
  }

  /** Ends a worker (terminate) and, unless the engine is closed, starts another in its place. */
  private replace(slot: Slot): void {
    if (!this.remove(slot)) return;
    this.fillPool();
  }

  private remove(slot: Slot): boolean {
    const i = this.slots.indexOf(slot);
    if (i < 0) return false;
    this.slots.splice(i, 1);
    this.disarm(slot);
    slot.worker.terminate();
    return true;
  }

  private onWorkerLost(slot: Slot, message: string): void {
    if (!this.slots.includes(slot)) return; // replaced or closed already
    if (!slot.ready) {
      this.onInitFailed(slot, message);
      return;
    }
    const job = slot.jobs.shift();
    if (job) job.end(null, message, elapsed(job.started));
    this.requeue(slot);
    this.replace(slot);
    this.pump();
  }

  /**
   * A worker that could not start is not replaced at once (that could loop): the pool refills on the next run.
   * When no worker is left, or several failed in a row, the queued runs end with the reason.
   */
  private onInitFailed(slot: Slot, message: string): void {
    this.remove(slot);
    this.initFailures++;
    if (this.slots.length === 0 || this.initFailures >= MAX_INIT_FAILURES) {
      for (const job of this.queue.splice(0)) job.end(null, `Script engine could not start: ${message}`, 0);
    }
    this.resolveReadyWaiters();
    this.pump();
  }

  /** start() callers are answered once every worker is ready (or gone). */
  private resolveReadyWaiters(): void {
    if (this.slots.every((s) => s.ready)) for (const w of this.readyWaiters.splice(0)) w();
  }

  /** The runs a lost or replaced worker had not started go back to the front of the queue, in order. */
  private requeue(slot: Slot): void {
    const waiting = slot.jobs.splice(0);
    for (const job of waiting) {
      job.started = 0;
      job.deadline = 0;
    }
    this.queue.unshift(...waiting);
  }

  /**
   * How long a worker's line should take to clear (ms, from the scripts' last run times), or Infinity when that is
   * not known to be short: a script not run here yet or not quick, or a head run going on for longer than its
   * whole line should take (it may be looping).
   */
  private lineMs(s: Slot, now: number): number {
    let total = 0;
    for (const job of s.jobs) {
      const ms = this.lastRunMs.get(job.script);
      if (ms === undefined || ms >= QUICK_MS) return Infinity;
      total += ms;
    }
    const head = s.jobs[0];
    if (head && head.started && now - head.started > LINE_MS) return Infinity;
    return total;
  }

  /**
   * The worker for the next run, quick scripts kept together: the first ready worker (for this limit) whose line of
   * quick runs should clear within LINE_MS takes it, even if another worker is idle. A busy worker is awake: a
   * message costs it ~1-3 µs and its caches are warm, where waking an idle worker costs both threads ~20-40 µs and
   * the run itself takes about twice as long on a thread that just woke up; so under load one worker does the runs
   * back to back while the other sleeps, and is there for a slow or looping script. Otherwise the ready worker with
   * the fewest runs in flight, if it can take one more (never behind a script that may be slow, as one never run
   * here before, while a worker is free).
   */
  private leastLoaded(memoryBytes: number): Slot | undefined {
    let best: Slot | undefined;
    let now = 0;
    for (const s of this.slots) {
      if (!s.ready || s.memoryBytes !== memoryBytes || s.jobs.length >= PIPELINE) continue;
      if (s.jobs.length > 0 && this.lineMs(s, (now ||= performance.now())) < LINE_MS) return s;
      if (!best || s.jobs.length < best.jobs.length) best = s;
    }
    return best;
  }

  /** Dispatches queued runs in order to the workers built for their memory limit. */
  private pump(): void {
    while (this.queue.length) {
      const job = this.queue[0] as Job;
      const slot = this.leastLoaded(job.memoryBytes);
      if (!slot) {
        // No worker for this limit can take it: if none is busy with it or starting with it, rebuild an idle one.
        const coming = this.slots.some((s) => s.memoryBytes === job.memoryBytes);
        const idle = this.slots.find((s) => s.ready && s.jobs.length === 0);
        if (!coming && idle) {
          this.remove(idle);
          this.spawn(job.memoryBytes);
        }
        break;
      }
      this.queue.shift();
      this.dispatch(slot, job);
    }
    this.updateRefs();
  }

  /** Workers keep the process alive only while there is work or a start() waits (idle ones are unref'd). */
  private updateRefs(): void {
    const busy = this.queue.length > 0 || this.readyWaiters.length > 0 || this.slots.some((s) => s.jobs.length > 0);
    if (busy === this.referenced) return;
    this.referenced = busy;
    for (const s of this.slots) {
      if (busy) s.worker.ref();
      else s.worker.unref();
    }
  }

  private dispatch(slot: Slot, job: Job): void {
    slot.jobs.push(job);
    if (slot.jobs.length === 1) this.startClock(slot);
    const msg: RunWire = ["run", job.id, job.script, job.input, job.requestBody, job.responseBody, job.timeoutMs, job.memoryBytes];
    // A worker with runs posted is awake and will answer: what comes meanwhile goes with its next answer (one
    // message for all, instead of one per run: a message costs the proxy's thread ~2-10 µs, most of it waking the
    // worker). A worker with nothing posted gets the run at the end of this turn of the event loop.
    if (slot.outbox.push(msg) === 1 && slot.posted === 0) queueMicrotask(() => this.flush(slot));
  }

  /** Posts what was dispatched to this worker in this turn: one message, so the worker wakes once. */
  private flush(slot: Slot): void {
    const out = slot.outbox;
    if (out.length === 0) return;
    slot.outbox = [];
    if (!this.slots.includes(slot)) return; // replaced meanwhile: its runs went back to the queue
    slot.posted += out.length;
    slot.worker.postMessage(out.length === 1 ? out[0] : (["batch", out] satisfies RunBatchWire));
  }

  /** The head run of a worker's line has begun: its time limit runs from now. */
  private startClock(slot: Slot): void {
    const job = slot.jobs[0];
    if (!job) return;
    job.started = performance.now();
    job.deadline = job.started + job.timeoutMs;
    this.armTimer(slot, job.deadline);
  }

  /**
   * One timer per worker, not one per run (a setTimeout and clearTimeout per run cost the main thread more than the
   * rest of the run's bookkeeping): it stays armed while runs come and go, as long as it fires no later than the head
   * run's deadline; when it fires before that deadline it is armed again for it (onTimer()).
   */
  private armTimer(slot: Slot, at: number): void {
    if (slot.timer && slot.timerAt <= at) return;
    if (slot.timer) clearTimeout(slot.timer);
    slot.timerAt = at;
    slot.timer = setTimeout(() => this.onTimer(slot), Math.max(0, at - performance.now()));
    slot.timer.unref?.();
  }

  private disarm(slot: Slot): void {
    if (slot.timer) clearTimeout(slot.timer);
    slot.timer = null;
  }

  // ---- worker messages ----

  private onMessage(slot: Slot, msg: WorkerToHost): void {
    if (Array.isArray(msg)) {
      if (msg[0] === "batch") for (const d of msg[1]) this.onEnd(slot, d[1], d[2], null);
      else this.onEnd(slot, msg[1], msg[2], null);
      this.flush(slot); // the runs that came while it was busy
      return;
    }
    switch (msg.t) {
      case "ready":
        slot.ready = true;
        this.initFailures = 0;
        this.resolveReadyWaiters();
        this.pump();
        return;
      case "initFailed":
        this.onInitFailed(slot, msg.message);
        return;
      case "failed":
        this.onEnd(slot, msg.id, null, msg.message);
        return;
      case "send": {
        const job = slot.jobs[0];
        if (job && job.id === msg.id) this.send(slot, job, msg.op, msg.request);
        return;
      }
    }
  }

  /** A run's end: its output (done), or the failure's message. */
  private onEnd(slot: Slot, id: number, output: string | null, failure: string | null): void {
    const job = slot.jobs[0];
    if (!job || job.id !== id) return;
    slot.jobs.shift();
    if (slot.posted > 0) slot.posted--;
    const ms = elapsed(job.started);
    if (this.lastRunMs.size >= MAX_TIMED_SCRIPTS) this.lastRunMs.clear();
    this.lastRunMs.set(job.script, ms);
    // an out-of-memory (even one the script caught) or an answer that cannot be read: replace the worker
    let recycle = true;
    if (output !== null) {
      const out = parseOutput(output);
      if (out !== null) recycle = out.oom === true;
      job.end(out, out === null ? UNREADABLE_OUTPUT : null, ms);
    } else job.end(null, failure ?? "Script failed", ms);
    // the worker stops after a failure or an out-of-memory (script-worker.ts): what it had not started goes back
    if (recycle) {
      this.requeue(slot);
      this.replace(slot);
    } else this.startClock(slot);
    this.pump();
  }

  private onTimer(slot: Slot): void {
    slot.timer = null;
    if (!this.slots.includes(slot)) return;
    const job = slot.jobs[0];
    if (!job || !job.started) return; // idle: armed again by the next run
    if (performance.now() < job.deadline) {
      this.armTimer(slot, job.deadline);
      return;
    }
    slot.jobs.shift();
    job.end(null, `Script timed out after ${job.timeoutMs} ms`, elapsed(job.started));
    this.requeue(slot);
    this.replace(slot);
    this.pump();
  }

  /** pm.sendRequest: performed by RunOptions.sendRequest; the answer goes back only if the run still runs there. */
  private send(slot: Slot, job: Job, op: number, requestJson: string): void {
    const started = performance.now();
    const reply = (result: SendResult) => {
      if (slot.jobs[0] !== job) return;
      const msg: HostToWorker = { t: "sent", id: job.id, op, result: JSON.stringify(result) };
      slot.worker.postMessage(msg);
    };
    const sender = job.sendRequest;
    if (!sender) {
      reply({ ok: false, error: "pm.sendRequest is not available here (this run was given no way to send requests)" });
      return;
    }
    let req: ScriptRequest;
    try {
      req = outgoingRequest(JSON.parse(requestJson));
    } catch (e) {
      reply({ ok: false, error: e instanceof Error ? e.message : String(e) });
      return;
    }
    Promise.resolve()
      .then(() => sender(req))
      .then(
        (res) => reply({ ok: true, response: incomingResponse(res, performance.now() - started) }),
        (e: unknown) => reply({ ok: false, error: e instanceof Error ? e.message : String(e) }),
      );
  }
}

function positive(v: number | undefined, fallback: number): number {
  return typeof v === "number" && Number.isFinite(v) && v > 0 ? v : fallback;
}

function memoryLimit(v: number | undefined, fallback: number): number {
  return Math.floor(Math.min(MAX_MEMORY_BYTES, Math.max(MIN_MEMORY_BYTES, positive(v, fallback))));
}

/** The sandbox's request, checked again here: only http(s) URLs leave. */
function outgoingRequest(v: unknown): ScriptRequest {
  const r = (v ?? {}) as Partial<ScriptRequest>;
  const url = String(r.url ?? "");
  if (!/^https?:\/\//i.test(url)) throw new Error(`pm.sendRequest: only http:// and https:// URLs can be sent (got '${url}')`);
  const headers = Array.isArray(r.headers) ? r.headers.filter((h) => Array.isArray(h) && h.length >= 2).map((h): [string, string] => [String(h[0]), String(h[1])]) : [];
  return { method: String(r.method ?? "GET"), url, headers, body: typeof r.body === "string" ? r.body : "" };
}

/** What RunOptions.sendRequest answered, as plain data for the sandbox (responseTime measured when missing). */
function incomingResponse(res: ScriptResponse, ms: number): ScriptResponse {
  const out: ScriptResponse = {
    status: Number(res?.status) || 0,
    headers: Array.isArray(res?.headers) ? res.headers.map((h): [string, string] => [String(h[0]), String(h[1])]) : [],
    body: typeof res?.body === "string" ? res.body : "",
    responseTime: typeof res?.responseTime === "number" ? res.responseTime : Math.round(ms),
  };
  if (typeof res?.statusText === "string") out.statusText = res.statusText;
  return out;
}

/** Resolves when the terminated worker's thread has ended (at most 2 s: close() does not hang on a stuck one). */
function terminated(worker: Worker): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, 2000);
    timer.unref?.();
    worker.addEventListener("close", () => {
      clearTimeout(timer);
      resolve();
    });
    worker.terminate();
  });
}
