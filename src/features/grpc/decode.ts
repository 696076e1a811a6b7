/**
 * The gRPC view of a captured entry (GET /traffic/{id}/grpc): its messages split and decoded — with field names
 * when --proto declared the method, else raw (protoc --decode_raw style) — and its status from the trailers.
 */
import { decodeGrpcWebText, decompressMessage, type GrpcProtocol, grpcProtocol, splitFrames } from "../../core/grpc/framing.ts";
import { formatRaw, type RawField, tryDecodeRaw } from "../../core/grpc/protobuf-raw.ts";
import type { EntryDetail, HeaderList } from "../../store/types.ts";
import { decodeTyped, type ProtoRegistry } from "./protos.ts";

export const GRPC_STATUS_NAMES = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
] as const;

export interface GrpcMessageView {
  index: number;
  /** offset of the frame in the captured body */
  offset: number;
  /** bytes of the message as sent (compressed size when compressed) */
  size: number;
  compressed: boolean;
  /** the message type, when --proto declared the method */
  type?: string;
  /** decoded with the type (field names), or parsed JSON for +json content types */
  json?: unknown;
  /** decoded without a schema */
  fields?: RawField[];
  /** the schema-less decoding as protoc --decode_raw prints it */
  text?: string;
  /** why the message could not be decoded (bytes then in `base64`) */
  error?: string;
  base64?: string;
}

export interface GrpcSideView {
  /** grpc-encoding of this side ("identity" when absent) */
  encoding: string;
  /** the captured copy was capped: later messages are missing */
  truncated: boolean;
  /** the body ended inside a frame */
  incomplete: { offset: number; declared: number | null; available: number } | null;
  messages: GrpcMessageView[];
}

export interface GrpcView {
  id: number;
  protocol: GrpcProtocol;
  /** the content subtype: "proto" (default) or "json" ... */
  subtype: string;
  path: string;
  service: string | null;
  method: string | null;
  /** whether --proto declared this method (messages have field names) */
  schema: boolean;
  request: GrpcSideView;
  response: GrpcSideView | null;
  status: { code: number; name: string; message: string | null; source: "trailers" | "headers" } | null;
  trailers: HeaderList;
}

const header = (h: HeaderList, name: string): string | null => {
  for (const [k, v] of h) if (k.toLowerCase() === name) return v;
  return null;
};

function bodyBytes(body: string, encoding: string): Uint8Array {
  return encoding === "base64" ? new Uint8Array(Buffer.from(body, "base64")) : new TextEncoder().encode(body);
}

function percentDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** The gRPC view of an entry, or null when its request is not gRPC (by Content-Type). */
export function grpcView(entry: EntryDetail, protos: ProtoRegistry): GrpcView | null {
  const reqCt = header(entry.req_headers, "content-type");
  const protocol = grpcProtocol(reqCt) ?? grpcProtocol(header(entry.res_headers, "content-type"));
  if (!protocol) return null;
  const subtype = /^application\/grpc(?:-web(?:-text)?)?\+([a-z0-9._-]+)/i.exec((reqCt ?? "").split(";")[0]!.trim())?.[1]?.toLowerCase() ?? "proto";
  let path = entry.url;
  try {
    path = new URL(entry.url).pathname;
  } catch {
    // keep the URL as is
  }
  const parts = /^\/([^/]+)\/([^/]+)$/.exec(path);
  const method = protos.method(path);
  const web = protocol !== "grpc";

  const side = (body: string, encoding: string, truncated: boolean, headers: HeaderList, which: "request" | "response") => {
    let bytes = bodyBytes(body, encoding);
    if (protocol === "grpc-web-text") bytes = decodeGrpcWebText(bytes);
    const split = splitFrames(bytes, web);
    const grpcEncoding = header(headers, "grpc-encoding") ?? "identity";
    const type = method ? (which === "request" ? method.requestType : method.responseType) : null;
    const messages = split.messages.map((f, index): GrpcMessageView => {
      const m: GrpcMessageView = { index, offset: f.offset, size: f.data.length, compressed: f.compressed };
      let data = f.data;
      try {
        if (f.compressed) data = decompressMessage(data, grpcEncoding);
        if (subtype === "json") m.json = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(data));
        else if (type) {
          m.type = type.fullName.replace(/^\./, "");
          m.json = decodeTyped(type, data);
        } else {
          const fields = tryDecodeRaw(data);
          if (!fields) throw new Error("not a protobuf message");
          m.fields = fields;
          m.text = formatRaw(fields);
        }
      } catch (e) {
        m.error = (e as Error).message;
        m.base64 = Buffer.from(data).toString("base64");
      }
      return m;
    });
    return { view: { encoding: grpcEncoding, truncated, incomplete: split.incomplete, messages } satisfies GrpcSideView, trailers: split.trailers };
  };

  const req = side(entry.req_body, entry.req_body_encoding, entry.req_body_truncated, entry.req_headers, "request");
  const hasResponse = entry.has_response;
  const res = hasResponse ? side(entry.res_body, entry.res_body_encoding, entry.res_body_truncated, entry.res_headers, "response") : null;

  // trailers: gRPC-Web's trailers frame; HTTP trailers captured with the entry (res_trailers); a trailers-only
  // response carries grpc-status in its headers
  const captured = Array.isArray(entry.res_trailers) ? (entry.res_trailers as HeaderList) : [];
  const trailers: HeaderList = res?.trailers ?? captured;
  let status: GrpcView["status"] = null;
  const fromTrailers = header(trailers, "grpc-status");
  const fromHeaders = header(entry.res_headers, "grpc-status");
  const raw = fromTrailers ?? fromHeaders;
  if (raw !== null && /^\d+$/.test(raw.trim())) {
    const code = Number(raw.trim());
    const msg = fromTrailers !== null ? header(trailers, "grpc-message") : header(entry.res_headers, "grpc-message");
    status = { code, name: GRPC_STATUS_NAMES[code] ?? `CODE_${code}`, message: msg === null ? null : percentDecode(msg), source: fromTrailers !== null ? "trailers" : "headers" };
  }
  return {
    id: entry.id,
    protocol,
    subtype,
    path,
    service: method?.service ?? parts?.[1] ?? null,
    method: method?.method ?? parts?.[2] ?? null,
    schema: method !== null,
    request: req.view,
    response: res?.view ?? null,
    status,
    trailers,
  };
}
