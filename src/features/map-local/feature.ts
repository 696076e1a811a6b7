import { join } from "node:path";
import type { Feature, FeatureContext } from "../../service/feature.ts";
import { MapLocalAddon } from "./addon.ts";
import { mapLocalRoutes } from "./routes.ts";
import { MapLocalStore } from "./store.ts";

/** Map Local (spec 2.12, 4.10): serve a rule's inline body or local file in place of the upstream response. */
export function mapLocalFeature(ctx: FeatureContext): Feature & { store: MapLocalStore } {
  const store = new MapLocalStore(join(ctx.dataDir, "map-local.json"), ctx.onCorrupt);
  const addon = new MapLocalAddon(store, () => ctx.proxy().maxBufferedBody);
  return { name: "map-local", addon, store, routes: [mapLocalRoutes(store)] };
}
