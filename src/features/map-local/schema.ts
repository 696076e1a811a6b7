import { type Static, Type } from "@sinclair/typebox";

const NullableString = (description: string) => Type.Union([Type.String(), Type.Null()], { default: null, description });

/**
 * A Map Local rule (spec 2.12). Fields the spec gives a default for may be omitted; so may the nullable ones
 * (null) and `method` ("" — required in substance only when match_all_methods is false, see MapLocalStore.parse).
 */
export const MapLocalRuleSchema = Type.Object({
  id: Type.String({ minLength: 1, description: "caller-supplied" }),
  url_pattern: Type.String({ minLength: 1, description: "URL glob: `*` within a segment, `**` across; default ports stripped; scheme optional" }),
  method: Type.String({ default: "", description: "compared case-insensitively; ignored when match_all_methods is true" }),
  match_all_methods: Type.Boolean({ default: false }),
  enabled: Type.Boolean({ default: true }),
  source: Type.String({ default: "inline_body", description: "inline_body or local_file; any other value behaves as inline_body" }),
  file_path: NullableString("absolute path of the file served when source = local_file; read on every request"),
  inline_body: NullableString("body served when source = inline_body: UTF-8 text, or base64 when inline_format is not a textual type"),
  inline_format: NullableString("MIME type (or json, html, xml, text, css, js, csv, yaml, binary) set as Content-Type"),
  status_code: Type.Integer({ minimum: 200, maximum: 599, default: 200 }),
  response_headers: Type.Record(Type.String(), Type.String(), { default: {}, description: "extra response headers (name to value)" }),
  delay_ms: Type.Integer({ minimum: 0, maximum: 600_000, default: 0, description: "wait this long before answering" }),
});

export type MapLocalRule = Static<typeof MapLocalRuleSchema>;

/** Short forms accepted in inline_format, and the Content-Type each stands for. */
const FORMAT_ALIASES: Record<string, string> = {
  json: "application/json",
  html: "text/html; charset=utf-8",
  xml: "application/xml",
  text: "text/plain; charset=utf-8",
  txt: "text/plain; charset=utf-8",
  plain: "text/plain; charset=utf-8",
  css: "text/css; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  javascript: "text/javascript; charset=utf-8",
  csv: "text/csv; charset=utf-8",
  yaml: "application/yaml",
  binary: "application/octet-stream",
};

/**
 * The Content-Type an inline_format stands for: an alias is expanded, a value with a `/` is used as given,
 * null or blank means none. Throws (with a message) for anything else.
 */
export function contentTypeOf(format: string | null): string | null {
  if (format === null) return null;
  const f = format.trim();
  if (f === "") return null;
  const alias = FORMAT_ALIASES[f.toLowerCase()];
  if (alias) return alias;
  if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+\/[!#$%&'*+.^_`|~0-9A-Za-z-]+(\s*;.*)?$/.test(f)) {
    throw new Error(`'${format}' is not a MIME type (type/subtype) nor one of ${Object.keys(FORMAT_ALIASES).join(", ")}`);
  }
  if (/[\x00-\x08\x0a-\x1f\x7f]/.test(f)) throw new Error("control characters are not allowed");
  return f;
}

const TEXTUAL_APPLICATION = new Set([
  "application/json",
  "application/xml",
  "application/javascript",
  "application/ecmascript",
  "application/x-javascript",
  "application/x-www-form-urlencoded",
  "application/graphql",
  "application/yaml",
  "application/x-yaml",
  "application/x-ndjson",
  "application/toml",
  "application/x-sh",
  "application/sql",
]);

/**
 * Whether a Content-Type is text, so that an inline_body of that type is UTF-8 text rather than base64:
 * no type at all, text/*, a `charset` parameter, the common textual application types, and +json / +xml / +yaml
 * suffixes (image/svg+xml included). Everything else (images, octet-stream, pdf, protobuf...) is binary.
 */
export function isTextual(contentType: string | null): boolean {
  if (contentType === null) return true;
  const lower = contentType.toLowerCase();
  const essence = lower.split(";")[0]!.trim();
  if (essence.startsWith("text/")) return true;
  if (/;\s*charset=/.test(lower)) return true;
  if (TEXTUAL_APPLICATION.has(essence)) return true;
  return /\+(json|xml|yaml)$/.test(essence);
}

/** Standard base64 or base64url, whitespace ignored, padding optional. */
export function isBase64(s: string): boolean {
  const t = s.replace(/\s+/g, "");
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(t)) return false;
  const core = t.replace(/=+$/, "");
  if (core.length % 4 === 1) return false;
  return t.length === core.length || t.length % 4 === 0;
}

export const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Field values: visible characters, spaces and tabs (no CR, LF, NUL or other controls). */
export const HEADER_VALUE = /^[^\x00-\x08\x0a-\x1f\x7f]*$/;
