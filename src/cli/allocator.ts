/**
 * The native allocator setting of tapwire's long-running process (`tapwire start`).
 *
 * Bun allocates its native memory (socket reads, typed arrays' stores, SQLite, zstd...) with mimalloc, which by
 * default hands freed pages back to the system a few milliseconds later ("purging": madvise, then page faults when
 * they are used again) from a background thread and from the freeing thread. A proxy frees and reuses the same
 * few MiB thousands of times a second, so on plain HTTP that churn cost about a third of tapwire's CPU per request
 * (docs/performance.md, "The allocator's purge"). With MIMALLOC_PURGE_DELAY=-1 freed pages stay with the process
 * and are reused; the process's RSS then stays at its high-water mark instead of shrinking after a peak.
 *
 * mimalloc reads its options from the environment when the process starts, so `start` re-executes itself (execve:
 * same pid, same arguments, nothing forked) with the variable set. A variable the user set is kept as it is: run
 * with MIMALLOC_PURGE_DELAY=10 (mimalloc's default) to return freed memory to the system again.
 *
 * main.ts imports this module before any other, so that the restart happens before the rest of the program's
 * modules are evaluated (the call at the end of this file): `start` pays for one bare runtime start-up, not two.
 */
import { join } from "node:path";

export const ALLOCATOR_ENV: Readonly<Record<string, string>> = { MIMALLOC_PURGE_DELAY: "-1" };

/** Whether this process runs as a `bun build --compile` executable (its modules live in Bun's virtual folder). */
function isCompiled(): boolean {
  return import.meta.path.startsWith("/$bunfs/") || /^[A-Za-z]:[\\/]~BUN[\\/]/.test(import.meta.path);
}

/**
 * The command line that runs this same program again: the runtime's own flags (--cpu-prof...), the script when it
 * is not compiled in, then the arguments.
 */
export function selfCommand(args: string[]): string[] {
  const script = isCompiled() ? [] : [process.argv[1]!];
  return [process.execPath, ...process.execArgv, ...script, ...args];
}

/**
 * Re-executes this process with ALLOCATOR_ENV when none of its variables is set (returns only when it does not:
 * set already, Windows, or execve unavailable or refused, which is logged and otherwise harmless).
 */
export function execWithAllocatorEnv(args: string[], log: (line: string) => void): void {
  if (process.platform === "win32") return;
  if (Object.keys(ALLOCATOR_ENV).some((k) => process.env[k] !== undefined)) return;
  const execve = (process as { execve?: (file: string, args: string[], env: Record<string, string | undefined>) => never }).execve;
  if (typeof execve !== "function") return;
  const cmd = selfCommand(args);
  try {
    execve.call(process, cmd[0]!, cmd, { ...process.env, ...ALLOCATOR_ENV });
  } catch (e) {
    log(`tapwire: could not restart with the allocator setting (${(e as Error).message}); running without it`);
  }
}

/** Whether this process runs main.ts as its program (not a test or another script that imports it). */
function mainIsEntry(): boolean {
  return isCompiled() || Bun.main === join(import.meta.dir, "main.ts");
}

{
  const args = process.argv.slice(2);
  if (mainIsEntry() && args[0] === "start" && !args.includes("--help") && !args.includes("-h")) {
    execWithAllocatorEnv(args, (l) => process.stderr.write(`${l}\n`));
  }
}
