import type { Collection, Environment } from "./schema.ts";

/**
 * `{{name}}` resolution with Postman's (newman's) precedence, highest first:
 *   1. local: the send call's `variables`, and what scripts set with pm.variables.set during the send
 *   2. iteration data: the data row of a collection run (the send's `data`)
 *   3. the named environment: an enabled variable's `currentValue` when set, else its `defaultValue`
 *      (a disabled variable is undefined here, so a lower scope may define it)
 *   4. the collection's enabled variables (with the session's pm.collectionVariables changes)
 *   5. globals (pm.globals: empty at each send, kept for the rest of that send)
 * Dynamic variables (`{{$guid}}`, ...) are made fresh at each reference. A value may itself contain references
 * (resolved up to MAX_DEPTH levels, cycles stop there). Unresolved references stay literally and are reported.
 */
export type Scope = ReadonlyMap<string, string>;

/** A scope's values as scripts see them (a script may set any JSON value). */
export type ScopeValues = Record<string, unknown>;

/** The five scopes of one send, as the scripts and the resolver share them. */
export interface SendScopes {
  variables: ScopeValues;
  iterationData: ScopeValues;
  environment: ScopeValues;
  collectionVariables: ScopeValues;
  globals: ScopeValues;
}

const REF = /\{\{([^{}]+)\}\}/g;
const MAX_DEPTH = 10;

export const DYNAMIC_VARIABLES: Record<string, () => string> = {
  $guid: () => crypto.randomUUID(),
  $randomUUID: () => crypto.randomUUID(),
  $timestamp: () => String(Math.floor(Date.now() / 1000)),
  $isoTimestamp: () => new Date().toISOString(),
  $randomInt: () => String(Math.floor(Math.random() * 1001)),
};

/** A script value as text in a request: strings as they are, null/undefined empty, objects as JSON (as Postman). */
export function valueText(v: unknown): string {
  if (typeof v === "string") return v;
  if (v === undefined || v === null) return "";
  if (typeof v === "object") {
    try {
      return JSON.stringify(v);
    } catch {
      return String(v);
    }
  }
  return String(v);
}

/** The scopes a send starts with. */
export function initialScopes(
  callVars: Record<string, string> | undefined,
  env: Environment | null,
  collection: Pick<Collection, "variables">,
  data?: Record<string, unknown>,
): SendScopes {
  const environment: ScopeValues = {};
  for (const v of env?.variables ?? []) if (v.enabled) environment[v.key] = v.currentValue ?? v.defaultValue;
  const collectionVariables: ScopeValues = {};
  for (const v of collection.variables) if (v.enabled) collectionVariables[v.key] = v.value;
  return { variables: { ...(callVars ?? {}) }, iterationData: { ...(data ?? {}) }, environment, collectionVariables, globals: {} };
}

/** The lookup scopes, highest precedence first. */
export function scopeMaps(s: SendScopes): Scope[] {
  const toMap = (o: ScopeValues) => new Map(Object.entries(o).map(([k, v]) => [k, valueText(v)]));
  return [s.variables, s.iterationData, s.environment, s.collectionVariables, s.globals].map(toMap);
}

/** The lookup scopes of a send without scripts, highest precedence first. */
export function buildScopes(
  callVars: Record<string, string> | undefined,
  env: Environment | null,
  collection: Pick<Collection, "variables">,
  data?: Record<string, unknown>,
): Scope[] {
  return scopeMaps(initialScopes(callVars, env, collection, data));
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
