// Field-line parsing shared by message heads and chunked trailers.

import { COLON, FIELD, HT, SP, TOKEN, indexOfLF } from "./chars.ts";
import { HttpParseError, type HeaderList } from "./types.ts";

/**
 * Parse the field lines between `p` and the empty line that ends the head (the head is known to be
 * complete and to use CRLF throughout). `str` is the latin1 decoding of buf[base..], so byte offset
 * `i` is string index `i - base`.
 *
 * In lenient mode (responses), obs-fold is unfolded into a single SP and whitespace between the
 * field name and the colon is removed, as RFC 9112 section 5 allows a proxy to do for responses.
 * Returns true when such a repair was made (the bytes then no longer say what the list says).
 */
export function parseFieldLines(
  buf: Uint8Array,
  str: string,
  base: number,
  p: number,
  headers: HeaderList,
  lenient: boolean,
  errorStatus: number,
): boolean {
  let repaired = false;
  for (;;) {
    const le = indexOfLF(buf, p) - 1; // index of the CR ending this line
    if (le === p) return repaired; // empty line
    const c = buf[p];
    if (c === SP || c === HT) {
      if (!lenient) throw new HttpParseError("obsolete line folding in header", errorStatus);
      if (headers.length === 0) throw new HttpParseError("line folding before any header", errorStatus);
      repaired = true;
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
    } else {
      const field = parseFieldLine(buf, str, base, p, le, lenient, errorStatus);
      if (lenient && buf[p + field[0].length] !== COLON) repaired = true; // whitespace before the colon was dropped
      headers.push(field);
    }
    p = le + 2;
  }
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
