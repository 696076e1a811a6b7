import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, resolve, dirname } from "node:path";

const SRC = join(import.meta.dir, "..", "src");

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? tsFiles(p) : p.endsWith(".ts") ? [p] : [];
  });
}

/** Every relative module a file names: static and dynamic imports, re-exports, Worker URLs. */
function imports(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const specs = [...text.matchAll(/(?:from\s+|import\s*\(\s*|import\s+|new URL\(\s*)"(\.{1,2}\/[^"]+)"/g)].map((m) => m[1]!);
  return specs.map((s) => relative(SRC, resolve(dirname(file), s)));
}

describe("source layout (docs/architecture.md)", () => {
  test("core/ and pipeline/ import only each other: no feature, store, service, API or CLI", () => {
    const bad: string[] = [];
    for (const layer of ["core", "pipeline"]) {
      for (const file of tsFiles(join(SRC, layer))) {
        for (const target of imports(file)) {
          const top = target.split("/")[0]!;
          if (top !== "core" && top !== "pipeline") bad.push(`${relative(SRC, file)} imports ${target}`);
        }
      }
    }
    expect(bad).toEqual([]);
  });

  test("every feature folder is listed in features/index.ts or used by a listed feature", () => {
    const index = readFileSync(join(SRC, "features", "index.ts"), "utf8");
    const folders = readdirSync(join(SRC, "features")).filter((n) => statSync(join(SRC, "features", n)).isDirectory());
    expect(folders.length).toBeGreaterThan(5);
    const unreferenced = folders.filter((f) => {
      if (index.includes(`"./${f}/`)) return false;
      // a folder of shared code (the rule matcher) or routes the service mounts itself (traffic, health)
      const users = tsFiles(SRC).filter((file) => !file.startsWith(join(SRC, "features", f) + "/") && imports(file).some((t) => t.startsWith(`features/${f}/`)));
      return users.length === 0;
    });
    expect(unreferenced).toEqual([]);
  });
});
