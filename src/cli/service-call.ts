/** Helpers of the commands that talk to the running service through its management API. */
import { ApiClient, type ApiAnswer } from "./client.ts";
import { CliFailure, str, type Io, type Values } from "./command.ts";

/** The client of the service on --data-dir (else $TAPWIRE_DATA_DIR, else the default); NotRunningError if none. */
export function connect(values: Values, io: Io): ApiClient {
  return ApiClient.fromDataDir(str(values, "data-dir"), io.env);
}

/** The message of an API error answer ({"error": {"message"}}), else the status and the start of the body. */
export function apiErrorMessage(a: ApiAnswer): string {
  const msg = (a.json as { error?: { message?: unknown } } | undefined)?.error?.message;
  if (typeof msg === "string") return `${msg} (HTTP ${a.status})`;
  return `HTTP ${a.status}${a.text ? `: ${a.text.slice(0, 200)}` : ""}`;
}

/** Calls the API and returns the parsed JSON body; a status >= 400 is a CliFailure naming the API's message. */
export async function callJson<T = unknown>(client: ApiClient, method: string, path: string, body?: unknown): Promise<T> {
  const a = await client.request(method, path, body);
  if (a.status >= 400) throw new CliFailure(`${method} ${path}: ${apiErrorMessage(a)}`);
  return a.json as T;
}

/** Calls the API and returns the body text; a status >= 400 is a CliFailure. */
export async function callText(client: ApiClient, method: string, path: string): Promise<string> {
  const a = await client.request(method, path);
  if (a.status >= 400) throw new CliFailure(`${method} ${path}: ${apiErrorMessage(a)}`);
  return a.text;
}

/** A query string from the defined values (`?a=1&b=x`, or "" when there is none). */
export function queryString(params: Record<string, string | number | boolean | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : "";
}
