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
  const inputJson = inputText(JSON.stringify(head), JSON.stringify(sandboxRequest), JSON.stringify(sandboxResponse), scopesJson.variables, scopesJson.environment, scopesJson.collectionVariables, scopesJson.globals);
  return { script: input.script, inputJson, request, response, scopesJson };
}

/**
 * The sandbox's input text from its parts, each already JSON: the head (SandboxInputHead), the request and response
 * (SandboxInput's, or "null"), and the four scopes. For callers that build the parts themselves (the proxy's script
 * addon, which keeps the parts that rarely change as text between runs) and answer for them being valid JSON.
 */
export function inputText(head: string, request: string, response: string, variables: string, environment: string, collectionVariables: string, globals: string): string {
  return head + "\n" + request + "\n" + response + "\n" + variables + "\n" + environment + "\n" + collectionVariables + "\n" + globals;
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

/** What a script changed, read from the sandbox's answer and checked field by field (readChanges()). */
export interface ScriptChanges {
  console: ConsoleLine[];
  tests: TestResult[];
  errors: ScriptError[];
  /** The script ran out of memory (even if it caught that): its request, response and scopes are left out. */
  oom: boolean;
  /** Only the parts the script changed; null when it changed none. */
  request: Partial<ScriptRequest> | null;
  response: { status?: number; statusText?: string; headers?: HeaderList; body?: string } | null;
  /** The scopes the script touched, whole. */
  scopes: Partial<Record<ScopeName, VarScope>>;
}

/** The sandbox's answer (JSON of SandboxOutput) as an object, or null when it is not one (the run then failed). */
export function parseOutput(json: string): Record<string, unknown> | null {
  if (json === "{}") return {};
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    return null;
  }
  return isRecord(raw) ? raw : null;
}

/** Message of a run whose answer parseOutput() could not read. */
export const UNREADABLE_OUTPUT = "Sandbox failure: the script's output could not be read";

/** What the sandbox's answer (parsed by parseOutput) says the script did, with every field checked. */
export function readChanges(raw: Record<string, unknown>): ScriptChanges {
  const o = raw as Partial<SandboxOutput>;
  const oom = o.oom === true;
  const consoleLines: ConsoleLine[] = [];
  if (Array.isArray(o.console)) {
    for (const l of o.console) {
      if (!Array.isArray(l)) continue;
      const level = LEVELS.includes(l[0] as ConsoleLine["level"]) ? (l[0] as ConsoleLine["level"]) : "log";
      consoleLines.push({ level, message: String(l[1]), ts: typeof l[2] === "number" ? l[2] : Date.now() });
    }
  }
  const tests: TestResult[] = [];
  if (Array.isArray(o.tests)) {
    for (const t of o.tests) {
      if (Array.isArray(t)) tests.push({ name: String(t[0]), passed: t[1] === true, error: t[1] === true ? null : String(t[2] ?? "failed") });
    }
  }
  const errors: ScriptError[] = [];
  if (Array.isArray(o.errors)) {
    for (const e of o.errors) {
      if (Array.isArray(e)) errors.push({ message: String(e[0]), stack: typeof e[1] === "string" ? e[1] : null, line: typeof e[2] === "number" ? e[2] : null });
    }
  }
  const c: ScriptChanges = { console: consoleLines, tests, errors, oom, request: null, response: null, scopes: {} };
  if (oom) return c;
  if (isRecord(o.request)) {
    const rq = o.request;
    const r: Partial<ScriptRequest> = {};
    let any = false;
    if (typeof rq.method === "string") (r.method = rq.method), (any = true);
    if (typeof rq.url === "string") (r.url = rq.url), (any = true);
    if (Array.isArray(rq.headers)) (r.headers = headerList(rq.headers)), (any = true);
    if (typeof rq.body === "string") (r.body = rq.body), (any = true);
    if (any) c.request = r;
  }
  if (isRecord(o.response)) {
    const rs = o.response;
    const r: NonNullable<ScriptChanges["response"]> = {};
    let any = false;
    if (typeof rs.status === "number" && Number.isInteger(rs.status)) (r.status = rs.status), (any = true);
    if (typeof rs.statusText === "string") (r.statusText = rs.statusText), (any = true);
    if (Array.isArray(rs.headers)) (r.headers = headerList(rs.headers)), (any = true);
    if (typeof rs.body === "string") (r.body = rs.body), (any = true);
    if (any) c.response = r;
  }
  for (const name of SCOPES) {
    const v = o[name];
    if (isRecord(v)) c.scopes[name] = v;
  }
  return c;
}

/**
 * The ScriptOutput from the sandbox's answer. recycle: the script ran out of memory (even if it caught that), so
 * the worker should be replaced to give its memory back. After an out-of-memory the request, response and scopes are
 * returned as they came in; console, tests and errors are kept.
 */
export function mergeOutput(p: PreparedRun, json: string, durationMs: number): { output: ScriptOutput; recycle: boolean } {
  const raw = parseOutput(json);
  if (raw === null) return { output: failureOutput(p, UNREADABLE_OUTPUT, durationMs), recycle: true };
  const c = readChanges(raw);
  return { output: mergeChanges(p, c, durationMs), recycle: c.oom };
}

/** The ScriptOutput: the prepared input with the script's changes on top (fresh objects throughout). */
export function mergeChanges(p: PreparedRun, c: ScriptChanges, durationMs: number): ScriptOutput {
  const request = copyRequest(p.request);
  const response = copyResponse(p.response);
  const scopes = unchangedScopes(p);
  if (c.request) Object.assign(request, c.request);
  if (response && c.response) Object.assign(response, c.response);
  Object.assign(scopes, c.scopes);
  return { console: c.console, tests: c.tests, request, response, ...scopes, errors: c.errors, duration_ms: round(durationMs) };
}
