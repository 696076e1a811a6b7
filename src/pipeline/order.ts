import type { Addon } from "./addon.ts";

/**
 * The one fixed order in which addons see every flow. Request-phase hooks stop at the first addon that answers
 * a flow by itself; response-phase hooks run on all of them.
 *
 *   1. capture        decides whether the flow is recorded; records it in response/error
 *   2. ignore-hosts   tunnels CONNECTs to ignored hosts; opts plain-HTTP flows to them out of capture
 *
 * Later features slot in here by name (breakpoints and intercepts, map local, map remote, scripts, throttle).
 */
export interface AddonSet {
  capture: Addon;
  ignoreHosts: Addon;
}

export function orderedAddons(a: AddonSet): Addon[] {
  return [a.capture, a.ignoreHosts];
}
