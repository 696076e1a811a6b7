import { badRequest } from "../../api/errors.ts";
import type { CollectionStore } from "./store.ts";
import type { Auth, Collection, CollectionInput, ComposeRequest, ComposeRequestInput, Environment, EnvironmentInput, Folder, FolderInput, KeyValue } from "./schema.ts";

/**
 * Postman import and export (extension, docs/api.md "Compose", "Postman import and export"). Pure functions:
 *   - a Postman collection v2.0 or v2.1 (told apart by `info.schema`) → the input of a new collection, plus warnings
 *     for what our layout cannot hold;
 *   - a Postman environment file → the input of one environment;
 *   - our collection → a Postman collection v2.1.0, and one environment → a Postman environment file.
 *
 * Mapping choices (our layout has no structured body and no per-folder variables):
 *   - an item with `item` is a folder; the order of requests and folders inside one container is kept per kind, but
 *     requests and sub-folders are not interleaved (ours keeps them in two lists);
 *   - pre-request and test scripts of the collection, folders and requests stay where they are (send runs them in
 *     Postman's order: collection, folders outermost first, request);
 *   - the URL is kept as Postman's `raw` (its query string included, as Postman sends it); disabled query
 *     parameters become disabled `queryParams` rows, so they survive a round trip;
 *   - urlencoded bodies become `a=1&b=2` text (each part percent-encoded, `{{references}}` left as they are) with
 *     contentType `application/x-www-form-urlencoded`; form-data text fields become a multipart body with the fixed
 *     boundary FORM_BOUNDARY; file fields and disabled fields are left out (warning);
 *   - raw bodies keep their text; `options.raw.language` gives the contentType (json, xml, html, javascript, text);
 *     GraphQL bodies become the JSON `{query, variables}` Postman sends.
 */

export const POSTMAN_V21_SCHEMA = "https://schema.getpostman.com/json/collection/v2.1.0/collection.json";
export const FORM_BOUNDARY = "----tapwire-form-boundary";

export type PostmanKind = "collection-v2.0" | "collection-v2.1" | "environment";

type Obj = Record<string, unknown>;
const isObj = (x: unknown): x is Obj => typeof x === "object" && x !== null && !Array.isArray(x);
const str = (x: unknown): string => (x === undefined || x === null ? "" : typeof x === "string" ? x : typeof x === "object" ? JSON.stringify(x) : String(x));

/** What a JSON document is: a Postman collection v2.0/v2.1 or environment; anything else is a 400. */
export function detectPostman(doc: unknown): PostmanKind {
  if (!isObj(doc)) throw badRequest("body is not a Postman collection or environment: expected a JSON object");
  if (isObj(doc.info)) {
    const schema = str(doc.info.schema);
    const m = /\/collection\/v(\d+)\.(\d+)\.\d+/.exec(schema);
    if (!m) throw badRequest(`body is not a Postman collection v2.0 or v2.1: info.schema is ${schema ? `'${schema}'` : "missing"}`);
    if (m[1] === "2" && m[2] === "0") return "collection-v2.0";
    if (m[1] === "2" && m[2] === "1") return "collection-v2.1";
    throw badRequest(`Postman collection format v${m[1]}.${m[2]} is not supported (only v2.0 and v2.1; re-export it from Postman as v2.1)`);
  }
  if (typeof doc.name === "string" && Array.isArray(doc.values)) return "environment";
  if (Array.isArray(doc.requests) && typeof doc.order !== "undefined") throw badRequest("Postman collection format v1 is not supported (only v2.0 and v2.1; re-export it from Postman as v2.1)");
  throw badRequest("body is not a Postman collection (no 'info' with a schema) or a Postman environment ('name' and 'values')");
}

// ---- import ------------------------------------------------------------------------------------------------------

export interface ImportedCollection {
  input: CollectionInput;
  warnings: string[];
}

interface Scripts {
  prerequest: string;
  test: string;
}

const joinScripts = (...parts: string[]) => parts.filter((p) => p.trim() !== "").join("\n");

/** A Postman collection v2.0 or v2.1 → the input of a new collection. */
export function importPostmanCollection(doc: unknown): ImportedCollection {
  const kind = detectPostman(doc);
  if (kind === "environment") throw badRequest("body is a Postman environment, not a collection");
  const d = doc as Obj;
  const info = d.info as Obj;
  const warnings: string[] = [];
  const name = str(info.name) || "Imported collection";
  if (str(description(info.description)) !== "") warnings.push("the collection's description is not imported (collections have no description here)");
  const defaultAuth = importAuth(d.auth, "the collection", warnings);
  const variables = importVariables(d.variable, "the collection", warnings);
  const scripts = importEvents(d.event, "the collection", warnings);
  const items = Array.isArray(d.item) ? d.item : [];
  const { requests, folders } = importItems(items, name, warnings);
  return {
    input: { name, requests, folders, variables, defaultAuth, scripts },
    warnings,
  };
}

function importItems(items: unknown[], where: string, warnings: string[]): { requests: ComposeRequestInput[]; folders: FolderInput[] } {
  const requests: ComposeRequestInput[] = [];
  const folders: FolderInput[] = [];
  items.forEach((it, i) => {
    if (!isObj(it)) {
      warnings.push(`${where}: item ${i} is not an object and was skipped`);
      return;
    }
    if (Array.isArray(it.item)) folders.push(importFolder(it, where, warnings));
    else requests.push(importRequest(it, where, warnings));
  });
  return { requests, folders };
}

function importFolder(f: Obj, parent: string, warnings: string[]): FolderInput {
  const name = str(f.name) || "Folder";
  const where = `folder '${name}'`;
  if (description(f.description) !== "") warnings.push(`${where}: its description is not imported (folders have no description here)`);
  if (Array.isArray(f.variable) && f.variable.length) warnings.push(`${where}: its ${f.variable.length} variable(s) are not imported (folders have no variables here)`);
  const scripts = importEvents(f.event, where, warnings);
  const { requests, folders } = importItems(f.item as unknown[], `${parent} / ${name}`, warnings);
  return { name, requests, folders, auth: importAuth(f.auth, where, warnings), headers: [], scripts };
}

function importRequest(it: Obj, parent: string, warnings: string[]): ComposeRequestInput {
  const name = str(it.name) || "Request";
  const where = `request '${parent} / ${name}'`;
  const scripts = importEvents(it.event, where, warnings);
  if (Array.isArray(it.response) && it.response.length) warnings.push(`${where}: its ${it.response.length} saved response(s) are not imported`);
  // v2.0 allows the request to be a bare URL string
  const r: Obj = typeof it.request === "string" ? { url: it.request } : isObj(it.request) ? it.request : {};
  const { url, queryParams } = importUrl(r.url);
  const headers = importHeaders(r.header, where, warnings);
  const { body, contentType } = importBody(r.body, where, warnings);
  return {
    name,
    method: str(r.method) || "GET",
    url,
    headers,
    queryParams,
    body,
    contentType,
    auth: importAuth(r.auth, where, warnings),
    scripts,
    description: description(r.description) || description(it.description),
  };
}

function description(d: unknown): string {
  if (isObj(d)) return str(d.content);
  return str(d);
}

/** URL string, or object with raw or host/path/query parts. Enabled query stays in the URL; disabled → queryParams. */
function importUrl(u: unknown): { url: string; queryParams: KeyValue[] } {
  if (typeof u === "string") return { url: u, queryParams: [] };
  if (!isObj(u)) return { url: "", queryParams: [] };
  const query = Array.isArray(u.query) ? u.query.filter(isObj) : [];
  const disabled = query.filter((q) => q.disabled === true).map((q) => ({ key: str(q.key), value: str(q.value), enabled: false }));
  const enabled = query.filter((q) => q.disabled !== true);
  let url: string;
  if (typeof u.raw === "string" && u.raw !== "") {
    url = u.raw;
    if (!url.includes("?") && enabled.length) url = `${url}?${queryString(enabled)}`;
  } else {
    const host = Array.isArray(u.host) ? u.host.map(str).join(".") : str(u.host);
    const path = Array.isArray(u.path) ? u.path.map((p) => (isObj(p) ? str(p.value) : str(p))).join("/") : str(u.path).replace(/^\//, "");
    url = `${u.protocol ? `${str(u.protocol)}://` : ""}${host}${u.port ? `:${str(u.port)}` : ""}${path ? `/${path}` : ""}`;
    if (enabled.length) url += `?${queryString(enabled)}`;
    if (u.hash) url += `#${str(u.hash)}`;
  }
  return { url, queryParams: disabled };
}

const queryString = (q: Obj[]) => q.map((x) => (x.value === null || x.value === undefined ? str(x.key) : `${str(x.key)}=${str(x.value)}`)).join("&");

function importHeaders(h: unknown, where: string, warnings: string[]): KeyValue[] {
  // v2.0 allows headers as one "Name: value\n..." string
  if (typeof h === "string")
    return h
      .split(/\r?\n/)
      .filter((l) => l.includes(":"))
      .map((l) => ({ key: l.slice(0, l.indexOf(":")).trim(), value: l.slice(l.indexOf(":") + 1).trim(), enabled: true }));
  if (!Array.isArray(h)) return [];
  const out: KeyValue[] = [];
  for (const x of h) {
    if (!isObj(x) || str(x.key) === "") {
      warnings.push(`${where}: a header without a name was skipped`);
      continue;
    }
    out.push({ key: str(x.key), value: str(x.value), enabled: x.disabled !== true });
  }
  return out;
}

const LANGUAGE_TYPES: Record<string, string> = {
  json: "application/json",
  xml: "application/xml",
  html: "text/html",
  javascript: "application/javascript",
  text: "text/plain",
};

function importBody(b: unknown, where: string, warnings: string[]): { body: string; contentType: string } {
  if (!isObj(b) || !b.mode) return { body: "", contentType: "" };
  if (b.disabled === true) {
    warnings.push(`${where}: its body is disabled and was not imported`);
    return { body: "", contentType: "" };
  }
  switch (b.mode) {
    case "raw": {
      const opts = isObj(b.options) && isObj(b.options.raw) ? b.options.raw : {};
      return { body: str(b.raw), contentType: LANGUAGE_TYPES[str(opts.language)] ?? "" };
    }
    case "urlencoded": {
      const rows = (Array.isArray(b.urlencoded) ? b.urlencoded : []).filter(isObj);
      const off = rows.filter((r) => r.disabled === true);
      if (off.length) warnings.push(`${where}: ${off.length} disabled urlencoded field(s) left out (bodies are text here)`);
      const body = rows
        .filter((r) => r.disabled !== true)
        .map((r) => `${formEncode(str(r.key))}=${formEncode(str(r.value))}`)
        .join("&");
      return { body, contentType: "application/x-www-form-urlencoded" };
    }
    case "formdata": {
      const rows = (Array.isArray(b.formdata) ? b.formdata : []).filter(isObj);
      const parts: FormPart[] = [];
      for (const r of rows) {
        if (r.type === "file") warnings.push(`${where}: form-data file field '${str(r.key)}' left out (files are not imported)`);
        else if (r.disabled === true) warnings.push(`${where}: disabled form-data field '${str(r.key)}' left out (bodies are text here)`);
        else parts.push({ name: str(r.key), value: str(r.value), contentType: str(r.contentType) });
      }
      return { body: buildMultipart(parts), contentType: `multipart/form-data; boundary=${FORM_BOUNDARY}` };
    }
    case "graphql": {
      const g = isObj(b.graphql) ? b.graphql : {};
      let variables: unknown = g.variables;
      if (typeof variables === "string") {
        try {
          variables = variables.trim() === "" ? undefined : JSON.parse(variables);
        } catch {
          warnings.push(`${where}: GraphQL variables are not valid JSON and were left out`);
          variables = undefined;
        }
      }
      return { body: JSON.stringify(variables === undefined ? { query: str(g.query) } : { query: str(g.query), variables }), contentType: "application/json" };
    }
    default:
      warnings.push(`${where}: body mode '${str(b.mode)}' is not imported`);
      return { body: "", contentType: "" };
  }
}

/** Percent-encodes a form value, leaving `{{references}}` as they are (they are resolved at send time). */
function formEncode(s: string): string {
  return s
    .split(/(\{\{[^{}]+\}\})/)
    .map((p, i) => (i % 2 === 1 ? p : encodeURIComponent(p)))
    .join("");
}

function formDecode(s: string): string {
  try {
    return decodeURIComponent(s.replace(/\+/g, " "));
  } catch {
    return s;
  }
}

interface FormPart {
  name: string;
  value: string;
  contentType: string;
}

function buildMultipart(parts: FormPart[]): string {
  let out = "";
  for (const p of parts) {
    out += `--${FORM_BOUNDARY}\r\nContent-Disposition: form-data; name="${p.name.replace(/"/g, "%22")}"\r\n`;
    if (p.contentType) out += `Content-Type: ${p.contentType}\r\n`;
    out += `\r\n${p.value}\r\n`;
  }
  return `${out}--${FORM_BOUNDARY}--\r\n`;
}

function parseMultipart(body: string, boundary: string): FormPart[] | null {
  const delim = `--${boundary}`;
  const end = body.indexOf(`${delim}--`);
  if (!body.startsWith(delim) || end < 0) return null;
  const parts: FormPart[] = [];
  for (const chunk of body.slice(delim.length, end).split(`\r\n${delim}`)) {
    const sep = chunk.indexOf("\r\n\r\n");
    if (sep < 0) return null;
    const head = chunk.slice(0, sep);
    let value = chunk.slice(sep + 4);
    if (value.endsWith("\r\n")) value = value.slice(0, -2);
    const name = /name="([^"]*)"/.exec(head)?.[1];
    if (name === undefined || /filename=/.test(head)) return null;
    const ct = /\r\nContent-Type:\s*([^\r\n]*)/i.exec(head)?.[1] ?? "";
    parts.push({ name: name.replace(/%22/g, '"'), value, contentType: ct });
  }
  return parts;
}

/** Postman auth (v2.1: arrays of {key, value}; v2.0: an object) → ours; unsupported types → null and a warning. */
function importAuth(a: unknown, where: string, warnings: string[]): Auth | null {
  if (!isObj(a) || !a.type) return null;
  const type = str(a.type);
  const attr = (k: string): string => {
    const v = a[type];
    if (Array.isArray(v)) return str(v.find((x) => isObj(x) && x.key === k)?.value);
    if (isObj(v)) return str(v[k]);
    return "";
  };
  switch (type) {
    case "noauth":
      return { type: "none" };
    case "inherit":
      return null;
    case "bearer":
      return { type: "bearer", token: attr("token") };
    case "basic":
      return { type: "basic", username: attr("username"), password: attr("password") };
    case "apikey": {
      const key = attr("key");
      if (key === "") {
        warnings.push(`${where}: API key auth without a key name was not imported`);
        return null;
      }
      return { type: "apiKey", key, value: attr("value"), in: attr("in") === "query" ? "query" : "header" };
    }
    default:
      warnings.push(`${where}: auth type '${type}' is not supported and was not imported (it inherits instead)`);
      return null;
  }
}

function importVariables(v: unknown, where: string, warnings: string[]): KeyValue[] {
  if (!Array.isArray(v)) return [];
  const out: KeyValue[] = [];
  for (const x of v) {
    const key = isObj(x) ? str(x.key ?? x.id) : "";
    if (key === "") {
      warnings.push(`${where}: a variable without a key was skipped`);
      continue;
    }
    out.push({ key, value: str((x as Obj).value), enabled: (x as Obj).disabled !== true });
  }
  return out;
}

/** `event` → {prerequest, test}: enabled events' `script.exec` lines joined with \n (several events joined too). */
function importEvents(e: unknown, where: string, warnings: string[]): Scripts {
  const out: Scripts = { prerequest: "", test: "" };
  if (!Array.isArray(e)) return out;
  for (const ev of e) {
    if (!isObj(ev)) continue;
    const listen = str(ev.listen);
    if (listen !== "prerequest" && listen !== "test") {
      warnings.push(`${where}: '${listen}' event script not imported`);
      continue;
    }
    const script = isObj(ev.script) ? ev.script : typeof ev.script === "string" ? { exec: ev.script } : {};
    const code = Array.isArray(script.exec) ? script.exec.map(str).join("\n") : str(script.exec);
    if (code.trim() === "") continue;
    if (ev.disabled === true) {
      warnings.push(`${where}: a disabled ${listen} script was not imported`);
      continue;
    }
    out[listen] = joinScripts(out[listen], code);
  }
  return out;
}

/** A Postman environment file → one environment (`type: "secret"` → isSecret; `value` → defaultValue). */
export function importPostmanEnvironment(doc: unknown): { input: EnvironmentInput; warnings: string[] } {
  const kind = detectPostman(doc);
  if (kind !== "environment") throw badRequest("body is a Postman collection, not an environment (omit collection_id to import a collection)");
  const d = doc as Obj;
  const warnings: string[] = [];
  const name = str(d.name).trim();
  if (name === "") throw badRequest("the Postman environment has no name");
  const variables: NonNullable<EnvironmentInput["variables"]> = [];
  for (const x of d.values as unknown[]) {
    const key = isObj(x) ? str(x.key) : "";
    if (key === "") {
      warnings.push(`environment '${name}': a variable without a key was skipped`);
      continue;
    }
    const v = x as Obj;
    variables.push({ key, defaultValue: str(v.value), enabled: v.enabled !== false, isSecret: v.type === "secret" });
  }
  return { input: { name, variables }, warnings };
}

// ---- export ------------------------------------------------------------------------------------------------------

type PmItem = Obj;

/** Our collection → a Postman collection v2.1.0 (environments are not part of it). */
export function exportPostmanCollection(c: Collection): Obj {
  const out: Obj = {
    info: { _postman_id: c.id, name: c.name, schema: POSTMAN_V21_SCHEMA },
    item: exportItems(c.requests, c.folders, [c.defaultHeaders]),
  };
  const auth = exportAuth(c.defaultAuth);
  if (auth) out.auth = auth;
  const event = exportEvents(c.scripts);
  if (event.length) out.event = event;
  if (c.variables.length) out.variable = c.variables.map((v) => ({ key: v.key, value: v.value, type: "string", ...(v.enabled ? {} : { disabled: true }) }));
  return out;
}

function exportItems(requests: ComposeRequest[], folders: Folder[], headerLayers: KeyValue[][]): PmItem[] {
  return [...folders.map((f) => exportFolder(f, headerLayers)), ...requests.map((r) => exportRequest(r, headerLayers))];
}

function exportFolder(f: Folder, headerLayers: KeyValue[][]): PmItem {
  const out: PmItem = { name: f.name, item: exportItems(f.requests, f.folders, [...headerLayers, f.headers]) };
  const auth = exportAuth(f.auth);
  if (auth) out.auth = auth;
  const event = exportEvents(f.scripts);
  if (event.length) out.event = event;
  return out;
}

/**
 * Postman has no collection or folder headers: they are written into each request, merged as send merges them
 * (a later enabled header replaces an earlier one of the same name).
 */
function mergeHeaders(layers: KeyValue[][]): KeyValue[] {
  const out: KeyValue[] = [];
  for (const layer of layers) {
    for (const h of layer) {
      if (h.enabled) for (let i = out.length - 1; i >= 0; i--) if (out[i]!.enabled && out[i]!.key.toLowerCase() === h.key.toLowerCase()) out.splice(i, 1);
      out.push(h);
    }
  }
  return out;
}

const TYPE_LANGUAGES: Record<string, string> = Object.fromEntries(Object.entries(LANGUAGE_TYPES).map(([l, t]) => [t, l]));

function exportRequest(r: ComposeRequest, headerLayers: KeyValue[][]): PmItem {
  const headers = mergeHeaders([...headerLayers, r.headers]);
  const hasContentType = headers.some((h) => h.enabled && h.key.toLowerCase() === "content-type");
  const req: Obj = { method: r.method };
  const ct = r.contentType.split(";")[0]!.trim().toLowerCase();
  let body: Obj | null = null;
  let addContentType = false;
  if (ct === "application/x-www-form-urlencoded") {
    body = {
      mode: "urlencoded",
      urlencoded: r.body === "" ? [] : r.body.split("&").map((p) => {
        const eq = p.indexOf("=");
        return eq < 0 ? { key: formDecode(p), value: "" } : { key: formDecode(p.slice(0, eq)), value: formDecode(p.slice(eq + 1)) };
      }),
    };
  } else if (ct === "multipart/form-data") {
    const boundary = /boundary="?([^";]+)"?/i.exec(r.contentType)?.[1];
    const parts = boundary ? parseMultipart(r.body, boundary) : null;
    if (parts) body = { mode: "formdata", formdata: parts.map((p) => ({ key: p.name, value: p.value, type: "text", ...(p.contentType ? { contentType: p.contentType } : {}) })) };
    else {
      body = { mode: "raw", raw: r.body };
      addContentType = true;
    }
  } else if (r.body !== "") {
    const language = TYPE_LANGUAGES[ct];
    body = { mode: "raw", raw: r.body, ...(language ? { options: { raw: { language } } } : {}) };
    addContentType = !language && r.contentType !== "";
  } else addContentType = r.contentType !== "";
  // a content type Postman's body options cannot say goes out as a header, as send would set it
  if (addContentType && !hasContentType) headers.push({ key: "Content-Type", value: r.contentType, enabled: true });
  req.header = headers.map((h) => ({ key: h.key, value: h.value, type: "text", ...(h.enabled ? {} : { disabled: true }) }));
  req.url = exportUrl(r.url, r.queryParams);
  if (body) req.body = body;
  const auth = exportAuth(r.auth);
  if (auth) req.auth = auth;
  if (r.description) req.description = r.description;
  const item: PmItem = { name: r.name };
  const event = exportEvents(r.scripts);
  if (event.length) item.event = event;
  item.request = req;
  item.response = [];
  return item;
}

/** Our URL plus queryParams → Postman's URL object (raw and its parts, as Postman's own parser splits them). */
export function exportUrl(url: string, queryParams: KeyValue[]): Obj {
  const enabledExtra = queryParams.filter((q) => q.enabled);
  let raw = url;
  if (enabledExtra.length) {
    const hash = raw.indexOf("#");
    const frag = hash >= 0 ? raw.slice(hash) : "";
    const base = hash >= 0 ? raw.slice(0, hash) : raw;
    const sep = !base.includes("?") ? "?" : base.endsWith("?") || base.endsWith("&") ? "" : "&";
    raw = `${base}${sep}${enabledExtra.map((q) => `${q.key}=${q.value}`).join("&")}${frag}`;
  }
  const out: Obj = { raw };
  let rest = raw;
  const hashAt = rest.indexOf("#");
  if (hashAt >= 0) {
    out.hash = rest.slice(hashAt + 1);
    rest = rest.slice(0, hashAt);
  }
  let search = "";
  const qAt = rest.indexOf("?");
  if (qAt >= 0) {
    search = rest.slice(qAt + 1);
    rest = rest.slice(0, qAt);
  }
  const proto = /^([a-z][a-z0-9+.-]*):\/\//i.exec(rest);
  if (proto) {
    out.protocol = proto[1];
    rest = rest.slice(proto[0].length);
  }
  const slash = rest.indexOf("/");
  let host = slash >= 0 ? rest.slice(0, slash) : rest;
  const path = slash >= 0 ? rest.slice(slash + 1) : "";
  const port = /:(\d+|\{\{[^{}]+\}\})$/.exec(host);
  if (port && !/^\{\{[^{}]+\}\}$/.test(host)) {
    out.port = port[1];
    host = host.slice(0, -port[0].length);
  }
  if (host !== "") out.host = host.split(".");
  if (slash >= 0) out.path = path.split("/");
  const query: Obj[] = search === "" ? [] : search.split("&").map((p) => {
    const eq = p.indexOf("=");
    return eq < 0 ? { key: p, value: null } : { key: p.slice(0, eq), value: p.slice(eq + 1) };
  });
  // the enabled extra parameters are in raw already; the disabled ones are listed as disabled
  for (const q of queryParams) if (!q.enabled) query.push({ key: q.key, value: q.value, disabled: true });
  if (query.length) out.query = query;
  return out;
}

function exportAuth(a: Auth | null): Obj | null {
  if (!a) return null;
  const row = (key: string, value: string) => ({ key, value, type: "string" });
  switch (a.type) {
    case "none":
      return { type: "noauth" };
    case "bearer":
      return { type: "bearer", bearer: [row("token", a.token)] };
    case "basic":
      return { type: "basic", basic: [row("username", a.username), row("password", a.password)] };
    case "apiKey":
      return { type: "apikey", apikey: [row("key", a.key), row("value", a.value), row("in", a.in ?? "header")] };
  }
}

function exportEvents(s: Scripts): Obj[] {
  const out: Obj[] = [];
  for (const listen of ["prerequest", "test"] as const)
    if (s[listen] !== "") out.push({ listen, script: { type: "text/javascript", exec: s[listen].split("\n") } });
  return out;
}

/** One environment → a Postman environment file (defaultValue as value; session currentValue is not exported). */
export function exportPostmanEnvironment(env: Environment): Obj {
  return {
    id: crypto.randomUUID(),
    name: env.name,
    values: env.variables.map((v) => ({ key: v.key, value: v.defaultValue, type: v.isSecret ? "secret" : "default", enabled: v.enabled })),
    _postman_variable_scope: "environment",
  };
}

// ---- with the store (what the routes call) -----------------------------------------------------------------------

/** POST /compose/import: a collection file creates a new collection; an environment file needs `collectionId`. */
export function importPostman(store: CollectionStore, doc: unknown, collectionId: string | undefined): { collection: Collection; warnings: string[] } {
  const kind = detectPostman(doc);
  if (kind === "environment") {
    if (!collectionId) throw badRequest("a Postman environment is imported into a collection: give ?collection_id=");
    const { input, warnings } = importPostmanEnvironment(doc);
    store.addEnvironment(collectionId, input);
    return { collection: store.get(collectionId), warnings };
  }
  if (collectionId) throw badRequest("collection_id is only for importing a Postman environment; a Postman collection is imported as a new collection");
  const { input, warnings } = importPostmanCollection(doc);
  return { collection: store.create(input), warnings };
}

export const EXPORT_FORMATS = ["postman", "postman-environment"] as const;

/** GET /compose/collections/{id}/export: format postman (default) or postman-environment with an environment name. */
export function exportFromStore(store: CollectionStore, id: string, format: string | undefined, environment: string | undefined): Obj {
  const f = format ?? "postman";
  if (!(EXPORT_FORMATS as readonly string[]).includes(f)) throw badRequest(`query field 'format': unknown format '${f}' (${EXPORT_FORMATS.join(" or ")})`);
  const c = store.get(id);
  if (f === "postman") return exportPostmanCollection(c);
  if (!environment) throw badRequest("query field 'environment': format postman-environment needs the environment's name");
  return exportPostmanEnvironment(store.environment(c, environment));
}
