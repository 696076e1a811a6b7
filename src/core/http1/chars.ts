// Byte classification tables and latin1 helpers shared by the parser and serialiser.

function table(pred: (c: number) => boolean): Uint8Array {
  const t = new Uint8Array(256);
  for (let c = 0; c < 256; c++) if (pred(c)) t[c] = 1;
  return t;
}

const TCHAR_PUNCT = "!#$%&'*+-.^_`|~";

function isAlnum(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);
}

/** RFC 9110 tchar. */
export const TOKEN = table((c) => isAlnum(c) || TCHAR_PUNCT.includes(String.fromCharCode(c)));

/** Method characters: tchar without lowercase letters (lowercase methods are rejected, like nginx does). */
export const METHOD = table((c) => TOKEN[c] === 1 && !(c >= 0x61 && c <= 0x7a));

/** Characters allowed anywhere in a field value (and a reason phrase): HTAB, SP, VCHAR, obs-text. */
export const FIELD = table((c) => c === 0x09 || (c >= 0x20 && c !== 0x7f));

/** Characters allowed in a request target: VCHAR and obs-text (no SP, no controls, no DEL). */
export const TARGET = table((c) => c > 0x20 && c !== 0x7f);

/** Hex digit values, -1 for non-hex. */
export const HEX = new Int8Array(256).fill(-1);
for (let c = 0; c < 10; c++) HEX[0x30 + c] = c;
for (let c = 0; c < 6; c++) {
  HEX[0x41 + c] = 10 + c;
  HEX[0x61 + c] = 10 + c;
}

export const CR = 0x0d;
export const LF = 0x0a;
export const SP = 0x20;
export const HT = 0x09;
export const COLON = 0x3a;

/**
 * Index of the first LF in buf at or after `from`, or -1. Head lines are short: a JS loop finds their ends
 * without a native call per line; past 64 bytes (a long cookie, say) Buffer's native search takes over.
 */
export function indexOfLF(buf: Uint8Array, from: number): number {
  const stop = Math.min(buf.length, from + 64);
  for (let i = from; i < stop; i++) if (buf[i] === LF) return i;
  return stop === buf.length ? -1 : buf.indexOf(LF, stop);
}

/** Copy src[from..to) into dst at `at`: a loop for a few hundred bytes (no view, no native call), else set(). */
export function copyBytes(src: Uint8Array, from: number, to: number, dst: Uint8Array, at: number): void {
  if (to - from > 512) {
    dst.set(src.subarray(from, to), at);
    return;
  }
  for (let i = from; i < to; i++) dst[at++] = src[i]!;
}

type Latin1Slice = (this: Uint8Array, start: number, end: number) => string;
const nativeLatin1Slice = (Buffer.prototype as unknown as { latin1Slice?: Latin1Slice }).latin1Slice;

/**
 * Decode bytes as ISO-8859-1 (one char per byte, U+0000..U+00FF). TextDecoder("latin1") is
 * windows-1252 per WHATWG and would remap 0x80..0x9F, so Buffer's latin1 codec is used.
 */
export const latin1Decode: (buf: Uint8Array, start: number, end: number) => string =
  typeof nativeLatin1Slice === "function"
    ? (buf, start, end) => nativeLatin1Slice.call(buf, start, end)
    : (buf, start, end) => Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength).toString("latin1", start, end);

/** Encode a string whose chars are all <= U+00FF, one byte per char. */
export function latin1Encode(s: string): Uint8Array {
  return Buffer.from(s, "latin1");
}
