import type { Addon, ConnectInfo } from "../../pipeline/addon.ts";
import type { Flow } from "../../pipeline/flow.ts";
import type { HostSet } from "./lists.ts";

/**
 * Ignored hosts (spec 4.6): a CONNECT to an ignored host becomes a byte-for-byte tunnel (no interception),
 * and plain-HTTP requests to one are proxied without capture. Ignored clients are handled by the capture addon
 * (the client label is only known once resolved).
 */
export class IgnoreHostsAddon implements Addon {
  readonly name = "ignore-hosts";
  constructor(private readonly hosts: HostSet) {}

  connect(info: ConnectInfo): void {
    if (this.hosts.matches(info.host)) info.tunnel = true;
  }

  requestHeaders(flow: Flow): void {
    if (this.hosts.matches(flow.request.host)) {
      flow.capture = false;
      flow.extra.ignored = true;
    }
  }
}
