/**
 * The native allocator setting of tapwire's long-running process (`tapwire start`).
 *
 * Bun allocates its native memory (socket reads, typed arrays' stores, SQLite, zstd...) with mimalloc. With
 * mimalloc's default options a proxy's steady traffic kept two threads busy handing freed pages back to the system
 * and faulting them in again (mi-scavenger, and JSCWarmUp: madvise, TLB shoot-downs across the VM's vCPUs, pages
 * cleared again): about a third of tapwire's CPU per plain-HTTP request, more under outside load
 * (docs/performance.md, "The allocator's purge"). MIMALLOC_ALLOW_THP=0 (no transparent huge pages for mimalloc's
 * memory) ends that churn; freed memory still goes back to the system as before (the store's RSS after its query
 * mix is unchanged). MIMALLOC_PURGE_DELAY=-1 ends it too, but then freed pages never go back and RSS stays at its
 * high-water mark (the 1M-entry store: 392 MiB against 238 after its query mix): not used.
 *
 * mimalloc reads its options from the environment when the process starts (its symbols are not exported: no
 * switch at run time), so `start` re-executes itself (execve: same pid, same arguments, nothing forked) with the
 * variable set. A value the user set is kept as it is (MIMALLOC_ALLOW_THP=1 is mimalloc's default).
 *
 * main.ts imports this module before any other, so that the restart happens before the rest of the program's
 * modules are evaluated (the call at the end of this file): `start` pays for one bare runtime start-up, not two.
 */
import { join } from "node:path";

export const ALLOCATOR_ENV: Readonly<Record<string, string>> = { MIMALLOC_ALLOW_THP: "0" };

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
