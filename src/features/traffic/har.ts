/**
 * HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/) from captured entries: `buildHar(entries, options)`
 * turns traffic entry details (GET /api/v1/traffic/{id}) into a HAR log object, ready for JSON.stringify.
 *
 * What goes where:
 * - `startedDateTime` is the entry's `timestamp` (the moment the request head arrived), `time` its `duration_ms`;
 *   tapwire does not split the time into phases, so `timings` holds it all under `wait` (send/receive 0, the
 *   optional phases -1).
 * - Headers in wire order with their original casing; `httpVersion` is HTTP/1.1 (what the proxy speaks).
 * - Bodies as captured: decoded from their Content-Encoding (then `content.compression` says how many bytes that
 *   saved), text as text, anything else base64 (`content.encoding: "base64"`; a binary request body carries
 *   the extension `_encoding: "base64"`, as HAR has no such field for postData). A body cut at the capture limit
 *   carries a `comment`.
 * - A flow that failed keeps its status (502 when the proxy answered for a failed upstream, 0 when nothing was
 *   answered) and gets `_error`. Every entry has `_tapwireId` and `_clientAddr`; other tapwire-specific fields
 *   (map_local_rule, original_url, ...) are not carried over.
 */
import type { EntryDetail, HeaderList } from "../../store/types.ts";

export interface HarNameValue {
  name: string;
  value: string;
  comment?: string;
}

export interface HarCookie {
  name: string;
  value: string;
  path?: string;
  domain?: string;
  expires?: string;
  httpOnly?: boolean;
  secure?: boolean;
  sameSite?: string;
}

export interface HarPostData {
  mimeType: string;
  text: string;
  params?: HarNameValue[];
  comment?: string;
  _encoding?: "base64";
}

export interface HarRequest {
  method: string;
  url: string;
  httpVersion: string;
  cookies: HarCookie[];
  headers: HarNameValue[];
  queryString: HarNameValue[];
  postData?: HarPostData;
  headersSize: number;
  bodySize: number;
  comment?: string;
}

export interface HarContent {
  size: number;
  compression?: number;
  mimeType: string;
  text?: string;
  encoding?: "base64";
  comment?: string;
}

export interface HarResponse {
  status: number;
  statusText: string;
  httpVersion: string;
  cookies: HarCookie[];
  headers: HarNameValue[];
  content: HarContent;
  redirectURL: string;
  headersSize: number;
  bodySize: number;
  comment?: string;
}

export interface HarTimings {
  blocked: number;
  dns: number;
  connect: number;
  send: number;
  wait: number;
  receive: number;
  ssl: number;
}

export interface HarEntry {
  pageref?: string;
  startedDateTime: string;
  time: number;
  request: HarRequest;
  response: HarResponse;
  cache: Record<string, never>;
  timings: HarTimings;
  comment?: string;
  _tapwireId: number;
  _clientAddr: string;
  _error?: string;
}

export interface HarPage {
  startedDateTime: string;
  id: string;
  title: string;
  pageTimings: { onContentLoad?: number; onLoad?: number };
  comment?: string;
}

export interface HarLog {
  version: "1.2";
  creator: { name: string; version: string; comment?: string };
  pages?: HarPage[];
  entries: HarEntry[];
  comment?: string;
}

export interface Har {
  log: HarLog;
}

export interface HarOptions {
  /** creator.version (the tapwire version). */
  version: string;
  /** creator.name; default "tapwire". */
  creatorName?: string;
  /**
   * When given, the entries are grouped under one page with this title (its id is `page_1`, its start the first
   * entry's); also set as creator.comment.
   */
  pageTitle?: string;
  /** log.comment. */
  comment?: string;
}

const PAGE_ID = "page_1";

/** The HAR log of `entries`, oldest first (whatever order they come in). */
export function buildHar(entries: readonly EntryDetail[], options: HarOptions): Har {
  const sorted = [...entries].sort((a, b) => a.timestamp - b.timestamp || a.id - b.id);
  const log: HarLog = {
    version: "1.2",
    creator: { name: options.creatorName ?? "tapwire", version: options.version },
    entries: [],
  };
  if (options.pageTitle !== undefined) {
    log.creator.comment = options.pageTitle;
    const first = sorted[0]?.timestamp ?? Date.now();
    log.pages = [{ startedDateTime: iso(first), id: PAGE_ID, title: options.pageTitle, pageTimings: {} }];
  }
  if (options.comment !== undefined) log.comment = options.comment;
  log.entries = sorted.map((e) => harEntry(e, options.pageTitle !== undefined ? PAGE_ID : undefined));
  return { log };
}

/** One entry. */
export function harEntry(e: EntryDetail, pageref?: string): HarEntry {
  const time = Math.max(0, e.duration_ms);
  const entry: HarEntry = {
    ...(pageref ? { pageref } : {}),
    startedDateTime: iso(e.timestamp),
    time,
    request: harRequest(e),
    response: harResponse(e),
    cache: {},
    timings: { blocked: -1, dns: -1, connect: -1, send: 0, wait: time, receive: 0, ssl: -1 },
    _tapwireId: e.id,
    _clientAddr: e.client_addr,
  };
  if (e.error) entry._error = e.error;
  return entry;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function nameValues(headers: HeaderList): HarNameValue[] {
  return headers.map(([name, value]) => ({ name, value }));
}

function header(headers: HeaderList, name: string): string | undefined {
  const lower = name.toLowerCase();
  return headers.find(([n]) => n.toLowerCase() === lower)?.[1];
}

/** Byte length of a stored body. */
function storedSize(body: string, encoding: string): number {
  return encoding === "base64" ? Buffer.from(body, "base64").length : Buffer.byteLength(body, "utf8");
}

function truncatedNote(captured: number, wire: number): string {
  return `body truncated: ${captured} of ${wire} bytes captured`;
}

function harRequest(e: EntryDetail): HarRequest {
  const req: HarRequest = {
    method: e.method,
    url: e.url,
    httpVersion: "HTTP/1.1",
    cookies: requestCookies(e.req_headers),
    headers: nameValues(e.req_headers),
    queryString: queryString(e.url),
    headersSize: -1,
    bodySize: e.req_body_size ?? 0,
  };
  const size = storedSize(e.req_body ?? "", e.req_body_encoding);
  if (size > 0 || (e.req_body_size ?? 0) > 0) {
    const mimeType = header(e.req_headers, "content-type") ?? "";
    const post: HarPostData = { mimeType, text: e.req_body ?? "" };
    if (e.req_body_encoding === "base64") post._encoding = "base64";
    else if (/^application\/x-www-form-urlencoded\b/i.test(mimeType)) post.params = formParams(post.text);
    if (e.req_body_truncated) post.comment = truncatedNote(size, e.req_body_size);
    req.postData = post;
  }
  return req;
}

function harResponse(e: EntryDetail): HarResponse {
  const size = storedSize(e.res_body ?? "", e.res_body_encoding);
  const content: HarContent = { size, mimeType: e.content_type || header(e.res_headers, "content-type") || "" };
  if (size > 0) {
    content.text = e.res_body;
    if (e.res_body_encoding === "base64") content.encoding = "base64";
  }
  if (e.res_body_decoded_from && !e.res_body_truncated && e.res_body_size >= 0) content.compression = size - e.res_body_size;
  if (e.res_body_truncated) content.comment = truncatedNote(size, e.res_body_size);
  const reason = typeof e.reason === "string" ? e.reason : "";
  return {
    status: e.status_code,
    statusText: reason,
    httpVersion: e.has_response || e.status_code > 0 ? "HTTP/1.1" : "",
    cookies: responseCookies(e.res_headers),
    headers: nameValues(e.res_headers),
    content,
    redirectURL: header(e.res_headers, "location") ?? "",
    headersSize: -1,
    bodySize: e.has_response || e.status_code > 0 ? (e.res_body_size ?? 0) : -1,
  };
}

function queryString(url: string): HarNameValue[] {
  try {
    return [...new URL(url).searchParams].map(([name, value]) => ({ name, value }));
  } catch {
    return [];
  }
}

function formParams(text: string): HarNameValue[] {
  return [...new URLSearchParams(text)].map(([name, value]) => ({ name, value }));
}

/** Cookie: a=1; b=2 (every Cookie field of the request). */
function requestCookies(headers: HeaderList): HarCookie[] {
  const out: HarCookie[] = [];
  for (const [n, v] of headers) {
    if (n.toLowerCase() !== "cookie") continue;
    for (const part of v.split(";")) {
      const i = part.indexOf("=");
      if (i <= 0) continue;
      out.push({ name: part.slice(0, i).trim(), value: part.slice(i + 1).trim() });
    }
  }
  return out;
}

/** Set-Cookie: name=value; Path=/; Domain=x; Expires=...; Max-Age=...; HttpOnly; Secure; SameSite=Lax */
function responseCookies(headers: HeaderList): HarCookie[] {
  const out: HarCookie[] = [];
  for (const [n, v] of headers) {
    if (n.toLowerCase() !== "set-cookie") continue;
    const [first, ...attrs] = v.split(";");
    const i = first!.indexOf("=");
    if (i <= 0) continue;
    const cookie: HarCookie = { name: first!.slice(0, i).trim(), value: first!.slice(i + 1).trim() };
    for (const a of attrs) {
      const j = a.indexOf("=");
      const key = (j < 0 ? a : a.slice(0, j)).trim().toLowerCase();
      const val = j < 0 ? "" : a.slice(j + 1).trim();
      if (key === "path") cookie.path = val;
      else if (key === "domain") cookie.domain = val;
      else if (key === "expires") {
        const t = Date.parse(val);
        if (!Number.isNaN(t)) cookie.expires = iso(t);
      } else if (key === "httponly") cookie.httpOnly = true;
      else if (key === "secure") cookie.secure = true;
      else if (key === "samesite") cookie.sameSite = val;
    }
    out.push(cookie);
  }
  return out;
}
