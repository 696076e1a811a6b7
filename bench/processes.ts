/**
 * Child processes for the benchmarks: each in its own process group (so a whole tree can be signalled), with the
 * tail of its output kept for error messages, and a hard timeout for one-shot commands.
 */
import { join } from "node:path";
import type { Subprocess } from "bun";

const ROOT = join(import.meta.dir, "..");

/** Keeps the last lines a child printed (for error messages) and lets callers wait for a line. */
export class OutputTail {
  lines: string[] = [];
  private waiters: { pred: (l: string) => boolean; resolve: (l: string) => void }[] = [];
  constructor(stream: ReadableStream<Uint8Array> | null | undefined) {
    if (stream) void this.pump(stream);
  }
  private async pump(stream: ReadableStream<Uint8Array>) {
    const dec = new TextDecoder();
    let buf = "";
    try {
      for await (const chunk of stream) {
        buf += dec.decode(chunk, { stream: true });
        let i: number;
        while ((i = buf.indexOf("\n")) >= 0) {
          this.push(buf.slice(0, i));
          buf = buf.slice(i + 1);
        }
      }
    } catch {}
    if (buf) this.push(buf);
  }
  private push(line: string) {
    this.lines.push(line);
    if (this.lines.length > 200) this.lines.shift();
    for (const w of [...this.waiters]) if (w.pred(line)) {
      this.waiters.splice(this.waiters.indexOf(w), 1);
      w.resolve(line);
    }
  }
  wait(pred: (l: string) => boolean): Promise<string> {
    const hit = this.lines.find(pred);
    if (hit !== undefined) return Promise.resolve(hit);
    return new Promise((resolve) => this.waiters.push({ pred, resolve }));
  }
  text(n = 20): string {
    return this.lines.slice(-n).join("\n");
  }
}

export interface Child {
  name: string;
  proc: Subprocess<"ignore", "pipe", "pipe">;
  out: OutputTail;
  err: OutputTail;
}

export const children = new Set<Child>();

/** Start a long-running process in its own process group (so the whole tree can be signalled). */
export function startChild(name: string, cmd: string[], opts: { env?: Record<string, string>; cwd?: string } = {}): Child {
  const proc = Bun.spawn(cmd, {
    cwd: opts.cwd ?? ROOT,
    env: { ...process.env, ...(opts.env ?? {}) },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    detached: true,
  });
  const c: Child = { name, proc, out: new OutputTail(proc.stdout), err: new OutputTail(proc.stderr) };
  children.add(c);
  return c;
}

export function killGroup(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig);
  } catch {
    try {
      process.kill(pid, sig);
    } catch {}
  }
}

/** SIGTERM the child's process group, SIGKILL it if it is not gone within `graceMs`. */
export async function stopChild(c: Child, graceMs = 3000): Promise<void> {
  if (!children.has(c)) return;
  children.delete(c);
  killGroup(c.proc.pid, "SIGTERM");
  const exited = await Promise.race([c.proc.exited.then(() => true), Bun.sleep(graceMs).then(() => false)]);
  killGroup(c.proc.pid, "SIGKILL"); // also ends grandchildren left in the group
  if (!exited) await Promise.race([c.proc.exited, Bun.sleep(1000)]);
}

export async function stopAll(): Promise<void> {
  await Promise.all([...children].map((c) => stopChild(c)));
}

/** Last resort (signal handlers, watchdog): synchronous. */
export function killAllNow(): void {
  for (const c of children) killGroup(c.proc.pid, "SIGTERM");
  if (children.size) Bun.sleepSync(300);
  for (const c of children) killGroup(c.proc.pid, "SIGKILL");
  children.clear();
}

export interface RunResult {
  code: number;
  out: string;
  err: string;
  timedOut: boolean;
  cpuSec: number;
}

/** Run a command to completion with a hard timeout (its process group is killed when it expires). */
export async function run(cmd: string[], timeoutMs: number, opts: { env?: Record<string, string>; cwd?: string; quiet?: boolean } = {}): Promise<RunResult> {
  const c = startChild(cmd[0]!, cmd, opts);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup(c.proc.pid, "SIGKILL");
  }, timeoutMs);
  const code = await c.proc.exited;
  clearTimeout(timer);
  children.delete(c);
  killGroup(c.proc.pid, "SIGKILL"); // stragglers in the group
  await Bun.sleep(10); // let the pipes flush into the tails
  const ru = c.proc.resourceUsage();
  const cpuSec = ru ? Number(ru.cpuTime.total) / 1e6 : NaN;
  return { code, out: c.out.lines.join("\n"), err: c.err.lines.join("\n"), timedOut, cpuSec };
}

/** The first line of the child's stdout or stderr that matches, or an error after timeoutMs or when it exits. */
export function waitLine(c: Child, pred: (l: string) => boolean, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${c.name}: no expected output within ${timeoutMs} ms:\n${c.err.text()}\n${c.out.text()}`)), timeoutMs);
    const done = (l: string) => {
      clearTimeout(timer);
      resolve(l);
    };
    c.out.wait(pred).then(done);
    c.err.wait(pred).then(done);
    c.proc.exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${c.name} exited (${code}) before printing what was expected:\n${c.err.text()}\n${c.out.text()}`));
    });
  });
}
