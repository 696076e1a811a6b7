import { Elysia, t } from "elysia";
import type { CaptureControl, EntryCounter } from "../capture/control.ts";

export interface HealthDeps {
  version: string;
  startedAt: number;
  apiPort: () => number;
  proxyPort: () => number | null;
  /** Extra fields contributed by features (e.g. mock_port). */
  extra: () => Record<string, unknown>;
  capture: CaptureControl;
  store: EntryCounter;
}

export const HealthRecord = t.Object(
  {
  status: t.Literal("ok"),
  version: t.String(),
  capturing: t.Boolean(),
  entry_count: t.Integer(),
  uptime_secs: t.Integer(),
  api_port: t.Integer(),
  proxy_port: t.Union([t.Integer(), t.Null()], { description: "extension: the proxy listener's port" }),
  pid: t.Integer({ description: "extension: the service's process id" }),
  },
  { additionalProperties: true },
);

/** Spec 2.2 / 4.1: the one route answered without a token. */
export function healthRoutes(d: HealthDeps) {
  return new Elysia({ name: "health", prefix: "/api/v1" }).get(
    "/health",
    () => ({
      ...d.extra(),
      status: "ok" as const,
      version: d.version,
      capturing: d.capture.capturing,
      entry_count: d.store.count(),
      uptime_secs: Math.floor((Date.now() - d.startedAt) / 1000),
      api_port: d.apiPort(),
      proxy_port: d.proxyPort(),
      pid: process.pid,
    }),
    { response: HealthRecord, detail: { tags: ["health"], summary: "Liveness and basic state (no auth)", security: [] } },
  );
}
