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

/** Turn Elysia's validation error into one sentence naming the bad field(s). */
export function describeValidationError(err: unknown): string {
  const e = err as { type?: string; all?: { path?: string; message?: string; summary?: string }[]; message?: string };
  let on = e.type ?? "";
  try {
    const parsed = JSON.parse(String(e.message));
    if (parsed && typeof parsed.on === "string") on = parsed.on;
  } catch {}
  const where = on === "params" ? "path parameter" : on === "query" ? "query parameter" : on === "body" ? "body field" : "field";
  const issues = (e.all ?? []).slice(0, 3).map((i) => {
    const field = (i.path ?? "").replace(/^\//, "").replace(/\//g, ".") || "(root)";
    return `${where} '${field}': ${i.summary ?? i.message ?? "invalid"}`;
  });
  if (issues.length === 0) return `invalid ${on || "request"}`;
  return `invalid ${on || "request"}: ${issues.join("; ")}`;
}
