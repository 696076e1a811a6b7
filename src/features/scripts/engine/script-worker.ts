/**
 * A script worker: one QuickJS runtime (runner.ts) doing its runs one at a time, in order, for ScriptEngine (engine.ts), which
 * starts it with new Worker(new URL("./script-worker.ts", import.meta.url)). Built as an extra entrypoint of the
 * compiled binary (build.ts), hence a file name unique in the project.
 *
 * The host's first message, "init", gives the memory limit; the worker answers "ready" once QuickJS, chai and the
 * prelude are loaded (or "initFailed"); then a "done" or "failed" per "run", and a "send" per pm.sendRequest,
 * answered by the host with "sent".
 */
import type { HostToWorker, WorkerToHost } from "./protocol.ts";
import { loadQuickJS, wasmMaximumFor } from "./quickjs.ts";
import { SandboxRunner } from "./runner.ts";

declare const self: Worker;

type RunMessage = Extract<HostToWorker, { t: "run" }>;

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
  if (msg.t === "init") void init(msg.memoryBytes);
  else if (!runner) return; // the host sends runs only after "ready"
  else if (msg.t === "run") {
    waiting.push(msg);
    next();
  } else if (msg.t === "sent") runner.deliver(msg.id, msg.op, msg.result);
};

function next(): void {
  if (running || stopped || !runner) return;
  const msg = waiting.shift();
  if (!msg) return;
  running = true;
  void runner.run(msg, post).then((reply) => {
    running = false;
    if (reply.t === "failed" || outOfMemory(reply.output)) stopped = true;
    post(reply);
    next();
  });
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
