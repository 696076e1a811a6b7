// Sans-io HTTP/1.x head parsing, request-target parsing and body framing (RFC 9110 / RFC 9112).
// Everything here is a pure function over bytes; nothing touches sockets.

import { isIPv6 } from "../ip.ts";
import { CR, FIELD, LF, METHOD, SP, TARGET, TOKEN, indexOfLF, latin1Decode } from "./chars.ts";
import { F_CONTENT_LENGTH, F_HOST_AGAIN, F_REPAIRED, F_TRANSFER_ENCODING, parseFieldLines } from "./fields.ts";
import {
  HttpParseError,
  type Framing,
  type HeaderList,
  type HttpVersion,
  type RawHead,
  type RequestHead,
  type ResponseHead,
} from "./types.ts";

export { ChunkedDecoder, LengthDecoder, type BodyChunk } from "./decoders.ts";

export const DEFAULT_MAX_HEAD = 65536;

const REQUEST_ERROR = 400;
const RESPONSE_ERROR = 502;

// ---------------------------------------------------------------------------------------------
// Head boundaries

/** Offset of the first byte after any leading empty lines (CRLF pairs), RFC 9112 section 2.2. */
function skipLeadingEmptyLines(buf: Uint8Array): number {
  let p = 0;
  while (p + 1 < buf.length && buf[p] === CR && buf[p + 1] === LF) p += 2;
  return p;
}

/**
 * Find the end of a head that starts at `start`: the offset just past the empty line, or -1 when
 * the head is not complete yet. Every LF must be preceded by CR (bare LF is rejected).
 */
function findHeadEnd(buf: Uint8Array, start: number, maxHead: number, errorStatus: number): number {
  let lineStart = start;
  for (;;) {
    const lf = indexOfLF(buf, lineStart);
    if (lf === -1) break;
    if (buf[lf - 1] !== CR) { // also catches an LF at lineStart (the byte before is LF or nothing)
      throw new HttpParseError("bare LF in message head", errorStatus);
    }
    if (lf >= maxHead) break; // the head cannot end within maxHead any more
    if (lf - 1 === lineStart) return lf + 1; // empty line: end of head
    lineStart = lf + 1;
  }
  if (buf.length >= maxHead) {
    throw new HttpParseError(`message head larger than ${maxHead} bytes`, 431);
  }
  return -1;
}

// ---------------------------------------------------------------------------------------------
// Version

/** 'HTTP/1.1' or 'HTTP/1.0' at buf[p..p+8), else null. */
function matchVersion(buf: Uint8Array, p: number): HttpVersion | null {
  if (
    buf[p] === 0x48 && // H
    buf[p + 1] === 0x54 && // T
    buf[p + 2] === 0x54 && // T
    buf[p + 3] === 0x50 && // P
    buf[p + 4] === 0x2f && // /
    buf[p + 5] === 0x31 && // 1
    buf[p + 6] === 0x2e // .
  ) {
    if (buf[p + 7] === 0x31) return "HTTP/1.1";
    if (buf[p + 7] === 0x30) return "HTTP/1.0";
  }
  return null;
}

/** Syntactically a version (HTTP/DIGIT.DIGIT) at buf[p..p+8)? */
function looksLikeVersion(buf: Uint8Array, p: number): boolean {
  const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
  return (
    buf[p] === 0x48 &&
    buf[p + 1] === 0x54 &&
    buf[p + 2] === 0x54 &&
    buf[p + 3] === 0x50 &&
    buf[p + 4] === 0x2f &&
    isDigit(buf[p + 5]) &&
    buf[p + 6] === 0x2e &&
    isDigit(buf[p + 7])
  );
}

// ---------------------------------------------------------------------------------------------
// Raw head

/** The head buf[start..end) as received, with a flat snapshot of the list parsed from its field lines. */
function rawHead(buf: Uint8Array, start: number, end: number, fieldsStart: number, headers: HeaderList): RawHead {
  const fields: string[] = new Array(headers.length * 2);
  for (let i = 0, k = 0; i < headers.length; i++, k += 2) {
    fields[k] = headers[i]![0];
    fields[k + 1] = headers[i]![1];
  }
  return { buf, start, fieldsAt: fieldsStart, end, fields };
}

// ---------------------------------------------------------------------------------------------
// Request head

/**
 * Parse a request head at the start of `buf`. Returns null while the head is incomplete, the head
 * and the offset just past its terminating empty line otherwise.
 * Throws HttpParseError: 431 (no end of head within maxHead bytes), 505 (HTTP version other than
 * 1.0/1.1), 400 (anything else malformed).
 */
export function parseRequestHead(
  buf: Uint8Array,
  maxHead = DEFAULT_MAX_HEAD,
): { head: RequestHead; end: number } | null {
  const start = skipLeadingEmptyLines(buf);
  const end = findHeadEnd(buf, start, maxHead, REQUEST_ERROR);
  if (end === -1) return null;

  const str = latin1Decode(buf, start, end);
  const lineEnd = indexOfLF(buf, start) - 1;

  // method SP
  let p = start;
  while (p < lineEnd && METHOD[buf[p]] === 1) p++;
  if (p === start || buf[p] !== SP) {
    throw new HttpParseError("invalid request method", REQUEST_ERROR);
  }
  const method = str.slice(0, p - start);

  // request-target SP
  const t = ++p;
  while (p < lineEnd && TARGET[buf[p]] === 1) p++;
  if (p === t) throw new HttpParseError("empty request target", REQUEST_ERROR);
  if (buf[p] !== SP) throw new HttpParseError("invalid character in request target", REQUEST_ERROR);
  const target = str.slice(t - start, p - start);

  // HTTP-version CRLF
  p++;
  const version = lineEnd - p === 8 ? matchVersion(buf, p) : null;
  if (version === null) {
    if (lineEnd - p === 8 && looksLikeVersion(buf, p)) {
      throw new HttpParseError("unsupported HTTP version", 505);
    }
    throw new HttpParseError("malformed request line", REQUEST_ERROR);
  }

  const headers: HeaderList = [];
  const seen = parseFieldLines(buf, str, start, lineEnd + 2, headers, false, REQUEST_ERROR);
  // RFC 9112 3.2: more than one Host field line MUST be rejected.
  if (seen & F_HOST_AGAIN) throw new HttpParseError("multiple Host headers", REQUEST_ERROR);
  const present = seen & ~F_HOST_AGAIN;
  const raw = rawHead(buf, start, end, lineEnd + 2, headers);

  return { head: { method, target, version, headers, raw, present }, end };
}

// ---------------------------------------------------------------------------------------------
// Response head

/**
 * Parse a response head (status line `HTTP/1.x SP 3DIGIT [SP reason]`) at the start of `buf`.
 * Same contract as parseRequestHead; malformed responses throw HttpParseError(502), an oversized
 * head throws 431. Responses are parsed leniently where RFC 9112 allows a proxy to repair them:
 * obs-fold is replaced by one SP and whitespace before the colon is removed. A missing SP/reason
 * after the status code is tolerated (reason "").
 */
export function parseResponseHead(
  buf: Uint8Array,
  maxHead = DEFAULT_MAX_HEAD,
): { head: ResponseHead; end: number } | null {
  const start = skipLeadingEmptyLines(buf);
  const end = findHeadEnd(buf, start, maxHead, RESPONSE_ERROR);
  if (end === -1) return null;

  const str = latin1Decode(buf, start, end);
  const lineEnd = indexOfLF(buf, start) - 1;

  let p = start;
  const version = matchVersion(buf, p);
  if (version === null || buf[p + 8] !== SP) {
    if (looksLikeVersion(buf, p)) throw new HttpParseError("unsupported HTTP version in response", RESPONSE_ERROR);
    throw new HttpParseError("malformed status line", RESPONSE_ERROR);
  }
  p += 9;
  let status = 0;
  for (let i = 0; i < 3; i++, p++) {
    const d = buf[p] - 0x30;
    if (p >= lineEnd || d < 0 || d > 9) throw new HttpParseError("malformed status code", RESPONSE_ERROR);
    status = status * 10 + d;
  }
  if (status < 100) throw new HttpParseError("malformed status code", RESPONSE_ERROR);
  let reason = "";
  if (p < lineEnd) {
    if (buf[p] !== SP) throw new HttpParseError("malformed status line", RESPONSE_ERROR);
    p++;
    for (let i = p; i < lineEnd; i++) {
      if (FIELD[buf[i]] !== 1) throw new HttpParseError("invalid character in reason phrase", RESPONSE_ERROR);
    }
    reason = str.slice(p - start, lineEnd - start);
  }

  const headers: HeaderList = [];
  const seen = parseFieldLines(buf, str, start, lineEnd + 2, headers, true, RESPONSE_ERROR);
  const raw = seen & F_REPAIRED ? null : rawHead(buf, start, end, lineEnd + 2, headers);
  return { head: { version, status, reason, headers, raw, present: seen & ~(F_REPAIRED | F_HOST_AGAIN) }, end };
}

// ---------------------------------------------------------------------------------------------
// Request target (RFC 9112 section 3.2)

export type TargetScheme = "http" | "https" | "ws" | "wss";

export interface ParsedTarget {
  form: "origin" | "absolute" | "authority" | "asterisk";
  scheme?: TargetScheme;
  /** Host name or address; IPv6 addresses without brackets. */
  host?: string;
  port?: number;
  /** Path and query ("/" if the absolute-form has none); "*" for asterisk-form, "" for authority-form. */
  path: string;
}

const DEFAULT_PORTS: Record<TargetScheme, number> = { http: 80, https: 443, ws: 80, wss: 443 };

// reg-name: unreserved / pct-encoded / sub-delims
const REG_NAME = /^[A-Za-z0-9\-._~%!$&'()*+,;=]+$/;

function targetError(msg: string): never {
  throw new HttpParseError(msg, REQUEST_ERROR);
}

function parsePort(s: string): number {
  if (s.length === 0 || s.length > 5) targetError("invalid port");
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const d = s.charCodeAt(i) - 0x30;
    if (d < 0 || d > 9) targetError("invalid port");
    n = n * 10 + d;
  }
  if (n < 1 || n > 65535) targetError("port out of range");
  return n;
}

/** Parse `host[:port]`; `defaultPort` null means the port is required. */
function parseAuthority(a: string, defaultPort: number | null): { host: string; port: number } {
  let host: string;
  let portStr: string | null;
  if (a.charCodeAt(0) === 0x5b /* [ */) {
    const close = a.indexOf("]");
    if (close === -1) targetError("unterminated IPv6 literal");
    host = a.slice(1, close);
    if (!isIPv6(host)) targetError("invalid IPv6 literal");
    const rest = a.slice(close + 1);
    if (rest === "") portStr = null;
    else if (rest.charCodeAt(0) === 0x3a) portStr = rest.slice(1);
    else targetError("invalid authority");
  } else {
    const colon = a.indexOf(":");
    host = colon === -1 ? a : a.slice(0, colon);
    portStr = colon === -1 ? null : a.slice(colon + 1);
    if (!REG_NAME.test(host)) targetError("invalid host");
  }
  let port: number;
  if (portStr === null || (portStr === "" && defaultPort !== null)) {
    if (defaultPort === null) targetError("port required");
    port = defaultPort;
  } else {
    port = parsePort(portStr);
  }
  return { host, port };
}

/** The `scheme://authority` of the last absolute-form target parsed, and what it gave. */
let lastAbsolute: { prefix: string; scheme: TargetScheme; host: string; port: number } = { prefix: "", scheme: "http", host: "", port: 0 };

/**
 * Classify and split a request target. CONNECT requires authority-form `host:port`; `*` is only
 * valid for OPTIONS; absolute-form accepts http, https, ws and wss (scheme returned lowercase).
 * Userinfo in the authority is rejected. Throws HttpParseError(400) on anything invalid.
 */
export function parseTarget(method: string, target: string): ParsedTarget {
  if (method === "CONNECT") {
    const { host, port } = parseAuthority(target, null);
    return { form: "authority", host, port, path: "" };
  }
  if (target.charCodeAt(0) === 0x2f /* / */) return { form: "origin", path: target };
  if (target === "*") {
    if (method !== "OPTIONS") targetError("asterisk-form is only allowed for OPTIONS");
    return { form: "asterisk", path: "*" };
  }
  const c = lastAbsolute;
  const n = c.prefix.length;
  if (n > 0 && target.length >= n && target.startsWith(c.prefix)) {
    // the same scheme://authority as the last absolute-form target (a client mostly talks to one host)
    const next = target.charCodeAt(n);
    if (target.length === n) return { form: "absolute", scheme: c.scheme, host: c.host, port: c.port, path: "/" };
    if (next === 0x2f) return { form: "absolute", scheme: c.scheme, host: c.host, port: c.port, path: target.slice(n) };
    if (next === 0x3f || next === 0x23) return { form: "absolute", scheme: c.scheme, host: c.host, port: c.port, path: "/" + target.slice(n) };
  }
  const sep = target.indexOf("://");
  if (sep <= 0) targetError("invalid request target");
  const scheme = target.slice(0, sep).toLowerCase();
  if (!(scheme in DEFAULT_PORTS)) targetError(`unsupported scheme in request target`);
  const s = scheme as TargetScheme;
  const aStart = sep + 3;
  let aEnd = aStart;
  while (aEnd < target.length) {
    const c = target.charCodeAt(aEnd);
    if (c === 0x2f || c === 0x3f || c === 0x23) break; // / ? #
    aEnd++;
  }
  const authority = target.slice(aStart, aEnd);
  if (authority.includes("@")) targetError("userinfo in request target");
  const { host, port } = parseAuthority(authority, DEFAULT_PORTS[s]);
  lastAbsolute = { prefix: target.slice(0, aEnd), scheme: s, host, port };
  let path = target.slice(aEnd);
  if (path === "") path = "/";
  else if (path.charCodeAt(0) !== 0x2f) path = "/" + path;
  return { form: "absolute", scheme: s, host, port, path };
}

// ---------------------------------------------------------------------------------------------
// Framing (RFC 9112 section 6.3)


function isName(n: string, lower: string): boolean {
  return n.length === lower.length && n.toLowerCase() === lower;
}

/** Transfer codings in order across all Transfer-Encoding lines (lowercased), or null if absent. */
function transferCodings(headers: HeaderList, errorStatus: number): string[] | null {
  let codings: string[] | null = null;
  for (let i = 0; i < headers.length; i++) {
    if (!isName(headers[i][0], "transfer-encoding")) continue;
    codings ??= [];
    for (const part of headers[i][1].split(",")) {
      const c = part.trim().toLowerCase();
      if (c === "") continue; // empty list elements are allowed (RFC 9110 5.6.1)
      for (let j = 0; j < c.length; j++) {
        const ch = c.charCodeAt(j);
        if (ch > 0xff || TOKEN[ch] !== 1) throw new HttpParseError("invalid transfer coding", errorStatus);
      }
      codings.push(c);
    }
  }
  return codings;
}

/** The Content-Length value, undefined if absent; throws on invalid or conflicting values. */
function contentLength(headers: HeaderList, errorStatus: number): number | undefined {
  let length: number | undefined;
  for (let i = 0; i < headers.length; i++) {
    if (!isName(headers[i][0], "content-length")) continue;
    const value = headers[i][1];
    if (length === undefined && value.length > 0 && value.length <= 15) {
      // the common case, one plain value: no list to split
      let n = 0;
      let j = 0;
      for (; j < value.length; j++) {
        const d = value.charCodeAt(j) - 0x30;
        if (d < 0 || d > 9) break;
        n = n * 10 + d;
      }
      if (j === value.length) {
        length = n;
        continue;
      }
    }
    for (const raw of value.split(",")) {
      const part = raw.trim();
      if (part.length === 0) throw new HttpParseError("empty Content-Length", errorStatus);
      for (let j = 0; j < part.length; j++) {
        const d = part.charCodeAt(j);
        if (d < 0x30 || d > 0x39) throw new HttpParseError("invalid Content-Length", errorStatus);
      }
      const n = Number(part);
      if (n > Number.MAX_SAFE_INTEGER) throw new HttpParseError("Content-Length too large", errorStatus);
      if (length !== undefined && length !== n) {
        throw new HttpParseError("conflicting Content-Length values", errorStatus);
      }
      length = n;
    }
  }
  return length;
}

/**
 * Body framing of a request (RFC 9112 6.3) with request-smuggling defences. Throws
 * HttpParseError(400) for Transfer-Encoding with Content-Length, Transfer-Encoding in HTTP/1.0, a
 * final coding other than chunked, chunked applied twice, or an invalid/conflicting Content-Length;
 * HttpParseError(501) for any transfer coding other than a single chunked.
 */
export function requestFraming(head: RequestHead): Framing {
  const present = head.present;
  if (present !== undefined && (present & (F_CONTENT_LENGTH | F_TRANSFER_ENCODING)) === 0) return { kind: "none" };
  const codings = present !== undefined && (present & F_TRANSFER_ENCODING) === 0 ? null : transferCodings(head.headers, REQUEST_ERROR);
  if (codings !== null) {
    if (head.version === "HTTP/1.0") throw new HttpParseError("Transfer-Encoding in HTTP/1.0 request", REQUEST_ERROR);
    for (let i = 0; i < head.headers.length; i++) {
      if (isName(head.headers[i][0], "content-length")) {
        throw new HttpParseError("both Transfer-Encoding and Content-Length", REQUEST_ERROR);
      }
    }
    const last = codings.length - 1;
    if (last < 0 || codings[last] !== "chunked") {
      throw new HttpParseError("final transfer coding is not chunked", REQUEST_ERROR);
    }
    for (let i = 0; i < last; i++) {
      if (codings[i] === "chunked") throw new HttpParseError("chunked applied more than once", REQUEST_ERROR);
      // A proxy that de-chunks and re-chunks cannot carry another transfer coding faithfully: refuse it.
      throw new HttpParseError(`transfer coding ${codings[i]} is not supported in requests`, 501);
    }
    return { kind: "chunked" };
  }
  const length = contentLength(head.headers, REQUEST_ERROR);
  if (length !== undefined) return { kind: "length", length };
  return { kind: "none" };
}

/**
 * Body framing of a response to a request with `requestMethod` (RFC 9112 6.3). Responses to HEAD,
 * 1xx, 204, 304 and 2xx to CONNECT have no body. Transfer-Encoding (which overrides
 * Content-Length) gives chunked if chunked is the final coding (applied once), else close; a
 * Transfer-Encoding in an HTTP/1.0 response means faulty framing, read until close. Invalid or
 * conflicting Content-Length throws HttpParseError(502).
 */
export function responseFraming(requestMethod: string, head: ResponseHead): Framing {
  const status = head.status;
  if (requestMethod === "HEAD" || status < 200 || status === 204 || status === 304) return { kind: "none" };
  if (requestMethod === "CONNECT" && status < 300) return { kind: "none" };
  const present = head.present;
  let codings: string[] | null = null;
  try {
    if (present === undefined || (present & F_TRANSFER_ENCODING) !== 0) codings = transferCodings(head.headers, RESPONSE_ERROR);
  } catch {
    return { kind: "close" }; // garbage coding: cannot be chunked, read until close
  }
  if (codings !== null) {
    if (head.version === "HTTP/1.0") return { kind: "close" };
    const last = codings.length - 1;
    if (last >= 0 && codings[last] === "chunked" && codings.indexOf("chunked") === last) return { kind: "chunked" };
    return { kind: "close" };
  }
  if (present !== undefined && (present & F_CONTENT_LENGTH) === 0) return { kind: "close" };
  const length = contentLength(head.headers, RESPONSE_ERROR);
  if (length !== undefined) return { kind: "length", length };
  return { kind: "close" };
}
