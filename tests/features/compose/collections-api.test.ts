import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DEFAULTS } from "../../../src/service/config.ts";
import { TapwireService } from "../../../src/service/service.ts";
import { tempDir } from "../../helpers/tapwire-process.ts";

type Svc = TapwireService & { call: (p: string, init?: RequestInit) => Promise<Response> };
let svc: Svc;
const logs: string[] = [];

const JSON_HEADERS = { "content-type": "application/json" };
const C = "/api/v1/compose/collections";
const send = (method: string, path: string, body?: unknown) =>
  svc.call(path, body === undefined ? { method } : { method, body: JSON.stringify(body), headers: JSON_HEADERS });
const post = (path: string, body?: unknown) => send("POST", path, body);
const put = (path: string, body: unknown) => send("PUT", path, body);
const patch = (path: string, body: unknown) => send("PATCH", path, body);
const del = (path: string) => send("DELETE", path);
const get = (path: string) => svc.call(path);

async function ok(r: Response | Promise<Response>, status = 200): Promise<any> {
  const res = await r;
  const text = await res.text();
  expect({ status: res.status, text }).toMatchObject({ status });
  return text ? JSON.parse(text) : undefined;
}

async function expectError(r: Response | Promise<Response>, status: number, code?: string, contains?: string): Promise<string> {
  const res = await r;
  expect(res.status).toBe(status);
  const b = (await res.json()) as { error: { code: string; message: string } };
  expect(typeof b.error.code).toBe("string");
  if (code) expect(b.error.code).toBe(code);
  if (contains) expect(b.error.message).toContain(contains);
  return b.error.message;
}

beforeAll(async () => {
  // like tests/helpers/service.ts, with the service's log lines collected
  svc = new TapwireService({ ...DEFAULTS, dataDir: tempDir(), proxyPort: 0, upstreamInsecure: false, upstreamCa: [], mockPort: null }, (l) => logs.push(l)) as Svc;
  await svc.start();
  svc.call = (p, init = {}) => fetch(`http://127.0.0.1:${svc.apiPort}${p}`, { ...init, headers: { authorization: `Bearer ${svc.token}`, ...((init.headers as Record<string, string>) ?? {}) } });
});
afterAll(async () => {
  await svc?.stop();
});

const REQUEST_DEFAULTS = { headers: [], queryParams: [], body: "", contentType: "", auth: null, timeout: 30000, scripts: { prerequest: "", test: "" }, description: "" };

describe("collections: create, read, list", () => {
  test("an empty list at first", async () => {
    expect(await ok(get(C))).toEqual([]);
  });

  test("a minimal create gets server ids and every default; GET by id answers the same", async () => {
    const c = await ok(
      post(C, {
        name: "Minimal",
        requests: [{ name: "r1", method: "get", url: "https://example.test/a" }],
        folders: [],
        environments: [{ name: "dev", variables: [{ key: "host", defaultValue: "example.test" }] }],
      }),
    );
    expect(typeof c.id).toBe("string");
    expect(c.name).toBe("Minimal");
    expect(c.requests).toHaveLength(1);
    expect(c.requests[0]).toEqual({ id: expect.any(String), name: "r1", method: "GET", url: "https://example.test/a", ...REQUEST_DEFAULTS });
    expect(c.environments).toEqual([{ name: "dev", variables: [{ key: "host", defaultValue: "example.test", currentValue: null, enabled: true, isSecret: false }] }]);
    expect(c.variables).toEqual([]);
    expect(c.defaultHeaders).toEqual([]);
    expect(c.defaultAuth).toBeNull();
    expect(c.scripts).toEqual({ prerequest: "", test: "" });
    expect(typeof c.created_at).toBe("number");
    expect(c.updated_at).toBe(c.created_at);
    expect(await ok(get(`${C}/${c.id}`))).toEqual(c);
  });

  test("the file: compose/<id>.json, mode 0600, without currentValue", async () => {
    const c = await ok(post(C, { name: "File", environments: [{ name: "e", variables: [{ key: "k", defaultValue: "d", currentValue: "session" }] }] }));
    expect(c.environments[0].variables[0].currentValue).toBe("session");
    const file = join(svc.config.dataDir, "compose", `${c.id}.json`);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const onDisk = JSON.parse(readFileSync(file, "utf8"));
    expect(onDisk.id).toBe(c.id);
    expect(onDisk.environments[0].variables[0]).toEqual({ key: "k", defaultValue: "d", enabled: true, isSecret: false });
  });

  test("ids in a create body are ignored (server-assigned)", async () => {
    const c = await ok(post(C, { name: "Ids", requests: [{ id: "mine", name: "r", method: "GET", url: "http://x" }], folders: [{ id: "f", name: "f" }] }));
    expect(c.requests[0].id).not.toBe("mine");
    expect(c.folders[0].id).not.toBe("f");
  });

  test("the list: summaries with counts that include nested folders", async () => {
    const c = await ok(
      post(C, {
        name: "Nested",
        requests: [{ name: "top", method: "GET", url: "http://x/1" }],
        folders: [
          {
            name: "A",
            requests: [{ name: "a1", method: "GET", url: "http://x/a1" }],
            folders: [{ name: "A.1", requests: [{ name: "a11", method: "GET", url: "http://x/a11" }, { name: "a12", method: "POST", url: "http://x/a12" }], folders: [{ name: "A.1.i" }] }],
          },
          { name: "B" },
        ],
        environments: [{ name: "dev" }, { name: "prod", variables: [] }],
      }),
    );
    expect(c.folders[0].folders[0].requests).toHaveLength(2);
    expect(c.folders[1]).toEqual({ id: expect.any(String), name: "B", requests: [], folders: [], auth: null, headers: [], scripts: { prerequest: "", test: "" } });
    const list = (await ok(get(C))) as any[];
    const s = list.find((x) => x.id === c.id);
    expect(s).toEqual({ id: c.id, name: "Nested", request_count: 4, folder_count: 4, environment_count: 2, created_at: c.created_at });
    expect(Object.keys(s).sort()).toEqual(["created_at", "environment_count", "folder_count", "id", "name", "request_count"]);
  });

  test("bad bodies are 400 naming the field", async () => {
    await expectError(post(C, {}), 400, "bad_request", "name");
    await expectError(post(C, { name: "x", requests: [{ name: "r", url: "http://x" }] }), 400, "bad_request", "method");
    await expectError(post(C, { name: "x", requests: [{ name: "r", method: "GET", url: "http://x", timeout: "soon" }] }), 400, "bad_request", "timeout");
    await expectError(post(C, { name: "x", environments: [{ name: "e", variables: [{ key: "k" }] }] }), 400, "bad_request", "defaultValue");
    await expectError(post(C, { name: "x", defaultAuth: { type: "digest" } }), 400, "bad_request", "defaultAuth");
    await expectError(post(C, { name: "x", folders: [{ name: "f", folders: [{ name: "g", requests: [{ name: "r", url: "http://x" }] }] }] }), 400, "bad_request", "folders");
    await expectError(post(C, { name: "x", requests: [{ name: "r", method: "GET", url: "http://x", headers: [{ key: "a" }] }] }), 400, "bad_request", "headers");
    await expectError(post(C, { name: "x", environments: [{ name: "e" }, { name: "e" }] }), 400, "bad_request", "duplicate environment name");
    await expectError(post(C, { name: "x", environments: [{ name: "e", variables: [{ key: "k", defaultValue: "" }, { key: "k", defaultValue: "" }] }] }), 400, "bad_request", "duplicate key");
  });

  test("unknown collection: 404", async () => {
    await expectError(get(`${C}/nope`), 404, "not_found");
    await expectError(get(`${C}/..%2Fapi-handshake`), 404, "not_found");
  });
});

describe("collections: a corrupt file", () => {
  test("GET by id is 500 corruptCollection naming the file; the list skips it with a warning; others keep working", async () => {
    const good = await ok(post(C, { name: "Good" }));
    const bad = await ok(post(C, { name: "Bad" }));
    const file = join(svc.config.dataDir, "compose", `${bad.id}.json`);
    writeFileSync(file, '{"id": "' + bad.id + '", "name": "Bad", "requests": [');
    const msg = await expectError(get(`${C}/${bad.id}`), 500, "corruptCollection");
    expect(msg).toContain(file);
    logs.length = 0;
    const list = (await ok(get(C))) as any[];
    expect(list.some((x) => x.id === bad.id)).toBe(false);
    expect(list.some((x) => x.id === good.id)).toBe(true);
    expect(logs.some((l) => l.includes(file))).toBe(true);
    expect((await ok(get(`${C}/${good.id}`))).name).toBe("Good");
    // adding to it is refused the same way
    await expectError(post(`${C}/${bad.id}/requests`, { request: { name: "r", method: "GET", url: "http://x" } }), 500, "corruptCollection");

    // valid JSON of the wrong shape is unreadable too
    writeFileSync(file, JSON.stringify({ id: bad.id, name: 5 }));
    await expectError(get(`${C}/${bad.id}`), 500, "corruptCollection", "wrong shape");

    // a repaired file is read again
    const repaired = { ...good, id: bad.id, name: "Repaired" };
    writeFileSync(file, JSON.stringify(repaired));
    expect((await ok(get(`${C}/${bad.id}`))).name).toBe("Repaired");

    // a corrupt collection can be deleted
    writeFileSync(file, "not json");
    await ok(del(`${C}/${bad.id}`), 204);
    await expectError(get(`${C}/${bad.id}`), 404);
  });
});

describe("requests", () => {
  test("POST a request at the top and into a (nested) folder; 404 for an unknown collection or folder", async () => {
    const c = await ok(post(C, { name: "Req", folders: [{ name: "F", folders: [{ name: "G" }] }] }));
    const g = c.folders[0].folders[0].id;
    const top = await ok(post(`${C}/${c.id}/requests`, { request: { name: "top", method: "POST", url: "http://x/top", body: "{}", contentType: "application/json" } }));
    expect(top).toEqual({ ...REQUEST_DEFAULTS, id: expect.any(String), name: "top", method: "POST", url: "http://x/top", body: "{}", contentType: "application/json" });
    const nullFolder = await ok(post(`${C}/${c.id}/requests`, { folder_id: null, request: { name: "top2", method: "GET", url: "http://x" } }));
    const nested = await ok(post(`${C}/${c.id}/requests`, { folder_id: g, request: { name: "in-g", method: "GET", url: "http://x/g" } }));
    const full = await ok(get(`${C}/${c.id}`));
    expect(full.requests.map((r: any) => r.id)).toEqual([top.id, nullFolder.id]);
    expect(full.folders[0].folders[0].requests.map((r: any) => r.id)).toEqual([nested.id]);
    expect(full.updated_at).toBeGreaterThan(c.updated_at);
    await expectError(post(`${C}/nope/requests`, { request: { name: "r", method: "GET", url: "http://x" } }), 404);
    await expectError(post(`${C}/${c.id}/requests`, { folder_id: "nope", request: { name: "r", method: "GET", url: "http://x" } }), 404, "not_found", "nope");
    await expectError(post(`${C}/${c.id}/requests`, { request: { name: "r" } }), 400, "bad_request", "method");
    await expectError(post(`${C}/${c.id}/requests`, {}), 400, "bad_request", "request");
  });

  test("PUT replaces a request in place, keeping its id; DELETE removes it; 404s", async () => {
    const c = await ok(post(C, { name: "Put", folders: [{ name: "F", requests: [{ name: "a", method: "GET", url: "http://x/a", body: "old" }] }] }));
    const rid = c.folders[0].requests[0].id;
    const r = await ok(put(`${C}/${c.id}/requests/${rid}`, { name: "b", method: "put", url: "http://x/b", timeout: 500 }));
    expect(r).toEqual({ ...REQUEST_DEFAULTS, id: rid, name: "b", method: "PUT", url: "http://x/b", timeout: 500 });
    expect((await ok(get(`${C}/${c.id}`))).folders[0].requests[0]).toEqual(r);
    await expectError(put(`${C}/${c.id}/requests/nope`, { name: "b", method: "GET", url: "http://x" }), 404);
    await expectError(put(`${C}/nope/requests/${rid}`, { name: "b", method: "GET", url: "http://x" }), 404);
    await expectError(put(`${C}/${c.id}/requests/${rid}`, { name: "b", method: "GET", url: "http://x", auth: { type: "bearer" } }), 400, "bad_request", "auth");
    await ok(del(`${C}/${c.id}/requests/${rid}`), 204);
    expect((await ok(get(`${C}/${c.id}`))).folders[0].requests).toEqual([]);
    await expectError(del(`${C}/${c.id}/requests/${rid}`), 404);
  });
});

describe("folders (extension)", () => {
  test("POST at the top and inside a parent; PUT updates name/auth/headers and keeps contents unless given; DELETE removes the subtree", async () => {
    const c = await ok(post(C, { name: "Folders" }));
    const f = await ok(post(`${C}/${c.id}/folders`, { folder: { name: "F", requests: [{ name: "r", method: "GET", url: "http://x" }] } }));
    expect(f).toMatchObject({ name: "F", folders: [], auth: null, headers: [] });
    const g = await ok(post(`${C}/${c.id}/folders`, { parent_id: f.id, folder: { name: "G" } }));
    await expectError(post(`${C}/${c.id}/folders`, { parent_id: "nope", folder: { name: "H" } }), 404);
    await expectError(post(`${C}/nope/folders`, { folder: { name: "H" } }), 404);
    await expectError(post(`${C}/${c.id}/folders`, { folder: {} }), 400, "bad_request", "name");

    const upd = await ok(put(`${C}/${c.id}/folders/${f.id}`, { name: "F2", auth: { type: "bearer", token: "t" }, headers: [{ key: "X-F", value: "1" }] }));
    expect(upd).toEqual({ id: f.id, name: "F2", auth: { type: "bearer", token: "t" }, headers: [{ key: "X-F", value: "1", enabled: true }], requests: f.requests, folders: [{ ...g }], scripts: { prerequest: "", test: "" } });
    // contents given: replaced, ids in the body kept
    const upd2 = await ok(put(`${C}/${c.id}/folders/${f.id}`, { name: "F3", requests: [{ id: f.requests[0].id, name: "renamed", method: "GET", url: "http://x" }] }));
    expect(upd2.requests[0].id).toBe(f.requests[0].id);
    expect(upd2.folders).toHaveLength(1);
    await expectError(put(`${C}/${c.id}/folders/nope`, { name: "x" }), 404);

    let list = (await ok(get(C))) as any[];
    expect(list.find((x) => x.id === c.id)).toMatchObject({ folder_count: 2, request_count: 1 });
    await ok(del(`${C}/${c.id}/folders/${f.id}`), 204);
    await expectError(del(`${C}/${c.id}/folders/${f.id}`), 404);
    list = (await ok(get(C))) as any[];
    expect(list.find((x) => x.id === c.id)).toMatchObject({ folder_count: 0, request_count: 0 });
  });
});

describe("collections: PUT and DELETE (extension)", () => {
  test("PUT replaces the fields given, keeps the others and the ids in the body", async () => {
    const c = await ok(post(C, { name: "P", requests: [{ name: "a", method: "GET", url: "http://x/a" }], variables: [{ key: "v", value: "1" }], defaultAuth: { type: "basic", username: "u", password: "p" } }));
    const u = await ok(put(`${C}/${c.id}`, { name: "P2", defaultHeaders: [{ key: "X-D", value: "d", enabled: false }] }));
    expect(u.name).toBe("P2");
    expect(u.requests).toEqual(c.requests);
    expect(u.variables).toEqual([{ key: "v", value: "1", enabled: true }]);
    expect(u.defaultAuth).toEqual({ type: "basic", username: "u", password: "p" });
    expect(u.defaultHeaders).toEqual([{ key: "X-D", value: "d", enabled: false }]);
    expect(u.created_at).toBe(c.created_at);
    expect(u.updated_at).toBeGreaterThan(c.updated_at);
    const u2 = await ok(put(`${C}/${c.id}`, { name: "P3", requests: [{ ...c.requests[0], name: "a2" }, { name: "new", method: "GET", url: "http://x/n" }] }));
    expect(u2.requests[0]).toEqual({ ...c.requests[0], name: "a2" });
    expect(u2.requests[1].id).not.toBe(c.requests[0].id);
    await expectError(put(`${C}/${c.id}`, { name: "P", requests: [{ id: "same", name: "a", method: "GET", url: "http://x" }, { id: "same", name: "b", method: "GET", url: "http://x" }] }), 400, "bad_request", "same");
    await expectError(put(`${C}/nope`, { name: "x" }), 404);
    await expectError(put(`${C}/${c.id}`, { requests: [] }), 400, "bad_request", "name");
  });

  test("DELETE removes the collection and its file", async () => {
    const c = await ok(post(C, { name: "D" }));
    await ok(del(`${C}/${c.id}`), 204);
    await expectError(get(`${C}/${c.id}`), 404);
    expect(((await ok(get(C))) as any[]).some((x) => x.id === c.id)).toBe(false);
    await expectError(del(`${C}/${c.id}`), 404);
  });
});

describe("environments", () => {
  test("POST adds one with defaults; a duplicate name is 409; 404 unknown collection; 400 bad body", async () => {
    const c = await ok(post(C, { name: "Env", environments: [{ name: "dev", variables: [] }] }));
    const e = await ok(post(`${C}/${c.id}/environments`, { name: "prod", variables: [{ key: "host", defaultValue: "p.test" }, { key: "tok", defaultValue: "", currentValue: "s3", isSecret: true, enabled: false }] }));
    expect(e).toEqual({
      name: "prod",
      variables: [
        { key: "host", defaultValue: "p.test", currentValue: null, enabled: true, isSecret: false },
        { key: "tok", defaultValue: "", currentValue: "s3", enabled: false, isSecret: true },
      ],
    });
    await expectError(post(`${C}/${c.id}/environments`, { name: "dev", variables: [] }), 409, "conflict", "dev");
    await expectError(post(`${C}/nope/environments`, { name: "x", variables: [] }), 404);
    await expectError(post(`${C}/${c.id}/environments`, { variables: [] }), 400, "bad_request", "name");
    const full = await ok(get(`${C}/${c.id}`));
    expect(full.environments.map((x: any) => x.name)).toEqual(["dev", "prod"]);
  });

  test("PATCH a variable's currentValue (session only); PUT replaces and renames; DELETE removes", async () => {
    const c = await ok(post(C, { name: "Env2", environments: [{ name: "dev", variables: [{ key: "a", defaultValue: "1" }, { key: "b", defaultValue: "2" }] }, { name: "other" }] }));
    const v = await ok(patch(`${C}/${c.id}/environments/dev/variables/a`, { currentValue: "live" }));
    expect(v).toEqual({ key: "a", defaultValue: "1", currentValue: "live", enabled: true, isSecret: false });
    const file = join(svc.config.dataDir, "compose", `${c.id}.json`);
    expect(readFileSync(file, "utf8")).not.toContain("live");
    expect((await ok(get(`${C}/${c.id}`))).environments[0].variables[0].currentValue).toBe("live");
    await expectError(patch(`${C}/${c.id}/environments/dev/variables/zzz`, { currentValue: "x" }), 404);
    await expectError(patch(`${C}/${c.id}/environments/nope/variables/a`, { currentValue: "x" }), 404);
    await expectError(patch(`${C}/${c.id}/environments/dev/variables/a`, { currentValue: 5 }), 400, "bad_request", "currentValue");

    // PUT with a rename keeps the session value of a variable that stays (currentValue absent)
    const e = await ok(put(`${C}/${c.id}/environments/dev`, { name: "development", variables: [{ key: "a", defaultValue: "1b" }] }));
    expect(e).toEqual({ name: "development", variables: [{ key: "a", defaultValue: "1b", currentValue: "live", enabled: true, isSecret: false }] });
    await expectError(put(`${C}/${c.id}/environments/development`, { name: "other", variables: [] }), 409);
    await expectError(put(`${C}/${c.id}/environments/dev`, { name: "dev", variables: [] }), 404);
    const cleared = await ok(patch(`${C}/${c.id}/environments/development/variables/a`, { currentValue: null }));
    expect(cleared.currentValue).toBeNull();

    await ok(del(`${C}/${c.id}/environments/development`), 204);
    await expectError(del(`${C}/${c.id}/environments/development`), 404);
    expect((await ok(get(`${C}/${c.id}`))).environments.map((x: any) => x.name)).toEqual(["other"]);
  });
});
