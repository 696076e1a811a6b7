import type { HeaderList } from "../../core/http1/types.ts";
import type { ProxyContext } from "../../core/proxy/context.ts";
import { sendVirtual, type VirtualRequest } from "../../core/proxy/virtual-client.ts";
import type { ClientInfo, Flow } from "../../pipeline/flow.ts";
import { decodeBodyBytes } from "../../store/body-decode.ts";
import type { ScriptRequest } from "../scripts/engine/types.ts";
import type { ScriptRunner } from "../scripts/runner.ts";
import type { Auth, Collection, ComposeRequest, Folder, KeyValue, SendBody, SendResult } from "./schema.ts";
import { runScriptChain, scriptChain, SecretMask } from "./scripts.ts";
import type { CollectionStore } from "./store.ts";
import { initialScopes, Resolver, scopeMaps, valueText } from "./variables.ts";

/** The client label of requests sent by POST /compose/send (they go through the proxy and are captured). */
export const COMPOSE_CLIENT_LABEL = "tapwire-compose";

export interface SendDeps {
  store: CollectionStore;
  proxy: () => ProxyContext;
  onStored: (listener: (flow: Flow, id: number) => void) => () => void;
  /** The process's script runner (the scripts feature's): pre-request and test scripts run on it. */
  scripts: () => ScriptRunner;
}

/** The request as it goes out, after variables, inheritance and auth. */
export interface PreparedRequest {
  method: string;
  url: string;
  headers: [string, string][];
  body: string;
  timeout: number;
  unresolved: string[];
}

/** The auth that applies: the request's, else the nearest folder's (innermost first), else the collection's. */
export function effectiveAuth(c: Collection, folders: Folder[], r: ComposeRequest): Auth | null {
  if (r.auth) return r.auth;
  for (let i = folders.length - 1; i >= 0; i--) if (folders[i]!.auth) return folders[i]!.auth;
  return c.defaultAuth;
}

function setHeader(headers: [string, string][], name: string, value: string): void {
  const lower = name.toLowerCase();
  for (let i = headers.length - 1; i >= 0; i--) if (headers[i]![0].toLowerCase() === lower) headers.splice(i, 1);
  headers.push([name, value]);
}

/** Headers from the collection's defaultHeaders, the folders' (outermost first), then the request's. */
function layeredHeaders(c: Collection, folders: Folder[], r: ComposeRequest, res: (s: string) => string): [string, string][] {
  const headers: [string, string][] = [];
  const layers: KeyValue[][] = [c.defaultHeaders, ...folders.map((f) => f.headers), r.headers];
  for (const layer of layers) for (const h of layer) if (h.enabled && h.key.trim() !== "") setHeader(headers, res(h.key), res(h.value));
  return headers;
}

/**
 * The request as pre-request scripts see it (pm.request): nothing resolved yet (variables a script sets still
 * apply), enabled query params appended as written, headers merged as for sending, Content-Type from
 * `contentType`; the auth is not in it (it is applied after the scripts, as Postman does).
 */
export function templateRequest(c: Collection, folders: Folder[], r: ComposeRequest): ScriptRequest {
  const headers = layeredHeaders(c, folders, r, (s) => s);
  if (r.contentType !== "" && !headers.some(([n]) => n.toLowerCase() === "content-type")) headers.push(["Content-Type", r.contentType]);
  const query = r.queryParams.filter((p) => p.enabled).map((p) => `${p.key}=${p.value}`);
  return { method: r.method, url: appendQuery(r.url.trim(), query), headers, body: r.body };
}

function appendQuery(url: string, query: string[]): string {
  if (!query.length) return url;
  const hash = url.indexOf("#");
  const frag = hash >= 0 ? url.slice(hash) : "";
  const base = hash >= 0 ? url.slice(0, hash) : url;
  const sep = !base.includes("?") ? "?" : base.endsWith("?") || base.endsWith("&") ? "" : "&";
  return `${base}${sep}${query.join("&")}${frag}`;
}

/** What the pre-request scripts did to the template: used where they changed it, the structured request elsewhere. */
export interface EditedRequest {
  template: ScriptRequest;
  current: ScriptRequest;
}

/**
 * Resolves one request of a collection: `{{variables}}` in URL, query params, headers, body and auth; headers
 * from the collection's defaultHeaders, then the enclosing folders' (outermost first), then the request's, each
 * later one replacing an earlier one of the same name; enabled query params appended (each key and value encoded
 * once); the auth header (or apiKey query parameter) last; Content-Type from `contentType` unless a header set it.
 * With `edited` (pre-request scripts ran): the method, body, URL and headers as the scripts left them, the URL and
 * the headers only when a script changed them (a changed URL is resolved as a whole, its query as written).
 */
export function prepareRequest(c: Collection, folders: Folder[], r: ComposeRequest, resolver: Resolver, edited?: EditedRequest): PreparedRequest {
  const res = (s: string) => resolver.resolve(s);
  const urlEdited = edited !== undefined && edited.current.url !== edited.template.url;
  const headersEdited = edited !== undefined && JSON.stringify(edited.current.headers) !== JSON.stringify(edited.template.headers);
  let url = res(urlEdited ? edited.current.url : r.url).trim();
  const query: string[] = [];
  if (!urlEdited) for (const p of r.queryParams) if (p.enabled) query.push(`${encodeURIComponent(res(p.key))}=${encodeURIComponent(res(p.value))}`);

  const headers: [string, string][] = headersEdited
    ? edited.current.headers.filter(([n]) => n.trim() !== "").map(([n, v]) => [res(n), res(v)])
    : layeredHeaders(c, folders, r, res);

  const auth = effectiveAuth(c, folders, r);
  if (auth?.type === "bearer") setHeader(headers, "Authorization", `Bearer ${res(auth.token)}`);
  else if (auth?.type === "basic") setHeader(headers, "Authorization", `Basic ${Buffer.from(`${res(auth.username)}:${res(auth.password)}`, "utf8").toString("base64")}`);
  else if (auth?.type === "apiKey") {
    if (auth.in === "query") query.push(`${encodeURIComponent(res(auth.key))}=${encodeURIComponent(res(auth.value))}`);
    else setHeader(headers, res(auth.key), res(auth.value));
  }

  const body = res(edited ? edited.current.body : r.body);
  // a script that removed the Content-Type meant it
  if (!headersEdited && r.contentType !== "" && !headers.some(([n]) => n.toLowerCase() === "content-type")) headers.push(["Content-Type", r.contentType]);

  url = appendQuery(url, query);
  // like Postman, a URL without a scheme is sent over http
  if (url !== "" && !/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) url = `http://${url}`;
  const method = (edited ? edited.current.method : r.method).toUpperCase();
  return { method, url, headers, body, timeout: r.timeout, unresolved: resolver.unresolved };
}

/**
 * POST /compose/send: runs the pre-request scripts (collection, folders outermost first, request), resolves the
 * request with the variables as the scripts left them, sends it through tapwire's own pipeline from an in-process
 * client labelled "tapwire-compose" (so rules apply and it is captured) with the request's timeout, then runs the
 * test scripts in the same order on the response. A pre-request script that fails stops the send (as in Postman); a
 * request that cannot be sent (bad URL, connection failure, timeout) is answered with `error` set rather than
 * thrown. Script changes to pm.environment and pm.collectionVariables are kept in the store's session.
 */
export async function sendComposeRequest(deps: SendDeps, body: SendBody): Promise<SendResult> {
  const c = deps.store.get(body.collection_id);
  const loc = deps.store.findRequest(c, body.request_id);
  const env = body.environment ? deps.store.environment(c, body.environment) : null;
  const r = loc.request;
  const scopes = initialScopes(body.variables, env, { variables: deps.store.collectionVariables(c) }, body.data);
  const before = { environment: { ...scopes.environment }, collectionVariables: { ...scopes.collectionVariables } };
  const mask = new SecretMask(env);
  const result: SendResult = {
    status: null,
    status_text: null,
    headers: [],
    body: "",
    body_encoding: "utf8",
    size_bytes: 0,
    duration_ms: 0,
    traffic_id: null,
    resolved_url: "",
    unresolved: [],
    tests: [],
    console: [],
    errors: [],
    error: null,
  };
  const info = {
    requestName: r.name,
    requestId: r.id,
    environmentName: env?.name ?? "",
    iteration: body.iteration?.index,
    iterationCount: body.iteration?.count,
  };

  try {
    let edited: EditedRequest | undefined;
    const pre = scriptChain(c, loc.folders, r, "prerequest");
    if (pre.length) {
      const template = templateRequest(c, loc.folders, r);
      const ran = await runScriptChain(deps.scripts(), pre, "prerequest", { request: template, response: null, scopes, info, result, stopOnError: true });
      edited = { template, current: ran.request };
    }
    const p = prepareRequest(c, loc.folders, r, new Resolver(scopeMaps(scopes)), edited);
    result.resolved_url = p.url;
    result.unresolved = p.unresolved;
    if (result.errors.length) {
      const first = result.errors[0]!;
      result.error = `the pre-request script of ${first.source} failed, so the request was not sent: ${first.message}`;
      return result;
    }
    const sent = await transmit(deps, p, result);
    if (!sent) return result;
    const tests = scriptChain(c, loc.folders, r, "test");
    if (tests.length) {
      const response = {
        status: result.status!,
        statusText: result.status_text ?? "",
        headers: result.headers,
        body: result.body_encoding === "utf8" ? result.body : "",
        responseTime: result.duration_ms,
      };
      await runScriptChain(deps.scripts(), tests, "test", { request: sent, response, scopes, info, result, stopOnError: false });
    }
    return result;
  } finally {
    commitScopes(deps.store, c.id, env?.name ?? null, before, scopes, mask);
    mask.apply(result);
  }
}

/** Keeps what scripts changed in pm.environment and pm.collectionVariables for the session (nothing is written). */
function commitScopes(
  store: CollectionStore,
  id: string,
  envName: string | null,
  before: { environment: Record<string, unknown>; collectionVariables: Record<string, unknown> },
  after: { environment: Record<string, unknown>; collectionVariables: Record<string, unknown> },
  mask: SecretMask,
): void {
  const changes = (a: Record<string, unknown>, b: Record<string, unknown>) => {
    const out: [string, string | null][] = [];
    for (const [k, v] of Object.entries(b)) if (!Object.hasOwn(a, k) || valueText(a[k]) !== valueText(v) || typeof a[k] !== typeof v) out.push([k, valueText(v)]);
    for (const k of Object.keys(a)) if (!Object.hasOwn(b, k)) out.push([k, null]);
    return out;
  };
  if (envName !== null) {
    for (const [k, v] of changes(before.environment, after.environment)) {
      store.setSessionVariable(id, envName, k, v);
      mask.setValue(k, v);
    }
  }
  for (const [k, v] of changes(before.collectionVariables, after.collectionVariables)) store.setSessionCollectionVariable(id, k, v);
}

/**
 * A prepared request as sendVirtual takes it (Host added unless given), with its parsed URL. Throws an Error
 * saying what is wrong when the URL is not an http(s) URL or its host is an unresolved {{variable}} (which would
 * only become a DNS failure). Shared by compose's send and the flow runner.
 */
export function virtualRequest(p: PreparedRequest): { url: URL; request: VirtualRequest } {
  const unresolved = p.unresolved.length ? ` (unresolved variables: ${p.unresolved.join(", ")})` : "";
  let url: URL;
  try {
    url = new URL(p.url);
  } catch {
    throw new Error(`'${p.url}' is not a valid URL${unresolved}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error(`only http and https URLs can be sent, not ${url.protocol}`);
  if (/[{}]/.test(decodeURIComponent(url.hostname))) throw new Error(`the URL's host '${url.hostname}' is not resolved${unresolved}`);
  const scheme = url.protocol === "https:" ? "https" : "http";
  const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
  const port = url.port ? Number(url.port) : scheme === "https" ? 443 : 80;
  const headers: HeaderList = [];
  if (!p.headers.some(([n]) => n.toLowerCase() === "host")) headers.push(["Host", url.host]);
  headers.push(...p.headers);
  const body = p.body ? new TextEncoder().encode(p.body) : null;
  return { url, request: { method: p.method, scheme, host, port, path: url.pathname + url.search, headers, body } };
}

/**
 * Sends the prepared request through the pipeline and fills `result`; answers the request as it went out (for
 * the test scripts), or null when it could not be sent (`result.error` says why).
 */
async function transmit(deps: SendDeps, p: PreparedRequest, result: SendResult): Promise<ScriptRequest | null> {
  let url: URL;
  let request: VirtualRequest;
  try {
    ({ url, request } = virtualRequest(p));
  } catch (e) {
    result.error = (e as Error).message;
    return null;
  }
  result.resolved_url = url.href;

  const client: ClientInfo = { addr: "127.0.0.1", port: 0, label: Promise.resolve(COMPOSE_CLIENT_LABEL), resolvedLabel: COMPOSE_CLIENT_LABEL };
  let flow: Flow | null = null;
  const stop = deps.onStored((f, id) => {
    if (f.client === client) {
      flow = f;
      result.traffic_id = id;
    }
  });
  const t0 = performance.now();
  try {
    const res = await sendVirtual(deps.proxy(), request, client, p.timeout);
    result.duration_ms = Math.round(performance.now() - t0);
    // capture runs right after the response's last byte: let its hook finish
    await new Promise((r) => setImmediate(r));
    const failed = (flow as Flow | null)?.error;
    if (res.status === 502 && (failed || isProxyFailure(res.body))) {
      result.error = failed ?? new TextDecoder().decode(res.body).replace(/^tapwire: /, "").trim();
      return null;
    }
    result.status = res.status;
    result.status_text = res.reason;
    result.headers = res.headers.map(([n, v]) => [n, v] as [string, string]);
    result.size_bytes = res.body.length;
    const d = decodeBodyBytes(res.body, res.headers, false);
    if (d.encoding === "utf8") result.body = d.text;
    else {
      result.body = Buffer.from(d.bytes).toString("base64");
      result.body_encoding = "base64";
    }
    return { method: p.method, url: url.href, headers: request.headers, body: p.body };
  } catch (e) {
    result.duration_ms = Math.round(performance.now() - t0);
    await new Promise((r) => setImmediate(r));
    result.error = (e as Error).message;
    return null;
  } finally {
    stop();
  }
}

/** The 502 tapwire itself answers when the upstream cannot be reached (text starting "tapwire: "). */
function isProxyFailure(body: Uint8Array): boolean {
  return new TextDecoder().decode(body.subarray(0, 9)) === "tapwire: ";
}
