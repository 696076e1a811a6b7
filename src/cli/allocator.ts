/**
 * The native allocator setting of tapwire's long-running process (`tapwire start`).
 *
 * Bun allocates its native memory (socket reads, typed arrays' stores, SQLite, zstd...) with mimalloc. With
 * mimalloc's default options a proxy's steady traffic keeps two threads busy handing freed pages back to the system
 * and faulting them in again (mi-scavenger, and JSCWarmUp: madvise, TLB shoot-downs across the VM's vCPUs, pages
 * cleared again), and the main thread pays its share in the same calls (docs/performance.md, "The allocator's
 * purge"). MIMALLOC_ARENA_PURGE_MULT=1000 makes mimalloc give whole arena ranges back after 10 s instead of
 * 100 ms (1,000 times the page purge delay of 10 ms instead of 10 times): memory in steady use is no longer handed
 * back and refaulted every 100 ms, and memory freed for good still goes back to the system, 10 s later.
 * MIMALLOC_PURGE_DELAY=-1 saves a little more CPU but never gives memory back (RSS stays at its high-water mark:
 * the 1M-entry store 392 MiB against 238 after its query mix): not used.
 *
 * mimalloc reads its options from the environment when the process starts (its symbols are not exported: no
 * switch at run time), so `start` re-executes itself (execve: same pid, same arguments, nothing forked) with the
 * variable set. A value the user set is kept as it is (MIMALLOC_ARENA_PURGE_MULT=10 is mimalloc's default).
 *
 * entry.ts (the program's entry: package.json, the compiled binary) calls restartForStart before it loads the rest of
 * the program, so that the restart costs one bare runtime start-up; main.ts, run directly, imports this module
 * first (the call at the end of this file).
 */
import { join } from "node:path";

export const ALLOCATOR_ENV: Readonly<Record<string, string>> = { MIMALLOC_ARENA_PURGE_MULT: "1000" };

/** Whether this process runs as a `bun build --compile` executable (its modules live in Bun's virtual folder). */
function isCompiled(): boolean {
  return import.meta.path.startsWith("/$bunfs/") || /^[A-Za-z]:[\\/]~BUN[\\/]/.test(import.meta.path);
}

/**
 * The command line that runs this same program again: the runtime's own flags (--cpu-prof...), the script when it
 * is not compiled in, then the arguments.
 */
function selfCommand(args: string[]): string[] {
  const script = isCompiled() ? [] : [process.argv[1]!];
  return [process.execPath, ...process.execArgv, ...script, ...args];
}

/**
 * Re-executes this process with ALLOCATOR_ENV when none of its variables is set (returns only when it does not:
 * set already, Windows, or execve unavailable or refused, which is logged and otherwise harmless).
 */
function execWithAllocatorEnv(args: string[]): void {
  if (process.platform === "win32") return;
  if (Object.keys(ALLOCATOR_ENV).some((k) => process.env[k] !== undefined)) return;
  const execve = (process as { execve?: (file: string, args: string[], env: Record<string, string | undefined>) => never }).execve;
  if (typeof execve !== "function") return;
  const cmd = selfCommand(args);
  try {
    execve.call(process, cmd[0]!, cmd, { ...process.env, ...ALLOCATOR_ENV });
  } catch (e) {
    process.stderr.write(`tapwire: could not restart with the allocator setting (${(e as Error).message}); running without it\n`);
  }
}

/** Restarts `tapwire start` (not its --help) with ALLOCATOR_ENV; other commands run as they are. */
export function restartForStart(args: string[]): void {
  if (args[0] === "start" && !args.includes("--help") && !args.includes("-h")) execWithAllocatorEnv(args);
}

// Run as `bun src/cli/main.ts start` (the tests and benches do), main.ts is the program: it restarts from here,
// this module being its first import. entry.ts (the binary, npm start) restarts before it loads main.ts at all.
if (!isCompiled() && Bun.main === join(import.meta.dir, "main.ts")) restartForStart(process.argv.slice(2));
