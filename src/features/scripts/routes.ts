import { Elysia, t } from "elysia";
import { ruleError } from "../rules/rule-routes.ts";
import { executeScript } from "./execute.ts";
import type { ScriptRunner } from "./runner.ts";
import { ExecuteBodySchema, ScriptRuleListSchema, ScriptRuleSchema } from "./schema.ts";
import type { ScriptRuleStore } from "./store.ts";

const tags = ["scripting"];
const Id = t.Object({ id: t.String() });

function guard<T>(fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    ruleError(e);
  }
}

const Line = t.Object({ level: t.String(), message: t.String(), ts: t.Integer() });
const ExecuteResultSchema = t.Object({
  console: t.Array(Line),
  tests: t.Array(t.Object({ name: t.String(), passed: t.Boolean(), error: t.Union([t.String(), t.Null()]) })),
  request: t.Object({ method: t.String(), url: t.String(), headers: t.Record(t.String(), t.String()), body: t.String() }),
  response: t.Union([
    t.Object({ status: t.Integer(), statusText: t.Optional(t.String()), headers: t.Record(t.String(), t.String()), body: t.String(), responseTime: t.Optional(t.Number()) }),
    t.Null(),
  ]),
  variables: t.Record(t.String(), t.Unknown()),
  environment: t.Record(t.String(), t.Unknown()),
  collectionVariables: t.Record(t.String(), t.Unknown()),
  globals: t.Record(t.String(), t.Unknown()),
  errors: t.Array(t.Object({ message: t.String(), stack: t.Union([t.String(), t.Null()]), line: t.Union([t.Integer(), t.Null()]) })),
  duration_ms: t.Number(),
});

/** Spec 4.15: script rules (with the per-rule toggle of section 3) and test mode. */
export function scriptRoutes(store: ScriptRuleStore, runner: ScriptRunner) {
  return new Elysia({ name: "scripting", prefix: "/api/v1" })
    .post("/scripts/execute", ({ body }) => executeScript(runner, body), {
      body: ExecuteBodySchema,
      response: ExecuteResultSchema,
      detail: {
        tags,
        summary: "Run a script in test mode; 200 with {console, tests, request, response, variables, errors, duration_ms} even when the script fails",
      },
    })
    .get("/script-rules", () => store.wire(), {
      response: ScriptRuleListSchema,
      detail: { tags, summary: "The master switch and every script rule: {scripting_enabled, rules}" },
    })
    .post("/script-rules", ({ body }) => guard(() => store.create(store.parse(body))), {
      body: t.Unknown(),
      detail: { tags, summary: "Create a script rule (every field required; 400 naming a bad or missing field, 409 if the id exists)" },
    })
    .put(
      "/script-rules/toggle",
      ({ body }) => {
        store.setEnabled(body.enabled);
        return { scripting_enabled: store.enabled };
      },
      {
        body: t.Object({ enabled: t.Boolean() }),
        response: t.Object({ scripting_enabled: t.Boolean() }),
        detail: { tags, summary: "Set the master switch; answers {scripting_enabled}" },
      },
    )
    .put(
      "/script-rules/sync",
      ({ body }) =>
        guard(() => {
          store.replaceAll(store.parseAll(body));
          return store.wire();
        }),
      { body: t.Unknown(), detail: { tags, summary: "Replace the whole list atomically (all validated first: one bad rule leaves the old list); answers {scripting_enabled, rules}" } },
    )
    .put("/script-rules/:id", ({ params, body }) => guard(() => store.replace(params.id, store.parse(body))), {
      params: Id,
      body: t.Unknown(),
      detail: { tags, summary: "Replace one script rule (400 if the body's id differs from the path's, 404 if unknown)" },
    })
    .delete(
      "/script-rules/:id",
      ({ params, set }) => {
        guard(() => store.delete(params.id));
        set.status = 204;
      },
      { params: Id, detail: { tags, summary: "Delete a script rule (204; 404 if unknown)" } },
    )
    .post("/script-rules/:id/toggle", ({ params }) => guard(() => store.toggle(params.id)), {
      params: Id,
      detail: { tags, summary: "Flip one rule's enabled flag; answers the updated rule (404 if unknown)" },
    });
}
