/** Header fields in wire order, original casing preserved. */
export type HeaderList = [string, string][];

/** HTTP/2 only ever appears on flows (a client or origin speaking HTTP/2), never from the HTTP/1 parser. */
export type HttpVersion = "HTTP/1.1" | "HTTP/1.0" | "HTTP/2";

export interface RequestHead {
  method: string;
  target: string;
  version: HttpVersion;
  headers: HeaderList;
  /** The head as received (set by the parser). */
  raw?: RawHead | null;
  /** Which framing and hop-by-hop fields `headers` held as parsed (F_ bits of fields.ts); unset: unknown. */
  present?: number;
}

export interface ResponseHead {
  version: HttpVersion;
  status: number;
  reason: string;
  headers: HeaderList;
  /** The head as received (set by the parser; null when lenient parsing repaired it). */
  raw?: RawHead | null;
  /** Which framing and hop-by-hop fields `headers` held as parsed (F_ bits of fields.ts); unset: unknown. */
  present?: number;
}

/**
 * Where a head lies in the bytes it was parsed from, kept so that a head nobody changed can be forwarded (and
 * captured) without serialising it again. `fields` snapshots the parsed list: while the list still matches it,
 * `buf[fieldsAt..end)` says the same. Offsets, not views: most heads are never looked at again.
 */
export interface RawHead {
  /** The bytes the head was parsed from (the head is buf[start..end), CRLF throughout). */
  buf: Uint8Array;
  start: number;
  /** Offset in `buf` of the first field line (just past the start line). */
  fieldsAt: number;
  /** Offset in `buf` just past the empty line that ends the head. */
  end: number;
  /** Names and values as parsed, flat: name0, value0, name1, value1, ... */
  fields: string[];
}

/** How the message body is delimited (RFC 9112 section 6.3). */
export type Framing =
  | { kind: "none" }
  | { kind: "length"; length: number }
  | { kind: "chunked" }
  | { kind: "close" };

/**
 * A protocol error. `status` is the status code a proxy should answer with:
 * 400, 431, 501, 505 for bad requests, 502 for bad upstream responses.
 */
export class HttpParseError extends Error {
  constructor(
    message: string,
    public status: number,
  ) {
    super(message);
    this.name = "HttpParseError";
  }
}
