import { existsSync, readFileSync, statSync } from "node:fs";
import type { Log } from "../../service/feature.ts";
import { badRequest } from "../../api/errors.ts";
import { resolveRemotePath, type RemoteBackend } from "./backend.ts";
import { isEncrypted, parseConnectionsFile, type ConnectionConfig } from "./config.ts";
import { RemoteError } from "./errors.ts";
import { LazyBackend } from "./backends/index.ts";

export type ConnectionState = "idle" | "connecting" | "connected" | "error";

/** GET /remote-fs/connections item: spec 2.16 plus the extensions state and last_error. */
export interface ConnectionView {
  id: string;
  protocol: string;
  host: string;
  label: string;
  homePath: string;
  encrypted: boolean;
  state: ConnectionState;
  last_error: { code: string; message: string } | null;
}

/** A connection's backend; its protocol's module is loaded on first use (backends/index.ts). */
export function createBackend(c: ConnectionConfig, env: Record<string, string | undefined>): RemoteBackend {
  return new LazyBackend(c, env);
}

/** One configured connection: its backend, opened on first use and again after a drop. */
export class RemoteConnection {
  state: ConnectionState = "idle";
  lastError: RemoteError | null = null;
  private home: string | null = null;

  constructor(readonly config: ConnectionConfig, readonly backend: RemoteBackend) {}

  view(): ConnectionView {
    const c = this.config;
    const state = this.state === "connected" && !this.backend.connected ? "idle" : this.state;
    return {
      id: c.id,
      protocol: c.protocol,
      host: c.host,
      label: c.label,
      homePath: c.homePath,
      encrypted: isEncrypted(c),
      state,
      last_error: this.lastError ? { code: this.lastError.code, message: this.lastError.message } : null,
    };
  }

  private async ensureOpen(): Promise<void> {
    if (this.backend.connected) return;
    this.state = "connecting";
    try {
      await this.backend.connect();
      this.state = "connected";
      this.lastError = null;
    } catch (e) {
      this.state = "error";
      this.lastError = e instanceof RemoteError ? e : new RemoteError("io", String((e as Error)?.message ?? e));
      throw this.lastError;
    }
  }

  /** The absolute remote path of a caller's path (relative paths start at homePath, else the login folder). */
  async resolve(path: string): Promise<string> {
    if (path.startsWith("/")) return resolveRemotePath(path, "/");
    if (this.home === null) {
      await this.ensureOpen();
      this.home = this.config.homePath ? resolveRemotePath(this.config.homePath, await this.backend.home()) : await this.backend.home();
    }
    return resolveRemotePath(path, this.home);
  }

  /**
   * Runs an operation on the open backend. When the session dropped under it (hostUnreachable once connected), it
   * reconnects once and runs the operation again (unless `retry` is false: an upload's stream
   * cannot be read twice).
   */
  async run<T>(fn: (b: RemoteBackend) => Promise<T>, retry = true): Promise<T> {
    await this.ensureOpen();
    try {
      const v = await fn(this.backend);
      this.lastError = null;
      return v;
    } catch (e) {
      const err = e instanceof RemoteError ? e : new RemoteError("io", String((e as Error)?.message ?? e));
      if (retry && err.remoteCode === "hostUnreachable") {
        // the session dropped under the operation (perhaps before the backend noticed): a fresh one, and once more
        await this.backend.close().catch(() => {});
        await this.ensureOpen();
        return fn(this.backend);
      }
      if (err.remoteCode === "hostUnreachable" || err.remoteCode === "auth" || err.remoteCode === "hostKeyRejected") {
        this.state = "error";
        this.lastError = err;
      }
      throw err;
    }
  }

  close(): Promise<void> {
    this.state = "idle";
    return this.backend.close().catch(() => {});
  }
}

/**
 * The connections of remote-connections.json in the data directory. The file is read at start, re-read when it
 * changes (polled twice a second: fs.watch misses atomic replaces on some systems) and on `reload()`. A file that
 * does not parse keeps the previous connections in force and is reported.
 */
export class RemoteConnections {
  private conns = new Map<string, RemoteConnection>();
  private stamp = "";
  private timer: ReturnType<typeof setInterval> | null = null;
  loadError: string | null = null;

  constructor(
    readonly file: string,
    private readonly env: Record<string, string | undefined>,
    private readonly log: Log,
  ) {}

  private fileStamp(): string {
    try {
      const st = statSync(this.file);
      return `${st.ino}:${st.size}:${st.mtimeMs}`;
    } catch {
      return "missing";
    }
  }

  /** Reads the file now; throws an Error naming the problem when it is invalid (the old connections stay). */
  reload(): ConnectionView[] {
    this.stamp = this.fileStamp();
    const configs = existsSync(this.file) ? parseConnectionsFile(readFileSync(this.file, "utf8")) : [];
    const next = new Map<string, RemoteConnection>();
    for (const c of configs) {
      const old = this.conns.get(c.id);
      if (old && JSON.stringify(old.config) === JSON.stringify(c)) next.set(c.id, old);
      else next.set(c.id, new RemoteConnection(c, createBackend(c, this.env)));
    }
    for (const [id, old] of this.conns) if (next.get(id) !== old) void old.close();
    this.conns = next;
    this.loadError = null;
    return this.list();
  }

  /** reload() that logs instead of throwing (start-up and the file watcher). */
  reloadQuietly(): void {
    try {
      this.reload();
    } catch (e) {
      this.loadError = (e as Error).message;
      this.log(`tapwire: ${this.file}: ${this.loadError} (previous remote connections kept)`);
    }
  }

  /** reload() for the API: an invalid file is a 400 naming the problem. */
  reloadOrThrow(): ConnectionView[] {
    try {
      return this.reload();
    } catch (e) {
      this.loadError = (e as Error).message;
      throw badRequest(`${this.file}: ${this.loadError} (previous remote connections kept)`);
    }
  }

  watch(intervalMs = 500): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      if (this.fileStamp() !== this.stamp) this.reloadQuietly();
    }, intervalMs);
    this.timer.unref?.();
  }

  list(): ConnectionView[] {
    return [...this.conns.values()].map((c) => c.view());
  }

  get(id: string): RemoteConnection {
    const c = this.conns.get(id);
    if (!c) throw new RemoteError("notFound", `no remote connection '${id}' (connections come from ${this.file})`);
    return c;
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await Promise.all([...this.conns.values()].map((c) => c.close()));
  }
}
