/**
 * tapwire's single URL / path matcher, shared by every rule family:
 * breakpoints (2.6), Map Local (2.12), Map Remote (2.13), Mock Server (2.14),
 * script rules (2.15) and scoped throttle rules.
 *
 * Patterns are compiled once into an anchored RegExp plus a few literal
 * prefilters (scheme, host or host prefix/suffix, port, path prefix, literal
 * tail) and cached by pattern string (LRU, 4096 per kind). A request URL is
 * parsed once and reused for every rule it is tested against (the last parsed
 * URL is remembered), so testing one URL against N rules costs one parse, N
 * string compares, and a regex only for the rules that pass them.
 *
 * ─── URL patterns (compileUrlPattern) ─────────────────────────────────────
 * Shape: [scheme://]host[:port][/path][?query]
 *
 *  Scheme
 *   - Omitted: matches http and https (and ws / wss, see below).
 *   - `http://` / `https://`: only that scheme. `*://` is the same as omitted.
 *   - `ws://` means `http://` and `wss://` means `https://`: a WebSocket
 *     upgrade travels as an http(s) request, and a ws(s):// URL given to
 *     match() is folded the same way. Any other scheme is a PatternError.
 *
 *  Host
 *   - Case-insensitive (both sides are lower-cased); a trailing dot is dropped.
 *   - `*` in the host matches any run of characters except `/` and `:`,
 *     dots included, so `*.example.com` matches `api.example.com` and
 *     `a.b.example.com`, but NOT `example.com` itself (the dot before
 *     `example.com` is literal). `**` in the host is the same as `*`.
 *   - IPv6 hosts must be bracketed: `[::1]:8080/x`. Literal IPv6 hosts are
 *     canonicalised (`[0:0::1]` == `[::1]`); literal non-ASCII hosts are
 *     converted to punycode. An unbracketed address with several `:` is a
 *     PatternError.
 *   - A host made only of stars (`https://*:8443/x`, or `*` followed by a
 *     path) matches any host, IPv6 included. A scheme-less pattern that starts with `/`
 *     (`/api/*`) matches that path on any host and any port, http or https.
 *
 *  Port
 *   - Ports are compared as *effective* ports: a URL without a port has port
 *     80 (http/ws) or 443 (https/wss). This is the "default port is stripped
 *     on both sides" rule: `https://h:443/x` and `https://h/x` are the same,
 *     whichever side carries the `:443`.
 *   - A pattern WITHOUT a port matches ANY port (`localhost/*` matches
 *     `http://localhost:3000/x`), like Proxyman. Name the port to restrict.
 *   - A pattern WITH a port (default or not) matches exactly that effective
 *     port: `example.com:443` matches `https://example.com/` and
 *     `http://example.com:443/`, not `http://example.com/`;
 *     `https://example.com:443/*` does not match `https://example.com:8443/`.
 *   - `:*` matches any port; `*` inside a port matches digits (`:80*`).
 *
 *  Path (case-sensitive, compared raw: no percent-decoding, no dot-segment
 *  resolution)
 *   - No path at all (`example.com`, `example.com:8080`): any path and query.
 *   - `*` matches any run of characters within one segment (not `/`).
 *   - `**` matches any run of characters across segments (including `/`).
 *   - Trailing `*`: when the whole pattern ends with `*` (or `**`), that
 *     final star matches ANY rest — further `/`, the query, anything. This
 *     holds wherever the pattern ends: `api.example.com/v1/*` matches
 *     `/v1/a/b?c=d`; `example.*` matches `example.org:8080/x`; `*` alone
 *     matches every URL. `/api/*` does not match `/api` (the `/` is literal).
 *   - `example.com/` matches only the root path `/` (any query).
 *   - `?` is never a glob character; it separates the query.
 *
 *  Query (case-sensitive, compared raw)
 *   - A pattern without `?` ignores the URL's query string.
 *   - A pattern with `?` matches the query literally, in order, with globs:
 *     `*` matches a run not containing `&`, `**` matches anything, and a
 *     trailing `*` matches any rest. `example.com/x?` matches `/x` with no
 *     query or an empty one. A pattern with a query but no path uses `/`.
 *
 *  Everything else (`.`, `+`, `(`, `[`, `$`, `^`, `|`, `\`, ...) is literal.
 *  The URL's `#fragment` and `user:pass@` are ignored.
 *
 * ─── Path patterns (compilePathPattern, Mock Server 2.14) ─────────────────
 *  Same glob rules as the path/query part of a URL pattern: `*` stays within
 *  one segment, `**` crosses `/`, a trailing `*` matches any rest (so
 *  `/api/users/*` matches `/api/users/42` and `/api/*` matches `/api/a/b`,
 *  while a `*` in the middle, as in `/api/` + `*` + `/items`, covers exactly
 *  one segment). A pattern without `?`
 *  ignores the query; with `?` the query is matched literally (with globs).
 *  A pattern not starting with `/` or `*` gets a leading `/`. The matched
 *  input may be a path (`/a?b`) or an absolute URL, whose path and query are
 *  used.
 *
 * ─── Capture patterns (compileCapturePattern, Map Remote 2.13) ────────────
 *  Anchored; every `*` is its own capture group `(.*)` (greedy, crosses `/`),
 *  exactly as the spec states — so `**` yields two captures, the second one
 *  usually empty. Everything else is literal and case-sensitive.
 *
 *  substituteCaptures(template, caps):
 *   - `$$` → `$`.
 *   - `$N`: two digits are read when that two-digit number is a valid capture
 *     index (≤ caps.length), otherwise one digit (JavaScript replace() rule):
 *     with 12 captures `$10` is capture 10; with 3 captures `$10` is capture 1
 *     followed by `0`.
 *   - `${N}` addresses capture N unambiguously (`${1}0`).
 *   - A reference to a capture that does not exist becomes the empty string
 *     (as nginx / mod_rewrite do). `$0` and a `$` followed by anything else
 *     stay literal.
 *
 *  Limitation: like any backtracking regex, a pattern with many stars in a
 *  row of literal repeats (`*a*a*a*a*b`) can be slow on long inputs.
 */

export class PatternError extends Error {
  readonly pattern: string;
  constructor(message: string, pattern: string) {
    super(`${message}: ${JSON.stringify(pattern)}`);
    this.name = "PatternError";
    this.pattern = pattern;
  }
}

export type UrlScheme = "http" | "https" | "ws" | "wss";

/** A parsed absolute URL. `port` is null when it is the scheme default. */
export interface NormalizedUrl {
  /** lower-cased, as given (ws/wss are kept; matching folds them to http/https) */
  scheme: UrlScheme;
  /** lower-cased, trailing dot dropped, IPv6 bracketed and canonical, IDN as punycode */
  host: string;
  /** null for the scheme default (80 for http/ws, 443 for https/wss) */
  port: number | null;
  /** raw path, `/` when empty; no fragment */
  path: string;
  /** raw query without `?`; null when the URL has no `?` */
  query: string | null;
}

export interface UrlMatcher {
  readonly pattern: string;
  /** the pattern's host when it has no glob (lower-cased), else null — usable to index rules by host */
  readonly literalHost: string | null;
  match(url: string): boolean;
}

export interface PathMatcher {
  readonly pattern: string;
  match(pathAndQuery: string): boolean;
}

export interface CaptureMatcher {
  readonly pattern: string;
  /** number of capture groups ($1..$captureCount) */
  readonly captureCount: number;
  match(s: string): string[] | null;
}

// ─── small LRU cache ────────────────────────────────────────────────────────

/** A Map-backed least-recently-used cache. */
export class LruCache<V> {
  private readonly map = new Map<string, V>();
  readonly capacity: number;

  constructor(capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError("LruCache capacity must be a positive integer");
    this.capacity = capacity;
  }

  get size(): number {
    return this.map.size;
  }

  has(key: string): boolean {
    return this.map.has(key);
  }

  get(key: string): V | undefined {
    const v = this.map.get(key);
    if (v !== undefined) {
      // refresh recency: Map iterates in insertion order
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }

  set(key: string, value: V): void {
    if (this.map.has(key)) {
      this.map.delete(key);
    } else if (this.map.size >= this.capacity) {
      const oldest = this.map.keys().next();
      if (!oldest.done) this.map.delete(oldest.value);
    }
    this.map.set(key, value);
  }

  clear(): void {
    this.map.clear();
  }
}

const CACHE_CAPACITY = 4096;
const urlCache = new LruCache<UrlMatcher>(CACHE_CAPACITY);
const pathCache = new LruCache<PathMatcher>(CACHE_CAPACITY);
const captureCache = new LruCache<CaptureMatcher>(CACHE_CAPACITY);

/** Drops every cached compiled pattern (tests, or after bulk rule replacement). */
export function clearPatternCaches(): void {
  urlCache.clear();
  pathCache.clear();
  captureCache.clear();
}

/** Number of cached compiled patterns per kind. */
export function patternCacheSizes(): { url: number; path: number; capture: number } {
  return { url: urlCache.size, path: pathCache.size, capture: captureCache.size };
}

// ─── URL normalisation ──────────────────────────────────────────────────────

function defaultPort(scheme: string): number {
  return scheme === "https" || scheme === "wss" ? 443 : 80;
}

function foldScheme(scheme: UrlScheme): "http" | "https" {
  return scheme === "https" || scheme === "wss" ? "https" : "http";
}

const NON_ASCII = /[^\x00-\x7f]/;

/** Lower-case, drop one trailing dot, canonicalise IPv6 and IDN. Null if invalid. */
function normalizeHostName(raw: string): string | null {
  let host = raw.toLowerCase();
  if (host.startsWith("[")) {
    if (!host.endsWith("]")) return null;
    try {
      return new URL(`http://${host}/`).hostname;
    } catch {
      return null;
    }
  }
  if (host.endsWith(".")) host = host.slice(0, -1);
  if (host === "") return null;
  if (NON_ASCII.test(host)) {
    try {
      host = new URL(`http://${host}/`).hostname;
    } catch {
      return null;
    }
  }
  return host;
}

function parseUrl(url: string): NormalizedUrl | null {
  const sep = url.indexOf("://");
  if (sep <= 0) return null;
  const scheme = url.slice(0, sep).toLowerCase();
  if (scheme !== "http" && scheme !== "https" && scheme !== "ws" && scheme !== "wss") return null;

  const start = sep + 3;
  let end = start;
  const len = url.length;
  while (end < len) {
    const c = url.charCodeAt(end);
    if (c === 47 /* / */ || c === 63 /* ? */ || c === 35 /* # */) break;
    end++;
  }
  let authority = url.slice(start, end);
  const at = authority.lastIndexOf("@");
  if (at >= 0) authority = authority.slice(at + 1);

  let rawHost: string;
  let portStr: string;
  if (authority.startsWith("[")) {
    const close = authority.indexOf("]");
    if (close < 0) return null;
    rawHost = authority.slice(0, close + 1);
    const after = authority.slice(close + 1);
    if (after === "") portStr = "";
    else if (after.charCodeAt(0) === 58 /* : */) portStr = after.slice(1);
    else return null;
  } else {
    const colon = authority.indexOf(":");
    if (colon < 0) {
      rawHost = authority;
      portStr = "";
    } else {
      if (authority.indexOf(":", colon + 1) >= 0) return null;
      rawHost = authority.slice(0, colon);
      portStr = authority.slice(colon + 1);
    }
  }
  const host = normalizeHostName(rawHost);
  if (host === null) return null;

  let port: number | null = null;
  if (portStr !== "") {
    if (!/^\d{1,5}$/.test(portStr)) return null;
    const n = Number(portStr);
    if (n > 65535) return null;
    port = n === defaultPort(scheme) ? null : n;
  }

  let rest = url.slice(end);
  const hash = rest.indexOf("#");
  if (hash >= 0) rest = rest.slice(0, hash);
  const q = rest.indexOf("?");
  let path = q >= 0 ? rest.slice(0, q) : rest;
  const query = q >= 0 ? rest.slice(q + 1) : null;
  if (path === "") path = "/";

  return { scheme: scheme as UrlScheme, host, port, path, query };
}

/**
 * Parses an absolute http/https/ws/wss URL into its parts, dropping the
 * default port, the fragment and any userinfo. Throws TypeError when the URL
 * is not an absolute URL of one of those schemes.
 */
export function normalizeUrl(url: string): NormalizedUrl {
  const n = parseUrl(url);
  if (n === null) throw new TypeError(`not an absolute http(s)/ws(s) URL: ${JSON.stringify(url)}`);
  return n;
}

/** The canonical strings a compiled URL pattern is tested against. */
interface PreparedUrl {
  scheme: "http" | "https";
  host: string;
  port: number;
  path: string;
  /** scheme://host:effectivePort/path (scheme folded to http/https) */
  base: string;
  /** base + "?" + query ("" when the URL has no query) */
  full: string;
}

// One-entry memo: the proxy tests the same URL string against every rule.
let lastUrl: string | undefined;
let lastPrepared: PreparedUrl | null = null;

function prepareUrl(url: string): PreparedUrl | null {
  if (url === lastUrl) return lastPrepared;
  const n = parseUrl(url);
  let prepared: PreparedUrl | null = null;
  if (n !== null) {
    const scheme = foldScheme(n.scheme);
    const port = n.port ?? defaultPort(n.scheme);
    const base = `${scheme}://${n.host}:${port}${n.path}`;
    prepared = { scheme, host: n.host, port, path: n.path, base, full: `${base}?${n.query ?? ""}` };
  }
  lastUrl = url;
  lastPrepared = prepared;
  return prepared;
}

// ─── glob → regex ───────────────────────────────────────────────────────────

const REGEX_SPECIAL = new Set(["\\", "^", "$", ".", "|", "?", "*", "+", "(", ")", "[", "]", "{", "}", "/"]);

function escapeChar(c: string): string {
  return REGEX_SPECIAL.has(c) ? `\\${c}` : c;
}

/**
 * Translates a glob: a single `*` becomes `star`, a run of two or more
 * becomes `doubleStar`; when `trailing` is set, a star run at the very end
 * becomes `.*`. Everything else is escaped.
 */
function globToRegex(glob: string, star: string, doubleStar: string, trailing: boolean): string {
  let out = "";
  const n = glob.length;
  let i = 0;
  while (i < n) {
    const c = glob[i];
    if (c === "*") {
      let j = i + 1;
      while (j < n && glob[j] === "*") j++;
      out += trailing && j === n ? ".*" : j - i === 1 ? star : doubleStar;
      i = j;
    } else {
      out += escapeChar(c);
      i++;
    }
  }
  return out;
}

const PATH_STAR = "[^/?]*";
const PATH_DOUBLE_STAR = "[^?]*";
const QUERY_STAR = "[^&]*";
const QUERY_DOUBLE_STAR = ".*";
const HOST_STAR = "[^/:]*";
const IPV6_HOST_STAR = "[^\\]/]*";
const ANY_HOST = "(?:\\[[^\\]/]*\\]|[^/:\\[]+)";
const ANY_PORT = ":\\d+";

const SCHEME_PREFIX = /^([A-Za-z][A-Za-z0-9+.-]*|\*):\/\//;

// ─── URL patterns ───────────────────────────────────────────────────────────

/**
 * Cheap necessary conditions checked before the regex (which alone decides
 * correctness): most rules are rejected by a string compare.
 */
interface UrlPrefilter {
  scheme: "http" | "https" | null;
  literalHost: string | null;
  hostPrefix: string;
  hostSuffix: string;
  port: number | null;
  /** literal start of the path (before its first star) */
  pathPrefix: string;
  /** literal end of path+query (after the last star); tested against the regex input */
  tailSuffix: string;
}

class CompiledUrlPattern implements UrlMatcher {
  readonly pattern: string;
  readonly literalHost: string | null;
  readonly regex: RegExp;
  private readonly usesQuery: boolean;
  private readonly scheme: "http" | "https" | null;
  private readonly hostPrefix: string;
  private readonly hostSuffix: string;
  private readonly port: number | null;
  private readonly pathPrefix: string;
  private readonly tailSuffix: string;

  constructor(pattern: string, regex: RegExp, usesQuery: boolean, pre: UrlPrefilter) {
    this.pattern = pattern;
    this.regex = regex;
    this.usesQuery = usesQuery;
    this.literalHost = pre.literalHost;
    this.scheme = pre.scheme;
    this.hostPrefix = pre.hostPrefix;
    this.hostSuffix = pre.hostSuffix;
    this.port = pre.port;
    this.pathPrefix = pre.pathPrefix;
    this.tailSuffix = pre.tailSuffix;
  }

  match(url: string): boolean {
    const u = prepareUrl(url);
    if (u === null) return false;
    if (this.literalHost !== null) {
      if (u.host !== this.literalHost) return false;
    } else if (!u.host.startsWith(this.hostPrefix) || !u.host.endsWith(this.hostSuffix)) {
      return false;
    }
    if (this.port !== null && u.port !== this.port) return false;
    if (this.scheme !== null && u.scheme !== this.scheme) return false;
    if (!u.path.startsWith(this.pathPrefix)) return false;
    const target = this.usesQuery ? u.full : u.base;
    if (!target.endsWith(this.tailSuffix)) return false;
    return this.regex.test(target);
  }
}

function buildUrlPattern(pattern: string): CompiledUrlPattern {
  const p = pattern.trim();
  if (p === "") throw new PatternError("empty URL pattern", pattern);
  const trailing = p.endsWith("*");

  let schemeRe = "(?:http|https)";
  let scheme: "http" | "https" | null = null;
  let rest = p;
  const sm = SCHEME_PREFIX.exec(p);
  if (sm) {
    switch (sm[1].toLowerCase()) {
      case "http":
      case "ws":
        schemeRe = "http";
        scheme = "http";
        break;
      case "https":
      case "wss":
        schemeRe = "https";
        scheme = "https";
        break;
      case "*":
        break;
      default:
        throw new PatternError(`unsupported scheme "${sm[1]}" in URL pattern`, pattern);
    }
    rest = p.slice(sm[0].length);
    if (rest === "" || rest.startsWith("/") || rest.startsWith("?")) {
      throw new PatternError("URL pattern has a scheme but no host", pattern);
    }
  }

  // Split authority from path/query.
  let hostPart: string | null = null; // null = any host (pattern starts with "/")
  let portPart: string | null = null;
  let tail = rest;
  if (!rest.startsWith("/")) {
    let authEnd = 0;
    if (rest.startsWith("[")) {
      const close = rest.indexOf("]");
      if (close < 0) throw new PatternError("unterminated [IPv6] host in URL pattern", pattern);
      authEnd = close + 1;
    }
    while (authEnd < rest.length && rest[authEnd] !== "/" && rest[authEnd] !== "?") authEnd++;
    const auth = rest.slice(0, authEnd);
    tail = rest.slice(authEnd);
    if (auth.startsWith("[")) {
      const close = auth.indexOf("]");
      hostPart = auth.slice(0, close + 1);
      const after = auth.slice(close + 1);
      if (after !== "") {
        if (after[0] !== ":") throw new PatternError("unexpected text after [IPv6] host", pattern);
        portPart = after.slice(1);
      }
    } else {
      const colon = auth.indexOf(":");
      if (colon < 0) {
        hostPart = auth;
      } else {
        if (auth.indexOf(":", colon + 1) >= 0) {
          throw new PatternError("IPv6 hosts must be written in brackets, e.g. [::1]:8080", pattern);
        }
        hostPart = auth.slice(0, colon);
        portPart = auth.slice(colon + 1);
      }
    }
    if (hostPart === "") throw new PatternError("URL pattern has an empty host", pattern);
    if (portPart !== null) {
      if (!/^[0-9*]+$/.test(portPart)) throw new PatternError("port must be digits or *", pattern);
      if (!portPart.includes("*") && Number(portPart) > 65535) throw new PatternError("port out of range", pattern);
    }
  }

  const qi = tail.indexOf("?");
  const pathPart = qi >= 0 ? tail.slice(0, qi) : tail;
  const queryPart = qi >= 0 ? tail.slice(qi + 1) : null;

  const last: "host" | "port" | "path" | "query" =
    queryPart !== null ? "query" : pathPart !== "" ? "path" : portPart !== null ? "port" : "host";

  let re = `^${schemeRe}://`;
  let literalHost: string | null = null;
  let hostPrefix = "";
  let hostSuffix = "";

  // host
  if (hostPart === null || (/^\*+$/.test(hostPart) && !(trailing && last === "host"))) {
    re += ANY_HOST; // "/path" or "*/path": any host, IPv6 included
  } else if (hostPart.includes("*")) {
    let h = hostPart.toLowerCase();
    const hostIsTrailing = trailing && last === "host";
    if (!h.startsWith("[") && h.endsWith(".") && !hostIsTrailing) h = h.slice(0, -1);
    const star = h.startsWith("[") ? IPV6_HOST_STAR : HOST_STAR;
    re += globToRegex(h, star, star, hostIsTrailing);
    hostPrefix = h.slice(0, h.indexOf("*"));
    if (!hostIsTrailing) hostSuffix = h.slice(h.lastIndexOf("*") + 1);
  } else {
    const h = normalizeHostName(hostPart);
    if (h === null) throw new PatternError("invalid host in URL pattern", pattern);
    literalHost = h;
    re += globToRegex(h, "", "", false);
  }

  const hostEndsPattern = trailing && last === "host";
  const portEndsPattern = trailing && last === "port";
  if (!hostEndsPattern) {
    // port
    if (portPart === null) re += ANY_PORT;
    else if (portPart.includes("*")) re += `:${globToRegex(portPart, "\\d*", "\\d*", portEndsPattern)}`;
    else re += `:${Number(portPart)}`;

    if (!portEndsPattern) {
      // path
      if (pathPart === "" && queryPart === null) re += "/.*"; // no path: whole host
      else if (pathPart === "") re += "/";
      else re += globToRegex(pathPart, PATH_STAR, PATH_DOUBLE_STAR, trailing && last === "path");
      // query
      if (queryPart !== null) {
        re += `\\?${globToRegex(queryPart, QUERY_STAR, QUERY_DOUBLE_STAR, trailing && last === "query")}`;
      }
    }
  }
  re += "$";

  const port = portPart !== null && !portPart.includes("*") ? Number(portPart) : null;
  let pathPrefix = "";
  let tailSuffix = "";
  if (last === "path" || last === "query") {
    const star = pathPart.indexOf("*");
    pathPrefix = star >= 0 ? pathPart.slice(0, star) : pathPart;
    if (!trailing) {
      const t = queryPart !== null ? `${pathPart}?${queryPart}` : pathPart;
      tailSuffix = t.slice(t.lastIndexOf("*") + 1);
    }
  }
  return new CompiledUrlPattern(pattern, new RegExp(re, "s"), queryPart !== null, {
    scheme,
    literalHost,
    hostPrefix,
    hostSuffix,
    port,
    pathPrefix,
    tailSuffix,
  });
}

/**
 * Compiles (or fetches from the cache) a URL-shaped glob pattern. Throws
 * PatternError for malformed patterns. See the header comment for semantics.
 */
export function compileUrlPattern(pattern: string): UrlMatcher {
  let m = urlCache.get(pattern);
  if (m === undefined) {
    m = buildUrlPattern(pattern);
    urlCache.set(pattern, m);
  }
  return m;
}

// ─── path patterns (Mock Server) ────────────────────────────────────────────

let lastPathInput: string | undefined;
let lastPath = "/";
let lastPathQuery = "/?";

/** Splits a path-and-query (or absolute URL) into "path" and "path?query". */
function preparePath(input: string): void {
  if (input === lastPathInput) return;
  let s = input;
  if (s.charCodeAt(0) !== 47 /* / */) {
    const sep = s.indexOf("://");
    if (sep > 0 && /^[A-Za-z][A-Za-z0-9+.-]*$/.test(s.slice(0, sep))) {
      let end = sep + 3;
      while (end < s.length && s[end] !== "/" && s[end] !== "?" && s[end] !== "#") end++;
      s = s.slice(end);
    }
    if (s.charCodeAt(0) !== 47) s = `/${s}`;
  }
  const hash = s.indexOf("#");
  if (hash >= 0) s = s.slice(0, hash);
  const q = s.indexOf("?");
  lastPath = q >= 0 ? s.slice(0, q) : s;
  lastPathQuery = q >= 0 ? s : `${s}?`;
  lastPathInput = input;
}

class CompiledPathPattern implements PathMatcher {
  readonly pattern: string;
  readonly regex: RegExp;
  private readonly usesQuery: boolean;

  constructor(pattern: string, regex: RegExp, usesQuery: boolean) {
    this.pattern = pattern;
    this.regex = regex;
    this.usesQuery = usesQuery;
  }

  match(pathAndQuery: string): boolean {
    preparePath(pathAndQuery);
    return this.regex.test(this.usesQuery ? lastPathQuery : lastPath);
  }
}

function buildPathPattern(pattern: string): CompiledPathPattern {
  let p = pattern.trim();
  if (p === "") throw new PatternError("empty path pattern", pattern);
  if (!p.startsWith("/") && !p.startsWith("*")) p = `/${p}`;
  const trailing = p.endsWith("*");
  const qi = p.indexOf("?");
  const pathPart = qi >= 0 ? p.slice(0, qi) : p;
  const queryPart = qi >= 0 ? p.slice(qi + 1) : null;
  let re = `^${globToRegex(pathPart, PATH_STAR, PATH_DOUBLE_STAR, trailing && queryPart === null)}`;
  if (queryPart !== null) re += `\\?${globToRegex(queryPart, QUERY_STAR, QUERY_DOUBLE_STAR, trailing)}`;
  re += "$";
  return new CompiledPathPattern(pattern, new RegExp(re, "s"), queryPart !== null);
}

/**
 * Compiles (or fetches from the cache) a Mock Server path pattern
 * (`/api/users/*`, `/search?q=*`). Throws PatternError for an empty pattern.
 */
export function compilePathPattern(pattern: string): PathMatcher {
  let m = pathCache.get(pattern);
  if (m === undefined) {
    m = buildPathPattern(pattern);
    pathCache.set(pattern, m);
  }
  return m;
}

// ─── capture patterns (Map Remote) ──────────────────────────────────────────

class CompiledCapturePattern implements CaptureMatcher {
  readonly pattern: string;
  readonly captureCount: number;
  readonly regex: RegExp;

  constructor(pattern: string, regex: RegExp, captureCount: number) {
    this.pattern = pattern;
    this.regex = regex;
    this.captureCount = captureCount;
  }

  match(s: string): string[] | null {
    const m = this.regex.exec(s);
    if (m === null) return null;
    const caps = new Array<string>(this.captureCount);
    for (let i = 0; i < this.captureCount; i++) caps[i] = m[i + 1] ?? "";
    return caps;
  }
}

function buildCapturePattern(glob: string): CompiledCapturePattern {
  let re = "^";
  let count = 0;
  for (const c of glob) {
    if (c === "*") {
      re += "(.*)";
      count++;
    } else {
      re += escapeChar(c);
    }
  }
  re += "$";
  return new CompiledCapturePattern(glob, new RegExp(re, "s"), count);
}

/**
 * Compiles (or fetches from the cache) a Map Remote `source_path` glob: an
 * anchored match where every `*` captures `.*`. match() returns the captures
 * ($1 first) or null.
 */
export function compileCapturePattern(glob: string): CaptureMatcher {
  let m = captureCache.get(glob);
  if (m === undefined) {
    m = buildCapturePattern(glob);
    captureCache.set(glob, m);
  }
  return m;
}

/**
 * Replaces `$1`..`$N`, `${N}` and `$$` in `template` with captures from
 * compileCapturePattern().match(). See the header comment for the rules.
 */
export function substituteCaptures(template: string, caps: readonly string[]): string {
  if (!template.includes("$")) return template;
  let out = "";
  const n = template.length;
  for (let i = 0; i < n; i++) {
    const c = template[i];
    if (c !== "$" || i + 1 >= n) {
      out += c;
      continue;
    }
    const d = template.charCodeAt(i + 1);
    if (d === 36 /* $ */) {
      out += "$";
      i++;
      continue;
    }
    if (d === 123 /* { */) {
      const close = template.indexOf("}", i + 2);
      const inner = close > 0 ? template.slice(i + 2, close) : "";
      if (/^[1-9]\d*$/.test(inner)) {
        out += caps[Number(inner) - 1] ?? "";
        i = close;
        continue;
      }
      out += c;
      continue;
    }
    if (d >= 49 && d <= 57 /* 1-9 */) {
      let idx = d - 48;
      let consumed = 1;
      const e = i + 2 < n ? template.charCodeAt(i + 2) : -1;
      if (e >= 48 && e <= 57) {
        const two = idx * 10 + (e - 48);
        if (two <= caps.length) {
          idx = two;
          consumed = 2;
        }
      }
      out += caps[idx - 1] ?? "";
      i += consumed;
      continue;
    }
    out += c;
  }
  return out;
}
