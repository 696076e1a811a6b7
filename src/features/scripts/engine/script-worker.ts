/**
 * A script worker: one QuickJS runtime (runner.ts) doing its runs one at a time, in order, for ScriptEngine (engine.ts), which
 * starts it with new Worker(new URL("./script-worker.ts", import.meta.url)). Built as an extra entrypoint of the
 * compiled binary (build.ts), hence a file name unique in the project.
 *
 * The host's first message, "init", gives the memory limit; the worker answers "ready" once QuickJS, chai and the
 * prelude are loaded (or "initFailed"); then a "done" or "failed" per "run", and a "send" per pm.sendRequest,
 * answered by the host with "sent". "run" and "done" travel as tuples (protocol.ts: cheaper to clone).
 */
import { type HostToWorker, type RunMessage, runFromWire, type WorkerToHost } from "./protocol.ts";
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
    waiting.push(runFromWire(msg));
    next();
  } else if (msg.t === "init") void init(msg.memoryBytes);
  else if (msg.t === "sent") runner?.deliver(msg.id, msg.op, msg.result);
};

/** Does the waiting runs in order: one after another, synchronously, until one has to wait (timers, sends). */
function next(): void {
  if (running || !runner) return;
  while (!stopped) {
    const msg = waiting.shift();
    if (!msg) return;
    const reply = runner.run(msg, post);
    if (reply instanceof Promise) {
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
}

function answer(reply: RunReply): void {
  if (reply.t === "failed") {
    stopped = true;
    post(reply);
    return;
  }
  if (outOfMemory(reply.output)) stopped = true;
  post(["done", reply.id, reply.output]);
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
