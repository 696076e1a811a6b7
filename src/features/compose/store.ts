import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { Value } from "@sinclair/typebox/value";
import { ApiError, badRequest, conflict, notFound } from "../../api/errors.ts";
import { writeFileAtomic } from "../../store/json-state.ts";
import {
  type Collection,
  CollectionFileSchema,
  type CollectionInput,
  type CollectionSummary,
  type ComposeRequest,
  type ComposeRequestInput,
  type Environment,
  type EnvironmentInput,
  type Folder,
  type FolderInput,
  type KeyValue,
  type Variable,
} from "./schema.ts";

export const DEFAULT_TIMEOUT_MS = 30_000;

/** A collection file that cannot be read: 500 `corruptCollection` naming the file. */
export class CorruptCollectionError extends ApiError {
  constructor(readonly file: string, reason: string) {
    super(500, "corruptCollection", `collection file ${file} cannot be read: ${reason}`);
  }
}

type Loaded = { ok: true; c: Collection } | { ok: false; error: CorruptCollectionError };
interface CacheEntry {
  mtimeMs: number;
  size: number;
  loaded: Loaded;
}

/** Where a request sits: its list and the chain of folders enclosing it, outermost first. */
export interface RequestLocation {
  request: ComposeRequest;
  list: ComposeRequest[];
  folders: Folder[];
}

const ID_RE = /^[A-Za-z0-9_-]{1,128}$/;
const newId = () => crypto.randomUUID();

function kv(list: { key: string; value: string; enabled?: boolean }[] | undefined): KeyValue[] {
  return (list ?? []).map((h) => ({ key: h.key, value: h.value, enabled: h.enabled ?? true }));
}

/**
 * Compose collections: one JSON file per collection, `compose/<id>.json` in the data directory, written atomically
 * (mode 0600) on every change. Files are read again when they changed on disk (hand edits are picked up); a file
 * that does not parse or has the wrong shape is reported for its id (CorruptCollectionError) and left out of the
 * list with a logged warning, and the other collections keep working.
 *
 * Environment variables' `currentValue` is session-only: it lives in this object's memory (keyed by collection,
 * environment name and key), is never written, and is gone after a restart.
 */
export class CollectionStore {
  private readonly cache = new Map<string, CacheEntry>();
  private readonly warned = new Map<string, number>();
  /** collection id → environment name → key → current value (keys a script created are session-only variables) */
  private readonly session = new Map<string, Map<string, Map<string, string | null>>>();
  /** collection id → key → value pm.collectionVariables gave it this session (null: unset) */
  private readonly colSession = new Map<string, Map<string, string | null>>();

  constructor(readonly dir: string, private readonly log: (line: string) => void = () => {}) {}

  private file(id: string): string {
    return join(this.dir, `${id}.json`);
  }

  // ---- reading ---------------------------------------------------------------------------------------------------

  private load(id: string): Loaded | null {
    const path = this.file(id);
    let st: { mtimeMs: number; size: number };
    try {
      st = statSync(path);
    } catch {
      this.cache.delete(id);
      return null;
    }
    const hit = this.cache.get(id);
    if (hit && hit.mtimeMs === st.mtimeMs && hit.size === st.size) return hit.loaded;
    let loaded: Loaded;
    try {
      const parsed: unknown = JSON.parse(readFileSync(path, "utf8"));
      if (!Value.Check(CollectionFileSchema, parsed)) {
        const first = Value.Errors(CollectionFileSchema, parsed).First();
        throw new Error(`wrong shape at '${first?.path || "/"}': ${first?.message ?? "invalid"}`);
      }
      const c = parsed as unknown as Collection;
      if (c.id !== id) throw new Error(`its id '${c.id}' is not its file name's '${id}'`);
      for (const env of c.environments) for (const v of env.variables) delete (v as Partial<Variable>).currentValue;
      fillFolderScripts(c.folders);
      loaded = { ok: true, c };
    } catch (e) {
      loaded = { ok: false, error: new CorruptCollectionError(path, (e as Error).message.replace(/^JSON Parse error: /, "not valid JSON: ")) };
    }
    this.cache.set(id, { mtimeMs: st.mtimeMs, size: st.size, loaded });
    return loaded;
  }

  /** The stored collection (without session values); throws 404 or 500 corruptCollection. */
  private raw(id: string): Collection {
    if (!ID_RE.test(id)) throw notFound(`no collection '${id}'`);
    const l = this.load(id);
    if (!l) throw notFound(`no collection '${id}'`);
    if (!l.ok) throw l.error;
    return l.c;
  }

  /** Summaries of every readable collection, oldest first; unreadable files are skipped with a warning. */
  list(): CollectionSummary[] {
    if (!existsSync(this.dir)) return [];
    const out: Collection[] = [];
    for (const name of readdirSync(this.dir)) {
      if (!name.endsWith(".json") || name.startsWith(".")) continue;
      const id = name.slice(0, -5);
      if (!ID_RE.test(id)) continue;
      const l = this.load(id);
      if (!l) continue;
      if (l.ok) out.push(l.c);
      else {
        // once per version of the file, not on every listing
        const mtime = this.cache.get(id)?.mtimeMs ?? 0;
        if (this.warned.get(id) !== mtime) {
          this.warned.set(id, mtime);
          this.log(`tapwire: compose: skipping ${l.error.message}`);
        }
      }
    }
    out.sort((a, b) => a.created_at - b.created_at || a.id.localeCompare(b.id));
    return out.map((c) => {
      const counts = countAll(c.requests, c.folders);
      return { id: c.id, name: c.name, request_count: counts.requests, folder_count: counts.folders, environment_count: c.environments.length, created_at: c.created_at };
    });
  }

  /** The full collection with the session's current values; 404 unknown, 500 unreadable. */
  get(id: string): Collection {
    return this.withSession(this.raw(id));
  }

  /** Where a request is (404 unknown request). */
  findRequest(c: Collection, requestId: string): RequestLocation {
    const found = findRequestIn(c.requests, c.folders, requestId, []);
    if (!found) throw notFound(`no request '${requestId}' in collection '${c.id}'`);
    return found;
  }

  environment(c: Collection, name: string): Environment {
    const env = c.environments.find((e) => e.name === name);
    if (!env) throw notFound(`no environment '${name}' in collection '${c.id}'`);
    return env;
  }

  // ---- writing ---------------------------------------------------------------------------------------------------

  private write(c: Collection): void {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const onDisk = {
      ...c,
      environments: c.environments.map((e) => ({ name: e.name, variables: e.variables.map(({ currentValue: _, ...v }) => v) })),
    };
    const path = this.file(c.id);
    writeFileAtomic(path, `${JSON.stringify(onDisk, null, 2)}\n`, 0o600);
    const st = statSync(path);
    this.cache.set(c.id, { mtimeMs: st.mtimeMs, size: st.size, loaded: { ok: true, c: structuredClone(onDisk) as Collection } });
  }

  /** Loads, lets fn change a copy, stamps and writes it; answers fn's result. */
  private mutate<T>(id: string, fn: (c: Collection) => T): T {
    const c = structuredClone(this.raw(id));
    const out = fn(c);
    c.updated_at = Math.max(Date.now(), c.updated_at + 1);
    this.write(c);
    return out;
  }

  create(input: CollectionInput): Collection {
    const now = Date.now();
    const id = newId();
    const c: Collection = {
      id,
      name: input.name,
      requests: (input.requests ?? []).map((r) => makeRequest(r, null)),
      folders: (input.folders ?? []).map((f) => makeFolder(f, null)),
      environments: [],
      variables: kv(input.variables),
      defaultHeaders: kv(input.defaultHeaders),
      defaultAuth: input.defaultAuth ?? null,
      scripts: { prerequest: input.scripts?.prerequest ?? "", test: input.scripts?.test ?? "" },
      created_at: now,
      updated_at: now,
    };
    c.environments = this.makeEnvironments(id, input.environments ?? []);
    this.write(c);
    return this.get(id);
  }

  /** Extension: replaces the fields the body gives (absent fields keep their values); ids in the body are kept. */
  update(id: string, input: CollectionInput): Collection {
    this.mutate(id, (c) => {
      c.name = input.name;
      if (input.requests !== undefined || input.folders !== undefined) {
        // ids stay unique in the whole collection: reserve those of the parts kept, then build the parts given
        const ids = new Set<string>();
        collectIds(input.requests === undefined ? c.requests : [], input.folders === undefined ? c.folders : [], ids);
        if (input.requests !== undefined) c.requests = input.requests.map((r) => makeRequest(r, ids));
        if (input.folders !== undefined) c.folders = input.folders.map((f) => makeFolder(f, ids));
      }
      if (input.environments !== undefined) {
        c.environments = this.makeEnvironments(id, input.environments, true);
        const names = new Set(input.environments.map((e) => e.name));
        const sess = this.session.get(id);
        if (sess) for (const n of [...sess.keys()]) if (!names.has(n)) sess.delete(n);
      }
      if (input.variables !== undefined) {
        c.variables = kv(input.variables);
        this.colSession.delete(id);
      }
      if (input.defaultHeaders !== undefined) c.defaultHeaders = kv(input.defaultHeaders);
      if (input.defaultAuth !== undefined) c.defaultAuth = input.defaultAuth;
      if (input.scripts !== undefined) c.scripts = { prerequest: input.scripts.prerequest ?? "", test: input.scripts.test ?? "" };
    });
    return this.get(id);
  }

  /** Extension: deletes the collection's file (also an unreadable one). */
  delete(id: string): void {
    if (!ID_RE.test(id) || !existsSync(this.file(id))) throw notFound(`no collection '${id}'`);
    unlinkSync(this.file(id));
    this.cache.delete(id);
    this.session.delete(id);
    this.colSession.delete(id);
  }

  addRequest(id: string, folderId: string | null | undefined, input: ComposeRequestInput): ComposeRequest {
    return this.mutate(id, (c) => {
      const list = folderId ? findFolder(c.folders, folderId)?.requests : c.requests;
      if (!list) throw notFound(`no folder '${folderId}' in collection '${id}'`);
      const r = makeRequest(input, null);
      list.push(r);
      return r;
    });
  }

  /** Extension: replaces a request (missing fields get the create defaults); it keeps its id and place. */
  replaceRequest(id: string, requestId: string, input: ComposeRequestInput): ComposeRequest {
    return this.mutate(id, (c) => {
      const loc = this.findRequest(c, requestId);
      const r = { ...makeRequest(input, null), id: requestId };
      loc.list[loc.list.indexOf(loc.request)] = r;
      return r;
    });
  }

  deleteRequest(id: string, requestId: string): void {
    this.mutate(id, (c) => {
      const loc = this.findRequest(c, requestId);
      loc.list.splice(loc.list.indexOf(loc.request), 1);
    });
  }

  /** Extension: adds a folder at the top or inside parent_id. */
  addFolder(id: string, parentId: string | null | undefined, input: FolderInput): Folder {
    return this.mutate(id, (c) => {
      const list = parentId ? findFolder(c.folders, parentId)?.folders : c.folders;
      if (!list) throw notFound(`no folder '${parentId}' in collection '${id}'`);
      const f = makeFolder(input, null);
      list.push(f);
      return f;
    });
  }

  /** Extension: name, auth and headers are replaced; requests and folders only when the body gives them. */
  updateFolder(id: string, folderId: string, input: FolderInput): Folder {
    return this.mutate(id, (c) => {
      const f = findFolder(c.folders, folderId);
      if (!f) throw notFound(`no folder '${folderId}' in collection '${id}'`);
      f.name = input.name;
      f.auth = input.auth ?? null;
      f.headers = kv(input.headers);
      if (input.scripts !== undefined) f.scripts = { prerequest: input.scripts.prerequest ?? "", test: input.scripts.test ?? "" };
      if (input.requests !== undefined || input.folders !== undefined) {
        // ids stay unique in the whole collection: reserve those outside this folder and of the parts kept
        const ids = new Set<string>([f.id]);
        collectIds(c.requests, c.folders, ids, f);
        collectIds(input.requests === undefined ? f.requests : [], input.folders === undefined ? f.folders : [], ids);
        if (input.requests !== undefined) f.requests = input.requests.map((r) => makeRequest(r, ids));
        if (input.folders !== undefined) f.folders = input.folders.map((x) => makeFolder(x, ids));
      }
      return f;
    });
  }

  deleteFolder(id: string, folderId: string): void {
    this.mutate(id, (c) => {
      const parent = findFolderParent(c.folders, folderId);
      if (!parent) throw notFound(`no folder '${folderId}' in collection '${id}'`);
      parent.splice(parent.findIndex((f) => f.id === folderId), 1);
    });
  }

  addEnvironment(id: string, input: EnvironmentInput): Environment {
    this.mutate(id, (c) => {
      if (c.environments.some((e) => e.name === input.name)) throw conflict(`collection '${id}' already has an environment '${input.name}'`);
      c.environments.push(...this.makeEnvironments(id, [input]));
    });
    return this.environment(this.get(id), input.name);
  }

  /** Extension: replaces an environment (a rename to an existing name is 409). */
  replaceEnvironment(id: string, name: string, input: EnvironmentInput): Environment {
    this.mutate(id, (c) => {
      const i = c.environments.findIndex((e) => e.name === name);
      if (i < 0) throw notFound(`no environment '${name}' in collection '${id}'`);
      if (input.name !== name && c.environments.some((e) => e.name === input.name)) throw conflict(`collection '${id}' already has an environment '${input.name}'`);
      const sess = this.session.get(id);
      const old = sess?.get(name);
      sess?.delete(name);
      if (old) sess!.set(input.name, old);
      c.environments[i] = this.makeEnvironments(id, [input], true)[0]!;
    });
    return this.environment(this.get(id), input.name);
  }

  deleteEnvironment(id: string, name: string): void {
    this.mutate(id, (c) => {
      const i = c.environments.findIndex((e) => e.name === name);
      if (i < 0) throw notFound(`no environment '${name}' in collection '${id}'`);
      c.environments.splice(i, 1);
      this.session.get(id)?.delete(name);
    });
  }

  /** Extension: sets one variable's session-only current value (null clears it); nothing is written. */
  setCurrentValue(id: string, envName: string, key: string, value: string | null): Variable {
    const c = this.raw(id);
    const env = c.environments.find((e) => e.name === envName);
    if (!env) throw notFound(`no environment '${envName}' in collection '${id}'`);
    if (!env.variables.some((v) => v.key === key)) throw notFound(`no variable '${key}' in environment '${envName}'`);
    this.sessionEnv(id, envName).set(key, value);
    return this.environment(this.get(id), envName).variables.find((v) => v.key === key)!;
  }

  /**
   * What a script's pm.environment.set/unset leaves for the session (nothing is written): a variable of the
   * environment gets the value as its currentValue (null after unset: its defaultValue applies again); a key the
   * environment does not have becomes a session-only variable (listed with defaultValue "", gone after a restart),
   * removed again by null.
   */
  setSessionVariable(id: string, envName: string, key: string, value: string | null): void {
    const env = this.environment(this.raw(id), envName);
    const vars = this.sessionEnv(id, envName);
    if (value === null && !env.variables.some((v) => v.key === key)) vars.delete(key);
    else vars.set(key, value);
  }

  /** The collection's enabled variables with this session's pm.collectionVariables changes applied. */
  collectionVariables(c: Collection): KeyValue[] {
    const over = this.colSession.get(c.id);
    const out = new Map<string, string>();
    for (const v of c.variables) if (v.enabled) out.set(v.key, v.value);
    for (const [k, v] of over ?? []) {
      if (v === null) out.delete(k);
      else out.set(k, v);
    }
    return [...out].map(([key, value]) => ({ key, value, enabled: true }));
  }

  /** pm.collectionVariables.set (a value) or unset (null), for this session only: never written to the file. */
  setSessionCollectionVariable(id: string, key: string, value: string | null): void {
    this.raw(id);
    let vars = this.colSession.get(id);
    if (!vars) this.colSession.set(id, (vars = new Map()));
    vars.set(key, value);
  }

  // ---- helpers ---------------------------------------------------------------------------------------------------

  private sessionEnv(id: string, envName: string): Map<string, string | null> {
    let byEnv = this.session.get(id);
    if (!byEnv) this.session.set(id, (byEnv = new Map()));
    let vars = byEnv.get(envName);
    if (!vars) byEnv.set(envName, (vars = new Map()));
    return vars;
  }

  /**
   * Completes environment inputs (defaults: enabled true, isSecret false) and records given current values in the
   * session. Duplicate names or keys are a 400. With keepSession, an absent currentValue keeps the session's value.
   */
  private makeEnvironments(id: string, inputs: EnvironmentInput[], keepSession = false): Environment[] {
    // every check first, so that a refused body leaves the session as it was
    const names = new Set<string>();
    inputs.forEach((e, i) => {
      if (names.has(e.name)) throw badRequest(`body field 'environments[${i}].name': duplicate environment name '${e.name}'`);
      names.add(e.name);
      const keys = new Set<string>();
      for (const v of e.variables ?? []) {
        if (keys.has(v.key)) throw badRequest(`body field 'variables': duplicate key '${v.key}' in environment '${e.name}'`);
        keys.add(v.key);
      }
    });
    return inputs.map((e) => {
      const keys = new Set<string>();
      const sess = this.sessionEnv(id, e.name);
      if (!keepSession) sess.clear();
      const variables = (e.variables ?? []).map((v) => {
        keys.add(v.key);
        if (v.currentValue !== undefined) sess.set(v.key, v.currentValue);
        return { key: v.key, defaultValue: v.defaultValue, currentValue: null, enabled: v.enabled ?? true, isSecret: v.isSecret ?? false };
      });
      for (const k of [...sess.keys()]) if (!keys.has(k)) sess.delete(k);
      return { name: e.name, variables };
    });
  }

  private withSession(stored: Collection): Collection {
    const c = structuredClone(stored);
    const byEnv = this.session.get(c.id);
    for (const env of c.environments) {
      const vars = byEnv?.get(env.name);
      const stored = new Set(env.variables.map((v) => v.key));
      env.variables = env.variables.map((v) => ({ key: v.key, defaultValue: v.defaultValue, currentValue: vars?.get(v.key) ?? null, enabled: v.enabled, isSecret: v.isSecret }));
      // variables a script created this session
      for (const [key, value] of vars ?? []) {
        if (!stored.has(key) && value !== null) env.variables.push({ key, defaultValue: "", currentValue: value, enabled: true, isSecret: false });
      }
    }
    return c;
  }
}

/** Requests and folders, nested folders included. */
export function countAll(requests: ComposeRequest[], folders: Folder[]): { requests: number; folders: number } {
  let r = requests.length;
  let f = folders.length;
  for (const x of folders) {
    const n = countAll(x.requests, x.folders);
    r += n.requests;
    f += n.folders;
  }
  return { requests: r, folders: f };
}

/**
 * A complete request from an input. ids === null: a fresh id (create); otherwise the input's id is kept when it is
 * a valid id not yet used in `ids` (PUT of a container), else a fresh one.
 */
function makeRequest(r: ComposeRequestInput, ids: Set<string> | null): ComposeRequest {
  return {
    id: pickId(r.id, ids),
    name: r.name,
    method: r.method.toUpperCase(),
    url: r.url,
    headers: kv(r.headers),
    queryParams: kv(r.queryParams),
    body: r.body ?? "",
    contentType: r.contentType ?? "",
    auth: r.auth ?? null,
    timeout: r.timeout ?? DEFAULT_TIMEOUT_MS,
    scripts: { prerequest: r.scripts?.prerequest ?? "", test: r.scripts?.test ?? "" },
    description: r.description ?? "",
  };
}

function makeFolder(f: FolderInput, ids: Set<string> | null): Folder {
  return {
    id: pickId(f.id, ids),
    name: f.name,
    requests: (f.requests ?? []).map((r) => makeRequest(r, ids)),
    folders: (f.folders ?? []).map((x) => makeFolder(x, ids)),
    auth: f.auth ?? null,
    headers: kv(f.headers),
    scripts: { prerequest: f.scripts?.prerequest ?? "", test: f.scripts?.test ?? "" },
  };
}

/** Folders of files written before folders had scripts get empty ones. */
function fillFolderScripts(folders: Folder[]): void {
  for (const f of folders) {
    f.scripts ??= { prerequest: "", test: "" };
    fillFolderScripts(f.folders);
  }
}

function pickId(given: string | undefined, ids: Set<string> | null): string {
  if (ids === null) return newId();
  if (given !== undefined && ID_RE.test(given) && !ids.has(given)) {
    ids.add(given);
    return given;
  }
  if (given !== undefined) throw badRequest(`body field 'id': '${given}' is ${ID_RE.test(given) ? "used twice in the collection" : "not a valid id (letters, digits, _ and -)"}`);
  const id = newId();
  ids.add(id);
  return id;
}

/** Adds the ids of these requests and folders, nested ones included (except inside `skip`), to ids. */
function collectIds(requests: ComposeRequest[], folders: Folder[], ids: Set<string>, skip?: Folder): void {
  for (const r of requests) ids.add(r.id);
  for (const f of folders) {
    if (f === skip) continue;
    ids.add(f.id);
    collectIds(f.requests, f.folders, ids, skip);
  }
}

export function findFolder(folders: Folder[], id: string): Folder | null {
  for (const f of folders) {
    if (f.id === id) return f;
    const inner = findFolder(f.folders, id);
    if (inner) return inner;
  }
  return null;
}

function findFolderParent(folders: Folder[], id: string): Folder[] | null {
  if (folders.some((f) => f.id === id)) return folders;
  for (const f of folders) {
    const p = findFolderParent(f.folders, id);
    if (p) return p;
  }
  return null;
}

function findRequestIn(requests: ComposeRequest[], folders: Folder[], id: string, chain: Folder[]): RequestLocation | null {
  const r = requests.find((x) => x.id === id);
  if (r) return { request: r, list: requests, folders: chain };
  for (const f of folders) {
    const found = findRequestIn(f.requests, f.folders, id, [...chain, f]);
    if (found) return found;
  }
  return null;
}
