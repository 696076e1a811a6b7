import { Elysia, t } from "elysia";
import { badRequest } from "../../api/errors.ts";
import { ruleFamilyRoutes } from "../rules/rule-routes.ts";
import type { MockMatcher } from "./matcher.ts";
import { MockRuleSchema, type MockRuleStore } from "./schema.ts";

/** Spec 8: the Mock Server's default port. */
export const DEFAULT_MOCK_PORT = 9100;

const tags = ["mock"];
const Status = t.Object({
  running: t.Boolean(),
  port: t.Integer({ description: "the bound port while running; when stopped, the port it last ran on (9100 if it never ran)" }),
});
const MatchResult = t.Object({
  matched: t.Boolean(),
  rule: t.Union([MockRuleSchema, t.Null()]),
  enabled: t.Boolean({ description: "extension: the master flag (when false nothing matches)" }),
});

/** The listener controls the routes need. */
export interface MockControl {
  status(): { running: boolean; port: number };
  /** Throws ApiError 409 when running or the port is taken. */
  start(port: number): { running: boolean; port: number };
  stop(): void;
}

/** `{port}` of POST /mock/start: absent body, absent or null port = 9100. */
export function parseStartBody(body: unknown): number {
  if (body === undefined || body === null || body === "") return DEFAULT_MOCK_PORT;
  if (typeof body !== "object" || Array.isArray(body)) throw badRequest("invalid body: expected an object {port?: integer}");
  const port = (body as { port?: unknown }).port;
  if (port === undefined || port === null) return DEFAULT_MOCK_PORT;
  if (typeof port !== "number" || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw badRequest("invalid body field 'port': expected an integer from 0 to 65535 (0 = a free port)");
  }
  return port;
}

/**
 * Spec 4.12: the shared rule-family routes (snapshot, PUT /enabled, POST /rules, PUT/DELETE /rules/{id}, toggle)
 * plus the Mock Server's own: GET /status, GET /match, POST /start, POST /stop.
 */
export function mockRoutes(deps: { store: MockRuleStore; matcher: MockMatcher; control: MockControl }) {
  const { store, matcher, control } = deps;
  const family = ruleFamilyRoutes({ name: "mock", prefix: "/api/v1/mock", store, schema: MockRuleSchema, what: "mock" });
  const own = new Elysia({ name: "mock-listener", prefix: "/api/v1/mock" })
    .get("/status", () => control.status(), {
      response: Status,
      detail: { tags, summary: "Mock listener status {running, port}" },
    })
    .get(
      "/match",
      ({ query }) => {
        const method = query.method === undefined || query.method.trim() === "" ? "GET" : query.method.trim();
        const hit = matcher.match(method, query.path);
        return { matched: hit !== null, rule: hit?.rule ?? null, enabled: store.enabled };
      },
      {
        query: t.Object({
          method: t.Optional(t.String({ description: "default GET" })),
          path: t.String({ minLength: 1, description: "path and query (an absolute URL's path and query are used)" }),
        }),
        response: MatchResult,
        detail: { tags, summary: "Which rule the listener would answer a request with: {matched, rule}" },
      },
    )
    .post(
      "/start",
      ({ body }) => control.start(parseStartBody(body)),
      {
        body: t.Unknown(),
        response: Status,
        detail: {
          tags,
          summary: "Start the mock listener on 127.0.0.1:{port} (default 9100, 0 = a free port); answers {running: true, port}; 409 if it runs or the port is taken",
        },
      },
    )
    .post(
      "/stop",
      ({ set }) => {
        control.stop();
        set.status = 204;
      },
      { detail: { tags, summary: "Stop the mock listener (204, also when it was not running)" } },
    );
  return [family, own];
}
