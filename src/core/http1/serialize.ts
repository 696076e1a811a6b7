// HTTP/1.x head serialisation and chunked encoding.

import { METHOD, TOKEN, copyBytes, latin1Encode } from "./chars.ts";
import type { RawHead, RequestHead, ResponseHead } from "./types.ts";

const utf8 = new TextEncoder();

/**
 * Validate a field value / reason phrase: no control characters other than HTAB, no DEL (CR, LF
 * and NUL included, which would allow header injection). Returns true when it has characters above
 * U+00FF, which are then sent UTF-8 encoded (everything else goes out byte-for-byte as latin1).
 */
function checkText(s: string, what: string): boolean {
  let wide = false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09) || c === 0x7f) {
      throw new Error(`invalid character 0x${c.toString(16)} in ${what}`);
    }
    if (c > 0xff) wide = true;
  }
  return wide;
}

function checkToken(s: string, table: Uint8Array, what: string): void {
  if (s.length === 0) throw new Error(`empty ${what}`);
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c > 0xff || table[c] !== 1) throw new Error(`invalid character in ${what}: ${JSON.stringify(s)}`);
  }
}

function checkTarget(s: string): boolean {
  if (s.length === 0) throw new Error("empty request target");
  let wide = false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c <= 0x20 || c === 0x7f) throw new Error(`invalid character 0x${c.toString(16)} in request target`);
    if (c > 0xff) wide = true;
  }
  return wide;
}

function checkVersion(v: string): void {
  if (v !== "HTTP/1.1" && v !== "HTTP/1.0") throw new Error(`invalid HTTP version ${JSON.stringify(v)}`);
}

/** Encode a head made of `parts`; parts with chars above U+00FF are UTF-8 encoded, others latin1. */
function encodeParts(parts: string[]): Uint8Array {
  const encoded = parts.map((p) => (/[^\u0000-\u00ff]/.test(p) ? utf8.encode(p) : latin1Encode(p)));
  let total = 0;
  for (const e of encoded) total += e.length;
  const out = new Uint8Array(total);
  let o = 0;
  for (const e of encoded) {
    out.set(e, o);
    o += e.length;
  }
  return out;
}

/**
 * The common case in one pass: every character of the head is latin1 and valid, written straight into the output
 * (no joined string, no encoder call). Returns null on anything else (an invalid or wide character, an empty
 * name): the checking path below then throws the precise error or UTF-8 encodes.
 */
function fieldsLatin1(first: string[], headers: [string, string][]): Uint8Array | null {
  let len = 2;
  for (let i = 0; i < first.length; i++) len += first[i]!.length;
  for (let i = 0; i < headers.length; i++) len += headers[i]![0].length + headers[i]![1].length + 4;
  const out = Buffer.allocUnsafe(len);
  let o = 0;
  for (let k = 0; k < first.length; k++) {
    const f = first[k]!;
    for (let i = 0; i < f.length; i++) out[o++] = f.charCodeAt(i);
  }
  for (let k = 0; k < headers.length; k++) {
    const name = headers[k]![0];
    const value = headers[k]![1];
    if (name.length === 0) return null;
    for (let i = 0; i < name.length; i++) {
      const c = name.charCodeAt(i);
      if (c > 0xff || TOKEN[c] !== 1) return null;
      out[o++] = c;
    }
    out[o++] = 0x3a;
    out[o++] = 0x20;
    for (let i = 0; i < value.length; i++) {
      const c = value.charCodeAt(i);
      if ((c < 0x20 && c !== 0x09) || c === 0x7f || c > 0xff) return null;
      out[o++] = c;
    }
    out[o++] = 0x0d;
    out[o++] = 0x0a;
  }
  out[o++] = 0x0d;
  out[o++] = 0x0a;
  return out;
}

function serializeFields(first: string[], headers: [string, string][], wide: boolean): Uint8Array {
  if (!wide) {
    const fast = fieldsLatin1(first, headers);
    if (fast !== null) return fast;
  }
  // the fast path refused the head: a check below throws, or some value is wider than latin1 (UTF-8 encoded)
  for (let i = 0; i < headers.length; i++) {
    const [name, value] = headers[i];
    checkToken(name, TOKEN, "header name");
    checkText(value, `value of header ${name}`);
  }
  const parts = first.slice();
  for (const [name, value] of headers) parts.push(name + ": ", value, "\r\n");
  parts.push("\r\n");
  return encodeParts(parts);
}

/**
 * Serialise a request head. Throws an Error if the method is not an (uppercase) token, the target
 * is empty or contains SP/controls, a header name is not a token, or a value contains a control
 * character (CR, LF, NUL...).
 */
export function serializeRequestHead(head: RequestHead): Uint8Array {
  checkToken(head.method, METHOD, "method");
  const wide = checkTarget(head.target);
  checkVersion(head.version);
  return serializeFields([head.method + " ", head.target, " " + head.version + "\r\n"], head.headers, wide);
}

const HTTP11_EOL = latin1Encode(" HTTP/1.1\r\n");

/**
 * A request head made of a new request line and the field lines of `raw` as received (CRLF throughout, already
 * validated by the parser), for a request whose fields nobody changed. Returns null when the method or target
 * holds anything but plain latin1 token / target characters: serializeRequestHead then gives the precise error
 * or the UTF-8 encoding.
 */
export function requestHeadWithFields(method: string, target: string, raw: RawHead): Uint8Array | null {
  if (method.length === 0 || target.length === 0) return null;
  const out = Buffer.allocUnsafe(method.length + 1 + target.length + HTTP11_EOL.length + raw.end - raw.fieldsAt);
  let o = 0;
  for (let i = 0; i < method.length; i++) {
    const c = method.charCodeAt(i);
    if (c > 0xff || METHOD[c] !== 1) return null;
    out[o++] = c;
  }
  out[o++] = 0x20;
  for (let i = 0; i < target.length; i++) {
    const c = target.charCodeAt(i);
    if (c <= 0x20 || c === 0x7f || c > 0xff) return null;
    out[o++] = c;
  }
  for (let i = 0; i < HTTP11_EOL.length; i++) out[o++] = HTTP11_EOL[i]!;
  copyBytes(raw.buf, raw.fieldsAt, raw.end, out, o);
  return out;
}

/**
 * Serialise a response head. The reason phrase is sent exactly as given; an empty reason gives
 * `HTTP/1.1 200 ` (the SP before the reason is mandatory in RFC 9112 4).
 */
export function serializeResponseHead(head: ResponseHead): Uint8Array {
  checkVersion(head.version);
  if (!Number.isInteger(head.status) || head.status < 100 || head.status > 999) {
    throw new Error(`invalid status code ${head.status}`);
  }
  const wide = checkText(head.reason, "reason phrase");
  return serializeFields([head.version + " " + head.status + " ", head.reason, "\r\n"], head.headers, wide);
}

/** The final chunk plus the empty trailer section. */
export const LAST_CHUNK: Uint8Array = new Uint8Array([0x30, 0x0d, 0x0a, 0x0d, 0x0a]);

export const CRLF: Uint8Array = new Uint8Array([0x0d, 0x0a]);

/** `<hex size>\r\n` for a chunk of `size` bytes (to write header, data and CRLF without copying). */
export function chunkHeader(size: number): Uint8Array {
  return latin1Encode(size.toString(16) + "\r\n");
}

/**
 * One chunk: hex size CRLF data CRLF. An empty input gives an empty output (a zero-size chunk would
 * end the body; use LAST_CHUNK for that).
 */
export function encodeChunk(data: Uint8Array): Uint8Array {
  const n = data.length;
  if (n === 0) return new Uint8Array(0);
  const h = n.toString(16);
  const out = new Uint8Array(h.length + n + 4);
  for (let i = 0; i < h.length; i++) out[i] = h.charCodeAt(i);
  let o = h.length;
  out[o++] = 0x0d;
  out[o++] = 0x0a;
  out.set(data, o);
  o += n;
  out[o++] = 0x0d;
  out[o] = 0x0a;
  return out;
}

/** Serialise trailer fields followed by the final empty line (for ending a chunked body with trailers). */
export function serializeTrailers(trailers: [string, string][]): Uint8Array {
  return serializeFields(["0\r\n"], trailers, false);
}

const REASONS: Record<number, string> = {
  100: "Continue",
  101: "Switching Protocols",
  102: "Processing",
  103: "Early Hints",
  200: "OK",
  201: "Created",
  202: "Accepted",
  203: "Non-Authoritative Information",
  204: "No Content",
  205: "Reset Content",
  206: "Partial Content",
  207: "Multi-Status",
  208: "Already Reported",
  226: "IM Used",
  300: "Multiple Choices",
  301: "Moved Permanently",
  302: "Found",
  303: "See Other",
  304: "Not Modified",
  305: "Use Proxy",
  307: "Temporary Redirect",
  308: "Permanent Redirect",
  400: "Bad Request",
  401: "Unauthorized",
  402: "Payment Required",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  406: "Not Acceptable",
  407: "Proxy Authentication Required",
  408: "Request Timeout",
  409: "Conflict",
  410: "Gone",
  411: "Length Required",
  412: "Precondition Failed",
  413: "Content Too Large",
  414: "URI Too Long",
  415: "Unsupported Media Type",
  416: "Range Not Satisfiable",
  417: "Expectation Failed",
  418: "I'm a teapot",
  421: "Misdirected Request",
  422: "Unprocessable Content",
  423: "Locked",
  424: "Failed Dependency",
  425: "Too Early",
  426: "Upgrade Required",
  428: "Precondition Required",
  429: "Too Many Requests",
  431: "Request Header Fields Too Large",
  451: "Unavailable For Legal Reasons",
  500: "Internal Server Error",
  501: "Not Implemented",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout",
  505: "HTTP Version Not Supported",
  506: "Variant Also Negotiates",
  507: "Insufficient Storage",
  508: "Loop Detected",
  510: "Not Extended",
  511: "Network Authentication Required",
};

/** Standard reason phrase for a status code (RFC 9110 and the IANA registry), "" if unknown. */
export function statusReason(code: number): string {
  return REASONS[code] ?? "";
}
