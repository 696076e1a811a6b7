/**
 * One QuickJS runtime and context, reused for every run a worker does (a fresh context costs ~1.6 ms; a call on a
 * reused one a few µs). Loaded once: chai, then the prelude (sandbox/), which answers the entry points driven here.
 *
 * A run:
 *   1. compile: the script becomes `(async function (pm) {<script>\n})`, compiled once per distinct source and kept
 *      (top-level declarations stay local to each run; `await` works at top level); a script without the word
 *      `await` becomes a plain `(function (pm) {...})`, which behaves the same without an async function's promise;
 *   2. start(fn, inputJson): the script's synchronous part runs;
 *   3. loop: run QuickJS's pending jobs (promise reactions; skipped when there are none), then tick(): it fires due
 *      timers, or answers how long to wait (next timer, or a pm.sendRequest answer from the host), or — nothing
 *      left that could happen — the output JSON. A run that never waits is answered synchronously (no promise, no
 *      await: the common case); waiting is asynchronous, so pm.sendRequest answers arrive as worker messages
 *      meanwhile.
 *
 * Limits: memory is bounded by the WebAssembly memory's maximum (quickjs.ts) and QuickJS's own limit; the stack by
 * QuickJS's stack limit. The time limit is the host's: it
 * terminates the worker at the deadline. Bun's worker.terminate() only takes effect once the worker's thread runs
 * JavaScript rather than WebAssembly, so the worker also interrupts the script itself at the same deadline
 * (QuickJS's interrupt handler, checked every ~10k bytecodes): the thread then leaves QuickJS and ends within
 * milliseconds, instead of the ~0.2-1.8 s it takes while the script keeps QuickJS busy. (A single long builtin call,
 * such as a huge Array.fill, checks no interrupt: that worker ends when the call returns; the host does not wait.)
 * Any abnormal end (interrupt, out of memory escaping the script, a crash of the WebAssembly itself) answers
 * "failed" and the host replaces the worker: QuickJS's state is not trusted after it.
 */
import type { EitherFFI, EitherModule, JSContextPointer, JSValueConstPointer, JSValuePointer, QuickJSContext, QuickJSHandle, QuickJSRuntime, QuickJSWASMModule } from "quickjs-emscripten-core";
import type { FailureKind, RunMessage, SandboxOutput, WorkerToHost } from "./protocol.ts";
import { CHAI_SOURCE, PRELUDE_FILENAME, PRELUDE_SOURCE } from "./sandbox/index.ts";

/**
 * QuickJS's own stack limit. A Bun worker's native stack is small, and each QuickJS frame costs far more native
 * stack than QuickJS counts: measured here, 256 KiB lets plain recursion reach ~1,400 frames and always ends in
 * QuickJS's catchable "InternalError: stack overflow"; 384 KiB and more let some recursions (getters, JSON) exhaust
 * the native stack first, which kills the QuickJS instance.
 */
export const MAX_STACK_BYTES = 256 * 1024;
/** Distinct compiled scripts kept per worker (least recently used dropped first). */
const MAX_CACHED_SCRIPTS = 256;
/** The file name QuickJS gives user code in stacks and syntax errors; the prelude keeps only these frames. */
const SCRIPT_FILENAME = "script.js";

export type RunReply = { t: "done"; id: number; output: string } | Extract<WorkerToHost, { t: "failed" }>;

/** A compiled script, or the output of a script that does not compile (cached too: a bad script stays bad). */
type Compiled = { fn: QuickJSHandle } | { output: string };

interface ActiveRun {
  msg: RunMessage;
  post: (m: WorkerToHost) => void;
  /** pm.sendRequest calls not answered yet (null until the first). */
  pendingOps: Set<number> | null;
  replies: { op: number; result: string }[];
  wake: (() => void) | null;
}

interface DumpedError {
  name: string;
  message: string;
  stack: string | null;
}

/** A run that cannot end normally; the worker reports it as "failed". */
class RunAbort extends Error {
  constructor(
    readonly kind: FailureKind,
    message: string,
  ) {
    super(message);
  }
}

const mb = (bytes: number) => Math.round(bytes / (1024 * 1024));

/** Strings up to this many UTF-8 bytes go through DirectCalls' buffer; longer ones through quickjs-emscripten's own path. */
const DIRECT_STRING_BYTES = 64 * 1024;

/**
 * The two calls every run makes (start(fn, input) and tick()), straight through QuickJS's C API (the FFI functions
 * quickjs-emscripten itself calls) rather than its handle wrappers: those allocate a Lifetime per value, a
 * malloc'd argument array per call and encode strings one character at a time in JavaScript. Measured on a 400-byte
 * input, call and string result: 2.9 -> 1.5 µs on a warm thread, 9.2 -> 2.8 µs when the thread has just woken up
 * (its caches cold), which is how a worker serves a request arriving alone. Reaches into quickjs-emscripten's
 * protected fields (ffi, module, ctx, memory: version 0.32, package.json pins it); anything unexpected (an error
 * result) is handed back as an ordinary handle, so error handling stays the wrapper's.
 */
class DirectCalls {
  private readonly ffi: EitherFFI;
  private readonly mod: EitherModule;
  private readonly ctxPtr: JSContextPointer;
  private readonly memory: { heapValueHandle(ptr: JSValuePointer): QuickJSHandle };
  private readonly undefinedPtr: JSValueConstPointer;
  /** Two JSValue pointers (the arguments of a call) and a NUL-terminated string buffer, both in the wasm heap. */
  private readonly argv: number;
  private readonly strBuf: number;
  private argvView: Int32Array | null = null;
  private readonly enc = new TextEncoder();
  private readonly dec = new TextDecoder();

  constructor(private readonly ctx: QuickJSContext) {
    const raw = ctx as unknown as { ffi: EitherFFI; module: EitherModule; ctx: { value: JSContextPointer }; memory: DirectCalls["memory"] };
    if (!raw.ffi || !raw.module || !raw.ctx || !raw.memory) throw new Error("quickjs-emscripten internals changed: DirectCalls needs ffi, module, ctx and memory");
    this.ffi = raw.ffi;
    this.mod = raw.module;
    this.ctxPtr = raw.ctx.value;
    this.memory = raw.memory;
    this.undefinedPtr = this.ffi.QTS_GetUndefined();
    this.argv = this.mod._malloc(8);
    this.strBuf = this.mod._malloc(DIRECT_STRING_BYTES + 1);
    if (!this.argv || !this.strBuf) throw new Error("DirectCalls: no memory for its buffers");
  }

  /** A QuickJS string, or 0 when the text is too long for the buffer (the caller uses ctx.newString then). */
  private newString(text: string): JSValuePointer | 0 {
    if (text.length * 3 > DIRECT_STRING_BYTES) {
      const bytes = Buffer.byteLength(text, "utf8");
      if (bytes > DIRECT_STRING_BYTES) return 0;
    }
    const heap = this.mod.HEAPU8;
    const n = this.enc.encodeInto(text, heap.subarray(this.strBuf, this.strBuf + DIRECT_STRING_BYTES)).written;
    heap[this.strBuf + n] = 0;
    return this.ffi.QTS_NewString(this.ctxPtr, this.strBuf as never);
  }

  /**
   * fn(a, text): the result as text (the function must answer a string) or, when it threw, the error as a handle
   * (the caller disposes it).
   */
  callWithText(fn: QuickJSHandle, a: QuickJSHandle, text: string, wantText: boolean): string | { error: QuickJSHandle } {
    let owned: QuickJSHandle | null = null;
    let strPtr = this.newString(text);
    if (strPtr === 0) {
      owned = this.ctx.newString(text);
      strPtr = owned.value as unknown as JSValuePointer;
    }
    try {
      const heap = this.mod.HEAPU8; // (the module does not export HEAP32; HEAPU8 is replaced when memory grows)
      if (this.argvView === null || this.argvView.buffer !== heap.buffer) this.argvView = new Int32Array(heap.buffer, this.argv, 2);
      this.argvView[0] = a.value as unknown as number;
      this.argvView[1] = strPtr as unknown as number;
      return this.finish(this.ffi.QTS_Call(this.ctxPtr, fn.value, this.undefinedPtr, 2, this.argv as never), wantText);
    } finally {
      if (owned) owned.dispose();
      else this.ffi.QTS_FreeValuePointer(this.ctxPtr, strPtr);
    }
  }

  /** fn(): its result as text, or the error as a handle. */
  call0(fn: QuickJSHandle): string | { error: QuickJSHandle } {
    return this.finish(this.ffi.QTS_Call(this.ctxPtr, fn.value, this.undefinedPtr, 0, 0 as never), true);
  }

  /** The result's text ("" when !wantText), or the exception it is. */
  private finish(result: JSValuePointer, wantText: boolean): string | { error: QuickJSHandle } {
    const errPtr = this.ffi.QTS_ResolveException(this.ctxPtr, result);
    if (errPtr) {
      this.ffi.QTS_FreeValuePointer(this.ctxPtr, result);
      return { error: this.memory.heapValueHandle(errPtr) };
    }
    if (!wantText) {
      this.ffi.QTS_FreeValuePointer(this.ctxPtr, result);
      return "";
    }
    try {
      // the prelude's entry points answer strings: nothing to convert, so this cannot fail (NULL is checked anyway)
      const cstr = this.ffi.QTS_GetString(this.ctxPtr, result) as unknown as number;
      if (!cstr) throw new RunAbort("crash", "Sandbox failure: an entry point answered a value that is not text");
      const heap = this.mod.HEAPU8;
      const end = heap.indexOf(0, cstr);
      const text = this.dec.decode(heap.subarray(cstr, end < 0 ? heap.length : end));
      this.ffi.QTS_FreeCString(this.ctxPtr, cstr as never);
      return text;
    } finally {
      this.ffi.QTS_FreeValuePointer(this.ctxPtr, result);
    }
  }
}

export class SandboxRunner {
  private readonly rt: QuickJSRuntime;
  private readonly ctx: QuickJSContext;
  private readonly startFn: QuickJSHandle;
  private readonly tickFn: QuickJSHandle;
  private readonly deliverFn: QuickJSHandle;
  private readonly direct: DirectCalls;
  private readonly cache = new Map<string, Compiled>();
  private deadline = Infinity;
  private active: ActiveRun | null = null;
  private opSeq = 0;

  /**
   * memoryBytes: QuickJS's own limit (it only stops single allocations larger than it; the WebAssembly memory's
   * maximum, quickjs.ts, is what bounds the total).
   */
  constructor(module: QuickJSWASMModule, memoryBytes: number) {
    this.rt = module.newRuntime();
    this.rt.setMemoryLimit(memoryBytes);
    this.rt.setMaxStackSize(MAX_STACK_BYTES);
    this.rt.setInterruptHandler(() => Date.now() > this.deadline);
    this.ctx = this.rt.newContext();
    const ctx = this.ctx;

    this.evalOrThrow(CHAI_SOURCE, "chai.js").dispose();
    const factory = this.evalOrThrow(PRELUDE_SOURCE, PRELUDE_FILENAME);
    const host = ctx.newObject();
    const send = ctx.newFunction("send", (request) => this.hostSend(ctx.getString(request)));
    const body = ctx.newFunction("body", (which) => ctx.newString(this.hostBody(ctx.getString(which))));
    ctx.setProp(host, "send", send);
    ctx.setProp(host, "body", body);
    const chai = ctx.getProp(ctx.global, "chai");
    const internals = this.callOrThrow(factory, [chai, host]);
    this.startFn = ctx.getProp(internals, "start");
    this.tickFn = ctx.getProp(internals, "tick");
    this.deliverFn = ctx.getProp(internals, "deliver");
    for (const h of [factory, host, send, body, chai, internals]) h.dispose();
    this.direct = new DirectCalls(ctx);
  }

  /**
   * Runs one script to its end. Never throws: every problem is in the reply. A script that ends without waiting
   * (no timer, no pm.sendRequest: the common case) is answered synchronously, without a promise; one that waits
   * answers a promise.
   */
  run(msg: RunMessage, post: (m: WorkerToHost) => void): RunReply | Promise<RunReply> {
    const run: ActiveRun = { msg, post, pendingOps: null, replies: [], wake: null };
    this.active = run;
    this.deadline = Date.now() + msg.timeoutMs;
    let waiting = false;
    try {
      const compiled = this.compile(msg.script, run);
      if ("output" in compiled) return { t: "done", id: msg.id, output: compiled.output };
      this.checked(this.direct.callWithText(this.startFn, compiled.fn, msg.input, false), run);
      const next = this.advance(run);
      if (typeof next === "string") return { t: "done", id: msg.id, output: next };
      waiting = true;
      return this.runWaiting(run, next);
    } catch (e) {
      return failedReply(msg, e);
    } finally {
      if (!waiting) this.end();
    }
  }

  /** The rest of a run that waits for timers or pm.sendRequest answers; delay: the first wait (advance()). */
  private async runWaiting(run: ActiveRun, delay: number): Promise<RunReply> {
    try {
      for (;;) {
        await this.wait(run, delay);
        for (const reply of run.replies.splice(0)) {
          run.pendingOps?.delete(reply.op);
          const op = this.ctx.newNumber(reply.op);
          const result = this.ctx.newString(reply.result);
          try {
            this.call(this.deliverFn, [op, result], run).dispose();
          } finally {
            op.dispose();
            result.dispose();
          }
        }
        const next = this.advance(run);
        if (typeof next === "string") return { t: "done", id: run.msg.id, output: next };
        delay = next;
      }
    } catch (e) {
      return failedReply(run.msg, e);
    } finally {
      this.end();
    }
  }

  /**
   * Runs the pending jobs, then tick(), until the run is over (its output JSON) or must wait (the delay in ms to
   * the next timer, -1: only pm.sendRequest answers).
   */
  private advance(run: ActiveRun): string | number {
    for (;;) {
      this.runJobs(run);
      // tick() answers text either way (no typeof round trip): the output is a JSON object, a delay a number
      const text = this.checked(this.direct.call0(this.tickFn), run);
      if (text.charCodeAt(0) === 123 /* { */) return text;
      const delay = Number(text);
      if (Number.isNaN(delay)) throw new RunAbort("crash", "Sandbox failure: tick() answered neither an output nor a delay");
      if (delay !== -2) return delay; // -2: timers fired, their jobs first
    }
  }

  private end(): void {
    this.active = null;
    this.deadline = Infinity;
  }

  /** A pm.sendRequest answer from the host (ignored unless the run that asked is still running). */
  deliver(id: number, op: number, result: string): void {
    const run = this.active;
    if (!run || run.msg.id !== id || !run.pendingOps?.has(op)) return;
    run.replies.push({ op, result });
    run.wake?.();
  }

  private hostSend(request: string): QuickJSHandle {
    const run = this.active;
    if (!run) return this.ctx.newNumber(-1);
    const op = ++this.opSeq;
    (run.pendingOps ??= new Set()).add(op);
    run.post({ t: "send", id: run.msg.id, op, request });
    return this.ctx.newNumber(op);
  }

  private hostBody(which: string): string {
    const run = this.active;
    if (!run) return "";
    return which === "response" ? (run.msg.responseBody ?? "") : run.msg.requestBody;
  }

  /** Until a pm.sendRequest answer arrives, or ms passed (ms < 0: no timer). */
  private wait(run: ActiveRun, ms: number): Promise<void> {
    if (run.replies.length) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = ms >= 0 ? setTimeout(done, ms) : null;
      function done() {
        if (timer) clearTimeout(timer);
        run.wake = null;
        resolve();
      }
      run.wake = done;
    });
  }

  private compile(source: string, run: ActiveRun): Compiled {
    const hit = this.cache.get(source);
    if (hit) {
      this.cache.delete(source); // most recently used last
      this.cache.set(source, hit);
      return hit;
    }
    // Without `await` (not even in a comment or a string) a plain function does the same, without the async
    // function's promise and the job that settles it.
    const r = this.ctx.evalCode(`(${/\bawait\b/.test(source) ? "async " : ""}function (pm) {${source}\n})`, SCRIPT_FILENAME);
    let entry: Compiled;
    if (r.error) {
      const err = this.dump(r.error);
      r.error.dispose();
      this.checkAbort(err, run);
      entry = { output: compileFailure(err) };
    } else if (this.ctx.typeof(r.value) !== "function") {
      r.value.dispose();
      entry = { output: compileFailure({ name: "SyntaxError", message: "unbalanced braces: the script closes the function it runs in", stack: null }) };
    } else entry = { fn: r.value };
    this.cache.set(source, entry);
    if (this.cache.size > MAX_CACHED_SCRIPTS) {
      const [oldest, dropped] = this.cache.entries().next().value as [string, Compiled];
      this.cache.delete(oldest);
      if ("fn" in dropped) dropped.fn.dispose();
    }
    return entry;
  }

  private runJobs(run: ActiveRun): void {
    if (!this.rt.hasPendingJob()) return;
    const r = this.rt.executePendingJobs();
    if (r.error) {
      const err = this.dump(r.error);
      r.error.dispose();
      this.checkAbort(err, run);
      // Promise jobs catch what they throw; anything else escaping one is a failure of the sandbox itself.
      throw new RunAbort("crash", `Sandbox failure: ${err.name}: ${err.message}`);
    }
  }

  /** A DirectCalls result: its text, or the run ends as call() ends it. */
  private checked(r: string | { error: QuickJSHandle }, run: ActiveRun): string {
    if (typeof r === "string") return r;
    const err = this.dump(r.error);
    r.error.dispose();
    this.checkAbort(err, run);
    throw new RunAbort("crash", `Sandbox failure: ${err.name}: ${err.message}`);
  }

  /** Calls into the prelude; an exception escaping it ends the run (the prelude itself catches script errors). */
  private call(fn: QuickJSHandle, args: QuickJSHandle[], run: ActiveRun): QuickJSHandle {
    const r = this.ctx.callFunction(fn, this.ctx.undefined, ...args);
    if (!r.error) return r.value;
    const err = this.dump(r.error);
    r.error.dispose();
    this.checkAbort(err, run);
    throw new RunAbort("crash", `Sandbox failure: ${err.name}: ${err.message}`);
  }

  /** Throws the RunAbort for QuickJS's interrupt and out-of-memory errors. */
  private checkAbort(err: DumpedError, run: ActiveRun): void {
    if (err.name === "InternalError" && err.message === "interrupted") {
      throw new RunAbort("timeout", `Script timed out after ${run.msg.timeoutMs} ms`);
    }
    if (err.name === "InternalError" && err.message === "out of memory") {
      throw new RunAbort("oom", `Script ran out of memory (limit ${mb(run.msg.memoryBytes)} MB)`);
    }
  }

  private dump(handle: QuickJSHandle): DumpedError {
    try {
      const d = this.ctx.dump(handle) as unknown;
      if (d !== null && typeof d === "object") {
        const o = d as Record<string, unknown>;
        return { name: String(o.name ?? "Error"), message: String(o.message ?? ""), stack: typeof o.stack === "string" ? o.stack : null };
      }
      return { name: "Error", message: String(d), stack: null };
    } catch {
      return { name: "InternalError", message: "out of memory", stack: null };
    }
  }

  private evalOrThrow(code: string, filename: string): QuickJSHandle {
    const r = this.ctx.evalCode(code, filename);
    if (!r.error) return r.value;
    const err = this.dump(r.error);
    r.error.dispose();
    throw new Error(`loading ${filename} into QuickJS failed: ${err.name}: ${err.message}`);
  }

  private callOrThrow(fn: QuickJSHandle, args: QuickJSHandle[]): QuickJSHandle {
    const r = this.ctx.callFunction(fn, this.ctx.undefined, ...args);
    if (!r.error) return r.value;
    const err = this.dump(r.error);
    r.error.dispose();
    throw new Error(`starting the sandbox prelude failed: ${err.name}: ${err.message}\n${err.stack ?? ""}`);
  }
}

function failedReply(msg: RunMessage, e: unknown): RunReply {
  const abort = e instanceof RunAbort ? e : hostFailure(e);
  return { t: "failed", id: msg.id, kind: abort.kind, message: abort.message };
}

/** The output of a script that does not compile: one error, with its line. */
function compileFailure(err: DumpedError): string {
  const m = err.stack ? /script\.js:(\d+)/.exec(err.stack) : null;
  const line = m ? Number(m[1]) : null;
  const message = `${err.name}: ${err.message}${line !== null ? ` (line ${line})` : ""}`;
  const out: SandboxOutput = { console: [], tests: [], errors: [[message, null, line]] };
  return JSON.stringify(out);
}

/** An exception thrown by quickjs-emscripten itself (not by QuickJS code): the WebAssembly instance is broken. */
function hostFailure(e: unknown): RunAbort {
  const text = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  if (/call stack/i.test(text)) {
    return new RunAbort("crash", "Script exceeded the sandbox's native stack (recursion or nesting too deep); the sandbox was restarted");
  }
  return new RunAbort("crash", `Sandbox crashed (${text}); the sandbox was restarted`);
}
