import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { startService } from "../../helpers/service.ts";
import { startTapwire, tempDir } from "../../helpers/tapwire-process.ts";
import { curl, startUpstream, type Upstream } from "../../helpers/upstream.ts";

type Svc = Awaited<ReturnType<typeof startService>>;
let svc: Svc;

beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc.stop();
});

const json = { "content-type": "application/json" };
async function call(method: string, path: string, body?: unknown, raw?: string) {
  const r = await svc.call(path, { method, headers: json, body: raw ?? (body === undefined ? undefined : JSON.stringify(body)) });
  const text = await r.text();
  return { status: r.status, text, json: text ? JSON.parse(text) : null };
}

function rule(id: string, over: Record<string, unknown> = {}) {
  return {
    id,
    name: `rule ${id}`,
    method: "",
    url_pattern: "**",
    request_script: "pm.request.headers.upsert({key: 'X-A', value: '1'});",
    response_script: "",
    apply_to_request: true,
    apply_to_response: false,
    enabled: true,
    ...over,
  };
}

beforeEach(async () => {
  expect((await call("PUT", "/api/v1/script-rules/sync", [])).status).toBe(200);
  expect((await call("PUT", "/api/v1/script-rules/toggle", { enabled: true })).status).toBe(200);
});

describe("script rules API (spec 4.15)", () => {
  test("GET answers the list wrapper {scripting_enabled, rules}", async () => {
    const r = await call("GET", "/api/v1/script-rules");
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ scripting_enabled: true, rules: [] });
  });

  test("POST creates and answers the persisted rule; GET lists it; a duplicate id is 409", async () => {
    const a = rule("a");
    const r = await call("POST", "/api/v1/script-rules", a);
    expect(r.status).toBe(200);
    expect(r.json).toEqual(a);
    expect((await call("GET", "/api/v1/script-rules")).json).toEqual({ scripting_enabled: true, rules: [a] });
    const dup = await call("POST", "/api/v1/script-rules", rule("a", { name: "other" }));
    expect(dup.status).toBe(409);
    expect(dup.json.error.code).toBe("conflict");
    expect(dup.json.error.message).toContain("'a'");
  });

  test("every field is required on create: a missing one is 400 naming it", async () => {
    for (const field of ["id", "name", "method", "url_pattern", "request_script", "response_script", "apply_to_request", "apply_to_response", "enabled"]) {
      const body: Record<string, unknown> = rule("m");
      delete body[field];
      const r = await call("POST", "/api/v1/script-rules", body);
      expect(r.status).toBe(400);
      expect(r.json.error.message).toContain(`'${field}'`);
    }
    expect((await call("GET", "/api/v1/script-rules")).json.rules).toEqual([]);
  });

  test("a body that does not deserialize is 400: bad JSON, wrong types, a bad pattern or method, not an object", async () => {
    expect((await call("POST", "/api/v1/script-rules", undefined, "{not json")).status).toBe(400);
    const wrongType = await call("POST", "/api/v1/script-rules", rule("w", { enabled: "yes" }));
    expect(wrongType.status).toBe(400);
    expect(wrongType.json.error.message).toContain("enabled");
    const badMethod = await call("POST", "/api/v1/script-rules", rule("w", { method: "GE T" }));
    expect(badMethod.status).toBe(400);
    expect(badMethod.json.error.message).toContain("method");
    const badPattern = await call("POST", "/api/v1/script-rules", rule("w", { url_pattern: "" }));
    expect(badPattern.status).toBe(400);
    expect((await call("POST", "/api/v1/script-rules", [rule("w")])).status).toBe(400);
  });

  test("PUT /script-rules/toggle sets the master switch", async () => {
    const r = await call("PUT", "/api/v1/script-rules/toggle", { enabled: false });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ scripting_enabled: false });
    expect((await call("GET", "/api/v1/script-rules")).json.scripting_enabled).toBe(false);
    expect((await call("PUT", "/api/v1/script-rules/toggle", { enabled: "no" })).status).toBe(400);
    expect((await call("PUT", "/api/v1/script-rules/toggle", {})).status).toBe(400);
  });

  test("PUT /script-rules/{id} replaces one rule; 400 when ids differ, 404 when unknown", async () => {
    await call("POST", "/api/v1/script-rules", rule("p"));
    const changed = rule("p", { name: "renamed", method: "POST" });
    const r = await call("PUT", "/api/v1/script-rules/p", changed);
    expect(r.status).toBe(200);
    expect(r.json).toEqual(changed);
    expect((await call("GET", "/api/v1/script-rules")).json.rules).toEqual([changed]);
    const mismatch = await call("PUT", "/api/v1/script-rules/p", rule("q"));
    expect(mismatch.status).toBe(400);
    expect(mismatch.json.error.message).toContain("does not match");
    expect((await call("PUT", "/api/v1/script-rules/nope", rule("nope"))).status).toBe(404);
  });

  test("DELETE answers 204, then 404", async () => {
    await call("POST", "/api/v1/script-rules", rule("d"));
    const r = await call("DELETE", "/api/v1/script-rules/d");
    expect(r.status).toBe(204);
    expect(r.text).toBe("");
    expect((await call("DELETE", "/api/v1/script-rules/d")).status).toBe(404);
  });

  test("POST /script-rules/{id}/toggle flips one rule and answers it; 404 when unknown", async () => {
    await call("POST", "/api/v1/script-rules", rule("t"));
    const off = await call("POST", "/api/v1/script-rules/t/toggle");
    expect(off.status).toBe(200);
    expect(off.json.enabled).toBe(false);
    const on = await call("POST", "/api/v1/script-rules/t/toggle");
    expect(on.json.enabled).toBe(true);
    expect((await call("POST", "/api/v1/script-rules/zz/toggle")).status).toBe(404);
  });

  test("PUT /script-rules/sync replaces the whole list; one bad rule or a duplicate id leaves the old list in place", async () => {
    await call("POST", "/api/v1/script-rules", rule("old"));
    const list = [rule("x"), rule("y", { enabled: false })];
    const r = await call("PUT", "/api/v1/script-rules/sync", list);
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ scripting_enabled: true, rules: list });

    const bad = await call("PUT", "/api/v1/script-rules/sync", [rule("z"), { ...rule("w"), apply_to_request: undefined }]);
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toContain("[1]");
    const dup = await call("PUT", "/api/v1/script-rules/sync", [rule("z"), rule("z")]);
    expect(dup.status).toBe(400);
    expect(dup.json.error.message).toContain("duplicate");
    expect((await call("PUT", "/api/v1/script-rules/sync", { rules: [] })).status).toBe(400);
    expect((await call("GET", "/api/v1/script-rules")).json.rules).toEqual(list);
  });

  test("the state file is written owner-only and holds the rules", async () => {
    await call("POST", "/api/v1/script-rules", rule("f"));
    const file = join(svc.config.dataDir, "script-rules.json");
    const saved = JSON.parse(readFileSync(file, "utf8"));
    expect(saved.rules.map((r: { id: string }) => r.id)).toEqual(["f"]);
    expect(statSync(file).mode & 0o077).toBe(0);
  });

  test("the OpenAPI document lists every scripting route", async () => {
    const doc = (await (await svc.call("/api/v1/openapi.json")).json()) as { paths: Record<string, Record<string, unknown>> };
    expect(Object.keys(doc.paths["/api/v1/script-rules"] ?? {}).sort()).toEqual(["get", "post"]);
    expect(Object.keys(doc.paths["/api/v1/script-rules/toggle"] ?? {})).toContain("put");
    expect(Object.keys(doc.paths["/api/v1/script-rules/sync"] ?? {})).toContain("put");
    expect(Object.keys(doc.paths["/api/v1/script-rules/{id}"] ?? {}).sort()).toEqual(["delete", "put"]);
    expect(Object.keys(doc.paths["/api/v1/script-rules/{id}/toggle"] ?? {})).toContain("post");
    expect(Object.keys(doc.paths["/api/v1/scripts/execute"] ?? {})).toContain("post");
  });
});

describe("script rules persistence", () => {
  let up: Upstream;
  beforeAll(() => {
    up = startUpstream();
  });
  afterAll(() => up.stop());

  test("rules, per-rule flags and the master switch survive kill -9, and still run", async () => {
    const dataDir = tempDir("tapwire-script-rules-kill-");
    let tw = await startTapwire({ dataDir });
    const api = (m: string, p: string, b?: unknown) => tw.api(p, { method: m, headers: json, body: b === undefined ? undefined : JSON.stringify(b) });
    try {
      expect((await api("POST", "/api/v1/script-rules", rule("keep", { url_pattern: "127.0.0.1/echo", request_script: "pm.request.headers.upsert({key: 'X-Kept', value: 'yes'})" }))).status).toBe(200);
      expect((await api("POST", "/api/v1/script-rules", rule("off"))).status).toBe(200);
      expect((await api("POST", "/api/v1/script-rules/off/toggle")).status).toBe(200);
      expect((await api("PUT", "/api/v1/script-rules/toggle", { enabled: false })).status).toBe(200);
      const before = (await (await api("GET", "/api/v1/script-rules")).json()) as { scripting_enabled: boolean; rules: { id: string; enabled: boolean }[] };
      expect(await tw.stop("SIGKILL")).not.toBe(0);

      tw = await startTapwire({ dataDir });
      const after = (await (await api("GET", "/api/v1/script-rules")).json()) as { scripting_enabled: boolean; rules: { id: string; enabled: boolean }[] };
      expect(after).toEqual(before);
      expect(after.scripting_enabled).toBe(false);
      expect(after.rules.map((r) => [r.id, r.enabled])).toEqual([["keep", true], ["off", false]]);
      expect((await api("PUT", "/api/v1/script-rules/toggle", { enabled: true })).status).toBe(200);
      const r = await curl(["-x", `http://127.0.0.1:${tw.handshake.proxy_port}`, `${up.httpUrl}/echo`]);
      expect(JSON.parse(r.out).headers["x-kept"]).toBe("yes");
    } finally {
      await tw.stop("SIGKILL");
    }
  }, 30_000); // two start-ups of tapwire and a kill -9: more than the default 5 s on a loaded 2-core machine
});
