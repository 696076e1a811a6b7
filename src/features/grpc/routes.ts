import { Elysia, t } from "elysia";
import { ApiError, notFound, UintString } from "../../api/errors.ts";
import type { CaptureStore } from "../../store/capture-store.ts";
import { grpcView } from "./decode.ts";
import type { ProtoRegistry } from "./protos.ts";

/** Extension: GET /traffic/{id}/grpc, the gRPC messages and status of a captured entry (layout in docs/api.md). */
export function grpcRoutes(store: CaptureStore, protos: ProtoRegistry) {
  return new Elysia({ name: "grpc", prefix: "/api/v1/traffic" }).get(
    "/:id/grpc",
    async ({ params }) => {
      const id = Number(params.id);
      const entry = await store.get(id);
      if (!entry) throw notFound(`no traffic entry ${id}`);
      const view = grpcView(entry, protos);
      if (!view) throw new ApiError(404, "not_grpc", `traffic entry ${id} is not a gRPC exchange (its Content-Type is not application/grpc*)`);
      return view;
    },
    {
      params: t.Object({ id: UintString("traffic entry id") }),
      detail: {
        tags: ["traffic"],
        summary: "Extension: the gRPC / gRPC-Web messages of an entry, decoded (field names with --proto, else raw fields), and its grpc-status",
        description:
          "404 not_found for an unknown entry, 404 not_grpc for an entry whose Content-Type is not application/grpc, application/grpc-web or application/grpc-web-text. Layout in docs/api.md.",
      },
    },
  );
}
