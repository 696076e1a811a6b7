import { posix } from "node:path";
import { Readable } from "node:stream";
import { Agent as HttpsAgent } from "node:https";
import { createClient, type FileStat, type WebDAVClient } from "webdav";
import { checkAborted, joinPath, type RemoteBackend, type RemoteEntry } from "../backend.ts";
import { readCaFile, resolvePassword, webdavUrl, type ConnectionConfig } from "../config.ts";
import { asRemoteError, remoteError, RemoteError } from "../errors.ts";

/** An HTTP status from the server as a wire code. */
function fromStatus(status: number, msg: string): RemoteError | null {
  if (status === 401) return remoteError("auth", msg);
  if (status === 403) return remoteError("permissionDenied", msg);
  if (status === 404 || status === 410) return remoteError("notFound", msg);
  // 409 Conflict on MKCOL/PUT/MOVE: a parent folder is missing
  if (status === 409) return remoteError("notFound", `${msg} (a parent folder is missing)`);
  if (status === 412) return remoteError("alreadyExists", msg);
  if (status === 405 || status === 501) return remoteError("unsupported", msg);
  if (status === 507) return remoteError("io", `${msg} (insufficient storage)`);
  if (status >= 400 && status < 500) return remoteError("protocol", msg);
  if (status >= 500) return remoteError("io", msg);
  return null;
}

function translate(e: unknown, what: string): RemoteError {
  if (e instanceof RemoteError) return e;
  const err = e as { status?: number; response?: { status?: number }; message?: string; name?: string };
  if (err?.name === "AbortError") return remoteError("cancelled", `${what}: cancelled`);
  const status = err?.status ?? err?.response?.status;
  const msg = `${what}: ${err?.message ?? String(e)}`;
  return (typeof status === "number" ? fromStatus(status, msg) : null) ?? asRemoteError(e, what);
}

/**
 * WebDAV over the `webdav` package for the folder operations (PROPFIND, MKCOL, MOVE, DELETE); transfers are plain
 * streamed GET and PUT with fetch (the package's upload progress never fires in Bun, and its stream helpers buffer).
 */
export class WebdavBackend implements RemoteBackend {
  readonly atomicWrite = true;
  private client: WebDAVClient | null = null;
  private readonly base: URL;
  private authHeader: string | undefined;
  private ca: string | undefined;

  constructor(private readonly conn: ConnectionConfig, private readonly env: Record<string, string | undefined>) {
    this.base = new URL(webdavUrl(conn));
    if (!this.base.pathname.endsWith("/")) this.base.pathname += "/";
  }

  get connected(): boolean {
    return this.client !== null;
  }

  async connect(): Promise<void> {
    if (this.client) return;
    const c = this.conn;
    const password = resolvePassword(c, this.env);
    this.ca = readCaFile(c);
    this.authHeader = c.username ? `Basic ${Buffer.from(`${c.username}:${password ?? ""}`).toString("base64")}` : undefined;
    const client = createClient(this.base.href, {
      username: c.username,
      password,
      httpsAgent: this.ca ? new HttpsAgent({ ca: this.ca }) : undefined,
    });
    try {
      // PROPFIND depth 0 of the root: checks the address, the certificate and the credentials on first use
      await client.stat("/");
    } catch (e) {
      throw translate(e, `webdav ${this.base.host}`);
    }
    this.client = client;
  }

  private get dav(): WebDAVClient {
    if (!this.client) throw remoteError("hostUnreachable", "webdav: not connected");
    return this.client;
  }

  async home(): Promise<string> {
    return "/";
  }

  private toEntry(dir: string, f: FileStat): RemoteEntry {
    const e: RemoteEntry = { name: f.basename, path: joinPath(dir, f.basename), isDir: f.type === "directory", size: f.type === "directory" ? 0 : Number(f.size ?? 0) };
    const ms = Date.parse(f.lastmod);
    if (!Number.isNaN(ms)) e.modifiedMs = ms;
    return e;
  }

  async list(path: string): Promise<RemoteEntry[]> {
    try {
      const st = (await this.dav.stat(path)) as FileStat;
      if (st.type !== "directory") throw remoteError("protocol", `list ${path}: it is a file, not a folder`);
      const items = (await this.dav.getDirectoryContents(path)) as FileStat[];
      return items.map((f) => this.toEntry(path, f));
    } catch (e) {
      throw translate(e, `list ${path}`);
    }
  }

  async stat(path: string): Promise<RemoteEntry | null> {
    try {
      const f = (await this.dav.stat(path)) as FileStat;
      return { ...this.toEntry(posix.dirname(path), f), name: posix.basename(path) || "/", path };
    } catch (e) {
      const t = translate(e, `stat ${path}`);
      if (t.remoteCode === "notFound" && !/parent/.test(t.message)) return null;
      throw t;
    }
  }

  async mkdir(path: string): Promise<void> {
    if (await this.stat(path)) throw remoteError("alreadyExists", `mkdir ${path}: it exists already`);
    const missing: string[] = [];
    for (let p = path; p !== "/" && !(await this.stat(p)); p = posix.dirname(p)) missing.unshift(p);
    try {
      for (const p of missing) await this.dav.createDirectory(p);
    } catch (e) {
      throw translate(e, `mkdir ${path}`);
    }
  }

  async rename(from: string, to: string): Promise<void> {
    if (!(await this.stat(from))) throw remoteError("notFound", `rename: ${from} does not exist`);
    if (await this.stat(to)) throw remoteError("alreadyExists", `rename: ${to} exists already`);
    try {
      await this.dav.moveFile(from, to, { overwrite: false });
    } catch (e) {
      throw translate(e, `rename ${from}`);
    }
  }

  async replace(from: string, to: string): Promise<void> {
    try {
      await this.dav.moveFile(from, to, { overwrite: true });
    } catch (e) {
      throw translate(e, `rename ${from}`);
    }
  }

  async remove(path: string, _isDir: boolean): Promise<void> {
    if (path === "/") throw remoteError("permissionDenied", "delete: refusing to delete /");
    if (!(await this.stat(path))) throw remoteError("notFound", `delete: ${path} does not exist`);
    try {
      // DELETE of a collection removes it with everything inside (RFC 4918 9.6.1)
      await this.dav.deleteFile(path);
    } catch (e) {
      throw translate(e, `delete ${path}`);
    }
  }

  private url(path: string): string {
    return new URL(path.split("/").map(encodeURIComponent).join("/").replace(/^\//, ""), this.base).href;
  }

  private fetchInit(init: RequestInit & { headers: Record<string, string> }): RequestInit {
    if (this.authHeader) init.headers.authorization = this.authHeader;
    return { ...init, ...(this.ca ? { tls: { ca: this.ca } } : {}) } as RequestInit;
  }

  async read(path: string, offset: number, signal: AbortSignal): Promise<Readable | ReadableStream<Uint8Array>> {
    checkAborted(signal);
    let res: Response;
    try {
      res = await fetch(this.url(path), this.fetchInit({ method: "GET", headers: offset > 0 ? { range: `bytes=${offset}-` } : {}, signal }));
    } catch (e) {
      throw signal.aborted ? remoteError("cancelled", "transfer cancelled") : translate(e, `download ${path}`);
    }
    if (res.status === 416) return Readable.from([]);
    if (!res.ok) {
      await res.body?.cancel().catch(() => {});
      throw fromStatus(res.status, `download ${path}: HTTP ${res.status}`) ?? remoteError("protocol", `download ${path}: HTTP ${res.status}`);
    }
    if (offset > 0 && res.status !== 206) {
      await res.body?.cancel().catch(() => {});
      throw remoteError("unsupported", `download ${path}: the server ignored the Range request (cannot resume)`);
    }
    if (!res.body) return Readable.from([]);
    return res.body;
  }

  async write(path: string, source: Readable, size: number, signal: AbortSignal): Promise<void> {
    checkAborted(signal);
    let res: Response;
    try {
      res = await fetch(
        this.url(path),
        this.fetchInit({
          method: "PUT",
          headers: { "content-length": String(size), "content-type": "application/octet-stream" },
          body: size === 0 ? "" : (Readable.toWeb(source) as never),
          signal,
          duplex: "half",
        } as never),
      );
    } catch (e) {
      throw signal.aborted ? remoteError("cancelled", "transfer cancelled") : translate(e, `upload ${path}`);
    }
    await res.body?.cancel().catch(() => {});
    if (!res.ok) throw fromStatus(res.status, `upload ${path}: HTTP ${res.status}`) ?? remoteError("protocol", `upload ${path}: HTTP ${res.status}`);
  }

  async close(): Promise<void> {
    this.client = null;
  }
}

