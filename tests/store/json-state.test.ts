import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { JsonState, writeFileAtomic } from "../../src/store/json-state.ts";
import { tempDir } from "../helpers/tapwire-process.ts";

describe("persistent JSON state", () => {
  test("starts from the initial value, persists every set, reads it back at start", () => {
    const dir = tempDir();
    const path = join(dir, "rules.json");
    const a = new JsonState<{ items: string[] }>(path, { initial: () => ({ items: [] }) });
    expect(a.get()).toEqual({ items: [] });
    expect(existsSync(path)).toBe(false);
    a.update((d) => ({ items: [...d.items, "x"] }));
    a.update((d) => ({ items: [...d.items, "y"] }));
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const b = new JsonState<{ items: string[] }>(path, { initial: () => ({ items: [] }) });
    expect(b.get()).toEqual({ items: ["x", "y"] });
    // no temp files left behind
    expect(readdirSync(dir)).toEqual(["rules.json"]);
  });

  test("a corrupt file is moved aside and reported, never silently reset", () => {
    const dir = tempDir();
    const path = join(dir, "state.json");
    writeFileSync(path, '{"items": [1, 2');
    const reports: string[] = [];
    const s = new JsonState<{ items: number[] }>(path, {
      initial: () => ({ items: [] }),
      onCorrupt: (p, moved, reason) => reports.push(`${p} -> ${moved}: ${reason}`),
    });
    expect(s.get()).toEqual({ items: [] });
    expect(reports.length).toBe(1);
    expect(s.recoveredFrom).toMatch(/state\.json\.corrupt-\d+$/);
    expect(readFileSync(s.recoveredFrom!, "utf8")).toBe('{"items": [1, 2');
    expect(existsSync(path)).toBe(false);
  });

  test("a file of the wrong shape is treated as corrupt", () => {
    const dir = tempDir();
    const path = join(dir, "state.json");
    writeFileSync(path, '"just a string"');
    const s = new JsonState<string[]>(path, {
      initial: () => [],
      validate: (v) => (Array.isArray(v) ? null : "expected an array"),
    });
    expect(s.get()).toEqual([]);
    expect(s.recoveredFrom).not.toBeNull();
  });

  test("a failed write leaves the old value in memory and on disk", () => {
    const dir = tempDir();
    const path = join(dir, "s.json");
    const s = new JsonState<Record<string, unknown>>(path, { initial: () => ({}) });
    s.set({ a: 1 });
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => s.set(cyclic)).toThrow();
    expect(s.get()).toEqual({ a: 1 });
    expect(JSON.parse(readFileSync(path, "utf8"))).toEqual({ a: 1 });
  });

  test("writeFileAtomic survives kill -9 of a writer: readers see old or new, never a torn file", async () => {
    const dir = tempDir();
    const path = join(dir, "big.json");
    writeFileAtomic(path, JSON.stringify({ v: "old" }));
    const script = `
      const { writeFileAtomic } = await import(${JSON.stringify(join(import.meta.dir, "../../src/store/json-state.ts"))});
      const big = JSON.stringify({ v: "x".repeat(20_000_000) });
      process.stdout.write("go\\n");
      for (;;) writeFileAtomic(${JSON.stringify(path)}, big);
    `;
    const p = Bun.spawn([process.execPath, "-e", script], { stdout: "pipe" });
    const reader = p.stdout.getReader();
    await reader.read(); // "go": the writer is in its loop
    p.kill("SIGKILL");
    await p.exited;
    const v = JSON.parse(readFileSync(path, "utf8")).v as string;
    expect(v === "old" || v.length === 20_000_000).toBe(true);
  });
});
