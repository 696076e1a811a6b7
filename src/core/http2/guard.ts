/**
 * A guard in front of an HTTP/2 server connection (sans-io): it reads the frame headers of what the client sends,
 * before the HTTP/2 implementation sees the bytes, and says when the peer is attacking, with the GOAWAY to send.
 * The attacks are those servers were fixed for in 2019 and 2023-2024:
 *
 *   rapid reset (CVE-2023-44487)   streams opened and reset by the client, many per second
 *   CONTINUATION flood (2024)      a header block that never ends, or ends after megabytes
 *   HPACK bomb                     a header block larger than the header list limit allows
 *   SETTINGS / PING flood          control frames the server must answer, many per second (CVE-2019-9512/9515)
 *   empty frames flood             zero-length DATA / HEADERS frames without END_STREAM (CVE-2019-9518)
 *   stream cap                     more streams opened than SETTINGS_MAX_CONCURRENT_STREAMS allows, beyond a grace
 *
 * Only the 9-byte frame headers (and RST_STREAM / END_STREAM flags) are looked at; payloads are skipped, not copied.
 */

export const PREFACE = new TextEncoder().encode("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

export const FRAME = { DATA: 0, HEADERS: 1, PRIORITY: 2, RST_STREAM: 3, SETTINGS: 4, PUSH_PROMISE: 5, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8, CONTINUATION: 9 } as const;
export const ERROR = { NO_ERROR: 0, PROTOCOL_ERROR: 1, FLOW_CONTROL_ERROR: 3, FRAME_SIZE_ERROR: 6, REFUSED_STREAM: 7, COMPRESSION_ERROR: 9, ENHANCE_YOUR_CALM: 11 } as const;

export interface H2GuardLimits {
  /** Streams the client may reset within `windowMs` (rapid reset). Default 200. */
  maxResetsPerWindow: number;
  /** SETTINGS frames within `windowMs`. Default 100. */
  maxSettingsPerWindow: number;
  /** PING frames within `windowMs`. Default 100. */
  maxPingsPerWindow: number;
  /** Empty DATA/HEADERS/CONTINUATION frames without END_STREAM within `windowMs`. Default 200. */
  maxEmptyFramesPerWindow: number;
  /** Bytes of one header block (HEADERS + CONTINUATION payloads, still compressed). Default 64 KiB. */
  maxHeaderBlockBytes: number;
  /** CONTINUATION frames in one header block. Default 64. */
  maxContinuations: number;
  /** Streams open at once (opened by the client, not yet ended by it or reset) above which the peer is cut. Default 2 x 100. */
  maxOpenStreams: number;
  /** Frame size the guard accepts (SETTINGS_MAX_FRAME_SIZE the server advertises). Default 16 KiB. */
  maxFrameSize: number;
  /** The window of the per-window counters, ms. Default 1000. */
  windowMs: number;
}

export const DEFAULT_H2_LIMITS: H2GuardLimits = {
  maxResetsPerWindow: 200,
  maxSettingsPerWindow: 100,
  maxPingsPerWindow: 100,
  maxEmptyFramesPerWindow: 200,
  maxHeaderBlockBytes: 64 * 1024,
  maxContinuations: 64,
  maxOpenStreams: 200,
  maxFrameSize: 16 * 1024,
  windowMs: 1000,
};

export interface H2Violation {
  /** the GOAWAY error code to send */
  code: number;
  /** what the peer did, for the log and the entry */
  reason: string;
  /** the last stream id the server may have processed (for GOAWAY) */
  lastStreamId: number;
}

class WindowCounter {
  private start = 0;
  private n = 0;
  constructor(private readonly windowMs: number) {}
  add(now: number): number {
    if (now - this.start >= this.windowMs) {
      this.start = now;
      this.n = 0;
    }
    return ++this.n;
  }
}

export class H2FrameGuard {
  private readonly limits: H2GuardLimits;
  private prefaceLeft = PREFACE.length;
  private head = new Uint8Array(9);
  private headLen = 0;
  /** payload bytes of the current frame still to skip */
  private skip = 0;
  /** the stream of a header block that has not ended yet (HEADERS without END_HEADERS), 0 when none */
  private blockStream = 0;
  private blockBytes = 0;
  private continuations = 0;
  private readonly open = new Set<number>();
  private lastStreamId = 0;
  private readonly resets: WindowCounter;
  private readonly settings: WindowCounter;
  private readonly pings: WindowCounter;
  private readonly empties: WindowCounter;
  private violation: H2Violation | null = null;

  constructor(
    limits: Partial<H2GuardLimits> = {},
    private readonly now: () => number = () => performance.now(),
  ) {
    this.limits = { ...DEFAULT_H2_LIMITS, ...limits };
    this.resets = new WindowCounter(this.limits.windowMs);
    this.settings = new WindowCounter(this.limits.windowMs);
    this.pings = new WindowCounter(this.limits.windowMs);
    this.empties = new WindowCounter(this.limits.windowMs);
  }

  /** Streams the client has open (opened, neither ended by it nor reset). */
  get openStreams(): number {
    return this.open.size;
  }

  /** The server ended a stream (its response finished or it reset it): it no longer counts as open. */
  streamClosed(id: number): void {
    this.open.delete(id);
  }

  /** Feeds bytes from the client; answers the first violation (and keeps answering it), or null. */
  feed(bytes: Uint8Array): H2Violation | null {
    if (this.violation) return this.violation;
    let p = 0;
    if (this.prefaceLeft > 0) {
      const off = PREFACE.length - this.prefaceLeft;
      const n = Math.min(this.prefaceLeft, bytes.length);
      for (let i = 0; i < n; i++) if (bytes[i] !== PREFACE[off + i]) return this.fail(ERROR.PROTOCOL_ERROR, "not the HTTP/2 connection preface");
      this.prefaceLeft -= n;
      p = n;
    }
    while (p < bytes.length) {
      if (this.skip > 0) {
        const n = Math.min(this.skip, bytes.length - p);
        this.skip -= n;
        p += n;
        continue;
      }
      if (this.headLen === 0 && bytes.length - p >= 9) {
        // the whole frame header is in this read (the usual case): read it in place, no copy
        const v = this.frame(bytes, p);
        if (v) return v;
        p += 9;
        continue;
      }
      const n = Math.min(9 - this.headLen, bytes.length - p);
      for (let i = 0; i < n; i++) this.head[this.headLen + i] = bytes[p + i]!;
      this.headLen += n;
      p += n;
      if (this.headLen < 9) break;
      this.headLen = 0;
      const v = this.frame(this.head, 0);
      if (v) return v;
    }
    return null;
  }

  private fail(code: number, reason: string): H2Violation {
    this.violation = { code, reason, lastStreamId: this.lastStreamId };
    return this.violation;
  }

  /** The frame header at h[o..o+9]. */
  private frame(h: Uint8Array, o: number): H2Violation | null {
    const len = (h[o]! << 16) | (h[o + 1]! << 8) | h[o + 2]!;
    const type = h[o + 3]!;
    const flags = h[o + 4]!;
    const stream = ((h[o + 5]! & 0x7f) << 24) | (h[o + 6]! << 16) | (h[o + 7]! << 8) | h[o + 8]!;
    this.skip = len;
    const L = this.limits;
    if (len > L.maxFrameSize) return this.fail(ERROR.FRAME_SIZE_ERROR, `a frame of ${len} bytes (limit ${L.maxFrameSize})`);
    const endStream = (flags & 0x1) !== 0;
    const endHeaders = (flags & 0x4) !== 0;

    if (this.blockStream !== 0 && type !== FRAME.CONTINUATION) return this.fail(ERROR.PROTOCOL_ERROR, "a frame inside a header block that has not ended");
    switch (type) {
      case FRAME.HEADERS: {
        if (stream === 0) return this.fail(ERROR.PROTOCOL_ERROR, "HEADERS on stream 0");
        if (stream > this.lastStreamId) {
          this.lastStreamId = stream;
          this.open.add(stream);
          if (this.open.size > L.maxOpenStreams) return this.fail(ERROR.ENHANCE_YOUR_CALM, `more than ${L.maxOpenStreams} streams open at once`);
        }
        if (endStream) this.open.delete(stream);
        if (len === 0 && !endStream && this.empties.add(this.now()) > L.maxEmptyFramesPerWindow) return this.fail(ERROR.ENHANCE_YOUR_CALM, "a flood of empty frames");
        this.blockBytes = len;
        this.continuations = 0;
        if (this.blockBytes > L.maxHeaderBlockBytes) return this.fail(ERROR.ENHANCE_YOUR_CALM, `a header block over ${L.maxHeaderBlockBytes} bytes`);
        this.blockStream = endHeaders ? 0 : stream;
        return null;
      }
      case FRAME.CONTINUATION: {
        if (this.blockStream === 0 || stream !== this.blockStream) return this.fail(ERROR.PROTOCOL_ERROR, "CONTINUATION outside a header block");
        this.blockBytes += len;
        if (++this.continuations > L.maxContinuations) return this.fail(ERROR.ENHANCE_YOUR_CALM, `a header block in more than ${L.maxContinuations} CONTINUATION frames`);
        if (this.blockBytes > L.maxHeaderBlockBytes) return this.fail(ERROR.ENHANCE_YOUR_CALM, `a header block over ${L.maxHeaderBlockBytes} bytes`);
        if (len === 0 && !endHeaders && this.empties.add(this.now()) > L.maxEmptyFramesPerWindow) return this.fail(ERROR.ENHANCE_YOUR_CALM, "a flood of empty frames");
        if (endHeaders) this.blockStream = 0;
        return null;
      }
      case FRAME.DATA:
        if (endStream) this.open.delete(stream);
        else if (len === 0 && this.empties.add(this.now()) > L.maxEmptyFramesPerWindow) return this.fail(ERROR.ENHANCE_YOUR_CALM, "a flood of empty frames");
        return null;
      case FRAME.RST_STREAM:
        this.open.delete(stream);
        if (this.resets.add(this.now()) > L.maxResetsPerWindow) return this.fail(ERROR.ENHANCE_YOUR_CALM, `more than ${L.maxResetsPerWindow} streams reset within ${L.windowMs} ms (rapid reset)`);
        return null;
      case FRAME.SETTINGS:
        if ((flags & 0x1) === 0 && this.settings.add(this.now()) > L.maxSettingsPerWindow) return this.fail(ERROR.ENHANCE_YOUR_CALM, `more than ${L.maxSettingsPerWindow} SETTINGS frames within ${L.windowMs} ms`);
        return null;
      case FRAME.PING:
        if ((flags & 0x1) === 0 && this.pings.add(this.now()) > L.maxPingsPerWindow) return this.fail(ERROR.ENHANCE_YOUR_CALM, `more than ${L.maxPingsPerWindow} PING frames within ${L.windowMs} ms`);
        return null;
      default:
        return null;
    }
  }
}

/** A GOAWAY frame (stream 0) with the last stream id and error code, and the reason as debug data. */
export function goawayFrame(v: H2Violation): Uint8Array {
  const debug = new TextEncoder().encode(v.reason.slice(0, 200));
  const out = new Uint8Array(9 + 8 + debug.length);
  const len = 8 + debug.length;
  out[0] = (len >> 16) & 0xff;
  out[1] = (len >> 8) & 0xff;
  out[2] = len & 0xff;
  out[3] = FRAME.GOAWAY;
  const dv = new DataView(out.buffer);
  dv.setUint32(9, v.lastStreamId & 0x7fffffff);
  dv.setUint32(13, v.code);
  out.set(debug, 17);
  return out;
}
