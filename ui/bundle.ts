/**
 * Bundles the web UI (ui/src/main.tsx and its imports, Preact included) into one ES module. build.ts calls it and
 * embeds the result in the binary; a tapwire run from source (`bun src/cli/main.ts start`, the tests) calls it at
 * the first request for /ui/, with the same options, so both serve the same code.
 */
import { join } from "node:path";

export interface UiBundle {
  js: string;
  css: string;
}

const SRC = join(import.meta.dir, "src");

export async function bundleUi(): Promise<UiBundle> {
  const result = await Bun.build({
    entrypoints: [join(SRC, "main.tsx")],
    target: "browser",
    format: "esm",
    minify: true,
    // ui/tsconfig.json sets jsx: react-jsx with jsxImportSource preact
    tsconfig: join(import.meta.dir, "tsconfig.json"),
    define: { "process.env.NODE_ENV": JSON.stringify("production") },
  } as Parameters<typeof Bun.build>[0]);
  if (!result.success) throw new Error(`UI bundle failed: ${result.logs.map(String).join("\n")}`);
  const js = result.outputs.find((o) => o.kind === "entry-point");
  if (!js) throw new Error("UI bundle failed: no entry output");
  const css = await Bun.file(join(SRC, "styles.css")).text();
  return { js: await js.text(), css };
}
