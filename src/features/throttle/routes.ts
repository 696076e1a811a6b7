import { Elysia } from "elysia";
// Plain TypeBox (not Elysia's `t`): its numbers are strict, so `"100"` is refused instead of coerced.
import { Type as t } from "@sinclair/typebox";
import { ApiError } from "../../api/errors.ts";
import { MAX_RATE } from "./bucket.ts";
import type { RulesFile } from "./rules-file.ts";
import { ThrottleRule } from "./rules.ts";
import type { Throttler } from "./throttler.ts";

export const ThrottleState = t.Object(
  {
    enabled: t.Boolean(),
    bytes_per_second: t.Union([t.Integer({ minimum: 1 }), t.Null()], { description: "the cap, or null when disabled" }),
  },
  { $id: "#/components/schemas/ThrottleState" },
);

export const ThrottleSet = t.Object(
  { bytes_per_second: t.Integer({ minimum: 1, maximum: MAX_RATE, description: "cap for all downloads together, and for all uploads together" }) },
  { $id: "#/components/schemas/ThrottleSet" },
);

export const ThrottleRules = t.Object(
  {
    rules: t.Array(ThrottleRule, { description: "the rules in force, in file order (defaults filled in)" }),
    file: t.String({ description: "absolute path of throttle-rules.json" }),
    loaded_at: t.Union([t.Integer(), t.Null()], { description: "when the rules in force were loaded (ms since epoch)" }),
    error: t.Union([t.String(), t.Null()], { description: "why the last (re)load failed, while the previous rules stay in force; else null" }),
  },
  { $id: "#/components/schemas/ThrottleRules" },
);

function snapshot(file: RulesFile) {
  return { rules: file.rules.map((r) => r.rule), file: file.path, loaded_at: file.loadedAt, error: file.error };
}

/** Spec 4.7: the global throttle (not persisted: a restart starts without it). */
export function throttleRoutes(throttler: Throttler) {
  const tags = ["throttle"];
  return new Elysia({ name: "throttle", prefix: "/api/v1/throttle" })
    .get("/", () => throttler.global, { response: ThrottleState, detail: { tags, summary: "The global bandwidth cap: {enabled, bytes_per_second}" } })
    .put(
      "/",
      ({ body }) => {
        throttler.setGlobal(body.bytes_per_second);
        return throttler.global;
      },
      {
        body: ThrottleSet,
        response: ThrottleState,
        detail: { tags, summary: "Cap every proxied transfer together at bytes_per_second (each direction); answers the new state (200)" },
      },
    )
    .delete(
      "/",
      ({ set }) => {
        throttler.setGlobal(null);
        set.status = 204;
      },
      { detail: { tags, summary: "Disable the global cap (204, also when it was off)" } },
    );
}

/** Spec 4.7: scoped throttle rules, read-only; they live in throttle-rules.json (plus the reload extension). */
export function throttleRulesRoutes(file: RulesFile) {
  const tags = ["throttle"];
  return new Elysia({ name: "throttle-rules", prefix: "/api/v1/throttle-rules" })
    .get("/", () => snapshot(file), {
      response: ThrottleRules,
      detail: { tags, summary: "The scoped throttle rules currently loaded from throttle-rules.json" },
    })
    .post(
      "/reload",
      () => {
        const r = file.reload(true);
        if (!r.ok) throw new ApiError(400, "bad_request", `${file.path}: ${r.error}; the previous ${file.rules.length} rule(s) stay in force`);
        return snapshot(file);
      },
      {
        response: ThrottleRules,
        detail: { tags, summary: "Re-read throttle-rules.json now (extension); 400 naming the problem when it is invalid (the previous rules stay)" },
      },
    );
}
