import type { WebSocketTap } from "../../core/proxy/context.ts";
import { parseExtensions } from "../../core/ws/deflate.ts";
import type { Flow } from "../../pipeline/flow.ts";
import type { Feature, FeatureContext } from "../../service/feature.ts";
import { websocketRoutes } from "./routes.ts";
import { WS_LIMITS, WsStore, type WsLimits } from "./store.ts";
import { WsRecorder } from "./tap.ts";

/** The URL of a WebSocket handshake flow with its scheme mapped http→ws, https→wss. */
export function wsUrl(flow: Flow): string {
  const u = flow.url;
  return u.startsWith("https://") ? "wss://" + u.slice(8) : u.startsWith("http://") ? "ws://" + u.slice(7) : u;
}

/** All values of the 101's Sec-WebSocket-Extensions header lines, joined as one list. */
export function responseExtensions(flow: Flow): string | undefined {
  const values = (flow.response?.headers ?? []).filter(([n]) => n.toLowerCase() === "sec-websocket-extensions").map(([, v]) => v);
  return values.length ? values.join(", ") : undefined;
}

/**
 * WebSocket capture (spec 2.20, 2.21, 4.16, 8): a record for every upgrade the capture feature records, frames
 * parsed from the relayed bytes beside the relay (which stays byte-for-byte), stored in memory within the
 * spec's limits. See docs/api.md (WebSocket capture) for the decisions.
 */
export function websocketFeature(ctx: FeatureContext, limits: WsLimits = WS_LIMITS): Feature & { store: WsStore } {
  const store = new WsStore(limits);
  return {
    name: "websocket",
    store,
    routes: [websocketRoutes(store)],
    webSocketOpened(flow: Flow): WebSocketTap | null {
      // Upgrades that capture keeps out (capture off, ignored client or host) are relayed unobserved.
      if (!flow.capture || !ctx.capture.capturing) return null;
      const ext = responseExtensions(flow);
      const deflate = parseExtensions(ext);
      const conn = store.open(wsUrl(flow), () => flow.entryId, deflate !== null);
      return new WsRecorder(conn, deflate, limits.previewCap, () => ctx.capture.capturing);
    },
    stop() {
      store.clear();
    },
  };
}
