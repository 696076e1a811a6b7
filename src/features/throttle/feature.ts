import type { Feature, FeatureContext } from "../../service/feature.ts";
import { ThrottleAddon } from "./addon.ts";
import { RulesFile } from "./rules-file.ts";
import { throttleRoutes, throttleRulesRoutes } from "./routes.ts";
import { Throttler } from "./throttler.ts";

export type ThrottleFeature = Feature & { throttler: Throttler; rulesFile: RulesFile };

/**
 * Bandwidth throttling (spec 4.7): a global cap set over the API (in memory only) and scoped rules read from
 * throttle-rules.json in the data directory, reloaded when the file changes and on `tapwire throttle reload`.
 */
export function throttleFeature(ctx: FeatureContext): ThrottleFeature {
  const throttler = new Throttler();
  const rulesFile = new RulesFile(ctx.dataDir, ctx.log, (rules) => throttler.setRules(rules));
  // Loaded before the proxy listens, so the first requests already follow the rules.
  rulesFile.reload(true);
  return {
    name: "throttle",
    addon: new ThrottleAddon(throttler),
    routes: [throttleRoutes(throttler), throttleRulesRoutes(rulesFile)],
    throttler,
    rulesFile,
    start() {
      rulesFile.watch();
      rulesFile.reload(false); // catches a change made between the first load and the watch
    },
    stop() {
      rulesFile.stop();
      throttler.releaseDelays();
    },
  };
}
