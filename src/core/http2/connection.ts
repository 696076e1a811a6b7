/**
 * A sans-io HTTP/2 connection (RFC 9113) for both roles, on the HPACK codec of ./hpack.ts.
 *
 * Bytes read from the socket go to feed(); the connection parses the frames in place (views of the read; only a
 * frame split across reads is joined into a buffer of its own) and calls the owner's H2Events synchronously. What it
 * sends is gathered in a FrameWriter and handed to events.write() at flush(), which the owner calls once per
 * event-loop iteration (or before closing). Streams are small class instances in one Map; no closures, promises or
 * emitters per stream or per frame.
 *
 * Policies (RFC 9113 leaves them to the implementation):
 * - Flow control, receiving: DATA counts against the stream and connection windows until the owner calls
 *   consumed(); WINDOW_UPDATEs are sent once half a window has been consumed (a stream's: half our initial window; the
 *   connection's: half of connectionWindow). Padding is credited at once. A stream reset (either way) credits what it
 *   held and had not been consumed to the connection: the owner does not call consumed() for a reset stream; a
 *   consumed() for a stream no longer known credits the connection only.
 * - Flow control, sending: sendData() sends what the windows allow and keeps a reference to the rest (no copy); it
 *   answers false when anything is left queued, and writable() follows when the queue is empty again.
 * - A request header list over maxHeaderListSize (server role): the connection answers 431 itself (END_STREAM, then
 *   RST_STREAM NO_ERROR when the request had not ended); the owner never sees the stream. Trailers over the limit, and a
 *   response head over the limit (client role): RST_STREAM PROTOCOL_ERROR to the peer and reset(id, PROTOCOL_ERROR)
 *   to the owner.
 * - A new stream above maxConcurrentStreams (server role): RST_STREAM REFUSED_STREAM, the owner never sees it.
 * - Frames on a closed stream (one reset or ended a while ago) are dropped (DATA still credits the connection
 *   window); frames on an idle stream are a connection PROTOCOL_ERROR.
 * - Received field sections are checked (RFC 9113 8.2-8.3, see checkFields): a malformed request is reset with
 *   PROTOCOL_ERROR before the owner sees it; a malformed response head or trailers, or DATA before the final response
 *   head, resets the stream (reset(id, PROTOCOL_ERROR) to the owner). A request body must match its content-length
 *   (server role only: a client role does not know whether a response answers a HEAD).
 * - Connection errors: GOAWAY with the code and a reason, flushed at once, then reset(id, code) for every stream
 *   still known and closed(code, reason). feed() never throws: an exception from an event handler becomes an
 *   INTERNAL_ERROR connection error. close() (the socket closed) gives the streams reset(id, CANCEL) and closed().
 * - Not done: PRIORITY is ignored, no SETTINGS ack timeout, no server push (never sent, refused when received),
 *   the peer's SETTINGS_MAX_HEADER_LIST_SIZE is not enforced on what we send, what we send is not checked (the
 *   owner checks the fields it sends).
 */
import { HeaderListTooLarge, HpackDecoder, HpackEncoder } from "./hpack.ts";
import {
  DEFAULT_WINDOW,
  FLAG,
  FRAME,
  FrameWriter,
  H2_ERROR,
  MAX_MAX_FRAME_SIZE,
  MAX_WINDOW,
  MIN_MAX_FRAME_SIZE,
  PREFACE,
  SETTING,
  frameFlags,
  frameLength,
  frameStream,
  frameType,
  read31,
  read32,
} from "./frames.ts";

export interface H2Events {
  /** bytes to send (call order = wire order). The connection gathers the frames of one feed()/API call burst and
   *  hands them over in as few calls as possible; see flush(). The bytes stay valid (the owner may keep them). */
  write(bytes: Uint8Array): void;
  /** server: a request head or trailers (`trailers` true); client: a response head (1xx included: look at :status)
   *  or trailers (`trailers` true) */
  headers(streamId: number, fields: string[], endStream: boolean, trailers: boolean): void;
  /** DATA payload (a view into the read: copy it if kept past the call), padding removed */
  data(streamId: number, bytes: Uint8Array, endStream: boolean): void;
  /** the peer reset the stream (or the connection closed it: code and a reason) */
  reset(streamId: number, code: number): void;
  /** a stream whose sendData() returned false may send again */
  writable(streamId: number): void;
  /** GOAWAY received (client role: no new streams; streams above lastStreamId were refused) */
  goaway(lastStreamId: number, code: number): void;
  /** the connection is dead (protocol error: GOAWAY already sent; or closed): no more events */
  closed(code: number, reason: string): void;
}

export interface H2Settings {
  maxConcurrentStreams: number;
  initialWindowSize: number;
  maxFrameSize: number;
  maxHeaderListSize: number;
  headerTableSize: number;
  enablePush: false;
  /** The connection's receive window (raised from 65,535 by a WINDOW_UPDATE at start). Not a SETTINGS parameter. */
  connectionWindow: number;
}

export const DEFAULT_H2_SETTINGS: H2Settings = {
  maxConcurrentStreams: 100,
  initialWindowSize: 1 << 20,
  maxFrameSize: 16384,
  maxHeaderListSize: 64 * 1024,
  headerTableSize: 4096,
  enablePush: false,
  connectionWindow: 16 << 20,
};

class Stream {
  localEnded = false;
  remoteEnded = false;
  /** server: the request head came; client: the final (non-1xx) response head came */
  headSeen = false;
  /** DATA bytes delivered to the owner and not consumed yet */
  held = 0;
  /** consumed bytes not announced in a WINDOW_UPDATE yet */
  recvUnacked = 0;
  /** DATA waiting for window (references to the owner's bytes); the first one from qOff */
  queue: Uint8Array[] | null = null;
  qOff = 0;
  queued = 0;
  /** END_STREAM goes with the last queued DATA */
  endQueued = false;
  /** trailers to send once the queue is empty */
  trailers: string[] | null = null;
  wantWritable = false;
  inBlocked = false;
  gone = false;
  /** server role: the request's content-length (-1: none) and the DATA bytes received */
  contentLength = -1;
  received = 0;
  constructor(
    readonly id: number,
    public sendWindow: number,
    public recvWindow: number,
  ) {}
}

const EMPTY = new Uint8Array(0);

const REQUEST = 0;
const RESPONSE = 1;
const TRAILERS = 2;
const MALFORMED = -2;

/**
 * The checks of RFC 9113 8.2-8.3 on a received field section (kind REQUEST, RESPONSE or TRAILERS): pseudo-header
 * fields first, only the defined ones, once each, none in trailers; the required ones present; names without
 * upper-case letters, controls, space or ':' (no NUL, CR or LF in any value); no connection-specific fields (connection, keep-alive, proxy-connection, transfer-encoding,
 * upgrade; te other than "trailers"); content-length all digits and the same when repeated. Answers the
 * content-length (-1 when none) or MALFORMED.
 */
function checkFields(f: string[], kind: number): number {
  let regular = false;
  let cl = -1;
  let method = "";
  let scheme = false;
  let path = false;
  let status = false;
  for (let i = 0; i < f.length; i += 2) {
    const name = f[i]!;
    const value = f[i + 1]!;
    // no NUL, CR or LF in any value (pseudo-header fields included): they would split an HTTP/1 head
    for (let j = 0; j < value.length; j++) {
      const c = value.charCodeAt(j);
      if (c < 14 && (c === 0 || c === 10 || c === 13)) return MALFORMED;
    }
    if (name.charCodeAt(0) === 58 /* : */) {
      if (regular || kind === TRAILERS) return MALFORMED;
      if (kind === REQUEST) {
        switch (name) {
          case ":method":
            if (method !== "") return MALFORMED;
            method = f[i + 1]!;
            if (method === "") return MALFORMED;
            break;
          case ":scheme":
            if (scheme) return MALFORMED;
            scheme = true;
            break;
          case ":path":
            if (path || f[i + 1]!.length === 0) return MALFORMED;
            path = true;
            break;
          case ":authority":
          case ":protocol":
            break;
          default:
            return MALFORMED;
        }
      } else if (name !== ":status" || status) return MALFORMED;
      else status = true;
      continue;
    }
    regular = true;
    if (name.length === 0) return MALFORMED;
    for (let j = 0; j < name.length; j++) {
      // no upper-case letters, controls, space, DEL, non-ASCII or ':' in a name
      const c = name.charCodeAt(j);
      if (c <= 32 || c >= 127 || (c >= 65 && c <= 90) || c === 58) return MALFORMED;
    }
    switch (name) {
      case "connection":
      case "keep-alive":
      case "proxy-connection":
      case "transfer-encoding":
      case "upgrade":
        return MALFORMED;
      case "te":
        if (f[i + 1] !== "trailers") return MALFORMED;
        break;
      case "content-length": {
        const v = f[i + 1]!;
        if (v.length === 0 || v.length > 15) return MALFORMED;
        let n = 0;
        for (let j = 0; j < v.length; j++) {
          const d = v.charCodeAt(j) - 48;
          if (d < 0 || d > 9) return MALFORMED;
          n = n * 10 + d;
        }
        if (cl !== -1 && cl !== n) return MALFORMED;
        cl = n;
        break;
      }
      default:
        break;
    }
  }
  if (kind === REQUEST) {
    if (method === "") return MALFORMED;
    if (method !== "CONNECT" && (!scheme || !path)) return MALFORMED;
  } else if (kind === RESPONSE && !status) return MALFORMED;
  return cl;
}
const textEncoder = new TextEncoder();

export class H2Connection {
  private readonly settings: H2Settings;
  private readonly writer = new FrameWriter();
  private readonly decoder: HpackDecoder;
  private readonly encoder = new HpackEncoder();
  private readonly streams = new Map<number, Stream>();
  /** streams with queued DATA waiting for window */
  private blocked: Stream[] = [];

  private prefaceLeft: number;
  private gotSettings = false;
  private dead = false;
  private sentGoaway = false;
  private sentGoawayLast = 0;
  private peerGoaway = false;

  /** frame split across reads */
  private pend = EMPTY;
  private pendLen = 0;
  /** header block being assembled (HEADERS without END_HEADERS): its stream, 0 when none */
  private blockStream = 0;
  private blockEndStream = false;
  private block = EMPTY;
  private blockLen = 0;

  private nextStreamId: number;
  private lastPeerStreamId = 0;

  private peerInitialWindow = DEFAULT_WINDOW;
  private peerMaxFrameSize = MIN_MAX_FRAME_SIZE;
  private peerMaxConcurrent = 0x7fffffff;
  /** the peer's SETTINGS_MAX_HEADER_LIST_SIZE (informational; not enforced on what we send) */
  peerMaxHeaderListSize = 0x7fffffff;
  private connSend = DEFAULT_WINDOW;
  private connRecv: number;
  private connUnacked = 0;

  private readonly writableNow: number[] = [];

  constructor(
    readonly role: "server" | "client",
    private readonly events: H2Events,
    local?: Partial<H2Settings>,
  ) {
    this.settings = { ...DEFAULT_H2_SETTINGS, ...local };
    const s = this.settings;
    this.decoder = new HpackDecoder(s.headerTableSize);
    this.nextStreamId = role === "client" ? 1 : 2;
    this.prefaceLeft = role === "server" ? PREFACE.length : 0;
    if (role === "client") this.writer.raw(PREFACE);
    const pairs: number[] = [];
    if (s.headerTableSize !== 4096) pairs.push(SETTING.HEADER_TABLE_SIZE, s.headerTableSize);
    if (role === "client") pairs.push(SETTING.ENABLE_PUSH, 0);
    pairs.push(SETTING.MAX_CONCURRENT_STREAMS, s.maxConcurrentStreams);
    pairs.push(SETTING.INITIAL_WINDOW_SIZE, s.initialWindowSize);
    if (s.maxFrameSize !== MIN_MAX_FRAME_SIZE) pairs.push(SETTING.MAX_FRAME_SIZE, s.maxFrameSize);
    pairs.push(SETTING.MAX_HEADER_LIST_SIZE, s.maxHeaderListSize);
    this.writer.settings(pairs);
    this.connRecv = DEFAULT_WINDOW;
    if (s.connectionWindow > DEFAULT_WINDOW) {
      this.writer.windowUpdate(0, s.connectionWindow - DEFAULT_WINDOW);
      this.connRecv = s.connectionWindow;
    }
  }

  get peerMaxConcurrentStreams(): number {
    return this.peerMaxConcurrent;
  }
  get openStreams(): number {
    return this.streams.size;
  }
  get goingAway(): boolean {
    return this.sentGoaway || this.peerGoaway;
  }
  get isClosed(): boolean {
    return this.dead;
  }
  /** the highest stream id the peer opened */
  get lastStreamId(): number {
    return this.lastPeerStreamId;
  }
  /** bytes gathered and not handed to write() yet */
  get pendingBytes(): number {
    return this.writer.pending;
  }
  /** DATA bytes the connection may still send before the peer's next connection WINDOW_UPDATE */
  get connectionSendWindow(): number {
    return this.connSend;
  }
  /** DATA bytes queued on a stream, waiting for window */
  queuedBytes(streamId: number): number {
    const s = this.streams.get(streamId);
    return s ? s.queued : 0;
  }

  /**
   * Hands the gathered frames to write(). `transient`: write() may get a view of the gather buffer that the next
   * frame overwrites (an owner that writes it at once and copies what its socket does not take saves a copy).
   */
  flush(transient = false): void {
    if (!this.writer.empty) this.writer.take(this.events, transient);
  }

  // ---------------------------------------------------------------- reading

  feed(bytes: Uint8Array): void {
    if (this.dead) return;
    try {
      this.feedInner(bytes);
    } catch (e) {
      this.connError(H2_ERROR.INTERNAL_ERROR, `internal error: ${(e as Error)?.message ?? e}`);
    }
  }

  private feedInner(bytes: Uint8Array): void {
    let p = 0;
    const n = bytes.length;
    if (this.prefaceLeft > 0) {
      const off = PREFACE.length - this.prefaceLeft;
      const m = Math.min(this.prefaceLeft, n);
      for (let i = 0; i < m; i++) {
        if (bytes[i] !== PREFACE[off + i]) return this.connError(H2_ERROR.PROTOCOL_ERROR, "not the HTTP/2 connection preface");
      }
      this.prefaceLeft -= m;
      p = m;
      if (p === n) return;
    }
    if (this.pendLen > 0) {
      // complete the frame split across reads
      if (this.pendLen < 9) {
        const m = Math.min(9 - this.pendLen, n - p);
        this.pend.set(bytes.subarray(p, p + m), this.pendLen);
        this.pendLen += m;
        p += m;
        if (this.pendLen < 9) return;
      }
      const len = frameLength(this.pend, 0);
      if (len > this.settings.maxFrameSize) return this.connError(H2_ERROR.FRAME_SIZE_ERROR, `a frame of ${len} bytes (limit ${this.settings.maxFrameSize})`);
      const need = 9 + len;
      if (this.pend.length < need) {
        const next = new Uint8Array(need);
        next.set(this.pend.subarray(0, this.pendLen));
        this.pend = next;
      }
      const m = Math.min(need - this.pendLen, n - p);
      this.pend.set(bytes.subarray(p, p + m), this.pendLen);
      this.pendLen += m;
      p += m;
      if (this.pendLen < need) return;
      this.pendLen = 0;
      this.frame(this.pend, 0, len);
      if (this.dead) return;
    }
    const max = this.settings.maxFrameSize;
    while (p < n) {
      if (n - p < 9) {
        this.stash(bytes, p, 9);
        return;
      }
      const len = frameLength(bytes, p);
      if (len > max) return this.connError(H2_ERROR.FRAME_SIZE_ERROR, `a frame of ${len} bytes (limit ${max})`);
      if (n - p < 9 + len) {
        this.stash(bytes, p, 9 + len);
        return;
      }
      this.frame(bytes, p, len);
      if (this.dead) return;
      p += 9 + len;
    }
  }

  private stash(bytes: Uint8Array, p: number, need: number): void {
    if (this.pend.length < need) this.pend = new Uint8Array(Math.max(need, 64));
    this.pend.set(bytes.subarray(p), 0);
    this.pendLen = bytes.length - p;
  }

  /** One whole frame: header at b[o..o+9), payload at b[o+9..o+9+len). */
  private frame(b: Uint8Array, o: number, len: number): void {
    const type = frameType(b, o);
    const flags = frameFlags(b, o);
    const sid = frameStream(b, o);
    if (!this.gotSettings) {
      if (type !== FRAME.SETTINGS || (flags & FLAG.ACK) !== 0) return this.connError(H2_ERROR.PROTOCOL_ERROR, "the first frame is not SETTINGS");
      this.gotSettings = true;
    }
    if (this.blockStream !== 0 && (type !== FRAME.CONTINUATION || sid !== this.blockStream)) {
      return this.connError(H2_ERROR.PROTOCOL_ERROR, "a frame inside a header block that has not ended");
    }
    switch (type) {
      case FRAME.DATA:
        return this.onData(b, o, len, flags, sid);
      case FRAME.HEADERS:
        return this.onHeaders(b, o, len, flags, sid);
      case FRAME.PRIORITY:
        if (sid === 0) return this.connError(H2_ERROR.PROTOCOL_ERROR, "PRIORITY on stream 0");
        if (len !== 5) return this.streamError(sid, H2_ERROR.FRAME_SIZE_ERROR);
        return;
      case FRAME.RST_STREAM:
        return this.onRst(b, o, len, sid);
      case FRAME.SETTINGS:
        return this.onSettings(b, o, len, flags, sid);
      case FRAME.PUSH_PROMISE:
        return this.connError(H2_ERROR.PROTOCOL_ERROR, "PUSH_PROMISE (push is disabled)");
      case FRAME.PING:
        if (sid !== 0) return this.connError(H2_ERROR.PROTOCOL_ERROR, "PING on a stream");
        if (len !== 8) return this.connError(H2_ERROR.FRAME_SIZE_ERROR, "PING of a length other than 8");
        if ((flags & FLAG.ACK) === 0) this.writer.ping(b, o + 9, true);
        return;
      case FRAME.GOAWAY:
        return this.onGoaway(b, o, len, sid);
      case FRAME.WINDOW_UPDATE:
        return this.onWindowUpdate(b, o, len, sid);
      case FRAME.CONTINUATION:
        return this.onContinuation(b, o, len, flags, sid);
      default:
        return; // unknown frame types are ignored
    }
  }

  /** a stream id the peer could not have used yet */
  private isIdle(sid: number): boolean {
    if (this.role === "server") return (sid & 1) === 0 ? sid >= this.nextStreamId : sid > this.lastPeerStreamId;
    return (sid & 1) === 1 ? sid >= this.nextStreamId : sid > this.lastPeerStreamId;
  }

  private onData(b: Uint8Array, o: number, len: number, flags: number, sid: number): void {
    if (sid === 0) return this.connError(H2_ERROR.PROTOCOL_ERROR, "DATA on stream 0");
    let start = o + 9;
    let end = start + len;
    if ((flags & FLAG.PADDED) !== 0) {
      if (len < 1) return this.connError(H2_ERROR.FRAME_SIZE_ERROR, "a padded DATA frame without its pad length");
      const pad = b[start]!;
      if (pad >= len) return this.connError(H2_ERROR.PROTOCOL_ERROR, "DATA padding longer than the frame");
      start++;
      end -= pad;
    }
    this.connRecv -= len;
    if (this.connRecv < 0) return this.connError(H2_ERROR.FLOW_CONTROL_ERROR, "DATA beyond the connection window");
    const s = this.streams.get(sid);
    if (s === undefined) {
      if (this.isIdle(sid)) return this.connError(H2_ERROR.PROTOCOL_ERROR, "DATA on an idle stream");
      this.creditConnection(len);
      return;
    }
    if (s.remoteEnded) {
      this.creditConnection(len);
      return this.streamError(sid, H2_ERROR.STREAM_CLOSED);
    }
    if (!s.headSeen) {
      // client role: DATA before the final response head is a malformed response (RFC 9113 8.1)
      this.creditConnection(len);
      return this.streamError(sid, H2_ERROR.PROTOCOL_ERROR);
    }
    s.recvWindow -= len;
    if (s.recvWindow < 0) {
      this.creditConnection(len);
      return this.streamError(sid, H2_ERROR.FLOW_CONTROL_ERROR);
    }
    const n = end - start;
    const endStream = (flags & FLAG.END_STREAM) !== 0;
    if (s.contentLength >= 0) {
      // a request body longer or shorter than its content-length is malformed (RFC 9113 8.1.1)
      s.received += n;
      if (s.received > s.contentLength || (endStream && s.received !== s.contentLength)) {
        this.creditConnection(len);
        return this.streamError(sid, H2_ERROR.PROTOCOL_ERROR);
      }
    }
    if (n < len) this.credit(s, len - n);
    s.held += n;
    if (endStream) s.remoteEnded = true;
    if (n > 0 || endStream) this.events.data(sid, b.subarray(start, end), endStream);
    if (endStream) this.maybeClose(s);
  }

  private onHeaders(b: Uint8Array, o: number, len: number, flags: number, sid: number): void {
    if (sid === 0) return this.connError(H2_ERROR.PROTOCOL_ERROR, "HEADERS on stream 0");
    let start = o + 9;
    let end = start + len;
    if ((flags & FLAG.PADDED) !== 0) {
      if (len < 1) return this.connError(H2_ERROR.FRAME_SIZE_ERROR, "a padded HEADERS frame without its pad length");
      const pad = b[start]!;
      start++;
      end -= pad;
    }
    if ((flags & FLAG.PRIORITY) !== 0) start += 5;
    if (end < start) return this.connError(H2_ERROR.PROTOCOL_ERROR, "HEADERS padding or priority longer than the frame");
    const endStream = (flags & FLAG.END_STREAM) !== 0;
    if ((flags & FLAG.END_HEADERS) !== 0) return this.onBlock(sid, b.subarray(start, end), endStream);
    this.blockStream = sid;
    this.blockEndStream = endStream;
    this.blockLen = 0;
    this.appendBlock(b, start, end);
  }

  private onContinuation(b: Uint8Array, o: number, len: number, flags: number, sid: number): void {
    if (this.blockStream === 0) return this.connError(H2_ERROR.PROTOCOL_ERROR, "CONTINUATION outside a header block");
    if (!this.appendBlock(b, o + 9, o + 9 + len)) return;
    if ((flags & FLAG.END_HEADERS) !== 0) {
      this.blockStream = 0;
      this.onBlock(sid, this.block.subarray(0, this.blockLen), this.blockEndStream);
    }
  }

  private appendBlock(b: Uint8Array, start: number, end: number): boolean {
    const n = end - start;
    const need = this.blockLen + n;
    if (need > 4 * this.settings.maxHeaderListSize + 16384) {
      this.connError(H2_ERROR.ENHANCE_YOUR_CALM, `a header block over ${need - n} bytes`);
      return false;
    }
    if (this.block.length < need) {
      const next = new Uint8Array(Math.max(need, this.block.length * 2, 1024));
      next.set(this.block.subarray(0, this.blockLen));
      this.block = next;
    }
    this.block.set(b.subarray(start, end), this.blockLen);
    this.blockLen = need;
    return true;
  }

  /** A complete header block for stream sid. */
  private onBlock(sid: number, block: Uint8Array, endStream: boolean): void {
    const fields: string[] = [];
    let tooLarge = false;
    try {
      this.decoder.decode(block, this.settings.maxHeaderListSize, fields);
    } catch (e) {
      if (e instanceof HeaderListTooLarge) tooLarge = true;
      else return this.connError(H2_ERROR.COMPRESSION_ERROR, `HPACK: ${(e as Error)?.message ?? e}`);
    }
    const s = this.streams.get(sid);
    if (s === undefined) {
      if (this.role === "client") {
        if (this.isIdle(sid)) return this.connError(H2_ERROR.PROTOCOL_ERROR, "HEADERS on an idle stream");
        return; // a stream reset or ended meanwhile
      }
      if ((sid & 1) === 0) return this.connError(H2_ERROR.PROTOCOL_ERROR, "HEADERS on a server stream id");
      if (sid <= this.lastPeerStreamId) return; // closed stream (reset meanwhile): dropped
      this.lastPeerStreamId = sid;
      if (this.sentGoaway) return; // after our GOAWAY: new streams are ignored
      if (tooLarge) {
        this.writer.headers(sid, this.encoder.encodeView([":status", "431"]), true, this.peerMaxFrameSize);
        if (!endStream) this.writer.rstStream(sid, H2_ERROR.NO_ERROR);
        return;
      }
      const cl = checkFields(fields, REQUEST);
      if (cl === MALFORMED || (endStream && cl > 0)) {
        this.writer.rstStream(sid, H2_ERROR.PROTOCOL_ERROR);
        return;
      }
      if (this.streams.size >= this.settings.maxConcurrentStreams) {
        this.writer.rstStream(sid, H2_ERROR.REFUSED_STREAM);
        return;
      }
      const ns = new Stream(sid, this.peerInitialWindow, this.settings.initialWindowSize);
      ns.contentLength = cl;
      ns.headSeen = true;
      ns.remoteEnded = endStream;
      this.streams.set(sid, ns);
      this.events.headers(sid, fields, endStream, false);
      return;
    }
    if (s.remoteEnded) return this.streamError(sid, H2_ERROR.STREAM_CLOSED);
    if (tooLarge) return this.streamError(sid, H2_ERROR.PROTOCOL_ERROR);
    if (!s.headSeen) {
      // client role: a response head (1xx or final)
      let informational = false;
      for (let i = 0; i < fields.length; i += 2) {
        if (fields[i] === ":status") {
          const v = fields[i + 1]!;
          informational = v.length === 3 && v.charCodeAt(0) === 49; // '1'
          break;
        }
      }
      if ((informational && endStream) || checkFields(fields, RESPONSE) === MALFORMED) return this.streamError(sid, H2_ERROR.PROTOCOL_ERROR);
      if (!informational) s.headSeen = true;
      if (endStream) s.remoteEnded = true;
      this.events.headers(sid, fields, endStream, false);
      if (endStream) this.maybeClose(s);
      return;
    }
    // trailers end the stream, carry no pseudo-header fields, and the body had its content-length
    if (!endStream || checkFields(fields, TRAILERS) === MALFORMED || (s.contentLength >= 0 && s.received !== s.contentLength)) {
      return this.streamError(sid, H2_ERROR.PROTOCOL_ERROR);
    }
    s.remoteEnded = true;
    this.events.headers(sid, fields, true, true);
    this.maybeClose(s);
  }

  private onRst(b: Uint8Array, o: number, len: number, sid: number): void {
    if (sid === 0) return this.connError(H2_ERROR.PROTOCOL_ERROR, "RST_STREAM on stream 0");
    if (len !== 4) return this.connError(H2_ERROR.FRAME_SIZE_ERROR, "RST_STREAM of a length other than 4");
    if (this.isIdle(sid)) return this.connError(H2_ERROR.PROTOCOL_ERROR, "RST_STREAM on an idle stream");
    const s = this.streams.get(sid);
    if (s === undefined) return;
    this.drop(s);
    this.events.reset(sid, read32(b, o + 9));
  }

  private onSettings(b: Uint8Array, o: number, len: number, flags: number, sid: number): void {
    if (sid !== 0) return this.connError(H2_ERROR.PROTOCOL_ERROR, "SETTINGS on a stream");
    if ((flags & FLAG.ACK) !== 0) {
      if (len !== 0) return this.connError(H2_ERROR.FRAME_SIZE_ERROR, "a SETTINGS ack with a payload");
      return;
    }
    if (len % 6 !== 0) return this.connError(H2_ERROR.FRAME_SIZE_ERROR, "SETTINGS of a length not a multiple of 6");
    let grew = false;
    for (let p = o + 9, end = o + 9 + len; p < end; p += 6) {
      const id = (b[p]! << 8) | b[p + 1]!;
      const v = read32(b, p + 2);
      switch (id) {
        case SETTING.HEADER_TABLE_SIZE:
          this.encoder.setPeerMaxTableSize(v);
          break;
        case SETTING.ENABLE_PUSH:
          if (v > 1 || (this.role === "client" && v !== 0)) return this.connError(H2_ERROR.PROTOCOL_ERROR, `SETTINGS_ENABLE_PUSH ${v}`);
          break;
        case SETTING.MAX_CONCURRENT_STREAMS:
          this.peerMaxConcurrent = v;
          break;
        case SETTING.INITIAL_WINDOW_SIZE: {
          if (v > MAX_WINDOW) return this.connError(H2_ERROR.FLOW_CONTROL_ERROR, `SETTINGS_INITIAL_WINDOW_SIZE ${v}`);
          const delta = v - this.peerInitialWindow;
          this.peerInitialWindow = v;
          if (delta !== 0) {
            for (const s of this.streams.values()) {
              s.sendWindow += delta;
              if (s.sendWindow > MAX_WINDOW) return this.connError(H2_ERROR.FLOW_CONTROL_ERROR, "a stream window above 2^31-1 after SETTINGS_INITIAL_WINDOW_SIZE");
            }
            if (delta > 0) grew = true;
          }
          break;
        }
        case SETTING.MAX_FRAME_SIZE:
          if (v < MIN_MAX_FRAME_SIZE || v > MAX_MAX_FRAME_SIZE) return this.connError(H2_ERROR.PROTOCOL_ERROR, `SETTINGS_MAX_FRAME_SIZE ${v}`);
          this.peerMaxFrameSize = v;
          break;
        case SETTING.MAX_HEADER_LIST_SIZE:
          this.peerMaxHeaderListSize = v;
          break;
        default:
          break; // unknown settings are ignored
      }
    }
    this.writer.settingsAck();
    if (grew) {
      for (const s of this.streams.values()) if (s.queue !== null && !s.inBlocked) this.markBlocked(s);
      this.drainBlocked();
    }
  }

  private onGoaway(b: Uint8Array, o: number, len: number, sid: number): void {
    if (sid !== 0) return this.connError(H2_ERROR.PROTOCOL_ERROR, "GOAWAY on a stream");
    if (len < 8) return this.connError(H2_ERROR.FRAME_SIZE_ERROR, "GOAWAY shorter than 8 bytes");
    const last = read31(b, o + 9);
    const code = read32(b, o + 13);
    this.peerGoaway = true;
    this.events.goaway(last, code);
    if (this.role === "client") {
      const refused: number[] = [];
      for (const id of this.streams.keys()) if (id > last) refused.push(id);
      for (const id of refused) {
        const s = this.streams.get(id);
        if (s === undefined) continue;
        this.drop(s);
        this.events.reset(id, H2_ERROR.REFUSED_STREAM);
      }
    }
  }

  private onWindowUpdate(b: Uint8Array, o: number, len: number, sid: number): void {
    if (len !== 4) return this.connError(H2_ERROR.FRAME_SIZE_ERROR, "WINDOW_UPDATE of a length other than 4");
    const inc = read31(b, o + 9);
    if (sid === 0) {
      if (inc === 0) return this.connError(H2_ERROR.PROTOCOL_ERROR, "a WINDOW_UPDATE of 0 on the connection");
      this.connSend += inc;
      if (this.connSend > MAX_WINDOW) return this.connError(H2_ERROR.FLOW_CONTROL_ERROR, "the connection window above 2^31-1");
      this.drainBlocked();
      return;
    }
    if (this.isIdle(sid)) return this.connError(H2_ERROR.PROTOCOL_ERROR, "WINDOW_UPDATE on an idle stream");
    const s = this.streams.get(sid);
    if (s === undefined) return;
    if (inc === 0) return this.streamError(sid, H2_ERROR.PROTOCOL_ERROR);
    s.sendWindow += inc;
    if (s.sendWindow > MAX_WINDOW) return this.streamError(sid, H2_ERROR.FLOW_CONTROL_ERROR);
    if (s.queue !== null && this.connSend > 0) {
      if (this.drain(s)) this.afterDrain(s);
      this.emitWritable();
    }
  }

  // ---------------------------------------------------------------- errors and closing

  private connError(code: number, reason: string): void {
    if (this.dead) return;
    this.writer.goaway(this.goawayLastId(), code, textEncoder.encode(reason.slice(0, 200)));
    this.flush();
    this.shutdown(code, reason);
  }

  private shutdown(code: number, reason: string): void {
    this.dead = true;
    const ids = [...this.streams.keys()];
    for (const s of this.streams.values()) s.gone = true;
    this.streams.clear();
    this.blocked = [];
    for (const id of ids) this.events.reset(id, code);
    this.events.closed(code, reason);
  }

  /** The socket closed (or the owner gives up on the connection): every stream gets reset(id, code), then closed(). */
  close(code: number = H2_ERROR.CANCEL, reason = "connection closed"): void {
    if (this.dead) return;
    this.shutdown(code, reason);
  }

  /** RST_STREAM to the peer and reset(sid, code) to the owner when the stream was known. */
  private streamError(sid: number, code: number): void {
    this.writer.rstStream(sid, code);
    const s = this.streams.get(sid);
    if (s === undefined) return;
    this.drop(s);
    this.events.reset(sid, code);
  }

  /** Forgets a stream that was reset: what it held is credited to the connection. */
  private drop(s: Stream): void {
    this.streams.delete(s.id);
    s.gone = true;
    s.queue = null;
    s.queued = 0;
    if (s.held > 0) {
      const h = s.held;
      s.held = 0;
      this.creditConnection(h);
    }
  }

  private maybeClose(s: Stream): void {
    if (s.localEnded && s.remoteEnded && !s.gone) {
      s.gone = true;
      this.streams.delete(s.id);
    }
  }

  // ---------------------------------------------------------------- flow control, receiving

  consumed(streamId: number, n: number): void {
    if (this.dead || n <= 0) return;
    const s = this.streams.get(streamId);
    if (s !== undefined) {
      s.held = s.held > n ? s.held - n : 0;
      this.credit(s, n);
    }
    this.creditConnection(n);
  }

  /** n bytes of stream s consumed: its WINDOW_UPDATE once half our initial window is consumed */
  private credit(s: Stream, n: number): void {
    if (s.remoteEnded) return;
    s.recvUnacked += n;
    if (s.recvUnacked >= this.settings.initialWindowSize >> 1) {
      this.writer.windowUpdate(s.id, s.recvUnacked);
      s.recvWindow += s.recvUnacked;
      s.recvUnacked = 0;
    }
  }

  private creditConnection(n: number): void {
    this.connUnacked += n;
    if (this.connUnacked >= this.settings.connectionWindow >> 1) {
      this.writer.windowUpdate(0, this.connUnacked);
      this.connRecv += this.connUnacked;
      this.connUnacked = 0;
    }
  }

  // ---------------------------------------------------------------- sending

  /** client role: opens a stream with a request head. Throws when no stream can be opened. */
  openStream(fields: string[], endStream: boolean): number {
    if (this.role !== "client") throw new Error("openStream is for the client role");
    if (this.dead) throw new Error("the HTTP/2 connection is closed");
    if (this.goingAway) throw new Error("the HTTP/2 connection is going away");
    if (this.streams.size >= this.peerMaxConcurrent) throw new Error(`the peer allows ${this.peerMaxConcurrent} streams at once`);
    const id = this.nextStreamId;
    if (id > MAX_WINDOW) throw new Error("stream ids exhausted");
    this.nextStreamId += 2;
    const s = new Stream(id, this.peerInitialWindow, this.settings.initialWindowSize);
    this.streams.set(id, s);
    this.writer.headers(id, this.encoder.encodeView(fields), endStream, this.peerMaxFrameSize);
    if (endStream) s.localEnded = true;
    return id;
  }

  /** A response head, a 1xx head, or trailers (endStream true). Ignored for a stream that is gone (reset). */
  sendHeaders(streamId: number, fields: string[], endStream: boolean): void {
    const s = this.streams.get(streamId);
    if (s === undefined || s.localEnded || this.dead) return;
    if (s.queue !== null) {
      if (!endStream) throw new Error("HEADERS after queued DATA must end the stream (trailers)");
      s.trailers = fields;
      return;
    }
    this.writer.headers(streamId, this.encoder.encodeView(fields), endStream, this.peerMaxFrameSize);
    if (endStream) {
      s.localEnded = true;
      this.maybeClose(s);
    }
  }

  /**
   * Sends DATA as far as the windows allow; the rest is queued (a reference, no copy). Answers false when something
   * is queued: writable(streamId) follows once the queue is empty. Answers true (and drops the bytes) for a stream
   * that is gone (reset).
   */
  sendData(streamId: number, bytes: Uint8Array, endStream: boolean): boolean {
    const s = this.streams.get(streamId);
    if (s === undefined || s.localEnded || this.dead) return true;
    if (s.queue !== null) {
      s.queue.push(bytes);
      s.queued += bytes.length;
      if (endStream) s.endQueued = true;
      s.wantWritable = true;
      return false;
    }
    const p = this.sendNow(s, bytes, 0, endStream);
    if (p === bytes.length) return true;
    s.queue = [bytes];
    s.qOff = p;
    s.queued = bytes.length - p;
    s.endQueued = endStream;
    s.wantWritable = true;
    this.markBlocked(s);
    return false;
  }

  /** Writes DATA frames for bytes[from..) within the windows; END_STREAM with the last when `end`. Returns how far it got. */
  private sendNow(s: Stream, bytes: Uint8Array, from: number, end: boolean): number {
    const n = bytes.length;
    let p = from;
    const max = this.peerMaxFrameSize;
    while (p < n) {
      let w = n - p;
      if (w > max) w = max;
      if (w > s.sendWindow) w = s.sendWindow;
      if (w > this.connSend) w = this.connSend;
      if (w <= 0) return p;
      this.writer.data(s.id, bytes, p, p + w, end && p + w === n);
      s.sendWindow -= w;
      this.connSend -= w;
      p += w;
    }
    if (end) {
      if (n === from) this.writer.data(s.id, bytes, p, p, true);
      s.localEnded = true;
      this.maybeClose(s);
    }
    return p;
  }

  private markBlocked(s: Stream): void {
    if (!s.inBlocked) {
      s.inBlocked = true;
      this.blocked.push(s);
    }
  }

  /** Sends what the windows allow of s's queue; true when the queue is empty (and trailers/END_STREAM sent). */
  private drain(s: Stream): boolean {
    const q = s.queue!;
    while (q.length > 0) {
      const chunk = q[0]!;
      const last = q.length === 1;
      const end = last && s.endQueued && s.trailers === null;
      const from = s.qOff;
      const p = this.sendNow(s, chunk, from, end);
      s.queued -= p - from;
      if (p < chunk.length) {
        s.qOff = p;
        return false;
      }
      q.shift();
      s.qOff = 0;
    }
    s.queue = null;
    s.queued = 0;
    if (s.trailers !== null && !s.gone) {
      const t = s.trailers;
      s.trailers = null;
      this.writer.headers(s.id, this.encoder.encodeView(t), true, this.peerMaxFrameSize);
      s.localEnded = true;
      this.maybeClose(s);
    }
    return true;
  }

  private afterDrain(s: Stream): void {
    if (s.wantWritable) {
      s.wantWritable = false;
      this.writableNow.push(s.id);
    }
  }

  private drainBlocked(): void {
    if (this.blocked.length === 0) return;
    const list = this.blocked;
    this.blocked = [];
    let i = 0;
    for (; i < list.length; i++) {
      const s = list[i]!;
      s.inBlocked = false;
      if (s.gone || s.queue === null) continue;
      if (this.connSend <= 0) break;
      if (this.drain(s)) this.afterDrain(s);
      else this.markBlocked(s);
    }
    for (; i < list.length; i++) {
      const s = list[i]!;
      s.inBlocked = false; // still set on the streams the loop above did not reach: markBlocked would skip them
      if (!s.gone && s.queue !== null) this.markBlocked(s);
    }
    this.emitWritable();
  }

  private emitWritable(): void {
    if (this.writableNow.length === 0) return;
    const ids = this.writableNow.splice(0);
    for (const id of ids) this.events.writable(id);
  }

  reset(streamId: number, code: number): void {
    if (this.dead) return;
    const s = this.streams.get(streamId);
    if (s === undefined) return;
    this.writer.rstStream(streamId, code);
    this.drop(s);
  }

  /** The last stream id of a GOAWAY we send: the peer's last stream, and never more than in an earlier GOAWAY (streams
   *  the peer opened after our first GOAWAY were ignored). Marks the connection as going away. */
  private goawayLastId(): number {
    if (!this.sentGoaway) {
      this.sentGoaway = true;
      this.sentGoawayLast = this.lastPeerStreamId;
    }
    return this.sentGoawayLast;
  }

  /** GOAWAY with the last stream id the peer opened; new streams after it are ignored (server) or refused (client). */
  goaway(code: number, debug?: string): void {
    if (this.dead) return;
    this.writer.goaway(this.goawayLastId(), code, debug ? textEncoder.encode(debug) : undefined);
  }

  /** PING with 8 bytes of payload (the ack is not reported). */
  ping(payload: Uint8Array = new Uint8Array(8)): void {
    if (this.dead) return;
    this.writer.ping(payload, 0, false);
  }
}
