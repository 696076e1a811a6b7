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
  const pseudo = new Map<string, string>();
  const headers: HeaderList = [];
  const cookies: string[] = [];
  let host: string | null = null;
  let regularSeen = false;
  for (const [k, v] of fields) {
    if (k.startsWith(":")) {
      if (regularSeen) throw new H2TranslateError(`pseudo-header ${k} after a regular field`);
      if (![":method", ":scheme", ":authority", ":path", ":protocol"].includes(k)) throw new H2TranslateError(`unknown pseudo-header ${k}`);
      if (pseudo.has(k)) throw new H2TranslateError(`pseudo-header ${k} repeated`);
      pseudo.set(k, v);
      continue;
    }
    regularSeen = true;
    if (k !== k.toLowerCase()) throw new H2TranslateError(`upper-case field name ${k}`);
    if (CONNECTION_SPECIFIC.has(k) && k !== "host") throw new H2TranslateError(`connection-specific field ${k}`);
    if (k === "te" && v.trim().toLowerCase() !== "trailers") throw new H2TranslateError(`te: ${v} (only "trailers" is allowed)`);
    if (k === "cookie") cookies.push(v);
    else if (k === "host") host ??= v;
    else headers.push([k, v]);
  }
  if (pseudo.has(":protocol")) throw new H2TranslateError("extended CONNECT (:protocol) is not supported");
  const method = pseudo.get(":method");
  if (!method) throw new H2TranslateError("missing :method");
  const authority = pseudo.get(":authority") ?? null;
  if (method !== "CONNECT" && (!pseudo.get(":scheme") || !pseudo.get(":path"))) throw new H2TranslateError("missing :scheme or :path");
  if (cookies.length) headers.push(["cookie", cookies.join("; ")]);
  const hostValue = authority ?? host;
  if (hostValue) headers.unshift(["host", hostValue]);
  return { method, scheme: pseudo.get(":scheme") ?? null, authority, path: pseudo.get(":path") ?? null, headers };
}

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
