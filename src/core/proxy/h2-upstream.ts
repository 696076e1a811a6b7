/**
 * HTTP/2 to origins. tapwire offers `h2` and `http/1.1` in ALPN and remembers, per origin (host, port, TLS name),
 * what the origin picked; an origin that picked h2 gets one HTTP/2 connection that carries many streams (a new one
 * when it is going away or has as many streams open as the origin allows; the old one closes once its streams are
 * done). Built on tapwire's own codec (H2Connection, client role) over Bun's native TLS socket (Bun.connect, as
 * HTTP/1 origins in upstream.ts: same verification, same handshake check).
 *
 * The proxy sees an origin's connection as an H2Origin and each request as an H2UpstreamStream (tapwire's own
 * interfaces, flat field lists, no Node stream types); flow control stays behind them: a paused stream grants the
 * origin no more window, so a fast origin cannot make tapwire buffer without bound.
 */
import type { Socket } from "bun";
import type { HeaderList } from "../http1/types.ts";
import { H2Connection, type H2Events } from "../http2/connection.ts";
import { H2_ERROR } from "../http2/frames.ts";
import { h2ResponseToH1Flat, trailerFields, trailersFromFlat } from "../http2/headers.ts";
import { classifyConnectError, handshakeFailed, UpstreamError } from "./upstream.ts";

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
 * An origin's HTTP/2 connection as the proxy sees it (no Node types, no codec types).
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

/**
 * A stream the origin did not process (REFUSED_STREAM, or above the last stream id of its GOAWAY), or one that could
 * not be opened because the connection filled up or is going away: safe to send again (RFC 9113 8.7).
 */
export class H2Refused extends UpstreamError {
  constructor(message: string) {
    super("reset", message);
  }
}

const keyOf = (t: H2Target) => `${t.host}:${t.port}/${t.servername ?? t.host}`;

export class H2UpstreamPool {
  private readonly alpn = new Map<string, Alpn>();
  private readonly sessions = new Map<string, CodecOrigin>();
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
    const { host, port } = t;
    const pool = this;
    const rejectUnauthorized = this.opts.rejectUnauthorized;
    return new Promise((resolve, reject) => {
      let settled = false;
      let sock: Socket<CodecOrigin | undefined> | null = null;
      const fail = (e: UpstreamError) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        sock?.terminate();
        reject(e);
      };
      const timer = setTimeout(() => fail(new UpstreamError("timeout", `connect to ${host}:${port} timed out after ${this.opts.connectTimeoutMs / 1000} s`)), this.opts.connectTimeoutMs);
      Bun.connect<CodecOrigin | undefined>({
        hostname: host,
        port,
        data: undefined,
        // the same verification as HTTP/1 origins (upstream.ts): the server name is the verification name
        tls: { serverName: servername, rejectUnauthorized, ...(this.opts.ca ? { ca: this.opts.ca } : {}), ALPNProtocols: ALPN_OFFER },
        socket: {
          open(s) {
            sock = s;
            if (settled) return void s.terminate(); // timed out before the connection opened
            s.setNoDelay(true);
          },
          handshake(s, success, authorizationError) {
            if (settled) return void s.terminate();
            if (handshakeFailed(success, authorizationError, rejectUnauthorized)) {
              const ae = authorizationError as (Error & { code?: string }) | null;
              const reason = ae ? `${ae.code ?? ""} ${ae.message}`.trim() : "handshake failed";
              return fail(new UpstreamError("tls", `TLS verification of ${servername} failed: ${reason}`));
            }
            settled = true;
            clearTimeout(timer);
            const picked: Alpn = s.alpnProtocol === "h2" ? "h2" : "http/1.1";
            pool.alpn.set(key, picked);
            if (picked !== "h2") {
              s.terminate();
              return resolve(null);
            }
            const origin = new CodecOrigin(s, s.remoteAddress ?? "", (o) => {
              if (pool.sessions.get(key) === o) pool.sessions.delete(key);
            });
            s.data = origin;
            pool.sessions.set(key, origin);
            resolve(origin);
          },
          data(s, d) {
            s.data?.onData(d);
          },
          drain(s) {
            s.data?.drained();
          },
          end(s) {
            // the origin half-closed: an HTTP/2 connection is over then
            if (s.data) s.data.onGone();
            s.end();
          },
          close(s, err) {
            if (s.data) s.data.onGone();
            else fail(err ? classifyConnectError(err, host, port) : new UpstreamError("closed", `${host}:${port} closed the connection during the TLS handshake`));
          },
          error(s, err) {
            if (s.data) s.data.onGone();
            else fail(classifyConnectError(err, host, port));
          },
          connectError(_s, err) {
            fail(classifyConnectError(err, host, port));
          },
        },
      }).catch((err) => fail(classifyConnectError(err, host, port)));
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

/** ALPN offer in wire format (Bun 1.4.5 takes the wire-format string; an array is refused) */
const ALPN_OFFER = "\x02h2\x08http/1.1";
/**
 * Bytes queued for the origin (the kernel took no more) above which tapwire stops reading the origin and request
 * bodies wait (h2Writable): node:tls's default highWaterMark, which this socket had before.
 */
const SINK_HIGH_WATER = 16 * 1024;

/**
 * An origin's connection on tapwire's codec (H2Connection, client role) over Bun's native TLS socket: frames
 * gathered and written once per event-loop iteration, streams as small class instances (no closures per stream).
 * The socket does not buffer: what write() does not take is copied into `queue` and written on drain.
 */
class CodecOrigin implements H2Origin, H2Events {
  private readonly conn: H2Connection;
  private readonly streams = new Map<number, CodecUpstreamStream>();
  private reading: ArrayBufferLike | null = null;
  private scheduled = false;
  private dead = false;
  /** the socket is closed (or being terminated): nothing more is written */
  private sockGone = false;
  /** end() the socket once the queue is written */
  private ending = false;
  /** taken out of the pool (going away, or full): closed once its last stream is done */
  retired = false;
  sinkBlocked = false;
  private readonly waitingSink = new Set<CodecUpstreamStream>();
  private out: Uint8Array[] = [];
  private queue: Uint8Array[] = [];
  private queued = 0;
  private readonly flushBound = () => this.flush();

  constructor(
    private readonly sock: Socket<CodecOrigin | undefined>,
    readonly remoteAddress: string,
    private readonly onGoneFromPool: (o: CodecOrigin) => void,
  ) {
    this.conn = new H2Connection("client", this);
    this.flush(); // the preface and our SETTINGS
  }

  /** a read from the socket */
  onData(b: Uint8Array): void {
    this.reading = b.buffer;
    this.conn.feed(b);
    this.reading = null;
    this.schedule();
  }

  /** the socket closed, failed or was half-closed by the origin */
  onGone(): void {
    if (this.sockGone) return;
    this.sockGone = true;
    this.queue = [];
    this.queued = 0;
    this.conn.close(H2_ERROR.CANCEL, "the origin closed the connection");
  }

  /** open and able to take one more stream now */
  get usable(): boolean {
    return !this.dead && !this.retired && !this.conn.goingAway && this.conn.openStreams < this.conn.peerMaxConcurrentStreams;
  }

  open(fields: string[], endStream: boolean, mayTrail: boolean, handler: H2StreamHandler): H2UpstreamStream {
    if (this.dead || this.conn.goingAway || this.conn.openStreams >= this.conn.peerMaxConcurrentStreams) {
      this.retire();
      throw new H2Refused(this.dead ? "the HTTP/2 connection is closed" : this.conn.goingAway ? "the HTTP/2 connection is going away" : `the origin allows ${this.conn.peerMaxConcurrentStreams} streams at once`);
    }
    const id = this.conn.openStream(fields, endStream);
    const s = new CodecUpstreamStream(this, this.conn, id, handler, mayTrail && !endStream, endStream);
    this.streams.set(id, s);
    this.schedule();
    if (this.conn.openStreams >= this.conn.peerMaxConcurrentStreams) this.retire();
    return s;
  }

  /** Out of the pool: new requests go to a new connection; this one closes once its streams are done. */
  retire(): void {
    if (this.retired) return;
    this.retired = true;
    this.onGoneFromPool(this);
    this.closeIfIdle();
  }

  private closeIfIdle(): void {
    if (!this.retired || this.dead || this.streams.size > 0) return;
    this.conn.goaway(H2_ERROR.NO_ERROR);
    this.flush();
    this.dead = true;
    this.endSocket();
  }

  /** half-close once what is queued is written */
  private endSocket(): void {
    if (this.sockGone || this.ending) return;
    this.ending = true;
    if (this.queued === 0) this.sock.end();
  }

  close(): void {
    if (this.dead) return;
    this.retired = true;
    this.conn.goaway(H2_ERROR.NO_ERROR);
    this.flush();
    this.conn.close(H2_ERROR.CANCEL, "the HTTP/2 pool is closed");
    this.endSocket();
  }

  schedule(): void {
    if (this.scheduled || this.dead) return;
    this.scheduled = true;
    setImmediate(this.flushBound);
  }

  private flush(): void {
    this.scheduled = false;
    if (this.sockGone) return;
    // a view of the codec's gather buffer: written at once, and what the socket does not take is copied (enqueue)
    this.conn.flush(true);
    const parts = this.out;
    if (parts.length === 0) return;
    this.out = [];
    const data = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
    if (this.queued > 0) return this.enqueue(data);
    const n = this.sock.write(data);
    if (n < data.length) this.enqueue(n <= 0 ? data : data.subarray(n));
  }

  /** Keeps bytes the socket did not take (a copy: the codec may reuse what it handed out); blocks the sink. */
  private enqueue(rest: Uint8Array): void {
    this.queue.push(rest.slice());
    this.queued += rest.length;
    if (this.queued >= SINK_HIGH_WATER && !this.sinkBlocked) {
      // the origin does not read: stop reading it too until its socket drains
      this.sinkBlocked = true;
      this.sock.pause();
    }
  }

  drained(): void {
    while (this.queue.length > 0) {
      if (this.sockGone) return;
      const d = this.queue[0]!;
      const n = this.sock.write(d);
      if (n < d.length) {
        if (n > 0) {
          this.queue[0] = d.subarray(n);
          this.queued -= n;
        }
        return;
      }
      this.queue.shift();
      this.queued -= d.length;
    }
    if (this.ending) return void this.sock.end();
    if (this.sinkBlocked) this.sock.resume();
    this.sinkBlocked = false;
    if (this.waitingSink.size === 0) return;
    const list = [...this.waitingSink];
    this.waitingSink.clear();
    for (const s of list) s.writableAgain();
  }

  waitForSink(s: CodecUpstreamStream): void {
    this.waitingSink.add(s);
  }

  /** The stream is over (ended, failed or reset by us). */
  streamDone(s: CodecUpstreamStream): void {
    if (this.streams.get(s.id) === s) this.streams.delete(s.id);
    this.waitingSink.delete(s);
    if (this.retired) this.closeIfIdle();
  }

  // ---------------------------------------------------------------- H2Events (the codec calls these)

  write(bytes: Uint8Array): void {
    this.out.push(bytes);
  }

  headers(streamId: number, fields: string[], endStream: boolean, trailers: boolean): void {
    const s = this.streams.get(streamId);
    if (s === undefined) return;
    if (trailers) return s.ended(trailersFromFlat(fields));
    let head: { status: number; headers: HeaderList };
    try {
      head = h2ResponseToH1Flat(fields);
    } catch (e) {
      this.conn.reset(streamId, H2_ERROR.PROTOCOL_ERROR);
      this.schedule();
      return s.failed(new UpstreamError("reset", `invalid response head from the origin: ${(e as Error).message}`));
    }
    if (head.status < 200) return s.interim(head.status, head.headers);
    s.response(head.status, head.headers, endStream);
    if (endStream) s.ended([]);
  }

  data(streamId: number, bytes: Uint8Array, endStream: boolean): void {
    const s = this.streams.get(streamId);
    if (s === undefined) {
      this.conn.consumed(streamId, bytes.length);
      return;
    }
    if (!s.headSeen) {
      this.conn.reset(streamId, H2_ERROR.PROTOCOL_ERROR);
      this.schedule();
      return s.failed(new UpstreamError("reset", "the origin sent DATA before a response head"));
    }
    // a view of the read is kept as it is (a socket read is a buffer of its own); a frame the codec pieced
    // together from two reads sits in its reused buffer: copied
    if (bytes.length > 0) s.data(bytes.buffer === this.reading ? bytes : bytes.slice());
    if (endStream) s.ended(null);
  }

  reset(streamId: number, code: number): void {
    const s = this.streams.get(streamId);
    if (s === undefined) return;
    if (!s.headSeen && code === H2_ERROR.REFUSED_STREAM) s.failed(new H2Refused("the origin refused the stream"));
    else s.failed(new UpstreamError("reset", s.headSeen ? `the origin reset the stream (code ${code})` : `HTTP/2 stream failed before the response (code ${code})`));
  }

  writable(streamId: number): void {
    const s = this.streams.get(streamId);
    if (s === undefined) return;
    if (this.sinkBlocked) this.waitForSink(s);
    else s.writableAgain();
  }

  goaway(): void {
    this.retire();
  }

  closed(): void {
    this.dead = true;
    this.retired = true;
    this.onGoneFromPool(this);
    this.flush();
    if (this.sockGone) return;
    this.sockGone = true;
    this.queue = [];
    this.queued = 0;
    this.sock.terminate();
  }
}

/** One request stream on a CodecOrigin. */
class CodecUpstreamStream implements H2UpstreamStream {
  headSeen = false;
  private done = false;
  private paused = false;
  private unconsumed = 0;
  private trailers: HeaderList | null = null;
  private localEnded: boolean;

  constructor(
    private readonly origin: CodecOrigin,
    private readonly conn: H2Connection,
    readonly id: number,
    private readonly h: H2StreamHandler,
    private readonly mayTrail: boolean,
    endStream: boolean,
  ) {
    this.localEnded = endStream;
  }

  interim(status: number, headers: HeaderList): void {
    if (!this.done && !this.headSeen) this.h.h2Interim(this, status, headers);
  }

  response(status: number, headers: HeaderList, headOnly: boolean): void {
    if (this.done || this.headSeen) return;
    this.headSeen = true;
    this.h.h2Response(this, status, headers, headOnly);
  }

  data(bytes: Uint8Array): void {
    if (this.done) return;
    const n = bytes.length;
    this.h.h2Data(this, bytes);
    if (this.paused) this.unconsumed += n;
    else if (!this.done) this.conn.consumed(this.id, n); // reset from h2Data: the codec credited what it held
  }

  /** END_STREAM from the origin: with trailers (null: the last DATA frame ended it) */
  ended(trailers: HeaderList | null): void {
    if (this.done) return;
    if (trailers !== null) this.trailers = trailers;
    this.done = true;
    // the request side may still be open (an origin that answers before the upload ended): the codec closes the
    // stream once both sides ended; the exchange stops sending (and resets if it must)
    this.origin.streamDone(this);
    this.h.h2End(this, this.trailers ?? []);
    // the body is all here: what was taken while paused goes back to the connection's window (nobody resumes a
    // stream that ended)
    if (this.unconsumed > 0) {
      this.conn.consumed(this.id, this.unconsumed);
      this.unconsumed = 0;
      this.origin.schedule();
    }
  }

  failed(e: UpstreamError): void {
    if (this.done) return;
    this.done = true;
    this.origin.streamDone(this);
    this.h.h2Failed(this, e);
  }

  writableAgain(): void {
    if (!this.done) this.h.h2Writable(this);
  }

  write(chunk: Uint8Array): boolean {
    if (this.localEnded) return true;
    const ok = this.conn.sendData(this.id, chunk, false);
    this.origin.schedule();
    if (!ok) return false;
    if (!this.origin.sinkBlocked) return true;
    this.origin.waitForSink(this);
    return false;
  }

  end(trailers?: HeaderList | null, last?: Uint8Array | null): void {
    if (this.localEnded) return;
    this.localEnded = true;
    const t = trailers && this.mayTrail ? trailerFields(trailers) : null;
    if (t !== null && t.length > 0) {
      if (last) this.conn.sendData(this.id, last, false);
      const flat: string[] = [];
      for (const [k, v] of t) flat.push(k, v);
      this.conn.sendHeaders(this.id, flat, true);
    } else this.conn.sendData(this.id, last ?? EMPTY, true);
    this.origin.schedule();
  }

  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
    if (this.unconsumed > 0) {
      const n = this.unconsumed;
      this.unconsumed = 0;
      this.conn.consumed(this.id, n);
      this.origin.schedule();
    }
  }

  reset(code: number = H2_ERROR.CANCEL): void {
    const wasDone = this.done;
    this.done = true;
    this.localEnded = true;
    // a stream the origin ended may still be open our way (request body): the codec forgets it at the reset
    this.conn.reset(this.id, code);
    this.origin.schedule();
    if (!wasDone) this.origin.streamDone(this);
  }
}

const EMPTY = new Uint8Array(0);
