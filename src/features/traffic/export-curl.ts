/**
 * Export a captured request as a runnable bash + curl command.
 *
 * The command reproduces method, URL, request headers and body bytes over
 * HTTP/1.1. Layout and rules are documented in docs/diff.md ("Export: cURL").
 */
import { stripHopByHop } from "../../core/http1/headers.ts";
import type { EntryDetail, HeaderList } from "../../store/types.ts";

/** Bodies above this many bytes never go into a single argv string (Linux caps one argument at 128 KiB). */
const MAX_ARG_BODY_BYTES = 64 * 1024;

/** Above this size curl (some versions already above 1 KiB) adds `Expect: 100-continue` on its own. */
const EXPECT_THRESHOLD_BYTES = 1024;

/** Content codings curl can undo itself with --compressed. */
const COMPRESSED_CODINGS = new Set(["gzip", "x-gzip", "deflate", "br", "zstd"]);

/** Quote a string as one bash word using single quotes (`'` becomes `'\''`). */
export function singleQuote(s: string): string {
  return "'" + s.replaceAll("'", "'\\''") + "'";
}

/** ANSI-C quoting (`$'...'`) for short strings with control characters (e.g. a tab in a header value). */
export function ansiCQuote(s: string): string {
  let out = "$'";
  for (const ch of s) {
    const c = ch.codePointAt(0) ?? 0;
    if (ch === "\\") out += "\\\\";
    // `'` and `!` as hex so that history expansion in an interactive shell cannot see them
    else if (c < 0x20 || c === 0x7f || ch === "'" || ch === "!") out += "\\x" + c.toString(16).padStart(2, "0");
    else if (c >= 0x80 && c <= 0x9f) {
      // C1 control: its two UTF-8 bytes
      for (const b of new TextEncoder().encode(ch)) out += "\\x" + b.toString(16).padStart(2, "0");
    } else out += ch;
  }
  return out + "'";
}

/** Single quotes, or ANSI-C quoting when the text holds characters unsafe to paste. */
function argQuote(s: string): string {
  return /[\x00-\x1f\x7f-\x9f]/.test(s) ? ansiCQuote(s) : singleQuote(s);
}

/** Like singleQuote, but leaves plain words (letters, digits, `-_.`) bare. */
export function shellQuote(s: string): string {
  return /^[A-Za-z0-9_.\-]+$/.test(s) ? s : singleQuote(s);
}

/** Bytes of a stored body. */
export function bodyBytes(body: string, encoding: string): Uint8Array {
  if (encoding === "base64") return new Uint8Array(Buffer.from(body, "base64"));
  return new TextEncoder().encode(body);
}

/** Characters that must not appear literally inside a pasted shell argument. */
function hasUnsafeTextChar(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x0a) continue;
    if (c < 0x20 || c === 0x7f || (c >= 0x80 && c <= 0x9f)) return true;
    // lone surrogates cannot be written as UTF-8
    if (c >= 0xd800 && c <= 0xdbff) {
      const n = s.charCodeAt(i + 1);
      if (!(n >= 0xdc00 && n <= 0xdfff)) return true;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) return true;
  }
  return false;
}

function octal(b: number): string {
  return "\\" + b.toString(8).padStart(3, "0");
}

/**
 * A single-quoted printf format string that prints exactly `bytes`.
 * Printable ASCII stays readable; `%`, `\` and `'` are escaped; newline is `\n`;
 * everything else is a three-digit octal escape (`\000`, `\377`).
 * When `keepUtf8` is set, multi-byte UTF-8 sequences of printable characters are kept literally.
 */
export function printfFormat(bytes: Uint8Array, keepUtf8: boolean): string {
  const out: string[] = [];
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i];
    if (i === 0 && b === 0x2d) {
      // a leading '-' would be read as a printf option
      out.push(octal(b));
    } else if (b === 0x25) out.push("%%");
    else if (b === 0x5c) out.push("\\\\");
    else if (b === 0x27) out.push(octal(b));
    else if (b === 0x0a) out.push("\\n");
    else if (b >= 0x20 && b < 0x7f) out.push(String.fromCharCode(b));
    else if (keepUtf8 && b >= 0xc2 && b <= 0xf4) {
      const len = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2;
      let ok = i + len <= bytes.length;
      for (let k = 1; ok && k < len; k++) ok = (bytes[i + k] & 0xc0) === 0x80;
      if (ok) {
        let cp = len === 2 ? b & 0x1f : len === 3 ? b & 0x0f : b & 0x07;
        for (let k = 1; k < len; k++) cp = (cp << 6) | (bytes[i + k] & 0x3f);
        const min = len === 2 ? 0x80 : len === 3 ? 0x800 : 0x10000;
        // keep only well-formed, printable characters (no C1 controls, no surrogates)
        if (cp >= min && cp >= 0xa0 && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff)) {
          out.push(String.fromCodePoint(cp));
          i += len;
          continue;
        }
      }
      out.push(octal(b));
    } else out.push(octal(b));
    i++;
  }
  return "'" + out.join("") + "'";
}

function findHeaders(headers: HeaderList, name: string): string[] {
  const lower = name.toLowerCase();
  return headers.filter(([n]) => n.toLowerCase() === lower).map(([, v]) => v);
}

/** True when a Host header value names the same authority as the URL. */
function hostMatchesUrl(host: string, url: URL | null): boolean {
  if (!url) return false;
  const h = host.trim().toLowerCase();
  if (h === url.host.toLowerCase()) return true;
  const defaultPort = url.protocol === "https:" ? "443" : url.protocol === "http:" ? "80" : "";
  if (url.port === "" && defaultPort !== "" && h === `${url.hostname.toLowerCase()}:${defaultPort}`) return true;
  return false;
}

function wantsCompressed(values: string[]): boolean {
  for (const v of values) {
    for (const part of v.split(",")) {
      const coding = part.split(";")[0].trim().toLowerCase();
      if (COMPRESSED_CODINGS.has(coding)) return true;
    }
  }
  return false;
}

/** curl refuses URLs with raw spaces or control characters; percent-encode those bytes. */
function curlSafeUrl(url: string): string {
  return url.replace(/[\x00-\x20\x7f]/g, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0"));
}

function needsGlobOff(url: string): boolean {
  return /[\[\]{}]/.test(url);
}

/** curl would collapse `.` and `..` path segments unless told not to. */
function hasDotSegments(raw: string): boolean {
  const path = raw.replace(/^[a-zA-Z][a-zA-Z0-9+.-]*:\/\/[^/?#]*/, "").split(/[?#]/)[0];
  return path.split("/").some((seg) => seg === "." || seg === ".." || /^(\.|%2e){1,2}$/i.test(seg));
}

/**
 * A bash command that reproduces the captured request with curl.
 *
 * Multi-line with ` \` continuations; safe to paste into bash or run with `bash -c`.
 */
export function toCurl(e: EntryDetail): string {
  let url: URL | null = null;
  try {
    url = new URL(e.url);
  } catch {
    url = null;
  }
  const rawUrl = curlSafeUrl(e.url);
  const method = e.method || "GET";
  const upper = method.toUpperCase();
  const captured = e.req_headers ?? [];
  // What the client said to the proxy about this hop (Connection and every field it names, Keep-Alive,
  // Proxy-Connection, Proxy-Authorization: a credential for the proxy, never for the upstream, TE, Trailer,
  // Transfer-Encoding: curl frames the body itself, Upgrade: curl cannot take over an upgraded connection) is not
  // part of the request; the proxy itself never forwards it.
  const headers = stripHopByHop(captured);
  const bytes = bodyBytes(e.req_body ?? "", e.req_body_encoding);
  const decodedFrom = e.req_body_decoded_from ?? "";

  // A body is sent when bytes were captured, or when the client explicitly sent an empty one.
  const explicitEmpty =
    bytes.length === 0 &&
    upper !== "HEAD" &&
    (findHeaders(captured, "transfer-encoding").length > 0 ||
      (upper !== "GET" && findHeaders(captured, "content-length").some((v) => v.trim() === "0")));
  const hasBody = bytes.length > 0 || explicitEmpty;

  const opts: string[] = [];
  // method
  if (method === "HEAD" && !hasBody) {
    opts.push("--head");
  } else if (hasBody ? method !== "POST" : method !== "GET") {
    opts.push("-X " + shellQuote(method));
  }
  if (needsGlobOff(rawUrl)) opts.push("--globoff");
  if (hasDotSegments(rawUrl)) opts.push("--path-as-is");

  const compressed = wantsCompressed(findHeaders(headers, "accept-encoding"));

  const hOpts: string[] = [];
  for (const [name, value] of headers) {
    const lower = name.toLowerCase();
    if (lower.startsWith(":")) continue; // HTTP/2 pseudo-headers
    if (lower === "content-length") continue; // curl computes it
    if (lower === "host" && hostMatchesUrl(value, url)) continue; // curl derives it from the URL
    if (lower === "accept-encoding" && compressed) continue; // --compressed sets it
    if (lower === "content-encoding" && decodedFrom !== "") continue; // the exported body is the decoded one
    // curl sends `Name;` as a header with an empty value (`Name:` would remove the header)
    hOpts.push("-H " + argQuote(value === "" ? `${name};` : `${name}: ${value}`));
  }
  // Suppress headers curl would add that the original request did not carry.
  const has = (n: string) => findHeaders(headers, n).length > 0;
  if (!has("user-agent")) hOpts.push("-H " + singleQuote("User-Agent:"));
  if (!has("accept")) hOpts.push("-H " + singleQuote("Accept:"));
  if (hasBody && !has("content-type")) hOpts.push("-H " + singleQuote("Content-Type:"));
  if (hasBody && bytes.length > EXPECT_THRESHOLD_BYTES && !has("expect")) hOpts.push("-H " + singleQuote("Expect:"));

  if (compressed) hOpts.push("--compressed");

  // body
  let pipeFrom: string | null = null;
  let dataOpt: string | null = null;
  if (hasBody) {
    if (e.req_body_encoding === "base64") {
      pipeFrom = printfFormat(bytes, false);
    } else {
      const text = e.req_body ?? "";
      if (text.startsWith("@") || hasUnsafeTextChar(text) || bytes.length > MAX_ARG_BODY_BYTES) {
        pipeFrom = printfFormat(bytes, true);
      } else {
        dataOpt = "--data-binary " + singleQuote(text);
      }
    }
    if (pipeFrom !== null) dataOpt = "--data-binary @-";
  }

  const first = (pipeFrom !== null ? `printf ${pipeFrom} | ` : "") + ["curl", "--http1.1", ...opts, singleQuote(rawUrl)].join(" ");
  const lines = [first, ...hOpts];
  if (dataOpt) lines.push(dataOpt);
  let cmd = lines.join(" \\\n  ");
  const upgrade = findHeaders(captured, "upgrade");
  if (upgrade.length > 0) {
    cmd += `\n# note: protocol upgrade (${upgrade.join(", ").replace(/[^A-Za-z0-9 ,./_+-]/g, "?")}) not requested: curl cannot take over an upgraded connection, so this sends the handshake as a plain request`;
  }
  if (e.req_body_truncated) {
    const total = typeof e.req_body_size === "number" ? e.req_body_size : bytes.length;
    cmd += `\n# note: body truncated at ${bytes.length} of ${total} bytes`;
  }
  return cmd;
}
