/**
 * The binary form of captured entries between the proxy's thread and the writer Worker, and in the journal.
 *
 * The proxy's thread encodes each entry the moment it is added, while its strings and bodies are still in the
 * CPU's caches, straight into a ring shared with the writer (BatchBuilder): no entry object outlives its flow, no
 * JSON is built (but for `extra`), no buffer is allocated or copied per batch. Measured through the proxy (hey, 32
 * connections, 1 KiB responses), capture's cost fell from about 8 to 4 µs of CPU per request: encoding 200 JSON
 * rows when their batch was posted, 10-15 ms later, touched data that had gone cold, and a fresh buffer of a few
 * hundred KiB per batch made both threads' garbage collectors run full collections six times as often.
 *
 * A batch is records back to back; all numbers little-endian:
 *
 *   u32 record length (this field included)   f64 id   f64 timestamp   f64 duration_ms   f64 status_code
 *   f64 req_body_size   f64 res_body_size   u16 flags
 *   str method, url, host, content_type, client_addr, error, reason, extra (JSON)
 *   headers req_headers, res_headers
 *   bytes req_body, res_body
 *   [flag F_HAR only] f64 blocked, connect, ssl, send, wait, receive, connection_id; str server_ip, http_version,
 *   response_http_version (NewEntry.har: numbers are cheap to write here, where the same data as JSON extras cost
 *   the proxy's thread ~0.9 µs per flow; the reader turns them into extras, in the writer)
 *
 * - str: u32 h, then h >> 2 bytes; h = 0xFFFFFFFF is null. Low two bits: 0 latin1, one byte per character (a
 *   short string off the wire); 1 UTF-16LE (a short string with a character above U+00FF); 2 UTF-8 (a string of
 *   more than 48 characters). Strings come back exactly, but for a lone surrogate in a long one (see str()).
 * - headers: u32 count (0xFFFFFFFF: null), then name and value as str, count times; or, with the top bit set, u32
 *   0x80000000 | n then n bytes of field lines as they crossed the wire (CRLF lines ending with the empty line),
 *   parsed back into the list when read. The proxy hands these over for a head nobody changed (RawFields).
 * - bytes: u32 n then n bytes; 0xFFFFFFFF is null.
 */
import { STORED_BODIES_KEY, type HeaderList, type NewEntry, type RawFields } from "./types.ts";
import { copyBytes, latin1Decode } from "../core/http1/chars.ts";
import { parseFieldLines } from "../core/http1/fields.ts";
import type { WireRow } from "./capture-protocol.ts";

const NULL = 0xffffffff;
/** Top bit of a headers field's count word: what follows are field lines as received, this many bytes. */
const H_RAW = 0x80000000;
/** Longest raw header block taken (a head is at most 64 KiB; more would not fit the length word's meaning). */
const MAX_RAW_FIELDS = 0x00ffffff;
const FIXED = 4 + 6 * 8 + 2;

const F_HAS_RESPONSE = 1;
/** The record ends with the HAR block (NewEntry.har). */
const F_HAR = 2;
/** How a string's bytes are to be read (the low two bits of its length word). */
const S_LATIN1 = 0;
const S_UTF16 = 1;
const S_UTF8 = 2;
/** Strings longer than this are written by native code (UTF-8), shorter ones by a JS loop (see str()). */
const LONG = 48;
/** The shared ring batches are written into: some 30 batches of 200 entries of 1 KiB. */
export const RING_BYTES = 8 * 1024 * 1024;

/** A batch of entries read back: one WireRow per entry, with its bodies beside it. */
export interface DecodedBatch {
  rows: WireRow[];
  /** Raw request and response bodies of rows[i] (null: none). */
  reqBodies: (Uint8Array | null)[];
  resBodies: (Uint8Array | null)[];
  /** Entries that could not be read back (damaged records), and the first reason. */
  failed: number;
  error: string | null;
}

/** A batch handed over by BatchBuilder.take(). */
export interface BuiltBatch {
  /**
   * Where the records are: `length` bytes at `start` of the shared ring (data undefined; the reader says when it
   * is done with them, and release() frees them), or the first `length` bytes of a buffer of the batch's own
   * (transfer it).
   */
  data?: ArrayBuffer;
  start: number;
  length: number;
  count: number;
  first: number;
  last: number;
  /** Entries that could not be encoded (left out), and the first reason. */
  failed: number;
  error: string | null;
}

/** The bytes of a batch, in the ring or in its own buffer. */
export function batchBytes(ring: SharedArrayBuffer | null, b: { data?: ArrayBuffer; start: number; length: number }): Uint8Array {
  if (b.data) return new Uint8Array(b.data, 0, b.length);
  if (!ring) throw new Error("a ring batch without the ring");
  return new Uint8Array(ring, b.start, b.length);
}

/** The numbers of the HAR block: blocked, connect, ssl, send, wait, receive, connection_id. */
const HAR_NUMBERS = 7;

function bodyOf(b: unknown): Uint8Array | null {
  if (b === null || b === undefined) return null;
  if (!ArrayBuffer.isView(b)) throw new TypeError("body is not a byte array");
  return b instanceof Uint8Array ? b : new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}

function numOf(v: unknown, name: string): number {
  if (typeof v !== "number") throw new TypeError(`entry field ${name} is not a number`);
  return v;
}

/** The raw header block of an entry, or null to encode the list; a malformed one is refused like any bad field. */
function rawFieldsOf(f: RawFields | null | undefined): RawFields | null {
  if (f === undefined || f === null) return null;
  const { buf, fieldsAt, end } = f;
  if (!(buf instanceof Uint8Array) || !Number.isInteger(fieldsAt) || !Number.isInteger(end) || fieldsAt < 0 || end > buf.length || end - fieldsAt < 2 || end - fieldsAt > MAX_RAW_FIELDS) {
    throw new TypeError("entry header block is not a RawFields");
  }
  if (!endsWithEmptyLine(buf, fieldsAt, end)) throw new TypeError("entry header block does not end with an empty line");
  return f;
}

/** buf[from..to) is field lines ending with the empty line: CRLF alone, or ending CRLF CRLF. */
function endsWithEmptyLine(b: Uint8Array, from: number, to: number): boolean {
  const n = to - from;
  if (n === 2) return b[from] === 13 && b[from + 1] === 10;
  return n >= 4 && b[to - 4] === 13 && b[to - 3] === 10 && b[to - 2] === 13 && b[to - 1] === 10;
}

function strOf(v: unknown, name: string): string | null {
  if (v === null || v === undefined) return null;
  if (typeof v !== "string") throw new TypeError(`entry field ${name} is not a string`);
  return v;
}

/** The JSON of an extras object; null when it has no keys, or when JSON cannot hold it (the extras are dropped). */
function extraJson(extra: unknown): string | null {
  if (!extra || typeof extra !== "object") return null;
  let any = false;
  for (const _ in extra) {
    any = true;
    break;
  }
  if (!any) return null;
  try {
    return JSON.stringify(extra);
  } catch {
    return null; // a BigInt, a cycle...: the entry is kept without them
  }
}

/** Buffer.copy, called on any Uint8Array (a body need not be a Buffer). */
const copyRange = Buffer.prototype.copy as (this: Uint8Array, target: Uint8Array, targetStart: number, sourceStart: number, sourceEnd: number) => number;

/** Thrown by reserve() when the ring has no room left for the entry being written. */
const NO_ROOM = new Error("no room in the ring");

/**
 * Builds batches of encoded entries. add() writes an entry at once; take() hands the batch over.
 *
 * Batches are written into one SharedArrayBuffer ring, which the reader (the writer Worker) was given once: a
 * batch costs no allocation on either side. A fresh ArrayBuffer per batch (a few hundred KiB, "oversized" to the
 * GC) made both threads' garbage collectors run full collections several times as often. A batch is a contiguous
 * run of the ring; it is released, oldest first, once the reader is done with it. When the ring has no room (the
 * reader is far behind, or one entry is larger than the ring), the batch gets a buffer of its own instead.
 */
export class BatchBuilder {
  private readonly ringBuf: Buffer;
  private readonly ringDv: DataView<ArrayBufferLike>;
  /** Ring runs handed over and not released yet, oldest first: [start, end). */
  private readonly inUse: [number, number][] = [];
  private buf: Buffer;
  private dv: DataView<ArrayBufferLike>;
  /** Writing into a buffer of the batch's own (the ring had no room). */
  private own = false;
  /** Where the ring resumes after a batch that had a buffer of its own. */
  private ringResume = 0;
  /** Where the current batch starts, where the next byte goes, and how far it may write (see refreshEnd). */
  private start = 0;
  private off = 0;
  private end: number;
  count = 0;
  first = 0;
  last = 0;
  failed = 0;
  error: string | null = null;
  /** Called when the ring's room ends in the middle of a batch: hand it over (take()) so that a new one can start. */
  onFull: () => void = () => {};

  constructor(readonly ring: SharedArrayBuffer = new SharedArrayBuffer(RING_BYTES)) {
    this.ringBuf = Buffer.from(ring);
    this.ringDv = new DataView(ring);
    this.buf = this.ringBuf;
    this.dv = this.ringDv;
    this.end = ring.byteLength;
  }

  /** Bytes encoded in the current batch. */
  get bytes(): number {
    return this.off - this.start;
  }

  private lastStart = 0;

  /** Length of the entry add() just accepted. */
  get lastLength(): number {
    return this.off - this.lastStart;
  }

  /**
   * Copies the entry add() just accepted to `target` at `at` (Buffer.copy: no view is made; a subarray() per entry
   * cost more than the copy of its kilobyte).
   */
  copyLastEntry(target: Uint8Array, at: number): void {
    this.buf.copy(target, at, this.lastStart, this.off);
  }

  /** Encodes one entry; false when it cannot be (counted in failed and error, and left out). */
  add(id: number, e: NewEntry): boolean {
    for (let attempt = 0; ; attempt++) {
      const at = this.off;
      try {
        this.encode(id, e);
        this.lastStart = at;
        if (this.count === 0) this.first = id;
        this.last = id;
        this.count++;
        return true;
      } catch (err) {
        this.off = at;
        if (err === NO_ROOM && attempt < 3) {
          this.makeRoom();
          continue;
        }
        this.failed++;
        this.error ??= err instanceof Error ? err.message : String(err);
        return false;
      }
    }
  }

  /** Hands over what was built (null when nothing was added or failed) and starts the next batch. */
  take(): BuiltBatch | null {
    if (this.count === 0 && this.failed === 0) return null;
    const length = this.off - this.start;
    const out: BuiltBatch = { start: this.start, length, count: this.count, first: this.first, last: this.last, failed: this.failed, error: this.error };
    if (this.own) {
      out.data = this.buf.buffer as ArrayBuffer;
      out.start = 0;
    } else if (length === 0) {
      out.data = new ArrayBuffer(0); // every entry refused: nothing in the ring to hold
      out.start = 0;
    } else {
      this.inUse.push([this.start, this.off]);
      this.start = this.off;
    }
    this.startNext();
    return out;
  }

  /** A new, empty batch: back in the ring after a buffer of its own. */
  private startNext(): void {
    if (this.own) {
      this.own = false;
      this.buf = this.ringBuf;
      this.dv = this.ringDv;
      this.start = this.ringResume;
    }
    this.off = this.start;
    this.count = 0;
    this.first = 0;
    this.last = 0;
    this.failed = 0;
    this.error = null;
    this.refreshEnd();
  }

  /** The reader is done with the oldest ring batch handed over (batches with data of their own do not count). */
  release(): void {
    this.inUse.shift();
    this.rewind();
    this.refreshEnd();
  }

  /** The reader is gone: every ring batch handed over is free again. */
  releaseAll(): void {
    this.inUse.length = 0;
    this.rewind();
    this.refreshEnd();
  }

  /** Ring batches handed over and not released. */
  get held(): number {
    return this.inUse.length;
  }

  /** With nothing in use and the current batch empty, writing starts over at the ring's start (warm pages). */
  private rewind(): void {
    if (this.inUse.length === 0 && !this.own && this.off === this.start) this.off = this.start = 0;
  }

  /**
   * The end of the room the current batch may fill in the ring. The runs in use lie either all before the batch
   * (it may fill up to the ring's end) or, after a wrap round, the oldest ones after it (it may fill up to the
   * oldest): a run in use never starts at or after the batch's start unless the batch wrapped round before it.
   */
  private limit(): number {
    if (this.inUse.length === 0) return this.ringBuf.byteLength;
    const oldest = this.inUse[0]![0];
    return oldest >= this.start ? oldest : this.ringBuf.byteLength;
  }

  private makeRoom(): void {
    if (this.own) return; // own buffers grow in reserve(): no NO_ROOM for them
    if (this.count > 0) {
      this.onFull(); // hands this batch over: the entry goes into the next one
      if (this.count > 0) this.goOwn(); // nobody took it: go on in a buffer of its own
      return;
    }
    // an empty batch: wrap round to the ring's start if that leaves room, else a buffer of its own
    const oldest = this.inUse.length > 0 ? this.inUse[0]![0] : -1;
    if (this.start > 0 && (oldest === -1 || (oldest > 0 && oldest < this.start))) {
      this.off = this.start = 0;
      this.refreshEnd();
      return;
    }
    this.goOwn();
  }

  /** Drops the current batch's entries (they are not handed over). */
  discard(): void {
    this.startNext();
    this.rewind();
  }

  private goOwn(): void {
    const used = this.off - this.start;
    const next = this.alloc(Math.max(64 * 1024, used * 2));
    next.set(this.ringBuf.subarray(this.start, this.off), 0);
    this.ringResume = this.start;
    this.own = true;
    this.buf = next;
    this.dv = new DataView(next.buffer, next.byteOffset, next.byteLength);
    this.off = used;
    this.start = 0;
    this.refreshEnd();
  }

  /** A buffer of its own (transferable) for a batch, not zero-filled: every byte up to `off` is written first. */
  private alloc(n: number): Buffer {
    const b = Buffer.allocUnsafeSlow(n);
    return b.byteOffset === 0 && b.buffer.byteLength === n ? b : Buffer.from(new ArrayBuffer(n));
  }

  /**
   * How far the current batch may write. Kept in a field (reserve() runs for every field of every entry) and
   * refreshed wherever the room can change: it only ever shrinks at a wrap round or a change of buffer, and
   * reserve() refreshes it before it refuses.
   */
  private refreshEnd(): void {
    this.end = this.own ? this.buf.byteLength : this.limit();
  }

  private reserve(n: number): void {
    if (this.off + n <= this.end) return;
    this.refreshEnd();
    if (this.off + n <= this.end) return;
    if (!this.own) throw NO_ROOM;
    const next = this.alloc(Math.max(this.buf.byteLength * 2, this.off + n));
    next.set(this.buf.subarray(0, this.off), 0);
    this.buf = next;
    this.dv = new DataView(next.buffer, next.byteOffset, next.byteLength);
    this.end = next.byteLength;
  }

  private encode(id: number, e: NewEntry): void {
    // validate first, so that nothing is half-written when an entry is refused
    const timestamp = numOf(e.timestamp, "timestamp");
    const duration = numOf(e.duration_ms, "duration_ms");
    const status = numOf(e.status_code, "status_code");
    const reqBody = bodyOf(e.req_body);
    const resBody = bodyOf(e.res_body);
    const resBodyAt = e.res_body_at ?? 0;
    if (!Number.isInteger(resBodyAt) || resBodyAt < 0 || resBodyAt > (resBody?.length ?? 0)) throw new TypeError("entry field res_body_at is not an offset into res_body");
    const method = strOf(e.method, "method");
    const url = strOf(e.url, "url");
    const host = strOf(e.host, "host");
    const ct = strOf(e.content_type, "content_type");
    const client = strOf(e.client_addr, "client_addr");
    const error = strOf(e.error, "error");
    const reason = strOf(e.reason, "reason");
    const extra = extraJson(e.stored_bodies ? { ...e.extra, [STORED_BODIES_KEY]: e.stored_bodies } : e.extra);
    const reqH = e.req_headers ?? null;
    const resH = e.res_headers ?? null;
    const reqFields = rawFieldsOf(e.req_fields);
    const resFields = rawFieldsOf(e.res_fields);
    const har = e.har ?? null;
    if (har !== null) {
      const { blocked, connect, ssl, send, wait, receive, connection_id } = har;
      if (typeof blocked !== "number" || typeof connect !== "number" || typeof ssl !== "number" || typeof send !== "number" || typeof wait !== "number" || typeof receive !== "number" || typeof connection_id !== "number") {
        throw new TypeError("entry field har holds a value that is not a number");
      }
      strOf(har.server_ip, "har.server_ip");
      strOf(har.http_version, "har.http_version");
      strOf(har.response_http_version, "har.response_http_version");
    }

    const start = this.off;
    this.reserve(FIXED);
    const dv = this.dv;
    dv.setFloat64(start + 4, id, true);
    dv.setFloat64(start + 12, timestamp, true);
    dv.setFloat64(start + 20, duration, true);
    dv.setFloat64(start + 28, status, true);
    dv.setFloat64(start + 36, typeof e.req_body_size === "number" ? e.req_body_size : 0, true);
    dv.setFloat64(start + 44, typeof e.res_body_size === "number" ? e.res_body_size : 0, true);
    dv.setUint16(start + 52, (e.has_response ? F_HAS_RESPONSE : 0) | (har !== null ? F_HAR : 0), true);
    this.off = start + FIXED;
    this.str(method);
    this.str(url);
    this.str(host);
    this.str(ct);
    this.str(client);
    this.str(error);
    this.str(reason);
    this.str(extra);
    if (reqFields) this.rawFields(reqFields);
    else this.headers(reqH, "req_headers");
    if (resFields) this.rawFields(resFields);
    else this.headers(resH, "res_headers");
    this.bytesField(reqBody);
    this.bytesField(resBody, resBodyAt);
    if (har !== null) {
      this.reserve(HAR_NUMBERS * 8);
      const d = this.dv;
      const o = this.off;
      d.setFloat64(o, har.blocked, true);
      d.setFloat64(o + 8, har.connect, true);
      d.setFloat64(o + 16, har.ssl, true);
      d.setFloat64(o + 24, har.send, true);
      d.setFloat64(o + 32, har.wait, true);
      d.setFloat64(o + 40, har.receive, true);
      d.setFloat64(o + 48, har.connection_id, true);
      this.off = o + HAR_NUMBERS * 8;
      this.str(har.server_ip ?? null);
      this.str(har.http_version ?? null);
      this.str(har.response_http_version ?? null);
    }
    this.dv.setUint32(start, this.off - start, true);
  }

  private u32(v: number): void {
    this.reserve(4);
    this.dv.setUint32(this.off, v, true);
    this.off += 4;
  }

  private headers(h: HeaderList | null, name: string): void {
    if (h === null) return this.u32(NULL);
    if (!Array.isArray(h)) throw new TypeError(`entry field ${name} is not a header list`);
    this.u32(h.length);
    for (let i = 0; i < h.length; i++) {
      const pair = h[i];
      if (!Array.isArray(pair) || typeof pair[0] !== "string" || typeof pair[1] !== "string") {
        throw new TypeError(`entry field ${name} is not a header list`);
      }
      this.str(pair[0]);
      this.str(pair[1]);
    }
  }

  /** A header block as received: its bytes, copied. */
  private rawFields(f: RawFields): void {
    const n = f.end - f.fieldsAt;
    this.reserve(4 + n);
    this.dv.setUint32(this.off, (H_RAW | n) >>> 0, true);
    copyBytes(f.buf, f.fieldsAt, f.end, this.buf, this.off + 4);
    this.off += 4 + n;
  }

  /** b's bytes from `at` on (a view made of them would cost more than their copy: Buffer.copy takes the range). */
  private bytesField(b: Uint8Array | null, at = 0): void {
    if (b === null) return this.u32(NULL);
    const n = b.byteLength - at;
    this.reserve(4 + n);
    this.dv.setUint32(this.off, n, true);
    if (at === 0) this.buf.set(b, this.off + 4);
    else copyRange.call(b, this.buf, this.off + 4, at, b.byteLength);
    this.off += 4 + n;
  }

  /**
   * u32 (byte length << 2 | form) then the bytes. Up to LONG characters, a JS loop writes one byte each when every
   * one is <= U+00FF (the common case, checked in the same pass), else the string again as UTF-16LE: exact. A
   * longer string (a cookie, a long URL) is written UTF-8 by native code, some ten times faster than the loop; a
   * lone surrogate in it becomes U+FFFD, as it does when the serialiser puts it on the wire.
   */
  private str(s: string | null): void {
    if (s === null) return this.u32(NULL);
    const n = s.length;
    if (n > 0x0fffffff) throw new RangeError("entry string too long");
    const at = this.off + 4;
    if (n > LONG) {
      this.reserve(4 + 3 * n);
      const len = this.buf.write(s, at, 3 * n, "utf8");
      this.dv.setUint32(this.off, (len << 2) | S_UTF8, true);
      this.off = at + len;
      return;
    }
    this.reserve(4 + 2 * n);
    const buf = this.buf;
    let i = 0;
    for (; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c > 0xff) break;
      buf[at + i] = c;
    }
    if (i === n) {
      this.dv.setUint32(this.off, (n << 2) | S_LATIN1, true);
      this.off = at + n;
      return;
    }
    const len = buf.write(s, at, 2 * n, "utf16le");
    this.dv.setUint32(this.off, (len << 2) | S_UTF16, true);
    this.off = at + len;
  }
}

// --- reading -----------------------------------------------------------------------------------------------------

class Reader {
  off: number;
  constructor(readonly buf: Buffer, readonly dv: DataView, start: number, readonly end: number) {
    this.off = start;
  }
  need(n: number): void {
    if (this.off + n > this.end) throw new RangeError("entry record is cut short");
  }
  u32(): number {
    this.need(4);
    const v = this.dv.getUint32(this.off, true);
    this.off += 4;
    return v;
  }
  str(): string | null {
    const h = this.u32();
    if (h === NULL) return null;
    const n = h >>> 2;
    this.need(n);
    const form = h & 3;
    const s = this.buf.toString(form === S_LATIN1 ? "latin1" : form === S_UTF16 ? "utf16le" : "utf8", this.off, this.off + n);
    this.off += n;
    return s;
  }
  headers(): HeaderList | null {
    const count = this.u32();
    if (count === NULL) return null;
    if (count & H_RAW) return this.rawFields((count & ~H_RAW) >>> 0);
    const out: HeaderList = [];
    for (let i = 0; i < count; i++) out.push([this.str() ?? "", this.str() ?? ""]);
    return out;
  }
  /** Field lines as received, parsed as the proxy parsed them (the list they were stored for). */
  private rawFields(n: number): HeaderList {
    this.need(n);
    const b = this.buf.subarray(this.off, this.off + n);
    this.off += n;
    // the block ends with its empty line: the parse cannot run past it, whatever a damaged record holds before
    if (!endsWithEmptyLine(b, 0, n)) throw new RangeError("entry header block is not terminated");
    const out: HeaderList = [];
    parseFieldLines(b, latin1Decode(b, 0, n), 0, 0, out, true, 502);
    return out;
  }

  /** The HAR block (F_HAR) as extra fields added to `extra`. */
  harExtras(extra: Record<string, unknown>): Record<string, unknown> {
    this.need(HAR_NUMBERS * 8);
    const n: number[] = [];
    for (let i = 0; i < HAR_NUMBERS; i++) {
      n.push(this.dv.getFloat64(this.off, true));
      this.off += 8;
    }
    const ip = this.str();
    const version = this.str();
    const resVersion = this.str();
    if (version !== null) extra.http_version = version;
    if (resVersion !== null) extra.response_http_version = resVersion;
    if (n[0]! >= 0) extra.timings = { blocked: n[0], connect: n[1], ssl: n[2], send: n[3], wait: n[4], receive: n[5] };
    if (ip !== null) extra.server_ip = ip;
    if (n[6]! > 0) extra.connection_id = n[6];
    return extra;
  }

  bytes(): Uint8Array | null {
    const n = this.u32();
    if (n === NULL) return null;
    this.need(n);
    const b = this.buf.subarray(this.off, this.off + n);
    this.off += n;
    return b;
  }
}

/**
 * Reads a batch back. An entry whose record is damaged is counted in `failed` and skipped when its length is
 * intact; a damaged length ends the batch there (counted once).
 */
export function decodeBatch(bytes: Uint8Array): DecodedBatch {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: DecodedBatch = { rows: [], reqBodies: [], resBodies: [], failed: 0, error: null };
  const onError = (message: string) => {
    out.failed++;
    out.error ??= message;
  };
  let pos = 0;
  while (pos < buf.length) {
    const len = pos + 4 <= buf.length ? dv.getUint32(pos, true) : 0;
    if (len < FIXED || pos + len > buf.length) {
      onError("entry record is cut short");
      break;
    }
    try {
      const r = new Reader(buf, dv, pos + FIXED, pos + len);
      const flags = dv.getUint16(pos + 52, true);
      const method = r.str();
      const url = r.str();
      const host = r.str();
      const ct = r.str();
      const client = r.str();
      const error = r.str();
      const reason = r.str();
      const extraText = r.str();
      const reqH = r.headers();
      const resH = r.headers();
      const reqBody = r.bytes();
      const resBody = r.bytes();
      let extra: Record<string, unknown> | null = extraText === null ? null : (JSON.parse(extraText) as Record<string, unknown>);
      if (flags & F_HAR) extra = r.harExtras(extra ?? {});
      if (reason !== null) (extra ??= {}).reason = reason;
      out.rows.push([
        dv.getFloat64(pos + 4, true),
        method as string,
        url as string,
        host as string,
        dv.getFloat64(pos + 28, true),
        ct,
        dv.getFloat64(pos + 20, true),
        dv.getFloat64(pos + 12, true),
        client as string,
        (flags & F_HAS_RESPONSE) !== 0,
        error,
        reqH,
        resH,
        reqBody ? reqBody.length : -1,
        dv.getFloat64(pos + 36, true),
        resBody ? resBody.length : -1,
        dv.getFloat64(pos + 44, true),
        extra,
      ]);
      out.reqBodies.push(reqBody);
      out.resBodies.push(resBody);
    } catch (err) {
      onError(err instanceof Error ? err.message : String(err));
    }
    pos += len;
  }
  return out;
}

/** The first format of a batch (journal records "TWJ1"): rows as JSON, every body back to back after them. */
export function decodeJsonBatch(rowsJson: string, bodies: Uint8Array): DecodedBatch {
  const rows = JSON.parse(rowsJson) as WireRow[];
  const out: DecodedBatch = { rows, reqBodies: [], resBodies: [], failed: 0, error: null };
  let off = 0;
  for (const r of rows) {
    const reqLen = typeof r[13] === "number" ? r[13] : -1;
    const resLen = typeof r[15] === "number" ? r[15] : -1;
    out.reqBodies.push(reqLen >= 0 ? bodies.subarray(off, off + reqLen) : null);
    off += Math.max(0, reqLen);
    out.resBodies.push(resLen >= 0 ? bodies.subarray(off, off + resLen) : null);
    off += Math.max(0, resLen);
  }
  return out;
}
