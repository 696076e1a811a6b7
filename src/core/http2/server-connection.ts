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

export interface H2Request {
  streamId: number;
  method: string;
  scheme: string | null;
  authority: string | null;
  /** the request target, origin-form */
  path: string;
  /** HTTP/1-style fields: host first, cookie crumbs joined */
  headers: HeaderList;
  /** the body (HTTP/2 flow control behind it); ended at once for a request without one */
  body: ServerHttp2Stream;
  /**
   * sends the response head (HTTP/1-style fields; connection-specific ones are dropped). `trailers` (default true):
   * the response may end with trailers (given to end()); false ends it with the last DATA frame instead
   */
  respond(status: number, headers: HeaderList, endStream?: boolean, trailers?: boolean): void;
  /** the response body; false: wait for drain (ServerHttp2Stream's 'drain') */
  write(chunk: Uint8Array): boolean;
  /**
   * ends the response, with trailers when given; `last`: the body's last piece, sent in the same call (as the
   * DATA frame that ends the stream when no trailers follow)
   */
  end(trailers?: HeaderList, last?: Uint8Array): void;
  /** resets the stream (RST_STREAM, INTERNAL_ERROR unless given) */
  reset(code?: number): void;
  /** called once when the stream has closed (its 'close' event: ended both ways or reset) */
  onClose: (() => void) | null;
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

/** One request stream (H2Request): methods on a prototype, not closures per stream. */
class Stream implements H2Request {
  readonly streamId: number;
  readonly method: string;
  readonly scheme: string | null;
  readonly authority: string | null;
  readonly path: string;
  readonly headers: HeaderList;
  /** the trailers end() was given (an empty block when none), sent on 'wantTrailers' */
  private wantTrailers: HeaderList | null = null;

  constructor(
    readonly body: ServerHttp2Stream,
    parts: H2RequestParts,
    private readonly guard: H2FrameGuard,
  ) {
    this.streamId = body.id ?? 0;
    this.method = parts.method;
    this.scheme = parts.scheme;
    this.authority = parts.authority;
    this.path = parts.method === "CONNECT" ? (parts.authority ?? "") : (parts.path ?? "/");
    this.headers = parts.headers;
    // `on`, not `once` (no wrapper per stream): a stream emits 'close' once
    body.on("close", () => {
      guard.streamClosed(this.streamId);
      this.onClose?.();
    });
  }

  onClose: (() => void) | null = null;

  respond(status: number, headers: HeaderList, endStream = false, trailers = true): void {
    const waitForTrailers = !endStream && trailers;
    this.body.respond(h1ResponseToH2Object(status, headers), { endStream, waitForTrailers });
    // an empty trailers block ends a stream whose response turned out to have none
    if (waitForTrailers) this.body.once("wantTrailers", () => this.body.sendTrailers(headerObject(this.wantTrailers ?? [])));
  }

  write(chunk: Uint8Array): boolean {
    return this.body.write(chunk);
  }

  end(trailers?: HeaderList, last?: Uint8Array): void {
    this.wantTrailers = trailers ? trailerFields(trailers) : null;
    // with its last piece: one DATA frame with END_STREAM, where write() then end() sent an empty DATA frame more
    // and had Bun's session flush its frames to the socket at once (its _final), once per response
    if (last !== undefined && last.length > 0) this.body.end(last);
    else this.body.end();
  }

  reset(code: number = http2.constants.NGHTTP2_INTERNAL_ERROR): void {
    this.body.close(code);
  }
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
