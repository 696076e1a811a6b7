import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { TCPSocketListener } from "bun";
import { startService } from "../../helpers/service.ts";

/** A response body as JSON (typed loosely, for assertions). */
async function json(r: Response | Promise<Response>): Promise<any> {
  return await (await r).json();
}

type Svc = Awaited<ReturnType<typeof startService>>;
let svc: Svc;

const JSON_HEADERS = { "content-type": "application/json" };
const post = (path: string, body?: unknown) =>
  svc.call(path, body === undefined ? { method: "POST" } : { method: "POST", body: JSON.stringify(body), headers: JSON_HEADERS });
const put = (path: string, body: unknown) => svc.call(path, { method: "PUT", body: JSON.stringify(body), headers: JSON_HEADERS });
const del = (path: string) => svc.call(path, { method: "DELETE" });
const get = (path: string) => svc.call(path);

async function expectError(r: Response, status: number, field?: string): Promise<string> {
  expect(r.status).toBe(status);
  const b = (await json(r)) as { error: { code: string; message: string } };
  expect(typeof b.error.code).toBe("string");
  if (field !== undefined) expect(b.error.message).toContain(`'${field}'`);
  return b.error.message;
}

/** Holds a port with a plain listener (so the mock listener cannot take it). */
function occupyPort(): TCPSocketListener<undefined> {
  return Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
}

beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.stop();
});

const FULL_DEFAULTS = {
  name: "",
  enabled: true,
  method: "",
  status_code: 200,
  status_text: null,
  headers: [],
  body: "",
  body_is_base64: false,
  latency_ms: null,
};

describe("rules: snapshot, create, replace, delete, toggle", () => {
  test("GET /mock: the master flag (on) and no rules", async () => {
    const r = await get("/api/v1/mock");
    expect(r.status).toBe(200);
    expect(await json(r)).toEqual({ enabled: true, rules: [] });
  });

  test("POST /rules: 200 with the persisted rule, defaults filled in; in the snapshot and in mock.json", async () => {
    const r = await post("/api/v1/mock/rules", { id: "r1", url_pattern: "/a/*" });
    expect(r.status).toBe(200);
    expect(await json(r)).toEqual({ id: "r1", url_pattern: "/a/*", ...FULL_DEFAULTS });
    const full = {
      id: "r2",
      name: "Second",
      enabled: false,
      method: "post",
      url_pattern: "/b?x=*",
      status_code: 418,
      status_text: "Short And Stout",
      headers: [["X-A", "1"], ["X-A", "2"]],
      body: "aGk=",
      body_is_base64: true,
      latency_ms: 5,
    };
    const r2 = await post("/api/v1/mock/rules", full);
    expect(r2.status).toBe(200);
    expect(await json(r2)).toEqual(full);
    const snap = await json(get("/api/v1/mock"));
    expect(snap.rules.map((x: { id: string }) => x.id)).toEqual(["r1", "r2"]);
    const onDisk = JSON.parse(readFileSync(join(svc.config.dataDir, "mock.json"), "utf8"));
    expect(onDisk.rules[1]).toEqual(full);
  });

  test("POST /rules with an existing id: 409, nothing changes", async () => {
    await expectError(await post("/api/v1/mock/rules", { id: "r1", url_pattern: "/other" }), 409);
    const snap = await json(get("/api/v1/mock"));
    expect(snap.rules.find((x: { id: string }) => x.id === "r1").url_pattern).toBe("/a/*");
  });

  test("POST /rules with an invalid body: 400 naming the field", async () => {
    await expectError(await post("/api/v1/mock/rules", { url_pattern: "/x" }), 400, "id");
    await expectError(await post("/api/v1/mock/rules", { id: "bad" }), 400, "url_pattern");
    await expectError(await post("/api/v1/mock/rules", { id: "bad", url_pattern: "/x", status_code: "200" }), 400, "status_code");
    await expectError(await post("/api/v1/mock/rules", { id: "bad", url_pattern: "/x", status_code: 99 }), 400, "status_code");
    await expectError(await post("/api/v1/mock/rules", { id: "bad", url_pattern: "/x", status_text: "A\r\nSet-Cookie: x=1" }), 400, "status_text");
    await expectError(await post("/api/v1/mock/rules", { id: "bad", url_pattern: "/x", headers: { "X-A": "1" } }), 400, "headers");
    await expectError(await post("/api/v1/mock/rules", { id: "bad", url_pattern: "/x", headers: [["X A", "1"]] }), 400, "headers.0.0");
    await expectError(await post("/api/v1/mock/rules", { id: "bad", url_pattern: "/x", headers: [["X-A", 1]] }), 400, "headers.0.1");
    await expectError(await post("/api/v1/mock/rules", { id: "bad", url_pattern: "/x", body: "%%%", body_is_base64: true }), 400, "body");
    await expectError(await post("/api/v1/mock/rules", { id: "bad", url_pattern: "/x", latency_ms: 1.5 }), 400, "latency_ms");
    await expectError(await post("/api/v1/mock/rules", { id: "bad", url_pattern: "/x", body_is_base64: "yes" }), 400, "body_is_base64");
    const r = await svc.call("/api/v1/mock/rules", { method: "POST", body: "{not json", headers: JSON_HEADERS });
    expect(r.status).toBe(400);
    const snap = await json(get("/api/v1/mock"));
    expect(snap.rules.some((x: { id: string }) => x.id === "bad")).toBe(false);
  });

  test("PUT /rules/{id}: replaces (defaults re-applied); 404 for an unknown id; 400 for a bad body or another id", async () => {
    const r = await put("/api/v1/mock/rules/r1", { id: "r1", url_pattern: "/a2", status_code: 201 });
    expect(r.status).toBe(200);
    expect(await json(r)).toEqual({ id: "r1", url_pattern: "/a2", ...FULL_DEFAULTS, status_code: 201 });
    await expectError(await put("/api/v1/mock/rules/nope", { id: "nope", url_pattern: "/x" }), 404);
    await expectError(await put("/api/v1/mock/rules/r1", { id: "r1", url_pattern: "/x", status_code: 42 }), 400, "status_code");
    await expectError(await put("/api/v1/mock/rules/r1", { id: "r9", url_pattern: "/x" }), 400);
    expect((await json(get("/api/v1/mock"))).rules[0].url_pattern).toBe("/a2");
  });

  test("POST /rules/{id}/toggle: the updated rule; 404 for an unknown id", async () => {
    const r = await post("/api/v1/mock/rules/r2/toggle");
    expect(r.status).toBe(200);
    expect((await json(r)).enabled).toBe(true);
    expect((await json(post("/api/v1/mock/rules/r2/toggle"))).enabled).toBe(false);
    await expectError(await post("/api/v1/mock/rules/nope/toggle"), 404);
  });

  test("DELETE /rules/{id}: 204 with an empty body; 404 for an unknown id", async () => {
    await post("/api/v1/mock/rules", { id: "gone", url_pattern: "/gone" });
    const r = await del("/api/v1/mock/rules/gone");
    expect(r.status).toBe(204);
    expect(await r.text()).toBe("");
    await expectError(await del("/api/v1/mock/rules/gone"), 404);
  });

  test("PUT /enabled: sets the master flag and answers {enabled}; 400 for a bad body", async () => {
    const off = await put("/api/v1/mock/enabled", { enabled: false });
    expect(off.status).toBe(200);
    expect(await json(off)).toEqual({ enabled: false });
    expect((await json(get("/api/v1/mock"))).enabled).toBe(false);
    await expectError(await put("/api/v1/mock/enabled", { enabled: "no" }), 400, "enabled");
    expect(await json(put("/api/v1/mock/enabled", { enabled: true }))).toEqual({ enabled: true });
  });

  test("every route needs the bearer token", async () => {
    for (const [method, path] of [
      ["GET", "/api/v1/mock"],
      ["GET", "/api/v1/mock/status"],
      ["GET", "/api/v1/mock/match?path=/"],
      ["POST", "/api/v1/mock/start"],
      ["POST", "/api/v1/mock/stop"],
      ["POST", "/api/v1/mock/rules"],
    ] as const) {
      const r = await fetch(svc.url(path), { method });
      expect(r.status).toBe(401);
    }
  });
});

describe("GET /mock/match", () => {
  beforeAll(async () => {
    for (const r of (await json(get("/api/v1/mock"))).rules) await del(`/api/v1/mock/rules/${r.id}`);
    await post("/api/v1/mock/rules", { id: "m-post", method: "post", url_pattern: "/users/*" });
    await post("/api/v1/mock/rules", { id: "m-off", url_pattern: "/users/*", enabled: false });
    await post("/api/v1/mock/rules", { id: "m-any", url_pattern: "/users/*" });
    await post("/api/v1/mock/rules", { id: "m-q", url_pattern: "/search?q=*" });
  });

  test("{matched, rule}: the first enabled rule whose method and pattern match", async () => {
    const a = await json(get("/api/v1/mock/match?method=POST&path=/users/1"));
    expect(a.matched).toBe(true);
    expect(a.rule.id).toBe("m-post");
    expect(a.rule).toEqual({ ...FULL_DEFAULTS, id: "m-post", method: "post", url_pattern: "/users/*" });
    expect((await json(get("/api/v1/mock/match?method=GET&path=/users/1"))).rule.id).toBe("m-any");
    expect((await json(get("/api/v1/mock/match?method=get&path=" + encodeURIComponent("/users/1?x=1")))).rule.id).toBe("m-any");
    expect((await json(get("/api/v1/mock/match?path=" + encodeURIComponent("/search?q=abc")))).rule.id).toBe("m-q");
  });

  test("no match: {matched: false, rule: null}; method defaults to GET", async () => {
    expect(await json(get("/api/v1/mock/match?path=/nothing"))).toEqual({ matched: false, rule: null, enabled: true });
    expect(await json(get("/api/v1/mock/match?path=/search"))).toEqual({ matched: false, rule: null, enabled: true });
  });

  test("master flag off: nothing matches (what the listener would answer)", async () => {
    await put("/api/v1/mock/enabled", { enabled: false });
    expect(await json(get("/api/v1/mock/match?method=GET&path=/users/1"))).toEqual({ matched: false, rule: null, enabled: false });
    await put("/api/v1/mock/enabled", { enabled: true });
  });

  test("path is required: 400 naming it", async () => {
    await expectError(await get("/api/v1/mock/match?method=GET"), 400, "path");
  });
});

describe("listener control: status, start, stop", () => {
  test("status before any start: not running, port 9100", async () => {
    const r = await get("/api/v1/mock/status");
    expect(r.status).toBe(200);
    expect(await json(r)).toEqual({ running: false, port: 9100 });
    expect("mock_port" in (await json(fetch(svc.url("/api/v1/health"))))).toBe(false);
  });

  test("POST /start {port: 0}: 200 {running: true, port} on a free port; status and health agree; it answers HTTP", async () => {
    const r = await post("/api/v1/mock/start", { port: 0 });
    expect(r.status).toBe(200);
    const body = await json(r);
    expect(body.running).toBe(true);
    expect(body.port).toBeGreaterThan(0);
    expect(await json(get("/api/v1/mock/status"))).toEqual({ running: true, port: body.port });
    expect((await json(fetch(svc.url("/api/v1/health")))).mock_port).toBe(body.port);
    const res = await fetch(`http://127.0.0.1:${body.port}/nothing-here`);
    expect(res.status).toBe(404);
    expect((await json(res)).error.code).toBe("no_mock_rule");
  });

  test("POST /start while running: 409, the listener keeps its port", async () => {
    const before = await json(get("/api/v1/mock/status"));
    await expectError(await post("/api/v1/mock/start", { port: 0 }), 409);
    await expectError(await post("/api/v1/mock/start"), 409);
    expect(await json(get("/api/v1/mock/status"))).toEqual(before);
  });

  test("POST /stop: 204; the port is closed; status keeps the last port; stop again is 204", async () => {
    const { port } = await json(get("/api/v1/mock/status"));
    const r = await post("/api/v1/mock/stop");
    expect(r.status).toBe(204);
    expect(await r.text()).toBe("");
    expect(await json(get("/api/v1/mock/status"))).toEqual({ running: false, port });
    expect("mock_port" in (await json(fetch(svc.url("/api/v1/health"))))).toBe(false);
    let refused = false;
    try {
      await fetch(`http://127.0.0.1:${port}/`);
    } catch {
      refused = true;
    }
    expect(refused).toBe(true);
    expect((await post("/api/v1/mock/stop")).status).toBe(204);
  });

  test("POST /start on a taken port: 409, still stopped", async () => {
    const holder = occupyPort();
    try {
      const msg = await expectError(await post("/api/v1/mock/start", { port: holder.port }), 409);
      expect(msg).toContain(String(holder.port));
      expect((await json(get("/api/v1/mock/status"))).running).toBe(false);
    } finally {
      holder.stop(true);
    }
  });

  test("POST /start on a given free port uses exactly that port", async () => {
    const probe = occupyPort();
    const port = probe.port;
    probe.stop(true);
    const r = await post("/api/v1/mock/start", { port });
    expect(r.status).toBe(200);
    expect(await json(r)).toEqual({ running: true, port });
    expect((await post("/api/v1/mock/stop")).status).toBe(204);
  });

  test("POST /start with an invalid port: 400 naming it", async () => {
    for (const port of [-1, 65536, 1.5, "9100", true]) await expectError(await post("/api/v1/mock/start", { port }), 400, "port");
    await expectError(await post("/api/v1/mock/start", [1]), 400);
  });

  test("POST /start without a body (or with port null) uses 9100: 200 if 9100 is free, else 409", async () => {
    let free = true;
    try {
      Bun.listen({ hostname: "127.0.0.1", port: 9100, socket: { data() {} } }).stop(true);
    } catch {
      free = false;
    }
    for (const send of [() => post("/api/v1/mock/start"), () => post("/api/v1/mock/start", { port: null }), () => post("/api/v1/mock/start", {})]) {
      const r = await send();
      if (free) {
        expect(r.status).toBe(200);
        expect(await json(r)).toEqual({ running: true, port: 9100 });
        expect((await post("/api/v1/mock/stop")).status).toBe(204);
      } else {
        await expectError(r, 409);
      }
    }
  });
});

describe("launch and restart", () => {
  test("--mock-port 0 (config.mockPort): the listener runs at launch; health and status show its port", async () => {
    const s = await startService({ mockPort: 0 });
    try {
      const st = await json(s.call("/api/v1/mock/status"));
      expect(st.running).toBe(true);
      expect(st.port).toBeGreaterThan(0);
      expect((await json(fetch(s.url("/api/v1/health")))).mock_port).toBe(st.port);
      expect((await fetch(`http://127.0.0.1:${st.port}/x`)).status).toBe(404);
    } finally {
      await s.stop();
    }
  });

  test("--mock-port on a taken port: the service does not start, and says why", async () => {
    const holder = occupyPort();
    try {
      let err: Error | null = null;
      try {
        const s = await startService({ mockPort: holder.port });
        await s.stop();
      } catch (e) {
        err = e as Error;
      }
      expect(err?.message).toContain(`--mock-port ${holder.port}`);
      expect(err?.message).toContain("in use");
    } finally {
      holder.stop(true);
    }
  });

  test("rules and the master flag survive a restart; the listener does not run unless asked", async () => {
    const s1 = await startService();
    const dataDir = s1.config.dataDir;
    const rule = { id: "keep", name: "Kept", method: "GET", url_pattern: "/kept/*", status_code: 203, status_text: "Mocked Up", headers: [["X-K", "v"]], body: "AAEC", body_is_base64: true, latency_ms: 10, enabled: false };
    expect((await s1.call("/api/v1/mock/rules", { method: "POST", body: JSON.stringify(rule), headers: JSON_HEADERS })).status).toBe(200);
    expect((await s1.call("/api/v1/mock/rules", { method: "POST", body: JSON.stringify({ id: "second", url_pattern: "/s" }), headers: JSON_HEADERS })).status).toBe(200);
    expect((await s1.call("/api/v1/mock/enabled", { method: "PUT", body: JSON.stringify({ enabled: false }), headers: JSON_HEADERS })).status).toBe(200);
    expect((await s1.call("/api/v1/mock/start", { method: "POST", body: JSON.stringify({ port: 0 }), headers: JSON_HEADERS })).status).toBe(200);
    await s1.stop();
    expect(existsSync(join(dataDir, "mock.json"))).toBe(true);

    const s2 = await startService({ dataDir });
    try {
      const snap = await json(s2.call("/api/v1/mock"));
      expect(snap.enabled).toBe(false);
      expect(snap.rules).toEqual([rule, { id: "second", url_pattern: "/s", ...FULL_DEFAULTS }]);
      expect((await json(s2.call("/api/v1/mock/status"))).running).toBe(false);
      await expectError(await s2.call("/api/v1/mock/rules", { method: "POST", body: JSON.stringify({ id: "keep", url_pattern: "/x" }), headers: JSON_HEADERS }), 409);
    } finally {
      await s2.stop();
    }
  });

  test("the OpenAPI document lists every mock route", async () => {
    const doc = await json(fetch(svc.url("/api/v1/openapi.json")));
    const paths = Object.keys(doc.paths);
    for (const p of ["/api/v1/mock/status", "/api/v1/mock/match", "/api/v1/mock/start", "/api/v1/mock/stop", "/api/v1/mock/enabled", "/api/v1/mock/rules", "/api/v1/mock/rules/{id}", "/api/v1/mock/rules/{id}/toggle"]) {
      expect(paths).toContain(p);
    }
  });
});
