import type { Throttle } from "../core/proxy/endpoint.ts";
import type { Flow } from "./flow.ts";

/** A hook may finish synchronously (the fast path) or return a promise (a paused flow, a delay...). */
export type HookResult = void | Promise<void>;

/** What a CONNECT is about to do; an addon may ask for a byte-for-byte tunnel (no interception, no capture). */
export interface ConnectInfo {
  host: string;
  port: number;
  clientAddr: string;
  /** Set to true to tunnel without interception. */
  tunnel: boolean;
  /** Rate limits for a tunnel's bytes (server to client, client to server); set by the throttle addon. */
  throttleDown?: Throttle | null;
  throttleUp?: Throttle | null;
}

/**
 * The one interface every feature implements (after mitmproxy's addons). The proxy core turns bytes into these
 * events; the pipeline calls them on every addon in one fixed order (the FEATURES list in the features folder's index.ts; pipeline/order.ts orders their addons).
 *
 * - `connect`: a CONNECT request arrived (before TLS); may set `tunnel`.
 * - `requestHeaders`: the request head is parsed; the body has not been read. Set `flow.bufferRequest` to get
 *   the whole body in `request`. Setting `flow.response` answers the flow: later request-phase hooks are skipped.
 * - `request`: just before the request goes upstream (body present only when buffered).
 * - `responseHeaders`: the response head arrived; set `flow.bufferResponse` to get the whole body in `response`
 *   before it is sent to the client.
 * - `response`: the response is complete (streamed flows: after it was sent; buffered: before).
 * - `error`: the flow failed (`flow.error` says why); it may still have a response (a 502 the core sent).
 */
export interface Addon {
  readonly name: string;
  connect?(info: ConnectInfo): void;
  requestHeaders?(flow: Flow): HookResult;
  request?(flow: Flow): HookResult;
  responseHeaders?(flow: Flow): HookResult;
  response?(flow: Flow): HookResult;
  error?(flow: Flow): HookResult;
}
