// Field-line parsing shared by message heads and chunked trailers.

import { COLON, CR, FIELD, HT, LF, SP, TOKEN, indexOfLF } from "./chars.ts";
import { HttpParseError, type HeaderList } from "./types.ts";

// Which framing and hop-by-hop fields a head holds, found while its lines are parsed (one bit per name), so that
// framing, keep-alive and forwarding decisions need not scan the list again for names that are not there.
export const F_HOST = 1;
export const F_CONTENT_LENGTH = 2;
export const F_TRANSFER_ENCODING = 4;
export const F_CONNECTION = 8;
export const F_EXPECT = 16;
export const F_UPGRADE = 32;
/** Keep-Alive, Proxy-Connection, Proxy-Authenticate, Proxy-Authorization, TE, Trailer. */
export const F_OTHER_HOP = 64;
/** Every hop-by-hop name (RFC 9110 7.6.1) but Transfer-Encoding. */
export const F_HOP = F_CONNECTION | F_UPGRADE | F_OTHER_HOP;
/** Set in parseFieldLines' answer when lenient parsing repaired a line (not a field). */
export const F_REPAIRED = 1 << 30;
/** Set in parseFieldLines' answer when a second Host field was seen (not a field). */
export const F_HOST_AGAIN = 1 << 29;

const KNOWN: { name: string; bit: number }[][] = [];
for (const [name, bit] of [
  ["host", F_HOST],
  ["content-length", F_CONTENT_LENGTH],
  ["transfer-encoding", F_TRANSFER_ENCODING],
  ["connection", F_CONNECTION],
  ["expect", F_EXPECT],
  ["upgrade", F_UPGRADE],
  ["keep-alive", F_OTHER_HOP],
  ["proxy-connection", F_OTHER_HOP],
  ["proxy-authenticate", F_OTHER_HOP],
  ["proxy-authorization", F_OTHER_HOP],
  ["te", F_OTHER_HOP],
  ["trailer", F_OTHER_HOP],
] as const) {
  (KNOWN[name.length] ??= []).push({ name, bit });
}

/** The F_ bit of the field name buf[p..end) (ASCII case ignored), 0 for any other name. */
function fieldBit(buf: Uint8Array, p: number, end: number): number {
  const candidates = KNOWN[end - p];
  if (candidates === undefined) return 0;
  for (let k = 0; k < candidates.length; k++) {
    const name = candidates[k]!.name;
    let i = 0;
    while (i < name.length && (buf[p + i]! | 0x20) === name.charCodeAt(i)) i++;
    if (i === name.length) return candidates[k]!.bit;
  }
  return 0;
}

/**
 * Parse the field lines between `p` and the empty line that ends the head (the head is known to be
 * complete and to use CRLF throughout). `str` is the latin1 decoding of buf[base..], so byte offset
 * `i` is string index `i - base`.
 *
 * In lenient mode (responses), obs-fold is unfolded into a single SP and whitespace between the
 * field name and the colon is removed, as RFC 9112 section 5 allows a proxy to do for responses.
 * Returns the F_ bits of the names seen, with F_REPAIRED when such a repair was made (the bytes then no longer
 * say what the list says).
 */
export function parseFieldLines(
  buf: Uint8Array,
  str: string,
  base: number,
  p: number,
  headers: HeaderList,
  lenient: boolean,
  errorStatus: number,
): number {
  let seen = 0;
  for (;;) {
    const c = buf[p];
    if (c === CR && buf[p + 1] === LF) return seen; // empty line
    if (c !== SP && c !== HT) {
      // the common line: one pass finds its end while it checks it (headLineEnd)
      const field = parseHeadFieldLine(buf, str, base, p, lenient, errorStatus);
      if (lenient && buf[p + field[0].length] !== COLON) seen |= F_REPAIRED; // whitespace before the colon was dropped
      const bit = fieldBit(buf, p, p + field[0].length);
      if (bit & seen & F_HOST) seen |= F_HOST_AGAIN;
      seen |= bit;
      headers.push(field);
      p = headLineEnd + 2;
      continue;
    }
    // obsolete line folding (a line starting with whitespace)
    if (!lenient) throw new HttpParseError("obsolete line folding in header", errorStatus);
    if (headers.length === 0) throw new HttpParseError("line folding before any header", errorStatus);
    const le = indexOfLF(buf, p) - 1; // index of the CR ending this line
    seen |= F_REPAIRED;
    let v = p;
    while (v < le && (buf[v] === SP || buf[v] === HT)) v++;
    let ve = le;
    while (ve > v && (buf[ve - 1] === SP || buf[ve - 1] === HT)) ve--;
    checkFieldValue(buf, v, ve, errorStatus);
    if (ve > v) {
      const last = headers[headers.length - 1];
      const more = str.slice(v - base, ve - base);
      last[1] = last[1] === "" ? more : last[1] + " " + more;
    }
    p = le + 2;
  }
}

/** Where parseHeadFieldLine found the CR of the line it parsed (a module variable: no pair allocated per line). */
let headLineEnd = 0;

/**
 * parseFieldLine for a line of a complete head (it ends in CRLF; findHeadEnd saw every LF after a CR), without
 * knowing the line's end: the name and value scans stop at its CR, which they would have refused as a character
 * anyway, so the line is read once instead of once to find its end and once to check it. Same answers and the
 * same errors as parseFieldLine(buf, ..., p, indexOfLF(buf, p) - 1, ...).
 */
function parseHeadFieldLine(
  buf: Uint8Array,
  str: string,
  base: number,
  p: number,
  lenient: boolean,
  errorStatus: number,
): [string, string] {
  let q = p;
  while (TOKEN[buf[q]!] === 1) q++;
  const nameEnd = q;
  if (buf[q] !== COLON) {
    const b = buf[q]!;
    if (b === CR && buf[q + 1] === LF) throw new HttpParseError("header line without colon", errorStatus);
    if (b === SP || b === HT) {
      if (!lenient) throw new HttpParseError("whitespace between header name and colon", errorStatus);
      while (buf[q] === SP || buf[q] === HT) q++;
      if (buf[q] !== COLON) throw new HttpParseError("invalid header name", errorStatus);
    } else {
      throw new HttpParseError(`invalid character 0x${b.toString(16)} in header name`, errorStatus);
    }
  }
  if (nameEnd === p) throw new HttpParseError("empty header name", errorStatus);
  let v = q + 1;
  while (buf[v] === SP || buf[v] === HT) v++;
  let e = v;
  while (FIELD[buf[e]!] === 1) e++;
  // e is the line's CR, or a byte no field value may hold (a CR not before LF is one)
  if (buf[e] !== CR || buf[e + 1] !== LF) throw new HttpParseError(`invalid character 0x${buf[e]!.toString(16)} in header value`, errorStatus);
  headLineEnd = e;
  let ve = e;
  while (ve > v && (buf[ve - 1] === SP || buf[ve - 1] === HT)) ve--;
  return [str.slice(p - base, nameEnd - base), str.slice(v - base, ve - base)];
}

/** Parse one `name: value` line buf[p..le) (without its CRLF). */
export function parseFieldLine(
  buf: Uint8Array,
  str: string,
  base: number,
  p: number,
  le: number,
  lenient: boolean,
  errorStatus: number,
): [string, string] {
  let q = p;
  while (q < le && TOKEN[buf[q]] === 1) q++;
  const nameEnd = q;
  if (q === le) {
    throw new HttpParseError("header line without colon", errorStatus);
  }
  if (buf[q] !== COLON) {
    const b = buf[q];
    if (b === SP || b === HT) {
      if (!lenient) throw new HttpParseError("whitespace between header name and colon", errorStatus);
      while (q < le && (buf[q] === SP || buf[q] === HT)) q++;
      if (buf[q] !== COLON) throw new HttpParseError("invalid header name", errorStatus);
    } else {
      throw new HttpParseError(`invalid character 0x${b.toString(16)} in header name`, errorStatus);
    }
  }
  if (nameEnd === p) throw new HttpParseError("empty header name", errorStatus);
  let v = q + 1;
  while (v < le && (buf[v] === SP || buf[v] === HT)) v++;
  let ve = le;
  while (ve > v && (buf[ve - 1] === SP || buf[ve - 1] === HT)) ve--;
  checkFieldValue(buf, v, ve, errorStatus);
  return [str.slice(p - base, nameEnd - base), str.slice(v - base, ve - base)];
}

function checkFieldValue(buf: Uint8Array, start: number, end: number, errorStatus: number): void {
  for (let i = start; i < end; i++) {
    if (FIELD[buf[i]] !== 1) {
      throw new HttpParseError(`invalid character 0x${buf[i].toString(16)} in header value`, errorStatus);
    }
  }
}
