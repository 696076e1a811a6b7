/**
 * How a header list is kept in the `details` table (req_headers, res_headers): a packed BLOB instead of JSON text.
 * Measured on the store benches' mix, the JSON lists took 318 bytes per entry on disk, most of it names and
 * JSON's quotes and brackets; names the table below knows take one byte here.
 *
 *   u8 PACK_V2 (or PACK_V1), then per header: u8 name code, [name: varint n + n bytes UTF-8 when the code is 0],
 *   value: varint n + n bytes UTF-8. Varints are LEB128 (7 bits a byte, low first).
 * - PACK_V2 (schema 5): a name code with its high bit set (code | 0x80) says the value is not written out but
 *   coded: varint k, then for k = 0 (an HTTP date, IMF-fixdate, that Date's toUTCString() gives back exactly) a
 *   varint of its seconds since 1970; for k = 1 (a decimal integer written the way String(n) writes it, below 10^9)
 *   a varint of n; for k = 2 the entry's host (the value of a Host header, nearly always: the reader passes the
 *   entry's host); for k >= 3 the frequent value VALUES[k - 3]. Measured on the store benches' mix: details 160 ->
 *   70 bytes per entry (Date 30 -> 7 bytes, Host, Content-Type, Accept, Accept-Encoding, Cache-Control, Server,
 *   the Content-Length digits). A V1 list (schema 4) has no such codes; both are read.
 *
 * - Name codes: 0 the name follows; 1 + 2i NAMES[i] as written there (lower case, as HTTP/2 sends it); 2 + 2i the
 *   same name in the case HTTP/1 clients write it (each dash-separated word capitalised: Content-Type). Any other
 *   spelling is written out: the list comes back exactly as it was captured, case included.
 * - NAMES may only grow at its end (stored files depend on every code), and at most to 63 names (codes < 128).
 * - A list with a string that is not well-formed UTF-16 (a lone surrogate: only an imported entry can hold one)
 *   is kept as JSON text, which keeps it exactly; readers take both (unpackHeaders below, and JSON for a string).
 */
import type { HeaderList } from "./types.ts";

const PACK_V1 = 1;
const PACK_V2 = 2;
/** A name code's high bit: the value is coded (V2). */
const CODED = 0x80;
const K_DATE = 0;
const K_NUMBER = 1;
const K_HOST = 2;
const K_VALUES = 3;

/** The HTTP/2 static table's header names (RFC 7541, appendix A), then other frequent ones. Append only. */
const NAMES = [
  "accept-charset", "accept-encoding", "accept-language", "accept-ranges", "accept", "access-control-allow-origin",
  "age", "allow", "authorization", "cache-control", "content-disposition", "content-encoding", "content-language",
  "content-length", "content-location", "content-range", "content-type", "cookie", "date", "etag", "expect",
  "expires", "from", "host", "if-match", "if-modified-since", "if-none-match", "if-range", "if-unmodified-since",
  "last-modified", "link", "location", "max-forwards", "proxy-authenticate", "proxy-authorization", "range",
  "referer", "refresh", "retry-after", "server", "set-cookie", "strict-transport-security", "transfer-encoding",
  "user-agent", "vary", "via", "www-authenticate",
  "connection", "keep-alive", "origin", "upgrade-insecure-requests", "x-requested-with", "x-forwarded-for",
  "x-forwarded-proto", "x-content-type-options", "x-frame-options", "sec-fetch-site", "sec-fetch-mode",
  "sec-fetch-dest", "sec-ch-ua", "pragma", "dnt", "upgrade",
] as const;

/**
 * Frequent header values (the HTTP/2 static table's values, RFC 7541 appendix A, and other common ones), kept as
 * one byte each. Append only: stored lists depend on every index. At most 125 (K_VALUES + index: a one-byte varint).
 */
const VALUES = [
  "gzip, deflate", "200", "204", "206", "304", "400", "404", "500", "/", "/index.html", "http", "https",
  "*/*", "gzip", "br", "zstd", "deflate", "identity", "gzip, br", "gzip, deflate, br", "gzip, deflate, br, zstd",
  "no-cache", "no-store", "max-age=0", "private", "public", "no-cache, no-store, must-revalidate", "keep-alive", "close",
  "chunked", "bytes", "none", "nosniff", "DENY", "SAMEORIGIN", "*", "Accept-Encoding", "Origin", "Cookie",
  "application/json", "application/json; charset=utf-8", "application/javascript", "application/octet-stream",
  "application/x-www-form-urlencoded", "application/xml", "text/html", "text/html; charset=utf-8",
  "text/html; charset=UTF-8", "text/plain", "text/plain; charset=utf-8", "text/css", "text/javascript",
  "text/javascript; charset=utf-8", "image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml",
  "image/x-icon", "font/woff2", "multipart/form-data", "nginx", "cloudflare", "envoy", "gws", "Apache", "AmazonS3",
  "Microsoft-IIS/10.0", "same-origin", "same-site", "cross-site", "cors", "no-cors", "navigate", "empty",
  "document", "script", "style", "image", "?0", "?1", "1", "0", "true", "false", "en-US,en;q=0.9", "en-US",
  "HIT", "MISS", "max-age=31536000", "max-age=31536000; includeSubDomains", "strict-origin-when-cross-origin",
  "no-referrer", "1; mode=block", "Upgrade", "websocket", "h2", "http/1.1",
] as const;
const VALUE_CODE = new Map<string, number>();
for (let i = 0; i < VALUES.length; i++) if (!VALUE_CODE.has(VALUES[i]!)) VALUE_CODE.set(VALUES[i]!, K_VALUES + i);
if (K_VALUES + VALUES.length > 128) throw new Error("header-pack: too many values for one-byte codes");

/** A value as one coded varint or two (V2), or -1 when it is written out. Sets codedArg for K_DATE / K_NUMBER. */
let codedArg = 0;
function valueCode(v: string, host: string | undefined): number {
  if (v === host && v !== "") return K_HOST;
  const k = VALUE_CODE.get(v);
  if (k !== undefined) return k;
  const n = v.length;
  if (n === 29 && v.endsWith(" GMT")) {
    const ms = Date.parse(v);
    if (ms >= 0 && ms % 1000 === 0 && ms / 1000 < 2 ** 32 && new Date(ms).toUTCString() === v) {
      codedArg = ms / 1000;
      return K_DATE;
    }
  } else if (n > 0 && n <= 9 && /^(0|[1-9][0-9]*)$/.test(v)) {
    codedArg = Number(v);
    return K_NUMBER;
  }
  return -1;
}

const titleCase = (name: string) => name.replace(/(^|-)([a-z])/g, (_, dash: string, c: string) => dash + c.toUpperCase());

/** Name spelling -> code; code -> name spelling (index 0 unused). */
const CODE = new Map<string, number>();
const NAME_OF: string[] = [""];
for (let i = 0; i < NAMES.length; i++) {
  const lower = NAMES[i]!;
  CODE.set(lower, 1 + 2 * i);
  CODE.set(titleCase(lower), 2 + 2 * i);
  NAME_OF.push(lower, titleCase(lower));
}
if (NAME_OF.length > 128) throw new Error("header-pack: too many names for one-byte codes");

let scratch = Buffer.allocUnsafeSlow(16 * 1024);

/** Writes a varint at `at`; returns the offset after it. */
function varint(b: Buffer, at: number, v: number): number {
  while (v >= 0x80) {
    b[at++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  b[at++] = v;
  return at;
}

/** Bytes of the varint of v. */
const varintSize = (v: number) => (v < 0x80 ? 1 : v < 0x4000 ? 2 : v < 0x200000 ? 3 : v < 0x10000000 ? 4 : 5);

/** Writes s (UTF-8) with its length before it; returns the offset after it. */
function writeStr(b: Buffer, at: number, s: string): number {
  // written after a one-byte length, then moved when the length needs more bytes (rare: 128 bytes or more)
  const n = b.write(s, at + 1, "utf8");
  const extra = varintSize(n) - 1;
  if (extra > 0) b.copyWithin(at + 1 + extra, at + 1, at + 1 + n);
  varint(b, at, n);
  return at + 1 + extra + n;
}

/** What to store for a header list: packed bytes, or JSON text when a string is not well-formed. */
export function packHeaders(list: HeaderList, host?: string): Uint8Array | string {
  // room: a code, two varints (at most 5 bytes each) and 3 bytes per UTF-16 unit of each string
  let room = 1;
  for (let i = 0; i < list.length; i++) {
    const [name, value] = list[i]!;
    if (!name.isWellFormed() || !value.isWellFormed()) return JSON.stringify(list);
    room += 11 + 3 * (name.length + value.length);
  }
  if (room > scratch.length) scratch = Buffer.allocUnsafeSlow(Math.max(room, scratch.length * 2));
  const b = scratch;
  b[0] = PACK_V2;
  let at = 1;
  for (let i = 0; i < list.length; i++) {
    const [name, value] = list[i]!;
    const code = CODE.get(name) ?? 0;
    const k = valueCode(value, host);
    b[at] = k < 0 ? code : code | CODED;
    if (code === 0) at = writeStr(b, at + 1, name);
    else at++;
    if (k < 0) {
      at = writeStr(b, at, value);
    } else {
      at = varint(b, at, k);
      if (k === K_DATE || k === K_NUMBER) at = varint(b, at, codedArg);
    }
  }
  return new Uint8Array(b.subarray(0, at));
}

/** Reads a varint at r.at (bounded: a damaged blob throws, never loops). */
function readVarint(b: Uint8Array, r: { at: number }): number {
  let v = 0;
  for (let shift = 0; shift < 35; shift += 7) {
    if (r.at >= b.length) throw new RangeError("header list cut short");
    const c = b[r.at++]!;
    v += (c & 0x7f) * 2 ** shift;
    if (c < 0x80) return v;
  }
  throw new RangeError("header list length too long");
}

function readStr(buf: Buffer, r: { at: number }): string {
  const n = readVarint(buf, r);
  if (r.at + n > buf.length) throw new RangeError("header list cut short");
  const s = buf.toString("utf8", r.at, r.at + n);
  r.at += n;
  return s;
}

/** A coded value (V2) read back. */
function readCoded(buf: Buffer, r: { at: number }, host: string | undefined): string {
  const k = readVarint(buf, r);
  if (k === K_HOST) {
    if (host === undefined) throw new RangeError("a header list naming the entry's host read without it");
    return host;
  }
  if (k === K_DATE) return new Date(readVarint(buf, r) * 1000).toUTCString();
  if (k === K_NUMBER) return String(readVarint(buf, r));
  const v = VALUES[k - K_VALUES];
  if (v === undefined) throw new RangeError(`unknown header value code ${k}`);
  return v;
}

/** A packed header list read back; throws on bytes that are not one (the caller decides what a damaged one gives). */
export function unpackHeaders(bytes: Uint8Array, host?: string): HeaderList {
  if (bytes.length === 0 || (bytes[0] !== PACK_V1 && bytes[0] !== PACK_V2)) throw new RangeError("not a packed header list");
  const v2 = bytes[0] === PACK_V2;
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const r = { at: 1 };
  const out: HeaderList = [];
  while (r.at < buf.length) {
    const byte = buf[r.at++]!;
    const coded = v2 && byte >= CODED;
    const code = coded ? byte - CODED : byte;
    let name: string;
    if (code === 0) name = readStr(buf, r);
    else if (code < NAME_OF.length) name = NAME_OF[code]!;
    else throw new RangeError(`unknown header name code ${code}`);
    out.push([name, coded ? readCoded(buf, r, host) : readStr(buf, r)]);
  }
  return out;
}

/** A stored header list (packed bytes, or JSON text as earlier versions wrote it) read back; [] when unreadable. */
export function storedHeaders(v: string | Uint8Array | null, host?: string): HeaderList {
  if (v === null) return [];
  try {
    if (typeof v !== "string") return unpackHeaders(v, host);
    const list = JSON.parse(v);
    return Array.isArray(list) ? (list as HeaderList) : [];
  } catch {
    return [];
  }
}
