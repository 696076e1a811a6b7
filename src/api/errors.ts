import { t } from "elysia";

/** One error format for every API failure: `{error: {code, message}}`. */
export interface ErrorBody {
  error: { code: string; message: string };
}

/** Thrown by services and handlers; the API frame turns it into the JSON error body with its status. */
export class ApiError extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
  }
}

/** A request body that does not parse as JSON (every body of this API is JSON, whatever its declared type). */
export class BodyNotJson extends ApiError {
  constructor(detail: string) {
    super(400, "bad_request", `request body must be JSON (it is read as JSON whatever its Content-Type): ${detail}`);
  }
}

export const notFound = (what: string) => new ApiError(404, "not_found", what);
export const badRequest = (message: string) => new ApiError(400, "bad_request", message);
export const conflict = (message: string) => new ApiError(409, "conflict", message);

export function errorBody(code: string, message: string): ErrorBody {
  return { error: { code, message } };
}

export function errorResponse(status: number, code: string, message: string): Response {
  return new Response(JSON.stringify(errorBody(code, message)), {
    status,
    headers: { "content-type": "application/json" },
  });
}

/**
 * A path or query value that must be a non-negative integer written in decimal digits (ids, limit, offset, status
 * codes, timestamps). It is validated as a string with a pattern, never with `t.Numeric`: Elysia's numeric coercion
 * takes `1e1`, `0x10`, `+5` and ` 5` (and a blank as 0), and reports a failed bound without the parameter's name.
 * The handler converts it with `Number`.
 */
export const UintString = (description: string) =>
  t.String({ pattern: "^[0-9]{1,15}$", description: `${description} (a non-negative integer, at most 15 digits)`, error: "expected a non-negative integer (decimal digits only, at most 15)" });

/**
 * Query parameters a route knows: anything else, or a known one given twice, is a 400 (a filter the caller sent is
 * never silently ignored, and Elysia would drop an unknown one and keep one of two values without a word).
 */
export function checkQueryNames(url: string, known: readonly string[]): void {
  const q = url.indexOf("?");
  if (q < 0) return;
  const seen = new Set<string>();
  for (const name of new URLSearchParams(url.slice(q + 1)).keys()) {
    if (!known.includes(name)) {
      throw badRequest(
        known.length === 0
          ? `unknown query parameter '${name}': this route takes no query parameters`
          : `unknown query parameter '${name}' (known: ${known.join(", ")})`,
      );
    }
    if (seen.has(name)) throw badRequest(`query parameter '${name}' is given more than once`);
    seen.add(name);
  }
}

/** Turn Elysia's validation error into one sentence naming the bad field(s). */
export function describeValidationError(err: unknown): string {
  const e = err as {
    type?: string;
    all?: { path?: string; message?: string; summary?: string; value?: unknown; schema?: { error?: unknown } }[];
    message?: string;
  };
  let on = e.type ?? "";
  try {
    const parsed = JSON.parse(String(e.message));
    if (parsed && typeof parsed.on === "string") on = parsed.on;
  } catch {}
  const where = on === "params" ? "path parameter" : on === "query" ? "query parameter" : on === "body" ? "body field" : "field";
  const issues = (e.all ?? []).slice(0, 3).map((i) => {
    const field = (i.path ?? "").replace(/^\//, "").replace(/\//g, ".") || "(root)";
    // a schema's own `error` text (UintString) says what was expected; then name the value that was sent
    if (typeof i.schema?.error === "string") return `${where} '${field}': ${i.schema.error}, got ${JSON.stringify(i.value)}`;
    return `${where} '${field}': ${i.summary ?? i.message ?? "invalid"}`;
  });
  if (issues.length === 0) return `invalid ${on || "request"}`;
  return `invalid ${on || "request"}: ${issues.join("; ")}`;
}
