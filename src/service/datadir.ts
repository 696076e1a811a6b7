import { chmodSync, mkdirSync } from "node:fs";
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
