import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { Value } from "@sinclair/typebox/value";
import { badRequest, conflict, notFound } from "../../api/errors.ts";
import { writeFileAtomic } from "../../store/json-state.ts";
import { type Flow, type FlowEdge, type FlowInput, FlowInputSchema, type FlowNode, type FlowSummary } from "./schema.ts";

export const FLOW_ID_RE = /^[A-Za-z0-9_-]{1,128}$/;

/** Why a value is not a flow (its first problem), or null when it has the shape of FlowInputSchema. */
export function flowShapeError(value: unknown): string | null {
  if (Value.Check(FlowInputSchema, value)) return null;
  const first = Value.Errors(FlowInputSchema, value).First();
  return `wrong shape at '${first?.path || "/"}': ${first?.message ?? "invalid"}`;
}

/**
 * The stored form of a flow from its input form: defaults for what a hand-written file may leave out (description
 * "", variables {}, positions at 0,0, viewport 0,0 zoom 1, edge ids, sourceHandle null, label ""); fields the input
 * carries beyond the format (an editor's width, selected, style...) are kept. Node or edge ids used twice are a 400.
 */
export function normalizeFlow(input: FlowInput, id: string, times: { createdAt: number; updatedAt: number }): Flow {
  const nodeIds = new Set<string>();
  const nodes: FlowNode[] = input.nodes.map((n, i) => {
    if (nodeIds.has(n.id)) throw badRequest(`body field 'nodes[${i}].id': node id '${n.id}' is used twice`);
    nodeIds.add(n.id);
    return { ...n, id: n.id, type: n.type, position: n.position ?? { x: 0, y: 0 }, data: n.data ?? {} };
  });
  const edgeIds = new Set<string>();
  const edges: FlowEdge[] = input.edges.map((e, i) => {
    const handle = e.sourceHandle ?? null;
    const eid = e.id ?? `e-${e.source}-${e.target}${handle !== null ? `-${handle}` : ""}`;
    if (edgeIds.has(eid)) throw badRequest(`body field 'edges[${i}].id': edge id '${eid}' is used twice`);
    edgeIds.add(eid);
    return { ...e, id: eid, source: e.source, target: e.target, sourceHandle: handle, label: e.label ?? "" };
  });
  const flow: Flow = {
    ...input,
    id,
    name: input.name,
    description: input.description ?? "",
    variables: input.variables ?? {},
    nodes,
    edges,
    viewport: input.viewport ?? { x: 0, y: 0, zoom: 1 },
    createdAt: times.createdAt,
    updatedAt: times.updatedAt,
  };
  if (input.maxSteps === undefined) delete flow.maxSteps;
  return flow;
}

/** The de-duplicated flowIds of the subflow nodes, in node order (spec 2.19). */
export function subflowIds(flow: { nodes: { type: string; data?: Record<string, unknown> }[] }): string[] {
  const out: string[] = [];
  for (const n of flow.nodes) {
    const id = n.type === "subflow" ? n.data?.flowId : undefined;
    if (typeof id === "string" && !out.includes(id)) out.push(id);
  }
  return out;
}

/** Parses a flow file's text: the stored form, or an Error saying why it is not a flow. */
export function parseFlowText(text: string, fallbackTimes: { createdAt: number; updatedAt: number }, expectId?: string): Flow {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  } catch (e) {
    throw new Error(`not valid JSON: ${(e as Error).message.replace(/^JSON Parse error: /, "")}`);
  }
  const shape = flowShapeError(parsed);
  if (shape) throw new Error(shape);
  const input = parsed as FlowInput;
  const id = input.id ?? expectId;
  if (id === undefined) throw new Error("it has no id");
  if (!FLOW_ID_RE.test(id)) throw new Error(`its id '${id}' is not a valid id (letters, digits, _ and -)`);
  if (expectId !== undefined && id !== expectId) throw new Error(`its id '${id}' is not its file name's '${expectId}'`);
  try {
    return normalizeFlow(input, id, { createdAt: input.createdAt ?? fallbackTimes.createdAt, updatedAt: input.updatedAt ?? fallbackTimes.updatedAt });
  } catch (e) {
    throw new Error((e as Error).message.replace(/^body field /, "field "));
  }
}

/**
 * Flows: one JSON file per flow, `flows/<id>.json` in the data directory (folder 0700, files 0600), written
 * atomically. Reads go to the files every time (spec 4.14: "the GET routes read the files directly"), so files
 * written by hand or by another tool are seen at once. A file that is not JSON, does not have the shape of a flow,
 * or whose id is not its file name is corrupt: left out of the list and a 404 for its id.
 */
export class FlowStore {
  constructor(readonly dir: string) {}

  private file(id: string): string {
    return join(this.dir, `${id}.json`);
  }

  /** The flow, or null when there is no such file or it is corrupt (reason in `problem` when asked). */
  read(id: string, problem?: (reason: string) => void): Flow | null {
    if (!FLOW_ID_RE.test(id)) return null;
    const path = this.file(id);
    let text: string;
    let mtime: number;
    try {
      mtime = Math.floor(statSync(path).mtimeMs);
      text = readFileSync(path, "utf8");
    } catch {
      return null;
    }
    try {
      return parseFlowText(text, { createdAt: mtime, updatedAt: mtime }, id);
    } catch (e) {
      problem?.(`flow file ${path} cannot be read: ${(e as Error).message}`);
      return null;
    }
  }

  /** The flow; 404 when missing or corrupt. */
  get(id: string): Flow {
    let why = "";
    const f = this.read(id, (r) => (why = r));
    if (!f) throw notFound(why ? `flow '${id}' is corrupt (${why})` : `no flow '${id}'`);
    return f;
  }

  /** Every readable flow, oldest first; corrupt files are skipped (spec 4.14). */
  list(): FlowSummary[] {
    if (!existsSync(this.dir)) return [];
    const out: Flow[] = [];
    for (const name of readdirSync(this.dir)) {
      if (!name.endsWith(".json") || name.startsWith(".")) continue;
      const f = this.read(name.slice(0, -5));
      if (f) out.push(f);
    }
    out.sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id));
    return out.map((f) => ({ id: f.id, name: f.name, nodeCount: f.nodes.length, edgeCount: f.edges.length, createdAt: f.createdAt, updatedAt: f.updatedAt }));
  }

  private write(flow: Flow): void {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    writeFileAtomic(this.file(flow.id), `${JSON.stringify(flow, null, 2)}\n`, 0o600);
  }

  /** POST /flows: a new flow (the body's id when given and free, else a fresh one); 409 when the id is taken. */
  create(input: FlowInput): Flow {
    const id = input.id ?? crypto.randomUUID();
    if (!FLOW_ID_RE.test(id)) throw badRequest(`body field 'id': '${id}' is not a valid id (letters, digits, _ and -)`);
    if (existsSync(this.file(id))) throw conflict(`a flow with id '${id}' exists`);
    const now = Date.now();
    const flow = normalizeFlow(input, id, { createdAt: now, updatedAt: now });
    this.write(flow);
    return flow;
  }

  /** PUT /flows/{id}: replaces the flow (also a corrupt file); keeps createdAt; 404 when there is no file. */
  replace(id: string, input: FlowInput): Flow {
    if (input.id !== undefined && input.id !== id) throw badRequest(`body field 'id': '${input.id}' is not the path's id '${id}'`);
    if (!FLOW_ID_RE.test(id) || !existsSync(this.file(id))) throw notFound(`no flow '${id}'`);
    const old = this.read(id);
    const now = Date.now();
    const flow = normalizeFlow(input, id, { createdAt: old?.createdAt ?? now, updatedAt: Math.max(now, (old?.updatedAt ?? 0) + 1) });
    this.write(flow);
    return flow;
  }

  /** DELETE /flows/{id} (also a corrupt file); 404 when there is no file. */
  delete(id: string): void {
    if (!FLOW_ID_RE.test(id)) throw notFound(`no flow '${id}'`);
    try {
      unlinkSync(this.file(id));
    } catch {
      throw notFound(`no flow '${id}'`);
    }
  }
}
