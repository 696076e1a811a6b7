import { Type as t, type Static } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { compileUrlPattern, type UrlMatcher } from "../rules/matcher.ts";
import { MAX_RATE } from "./bucket.ts";

/** Longest delay a rule may ask for (10 minutes): longer ones are almost certainly a typo. */
export const MAX_DELAY_MS = 600_000;

const Rate = (what: string) =>
  t.Integer({ minimum: 0, maximum: MAX_RATE, default: 0, description: `${what} (bytes per second; 0 = no limit)` });
const Delay = (what: string) =>
  t.Integer({ minimum: 0, maximum: MAX_DELAY_MS, default: 0, description: `${what} (milliseconds; 0 = none)` });

/** One scoped throttle rule: the one schema for the rules file and for the API's answers. */
export const ThrottleRule = t.Object(
  {
    id: t.String({ minLength: 1, maxLength: 200, description: "unique within the file; keeps the rule's rate budget across reloads" }),
    name: t.String({ maxLength: 500, default: "", description: "free text" }),
    enabled: t.Boolean({ default: true }),
    url_pattern: t.String({ minLength: 1, description: "URL glob, same syntax as every other rule family (src/features/rules/matcher.ts)" }),
    down_bytes_per_second: Rate("rate of response bytes to the client, shared by every flow the rule matches"),
    up_bytes_per_second: Rate("rate of request bytes to the upstream, shared by every flow the rule matches"),
    down_delay_ms: Delay("wait before the response head goes to the client"),
    up_delay_ms: Delay("wait before the request goes upstream"),
  },
  { additionalProperties: false, $id: "#/components/schemas/ThrottleRule" },
);
export type ThrottleRule = Static<typeof ThrottleRule>;

/** The rules file: `{"rules": [rule, ...]}`. */
export const ThrottleRulesFile = t.Object({ rules: t.Array(ThrottleRule) }, { additionalProperties: false });

export interface CompiledRule {
  readonly rule: ThrottleRule;
  readonly matcher: UrlMatcher;
}

export class RulesFileError extends Error {}

/**
 * Parses and validates the text of throttle-rules.json: defaults are filled, unknown fields are refused (a typo
 * must not silently do nothing), ids must be unique and every url_pattern must compile. Throws RulesFileError
 * naming the rule and field.
 */
export function parseRulesText(text: string): CompiledRule[] {
  if (text.trim() === "") throw new RulesFileError("the file is empty (write {\"rules\": []} for no rules)");
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new RulesFileError(`not valid JSON (${(e as Error).message})`);
  }
  if (Array.isArray(raw)) throw new RulesFileError('expected an object {"rules": [...]}, got an array');
  const value = Value.Default(ThrottleRulesFile, raw);
  const err = Value.Errors(ThrottleRulesFile, value).First();
  if (err) throw new RulesFileError(`${describePath(err.path)}: ${err.message}`);
  const file = value as Static<typeof ThrottleRulesFile>;
  const seen = new Set<string>();
  return file.rules.map((rule, i) => {
    if (seen.has(rule.id)) throw new RulesFileError(`rules[${i}].id: duplicate id '${rule.id}'`);
    seen.add(rule.id);
    let matcher: UrlMatcher;
    try {
      matcher = compileUrlPattern(rule.url_pattern);
    } catch (e) {
      throw new RulesFileError(`rules[${i}].url_pattern: ${(e as Error).message}`);
    }
    return { rule, matcher };
  });
}

/** `/rules/1/up_delay_ms` -> `rules[1].up_delay_ms`. */
function describePath(path: string): string {
  const parts = path.split("/").filter((p) => p !== "");
  if (parts.length === 0) return "(file)";
  let out = "";
  for (const p of parts) out += /^\d+$/.test(p) ? `[${p}]` : out ? `.${p}` : p;
  return out;
}

/** The first enabled rule matching the URL the client asked for or the URL it was rewritten to. */
export function firstMatch(rules: readonly CompiledRule[], url: string, originalUrl: string): CompiledRule | null {
  for (const r of rules) {
    if (!r.rule.enabled) continue;
    if (r.matcher.match(url) || (originalUrl !== url && r.matcher.match(originalUrl))) return r;
  }
  return null;
}
