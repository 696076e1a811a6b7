import type { TSchema } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { parsePath } from "./jsonpath.ts";
import {
  AssertDataSchema,
  type Check,
  ConditionDataSchema,
  DelayDataSchema,
  EndDataSchema,
  type Flow,
  InlineRequestDataSchema,
  NODE_TYPES,
  RefRequestDataSchema,
  ScriptDataSchema,
  SetVariableDataSchema,
  StartDataSchema,
  SubflowDataSchema,
  type ValidationProblem,
} from "./schema.ts";

/** Subflows nest at most this deep (the flow run is depth 0). */
export const MAX_SUBFLOW_DEPTH = 16;

const DATA_SCHEMAS: Record<string, TSchema> = {
  start: StartDataSchema,
  script: ScriptDataSchema,
  assert: AssertDataSchema,
  condition: ConditionDataSchema,
  delay: DelayDataSchema,
  "set-variable": SetVariableDataSchema,
  subflow: SubflowDataSchema,
  end: EndDataSchema,
};

/** The schema a request node's data is checked against: by reference when it names a collection, else inline. */
export function requestDataSchema(data: Record<string, unknown>): TSchema {
  return data.collectionId !== undefined || data.requestId !== undefined ? RefRequestDataSchema : InlineRequestDataSchema;
}

function dataError(schema: TSchema, data: unknown): string | null {
  if (Value.Check(schema, data)) return null;
  const first = Value.Errors(schema, data).First();
  return `data${first?.path ? first.path.replace(/\//g, ".") : ""}: ${first?.message ?? "invalid"}`;
}

/** What is wrong with one check of an assert node (operators by type), or null. */
export function checkProblem(c: Check): string | null {
  const ops = (["equals", "exists", "matches", "contains", "below"] as const).filter((k) => c[k] !== undefined);
  const allowed: Record<Check["type"], readonly string[]> = {
    status: ["equals", "below"],
    header: ["equals", "exists", "matches", "contains"],
    jsonPath: ["equals", "exists", "matches", "contains"],
    body: ["equals", "matches", "contains"],
    duration: ["below"],
  };
  if (ops.length !== 1) return `a ${c.type} check takes exactly one of ${allowed[c.type].join(", ")} (got ${ops.length ? ops.join(", ") : "none"})`;
  if (!allowed[c.type].includes(ops[0]!)) return `a ${c.type} check takes one of ${allowed[c.type].join(", ")}, not ${ops[0]}`;
  if (c.type === "header" && !c.name) return "a header check needs `name`";
  if (c.type === "jsonPath") {
    if (c.path === undefined) return "a jsonPath check needs `path`";
    try {
      parsePath(c.path);
    } catch (e) {
      return (e as Error).message;
    }
  }
  if (c.matches !== undefined) {
    try {
      new RegExp(c.matches);
    } catch (e) {
      return `matches: ${(e as Error).message}`;
    }
  }
  if ((c.type === "status" || c.type === "duration") && c.equals !== undefined && typeof c.equals !== "number" && typeof c.equals !== "string") return `${c.type} equals takes a number`;
  return null;
}

/**
 * Checks a flow (POST /flows/validate, and before every run). Errors stop a run before it starts; warnings do not.
 *   errors:   noStart, multipleStart, unknownNodeType, invalidNodeData, danglingEdge, conditionHandle,
 *             missingSubflow, subflowRecursion, subflowDepth
 *   warnings: unreachableNode, edgeFromEnd
 * `load` finds a stored flow by id (null: missing or corrupt); subflows are followed through it.
 */
export function validateFlow(flow: Flow, load: (id: string) => Flow | null): ValidationProblem[] {
  const problems: ValidationProblem[] = [];
  const err = (code: string, message: string, at: { nodeId?: string; edgeId?: string } = {}) => problems.push({ severity: "error", code, message, ...at });
  const warn = (code: string, message: string, at: { nodeId?: string; edgeId?: string } = {}) => problems.push({ severity: "warning", code, message, ...at });

  const byId = new Map(flow.nodes.map((n) => [n.id, n]));
  const starts = flow.nodes.filter((n) => n.type === "start");
  if (starts.length === 0) err("noStart", "the flow has no start node");
  if (starts.length > 1) err("multipleStart", `the flow has ${starts.length} start nodes (${starts.map((n) => n.id).join(", ")}); it needs exactly one`);

  for (const n of flow.nodes) {
    if (!(NODE_TYPES as readonly string[]).includes(n.type)) {
      err("unknownNodeType", `node '${n.id}' has the unknown type '${n.type}' (known: ${NODE_TYPES.join(", ")})`, { nodeId: n.id });
      continue;
    }
    const schema = n.type === "request" ? requestDataSchema(n.data) : DATA_SCHEMAS[n.type]!;
    const bad = dataError(schema, n.data);
    if (bad) {
      err("invalidNodeData", `node '${n.id}' (${n.type}): ${bad}`, { nodeId: n.id });
      continue;
    }
    if (n.type === "assert") {
      (n.data.checks as Check[]).forEach((c, i) => {
        const p = checkProblem(c);
        if (p) err("invalidNodeData", `node '${n.id}' (assert): checks[${i}]: ${p}`, { nodeId: n.id });
      });
    }
    if (n.type === "set-variable") {
      (n.data.variables as { name: string; from?: string; path?: string; value?: unknown }[]).forEach((a, i) => {
        const from = a.from ?? "value";
        if ((from === "jsonPath" || from === "header") && !a.path) err("invalidNodeData", `node '${n.id}' (set-variable): variables[${i}]: from ${from} needs \`path\``, { nodeId: n.id });
        if (from === "value" && a.value === undefined) err("invalidNodeData", `node '${n.id}' (set-variable): variables[${i}]: needs \`value\``, { nodeId: n.id });
        if (from === "jsonPath" && a.path) {
          try {
            parsePath(a.path);
          } catch (e) {
            err("invalidNodeData", `node '${n.id}' (set-variable): variables[${i}]: ${(e as Error).message}`, { nodeId: n.id });
          }
        }
      });
    }
  }

  const out = new Map<string, string[]>();
  for (const e of flow.edges) {
    const s = byId.get(e.source);
    const t = byId.get(e.target);
    if (!s || !t) {
      err("danglingEdge", `edge '${e.id}' ${!s ? `starts at the missing node '${e.source}'` : `ends at the missing node '${e.target}'`}`, { edgeId: e.id });
      continue;
    }
    if (s.type === "condition" && e.sourceHandle !== "true" && e.sourceHandle !== "false")
      err("conditionHandle", `edge '${e.id}' leaves the condition node '${s.id}' without sourceHandle "true" or "false"`, { edgeId: e.id });
    if (s.type === "end") warn("edgeFromEnd", `edge '${e.id}' leaves the end node '${s.id}'; a branch stops at an end node`, { edgeId: e.id });
    if (t.type === "start") warn("edgeToStart", `edge '${e.id}' goes into the start node '${t.id}'`, { edgeId: e.id });
    out.set(e.source, [...(out.get(e.source) ?? []), e.target]);
  }

  if (starts.length === 1) {
    const seen = new Set<string>([starts[0]!.id]);
    const todo = [starts[0]!.id];
    while (todo.length) for (const t of out.get(todo.pop()!) ?? []) if (!seen.has(t)) seen.add(t), todo.push(t);
    for (const n of flow.nodes) if (!seen.has(n.id)) warn("unreachableNode", `node '${n.id}' cannot be reached from the start node`, { nodeId: n.id });
  }

  subflowProblems(flow, load, [flow.id], err);
  return problems;
}

/** Follows subflow nodes: missing flows, a flow reaching itself, and nesting deeper than MAX_SUBFLOW_DEPTH. */
function subflowProblems(flow: Flow, load: (id: string) => Flow | null, chain: string[], err: (code: string, message: string, at?: { nodeId?: string }) => void, checked = new Set<string>()): void {
  for (const n of flow.nodes) {
    if (n.type !== "subflow" || typeof n.data.flowId !== "string") continue;
    const id = n.data.flowId;
    const at = chain.length === 1 ? { nodeId: n.id } : {};
    if (chain.includes(id)) {
      err("subflowRecursion", `subflow recursion: ${[...chain, id].join(" -> ")} (a flow may not reach itself)`, at);
      continue;
    }
    if (chain.length > MAX_SUBFLOW_DEPTH) {
      err("subflowDepth", `subflows nest deeper than ${MAX_SUBFLOW_DEPTH}: ${[...chain, id].join(" -> ")}`, at);
      continue;
    }
    const key = `${chain.length}:${id}`;
    const child = load(id);
    if (!child) {
      err("missingSubflow", `node '${n.id}'${chain.length > 1 ? ` of flow '${flow.id}'` : ""} runs the flow '${id}', which does not exist or is corrupt`, at);
      continue;
    }
    if (checked.has(key) && !chain.includes(id)) {
      // the same flow at the same depth was followed already; a cycle through it would have shown there
      continue;
    }
    checked.add(key);
    subflowProblems(child, load, [...chain, id], err, checked);
  }
}
