import type { Static, TSchema } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { Elysia, t } from "elysia";
import { badRequest, checkQueryNames } from "../../api/errors.ts";
import { AdHocRunBodySchema, FlowInputSchema, FlowSummarySchema, FlowWithSubflowsSchema, RunBodySchema, ValidationResultSchema } from "./schema.ts";
import type { FlowService } from "./service.ts";
import { type FlowStore, normalizeFlow, subflowIds } from "./store.ts";
import { validateFlow } from "./validate.ts";

const tags = ["flows"];

/**
 * Bodies are checked here with TypeBox rather than by Elysia: Elysia's validator coerces a string where a record is
 * expected into `{"0": ...}` and does not check an optional body at all, and bad input must be a 400, never
 * something else silently. The schemas still describe the bodies in the OpenAPI document (`requestBody`).
 */
function checked<T extends TSchema>(schema: T, body: unknown): Static<T> {
  if (body === undefined) throw badRequest("invalid body: a JSON body is required");
  if (Value.Check(schema, body)) return body as Static<T>;
  const first = Value.Errors(schema, body).First();
  const field = (first?.path ?? "").replace(/^\//, "").replace(/\//g, ".") || "(root)";
  throw badRequest(`invalid body field '${field}': ${first?.message ?? "invalid"}`);
}

const jsonBody = (schema: TSchema, required = true) => ({ required, content: { "application/json": { schema } } });

/**
 * The overrides of a run body. Checked here as well as by the schema: Elysia does not validate an optional body that
 * is present, and a field the caller sent must never be silently ignored.
 */
function runEnvironment(body: unknown): Record<string, unknown> | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body !== "object" || Array.isArray(body)) throw badRequest("invalid body: expected an object {environment: {name: value}} or no body");
  for (const k of Object.keys(body)) if (k !== "environment") throw badRequest(`invalid body: unknown field '${k}' (the body is {environment: {name: value}})`);
  const env = (body as { environment?: unknown }).environment;
  if (env === undefined) return undefined;
  if (env === null || typeof env !== "object" || Array.isArray(env)) throw badRequest("invalid body field 'environment': expected an object of variable overrides {name: value}");
  return env as Record<string, unknown>;
}
const Id = t.Object({ id: t.String() });
const withSubflows = <T extends { nodes: { type: string; data: Record<string, unknown> }[] }>(f: T) => ({ ...f, subflowIds: subflowIds(f) });

/**
 * Spec 4.14 (GET /flows, GET /flows/{id}, POST /flows/{id}/run) and the authoring extensions: POST /flows,
 * PUT /flows/{id}, DELETE /flows/{id}, POST /flows/validate, and POST /flows/run (run a flow sent whole).
 */
export function flowRoutes(store: FlowStore, flows: FlowService) {
  return new Elysia({ name: "flows", prefix: "/api/v1/flows" })
    .onBeforeHandle(({ request }) => checkQueryNames(request.url, []))
    .get("", () => ({ flows: store.list() }), {
      response: t.Object({ flows: t.Array(FlowSummarySchema) }),
      detail: { tags, summary: "Summaries of the stored flows, oldest first; corrupt files are skipped silently" },
    })
    .get("/:id", ({ params }) => withSubflows(store.get(params.id)), {
      params: Id,
      response: FlowWithSubflowsSchema,
      detail: { tags, summary: "The stored flow plus subflowIds (the de-duplicated flowIds of its subflow nodes, in node order); 404 missing or corrupt" },
    })
    .post("/validate", ({ body: raw }) => {
      const body = checked(FlowInputSchema, raw);
      const flow = normalizeFlow(body, body.id ?? "unsaved", { createdAt: 0, updatedAt: 0 });
      const problems = validateFlow(flow, (id) => store.read(id));
      return { valid: !problems.some((p) => p.severity === "error"), problems };
    }, {
      response: ValidationResultSchema,
      detail: {
        tags,
        requestBody: jsonBody(FlowInputSchema),
        summary:
          "Extension: check a flow (id optional) without storing it: unknown node types, invalid node data, dangling edges, condition edges without a true/false handle, missing subflows, subflow recursion and depth (errors: a run refuses to start) and unreachable nodes (warnings)",
      },
    })
    .post("/run", ({ body: raw }) => {
      const body = checked(AdHocRunBodySchema, raw);
      return flows.run(normalizeFlow(body.flow, body.flow.id ?? "unsaved", { createdAt: 0, updatedAt: 0 }), body.environment);
    }, {
      detail: { tags, requestBody: jsonBody(AdHocRunBodySchema), summary: "Extension: run a flow sent whole ({flow, environment}) without storing it; same answers as POST /flows/{id}/run" },
    })
    .post("/:id/run", ({ params, body }) => flows.runStored(params.id, runEnvironment(body)), {
      params: Id,
      detail: {
        tags,
        requestBody: jsonBody(RunBodySchema, false),
        summary:
          "Run a stored flow and answer its run report {flowId, runId, status, startedAt, finishedAt, durationMs, steps, variables, outputs, error}; optional body {environment: {name: value}} overrides variables for this run. 404 missing or corrupt; 503 {error:{code:uiNotRunning}} when the runner is off (--no-flow-runner) or tapwire is stopping; 504 {error:{code:timeout}} after the whole run timeout (--flow-timeout, default 120 s), the run being cancelled",
      },
    })
    .post("", ({ body }) => withSubflows(store.create(checked(FlowInputSchema, body))), {
      response: FlowWithSubflowsSchema,
      detail: { tags, requestBody: jsonBody(FlowInputSchema), summary: "Extension: store a new flow (the body's id when given, else a fresh one; 409 if taken); answers it with subflowIds" },
    })
    .put("/:id", ({ params, body }) => withSubflows(store.replace(params.id, checked(FlowInputSchema, body))), {
      params: Id,
      response: FlowWithSubflowsSchema,
      detail: { tags, requestBody: jsonBody(FlowInputSchema), summary: "Extension: replace a stored flow (also a corrupt file); keeps createdAt; 404 if there is no such file" },
    })
    .delete(
      "/:id",
      ({ params, set }) => {
        store.delete(params.id);
        set.status = 204;
      },
      { params: Id, detail: { tags, summary: "Extension: delete a flow (also a corrupt file); 204, 404 if there is no such file" } },
    );
}
