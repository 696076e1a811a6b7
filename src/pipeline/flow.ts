import type { HeaderList, HttpVersion, RawHead } from "../core/http1/types.ts";
import type { Throttle } from "../core/proxy/endpoint.ts";

export type Scheme = "http" | "https";

/** The client end of a flow. */
export interface ClientInfo {
  /** Client IP (IPv4-mapped prefix stripped). */
  addr: string;
  port: number;
  /** Client label (process name for loopback clients, else the IP); resolved once per connection. */
  label: Promise<string>;
  /** The label once resolved (set by the proxy when the promise settles). */
  resolvedLabel?: string;
}

export interface FlowRequest {
  method: string;
  scheme: Scheme;
  /** Host name or IP literal, without brackets or port. */
  host: string;
  port: number;
  /** Origin-form target: path and query. */
  path: string;
  version: HttpVersion;
  /** End-to-end headers in wire order with original casing, as they will go upstream. */
  headers: HeaderList;
  /** The whole body, only when the flow is buffered (an addon set `bufferRequest`) or an addon supplied one. */
  body: Uint8Array | null;
}

export interface FlowResponse {
  status: number;
  reason: string;
  version: HttpVersion;
  headers: HeaderList;
  /** The whole body, only when buffered or when an addon answered the flow itself. */
  body: Uint8Array | null;
}

/**
 * When the phases of an exchange happened (performance.now() values; 0: it did not happen), set by the core, for
 * HAR timings: forward (the request left the addons for the upstream), send (its head was written upstream), sent
 * (its last byte was), firstByte (the response's first byte arrived). `conn` is the upstream connection it used.
 * Marked only for flows that are captured (`capture`).
 */
export interface FlowTiming {
  forward: number;
  send: number;
  sent: number;
  firstByte: number;
  /** The upstream connection (the core's UpstreamConn itself: no copy per flow), and whether it had been used before. */
  conn: { readonly id: number; readonly remoteAddr: string; readonly connectMs: number; readonly sslMs: number } | null;
  reused: boolean;
}

/** A capped copy of a body that streamed through, and its true size. */
export class BodyCapture {
  chunks: Uint8Array[] = [];
  kept = 0;
  size = 0;
  /** Where the body starts in chunks[0]: a read kept whole by addRead (no view made of it); else 0. */
  firstAt = 0;
  constructor(readonly limit: number) {}
  add(data: Uint8Array): void {
    this.size += data.length;
    if (this.kept >= this.limit) return;
    const take = Math.min(data.length, this.limit - this.kept);
    // a copy: the source buffer may be reused, queued or released (Endpoint.release). Not `data.slice()`: on a
    // Buffer (what Bun's sockets hand out) that is a view, which would also keep the whole read alive.
    const copy = new Uint8Array(take);
    copy.set(take === data.length ? data : data.subarray(0, take));
    this.chunks.push(copy);
    this.kept += take;
  }
  /**
   * add(buf.subarray(at)) without the copy when all of it is kept: only for a socket read (Bun hands out a new
   * buffer per read) that nothing writes to or releases afterwards; the view keeps that read alive with the flow.
   */
  addRead(buf: Uint8Array, at: number): void {
    const n = buf.length - at;
    if (n === 0 || this.kept + n > this.limit) return this.add(buf.subarray(at));
    this.size += n;
    // the first chunk is kept with its offset (firstAt), not as a view: a subarray() costs more than the copy
    // the store makes of it (see bytesFrom)
    if (this.chunks.length === 0) this.firstAt = at;
    this.chunks.push(at === 0 || this.chunks.length === 0 ? buf : buf.subarray(at));
    this.kept += n;
  }
  bytes(): Uint8Array | null {
    if (this.size === 0) return null;
    const first = this.firstAt;
    if (this.chunks.length === 1) return first === 0 ? this.chunks[0]! : this.chunks[0]!.subarray(first);
    const out = new Uint8Array(this.kept);
    let o = 0;
    for (let i = 0; i < this.chunks.length; i++) {
      const c = i === 0 && first !== 0 ? this.chunks[0]!.subarray(first) : this.chunks[i]!;
      out.set(c, o);
      o += c.length;
    }
    return out;
  }
  /** bytes() without a view: the kept bytes are those of the answer from `firstAt` on (0 for more than one chunk). */
  bytesFrom(): Uint8Array | null {
    if (this.size === 0 || this.chunks.length !== 1) return this.bytes();
    return this.chunks[0]!;
  }
  /** The offset that goes with bytesFrom()'s answer. */
  get bytesFromAt(): number {
    return this.size !== 0 && this.chunks.length === 1 ? this.firstAt : 0;
  }
  reset(): void {
    this.chunks = [];
    this.kept = 0;
    this.size = 0;
    this.firstAt = 0;
  }
}

let nextFlowId = 1;

export function defaultPort(scheme: Scheme): number {
  return scheme === "https" ? 443 : 80;
}

/** The last hostPort() answer: a proxy mostly talks to a few hosts, often one. */
let lastHP = { scheme: "", host: "", port: 0, value: "" };

/** `host[:port]` for a URL or a Host header: IPv6 in brackets, the scheme's default port left out. */
export function hostPort(scheme: Scheme, host: string, port: number): string {
  const last = lastHP;
  if (port === last.port && host === last.host && scheme === last.scheme) return last.value;
  const h = host.includes(":") ? `[${host}]` : host;
  const value = port === defaultPort(scheme) ? h : `${h}:${port}`;
  lastHP = { scheme, host, port, value };
  return value;
}

/**
 * One request/response exchange as it moves through the addon pipeline.
 * Addons read and change `request` and `response`; an addon that answers by itself sets `response`
 * (with a body) during the request phase, and the remaining request-phase hooks are skipped.
 */
export class Flow {
  readonly id = String(nextFlowId++);
  readonly startedAt = Date.now();
  readonly t0 = performance.now();
  response: FlowResponse | null = null;
  /** Set when the flow failed (upstream unreachable, aborted, client gone...). */
  error: string | null = null;
  /** Extra fields recorded into the captured entry (e.g. map_local_rule). */
  readonly extra: Record<string, unknown> = {};
  /** Whether the flow is stored; the capture addon decides in requestHeaders. */
  capture = false;
  /** Ask the core to read the whole request body before the `request` hooks (breakpoints, scripts...). */
  bufferRequest = false;
  /** Ask the core to read the whole response body before the `response` hooks and before sending it on. */
  bufferResponse = false;
  /**
   * When set, a buffered response body larger than this is not held: what was read goes on to the client and the
   * rest streams, and the `response` hooks then see `response.body === null` (a soft limit for addons that can do
   * without the body, such as response scripts). Unset: a body past the core's maximum fails the flow (502).
   */
  bufferResponseMax: number | null = null;
  /** Set by the core when the response was produced by an addon, not by the upstream. */
  answeredByAddon = false;
  /** True when the flow is a WebSocket upgrade. */
  websocket = false;
  readonly reqBody: BodyCapture;
  readonly resBody: BodyCapture;
  /** ms since startedAt when the response finished (or the flow failed). */
  durationMs = 0;
  /** Rate limits for the response bytes to the client and the request bytes to the upstream (throttle addon). */
  throttleDown: Throttle | null = null;
  throttleUp: Throttle | null = null;
  /** Id of the captured entry, once stored. */
  entryId: number | null = null;
  /** When the phases of the exchange happened (set by the core; see FlowTiming). */
  readonly timing: FlowTiming = { forward: 0, send: 0, sent: 0, firstByte: 0, conn: null, reused: false };
  /** The request and final response heads as received (see RawHead), for forwarding and capturing them as they are. */
  reqRaw: RawHead | null = null;
  resRaw: RawHead | null = null;
  /** Which framing and hop-by-hop fields the request head held as parsed (see RequestHead.present). */
  reqPresent: number | undefined = undefined;
  /** Called by the core if the client goes away while an addon holds the flow (intercepts). */
  onClientGone: (() => void) | null = null;

  /** What the URL was made of when the client asked: the original URL is built only if someone wants it. */
  private readonly orig: { scheme: Scheme; host: string; port: number; path: string };
  private origUrl: string | null = null;

  constructor(readonly client: ClientInfo, public request: FlowRequest, bodyLimit: number) {
    this.orig = { scheme: request.scheme, host: request.host, port: request.port, path: request.path };
    this.reqBody = new BodyCapture(bodyLimit);
    this.resBody = new BodyCapture(bodyLimit);
  }

  /** Absolute URL of the request as it stands now (default port omitted). */
  get url(): string {
    const r = this.request;
    return `${r.scheme}://${hostPort(r.scheme, r.host, r.port)}${r.path}`;
  }

  /** The URL as the client asked for it, before any rewrite. */
  get originalUrl(): string {
    if (this.origUrl === null) {
      const o = this.orig;
      this.origUrl = `${o.scheme}://${hostPort(o.scheme, o.host, o.port)}${o.path}`;
    }
    return this.origUrl;
  }

  /** Whether the URL is still the one the client asked for (compared part by part: no URL string is built). */
  get urlUnchanged(): boolean {
    const r = this.request;
    const o = this.orig;
    return r.scheme === o.scheme && r.port === o.port && r.host === o.host && r.path === o.path;
  }
}
