import type { HeaderList } from "../../core/http1/types.ts";
import type { ProxyContext } from "../../core/proxy/context.ts";
import { sendVirtual } from "../../core/proxy/virtual-client.ts";
import type { ClientInfo, Flow } from "../../pipeline/flow.ts";
import type { EntryDetail } from "../../store/types.ts";

export interface ReplayResult {
  /** Id of the new traffic entry (null when capture is off or the host/client is ignored). */
  id: number | null;
  status_code: number;
  /** extension: reason phrase from the status line */
  reason: string;
  headers: HeaderList;
  body: string;
  /** extension: "utf8" or "base64" */
  body_encoding: "utf8" | "base64";
  duration_ms: number;
  /** extension: the replay of this entry */
  replay_of: number;
}

export const REPLAY_LABEL = "tapwire-replay";

/** Listens for stored entries so a replay learns its new entry id. */
export interface StoredEvents {
  onStored(listener: (flow: Flow, id: number) => void): () => void;
}

/**
 * Re-sends a captured request through the same pipeline (addons, upstream pool, capture) as live traffic, from an
 * in-process client labelled "tapwire-replay". The stored body is sent (decoded from any Content-Encoding, in which
 * case that header is dropped); Content-Length is recomputed.
 */
export async function replayEntry(ctx: ProxyContext, events: StoredEvents, e: EntryDetail): Promise<ReplayResult> {
  const url = new URL(e.url);
  const scheme = url.protocol === "https:" || url.protocol === "wss:" ? "https" : "http";
  const port = url.port ? Number(url.port) : scheme === "https" ? 443 : 80;
  const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
  let headers = e.req_headers.map(([n, v]) => [n, v] as [string, string]);
  if (e.req_body_decoded_from) headers = headers.filter(([n]) => n.toLowerCase() !== "content-encoding");
  const body = e.req_body ? (e.req_body_encoding === "base64" ? Buffer.from(e.req_body, "base64") : Buffer.from(e.req_body, "utf8")) : null;
  const client: ClientInfo = { addr: "127.0.0.1", port: 0, label: Promise.resolve(REPLAY_LABEL), resolvedLabel: REPLAY_LABEL };
  let id: number | null = null;
  const stop = events.onStored((flow, newId) => {
    if (flow.client === client) id = newId;
  });
  const t0 = performance.now();
  try {
    const res = await sendVirtual(ctx, { method: e.method, scheme, host, port, path: url.pathname + url.search, headers, body: body && body.length ? new Uint8Array(body) : null }, client);
    const duration_ms = Math.round(performance.now() - t0);
    // capture runs right after the response's last byte: let its hook finish
    await new Promise((r) => setImmediate(r));
    const text = decodeUtf8(res.body);
    return {
      id,
      status_code: res.status,
      reason: res.reason,
      headers: res.headers,
      body: text ?? Buffer.from(res.body).toString("base64"),
      body_encoding: text === null ? "base64" : "utf8",
      duration_ms,
      replay_of: e.id,
    };
  } finally {
    stop();
  }
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });
function decodeUtf8(b: Uint8Array): string | null {
  try {
    return strictUtf8.decode(b);
  } catch {
    return null;
  }
}
