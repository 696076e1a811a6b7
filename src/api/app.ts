import { Elysia } from "elysia";
import { ApiError, BodyNotJson, describeValidationError, errorBody } from "./errors.ts";
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

/** What the parse hook returns for an absent or blank body (a hook must return something once it read the body). */
const NO_BODY = Symbol("no body");

/**
 * Every request body is read as text and parsed as JSON, whatever its declared Content-Type: `curl -d` sends
 * `application/x-www-form-urlencoded`, and `fetch` with a string body `text/plain`, and neither may turn a JSON body
 * into something else (Elysia would read the first as form fields and the second as a string). An absent or blank
 * body is `undefined` to the handler (each route decides whether it needs one); anything else that is not JSON is a
 * 400 saying so, on every route, so a malformed body is never silently ignored.
 */
async function parseJsonBody({ request }: { request: Request }): Promise<unknown> {
  const text = await request.text();
  if (text.trim() === "") return NO_BODY;
  try {
    return JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  } catch (e) {
    throw new BodyNotJson((e as Error).message);
  }
}

/**
 * The API frame: one Elysia app built from one plugin per route group.
 * Order of concerns for every request: Host check and bearer auth (before routing, so unknown routes are
 * guarded too), then routing and validation, then the handler; every failure leaves as `{error:{code,message}}`.
 */
export function buildApi(opts: ApiOptions) {
  let spec: object | undefined;
  let built: RoutePlugin | undefined;
  // normalize: false — Elysia's normalisation silently drops unknown body fields and turns a string or a number
  // sent where a record belongs into an object ("abc" -> {"0":"a",...}, 5 -> {}); without it both are a 400
  let app = new Elysia({ name: "tapwire-api", normalize: false })
    .onRequest(({ request }) => guardRequest(request, opts))
    .onParse({ as: "global" }, parseJsonBody)
    .onTransform({ as: "global" }, (c) => {
      if ((c as { body: unknown }).body === NO_BODY) (c as { body: unknown }).body = undefined;
    })
    .onError(({ code, error, set }) => {
      if (error instanceof ApiError) {
        set.status = error.status;
        return errorBody(error.code, error.message);
      }
      switch (code) {
        case "VALIDATION":
          set.status = 400;
          return errorBody("bad_request", describeValidationError(error));
        case "PARSE": {
          set.status = 400;
          const cause = (error as Error).cause;
          return errorBody("bad_request", (cause instanceof BodyNotJson ? cause : new BodyNotJson(String((cause as Error)?.message ?? cause))).message);
        }
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
    .get("/api/v1/openapi.json", async () => (spec ??= await openApiDocument(built as RoutePlugin, opts.version)), { detail: { hide: true } })
    .get(
      "/api/v1/docs",
      () => new Response(docsPage(TITLE, opts.version), { headers: { "content-type": "text/html; charset=utf-8" } }),
      { detail: { hide: true } },
    );
  for (const r of opts.routes) app = app.use(r);
  built = app;
  return app;
}

export type ApiApp = ReturnType<typeof buildApi>;

interface RouteView {
  hooks?: { parse?: { fn: unknown }[] } & Record<string, unknown>;
}

/**
 * The OpenAPI 3.1 document, made by @elysiajs/openapi's generator with one correction: the generator cannot describe
 * a body parsed by a function (it lists no media type at all), so routes are shown to it with the "json" parser,
 * which is what parseJsonBody does.
 */
async function openApiDocument(api: RoutePlugin, version: string): Promise<object> {
  // the generator is loaded when the document is first asked for: with import() it is a chunk of its own in the
  // binary (build.ts), out of the code every start loads
  const { toOpenAPISchema } = await import("@elysiajs/openapi");
  const app = api as unknown as { getGlobalRoutes(): RouteView[]; getGlobalDefinitions?(): unknown };
  const view = {
    getGlobalDefinitions: () => app.getGlobalDefinitions?.(),
    getGlobalRoutes: () =>
      app.getGlobalRoutes().map((r) =>
        r.hooks?.parse?.some((h) => h.fn === parseJsonBody) ? { ...r, hooks: { ...r.hooks, parse: [{ fn: "json" }] } } : r,
      ),
  };
  // staticFile: false — the generator leaves out every path with a dot unless told (GET /traffic/export.har)
  const { paths, components } = toOpenAPISchema(view as never, { staticFile: false });
  return {
    openapi: "3.1.2",
    info: {
      title: TITLE,
      version,
      description:
        "Local management API of tapwire, a headless traffic-inspecting proxy. Bound to 127.0.0.1 only. " +
        "Every route except GET /api/v1/health needs `Authorization: Bearer <token>` with the token from api-handshake.json. " +
        "Errors are `{error: {code, message}}`. Request bodies are JSON, whatever their Content-Type.",
    },
    security: [{ bearer: [] }],
    paths,
    components: { securitySchemes: { bearer: { type: "http", scheme: "bearer" } }, schemas: components?.schemas ?? {} },
  };
}
