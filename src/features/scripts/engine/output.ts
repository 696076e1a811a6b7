/**
 * Host side of a run's data: the input as it goes to a worker (prepareRun) and the ScriptOutput built from what
 * comes back (mergeOutput) or from a failure (failureOutput). Everything returned is a plain object built here or
 * parsed from JSON, never anything QuickJS made; what the sandbox sends is checked field by field, so even a script
 * that broke the prelude's built-ins cannot hand the host a malformed output.
 */
import type { SandboxInput, SandboxInputHead, SandboxOutput } from "./protocol.ts";
import type {
  ConsoleLine,
  HeaderList,
  Phase,
  ScriptError,
  ScriptInput,
  ScriptOutput,
  ScriptRequest,
  ScriptResponse,
  TestResult,
  VarScope,
} from "./types.ts";

const PHASES: readonly Phase[] = ["request", "response", "test"];
const LEVELS: readonly ConsoleLine["level"][] = ["log", "info", "warn", "error"];
const SCOPES = ["variables", "environment", "collectionVariables", "globals"] as const;
type ScopeName = (typeof SCOPES)[number];

/** A run ready to go to a worker, with what the output falls back to for anything the script did not change. */
export interface PreparedRun {
  script: string;
  /** SandboxInput in parts, as the worker takes it (protocol.ts, SandboxInputHead). */
  inputJson: string;
  request: ScriptRequest;
  response: ScriptResponse | null;
  /** Each scope as JSON: parsed again for an unchanged scope, so the output never shares objects with the input. */
  scopesJson: Record<ScopeName, string>;
}

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

function headerList(v: unknown): HeaderList {
  if (!Array.isArray(v)) return [];
  const out: HeaderList = [];
  for (const p of v) if (Array.isArray(p) && p.length >= 2) out.push([String(p[0]), String(p[1])]);
  return out;
}

const copyHeaders = (h: HeaderList): HeaderList => h.map(([k, v]) => [k, v]);

function copyRequest(r: ScriptRequest): ScriptRequest {
  return { method: r.method, url: r.url, headers: copyHeaders(r.headers), body: r.body };
}

function copyResponse(r: ScriptResponse | null): ScriptResponse | null {
  if (!r) return null;
  const out: ScriptResponse = { status: r.status, headers: copyHeaders(r.headers), body: r.body };
  if (r.statusText !== undefined) out.statusText = r.statusText;
  if (r.responseTime !== undefined) out.responseTime = r.responseTime;
  return out;
}

/** The input as the sandbox gets it; an error message instead when it cannot be sent (a scope that is not JSON). */
export function prepareRun(input: ScriptInput, memoryBytes: number): PreparedRun | { error: string } {
  if (!PHASES.includes(input.phase)) return { error: `invalid phase '${String(input.phase)}' (request, response or test)` };
  if (typeof input.script !== "string") return { error: "the script must be a string" };
  const phase = input.phase;
  const req = isRecord(input.request) ? input.request : ({} as Partial<ScriptRequest>);
  const request: ScriptRequest = {
    method: typeof req.method === "string" && req.method ? req.method : "GET",
    url: typeof req.url === "string" ? req.url : "",
    headers: headerList(req.headers),
    body: typeof req.body === "string" ? req.body : "",
  };
  let response: ScriptResponse | null = null;
  if (isRecord(input.response)) {
    const r = input.response as Partial<ScriptResponse>;
    response = { status: Number.isInteger(r.status) ? (r.status as number) : 200, headers: headerList(r.headers), body: typeof r.body === "string" ? r.body : "" };
    if (typeof r.statusText === "string") response.statusText = r.statusText;
    if (typeof r.responseTime === "number" && Number.isFinite(r.responseTime)) response.responseTime = r.responseTime;
  }

  const scopesJson = {} as Record<ScopeName, string>;
  for (const name of SCOPES) {
    const scope = input[name];
    try {
      scopesJson[name] = isRecord(scope) ? JSON.stringify(scope) : "{}";
    } catch (e) {
      return { error: `${name} cannot be passed to a script: ${e instanceof Error ? e.message : String(e)}` };
    }
  }
  const info = isRecord(input.info) ? input.info : {};
  const sandboxRequest: SandboxInput["request"] = { method: request.method, url: request.url, headers: request.headers };
  const sandboxResponse: SandboxInput["response"] = response && { status: response.status, statusText: response.statusText, headers: response.headers, responseTime: response.responseTime };
  const head: SandboxInputHead = {
    phase,
    memoryBytes,
    info: {
      requestName: typeof info.requestName === "string" ? info.requestName : undefined,
      eventName: typeof info.eventName === "string" ? info.eventName : undefined,
      environmentName: typeof info.environmentName === "string" ? info.environmentName : undefined,
      requestId: typeof info.requestId === "string" ? info.requestId : undefined,
      iteration: Number.isInteger(info.iteration) ? (info.iteration as number) : undefined,
      iterationCount: Number.isInteger(info.iterationCount) ? (info.iterationCount as number) : undefined,
    },
  };
  if (isRecord(input.iterationData) && Object.keys(input.iterationData).length) {
    try {
      head.iterationData = JSON.parse(JSON.stringify(input.iterationData)) as Record<string, unknown>;
    } catch (e) {
      return { error: `iterationData cannot be passed to a script: ${e instanceof Error ? e.message : String(e)}` };
    }
  }
  // Parts joined by "\n", which JSON.stringify never writes (it escapes control characters): the sandbox parses
  // each part only when the script uses it (run.sandbox.js, RunInput).
  const inputJson = [
    JSON.stringify(head),
    JSON.stringify(sandboxRequest),
    JSON.stringify(sandboxResponse),
    scopesJson.variables,
    scopesJson.environment,
    scopesJson.collectionVariables,
    scopesJson.globals,
  ].join("\n");
  return { script: input.script, inputJson, request, response, scopesJson };
}

const round = (ms: number) => Math.round(ms * 1000) / 1000;

/** A scope's JSON parsed again (a fresh object; the common empty scope without parsing). */
const scopeCopy = (json: string): VarScope => (json === "{}" ? {} : (JSON.parse(json) as VarScope));

function unchangedScopes(p: PreparedRun): Pick<ScriptOutput, ScopeName> {
  return {
    variables: scopeCopy(p.scopesJson.variables),
    environment: scopeCopy(p.scopesJson.environment),
    collectionVariables: scopeCopy(p.scopesJson.collectionVariables),
    globals: scopeCopy(p.scopesJson.globals),
  };
}

/** The output of a run that did not finish normally (timeout, out of memory, crash, engine closed): the input unchanged. */
export function failureOutput(p: PreparedRun, message: string, durationMs: number): ScriptOutput {
  return {
    console: [],
    tests: [],
    request: copyRequest(p.request),
    response: copyResponse(p.response),
    ...unchangedScopes(p),
    errors: [{ message, stack: null, line: null }],
    duration_ms: round(durationMs),
  };
}

/** An output for input that could not even be prepared. */
export function invalidInputOutput(input: ScriptInput, message: string): ScriptOutput {
  const req = isRecord(input?.request) ? (input.request as Partial<ScriptRequest>) : {};
  const scope = (v: unknown): VarScope => {
    try {
      return isRecord(v) ? (JSON.parse(JSON.stringify(v)) as VarScope) : {};
    } catch {
      return {};
    }
  };
  return {
    console: [],
    tests: [],
    request: { method: String(req.method ?? "GET"), url: String(req.url ?? ""), headers: headerList(req.headers), body: typeof req.body === "string" ? req.body : "" },
    response: isRecord(input?.response) ? copyResponse(input.response as ScriptResponse) : null,
    variables: scope(input?.variables),
    environment: scope(input?.environment),
    collectionVariables: scope(input?.collectionVariables),
    globals: scope(input?.globals),
    errors: [{ message: `Invalid script input: ${message}`, stack: null, line: null }],
    duration_ms: 0,
  };
}

/**
 * The ScriptOutput from the sandbox's answer. recycle: the script ran out of memory (even if it caught that), so
 * the worker should be replaced to give its memory back. After an out-of-memory the request, response and scopes are
 * returned as they came in; console, tests and errors are kept.
 */
export function mergeOutput(p: PreparedRun, json: string, durationMs: number): { output: ScriptOutput; recycle: boolean } {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    raw = null;
  }
  if (!isRecord(raw)) return { output: failureOutput(p, "Sandbox failure: the script's output could not be read", durationMs), recycle: true };
  const o = raw as Partial<SandboxOutput>;
  const oom = o.oom === true;

  const consoleLines: ConsoleLine[] = [];
  for (const l of Array.isArray(o.console) ? o.console : []) {
    if (!Array.isArray(l)) continue;
    const level = LEVELS.includes(l[0] as ConsoleLine["level"]) ? (l[0] as ConsoleLine["level"]) : "log";
    consoleLines.push({ level, message: String(l[1]), ts: typeof l[2] === "number" ? l[2] : Date.now() });
  }
  const tests: TestResult[] = [];
  for (const t of Array.isArray(o.tests) ? o.tests : []) {
    if (Array.isArray(t)) tests.push({ name: String(t[0]), passed: t[1] === true, error: t[1] === true ? null : String(t[2] ?? "failed") });
  }
  const errors: ScriptError[] = [];
  for (const e of Array.isArray(o.errors) ? o.errors : []) {
    if (Array.isArray(e)) errors.push({ message: String(e[0]), stack: typeof e[1] === "string" ? e[1] : null, line: typeof e[2] === "number" ? e[2] : null });
  }

  const request = copyRequest(p.request);
  let response = copyResponse(p.response);
  const scopes = unchangedScopes(p);
  if (!oom) {
    const rq = isRecord(o.request) ? o.request : {};
    if (typeof rq.method === "string") request.method = rq.method;
    if (typeof rq.url === "string") request.url = rq.url;
    if (Array.isArray(rq.headers)) request.headers = headerList(rq.headers);
    if (typeof rq.body === "string") request.body = rq.body;
    const rs = isRecord(o.response) ? o.response : {};
    if (response) {
      if (typeof rs.status === "number" && Number.isInteger(rs.status)) response.status = rs.status;
      if (typeof rs.statusText === "string") response.statusText = rs.statusText;
      if (Array.isArray(rs.headers)) response.headers = headerList(rs.headers);
      if (typeof rs.body === "string") response.body = rs.body;
    } else response = null;
    for (const name of SCOPES) {
      const v = o[name];
      if (isRecord(v)) scopes[name] = v;
    }
  }
  return {
    output: { console: consoleLines, tests, request, response, ...scopes, errors, duration_ms: round(durationMs) },
    recycle: oom,
  };
}
