/**
 * gRPC message framing (sans-io): a gRPC body is a sequence of length-prefixed messages, each a 1-byte flag
 * (bit 0: compressed with the stream's `grpc-encoding`), a 4-byte big-endian length and the message. gRPC-Web
 * adds one frame with flag bit 7 set at the end of a response: the trailers, as an HTTP/1-style header block.
 * `application/grpc-web-text` is the same stream in base64 (possibly several padded base64 chunks one after
 * another, as servers flush them).
 */
import { zlib } from "../zlib.ts";

export type GrpcProtocol = "grpc" | "grpc-web" | "grpc-web-text";

export interface GrpcFrame {
  /** Position of the frame in the body (its flag byte). */
  offset: number;
  compressed: boolean;
  /** The message as sent (still compressed when `compressed`). */
  data: Uint8Array;
}

export interface SplitResult {
  messages: GrpcFrame[];
  /** gRPC-Web only: the trailers frame, parsed. */
  trailers: [string, string][] | null;
  /** The body ended inside a frame (a truncated capture, or a broken peer): what the frame said and what there was. */
  incomplete: { offset: number; declared: number | null; available: number } | null;
}

/** The protocol of a Content-Type (`application/grpc`, `application/grpc+proto`, `application/grpc-web+json`...), or null. */
export function grpcProtocol(contentType: string | null | undefined): GrpcProtocol | null {
  if (!contentType) return null;
  const ct = contentType.split(";")[0]!.trim().toLowerCase();
  if (ct === "application/grpc" || ct.startsWith("application/grpc+")) return "grpc";
  if (ct === "application/grpc-web-text" || ct.startsWith("application/grpc-web-text+")) return "grpc-web-text";
  if (ct === "application/grpc-web" || ct.startsWith("application/grpc-web+")) return "grpc-web";
  return null;
}

/** Decodes grpc-web-text: base64, possibly several padded chunks concatenated (each decoded on its own). */
export function decodeGrpcWebText(text: string | Uint8Array): Uint8Array {
  const s = (typeof text === "string" ? text : new TextDecoder().decode(text)).replace(/\s+/g, "");
  const parts: Buffer[] = [];
  for (const chunk of s.match(/[^=]+=*/g) ?? []) parts.push(Buffer.from(chunk, "base64"));
  return new Uint8Array(Buffer.concat(parts));
}

/** Splits a body into its frames. With `web`, a frame with flag bit 7 is the trailers frame. */
export function splitFrames(body: Uint8Array, web: boolean): SplitResult {
  const messages: GrpcFrame[] = [];
  let trailers: [string, string][] | null = null;
  let pos = 0;
  while (pos < body.length) {
    if (body.length - pos < 5) return { messages, trailers, incomplete: { offset: pos, declared: null, available: body.length - pos } };
    const flags = body[pos]!;
    const len = ((body[pos + 1]! << 24) >>> 0) + (body[pos + 2]! << 16) + (body[pos + 3]! << 8) + body[pos + 4]!;
    const start = pos + 5;
    if (len > body.length - start) return { messages, trailers, incomplete: { offset: pos, declared: len, available: body.length - start } };
    const data = body.subarray(start, start + len);
    if (web && flags & 0x80) trailers = parseTrailerBlock(data);
    else messages.push({ offset: pos, compressed: (flags & 1) === 1, data });
    pos = start + len;
  }
  return { messages, trailers, incomplete: null };
}

/** A gRPC-Web trailers frame: `name: value` lines separated by CRLF (names lower-cased). */
export function parseTrailerBlock(data: Uint8Array): [string, string][] {
  const out: [string, string][] = [];
  for (const line of new TextDecoder().decode(data).split(/\r?\n/)) {
    const i = line.indexOf(":");
    if (i <= 0) continue;
    out.push([line.slice(0, i).trim().toLowerCase(), line.slice(i + 1).trim()]);
  }
  return out;
}

/** A compressed message is inflated to at most this many bytes (a bomb stops there with an error). */
export const MAX_INFLATED_MESSAGE = 16 * 1024 * 1024;

/**
 * Decompresses a message marked compressed, with the stream's grpc-encoding (gzip, deflate; identity means the
 * flag lies). Throws with a readable reason for an unknown encoding, a broken stream or one over the cap.
 */
export function decompressMessage(data: Uint8Array, encoding: string | null): Uint8Array {
  const enc = (encoding ?? "identity").trim().toLowerCase();
  const opts = { maxOutputLength: MAX_INFLATED_MESSAGE };
  try {
    if (enc === "gzip") return new Uint8Array(zlib().gunzipSync(data, opts));
    if (enc === "deflate") return new Uint8Array(zlib().inflateSync(data, opts));
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === "ERR_BUFFER_TOO_LARGE") throw new Error(`the message inflates to more than ${MAX_INFLATED_MESSAGE} bytes`);
    throw new Error(`the message does not decompress as ${enc}: ${(e as Error).message}`);
  }
  if (enc === "identity") throw new Error("the message is flagged compressed but grpc-encoding is identity (or absent)");
  throw new Error(`unsupported grpc-encoding '${enc}' (gzip and deflate are decoded)`);
}

/** Encodes messages as a gRPC body (for tests and for replays): flag 0 unless compressed is given. */
export function encodeFrames(messages: Uint8Array[], opts: { compressed?: boolean; trailers?: [string, string][] } = {}): Uint8Array {
  const parts: Uint8Array[] = [];
  const frame = (flag: number, data: Uint8Array) => {
    const head = new Uint8Array(5);
    head[0] = flag;
    new DataView(head.buffer).setUint32(1, data.length);
    parts.push(head, data);
  };
  for (const m of messages) frame(opts.compressed ? 1 : 0, m);
  if (opts.trailers) frame(0x80, new TextEncoder().encode(opts.trailers.map(([k, v]) => `${k}:${v}\r\n`).join("")));
  return new Uint8Array(Buffer.concat(parts));
}
