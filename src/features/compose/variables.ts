import type { Collection, Environment } from "./schema.ts";

/**
 * `{{name}}` resolution with Postman's precedence, highest first:
 *   1. the send call's `variables`
 *   2. the named environment: an enabled variable's `currentValue` when set, else its `defaultValue`
 *      (a disabled variable is undefined here, so a lower scope may define it)
 *   3. the collection's enabled variables
 * Dynamic variables (`{{$guid}}`, ...) are made fresh at each reference. A value may itself contain references
 * (resolved up to MAX_DEPTH levels, cycles stop there). Unresolved references stay literally and are reported.
 */
export type Scope = ReadonlyMap<string, string>;

const REF = /\{\{([^{}]+)\}\}/g;
const MAX_DEPTH = 10;

export const DYNAMIC_VARIABLES: Record<string, () => string> = {
  $guid: () => crypto.randomUUID(),
  $randomUUID: () => crypto.randomUUID(),
  $timestamp: () => String(Math.floor(Date.now() / 1000)),
  $isoTimestamp: () => new Date().toISOString(),
  $randomInt: () => String(Math.floor(Math.random() * 1001)),
};

/** The lookup scopes, highest precedence first. */
export function buildScopes(callVars: Record<string, string> | undefined, env: Environment | null, collection: Pick<Collection, "variables">): Scope[] {
  const call = new Map(Object.entries(callVars ?? {}));
  const envScope = new Map<string, string>();
  for (const v of env?.variables ?? []) if (v.enabled) envScope.set(v.key, v.currentValue ?? v.defaultValue);
  const colScope = new Map<string, string>();
  for (const v of collection.variables) if (v.enabled) colScope.set(v.key, v.value);
  return [call, envScope, colScope];
}

export class Resolver {
  /** Names referenced but defined nowhere, in order of first appearance. */
  readonly unresolved: string[] = [];

  constructor(private readonly scopes: Scope[]) {}

  lookup(name: string): string | undefined {
    for (const s of this.scopes) {
      const v = s.get(name);
      if (v !== undefined) return v;
    }
    const dyn = Object.hasOwn(DYNAMIC_VARIABLES, name) ? DYNAMIC_VARIABLES[name] : undefined;
    return dyn?.();
  }

  resolve(text: string, depth = 0): string {
    if (!text.includes("{{")) return text;
    return text.replace(REF, (whole, raw: string) => {
      const name = raw.trim();
      const v = this.lookup(name);
      if (v === undefined) {
        if (!this.unresolved.includes(name)) this.unresolved.push(name);
        return whole;
      }
      return depth < MAX_DEPTH ? this.resolve(v, depth + 1) : v;
    });
  }
}
