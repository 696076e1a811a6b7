import { Elysia, t } from "elysia";
import { checkQueryNames, notFound, UintString } from "../../api/errors.ts";
import type { WsStore } from "./store.ts";

export const WsConnectionSchema = t.Object(
  {
    connId: t.Integer({ description: "use with the frames route" }),
    logId: t.Union([t.Integer(), t.Null()], { description: "traffic entry id of the upgrade handshake; null when capture did not record it" }),
    url: t.String({ description: "ws:// or wss:// URL of the handshake as sent upstream" }),
    openedTs: t.Integer({ description: "ms since epoch, when the 101 was relayed" }),
    closed: t.Boolean(),
    closedTs: t.Union([t.Integer(), t.Null()], { description: "first close frame (either direction) or end of the connection" }),
    frameCount: t.Integer({ description: "frames stored now (what the frames route returns)" }),
    framesSeen: t.Integer({ description: "extension: every frame observed, including evicted ones and ones seen while capture was off" }),
    compressed: t.Boolean({ description: "extension: permessage-deflate was negotiated" }),
    error: t.Union([t.String(), t.Null()], { description: "extension: why frame recording stopped (unparseable stream), else null" }),
    imported: t.Optional(t.Boolean({ description: "extension: true on a record read from a HAR file (POST /traffic/import), absent otherwise" })),
  },
  { $id: "#/components/schemas/WebSocketConnection" },
);

export const WsFrameSchema = t.Object(
  {
    dir: t.Union([t.Literal("in"), t.Literal("out")], { description: "in: server to client; out: client to server" }),
    opcode: t.Union([t.Literal("text"), t.Literal("binary"), t.Literal("ping"), t.Literal("pong"), t.Literal("close")]),
    text: t.String({ description: "text: the (inflated) UTF-8 preview; binary: base64 of the preview; control frames: empty" }),
    sizeBytes: t.Integer({ description: "true payload size of the whole message (inflated size when compressed)" }),
    truncated: t.Boolean({ description: "true when the preview was clipped at 64 KiB" }),
    ts: t.Integer({ description: "ms since epoch, when the message's last frame passed" }),
    closeCode: t.Optional(t.Integer({ description: "extension: close frames with a status code" })),
    closeReason: t.Optional(t.String({ description: "extension: close frames with a status code" })),
    compressed: t.Optional(t.Boolean({ description: "extension: present (true) on permessage-deflate compressed messages" })),
    wireSizeBytes: t.Optional(t.Integer({ description: "extension: compressed payload size on the wire" })),
    sizeAtLeast: t.Optional(t.Boolean({ description: "extension: true when inflating stopped at the 4 MiB budget per message; sizeBytes is then a lower bound" })),
  },
  { $id: "#/components/schemas/WebSocketFrame" },
);

const ConnectionList = t.Object({ items: t.Array(WsConnectionSchema), total: t.Integer() });
const FrameList = t.Object({ connId: t.Integer(), url: t.String(), items: t.Array(WsFrameSchema), total: t.Integer() });

/** Spec 4.16: WebSocket connections and frames (read-only). */
export function websocketRoutes(store: WsStore) {
  const tags = ["websocket"];
  return new Elysia({ name: "websocket", prefix: "/api/v1/websocket" })
    .get(
      "/connections",
      ({ request }) => {
        checkQueryNames(request.url, []);
        const items = store.list().map((c) => c.view());
        return { items, total: items.length };
      },
      { response: ConnectionList, detail: { tags, summary: "Observed WebSocket connections, newest first (at most 100)" } },
    )
    .get(
      "/connections/:id/frames",
      ({ params, request }) => {
        checkQueryNames(request.url, []);
        const c = store.get(Number(params.id));
        if (!c) throw notFound(`no WebSocket connection ${params.id} (unknown or evicted)`);
        const items = c.items();
        return { connId: c.connId, url: c.url, items, total: items.length };
      },
      {
        params: t.Object({ id: UintString("connId of the connection") }),
        response: FrameList,
        detail: { tags, summary: "Stored frames of one connection, oldest first (at most 500 / 2 MiB of previews); 404 if unknown or evicted" },
      },
    );
}
