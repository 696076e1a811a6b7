import type { Addon } from "../../pipeline/addon.ts";
import type { Flow } from "../../pipeline/flow.ts";

/** Milliseconds with microsecond precision. */
const ms = (v: number): number => Math.round(v * 1000) / 1000;

/**
 * The HAR phases of a finished flow from the moments the core marked (Flow.timing), ms; null when the flow never
 * went upstream (answered by an addon, refused before): HAR then puts its whole time under `wait`.
 *   blocked  request head parsed → handed to the upstream side (time inside tapwire: addons, breakpoints)
 *   connect  opening a new upstream connection (TCP, and TLS for https; the DNS lookup is inside it), -1 when reused
 *   ssl      the TLS handshake of a new https connection, -1 otherwise
 *   send     first to last byte of the request written upstream
 *   wait     last request byte → first response byte
 *   receive  first response byte → the response complete
 *   dns      -1: Bun resolves the name inside connect, so it is part of `connect`
 */
export function flowTimings(flow: Flow, end = performance.now()): Record<string, number> | null {
  const t = flow.timing;
  if (!t.forward || !t.send) return null;
  const fresh = t.conn !== null && !t.conn.reused;
  const sent = t.sent || t.send;
  return {
    blocked: ms(Math.max(0, t.forward - flow.t0)),
    dns: -1,
    connect: fresh && t.conn!.connectMs >= 0 ? ms(t.conn!.connectMs) : -1,
    ssl: fresh && t.conn!.sslMs >= 0 ? ms(t.conn!.sslMs) : -1,
    send: ms(Math.max(0, sent - t.send)),
    wait: t.firstByte ? ms(Math.max(0, t.firstByte - sent)) : ms(Math.max(0, end - sent)),
    receive: t.firstByte ? ms(Math.max(0, end - t.firstByte)) : 0,
  };
}

/**
 * Records, for captured flows, what a HAR entry needs beyond the capture: the extra fields `timings` (flowTimings),
 * `server_ip` and `connection_id` (the upstream connection), `http_version` (the request's) and, when it differs,
 * `response_http_version`. Runs in the response and error phases, before capture writes the entry.
 */
export class HarFieldsAddon implements Addon {
  readonly name = "har-fields";

  response(flow: Flow): void {
    this.record(flow);
  }

  error(flow: Flow): void {
    this.record(flow);
  }

  private record(flow: Flow): void {
    if (!flow.capture) return;
    const x = flow.extra;
    x.http_version = flow.request.version;
    const rv = flow.response?.version;
    if (rv && rv !== flow.request.version) x.response_http_version = rv;
    const timings = flowTimings(flow);
    if (timings) x.timings = timings;
    const conn = flow.timing.conn;
    if (conn) {
      if (conn.remoteAddr) x.server_ip = conn.remoteAddr.replace(/^::ffff:/, "");
      x.connection_id = String(conn.id);
    }
  }
}
