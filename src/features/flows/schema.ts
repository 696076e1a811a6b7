import { type Static, type TSchema, Type } from "@sinclair/typebox";
import { AuthSchema, KeyValueInputSchema } from "../compose/schema.ts";

/**
 * Flows (spec 2.19, 4.14; the format is ours: docs/flows.md). A flow is a graph in the node/edge/viewport shape of
 * canvas editors (React Flow and its peers): nodes `{id, type, position, data}`, edges `{id, source, target,
 * sourceHandle, label}`. Fields an editor adds (width, height, selected, style...) are kept as they are.
 *
 * Two forms: the input form (what a person writes by hand or an editor sends: only id, name, nodes and edges are
 * required) and the stored form (every field present), which the store makes from it.
 */

const Nullable = <T extends TSchema>(s: T) => Type.Union([s, Type.Null()]);

export const NODE_TYPES = ["start", "request", "script", "assert", "condition", "delay", "set-variable", "subflow", "end"] as const;
export type NodeType = (typeof NODE_TYPES)[number];

/** Fields an editor adds to a flow, node or edge are kept (never stripped from bodies or answers). */
const KEEP = { additionalProperties: true };

export const PositionSchema = Type.Object({ x: Type.Number(), y: Type.Number() });
export const ViewportSchema = Type.Object({ x: Type.Number(), y: Type.Number(), zoom: Type.Number() });

export const NodeInputSchema = Type.Object({
  id: Type.String({ minLength: 1 }),
  type: Type.String({ minLength: 1, description: `one of ${NODE_TYPES.join(", ")}` }),
  position: Type.Optional(PositionSchema),
  data: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: "the node's settings, by type (docs/flows.md)" })),
}, KEEP);

export const EdgeInputSchema = Type.Object({
  id: Type.Optional(Type.String({ minLength: 1, description: "default: `e-<source>-<target>[-<sourceHandle>]`" })),
  source: Type.String({ minLength: 1 }),
  target: Type.String({ minLength: 1 }),
  sourceHandle: Type.Optional(Nullable(Type.String({ description: "`true` or `false` on the edges leaving a condition node" }))),
  label: Type.Optional(Type.String()),
}, KEEP);

/** Body of POST /flows and PUT /flows/{id}, and the shape a hand-written flow file must have. */
export const FlowInputSchema = Type.Object({
  id: Type.Optional(Type.String({ description: "letters, digits, _ and -; server-assigned when absent (POST)" })),
  name: Type.String(),
  description: Type.Optional(Type.String()),
  variables: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: "default values of the flow variables (a run's environment overrides them)" })),
  maxSteps: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000, description: "step cap of a run (default 10,000; subflow steps count)" })),
  nodes: Type.Array(NodeInputSchema),
  edges: Type.Array(EdgeInputSchema),
  viewport: Type.Optional(ViewportSchema),
  createdAt: Type.Optional(Type.Integer()),
  updatedAt: Type.Optional(Type.Integer()),
}, KEEP);
export type FlowInput = Static<typeof FlowInputSchema>;

export interface FlowNode {
  id: string;
  type: string;
  position: { x: number; y: number };
  data: Record<string, unknown>;
  [extra: string]: unknown;
}

export interface FlowEdge {
  id: string;
  source: string;
  target: string;
  sourceHandle: string | null;
  label: string;
  [extra: string]: unknown;
}

/** A stored flow (every field present). Timestamps are ms since the epoch. */
export interface Flow {
  id: string;
  name: string;
  description: string;
  variables: Record<string, unknown>;
  maxSteps?: number;
  nodes: FlowNode[];
  edges: FlowEdge[];
  viewport: { x: number; y: number; zoom: number };
  createdAt: number;
  updatedAt: number;
  [extra: string]: unknown;
}

const NodeSchema = Type.Object({
  id: Type.String(),
  type: Type.String(),
  position: PositionSchema,
  data: Type.Record(Type.String(), Type.Unknown()),
}, KEEP);
const EdgeSchema = Type.Object({
  id: Type.String(),
  source: Type.String(),
  target: Type.String(),
  sourceHandle: Nullable(Type.String()),
  label: Type.String(),
}, KEEP);
export const FlowSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  description: Type.String(),
  variables: Type.Record(Type.String(), Type.Unknown()),
  maxSteps: Type.Optional(Type.Integer()),
  nodes: Type.Array(NodeSchema),
  edges: Type.Array(EdgeSchema),
  viewport: ViewportSchema,
  createdAt: Type.Integer(),
  updatedAt: Type.Integer(),
}, KEEP);

/** GET /flows/{id}: the stored flow plus the derived subflowIds. */
export const FlowWithSubflowsSchema = Type.Intersect([FlowSchema, Type.Object({ subflowIds: Type.Array(Type.String()) })]);

/** Spec 2.19. */
export const FlowSummarySchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  nodeCount: Type.Integer(),
  edgeCount: Type.Integer(),
  createdAt: Type.Integer(),
  updatedAt: Type.Integer(),
});
export type FlowSummary = Static<typeof FlowSummarySchema>;

// ---- node data, by type (checked by validate.ts) ----------------------------------------------------------------

const ContinueOnFail = Type.Optional(Type.Boolean({ description: "a failure or error of this node does not stop its branch" }));
const Label = { name: Type.Optional(Type.String()), label: Type.Optional(Type.String()), description: Type.Optional(Type.String()) };

/** `request`, inline: the compose request fields. */
export const InlineRequestDataSchema = Type.Object({
  ...Label,
  method: Type.String({ minLength: 1 }),
  url: Type.String({ minLength: 1 }),
  headers: Type.Optional(Type.Array(KeyValueInputSchema)),
  queryParams: Type.Optional(Type.Array(KeyValueInputSchema)),
  body: Type.Optional(Type.String()),
  contentType: Type.Optional(Type.String()),
  auth: Type.Optional(Nullable(AuthSchema)),
  timeout: Type.Optional(Type.Integer({ minimum: 1, description: "ms, default 30000" })),
  continueOnFail: ContinueOnFail,
});

/** `request`, by reference to a compose request. */
export const RefRequestDataSchema = Type.Object({
  ...Label,
  collectionId: Type.String({ minLength: 1 }),
  requestId: Type.String({ minLength: 1 }),
  environment: Type.Optional(Nullable(Type.String({ description: "name of an environment of that collection" }))),
  continueOnFail: ContinueOnFail,
});

export const ScriptDataSchema = Type.Object({ ...Label, script: Type.String(), continueOnFail: ContinueOnFail });

export const CHECK_TYPES = ["status", "header", "jsonPath", "body", "duration"] as const;
export const CheckSchema = Type.Object({
  type: Type.Union(CHECK_TYPES.map((t) => Type.Literal(t))),
  name: Type.Optional(Type.String({ description: "header name (type header)" })),
  path: Type.Optional(Type.String({ description: "JSON path such as $.data.items[0].id (type jsonPath)" })),
  equals: Type.Optional(Type.Unknown()),
  exists: Type.Optional(Type.Boolean()),
  matches: Type.Optional(Type.String({ description: "a regular expression (JavaScript syntax)" })),
  contains: Type.Optional(Type.String()),
  below: Type.Optional(Type.Number({ description: "ms (type duration)" })),
});
export type Check = Static<typeof CheckSchema>;
export const AssertDataSchema = Type.Object({ ...Label, checks: Type.Array(CheckSchema, { minItems: 1 }), continueOnFail: ContinueOnFail });

export const ConditionDataSchema = Type.Object({ ...Label, expression: Type.String({ minLength: 1 }) });
export const DelayDataSchema = Type.Object({ ...Label, ms: Type.Integer({ minimum: 0, maximum: 3_600_000 }) });

export const ASSIGN_SOURCES = ["value", "status", "header", "jsonPath", "body"] as const;
export const AssignmentSchema = Type.Object({
  name: Type.String({ minLength: 1 }),
  from: Type.Optional(Type.Union(ASSIGN_SOURCES.map((t) => Type.Literal(t)), { description: "default value" })),
  value: Type.Optional(Type.Unknown({ description: "from value: the value; strings have {{variables}} resolved" })),
  path: Type.Optional(Type.String({ description: "from jsonPath: the path; from header: the header name" })),
});
export type Assignment = Static<typeof AssignmentSchema>;
export const SetVariableDataSchema = Type.Object({ ...Label, variables: Type.Array(AssignmentSchema, { minItems: 1 }) });

export const SubflowDataSchema = Type.Object({
  ...Label,
  flowId: Type.String({ minLength: 1 }),
  inputs: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: "the subflow's starting variables; strings have {{variables}} resolved" })),
  outputs: Type.Optional(Type.Record(Type.String(), Type.String(), { description: "parent variable <- subflow output; absent: every output under its own name" })),
  continueOnFail: ContinueOnFail,
});

export const EndDataSchema = Type.Object({
  ...Label,
  outputs: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: "the flow's outputs; strings have {{variables}} resolved" })),
});

export const StartDataSchema = Type.Object({ ...Label });

// ---- the run report -------------------------------------------------------------------------------------------

export const RunBodySchema = Type.Optional(
  Type.Object({
    environment: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: "per-run variable overrides, forwarded unchanged to the runner" })),
  }),
);
export type RunBody = Static<typeof RunBodySchema>;

export const AdHocRunBodySchema = Type.Object({
  flow: FlowInputSchema,
  environment: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
});

export type StepStatus = "passed" | "failed" | "error";
export type RunStatus = "passed" | "failed" | "error";

export interface AssertionResult {
  name: string;
  passed: boolean;
  error: string | null;
}

export interface StepRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string;
}

export interface StepResponse {
  status: number;
  statusText: string;
  headers: Record<string, string>;
  /** At most PREVIEW_BYTES of the body (text, or base64 when binary). */
  body: string;
  bodyEncoding: "utf8" | "base64";
  bodyTruncated: boolean;
  sizeBytes: number;
  durationMs: number;
  trafficId: number | null;
}

export interface StepReport {
  nodeId: string;
  type: string;
  name: string;
  status: StepStatus;
  startedAt: number;
  durationMs: number;
  request: StepRequest | null;
  response: StepResponse | null;
  assertions: AssertionResult[];
  console: { level: string; message: string }[];
  error: string | null;
  /** condition: the branch taken. */
  branch?: "true" | "false";
  /** subflow: the inner run. */
  subflow?: { flowId: string; status: RunStatus; steps: StepReport[]; outputs: Record<string, unknown>; variables: Record<string, unknown> };
}

export interface RunReport {
  flowId: string;
  runId: string;
  status: RunStatus;
  startedAt: number;
  finishedAt: number;
  durationMs: number;
  steps: StepReport[];
  variables: Record<string, unknown>;
  /** Values of the end nodes' outputs. */
  outputs: Record<string, unknown>;
  /** Why the run is an error, when it is one for a reason of its own (not valid, step cap, cancelled...). */
  error: string | null;
}

export const ValidationProblemSchema = Type.Object({
  severity: Type.Union([Type.Literal("error"), Type.Literal("warning")]),
  code: Type.String(),
  message: Type.String(),
  nodeId: Type.Optional(Type.String()),
  edgeId: Type.Optional(Type.String()),
});
export type ValidationProblem = Static<typeof ValidationProblemSchema>;
export const ValidationResultSchema = Type.Object({ valid: Type.Boolean(), problems: Type.Array(ValidationProblemSchema) });
