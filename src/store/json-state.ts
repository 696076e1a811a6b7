import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, writeSync, unlinkSync, constants } from "node:fs";
import { dirname, basename, join } from "node:path";

/**
 * Write a file atomically: temp file beside the target, fsync, rename over the target, fsync the folder.
 * A reader (or a restart after kill -9) sees either the old or the new content, never a torn write.
 * durable false skips both fsyncs (the rename alone keeps readers from a torn file): for a file that means
 * nothing after the machine goes down, like the running process's handshake.
 */
export function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o600, durable = true): void {
  const tmp = join(dirname(path), `.${basename(path)}.${process.pid}.${Date.now()}.tmp`);
  const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, mode);
  try {
    const bytes = typeof data === "string" ? Buffer.from(data, "utf8") : data;
    let off = 0;
    while (off < bytes.length) off += writeSync(fd, bytes, off, bytes.length - off);
    if (durable) fsyncSync(fd);
  } catch (e) {
    closeSync(fd);
    try { unlinkSync(tmp); } catch {}
    throw e;
  }
  closeSync(fd);
  renameSync(tmp, path);
  if (durable && process.platform !== "win32") {
    try {
      const dfd = openSync(dirname(path), constants.O_RDONLY);
      try { fsyncSync(dfd); } finally { closeSync(dfd); }
    } catch {
      // fsync of a folder is best-effort (not supported everywhere)
    }
  }
}

export class StateFileError extends Error {}

export interface JsonStateOptions<T> {
  /** Value used when the file does not exist yet. */
  initial: () => T;
  /** Returns an error message when the parsed value has the wrong shape, else null. */
  validate?: (value: unknown) => string | null;
  /** Called when a corrupt file was moved aside (the service reports it on stderr). */
  onCorrupt?: (path: string, movedTo: string, reason: string) => void;
}

/**
 * One JSON document in the data directory, read at start and written atomically on every change.
 * A corrupt file is moved aside to `<name>.corrupt-<ms>` and reported, never silently reset.
 */
export class JsonState<T> {
  private value: T;
  /** Where a corrupt file was moved to at load time, if that happened. */
  readonly recoveredFrom: string | null = null;

  constructor(readonly path: string, private readonly opts: JsonStateOptions<T>) {
    if (!existsSync(path)) {
      this.value = opts.initial();
      return;
    }
    let reason: string | null = null;
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(path, "utf8"));
      reason = opts.validate ? opts.validate(parsed) : null;
    } catch (e) {
      reason = `not valid JSON (${(e as Error).message})`;
    }
    if (reason === null) {
      this.value = parsed as T;
      return;
    }
    const movedTo = `${path}.corrupt-${Date.now()}`;
    renameSync(path, movedTo);
    this.recoveredFrom = movedTo;
    opts.onCorrupt?.(path, movedTo, reason);
    this.value = opts.initial();
  }

  get(): T {
    return this.value;
  }

  /** Replace the value and persist it atomically before returning. */
  set(value: T): void {
    // the compact form first: with indentation Bun (1.4.5) takes seconds to give up on a cyclic value (each level
    // indented further until the stack runs out), the compact form throws within milliseconds
    JSON.stringify(value);
    writeFileAtomic(this.path, JSON.stringify(value, null, 2) + "\n", 0o600);
    this.value = value;
  }

  /** Apply a change to a copy and persist it; the in-memory value only changes once the write succeeded. */
  update(fn: (draft: T) => T): T {
    const next = fn(structuredClone(this.value));
    this.set(next);
    return next;
  }
}
