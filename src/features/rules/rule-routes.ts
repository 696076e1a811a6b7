import { Elysia, t } from "elysia";
import type { TObject } from "@sinclair/typebox";
import { ApiError } from "../../api/errors.ts";
import { RuleStore, RuleStoreError } from "./rule-store.ts";

export function ruleError(e: unknown): never {
  if (e instanceof RuleStoreError) {
    const status = e.kind === "conflict" ? 409 : e.kind === "not_found" ? 404 : 400;
    throw new ApiError(status, e.kind === "invalid" ? "bad_request" : e.kind, e.message);
  }
  throw e;
}

const Enabled = t.Object({ enabled: t.Boolean() });

/**
 * The routes every rule family shares (spec 4.10-4.12): GET snapshot, PUT /enabled, POST /rules (409 on an existing
 * id), PUT/DELETE /rules/{id} (404 if unknown), POST /rules/{id}/toggle. Bodies are validated by the family's one
 * schema (400 naming the field). Family-specific routes (match, start/stop) are added by the caller.
 */
export function ruleFamilyRoutes<S extends TObject>(opts: { name: string; prefix: string; store: RuleStore<S>; schema: S; what: string }) {
  const { store } = opts;
  const tags = [opts.name];
  const guard = <T>(fn: () => T): T => {
    try {
      return fn();
    } catch (e) {
      ruleError(e);
    }
  };
  const Snapshot = t.Object({ enabled: t.Boolean(), rules: t.Array(opts.schema) });
  return new Elysia({ name: opts.name, prefix: opts.prefix })
    .get("/", () => store.snapshot() as never, { response: Snapshot, detail: { tags, summary: `The master flag and every ${opts.what} rule` } })
    .put(
      "/enabled",
      ({ body }) => {
        store.setEnabled(body.enabled);
        return { enabled: store.enabled };
      },
      { body: Enabled, response: Enabled, detail: { tags, summary: "Set the master flag; answers {enabled}" } },
    )
    .post(
      "/rules",
      ({ body }) => guard(() => store.create(store.parse(body))),
      { body: t.Unknown(), detail: { tags, summary: `Create a ${opts.what} rule (409 if the id exists); answers the persisted rule` } },
    )
    .put(
      "/rules/:id",
      ({ params, body }) => guard(() => store.replace(params.id, store.parse(body))),
      { body: t.Unknown(), params: t.Object({ id: t.String() }), detail: { tags, summary: `Replace a ${opts.what} rule (404 if unknown)` } },
    )
    .delete(
      "/rules/:id",
      ({ params, set }) => {
        guard(() => store.delete(params.id));
        set.status = 204;
      },
      { params: t.Object({ id: t.String() }), detail: { tags, summary: `Delete a ${opts.what} rule (204; 404 if unknown)` } },
    )
    .post("/rules/:id/toggle", ({ params }) => guard(() => store.toggle(params.id)), {
      params: t.Object({ id: t.String() }),
      detail: { tags, summary: `Flip a ${opts.what} rule's enabled flag; answers the updated rule` },
    });
}
