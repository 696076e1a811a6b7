/**
 * Export a captured exchange as HTTP/1.1 text (request, blank line, response): a transcript of what crossed the
 * client's hop and the upstream's, hop-by-hop fields included (they explain the capture), except the client's
 * proxy credential. Layout documented in docs/diff.md ("Export: raw").
 */
import { statusReason } from "../../core/http1/serialize.ts";
import type { EntryDetail, HeaderList } from "../../store/types.ts";

const CRLF = "\r\n";


/** Width of base64 lines for binary bodies. */
const BASE64_LINE = 76;

/** Request target in origin-form (authority-form for CONNECT). */
export function requestTarget(method: string, rawUrl: string): string {
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    return rawUrl;
  }
  if (method.toUpperCase() === "CONNECT") {
    if (!url.hostname) return rawUrl;
    return `${url.hostname}:${url.port || (url.protocol === "http:" || url.protocol === "ws:" ? "80" : "443")}`;
  }
  // Take path and query from the URL text itself so the captured spelling is kept.
  const m = /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\/[^/?#]*([^#]*)/.exec(rawUrl);
  let target = m ? m[1] : url.pathname + url.search;
  if (target === "" || target.startsWith("?")) target = "/" + target;
  return target;
}

function storedReason(e: EntryDetail): string | null {
  for (const k of ["status_text", "reason", "status_message", "reason_phrase"]) {
    const v = e[k];
    if (typeof v === "string" && v !== "") return v;
  }
  return null;
}

/** What stands in an export for the value of a Proxy-Authorization field. */
export const REDACTED = "(redacted: a credential for the proxy)";

/**
 * Header lines as captured. The request's Proxy-Authorization value is the client's credential for the proxy (it
 * never reaches the upstream) and is never exported: its line stays, with REDACTED as the value.
 */
function headerBlock(headers: HeaderList, request: boolean): string {
  return headers.map(([n, v]) => `${n}: ${request && n.toLowerCase() === "proxy-authorization" ? REDACTED : v}${CRLF}`).join("");
}

function byteLength(body: string, encoding: string): number {
  return encoding === "base64" ? Buffer.from(body, "base64").length : Buffer.byteLength(body, "utf8");
}

/**
 * Note lines (each `(...)`) then the body: utf8 text verbatim, base64 bodies as base64 in 76-column lines.
 * Returns "" for an empty body with nothing to note.
 */
function bodySection(
  body: string,
  encoding: string,
  decodedFrom: string,
  truncated: boolean,
  wireSize: number,
): string {
  const notes: string[] = [];
  const size = byteLength(body, encoding);
  if (decodedFrom) notes.push(`(body decoded from ${decodedFrom}; shown decoded)`);
  if (truncated) notes.push(`(body truncated: ${size} of ${wireSize} bytes captured)`);
  let text = body;
  if (encoding === "base64" && size > 0) {
    notes.push(`(binary body: ${size} bytes, shown as base64)`);
    const clean = Buffer.from(body, "base64").toString("base64");
    const lines: string[] = [];
    for (let i = 0; i < clean.length; i += BASE64_LINE) lines.push(clean.slice(i, i + BASE64_LINE));
    text = lines.join(CRLF);
  }
  return notes.map((n) => n + CRLF).join("") + text;
}

/** Ends `s` with a line break unless it is empty or already ends with one. */
function endLine(s: string): string {
  return s === "" || s.endsWith("\n") ? s : s + CRLF;
}

/** The exchange as HTTP/1.1 text. */
export function toRaw(e: EntryDetail): string {
  const method = e.method || "GET";
  let out = `${method} ${requestTarget(method, e.url)} HTTP/1.1${CRLF}`;
  out += headerBlock(e.req_headers ?? [], true);
  out += CRLF;
  const reqBody = bodySection(
    e.req_body ?? "",
    e.req_body_encoding,
    e.req_body_decoded_from ?? "",
    !!e.req_body_truncated,
    e.req_body_size ?? 0,
  );
  if (reqBody !== "") out += endLine(reqBody) + CRLF;

  if (!e.has_response) {
    const err = typeof e.error === "string" ? e.error.replace(/[\r\n]+/g, " ").trim() : "";
    out += err ? `(no response: ${err})${CRLF}` : `(no response)${CRLF}`;
    return out;
  }
  const code = e.status_code;
  const reason = storedReason(e) ?? statusReason(code);
  out += `HTTP/1.1 ${code} ${reason}${CRLF}`;
  out += headerBlock(e.res_headers ?? [], false);
  out += CRLF;
  out += bodySection(
    e.res_body ?? "",
    e.res_body_encoding,
    e.res_body_decoded_from ?? "",
    !!e.res_body_truncated,
    e.res_body_size ?? 0,
  );
  return out;
}
