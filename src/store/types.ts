/** Header list in wire order with original casing. */
export type HeaderList = [string, string][];

/**
 * A header block as it crossed the wire: the field lines in buf[fieldsAt..end), each ending CRLF, then the empty
 * line. (The proxy's RawHead has this shape.)
 */
export interface RawFields {
  buf: Uint8Array;
  fieldsAt: number;
  end: number;
}

/** How a stored body string is to be read. */
export type BodyEncoding = "utf8" | "base64";

/** What the proxy hands to the capture store when a flow is finished (or failed). */
export interface NewEntry {
  method: string;
  /** Absolute URL as the client asked for it (after any rewrite the client never saw: the original URL). */
  url: string;
  /** Host name without port. */
  host: string;
  /** 0 when there is no response. */
  status_code: number;
  /** Response Content-Type header value, "" if none. */
  content_type: string;
  duration_ms: number;
  /** Request start, ms since epoch. */
  timestamp: number;
  /** Client label: process name for loopback clients, else remote IP. */
  client_addr: string;
  has_response: boolean;
  req_headers: HeaderList;
  res_headers: HeaderList;
  /**
   * The field lines req_headers / res_headers were parsed from, when the lists are still exactly what they say:
   * the store keeps these bytes and parses them when the entry is read back, instead of encoding every string on
   * the proxy's hot path. The lists are used otherwise.
   */
  req_fields?: RawFields | null;
  res_fields?: RawFields | null;
  /** Captured bytes as they crossed the wire (after de-chunking), capped at the body limit; null if no body. */
  req_body: Uint8Array | null;
  /** True size in bytes of the request body on the wire (may exceed req_body.length). */
  req_body_size: number;
  res_body: Uint8Array | null;
  res_body_size: number;
  /**
   * The response body is res_body from this offset on (default 0): the proxy hands over a socket read that holds
   * the head before the body without making a view of it. Only the bytes from here on are stored.
   */
  res_body_at?: number;
  /** Short description of a failure (upstream refused, TLS verification, timeout, aborted...). */
  error?: string;
  /** Extra fields shown in the detail form (e.g. map_local_rule, intercepted, ...). JSON-serialisable. */
  extra?: Record<string, unknown>;
  /** Response reason phrase; stored as the extra field `reason` (after `extra`'s own fields). */
  reason?: string;
  /**
   * Set for entries that come from elsewhere (a HAR import): req_body / res_body are already in their stored form
   * (decoded from any Content-Encoding), so the writer keeps them as they are, with these encodings and flags,
   * instead of decoding them from the headers. Unset for captured traffic.
   */
  stored_bodies?: StoredBodies;
  /**
   * What the proxy measured for HAR (its phases and the upstream connection), encoded in the entry's binary record
   * and turned into the extra fields `timings`, `server_ip`, `connection_id`, `http_version` and
   * `response_http_version` by the writer, off the proxy's thread (see entry-codec.ts).
   */
  har?: HarMeasure | null;
}

/** NewEntry.har: phases in ms (-1: did not apply), the upstream connection, versions other than HTTP/1.1. */
export interface HarMeasure {
  blocked: number;
  connect: number;
  ssl: number;
  send: number;
  wait: number;
  receive: number;
  /** 0: no upstream connection. */
  connection_id: number;
  server_ip: string | null;
  http_version: string | null;
  response_http_version: string | null;
}

/** How the bodies of an imported entry are stored (see NewEntry.stored_bodies). */
export interface StoredBodies {
  req_encoding: BodyEncoding;
  res_encoding: BodyEncoding;
  req_decoded_from: string;
  res_decoded_from: string;
  req_truncated: boolean;
  res_truncated: boolean;
}

/** The key NewEntry.stored_bodies travels under inside the extras JSON (the writer takes it out again). */
export const STORED_BODIES_KEY = "__tapwire_stored_bodies";

/** Summary form (spec 2.3) plus a few extra fields. */
export interface EntrySummary {
  id: number;
  method: string;
  url: string;
  host: string;
  status_code: number;
  content_type: string;
  duration_ms: number;
  timestamp: number;
  client_addr: string;
  has_response: boolean;
  /** extra: present only when the flow failed */
  error?: string;
  /** extra: true size of the response body on the wire (absent when no body row was stored) */
  res_body_size?: number;
}

/** Detail form (spec 2.3) plus extra fields. */
export interface EntryDetail extends EntrySummary {
  req_headers: HeaderList;
  /** Body decoded from Content-Encoding (gzip, deflate, br, zstd); UTF-8 text or base64, see req_body_encoding. */
  req_body: string;
  res_headers: HeaderList;
  res_body: string;
  req_body_encoding: BodyEncoding;
  res_body_encoding: BodyEncoding;
  /** True size on the wire (before decoding, before capping). */
  req_body_size: number;
  res_body_size: number;
  /** True when the captured copy was capped at the body limit. */
  req_body_truncated: boolean;
  res_body_truncated: boolean;
  /** Content-Encoding that was removed to produce the stored body ("" if none or decoding failed). */
  req_body_decoded_from: string;
  res_body_decoded_from: string;
  /** Extra fields recorded by addons (e.g. map_local_rule). */
  [extra: string]: unknown;
}

export interface ListQuery {
  limit?: number; // default 50, capped at 500
  offset?: number; // default 0
  host?: string; // substring of host
  method?: string; // exact (case-insensitive)
  status?: number; // exact; sets min and max
  status_min?: number;
  status_max?: number;
  path?: string; // substring of the URL path (no query)
  search?: string; // substring across URL and decoded bodies
  has_error?: boolean; // true: status >= 400; false: status < 400
  since_id?: number; // id > since_id
  since?: number; // timestamp >= since
  client?: string; // exact client label (client_addr)
  /** "desc" (newest first) is the default, except that since_id switches the default to "asc". */
  order?: "asc" | "desc";
}

export interface ListResult {
  items: EntrySummary[];
  total: number;
  offset: number;
  limit: number;
}
