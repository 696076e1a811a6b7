import { setHeader } from "../../core/http1/headers.ts";
import type { Addon } from "../../pipeline/addon.ts";
import { type Flow, hostPort } from "../../pipeline/flow.ts";
import type { MapRemoteStore } from "./store.ts";

/**
 * Map Remote (spec 4.11): just before a request goes upstream (the `request` hook, after breakpoints had their
 * say), a matching enabled rule (master flag on) rewrites its scheme, host, port and path — the query is kept —
 * and the Host header follows the destination unless the rule preserves the original. The flow then connects to
 * the new destination (TLS or not per dest_scheme); the entry shows the rewritten URL, original_url and
 * map_remote_rule.
 */
export class MapRemoteAddon implements Addon {
  readonly name = "map-remote";

  constructor(private readonly store: MapRemoteStore) {}

  request(flow: Flow): void {
    if (!this.store.enabled || this.store.list().length === 0) return;
    const r = flow.request;
    const q = r.path.indexOf("?");
    const m = this.store.match({
      method: r.method,
      scheme: r.scheme,
      host: r.host,
      port: r.port,
      path: q >= 0 ? r.path.slice(0, q) : r.path,
      query: q >= 0 ? r.path.slice(q + 1) : null,
    });
    if (!m) return;
    r.scheme = m.dest.scheme;
    r.host = m.dest.host;
    r.port = m.dest.port;
    r.path = m.dest.path;
    if (!m.rule.preserve_original_host_header) setHeader(r.headers, "Host", hostPort(r.scheme, r.host, r.port));
    flow.extra.map_remote_rule = m.rule.id;
  }
}
