import { Elysia } from "elysia";
import { openapi } from "@elysiajs/openapi";
import { ApiError, describeValidationError, errorBody } from "./errors.ts";
import { guardRequest, type GuardOptions } from "./guard.ts";
import { docsPage } from "./docs-page.ts";

/** Any route-group plugin (one Elysia instance with a prefix per feature). */
// biome-ignore lint: Elysia's generics differ per plugin
export type RoutePlugin = Elysia<any, any, any, any, any, any, any>;

export interface ApiOptions extends GuardOptions {
  version: string;
  routes: RoutePlugin[];
}

const TITLE = "tapwire management API";

/**
 * The API frame: one Elysia app built from one plugin per route group.
 * Order of concerns for every request: Host check and bearer auth (before routing, so unknown routes are
 * guarded too), then routing and validation, then the handler; every failure leaves as `{error:{code,message}}`.
 */
export function buildApi(opts: ApiOptions) {
  let app = new Elysia({ name: "tapwire-api" })
    .onRequest(({ request }) => guardRequest(request, opts))
    .onError(({ code, error, set }) => {
      if (error instanceof ApiError) {
        set.status = error.status;
        return errorBody(error.code, error.message);
      }
      switch (code) {
        case "VALIDATION":
          set.status = 400;
          return errorBody("bad_request", describeValidationError(error));
        case "PARSE":
          set.status = 400;
          return errorBody("bad_request", "request body is not valid JSON (or not of the declared Content-Type)");
        case "NOT_FOUND":
          set.status = 404;
          return errorBody("not_found", "no such route");
        case "INVALID_COOKIE_SIGNATURE":
        case "INVALID_FILE_TYPE":
          set.status = 400;
          return errorBody("bad_request", String((error as Error).message));
        default: {
          set.status = 500;
          const message = error instanceof Error ? error.message : String(error);
          console.error(`tapwire: API error: ${error instanceof Error && error.stack ? error.stack : message}`);
          return errorBody("internal_error", message);
        }
      }
    })
    .use(
      openapi({
        provider: null,
        specPath: "/api/v1/openapi.json",
        path: "/api/v1/docs",
        documentation: {
          info: {
            title: TITLE,
            version: opts.version,
            description:
              "Local management API of tapwire, a headless traffic-inspecting proxy. Bound to 127.0.0.1 only. " +
              "Every route except GET /api/v1/health needs `Authorization: Bearer <token>` with the token from api-handshake.json. " +
              "Errors are `{error: {code, message}}`.",
          },
          components: { securitySchemes: { bearer: { type: "http", scheme: "bearer" } } },
          security: [{ bearer: [] }],
        },
      }),
    )
    .get(
      "/api/v1/docs",
      () => new Response(docsPage(TITLE, opts.version), { headers: { "content-type": "text/html; charset=utf-8" } }),
      { detail: { hide: true } },
    );
  for (const r of opts.routes) app = app.use(r);
  return app;
}

export type ApiApp = ReturnType<typeof buildApi>;
