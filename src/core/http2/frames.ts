/**
 * HTTP/2 frames (RFC 9113 section 4 and 6), sans-io: reading a frame header in place and writing every frame type
 * into one growing gather buffer (FrameWriter). No per-frame objects: the header is read field by field from the
 * bytes, and the writer appends into a Uint8Array it reuses.
 */
import { FRAME, PREFACE } from "./guard.ts";

export { FRAME, PREFACE };

/** Every error code of RFC 9113 section 7. */
export const H2_ERROR = {
  NO_ERROR: 0,
  PROTOCOL_ERROR: 1,
  INTERNAL_ERROR: 2,
  FLOW_CONTROL_ERROR: 3,
  SETTINGS_TIMEOUT: 4,
  STREAM_CLOSED: 5,
  FRAME_SIZE_ERROR: 6,
  REFUSED_STREAM: 7,
  CANCEL: 8,
  COMPRESSION_ERROR: 9,
  CONNECT_ERROR: 10,
  ENHANCE_YOUR_CALM: 11,
  INADEQUATE_SECURITY: 12,
  HTTP_1_1_REQUIRED: 13,
} as const;

export const FLAG = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4, PADDED: 0x8, PRIORITY: 0x20 } as const;

export const SETTING = {
  HEADER_TABLE_SIZE: 1,
  ENABLE_PUSH: 2,
  MAX_CONCURRENT_STREAMS: 3,
  INITIAL_WINDOW_SIZE: 4,
  MAX_FRAME_SIZE: 5,
  MAX_HEADER_LIST_SIZE: 6,
} as const;

export const FRAME_HEADER_SIZE = 9;
export const DEFAULT_WINDOW = 65535;
export const MAX_WINDOW = 0x7fffffff;
export const MIN_MAX_FRAME_SIZE = 16384;
export const MAX_MAX_FRAME_SIZE = 0xffffff;

/** The payload length of the frame whose header starts at b[o]. */
export function frameLength(b: Uint8Array, o: number): number {
  return (b[o]! << 16) | (b[o + 1]! << 8) | b[o + 2]!;
}
export function frameType(b: Uint8Array, o: number): number {
  return b[o + 3]!;
}
export function frameFlags(b: Uint8Array, o: number): number {
  return b[o + 4]!;
}
/** The stream identifier (the reserved bit cleared). */
export function frameStream(b: Uint8Array, o: number): number {
  return ((b[o + 5]! & 0x7f) << 24) | (b[o + 6]! << 16) | (b[o + 7]! << 8) | b[o + 8]!;
}
/** A 31-bit big-endian value (reserved bit cleared), e.g. a window increment or a last stream id. */
export function read31(b: Uint8Array, o: number): number {
  return ((b[o]! & 0x7f) << 24) | (b[o + 1]! << 16) | (b[o + 2]! << 8) | b[o + 3]!;
}
/** A 32-bit big-endian unsigned value (an error code, a setting value). */
export function read32(b: Uint8Array, o: number): number {
  return ((b[o]! << 24) | (b[o + 1]! << 16) | (b[o + 2]! << 8) | b[o + 3]!) >>> 0;
}

/** Payloads at least this long are handed to write() as their own part (no copy) rather than copied into the gather buffer. */
export const COPY_LIMIT = 4096;

/**
 * Frames gathered for one write. Small frames are appended to a reused buffer; DATA payloads of COPY_LIMIT bytes or
 * more go as parts of their own (a reference to the caller's bytes). take() hands out the gathered parts in wire
 * order; the gather buffer's bytes are copied out (a slice) so the owner may keep what it is given, unless the owner
 * asks for a transient view (take(sink, true)): tapwire's two sockets (Bun's native ones, client and origin side)
 * write at once and copy only what the kernel does not take.
 *
 * Why the slice by default: Bun 1.4.5's node:tls socket keeps a reference to what write() is given until it is sent (measured:
 * 4 writes of 2 MiB, the buffer overwritten after write() returned: 6 MiB arrived overwritten; writableLength equals
 * the bytes written right after each write(), even for 2 KB), so a reused gather buffer would be sent overwritten.
 * (node:net copies what it cannot send at once.) Handing out a view and reusing the buffer cost 35-40% less codec CPU
 * in bench/h2-codec-bench.ts (5 interleaved pairs, over TCP 2.70 vs 4.52 µs per request, medians); handing out a view
 * and allocating a fresh buffer instead of the slice gave nothing (4.42 vs 4.43). DATA of COPY_LIMIT bytes or more
 * as parts of their own, against copying all DATA: 16 KiB bodies 24.6 vs 33.2 µs per request (3 pairs, medians),
 * 64 KiB bodies 125 vs 140 (noise).
 */
export class FrameWriter {
  private buf: Uint8Array;
  private len = 0;
  /** bytes of buf already cut into `parts` */
  private cut = 0;
  private parts: Uint8Array[] = [];

  constructor(initial = 4096) {
    this.buf = new Uint8Array(initial);
  }

  /** bytes gathered and not taken yet */
  get pending(): number {
    let n = this.len - this.cut;
    for (let i = 0; i < this.parts.length; i++) n += this.parts[i]!.length;
    return n;
  }

  get empty(): boolean {
    return this.len === 0 && this.parts.length === 0;
  }

  private ensure(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < this.len + n) cap *= 2;
    const next = new Uint8Array(cap);
    next.set(this.buf.subarray(this.cut, this.len), 0);
    // parts already cut are slices (copies), so only the uncut tail moves
    this.len -= this.cut;
    this.cut = 0;
    this.buf = next;
  }

  private header(length: number, type: number, flags: number, stream: number): void {
    this.ensure(9 + length);
    const b = this.buf;
    const o = this.len;
    b[o] = (length >>> 16) & 0xff;
    b[o + 1] = (length >>> 8) & 0xff;
    b[o + 2] = length & 0xff;
    b[o + 3] = type;
    b[o + 4] = flags;
    b[o + 5] = (stream >>> 24) & 0x7f;
    b[o + 6] = (stream >>> 16) & 0xff;
    b[o + 7] = (stream >>> 8) & 0xff;
    b[o + 8] = stream & 0xff;
    this.len = o + 9;
  }

  private u32(v: number): void {
    const b = this.buf;
    const o = this.len;
    b[o] = (v >>> 24) & 0xff;
    b[o + 1] = (v >>> 16) & 0xff;
    b[o + 2] = (v >>> 8) & 0xff;
    b[o + 3] = v & 0xff;
    this.len = o + 4;
  }

  private bytes(src: Uint8Array, from: number, to: number): void {
    this.buf.set(src.subarray(from, to), this.len);
    this.len += to - from;
  }

  /** Raw bytes (the connection preface). */
  raw(src: Uint8Array): void {
    this.ensure(src.length);
    this.bytes(src, 0, src.length);
  }

  /** One DATA frame carrying src[from..to) (no padding). */
  data(stream: number, src: Uint8Array, from: number, to: number, endStream: boolean): void {
    const n = to - from;
    if (n >= COPY_LIMIT) {
      this.header(0, FRAME.DATA, endStream ? FLAG.END_STREAM : 0, stream);
      // patch the length (header() reserved room for 0 payload bytes)
      const o = this.len - 9;
      this.buf[o] = (n >>> 16) & 0xff;
      this.buf[o + 1] = (n >>> 8) & 0xff;
      this.buf[o + 2] = n & 0xff;
      this.cutHere();
      this.parts.push(from === 0 && to === src.length ? src : src.subarray(from, to));
      return;
    }
    this.header(n, FRAME.DATA, endStream ? FLAG.END_STREAM : 0, stream);
    this.bytes(src, from, to);
  }

  private cutHere(): void {
    if (this.len > this.cut) {
      this.parts.push(this.buf.slice(this.cut, this.len));
      this.len = this.cut = 0;
    }
  }

  /**
   * A header block: one HEADERS frame, followed by CONTINUATION frames when the block is longer than maxFrameSize.
   */
  headers(stream: number, block: Uint8Array, endStream: boolean, maxFrameSize: number): void {
    const n = block.length;
    const first = n <= maxFrameSize ? n : maxFrameSize;
    this.header(first, FRAME.HEADERS, (endStream ? FLAG.END_STREAM : 0) | (first === n ? FLAG.END_HEADERS : 0), stream);
    this.bytes(block, 0, first);
    let p = first;
    while (p < n) {
      const m = Math.min(maxFrameSize, n - p);
      this.header(m, FRAME.CONTINUATION, p + m === n ? FLAG.END_HEADERS : 0, stream);
      this.bytes(block, p, p + m);
      p += m;
    }
  }

  /** A CONTINUATION frame on its own (tests; headers() writes them as needed). */
  continuation(stream: number, fragment: Uint8Array, endHeaders: boolean): void {
    this.header(fragment.length, FRAME.CONTINUATION, endHeaders ? FLAG.END_HEADERS : 0, stream);
    this.bytes(fragment, 0, fragment.length);
  }

  priority(stream: number, dependency: number, exclusive: boolean, weight: number): void {
    this.header(5, FRAME.PRIORITY, 0, stream);
    this.u32(((exclusive ? 0x80000000 : 0) | (dependency & 0x7fffffff)) >>> 0);
    this.buf[this.len++] = (weight - 1) & 0xff;
  }

  rstStream(stream: number, code: number): void {
    this.header(4, FRAME.RST_STREAM, 0, stream);
    this.u32(code);
  }

  /** SETTINGS with flat [id, value, id, value, ...] pairs. */
  settings(pairs: readonly number[]): void {
    const n = pairs.length >> 1;
    this.header(n * 6, FRAME.SETTINGS, 0, 0);
    const b = this.buf;
    for (let i = 0; i < n; i++) {
      const id = pairs[2 * i]!;
      b[this.len] = (id >>> 8) & 0xff;
      b[this.len + 1] = id & 0xff;
      this.len += 2;
      this.u32(pairs[2 * i + 1]!);
    }
  }

  settingsAck(): void {
    this.header(0, FRAME.SETTINGS, FLAG.ACK, 0);
  }

  pushPromise(stream: number, promised: number, block: Uint8Array): void {
    this.header(4 + block.length, FRAME.PUSH_PROMISE, FLAG.END_HEADERS, stream);
    this.u32(promised & 0x7fffffff);
    this.bytes(block, 0, block.length);
  }

  /** PING with the 8 bytes payload[from..from+8). */
  ping(payload: Uint8Array, from: number, ack: boolean): void {
    this.header(8, FRAME.PING, ack ? FLAG.ACK : 0, 0);
    this.bytes(payload, from, from + 8);
  }

  goaway(lastStreamId: number, code: number, debug?: Uint8Array): void {
    const d = debug ? debug.length : 0;
    this.header(8 + d, FRAME.GOAWAY, 0, 0);
    this.u32(lastStreamId & 0x7fffffff);
    this.u32(code);
    if (debug) this.bytes(debug, 0, d);
  }

  windowUpdate(stream: number, increment: number): void {
    this.header(4, FRAME.WINDOW_UPDATE, 0, stream);
    this.u32(increment & 0x7fffffff);
  }

  /**
   * Hands the gathered bytes to `sink.write` (called as a method) in wire order (one call when no large DATA part was added) and empties the
   * writer. The gather buffer is copied out (a slice), so what write() is given stays valid; with `transient` the
   * gathered bytes (when no large DATA part was added) are handed over as a view that the next frame overwrites.
   */
  take(sink: { write(bytes: Uint8Array): void }, transient = false): void {
    const parts = this.parts;
    if (parts.length === 0) {
      if (this.len === 0) return;
      // transient: a view of the gather buffer, valid only until the next frame is written here (the sink copies
      // what it keeps; a sink that keeps what it is given, as Bun's node:tls socket does, gets the default copy)
      const out = transient ? this.buf.subarray(0, this.len) : this.buf.slice(0, this.len);
      this.len = this.cut = 0;
      sink.write(out);
      return;
    }
    this.cutHere();
    this.parts = [];
    for (let i = 0; i < parts.length; i++) sink.write(parts[i]!);
  }

  /** All gathered bytes as one array (tests). */
  takeAll(): Uint8Array {
    const chunks: Uint8Array[] = [];
    this.take({ write: (b) => chunks.push(b) });
    let n = 0;
    for (const c of chunks) n += c.length;
    const out = new Uint8Array(n);
    n = 0;
    for (const c of chunks) {
      out.set(c, n);
      n += c.length;
    }
    return out;
  }
}
