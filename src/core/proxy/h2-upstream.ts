/**
 * HTTP/2 to origins. tapwire offers `h2` and `http/1.1` in ALPN and remembers, per origin (host, port, TLS name),
 * what the origin picked; an origin that picked h2 gets one HTTP/2 session that carries many streams (a new one
 * when it is closing, refused streams or reaches its concurrent-stream limit). Built on node:http2 over a node:tls
 * socket (Bun implements both; measured here: ~7k req/s over one session with the server in the same process).
 *
 * The proxy sees an origin's connection as an H2Origin and each request as an H2UpstreamStream (tapwire's own
 * interfaces, flat field lists, no Node stream types); flow control stays behind them: a paused stream grants the
 * origin no more window, so a fast origin cannot make tapwire buffer without bound.
 */
import http2, { type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders } from "node:http2";
import { Duplex } from "node:stream";
import tls from "node:tls";
import type { HeaderList } from "../http1/types.ts";
import { batchSessionWrites } from "../http2/batched-writes.ts";
import { trailerFields } from "../http2/headers.ts";
import { classifyConnectError, UpstreamError } from "./upstream.ts";

export interface H2Target {
  host: string;
  port: number;
  /** TLS server name (SNI and verification name); defaults to host */
  servername?: string;
}

export interface H2PoolOptions {
  rejectUnauthorized: boolean;
  ca?: string[];
  connectTimeoutMs: number;
}

export type Alpn = "h2" | "http/1.1";

/**
 * An origin's HTTP/2 connection as the proxy sees it (no Node types: node:http2 or tapwire's own codec under it).
 * `open` starts one request stream; its events go to the handler, synchronously, in this order: at most one
 * h2Response (h2Interim before it), h2Data pieces, then exactly one of h2End and h2Failed.
 */
export interface H2Origin {
  /** the origin's address (HAR timings) */
  readonly remoteAddress: string;
  /**
   * Opens one stream. `fields`: HTTP/2 fields, flat (`[name, value, ...]`, pseudo-headers first: see
   * h1RequestToH2Flat). `endStream`: the request has no body; `mayTrail`: its body may end with trailers (given to
   * end()). Throws (synchronously) when the connection cannot open a stream any more.
   */
  open(fields: string[], endStream: boolean, mayTrail: boolean, handler: H2StreamHandler): H2UpstreamStream;
}

/** What an origin's stream reports (one object per exchange: no closures per request). */
export interface H2StreamHandler {
  /** the final response head; `headOnly`: the HEADERS frame ended the stream (a gRPC "trailers-only" answer) */
  h2Response(s: H2UpstreamStream, status: number, headers: HeaderList, headOnly: boolean): void;
  /** an interim (1xx) response head */
  h2Interim(s: H2UpstreamStream, status: number, headers: HeaderList): void;
  /** a piece of the response body (the handler's to keep) */
  h2Data(s: H2UpstreamStream, chunk: Uint8Array): void;
  /** the stream ended cleanly, with these trailers ([] when there were none) */
  h2End(s: H2UpstreamStream, trailers: HeaderList): void;
  /** the stream failed (reset by the origin, connection lost, closed before a response); also after h2Response */
  h2Failed(s: H2UpstreamStream, e: UpstreamError): void;
  /** a write() that answered false may be followed by more */
  h2Writable(s: H2UpstreamStream): void;
}

/** One request stream to an origin. */
export interface H2UpstreamStream {
  readonly id: number;
  /** a piece of the request body; false: wait for h2Writable */
  write(chunk: Uint8Array): boolean;
  /** ends the request body, with `last` as its last piece and the trailers (if the stream was opened mayTrail) */
  end(trailers?: HeaderList | null, last?: Uint8Array | null): void;
  /** stop / restart granting the origin flow-control window for the response body (bytes in flight still come) */
  pause(): void;
  resume(): void;
  /** resets the stream (RST_STREAM, CANCEL unless given); nothing when it is closed already */
  reset(code?: number): void;
}

/** What request() resolves to (tests and tools; the proxy uses H2Origin.open). */
export interface H2Response {
  status: number;
  headers: HeaderList;
  streamId: number;
  /** the HEADERS frame ended the stream: no body, no trailers (a gRPC "trailers-only" answer) */
  headOnly: boolean;
  /** the whole body, once the stream ended; rejects when the stream failed */
  body: Promise<Uint8Array>;
  /** the trailers, once the body ended ([] when there were none); rejects when the stream failed */
  trailers: Promise<HeaderList>;
}

const keyOf = (t: H2Target) => `${t.host}:${t.port}/${t.servername ?? t.host}`;

/** node's header object as an ordered list (repeated fields as separate entries), without pseudo-headers. */
export function headerList(h: IncomingHttpHeaders): HeaderList {
  const out: HeaderList = [];
  for (const [k, v] of Object.entries(h)) {
    if (k.startsWith(":") || v === undefined) continue;
    if (Array.isArray(v)) for (const x of v) out.push([k, x]);
    else out.push([k, String(v)]);
  }
  return out;
}

/** Flat fields as node's header object (repeated names become arrays; set-cookie and friends stay separate). */
function headerObjectFlat(fields: readonly string[]): Record<string, string | string[]> {
  const o: Record<string, string | string[]> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const k = fields[i]!;
    const v = fields[i + 1]!;
    const prev = o[k];
    if (prev === undefined) o[k] = v;
    else if (Array.isArray(prev)) prev.push(v);
    else o[k] = [prev, v];
  }
  return o;
}

/** An ordered list as node's header object. */
function headerObject(fields: HeaderList): Record<string, string | string[]> {
  const o: Record<string, string | string[]> = {};
  for (const [k, v] of fields) {
    const prev = o[k];
    if (prev === undefined) o[k] = v;
    else if (Array.isArray(prev)) prev.push(v);
    else o[k] = [prev, v];
  }
  return o;
}

export class H2UpstreamPool {
  private readonly alpn = new Map<string, Alpn>();
  private readonly sessions = new Map<string, NodeOrigin>();
  private readonly connecting = new Map<string, Promise<H2Origin | null>>();
  private closed = false;

  constructor(private readonly opts: H2PoolOptions) {}

  /** What the origin picked the last time (undefined: not asked yet). */
  known(t: H2Target): Alpn | undefined {
    return this.alpn.get(keyOf(t));
  }

  /** Sessions open now (for tests and /health). */
  get sessionCount(): number {
    let n = 0;
    for (const s of this.sessions.values()) if (s.usable) n++;
    return n;
  }

  /**
   * The origin's open connection, found without waiting: a connection, null when the origin speaks only HTTP/1.1,
   * or undefined when one has to be opened first (call session()). The proxy's hot path: no promise per request.
   */
  ready(t: H2Target): H2Origin | null | undefined {
    if (this.closed) return undefined;
    const key = keyOf(t);
    if (this.alpn.get(key) === "http/1.1") return null;
    const s = this.sessions.get(key);
    return s && s.usable ? s : undefined;
  }

  /**
   * An HTTP/2 connection to the origin, or null when the origin speaks only HTTP/1.1 (remembered: later calls
   * answer null at once). Throws UpstreamError (dns, refused, tls, timeout...) when the origin cannot be reached.
   */
  async session(t: H2Target): Promise<H2Origin | null> {
    if (this.closed) throw new UpstreamError("closed", "the HTTP/2 pool is closed");
    const key = keyOf(t);
    if (this.alpn.get(key) === "http/1.1") return null;
    const s = this.sessions.get(key);
    if (s && s.usable) return s;
    const pending = this.connecting.get(key);
    if (pending) return pending;
    const p = this.open(t, key).finally(() => this.connecting.delete(key));
    this.connecting.set(key, p);
    return p;
  }

  private open(t: H2Target, key: string): Promise<H2Origin | null> {
    const servername = t.servername ?? t.host;
    return new Promise((resolve, reject) => {
      let settled = false;
      const sock = tls.connect({
        host: t.host,
        port: t.port,
        servername: /^[\d.]+$|:/.test(servername) ? undefined : servername,
        ALPNProtocols: ["h2", "http/1.1"],
        rejectUnauthorized: this.opts.rejectUnauthorized,
        checkServerIdentity: this.opts.rejectUnauthorized ? (_h, cert) => tls.checkServerIdentity(servername, cert) : () => undefined,
        ...(this.opts.ca ? { ca: this.opts.ca } : {}),
      });
      const timer = setTimeout(() => fail(new UpstreamError("timeout", `connect to ${t.host}:${t.port} timed out after ${this.opts.connectTimeoutMs / 1000} s`)), this.opts.connectTimeoutMs);
      const fail = (e: UpstreamError) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        sock.destroy();
        reject(e);
      };
      sock.once("error", (e: Error & { code?: string }) => {
        const code = e.code ?? "";
        if (/CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS|HOSTNAME|altname/i.test(code + " " + e.message)) {
          fail(new UpstreamError("tls", `TLS verification of ${servername} failed: ${code || e.message}`));
        } else fail(classifyConnectError(e, t.host, t.port));
      });
      sock.once("secureConnect", () => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        const picked: Alpn = sock.alpnProtocol === "h2" ? "h2" : "http/1.1";
        this.alpn.set(key, picked);
        if (picked !== "h2") {
          sock.destroy();
          return resolve(null);
        }
        const conn = batchedSocket(sock);
        const session = http2.connect(`https://${servername}:${t.port}`, { createConnection: () => conn });
        session.on("error", () => {}); // reported on the streams; the session is then dropped
        const origin = new NodeOrigin(session, sock.remoteAddress ?? "");
        const drop = () => {
          if (this.sessions.get(key) === origin) this.sessions.delete(key);
        };
        session.once("close", drop);
        session.once("goaway", drop);
        this.sessions.set(key, origin);
        resolve(origin);
      });
    });
  }

  /**
   * Sends one request on the origin's connection (tests and tools). `fields` are HTTP/2 fields, pseudo-headers
   * first (see h1RequestToH2). The body, when given, is written with backpressure. Resolves at the response head;
   * throws UpstreamError when the stream fails before it.
   */
  request(origin: H2Origin, fields: HeaderList, body: Uint8Array | AsyncIterable<Uint8Array> | null): Promise<H2Response> {
    const flat: string[] = [];
    for (const [k, v] of fields) flat.push(k, v);
    const c = new Collector();
    const s = origin.open(flat, body === null, false, c);
    if (body instanceof Uint8Array) s.end(null, body);
    else if (body !== null) void c.pump(s, body);
    return c.response;
  }

  close(): void {
    this.closed = true;
    for (const s of this.sessions.values()) s.close();
    this.sessions.clear();
  }
}

/** The handler of request(): the head, the body and the trailers as promises. */
class Collector implements H2StreamHandler {
  readonly response: Promise<H2Response>;
  private onHead!: (r: H2Response) => void;
  private failHead!: (e: UpstreamError) => void;
  private onBody!: (b: Uint8Array) => void;
  private failBody!: (e: UpstreamError) => void;
  private onTrailers!: (t: HeaderList) => void;
  private failTrailers!: (e: UpstreamError) => void;
  private readonly parts: Uint8Array[] = [];
  private waiting: (() => void) | null = null;

  constructor() {
    this.response = new Promise((res, rej) => ((this.onHead = res), (this.failHead = rej)));
  }

  h2Response(s: H2UpstreamStream, status: number, headers: HeaderList, headOnly: boolean): void {
    const body = new Promise<Uint8Array>((res, rej) => ((this.onBody = res), (this.failBody = rej)));
    const trailers = new Promise<HeaderList>((res, rej) => ((this.onTrailers = res), (this.failTrailers = rej)));
    body.catch(() => {});
    trailers.catch(() => {});
    this.onHead({ status, headers, streamId: s.id, headOnly, body, trailers });
  }
  h2Interim(): void {}
  h2Data(_s: H2UpstreamStream, chunk: Uint8Array): void {
    this.parts.push(chunk.slice());
  }
  h2End(_s: H2UpstreamStream, trailers: HeaderList): void {
    this.onBody(Buffer.concat(this.parts));
    this.onTrailers(trailers);
  }
  h2Failed(_s: H2UpstreamStream, e: UpstreamError): void {
    this.failHead(e);
    this.failBody?.(e);
    this.failTrailers?.(e);
    this.h2Writable();
  }
  h2Writable(): void {
    const w = this.waiting;
    this.waiting = null;
    w?.();
  }

  async pump(s: H2UpstreamStream, body: AsyncIterable<Uint8Array>): Promise<void> {
    try {
      for await (const chunk of body) if (!s.write(chunk)) await new Promise<void>((r) => (this.waiting = r));
      s.end();
    } catch {
      s.reset();
    }
  }
}

/** An origin's connection over node:http2. */
class NodeOrigin implements H2Origin {
  constructor(
    readonly session: ClientHttp2Session,
    readonly remoteAddress: string,
  ) {}

  get usable(): boolean {
    return !this.session.closed && !this.session.destroyed;
  }

  open(fields: string[], endStream: boolean, mayTrail: boolean, handler: H2StreamHandler): H2UpstreamStream {
    const stream = this.session.request(headerObjectFlat(fields), { endStream, waitForTrailers: mayTrail && !endStream } as http2.ClientSessionRequestOptions);
    return new NodeUpstreamStream(stream, handler, mayTrail && !endStream);
  }

  close(): void {
    this.session.close();
  }
}

/** One stream over node's ClientHttp2Stream: listeners on a prototype's methods, not closures per event. */
class NodeUpstreamStream implements H2UpstreamStream {
  /** 0: waiting for the head, 1: head seen, 2: settled (ended or failed) */
  private state = 0;
  private got: HeaderList | null = null;
  private trailersOut: HeaderList = [];
  private paused = false;
  private drainHooked = false;

  constructor(
    private readonly stream: ClientHttp2Stream,
    private readonly h: H2StreamHandler,
    mayTrail: boolean,
  ) {
    // Paused until the head came. Bun 1.4.5 resumes a client stream that closes while nobody has started reading
    // it (readableFlowing === null), which emits its buffered body to no listener: the body is lost and 'end'
    // follows. When HEADERS, DATA and END_STREAM arrive in one read, that happens before a reader could attach.
    // An explicit pause (readableFlowing === false) keeps the body buffered until resumed.
    stream.pause();
    // a stream error is reported once, however often it is emitted; `on`, not `once` (no wrapper per stream):
    // `state` already ignores a repeat
    stream.on("error", (e: Error) => {
      if (this.state === 2) return;
      const before = this.state === 0;
      this.state = 2;
      this.h.h2Failed(this, new UpstreamError("reset", before ? `HTTP/2 stream failed before the response: ${e.message}` : `HTTP/2 stream failed: ${e.message}`));
    });
    stream.on("headers", (hd) => {
      const status = Number(hd[":status"]);
      if (this.state === 0) this.h.h2Interim(this, status, headerList(hd));
    });
    // endAfterHeaders read when the head arrives: later, Bun 1.4.5 answers whether the origin's side has ended
    // by then (true with a body buffered when HEADERS, DATA and END_STREAM came in one read; false for a
    // head-only answer once the stream has closed)
    stream.on("response", (hd) => {
      if (this.state !== 0) return;
      this.state = 1;
      this.h.h2Response(this, Number(hd[":status"]), headerList(hd), stream.endAfterHeaders === true);
      if (this.state !== 1) return;
      stream.on("data", (d: Uint8Array) => this.h.h2Data(this, d));
      if (!this.paused) stream.resume();
    });
    stream.on("trailers", (hd) => (this.got = headerList(hd)));
    stream.on("close", () => {
      if (this.state === 2) return;
      // the stream closed with body bytes still buffered (read paused): end after them
      if (this.state === 1 && !stream.readableEnded && stream.readableLength > 0 && !stream.rstCode) return void stream.once("end", () => this.closed());
      this.closed();
    });
    if (mayTrail) {
      stream.once("wantTrailers", () => {
        try {
          stream.sendTrailers(headerObject(this.trailersOut));
        } catch {
          // the stream is gone (reset); its error reaches the handler on its own
        }
      });
    }
  }

  private closed(): void {
    if (this.state === 2) return;
    const before = this.state === 0;
    this.state = 2;
    const code = this.stream.rstCode;
    if (code && code !== http2.constants.NGHTTP2_NO_ERROR) this.h.h2Failed(this, new UpstreamError("reset", `the origin reset the stream (code ${code})`));
    else if (before) this.h.h2Failed(this, new UpstreamError("closed", "the HTTP/2 stream closed before a response"));
    else this.h.h2End(this, this.got ?? []);
  }

  get id(): number {
    return this.stream.id ?? 0;
  }

  write(chunk: Uint8Array): boolean {
    if (this.stream.write(chunk)) return true;
    if (!this.drainHooked) {
      this.drainHooked = true;
      this.stream.once("drain", () => {
        this.drainHooked = false;
        this.h.h2Writable(this);
      });
    }
    return false;
  }

  end(trailers?: HeaderList | null, last?: Uint8Array | null): void {
    if (trailers) this.trailersOut = trailerFields(trailers);
    if (last) this.stream.end(last);
    else this.stream.end();
  }

  pause(): void {
    this.paused = true;
    this.stream.pause();
  }

  resume(): void {
    this.paused = false;
    if (this.state === 1) this.stream.resume();
  }

  reset(code: number = http2.constants.NGHTTP2_CANCEL): void {
    this.state = 2;
    if (!this.stream.closed && !this.stream.destroyed) this.stream.close(code);
  }
}

/**
 * The origin's TLS socket as the session sees it: a Duplex without a native handle. Given the TLS socket itself,
 * Bun's session writes to the native socket directly, once per flush, and it flushes at every stream it opens and
 * ends (one TLS record and one send() per request at least). Through this Duplex the frames written in one
 * event-loop iteration leave as one socket write, as on the client side (H2ServerConnection: batchSessionWrites).
 * Backpressure both ways: while the socket is full the session's writes answer false until 'drain'; a session that
 * does not take the bytes pauses the socket.
 */
function batchedSocket(sock: tls.TLSSocket): Duplex {
  const d = new Duplex({
    read: () => void sock.resume(),
    final: (cb) => {
      writes.flush();
      sock.end();
      cb();
    },
    destroy: (err, cb) => {
      writes.flush();
      sock.destroy();
      cb(err);
    },
  });
  const writes = batchSessionWrites(d, (b) => sock.write(b), () => sock.destroyed);
  sock.on("drain", writes.drained);
  sock.on("data", (b: Buffer) => {
    if (!d.push(b)) sock.pause();
  });
  sock.on("end", () => d.push(null));
  sock.on("close", () => d.destroy());
  sock.on("error", (e) => d.destroy(e));
  Object.defineProperty(d, "remoteAddress", { get: () => sock.remoteAddress });
  return d;
}
