import { chmodSync, existsSync, mkdirSync, renameSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

/** The per-user data directory: --data-dir, then TAPWIRE_DATA_DIR, then the platform default. */
export function resolveDataDir(flag: string | undefined, env: Record<string, string | undefined> = process.env): string {
  if (flag) return flag;
  if (env.TAPWIRE_DATA_DIR) return env.TAPWIRE_DATA_DIR;
  return defaultDataDir(process.platform, env);
}

export function defaultDataDir(platform: NodeJS.Platform, env: Record<string, string | undefined>): string {
  const home = env.HOME || env.USERPROFILE || homedir();
  if (platform === "darwin") return join(home, "Library", "Application Support", "tapwire");
  if (platform === "win32") return join(env.APPDATA || join(home, "AppData", "Roaming"), "tapwire");
  return join(env.XDG_DATA_HOME || join(home, ".local", "share"), "tapwire");
}

/** Create the folder (and parents) with mode 0700; tighten an existing one we own. */
export function ensureDataDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (process.platform !== "win32") {
    try {
      chmodSync(dir, 0o700);
    } catch {
      // not ours to change (e.g. a shared folder given with --data-dir): leave it
    }
  }
}

/** The capture database's folder inside the data directory, and the database's file name in it. */
export const CAPTURE_DIR = "capture";
export const CAPTURE_DB = "capture.db";

/**
 * Creates `<dataDir>/capture` (mode 0700) and returns the capture database's path in it. The database has its own
 * folder so that its writes (the -wal and -shm files change with every batch) do not wake the watcher on the data
 * directory (throttle-rules.json, src/features/throttle/rules-file.ts).
 *
 * Migration from the old layout (`<dataDir>/capture.db`): when that file exists and the new one does not, it is moved
 * with the files that go with it (-wal, -shm, and the writer's `.journal` folder, which holds entries not yet in the
 * database). Call it with the instance lock held (no other process uses the files). The main file moves last, so an
 * interrupted move is finished by the next start. `moved` lists the names moved.
 */
export function prepareCaptureDb(dataDir: string): { path: string; moved: string[] } {
  const dir = join(dataDir, CAPTURE_DIR);
  ensureDataDir(dir);
  const path = join(dir, CAPTURE_DB);
  const old = join(dataDir, CAPTURE_DB);
  const moved: string[] = [];
  if (existsSync(old) && !existsSync(path)) {
    for (const suffix of [".journal", "-wal", "-shm", ""]) {
      try {
        renameSync(old + suffix, path + suffix);
        moved.push(CAPTURE_DB + suffix);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
      }
    }
  }
  return { path, moved };
}
