import type { Readable } from "node:stream";
import { posix } from "node:path";
import { remoteError } from "./errors.ts";

/** One entry of a remote folder listing (spec 2.17). */
export interface RemoteEntry {
  name: string;
  /** Absolute path on the remote side. */
  path: string;
  isDir: boolean;
  size: number;
  modifiedMs?: number;
  permissions?: string;
  owner?: string;
  symlinkTarget?: string;
}

/**
 * What every protocol implements (the rclone idea: one interface, one conformance suite). Paths given to a backend
 * are absolute, normalised POSIX paths (`/a/b`); `resolveRemotePath` makes them. Every method throws only
 * RemoteError (section-7 wire codes): each backend translates its native errors at this boundary.
 */
export interface RemoteBackend {
  /** Opens the session if needed (called on first use and again after a drop). */
  connect(): Promise<void>;
  /** True while the session is believed open. */
  readonly connected: boolean;
  /** The folder a relative path starts from when the connection has no homePath (the login folder; `/` otherwise). */
  home(): Promise<string>;
  list(path: string): Promise<RemoteEntry[]>;
  /** The entry at `path`, or null when nothing is there. */
  stat(path: string): Promise<RemoteEntry | null>;
  /** Creates `path` and any missing parents; alreadyExists when `path` itself exists. */
  mkdir(path: string): Promise<void>;
  /** Renames or moves; notFound when `from` is missing, alreadyExists when `to` exists (never overwrites). */
  rename(from: string, to: string): Promise<void>;
  /**
   * Renames `from` onto `to`, replacing `to` if it exists (used to put a finished upload in place).
   */
  replace(from: string, to: string): Promise<void>;
  /** Deletes a file, or a folder with everything under it; notFound when nothing is there. */
  remove(path: string, isDir: boolean): Promise<void>;
  /**
   * A stream of the file's bytes from `offset`; destroying it (or aborting `signal`) stops the transfer. A web
   * ReadableStream (a fetch body) is read as it is: converting it to a Node stream halves a fast download.
   */
  read(path: string, offset: number, signal: AbortSignal): Promise<Readable | ReadableStream<Uint8Array>>;
  /** Writes `source` (of `size` bytes) to `path`, creating or truncating it; resolves once the remote side has it all. */
  write(path: string, source: Readable, size: number, signal: AbortSignal): Promise<void>;
  /** Whether `replace` works on this backend (S3 uploads are atomic by themselves and write in place). */
  readonly atomicWrite: boolean;
  close(): Promise<void>;
}

/** Normalises a caller's path: absolute paths stay, relative ones start at `home`; `..` cannot climb above `/`. */
export function resolveRemotePath(path: string, home: string): string {
  if (typeof path !== "string") throw remoteError("protocol", "path must be a string");
  if (path.includes("\0")) throw remoteError("protocol", "path must not contain NUL");
  const joined = path.startsWith("/") ? path : posix.join(home || "/", path);
  const n = posix.normalize("/" + joined);
  return n.length > 1 && n.endsWith("/") ? n.slice(0, -1) : n;
}

export function joinPath(dir: string, name: string): string {
  return dir === "/" ? `/${name}` : `${dir}/${name}`;
}

/** An octal mode as ls shows it (`drwxr-xr-x`). */
export function modeString(mode: number): string {
  const type = (mode & 0o170000) === 0o040000 ? "d" : (mode & 0o170000) === 0o120000 ? "l" : "-";
  const bits = "rwxrwxrwx";
  let s = type;
  for (let i = 0; i < 9; i++) s += mode & (1 << (8 - i)) ? bits[i] : "-";
  return s;
}

/** Throws `cancelled` when the signal was aborted. */
export function checkAborted(signal: AbortSignal): void {
  if (signal.aborted) throw remoteError("cancelled", "transfer cancelled");
}
