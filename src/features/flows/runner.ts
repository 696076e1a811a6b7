import type { HeaderList } from "../../core/http1/types.ts";
import type { ProxyContext } from "../../core/proxy/context.ts";
import { sendVirtual } from "../../core/proxy/virtual-client.ts";
import type { ClientInfo, Flow as TrafficFlow } from "../../pipeline/flow.ts";
import { decodeBodyBytes } from "../../store/body-decode.ts";
import type { Auth, Collection, ComposeRequest, Folder } from "../compose/schema.ts";
import { effectiveAuth, prepareRequest, type PreparedRequest, virtualRequest } from "../compose/send.ts";
import { DEFAULT_TIMEOUT_MS, type CollectionStore } from "../compose/store.ts";
import { buildScopes, Resolver } from "../compose/variables.ts";
import type { ScriptRequest, ScriptResponse } from "../scripts/engine/types.ts";
import type { ScriptRunner } from "../scripts/runner.ts";
import { pick } from "./jsonpath.ts";
import type { AssertionResult, Assignment, Check, Flow, FlowEdge, FlowNode, RunReport, RunStatus, StepReport, StepRequest, StepResponse } from "./schema.ts";
import { validateFlow } from "./validate.ts";

/** The client label of the requests flows send (they go through the proxy and are captured). */
export const FLOW_CLIENT_LABEL = "tapwire-flow";
/** Steps one run may take (subflow steps included) unless the flow's maxSteps says otherwise. */
export const DEFAULT_MAX_STEPS = 10_000;
/** Request and response bodies in a step report are cut here (the whole body stays available to later nodes). */
export const PREVIEW_BYTES = 64 * 1024;
/** pm.variables key a condition's result comes back in (never kept in the flow variables). */
const CONDITION_KEY = "__tapwireCondition";
const REDACTED = "***";

export interface RunnerDeps {
  proxy: () => ProxyContext;
  onStored: (listener: (flow: TrafficFlow, id: number) => void) => () => void;
  collections: () => CollectionStore;
  scripts: () => ScriptRunner;
  /** A stored flow by id (null: missing or corrupt), for subflow nodes. */
  load: (id: string) => Flow | null;
}

export interface RunOptions {
  /** Per-run variable overrides (POST /flows/{id}/run's `environment`). */
  environment?: Record<string, unknown>;
  /** Cancels the run: the step in progress ends with an error, its request is aborted. */
  signal?: AbortSignal;
}

type Vars = Record<string, unknown>;

/** The last request and response of a branch: what script, assert and set-variable nodes look at. */
interface Exchange {
  request: ScriptRequest;
  response: ScriptResponse;
  durationMs: number;
}

interface Shared {
  steps: number;
  maxSteps: number;
  signal: AbortSignal;
  /** Why the whole run stopped (step cap, cancelled), wherever in the subflows that happened. */
  stopped: string | null;
}

interface Walk {
  status: RunStatus;
  steps: StepReport[];
  outputs: Vars;
  error: string | null;
}

interface NodeResult {
  step: StepReport;
  last: Exchange | null;
  /** Edges to follow (null: the branch stops here). */
  next: FlowEdge[] | null;
}

/** A variable's value as text in a `{{reference}}`. */
function asText(v: unknown): string {
  if (typeof v === "string") return v;
  if (v === undefined || v === null) return "";
  return typeof v === "object" ? JSON.stringify(v) : String(v);
}

const textScope = (vars: Vars): Map<string, string> => new Map(Object.entries(vars).map(([k, v]) => [k, asText(v)]));

/** Resolves `{{name}}` in every string of a JSON value against the flow variables. */
function resolveDeep(value: unknown, vars: Vars): unknown {
  if (typeof value === "string") {
    // a value that is one reference keeps the variable's own type ({{count}} of 3 stays a number)
    const whole = /^\{\{\s*([^{}]+?)\s*\}\}$/.exec(value);
    if (whole && Object.hasOwn(vars, whole[1]!)) return vars[whole[1]!];
    return new Resolver([textScope(vars)]).resolve(value);
  }
  if (Array.isArray(value)) return value.map((v) => resolveDeep(v, vars));
  if (value && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolveDeep(v, vars)]));
  return value;
}

/** JSON equality, with a string on one side compared to the other side's text (`"42"` equals 42). */
function looseEqual(a: unknown, b: unknown): boolean {
  if (typeof a === "string" && b !== null && typeof b !== "object") return a === String(b);
  if (typeof b === "string" && a !== null && typeof a !== "object") return b === String(a);
  return JSON.stringify(a) === JSON.stringify(b);
}

function headerOf(headers: HeaderList, name: string): string | undefined {
  const l = name.toLowerCase();
  const vals = headers.filter(([n]) => n.toLowerCase() === l).map(([, v]) => v);
  return vals.length ? vals.join(", ") : undefined;
}

/** Header lists as objects (repeated names joined with ", ", set-cookie with "\n"). */
function headerObject(h: HeaderList): Record<string, string> {
  const out: Record<string, string> = {};
  const seen = new Map<string, string>();
  for (const [n, v] of h) {
    const prev = seen.get(n.toLowerCase());
    if (prev === undefined) {
      seen.set(n.toLowerCase(), n);
      out[n] = v;
    } else out[prev] += (n.toLowerCase() === "set-cookie" ? "\n" : ", ") + v;
  }
  return out;
}

function preview(text: string): { body: string; truncated: boolean } {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= PREVIEW_BYTES) return { body: text, truncated: false };
  return { body: bytes.subarray(0, PREVIEW_BYTES).toString("utf8").replace(/\uFFFD$/, ""), truncated: true };
}

const nodeName = (n: FlowNode): string => (typeof n.data.name === "string" && n.data.name) || (typeof n.data.label === "string" && n.data.label) || n.id;

function abortable(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(new Error("the run was cancelled"));
    const t = setTimeout(() => {
      signal.removeEventListener("abort", on);
      resolve();
    }, ms);
    const on = () => {
      clearTimeout(t);
      reject(new Error("the run was cancelled"));
    };
    signal.addEventListener("abort", on, { once: true });
  });
}

/**
 * Runs flows: walks the graph from the start node along the edges, one step per node reached. A node with several
 * outgoing edges starts one branch per edge, run one after another in edge order (depth first); each branch carries
 * the last request and response it saw, and every branch shares the run's variables. A branch stops at a node
 * without outgoing edges, at an end node, and at a step that failed or errored unless the node says continueOnFail.
 * Runs are independent: several may go at once, each with its own variables.
 */
export class FlowRunner {
  constructor(private readonly deps: RunnerDeps) {}

  async run(flow: Flow, opts: RunOptions = {}): Promise<RunReport> {
    const startedAt = Date.now();
    const t0 = performance.now();
    const runId = crypto.randomUUID();
    const signal = opts.signal ?? new AbortController().signal;
    const vars: Vars = { ...flow.variables, ...(opts.environment ?? {}) };
    const finish = (w: Walk): RunReport => ({
      flowId: flow.id,
      runId,
      status: w.status,
      startedAt,
      finishedAt: Date.now(),
      durationMs: Math.round(performance.now() - t0),
      steps: w.steps,
      variables: vars,
      outputs: w.outputs,
      error: w.error,
    });
    const errors = validateFlow(flow, this.deps.load).filter((p) => p.severity === "error");
    if (errors.length) return finish({ status: "error", steps: [], outputs: {}, error: `the flow cannot run: ${errors.map((p) => p.message).join("; ")}` });
    const shared: Shared = { steps: 0, maxSteps: flow.maxSteps ?? DEFAULT_MAX_STEPS, signal, stopped: null };
    const w = await this.walk(flow, vars, shared);
    return finish({ ...w, error: shared.stopped ?? w.error });
  }

  private async walk(flow: Flow, vars: Vars, shared: Shared): Promise<Walk> {
    const byId = new Map(flow.nodes.map((n) => [n.id, n]));
    const out = new Map<string, FlowEdge[]>();
    for (const e of flow.edges) out.set(e.source, [...(out.get(e.source) ?? []), e]);
    const start = flow.nodes.find((n) => n.type === "start")!;
    const steps: StepReport[] = [];
    const outputs: Vars = {};
    let error: string | null = null;
    const stack: { nodeId: string; last: Exchange | null }[] = [{ nodeId: start.id, last: null }];
    while (stack.length) {
      if (shared.signal.aborted) {
        error = shared.stopped ??= "the run was cancelled";
        break;
      }
      if (shared.steps >= shared.maxSteps) {
        error = shared.stopped ??= `the run stopped at the step cap of ${shared.maxSteps} steps (a loop?)`;
        break;
      }
      shared.steps++;
      const { nodeId, last } = stack.pop()!;
      const node = byId.get(nodeId)!;
      const r = await this.node(flow, node, vars, last, outputs, out.get(node.id) ?? [], shared);
      steps.push(r.step);
      const go = r.step.status === "passed" || node.data.continueOnFail === true;
      if (!go || r.next === null) continue;
      for (let i = r.next.length - 1; i >= 0; i--) stack.push({ nodeId: r.next[i]!.target, last: r.last });
    }
    const status: RunStatus = error || steps.some((s) => s.status === "error") ? "error" : steps.some((s) => s.status === "failed") ? "failed" : "passed";
    return { status, steps, outputs, error };
  }

  private async node(flow: Flow, node: FlowNode, vars: Vars, last: Exchange | null, outputs: Vars, edges: FlowEdge[], shared: Shared): Promise<NodeResult> {
    const step: StepReport = {
      nodeId: node.id,
      type: node.type,
      name: nodeName(node),
      status: "passed",
      startedAt: Date.now(),
      durationMs: 0,
      request: null,
      response: null,
      assertions: [],
      console: [],
      error: null,
    };
    const t0 = performance.now();
    const result: NodeResult = { step, last, next: edges };
    try {
      switch (node.type) {
        case "start":
          break;
        case "end":
          Object.assign(outputs, resolveDeep(node.data.outputs ?? {}, vars));
          result.next = null;
          break;
        case "request":
          result.last = await this.request(node, vars, step, shared.signal);
          break;
        case "script":
          await this.script(flow, node, vars, last, step);
          break;
        case "assert":
          this.assert(node.data.checks as Check[], vars, last, step);
          break;
        case "condition": {
          const taken = await this.condition(flow, node, vars, last, step);
          if (taken !== null) {
            step.branch = taken ? "true" : "false";
            result.next = edges.filter((e) => e.sourceHandle === step.branch);
          }
          break;
        }
        case "delay":
          await abortable(node.data.ms as number, shared.signal);
          break;
        case "set-variable":
          this.setVariables(node.data.variables as Assignment[], vars, last);
          break;
        case "subflow":
          await this.subflow(node, vars, step, shared);
          break;
        default:
          throw new Error(`unknown node type '${node.type}'`);
      }
    } catch (e) {
      step.status = "error";
      step.error = shared.signal.aborted ? "the run was cancelled" : (e as Error).message;
    }
    step.durationMs = Math.round(performance.now() - t0);
    return result;
  }

  // ---- request ----------------------------------------------------------------------------------------------------

  private async request(node: FlowNode, vars: Vars, step: StepReport, signal: AbortSignal): Promise<Exchange | null> {
    const d = node.data;
    let prepared: PreparedRequest;
    let auth: Auth | null;
    if (typeof d.collectionId === "string") {
      const store = this.deps.collections();
      const c = store.get(d.collectionId);
      const loc = store.findRequest(c, d.requestId as string);
      const env = typeof d.environment === "string" && d.environment !== "" ? store.environment(c, d.environment) : null;
      prepared = prepareRequest(c, loc.folders, loc.request, new Resolver(buildScopes(Object.fromEntries(textScope(vars)), env, c)));
      auth = effectiveAuth(c, loc.folders, loc.request);
      if (!d.name && !d.label) step.name = loc.request.name;
    } else {
      const kv = (l: unknown) => ((l as { key: string; value: string; enabled?: boolean }[] | undefined) ?? []).map((h) => ({ key: h.key, value: h.value, enabled: h.enabled ?? true }));
      const r: ComposeRequest = {
        id: node.id,
        name: step.name,
        method: d.method as string,
        url: d.url as string,
        headers: kv(d.headers),
        queryParams: kv(d.queryParams),
        body: (d.body as string | undefined) ?? "",
        contentType: (d.contentType as string | undefined) ?? "",
        auth: (d.auth as Auth | null | undefined) ?? null,
        timeout: (d.timeout as number | undefined) ?? DEFAULT_TIMEOUT_MS,
        scripts: { prerequest: "", test: "" },
        description: "",
      };
      const none = { variables: [], defaultHeaders: [], defaultAuth: null } as unknown as Collection;
      prepared = prepareRequest(none, [] as Folder[], r, new Resolver([textScope(vars)]));
      auth = r.auth;
      if (!d.name && !d.label) step.name = `${r.method.toUpperCase()} ${r.url}`;
    }
    if (prepared.unresolved.length) step.console.push({ level: "warn", message: `unresolved variables: ${prepared.unresolved.join(", ")}` });
    const resolver = new Resolver([textScope(vars)]);
    step.request = redactRequest(prepared, auth, (s) => resolver.resolve(s));
    return this.send(prepared, step, signal);
  }

  /** Sends through the proxy from an in-process client labelled tapwire-flow (captured, rules apply). */
  private async send(p: PreparedRequest, step: StepReport, signal: AbortSignal): Promise<Exchange | null> {
    const { url, request } = virtualRequest(p);
    const client: ClientInfo = { addr: "127.0.0.1", port: 0, label: Promise.resolve(FLOW_CLIENT_LABEL), resolvedLabel: FLOW_CLIENT_LABEL };
    let captured: TrafficFlow | null = null;
    let trafficId: number | null = null;
    const stop = this.deps.onStored((f, id) => {
      if (f.client === client) {
        captured = f;
        trafficId = id;
      }
    });
    const t0 = performance.now();
    try {
      const res = await sendVirtual(this.deps.proxy(), request, client, p.timeout, signal);
      const durationMs = Math.round(performance.now() - t0);
      // capture runs right after the response's last byte: let its hook finish
      await new Promise((r) => setImmediate(r));
      const failed = (captured as TrafficFlow | null)?.error;
      if (res.status === 502 && (failed || new TextDecoder().decode(res.body.subarray(0, 9)) === "tapwire: ")) {
        throw new Error(failed ?? new TextDecoder().decode(res.body).replace(/^tapwire: /, "").trim());
      }
      const decoded = decodeBodyBytes(res.body, res.headers, false);
      const text = decoded.encoding === "utf8" ? decoded.text : Buffer.from(decoded.bytes).toString("base64");
      const pv = decoded.encoding === "utf8" ? preview(text) : { body: Buffer.from(decoded.bytes.subarray(0, PREVIEW_BYTES)).toString("base64"), truncated: decoded.bytes.length > PREVIEW_BYTES };
      const response: StepResponse = {
        status: res.status,
        statusText: res.reason,
        headers: headerObject(res.headers),
        body: pv.body,
        bodyEncoding: decoded.encoding === "utf8" ? "utf8" : "base64",
        bodyTruncated: pv.truncated,
        sizeBytes: res.body.length,
        durationMs,
        trafficId,
      };
      step.response = response;
      return {
        request: { method: p.method, url: url.href, headers: p.headers.map(([n, v]) => [n, v] as [string, string]), body: p.body },
        response: { status: res.status, statusText: res.reason, headers: res.headers.map(([n, v]) => [n, v] as [string, string]), body: text, responseTime: durationMs },
        durationMs,
      };
    } finally {
      stop();
    }
  }

  // ---- script and condition ---------------------------------------------------------------------------------------

  /** The engine's input for a node: pm.response is the branch's last response, the flow variables are pm.environment. */
  private scriptInput(flow: Flow, node: FlowNode, script: string, vars: Vars, last: Exchange | null) {
    return {
      script,
      phase: "test" as const,
      request: last?.request ?? { method: "GET", url: "", headers: [], body: "" },
      response: last?.response ?? null,
      variables: {},
      environment: structuredClone(vars),
      info: { requestName: nodeName(node), eventName: "test", environmentName: flow.name },
    };
  }

  private async script(flow: Flow, node: FlowNode, vars: Vars, last: Exchange | null, step: StepReport): Promise<void> {
    const out = await this.deps.scripts().run(this.scriptInput(flow, node, node.data.script as string, vars, last), null);
    step.console = out.console.map((c) => ({ level: c.level, message: c.message }));
    step.assertions = out.tests.map((t) => ({ name: t.name, passed: t.passed, error: t.error }));
    if (out.errors.length) {
      step.status = "error";
      step.error = out.errors.map((e) => (e.line ? `${e.message} (line ${e.line})` : e.message)).join("; ");
      return;
    }
    // pm.environment is the flow variables; pm.variables.set writes on top of them
    for (const k of Object.keys(vars)) if (!Object.hasOwn(out.environment, k)) delete vars[k];
    Object.assign(vars, out.environment, out.variables);
    if (step.assertions.some((a) => !a.passed)) step.status = "failed";
  }

  private async condition(flow: Flow, node: FlowNode, vars: Vars, last: Exchange | null, step: StepReport): Promise<boolean | null> {
    const expr = node.data.expression as string;
    const script = `pm.variables.set(${JSON.stringify(CONDITION_KEY)}, Boolean((function () { return (\n${expr}\n); })()));`;
    const out = await this.deps.scripts().run(this.scriptInput(flow, node, script, vars, last), null);
    step.console = out.console.map((c) => ({ level: c.level, message: c.message }));
    if (out.errors.length) {
      step.status = "error";
      step.error = `condition: ${out.errors.map((e) => e.message).join("; ")}`;
      return null;
    }
    return out.variables[CONDITION_KEY] === true;
  }

  // ---- assert and set-variable ------------------------------------------------------------------------------------

  private assert(checks: Check[], vars: Vars, last: Exchange | null, step: StepReport): void {
    if (!last) throw new Error("no response to check: no request ran before this node on its branch");
    step.assertions = checks.map((c) => evaluate(c, vars, last));
    if (step.assertions.some((a) => !a.passed)) step.status = "failed";
  }

  private setVariables(list: Assignment[], vars: Vars, last: Exchange | null): void {
    for (const a of list) {
      const from = a.from ?? "value";
      if (from === "value") {
        vars[a.name] = resolveDeep(a.value, vars);
        continue;
      }
      if (!last) throw new Error(`'${a.name}' from ${from}: no request ran before this node on its branch`);
      if (from === "status") vars[a.name] = last.response.status;
      else if (from === "body") vars[a.name] = last.response.body;
      else if (from === "header") {
        const v = headerOf(last.response.headers, a.path!);
        if (v === undefined) throw new Error(`'${a.name}': the last response has no header '${a.path}'`);
        vars[a.name] = v;
      } else {
        const doc = parseJson(last.response.body);
        if (!doc.ok) throw new Error(`'${a.name}': the last response's body is not JSON`);
        const got = pick(doc.value, a.path!);
        if (!got.found) throw new Error(`'${a.name}': nothing at ${a.path} in the last response`);
        vars[a.name] = got.value;
      }
    }
  }

  // ---- subflow ----------------------------------------------------------------------------------------------------

  private async subflow(node: FlowNode, vars: Vars, step: StepReport, shared: Shared): Promise<void> {
    const id = node.data.flowId as string;
    const child = this.deps.load(id);
    if (!child) throw new Error(`the flow '${id}' does not exist or is corrupt`);
    const childVars: Vars = { ...child.variables, ...(resolveDeep(node.data.inputs ?? {}, vars) as Vars) };
    const w = await this.walk(child, childVars, shared);
    const map = node.data.outputs as Record<string, string> | undefined;
    if (map) for (const [to, from] of Object.entries(map)) vars[to] = w.outputs[from];
    else Object.assign(vars, w.outputs);
    step.subflow = { flowId: id, status: w.status, steps: w.steps, outputs: w.outputs, variables: childVars };
    if (w.status !== "passed") {
      step.status = w.status;
      step.error = w.error ?? (w.status === "failed" ? `the subflow '${id}' failed` : `the subflow '${id}' had an error`);
    }
  }
}

function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

const show = (v: unknown) => (typeof v === "string" ? JSON.stringify(v) : v === undefined ? "nothing" : JSON.stringify(v));

/** One check of an assert node against the last response. */
export function evaluate(c: Check, vars: Vars, last: Exchange): AssertionResult {
  // validation made sure there is exactly one operator; `equals: null` is one (JSON null)
  const op = (["equals", "contains", "matches", "below", "exists"] as const).find((k) => c[k] !== undefined) ?? "exists";
  const want = resolveDeep(c[op], vars);
  const r = last.response;
  let subject: string;
  let actual: { found: boolean; value: unknown };
  switch (c.type) {
    case "status":
      subject = "status";
      actual = { found: true, value: r.status };
      break;
    case "duration":
      subject = "duration";
      actual = { found: true, value: last.durationMs };
      break;
    case "body":
      subject = "body";
      actual = { found: true, value: r.body };
      break;
    case "header": {
      subject = `header ${c.name}`;
      const v = headerOf(r.headers, c.name!);
      actual = { found: v !== undefined, value: v };
      break;
    }
    case "jsonPath": {
      subject = c.path!;
      const doc = parseJson(r.body);
      if (!doc.ok) return { name: `${subject} ${op} ${op === "exists" ? "" : show(want)}`.trim(), passed: false, error: "the response body is not JSON" };
      actual = pick(doc.value, c.path!);
      break;
    }
  }
  const name = op === "exists" ? `${subject} ${want === false ? "does not exist" : "exists"}` : `${subject} ${op} ${show(want)}${op === "below" && c.type === "duration" ? " ms" : ""}`;
  let passed: boolean;
  switch (op) {
    case "exists":
      passed = actual.found === (want !== false);
      break;
    case "equals":
      passed = actual.found && looseEqual(actual.value, want);
      break;
    case "contains":
      passed = actual.found && (Array.isArray(actual.value) ? actual.value.some((x) => looseEqual(x, want)) : asText(actual.value).includes(asText(want)));
      break;
    case "matches":
      passed = actual.found && new RegExp(asText(want)).test(asText(actual.value));
      break;
    case "below":
      passed = actual.found && Number(actual.value) < Number(want);
      break;
  }
  const got = actual.found ? show(actual.value) : "nothing";
  return { name, passed, error: passed ? null : `expected ${name}, got ${c.type === "body" && got.length > 200 ? `${got.slice(0, 200)}…` : got}` };
}

/** The request as the report shows it: credentials (Authorization, Proxy-Authorization, the auth's API key) as ***. */
function redactRequest(p: PreparedRequest, auth: Auth | null, res: (s: string) => string): StepRequest {
  const secret = new Set(["authorization", "proxy-authorization", "cookie"]);
  if (auth?.type === "apiKey" && auth.in !== "query") secret.add(res(auth.key).toLowerCase());
  let url = p.url;
  if (auth?.type === "apiKey" && auth.in === "query") {
    try {
      const u = new URL(p.url);
      const key = res(auth.key);
      if (u.searchParams.has(key)) {
        u.searchParams.set(key, REDACTED);
        url = u.href;
      }
    } catch {}
  }
  const headers: HeaderList = p.headers.map(([n, v]) => [n, secret.has(n.toLowerCase()) ? REDACTED : v]);
  return { method: p.method, url, headers: headerObject(headers), body: preview(p.body).body };
}
