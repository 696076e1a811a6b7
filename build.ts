#!/usr/bin/env bun
/**
 * Builds one self-contained executable per platform into dist/:
 *   bun run build.ts                  all five targets
 *   bun run build.ts --target current only this machine's
 *   bun run build.ts --target linux-x64,darwin-arm64
 * The version is baked in; bunfig.toml and .env autoloading are off in the binaries.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import pkg from "./package.json" with { type: "json" };
import { bundleUi } from "./ui/bundle.ts";

const TARGETS = {
  "linux-x64": "bun-linux-x64",
  "linux-arm64": "bun-linux-arm64",
  "darwin-x64": "bun-darwin-x64",
  "darwin-arm64": "bun-darwin-arm64",
  "windows-x64": "bun-windows-x64",
} as const;
type Target = keyof typeof TARGETS;

function hostTarget(): Target {
  const os = process.platform === "win32" ? "windows" : process.platform;
  const t = `${os}-${process.arch}` as Target;
  if (!(t in TARGETS)) throw new Error(`no build target for this machine (${t})`);
  return t;
}

async function gitDescribe(): Promise<string> {
  try {
    const p = Bun.spawnSync(["git", "rev-parse", "--short", "HEAD"], { stderr: "ignore" });
    const sha = p.stdout.toString().trim();
    return p.exitCode === 0 && sha ? sha : "";
  } catch {
    return "";
  }
}

const { values } = parseArgs({ args: Bun.argv.slice(2), options: { target: { type: "string" }, outdir: { type: "string" } } });
const wanted: Target[] =
  !values.target || values.target === "all"
    ? (Object.keys(TARGETS) as Target[])
    : values.target.split(",").map((t) => (t === "current" ? hostTarget() : (t as Target)));
for (const t of wanted) if (!(t in TARGETS)) throw new Error(`unknown target '${t}' (known: current, ${Object.keys(TARGETS).join(", ")})`);

const outdir = values.outdir ?? join(import.meta.dir, "dist");
mkdirSync(outdir, { recursive: true });
const sha = await gitDescribe();
const version = sha ? `${pkg.version}+${sha}` : pkg.version;

// The web UI (ui/), bundled once and embedded in every binary as a constant (src/features/ui/assets.ts)
const ui = await bundleUi();

let failed = 0;
for (const t of wanted) {
  const outfile = join(outdir, `tapwire-${t}${t.startsWith("windows") ? ".exe" : ""}`);
  const started = performance.now();
  const result = await Bun.build({
    // The capture store's writer and the script engine's workers run in Workers
    // (new Worker(new URL("./capture-writer.ts", import.meta.url)), likewise "./script-worker.ts"): each of those
    // files is an entrypoint of its own in the binary. Entries are named flat ([name].js at the root of the
    // binary's file system, next to the main module) so that URL resolves to it; ESM keeps import.meta.url that
    // of the binary (with the CJS bytecode output it is the build machine's source path: oven-sh/bun#40903).
    // The script worker imports QuickJS's .wasm `with { type: "file" }` (embedded in the binary) and its sandbox
    // sources (chai, the prelude) as text (inlined).
    // entry.ts first (the binary's own module): it loads main.ts, an entrypoint of its own, at run time
    entrypoints: [
      join(import.meta.dir, "src/cli/entry.ts"),
      join(import.meta.dir, "src/cli/main.ts"),
      join(import.meta.dir, "src/store/capture-writer.ts"),
      join(import.meta.dir, "src/store/capture-reader.ts"),
      join(import.meta.dir, "src/features/scripts/engine/script-worker.ts"),
    ],
    naming: { entry: "[name].[ext]" },
    format: "esm",
    // Code the entrypoints share, and each module loaded with import() (the remote-file backends with ssh2, the
    // AWS SDK, webdav and basic-ftp; the MCP server...), goes into chunks of its own, loaded when first imported.
    // Without it those modules' code and their node: imports (http, https, zlib...) are all in main.js and
    // loaded at every start (docs/performance.md, "Start-up").
    splitting: true,
    compile: {
      target: TARGETS[t],
      outfile,
      autoloadBunfig: false,
      autoloadDotenv: false,
    },
    minify: true,
    sourcemap: "linked",
    bytecode: true,
    define: { TAPWIRE_BUILD_VERSION: JSON.stringify(version), TAPWIRE_UI_BUNDLE: JSON.stringify(ui) },
    // ssh2's optional native speed-up; ssh2 works without it (remote files, SFTP)
    external: ["cpu-features"],
  });
  if (!result.success) {
    failed++;
    console.error(`build ${t} failed:`);
    for (const log of result.logs) console.error(log);
    continue;
  }
  console.log(`built ${outfile} (${version}) in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}
process.exit(failed ? 1 : 0);
