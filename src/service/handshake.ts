import { existsSync, readFileSync, unlinkSync, openSync, writeSync, closeSync, constants } from "node:fs";
import { join } from "node:path";
import { writeFileAtomic } from "../store/json-state.ts";

export const HANDSHAKE_FILE = "api-handshake.json";
export const LOCK_FILE = "instance.lock";

/** Spec 2.1, plus proxy_port. */
export interface Handshake {
  port: number;
  token: string;
  pid: number;
  version: string;
  started_at: number;
  proxy_port: number | null;
}

export function handshakePath(dataDir: string): string {
  return join(dataDir, HANDSHAKE_FILE);
}

/**
 * Written atomically but not synced to disk: it describes the running process, and after the machine goes down
 * that process is gone (readers check its pid). Its two fsyncs took 5 ms of every start, hundreds of ms while the
 * disk was busy.
 */
export function writeHandshake(dataDir: string, h: Handshake): void {
  writeFileAtomic(handshakePath(dataDir), JSON.stringify(h, null, 2) + "\n", 0o600, false);
}

export function readHandshake(dataDir: string): Handshake | null {
  try {
    return JSON.parse(readFileSync(handshakePath(dataDir), "utf8")) as Handshake;
  } catch {
    return null;
  }
}

/** Remove the handshake, but only if it is still ours (a newer instance may have replaced it). */
export function removeHandshake(dataDir: string, pid = process.pid): void {
  const h = readHandshake(dataDir);
  if (h && h.pid !== pid) return;
  try {
    unlinkSync(handshakePath(dataDir));
  } catch {}
}

export function pidAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: the process exists but belongs to someone else
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

export class AlreadyRunningError extends Error {
  constructor(readonly pid: number, dataDir: string) {
    super(`tapwire is already running on data directory ${dataDir} (pid ${pid}); stop it first or use another --data-dir`);
  }
}

/**
 * One instance per data directory: an exclusively created lock file holding our pid.
 * A lock (or handshake) left by a dead process (kill -9, crash) is stale and replaced.
 */
export function acquireInstanceLock(dataDir: string): () => void {
  const path = join(dataDir, LOCK_FILE);
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      const fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => {
        try {
          if (readFileSync(path, "utf8").trim() === String(process.pid)) unlinkSync(path);
        } catch {}
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    }
    let holder = NaN;
    try {
      holder = Number.parseInt(readFileSync(path, "utf8").trim(), 10);
    } catch {}
    if (Number.isInteger(holder) && holder !== process.pid && pidAlive(holder)) throw new AlreadyRunningError(holder, dataDir);
    // stale: the holder is gone (or the file is empty because it died mid-write)
    try {
      unlinkSync(path);
    } catch {}
    const stale = readHandshake(dataDir);
    if (stale && !pidAlive(stale.pid) && existsSync(handshakePath(dataDir))) {
      try {
        unlinkSync(handshakePath(dataDir));
      } catch {}
    }
  }
  throw new Error(`could not take the instance lock ${path}`);
}
