import type { Addon, HookResult } from "../../pipeline/addon.ts";
import type { Flow } from "../../pipeline/flow.ts";
import type { InterceptHosts } from "./hosts.ts";
import type { InterceptService, PausedBy } from "./intercepts.ts";
import type { BreakpointStore } from "./store.ts";

/**
 * Breakpoints and intercept hosts (spec 4.4-4.6). A matching flow is marked in `requestHeaders` (so the core
 * buffers its body) and paused in `request`; a response breakpoint marks the flow in `responseHeaders` and pauses
 * it in `response`, before anything is sent to the client.
 *
 * A breakpoint matches the URL the client asked for or the URL as it stands (after earlier addons); an intercept
 * host matches the request's host. The request phase prefers a breakpoint over an intercept host when both match.
 */
export class BreakpointsAddon implements Addon {
  readonly name = "breakpoints";
  private readonly requestPause = new WeakMap<Flow, PausedBy>();
  private readonly responsePause = new WeakMap<Flow, PausedBy>();

  constructor(
    private readonly breakpoints: BreakpointStore,
    private readonly hosts: InterceptHosts,
    private readonly intercepts: InterceptService,
  ) {}

  requestHeaders(flow: Flow): void {
    // hands off ignored hosts (their CONNECTs are tunnelled; plain-HTTP flows to them are not paused either)
    if (flow.extra.ignored === true) return;
    const bp = this.breakpoints.isEmpty ? null : this.breakpoints.match("request", urlsOf(flow));
    let by: PausedBy | null = bp ? { breakpoint: bp.pattern } : null;
    if (!by) {
      const host = this.hosts.match(flow.request.host);
      if (host === null) return;
      by = { intercept_host: host };
    }
    this.requestPause.set(flow, by);
    flow.bufferRequest = true;
  }

  request(flow: Flow): HookResult {
    const by = this.requestPause.get(flow);
    if (!by) return;
    this.requestPause.delete(flow);
    return this.intercepts.hold(flow, "request", by);
  }

  responseHeaders(flow: Flow): void {
    if (this.breakpoints.isEmpty || flow.websocket || flow.extra.ignored === true || this.intercepts.aborted.has(flow)) return;
    const bp = this.breakpoints.match("response", urlsOf(flow));
    if (!bp) return;
    this.responsePause.set(flow, { breakpoint: bp.pattern });
    flow.bufferResponse = true;
  }

  response(flow: Flow): HookResult {
    const by = this.responsePause.get(flow);
    if (!by) return;
    this.responsePause.delete(flow);
    // a response without a body slot was already sent (the core streams bodiless responses even when buffering
    // was asked for): nothing left to hold
    if (!flow.response || flow.response.body === null || this.intercepts.aborted.has(flow)) return;
    return this.intercepts.hold(flow, "response", by);
  }

  error(flow: Flow): void {
    this.requestPause.delete(flow);
    this.responsePause.delete(flow);
    this.intercepts.failed(flow);
  }
}

function urlsOf(flow: Flow): string[] {
  const now = flow.url;
  return flow.urlUnchanged ? [now] : [flow.originalUrl, now];
}
