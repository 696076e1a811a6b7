import { getHeader, removeHeader, setHeader } from "../../core/http1/headers.ts";
import { statusReason } from "../../core/http1/serialize.ts";
import type { HeaderList } from "../../core/http1/types.ts";
import type { Addon, HookResult } from "../../pipeline/addon.ts";
import { type Flow, hostPort, type Scheme } from "../../pipeline/flow.ts";
import { HEADER_NAME, HEADER_VALUE } from "../map-local/schema.ts";
import type { ScriptOutput, ScriptRequest, ScriptResponse, VarScope } from "./engine/types.ts";
import { bodyText, type ScriptRunner } from "./runner.ts";
import type { ScriptRule } from "./schema.ts";
import type { ScriptRuleStore } from "./store.ts";

/** Bodies larger than this are not handed to scripts: the script is skipped and the entry says so. */
export const SCRIPT_BODY_CAP = 16 * 1024 * 1024;

const METHOD = /^[!#$%&'*+.^_`|~0-9A-Z-]+$/;
const enc = new TextEncoder();

/** What a traffic entry records of each script that ran on it (entry detail field `scripts`). */
export interface ScriptRunRecord {
  rule_id: string;
  rule_name: string;
  phase: "request" | "response";
  /** Whether the script's changes were applied (false when it failed, or was skipped). */
  applied: boolean;
  duration_ms: number;
  console: ScriptOutput["console"];
  errors: ScriptOutput["errors"];
  tests?: ScriptOutput["tests"];
  /** Why the script did not run (body over the cap, ...). */
  skipped?: string;
}

function record(flow: Flow, r: ScriptRunRecord): void {
  ((flow.extra.scripts ??= []) as ScriptRunRecord[]).push(r);
}

function skip(flow: Flow, rules: ScriptRule[], phase: "request" | "response", why: string): void {
  for (const rule of rules) record(flow, { rule_id: rule.id, rule_name: rule.name, phase, applied: false, duration_ms: 0, console: [], errors: [], skipped: why });
}

function declaredLength(headers: HeaderList): number | null {
  const v = getHeader(headers, "content-length");
  if (v === undefined) return null;
  const n = Number(v.split(",")[0]!.trim());
  return Number.isFinite(n) ? n : null;
}

function sameHeaders(a: HeaderList, b: HeaderList): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i]![0] !== b[i]![0] || a[i]![1] !== b[i]![1]) return false;
  return true;
}

/** A header list a script returned, checked so that it can go on the wire; throws naming the bad field. */
function checkedHeaders(h: unknown): HeaderList {
  if (!Array.isArray(h)) throw new Error("headers must be a list");
  return h.map((pair) => {
    const [n, v] = pair as [unknown, unknown];
    const name = String(n);
    const value = String(v);
    if (!HEADER_NAME.test(name)) throw new Error(`'${name}' is not a valid header name`);
    if (!HEADER_VALUE.test(value)) throw new Error(`the value of header '${name}' has control characters`);
    return [name, value] as [string, string];
  });
}

/**
 * Script rules in the pipeline (spec 2.15, 4.15). A request matching an enabled rule (master switch on) is
 * buffered and its `request_script` runs before the request goes upstream; a matching response is buffered (up to
 * SCRIPT_BODY_CAP; past it the body streams and the script is skipped) and its `response_script` runs before the
 * client receives it. Several matching rules run in list order, each seeing the previous one's changes.
 *
 * A script that throws, times out or runs out of memory changes nothing: the traffic goes on as it was, and the
 * entry records the error. pm.environment and pm.globals persist between executions while the service runs.
 */
export class ScriptAddon implements Addon {
  readonly name = "scripts";
  private readonly requestRules = new WeakMap<Flow, ScriptRule[]>();
  private readonly responseRules = new WeakMap<Flow, ScriptRule[]>();
  /** Shared by every rule's executions until the service stops. */
  environment: VarScope = {};
  globals: VarScope = {};

  constructor(private readonly store: ScriptRuleStore, private readonly runner: ScriptRunner) {}

  /** Rules for this flow and phase, minus the one whose pm.sendRequest sent it. */
  private rulesFor(flow: Flow, phase: "request" | "response"): ScriptRule[] {
    if (!this.store.enabled || flow.websocket || flow.extra.ignored === true) return [];
    const list = this.store.list();
    if (list.length === 0) return [];
    const method = flow.request.method;
    let rules = this.store.matching(method, flow.url, phase);
    if (phase === "response" && !flow.urlUnchanged) {
      // a response rule matches the URL the client asked for, or the one the request went to
      const seen = new Set(rules.map((r) => r.id));
      rules = rules.concat(this.store.matching(method, flow.originalUrl, phase).filter((r) => !seen.has(r.id)));
    }
    const origin = this.runner.originRule(flow.client);
    return origin ? rules.filter((r) => r.id !== origin) : rules;
  }

  requestHeaders(flow: Flow): void {
    const rules = this.rulesFor(flow, "request");
    if (rules.length === 0) return;
    const len = declaredLength(flow.request.headers);
    if (len !== null && len > SCRIPT_BODY_CAP) return skip(flow, rules, "request", `request body of ${len} bytes is over the ${SCRIPT_BODY_CAP}-byte script cap`);
    this.requestRules.set(flow, rules);
    flow.bufferRequest = true;
  }

  request(flow: Flow): HookResult {
    const rules = this.requestRules.get(flow);
    if (!rules) return;
    this.requestRules.delete(flow);
    return this.runRequestScripts(flow, rules);
  }

  responseHeaders(flow: Flow): void {
    const res = flow.response;
    if (!res) return;
    const rules = this.rulesFor(flow, "response");
    if (rules.length === 0) return;
    const len = declaredLength(res.headers);
    if (res.body === null && len !== null && len > SCRIPT_BODY_CAP) return skip(flow, rules, "response", `response body of ${len} bytes is over the ${SCRIPT_BODY_CAP}-byte script cap`);
    this.responseRules.set(flow, rules);
    if (!flow.bufferResponse) flow.bufferResponseMax = SCRIPT_BODY_CAP;
    flow.bufferResponse = true;
  }

  response(flow: Flow): HookResult {
    const rules = this.responseRules.get(flow);
    if (!rules) return;
    this.responseRules.delete(flow);
    if (!flow.response) return;
    if (flow.response.body === null) return skip(flow, rules, "response", `response body is over the ${SCRIPT_BODY_CAP}-byte script cap (it streamed to the client unchanged)`);
    return this.runResponseScripts(flow, rules);
  }

  private async runRequestScripts(flow: Flow, rules: ScriptRule[]): Promise<void> {
    const r = flow.request;
    const text = bodyText(r.body, r.headers);
    const original: ScriptRequest = { method: r.method, url: flow.url, headers: r.headers.map(([n, v]) => [n, v]), body: text ?? "" };
    let cur = original;
    for (const rule of rules) {
      const out = await this.runner.run({ script: rule.request_script, phase: "request", request: cur, environment: this.environment, globals: this.globals, info: { requestName: rule.name, eventName: "prerequest" } }, rule.id);
      let applied = false;
      if (out.errors.length === 0) {
        try {
          cur = checkRequest(out.request, cur);
          applied = true;
          this.keepScopes(out);
        } catch (e) {
          out.errors.push({ message: `the script's request cannot be sent: ${(e as Error).message}`, stack: null, line: null });
        }
      }
      record(flow, { rule_id: rule.id, rule_name: rule.name, phase: "request", applied, duration_ms: out.duration_ms, console: out.console, errors: out.errors, ...(out.tests.length ? { tests: out.tests } : {}) });
    }
    applyRequest(flow, original, cur, text === null);
  }

  private async runResponseScripts(flow: Flow, rules: ScriptRule[]): Promise<void> {
    const res = flow.response!;
    const text = bodyText(res.body, res.headers);
    const r = flow.request;
    const request: ScriptRequest = { method: r.method, url: flow.url, headers: r.headers.map(([n, v]) => [n, v]), body: bodyText(r.body, r.headers) ?? "" };
    const original: ScriptResponse = { status: res.status, statusText: res.reason, headers: res.headers.map(([n, v]) => [n, v]), body: text ?? "", responseTime: Math.round(performance.now() - flow.t0) };
    let cur = original;
    for (const rule of rules) {
      const out = await this.runner.run({ script: rule.response_script, phase: "response", request, response: cur, environment: this.environment, globals: this.globals, info: { requestName: rule.name, eventName: "test" } }, rule.id);
      let applied = false;
      if (out.errors.length === 0 && out.response) {
        try {
          cur = checkResponse(out.response, cur);
          applied = true;
          this.keepScopes(out);
        } catch (e) {
          out.errors.push({ message: `the script's response cannot be sent: ${(e as Error).message}`, stack: null, line: null });
        }
      }
      record(flow, { rule_id: rule.id, rule_name: rule.name, phase: "response", applied, duration_ms: out.duration_ms, console: out.console, errors: out.errors, ...(out.tests.length ? { tests: out.tests } : {}) });
    }
    applyResponse(flow, original, cur, text === null);
  }

  private keepScopes(out: ScriptOutput): void {
    this.environment = out.environment;
    this.globals = out.globals;
  }
}

/**
 * The request a script answered, checked so that it can go on the wire. before: what the script was given (the
 * flow's, or what the previous rule's script answered, checked then): a URL or header list the script left as it
 * was is not checked again.
 */
function checkRequest(req: ScriptRequest, before: ScriptRequest): ScriptRequest {
  const method = String(req.method).toUpperCase();
  if (!METHOD.test(method)) throw new Error(`'${req.method}' is not an HTTP method`);
  const urlText = String(req.url);
  if (urlText !== before.url) {
    let url: URL;
    try {
      url = new URL(urlText);
    } catch {
      throw new Error(`'${req.url}' is not an absolute URL`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error(`only http and https URLs can be sent, not ${url.protocol}`);
  }
  const headers = Array.isArray(req.headers) && sameHeaders(req.headers, before.headers) ? before.headers : checkedHeaders(req.headers);
  return { method, url: urlText, headers, body: String(req.body ?? "") };
}

function checkResponse(res: ScriptResponse, before: ScriptResponse): ScriptResponse {
  const status = Number(res.status);
  if (!Number.isInteger(status) || status < 100 || status > 999) throw new Error(`'${res.status}' is not a status code`);
  const statusText = res.statusText === undefined ? undefined : String(res.statusText);
  if (statusText !== undefined && /[\x00-\x08\x0a-\x1f\x7f]/.test(statusText)) throw new Error("the reason phrase has control characters");
  const headers = Array.isArray(res.headers) && sameHeaders(res.headers, before.headers) ? before.headers : checkedHeaders(res.headers);
  return { status, statusText, headers, body: String(res.body ?? "") };
}

/** Puts what the scripts changed into the flow; what they left alone stays as received (bytes included). */
function applyRequest(flow: Flow, before: ScriptRequest, after: ScriptRequest, binary: boolean): void {
  const r = flow.request;
  r.method = after.method;
  if (!sameHeaders(before.headers, after.headers)) r.headers = after.headers.map(([n, v]) => [n, v]);
  if (after.url !== before.url) {
    const u = new URL(after.url);
    const scheme = u.protocol.slice(0, -1) as Scheme;
    const host = u.hostname.startsWith("[") ? u.hostname.slice(1, -1) : u.hostname;
    const port = u.port ? Number(u.port) : scheme === "https" ? 443 : 80;
    const moved = host !== r.host || port !== r.port || scheme !== r.scheme;
    const oldHost = hostPort(r.scheme, r.host, r.port);
    r.scheme = scheme;
    r.host = host;
    r.port = port;
    r.path = (u.pathname || "/") + u.search;
    // the Host header follows the URL unless the script set it to something else itself
    if (moved && getHeader(r.headers, "host") === oldHost) setHeader(r.headers, "Host", hostPort(scheme, host, port));
  }
  if (after.body !== before.body || (binary && after.body !== "")) {
    r.body = enc.encode(after.body);
    removeHeader(r.headers, "content-encoding");
  }
}

function applyResponse(flow: Flow, before: ScriptResponse, after: ScriptResponse, binary: boolean): void {
  const res = flow.response!;
  if (after.status !== before.status) {
    res.status = after.status;
    res.reason = after.statusText !== undefined && after.statusText !== before.statusText ? after.statusText : statusReason(after.status);
  } else if (after.statusText !== undefined && after.statusText !== before.statusText) {
    res.reason = after.statusText;
  }
  if (!sameHeaders(before.headers, after.headers)) res.headers = after.headers.map(([n, v]) => [n, v]);
  if (after.body !== before.body || (binary && after.body !== "")) {
    res.body = enc.encode(after.body);
    removeHeader(res.headers, "content-encoding");
  }
}
