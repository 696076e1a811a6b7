import { getHeader, removeHeader, setHeader } from "../../core/http1/headers.ts";
import { statusReason } from "../../core/http1/serialize.ts";
import type { HeaderList } from "../../core/http1/types.ts";
import type { Addon, HookResult } from "../../pipeline/addon.ts";
import { type Flow, hostPort, type Scheme } from "../../pipeline/flow.ts";
import { HEADER_NAME, HEADER_VALUE } from "../map-local/schema.ts";
import { inputText, readChanges, type ScriptChanges } from "./engine/output.ts";
import type { RawRun } from "./engine/engine.ts";
import type { SandboxInputHead } from "./engine/protocol.ts";
import type { ScriptOutput, ScriptRequest, ScriptResponse } from "./engine/types.ts";
import { bodyText, type ScriptRunner } from "./runner.ts";
import type { ScriptRule } from "./schema.ts";
import type { ScriptRuleStore } from "./store.ts";

/** Bodies larger than this are not handed to scripts: the script is skipped and the entry says so. */
export const SCRIPT_BODY_CAP = 16 * 1024 * 1024;

const METHOD = /^[!#$%&'*+.^_`|~0-9A-Z-]+$/;
const enc = new TextEncoder();
/** head()'s texts kept, at most (all forgotten when full). */
const MAX_KEPT_HEADS = 256;

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

/**
 * A header list a script returned, checked so that it can go on the wire; throws naming the bad field. A field
 * equal to the one at the same place in the list the script was given was checked then, and is kept as it is; a
 * list equal to that one is that one.
 */
function checkedHeaders(h: unknown, before: HeaderList): HeaderList {
  if (!Array.isArray(h)) throw new Error("headers must be a list");
  if (sameHeaders(h as HeaderList, before)) return before;
  return h.map((pair, i) => {
    const [n, v] = pair as [unknown, unknown];
    const old = before[i];
    if (old !== undefined && old[0] === n && old[1] === v) return old;
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
  /** pm.environment and pm.globals as JSON: shared by every rule's executions until the service stops. */
  private environmentJson = "{}";
  private globalsJson = "{}";
  /** head()'s texts by phase and rule name. */
  private readonly heads = new Map<string, string>();

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

  /**
   * The rules' request scripts, one after another, each seeing what the previous one changed; the flow gets the
   * result once all ran. The runs go through runner.runRaw(): the input is built here (the parts that rarely change
   * are kept as text) and only what a script changed comes back, so a script that changed nothing costs no copy.
   */
  private runRequestScripts(flow: Flow, rules: ScriptRule[]): Promise<void> {
    const r = flow.request;
    const text = bodyText(r.body, r.headers);
    const original: ScriptRequest = { method: r.method, url: flow.url, headers: r.headers, body: text ?? "" };
    return this.runChain(
      flow,
      rules,
      "request",
      original,
      (rule, cur) => ({
        script: rule.request_script,
        input: inputText(this.head("request", rule.name), JSON.stringify({ method: cur.method, url: cur.url, headers: cur.headers }), "null", "{}", this.environmentJson, "{}", this.globalsJson),
        requestBody: cur.body,
        responseBody: null,
      }),
      (c, cur) => (c.request ? checkRequest(c.request, cur) : cur),
      (cur) => applyRequest(flow, original, cur, text === null),
    );
  }

  /** The rules' response scripts, as runRequestScripts() does the request's. */
  private runResponseScripts(flow: Flow, rules: ScriptRule[]): Promise<void> {
    const res = flow.response!;
    const text = bodyText(res.body, res.headers);
    const r = flow.request;
    const requestJson = JSON.stringify({ method: r.method, url: flow.url, headers: r.headers });
    const requestBody = bodyText(r.body, r.headers) ?? "";
    const original: ScriptResponse = { status: res.status, statusText: res.reason, headers: res.headers, body: text ?? "", responseTime: Math.round(performance.now() - flow.t0) };
    return this.runChain(
      flow,
      rules,
      "response",
      original,
      (rule, cur) => {
        const responseJson = JSON.stringify({ status: cur.status, statusText: cur.statusText, headers: cur.headers, responseTime: original.responseTime });
        return { script: rule.response_script, input: inputText(this.head("response", rule.name), requestJson, responseJson, "{}", this.environmentJson, "{}", this.globalsJson), requestBody, responseBody: cur.body };
      },
      (c, cur) => (c.response ? checkResponse(c.response, cur) : cur),
      (cur) => applyResponse(flow, original, cur, text === null),
    );
  }

  /**
   * Runs one phase's scripts of `rules` one after another: `run` builds each run from what the previous ones left
   * (`cur`), `change` applies a run's changes (throwing when they cannot be sent), `done` gets the result of all.
   * Each run is recorded on the flow, applied or not.
   */
  private runChain<T>(
    flow: Flow,
    rules: ScriptRule[],
    phase: "request" | "response",
    original: T,
    run: (rule: ScriptRule, cur: T) => RawRun,
    change: (c: ScriptChanges, cur: T) => T,
    done: (cur: T) => void,
  ): Promise<void> {
    return new Promise((resolve, reject) => {
      let cur = original;
      let i = 0;
      const next = (): void => {
        if (i === rules.length) {
          done(cur);
          return resolve();
        }
        const rule = rules[i++]!;
        this.runner.runRaw(run(rule, cur), rule.id, (out, failure, ms) => {
          try {
            const c = out !== null ? readChanges(out) : null;
            const errors = c ? c.errors : failed(failure);
            let applied = false;
            if (c && errors.length === 0) {
              try {
                cur = change(c, cur);
                applied = true;
                this.keepScopes(c);
              } catch (e) {
                errors.push({ message: `the script's ${phase} cannot be sent: ${(e as Error).message}`, stack: null, line: null });
              }
            }
            record(flow, { rule_id: rule.id, rule_name: rule.name, phase, applied, duration_ms: roundMs(ms), console: c ? c.console : [], errors, ...(c && c.tests.length ? { tests: c.tests } : {}) });
            next();
          } catch (e) {
            reject(e);
          }
        });
      };
      next();
    });
  }

  /** The head of the sandbox's input for a rule's runs in a phase (the same text every time: kept). */
  private head(phase: "request" | "response", ruleName: string): string {
    const key = phase === "request" ? "q" + ruleName : "s" + ruleName;
    let h = this.heads.get(key);
    if (h === undefined) {
      if (this.heads.size >= MAX_KEPT_HEADS) this.heads.clear();
      const head: SandboxInputHead = { phase, memoryBytes: this.runner.memoryBytes(), info: { requestName: ruleName, eventName: phase === "request" ? "prerequest" : "test" } };
      h = JSON.stringify(head);
      this.heads.set(key, h);
    }
    return h;
  }

  /** pm.environment and pm.globals as a script that ran cleanly left them (the others start empty every run). */
  private keepScopes(c: ScriptChanges): void {
    if (c.scopes.environment) this.environmentJson = JSON.stringify(c.scopes.environment);
    if (c.scopes.globals) this.globalsJson = JSON.stringify(c.scopes.globals);
  }
}

const roundMs = (ms: number) => Math.round(ms * 1000) / 1000;

/** The errors of a run that did not end normally (timeout, out of memory, crash): its effects are not applied. */
const failed = (failure: string | null): ScriptOutput["errors"] => [{ message: failure ?? "Script failed", stack: null, line: null }];

/**
 * The request a script answered (only what it changed), checked so that it can go on the wire, over the one it was
 * given (the flow's, or what the previous rule's script answered, checked then): what the script left as it was is
 * not checked again, and its header list is the same object.
 */
function checkRequest(d: Partial<ScriptRequest>, before: ScriptRequest): ScriptRequest {
  let method = before.method;
  if (d.method !== undefined) {
    method = String(d.method).toUpperCase();
    if (!METHOD.test(method)) throw new Error(`'${d.method}' is not an HTTP method`);
  }
  let urlText = before.url;
  if (d.url !== undefined && String(d.url) !== before.url) {
    urlText = String(d.url);
    let url: URL;
    try {
      url = new URL(urlText);
    } catch {
      throw new Error(`'${d.url}' is not an absolute URL`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error(`only http and https URLs can be sent, not ${url.protocol}`);
  }
  const headers = d.headers === undefined ? before.headers : checkedHeaders(d.headers, before.headers);
  return { method, url: urlText, headers, body: d.body === undefined ? before.body : String(d.body) };
}

function checkResponse(d: NonNullable<ScriptChanges["response"]>, before: ScriptResponse): ScriptResponse {
  let status = before.status;
  if (d.status !== undefined) {
    status = Number(d.status);
    if (!Number.isInteger(status) || status < 100 || status > 999) throw new Error(`'${d.status}' is not a status code`);
  }
  let statusText = before.statusText;
  if (d.statusText !== undefined) {
    statusText = String(d.statusText);
    if (/[\x00-\x08\x0a-\x1f\x7f]/.test(statusText)) throw new Error("the reason phrase has control characters");
  }
  const headers = d.headers === undefined ? before.headers : checkedHeaders(d.headers, before.headers);
  return { status, statusText, headers, body: d.body === undefined ? before.body : String(d.body) };
}

/** Puts what the scripts changed into the flow; what they left alone stays as received (bytes included). */
function applyRequest(flow: Flow, before: ScriptRequest, after: ScriptRequest, binary: boolean): void {
  const r = flow.request;
  r.method = after.method;
  if (after.headers !== before.headers) r.headers = after.headers;
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
  if (after.headers !== before.headers) res.headers = after.headers;
  if (after.body !== before.body || (binary && after.body !== "")) {
    res.body = enc.encode(after.body);
    removeHeader(res.headers, "content-encoding");
  }
}
