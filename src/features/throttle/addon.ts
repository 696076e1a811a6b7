import type { Addon, ConnectInfo, HookResult } from "../../pipeline/addon.ts";
import type { Flow } from "../../pipeline/flow.ts";
import type { Throttler } from "./throttler.ts";

/**
 * Bandwidth throttling and latency: attaches the flow's upload throttle and waits the rule's up delay just before
 * the request goes upstream; attaches the download throttle and waits the down delay when the response head is
 * in (also for responses answered by an addon, whose request hooks may have been skipped).
 */
export class ThrottleAddon implements Addon {
  readonly name = "throttle";
  constructor(private readonly throttler: Throttler) {}

  /** Tunnels (ignored hosts) carry no flows to match rules against: they follow the global cap only. */
  connect(info: ConnectInfo): void {
    this.throttler.onConnect(info);
  }

  request(flow: Flow): HookResult {
    return this.throttler.onRequest(flow);
  }

  responseHeaders(flow: Flow): HookResult {
    return this.throttler.onResponseHeaders(flow);
  }
}
