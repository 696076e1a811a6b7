import { isAbsolute } from "node:path";
import { compileUrlPattern } from "../rules/matcher.ts";
import { invalidField as invalid, METHOD_TOKEN, RuleStore } from "../rules/rule-store.ts";
import { contentTypeOf, HEADER_NAME, HEADER_VALUE, isBase64, isTextual, type MapLocalRule, MapLocalRuleSchema } from "./schema.ts";

/** The Map Local rule family: the shared RuleStore plus the checks a schema cannot express, and matching. */
export class MapLocalStore extends RuleStore<typeof MapLocalRuleSchema> {
  constructor(path: string, onCorrupt?: (path: string, movedTo: string, reason: string) => void) {
    super(path, MapLocalRuleSchema, { onCorrupt });
  }

  /** Schema validation (defaults filled) plus: a compilable url_pattern, a method unless all methods match,
   * an absolute file_path for local_file, a known inline_format, base64 for a binary inline body, header names
   * and values that can go on the wire. Throws RuleStoreError("invalid") naming the field. */
  override parse(input: unknown): MapLocalRule {
    // TypeBox's Value.Default rebuilds an array given for a Record field as an object ({"0": ...}); refuse it first
    const headers = input && typeof input === "object" ? (input as Record<string, unknown>).response_headers : undefined;
    if (Array.isArray(headers)) invalid("response_headers", "expected an object of header name to value, got an array");
    const r = super.parse(input);
    try {
      compileUrlPattern(r.url_pattern);
    } catch (e) {
      invalid("url_pattern", (e as Error).message);
    }
    if (!r.match_all_methods) {
      if (r.method.trim() === "") invalid("method", "required when match_all_methods is false");
      if (!METHOD_TOKEN.test(r.method.trim())) invalid("method", `'${r.method}' is not an HTTP method`);
    }
    if (r.source === "local_file") {
      if (r.file_path === null || r.file_path.trim() === "") invalid("file_path", "required when source is local_file");
      if (!isAbsolute(r.file_path)) invalid("file_path", `'${r.file_path}' is not an absolute path`);
    }
    let contentType: string | null;
    try {
      contentType = contentTypeOf(r.inline_format);
    } catch (e) {
      invalid("inline_format", (e as Error).message);
    }
    if (r.source !== "local_file" && r.inline_body !== null && !isTextual(contentType) && !isBase64(r.inline_body)) {
      invalid("inline_body", `inline_format '${r.inline_format}' is binary, so inline_body must be base64`);
    }
    for (const [name, value] of Object.entries(r.response_headers)) {
      if (!HEADER_NAME.test(name)) invalid(`response_headers.${name}`, "not a valid header name");
      if (!HEADER_VALUE.test(value)) invalid(`response_headers.${name}`, "header values must not contain control characters (CR, LF, NUL...)");
    }
    return r;
  }

  /**
   * The first enabled rule (in list order) matching this method and absolute URL, or null. The master flag is
   * not consulted (the addon checks it; the match preview ignores it).
   */
  match(method: string, url: string): MapLocalRule | null {
    const m = method.toUpperCase();
    for (const { rule, matcher } of this.urlMatchers()) {
      if (!rule.enabled || matcher === null) continue;
      if (!rule.match_all_methods && rule.method.trim().toUpperCase() !== m) continue;
      if (matcher.match(url)) return rule;
    }
    return null;
  }
}
