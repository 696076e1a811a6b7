/**
 * How a stored body is kept in the `bodies` table: as it is (TEXT for utf8 bodies, BLOB for base64 ones), or
 * zstd-compressed (a BLOB, with the `_z` column set to Z_ZSTD) once it passes COMPRESS_MIN_BYTES and compression
 * saves at least a tenth.
 *
 * zstd was measured against deflate on the store bench's body mix (JSON/HTML text of 0.2-5 KB, 3,000 bodies,
 * one run): zstd level 3 ratio 3.49, 13.9 µs to compress and 7.2 µs to decompress a body; deflate level 6 ratio
 * 3.68 but 35.6 µs / 10.1 µs; deflate level 1 ratio 2.77, 16.7 µs / 12.2 µs. zstd 3 is the better trade: the
 * writer compresses every body, readers decompress on every detail view and search verification. (Level 1 since:
 * see ZSTD_LEVEL.)
 */

/** Body stored as it is. */
export const Z_NONE = 0;
/** Body stored as a zstd frame of its bytes (UTF-8 bytes for a utf8 body). */
export const Z_ZSTD = 1;

/** Bodies shorter than this (in bytes) are stored as they are: small ones barely shrink, and stay searchable by SQL. */
export const COMPRESS_MIN_BYTES = 256;

/**
 * Level 1, not 3 (2026-11-29, shared machine at load 10-13): the decoded bodies of bench/store-mix.ts compressed one
 * by one, 15 interleaved rounds, medians (minima): bodies of 256-1,024 B 7.1 (5.0) against 8.4 (5.9) µs a body, 0.4%
 * more bytes; bodies of 256-5,000 B 19.6 (13.1) against 22.3 (16.4) µs, 1.2% more bytes (writer-bench: 1,221 against
 * 1,219 B per small entry, 1,958 against 1,946 B on the bench mix). For bodies this small the fixed cost of a call
 * (a context set up, its tables cleared) is much of the time, and level 3's are bigger.
 */
const ZSTD_LEVEL = 1;

const enc = new TextEncoder();
const dec = new TextDecoder();

export interface PackedBody {
  value: string | Uint8Array;
  z: number;
}

/**
 * What to store for a decoded body: text (utf8) or bytes (base64), compressed when that pays. utf8: the text's
 * UTF-8 bytes when the caller has them (the body as it was decoded), so that they are not encoded again.
 */
export function packBody(body: string | Uint8Array, utf8?: Uint8Array): PackedBody {
  // a string's UTF-8 size is at least its length: short ones are never encoded
  if ((typeof body === "string" ? body.length : body.byteLength) < COMPRESS_MIN_BYTES) return { value: body, z: Z_NONE };
  const bytes = typeof body === "string" ? (utf8 ?? enc.encode(body)) : body;
  if (bytes.byteLength < COMPRESS_MIN_BYTES) return { value: body, z: Z_NONE };
  const packed = Bun.zstdCompressSync(bytes, { level: ZSTD_LEVEL });
  if (packed.byteLength > bytes.byteLength * 0.9) return { value: body, z: Z_NONE };
  return { value: new Uint8Array(packed.buffer, packed.byteOffset, packed.byteLength), z: Z_ZSTD };
}

/** The stored bytes of a body (compressed or not), as bytes. */
function unpackBytes(value: string | Uint8Array, z: number | null | undefined): Uint8Array {
  if (typeof value === "string") return enc.encode(value);
  if (z === Z_ZSTD) {
    const out = Bun.zstdDecompressSync(value);
    return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
  }
  return value;
}

/** A stored utf8 body as text. */
export function unpackText(value: string | Uint8Array | null, z: number | null | undefined): string {
  if (value === null) return "";
  if (typeof value === "string") return value;
  return dec.decode(unpackBytes(value, z));
}

/** A stored body in the API's form: text for utf8 bodies, base64 for the others. */
export function unpackForApi(value: string | Uint8Array | null, z: number | null | undefined, encoding: string | null): string {
  if (value === null) return "";
  if (encoding !== "base64") return unpackText(value, z);
  const b = unpackBytes(value, z);
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("base64");
}

/**
 * A body finder for one search string: true when either stored body of an entry (compressed or not; null for none)
 * holds `needle`, ASCII letters compared case-insensitively and every other character exactly (SQLite's LIKE).
 * Works on the UTF-8 bytes, with no string built for the common case: both bodies are first searched for the
 * needle as typed (most hits have the user's case), and only then case-folded, so that a request body is not
 * folded for nothing when the response holds the string as typed (about 15% of a first-time search's check at
 * 1,000,000 entries, bench mix). The body that held the string more often so far in this search is read first (a
 * string found in responses: no request body decompressed once the first hit showed it). A stored text body (a
 * string) is compared as text. Each finder keeps that count: one finder per search and thread.
 */
export function bodyFinder(needle: string): (a: string | Uint8Array | null, az: number | null | undefined, b?: string | Uint8Array | null, bz?: number | null | undefined) => boolean {
  const asTyped = Buffer.from(needle, "utf8");
  const loweredNeedle = asciiLower(needle);
  const lowered = Buffer.from(loweredNeedle, "utf8");
  const hasLetters = /[a-zA-Z]/.test(needle);
  const asciiNeedle = /^[\x00-\x7f]*$/.test(needle);
  const loweredText = needle.toLowerCase();
  /** The bytes of a stored body: zstd gives a Buffer, used as it is (no view of its .buffer made). */
  const bytes = (value: Uint8Array, z: number | null | undefined): Buffer =>
    z === Z_ZSTD ? Bun.zstdDecompressSync(value) : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  /** The case-insensitive check of `buf`; `fresh`: buf is a copy of its own (may be changed in place). */
  const folded = (buf: Buffer, fresh: boolean): boolean => {
    if (!hasLetters) return false; // the exact check decided
    if (asciiNeedle) {
      // an ASCII needle can only match ASCII bytes: the bytes read as Latin-1 and lower-cased natively (Latin-1's
      // other letters stay outside ASCII) give the same answer as ASCII folding, several times faster than a loop
      return buf.toString("latin1").toLowerCase().includes(loweredText);
    }
    const b = fresh ? buf : Buffer.from(buf);
    for (let i = 0; i < b.length; i++) {
      const c = b[i]!;
      if (c >= 0x41 && c <= 0x5a) b[i] = c | 0x20;
    }
    return b.indexOf(lowered) >= 0;
  };
  /**
   * The first pass over one body: true when it holds the needle (as typed; a text body case-folded), else its bytes
   * for the folded pass (null: none, or a text body, already decided).
   */
  const typed = (value: string | Uint8Array | null, z: number | null | undefined): Buffer | true | null => {
    if (value === null) return null;
    if (typeof value === "string") return asciiLower(value).includes(loweredNeedle) ? true : null;
    const buf = bytes(value, z);
    return buf.indexOf(asTyped) >= 0 ? true : buf;
  };
  // Which body held the needle as typed, so far in this search: the one that did more often is read first, so that
  // a string found in responses does not decompress every request body for nothing (and the other way round).
  // The answer is the same in either order.
  let firstHits = 0;
  let secondHits = 0;
  /** x read before y; `xFirst`: x is the entry's first body (the request). */
  const check = (x: string | Uint8Array | null, xz: number | null | undefined, y: string | Uint8Array | null, yz: number | null | undefined, xFirst: boolean): boolean => {
    const xb = typed(x, xz);
    if (xb === true) {
      if (xFirst) firstHits++;
      else secondHits++;
      return true;
    }
    const yb = typed(y, yz);
    if (yb === true) {
      if (xFirst) secondHits++;
      else firstHits++;
      return true;
    }
    return (xb !== null && folded(xb, xz === Z_ZSTD)) || (yb !== null && folded(yb, yz === Z_ZSTD));
  };
  return (a, az, b = null, bz = null) => (secondHits > firstHits ? check(b, bz, a, az, false) : check(a, az, b, bz, true));
}

/** ASCII letters lower-cased, every other character kept (what SQLite's LIKE folds). */
export function asciiLower(s: string): string {
  return s.replace(/[A-Z]+/g, (m) => m.toLowerCase());
}
