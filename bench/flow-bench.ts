#!/usr/bin/env bun
/**
 * What a flow step costs: one in-process tapwire (temp data directory) and a 1 KiB upstream (its own process).
 * Rows, measured in the same run and interleaved round by round:
 *   direct          N requests one after another with fetch, straight to the upstream (the reference)
 *   proxy           N requests one after another with fetch through tapwire's proxy (captured)
 *   flow request    one flow of N request nodes in a chain (through the proxy as tapwire-flow, captured)
 *   flow +assert    N request nodes each followed by an assert node (status and a JSON-free body check)
 *   flow +script    N request nodes each followed by a script node (one pm.test) on the script engine
 * For each row: the mean time per request (µs), and for the flow rows the time per flow step.
 *
 *   node_modules/.bin/bun bench/flow-bench.ts [--requests 300] [--rounds 3]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { FlowService } from "../src/features/flows/service.ts";
import { normalizeFlow } from "../src/features/flows/store.ts";
import { DEFAULTS } from "../src/service/config.ts";
import type { Feature } from "../src/service/feature.ts";
import { TapwireService } from "../src/service/service.ts";
import { startChild, stopAll, waitLine } from "./processes.ts";

if (Bun.argv.includes("--serve-upstream")) {
  const body = "x".repeat(1023) + "\n";
  const server = Bun.serve({ hostname: "127.0.0.1", port: 0, reusePort: false, fetch: () => new Response(body, { headers: { "content-type": "text/plain" } }) });
  process.stdout.write(`PORT ${server.port}\n`);
  await new Promise(() => {});
}

const { values: opt } = parseArgs({ args: Bun.argv.slice(2), strict: true, options: { requests: { type: "string", default: "300" }, rounds: { type: "string", default: "3" } } });
const N = Number(opt.requests);
const ROUNDS = Number(opt.rounds);

const up = startChild("upstream", [process.execPath, import.meta.path, "--serve-upstream"]);
const dataDir = mkdtempSync(join(tmpdir(), "tapwire-flow-bench-"));
const svc = new TapwireService({ ...DEFAULTS, dataDir, proxyPort: 0, upstreamInsecure: false, upstreamCa: [], mockPort: null }, () => {});
try {
  const port = Number(/^PORT (\d+)/.exec(await waitLine(up, (l) => l.startsWith("PORT "), 10_000))![1]);
  const target = `http://127.0.0.1:${port}/x`;
  await svc.start();
  const flows = svc.feature<Feature & { service: FlowService }>("flows").service;

  const chain = (id: string, after: ((i: number) => [string, Record<string, unknown>]) | null) => {
    const nodes: { id: string; type: string; data: Record<string, unknown> }[] = [{ id: "start", type: "start", data: {} }];
    for (let i = 0; i < N; i++) {
      nodes.push({ id: `r${i}`, type: "request", data: { method: "GET", url: target } });
      if (after) {
        const [type, data] = after(i);
        nodes.push({ id: `a${i}`, type, data });
      }
    }
    const edges = nodes.slice(1).map((n, i) => ({ source: nodes[i]!.id, target: n.id }));
    return normalizeFlow({ name: id, nodes, edges, maxSteps: 1_000_000 }, id, { createdAt: 0, updatedAt: 0 });
  };
  const plain = chain("plain", null);
  const asserted = chain("asserted", () => ["assert", { checks: [{ type: "status", equals: 200 }, { type: "body", contains: "xxx" }] }]);
  const scripted = chain("scripted", () => ["script", { script: "pm.test('ok', () => pm.response.to.have.status(200));" }]);

  const rows: Record<string, number[]> = { direct: [], proxy: [], "flow request": [], "flow +assert": [], "flow +script": [] };
  const timeFlow = async (f: typeof plain) => {
    const t0 = performance.now();
    const r = await flows.run(f);
    if (r.status !== "passed") throw new Error(`${f.id}: ${r.status} ${r.error ?? ""}`);
    return ((performance.now() - t0) * 1000) / N;
  };
  // warm-up: connections, workers, JIT
  await flows.run(scripted);
  for (let round = 0; round < ROUNDS; round++) {
    let t0 = performance.now();
    for (let i = 0; i < N; i++) await (await fetch(target)).arrayBuffer();
    rows.direct!.push(((performance.now() - t0) * 1000) / N);
    t0 = performance.now();
    for (let i = 0; i < N; i++) await (await fetch(target, { proxy: `http://127.0.0.1:${svc.proxyPort}` })).arrayBuffer();
    rows.proxy!.push(((performance.now() - t0) * 1000) / N);
    rows["flow request"]!.push(await timeFlow(plain));
    rows["flow +assert"]!.push(await timeFlow(asserted));
    rows["flow +script"]!.push(await timeFlow(scripted));
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  console.log(`${N} requests per row, ${ROUNDS} rounds; median µs per request (per flow step: request rows / 1, +assert and +script / 2)`);
  for (const [name, xs] of Object.entries(rows)) {
    const m = median(xs);
    const perStep = name.startsWith("flow +") ? `  (${Math.round(m / 2)} µs/step)` : "";
    console.log(`${name.padEnd(14)} ${String(Math.round(m)).padStart(7)} µs/request  x${(m / median(rows.direct!)).toFixed(1)} of direct${perStep}   rounds: ${xs.map((x) => Math.round(x)).join(", ")}`);
  }
} finally {
  await svc.stop();
  rmSync(dataDir, { recursive: true, force: true });
  await stopAll();
}
