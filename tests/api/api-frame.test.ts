import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Elysia, t } from "elysia";
import { Type } from "@sinclair/typebox";
import { buildApi } from "../../src/api/app.ts";
import { UintString } from "../../src/api/errors.ts";
import { tokenMatches } from "../../src/api/guard.ts";
import { startService } from "../helpers/service.ts";
import { curl } from "../helpers/upstream.ts";

type Svc = Awaited<ReturnType<typeof startService>>;
let svc: Svc;
beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc.stop();
});

/** Every route the app serves, with path parameters filled in. */
function allRoutes(): { method: string; path: string }[] {
  return svc.app.routes
    .filter((r) => r.method !== "*" && r.method !== "HEAD" && r.method !== "OPTIONS")
    .map((r) => ({ method: r.method, path: r.path.replace(/:[A-Za-z0-9_]+/g, "1") }));
}

describe("API frame: auth on every route", () => {
  // the web UI's page and assets carry no data (tests/ui/ui-server.test.ts checks them)
  const PUBLIC = new Set(["GET /api/v1/health", "GET /api/v1/openapi.json", "GET /api/v1/docs", "GET /ui/", "GET /ui/index.html", "GET /ui/app.js", "GET /ui/app.css", "GET /ui/favicon.svg", "GET /ui/*"]);

  test("the app has routes to check (sanity)", () => {
    const r = allRoutes().map((x) => `${x.method} ${x.path}`);
    expect(r).toContain("GET /api/v1/capture/status");
    expect(r).toContain("POST /api/v1/capture/start");
    expect(r.length).toBeGreaterThan(5);
  });

  test("every authenticated route answers 401 without a token and with a wrong token", async () => {
    const checked: string[] = [];
    for (const { method, path } of allRoutes()) {
      if (PUBLIC.has(`${method} ${path}`)) continue;
      const body = method === "GET" || method === "DELETE" ? undefined : "{}";
      const none = await fetch(svc.url(path), { method, body, headers: { "content-type": "application/json" } });
      expect({ route: `${method} ${path}`, status: none.status }).toEqual({ route: `${method} ${path}`, status: 401 });
      const j: any = await none.json();
      expect(j.error.code).toBe("unauthorized");
      expect(typeof j.error.message).toBe("string");
      const wrong = await fetch(svc.url(path), {
        method,
        body,
        headers: { "content-type": "application/json", authorization: `Bearer ${"0".repeat(64)}` },
      });
      expect({ route: `${method} ${path}`, status: wrong.status }).toEqual({ route: `${method} ${path}`, status: 401 });
      checked.push(path);
    }
    expect(checked.length).toBeGreaterThan(3);
  });

  test("a malformed Authorization header is 401", async () => {
    for (const h of ["Basic abc", "Bearer", `Bearer ${svc.token}x`, svc.token]) {
      const r = await fetch(svc.url("/api/v1/capture/status"), { headers: { authorization: h } });
      expect(r.status).toBe(401);
    }
  });

  test("health answers 200 without a token, with the spec fields", async () => {
    const r = await fetch(svc.url("/api/v1/health"));
    expect(r.status).toBe(200);
    const h: any = await r.json();
    expect(h).toMatchObject({ status: "ok", version: svc.version, capturing: true, api_port: svc.apiPort });
    expect(Number.isInteger(h.entry_count)).toBe(true);
    expect(Number.isInteger(h.uptime_secs)).toBe(true);
  });

  test("a foreign Host header gets 403 (DNS-rebinding defence), even on health", async () => {
    for (const host of ["evil.example", `evil.example:${svc.apiPort}`, `127.0.0.1:${svc.apiPort + 1}`, "127.0.0.1"]) {
      const raw = await rawRequest(svc.apiPort, `GET /api/v1/health HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
      expect(raw.split("\r\n")[0]).toBe("HTTP/1.1 403 Forbidden");
      expect(raw).toContain('"forbidden_host"');
    }
    const ok = await rawRequest(svc.apiPort, `GET /api/v1/health HTTP/1.1\r\nHost: localhost:${svc.apiPort}\r\nConnection: close\r\n\r\n`);
    expect(ok.split("\r\n")[0]).toBe("HTTP/1.1 200 OK");
  });

  test("no permissive CORS headers", async () => {
    const r = await fetch(svc.url("/api/v1/health"), { headers: { origin: "http://evil.example" } });
    expect(r.headers.get("access-control-allow-origin")).toBeNull();
  });

  test("unknown route is 404 with the JSON error format", async () => {
    const r = await svc.call("/api/v1/nope");
    expect(r.status).toBe(404);
    expect(((await r.json()) as any).error.code).toBe("not_found");
  });

  test("capture control: status, stop, start", async () => {
    expect((await (await svc.call("/api/v1/capture/status")).json()) as any).toEqual({ capturing: true, entry_count: 0, dropped: 0 });
    expect((await svc.call("/api/v1/capture/stop", { method: "POST" })).status).toBe(204);
    expect(((await (await svc.call("/api/v1/capture/status")).json()) as any).capturing).toBe(false);
    expect(((await (await fetch(svc.url("/api/v1/health"))).json()) as any).capturing).toBe(false);
    expect((await svc.call("/api/v1/capture/start", { method: "POST" })).status).toBe(204);
    expect(((await (await svc.call("/api/v1/capture/status")).json()) as any).capturing).toBe(true);
  });

  test("OpenAPI 3.1 document without auth, listing the routes; offline docs page", async () => {
    const r = await fetch(svc.url("/api/v1/openapi.json"));
    expect(r.status).toBe(200);
    const doc: any = await r.json();
    expect(doc.openapi).toMatch(/^3\.1\./);
    expect(doc.info.version).toBe(svc.version);
    expect(Object.keys(doc.paths)).toContain("/api/v1/capture/status");
    const page = await fetch(svc.url("/api/v1/docs"));
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain("openapi.json");
    expect(html).not.toMatch(/https?:\/\/(cdn|unpkg|fonts)/); // works offline
  });
});

describe("API frame: a JSON body is read as JSON whatever its Content-Type", () => {
  const auth = () => ["-H", `Authorization: Bearer ${svc.token}`];
  const enabled = async (family: string) => ((await (await svc.call(`/api/v1/${family}`)).json()) as any).enabled as boolean;

  test("curl -d (application/x-www-form-urlencoded) and no Content-Type at all: the body is applied", async () => {
    for (const value of [false, true, false]) {
      const r = await curl(["-X", "PUT", ...auth(), "-d", JSON.stringify({ enabled: value }), "-w", "\n%{http_code}", svc.url("/api/v1/map-local/enabled")]);
      expect(r.out).toBe(`{"enabled":${value}}\n200`);
      expect(await enabled("map-local")).toBe(value);
    }
    // `-H 'Content-Type:'` makes curl send none
    const r = await curl(["-X", "PUT", ...auth(), "-H", "Content-Type:", "-d", '{"enabled":true}', "-w", "\n%{http_code}", svc.url("/api/v1/map-local/enabled")]);
    expect(r.out).toBe('{"enabled":true}\n200');
    expect(await enabled("map-local")).toBe(true);
  });

  test("fetch with a text/plain string body: create a mock rule, and a breakpoint", async () => {
    const rule = { id: "ct-text-plain", url_pattern: "/ct/*", status_code: 201, body: "from text/plain" };
    const r = await svc.call("/api/v1/mock/rules", { method: "POST", body: JSON.stringify(rule), headers: { "content-type": "text/plain;charset=UTF-8" } });
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject(rule);
    const snap: any = await (await svc.call("/api/v1/mock")).json();
    expect(snap.rules.find((x: any) => x.id === rule.id)).toMatchObject(rule);
    expect((await svc.call(`/api/v1/mock/rules/${rule.id}`, { method: "DELETE" })).status).toBe(204);

    const b = await curl(["-X", "PUT", ...auth(), "-d", '{"pattern":"http://ct.example.test/*","intercept_response":false}', "-w", "%{http_code}", svc.url("/api/v1/breakpoints")]);
    expect(b.out).toBe("204");
    expect(await (await svc.call("/api/v1/breakpoints")).json()).toEqual([{ pattern: "http://ct.example.test/*", intercept_request: true, intercept_response: false }]);
    expect((await svc.call("/api/v1/breakpoints", { method: "DELETE" })).status).toBe(204);
  });

  test("a field sent with curl -d is not lost: POST /mock/start {port: 0} takes a free port", async () => {
    const r = await curl(["-X", "POST", ...auth(), "-d", '{"port":0}', svc.url("/api/v1/mock/start")]);
    const j = JSON.parse(r.out);
    try {
      expect(j.running).toBe(true);
      expect(j.port).not.toBe(9100);
      expect(j.port).toBeGreaterThan(0);
    } finally {
      await svc.call("/api/v1/mock/stop", { method: "POST" });
    }
  });

  test("a body that is not JSON is 400 saying it must be JSON, whatever its declared type", async () => {
    const cases: [string, string[]][] = [
      ["curl -d enabled=true", ["-d", "enabled=true"]],
      ["curl -F (multipart)", ["-F", "enabled=true"]],
      ["malformed application/json", ["-H", "Content-Type: application/json", "-d", '{"enabled":']],
      ["text/plain prose", ["-H", "Content-Type: text/plain", "-d", "please enable"]],
    ];
    const before = await enabled("map-local");
    for (const [what, args] of cases) {
      const r = await curl(["-X", "PUT", ...auth(), ...args, "-w", "\n%{http_code}", svc.url("/api/v1/map-local/enabled")]);
      const [body, code] = r.out.split("\n");
      expect({ what, code }).toEqual({ what, code: "400" });
      const j = JSON.parse(body!);
      expect(j.error.code).toBe("bad_request");
      expect(j.error.message).toContain("must be JSON");
    }
    expect(await enabled("map-local")).toBe(before);
    for (const path of ["/api/v1/mock/rules", "/api/v1/breakpoints/delete"]) {
      const r = await svc.call(path, { method: "POST", body: "id=x", headers: { "content-type": "application/x-www-form-urlencoded" } });
      expect({ path, status: r.status }).toEqual({ path, status: 400 });
      expect(((await r.json()) as any).error.message).toContain("must be JSON");
    }
  });

  test("an absent body is still each route's business (a required one is 400 naming it, an optional one is fine)", async () => {
    const r = await svc.call("/api/v1/map-local/enabled", { method: "PUT" });
    expect(r.status).toBe(400);
    expect(((await r.json()) as any).error.message).not.toContain("must be JSON");
    expect((await svc.call("/api/v1/capture/start", { method: "POST", body: "", headers: { "content-type": "application/json" } })).status).toBe(204);
  });

  test("the OpenAPI document lists JSON as the one media type of request bodies", async () => {
    const doc: any = await (await fetch(svc.url("/api/v1/openapi.json"))).json();
    const bodies: string[] = [];
    for (const [path, ops] of Object.entries<any>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(ops)) {
        if (!op.requestBody) continue;
        bodies.push(`${method} ${path}`);
        expect({ route: `${method} ${path}`, types: Object.keys(op.requestBody.content) }).toEqual({ route: `${method} ${path}`, types: ["application/json"] });
      }
    }
    expect(bodies).toContain("put /api/v1/map-local/enabled");
    expect(bodies).toContain("post /api/v1/mock/rules");
    expect(doc.paths["/api/v1/map-local/enabled"].put.requestBody.content["application/json"].schema.properties.enabled.type).toBe("boolean");
  });
});

describe("API frame: error format (in-process, app.handle)", () => {
  const port = 4321;
  const token = "t".repeat(64);
  const probe = new Elysia({ prefix: "/api/v1/probe" })
    .put("/", ({ set }) => void (set.status = 204), { body: Type.Object({ bytes_per_second: Type.Integer({ minimum: 1 }) }) })
    .post("/rec", ({ body }) => body, { body: Type.Object({ vars: Type.Optional(Type.Record(Type.String(), Type.String())) }) })
    .get("/boom", () => {
      throw new Error("kaboom");
    })
    .get("/n/:id", ({ params }) => ({ id: params.id }), { params: t.Object({ id: t.Numeric() }) })
    .get("/u/:id", ({ params }) => ({ id: Number(params.id) }), { params: t.Object({ id: UintString("an id") }) });
  const app = buildApi({ token, port: () => port, version: "test", routes: [probe] });
  const req = (method: string, path: string, body?: string) =>
    app.handle(
      new Request(`http://127.0.0.1:${port}${path}`, {
        method,
        body,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      }),
    );

  test("malformed JSON body → 400 JSON error", async () => {
    const r = await req("PUT", "/api/v1/probe", "{not json");
    expect(r.status).toBe(400);
    const j: any = await r.json();
    expect(j.error.code).toBe("bad_request");
    expect(j.error.message).toContain("JSON");
  });

  test("body of the wrong shape → 400 naming the field (not 422)", async () => {
    for (const body of [{ bytes_per_second: -5 }, { bytes_per_second: "fast" }, {}, { bytes_per_second: 1.5 }]) {
      const r = await req("PUT", "/api/v1/probe", JSON.stringify(body));
      expect(r.status).toBe(400);
      const j: any = await r.json();
      expect(j.error.code).toBe("bad_request");
      expect(j.error.message).toContain("bytes_per_second");
    }
    expect((await req("PUT", "/api/v1/probe", JSON.stringify({ bytes_per_second: 10 }))).status).toBe(204);
  });

  test("a record field is never coerced: a string, a number or an array where an object belongs is 400", async () => {
    // Elysia's default normalisation turns "abc" into {"0":"a","1":"b","2":"c"} and 5 into {}: buildApi turns it off
    for (const vars of ["abc", 5, ["a"]]) {
      const r = await req("POST", "/api/v1/probe/rec", JSON.stringify({ vars }));
      expect(r.status).toBe(400);
      expect(((await r.json()) as any).error.message).toContain("vars");
    }
    const ok = await req("POST", "/api/v1/probe/rec", JSON.stringify({ vars: { a: "b" } }));
    expect(await ok.json()).toEqual({ vars: { a: "b" } });
  });

  test("bad path parameter → 400", async () => {
    const r = await req("GET", "/api/v1/probe/n/abc");
    expect(r.status).toBe(400);
    expect(((await r.json()) as any).error.message).toContain("id");
  });

  test("a UintString parameter takes decimal digits only; the 400 names the parameter and the value", async () => {
    for (const bad of ["-1", "1.5", "1e1", "0x10", "+1", "%201"]) {
      const r = await req("GET", `/api/v1/probe/u/${bad}`);
      expect({ bad, status: r.status }).toEqual({ bad, status: 400 });
      const m = ((await r.json()) as any).error.message as string;
      expect(m).toContain("path parameter 'id'");
      expect(m).toContain("non-negative integer");
      expect(m).toContain(JSON.stringify(decodeURIComponent(bad)));
    }
    expect(await (await req("GET", "/api/v1/probe/u/0042")).json()).toEqual({ id: 42 });
  });

  test("unexpected exception → 500 JSON, app keeps serving", async () => {
    const r = await req("GET", "/api/v1/probe/boom");
    expect(r.status).toBe(500);
    expect(((await r.json()) as any).error).toEqual({ code: "internal_error", message: "kaboom" });
    expect((await req("GET", "/api/v1/probe/n/3")).status).toBe(200);
  });

  test("tokens are compared in constant time over digests (any length)", () => {
    expect(tokenMatches("abc", "abc")).toBe(true);
    expect(tokenMatches("abc", "abd")).toBe(false);
    expect(tokenMatches("", "abc")).toBe(false);
    expect(tokenMatches("a".repeat(1000), "abc")).toBe(false);
  });
});

async function rawRequest(port: number, text: string): Promise<string> {
  const chunks: Uint8Array[] = [];
  return await new Promise<string>((resolve, reject) => {
    Bun.connect({
      hostname: "127.0.0.1",
      port,
      socket: {
        open(s) {
          s.write(text);
        },
        data(_s, d) {
          chunks.push(new Uint8Array(d));
        },
        close() {
          resolve(Buffer.concat(chunks).toString("latin1"));
        },
        error(_s, e) {
          reject(e);
        },
      },
    }).catch(reject);
  });
}
