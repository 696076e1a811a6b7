import type { HeaderList } from "../../core/http1/types.ts";
import type { ProxyContext } from "../../core/proxy/context.ts";
import { sendVirtual } from "../../core/proxy/virtual-client.ts";
import type { ClientInfo, Flow } from "../../pipeline/flow.ts";
import { decodeBodyBytes } from "../../store/body-decode.ts";
import type { Auth, Collection, ComposeRequest, Folder, KeyValue, SendBody, SendResult } from "./schema.ts";
import type { CollectionStore } from "./store.ts";
import { buildScopes, Resolver } from "./variables.ts";

/** The client label of requests sent by POST /compose/send (they go through the proxy and are captured). */
export const COMPOSE_CLIENT_LABEL = "tapwire-compose";

export interface SendDeps {
  store: CollectionStore;
  proxy: () => ProxyContext;
  onStored: (listener: (flow: Flow, id: number) => void) => () => void;
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

/**
 * Resolves one request of a collection: `{{variables}}` in URL, query params, headers, body and auth; headers
 * from the collection's defaultHeaders, then the enclosing folders' (outermost first), then the request's, each
 * later one replacing an earlier one of the same name; enabled query params appended (each key and value encoded
 * once); the auth header (or apiKey query parameter) last; Content-Type from `contentType` unless a header set it.
 */
export function prepareRequest(c: Collection, folders: Folder[], r: ComposeRequest, resolver: Resolver): PreparedRequest {
  const res = (s: string) => resolver.resolve(s);
  let url = res(r.url).trim();
  const query: string[] = [];
  for (const p of r.queryParams) if (p.enabled) query.push(`${encodeURIComponent(res(p.key))}=${encodeURIComponent(res(p.value))}`);

  const headers: [string, string][] = [];
  const layers: KeyValue[][] = [c.defaultHeaders, ...folders.map((f) => f.headers), r.headers];
  for (const layer of layers) for (const h of layer) if (h.enabled && h.key.trim() !== "") setHeader(headers, res(h.key), res(h.value));

  const auth = effectiveAuth(c, folders, r);
  if (auth?.type === "bearer") setHeader(headers, "Authorization", `Bearer ${res(auth.token)}`);
  else if (auth?.type === "basic") setHeader(headers, "Authorization", `Basic ${Buffer.from(`${res(auth.username)}:${res(auth.password)}`, "utf8").toString("base64")}`);
  else if (auth?.type === "apiKey") {
    if (auth.in === "query") query.push(`${encodeURIComponent(res(auth.key))}=${encodeURIComponent(res(auth.value))}`);
    else setHeader(headers, res(auth.key), res(auth.value));
  }

  const body = res(r.body);
  if (r.contentType !== "" && !headers.some(([n]) => n.toLowerCase() === "content-type")) headers.push(["Content-Type", r.contentType]);

  if (query.length) {
    const hash = url.indexOf("#");
    const frag = hash >= 0 ? url.slice(hash) : "";
    const base = hash >= 0 ? url.slice(0, hash) : url;
    const sep = !base.includes("?") ? "?" : base.endsWith("?") || base.endsWith("&") ? "" : "&";
    url = `${base}${sep}${query.join("&")}${frag}`;
  }
  // like Postman, a URL without a scheme is sent over http
  if (url !== "" && !/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) url = `http://${url}`;
  return { method: r.method.toUpperCase(), url, headers, body, timeout: r.timeout, unresolved: resolver.unresolved };
}

/**
 * POST /compose/send: resolves the request and sends it through tapwire's own pipeline from an in-process client
 * labelled "tapwire-compose" (so rules apply and it is captured), with the request's timeout. A request that
 * cannot be sent (bad URL, connection failure, timeout) is answered with `error` set rather than thrown.
 */
export async function sendComposeRequest(deps: SendDeps, body: SendBody): Promise<SendResult> {
  const c = deps.store.get(body.collection_id);
  const loc = deps.store.findRequest(c, body.request_id);
  const env = body.environment ? deps.store.environment(c, body.environment) : null;
  const resolver = new Resolver(buildScopes(body.variables, env, c));
  const p = prepareRequest(c, loc.folders, loc.request, resolver);

  const result: SendResult = {
    status: null,
    status_text: null,
    headers: [],
    body: "",
    body_encoding: "utf8",
    size_bytes: 0,
    duration_ms: 0,
    traffic_id: null,
    resolved_url: p.url,
    unresolved: p.unresolved,
    tests: [],
    console: [],
    error: null,
  };

  let url: URL;
  try {
    url = new URL(p.url);
  } catch {
    result.error = `'${p.url}' is not a valid URL${p.unresolved.length ? ` (unresolved variables: ${p.unresolved.join(", ")})` : ""}`;
    return result;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    result.error = `only http and https URLs can be sent, not ${url.protocol}`;
    return result;
  }
  // a host made of an unresolved reference would only become a DNS failure: say what is missing instead
  if (/[{}]/.test(decodeURIComponent(url.hostname))) {
    result.error = `the URL's host '${url.hostname}' is not resolved${p.unresolved.length ? ` (unresolved variables: ${p.unresolved.join(", ")})` : ""}`;
    return result;
  }
  result.resolved_url = url.href;
  const scheme = url.protocol === "https:" ? "https" : "http";
  const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
  const port = url.port ? Number(url.port) : scheme === "https" ? 443 : 80;
  const headers: HeaderList = [];
  if (!p.headers.some(([n]) => n.toLowerCase() === "host")) headers.push(["Host", url.host]);
  headers.push(...p.headers);
  const bytes = p.body ? new TextEncoder().encode(p.body) : null;

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
    const res = await sendVirtual(deps.proxy(), { method: p.method, scheme, host, port, path: url.pathname + url.search, headers, body: bytes }, client, p.timeout);
    result.duration_ms = Math.round(performance.now() - t0);
    // capture runs right after the response's last byte: let its hook finish
    await new Promise((r) => setImmediate(r));
    const failed = (flow as Flow | null)?.error;
    if (res.status === 502 && (failed || isProxyFailure(res.body))) {
      result.error = failed ?? new TextDecoder().decode(res.body).replace(/^tapwire: /, "").trim();
      return result;
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
    return result;
  } catch (e) {
    result.duration_ms = Math.round(performance.now() - t0);
    await new Promise((r) => setImmediate(r));
    result.error = (e as Error).message;
    return result;
  } finally {
    stop();
  }
}

/** The 502 tapwire itself answers when the upstream cannot be reached (text starting "tapwire: "). */
function isProxyFailure(body: Uint8Array): boolean {
  return new TextDecoder().decode(body.subarray(0, 9)) === "tapwire: ";
}
