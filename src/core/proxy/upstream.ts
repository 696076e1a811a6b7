import type { Socket } from "bun";
import { Endpoint } from "./endpoint.ts";
import type { Scheme } from "../../pipeline/flow.ts";

export interface UpstreamTarget {
  scheme: Scheme;
  host: string;
  port: number;
  /** TLS server name (SNI and verification name); defaults to host. */
  servername?: string;
}

export type UpstreamErrorKind = "dns" | "refused" | "reset" | "tls" | "timeout" | "closed" | "other";

/** An upstream failure, already translated into words a user can act on. */
export class UpstreamError extends Error {
  constructor(readonly kind: UpstreamErrorKind, message: string) {
    super(message);
  }
}

export function classifyConnectError(e: unknown, host: string, port: number): UpstreamError {
  const err = e as { code?: string; message?: string };
  const code = err?.code ?? "";
  if (code === "ENOTFOUND" || code === "EAI_AGAIN" || code === "EAI_NONAME" || code === "EAI_FAIL" || /getaddrinfo|DNS/i.test(err?.message ?? ""))
    return new UpstreamError("dns", `DNS lookup failed for ${host}`);
  if (code === "ECONNREFUSED") return new UpstreamError("refused", `connection refused by ${host}:${port}`);
  if (code === "ECONNRESET" || code === "EPIPE") return new UpstreamError("reset", `connection reset by ${host}:${port}`);
  if (code === "ETIMEDOUT") return new UpstreamError("timeout", `connect to ${host}:${port} timed out`);
  if (code === "EHOSTUNREACH" || code === "ENETUNREACH") return new UpstreamError("refused", `${host}:${port} is unreachable (${code})`);
  return new UpstreamError("other", `cannot connect to ${host}:${port}: ${err?.message ?? String(e)}`);
}

/** Who receives an upstream connection's events while it carries a request. */
export interface UpstreamOwner {
  onUpstreamData(data: Uint8Array): void;
  /** The connection closed or failed; `err` is null for an orderly close by the peer. */
  onUpstreamClose(err: UpstreamError | null): void;
}

export interface UpstreamOptions {
  rejectUnauthorized: boolean;
  /** Full CA list for upstream verification (system roots plus --upstream-ca), or undefined for the defaults. */
  ca?: string[];
  connectTimeoutMs: number;
  idleTimeoutSec: number;
  /** Idle pooled connections kept per destination. */
  maxIdlePerKey: number;
}

export class UpstreamConn {
  readonly ep: Endpoint;
  owner: UpstreamOwner | null = null;
  /** How many requests this connection has carried (>1 means it was reused from the pool). */
  uses = 0;
  /** Seconds of silence before the connection fails; 0 = never (WebSocket relays). Re-armed on every read. */
  idleSec = 0;
  open = true;
  constructor(readonly key: string, socket: Socket<any>, readonly pool: UpstreamPool) {
    this.ep = new Endpoint(socket);
  }
}

/** The last keyOf() answer (most requests go where the previous one went). */
let lastKey = { scheme: "", host: "", port: 0, servername: undefined as string | undefined, key: "" };

function keyOf(t: UpstreamTarget): string {
  const last = lastKey;
  if (t.port === last.port && t.host === last.host && t.scheme === last.scheme && t.servername === last.servername) return last.key;
  const key = keyFor(t);
  lastKey = { scheme: t.scheme, host: t.host, port: t.port, servername: t.servername, key };
  return key;
}

function keyFor(t: UpstreamTarget): string {
  return `${t.scheme}://${t.host}:${t.port}${t.scheme === "https" ? `#${t.servername ?? t.host}` : ""}`;
}

/** Keep-alive pool of upstream connections, keyed by scheme, host, port (and TLS server name). */
export class UpstreamPool {
  private idle = new Map<string, UpstreamConn[]>();
  private all = new Set<UpstreamConn>();

  constructor(readonly opts: UpstreamOptions) {}

  /** An idle connection for the target, or null. */
  takeIdle(target: UpstreamTarget): UpstreamConn | null {
    const list = this.idle.get(keyOf(target));
    while (list && list.length > 0) {
      const c = list.pop()!;
      if (c.open && !c.ep.closed) return c;
    }
    return null;
  }

  /** Open a new connection; resolves once it can carry bytes (after the TLS handshake for https). */
  connect(target: UpstreamTarget): Promise<UpstreamConn> {
    const key = keyOf(target);
    const { host, port } = target;
    return new Promise<UpstreamConn>((resolve, reject) => {
      let settled = false;
      let conn: UpstreamConn | null = null;
      const fail = (e: UpstreamError) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        reject(e);
      };
      const ready = (c: UpstreamConn) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        c.idleSec = this.opts.idleTimeoutSec;
        c.ep.socket.timeout(c.idleSec);
        resolve(c);
      };
      const timer = setTimeout(() => {
        fail(new UpstreamError("timeout", `connect to ${host}:${port} timed out after ${this.opts.connectTimeoutMs / 1000} s`));
        conn?.ep.destroy();
      }, this.opts.connectTimeoutMs);
      const tls =
        target.scheme === "https"
          ? {
              serverName: target.servername ?? host,
              rejectUnauthorized: this.opts.rejectUnauthorized,
              ...(this.opts.ca ? { ca: this.opts.ca } : {}),
            }
          : undefined;
      const pool = this;
      Bun.connect<UpstreamConn | undefined>({
        hostname: host,
        port,
        tls,
        data: undefined,
        socket: {
          open(s) {
            conn = new UpstreamConn(key, s, pool);
            s.data = conn;
            pool.all.add(conn);
            s.setNoDelay(true);
            if (!tls) ready(conn);
          },
          handshake(s, success, authorizationError) {
            if (!conn) return;
            if (!success || (pool.opts.rejectUnauthorized && authorizationError)) {
              const ae = authorizationError as (Error & { code?: string }) | null;
              const reason = ae ? `${ae.code ?? ""} ${ae.message}`.trim() : "handshake failed";
              fail(new UpstreamError("tls", `TLS verification of ${target.servername ?? host} failed: ${reason}`));
              conn.ep.destroy();
              return;
            }
            ready(conn);
          },
          data(s, d) {
            const c = s.data;
            if (!c) return;
            // Bun's socket timeout is not reset by traffic: re-arm it so it measures silence
            if (c.idleSec) s.timeout(c.idleSec);
            if (c.owner) c.owner.onUpstreamData(d);
            else pool.drop(c); // bytes on an idle connection: it is no longer in a known state
          },
          drain(s) {
            const c = s.data;
            if (!c) return;
            c.ep.handleDrain();
          },
          close(s, err) {
            const c = s.data;
            if (!c) return fail(classifyConnectError(err, host, port));
            pool.closed(c, err ? classifyConnectError(err, host, port) : null);
            if (!settled) fail(err ? classifyConnectError(err, host, port) : new UpstreamError("closed", `${host}:${port} closed the connection during the TLS handshake`));
          },
          end(s) {
            const c = s.data;
            if (c) {
              pool.closed(c, null);
              c.ep.end();
            }
          },
          error(s, err) {
            const c = s.data;
            const e = classifyConnectError(err, host, port);
            if (c) pool.closed(c, e);
            fail(e);
          },
          timeout(s) {
            const c = s.data;
            if (!c) return;
            const e = new UpstreamError("timeout", `${host}:${port} sent nothing for ${pool.opts.idleTimeoutSec} s`);
            pool.closed(c, e);
            c.ep.destroy();
          },
          connectError(_s, err) {
            fail(classifyConnectError(err, host, port));
          },
        },
      }).catch((err) => fail(classifyConnectError(err, host, port)));
    });
  }

  /** Give a connection back after a complete exchange. */
  release(c: UpstreamConn): void {
    c.owner = null;
    if (!c.open || c.ep.closed || c.ep.queued > 0) return this.drop(c);
    let list = this.idle.get(c.key);
    if (!list) this.idle.set(c.key, (list = []));
    if (list.length >= this.opts.maxIdlePerKey) return this.drop(c);
    list.push(c);
  }

  /** Close a connection that must not be reused. */
  drop(c: UpstreamConn): void {
    c.owner = null;
    if (c.open) {
      c.open = false;
      c.ep.destroy();
    }
    this.forget(c);
  }

  private closed(c: UpstreamConn, err: UpstreamError | null): void {
    if (!c.open) return;
    c.open = false;
    c.ep.closed = true;
    this.forget(c);
    const owner = c.owner;
    c.owner = null;
    owner?.onUpstreamClose(err);
  }

  private forget(c: UpstreamConn): void {
    this.all.delete(c);
    const list = this.idle.get(c.key);
    if (list) {
      const i = list.indexOf(c);
      if (i >= 0) list.splice(i, 1);
      if (list.length === 0) this.idle.delete(c.key);
    }
  }

  get idleCount(): number {
    let n = 0;
    for (const l of this.idle.values()) n += l.length;
    return n;
  }

  closeAll(): void {
    for (const c of [...this.all]) this.drop(c);
    this.idle.clear();
  }
}
