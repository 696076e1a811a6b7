import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";

export const ROOT = join(import.meta.dir, "..", "..");
export const BUN = process.execPath;

export interface Handshake {
  port: number;
  token: string;
  pid: number;
  version: string;
  started_at: number;
  proxy_port: number | null;
}

export function tempDir(prefix = "tapwire-test-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export interface RunningTapwire {
  proc: Subprocess<"ignore", "pipe", "pipe">;
  dataDir: string;
  handshake: Handshake;
  /** stderr lines seen so far */
  stderr: string[];
  api(path: string, init?: RequestInit): Promise<Response>;
  /** SIGTERM and wait for exit; returns the exit code */
  stop(signal?: NodeJS.Signals): Promise<number>;
}

/** Reads a stream line by line until `pred` matches a line; keeps collecting into `sink` afterwards. */
export async function waitForLine(
  stream: ReadableStream<Uint8Array>,
  sink: string[],
  pred: (line: string) => boolean,
): Promise<string | null> {
  const reader = stream.getReader();
  const dec = new TextDecoder();
  let buf = "";
  let found: string | null = null;
  let resolveFound!: (v: string | null) => void;
  const foundP = new Promise<string | null>((r) => (resolveFound = r));
  (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i: number;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        sink.push(line);
        if (found === null && pred(line)) {
          found = line;
          resolveFound(line);
        }
      }
    }
    if (buf) sink.push(buf);
    resolveFound(found);
  })();
  return foundP;
}

/** Starts `tapwire start` (from source, or a given command) and waits for the startup banner. */
export async function startTapwire(opts: { args?: string[]; dataDir?: string; cmd?: string[]; env?: Record<string, string>; cwd?: string } = {}): Promise<RunningTapwire> {
  const dataDir = opts.dataDir ?? tempDir();
  const cmd = opts.cmd ?? [BUN, join(ROOT, "src/cli/main.ts")];
  const proc = Bun.spawn([...cmd, "start", "--data-dir", dataDir, "--port", "0", ...(opts.args ?? [])], {
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    cwd: opts.cwd ?? ROOT,
    env: { ...process.env, ...(opts.env ?? {}) },
  });
  const stderr: string[] = [];
  const banner = await waitForLine(proc.stderr, stderr, (l) => l.includes("API http://127.0.0.1:"));
  if (!banner) {
    await proc.exited;
    throw new Error(`tapwire did not start (exit ${proc.exitCode}):\n${stderr.join("\n")}`);
  }
  const handshake = JSON.parse(readFileSync(join(dataDir, "api-handshake.json"), "utf8")) as Handshake;
  return {
    proc,
    dataDir,
    handshake,
    stderr,
    api: (path, init = {}) =>
      fetch(`http://127.0.0.1:${handshake.port}${path}`, {
        ...init,
        headers: { authorization: `Bearer ${handshake.token}`, ...(init.headers ?? {}) },
      }),
    async stop(signal: NodeJS.Signals = "SIGTERM") {
      if (proc.exitCode === null) proc.kill(signal);
      return await proc.exited;
    },
  };
}
