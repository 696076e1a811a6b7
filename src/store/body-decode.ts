/**
 * Turning captured body bytes into the string form the management API serves:
 * undo Content-Encoding (gzip, x-gzip, deflate, br, zstd, stacked), then UTF-8 text or base64.
 *
 * Never throws. A body that cannot be decoded is kept as it crossed the wire (decodedFrom "").
 */
import { zlib } from "../core/zlib.ts";
import type { BodyEncoding, HeaderList } from "./types.ts";

export interface DecodedBody {
  text: string;
  encoding: BodyEncoding;
  /** Content-Encoding that was removed ("gzip", "gzip, br", ...); "" if none or decoding failed. */
  decodedFrom: string;
}

/** Decoded output larger than this is treated as a decoding failure (decompression bombs). */
export const MAX_DECODED_BYTES = 64 * 1024 * 1024;

/** All values of a header (case-insensitive name), joined with ", " like a combined field. */
export function headerValue(headers: HeaderList, name: string): string | undefined {
  const lname = name.toLowerCase();
  const n = lname.length;
  let out: string | undefined;
  for (let i = 0; i < headers.length; i++) {
    const [k, v] = headers[i]!;
    // names of another length are not lower-cased at all (the writer asks 4 names of every entry's lists)
    if (k.length === n && (k === lname || k.toLowerCase() === lname)) out = out === undefined ? v : `${out}, ${v}`;
  }
  return out;
}

const TEXT_SUBTYPE_WORDS = /json|xml|javascript|ecmascript|graphql|yaml/;
const TEXT_SUBTYPES = new Set(["x-www-form-urlencoded", "csv", "x-sh", "sql", "x-httpd-php", "rtf", "x-tex"]);

/**
 * True when a Content-Type (with or without parameters) names a textual format: text/*, anything with
 * json / xml / javascript / ecmascript / graphql / yaml in its subtype (+json, +xml, ld+json, x-ndjson, ...),
 * form-urlencoded, and multipart (stored as text only if it is valid UTF-8, like every textual body).
 */
export function isTextualContentType(contentType: string): boolean {
  const mime = contentType.split(";", 1)[0]!.trim().toLowerCase();
  const slash = mime.indexOf("/");
  if (slash <= 0) return false;
  const type = mime.slice(0, slash);
  const sub = mime.slice(slash + 1);
  if (type === "text" || type === "multipart") return true;
  return TEXT_SUBTYPE_WORDS.test(sub) || TEXT_SUBTYPES.has(sub);
}

function isZlibHeader(b: Uint8Array): boolean {
  return b.length >= 2 && (b[0]! & 0x0f) === 8 && (b[0]! >> 4) <= 7 && ((b[0]! << 8) | b[1]!) % 31 === 0;
}

/**
 * Walks zstd frames (and skippable frames) and reports whether the buffer ends exactly at a frame boundary
 * (Bun's zstdDecompressSync returns partial output for a cut-off frame instead of throwing).
 */
export function zstdFramesComplete(b: Uint8Array): boolean {
  let p = 0;
  if (b.length === 0) return false;
  while (p < b.length) {
    if (p + 4 > b.length) return false;
    const magic = (b[p]! | (b[p + 1]! << 8) | (b[p + 2]! << 16) | (b[p + 3]! << 24)) >>> 0;
    if ((magic & 0xfffffff0) >>> 0 === 0x184d2a50) {
      if (p + 8 > b.length) return false;
      const size = (b[p + 4]! | (b[p + 5]! << 8) | (b[p + 6]! << 16) | (b[p + 7]! << 24)) >>> 0;
      p += 8 + size;
      if (p > b.length) return false;
      continue;
    }
    if (magic !== 0xfd2fb528) return false;
    p += 4;
    if (p >= b.length) return false;
    const fhd = b[p]!;
    p += 1;
    const fcsFlag = fhd >> 6;
    const singleSegment = (fhd >> 5) & 1;
    const checksum = (fhd >> 2) & 1;
    const didFlag = fhd & 3;
    const didSize = [0, 1, 2, 4][didFlag]!;
    const fcsSize = [singleSegment ? 1 : 0, 2, 4, 8][fcsFlag]!;
    p += (singleSegment ? 0 : 1) + didSize + fcsSize;
    for (;;) {
      if (p + 3 > b.length) return false;
      const bh = b[p]! | (b[p + 1]! << 8) | (b[p + 2]! << 16);
      p += 3;
      const last = bh & 1;
      const type = (bh >> 1) & 3;
      const size = bh >>> 3;
      if (type === 3) return false;
      p += type === 1 ? 1 : size;
      if (p > b.length) return false;
      if (last) break;
    }
    if (checksum) p += 4;
    if (p > b.length) return false;
  }
  return p === b.length;
}

/** Undoes one coding. partial: best-effort for a cut-off input. Throws on failure. */
function undoOne(coding: string, input: Uint8Array, partial: boolean): Uint8Array {
  const limit = { maxOutputLength: MAX_DECODED_BYTES };
  const z = zlib();
  switch (coding) {
    case "gzip":
    case "x-gzip":
      return z.gunzipSync(input, partial ? { ...limit, finishFlush: z.constants.Z_SYNC_FLUSH } : limit);
    case "deflate": {
      const opts = partial ? { ...limit, finishFlush: z.constants.Z_SYNC_FLUSH } : limit;
      if (isZlibHeader(input)) {
        try {
          return z.inflateSync(input, opts);
        } catch (e) {
          // a raw stream can start with bytes that look like a zlib header
          try {
            return z.inflateRawSync(input, opts);
          } catch {
            throw e;
          }
        }
      }
      return z.inflateRawSync(input, opts);
    }
    case "br":
      return z.brotliDecompressSync(input, partial ? { ...limit, finishFlush: z.constants.BROTLI_OPERATION_FLUSH } : limit);
    case "zstd": {
      if (!partial && !zstdFramesComplete(input)) throw new Error("incomplete zstd frame");
      const zs = z as unknown as { zstdDecompressSync?: (b: Uint8Array, o?: object) => Uint8Array };
      if (typeof zs.zstdDecompressSync !== "function") throw new Error("zstd not supported by this runtime");
      return zs.zstdDecompressSync(input, limit);
    }
    default:
      throw new Error(`unsupported content-encoding ${coding}`);
  }
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** UTF-8 text, or null when not valid UTF-8. allowCutTail: ignore an incomplete sequence at the very end. */
function utf8OrNull(bytes: Uint8Array, allowCutTail: boolean): string | null {
  try {
    if (!allowCutTail) return strictUtf8.decode(bytes);
    const d = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
    return d.decode(bytes, { stream: true });
  } catch {
    return null;
  }
}

function toBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}

/** decodeBody's result before the base64 step: binary bodies stay bytes (the store keeps them as BLOBs). */
export type DecodedBodyBytes =
  // utf8: when set, the exact UTF-8 bytes of text (a body decoded whole), so that they need not be encoded again
  | { encoding: "utf8"; text: string; decodedFrom: string; utf8?: Uint8Array }
  | { encoding: "base64"; bytes: Uint8Array; decodedFrom: string };

/** Like decodeBody, but binary bodies are returned as bytes instead of a base64 string. Never throws. */
export function decodeBodyBytes(raw: Uint8Array | null, headers: HeaderList, truncated: boolean): DecodedBodyBytes {
  if (!raw || raw.length === 0) return { encoding: "utf8", text: "", decodedFrom: "" };
  let bytes = raw;
  let decodedFrom = "";

  const ce = headerValue(headers, "content-encoding");
  if (ce !== undefined) {
    const codings = ce
      .split(",")
      .map((c) => c.trim().toLowerCase())
      .filter((c) => c !== "" && c !== "identity");
    if (codings.length > 0) {
      try {
        let cur: Uint8Array = raw;
        // applied in the listed order, so undone in reverse
        for (let i = codings.length - 1; i >= 0; i--) {
          const out = undoOne(codings[i]!, cur, truncated);
          if (truncated && out.length === 0 && cur.length > 0) throw new Error("nothing decoded");
          cur = out;
        }
        bytes = cur;
        decodedFrom = codings.join(", ");
      } catch {
        bytes = raw;
        decodedFrom = "";
      }
    }
  }

  if (bytes.length === 0) return { encoding: "utf8", text: "", decodedFrom };
  const ct = headerValue(headers, "content-type");
  const textual = ct !== undefined && ct.trim() !== "" ? isTextualContentType(ct) : !bytes.includes(0);
  if (textual) {
    // a cut-off body may end inside a multi-byte sequence: that tail is dropped, the rest must be valid
    const text = utf8OrNull(bytes, truncated);
    // valid UTF-8 (the BOM kept: ignoreBOM) encodes back to the same bytes; a cut-off one may have lost its tail
    if (text !== null) return truncated ? { encoding: "utf8", text, decodedFrom } : { encoding: "utf8", text, decodedFrom, utf8: bytes };
  }
  return { encoding: "base64", bytes, decodedFrom };
}

/**
 * Decodes a captured body.
 * @param raw bytes as they crossed the wire (de-chunked), possibly cut at the capture limit
 * @param headers the message's headers (Content-Encoding and Content-Type are read from them)
 * @param truncated true when raw is a cut-off prefix of the body: decoding is best-effort and keeps what decoded
 */
export function decodeBody(raw: Uint8Array | null, headers: HeaderList, truncated: boolean): DecodedBody {
  const d = decodeBodyBytes(raw, headers, truncated);
  // not d itself: its utf8 bytes are the writer's, not for the API's JSON
  if (d.encoding === "utf8") return { text: d.text, encoding: "utf8", decodedFrom: d.decodedFrom };
  return { text: toBase64(d.bytes), encoding: "base64", decodedFrom: d.decodedFrom };
}
