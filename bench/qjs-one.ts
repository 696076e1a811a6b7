#!/usr/bin/env bun
/**
 * In-thread micro-benchmark of one SandboxRunner (engine/runner.ts): CPU time (this thread's, from /proc, so load on
 * the machine hardly matters) per run of one script, no worker or message in between.
 *
 *   bun bench/qjs-one.ts ["<script>"] [runs per round, default 200000]
 */
import { loadQuickJS, wasmMaximumFor } from "../src/features/scripts/engine/quickjs.ts";
import { SandboxRunner } from "../src/features/scripts/engine/runner.ts";
import { prepareRun } from "../src/features/scripts/engine/output.ts";
const mem = 64 * 1024 * 1024;
const { module } = await loadQuickJS(wasmMaximumFor(mem));
const r = new SandboxRunner(module, mem);
const req = { method: "GET", url: "http://127.0.0.1:1234/x?y=1", headers: [["Host", "127.0.0.1:1234"], ["User-Agent", "hey/0.0.1"], ["Accept-Encoding", "gzip"]] as [string,string][], body: "" };
const script = process.argv[2] ?? "pm.request.headers.upsert({key: 'X-Bench', value: '1'})";
const p = prepareRun({ phase: "request", script, request: req, info: { requestName: "bench", eventName: "prerequest" } } as any, mem) as any;
const msg = { t: "run", id: 1, script, input: p.inputJson, requestBody: "", responseBody: null, timeoutMs: 1000, memoryBytes: mem } as any;
const N = Number(process.argv[3] ?? 200000);
import { readFileSync } from "node:fs";
const cpu = () => Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, "utf8").split(" ")[0]);
for (let i = 0; i < 5000; i++) r.run(msg, () => {});
const res: number[] = [];
for (let k = 0; k < 5; k++) {
const c0 = cpu();
for (let i = 0; i < N; i++) r.run(msg, () => {});
res.push((cpu() - c0) / 1000 / N);
}
res.sort((a,b)=>a-b);
console.log(JSON.stringify(script).slice(0,40), "cpu µs/run min", res[0].toFixed(1), "med", res[2].toFixed(1), (r.run(msg, () => {}) as any).output.slice(0, 100));
