import { join } from "node:path";
import { normalizeHost, PersistedList } from "../ignore/lists.ts";
import type { Feature, FeatureContext } from "../../service/feature.ts";
import { BreakpointsAddon } from "./addon.ts";
import { InterceptHosts } from "./hosts.ts";
import { InterceptService } from "./intercepts.ts";
import { breakpointsRoutes, interceptHostsRoutes, interceptsRoutes } from "./routes.ts";
import { BreakpointStore } from "./store.ts";

/**
 * Breakpoints, intercept hosts and paused flows (spec 2.6-2.8, 4.4-4.6). Breakpoints persist in breakpoints.json,
 * intercept hosts in intercept-hosts.json; paused flows live in memory and resume by themselves after
 * --intercept-timeout seconds.
 */
export function breakpointsFeature(ctx: FeatureContext): Feature & { breakpoints: BreakpointStore; interceptHosts: PersistedList; intercepts: InterceptService } {
  const breakpoints = new BreakpointStore(join(ctx.dataDir, "breakpoints.json"), ctx.onCorrupt);
  const interceptHosts = new PersistedList(join(ctx.dataDir, "intercept-hosts.json"), normalizeHost, ctx.onCorrupt);
  const intercepts = new InterceptService(ctx.config.interceptTimeoutSec * 1000);
  return {
    name: "breakpoints",
    addon: new BreakpointsAddon(breakpoints, new InterceptHosts(interceptHosts), intercepts),
    breakpoints,
    interceptHosts,
    intercepts,
    routes: [breakpointsRoutes(breakpoints), interceptHostsRoutes(interceptHosts), interceptsRoutes(intercepts)],
    stop: () => intercepts.stop(),
    health: () => ({ paused_flows: intercepts.size }),
  };
}
