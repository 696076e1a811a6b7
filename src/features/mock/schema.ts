import { type Static, Type as t } from "@sinclair/typebox";
import { TOKEN } from "../../core/http1/chars.ts";
import { invalidField as invalid, RuleStore } from "../rules/rule-store.ts";

/** Longest artificial delay a rule may ask for (10 minutes). */
export const MAX_LATENCY_MS = 600_000;

/**
 * Mock rule (spec 2.14), field names exactly as the spec gives them. Required: id, url_pattern; every other field
 * has a default. status_code is 200..999: a 1xx final answer would leave clients waiting for the real one.
 * Plain TypeBox, not Elysia's `t`: Elysia's t.Integer / t.Boolean also accept numeric / boolean strings, and a
 * stored rule must hold the JSON types the spec gives.
 */
export const MockRuleSchema = t.Object({
  id: t.String({ minLength: 1, description: "caller-supplied, unique" }),
  name: t.String({ default: "", description: "display name" }),
  enabled: t.Boolean({ default: true, description: "per-rule toggle" }),
  method: t.String({ default: "", description: "empty matches any method; compared case-insensitively" }),
  url_pattern: t.String({
    minLength: 1,
    description: "a path, not a full URL; * stays within a segment, ** crosses /, a trailing * matches any rest; a pattern without ? ignores the query",
  }),
  status_code: t.Integer({ minimum: 200, maximum: 999, default: 200 }),
  status_text: t.Union([t.String(), t.Null()], { default: null, description: "reason phrase sent on the wire; null = the standard phrase" }),
  headers: t.Array(t.Tuple([t.String(), t.String()]), { default: [], description: "response headers as [name, value] pairs, in order" }),
  body: t.String({ default: "" }),
  body_is_base64: t.Boolean({ default: false, description: "when true the body is base64-decoded to raw bytes" }),
  latency_ms: t.Union([t.Integer({ minimum: 0, maximum: MAX_LATENCY_MS }), t.Null()], { default: null, description: "delay before answering" }),
});

export type MockRule = Static<typeof MockRuleSchema>;

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const BASE64URL = /^[A-Za-z0-9_-]*={0,2}$/;

/** Strict base64 (standard or URL-safe alphabet, whitespace ignored, padding optional); null if not base64. */
export function decodeBase64Strict(s: string): Uint8Array | null {
  const compact = s.replace(/[\t\n\r ]+/g, "");
  if (!BASE64.test(compact) && !BASE64URL.test(compact)) return null;
  const unpadded = compact.replace(/=+$/, "");
  if (unpadded.length % 4 === 1) return null;
  if (compact.length !== unpadded.length && compact.length % 4 !== 0) return null;
  return new Uint8Array(Buffer.from(compact, compact.includes("-") || compact.includes("_") ? "base64url" : "base64"));
}

function isToken(s: string): boolean {
  if (s.length === 0) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c > 0xff || TOKEN[c] !== 1) return false;
  }
  return true;
}

/** Index of the first control character (other than HTAB) or DEL, or -1. */
function badTextChar(s: string): number {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09) || c === 0x7f) return i;
  }
  return -1;
}

/**
 * The Mock rule family store: the shared RuleStore (TypeBox schema, defaults, 409/404, persisted in mock.json),
 * plus the checks a schema cannot express, so that every stored rule can be put on the wire: a non-blank
 * url_pattern, a token method, a reason phrase and header fields without control characters (no header
 * injection), header names that are tokens, and a body that is valid base64 when body_is_base64 is set.
 */
export class MockRuleStore extends RuleStore<typeof MockRuleSchema> {
  override parse(input: unknown): MockRule {
    const r = super.parse(input) as MockRule;
    if (r.url_pattern.trim() === "") invalid("url_pattern", "must not be blank");
    const m = r.method.trim();
    if (m !== "" && !isToken(m)) invalid("method", "must be empty (any method) or an HTTP method token");
    if (r.status_text !== null && badTextChar(r.status_text) >= 0) invalid("status_text", "must not contain control characters (CR, LF, NUL, ...)");
    r.headers.forEach(([name, value], i) => {
      if (!isToken(name)) invalid(`headers.${i}.0`, `header name ${JSON.stringify(name)} is not a valid token`);
      if (badTextChar(value) >= 0) invalid(`headers.${i}.1`, "header value must not contain control characters (CR, LF, NUL, ...)");
    });
    if (r.body_is_base64 && decodeBase64Strict(r.body) === null) invalid("body", "body_is_base64 is true but the body is not valid base64");
    return r;
  }
}
