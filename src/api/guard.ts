import { createHash, timingSafeEqual } from "node:crypto";
import { errorResponse } from "./errors.ts";

/** Routes answered without a bearer token. */
export const PUBLIC_PATHS = new Set(["/api/v1/health", "/api/v1/openapi.json", "/api/v1/docs"]);

/** A value from a client, safe to echo in a message (control characters escaped, length capped). */
const printable = (s: string) => JSON.stringify(s.slice(0, 200)).slice(1, -1);

const digest = (s: string) => createHash("sha256").update(s).digest();

/** Constant-time token check: both sides are hashed to equal length first, so length leaks nothing either. */
export function tokenMatches(presented: string, expected: string): boolean {
  return timingSafeEqual(digest(presented), digest(expected));
}

export interface GuardOptions {
  token: string;
  /** The API port, read when a request arrives (the port is known only after listening). */
  port: () => number;
}

/**
 * DNS-rebinding defence and bearer auth, run before routing (so unknown routes are guarded too).
 * Returns a Response to refuse the request, or undefined to let it through.
 */
export function guardRequest(request: Request, opts: GuardOptions): Response | undefined {
  const port = opts.port();
  const ours = (h: string) => h === `127.0.0.1:${port}` || h === `localhost:${port}`;
  // the request's URL as Bun built it (from the Host header): a Host like `127.0.0.1:PORT@evil.com`, or none at all
  // (HTTP/1.0), leaves it unparseable, which is the client's mistake, never a 500
  let url: URL;
  try {
    url = new URL(request.url);
  } catch {
    const sent = request.headers.get("host");
    if (sent !== null && !ours(sent)) return errorResponse(403, "forbidden_host", `Host header '${printable(sent)}' is not allowed; use 127.0.0.1:${port}`);
    return errorResponse(400, "bad_request", `missing or invalid Host header; send Host: 127.0.0.1:${port}`);
  }
  // the Host header is compared as sent (in-process requests have none: their URL says where they go)
  const host = request.headers.get("host") ?? url.host;
  if (!ours(host)) return errorResponse(403, "forbidden_host", `Host header '${printable(host)}' is not allowed; use 127.0.0.1:${port}`);
  // an absolute-form target (`GET http://evil.example/x`) reaches us as the URL itself (server.ts): its scheme and
  // authority must be ours too
  if (!ours(url.host) || url.protocol !== "http:") return errorResponse(403, "forbidden_host", `request target '${printable(`${url.protocol}//${url.host}`)}' is not allowed; use http://127.0.0.1:${port}`);
  if (PUBLIC_PATHS.has(url.pathname) && request.method === "GET") return undefined;
  // the web UI's page and assets (src/features/ui): the page holds no data; it sends the token on every API call
  if (request.method === "GET" && (url.pathname === "/ui" || url.pathname.startsWith("/ui/"))) return undefined;
  const auth = request.headers.get("authorization");
  if (!auth) return errorResponse(401, "unauthorized", "missing Authorization: Bearer <token> header (token is in api-handshake.json)");
  const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
  if (!m || !tokenMatches(m[1]!, opts.token)) return errorResponse(401, "unauthorized", "invalid bearer token");
  return undefined;
}
