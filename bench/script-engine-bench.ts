#!/usr/bin/env bun
/**
 * Script engine benchmark (src/features/scripts/engine/): what one script run costs the caller.
 *
 *   bun bench/script-engine-bench.ts [--runs 5000] [--workers 2]
 *
 * Prints:
 *   1. µs per run, p50/p99/max, of a one-line request script (pm.request.headers.add) on a warm worker (reused
 *      QuickJS context, compiled script cached): sequential runs, each awaited, so each figure is the full round trip
 *      main thread -> worker -> QuickJS -> worker -> main thread, i.e. what a request waits for its script;
 *   2. the same for a test script with three assertions;
 *   3. throughput of the one-line script with `workers` runs in flight, then with 64 (the engine pipelines up to 16
 *      per worker), and the CPU time per run of the worker threads, the main thread and Bun's other threads (GC
 *      helpers...), read from /proc (Linux);
 *   4. the hard stop: a worker looping in `while(true){}` is terminated at the run's deadline (300 ms); time from
 *      worker.terminate() to the worker's close event (its thread has ended), and the worst delay a setTimeout(0)
 *      on the main thread saw meanwhile (the loop must not slow the main thread);
 *   5. time to start a worker (QuickJS, chai and the prelude loaded).
 * On a shared machine, run it twice and compare within a run.
 */
import { readdirSync, readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { ScriptEngine } from "../src/features/scripts/engine/engine.ts";
import type { HostToWorker, WorkerToHost } from "../src/features/scripts/engine/protocol.ts";
import type { ScriptInput } from "../src/features/scripts/engine/types.ts";

const { values } = parseArgs({ args: Bun.argv.slice(2), options: { runs: { type: "string" }, workers: { type: "string" } } });
const RUNS = Number(values.runs ?? 5000);
const WORKERS = Number(values.workers ?? 2);

const request = {
  method: "GET",
  url: "https://api.example.com/v1/users?page=2",
  headers: [
    ["Host", "api.example.com"],
    ["Accept", "application/json"],
    ["User-Agent", "bench/1.0"],
  ] as [string, string][],
  body: "",
};
const response = { status: 200, headers: [["Content-Type", "application/json"]] as [string, string][], body: '{"data":{"id":7,"name":"x"}}' };

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
const us = (ms: number) => (ms * 1000).toFixed(1);

async function latency(engine: ScriptEngine, label: string, input: ScriptInput): Promise<void> {
  for (let i = 0; i < 500; i++) await engine.run(input); // warm-up: JIT, script cache
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t = performance.now();
    const out = await engine.run(input);
    times.push(performance.now() - t);
    if (out.errors.length) throw new Error(`${label}: ${out.errors[0]!.message}`);
  }
  times.sort((a, b) => a - b);
  console.log(`${label}: p50 ${us(pct(times, 0.5))} µs  p99 ${us(pct(times, 0.99))} µs  max ${us(times[times.length - 1]!)} µs  (${RUNS} runs)`);
}

/** CPU time (ns) of this process's threads so far, by kind: the main thread, Worker threads, all the others. */
function threadCpu(): { main: number; workers: number; other: number } {
  const out = { main: 0, workers: 0, other: 0 };
  try {
    for (const tid of readdirSync("/proc/self/task")) {
      const ns = Number(readFileSync(`/proc/self/task/${tid}/schedstat`, "utf8").split(" ")[0]);
      const name = readFileSync(`/proc/self/task/${tid}/comm`, "utf8").trim();
      if (tid === String(process.pid)) out.main += ns;
      else if (name === "Worker") out.workers += ns;
      else out.other += ns;
    }
  } catch {
    // not Linux: no per-thread figures
  }
  return out;
}

async function throughput(engine: ScriptEngine, input: ScriptInput, inFlight: number): Promise<void> {
  const runs = RUNS * 4;
  for (let i = 0; i < 500; i++) await engine.run(input);
  const cpu0 = threadCpu();
  const started = performance.now();
  let done = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (done < runs) {
        done++;
        await engine.run(input);
      }
    }),
  );
  const s = (performance.now() - started) / 1000;
  const cpu1 = threadCpu();
  const per = (ns: number) => (ns / 1000 / runs).toFixed(1);
  const cpu = cpu1.main ? `; CPU per run: workers ${per(cpu1.workers - cpu0.workers)} µs, main thread ${per(cpu1.main - cpu0.main)} µs, other threads ${per(cpu1.other - cpu0.other)} µs` : "";
  console.log(`throughput, ${inFlight} in flight: ${Math.round(runs / s)} runs/s${cpu}`);
}

/**
 * Terminate a worker stuck in while(true){} at the run's deadline, as the engine does, and time it; watch the main
 * thread's timer delays meanwhile.
 */
const DEADLINE_MS = 300;

async function hardStop(): Promise<void> {
  const worker = new Worker(new URL("../src/features/scripts/engine/script-worker.ts", import.meta.url));
  const spawned = performance.now();
  worker.postMessage({ t: "init", memoryBytes: 64 << 20 } satisfies HostToWorker);
  await new Promise<void>((resolve) => {
    worker.onmessage = (ev: MessageEvent<WorkerToHost>) => {
      if (!Array.isArray(ev.data) && ev.data.t === "ready") resolve();
    };
  });
  const startMs = performance.now() - spawned;
  const input = [JSON.stringify({ phase: "request", memoryBytes: 64 << 20, info: {} }), JSON.stringify({ method: "GET", url: "http://x/", headers: [] }), "null", "{}", "{}", "{}", "{}"].join("\n");
  const run: HostToWorker = ["run", 1, "while (true) {}", input, "", null, DEADLINE_MS, 64 << 20];
  worker.postMessage(run);
  let worst = 0;
  let ticking = true;
  const tick = () => {
    const t = performance.now();
    setTimeout(() => {
      worst = Math.max(worst, performance.now() - t);
      if (ticking) tick();
    }, 0);
  };
  tick();
  await Bun.sleep(DEADLINE_MS); // the run's deadline, as the engine's timer (a benchmark: waiting on the clock is the point)
  const closed = new Promise<void>((resolve) => worker.addEventListener("close", () => resolve()));
  const t = performance.now();
  worker.terminate();
  await closed;
  const stopMs = performance.now() - t;
  ticking = false;
  console.log(`hard stop of a looping worker: terminate -> closed ${stopMs.toFixed(1)} ms; main-thread setTimeout(0) worst delay ${worst.toFixed(2)} ms`);
  console.log(`worker start (QuickJS + chai + prelude): ${startMs.toFixed(0)} ms`);
}

const engine = new ScriptEngine({ workers: WORKERS });
await engine.start();
await latency(engine, "one-line request script", { script: "pm.request.headers.add({ key: 'X-Trace', value: '1' });", phase: "request", request });
await latency(engine, "test script, 3 assertions", {
  script: "pm.test('ok', () => { pm.response.to.have.status(200); pm.expect(pm.response.json().data.id).to.equal(7); pm.expect(pm.response.headers.get('content-type')).to.include('json'); });",
  phase: "test",
  request,
  response,
});
for (const inFlight of [WORKERS, 64]) await throughput(engine, { script: "pm.request.headers.add({ key: 'X-Trace', value: '1' });", phase: "request", request }, inFlight);
await engine.close();
await hardStop();
