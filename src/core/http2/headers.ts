/**
 * HTTP/1.1 <-> HTTP/2 header translation (sans-io), as RFC 9113 section 8 has it:
 * - HTTP/2 field names are lower case; pseudo-header fields (`:method`, `:scheme`, `:authority`, `:path`,
 *   `:status`) come first and never reach HTTP/1.
 * - Connection-specific fields (Connection and the fields it names, Keep-Alive, Proxy-Connection,
 *   Transfer-Encoding, Upgrade) are not sent over HTTP/2; TE only as `te: trailers`.
 * - Host becomes `:authority` (and `:authority` becomes Host); HTTP/2 may split Cookie into crumbs, joined with
 *   "; " for HTTP/1 (8.2.3).
 */
import type { HeaderList } from "../http1/types.ts";

/** Fields an HTTP/2 message must not carry (RFC 9113 8.2.2), besides the ones Connection names. */
const CONNECTION_SPECIFIC = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host"]);

/** Names of the fields Connection lists (lower case). */
function connectionNamed(headers: HeaderList): Set<string> {
  const out = new Set<string>();
  for (const [k, v] of headers) if (k.toLowerCase() === "connection") for (const n of v.split(",")) if (n.trim()) out.add(n.trim().toLowerCase());
  return out;
}

export class H2TranslateError extends Error {}

export interface H1RequestHead {
  method: string;
  /** origin-form path (or the authority for CONNECT) */
  target: string;
  headers: HeaderList;
}

/**
 * An HTTP/1 request's fields as HTTP/2 fields: pseudo-headers first (`:authority` from Host unless given), then
 * the rest lower-cased, without connection-specific ones; `te` kept only as `trailers`.
 */
export function h1RequestToH2(head: H1RequestHead, scheme: "http" | "https", authority?: string): HeaderList {
  const named = connectionNamed(head.headers);
  let host = authority;
  const rest: HeaderList = [];
  for (const [k, v] of head.headers) {
    const n = k.toLowerCase();
    if (n === "host") {
      host ??= v.trim();
      continue;
    }
    if (CONNECTION_SPECIFIC.has(n) || named.has(n)) continue;
    if (n === "te") {
      if (v.split(",").some((x) => x.trim().toLowerCase() === "trailers")) rest.push(["te", "trailers"]);
      continue;
    }
    rest.push([n, v]);
  }
  if (!host) throw new H2TranslateError("the request has no Host: HTTP/2 needs an :authority");
  if (head.method === "CONNECT") return [[":method", "CONNECT"], [":authority", host], ...rest];
  return [[":method", head.method], [":scheme", scheme], [":authority", host], [":path", head.target || "/"], ...rest];
}

export interface H2RequestParts {
  method: string;
  scheme: string | null;
  authority: string | null;
  path: string | null;
  /** regular fields, cookie crumbs joined, Host first (from :authority unless the request had one) */
  headers: HeaderList;
}

/**
 * An HTTP/2 request's fields split into pseudo-headers and HTTP/1 fields. Refuses what RFC 9113 calls malformed:
 * unknown or repeated pseudo-headers, a pseudo-header after a regular field, upper-case names, connection-specific
 * fields, a missing :method/:scheme/:path (other than CONNECT), and extended CONNECT (`:protocol`), which tapwire
 * does not relay.
 */
export function h2RequestToH1(fields: HeaderList): H2RequestParts {
  const flat: string[] = [];
  for (const [k, v] of fields) flat.push(k, v);
  return h2RequestToH1Flat(flat);
}

/** h2RequestToH1 on a flat name/value list (`[name, value, name, value...]`, node's rawHeaders): no pair per field. */
export function h2RequestToH1Flat(raw: readonly string[]): H2RequestParts {
  let method: string | undefined;
  let scheme: string | undefined;
  let authority: string | undefined;
  let path: string | undefined;
  let protocol = false;
  const headers: HeaderList = [];
  let cookies: string | null = null;
  let host: string | null = null;
  let regularSeen = false;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const k = raw[i]!;
    const v = raw[i + 1]!;
    if (k.charCodeAt(0) === 58 /* ':' */) {
      if (regularSeen) throw new H2TranslateError(`pseudo-header ${k} after a regular field`);
      let seen: boolean;
      if (k === ":method") (seen = method !== undefined), (method = v);
      else if (k === ":scheme") (seen = scheme !== undefined), (scheme = v);
      else if (k === ":authority") (seen = authority !== undefined), (authority = v);
      else if (k === ":path") (seen = path !== undefined), (path = v);
      else if (k === ":protocol") (seen = protocol), (protocol = true);
      else throw new H2TranslateError(`unknown pseudo-header ${k}`);
      if (seen) throw new H2TranslateError(`pseudo-header ${k} repeated`);
      continue;
    }
    regularSeen = true;
    if (HAS_UPPER.test(k)) throw new H2TranslateError(`upper-case field name ${k}`);
    if (CONNECTION_SPECIFIC.has(k) && k !== "host") throw new H2TranslateError(`connection-specific field ${k}`);
    if (k === "te" && v.trim().toLowerCase() !== "trailers") throw new H2TranslateError(`te: ${v} (only "trailers" is allowed)`);
    if (k === "cookie") cookies = cookies === null ? v : `${cookies}; ${v}`;
    else if (k === "host") host ??= v;
    else headers.push([k, v]);
  }
  if (protocol) throw new H2TranslateError("extended CONNECT (:protocol) is not supported");
  if (!method) throw new H2TranslateError("missing :method");
  if (method !== "CONNECT" && (!scheme || !path)) throw new H2TranslateError("missing :scheme or :path");
  if (cookies !== null) headers.push(["cookie", cookies]);
  const hostValue = authority ?? host;
  if (hostValue) headers.unshift(["host", hostValue]);
  return { method, scheme: scheme ?? null, authority: authority ?? null, path: path ?? null, headers };
}

const HAS_UPPER = /[A-Z]/;

/** An HTTP/1 response's fields for HTTP/2: `:status` first, names lower-cased, connection-specific ones dropped. */
export function h1ResponseToH2(status: number, headers: HeaderList): HeaderList {
  const named = connectionNamed(headers);
  const out: HeaderList = [[":status", String(status)]];
  for (const [k, v] of headers) {
    const n = k.toLowerCase();
    if (CONNECTION_SPECIFIC.has(n) || named.has(n) || n === "te" || n === "trailer") continue;
    out.push([n, v]);
  }
  return out;
}

/** An HTTP/2 response's fields for HTTP/1: the status, and the regular fields (no pseudo-headers). */
export function h2ResponseToH1(fields: HeaderList): { status: number; headers: HeaderList } {
  let status = 0;
  const headers: HeaderList = [];
  for (const [k, v] of fields) {
    if (k === ":status") status = Number(v);
    else if (k.startsWith(":")) throw new H2TranslateError(`unknown response pseudo-header ${k}`);
    else headers.push([k, v]);
  }
  if (!Number.isInteger(status) || status < 100 || status > 999) throw new H2TranslateError("missing or invalid :status");
  return { status, headers };
}

/** Trailers travel as they are, minus pseudo-headers and fields no trailer may carry (framing, routing, auth). */
const NOT_IN_TRAILERS = new Set(["content-length", "transfer-encoding", "host", "content-type", "content-encoding", "authorization", "set-cookie", "te", "trailer", "connection"]);
export function trailerFields(fields: HeaderList): HeaderList {
  return fields.filter(([k]) => !k.startsWith(":") && !NOT_IN_TRAILERS.has(k.toLowerCase())).map(([k, v]) => [k.toLowerCase(), v]);
}

/** Whether the list has a Connection field (the one-pass translations skip building its set when not). */
function hasConnection(headers: HeaderList): boolean {
  for (let i = 0; i < headers.length; i++) {
    const k = headers[i]![0];
    if (k.length === 10 && k.toLowerCase() === "connection") return true;
  }
  return false;
}

/**
 * h1RequestToH2 as a flat list (`[name, value, ...]`, the codec's form), in one pass (the proxy's hot path). Same
 * fields, same order, same refusals; `bodyReframed`: the body goes whole with a length of its own, so the
 * request's Content-Length and Expect are left out (the caller adds the length).
 */
export function h1RequestToH2Flat(head: H1RequestHead, scheme: "http" | "https", authority?: string, bodyReframed = false): string[] {
  const named = hasConnection(head.headers) ? connectionNamed(head.headers) : null;
  let host = authority;
  for (const [k, v] of head.headers) {
    if (k.length === 4 && k.toLowerCase() === "host") {
      host ??= v.trim();
      break;
    }
  }
  if (!host) throw new H2TranslateError("the request has no Host: HTTP/2 needs an :authority");
  const o: string[] = head.method === "CONNECT" ? [":method", "CONNECT", ":authority", host] : [":method", head.method, ":scheme", scheme, ":authority", host, ":path", head.target || "/"];
  for (const [k, v] of head.headers) {
    const n = k.toLowerCase();
    if (CONNECTION_SPECIFIC.has(n) || (named !== null && named.has(n))) continue;
    if (bodyReframed && (n === "content-length" || n === "expect")) continue;
    if (n === "te") {
      if (v.split(",").some((x) => x.trim().toLowerCase() === "trailers")) o.push("te", "trailers");
      continue;
    }
    o.push(n, v);
  }
  return o;
}

/** h1ResponseToH2 as a flat list (see h1RequestToH2Flat). */
export function h1ResponseToH2Flat(status: number, headers: HeaderList): string[] {
  const named = hasConnection(headers) ? connectionNamed(headers) : null;
  const o: string[] = [":status", String(status)];
  for (const [k, v] of headers) {
    const n = k.toLowerCase();
    if (CONNECTION_SPECIFIC.has(n) || n === "te" || n === "trailer" || (named !== null && named.has(n))) continue;
    o.push(n, v);
  }
  return o;
}

/**
 * An HTTP/2 response head (flat fields) for HTTP/1: the status and the regular fields. Throws H2TranslateError on
 * a missing or invalid :status or an unknown pseudo-header.
 */
export function h2ResponseToH1Flat(fields: readonly string[]): { status: number; headers: HeaderList } {
  let status = 0;
  const headers: HeaderList = [];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const k = fields[i]!;
    if (k.charCodeAt(0) === 58) {
      if (k === ":status") status = Number(fields[i + 1]);
      else throw new H2TranslateError(`unknown response pseudo-header ${k}`);
    } else headers.push([k, fields[i + 1]!]);
  }
  if (!Number.isInteger(status) || status < 100 || status > 999) throw new H2TranslateError("missing or invalid :status");
  return { status, headers };
}

/** Trailers (flat fields) as an ordered list, pseudo-headers dropped. */
export function trailersFromFlat(fields: readonly string[]): HeaderList {
  const out: HeaderList = [];
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i]!.charCodeAt(0) !== 58) out.push([fields[i]!, fields[i + 1]!]);
  return out;
}
