import type { Socket } from "bun";
import { Endpoint } from "./endpoint.ts";
import type { Scheme } from "../../pipeline/flow.ts";
import type { ParentProxy, ProxyForm } from "./parent-proxy.ts";

export interface UpstreamTarget {
  scheme: Scheme;
  host: string;
  port: number;
  /** TLS server name (SNI and verification name); defaults to host. */
  servername?: string;
  /** The connection will carry a WebSocket upgrade: through a parent proxy, a plain one then goes through CONNECT. */
  websocket?: boolean;
}

export type UpstreamErrorKind = "dns" | "refused" | "reset" | "tls" | "timeout" | "closed" | "proxy" | "other";

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

/**
 * Whether an upstream TLS handshake failed. Verifying: any verification error fails it. With --upstream-insecure
 * (as mitmproxy's --ssl-insecure) a handshake Bun marks unsuccessful only because of a verification error (an
 * unknown issuer, a name that does not match...) goes on; one that failed for another reason still fails.
 */
export function handshakeFailed(success: boolean, authorizationError: unknown, rejectUnauthorized: boolean): boolean {
  if (rejectUnauthorized) return !success || !!authorizationError;
  return !success && !authorizationError;
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
  /** Parent proxy to chain through (--upstream-proxy), or null/undefined to connect directly. */
  parent?: ParentProxy | null;
}

let nextConnId = 1;

export class UpstreamConn {
  readonly ep: Endpoint;
  /** A number naming the connection (HAR `connection`): requests that share it share the number. */
  readonly id = nextConnId++;
  /** The address the socket is connected to (the origin, or the parent proxy when going through one). */
  remoteAddr = "";
  /** How long opening it took, ms: all of it (TCP, CONNECT through a parent, TLS), and the TLS handshake alone (-1: none). */
  connectMs = -1;
  sslMs = -1;
  owner: UpstreamOwner | null = null;
  /** How many requests this connection has carried (>1 means it was reused from the pool). */
  uses = 0;
  /** Seconds of silence before the connection fails; 0 = never (WebSocket relays). */
  idleSec = 0;
  open = true;
  /** Set on connections to a parent proxy that carry absolute-form requests (plain HTTP); null when direct. */
  proxyForm: ProxyForm | null = null;
  /** How the peer is named in a timeout message (`host:port`, and the parent proxy it goes through). */
  label = "";
  /**
   * The silence clock (nginx's proxy_read_timeout): it runs only while tapwire waits to read from this connection.
   * While the socket is paused (the client is not taking the bytes, an addon holds the response) it is stopped,
   * and it restarts from zero when reading resumes. A JS timer, so it fires on time (Bun's socket timeouts tick
   * in 4 s steps).
   */
  private watching = false;
  private since = 0;
  private timer: ReturnType<typeof setTimeout> | null = null;
  constructor(readonly key: string, socket: Socket<any>, readonly pool: UpstreamPool) {
    this.ep = new Endpoint(socket);
    this.ep.onResume = () => {
      if (this.watching) this.since = performance.now();
    };
  }

  /** Start (or restart) the silence clock from now. */
  watch(): void {
    if (this.idleSec <= 0 || !this.open) return;
    this.watching = true;
    this.since = performance.now();
    this.timer ??= setTimeout(() => this.check(), this.idleSec * 1000);
  }

  /** Bytes moved: the silence starts again. */
  touch(): void {
    if (this.watching) this.since = performance.now();
  }

  /** Stop the clock for good (WebSocket relay, connection closed). */
  unwatch(): void {
    this.watching = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private check(): void {
    this.timer = null;
    if (!this.watching || !this.open || this.idleSec <= 0) return;
    const limit = this.idleSec * 1000;
    if (this.ep.isPaused) {
      // tapwire is not reading: not the upstream's silence; the clock restarts on resume
      this.timer = setTimeout(() => this.check(), limit);
      return;
    }
    const left = this.since + limit - performance.now();
    if (left > 1) {
      this.timer = setTimeout(() => this.check(), left);
      return;
    }
    this.watching = false;
    this.pool.silent(this);
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

/** How a connection reaches its origin: directly, or through the parent proxy (and how). */
type Route = "direct" | "absolute" | "tunnel";

/**
 * Keep-alive pool of upstream connections, keyed by route, scheme, host, port (and TLS server name). With a parent
 * proxy, connections through it have keys of their own ("via ..."), so a direct connection and a proxied one are
 * never handed out for each other.
 */
export class UpstreamPool {
  private idle = new Map<string, UpstreamConn[]>();
  private all = new Set<UpstreamConn>();
  /** The parent proxy, or null: every connection is direct (and keyed as it always was). */
  private readonly parent: ParentProxy | null;
  private lastVia = { scheme: "", host: "", port: 0, servername: undefined as string | undefined, websocket: false, key: "", route: "direct" as Route };

  constructor(readonly opts: UpstreamOptions) {
    this.parent = opts.parent ?? null;
  }

  /** TLS options to the origin for an https target (verification as configured); undefined for plain http. */
  private tlsOptions(target: UpstreamTarget, host: string) {
    if (target.scheme !== "https") return undefined;
    return { serverName: target.servername ?? host, rejectUnauthorized: this.opts.rejectUnauthorized, ...(this.opts.ca ? { ca: this.opts.ca } : {}) };
  }

  /** The route and pool key of a target when a parent proxy is configured (the last answer is kept). */
  private routeOf(t: UpstreamTarget): { key: string; route: Route } {
    const l = this.lastVia;
    const ws = t.websocket === true;
    if (t.port === l.port && t.host === l.host && t.scheme === l.scheme && t.servername === l.servername && ws === l.websocket) return l;
    let route: Route = "direct";
    if (this.parent!.routes(t.host)) route = t.scheme === "https" || ws ? "tunnel" : "absolute";
    const key = route === "direct" ? keyFor(t) : `via ${route} ${keyFor(t)}`;
    this.lastVia = { scheme: t.scheme, host: t.host, port: t.port, servername: t.servername, websocket: ws, key, route };
    return this.lastVia;
  }

  /** An idle connection for the target, or null. */
  takeIdle(target: UpstreamTarget): UpstreamConn | null {
    const list = this.idle.get(this.parent === null ? keyOf(target) : this.routeOf(target).key);
    while (list && list.length > 0) {
      const c = list.pop()!;
      if (c.open && !c.ep.closed) return c;
    }
    return null;
  }

  /** Open a new connection; resolves once it can carry bytes (after the TLS handshake for https). */
  connect(target: UpstreamTarget): Promise<UpstreamConn> {
    if (this.parent !== null) {
      const { key, route } = this.routeOf(target);
      if (route !== "direct") return this.connectViaParent(this.parent, target, key, route);
    }
    const key = keyOf(target);
    const { host, port } = target;
    return new Promise<UpstreamConn>((resolve, reject) => {
      let settled = false;
      let conn: UpstreamConn | null = null;
      const t0 = performance.now();
      let tOpen = 0;
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
        const now = performance.now();
        c.connectMs = now - t0;
        if (tls && tOpen > 0) c.sslMs = now - tOpen;
        c.idleSec = this.opts.idleTimeoutSec;
        c.label = `${host}:${port}`;
        c.watch();
        resolve(c);
      };
      const timer = setTimeout(() => {
        fail(new UpstreamError("timeout", `connect to ${host}:${port} timed out after ${this.opts.connectTimeoutMs / 1000} s`));
        conn?.ep.destroy();
      }, this.opts.connectTimeoutMs);
      const tls = this.tlsOptions(target, host);
      const pool = this;
      Bun.connect<UpstreamConn | undefined>({
        hostname: host,
        port,
        tls,
        data: undefined,
        socket: {
          open(s) {
            tOpen = performance.now();
            conn = new UpstreamConn(key, s, pool);
            conn.remoteAddr = s.remoteAddress ?? "";
            s.data = conn;
            pool.all.add(conn);
            s.setNoDelay(true);
            if (!tls) ready(conn);
          },
          handshake(s, success, authorizationError) {
            if (!conn) return;
            if (handshakeFailed(success, authorizationError, pool.opts.rejectUnauthorized)) {
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
            c.touch();
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

  /**
   * A connection through the parent proxy: "absolute" = a plain connection to the parent that carries
   * absolute-form requests for this origin; "tunnel" = a CONNECT to the origin through the parent, then TLS
   * inside it for https (or the bare tunnel for a plain WebSocket). Resolves once it can carry requests.
   */
  private connectViaParent(parent: ParentProxy, target: UpstreamTarget, key: string, route: Route): Promise<UpstreamConn> {
    const { host, port } = target;
    const pool = this;
    const through = ` (through upstream proxy ${parent.label})`;
    /** A failure to reach or keep the parent. */
    const parentError = (err: unknown): UpstreamError => {
      const e = classifyConnectError(err, parent.host, parent.port);
      return new UpstreamError(e.kind, `cannot reach upstream proxy ${parent.label}: ${e.message}`);
    };
    /** A failure of the connection once it carries a request (the origin or the parent went away). */
    const laterError = (err: unknown): UpstreamError => {
      const e = classifyConnectError(err, host, port);
      return new UpstreamError(e.kind, e.message + through);
    };
    return new Promise<UpstreamConn>((resolve, reject) => {
      let settled = false;
      let conn: UpstreamConn | null = null;
      let raw: Socket<UpstreamConn | undefined> | null = null;
      /** "connect": waiting for the parent's answer to CONNECT; "tls": handshake inside the tunnel (the raw socket then only sees ciphertext); "open": the raw socket carries requests. */
      let phase: "connect" | "tls" | "open" = route === "absolute" ? "open" : "connect";
      const fail = (e: UpstreamError) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        reject(e);
        if (conn) conn.ep.destroy();
        else raw?.terminate();
      };
      const t0 = performance.now();
      const ready = (c: UpstreamConn) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        c.connectMs = performance.now() - t0;
        c.idleSec = this.opts.idleTimeoutSec;
        c.label = `${host}:${port}${through}`;
        c.watch();
        resolve(c);
      };
      const adopt = (s: Socket<UpstreamConn | undefined>): UpstreamConn => {
        const c = new UpstreamConn(key, s, pool);
        c.remoteAddr = raw?.remoteAddress ?? s.remoteAddress ?? "";
        conn = c;
        s.data = c;
        pool.all.add(c);
        s.setNoDelay(true);
        return c;
      };
      const timer = setTimeout(
        () => fail(new UpstreamError("timeout", `connect to ${host}:${port} through upstream proxy ${parent.label} timed out after ${this.opts.connectTimeoutMs / 1000} s`)),
        this.opts.connectTimeoutMs,
      );
      const tls = this.tlsOptions(target, host);
      // events of the socket that carries requests (as for direct connections)
      const carrier = {
        data(s: Socket<UpstreamConn | undefined>, d: Uint8Array) {
          const c = s.data;
          if (!c) return;
          c.touch();
          if (c.owner) c.owner.onUpstreamData(d);
          else pool.drop(c);
        },
        drain(s: Socket<UpstreamConn | undefined>) {
          s.data?.ep.handleDrain();
        },
        close(s: Socket<UpstreamConn | undefined>, err?: Error) {
          const c = s.data;
          if (!c) return fail(err ? parentError(err) : new UpstreamError("closed", `upstream proxy ${parent.label} closed the connection`));
          pool.closed(c, err ? laterError(err) : null);
          if (!settled) fail(err ? laterError(err) : new UpstreamError("closed", `${host}:${port} closed the connection during the TLS handshake${through}`));
        },
        end(s: Socket<UpstreamConn | undefined>) {
          const c = s.data;
          if (c) {
            pool.closed(c, null);
            c.ep.end();
          }
        },
        error(s: Socket<UpstreamConn | undefined>, err: Error) {
          const c = s.data;
          const e = c ? laterError(err) : parentError(err);
          if (c) pool.closed(c, e);
          fail(e);
        },
        timeout(s: Socket<UpstreamConn | undefined>) {
          const c = s.data;
          if (!c) return;
          pool.closed(c, new UpstreamError("timeout", `${host}:${port} sent nothing for ${pool.opts.idleTimeoutSec} s${through}`));
          c.ep.destroy();
        },
      };
      const reader = route === "tunnel" ? parent.connectReader(host, port) : null;
      Bun.connect<UpstreamConn | undefined>({
        hostname: parent.host,
        port: parent.port,
        data: undefined,
        socket: {
          open(s) {
            raw = s;
            if (settled) return void s.terminate();
            if (route === "absolute") {
              const c = adopt(s);
              c.proxyForm = parent.proxyForm(host, port);
              return ready(c);
            }
            s.setNoDelay(true);
            s.write(parent.connectRequest(host, port));
          },
          data(s, d) {
            if (phase === "open") return carrier.data(s, d);
            if (phase === "tls" || settled) return;
            const answer = reader!(d);
            if (answer === null) return;
            if (!answer.ok) return fail(new UpstreamError("proxy", answer.message));
            if (!tls) {
              // a plain tunnel (WebSocket): the raw socket carries the requests from now on
              phase = "open";
              const c = adopt(s);
              ready(c);
              if (answer.rest.length) pool.drop(c); // the origin spoke first: not a state we know
              return;
            }
            if (answer.rest.length) return fail(new UpstreamError("proxy", `upstream proxy ${parent.label} sent bytes after accepting CONNECT ${host}:${port} before the TLS handshake`));
            phase = "tls";
            s.upgradeTLS<UpstreamConn | undefined>({
              data: undefined,
              tls,
              socket: {
                ...carrier,
                open(t) {
                  if (settled) return void t.terminate();
                  adopt(t);
                },
                handshake(t, success, authorizationError) {
                  const c = t.data;
                  if (!c) return;
                  if (handshakeFailed(success, authorizationError, pool.opts.rejectUnauthorized)) {
                    const ae = authorizationError as (Error & { code?: string }) | null;
                    const reason = ae ? `${ae.code ?? ""} ${ae.message}`.trim() : "handshake failed";
                    return fail(new UpstreamError("tls", `TLS verification of ${target.servername ?? host} failed: ${reason}`));
                  }
                  ready(c);
                },
              },
            });
          },
          drain(s) {
            if (phase === "open") carrier.drain(s);
          },
          close(s, err) {
            if (phase === "open") return carrier.close(s, err);
            if (phase === "tls") return; // the TLS socket reports it
            fail(err ? parentError(err) : new UpstreamError("proxy", `upstream proxy ${parent.label} closed the connection before answering CONNECT ${host}:${port}`));
          },
          end(s) {
            if (phase === "open") return carrier.end(s);
            if (phase === "connect") fail(new UpstreamError("proxy", `upstream proxy ${parent.label} closed the connection before answering CONNECT ${host}:${port}`));
          },
          error(s, err) {
            if (phase === "open") return carrier.error(s, err);
            if (phase === "connect") fail(parentError(err));
          },
          timeout(s) {
            if (phase === "open") carrier.timeout(s);
          },
          connectError(_s, err) {
            fail(parentError(err));
          },
        },
      }).catch((err) => fail(parentError(err)));
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
    c.ep.resume();
    c.watch(); // an idle pooled connection is closed after the same silence
  }

  /** The silence clock ran out: the connection fails with a timeout (its owner answers 504). */
  silent(c: UpstreamConn): void {
    const e = new UpstreamError("timeout", `${c.label} sent nothing for ${c.idleSec} s`);
    this.closed(c, e);
    c.ep.destroy();
  }

  /** Close a connection that must not be reused. */
  drop(c: UpstreamConn): void {
    c.owner = null;
    c.unwatch();
    if (c.open) {
      c.open = false;
      c.ep.destroy();
    }
    this.forget(c);
  }

  private closed(c: UpstreamConn, err: UpstreamError | null): void {
    if (!c.open) return;
    c.open = false;
    c.unwatch();
    c.ep.markClosed();
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
