/**
 * How a header list is kept in the `details` table (req_headers, res_headers): a packed BLOB instead of JSON text.
 * Measured on the store benches' mix, the JSON lists took 318 bytes per entry on disk, most of it names and
 * JSON's quotes and brackets; names the table below knows take one byte here.
 *
 *   u8 PACK_V1, then per header: u8 name code, [name: varint n + n bytes UTF-8 when the code is 0], value: varint n +
 *   n bytes UTF-8. Varints are LEB128 (7 bits a byte, low first).
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
export function packHeaders(list: HeaderList): Uint8Array | string {
  // room: a code, two varints (at most 5 bytes each) and 3 bytes per UTF-16 unit of each string
  let room = 1;
  for (let i = 0; i < list.length; i++) {
    const [name, value] = list[i]!;
    if (!name.isWellFormed() || !value.isWellFormed()) return JSON.stringify(list);
    room += 11 + 3 * (name.length + value.length);
  }
  if (room > scratch.length) scratch = Buffer.allocUnsafeSlow(Math.max(room, scratch.length * 2));
  const b = scratch;
  b[0] = PACK_V1;
  let at = 1;
  for (let i = 0; i < list.length; i++) {
    const [name, value] = list[i]!;
    const code = CODE.get(name);
    if (code === undefined) {
      b[at] = 0;
      at = writeStr(b, at + 1, name);
    } else {
      b[at++] = code;
    }
    at = writeStr(b, at, value);
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

/** A packed header list read back; throws on bytes that are not one (the caller decides what a damaged one gives). */
export function unpackHeaders(bytes: Uint8Array): HeaderList {
  if (bytes.length === 0 || bytes[0] !== PACK_V1) throw new RangeError("not a packed header list");
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const r = { at: 1 };
  const out: HeaderList = [];
  while (r.at < buf.length) {
    const code = buf[r.at++]!;
    let name: string;
    if (code === 0) name = readStr(buf, r);
    else if (code < NAME_OF.length) name = NAME_OF[code]!;
    else throw new RangeError(`unknown header name code ${code}`);
    out.push([name, readStr(buf, r)]);
  }
  return out;
}

/** A stored header list (packed bytes, or JSON text as earlier versions wrote it) read back; [] when unreadable. */
export function storedHeaders(v: string | Uint8Array | null): HeaderList {
  if (v === null) return [];
  try {
    if (typeof v !== "string") return unpackHeaders(v);
    const list = JSON.parse(v);
    return Array.isArray(list) ? (list as HeaderList) : [];
  } catch {
    return [];
  }
}
