import { afterAll, describe, expect, test } from "bun:test";
import { ScriptEngine } from "../../../src/features/scripts/engine/engine.ts";
import type { ScriptInput } from "../../../src/features/scripts/engine/types.ts";

/** Runs are kept in flight in a worker (engine.ts, PIPELINE): what happens to those behind a run that fails. */
// A generous default limit: on a loaded 2-core machine a worker can go unscheduled for hundreds of ms, and a run
// timed out there would end in a worker restart that no test here is about. The looping run sets its own 300 ms.
const engine = new ScriptEngine({ workers: 1, timeoutMs: 10_000 });
afterAll(() => engine.close());

const input = (script: string): ScriptInput => ({
  script,
  phase: "request",
  request: { method: "GET", url: "http://example.test/", headers: [], body: "" },
});

describe("script engine: runs in flight behind one that ends its worker", () => {
  test("runs posted behind a looping one are run again on the new worker, once each, in order", async () => {
    await engine.start();
    const loop = engine.run(input("while (true) {}"), { timeoutMs: 300 });
    const behind = Array.from({ length: 5 }, (_, i) => engine.run(input(`pm.request.headers.add({key: "X-N", value: "${i}"}); console.log("ran ${i}")`)));
    const out = await loop;
    expect(out.errors[0]!.message).toContain("timed out");
    const rest = await Promise.all(behind);
    rest.forEach((o, i) => {
      expect(o.errors).toEqual([]);
      expect(o.request.headers).toEqual([["X-N", String(i)]]);
      expect(o.console.map((c) => c.message)).toEqual([`ran ${i}`]);
    });
  });

  test("runs behind one that runs out of memory complete too", async () => {
    // a generous time limit for this one: filling 16 MB on a loaded 2-core machine must end in out-of-memory, not a timeout
    const oom = engine.run(input("const a = []; for (;;) a.push('x'.repeat(1024 * 1024) + a.length);"), { memoryBytes: 16 * 1024 * 1024, timeoutMs: 10_000 });
    const behind = Array.from({ length: 3 }, (_, i) => engine.run(input(`pm.variables.set("i", ${i})`), { memoryBytes: 16 * 1024 * 1024, timeoutMs: 10_000 }));
    const o = await oom;
    expect(o.errors.map((e) => e.message).join(" ")).toContain("memory");
    const rest = await Promise.all(behind);
    expect(rest.map((r) => [r.errors, r.variables])).toEqual([0, 1, 2].map((i) => [[], { i }]));
  });

  test("runs given while the worker is busy are held and go with its next answer; all complete, in order", async () => {
    const first = engine.run(input("const t = Date.now(); while (Date.now() - t < 40) {}"));
    await new Promise((r) => setImmediate(r)); // posted (at the end of that turn) and running
    const later: Promise<{ variables: Record<string, unknown>; errors: unknown[] }>[] = [];
    for (let i = 0; i < 20; i++) {
      later.push(engine.run(input(`pm.variables.set("n", ${i})`)));
      if (i % 5 === 4) await new Promise((r) => setImmediate(r)); // several turns of the event loop
    }
    expect((await first).errors).toEqual([]);
    const outs = await Promise.all(later);
    expect(outs.map((o) => [o.errors, o.variables.n])).toEqual(Array.from({ length: 20 }, (_, i) => [[], i]));
  });

  test("many runs at once all complete, in the order they were given", async () => {
    const outs = await Promise.all(Array.from({ length: 200 }, (_, i) => engine.run(input(`pm.variables.set("n", ${i})`))));
    expect(outs.map((o) => o.variables.n)).toEqual(Array.from({ length: 200 }, (_, i) => i));
  });
});
