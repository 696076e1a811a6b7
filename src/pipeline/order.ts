import { captureFeature } from "../capture/feature.ts";
import { ignoreHostsFeature } from "../ignore/feature.ts";
// import: breakpoints
// import: map-local
// import: map-remote
// import: throttle
// import: websocket
// import: mock
import type { Feature, FeatureFactory } from "../service/feature.ts";
import type { Addon } from "./addon.ts";

/**
 * Every feature, in the one fixed order in which their addons see each flow. Request-phase hooks stop at the
 * first addon that answers a flow by itself (sets flow.response); response-phase hooks run on all of them, and
 * capture's recording step (its lastAddon) runs after everything else, so entries show what addons did.
 *
 *   capture        decides whether the flow is recorded (capture on, client not ignored)
 *   ignore-hosts   tunnels CONNECTs to ignored hosts; keeps plain-HTTP flows to them out of capture
 */
export const FEATURES: readonly FeatureFactory[] = [
  captureFeature,
  ignoreHostsFeature,
  // slot: breakpoints
  // slot: map-local
  // slot: map-remote
  // slot: throttle
  // slot: websocket
  // slot: mock
];

export function orderedAddons(features: readonly Feature[]): Addon[] {
  const first = features.flatMap((f) => (f.addon ? [f.addon] : []));
  const last = features.flatMap((f) => (f.lastAddon ? [f.lastAddon] : []));
  return [...first, ...last];
}
