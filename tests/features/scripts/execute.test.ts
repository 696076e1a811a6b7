import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startService } from "../../helpers/service.ts";
import { startUpstream, type Upstream } from "../../helpers/upstream.ts";

type Svc = Awaited<ReturnType<typeof startService>>;
let svc: Svc;
let up: Upstream;

beforeAll(async () => {
  up = startUpstream();
  svc = await startService({ scriptTimeoutMs: 500 });
});
afterAll(async () => {
  await svc.stop();
  up.stop();
});

interface Out {
  console: { level: string; message: string; ts: number }[];
  tests: { name: string; passed: boolean; error: string | null }[];
  request: { method: string; url: string; headers: Record<string, string>; body: string };
  response: { status: number; headers: Record<string, string>; body: string } | null;
  variables: Record<string, unknown>;
  environment: Record<string, unknown>;
  errors: { message: string; stack: string | null; line: number | null }[];
  duration_ms: number;
}

async function execute(input: Record<string, unknown>): Promise<{ status: number; body: any }> {
  const r = await svc.call("/api/v1/scripts/execute", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input }) });
  return { status: r.status, body: await r.json() };
}

async function run(script: string, over: Record<string, unknown> = {}): Promise<Out> {
  const r = await execute({
    script,
    phase: "test",
    variables: {},
    request: { method: "GET", url: "https://api.example.test/v1/users?page=2", headers: { Accept: "application/json" }, body: "" },
    response: { status: 200, headers: { "Content-Type": "application/json", "X-Request-Id": "abc-123" }, body: JSON.stringify({ token: "t0k3n", user: { id: 7, name: "Ada", roles: ["admin", "dev"] }, items: [{ id: 1 }, { id: 2 }] }) },
    ...over,
  });
  expect(r.status).toBe(200);
  return r.body as Out;
}

describe("POST /scripts/execute: the body", () => {
  test("a body that does not deserialize, or an unknown phase, is 400 with a clear message", async () => {
    const notJson = await svc.call("/api/v1/scripts/execute", { method: "POST", headers: { "content-type": "application/json" }, body: "{" });
    expect(notJson.status).toBe(400);
    expect((await execute({ phase: "test" })).status).toBe(400);
    const badPhase = await execute({ script: "1", phase: "teardown", request: {}, response: {} });
    expect(badPhase.status).toBe(400);
    expect(badPhase.body.error.message).toContain("'teardown'");
    const noResponse = await execute({ script: "1", phase: "response", request: {} });
    expect(noResponse.status).toBe(400);
    expect(noResponse.body.error.message).toContain("input.response");
    const missingInput = await svc.call("/api/v1/scripts/execute", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ script: "1" }) });
    expect(missingInput.status).toBe(400);
  });

  test("the output layout: console, tests, request, response, variables, errors, duration_ms", async () => {
    const out = await run("console.log('hi'); pm.test('ok', () => {}); pm.variables.set('v', 1);");
    expect(Object.keys(out)).toEqual(expect.arrayContaining(["console", "tests", "request", "response", "variables", "errors", "duration_ms"]));
    expect(out.console).toEqual([{ level: "log", message: "hi", ts: expect.any(Number) }]);
    expect(out.tests).toEqual([{ name: "ok", passed: true, error: null }]);
    expect(out.variables).toEqual({ v: 1 });
    expect(out.request.headers).toEqual({ Accept: "application/json" });
    expect(out.response!.status).toBe(200);
    expect(out.errors).toEqual([]);
    expect(out.duration_ms).toBeGreaterThanOrEqual(0);
  });

  test("a script that throws, times out or has a syntax error still answers 200 with the error", async () => {
    const thrown = await run("throw new TypeError('nope')");
    expect(thrown.errors[0]!.message).toContain("nope");
    const timedOut = await run("while (true) {}");
    expect(timedOut.errors[0]!.message.toLowerCase()).toContain("time");
    const syntax = await run("let a = 1;\nlet b = ;\n");
    expect(syntax.errors[0]!.message).toContain("SyntaxError");
    expect(syntax.errors[0]!.line).toBe(2);
  });
});

describe("POST /scripts/execute: scripts as Postman users write them", () => {
  test("1. status code test", async () => {
    const out = await run(`pm.test("Status code is 200", function () { pm.response.to.have.status(200); });`);
    expect(out.tests).toEqual([{ name: "Status code is 200", passed: true, error: null }]);
  });

  test("2. auth token extraction into an environment variable", async () => {
    const out = await run(`var jsonData = pm.response.json();\npm.environment.set("authToken", jsonData.token);`, { environment: { base: "x" } });
    expect(out.environment).toEqual({ base: "x", authToken: "t0k3n" });
  });

  test("3. JSON body checks (schema-ish)", async () => {
    const out = await run(`
      const body = pm.response.json();
      pm.test("user has the expected shape", () => {
        pm.expect(body).to.have.property("user");
        pm.expect(body.user).to.be.an("object");
        pm.expect(body.user.id).to.be.a("number").and.to.be.above(0);
        pm.expect(body.user.name).to.be.a("string").that.is.not.empty;
        pm.expect(body.user.roles).to.be.an("array").that.includes("admin");
        pm.expect(body.items).to.have.lengthOf(2);
      });
      pm.test("a failing check", () => { pm.expect(body.user.id).to.equal(8); });`);
    expect(out.tests[0]).toEqual({ name: "user has the expected shape", passed: true, error: null });
    expect(out.tests[1]!.passed).toBe(false);
    expect(out.tests[1]!.error).toContain("expected 7 to equal 8");
  });

  test("4. header assertions", async () => {
    const out = await run(`
      pm.test("Content-Type is present", () => { pm.response.to.have.header("Content-Type"); });
      pm.test("request id", () => { pm.expect(pm.response.headers.get("X-Request-Id")).to.eql("abc-123"); });
      pm.test("no cookie", () => { pm.response.to.have.header("Set-Cookie"); });`);
    expect(out.tests.map((t) => t.passed)).toEqual([true, true, false]);
  });

  test("5. response time and body string checks", async () => {
    const out = await run(`
      pm.test("Response time is less than 200ms", () => { pm.expect(pm.response.responseTime).to.be.below(200); });
      pm.test("Body matches string", () => { pm.expect(pm.response.text()).to.include("Ada"); });`);
    expect(out.tests.every((t) => t.passed)).toBe(true);
  });

  test("6. pre-request: set a header and a timestamp variable, replace {{vars}}", async () => {
    const out = await run(
      `pm.variables.set("ts", 1700000000);
       pm.request.headers.add({ key: "X-Timestamp", value: String(pm.variables.get("ts")) });
       pm.request.headers.upsert({ key: "Authorization", value: pm.variables.replaceIn("Bearer {{token}}") });
       pm.request.headers.remove("Accept");`,
      { phase: "request", response: null, variables: { token: "abc" } },
    );
    expect(out.errors).toEqual([]);
    expect(out.request.headers).toEqual({ "X-Timestamp": "1700000000", Authorization: "Bearer abc" });
  });

  test("7. pre-request: rewrite URL query and JSON body", async () => {
    const out = await run(
      `pm.request.url.query.upsert({ key: "page", value: "3" });
       const b = JSON.parse(pm.request.body.raw); b.signed = true; pm.request.body.raw = JSON.stringify(b);`,
      { phase: "request", response: null, request: { method: "POST", url: "https://api.example.test/v1/users?page=2", headers: {}, body: '{"a":1}' } },
    );
    expect(out.errors).toEqual([]);
    expect(new URL(out.request.url).searchParams.get("page")).toBe("3");
    expect(JSON.parse(out.request.body)).toEqual({ a: 1, signed: true });
  });

  test("8. variable precedence and scopes", async () => {
    const out = await run(
      `pm.test("local wins", () => pm.expect(pm.variables.get("x")).to.equal("local"));
       pm.test("env", () => pm.expect(pm.environment.get("y")).to.equal("env"));
       pm.test("collection", () => pm.expect(pm.collectionVariables.get("z")).to.equal("coll"));
       pm.test("globals", () => pm.expect(pm.globals.get("g")).to.equal("glob"));
       pm.environment.unset("y");`,
      { variables: { x: "local" }, environment: { x: "env", y: "env" }, collectionVariables: { z: "coll" }, globals: { g: "glob" } },
    );
    expect(out.tests.map((t) => t.passed)).toEqual([true, true, true, true]);
    expect(out.environment).toEqual({ x: "env" });
  });

  test("9. pm.sendRequest chaining (callback and promise forms) against a real upstream", async () => {
    const out = await run(`
      pm.sendRequest("${up.httpUrl}/echo/first", function (err, res) {
        pm.environment.set("first", res.json().path);
      });
      const second = await pm.sendRequest({ url: "${up.httpUrl}/echo/second", method: "POST", header: { "X-Chained": "yes" }, body: { mode: "raw", raw: "payload" } });
      pm.test("second arrived", () => {
        pm.expect(second.code).to.equal(200);
        pm.expect(second.json().headers["x-chained"]).to.equal("yes");
        pm.expect(second.json().body).to.equal("payload");
      });`);
    expect(out.errors).toEqual([]);
    expect(out.tests).toEqual([{ name: "second arrived", passed: true, error: null }]);
    expect(out.environment.first).toBe("/echo/first");
    // they went through the proxy and were captured
    const list = (await (await svc.call("/api/v1/traffic?limit=10")).json()) as { items: { url: string; client_addr: string }[] };
    expect(list.items.filter((e) => e.url.includes("/echo/second")).map((e) => e.client_addr)).toEqual(["tapwire-script"]);
  });

  test("10. response phase: change status, header and body", async () => {
    const out = await run(`pm.response.code = 503; pm.response.headers.upsert({key: "Retry-After", value: "5"}); pm.response.setBody({ down: true });`, { phase: "response" });
    expect(out.errors).toEqual([]);
    expect(out.response!.status).toBe(503);
    expect(out.response!.headers["Retry-After"]).toBe("5");
    expect(JSON.parse(out.response!.body)).toEqual({ down: true });
  });

  test("11. async test and oneOf/match/not chains", async () => {
    const out = await run(`
      pm.test("async", async () => { const v = await Promise.resolve(5); pm.expect(v).to.be.oneOf([4, 5]); });
      pm.test("match", () => pm.expect(pm.response.headers.get("X-Request-Id")).to.match(/^abc-\\d+$/));
      pm.test("not", () => pm.expect(pm.response.code).to.not.equal(404));
      pm.test("to.be.ok", () => pm.response.to.be.ok);
      pm.test("jsonBody", () => pm.response.to.have.jsonBody("user.name"));`);
    expect(out.tests.map((t) => [t.name, t.passed])).toEqual([
      ["async", true],
      ["match", true],
      ["not", true],
      ["to.be.ok", true],
      ["jsonBody", true],
    ]);
  });
});
