import { Elysia, t } from "elysia";
import { checkQueryNames } from "../../api/errors.ts";
import { AdHocRunBodySchema, FlowInputSchema, FlowSummarySchema, FlowWithSubflowsSchema, RunBodySchema, ValidationResultSchema } from "./schema.ts";
import type { FlowService } from "./service.ts";
import { type FlowStore, normalizeFlow, subflowIds } from "./store.ts";
import { validateFlow } from "./validate.ts";

const tags = ["flows"];
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
    .post("/validate", ({ body }) => {
      const flow = normalizeFlow(body, body.id ?? "unsaved", { createdAt: 0, updatedAt: 0 });
      const problems = validateFlow(flow, (id) => store.read(id));
      return { valid: !problems.some((p) => p.severity === "error"), problems };
    }, {
      body: FlowInputSchema,
      response: ValidationResultSchema,
      detail: {
        tags,
        summary:
          "Extension: check a flow (id optional) without storing it: unknown node types, invalid node data, dangling edges, condition edges without a true/false handle, missing subflows, subflow recursion and depth (errors: a run refuses to start) and unreachable nodes (warnings)",
      },
    })
    .post("/run", ({ body }) => flows.run(normalizeFlow(body.flow, body.flow.id ?? "unsaved", { createdAt: 0, updatedAt: 0 }), body.environment), {
      body: AdHocRunBodySchema,
      detail: { tags, summary: "Extension: run a flow sent whole ({flow, environment}) without storing it; same answers as POST /flows/{id}/run" },
    })
    .post("/:id/run", ({ params, body }) => flows.runStored(params.id, body?.environment), {
      params: Id,
      body: RunBodySchema,
      detail: {
        tags,
        summary:
          "Run a stored flow and answer its run report {flowId, runId, status, startedAt, finishedAt, durationMs, steps, variables, outputs, error}; optional body {environment: {name: value}} overrides variables for this run. 404 missing or corrupt; 503 {error:{code:uiNotRunning}} when the runner is off (--no-flow-runner) or tapwire is stopping; 504 {error:{code:timeout}} after the whole run timeout (--flow-timeout, default 120 s), the run being cancelled",
      },
    })
    .post("", ({ body }) => withSubflows(store.create(body)), {
      body: FlowInputSchema,
      response: FlowWithSubflowsSchema,
      detail: { tags, summary: "Extension: store a new flow (the body's id when given, else a fresh one; 409 if taken); answers it with subflowIds" },
    })
    .put("/:id", ({ params, body }) => withSubflows(store.replace(params.id, body)), {
      params: Id,
      body: FlowInputSchema,
      response: FlowWithSubflowsSchema,
      detail: { tags, summary: "Extension: replace a stored flow (also a corrupt file); keeps createdAt; 404 if there is no such file" },
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
