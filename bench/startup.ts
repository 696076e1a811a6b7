#!/usr/bin/env bun
/**
 * Start-up time of the compiled binary: process spawn → handshake file written (the banner line follows the
 * write), median of N runs. Builds the host binary first unless --binary PATH is given.
 *   bun bench/startup.ts [--runs 5] [--binary dist/tapwire-linux-x64]
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";

const { values } = parseArgs({ args: Bun.argv.slice(2), options: { runs: { type: "string" }, binary: { type: "string" } } });
const runs = Number(values.runs ?? 5);
const root = join(import.meta.dir, "..");
let binary = values.binary;
if (!binary) {
  const b = Bun.spawnSync([process.execPath, "run", join(root, "build.ts"), "--target", "current"], { cwd: root, stdout: "inherit", stderr: "inherit" });
  if (b.exitCode !== 0) process.exit(1);
  const os = process.platform === "win32" ? "windows" : process.platform;
  binary = join(root, "dist", `tapwire-${os}-${process.arch}${os === "windows" ? ".exe" : ""}`);
}

async function once(): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), "tapwire-startup-"));
  const t0 = performance.now();
  const p = Bun.spawn([binary!, "start", "--data-dir", dir, "--port", "0"], { stdout: "ignore", stderr: "pipe" });
  const reader = p.stderr.getReader();
  let text = "";
  let ms = NaN;
  while (true) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
    if (text.includes("API http://")) {
      ms = performance.now() - t0;
      break;
    }
  }
  if (!existsSync(join(dir, "api-handshake.json"))) throw new Error(`no handshake: ${text}`);
  p.kill("SIGTERM");
  await p.exited;
  rmSync(dir, { recursive: true, force: true });
  return ms;
}

await once(); // warm the page cache
const times: number[] = [];
for (let i = 0; i < runs; i++) times.push(await once());
times.sort((a, b) => a - b);
console.log(`startup to handshake (${binary}), ${runs} runs: ${times.map((t) => t.toFixed(1)).join(", ")} ms`);
console.log(`median ${times[Math.floor(times.length / 2)]!.toFixed(1)} ms (goal < 150 ms)`);
