import { join } from "node:path";
import type { Feature, FeatureContext } from "../../service/feature.ts";
import type { CollectionStore } from "../compose/store.ts";
import type { ScriptRunner } from "../scripts/runner.ts";
import { flowRoutes } from "./routes.ts";
import { FlowRunner } from "./runner.ts";
import { FlowService } from "./service.ts";
import { FlowStore } from "./store.ts";

/**
 * Flows (spec 2.19, 4.14; format in docs/flows.md): graphs of requests, scripts, asserts, conditions, delays,
 * variables and subflows, one JSON file per flow in `flows/` in the data directory, and a built-in headless runner
 * behind POST /flows/{id}/run. Requests go through tapwire's own pipeline (client "tapwire-flow"), resolved as in
 * compose (requests may refer to compose requests); scripts and conditions run on the scripts feature's engine.
 * No pipeline addon.
 */
export function flowsFeature(ctx: FeatureContext): Feature & { store: FlowStore; service: FlowService; runner: FlowRunner } {
  const store = new FlowStore(join(ctx.dataDir, "flows"));
  const runner = new FlowRunner({
    proxy: ctx.proxy,
    onStored: ctx.onStored,
    collections: () => ctx.feature<Feature & { store: CollectionStore }>("compose").store,
    scripts: () => ctx.feature<Feature & { runner: ScriptRunner }>("scripts").runner,
    load: (id) => store.read(id),
  });
  const service = new FlowService(store, runner, { enabled: ctx.config.flowRunner ?? true, timeoutMs: ctx.config.flowTimeoutMs ?? 120_000 });
  return {
    name: "flows",
    store,
    service,
    runner,
    routes: [flowRoutes(store, service)],
    stop: () => service.stop(),
    health: () => ({ flow_runner: service.available }),
  };
}
