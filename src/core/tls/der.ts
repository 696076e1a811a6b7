/**
 * Minimal ASN.1 DER encoder and reader, just enough to build and inspect
 * X.509 certificates.
 *
 * Why not node-forge's `forge.asn1`: the package ships no type declarations
 * (strict `tsc` rejects the import with TS7016), and the subset needed here is
 * small. Encoders produce complete TLVs (tag + length + content) as Uint8Array;
 * the reader never throws on malformed input except through `DerError`, which
 * callers turn into messages naming the offending file.
 */

export class DerError extends Error {
  override name = "DerError";
}

// Universal tags.
export const TAG = {
  BOOLEAN: 0x01,
  INTEGER: 0x02,
  BIT_STRING: 0x03,
  OCTET_STRING: 0x04,
  NULL: 0x05,
  OID: 0x06,
  UTF8_STRING: 0x0c,
  PRINTABLE_STRING: 0x13,
  IA5_STRING: 0x16,
  UTC_TIME: 0x17,
  GENERALIZED_TIME: 0x18,
  SEQUENCE: 0x30,
  SET: 0x31,
} as const;

function concat(parts: readonly Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

function encodeLength(len: number): Uint8Array {
  if (len < 0x80) return Uint8Array.of(len);
  const bytes: number[] = [];
  let v = len;
  while (v > 0) {
    bytes.unshift(v & 0xff);
    v = Math.floor(v / 256);
  }
  return Uint8Array.of(0x80 | bytes.length, ...bytes);
}

/** A TLV with an arbitrary identifier octet and the given content bytes. */
export function tlv(tag: number, ...content: Uint8Array[]): Uint8Array {
  const body = concat(content);
  return concat([Uint8Array.of(tag), encodeLength(body.length), body]);
}

export const seq = (...children: Uint8Array[]): Uint8Array => tlv(TAG.SEQUENCE, ...children);
export const set = (...children: Uint8Array[]): Uint8Array => tlv(TAG.SET, ...children);
export const nul = (): Uint8Array => tlv(TAG.NULL);
export const bool = (v: boolean): Uint8Array => tlv(TAG.BOOLEAN, Uint8Array.of(v ? 0xff : 0x00));
export const octetString = (bytes: Uint8Array): Uint8Array => tlv(TAG.OCTET_STRING, bytes);
export const utf8String = (s: string): Uint8Array => tlv(TAG.UTF8_STRING, new TextEncoder().encode(s));

/** IA5String; rejects anything outside 7-bit ASCII. */
export function ia5String(s: string): Uint8Array {
  const bytes = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c > 0x7f) throw new DerError(`IA5String cannot hold non-ASCII character in ${JSON.stringify(s)}`);
    bytes[i] = c;
  }
  return tlv(TAG.IA5_STRING, bytes);
}

/** BIT STRING whose content is whole bytes, `unusedBits` trailing bits unused in the last byte. */
export const bitString = (bytes: Uint8Array, unusedBits = 0): Uint8Array =>
  tlv(TAG.BIT_STRING, Uint8Array.of(unusedBits), bytes);

/**
 * Named-bit BIT STRING (e.g. KeyUsage) from bit positions (0 = most significant
 * bit of the first byte). DER: trailing zero bits are dropped.
 */
export function namedBits(bits: readonly number[]): Uint8Array {
  if (bits.length === 0) return bitString(new Uint8Array(0), 0);
  const max = Math.max(...bits);
  const bytes = new Uint8Array((max >> 3) + 1);
  for (const b of bits) bytes[b >> 3] |= 0x80 >> (b & 7);
  return bitString(bytes, 7 - (max & 7));
}

/** INTEGER from a non-negative safe integer. */
export function intNum(n: number): Uint8Array {
  if (!Number.isSafeInteger(n) || n < 0) throw new DerError(`unsupported INTEGER ${n}`);
  const bytes: number[] = [];
  let v = n;
  do {
    bytes.unshift(v & 0xff);
    v = Math.floor(v / 256);
  } while (v > 0);
  return intBytes(Uint8Array.from(bytes));
}

/** INTEGER from unsigned big-endian magnitude bytes (minimal, positive encoding). */
export function intBytes(magnitude: Uint8Array): Uint8Array {
  let start = 0;
  while (start < magnitude.length - 1 && magnitude[start] === 0) start++;
  let m = magnitude.subarray(start);
  if (m.length === 0) m = Uint8Array.of(0);
  if (m[0] & 0x80) return tlv(TAG.INTEGER, Uint8Array.of(0), m);
  return tlv(TAG.INTEGER, m);
}

export function oid(dotted: string): Uint8Array {
  const arcs = dotted.split(".").map((a) => {
    if (!/^\d+$/.test(a)) throw new DerError(`bad OID ${dotted}`);
    return Number(a);
  });
  if (arcs.length < 2 || arcs[0] > 2 || (arcs[0] < 2 && arcs[1] > 39)) throw new DerError(`bad OID ${dotted}`);
  const out: number[] = [];
  const push = (v: number) => {
    const tmp: number[] = [v & 0x7f];
    v = Math.floor(v / 128);
    while (v > 0) {
      tmp.unshift((v & 0x7f) | 0x80);
      v = Math.floor(v / 128);
    }
    out.push(...tmp);
  };
  push(arcs[0] * 40 + arcs[1]);
  for (let i = 2; i < arcs.length; i++) push(arcs[i]);
  return tlv(TAG.OID, Uint8Array.from(out));
}

/** Context-specific EXPLICIT tag [n] wrapping a complete TLV. */
export const explicit = (n: number, inner: Uint8Array): Uint8Array => tlv(0xa0 | n, inner);

/** Context-specific IMPLICIT primitive tag [n] with raw content. */
export const implicitPrim = (n: number, content: Uint8Array): Uint8Array => tlv(0x80 | n, content);

const pad2 = (n: number) => String(n).padStart(2, "0");

/** RFC 5280 Time: UTCTime for 1950..2049, GeneralizedTime otherwise. Seconds precision, Zulu. */
export function time(d: Date): Uint8Array {
  const y = d.getUTCFullYear();
  const rest =
    pad2(d.getUTCMonth() + 1) +
    pad2(d.getUTCDate()) +
    pad2(d.getUTCHours()) +
    pad2(d.getUTCMinutes()) +
    pad2(d.getUTCSeconds()) +
    "Z";
  if (y >= 1950 && y < 2050) return tlv(TAG.UTC_TIME, new TextEncoder().encode(pad2(y % 100) + rest));
  if (y < 0 || y > 9999) throw new DerError(`year ${y} not representable`);
  return tlv(TAG.GENERALIZED_TIME, new TextEncoder().encode(String(y).padStart(4, "0") + rest));
}

// ---------------------------------------------------------------------------
// Reader

export interface Tlv {
  /** Identifier octet (only single-byte tags are supported). */
  tag: number;
  /** Offset of the identifier octet. */
  start: number;
  /** Offset of the first content byte. */
  contentStart: number;
  /** Offset one past the last content byte (== end of the TLV). */
  end: number;
}

/** Reads one TLV at `offset`, bounded by `limit`. Throws DerError on anything malformed. */
export function readTlv(buf: Uint8Array, offset: number, limit: number = buf.length): Tlv {
  if (limit > buf.length) limit = buf.length;
  if (offset + 2 > limit) throw new DerError("truncated DER (header)");
  const tag = buf[offset];
  if ((tag & 0x1f) === 0x1f) throw new DerError("multi-byte DER tags are not supported");
  let p = offset + 1;
  const first = buf[p++];
  let len: number;
  if (first < 0x80) {
    len = first;
  } else {
    const n = first & 0x7f;
    if (n === 0 || n > 4) throw new DerError("unsupported DER length encoding");
    if (p + n > limit) throw new DerError("truncated DER (length)");
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + buf[p++];
  }
  if (p + len > limit) throw new DerError("truncated DER (content)");
  return { tag, start: offset, contentStart: p, end: p + len };
}

/** All child TLVs of a constructed TLV. */
export function children(buf: Uint8Array, parent: Tlv): Tlv[] {
  const out: Tlv[] = [];
  let p = parent.contentStart;
  while (p < parent.end) {
    const t = readTlv(buf, p, parent.end);
    out.push(t);
    p = t.end;
  }
  return out;
}

export const content = (buf: Uint8Array, t: Tlv): Uint8Array => buf.subarray(t.contentStart, t.end);
export const whole = (buf: Uint8Array, t: Tlv): Uint8Array => buf.subarray(t.start, t.end);

/** Decode an OID TLV to dotted form. */
export function readOid(buf: Uint8Array, t: Tlv): string {
  if (t.tag !== TAG.OID) throw new DerError("expected OID");
  const c = content(buf, t);
  const arcs: number[] = [];
  let v = 0;
  for (let i = 0; i < c.length; i++) {
    v = v * 128 + (c[i] & 0x7f);
    if (!(c[i] & 0x80)) {
      if (arcs.length === 0) {
        const a = v < 80 ? Math.floor(v / 40) : 2;
        arcs.push(a, v - a * 40);
      } else arcs.push(v);
      v = 0;
    }
  }
  return arcs.join(".");
}

/** Decode a UTCTime or GeneralizedTime TLV (Zulu, seconds precision as DER requires). */
export function readTime(buf: Uint8Array, t: Tlv): Date {
  const s = new TextDecoder("latin1").decode(content(buf, t));
  let m: RegExpMatchArray | null;
  let year: number;
  if (t.tag === TAG.UTC_TIME && (m = s.match(/^(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)Z$/))) {
    const yy = Number(m[1]);
    year = yy >= 50 ? 1900 + yy : 2000 + yy;
  } else if (t.tag === TAG.GENERALIZED_TIME && (m = s.match(/^(\d{4})(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)Z$/))) {
    year = Number(m[1]);
  } else {
    throw new DerError(`unsupported time value ${JSON.stringify(s)}`);
  }
  return new Date(Date.UTC(year, Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6])));
}
