/**
 * Passive RFC 6455 frame parser: observes one direction of a relayed
 * WebSocket connection and reports whole messages. It never alters or holds
 * the relayed bytes — `push` only reads the chunk it is given.
 *
 * Memory: per direction at most `previewCap` bytes of the current data
 * message, a 125-byte control frame buffer, a 14-byte header buffer, and —
 * once the first compressed message arrives — one RawInflater (32 KB window
 * plus about 5 KB of Huffman tables) and a 16 KB unmasking scratch buffer.
 * Payload beyond the preview cap is counted, not kept.
 *
 * Messages are reported synchronously from `push` as soon as their last frame
 * is complete (control frames in the middle of a fragmented message are
 * reported before it); the caller stamps `ts`. Protocol errors (see
 * `startFrame`) and undecodable compressed data call `onError` once and stop
 * this parser; the relay is unaffected.
 *
 * Decisions:
 *  - sizeBytes of a compressed message is the INFLATED size (the size of the
 *    message the application sent/receives), so it matches the preview, which
 *    is also inflated; `truncated` is sizeBytes > previewCap. The compressed
 *    on-the-wire payload size is reported beside it as `wireSizeBytes` (only on
 *    compressed messages, which also carry `compressed: true`).
 *  - Compressed messages are inflated past the preview cap (the next message
 *    may reference this one's window) but only up to an inflate budget per
 *    message (`inflateBudget`, default 4 MiB: a few ms of work), so a
 *    compression bomb (1 MB on the wire, 1 GiB inflated) cannot hold the
 *    event loop that relays every connection. A message that exceeds it is
 *    reported with `sizeAtLeast: true` (sizeBytes is then a lower bound). Its
 *    window is lost: with context takeover the later compressed messages of
 *    that direction are not inflated either (sizeBytes 0, sizeAtLeast, empty
 *    preview); with no_context_takeover the next message starts afresh.
 *  - Masking is not policed (a proxy should observe, not judge): masked and
 *    unmasked frames are accepted in both directions.
 *  - Invalid UTF-8 in a text message is decoded with U+FFFD replacement rather
 *    than treated as a protocol error; a byte-order mark is kept.
 *  - A close payload of 1 byte (invalid per RFC 6455) is reported as a close
 *    without code.
 */

import { type PerMessageDeflateParams, senderNoContextTakeover } from "./deflate.ts";
import { InflateError, RawInflater } from "./inflate.ts";

export type WsMessageOpcode = "text" | "binary" | "ping" | "pong" | "close";

export interface WsMessage {
  opcode: WsMessageOpcode;
  /** text: UTF-8 decode of the preview; binary: base64 of the preview; control frames: "". */
  text: string;
  /** True payload size of the whole message (sum of fragments; inflated size when compressed). */
  sizeBytes: number;
  /** True when the preview was clipped at the cap. */
  truncated: boolean;
  /** close frames with a status code only. */
  closeCode?: number;
  /** close frames with a status code only ("" when no reason was given). */
  closeReason?: string;
  /** Present (true) on permessage-deflate compressed messages. */
  compressed?: boolean;
  /** Present (true) when inflating stopped at the budget: sizeBytes is a lower bound. */
  sizeAtLeast?: boolean;
  /** Compressed payload bytes on the wire; present on compressed messages only. */
  wireSizeBytes?: number;
}

export interface WsFrameParserOptions {
  /** "in" = server to client, "out" = client to server. */
  dir: "in" | "out";
  /** Bytes of each message's payload kept for the preview; default 65536. */
  previewCap?: number;
  /** Negotiated permessage-deflate parameters, or null/undefined when not negotiated. */
  deflate?: PerMessageDeflateParams | null;
  onMessage: (m: WsMessage) => void;
  /** Called at most once; after it the parser ignores all further input. */
  onError?: (e: Error) => void;
  /** Inflated bytes worked through per compressed message at most (never less than previewCap); default 4 MiB. */
  inflateBudget?: number;
}

export const DEFAULT_INFLATE_BUDGET = 4 * 1024 * 1024;
/** Thrown by the inflate sink to stop a message at the budget (caught in payload()). */
const OVER_BUDGET = new Error("inflate budget reached");

export class WsProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WsProtocolError";
  }
}

export const DEFAULT_PREVIEW_CAP = 65536;
const SCRATCH_SIZE = 16384;
const MAX_CONTROL_PAYLOAD = 125;

const decoder = new TextDecoder("utf-8", { ignoreBOM: true });

const CONTROL_NAMES: Record<number, WsMessageOpcode> = { 8: "close", 9: "ping", 10: "pong" };

/** Length of a UTF-8 prefix of `b[0..len)` that does not end inside a multi-byte character. */
function utf8BoundaryLength(b: Uint8Array, len: number): number {
  // Find the start of the last character (at most 3 continuation bytes back).
  let i = len - 1;
  let back = 0;
  while (i >= 0 && back < 3 && (b[i] & 0xc0) === 0x80) {
    i--;
    back++;
  }
  if (i < 0) return len;
  const lead = b[i];
  const need = lead >= 0xf0 && lead <= 0xf7 ? 4 : lead >= 0xe0 ? (lead <= 0xef ? 3 : 0) : lead >= 0xc0 ? 2 : 1;
  if (need === 0) return len; // not a valid lead byte: leave the bytes to the decoder
  return len - i < need ? i : len;
}

export class WsFrameParser {
  private readonly dir: "in" | "out";
  private readonly cap: number;
  private readonly deflate: PerMessageDeflateParams | null;
  private readonly onMessage: (m: WsMessage) => void;
  private readonly onError?: (e: Error) => void;
  private dead = false;

  // Frame header state.
  private readonly hdr = new Uint8Array(14);
  private hdrHave = 0;
  private hdrNeed = 2;
  private inPayload = false;

  // Current frame.
  private fin = false;
  private op = 0;
  private masked = false;
  private readonly key = new Uint8Array(4);
  private remaining = 0;
  private offset = 0;

  // Control frame payload (<= 125 bytes).
  private readonly ctl = new Uint8Array(MAX_CONTROL_PAYLOAD);
  private ctlLen = 0;

  // Current data message (possibly fragmented).
  private msgActive = false;
  private msgOp = 0;
  private msgCompressed = false;
  private msgSize = 0;
  private msgWire = 0;
  private preview: Uint8Array | null = null;
  private previewLen = 0;

  private inflater: RawInflater | null = null;
  private scratch: Uint8Array | null = null;
  private readonly budget: number;
  /** The current message stopped inflating at the budget (or could not start: context lost). */
  private msgStopped = false;
  /** A message of this direction stopped mid-way under context takeover: later ones cannot be inflated. */
  private contextLost = false;
  private overBudget = false;

  constructor(opts: WsFrameParserOptions) {
    this.dir = opts.dir;
    const cap = opts.previewCap ?? DEFAULT_PREVIEW_CAP;
    if (!Number.isInteger(cap) || cap < 0) throw new RangeError("previewCap must be a non-negative integer");
    this.cap = cap;
    this.deflate = opts.deflate ?? null;
    this.onMessage = opts.onMessage;
    this.onError = opts.onError;
    this.budget = Math.max(cap, opts.inflateBudget ?? DEFAULT_INFLATE_BUDGET);
  }

  /** True once a protocol or decompression error stopped the parser. */
  get failed(): boolean {
    return this.dead;
  }

  /** Observes the next relayed bytes of this direction (any split point). The chunk is not retained. */
  push(chunk: Uint8Array): void {
    let i = 0;
    const n = chunk.length;
    while (i < n && !this.dead) {
      if (!this.inPayload) {
        while (this.hdrHave < this.hdrNeed && i < n) this.hdr[this.hdrHave++] = chunk[i++];
        if (this.hdrHave < this.hdrNeed) return;
        if (this.hdrHave === 2) {
          const l7 = this.hdr[1] & 0x7f;
          this.hdrNeed = 2 + (l7 === 126 ? 2 : l7 === 127 ? 8 : 0) + (this.hdr[1] & 0x80 ? 4 : 0);
          if (this.hdrHave < this.hdrNeed) continue;
        }
        if (!this.startFrame()) return;
        if (this.remaining === 0) this.endFrame();
        else this.inPayload = true;
      } else {
        const take = Math.min(this.remaining, n - i);
        this.payload(chunk, i, take);
        i += take;
        this.remaining -= take;
        this.offset += take;
        if (this.remaining === 0 && !this.dead) {
          this.inPayload = false;
          this.endFrame();
        }
      }
    }
  }

  private fail(message: string): void {
    if (this.dead) return;
    this.dead = true;
    this.preview = null;
    this.inflater = null;
    this.scratch = null;
    this.onError?.(new WsProtocolError(`ws ${this.dir}: ${message}`));
  }

  /** Validates a complete header; false after a protocol error. */
  private startFrame(): boolean {
    const h = this.hdr;
    const b0 = h[0];
    const b1 = h[1];
    this.fin = (b0 & 0x80) !== 0;
    const rsv1 = (b0 & 0x40) !== 0;
    const op = b0 & 0x0f;
    this.op = op;
    this.masked = (b1 & 0x80) !== 0;
    const l7 = b1 & 0x7f;
    let len: number;
    let p = 2;
    if (l7 === 126) {
      len = (h[2] << 8) | h[3];
      p = 4;
    } else if (l7 === 127) {
      const hi = ((h[2] << 24) | (h[3] << 16) | (h[4] << 8) | h[5]) >>> 0;
      const lo = ((h[6] << 24) | (h[7] << 16) | (h[8] << 8) | h[9]) >>> 0;
      if (hi >= 0x80000000) return this.fail("64-bit payload length has the most significant bit set"), false;
      len = hi * 0x100000000 + lo;
      if (len > Number.MAX_SAFE_INTEGER) return this.fail(`payload length ${hi}:${lo} is beyond 2^53`), false;
      p = 10;
    } else {
      len = l7;
    }
    if (this.masked) this.key.set(h.subarray(p, p + 4));
    this.hdrHave = 0;
    this.hdrNeed = 2;
    this.remaining = len;
    this.offset = 0;

    if (b0 & 0x30) return this.fail("RSV2/RSV3 set without a negotiated extension"), false;
    if (op >= 0x8) {
      if (!CONTROL_NAMES[op]) return this.fail(`reserved control opcode 0x${op.toString(16)}`), false;
      if (!this.fin) return this.fail("fragmented control frame"), false;
      if (len > MAX_CONTROL_PAYLOAD) return this.fail(`control frame payload of ${len} bytes (max 125)`), false;
      if (rsv1) return this.fail("RSV1 set on a control frame"), false;
      this.ctlLen = 0;
      return true;
    }
    if (op === 0) {
      if (!this.msgActive) return this.fail("continuation frame without a message in progress"), false;
      if (rsv1) return this.fail("RSV1 set on a continuation frame"), false;
      return true;
    }
    if (op !== 1 && op !== 2) return this.fail(`reserved data opcode 0x${op.toString(16)}`), false;
    if (this.msgActive) return this.fail("new data message started before the fragmented one finished"), false;
    if (rsv1 && !this.deflate) return this.fail("RSV1 set without a negotiated extension"), false;
    this.msgActive = true;
    this.msgOp = op;
    this.msgCompressed = rsv1;
    this.msgSize = 0;
    this.msgWire = 0;
    this.previewLen = 0;
    this.preview = null;
    this.msgStopped = rsv1 && this.contextLost;
    if (rsv1 && !this.inflater && !this.contextLost) {
      this.inflater = new RawInflater((bytes) => this.inflated(bytes));
    }
    return true;
  }

  private payload(chunk: Uint8Array, start: number, count: number): void {
    if (this.op >= 0x8) {
      this.copyUnmasked(chunk, start, count, this.ctl, this.ctlLen, this.offset);
      this.ctlLen += count;
      return;
    }
    if (!this.msgCompressed) {
      this.msgSize += count;
      const keep = Math.min(count, this.cap - this.previewLen);
      if (keep > 0) {
        this.reserve(this.previewLen + keep);
        this.copyUnmasked(chunk, start, keep, this.preview!, this.previewLen, this.offset);
        this.previewLen += keep;
      }
      return;
    }
    this.msgWire += count;
    if (this.msgStopped) return;
    const inflater = this.inflater!;
    try {
      if (!this.masked) {
        inflater.write(chunk.subarray(start, start + count));
        return;
      }
      const scratch = (this.scratch ??= new Uint8Array(SCRATCH_SIZE));
      for (let done = 0; done < count && !this.dead; ) {
        const k = Math.min(SCRATCH_SIZE, count - done);
        this.copyUnmasked(chunk, start + done, k, scratch, 0, this.offset + done);
        inflater.write(scratch.subarray(0, k));
        done += k;
      }
    } catch (e) {
      // the inflater may wrap what its sink threw: the flag says it was the budget
      if (this.overBudget) return this.stopInflating();
      this.fail(e instanceof InflateError ? e.message : `inflate: ${String(e)}`);
    }
  }

  /** The message went past the inflate budget: count its wire bytes only; its window is gone. */
  private stopInflating(): void {
    this.overBudget = false;
    this.msgStopped = true;
    this.inflater = null;
    if (!senderNoContextTakeover(this.deflate!, this.dir)) this.contextLost = true;
  }

  /** Receives inflated bytes of the current compressed message. */
  private inflated(bytes: Uint8Array): void {
    const over = this.msgSize + bytes.length > this.budget;
    if (over) bytes = bytes.subarray(0, this.budget - this.msgSize);
    this.msgSize += bytes.length;
    const keep = Math.min(bytes.length, this.cap - this.previewLen);
    if (keep > 0) {
      this.reserve(this.previewLen + keep);
      this.preview!.set(bytes.subarray(0, keep), this.previewLen);
      this.previewLen += keep;
    }
    if (over) {
      this.overBudget = true;
      throw OVER_BUDGET;
    }
  }

  /** Makes the preview buffer hold at least `size` bytes (grows by doubling, never past the cap). */
  private reserve(size: number): void {
    const cur = this.preview;
    if (cur && cur.length >= size) return;
    const next = new Uint8Array(Math.min(this.cap, Math.max(size, cur ? cur.length * 2 : 256)));
    if (cur) next.set(cur.subarray(0, this.previewLen));
    this.preview = next;
  }

  private copyUnmasked(src: Uint8Array, start: number, count: number, dst: Uint8Array, at: number, payloadOffset: number): void {
    if (!this.masked) {
      dst.set(src.subarray(start, start + count), at);
      return;
    }
    const k = this.key;
    for (let j = 0; j < count; j++) dst[at + j] = src[start + j] ^ k[(payloadOffset + j) & 3];
  }

  private endFrame(): void {
    if (this.op >= 0x8) {
      const m: WsMessage = { opcode: CONTROL_NAMES[this.op], text: "", sizeBytes: this.ctlLen, truncated: false };
      if (this.op === 0x8 && this.ctlLen >= 2) {
        m.closeCode = (this.ctl[0] << 8) | this.ctl[1];
        m.closeReason = decoder.decode(this.ctl.subarray(2, this.ctlLen));
      }
      this.onMessage(m);
      return;
    }
    if (!this.fin) return;
    // A compressed message with an empty payload carries no DEFLATE data at all; leave the stream untouched.
    if (this.msgCompressed && this.msgWire > 0 && !this.msgStopped) {
      try {
        this.inflater!.endMessage();
        if (senderNoContextTakeover(this.deflate!, this.dir)) this.inflater!.reset();
      } catch (e) {
        this.fail(e instanceof InflateError ? e.message : `inflate: ${String(e)}`);
        return;
      }
    }
    const preview = this.preview ? this.preview.subarray(0, this.previewLen) : new Uint8Array(0);
    const truncated = this.msgSize > this.previewLen;
    let text: string;
    if (this.msgOp === 1) {
      text = decoder.decode(truncated ? preview.subarray(0, utf8BoundaryLength(preview, preview.length)) : preview);
    } else {
      text = Buffer.from(preview.buffer, preview.byteOffset, preview.length).toString("base64");
    }
    const m: WsMessage = {
      opcode: this.msgOp === 1 ? "text" : "binary",
      text,
      sizeBytes: this.msgSize,
      truncated,
    };
    if (this.msgCompressed) {
      m.compressed = true;
      m.wireSizeBytes = this.msgWire;
      if (this.msgStopped) {
        m.sizeAtLeast = true;
        m.truncated = true;
      }
    }
    this.msgStopped = false;
    this.msgActive = false;
    this.preview = null;
    this.previewLen = 0;
    this.onMessage(m);
  }
}
