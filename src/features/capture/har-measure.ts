import type { Flow } from "../../pipeline/flow.ts";
import type { HarMeasure } from "../../store/types.ts";

/** Milliseconds with microsecond precision. */
const ms = (v: number): number => Math.round(v * 1000) / 1000;

/**
 * What the proxy measured of a finished flow for HAR (NewEntry.har), from the moments the core marked (Flow.timing),
 * in ms; the store turns it into the extra fields `timings`, `server_ip`, `connection_id` and `http_version`:
 *   blocked  request head parsed → handed to the upstream side (time inside tapwire: addons, breakpoints)
 *   connect  opening a new upstream connection (TCP, CONNECT through a parent proxy, TLS; the DNS lookup is inside
 *            it: Bun resolves the name while connecting, so HAR's `dns` is -1), -1 when the connection was reused
 *   ssl      the TLS handshake of a new https connection, else -1
 *   send     first to last byte of the request written upstream
 *   wait     last request byte → first response byte
 *   receive  first response byte → the response complete
 * A flow that never went upstream (answered by an addon, refused first) has no phases (blocked -1); null when there
 * is nothing to record at all (no phases, HTTP/1.1 both ways). The flow ends where its `duration_ms` does, so the
 * phases add up to the entry's time (as HAR wants), give or take the rounding of duration_ms.
 */
export function harMeasure(flow: Flow, end: number = flow.durationMs ? flow.t0 + flow.durationMs : performance.now()): HarMeasure | null {
  const t = flow.timing;
  const v = flow.request.version;
  const rv = flow.response?.version;
  const version = v !== "HTTP/1.1" ? v : null;
  const resVersion = rv && rv !== v ? rv : null;
  if ((!t.forward || !t.send) && version === null && resVersion === null) return null;
  const m: HarMeasure = { blocked: -1, connect: -1, ssl: -1, send: -1, wait: -1, receive: -1, connection_id: 0, server_ip: null, http_version: version, response_http_version: resVersion };
  if (t.forward && t.send) {
    const fresh = t.conn !== null && !t.reused;
    const sent = t.sent || t.send;
    m.blocked = ms(Math.max(0, t.forward - flow.t0));
    m.connect = fresh && t.conn!.connectMs >= 0 ? ms(t.conn!.connectMs) : -1;
    m.ssl = fresh && t.conn!.sslMs >= 0 ? ms(t.conn!.sslMs) : -1;
    m.send = ms(Math.max(0, sent - t.send));
    m.wait = t.firstByte ? ms(Math.max(0, t.firstByte - sent)) : ms(Math.max(0, end - sent));
    m.receive = t.firstByte ? ms(Math.max(0, end - t.firstByte)) : 0;
  }
  const conn = t.conn;
  if (conn) {
    m.connection_id = conn.id;
    if (conn.remoteAddr) m.server_ip = conn.remoteAddr.startsWith("::ffff:") ? conn.remoteAddr.slice(7) : conn.remoteAddr;
  }
  return m;
}
