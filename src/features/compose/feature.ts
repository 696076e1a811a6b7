import { join } from "node:path";
import type { Feature, FeatureContext } from "../../service/feature.ts";
import { composeRoutes } from "./routes.ts";
import { CollectionStore } from "./store.ts";
import type { ScriptRunner } from "../scripts/runner.ts";

/**
 * Compose (spec 2.11, 4.9): collections of requests with folders, environments and variables, one JSON file per
 * collection in `compose/` in the data directory, and POST /compose/send, which resolves a request and sends it
 * through tapwire's own pipeline (client "tapwire-compose"), so it is captured and rules apply, running the
 * collection's, folders' and request's pre-request and test scripts on the scripts feature's engine (one engine per
 * process, reached through FeatureContext.feature("scripts")). No pipeline addon.
 */
export function composeFeature(ctx: FeatureContext): Feature & { store: CollectionStore } {
  const store = new CollectionStore(join(ctx.dataDir, "compose"), ctx.log);
  return {
    name: "compose",
    store,
    routes: [composeRoutes(store, { store, proxy: ctx.proxy, onStored: ctx.onStored, scripts: () => ctx.feature<Feature & { runner: ScriptRunner }>("scripts").runner })],
  };
}
