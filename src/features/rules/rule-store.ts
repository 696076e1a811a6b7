import type { Static, TObject, TSchema } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { JsonState } from "../../store/json-state.ts";
import { compileUrlPattern, type UrlMatcher } from "./matcher.ts";

/** An HTTP method token (RFC 9110), as rules accept them. */
export const METHOD_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** Throws the 400 a rule family gives for a field a schema cannot check. */
export function invalidField(field: string, why: string): never {
  throw new RuleStoreError("invalid", `invalid body field '${field}': ${why}`);
}

export interface RuleFamilyState<R> {
  enabled: boolean;
  rules: R[];
}

export class RuleStoreError extends Error {
  constructor(readonly kind: "conflict" | "not_found" | "invalid", message: string) {
    super(message);
  }
}

/**
 * One rule family (Map Local, Map Remote, Mock, script rules...): a master flag and an ordered list of rules with
 * caller-supplied string ids, validated by the family's TypeBox schema (defaults applied) and persisted atomically
 * in the data directory. Every change is written before it is visible.
 */
export class RuleStore<S extends TObject, R extends Static<S> & { id: string; enabled: boolean } = Static<S> & { id: string; enabled: boolean }> {
  private readonly state: JsonState<RuleFamilyState<R>>;
  /** Bumped on every change so matchers can cache compiled forms. */
  version = 0;
  private compiled: { version: number; rules: { rule: R; matcher: UrlMatcher | null }[] } = { version: -1, rules: [] };

  constructor(
    path: string,
    readonly schema: S,
    opts: { defaultEnabled?: boolean; onCorrupt?: (path: string, movedTo: string, reason: string) => void } = {},
  ) {
    this.state = new JsonState<RuleFamilyState<R>>(path, {
      initial: () => ({ enabled: opts.defaultEnabled ?? true, rules: [] }),
      validate: (v) => {
        const o = v as RuleFamilyState<unknown>;
        if (!o || typeof o !== "object" || typeof o.enabled !== "boolean" || !Array.isArray(o.rules)) return "expected {enabled, rules}";
        for (const r of o.rules) if (!Value.Check(schema, r)) return `a stored rule does not match the schema: ${JSON.stringify(r).slice(0, 200)}`;
        return null;
      },
      onCorrupt: opts.onCorrupt,
    });
  }

  /** Validates and fills defaults; throws RuleStoreError("invalid") naming the field. */
  parse(input: unknown): R {
    if (!input || typeof input !== "object" || Array.isArray(input)) throw new RuleStoreError("invalid", "invalid body field '(body)': expected a JSON object (a rule)");
    // Fields that are present are checked as given, before defaults are applied: Value.Default would otherwise
    // reshape some wrong values (an array given for a Record becomes an object) into something that passes.
    for (const [key, value] of Object.entries(input as Record<string, unknown>)) {
      const prop = (this.schema.properties as Record<string, TSchema>)[key];
      if (!prop || Value.Check(prop, value)) continue;
      const err = Value.Errors(prop, value).First();
      const sub = err && err.path ? err.path.replace(/\//g, ".") : "";
      throw new RuleStoreError("invalid", `invalid body field '${key}${sub}': ${err?.message ?? "wrong type"}`);
    }
    const withDefaults = Value.Default(this.schema, structuredClone(input));
    const cleaned = Value.Clean(this.schema, withDefaults);
    const err = Value.Errors(this.schema, cleaned).First();
    if (err) {
      const field = err.path.replace(/^\//, "").replace(/\//g, ".") || "(body)";
      throw new RuleStoreError("invalid", `invalid body field '${field}': ${err.message}`);
    }
    return cleaned as R;
  }

  get enabled(): boolean {
    return this.state.get().enabled;
  }

  setEnabled(enabled: boolean): void {
    this.state.update((s) => ({ ...s, enabled }));
    this.version++;
  }

  list(): R[] {
    return this.state.get().rules;
  }

  snapshot(): RuleFamilyState<R> {
    return structuredClone(this.state.get());
  }

  get(id: string): R | undefined {
    return this.state.get().rules.find((r) => r.id === id);
  }

  create(rule: R): R {
    if (this.get(rule.id)) throw new RuleStoreError("conflict", `a rule with id '${rule.id}' already exists`);
    this.state.update((s) => ({ ...s, rules: [...s.rules, rule] }));
    this.version++;
    return rule;
  }

  /** Replaces the rule with this id (the body's id must match or be the same rule). */
  replace(id: string, rule: R): R {
    if (!this.get(id)) throw new RuleStoreError("not_found", `no rule with id '${id}'`);
    if (rule.id !== id) throw new RuleStoreError("invalid", `the body's id '${rule.id}' does not match the path id '${id}'`);
    this.state.update((s) => ({ ...s, rules: s.rules.map((r) => (r.id === id ? rule : r)) }));
    this.version++;
    return rule;
  }

  delete(id: string): void {
    if (!this.get(id)) throw new RuleStoreError("not_found", `no rule with id '${id}'`);
    this.state.update((s) => ({ ...s, rules: s.rules.filter((r) => r.id !== id) }));
    this.version++;
  }

  toggle(id: string): R {
    const r = this.get(id);
    if (!r) throw new RuleStoreError("not_found", `no rule with id '${id}'`);
    const next = { ...r, enabled: !r.enabled } as R;
    this.state.update((s) => ({ ...s, rules: s.rules.map((x) => (x.id === id ? next : x)) }));
    this.version++;
    return next;
  }

  /**
   * Every rule with its `url_pattern` compiled (for families whose rules have one), compiled again only after a
   * change. A pattern that does not compile (a hand-edited state file) has a null matcher: that rule never matches.
   */
  protected urlMatchers(): { rule: R; matcher: UrlMatcher | null }[] {
    if (this.compiled.version !== this.version) {
      this.compiled = {
        version: this.version,
        rules: this.list().map((rule) => {
          try {
            return { rule, matcher: compileUrlPattern(String((rule as { url_pattern?: unknown }).url_pattern ?? "")) };
          } catch {
            return { rule, matcher: null };
          }
        }),
      };
    }
    return this.compiled.rules;
  }

  /** Bulk replace (script-rules sync). */
  replaceAll(rules: R[]): void {
    const ids = new Set<string>();
    for (const r of rules) {
      if (ids.has(r.id)) throw new RuleStoreError("invalid", `duplicate id '${r.id}'`);
      ids.add(r.id);
    }
    this.state.update((s) => ({ ...s, rules }));
    this.version++;
  }
}
