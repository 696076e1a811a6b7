import { compileUrlPattern } from "../rules/matcher.ts";
import { invalidField as invalid, METHOD_TOKEN, RuleStore, RuleStoreError } from "../rules/rule-store.ts";
import { type ScriptRule, ScriptRuleSchema } from "./schema.ts";

/**
 * The script rule family (spec 2.15): the shared RuleStore (persisted atomically in script-rules.json; the master
 * flag is `scripting_enabled` on the wire) plus the checks a schema cannot express, and matching.
 */
export class ScriptRuleStore extends RuleStore<typeof ScriptRuleSchema> {
  constructor(path: string, onCorrupt?: (path: string, movedTo: string, reason: string) => void) {
    super(path, ScriptRuleSchema, { onCorrupt });
  }

  /** Every field is required (spec 2.15); the pattern must compile and the method be a token or empty. */
  override parse(input: unknown): ScriptRule {
    if (input && typeof input === "object" && !Array.isArray(input)) {
      for (const key of Object.keys(ScriptRuleSchema.properties)) {
        if (!(key in input)) invalid(key, "required (every script rule field is required)");
      }
    }
    const r = super.parse(input);
    try {
      compileUrlPattern(r.url_pattern);
    } catch (e) {
      invalid("url_pattern", (e as Error).message);
    }
    if (r.method.trim() !== "" && !METHOD_TOKEN.test(r.method.trim())) invalid("method", `'${r.method}' is not an HTTP method`);
    return r;
  }

  /** Validates a whole list first (each rule, then duplicate ids); throws naming the index. Nothing is stored. */
  parseAll(input: unknown): ScriptRule[] {
    if (!Array.isArray(input)) throw new RuleStoreError("invalid", "invalid body: expected an array of script rules");
    const seen = new Set<string>();
    return input.map((item, i) => {
      let r: ScriptRule;
      try {
        r = this.parse(item);
      } catch (e) {
        throw new RuleStoreError("invalid", `rule [${i}]: ${(e as Error).message}`);
      }
      if (seen.has(r.id)) throw new RuleStoreError("invalid", `rule [${i}]: duplicate id '${r.id}'`);
      seen.add(r.id);
      return r;
    });
  }

  /** The wire form of the list (spec 4.15). */
  wire(): { scripting_enabled: boolean; rules: ScriptRule[] } {
    const s = this.snapshot();
    return { scripting_enabled: s.enabled, rules: s.rules };
  }

  /**
   * Enabled rules matching this method and absolute URL, in list order, that have a script for the phase. The
   * master flag is not consulted (the addon checks it).
   */
  matching(method: string, url: string, phase: "request" | "response"): ScriptRule[] {
    const m = method.toUpperCase();
    const out: ScriptRule[] = [];
    for (const { rule, matcher } of this.urlMatchers()) {
      if (!rule.enabled || matcher === null) continue;
      if (phase === "request" ? !rule.apply_to_request || rule.request_script.trim() === "" : !rule.apply_to_response || rule.response_script.trim() === "") continue;
      const rm = rule.method.trim();
      if (rm !== "" && rm.toUpperCase() !== m) continue;
      if (matcher.match(url)) out.push(rule);
    }
    return out;
  }
}
