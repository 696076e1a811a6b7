import type { Addon } from "./addon.ts";

/** What the ordering needs of a feature: its addon, and the one that runs after every other (capture's recorder). */
export interface OrderedParts {
  addon?: Addon;
  lastAddon?: Addon;
}

/**
 * The addons of the given features, in the features' order, followed by their last-addons in the same order.
 * The order itself (which feature comes where, and why) is the FEATURES list in the features folder's index.ts; the service
 * composes the two.
 */
export function orderedAddons(features: readonly OrderedParts[]): Addon[] {
  const first = features.flatMap((f) => (f.addon ? [f.addon] : []));
  const last = features.flatMap((f) => (f.lastAddon ? [f.lastAddon] : []));
  return [...first, ...last];
}
