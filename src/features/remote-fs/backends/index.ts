/**
 * The backends by protocol, each module loaded when a connection of its protocol is first used.
 *
 * Their libraries (ssh2, @aws-sdk/client-s3 with lib-storage, webdav, basic-ftp) are large: imported eagerly they
 * cost the compiled binary about 50 ms of every start-up (`tapwire --version` 143-168 ms against 97-133 ms
 * without them, nine interleaved runs) and `tapwire start` about 65 ms, although most runs never open a remote
 * connection. A LazyBackend stands in for the real one: its first connect() imports the module (the bundler
 * keeps it in the binary; it is only evaluated then) and every call after that goes to the real backend.
 */
import type { Readable } from "node:stream";
import type { RemoteBackend, RemoteEntry } from "../backend.ts";
import type { ConnectionConfig, Protocol } from "../config.ts";
import { remoteError } from "../errors.ts";

type Env = Record<string, string | undefined>;
type BackendClass = new (c: ConnectionConfig, env: Env) => RemoteBackend;

const LOADERS: Record<Protocol, () => Promise<BackendClass>> = {
  sftp: async () => (await import("./sftp.ts")).SftpBackend,
  ftp: async () => (await import("./ftp.ts")).FtpBackend,
  ftps: async () => (await import("./ftp.ts")).FtpBackend,
  s3: async () => (await import("./s3.ts")).S3Backend,
  webdav: async () => (await import("./webdav.ts")).WebdavBackend,
};

/** A connection's backend: the protocol's module is imported by the first connect(). */
export class LazyBackend implements RemoteBackend {
  private inner: RemoteBackend | null = null;
  private loading: Promise<RemoteBackend> | null = null;

  constructor(private readonly config: ConnectionConfig, private readonly env: Env) {}

  private load(): Promise<RemoteBackend> {
    if (this.inner) return Promise.resolve(this.inner);
    this.loading ??= LOADERS[this.config.protocol]()
      .then((Backend) => (this.inner = new Backend(this.config, this.env)))
      .catch((e) => {
        this.loading = null;
        throw remoteError("io", `the ${this.config.protocol} backend failed to load: ${(e as Error)?.message ?? e}`);
      });
    return this.loading;
  }

  /** The real backend; only once connect() has loaded it (RemoteConnection runs every call after connect). */
  private get loaded(): RemoteBackend {
    if (!this.inner) throw remoteError("io", `the ${this.config.protocol} backend was used before connect()`);
    return this.inner;
  }

  get connected(): boolean {
    return this.inner?.connected ?? false;
  }

  get atomicWrite(): boolean {
    return this.loaded.atomicWrite;
  }

  async connect(): Promise<void> {
    await (await this.load()).connect();
  }

  home(): Promise<string> {
    return this.loaded.home();
  }

  list(path: string): Promise<RemoteEntry[]> {
    return this.loaded.list(path);
  }

  stat(path: string): Promise<RemoteEntry | null> {
    return this.loaded.stat(path);
  }

  mkdir(path: string): Promise<void> {
    return this.loaded.mkdir(path);
  }

  rename(from: string, to: string): Promise<void> {
    return this.loaded.rename(from, to);
  }

  replace(from: string, to: string): Promise<void> {
    return this.loaded.replace(from, to);
  }

  remove(path: string, isDir: boolean): Promise<void> {
    return this.loaded.remove(path, isDir);
  }

  read(path: string, offset: number, signal: AbortSignal): Promise<Readable | ReadableStream<Uint8Array>> {
    return this.loaded.read(path, offset, signal);
  }

  write(path: string, source: Readable, size: number, signal: AbortSignal): Promise<void> {
    return this.loaded.write(path, source, size, signal);
  }

  /** Nothing to close while the module was never loaded. */
  close(): Promise<void> {
    return this.inner ? this.inner.close() : Promise.resolve();
  }
}
