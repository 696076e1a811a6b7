import { t, type Static, type TSchema } from "elysia";
import { Value } from "@sinclair/typebox/value";

/** A breakpoint (spec 2.6). Both flags default to true when left out. */
export const Breakpoint = t.Object(
  {
    pattern: t.String({ minLength: 1, description: "URL-shaped pattern (`https://api.example.com/v1/*`, `*.example.com/login`); see the shared matcher" }),
    intercept_request: t.Boolean({ default: true, description: "pause before the request goes upstream" }),
    intercept_response: t.Boolean({ default: true, description: "pause before the response goes to the client" }),
  },
  { additionalProperties: false },
);
export type Breakpoint = Static<typeof Breakpoint>;

export const BreakpointInput = t.Object(
  {
    pattern: Breakpoint.properties.pattern,
    intercept_request: t.Optional(Breakpoint.properties.intercept_request),
    intercept_response: t.Optional(Breakpoint.properties.intercept_response),
  },
  { additionalProperties: false },
);

export const BreakpointList = t.Array(Breakpoint);

export const DeleteBreakpoint = t.Object({ pattern: t.String({ minLength: 1 }) }, { additionalProperties: false });

export const HostList = t.Array(t.String(), { description: "host names; `*.example.com` matches every subdomain" });

/** RFC 9110 token characters: a header name. */
const HEADER_NAME = "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$";
/** A field value without CR, LF or NUL (which would split or break the head). */
const HEADER_VALUE = "^[^\\r\\n\\u0000]*$";

export const HeaderPair = t.Tuple([t.String({ pattern: HEADER_NAME }), t.String({ pattern: HEADER_VALUE })]);

/** The optional rewrite of POST /intercepts/{id}/resume. Which fields apply depends on the phase. */
export const Rewrite = t.Object(
  {
    abort: t.Optional(t.Boolean({ description: "answer the client 502 (request phase: without contacting the upstream)" })),
    url: t.Optional(t.String({ minLength: 1, description: "request phase: new absolute http(s) URL" })),
    method: t.Optional(t.String({ pattern: HEADER_NAME, description: "extension, request phase: new method (a token: GET, POST, PURGE...)" })),
    status_code: t.Optional(t.Integer({ minimum: 200, maximum: 599, description: "response phase: new status code" })),
    headers: t.Optional(t.Array(HeaderPair, { description: "replaces the whole header list ([name, value] pairs)" })),
    body: t.Optional(t.String({ description: "replaces the body; Content-Length is recomputed" })),
    body_encoding: t.Optional(t.Union([t.Literal("utf8"), t.Literal("base64")], { description: "how `body` is given (default utf8)" })),
  },
  { additionalProperties: false },
);
export type Rewrite = Static<typeof Rewrite>;

export const PausedFlow = t.Object({
  id: t.String(),
  phase: t.Union([t.Literal("request"), t.Literal("response")]),
  method: t.String(),
  url: t.String(),
  host: t.String(),
  paused_at: t.Integer({ description: "ms since the epoch" }),
  resumes_at: t.Integer({ description: "ms since the epoch: the flow resumes unchanged at this time (--intercept-timeout)" }),
  breakpoint: t.Optional(t.String({ description: "pattern of the breakpoint that paused the flow" })),
  intercept_host: t.Optional(t.String({ description: "intercept-host entry that paused the flow" })),
  status_code: t.Optional(t.Integer({ description: "response phase only" })),
  headers: t.Array(t.Tuple([t.String(), t.String()]), { description: "the held message's headers as they stand" }),
  body: t.String({ description: "preview of the held body, at most 64 KiB" }),
  body_encoding: t.Union([t.Literal("utf8"), t.Literal("base64")]),
  body_size: t.Integer(),
  body_truncated: t.Boolean(),
});
export type PausedFlow = Static<typeof PausedFlow>;

export class InvalidInput extends Error {}

/**
 * Checks `value` against `schema` (defaults filled in), failing with one sentence naming the first bad field.
 * Unknown fields are errors (a mistyped rewrite field must not be silently ignored).
 */
export function checkInput<S extends TSchema>(schema: S, value: unknown): Static<S> {
  const v = Value.Default(schema, structuredClone(value));
  const err = Value.Errors(schema, v).First();
  if (err) {
    const field = err.path.replace(/^\//, "").replace(/\//g, ".") || "(body)";
    const pattern = typeof err.value === "string" ? (err.schema as { pattern?: string }).pattern : undefined;
    const what = pattern === HEADER_NAME ? "not a header name" : pattern === HEADER_VALUE ? "header values must not contain CR, LF or NUL" : err.message;
    throw new InvalidInput(field === "(body)" ? `invalid body: ${what}` : `invalid body field '${field}': ${what}`);
  }
  return v as Static<S>;
}
