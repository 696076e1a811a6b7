/**
 * The client side of HTTP/2: one connection from a client (after CONNECT and TLS with ALPN `h2`, or prior
 * knowledge), turned into requests with the same HTTP/1-style heads the rest of tapwire works with, and their
 * responses turned back into HTTP/2.
 *
 * Choice (measured on Bun 1.4.5): node:http2's server session does the framing, HPACK and flow control. It runs
 * on a Duplex that this module feeds from the socket's bytes, so (1) it works on any socket tapwire holds (a
 * Bun.listen socket after upgradeTLS included), measured at ~4k req/s with client and server in one process, and
 * (2) every byte passes the H2FrameGuard first: node's session survives the 2019/2023 attacks but closes without a
 * GOAWAY for several of them, and the guard answers each with ENHANCE_YOUR_CALM (or the protocol error) itself.
 *
 * Backpressure both ways: when the session does not take client bytes, reading from the socket pauses; when the
 * socket does not take what the session writes, the session's writes wait for the drain (and HTTP/2 flow control
 * then stops the client's streams).
 */
import http2, { type Http2Session, type ServerHttp2Stream } from "node:http2";
import { Duplex } from "node:stream";
import type { HeaderList } from "../http1/types.ts";
import { batchSessionWrites } from "./batched-writes.ts";
import { goawayFrame, type H2GuardLimits, H2FrameGuard, type H2Violation } from "./guard.ts";
import { H2TranslateError, type H2RequestParts, h1ResponseToH2Object, h2RequestToH1Flat, trailerFields } from "./headers.ts";

/** What the connection writes to and reads from (an Endpoint fits). */
export interface ByteSink {
  /** false: stop writing until onDrain fires */
  write(bytes: Uint8Array): boolean;
  onDrain: (() => void) | null;
  end(): void;
}

export interface H2ServerOptions {
  /** pause / resume reading from the client's socket */
  pauseReading(): void;
  resumeReading(): void;
  /** a new request on a stream */
  onRequest(req: H2Request): void;
  /** the guard cut the connection (after sending its GOAWAY) */
  onViolation?(v: H2Violation): void;
  limits?: Partial<H2GuardLimits>;
  /** SETTINGS_MAX_CONCURRENT_STREAMS advertised (default 100) */
  maxConcurrentStreams?: number;
  /** SETTINGS_MAX_HEADER_LIST_SIZE advertised and enforced (default 64 KiB) */
  maxHeaderListSize?: number;
}

/**
 * One request stream from the client, as tapwire sees it (no Node stream types: the connection under it may be
 * node:http2 or tapwire's own codec). The owner sets the callbacks synchronously in onRequest; events come after.
 */
export interface H2Request {
  readonly streamId: number;
  readonly method: string;
  readonly scheme: string | null;
  readonly authority: string | null;
  /** the request target, origin-form */
  readonly path: string;
  /** HTTP/1-style fields: host first, cookie crumbs joined */
  readonly headers: HeaderList;
  /** the client ended its side with the request head: no body (and no trailers) follow */
  readonly bodyless: boolean;
  /** a piece of the request body (the owner's to keep) */
  onData: ((chunk: Uint8Array) => void) | null;
  /** the request body ended, with the client's trailers (null: none) */
  onEnd: ((trailers: HeaderList | null) => void) | null;
  /** a write() that answered false may be followed by more (the client's window or the socket has room again) */
  onWritable: (() => void) | null;
  /** called once when the stream has closed (ended both ways or reset): `code` is the reset code, 0 when none */
  onClose: ((code: number) => void) | null;
  /** stop / restart granting the client flow-control window for the body (bytes already sent still arrive) */
  pause(): void;
  resume(): void;
  /**
   * sends the response head (HTTP/1-style fields; connection-specific ones are dropped). `trailers` (default true):
   * the response may end with trailers (given to end()); false ends it with the last DATA frame instead
   */
  respond(status: number, headers: HeaderList, endStream?: boolean, trailers?: boolean): void;
  /** an interim (1xx, not 101) response head; throws when it cannot be framed */
  interim(status: number, headers: HeaderList): void;
  /** the response body; false: wait for onWritable */
  write(chunk: Uint8Array): boolean;
  /**
   * ends the response, with trailers when given; `last`: the body's last piece, sent in the same call (as the
   * DATA frame that ends the stream when no trailers follow)
   */
  end(trailers?: HeaderList, last?: Uint8Array): void;
  /** resets the stream (RST_STREAM, INTERNAL_ERROR unless given); nothing when it is closed already */
  reset(code?: number): void;
  /** the stream has closed (ended both ways or reset) */
  readonly closed: boolean;
}

export class H2ServerConnection {
  private readonly guard: H2FrameGuard;
  private readonly duplex: Duplex;
  private readonly session: Http2Session;
  private cut: H2Violation | null = null;
  private flushWrites: () => void = () => {};
  private closed = false;

  constructor(
    private readonly sink: ByteSink,
    private readonly opts: H2ServerOptions,
  ) {
    this.guard = new H2FrameGuard({ maxOpenStreams: 2 * (opts.maxConcurrentStreams ?? 100), ...opts.limits });
    this.duplex = new Duplex({
      read: () => opts.resumeReading(),
      final: (cb) => {
        this.close();
        cb();
      },
      destroy: (err, cb) => {
        this.close();
        cb(err);
      },
    });
    // the session's frames go to the socket batched, once per event-loop iteration; while it is full, write()
    // answers false and the session waits for the duplex's 'drain' (as on a socket of its own)
    const writes = batchSessionWrites(this.duplex, (b) => sink.write(b), () => this.closed);
    this.flushWrites = writes.flush;
    sink.onDrain = writes.drained;
    const server = http2.createServer({
      settings: { maxConcurrentStreams: opts.maxConcurrentStreams ?? 100, maxHeaderListSize: opts.maxHeaderListSize ?? 64 * 1024, enablePush: false },
      maxHeaderListPairs: 1000,
    } as http2.ServerOptions);
    let session: Http2Session | null = null;
    server.on("session", (s) => (session = s));
    server.on("stream", (stream, _headers, _flags, rawHeaders) => this.stream(stream as ServerHttp2Stream, rawHeaders as unknown as string[]));
    server.on("sessionError", () => this.close());
    server.emit("connection", this.duplex);
    this.session = session!;
    this.session.on("error", () => this.close());
    this.session.on("close", () => this.close());
  }

  /** Bytes from the client. */
  feed(bytes: Uint8Array): void {
    if (this.closed) return;
    const v = this.guard.feed(bytes);
    if (v) return this.violate(v);
    // a view, not a copy: a socket read is a buffer of its own
    const b = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (!this.duplex.push(b)) this.opts.pauseReading();
  }

  /** The client's socket closed. */
  socketClosed(): void {
    if (this.closed) return;
    this.duplex.push(null);
    this.close();
  }

  private violate(v: H2Violation): void {
    this.cut = v;
    this.flushWrites();
    this.sink.write(goawayFrame(v));
    this.close();
    this.opts.onViolation?.(v);
  }

  get violation(): H2Violation | null {
    return this.cut;
  }

  private close(): void {
    if (this.closed) return;
    this.flushWrites(); // frames the session wrote in this turn (a GOAWAY, last responses) go out before the end
    this.closed = true;
    this.sink.end();
    if (!this.session?.destroyed) this.session?.destroy();
  }

  private stream(stream: ServerHttp2Stream, raw: string[]): void {
    stream.on("error", noop);
    let parts;
    try {
      parts = h2RequestToH1Flat(raw);
    } catch (e) {
      if (e instanceof H2TranslateError) return stream.close(http2.constants.NGHTTP2_PROTOCOL_ERROR);
      throw e;
    }
    const req = new Stream(stream, parts, this.guard);
    this.opts.onRequest(req);
  }
}

const noop = () => {};

/** One request stream (H2Request) over node's ServerHttp2Stream: methods on a prototype, not closures per stream. */
class Stream implements H2Request {
  readonly streamId: number;
  readonly method: string;
  readonly scheme: string | null;
  readonly authority: string | null;
  readonly path: string;
  readonly headers: HeaderList;
  readonly bodyless: boolean;
  onData: ((chunk: Uint8Array) => void) | null = null;
  onEnd: ((trailers: HeaderList | null) => void) | null = null;
  onWritable: (() => void) | null = null;
  onClose: ((code: number) => void) | null = null;
  /** the trailers end() was given (an empty block when none), sent on 'wantTrailers' */
  private wantTrailers: HeaderList | null = null;
  private reqTrailers: HeaderList | null = null;
  private drainHooked = false;

  constructor(
    private readonly body: ServerHttp2Stream,
    parts: H2RequestParts,
    guard: H2FrameGuard,
  ) {
    this.streamId = body.id ?? 0;
    this.method = parts.method;
    this.scheme = parts.scheme;
    this.authority = parts.authority;
    this.path = parts.method === "CONNECT" ? (parts.authority ?? "") : (parts.path ?? "/");
    this.headers = parts.headers;
    // endAfterHeaders (Bun 1.4.5): the client's side ended, possibly after DATA already buffered
    this.bodyless = body.readableEnded || ((body as unknown as { endAfterHeaders?: boolean }).endAfterHeaders === true && body.readableLength === 0);
    // `on`, not `once` (no wrapper per stream): a stream emits 'close' once
    body.on("close", () => {
      guard.streamClosed(this.streamId);
      this.onClose?.(body.rstCode ?? 0);
    });
    // the callbacks are read at each event: the owner sets them in onRequest, before any event comes
    if (this.bodyless) body.resume();
    else {
      body.on("data", (c: Uint8Array) => this.onData?.(c));
      body.on("trailers", (h) => (this.reqTrailers = headerListOf(h)));
      body.on("end", () => this.onEnd?.(this.reqTrailers));
    }
  }

  get closed(): boolean {
    return this.body.closed || this.body.destroyed;
  }

  pause(): void {
    this.body.pause();
  }

  resume(): void {
    this.body.resume();
  }

  respond(status: number, headers: HeaderList, endStream = false, trailers = true): void {
    const waitForTrailers = !endStream && trailers;
    this.body.respond(h1ResponseToH2Object(status, headers), { endStream, waitForTrailers });
    // an empty trailers block ends a stream whose response turned out to have none
    if (waitForTrailers) this.body.once("wantTrailers", () => this.body.sendTrailers(headerObject(this.wantTrailers ?? [])));
  }

  interim(status: number, headers: HeaderList): void {
    const o = headerObject(headers.map(([k, v]) => [k.toLowerCase(), v]));
    this.body.additionalHeaders({ ":status": status, ...o });
  }

  write(chunk: Uint8Array): boolean {
    if (this.body.write(chunk)) return true;
    // a 'drain' listener only for the streams that need one
    if (!this.drainHooked) {
      this.drainHooked = true;
      this.body.once("drain", () => {
        this.drainHooked = false;
        this.onWritable?.();
      });
    }
    return false;
  }

  end(trailers?: HeaderList, last?: Uint8Array): void {
    this.wantTrailers = trailers ? trailerFields(trailers) : null;
    // with its last piece: one DATA frame with END_STREAM, where write() then end() sent an empty DATA frame more
    // and had Bun's session flush its frames to the socket at once (its _final), once per response
    if (last !== undefined && last.length > 0) this.body.end(last);
    else this.body.end();
  }

  reset(code: number = http2.constants.NGHTTP2_INTERNAL_ERROR): void {
    if (!this.body.closed && !this.body.destroyed) this.body.close(code);
  }
}

/** node's header object as an ordered list (repeated fields as separate entries), without pseudo-headers. */
function headerListOf(h: Record<string, string | string[] | undefined>): HeaderList {
  const out: HeaderList = [];
  for (const k in h) {
    const v = h[k];
    if (k.charCodeAt(0) === 58 || v === undefined) continue;
    if (Array.isArray(v)) for (const x of v) out.push([k, x]);
    else out.push([k, String(v)]);
  }
  return out;
}

/** Ordered fields as node's header object (repeated names become arrays). */
function headerObject(fields: HeaderList): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of fields) {
    const prev = out[k];
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return out;
}
