import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import Ajv from "ajv";
import { FORM_BOUNDARY, POSTMAN_V21_SCHEMA } from "../../../src/features/compose/postman.ts";
import { startService } from "../../helpers/service.ts";
import { POSTMAN_V21_SHAPE } from "./postman-v21-shape.ts";
import { startUpstream, type Upstream } from "../../helpers/upstream.ts";

type Svc = Awaited<ReturnType<typeof startService>>;
let svc: Svc;
let up: Upstream;

const FIX = join(import.meta.dir, "fixtures");
const fixture = (name: string): any => JSON.parse(readFileSync(join(FIX, name), "utf8"));
const JSON_HEADERS = { "content-type": "application/json" };
const C = "/api/v1/compose/collections";
const IMPORT = "/api/v1/compose/import";
const post = (path: string, body: unknown) => svc.call(path, { method: "POST", body: typeof body === "string" ? body : JSON.stringify(body), headers: JSON_HEADERS });
const get = (path: string) => svc.call(path);

// the v2.1 collection format as a JSON Schema written by hand (postman-v21-shape.ts)
const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
const validateV21 = ajv.compile(POSTMAN_V21_SHAPE);
function expectValidV21(doc: unknown): void {
  const ok = validateV21(doc);
  expect(ok ? [] : validateV21.errors).toEqual([]);
}

async function ok(r: Response | Promise<Response>): Promise<any> {
  const res = await r;
  const text = await res.text();
  expect({ status: res.status, text }).toMatchObject({ status: 200 });
  return JSON.parse(text);
}

async function expectError(r: Promise<Response>, status: number, code: string, includes: string): Promise<void> {
  const res = await r;
  const body = (await res.json()) as any;
  expect({ status: res.status, code: body.error?.code }).toEqual({ status, code });
  expect(body.error.message).toContain(includes);
}

/** A collection without what is assigned on the way in (ids and timestamps) and without environments. */
function shape(c: any): any {
  const strip = (x: any): any => {
    if (Array.isArray(x)) return x.map(strip);
    if (x && typeof x === "object") {
      const out: any = {};
      for (const [k, v] of Object.entries(x)) if (!["id", "created_at", "updated_at", "environments"].includes(k)) out[k] = strip(v);
      return out;
    }
    return x;
  };
  return strip(c);
}

beforeAll(async () => {
  up = startUpstream();
  svc = await startService({ upstreamCa: [up.caFile] });
});
afterAll(async () => {
  await svc?.stop();
  up?.stop();
});

const folder = (c: any, ...names: string[]) => names.reduce((f: any, n) => f.folders.find((x: any) => x.name === n), c);
const request = (f: any, name: string) => f.requests.find((r: any) => r.name === name);

describe("POST /compose/import (Postman v2.1)", () => {
  let imported: { collection: any; warnings: string[] };
  beforeAll(async () => {
    imported = await ok(post(IMPORT, fixture("users-api.postman_collection.json")));
  });

  test("the hand-written fixture is itself a valid v2.1.0 collection", () => {
    expectValidV21(fixture("users-api.postman_collection.json"));
  });

  test("maps folders, auth, variables, scripts, headers, urls and bodies", async () => {
    const c = imported.collection;
    expect(c.name).toBe("Users API");
    expect(c.id).not.toBe("5b0f1f3e-8c1a-4c5e-9d1e-2f6a7b8c9d0e");
    expect(c.defaultAuth).toEqual({ type: "bearer", token: "{{token}}" });
    expect(c.variables).toEqual([
      { key: "who", value: "world", enabled: true },
      { key: "role", value: "admin", enabled: true },
      { key: "unused", value: "x", enabled: false },
    ]);
    // an empty script line list is no script
    expect(c.scripts).toEqual({ prerequest: '// collection-wide\npm.request.headers.add({key: "X-Col", value: "1"});', test: "" });
    expect(c.folders.map((f: any) => f.name)).toEqual(["Admin", "Partners"]);

    const admin = folder(c, "Admin");
    expect(admin.auth).toEqual({ type: "basic", username: "admin", password: "{{adminPassword}}" });
    expect(admin.requests.map((r: any) => r.name)).toEqual(["Stats"]);
    expect(request(admin, "Stats").auth).toEqual({ type: "none" });
    expect(request(admin, "Stats").url).toBe("{{baseUrl}}/echo/stats");
    // folder scripts stay on the folder (send runs collection, folders outermost first, then request)
    expect(admin.scripts).toEqual({
      prerequest: 'console.log("admin folder");',
      test: 'pm.test("fast", () => pm.expect(pm.response.responseTime).to.be.below(2000));',
    });
    expect(request(admin, "Stats").scripts).toEqual({ prerequest: "", test: "" });

    const users = folder(c, "Admin", "Users");
    expect(users.auth).toBeNull();
    const form = request(users, "Create user (urlencoded)");
    expect(form).toMatchObject({
      method: "POST",
      url: "{{baseUrl}}/echo/users?notify=true",
      queryParams: [{ key: "dryRun", value: "1", enabled: false }],
      headers: [
        { key: "X-Request-Source", value: "postman", enabled: true },
        { key: "X-Debug", value: "1", enabled: false },
      ],
      body: "name=Ada%20L&role={{role}}",
      contentType: "application/x-www-form-urlencoded",
      auth: null,
      timeout: 30000,
      description: "Creates a user from a form.",
    });
    expect(users.scripts).toEqual({ prerequest: 'pm.variables.set("scope", "users");', test: "" });
    expect(form.scripts.prerequest).toBe("");
    expect(form.scripts.test).toBe('pm.test("created", function () {\n    pm.response.to.have.status(200);\n});');
    const upload = request(users, "Upload avatar (form-data)");
    expect(upload.contentType).toBe(`multipart/form-data; boundary=${FORM_BOUNDARY}`);
    expect(upload.body).toBe(
      `--${FORM_BOUNDARY}\r\nContent-Disposition: form-data; name="userId"\r\n\r\n42\r\n` +
        `--${FORM_BOUNDARY}\r\nContent-Disposition: form-data; name="caption"\r\n\r\nme, {{role}}\r\n--${FORM_BOUNDARY}--\r\n`,
    );

    const partners = folder(c, "Partners");
    expect(partners.auth).toEqual({ type: "apiKey", key: "X-Partner-Key", value: "{{partnerKey}}", in: "header" });
    expect(request(partners, "Signed call").auth).toBeNull();

    const note = request(c, "Create note (json)");
    expect(note).toMatchObject({
      body: '{\n  "text": "hello {{who}}"\n}',
      contentType: "application/json",
      headers: [
        { key: "X-Trace", value: "{{$guid}}", enabled: true },
        { key: "X-Old", value: "legacy", enabled: false },
      ],
      scripts: { prerequest: 'pm.environment.set("ts", Date.now());', test: 'pm.test("echo", () => pm.response.to.be.json);' },
    });

    // persisted as answered
    expect(await ok(get(`${C}/${c.id}`))).toEqual(c);
  });

  test("lists what was not carried over", () => {
    const w = imported.warnings.join("\n");
    expect(w).toContain("collection's description");
    expect(w).toContain("folder 'Admin': its description");
    expect(w).toContain("1 disabled urlencoded field(s)");
    expect(w).toContain("file field 'avatar'");
    expect(w).toContain("1 saved response(s)");
    expect(w).toContain("auth type 'awsv4' is not supported");
    expect(imported.warnings.length).toBe(6);
  });

  test("an environment file goes into ?collection_id=, sending uses it and the inherited auth", async () => {
    const id = imported.collection.id;
    const env = await ok(post(`${IMPORT}?collection_id=${id}`, fixture("local.postman_environment.json")));
    expect(env.warnings).toEqual([]);
    expect(env.collection.id).toBe(id);
    expect(env.collection.environments).toEqual([
      {
        name: "local",
        variables: [
          { key: "baseUrl", defaultValue: "https://api.example.com", currentValue: null, enabled: true, isSecret: false },
          { key: "token", defaultValue: "env-token", currentValue: null, enabled: true, isSecret: true },
          { key: "adminPassword", defaultValue: "hunter2", currentValue: null, enabled: true, isSecret: true },
          { key: "partnerKey", defaultValue: "pk-1", currentValue: null, enabled: false, isSecret: false },
        ],
      },
    ]);
    // the same name again is a conflict
    await expectError(post(`${IMPORT}?collection_id=${id}`, fixture("local.postman_environment.json")), 409, "conflict", "local");

    const users = folder(env.collection, "Admin", "Users");
    const send = (name: string) =>
      ok(post("/api/v1/compose/send", { collection_id: id, request_id: request(users, name).id, environment: "local", variables: { baseUrl: up.httpsUrl } }));

    const r1 = await send("Create user (urlencoded)");
    expect(r1.error).toBeNull();
    expect(r1.status).toBe(200);
    expect(r1.resolved_url).toBe(`${up.httpsUrl}/echo/users?notify=true`);
    const echo = JSON.parse(r1.body);
    expect(echo.method).toBe("POST");
    expect(echo.path).toBe("/echo/users?notify=true");
    expect(echo.body).toBe("name=Ada%20L&role=admin");
    expect(echo.headers["content-type"]).toBe("application/x-www-form-urlencoded");
    expect(echo.headers.authorization).toBe(`Basic ${Buffer.from("admin:hunter2").toString("base64")}`);
    expect(echo.headers["x-request-source"]).toBe("postman");
    expect(echo.headers["x-debug"]).toBeUndefined();
    // the imported scripts ran: collection, folder Admin, folder Users, then the request (pre-request and test)
    expect(echo.headers["x-col"]).toBe("1");
    expect(r1.console.map((l: any) => l.message)).toEqual(["admin folder"]);
    expect(r1.tests).toEqual([
      { name: "fast", passed: true, error: null },
      { name: "created", passed: true, error: null },
    ]);
    expect(r1.errors).toEqual([]);

    const r2 = await send("Upload avatar (form-data)");
    const echo2 = JSON.parse(r2.body);
    expect(echo2.method).toBe("PUT");
    expect(echo2.headers["content-type"]).toBe(`multipart/form-data; boundary=${FORM_BOUNDARY}`);
    expect(echo2.body).toContain('name="caption"\r\n\r\nme, admin\r\n');
    // the upstream can read it as a form
    const seen = [...up.seen].reverse().find((s) => new URL(s.url).pathname === "/echo/avatar")!;
    const form = await new Response(seen.body, { headers: { "content-type": echo2.headers["content-type"] } }).formData();
    expect(Object.fromEntries(form.entries())).toEqual({ userId: "42", caption: "me, admin" });
  });

  test("export is a valid Postman v2.1.0 collection, and importing it again gives the same collection", async () => {
    const id = imported.collection.id;
    const a = await ok(get(`${C}/${id}`));
    const exported = await ok(get(`${C}/${id}/export?format=postman`));
    expectValidV21(exported);
    expect(exported.info).toEqual({ _postman_id: id, name: "Users API", schema: POSTMAN_V21_SCHEMA });
    expect(exported.auth).toEqual({ type: "bearer", bearer: [{ key: "token", value: "{{token}}", type: "string" }] });
    expect(exported.variable).toContainEqual({ key: "unused", value: "x", type: "string", disabled: true });
    // environments are not part of a collection export
    expect(JSON.stringify(exported)).not.toContain("env-token");
    const admin = exported.item.find((i: any) => i.name === "Admin");
    expect(admin.auth.type).toBe("basic");
    const users = admin.item.find((i: any) => i.name === "Users");
    const create = users.item.find((i: any) => i.name === "Create user (urlencoded)");
    expect(create.request.body).toEqual({ mode: "urlencoded", urlencoded: [{ key: "name", value: "Ada L" }, { key: "role", value: "{{role}}" }] });
    expect(create.request.url).toEqual({
      raw: "{{baseUrl}}/echo/users?notify=true",
      host: ["{{baseUrl}}"],
      path: ["echo", "users"],
      query: [
        { key: "notify", value: "true" },
        { key: "dryRun", value: "1", disabled: true },
      ],
    });
    expect(create.request.header).toContainEqual({ key: "X-Debug", value: "1", type: "text", disabled: true });
    expect(create.event.map((e: any) => e.listen)).toEqual(["test"]);
    // folder scripts are the folder's events again
    expect(admin.event.map((e: any) => e.listen)).toEqual(["prerequest", "test"]);
    expect(users.event).toEqual([{ listen: "prerequest", script: { type: "text/javascript", exec: ['pm.variables.set("scope", "users");'] } }]);
    const upload = users.item.find((i: any) => i.name === "Upload avatar (form-data)");
    expect(upload.request.body).toEqual({
      mode: "formdata",
      formdata: [
        { key: "userId", value: "42", type: "text" },
        { key: "caption", value: "me, {{role}}", type: "text" },
      ],
    });
    const note = exported.item.find((i: any) => i.name === "Create note (json)");
    expect(note.request.body.options).toEqual({ raw: { language: "json" } });

    const again = await ok(post(IMPORT, exported));
    expect(again.collection.id).not.toBe(id);
    expect(shape(again.collection)).toEqual(shape(a));
    // only what the first import already reported remains to report (nothing: it was dropped then)
    expect(again.warnings).toEqual([]);
  });

  test("one environment exports as a Postman environment file", async () => {
    const id = imported.collection.id;
    const env = await ok(get(`${C}/${id}/export?format=postman-environment&environment=local`));
    expect(env).toMatchObject({ name: "local", _postman_variable_scope: "environment" });
    expect(env.values).toEqual(fixture("local.postman_environment.json").values);
    await expectError(get(`${C}/${id}/export?format=postman-environment`), 400, "bad_request", "environment");
    await expectError(get(`${C}/${id}/export?format=postman-environment&environment=prod`), 404, "not_found", "prod");
  });
});

describe("POST /compose/import (Postman v2.0)", () => {
  test("old url, header and auth shapes", async () => {
    const { collection: c, warnings } = await ok(post(IMPORT, fixture("legacy.postman_collection.v2.0.json")));
    expect(c.name).toBe("Legacy");
    expect(c.defaultAuth).toEqual({ type: "basic", username: "old", password: "school" });
    const [plain, keyed, parts] = c.requests;
    expect(plain).toMatchObject({ name: "Plain GET", method: "GET", url: "{{baseUrl}}/echo/plain?x=1" });
    expect(keyed).toMatchObject({
      method: "POST",
      url: "{{baseUrl}}/echo/keyed",
      headers: [
        { key: "X-One", value: "1", enabled: true },
        { key: "X-Two", value: "two words", enabled: true },
      ],
      body: "plain text",
      contentType: "",
      auth: { type: "apiKey", key: "api_key", value: "k-123", in: "query" },
      description: "v2.0 shapes: url string, header string, apikey object",
    });
    expect(parts).toMatchObject({ url: "https://api.example.com:8443/v1/items?q=a", queryParams: [{ key: "off", value: "1", enabled: false }], auth: null });
    expect(warnings).toEqual(["request 'Legacy / Parts': auth type 'digest' is not supported and was not imported (it inherits instead)"]);

    // sending the v2.0 request with its query API key
    const r = await ok(post("/api/v1/compose/send", { collection_id: c.id, request_id: keyed.id, variables: { baseUrl: up.httpUrl } }));
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body).path).toBe("/echo/keyed?api_key=k-123");

    const exported = await ok(get(`${C}/${c.id}/export`));
    expectValidV21(exported);
    expect(exported.item.find((i: any) => i.name === "Parts").request.url).toEqual({
      raw: "https://api.example.com:8443/v1/items?q=a",
      protocol: "https",
      host: ["api", "example", "com"],
      port: "8443",
      path: ["v1", "items"],
      query: [
        { key: "q", value: "a" },
        { key: "off", value: "1", disabled: true },
      ],
    });
    const again = await ok(post(IMPORT, exported));
    expect(shape(again.collection)).toEqual(shape(await ok(get(`${C}/${c.id}`))));
  });
});

describe("export of a collection made here", () => {
  test("collection and folder headers go into each request; other content types become a header", async () => {
    const c = await ok(
      post(C, {
        name: "Native",
        defaultHeaders: [
          { key: "Accept", value: "application/json" },
          { key: "X-Team", value: "core" },
        ],
        defaultAuth: { type: "apiKey", key: "k", value: "v", in: "query" },
        folders: [{ name: "F", headers: [{ key: "x-team", value: "edge" }], requests: [{ name: "in f", method: "GET", url: "http://h/x", queryParams: [{ key: "a", value: "1" }, { key: "b", value: "2", enabled: false }] }] }],
        requests: [{ name: "top", method: "post", url: "{{base}}/y", body: "<a/>", contentType: "application/vnd.x+xml", timeout: 5000 }],
      }),
    );
    const exported = await ok(get(`${C}/${c.id}/export`));
    expectValidV21(exported);
    expect(exported.auth).toEqual({
      type: "apikey",
      apikey: [
        { key: "key", value: "k", type: "string" },
        { key: "value", value: "v", type: "string" },
        { key: "in", value: "query", type: "string" },
      ],
    });
    const inF = exported.item[0].item[0];
    expect(inF.request.header).toEqual([
      { key: "Accept", value: "application/json", type: "text" },
      { key: "x-team", value: "edge", type: "text" },
    ]);
    expect(inF.request.url.raw).toBe("http://h/x?a=1");
    expect(inF.request.url.query).toEqual([
      { key: "a", value: "1" },
      { key: "b", value: "2", disabled: true },
    ]);
    const top = exported.item[1];
    expect(top.request.method).toBe("POST");
    expect(top.request.body).toEqual({ mode: "raw", raw: "<a/>" });
    expect(top.request.header).toContainEqual({ key: "Content-Type", value: "application/vnd.x+xml", type: "text" });
  });
});

describe("errors", () => {
  test("not Postman JSON is a 400 saying so", async () => {
    await expectError(post(IMPORT, { hello: "world" }), 400, "bad_request", "not a Postman collection");
    await expectError(post(IMPORT, [1, 2]), 400, "bad_request", "JSON object");
    await expectError(post(IMPORT, { info: { name: "x", schema: "https://example.com/other.json" }, item: [] }), 400, "bad_request", "info.schema");
    await expectError(post(IMPORT, { info: { name: "x", schema: "https://schema.getpostman.com/json/collection/v1.0.0/collection.json" } }), 400, "bad_request", "v1.0");
    await expectError(post(IMPORT, { id: "x", name: "old", order: [], requests: [] }), 400, "bad_request", "v1");
    await expectError(post(IMPORT, "not json"), 400, "bad_request", "JSON");
  });

  test("an environment needs collection_id; a collection refuses it", async () => {
    await expectError(post(IMPORT, fixture("local.postman_environment.json")), 400, "bad_request", "collection_id");
    await expectError(post(`${IMPORT}?collection_id=nope`, fixture("local.postman_environment.json")), 404, "not_found", "nope");
    await expectError(post(`${IMPORT}?collection_id=nope`, fixture("legacy.postman_collection.v2.0.json")), 400, "bad_request", "collection_id");
  });

  test("export: unknown format 400, unknown collection 404", async () => {
    const c = await ok(post(C, { name: "E" }));
    await expectError(get(`${C}/${c.id}/export?format=har`), 400, "bad_request", "har");
    await expectError(get(`${C}/nope/export?format=postman`), 404, "not_found", "nope");
  });
});

describe("the v2.1 shape check itself", () => {
  test("accepts the hand-written v2.1 fixture and rejects broken documents", () => {
    expectValidV21(fixture("users-api.postman_collection.json"));
    const bad = [
      { info: { name: "x" }, item: [] }, // no schema URL
      { info: { name: "x", schema: POSTMAN_V21_SCHEMA }, item: [{ name: "r", request: { method: "GET", url: "http://x/", body: { mode: "binary" } } }] },
      { info: { name: "x", schema: POSTMAN_V21_SCHEMA }, item: [{ name: "r", request: { method: "GET", url: "http://x/", header: [{ value: "no key" }] } }] },
      { info: { name: "x", schema: POSTMAN_V21_SCHEMA }, item: [{ name: "r", request: { method: "GET", url: "http://x/", auth: { type: "magic" } } }] },
      { info: { name: "x", schema: POSTMAN_V21_SCHEMA }, item: [{ name: "f", item: [{ name: "nothing" }] }] },
      { info: { name: "x", schema: POSTMAN_V21_SCHEMA }, item: [], event: [{ script: { exec: ["x"] } }] },
    ];
    for (const doc of bad) expect(validateV21(doc)).toBe(false);
  });
});
