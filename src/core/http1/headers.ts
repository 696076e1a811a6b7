// Helpers over HeaderList (wire order, original casing). Names compare case-insensitively.

import type { Framing, HeaderList, HttpVersion } from "./types.ts";
import { F_CONTENT_LENGTH, F_HOP, F_HOST, F_TRANSFER_ENCODING } from "./fields.ts";

/** `a` equals `lowerB` (lower case) ignoring ASCII case, without allocating a lower-cased copy. */
function same(a: string, lowerB: string): boolean {
  const n = a.length;
  if (n !== lowerB.length) return false;
  if (a === lowerB) return true;
  for (let i = 0; i < n; i++) {
    const c = a.charCodeAt(i);
    const d = lowerB.charCodeAt(i);
    if (c !== d && !(c >= 0x41 && c <= 0x5a && c + 0x20 === d)) return false;
  }
  return true;
}

/** Value of the first header called `name`, or undefined. */
export function getHeader(headers: HeaderList, name: string): string | undefined {
  const n = name.toLowerCase();
  for (let i = 0; i < headers.length; i++) if (same(headers[i][0], n)) return headers[i][1];
  return undefined;
}

/** Values of all headers called `name`, in wire order. */
export function getHeaderAll(headers: HeaderList, name: string): string[] {
  const n = name.toLowerCase();
  const out: string[] = [];
  for (let i = 0; i < headers.length; i++) if (same(headers[i][0], n)) out.push(headers[i][1]);
  return out;
}

/**
 * Set `name` to `value` in place: the first existing header of that name is replaced (at its
 * position, spelled as `name`), later ones are removed; appended if there was none.
 */
export function setHeader(headers: HeaderList, name: string, value: string): void {
  const n = name.toLowerCase();
  let w = 0;
  let found = false;
  for (let r = 0; r < headers.length; r++) {
    const h = headers[r];
    if (same(h[0], n)) {
      if (found) continue;
      found = true;
      headers[w++] = [name, value];
    } else {
      headers[w++] = h;
    }
  }
  headers.length = w;
  if (!found) headers.push([name, value]);
}

/** Remove every header called `name`, in place. Returns true if any was removed. */
export function removeHeader(headers: HeaderList, name: string): boolean {
  const n = name.toLowerCase();
  let w = 0;
  for (let r = 0; r < headers.length; r++) {
    if (!same(headers[r][0], n)) headers[w++] = headers[r];
  }
  const removed = w !== headers.length;
  headers.length = w;
  return removed;
}

/** Does any `name` header hold `token` in its comma-separated list? (case-insensitive) */
export function hasToken(headers: HeaderList, name: string, token: string): boolean {
  const n = name.toLowerCase();
  const t = token.toLowerCase();
  for (let i = 0; i < headers.length; i++) {
    if (!same(headers[i][0], n)) continue;
    const v = headers[i][1];
    if (v.length === t.length && v.toLowerCase() === t) return true;
    for (const part of v.split(",")) {
      if (part.trim().toLowerCase() === t) return true;
    }
  }
  return false;
}

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

/** The HOP_BY_HOP names by length: a name is compared only with those of its length, without a lower-cased copy. */
const HOP_BY_HOP_BY_LENGTH: (string[] | undefined)[] = [];
for (const n of HOP_BY_HOP) (HOP_BY_HOP_BY_LENGTH[n.length] ??= []).push(n);

/** The hop-by-hop field `name` is (lower case), or null. */
function hopName(name: string): string | null {
  const candidates = HOP_BY_HOP_BY_LENGTH[name.length];
  if (candidates === undefined) return null;
  for (let i = 0; i < candidates.length; i++) if (same(name, candidates[i]!)) return candidates[i]!;
  return null;
}

/**
 * A copy of `headers` without hop-by-hop fields (RFC 9110 7.6.1): Connection and every field it
 * names, Keep-Alive, Proxy-Connection, Proxy-Authenticate, Proxy-Authorization, TE, Trailer,
 * Transfer-Encoding and Upgrade.
 */
export function stripHopByHop(headers: HeaderList): HeaderList {
  let named: Set<string> | null = null;
  let hop = false;
  for (let i = 0; i < headers.length; i++) {
    const n = hopName(headers[i][0]);
    if (n === null) continue;
    hop = true;
    if (n !== "connection") continue;
    for (const part of headers[i][1].split(",")) {
      const t = part.trim().toLowerCase();
      if (t !== "") (named ??= new Set()).add(t);
    }
  }
  // the common case: nothing to remove (the pairs are shared; callers only add or remove entries of the list)
  if (!hop) return headers.slice();
  const out: HeaderList = [];
  for (let i = 0; i < headers.length; i++) {
    const n = headers[i][0].toLowerCase();
    if (HOP_BY_HOP.has(n) || (named !== null && named.has(n))) continue;
    out.push(headers[i]);
  }
  return out;
}

/**
 * Whether the connection persists after this message: HTTP/1.1 unless `Connection: close`;
 * HTTP/1.0 only with `Connection: keep-alive` (and no close).
 */
export function wantsKeepAlive(version: HttpVersion | string, headers: HeaderList): boolean {
  if (hasToken(headers, "connection", "close")) return false;
  if (version === "HTTP/1.1") return true;
  return hasToken(headers, "connection", "keep-alive");
}

/** Does `headers` still hold exactly the fields of a RawHead's flat snapshot (name0, value0, ...), in order? */
export function unchangedFields(headers: HeaderList, fields: readonly string[]): boolean {
  if (headers.length * 2 !== fields.length) return false;
  for (let i = 0, k = 0; i < headers.length; i++, k += 2) {
    const h = headers[i]!;
    if (h[0] !== fields[k] || h[1] !== fields[k + 1]) return false;
  }
  return true;
}

/**
 * Would forwarding these fields as they are say the same as the rebuilt head a proxy sends (hop-by-hop fields
 * removed, framing fields rewritten from `framing`)? True when there is no hop-by-hop field but the framing ones,
 * and those say exactly what `framing` says: one `Content-Length: <length>` for a length, one
 * `Transfer-Encoding: chunked` for chunked, neither for no body. With `needHost`, exactly one Host field too.
 */
export function forwardableAsIs(headers: HeaderList, framing: Framing, needHost: boolean, present?: number): boolean {
  if (present !== undefined) {
    // what the parser saw in this very list (the caller checked it is unchanged): most heads need no scan
    if (present & F_HOP) return false;
    if ((present & (F_CONTENT_LENGTH | F_TRANSFER_ENCODING)) === 0) {
      // a request parser refuses a second Host, so the bit says "exactly one"
      return framing.kind === "none" && (!needHost || (present & F_HOST) !== 0);
    }
  }
  let hosts = 0;
  let lengths = 0;
  let codings = 0;
  for (let i = 0; i < headers.length; i++) {
    const name = headers[i]![0];
    const n = name.length;
    if (n === 4) {
      if (same(name, "host")) hosts++;
    } else if (n === 14 && same(name, "content-length")) {
      if (framing.kind !== "length" || ++lengths > 1 || headers[i]![1] !== String(framing.length)) return false;
    } else if (n === 17 && same(name, "transfer-encoding")) {
      if (framing.kind !== "chunked" || ++codings > 1 || headers[i]![1] !== "chunked") return false;
    } else if (hopName(name) !== null) {
      return false;
    }
  }
  if (needHost && hosts !== 1) return false;
  if (framing.kind === "length") return lengths === 1;
  if (framing.kind === "chunked") return codings === 1;
  return framing.kind === "none" && lengths === 0 && codings === 0;
}
