// Incremental body decoders. Both share the push contract so the connection layer can treat
// chunked and Content-Length bodies alike.

import { CR, HEX, HT, LF, SP, latin1Decode } from "./chars.ts";
import { parseFieldLine } from "./fields.ts";
import { HttpParseError, type HeaderList } from "./types.ts";

export interface BodyChunk {
  /** Payload slices, subarrays of the pushed bytes (never copies); empty slices are omitted. */
  data: Uint8Array[];
  /** True once the whole body has been consumed. */
  done: boolean;
  /** Bytes after the end of the body (e.g. a pipelined next message), or null if none. */
  rest: Uint8Array | null;
}

/** Longest chunk-size line (size, extensions) accepted, excluding its CRLF. */
export const MAX_CHUNK_SIZE_LINE = 4096;
/** Largest trailer section accepted, in bytes. */
export const MAX_TRAILER_BYTES = 65536;

const ERR = 400;

const S_SIZE = 0; // reading hex digits of the chunk size
const S_SIZE_WS = 1; // whitespace after the size (BWS before ';' or CRLF)
const S_EXT = 2; // chunk extensions, ignored up to CR
const S_SIZE_LF = 3; // LF ending the chunk-size line
const S_DATA = 4; // chunk payload
const S_DATA_CR = 5; // CR after the payload
const S_DATA_LF = 6; // LF after the payload
const S_TRAILER_START = 7; // start of a trailer line or of the final empty line
const S_TRAILER_LINE = 8; // inside a trailer line, up to CR
const S_TRAILER_LF = 9; // LF ending a trailer line
const S_END_LF = 10; // LF of the final empty line
const S_DONE = 11;

/**
 * Incremental decoder for `Transfer-Encoding: chunked` bodies (RFC 9112 section 7.1).
 *
 * Passthrough (`startPassthrough()`, before the first push): a proxy that relays the body unchanged can forward
 * the framing as it came, one write per read, instead of framing each chunk again. After every push the decoder
 * then says which of the pushed bytes may go on as they are: `[0, forwardEnd)` are chunk-size lines (extensions
 * included), data and their CRLFs of chunks other than the last, and `prefix` (or null) holds bytes of a chunk-size
 * line begun in an earlier push that this push showed to open a data chunk: they go before those. A size line whose
 * digits so far are all zeros may still be the last chunk, so it is held back (copied, at most
 * MAX_CHUNK_SIZE_LINE bytes) until a non-zero digit or its end decides. The last chunk, the trailer section and the
 * final CRLF are never forwardable: the caller writes its own end (filtered trailers); bytes after the body are
 * `rest` as always. Whether or not payload slices are collected (`skipData`), `payloadBytes` counts the last push's
 * chunk data.
 */
export class ChunkedDecoder {
  /** Trailer fields, complete once `done`. */
  trailers: HeaderList = [];
  /** Passthrough: the pushed bytes before this offset may be forwarded as they are (see the class comment). */
  forwardEnd = 0;
  /** Passthrough: bytes of earlier pushes to forward before the last push's `[0, forwardEnd)`, or null. */
  prefix: Uint8Array | null = null;
  /** Bytes of chunk data in the last push (counted whether or not slices are collected). */
  payloadBytes = 0;
  /** When true, push() returns no payload slices (a caller that only counts them saves their allocation). */
  skipData = false;

  private passthrough = false;
  private pushed = false;
  /** Passthrough: inside a size line whose digits so far are all zeros (it may be the last chunk). */
  private undecided = false;
  /** Passthrough: where that line began in the current push (-1: in an earlier push, its bytes are in `held`). */
  private lineStart = -1;
  private held: Uint8Array | null = null;

  private state = S_SIZE;
  private size = 0;
  private digits = 0;
  private lineLength = 0;
  private remaining = 0;
  private trailerBytes = 0;
  private line: Uint8Array | null = null;
  private lineUsed = 0;

  get done(): boolean {
    return this.state === S_DONE;
  }

  /** Turn passthrough bookkeeping on (see the class comment); false when bytes were pushed already. */
  startPassthrough(): boolean {
    if (this.pushed) return false;
    this.passthrough = true;
    return true;
  }

  get isPassthrough(): boolean {
    return this.passthrough;
  }

  push(chunk: Uint8Array): BodyChunk {
    const n = chunk.length;
    this.payloadBytes = 0;
    this.prefix = null;
    this.forwardEnd = 0;
    if (this.state === S_DONE) return { data: [], done: true, rest: n > 0 ? chunk : null };
    if (n > 0) this.pushed = true;
    const data: Uint8Array[] = [];
    const pass = this.passthrough;
    // passthrough: where the bytes that may not be forwarded (last chunk, trailer section) begin in this push
    let stop = pass && this.state >= S_TRAILER_START ? 0 : n;
    if (pass) this.lineStart = -1;
    let i = 0;
    while (i < n) {
      switch (this.state) {
        case S_DATA: {
          const take = Math.min(this.remaining, n - i);
          if (!this.skipData) data.push(chunk.subarray(i, i + take));
          this.payloadBytes += take;
          i += take;
          this.remaining -= take;
          if (this.remaining === 0) this.state = S_DATA_CR;
          break;
        }
        case S_SIZE: {
          const b = chunk[i];
          const h = HEX[b];
          if (h >= 0) {
            if (pass) {
              if (this.digits === 0 && h === 0) {
                // "0...": the last chunk, or a size with leading zeros; held back until that is known
                this.undecided = true;
                this.lineStart = i;
              } else if (h !== 0 && this.undecided) this.decideData();
            }
            if (++this.digits > 16) throw new HttpParseError("chunk size has too many digits", ERR);
            this.size = this.size * 16 + h;
            if (this.size > Number.MAX_SAFE_INTEGER) throw new HttpParseError("chunk size overflow", ERR);
          } else if (this.digits === 0) {
            throw new HttpParseError("invalid chunk size", ERR);
          } else if (b === CR) {
            this.state = S_SIZE_LF;
          } else if (b === 0x3b /* ; */) {
            this.state = S_EXT;
          } else if (b === SP || b === HT) {
            this.state = S_SIZE_WS;
          } else {
            throw new HttpParseError("invalid chunk size", ERR);
          }
          i++;
          this.countLine(1);
          break;
        }
        case S_SIZE_WS: {
          const b = chunk[i];
          if (b === CR) this.state = S_SIZE_LF;
          else if (b === 0x3b) this.state = S_EXT;
          else if (b !== SP && b !== HT) throw new HttpParseError("invalid chunk size line", ERR);
          i++;
          this.countLine(1);
          break;
        }
        case S_EXT: {
          // Extensions are ignored, but must not contain control characters (bare LF/CR included).
          const s = i;
          while (i < n) {
            const b = chunk[i];
            if (b === CR) break;
            if ((b < 0x20 && b !== HT) || b === 0x7f) throw new HttpParseError("invalid chunk extension", ERR);
            i++;
          }
          this.countLine(i - s);
          if (i < n) {
            this.state = S_SIZE_LF;
            i++;
          }
          break;
        }
        case S_SIZE_LF: {
          if (chunk[i] !== LF) throw new HttpParseError("chunk size line not terminated by CRLF", ERR);
          i++;
          if (this.size === 0) {
            this.state = S_TRAILER_START;
            if (pass) {
              // the last chunk: nothing from its size line on is forwarded (held bytes of it are dropped)
              stop = this.lineStart >= 0 ? this.lineStart : 0;
              this.undecided = false;
              this.held = null;
            }
          } else {
            this.remaining = this.size;
            this.state = S_DATA;
          }
          this.size = 0;
          this.digits = 0;
          this.lineLength = 0;
          break;
        }
        case S_DATA_CR: {
          if (chunk[i] !== CR) throw new HttpParseError("missing CRLF after chunk data", ERR);
          this.state = S_DATA_LF;
          i++;
          break;
        }
        case S_DATA_LF: {
          if (chunk[i] !== LF) throw new HttpParseError("missing CRLF after chunk data", ERR);
          this.state = S_SIZE;
          i++;
          break;
        }
        case S_TRAILER_START: {
          if (chunk[i] === CR) {
            this.state = S_END_LF;
            i++;
          } else {
            this.state = S_TRAILER_LINE;
            this.lineUsed = 0;
          }
          break;
        }
        case S_TRAILER_LINE: {
          const s = i;
          while (i < n && chunk[i] !== CR) {
            if (chunk[i] === LF) throw new HttpParseError("bare LF in trailer section", ERR);
            i++;
          }
          this.appendLine(chunk, s, i);
          if (i < n) {
            this.state = S_TRAILER_LF;
            i++;
          }
          break;
        }
        case S_TRAILER_LF: {
          if (chunk[i] !== LF) throw new HttpParseError("bare CR in trailer section", ERR);
          i++;
          const line = this.line!;
          const str = latin1Decode(line, 0, this.lineUsed);
          this.trailers.push(parseFieldLine(line, str, 0, 0, this.lineUsed, false, ERR));
          this.state = S_TRAILER_START;
          break;
        }
        case S_END_LF: {
          if (chunk[i] !== LF) throw new HttpParseError("bare CR at end of chunked body", ERR);
          i++;
          this.state = S_DONE;
          this.line = null;
          if (pass) this.forwardEnd = stop;
          return { data, done: true, rest: i < n ? chunk.subarray(i) : null };
        }
      }
    }
    if (pass) {
      if (this.undecided) {
        // the push ends inside an undecided size line: its bytes wait (copied: the caller's buffer moves on)
        const from = this.lineStart >= 0 ? this.lineStart : 0;
        this.held = this.held === null || this.lineStart >= 0 ? concatTwo(EMPTY, chunk.subarray(from)) : concatTwo(this.held, chunk);
        this.forwardEnd = from;
      } else {
        this.forwardEnd = stop;
      }
    }
    return { data, done: false, rest: null };
  }

  /** Passthrough: the undecided size line opens a data chunk; bytes of it held from earlier pushes go first. */
  private decideData(): void {
    this.undecided = false;
    if (this.lineStart < 0 && this.held !== null) this.prefix = this.prefix === null ? this.held : concatTwo(this.prefix, this.held);
    this.held = null;
    this.lineStart = -1;
  }

  private countLine(k: number): void {
    this.lineLength += k;
    if (this.lineLength > MAX_CHUNK_SIZE_LINE) throw new HttpParseError("chunk size line too long", ERR);
  }

  /** Copy chunk[s..e) into the trailer line buffer (the caller may reuse its buffers). */
  private appendLine(chunk: Uint8Array, s: number, e: number): void {
    const k = e - s;
    this.trailerBytes += k + 2;
    if (this.trailerBytes > MAX_TRAILER_BYTES) throw new HttpParseError("trailer section too large", ERR);
    if (k === 0) return;
    const need = this.lineUsed + k;
    if (this.line === null || this.line.length < need) {
      const grown = new Uint8Array(Math.max(need, 2 * (this.line?.length ?? 64)));
      if (this.line !== null) grown.set(this.line.subarray(0, this.lineUsed));
      this.line = grown;
    }
    this.line.set(chunk.subarray(s, e), this.lineUsed);
    this.lineUsed = need;
  }
}

const EMPTY = new Uint8Array(0);

/** A new buffer holding a then b (a copy even when one is empty: `slice` on a Buffer would give a view). */
function concatTwo(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

/** Decoder for a body delimited by Content-Length: passes `length` bytes through, then stops. */
export class LengthDecoder {
  private remaining: number;

  constructor(length: number) {
    if (!Number.isSafeInteger(length) || length < 0) throw new RangeError(`invalid body length ${length}`);
    this.remaining = length;
  }

  get done(): boolean {
    return this.remaining === 0;
  }

  /** Bytes still expected. */
  get left(): number {
    return this.remaining;
  }

  push(chunk: Uint8Array): BodyChunk {
    const n = chunk.length;
    if (this.remaining === 0) return { data: [], done: true, rest: n > 0 ? chunk : null };
    if (n <= this.remaining) {
      this.remaining -= n;
      return { data: n > 0 ? [chunk] : [], done: this.remaining === 0, rest: null };
    }
    const take = this.remaining;
    this.remaining = 0;
    return { data: [chunk.subarray(0, take)], done: true, rest: chunk.subarray(take) };
  }
}
