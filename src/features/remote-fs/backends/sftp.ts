import { createHash, createHmac } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join, posix } from "node:path";
import { Readable } from "node:stream";
import { Client, type SFTPWrapper, type FileEntryWithStats, type Stats } from "ssh2";
import { checkAborted, joinPath, modeString, type RemoteBackend, type RemoteEntry } from "../backend.ts";
import { resolvePassword, secretFromEnv, secretFromFile, type ConnectionConfig } from "../config.ts";
import { asRemoteError, networkError, remoteError, RemoteError } from "../errors.ts";

/** SFTP status codes (draft-ietf-secsh-filexfer-02), as ssh2 reports them in `err.code`. */
const SFTP_STATUS = { EOF: 1, NO_SUCH_FILE: 2, PERMISSION_DENIED: 3, FAILURE: 4, BAD_MESSAGE: 5, NO_CONNECTION: 6, CONNECTION_LOST: 7, OP_UNSUPPORTED: 8 };
/** Bytes per read/write request and how many are in flight at once (OpenSSH's sftp uses 32 KiB x 64). */
const CHUNK = 64 * 1024;
const IN_FLIGHT = 32;

/** The fingerprint `ssh-keygen -lf` prints for a public key blob: SHA256:<base64 without padding>. */
export function sshFingerprint(keyBlob: Buffer): string {
  return "SHA256:" + createHash("sha256").update(keyBlob).digest("base64").replace(/=+$/, "");
}

/** Whether a known_hosts host field (patterns, [host]:port, hashed |1|salt|hash) names this host and port. */
function knownHostsMatches(field: string, host: string, port: number): boolean {
  const names = port === 22 ? [host, `[${host}]:22`] : [`[${host}]:${port}`];
  if (field.startsWith("|1|")) {
    const [, , salt, hash] = field.split("|");
    if (!salt || !hash) return false;
    return names.some((n) => createHmac("sha1", Buffer.from(salt, "base64")).update(n).digest("base64") === hash);
  }
  let matched = false;
  for (const pat of field.split(",")) {
    const negated = pat.startsWith("!");
    const p = negated ? pat.slice(1) : pat;
    const re = new RegExp("^" + p.replace(/[.+^${}()|\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".").replace(/\[/g, "\\[").replace(/\]/g, "\\]") + "$", "i");
    if (names.some((n) => re.test(n))) {
      if (negated) return false;
      matched = true;
    }
  }
  return matched;
}

/** The key blobs (base64) known_hosts lists for host:port; markers (@revoked) make a key unacceptable. */
export function knownHostKeys(text: string, host: string, port: number): { accepted: string[]; revoked: string[] } {
  const accepted: string[] = [];
  const revoked: string[] = [];
  for (const line of text.split(/\r?\n/)) {
    const t = line.trim();
    if (!t || t.startsWith("#")) continue;
    const parts = t.split(/\s+/);
    let marker = "";
    if (parts[0]!.startsWith("@")) marker = parts.shift()!;
    const [hosts, , key] = parts;
    if (!hosts || !key || !knownHostsMatches(hosts, host, port)) continue;
    if (marker === "@revoked") revoked.push(key);
    else if (marker === "") accepted.push(key);
  }
  return { accepted, revoked };
}

/** ssh2's error for a failed SFTP request, a transport failure, or anything else, as a wire code. */
function translate(e: unknown, what: string): RemoteError {
  if (e instanceof RemoteError) return e;
  const err = e as { code?: unknown; level?: string; message?: string };
  const msg = `${what}: ${err?.message ?? String(e)}`;
  if (typeof err?.code === "number") {
    switch (err.code) {
      case SFTP_STATUS.NO_SUCH_FILE:
        return remoteError("notFound", msg);
      case SFTP_STATUS.PERMISSION_DENIED:
        return remoteError("permissionDenied", msg);
      case SFTP_STATUS.OP_UNSUPPORTED:
        return remoteError("unsupported", msg);
      case SFTP_STATUS.BAD_MESSAGE:
        return remoteError("protocol", msg);
      case SFTP_STATUS.NO_CONNECTION:
      case SFTP_STATUS.CONNECTION_LOST:
        return remoteError("hostUnreachable", msg);
      default:
        return remoteError("io", msg);
    }
  }
  if (/No response from server|Channel (?:closed|not open)|Not connected|Unable to start subsystem|socket|ECONNRESET/i.test(String(err?.message))) {
    return remoteError("hostUnreachable", `${what}: the SSH session was lost (${err?.message})`);
  }
  if (err?.level === "client-authentication") return remoteError("auth", `${what}: authentication failed (${err.message})`);
  if (err?.level === "protocol" || err?.level === "handshake") return remoteError("protocol", msg);
  return asRemoteError(e, what);
}

/** SFTP over ssh2: one SSH session per connection; SFTP requests are pipelined for throughput. */
export class SftpBackend implements RemoteBackend {
  readonly atomicWrite = true;
  private client: Client | null = null;
  private sftp: SFTPWrapper | null = null;
  private opening: Promise<void> | null = null;
  private loginDir = "/";

  constructor(private readonly conn: ConnectionConfig, private readonly env: Record<string, string | undefined>) {}

  get connected(): boolean {
    return this.sftp !== null;
  }

  connect(): Promise<void> {
    if (this.sftp) return Promise.resolve();
    this.opening ??= this.open().finally(() => (this.opening = null));
    return this.opening;
  }

  private async open(): Promise<void> {
    const c = this.conn;
    const port = c.port ?? 22;
    const verify = this.hostVerifier(port);
    const auth: Record<string, unknown> = { username: c.username };
    if (c.auth.key_file) {
      auth.privateKey = readFileSync(c.auth.key_file);
      if (c.auth.passphrase_env) auth.passphrase = secretFromEnv(c.auth.passphrase_env, this.env, `connection '${c.id}' key passphrase`);
    }
    if (c.auth.ssh_agent) {
      const sock = this.env.SSH_AUTH_SOCK;
      if (!sock) throw remoteError("auth", `connection '${c.id}': auth.ssh_agent is set but SSH_AUTH_SOCK is not`);
      auth.agent = sock;
    }
    const password = resolvePassword(c, this.env);
    if (password !== undefined) auth.password = password;
    if (c.auth.key_file === undefined && !c.auth.ssh_agent && password === undefined) {
      throw remoteError("auth", `connection '${c.id}': auth names no password, key or agent`);
    }
    let rejected: string | null = null;
    const client = new Client();
    await new Promise<void>((resolve, reject) => {
      const fail = (e: unknown) => {
        client.removeAllListeners("ready");
        client.end();
        if (rejected) return reject(remoteError("hostKeyRejected", rejected));
        reject(translate(e, `sftp ${c.host}:${port}`));
      };
      client.once("ready", () => {
        client.removeListener("error", fail);
        resolve();
      });
      client.once("error", fail);
      client.once("close", () => fail(new Error("connection closed during the handshake")));
      client.connect({
        host: c.host,
        port,
        readyTimeout: 15_000,
        keepaliveInterval: 15_000,
        hostVerifier: (key: Buffer) => {
          const why = verify(key);
          if (why) rejected = why;
          return why === null;
        },
        ...auth,
      } as never);
    });
    client.removeAllListeners("close");
    const sftp = await new Promise<SFTPWrapper>((resolve, reject) =>
      client.sftp((err, s) => (err ? reject(translate(err, "sftp subsystem")) : resolve(s))),
    );
    const drop = () => {
      if (this.client === client) {
        this.client = null;
        this.sftp = null;
      }
    };
    client.on("close", drop);
    client.on("error", drop);
    sftp.on("close", drop);
    this.client = client;
    this.sftp = sftp;
    this.loginDir = await new Promise<string>((resolve) => sftp.realpath(".", (err, p) => resolve(err ? "/" : p)));
  }

  /** Returns null when the key is acceptable, else why not. Nothing unknown is ever trusted. */
  private hostVerifier(port: number): (key: Buffer) => string | null {
    const c = this.conn;
    const pinned = c.options.host_fingerprint;
    const file = c.options.known_hosts ?? (pinned ? undefined : join(homedir(), ".ssh", "known_hosts"));
    const text = file && existsSync(file) ? readFileSync(file, "utf8") : null;
    return (key) => {
      const fp = sshFingerprint(key);
      if (pinned) {
        return fp === pinned.replace(/=$/, "") ? null : `host key of ${c.host}:${port} is ${fp}, not the pinned ${pinned}`;
      }
      if (text === null) return `host key of ${c.host}:${port} (${fp}) cannot be checked: ${file} does not exist; pin it with options.host_fingerprint`;
      const { accepted, revoked } = knownHostKeys(text, c.host, port);
      const b64 = key.toString("base64");
      if (revoked.includes(b64)) return `host key of ${c.host}:${port} (${fp}) is marked @revoked in ${file}`;
      if (accepted.includes(b64)) return null;
      return accepted.length
        ? `host key of ${c.host}:${port} changed: it is ${fp}, not the key listed in ${file}`
        : `host key of ${c.host}:${port} (${fp}) is not in ${file}`;
    };
  }

  private get s(): SFTPWrapper {
    if (!this.sftp) throw remoteError("hostUnreachable", `sftp ${this.conn.host}: not connected`);
    return this.sftp;
  }

  private call<T>(what: string, fn: (s: SFTPWrapper, cb: (err: Error | undefined | null, v?: T) => void) => void): Promise<T> {
    const s = this.s;
    return new Promise<T>((resolve, reject) => fn(s, (err, v) => (err ? reject(translate(err, what)) : resolve(v as T))));
  }

  async home(): Promise<string> {
    return this.loginDir;
  }

  private entry(dir: string, name: string, attrs: Stats, longname?: string): RemoteEntry {
    const e: RemoteEntry = {
      name,
      path: joinPath(dir, name),
      isDir: attrs.isDirectory(),
      size: attrs.isDirectory() ? 0 : Number(attrs.size ?? 0),
      modifiedMs: attrs.mtime ? attrs.mtime * 1000 : undefined,
      permissions: attrs.mode !== undefined ? modeString(attrs.mode) : undefined,
    };
    if (longname) {
      const owner = longname.split(/\s+/)[2];
      if (owner) e.owner = owner;
    } else if (attrs.uid !== undefined) e.owner = String(attrs.uid);
    return e;
  }

  async list(path: string): Promise<RemoteEntry[]> {
    const items = await this.call<FileEntryWithStats[]>(`list ${path}`, (s, cb) => s.readdir(path, cb as never));
    const out: RemoteEntry[] = [];
    for (const it of items) {
      if (it.filename === "." || it.filename === "..") continue;
      const e = this.entry(path, it.filename, it.attrs as Stats, it.longname);
      if (it.attrs.isSymbolicLink()) {
        e.symlinkTarget = await this.call<string>("readlink", (s, cb) => s.readlink(e.path, cb as never)).catch(() => undefined);
        const target = await this.call<Stats>("stat", (s, cb) => s.stat(e.path, cb as never)).catch(() => null);
        if (target) {
          e.isDir = target.isDirectory();
          e.size = e.isDir ? 0 : Number(target.size ?? 0);
        }
      }
      out.push(e);
    }
    return out;
  }

  async stat(path: string): Promise<RemoteEntry | null> {
    try {
      const st = await this.call<Stats>(`stat ${path}`, (s, cb) => s.stat(path, cb as never));
      return this.entry(posix.dirname(path), posix.basename(path) || "/", st);
    } catch (e) {
      if (e instanceof RemoteError && e.remoteCode === "notFound") return null;
      throw e;
    }
  }

  async mkdir(path: string): Promise<void> {
    if (await this.stat(path)) throw remoteError("alreadyExists", `mkdir ${path}: it exists already`);
    const missing: string[] = [];
    for (let p = path; p !== "/" && !(await this.stat(p)); p = posix.dirname(p)) missing.unshift(p);
    for (const p of missing) await this.call(`mkdir ${p}`, (s, cb) => s.mkdir(p, cb));
  }

  async rename(from: string, to: string): Promise<void> {
    if (!(await this.stat(from))) throw remoteError("notFound", `rename: ${from} does not exist`);
    if (await this.stat(to)) throw remoteError("alreadyExists", `rename: ${to} exists already`);
    await this.call(`rename ${from}`, (s, cb) => s.rename(from, to, cb));
  }

  async replace(from: string, to: string): Promise<void> {
    // posix-rename@openssh.com replaces the target atomically; plain SFTP v3 rename refuses an existing target
    try {
      await this.call(`rename ${from}`, (s, cb) => s.ext_openssh_rename(from, to, cb));
    } catch (e) {
      if (!(e instanceof RemoteError) || !/not supported|unsupported/i.test(e.message)) throw e;
      if (await this.stat(to)) await this.remove(to, false);
      await this.call(`rename ${from}`, (s, cb) => s.rename(from, to, cb));
    }
  }

  async remove(path: string, isDir: boolean): Promise<void> {
    const st = await this.stat(path);
    if (!st) throw remoteError("notFound", `delete: ${path} does not exist`);
    if (!st.isDir) {
      await this.call(`delete ${path}`, (s, cb) => s.unlink(path, cb));
      return;
    }
    if (!isDir && path === "/") throw remoteError("permissionDenied", "delete: refusing to delete /");
    await this.removeTree(path);
  }

  private async removeTree(dir: string): Promise<void> {
    const items = await this.call<FileEntryWithStats[]>(`list ${dir}`, (s, cb) => s.readdir(dir, cb as never));
    for (const it of items) {
      if (it.filename === "." || it.filename === "..") continue;
      const p = joinPath(dir, it.filename);
      if (it.attrs.isDirectory()) await this.removeTree(p);
      else await this.call(`delete ${p}`, (s, cb) => s.unlink(p, cb));
    }
    await this.call(`rmdir ${dir}`, (s, cb) => s.rmdir(dir, cb));
  }

  async read(path: string, offset: number, signal: AbortSignal): Promise<Readable> {
    checkAborted(signal);
    const handle = await this.call<Buffer>(`open ${path}`, (s, cb) => s.open(path, "r", cb as never));
    return new PipelinedReader(this.s, handle, offset, path, signal);
  }

  async write(path: string, source: Readable, _size: number, signal: AbortSignal): Promise<void> {
    checkAborted(signal);
    const s = this.s;
    const handle = await this.call<Buffer>(`open ${path}`, (x, cb) => x.open(path, "w", cb as never));
    let pos = 0;
    let inflight = 0;
    let failure: RemoteError | null = null;
    let wake: (() => void) | null = null;
    const settle = () => {
      const w = wake;
      wake = null;
      w?.();
    };
    const onAbort = () => {
      failure ??= remoteError("cancelled", "transfer cancelled");
      source.destroy();
      settle();
    };
    signal.addEventListener("abort", onAbort);
    try {
      for await (const chunk of source as AsyncIterable<Buffer>) {
        if (failure) break;
        for (let off = 0; off < chunk.length; off += CHUNK) {
          const piece = chunk.subarray(off, Math.min(off + CHUNK, chunk.length));
          while (inflight >= IN_FLIGHT && !failure) await new Promise<void>((r) => (wake = r));
          if (failure) break;
          inflight++;
          s.write(handle, piece, 0, piece.length, pos, (err) => {
            inflight--;
            if (err) failure ??= translate(err, `write ${path}`);
            settle();
          });
          pos += piece.length;
        }
      }
      while (inflight > 0) await new Promise<void>((r) => (wake = r));
      if (signal.aborted) failure ??= remoteError("cancelled", "transfer cancelled");
      if (failure) throw failure;
    } catch (e) {
      throw e instanceof RemoteError ? e : signal.aborted ? remoteError("cancelled", "transfer cancelled") : translate(e, `upload ${path}`);
    } finally {
      signal.removeEventListener("abort", onAbort);
      await new Promise<void>((r) => s.close(handle, () => r()));
    }
  }

  async close(): Promise<void> {
    const c = this.client;
    this.client = null;
    this.sftp = null;
    c?.end();
  }
}

/**
 * A file read with up to IN_FLIGHT read requests outstanding, delivered in order, with backpressure: no new requests
 * while the consumer is not reading.
 */
class PipelinedReader extends Readable {
  private next: number;
  private eof = false;
  private queue: { pos: number; len: number; buf: Buffer; n: number; done: boolean }[] = [];
  private handleClosed = false;
  private readonly abortListener = () => this.destroy(remoteError("cancelled", "transfer cancelled"));

  constructor(private readonly sftp: SFTPWrapper, private readonly handle: Buffer, offset: number, private readonly path: string, private readonly signal: AbortSignal) {
    super({ highWaterMark: CHUNK * 4 });
    this.next = offset;
    signal.addEventListener("abort", this.abortListener);
  }

  override _read(): void {
    this.fill();
  }

  private fill(): void {
    while (!this.eof && !this.destroyed && this.queue.length < IN_FLIGHT) this.request(this.next, CHUNK, this.queue.length);
  }

  private request(pos: number, len: number, at: number): void {
    const slot = { pos, len, buf: Buffer.allocUnsafe(len), n: 0, done: false };
    this.queue.splice(at, 0, slot);
    if (pos + len > this.next) this.next = pos + len;
    this.sftp.read(this.handle, slot.buf, 0, len, pos, (err, n) => {
      if (this.destroyed) return;
      if (err) return this.destroy(translate(err, `read ${this.path}`));
      slot.n = n;
      slot.done = true;
      this.flush();
    });
  }

  private flush(): void {
    let more = true;
    while (this.queue.length && this.queue[0]!.done) {
      const slot = this.queue.shift()!;
      if (slot.n === 0) {
        // end of file: later requests are past it
        this.eof = true;
        this.queue = [];
        this.push(null);
        return;
      }
      if (slot.n < slot.len && !this.eof) {
        // a short read: ask for the rest of this slot before anything after it
        this.request(slot.pos + slot.n, slot.len - slot.n, 0);
      }
      more = this.push(slot.n === slot.len ? slot.buf : slot.buf.subarray(0, slot.n));
    }
    if (more) this.fill();
  }

  override _destroy(err: Error | null, cb: (e?: Error | null) => void): void {
    this.signal.removeEventListener("abort", this.abortListener);
    if (this.handleClosed) return cb(err);
    this.handleClosed = true;
    this.sftp.close(this.handle, () => cb(err));
  }
}
