import { Elysia, t, type DocumentDecoration } from "elysia";
import { badRequest, notFound } from "../../api/errors.ts";
import { checkHostEntry, type PersistedList } from "../ignore/lists.ts";
import { stringListRoutes } from "../ignore/routes.ts";
import { InterceptError, type InterceptService } from "./intercepts.ts";
import { BreakpointInput, BreakpointList, checkInput, DeleteBreakpoint, HostList, InvalidInput, PausedFlow, Rewrite } from "./models.ts";
import type { BreakpointStore } from "./store.ts";

/**
 * Bodies are not given to Elysia (which would silently drop unknown fields and coerce a missing body); the stores
 * check them with the same TypeBox models (unknown fields are a 400 naming them), and the models are published here.
 */
type MediaSchema = { content: Record<string, { schema?: unknown }> };
const jsonBody = (schema: object, required: boolean): DocumentDecoration => ({
  requestBody: { required, content: { "application/json": { schema } } } as MediaSchema as DocumentDecoration["requestBody"],
});

function input<T>(fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    if (e instanceof InvalidInput) throw badRequest(e.message);
    if (e instanceof InterceptError) throw e.kind === "not_found" ? notFound(e.message) : badRequest(e.message);
    throw e;
  }
}

/** Breakpoints (spec 4.4): list, create-or-update by pattern, delete one by pattern, clear. */
export function breakpointsRoutes(store: BreakpointStore) {
  const tags = ["breakpoints"];
  return new Elysia({ name: "breakpoints", prefix: "/api/v1/breakpoints" })
    .get("/", () => store.list(), { response: BreakpointList, detail: { tags, summary: "List breakpoints, in the order they are tried" } })
    .put(
      "/",
      ({ body, set }) => {
        input(() => store.put(store.parse(body)));
        set.status = 204;
      },
      {
        detail: { tags, summary: "Create a breakpoint, or replace the one with the same pattern (204)", ...jsonBody(BreakpointInput, true) },
      },
    )
    .post(
      "/delete",
      ({ body, set }) => {
        const { pattern } = input(() => checkInput(DeleteBreakpoint, body));
        if (!store.delete(pattern)) throw notFound(`no breakpoint with pattern ${JSON.stringify(pattern.trim())}`);
        set.status = 204;
      },
      { detail: { tags, summary: "Delete the breakpoint with this pattern (204; 404 if there is none)", ...jsonBody(DeleteBreakpoint, true) } },
    )
    .delete(
      "/",
      ({ set }) => {
        store.clear();
        set.status = 204;
      },
      { detail: { tags, summary: "Delete every breakpoint (204)" } },
    );
}

/** Paused flows (spec 4.5): list them, resume one (optionally rewritten or aborted). */
export function interceptsRoutes(service: InterceptService) {
  const tags = ["intercepts"];
  return new Elysia({ name: "intercepts", prefix: "/api/v1/intercepts" })
    .get("/", () => service.list(), { response: t.Array(PausedFlow), detail: { tags, summary: "Paused flows, oldest first" } })
    .post(
      "/:id/resume",
      ({ params, body, set }) => {
        input(() => service.resume(params.id, body));
        set.status = 204;
      },
      {
        params: t.Object({ id: t.String() }),
        detail: {
          tags,
          summary: "Release a paused flow, optionally rewritten or aborted (204; 404 once the id is gone; 400 leaves it paused)",
          ...jsonBody(Rewrite, false),
        },
      },
    );
}

function validHost(raw: string): string {
  try {
    return checkHostEntry(raw);
  } catch (e) {
    throw badRequest((e as Error).message);
  }
}

/** Intercept hosts (spec 4.6): every request to a listed host pauses at the request phase. */
export function interceptHostsRoutes(list: PersistedList) {
  return stringListRoutes({ name: "intercept-hosts", prefix: "/api/v1/intercept-hosts", list, check: validHost, schema: HostList, what: "intercept hosts", itemParam: "host" });
}
