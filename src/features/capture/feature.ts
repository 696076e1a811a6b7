import type { Feature, FeatureContext } from "../../service/feature.ts";
import { join } from "node:path";
import { PersistedList } from "../ignore/lists.ts";
import { ignoredClientsRoutes } from "../ignore/routes.ts";
import { CaptureAddon, RecordAddon } from "./addon.ts";
import { captureRoutes } from "./routes.ts";

/** Capture: decides first whether a flow is recorded, records it last; capture control and ignored clients. */
export function captureFeature(ctx: FeatureContext): Feature & { addon: CaptureAddon; ignoredClients: PersistedList } {
  const ignoredClients = new PersistedList(join(ctx.dataDir, "ignored-clients.json"), (s) => s.trim(), ctx.onCorrupt);
  const addon = new CaptureAddon(ctx.capture, ctx.store, (label) => ignoredClients.has(label), ctx.apiToken);
  return {
    name: "capture",
    addon,
    lastAddon: new RecordAddon(addon),
    ignoredClients,
    routes: [captureRoutes(ctx.capture, ctx.store), ignoredClientsRoutes(ignoredClients)],
  };
}
