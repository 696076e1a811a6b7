import { getHeader, unchangedFields } from "../../core/http1/headers.ts";
import type { HeaderList, RawHead } from "../../core/http1/types.ts";
import type { Addon } from "../../pipeline/addon.ts";
import type { Flow } from "../../pipeline/flow.ts";
import type { NewEntry } from "../../store/types.ts";
import type { CaptureControl } from "./control.ts";
import { harMeasure } from "./har-measure.ts";

export interface EntrySink {
  add(e: NewEntry): number;
}

/**
 * Capture: decides at the start of each flow whether it is recorded (capture on, client not ignored), which lets
 * the core keep capped body copies; runs first, so later addons can opt a flow out. RecordAddon writes the finished
 * flow (or failure) to the capture store.
 */
export class CaptureAddon implements Addon {
  readonly name = "capture";
  private readonly storedListeners = new Set<(flow: Flow, id: number) => void>();

  /** Be told the new entry id when a flow is stored (replay, WebSocket logId); returns an unsubscribe. */
  onStored(listener: (flow: Flow, id: number) => void): () => void {
    this.storedListeners.add(listener);
    return () => this.storedListeners.delete(listener);
  }

  constructor(
    private readonly control: CaptureControl,
    private readonly store: EntrySink,
    private readonly isIgnoredClient: (label: string) => boolean,
    /** tapwire's own API token: redacted wherever a request carries it in Authorization. */
    private readonly apiToken?: string,
  ) {}

  /**
   * The client label is resolved when the connection opens; the first flow on a connection waits for it here
   * (a /proc lookup, well under a millisecond), so ignored clients are decided up front and the entry can be
   * written synchronously when the response ends — a client that got its response finds the entry in the API.
   */
  requestHeaders(flow: Flow): void | Promise<void> {
    flow.capture = this.control.capturing;
    if (!flow.capture) return;
    const label = flow.client.resolvedLabel;
    if (label !== undefined) {
      flow.capture = !this.isIgnoredClient(label);
      return;
    }
    return flow.client.label.then(
      (l) => {
        flow.client.resolvedLabel ??= l;
        if (this.isIgnoredClient(l)) flow.capture = false;
      },
      () => {
        flow.client.resolvedLabel ??= flow.client.addr;
        if (this.isIgnoredClient(flow.client.addr)) flow.capture = false;
      },
    );
  }

  /** Called by RecordAddon, which runs after every other addon. */
  record(flow: Flow): void {
    if (!flow.capture || !this.control.capturing) return;
    const label = flow.client.resolvedLabel;
    if (label !== undefined) return this.write(flow, label);
    // the flow failed (e.g. the client hung up) before its label was known: record once it is
    flow.client.label.then(
      (l) => this.write(flow, l),
      () => this.write(flow, flow.client.addr),
    );
  }

  private write(flow: Flow, label: string): void {
    if (this.isIgnoredClient(label)) return;
    const e = toEntry(flow, label);
    if (this.apiToken) redactToken(e, this.apiToken);
    const id = this.store.add(e);
    flow.entryId = id;
    for (const l of this.storedListeners) l(flow, id);
  }
}

/** The recording half of capture: last in the pipeline, so the entry shows what every addon did to the flow. */
export class RecordAddon implements Addon {
  readonly name = "capture-record";
  constructor(private readonly capture: CaptureAddon) {}
  response(flow: Flow): void {
    this.capture.record(flow);
  }
  error(flow: Flow): void {
    this.capture.record(flow);
  }
}

export function toEntry(flow: Flow, label: string): NewEntry {
  const res = flow.response;
  const url = flow.url;
  // the store encodes the entry at once (entry-codec.ts): the flow's own extras can be handed over as they are
  const extra = flow.urlUnchanged ? flow.extra : { ...flow.extra, original_url: flow.originalUrl };
  return {
    method: flow.request.method,
    url,
    host: flow.request.host,
    status_code: res?.status ?? 0,
    content_type: (res && getHeader(res.headers, "content-type")) ?? "",
    duration_ms: flow.durationMs || Math.round(performance.now() - flow.t0),
    timestamp: flow.startedAt,
    client_addr: label,
    has_response: res !== null,
    req_headers: flow.request.headers,
    res_headers: res?.headers ?? [],
    req_fields: asReceived(flow.request.headers, flow.reqRaw),
    res_fields: res ? asReceived(res.headers, flow.resRaw) : null,
    req_body: flow.request.body ? flow.request.body.subarray(0, flow.reqBody.limit) : flow.reqBody.bytes(),
    req_body_size: flow.request.body ? flow.request.body.length : flow.reqBody.size,
    res_body: res?.body ? res.body.subarray(0, flow.resBody.limit) : flow.resBody.bytesFrom(),
    res_body_size: res?.body ? res.body.length : flow.resBody.size,
    res_body_at: res?.body ? 0 : flow.resBody.bytesFromAt,
    error: flow.error ?? undefined,
    extra,
    reason: res && res.reason ? res.reason : undefined,
    har: harMeasure(flow),
  };
}

/** A request to tapwire's own API through the proxy: its bearer token never reaches the capture. */
export function redactToken(e: NewEntry, token: string): void {
  const list = e.req_headers;
  let i = 0;
  for (; i < list.length; i++) {
    const [n, v] = list[i]!;
    if (n.length === 13 && v.includes(token) && n.toLowerCase() === "authorization") break;
  }
  if (i === list.length) return; // the common case: nothing to redact, nothing copied
  e.req_headers = list.map(([n, v]): [string, string] => (n.length === 13 && n.toLowerCase() === "authorization" && v.includes(token) ? [n, v.split(token).join("[redacted]")] : [n, v]));
  e.req_fields = null; // the bytes as received hold the token
}

/** The head's field lines as received when the list still says exactly that (the store then keeps the bytes). */
function asReceived(headers: HeaderList, raw: RawHead | null): RawHead | null {
  return raw !== null && unchangedFields(headers, raw.fields) ? raw : null;
}
