import { posix } from "node:path";
import { Readable, Writable } from "node:stream";
import { Client, FTPError, FileType, type FileInfo } from "basic-ftp";
import { checkAborted, joinPath, type RemoteBackend, type RemoteEntry } from "../backend.ts";
import { readCaFile, resolvePassword, type ConnectionConfig } from "../config.ts";
import { asRemoteError, remoteError, RemoteError } from "../errors.ts";

const MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];

/**
 * The date of a Unix-style LIST line ("Nov 25 22:10", recent, or "Nov 25  2025"), read as UTC (vsftpd's default).
 * vsftpd has no MLSD, so this is the only date a listing carries.
 */
export function parseListDate(raw: string | undefined, now = new Date()): number | undefined {
  if (!raw) return undefined;
  const m = /^([A-Za-z]{3})\s+(\d{1,2})\s+(?:(\d{1,2}):(\d{2})|(\d{4}))$/.exec(raw.trim());
  if (!m) return undefined;
  const month = MONTHS.indexOf(m[1]!.toLowerCase());
  if (month < 0) return undefined;
  const day = Number(m[2]);
  if (m[5]) return Date.UTC(Number(m[5]), month, day);
  let year = now.getUTCFullYear();
  let t = Date.UTC(year, month, day, Number(m[3]), Number(m[4]));
  // a time instead of a year means "within the last six months": a date ahead of now is last year's
  if (t > now.getTime() + 86_400_000) t = Date.UTC(--year, month, day, Number(m[3]), Number(m[4]));
  return t;
}

function permissionString(f: FileInfo): string | undefined {
  const p = f.permissions;
  if (!p) return undefined;
  const bits = (n: number) => `${n & 4 ? "r" : "-"}${n & 2 ? "w" : "-"}${n & 1 ? "x" : "-"}`;
  return `${f.isDirectory ? "d" : f.isSymbolicLink ? "l" : "-"}${bits(p.user)}${bits(p.group)}${bits(p.world)}`;
}

/** basic-ftp's errors as wire codes: FTP reply codes first, then the network. */
function translate(e: unknown, what: string): RemoteError {
  if (e instanceof RemoteError) return e;
  const msg = `${what}: ${(e as Error)?.message ?? String(e)}`;
  if (e instanceof FTPError) {
    const code = e.code;
    if (code === 530 || code === 331 || code === 332) return remoteError("auth", msg);
    if (code === 550) {
      if (/permission|denied|not allowed/i.test(e.message)) return remoteError("permissionDenied", msg);
      if (/exist/i.test(e.message) && !/not exist|doesn't exist/i.test(e.message)) return remoteError("alreadyExists", msg);
      return remoteError("notFound", msg);
    }
    if (code === 553 || code === 532) return remoteError("permissionDenied", msg);
    if (code === 421) return remoteError("hostUnreachable", msg);
    if (code === 502 || code === 504 || code === 522) return remoteError("unsupported", msg);
    if (code === 500 || code === 501 || code === 503) return remoteError("protocol", msg);
    return remoteError("io", msg);
  }
  if (/User cannot log in|Login incorrect|530/i.test(msg)) return remoteError("auth", msg);
  if (/Client is closed|FIN packet|ECONNRESET|EPIPE|socket hang up/i.test(msg) && !/SSL|TLS/.test(msg)) {
    return remoteError("hostUnreachable", `${what}: the FTP connection was lost (${(e as Error)?.message})`);
  }
  return asRemoteError(e, what);
}

/**
 * FTP and FTPS over basic-ftp. One control connection runs the folder operations one at a time (FTP has one
 * command in flight per connection); every transfer opens a connection of its own, as FileZilla does, so two
 * transfers and a listing can run side by side.
 */
export class FtpBackend implements RemoteBackend {
  readonly atomicWrite = true;
  private client: Client | null = null;
  private opening: Promise<Client> | null = null;
  private chain: Promise<unknown> = Promise.resolve();
  private loginDir = "/";

  constructor(private readonly conn: ConnectionConfig, private readonly env: Record<string, string | undefined>) {}

  get connected(): boolean {
    return this.client !== null && !this.client.closed;
  }

  async connect(): Promise<void> {
    if (this.connected) return;
    this.opening ??= this.open().finally(() => (this.opening = null));
    const c = await this.opening;
    this.client = c;
    this.loginDir = await c.pwd().catch(() => "/");
  }

  private async open(): Promise<Client> {
    const c = this.conn;
    const secure = c.protocol === "ftps" ? (c.options.secure ?? "explicit") : c.options.secure;
    const ca = readCaFile(c);
    const password = resolvePassword(c, this.env);
    const client = new Client(30_000);
    try {
      await client.access({
        host: c.host,
        port: c.port ?? (secure === "implicit" ? 990 : 21),
        user: c.username,
        password: password ?? "",
        secure: secure === "implicit" ? "implicit" : secure === "explicit",
        // TLS 1.2 at most: under TLS 1.3, Bun 1.4.5 closes a data connection that carried no bytes (an empty
        // upload) with a record vsftpd rejects (TLSV1_ALERT_DECODE_ERROR); certificates are verified either way
        secureOptions: secure
          ? { ca: ca ? [ca] : undefined, servername: /^[\d.:]+$/.test(c.host) ? undefined : c.host, rejectUnauthorized: true, maxVersion: "TLSv1.2" }
          : undefined,
      });
    } catch (e) {
      client.close();
      throw translate(e, `${c.protocol} ${c.host}:${c.port ?? 21}`);
    }
    return client;
  }

  /** Runs `fn` on the control connection, one operation at a time. */
  private run<T>(what: string, fn: (c: Client) => Promise<T>): Promise<T> {
    const next = this.chain.then(async () => {
      await this.connect();
      try {
        return await fn(this.client!);
      } catch (e) {
        throw translate(e, what);
      }
    });
    this.chain = next.catch(() => {});
    return next;
  }

  async home(): Promise<string> {
    return this.loginDir;
  }

  private toEntry(dir: string, f: FileInfo): RemoteEntry {
    const e: RemoteEntry = { name: f.name, path: joinPath(dir, f.name), isDir: f.isDirectory, size: f.isDirectory ? 0 : f.size };
    const ms = f.modifiedAt?.getTime() ?? parseListDate(f.rawModifiedAt);
    if (ms !== undefined && !Number.isNaN(ms)) e.modifiedMs = ms;
    const perm = permissionString(f);
    if (perm) e.permissions = perm;
    if (f.user) e.owner = f.user;
    if (f.type === FileType.SymbolicLink && f.link) e.symlinkTarget = f.link;
    return e;
  }

  /** LIST of a folder after changing into it: vsftpd answers LIST of a missing path with an empty listing. */
  private async listIn(c: Client, path: string): Promise<FileInfo[]> {
    await c.cd(path);
    return (await c.list()).filter((f) => f.name !== "." && f.name !== "..");
  }

  list(path: string): Promise<RemoteEntry[]> {
    return this.run(`list ${path}`, async (c) => (await this.listIn(c, path)).map((f) => this.toEntry(path, f)));
  }

  private async statWith(c: Client, path: string): Promise<RemoteEntry | null> {
    if (path === "/") return { name: "/", path: "/", isDir: true, size: 0 };
    let items: FileInfo[];
    try {
      items = await this.listIn(c, posix.dirname(path));
    } catch (e) {
      if (e instanceof FTPError && e.code === 550) return null;
      throw e;
    }
    const f = items.find((x) => x.name === posix.basename(path));
    return f ? this.toEntry(posix.dirname(path), f) : null;
  }

  stat(path: string): Promise<RemoteEntry | null> {
    return this.run(`stat ${path}`, (c) => this.statWith(c, path));
  }

  mkdir(path: string): Promise<void> {
    return this.run(`mkdir ${path}`, async (c) => {
      if (await this.statWith(c, path)) throw remoteError("alreadyExists", `mkdir ${path}: it exists already`);
      const missing: string[] = [];
      for (let p = path; p !== "/" && !(await this.statWith(c, p)); p = posix.dirname(p)) missing.unshift(p);
      for (const p of missing) await c.send(`MKD ${p}`);
    });
  }

  rename(from: string, to: string): Promise<void> {
    return this.run(`rename ${from}`, async (c) => {
      if (!(await this.statWith(c, from))) throw remoteError("notFound", `rename: ${from} does not exist`);
      if (await this.statWith(c, to)) throw remoteError("alreadyExists", `rename: ${to} exists already`);
      await c.rename(from, to);
    });
  }

  replace(from: string, to: string): Promise<void> {
    // RNFR/RNTO replaces an existing file on vsftpd and most Unix servers (rename(2))
    return this.run(`rename ${from}`, async (c) => void (await c.rename(from, to)));
  }

  remove(path: string, _isDir: boolean): Promise<void> {
    return this.run(`delete ${path}`, async (c) => {
      const st = await this.statWith(c, path);
      if (!st) throw remoteError("notFound", `delete: ${path} does not exist`);
      if (!st.isDir) {
        await c.remove(path);
        return;
      }
      if (path === "/") throw remoteError("permissionDenied", "delete: refusing to delete /");
      await this.removeTree(c, path);
    });
  }

  private async removeTree(c: Client, dir: string): Promise<void> {
    for (const f of await this.listIn(c, dir)) {
      const p = joinPath(dir, f.name);
      if (f.isDirectory) await this.removeTree(c, p);
      else await c.remove(p);
    }
    await c.send(`RMD ${dir}`);
  }

  async read(path: string, offset: number, signal: AbortSignal): Promise<Readable> {
    checkAborted(signal);
    const client = await this.open();
    // basic-ftp ends the stream it writes to even when the transfer fails: give it a sink of its own that hands each
    // chunk straight to `out` (no stream in between; its write completes once `out` wants more), and end or fail
    // `out` from the outcome
    let wantMore: (() => void) | null = null;
    const out = new Readable({
      highWaterMark: 256 * 1024,
      read() {
        const w = wantMore;
        wantMore = null;
        w?.();
      },
    });
    const sink = new Writable({
      highWaterMark: 256 * 1024,
      write(chunk, _enc, cb) {
        if (out.destroyed) return cb(remoteError("cancelled", "reader closed"));
        if (out.push(chunk)) cb();
        else wantMore = () => cb();
      },
      final(cb) {
        cb();
      },
    });
    const onAbort = () => client.close();
    signal.addEventListener("abort", onAbort);
    out.once("close", () => {
      if (!client.closed) client.close();
    });
    client
      .downloadTo(sink, path, offset)
      .then(() => out.push(null))
      .catch((e) => out.destroy(signal.aborted ? remoteError("cancelled", "transfer cancelled") : translate(e, `download ${path}`)))
      .finally(() => {
        signal.removeEventListener("abort", onAbort);
        client.close();
      });
    return out;
  }

  async write(path: string, source: Readable, size: number, signal: AbortSignal): Promise<void> {
    if (size === 0 && this.conn.protocol === "ftps") {
      // Bun 1.4.5 sometimes breaks a TLS data connection that carries no byte at all when the connection that
      // opened it closes right away (the server sees a bad record): an empty upload runs on the long-lived control
      // connection instead, and a failure of the empty data connection is checked against the file STOR created
      source.resume();
      for (let attempt = 1; ; attempt++) {
        try {
          return await this.run(`upload ${path}`, async (c) => void (await c.uploadFrom(Readable.from([]), path)));
        } catch (e) {
          if (!(e instanceof RemoteError) || e.remoteCode !== "io" || !/SSL|TLS|closed/i.test(e.message)) throw e;
          // STOR creates the file before any data flows: when it is there, empty, the upload has done its job
          const st = await this.stat(path).catch(() => null);
          if (st && !st.isDir && st.size === 0) return;
          if (attempt >= 3) throw e;
        }
      }
    }
    return this.writeOnce(path, source, signal);
  }

  private async writeOnce(path: string, source: Readable, signal: AbortSignal): Promise<void> {
    checkAborted(signal);
    const client = await this.open();
    const onAbort = () => client.close();
    signal.addEventListener("abort", onAbort);
    try {
      await client.uploadFrom(source, path);
    } catch (e) {
      throw signal.aborted ? remoteError("cancelled", "transfer cancelled") : translate(e, `upload ${path}`);
    } finally {
      signal.removeEventListener("abort", onAbort);
      client.close();
    }
  }

  async close(): Promise<void> {
    const c = this.client;
    this.client = null;
    c?.close();
  }
}
