/**
 * HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/) from captured entries: the one HAR writer of tapwire
 * (GET /traffic/export.har, saved sessions, `tapwire run --har`, `tapwire har export`). `harEntry` turns a traffic
 * entry detail (GET /api/v1/traffic/{id}) into a HAR entry; `buildHar` makes a whole log in memory (small exports);
 * har-stream.ts writes the same entries one at a time for big ones. har-import.ts reads them back.
 *
 * What goes where:
 * - `startedDateTime` is the entry's `timestamp` (the moment the request head arrived) in ISO 8601 with
 *   milliseconds; `time` is `duration_ms`. `timings` are the phases the proxy measured (the `timings` extra: blocked
 *   = time inside tapwire before the request went upstream, connect (TCP, and TLS when https; a DNS lookup is inside
 *   it, `dns` is -1), ssl, send, wait, receive); -1 where a phase did not apply (a reused connection has no
 *   connect/ssl). An entry without measured phases (older captures) has the whole time under `wait`.
 * - `serverIPAddress` / `connection` from the `server_ip` / `connection_id` extras; `httpVersion` from `http_version`.
 * - Headers in wire order with their original casing and duplicates; cookies parsed from Cookie / Set-Cookie;
 *   `queryString` from the URL; `headersSize` computed from the head as HTTP/1.1 sends it.
 * - Bodies as captured: decoded from their Content-Encoding (then `content.compression` says how many bytes that
 *   saved), text as text, anything else base64 (`content.encoding: "base64"`; a binary request body carries the
 *   extension `_encoding: "base64"`, as HAR has no such field for postData). Form bodies (urlencoded and
 *   multipart) also get `params`. A body cut at the capture limit is marked in `comment` and `_tapwire.truncated`.
 * - A flow that failed keeps its status (502 when the proxy answered for a failed upstream, 0 when nothing was
 *   answered) and gets `_error` (Chrome's name) and `_tapwire.error`.
 * - `_tapwire` holds what HAR has no field for, so that tapwire → HAR → tapwire loses nothing: the entry id, client
 *   label, error, body sizes, truncation and decoding, and every extra field of the detail (matched rules, original
 *   URL, reason...).
 * - WebSocket upgrades carry their frames as `_webSocketMessages` (Chrome's layout: `type` send/receive, `time` in
 *   epoch seconds, `opcode`, `data`; binary payloads base64).
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

export interface HarParam {
  name: string;
  value?: string;
  fileName?: string;
  contentType?: string;
}

export interface HarPostData {
  mimeType: string;
  text: string;
  params?: HarParam[];
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

/** One WebSocket message in Chrome's HAR layout. */
export interface HarWebSocketMessage {
  type: "send" | "receive";
  /** Epoch seconds (with the milliseconds as a fraction). */
  time: number;
  opcode: number;
  data: string;
  /** tapwire: the true payload size when `data` is a clipped preview. */
  _sizeBytes?: number;
  _truncated?: boolean;
  _closeCode?: number;
  _closeReason?: string;
}

/** What tapwire keeps in `_tapwire` (see the file comment). */
export interface HarTapwire {
  id: number;
  client_addr: string;
  has_response: boolean;
  duration_ms: number;
  content_type: string;
  error?: string;
  truncated: { request: boolean; response: boolean };
  req_body_size: number;
  res_body_size: number;
  req_body_encoding: "utf8" | "base64";
  res_body_encoding: "utf8" | "base64";
  req_body_decoded_from: string;
  res_body_decoded_from: string;
  /** Every extra field of the detail (matched rules, original_url, reason, timings, imported...). */
  extra: Record<string, unknown>;
}

export interface HarEntry {
  pageref?: string;
  startedDateTime: string;
  time: number;
  request: HarRequest;
  response: HarResponse;
  cache: Record<string, never>;
  timings: HarTimings;
  serverIPAddress?: string;
  connection?: string;
  comment?: string;
  _error?: string;
  _resourceType?: string;
  _webSocketMessages?: HarWebSocketMessage[];
  _tapwire: HarTapwire;
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
  _tapwire?: Record<string, unknown>;
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
  /** log._tapwire (a saved session's name and when it was saved). */
  meta?: Record<string, unknown>;
}

/** The frames of an entry's WebSocket connection, when it was an upgrade tapwire observed. */
export type FramesOf = (entryId: number) => readonly WsFrameLike[] | null;

/** A stored WebSocket frame (features/websocket/store.ts WsFrameRecord), as much of it as HAR needs. */
export interface WsFrameLike {
  dir: "in" | "out";
  opcode: string;
  text: string;
  sizeBytes: number;
  truncated: boolean;
  ts: number;
  closeCode?: number;
  closeReason?: string;
}

export const PAGE_ID = "page_1";

/** The fields of the detail form that are not extras (everything else goes to `_tapwire.extra`). */
const DETAIL_FIELDS = new Set([
  "id", "method", "url", "host", "status_code", "content_type", "duration_ms", "timestamp", "client_addr",
  "has_response", "error", "req_headers", "req_body", "res_headers", "res_body", "req_body_encoding",
  "res_body_encoding", "req_body_size", "res_body_size", "req_body_truncated", "res_body_truncated",
  "req_body_decoded_from", "res_body_decoded_from",
]);

/** The HAR log of `entries`, oldest first (whatever order they come in). */
export function buildHar(entries: readonly EntryDetail[], options: HarOptions, framesOf?: FramesOf): Har {
  const sorted = [...entries].sort((a, b) => a.timestamp - b.timestamp || a.id - b.id);
  const log: HarLog = {
    version: "1.2",
    creator: { name: options.creatorName ?? "tapwire", version: options.version },
    entries: [],
  };
  if (options.pageTitle !== undefined) {
    log.creator.comment = options.pageTitle;
    log.pages = [harPage(options.pageTitle, sorted[0]?.timestamp ?? Date.now())];
  }
  if (options.comment !== undefined) log.comment = options.comment;
  if (options.meta !== undefined) log._tapwire = options.meta;
  log.entries = sorted.map((e) => harEntry(e, options.pageTitle !== undefined ? PAGE_ID : undefined, framesOf?.(e.id) ?? null));
  return { log };
}

export function harPage(title: string, startedMs: number): HarPage {
  return { startedDateTime: iso(startedMs), id: PAGE_ID, title, pageTimings: {} };
}

/** One entry. */
export function harEntry(e: EntryDetail, pageref?: string, frames: readonly WsFrameLike[] | null = null): HarEntry {
  const time = Math.max(0, e.duration_ms);
  const extra: Record<string, unknown> = {};
  for (const k of Object.keys(e)) if (!DETAIL_FIELDS.has(k)) extra[k] = e[k];
  const tw: HarTapwire = {
    id: e.id,
    client_addr: e.client_addr,
    has_response: e.has_response,
    duration_ms: e.duration_ms,
    content_type: e.content_type,
    truncated: { request: e.req_body_truncated === true, response: e.res_body_truncated === true },
    req_body_size: e.req_body_size ?? 0,
    res_body_size: e.res_body_size ?? 0,
    req_body_encoding: e.req_body_encoding === "base64" ? "base64" : "utf8",
    res_body_encoding: e.res_body_encoding === "base64" ? "base64" : "utf8",
    req_body_decoded_from: e.req_body_decoded_from ?? "",
    res_body_decoded_from: e.res_body_decoded_from ?? "",
    extra,
  };
  if (e.error) tw.error = e.error;
  const httpVersion = typeof e.http_version === "string" && e.http_version ? e.http_version : "HTTP/1.1";
  const entry: HarEntry = {
    ...(pageref ? { pageref } : {}),
    startedDateTime: iso(e.timestamp),
    time,
    request: harRequest(e, httpVersion),
    response: harResponse(e, httpVersion),
    cache: {},
    timings: harTimings(e.timings, time),
    _tapwire: tw,
  };
  if (typeof e.server_ip === "string" && e.server_ip) entry.serverIPAddress = e.server_ip;
  if (typeof e.connection_id === "string" && e.connection_id) entry.connection = e.connection_id;
  else if (typeof e.connection_id === "number") entry.connection = String(e.connection_id);
  if (e.error) entry._error = e.error;
  if (frames !== null) {
    entry._resourceType = "websocket";
    entry._webSocketMessages = frames.map(harMessage);
  }
  return entry;
}

const OPCODES: Record<string, number> = { continuation: 0, text: 1, binary: 2, close: 8, ping: 9, pong: 10 };

function harMessage(f: WsFrameLike): HarWebSocketMessage {
  const m: HarWebSocketMessage = { type: f.dir === "out" ? "send" : "receive", time: f.ts / 1000, opcode: OPCODES[f.opcode] ?? 1, data: f.text };
  if (f.truncated) m._truncated = true;
  // the true size when `data` does not tell it (a clipped preview, a control frame's payload)
  const shown = f.opcode === "binary" ? Buffer.from(f.text, "base64").length : f.opcode === "text" ? Buffer.byteLength(f.text) : 0;
  if (f.sizeBytes !== shown) m._sizeBytes = f.sizeBytes;
  if (f.closeCode !== undefined) m._closeCode = f.closeCode;
  if (f.closeReason !== undefined) m._closeReason = f.closeReason;
  return m;
}

/** The measured phases (the `timings` extra), or the whole time as `wait` when there are none. */
function harTimings(t: unknown, time: number): HarTimings {
  const out: HarTimings = { blocked: -1, dns: -1, connect: -1, send: 0, wait: time, receive: 0, ssl: -1 };
  if (!t || typeof t !== "object") return out;
  const m = t as Record<string, unknown>;
  for (const k of ["blocked", "dns", "connect", "send", "wait", "receive", "ssl"] as const) {
    const v = m[k];
    if (typeof v === "number" && Number.isFinite(v) && v >= -1) out[k] = v;
  }
  return out;
}

export function iso(ms: number): string {
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

/** Bytes of a head as HTTP/1.1 writes it: start line, `name: value` lines, the empty line. */
function headSize(startLine: string, headers: HeaderList): number {
  let n = Buffer.byteLength(startLine) + 2 + 2;
  for (const [k, v] of headers) n += Buffer.byteLength(k) + 2 + Buffer.byteLength(v) + 2;
  return n;
}

function pathOf(url: string): string {
  try {
    const u = new URL(url);
    return u.pathname + u.search;
  } catch {
    return url;
  }
}

function harRequest(e: EntryDetail, httpVersion: string): HarRequest {
  const req: HarRequest = {
    method: e.method,
    url: e.url,
    httpVersion,
    cookies: requestCookies(e.req_headers),
    headers: nameValues(e.req_headers),
    queryString: queryString(e.url),
    headersSize: headSize(`${e.method} ${pathOf(e.url)} ${httpVersion}`, e.req_headers),
    bodySize: e.req_body_size ?? 0,
  };
  const size = storedSize(e.req_body ?? "", e.req_body_encoding);
  if (size > 0 || (e.req_body_size ?? 0) > 0) {
    const mimeType = header(e.req_headers, "content-type") ?? "";
    const post: HarPostData = { mimeType, text: e.req_body ?? "" };
    if (e.req_body_encoding === "base64") post._encoding = "base64";
    else if (/^application\/x-www-form-urlencoded\b/i.test(mimeType)) post.params = formParams(post.text);
    else if (/^multipart\/form-data\b/i.test(mimeType)) {
      const params = multipartParams(post.text, mimeType);
      if (params) post.params = params;
    }
    if (e.req_body_truncated) post.comment = truncatedNote(size, e.req_body_size);
    req.postData = post;
  }
  return req;
}

function harResponse(e: EntryDetail, httpVersion: string): HarResponse {
  const size = storedSize(e.res_body ?? "", e.res_body_encoding);
  const answered = e.has_response || e.status_code > 0;
  // content.size is the decoded length; a cut-off body that was not decoded had e.res_body_size bytes in all
  const contentSize = e.res_body_truncated && !e.res_body_decoded_from ? Math.max(size, e.res_body_size ?? 0) : size;
  const content: HarContent = { size: contentSize, mimeType: e.content_type || header(e.res_headers, "content-type") || (answered ? "" : "x-unknown") };
  if (size > 0) {
    content.text = e.res_body;
    if (e.res_body_encoding === "base64") content.encoding = "base64";
  }
  if (e.res_body_decoded_from && !e.res_body_truncated && e.res_body_size >= 0) content.compression = size - e.res_body_size;
  if (e.res_body_truncated) content.comment = truncatedNote(size, e.res_body_size);
  const reason = typeof e.reason === "string" ? e.reason : "";
  const version = answered ? (typeof e.response_http_version === "string" && e.response_http_version ? e.response_http_version : httpVersion) : "";
  return {
    status: e.status_code,
    statusText: reason,
    httpVersion: version,
    cookies: responseCookies(e.res_headers),
    headers: nameValues(e.res_headers),
    content,
    redirectURL: header(e.res_headers, "location") ?? "",
    headersSize: answered ? headSize(`${version} ${e.status_code} ${reason}`, e.res_headers) : -1,
    bodySize: answered ? (e.res_body_size ?? 0) : -1,
  };
}

function queryString(url: string): HarNameValue[] {
  try {
    return [...new URL(url).searchParams].map(([name, value]) => ({ name, value }));
  } catch {
    return [];
  }
}

function formParams(text: string): HarParam[] {
  return [...new URLSearchParams(text)].map(([name, value]) => ({ name, value }));
}

/** The parts of a multipart/form-data body (text bodies only): name, value or fileName and contentType. */
function multipartParams(text: string, mimeType: string): HarParam[] | null {
  const m = /boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(mimeType);
  const boundary = m?.[1] ?? m?.[2];
  if (!boundary) return null;
  const out: HarParam[] = [];
  for (const part of text.split(`--${boundary}`)) {
    if (part === "" || part.startsWith("--")) continue;
    const body = part.replace(/^\r\n/, "");
    const sep = body.indexOf("\r\n\r\n");
    if (sep < 0) continue;
    const head = body.slice(0, sep);
    let value = body.slice(sep + 4);
    if (value.endsWith("\r\n")) value = value.slice(0, -2);
    const disp = /^content-disposition:(.*)$/im.exec(head)?.[1] ?? "";
    const name = /\bname="([^"]*)"/i.exec(disp)?.[1];
    if (name === undefined) continue;
    const fileName = /\bfilename="([^"]*)"/i.exec(disp)?.[1];
    const p: HarParam = { name };
    if (fileName !== undefined) {
      p.fileName = fileName;
      const ct = /^content-type:\s*(.*)$/im.exec(head)?.[1];
      if (ct) p.contentType = ct.trim();
    } else p.value = value;
    out.push(p);
  }
  return out;
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
