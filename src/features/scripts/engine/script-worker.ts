/**
 * A script worker: one QuickJS runtime (runner.ts) doing its runs one at a time, in order, for ScriptEngine (engine.ts), which
 * starts it with new Worker(new URL("./script-worker.ts", import.meta.url)). Built as an extra entrypoint of the
 * compiled binary (build.ts), hence a file name unique in the project.
 *
 * The host's first message, "init", gives the memory limit; the worker answers "ready" once QuickJS, chai and the
 * prelude are loaded (or "initFailed"); then a "done" or "failed" per "run", and a "send" per pm.sendRequest,
 * answered by the host with "sent". "run" and "done" travel as tuples (protocol.ts: cheaper to clone).
 */
import { type DoneWire, type HostToWorker, type RunMessage, runFromWire, type WorkerToHost } from "./protocol.ts";
import { loadQuickJS, wasmMaximumFor } from "./quickjs.ts";
import { type RunReply, SandboxRunner } from "./runner.ts";

declare const self: Worker;

const post = (m: WorkerToHost) => self.postMessage(m);
let runner: SandboxRunner | null = null;
/** Runs the host posted ahead (it keeps several in flight); done one after another, in order. */
const waiting: RunMessage[] = [];
let running = false;
/**
 * After a failure or an out-of-memory the host replaces this worker and posts again what it had not started, so
 * nothing more is run here (a run done twice would repeat its pm.sendRequest calls).
 */
let stopped = false;

self.onmessage = (ev: MessageEvent<HostToWorker>) => {
  const msg = ev.data;
  if (Array.isArray(msg)) {
    if (!runner) return; // the host sends runs only after "ready"
    if (msg[0] === "batch") for (const w of msg[1]) waiting.push(runFromWire(w));
    else waiting.push(runFromWire(msg));
    next();
  } else if (msg.t === "init") void init(msg.memoryBytes);
  else if (msg.t === "sent") runner?.deliver(msg.id, msg.op, msg.result);
};

/** Answers of runs done back to back, posted together (one message wakes the host once, not once per run). */
let doneOut: DoneWire[] = [];
/** At most this many answers wait for the others of a drain. */
const MAX_DONE_BATCH = 8;

function flushDone(): void {
  if (doneOut.length === 0) return;
  post(doneOut.length === 1 ? (doneOut[0] as DoneWire) : ["batch", doneOut]);
  doneOut = [];
}

/** Anything else the worker posts goes after the answers held so far, so the host sees them in run order. */
const postInOrder = (m: WorkerToHost) => {
  flushDone();
  post(m);
};

/** Does the waiting runs in order: one after another, synchronously, until one has to wait (timers, sends). */
function next(): void {
  if (running || !runner) return;
  while (!stopped) {
    const msg = waiting.shift();
    if (!msg) break;
    const reply = runner.run(msg, postInOrder);
    if (reply instanceof Promise) {
      flushDone();
      running = true;
      void reply.then((r) => {
        running = false;
        answer(r);
        next();
      });
      return;
    }
    answer(reply);
  }
  flushDone();
}

function answer(reply: RunReply): void {
  if (reply.t === "failed") {
    stopped = true;
    postInOrder(reply);
    return;
  }
  if (outOfMemory(reply.output)) stopped = true;
  doneOut.push(["done", reply.id, reply.output]);
  if (doneOut.length >= MAX_DONE_BATCH) flushDone();
}

/** What the host's mergeOutput reads as "recycle this worker": the sandbox's output says oom. */
function outOfMemory(output: string): boolean {
  if (!output.includes('"oom"')) return false;
  try {
    return (JSON.parse(output) as { oom?: unknown }).oom === true;
  } catch {
    return true; // unreadable output: the host recycles too
  }
}

async function init(memoryBytes: number): Promise<void> {
  try {
    const { module } = await loadQuickJS(wasmMaximumFor(memoryBytes));
    runner = new SandboxRunner(module, memoryBytes);
    post({ t: "ready" });
  } catch (e) {
    post({ t: "initFailed", message: e instanceof Error ? e.message : String(e) });
  }
}
