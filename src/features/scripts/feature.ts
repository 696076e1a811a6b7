import { join } from "node:path";
import type { Feature, FeatureContext } from "../../service/feature.ts";
import { ScriptAddon } from "./addon.ts";
import { ScriptEngine } from "./engine/engine.ts";
import { scriptRoutes } from "./routes.ts";
import { ScriptRunner } from "./runner.ts";
import { ScriptRuleStore } from "./store.ts";

/**
 * Scripting (spec 2.15, 4.15): script rules run Postman-style JavaScript on matching requests and responses in the
 * pipeline, and POST /scripts/execute runs a script in test mode. Scripts run in QuickJS inside worker threads
 * (./engine), with the time and memory limits of --script-timeout and --script-memory.
 */
export function scriptsFeature(ctx: FeatureContext): Feature & { store: ScriptRuleStore; runner: ScriptRunner; addon: ScriptAddon } {
  const store = new ScriptRuleStore(join(ctx.dataDir, "script-rules.json"), ctx.onCorrupt);
  const engine = new ScriptEngine({ timeoutMs: ctx.config.scriptTimeoutMs, memoryBytes: ctx.config.scriptMemoryBytes });
  const runner = new ScriptRunner(engine, ctx.proxy, { timeoutMs: ctx.config.scriptTimeoutMs, memoryBytes: ctx.config.scriptMemoryBytes });
  const addon = new ScriptAddon(store, runner);
  return {
    name: "scripts",
    addon,
    store,
    runner,
    routes: [scriptRoutes(store, runner)],
    // with rules to run, the workers start now rather than on the first scripted request (~120-400 ms each)
    start: () => {
      if (store.enabled && store.list().some((r) => r.enabled)) void engine.start();
    },
    stop: () => engine.close(),
    health: () => ({ scripting_enabled: store.enabled, script_rules: store.list().length }),
  };
}
