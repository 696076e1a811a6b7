import { join } from "node:path";
import type { Feature, FeatureContext } from "../../service/feature.ts";
import { IgnoreHostsAddon } from "./addon.ts";
import { HostSet, normalizeHost, PersistedList } from "./lists.ts";
import { ignoredHostsRoutes } from "./routes.ts";

/** Ignored hosts: tunnelled without interception, never recorded. */
export function ignoreHostsFeature(ctx: FeatureContext): Feature & { hosts: PersistedList } {
  const hosts = new PersistedList(join(ctx.dataDir, "ignored-hosts.json"), normalizeHost, ctx.onCorrupt);
  return { name: "ignore-hosts", addon: new IgnoreHostsAddon(new HostSet(hosts)), hosts, routes: [ignoredHostsRoutes(hosts)] };
}
