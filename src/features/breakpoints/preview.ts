import { decodeBodyBytes, headerValue } from "../../store/body-decode.ts";
import type { HeaderList } from "../../core/http1/types.ts";

/** Bytes of a held body shown in GET /intercepts. */
export const PREVIEW_LIMIT = 64 * 1024;

export interface BodyPreview {
  body: string;
  body_encoding: "utf8" | "base64";
  body_size: number;
  body_truncated: boolean;
}

/**
 * A capped view of a held body, exactly as it will be sent (Content-Encoding is NOT undone, so a preview can be
 * edited and sent back as the rewrite): UTF-8 for text (textual Content-Type, or none and no NUL byte), else base64.
 */
export function previewBody(body: Uint8Array | null, headers: HeaderList): BodyPreview {
  const size = body?.length ?? 0;
  if (!body || size === 0) return { body: "", body_encoding: "utf8", body_size: 0, body_truncated: false };
  const truncated = size > PREVIEW_LIMIT;
  const head = truncated ? body.subarray(0, PREVIEW_LIMIT) : body;
  const ct = headerValue(headers, "content-type");
  // only the type is passed on: the body is shown as it is on the wire, not decompressed
  const d = decodeBodyBytes(head, ct === undefined ? [] : [["Content-Type", ct]], truncated);
  if (d.encoding === "utf8") return { body: d.text, body_encoding: "utf8", body_size: size, body_truncated: truncated };
  return { body: Buffer.from(head.buffer, head.byteOffset, head.byteLength).toString("base64"), body_encoding: "base64", body_size: size, body_truncated: truncated };
}
