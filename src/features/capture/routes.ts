import { Elysia, t } from "elysia";
import type { CaptureControl, EntryCounter } from "./control.ts";

export const CaptureStatus = t.Object(
  {
    capturing: t.Boolean(),
    entry_count: t.Integer(),
    dropped: t.Integer({
      description: "extension: entries not stored since start because the store's bounded write queue overflowed (the proxy never waits for the store)",
    }),
  },
  { $id: "#/components/schemas/CaptureStatus" },
);

/** Spec 4.3: capture control. */
export function captureRoutes(capture: CaptureControl, store: EntryCounter) {
  return new Elysia({ name: "capture", prefix: "/api/v1/capture" })
    .get("/status", () => ({ capturing: capture.capturing, entry_count: store.count(), dropped: store.droppedCount }), {
      response: CaptureStatus,
      detail: { tags: ["capture"], summary: "Capture state and number of stored entries" },
    })
    .post(
      "/start",
      ({ set }) => {
        capture.start();
        set.status = 204;
      },
      { detail: { tags: ["capture"], summary: "Start storing traffic (204)" } },
    )
    .post(
      "/stop",
      ({ set }) => {
        capture.stop();
        set.status = 204;
      },
      { detail: { tags: ["capture"], summary: "Stop storing traffic; it still flows through the proxy (204)" } },
    );
}
