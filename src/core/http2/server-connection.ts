/**
 * The client side of HTTP/2: one connection from a client (after CONNECT and TLS with ALPN `h2`, or prior
 * knowledge), turned into requests with the same HTTP/1-style heads the rest of tapwire works with, and their
 * responses turned back into HTTP/2.
 *
 * On tapwire's own sans-io codec (H2Connection, ./connection.ts): the socket's bytes pass the H2FrameGuard first
 * (it answers floods and the 2023-2024 attacks with its own GOAWAY), then feed the connection, which calls back
 * synchronously; what the connection writes is gathered and handed to the socket once per event-loop iteration
 * (setImmediate), as one write. docs/http2.md says why this replaced node:http2 (measured).
 *
 * Backpressure both ways: a stream whose owner pauses it grants the client no more window (consumed() is not
 * called for what it took meanwhile); a response write answers false while the client's window is spent or the
 * socket is full, and onWritable follows.
 */
import type { HeaderList } from "../http1/types.ts";
import { H2Connection, type H2Events } from "./connection.ts";
import { H2_ERROR } from "./frames.ts";
import { goawayFrame, type H2GuardLimits, H2FrameGuard, type H2Violation } from "./guard.ts";
import { H2TranslateError, type H2RequestParts, h1ResponseToH2Flat, h2RequestToH1Flat, trailerFields, trailersFromFlat } from "./headers.ts";

/** What the connection writes to and reads from (an Endpoint fits). */
export interface ByteSink {
  /** false: stop writing until onDrain fires */
  write(bytes: Uint8Array): boolean;
  /** write() of bytes that are overwritten after the call: what is not written at once is copied (optional) */
  writeTransient?(bytes: Uint8Array): boolean;
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
 * One request stream from the client, as tapwire sees it (no Node stream types, no codec types). The owner sets
 * the callbacks synchronously in onRequest; events come after.
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

export class H2ServerConnection implements H2Events {
  private readonly guard: H2FrameGuard;
  private readonly conn: H2Connection;
  private readonly streams = new Map<number, CodecStream>();
  private cut: H2Violation | null = null;
  private ended = false;
  /** the read being fed (its views may be kept; anything else the connection hands out is copied) */
  private reading: ArrayBufferLike | null = null;
  private scheduled = false;
  /** the socket did not take the last write: writes answer false until it drains */
  sinkBlocked = false;
  /** streams told "false" because of the socket, to be told onWritable at its drain */
  private readonly waitingSink = new Set<CodecStream>();
  /** streams that closed, told onClose at the next flush (never from inside the owner's own call) */
  private closing: CodecStream[] = [];
  private out: Uint8Array[] = [];
  private readonly flushBound = () => this.flush();

  constructor(
    private readonly sink: ByteSink,
    private readonly opts: H2ServerOptions,
  ) {
    const maxConcurrentStreams = opts.maxConcurrentStreams ?? 100;
    this.guard = new H2FrameGuard({ maxOpenStreams: 2 * maxConcurrentStreams, ...opts.limits });
    this.conn = new H2Connection("server", this, { maxConcurrentStreams, maxHeaderListSize: opts.maxHeaderListSize ?? 64 * 1024 });
    sink.onDrain = () => this.drained();
    this.schedule(); // our SETTINGS
  }

  /** Bytes from the client. */
  feed(bytes: Uint8Array): void {
    if (this.ended) return;
    const v = this.guard.feed(bytes);
    if (v) return this.violate(v);
    this.reading = bytes.buffer;
    this.conn.feed(bytes);
    this.reading = null;
    this.schedule();
  }

  /** The client's socket closed. */
  socketClosed(): void {
    if (this.ended) return;
    this.conn.close(H2_ERROR.CANCEL, "client disconnected");
    this.close();
  }

  private violate(v: H2Violation): void {
    this.cut = v;
    this.flush();
    this.sink.write(goawayFrame(v));
    this.close();
    this.conn.close(v.code, v.reason);
    this.opts.onViolation?.(v);
  }

  get violation(): H2Violation | null {
    return this.cut;
  }

  private close(): void {
    if (this.ended) return;
    this.flush(); // frames gathered in this turn (a GOAWAY, last responses) go out before the end
    this.ended = true;
    this.sink.end();
  }

  /** A flush at the end of this event-loop iteration. */
  schedule(): void {
    if (this.scheduled || this.ended) return;
    this.scheduled = true;
    setImmediate(this.flushBound);
  }

  private flush(): void {
    this.scheduled = false;
    if (!this.ended) {
      // a sink that copies what it cannot write at once gets the frames as a view of the codec's gather buffer
      const transient = this.sink.writeTransient !== undefined;
      this.conn.flush(transient);
      const parts = this.out;
      if (parts.length > 0) {
        this.out = [];
        const ok = parts.length > 1 ? this.sink.write(Buffer.concat(parts)) : transient ? this.sink.writeTransient!(parts[0]!) : this.sink.write(parts[0]!);
        if (!ok && !this.sinkBlocked) {
          // the client does not read: stop reading it too (no new streams, no WINDOW_UPDATEs that would make
          // tapwire queue more for it) until the socket drains
          this.sinkBlocked = true;
          this.opts.pauseReading();
        }
      }
    }
    if (this.closing.length > 0) {
      const list = this.closing;
      this.closing = [];
      for (const s of list) s.onClose?.(s.rstCode);
    }
  }

  private drained(): void {
    if (this.sinkBlocked) this.opts.resumeReading();
    this.sinkBlocked = false;
    if (this.waitingSink.size === 0) return;
    const list = [...this.waitingSink];
    this.waitingSink.clear();
    for (const s of list) if (!s.closed) s.onWritable?.();
  }

  /** `s` was told "false" because of the socket. */
  waitForSink(s: CodecStream): void {
    this.waitingSink.add(s);
  }

  /** The stream closed (ended both ways, or reset either way): forgotten, and told at the next flush. */
  streamDone(s: CodecStream): void {
    if (this.streams.get(s.streamId) === s) this.streams.delete(s.streamId);
    this.guard.streamClosed(s.streamId);
    this.waitingSink.delete(s);
    this.closing.push(s);
    this.schedule();
    if (this.ended) this.flush();
  }

  // ---------------------------------------------------------------- H2Events (the codec calls these)

  write(bytes: Uint8Array): void {
    this.out.push(bytes);
  }

  headers(streamId: number, fields: string[], endStream: boolean, trailers: boolean): void {
    if (trailers) {
      const s = this.streams.get(streamId);
      if (s !== undefined) s.remoteEnd(trailersFromFlat(fields));
      return;
    }
    let parts: H2RequestParts;
    try {
      parts = h2RequestToH1Flat(fields);
    } catch (e) {
      if (!(e instanceof H2TranslateError)) throw e;
      this.conn.reset(streamId, H2_ERROR.PROTOCOL_ERROR);
      this.guard.streamClosed(streamId);
      return;
    }
    const s = new CodecStream(this, this.conn, streamId, parts, endStream);
    this.streams.set(streamId, s);
    this.opts.onRequest(s);
  }

  data(streamId: number, bytes: Uint8Array, endStream: boolean): void {
    const s = this.streams.get(streamId);
    if (s === undefined) {
      this.conn.consumed(streamId, bytes.length);
      return;
    }
    // a view of the read is kept as it is (a socket read is a buffer of its own); a frame the codec pieced
    // together from two reads sits in its reused buffer: copied
    if (bytes.length > 0) s.data(bytes.buffer === this.reading ? bytes : bytes.slice());
    if (endStream) s.remoteEnd(null);
  }

  reset(streamId: number, code: number): void {
    const s = this.streams.get(streamId);
    if (s !== undefined) s.peerReset(code);
  }

  writable(streamId: number): void {
    const s = this.streams.get(streamId);
    if (s === undefined) return;
    if (this.sinkBlocked) this.waitForSink(s);
    else s.onWritable?.();
  }

  goaway(): void {
    // the client stops opening streams; it closes the socket when done
  }

  closed(): void {
    // a connection error (the GOAWAY went out with the last flush) or close(): every stream was reset first
    this.close();
  }
}

/** One request stream (H2Request) on the codec: methods on a prototype, no closures per stream. */
class CodecStream implements H2Request {
  readonly method: string;
  readonly scheme: string | null;
  readonly authority: string | null;
  readonly path: string;
  readonly headers: HeaderList;
  onData: ((chunk: Uint8Array) => void) | null = null;
  onEnd: ((trailers: HeaderList | null) => void) | null = null;
  onWritable: (() => void) | null = null;
  onClose: ((code: number) => void) | null = null;
  closed = false;
  rstCode = 0;
  private paused = false;
  /** DATA bytes taken while paused, granted back (consumed) at resume() */
  private unconsumed = 0;
  private remoteEnded: boolean;
  private localEnded = false;
  /** respond() said the response may end with trailers */
  private trailersAllowed = false;

  constructor(
    private readonly owner: H2ServerConnection,
    private readonly conn: H2Connection,
    readonly streamId: number,
    parts: H2RequestParts,
    readonly bodyless: boolean,
  ) {
    this.method = parts.method;
    this.scheme = parts.scheme;
    this.authority = parts.authority;
    this.path = parts.method === "CONNECT" ? (parts.authority ?? "") : (parts.path ?? "/");
    this.headers = parts.headers;
    this.remoteEnded = bodyless;
  }

  data(bytes: Uint8Array): void {
    if (this.remoteEnded) return;
    const n = bytes.length;
    this.onData?.(bytes);
    if (this.closed) return; // reset from onData: the codec credited what the stream held
    if (this.paused) this.unconsumed += n;
    else this.conn.consumed(this.streamId, n);
  }

  remoteEnd(trailers: HeaderList | null): void {
    if (this.remoteEnded) return;
    this.remoteEnded = true;
    this.onEnd?.(trailers);
    if (this.localEnded && !this.closed) this.done(0, false);
  }

  peerReset(code: number): void {
    if (this.closed) return;
    this.done(code, true);
  }

  private done(code: number, wasReset: boolean): void {
    this.closed = true;
    this.rstCode = code;
    // what was taken while paused goes back to the connection's window (the codec credits it for a reset stream,
    // not for one that ended both ways)
    if (this.unconsumed > 0 && !wasReset) this.conn.consumed(this.streamId, this.unconsumed);
    this.unconsumed = 0;
    this.owner.streamDone(this);
  }

  private localEnd(): void {
    this.localEnded = true;
    this.owner.schedule();
    if (this.remoteEnded && !this.closed) this.done(0, false);
  }

  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
    if (this.unconsumed > 0) {
      const n = this.unconsumed;
      this.unconsumed = 0;
      if (!this.closed) this.conn.consumed(this.streamId, n);
      this.owner.schedule();
    }
  }

  respond(status: number, headers: HeaderList, endStream = false, trailers = true): void {
    if (this.closed || this.localEnded) return;
    const fields = h1ResponseToH2Flat(status, headers);
    checkFields(fields);
    this.trailersAllowed = trailers;
    this.conn.sendHeaders(this.streamId, fields, endStream);
    if (endStream) this.localEnd();
    else this.owner.schedule();
  }

  interim(status: number, headers: HeaderList): void {
    if (this.closed || this.localEnded) return;
    const fields = [":status", String(status)];
    for (const [k, v] of headers) fields.push(k.toLowerCase(), v);
    checkFields(fields);
    this.conn.sendHeaders(this.streamId, fields, false);
    this.owner.schedule();
  }

  write(chunk: Uint8Array): boolean {
    if (this.closed || this.localEnded) return true;
    const ok = this.conn.sendData(this.streamId, chunk, false);
    this.owner.schedule();
    if (!ok) return false; // writable(streamId) follows
    if (!this.owner.sinkBlocked) return true;
    this.owner.waitForSink(this);
    return false;
  }

  end(trailers?: HeaderList, last?: Uint8Array): void {
    if (this.closed || this.localEnded) return;
    const t = trailers !== undefined && this.trailersAllowed ? trailerFields(trailers) : null;
    if (t !== null && t.length > 0) {
      if (last !== undefined && last.length > 0) this.conn.sendData(this.streamId, last, false);
      const flat: string[] = [];
      for (const [k, v] of t) flat.push(k, v);
      this.conn.sendHeaders(this.streamId, flat, true);
    } else this.conn.sendData(this.streamId, last ?? EMPTY, true);
    this.localEnd();
  }

  reset(code: number = H2_ERROR.INTERNAL_ERROR): void {
    if (this.closed) return;
    this.conn.reset(this.streamId, code);
    this.localEnded = true;
    this.done(code, true);
    this.owner.schedule();
  }
}

const EMPTY = new Uint8Array(0);

/** What node:http2 refused in a field (and a peer would take as a malformed message): CR, LF or NUL in a value, a bad name. */
function checkFields(fields: string[]): void {
  for (let i = 0; i < fields.length; i += 2) {
    const k = fields[i]!;
    const v = fields[i + 1]!;
    if (k.length === 0 || !TOKEN.test(k.charCodeAt(0) === 58 ? k.slice(1) : k)) throw new H2TranslateError(`invalid field name ${JSON.stringify(k)}`);
    if (BAD_VALUE.test(v)) throw new H2TranslateError(`invalid value for ${k}`);
  }
}
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9a-z]+$/;
const BAD_VALUE = /[\r\n\0]/;
