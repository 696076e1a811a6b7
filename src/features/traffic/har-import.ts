/**
 * Reading HAR back into tapwire: POST /traffic/import, POST /session-tabs/saved, `tapwire har import`, and the
 * entry lists of saved sessions.
 *
 * - `checkHar` checks the shape a HAR must have to be read (log.entries, each with startedDateTime, request.method
 *   and an absolute request.url, well-formed headers, bodies, WebSocket messages) and names the first bad field. It
 *   is deliberately not the full HAR 1.2 schema: real browsers write files that break it in harmless ways (Chrome
 *   writes `serverIPAddress: "[::1]"`, Playwright leaves out optional phases); tapwire's own output is checked
 *   against the schema in the tests (ajv + har-schema).
 * - `toNewEntry` makes a capture-store entry of a HAR entry. Bodies are stored as the HAR holds them (HAR content
 *   is already decoded), marked in `stored_bodies` so the writer does not decode them again. What `_tapwire` holds
 *   (written by har.ts) wins over what is derived from the standard fields, so tapwire → HAR → tapwire keeps every
 *   field of the detail. Every imported entry gets the extra field `imported` ({format, creator, original_id?}).
 * - HTTP/2 and HTTP/3 pseudo-header fields (`:authority`, `:method`...) are not kept as headers: `:authority`
 *   becomes a Host field when there is none (tapwire entries are HTTP/1-shaped, and replay sends them as such);
 *   the original version stays in the `http_version` extra.
 * - `_webSocketMessages` (Chrome's and Playwright's layout) become frames of a WebSocket record: `time` is read as
 *   epoch seconds (Chrome) or, when larger than 1e11, epoch milliseconds (Playwright).
 */
import { badRequest } from "../../api/errors.ts";
import { isTextualContentType } from "../../store/body-decode.ts";
import type { BodyEncoding, HeaderList, NewEntry } from "../../store/types.ts";

/** The client label of imported entries that do not carry one of their own (`_tapwire.client_addr`). */
export const IMPORT_LABEL = "har-import";

/** A WebSocket frame to import (the WebSocket store's record shape). */
export interface ImportedFrame {
  dir: "in" | "out";
  opcode: "text" | "binary" | "close" | "ping" | "pong";
  /** Text, or base64 for binary payloads. */
  text: string;
  sizeBytes: number;
  truncated: boolean;
  ts: number;
  closeCode?: number;
  closeReason?: string;
}

export interface ImportedEntry {
  entry: NewEntry;
  /** The WebSocket frames of an upgrade, or null. */
  frames: ImportedFrame[] | null;
}

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v);

/** The log of a HAR document, checked; a 400 naming the first bad field otherwise. */
export function checkHar(body: unknown): { log: Obj; entries: Obj[] } {
  if (!isObj(body)) throw badRequest("invalid HAR: expected a JSON object with a 'log'");
  const log = body.log;
  if (!isObj(log)) throw badRequest("invalid HAR: 'log' must be an object");
  if (!Array.isArray(log.entries)) throw badRequest("invalid HAR: 'log.entries' must be an array");
  const entries = log.entries as unknown[];
  entries.forEach((e, i) => checkEntry(e, `log.entries[${i}]`));
  return { log, entries: entries as Obj[] };
}

function fail(where: string, what: string): never {
  throw badRequest(`invalid HAR: '${where}' ${what}`);
}

function checkNameValues(v: unknown, where: string): void {
  if (v === undefined) return;
  if (!Array.isArray(v)) fail(where, "must be an array");
  v.forEach((h, j) => {
    if (!isObj(h) || typeof h.name !== "string" || typeof h.value !== "string") fail(`${where}[${j}]`, "must be {name: string, value: string}");
  });
}

function checkEntry(e: unknown, at: string): void {
  if (!isObj(e)) fail(at, "must be an object");
  if (typeof e.startedDateTime !== "string" || !Number.isFinite(Date.parse(e.startedDateTime))) fail(`${at}.startedDateTime`, "must be an ISO 8601 date");
  if (e.time !== undefined && (typeof e.time !== "number" || !Number.isFinite(e.time))) fail(`${at}.time`, "must be a number");
  const req = e.request;
  if (!isObj(req)) fail(`${at}.request`, "must be an object");
  if (typeof req.method !== "string" || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(req.method)) fail(`${at}.request.method`, "must be an HTTP method");
  if (typeof req.url !== "string" || !URL.canParse(req.url)) fail(`${at}.request.url`, "must be an absolute URL");
  checkNameValues(req.headers, `${at}.request.headers`);
  if (req.postData !== undefined) {
    const p = req.postData;
    if (!isObj(p)) fail(`${at}.request.postData`, "must be an object");
    if (p.text !== undefined && typeof p.text !== "string") fail(`${at}.request.postData.text`, "must be a string");
    if (p.params !== undefined) {
      if (!Array.isArray(p.params)) fail(`${at}.request.postData.params`, "must be an array");
      p.params.forEach((x, j) => {
        if (!isObj(x) || typeof x.name !== "string") fail(`${at}.request.postData.params[${j}]`, "must have a string name");
      });
    }
  }
  const res = e.response;
  if (res !== undefined) {
    if (!isObj(res)) fail(`${at}.response`, "must be an object");
    if (res.status !== undefined && (typeof res.status !== "number" || !Number.isInteger(res.status) || res.status < 0 || res.status > 999)) fail(`${at}.response.status`, "must be an integer from 0 to 999");
    checkNameValues(res.headers, `${at}.response.headers`);
    if (res.content !== undefined) {
      const c = res.content;
      if (!isObj(c)) fail(`${at}.response.content`, "must be an object");
      if (c.text !== undefined && typeof c.text !== "string") fail(`${at}.response.content.text`, "must be a string");
    }
  }
  const msgs = e._webSocketMessages;
  if (msgs !== undefined) {
    if (!Array.isArray(msgs)) fail(`${at}._webSocketMessages`, "must be an array");
    msgs.forEach((m, j) => {
      const w = `${at}._webSocketMessages[${j}]`;
      if (!isObj(m)) fail(w, "must be an object");
      if (m.type !== "send" && m.type !== "receive") fail(`${w}.type`, "must be send or receive");
      if (typeof m.time !== "number" || !Number.isFinite(m.time)) fail(`${w}.time`, "must be a number (epoch seconds or milliseconds)");
      if (typeof m.opcode !== "number") fail(`${w}.opcode`, "must be a number");
      if (typeof m.data !== "string") fail(`${w}.data`, "must be a string");
    });
  }
  if (e._tapwire !== undefined && !isObj(e._tapwire)) fail(`${at}._tapwire`, "must be an object");
}

function str(v: unknown): string | undefined {
  return typeof v === "string" ? v : undefined;
}

function int(v: unknown): number | undefined {
  return typeof v === "number" && Number.isFinite(v) ? Math.round(v) : undefined;
}

function headersOf(v: unknown): HeaderList {
  return Array.isArray(v) ? (v as { name: string; value: string }[]).map((h) => [h.name, h.value] as [string, string]) : [];
}

function header(h: HeaderList, name: string): string | undefined {
  const l = name.toLowerCase();
  return h.find(([n]) => n.toLowerCase() === l)?.[1];
}

/** HTTP/2-3 pseudo-header fields out; `:authority` as Host when there is none. */
function withoutPseudo(h: HeaderList): HeaderList {
  if (!h.some(([n]) => n.startsWith(":"))) return h;
  const out = h.filter(([n]) => !n.startsWith(":"));
  const authority = h.find(([n]) => n === ":authority")?.[1];
  if (authority && header(out, "host") === undefined) out.unshift(["Host", authority]);
  return out;
}

/** The Content-Encoding codings a HAR body (always decoded) was decoded from. */
function codings(h: HeaderList): string {
  const ce = h.filter(([n]) => n.toLowerCase() === "content-encoding").map(([, v]) => v).join(", ");
  return ce
    .split(",")
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== "" && c !== "identity")
    .join(", ");
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** A body of the HAR as bytes and the form to store it in. */
function body(text: string | undefined, base64: boolean, mimeType: string, keep?: BodyEncoding): { bytes: Uint8Array | null; encoding: BodyEncoding } {
  if (text === undefined || text === "") return { bytes: null, encoding: "utf8" };
  if (!base64) return { bytes: new Uint8Array(Buffer.from(text, "utf8")), encoding: "utf8" };
  const bytes = new Uint8Array(Buffer.from(text, "base64"));
  if (keep) return { bytes, encoding: keep };
  // a browser may base64 a text body: store it as text when it is text
  if (mimeType && isTextualContentType(mimeType)) {
    try {
      strictUtf8.decode(bytes);
      return { bytes, encoding: "utf8" };
    } catch {}
  }
  return { bytes, encoding: "base64" };
}

/** `time` of a WebSocket message in ms: epoch seconds (Chrome) or epoch milliseconds (Playwright). */
export function messageTimeMs(time: number): number {
  return Math.round(time > 1e11 ? time : time * 1000);
}

const OPCODE_NAMES: Record<number, ImportedFrame["opcode"]> = { 0: "text", 1: "text", 2: "binary", 8: "close", 9: "ping", 10: "pong" };

function frameOf(m: Obj, previewCap: number): ImportedFrame {
  const opcode = OPCODE_NAMES[m.opcode as number] ?? "text";
  const data = m.data as string;
  let text = data;
  let size: number;
  let truncated = m._truncated === true;
  if (opcode === "binary") {
    const bytes = Buffer.from(data, "base64");
    size = bytes.length;
    if (bytes.length > previewCap) {
      text = bytes.subarray(0, previewCap).toString("base64");
      truncated = true;
    }
  } else if (opcode === "text") {
    const bytes = Buffer.from(data, "utf8");
    size = bytes.length;
    if (bytes.length > previewCap) {
      text = new TextDecoder().decode(bytes.subarray(0, previewCap)).replace(/\uFFFD$/, "");
      truncated = true;
    }
  } else {
    text = "";
    size = Buffer.byteLength(data, "utf8");
  }
  const known = int(m._sizeBytes);
  const f: ImportedFrame = { dir: m.type === "send" ? "out" : "in", opcode, text, sizeBytes: known !== undefined && known >= size ? known : size, truncated, ts: messageTimeMs(m.time as number) };
  if (typeof m._closeCode === "number") f.closeCode = m._closeCode;
  if (typeof m._closeReason === "string") f.closeReason = m._closeReason;
  return f;
}

/** A checked HAR entry (checkHar) as a capture-store entry and its WebSocket frames. */
export function toNewEntry(e: Obj, creator: string, previewCap: number): ImportedEntry {
  const req = e.request as Obj;
  const res = isObj(e.response) ? e.response : {};
  const content = isObj(res.content) ? res.content : {};
  const tw = isObj(e._tapwire) ? e._tapwire : null;
  const twExtra = tw && isObj(tw.extra) ? tw.extra : null;
  const truncated = tw && isObj(tw.truncated) ? tw.truncated : {};
  const url = req.url as string;
  const u = new URL(url);
  const host = u.hostname.startsWith("[") ? u.hostname.slice(1, -1) : u.hostname;
  const reqHeaders = withoutPseudo(headersOf(req.headers));
  const resHeaders = withoutPseudo(headersOf(res.headers));
  const status = int(res.status) ?? 0;
  const post = isObj(req.postData) ? req.postData : null;
  const reqMime = str(post?.mimeType) ?? header(reqHeaders, "content-type") ?? "";
  let postText = str(post?.text);
  if ((postText === undefined || postText === "") && Array.isArray(post?.params) && /urlencoded/i.test(reqMime)) {
    postText = new URLSearchParams((post!.params as Obj[]).map((p): [string, string] => [String(p.name), String(p.value ?? "")])).toString();
  }
  const reqBody = body(postText, post?._encoding === "base64", reqMime, tw ? (tw.req_body_encoding === "base64" ? "base64" : "utf8") : undefined);
  const resMime = str(content.mimeType) ?? "";
  const resBody = body(str(content.text), content.encoding === "base64", header(resHeaders, "content-type") ?? resMime, tw ? (tw.res_body_encoding === "base64" ? "base64" : "utf8") : undefined);
  const resLen = resBody.bytes?.length ?? 0;
  const reqLen = reqBody.bytes?.length ?? 0;
  const bodySize = int(res.bodySize);
  const compression = int(content.compression);
  const resWire = bodySize !== undefined && bodySize >= 0 ? bodySize : compression !== undefined ? Math.max(0, (int(content.size) ?? resLen) - compression) : resLen;
  const reqSize = int(req.bodySize);
  const error = str(tw?.error) ?? str(e._error) ?? str(res._error);

  const extra: Record<string, unknown> = {};
  if (twExtra) Object.assign(extra, twExtra);
  else {
    const version = str(req.httpVersion);
    if (version) extra.http_version = version;
    const resVersion = str(res.httpVersion);
    if (resVersion && resVersion !== version) extra.response_http_version = resVersion;
    const ip = str(e.serverIPAddress);
    if (ip) extra.server_ip = ip.replace(/^\[(.*)\]$/, "$1");
    const conn = str(e.connection);
    if (conn) extra.connection_id = conn;
    if (isObj(e.timings)) {
      const t: Record<string, number> = {};
      for (const k of ["blocked", "dns", "connect", "ssl", "send", "wait", "receive"]) {
        const v = e.timings[k];
        t[k] = typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : -1;
      }
      extra.timings = t;
    }
  }
  if (extra.imported === undefined) {
    const mark: Record<string, unknown> = { format: "har", creator };
    if (typeof tw?.id === "number") mark.original_id = tw.id;
    extra.imported = mark;
  }

  const entry: NewEntry = {
    method: req.method as string,
    url,
    host,
    status_code: status,
    content_type: str(tw?.content_type) ?? header(resHeaders, "content-type") ?? resMime,
    duration_ms: Math.max(0, int(tw?.duration_ms) ?? int(e.time) ?? 0),
    timestamp: Date.parse(e.startedDateTime as string),
    client_addr: str(tw?.client_addr) ?? IMPORT_LABEL,
    has_response: typeof tw?.has_response === "boolean" ? tw.has_response : status > 0,
    req_headers: reqHeaders,
    res_headers: resHeaders,
    req_body: reqBody.bytes,
    req_body_size: int(tw?.req_body_size) ?? (reqSize !== undefined && reqSize >= 0 ? Math.max(reqSize, 0) : reqLen),
    res_body: resBody.bytes,
    res_body_size: int(tw?.res_body_size) ?? resWire,
    extra,
    stored_bodies: {
      req_encoding: reqBody.encoding,
      res_encoding: resBody.encoding,
      req_decoded_from: str(tw?.req_body_decoded_from) ?? (reqLen > 0 ? codings(reqHeaders) : ""),
      res_decoded_from: str(tw?.res_body_decoded_from) ?? (resLen > 0 ? codings(resHeaders) : ""),
      req_truncated: truncated.request === true,
      res_truncated: truncated.response === true,
    },
  };
  if (error) entry.error = error;
  // tapwire's own HAR carries the reason among the extras; others have it as statusText
  if (!twExtra && typeof res.statusText === "string" && res.statusText) entry.reason = res.statusText;
  const msgs = e._webSocketMessages;
  const frames = Array.isArray(msgs) ? (msgs as Obj[]).map((m) => frameOf(m, previewCap)) : null;
  return { entry, frames };
}

/** "name version" of the HAR's creator. */
export function creatorOf(log: Obj): string {
  const c = isObj(log.creator) ? log.creator : {};
  return [str(c.name), str(c.version)].filter(Boolean).join(" ") || "unknown";
}
