import { join } from "node:path";
import type { Feature, FeatureContext } from "../../service/feature.ts";
import { MapRemoteAddon } from "./addon.ts";
import { mapRemoteRoutes } from "./routes.ts";
import { MapRemoteStore } from "./store.ts";

/** Map Remote (spec 2.13, 4.11): rewrite a request's destination (scheme, host, port, path) before it goes upstream. */
export function mapRemoteFeature(ctx: FeatureContext): Feature & { store: MapRemoteStore } {
  const store = new MapRemoteStore(join(ctx.dataDir, "map-remote.json"), ctx.onCorrupt);
  return { name: "map-remote", addon: new MapRemoteAddon(store), store, routes: [mapRemoteRoutes(store)] };
}
