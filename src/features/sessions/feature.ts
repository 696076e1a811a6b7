import { join } from "node:path";
import type { Feature, FeatureContext } from "../../service/feature.ts";
import { VERSION } from "../../version.ts";
import type { WsStore } from "../websocket/store.ts";
import { TrafficHar } from "./har-service.ts";
import { sessionRoutes, trafficHarRoutes } from "./routes.ts";
import { SavedSessions } from "./saved.ts";
import { TabStore } from "./tabs.ts";

/**
 * Sessions (spec 2.10, 4.8): live session tabs over the capture store, saved sessions as HAR files in `sessions/`,
 * and HAR for all traffic (GET /traffic/export.har, POST /traffic/import). No pipeline addon: a tab is a view, so a
 * captured flow costs nothing here (what HAR needs of a flow beyond the capture, its phase timings, is recorded by
 * capture: features/capture/har-measure.ts). See docs/api.md (Sessions, HAR files) for the layouts.
 */
export function sessionsFeature(ctx: FeatureContext): Feature & { tabs: TabStore; saved: SavedSessions; har: TrafficHar } {
  const tabs = new TabStore(ctx.dataDir, ctx.store, ctx.onCorrupt);
  const saved = new SavedSessions(join(ctx.dataDir, "sessions"), ctx.log);
  const ws = (): WsStore | null => {
    try {
      return ctx.feature<Feature & { store: WsStore }>("websocket").store;
    } catch {
      return null;
    }
  };
  const har = new TrafficHar(ctx.store, ws, VERSION);
  return {
    name: "sessions",
    tabs,
    saved,
    har,
    routes: [sessionRoutes({ tabs, saved, har }), trafficHarRoutes(har)],
    start: () => tabs.start(),
  };
}
