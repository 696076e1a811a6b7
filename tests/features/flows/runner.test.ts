/** The flow runner against a real local API, through tapwire's own proxy (POST /flows, POST /flows/{id}/run). */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startService } from "../../helpers/service.ts";
import { flow, ok, post, runFlow, save, type Svc } from "./flow-helpers.ts";
import { type LoginApi, startLoginApi } from "./login-api.ts";

let svc: Svc;
let api: LoginApi;

beforeAll(async () => {
  api = startLoginApi();
  svc = await startService();
});
afterAll(async () => {
  await svc?.stop();
  api?.stop();
});

const login = (base: string) => ({
  method: "POST",
  url: `${base}/login`,
  contentType: "application/json",
  body: '{"username":"{{user}}","password":"{{password}}"}',
});

describe("login -> extract token -> authenticated call -> assert", () => {
  test("passes, sends the extracted token, captures the requests as tapwire-flow and hides the token in the report", async () => {
    await save(
      svc,
      flow(
        "login",
        [
          ["start", "start"],
          ["login", "request", { name: "log in", ...login("{{base}}") }],
          ["login-ok", "assert", { checks: [{ type: "status", equals: 200 }, { type: "jsonPath", path: "$.token", exists: true }] }],
          ["extract", "set-variable", { variables: [{ name: "token", from: "jsonPath", path: "$.token" }, { name: "userId", from: "jsonPath", path: "$.user.id" }] }],
          ["me", "request", { name: "who am I", method: "GET", url: "{{base}}/me", headers: [{ key: "Authorization", value: "Bearer {{token}}" }] }],
          [
            "me-ok",
            "assert",
            {
              checks: [
                { type: "status", equals: 200 },
                { type: "jsonPath", path: "$.id", equals: "{{userId}}" },
                { type: "jsonPath", path: "$.name", matches: "^Ali" },
                { type: "jsonPath", path: "$.roles", contains: "dev" },
                { type: "header", name: "X-Request-Id", equals: "req-42" },
                { type: "body", contains: "Alice" },
                { type: "duration", below: 30000 },
              ],
            },
          ],
          ["end", "end", { outputs: { who: "{{userId}}" } }],
        ],
        [
          ["start", "login"],
          ["login", "login-ok"],
          ["login-ok", "extract"],
          ["extract", "me"],
          ["me", "me-ok"],
          ["me-ok", "end"],
        ],
        { variables: { user: "alice", password: "secret" } },
      ),
    );
    const r = await runFlow(svc, "login", { base: api.url });
    expect(r).toMatchObject({ flowId: "login", status: "passed", error: null });
    expect(typeof r.runId).toBe("string");
    expect(r.finishedAt).toBeGreaterThanOrEqual(r.startedAt);
    expect(r.steps.map((s: any) => [s.nodeId, s.status])).toEqual([
      ["start", "passed"],
      ["login", "passed"],
      ["login-ok", "passed"],
      ["extract", "passed"],
      ["me", "passed"],
      ["me-ok", "passed"],
      ["end", "passed"],
    ]);
    const token = r.variables.token as string;
    expect(token).toStartWith("tok-");
    expect(r.variables.userId).toBe(7);
    expect(r.outputs).toEqual({ who: 7 });
    // the API saw the token the flow extracted
    expect(api.authSeen.at(-1)).toBe(`Bearer ${token}`);
    const me = r.steps.find((s: any) => s.nodeId === "me");
    expect(me.name).toBe("who am I");
    expect(me.request).toMatchObject({ method: "GET", url: `${api.url}/me` });
    expect(me.request.headers.Authorization).toBe("***");
    expect(me.response).toMatchObject({ status: 200, bodyEncoding: "utf8", bodyTruncated: false });
    expect(JSON.parse(me.response.body)).toMatchObject({ id: 7, name: "Alice" });
    expect(me.response.headers["x-request-id"]).toBe("req-42");
    expect(r.steps.find((s: any) => s.nodeId === "me-ok").assertions).toHaveLength(7);
    // captured, with the flow's client label
    expect(typeof me.response.trafficId).toBe("number");
    const entry = await ok(svc.call(`/api/v1/traffic/${me.response.trafficId}`));
    expect(JSON.stringify(entry)).toContain("tapwire-flow");
    expect(entry.url ?? entry.request?.url).toContain("/me");
  });

  test("a wrong password fails the assert, which stops the branch (the authenticated call is not made)", async () => {
    const before = api.seen.length;
    const r = await runFlow(svc, "login", { base: api.url, password: "wrong" });
    expect(r.status).toBe("failed");
    expect(r.steps.map((s: any) => s.nodeId)).toEqual(["start", "login", "login-ok"]);
    const a = r.steps[2];
    expect(a.status).toBe("failed");
    expect(a.assertions[0]).toMatchObject({ name: "status equals 200", passed: false });
    expect(a.assertions[0].error).toContain("got 401");
    expect(api.seen.slice(before)).toEqual(["POST /login"]);
  });

  test("a script node reads pm.response, sets flow variables through pm.environment and pm.variables, and its pm.test results are assertions", async () => {
    await save(
      svc,
      flow(
        "scripted",
        [
          ["start", "start"],
          ["login", "request", login("{{base}}")],
          [
            "script",
            "script",
            {
              script: [
                "const body = pm.response.json();",
                "pm.environment.set('token', body.token);",
                "pm.variables.set('name', body.user.name);",
                "pm.environment.unset('password');",
                "console.log('logged in as', body.user.name, 'user was', pm.environment.get('user'));",
                "pm.test('status is 200', () => pm.response.to.have.status(200));",
                "pm.test('has a token', () => pm.expect(body.token).to.be.a('string'));",
              ].join("\n"),
            },
          ],
          ["me", "request", { method: "GET", url: "{{base}}/me", auth: { type: "bearer", token: "{{token}}" } }],
          ["check", "script", { script: "pm.test('me is 200', () => pm.response.to.have.status(200)); pm.test('deliberately failing', () => pm.expect(1).to.equal(2));", continueOnFail: true }],
          ["after", "set-variable", { variables: [{ name: "reached", value: true }] }],
        ],
        [
          ["start", "login"],
          ["login", "script"],
          ["script", "me"],
          ["me", "check"],
          ["check", "after"],
        ],
        { variables: { user: "alice", password: "secret" } },
      ),
    );
    const r = await runFlow(svc, "scripted", { base: api.url });
    expect(r.status).toBe("failed");
    const script = r.steps.find((s: any) => s.nodeId === "script");
    expect(script.status).toBe("passed");
    expect(script.assertions).toEqual([
      { name: "status is 200", passed: true, error: null },
      { name: "has a token", passed: true, error: null },
    ]);
    expect(script.console).toEqual([{ level: "log", message: "logged in as Alice user was alice" }]);
    expect(r.variables.name).toBe("Alice");
    expect(r.variables.token).toStartWith("tok-");
    expect("password" in r.variables).toBe(false);
    // bearer auth from the token the script set; shown as *** in the report
    expect(api.authSeen.at(-1)).toBe(`Bearer ${r.variables.token}`);
    expect(r.steps.find((s: any) => s.nodeId === "me").request.headers.Authorization).toBe("***");
    const check = r.steps.find((s: any) => s.nodeId === "check");
    expect(check.status).toBe("failed");
    expect(check.assertions.map((a: any) => a.passed)).toEqual([true, false]);
    // continueOnFail: the branch went on
    expect(r.variables.reached).toBe(true);
  });

  test("a script error is an error step and the run's status is error", async () => {
    await save(svc, flow("throws", [["start", "start"], ["s", "script", { script: "throw new Error('boom')" }], ["e", "end"]], [["start", "s"], ["s", "e"]]));
    const r = await runFlow(svc, "throws");
    expect(r.status).toBe("error");
    expect(r.steps.map((s: any) => s.nodeId)).toEqual(["start", "s"]);
    expect(r.steps[1].error).toContain("boom");
  });

  test("a request that cannot be sent is an error step naming the reason", async () => {
    const dead = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("x") });
    const port = dead.port;
    dead.stop(true);
    await save(svc, flow("unreachable", [["start", "start"], ["r", "request", { method: "GET", url: `http://127.0.0.1:${port}/` }]], [["start", "r"]]));
    const r = await runFlow(svc, "unreachable");
    expect(r.status).toBe("error");
    expect(r.steps[1]).toMatchObject({ status: "error", response: null });
    expect(r.steps[1].error).toBeTruthy();
  });
});

describe("condition", () => {
  beforeAll(async () => {
    await save(
      svc,
      flow(
        "branch",
        [
          ["start", "start"],
          ["get", "request", { method: "GET", url: "{{base}}/items?page={{page}}" }],
          ["more", "condition", { expression: "pm.response.json().next !== null && pm.environment.get('mode') !== 'stop'" }],
          ["yes", "set-variable", { variables: [{ name: "path", value: "true-branch" }, { name: "next", from: "jsonPath", path: "$.next" }] }],
          ["no", "set-variable", { variables: [{ name: "path", value: "false-branch" }] }],
        ],
        [
          ["start", "get"],
          ["get", "more"],
          ["more", "yes", "true"],
          ["more", "no", "false"],
        ],
        { variables: { mode: "go" } },
      ),
    );
  });

  test("the true edge is taken when the expression holds", async () => {
    const r = await runFlow(svc, "branch", { base: api.url, page: 1 });
    expect(r.status).toBe("passed");
    expect(r.steps.map((s: any) => s.nodeId)).toEqual(["start", "get", "more", "yes"]);
    expect(r.steps[2].branch).toBe("true");
    expect(r.variables).toMatchObject({ path: "true-branch", next: 2 });
    expect("__tapwireCondition" in r.variables).toBe(false);
  });

  test("the false edge is taken otherwise (by the response, or by a variable override)", async () => {
    const last = await runFlow(svc, "branch", { base: api.url, page: 3 });
    expect(last.steps.map((s: any) => s.nodeId)).toEqual(["start", "get", "more", "no"]);
    expect(last.steps[2].branch).toBe("false");
    const stopped = await runFlow(svc, "branch", { base: api.url, page: 1, mode: "stop" });
    expect(stopped.variables.path).toBe("false-branch");
  });

  test("a loop through condition edges walks the pages, and a script counts", async () => {
    await save(
      svc,
      flow(
        "pages",
        [
          ["start", "start"],
          ["get", "request", { method: "GET", url: "{{base}}/items?page={{page}}" }],
          ["count", "script", { script: "const b = pm.response.json(); pm.environment.set('seen', (pm.environment.get('seen') || []).concat(b.items)); pm.environment.set('page', b.next);" }],
          ["again", "condition", { expression: "pm.environment.get('page') !== null" }],
          ["end", "end", { outputs: { seen: "{{seen}}" } }],
        ],
        [
          ["start", "get"],
          ["get", "count"],
          ["count", "again"],
          ["again", "get", "true"],
          ["again", "end", "false"],
        ],
      ),
    );
    const r = await runFlow(svc, "pages", { base: api.url, page: 1 });
    expect(r.status).toBe("passed");
    expect(r.outputs.seen).toEqual(["item-1a", "item-1b", "item-2a", "item-2b", "item-3a", "item-3b"]);
    expect(r.steps.filter((s: any) => s.nodeId === "get")).toHaveLength(3);
    // the last page: `equals: null` is a check for JSON null
    const last = await ok(post(svc, "/api/v1/flows/run", {
      flow: flow("null-check", [["start", "start"], ["get", "request", { method: "GET", url: "{{base}}/items?page=3" }], ["a", "assert", { checks: [{ type: "jsonPath", path: "$.next", equals: null }, { type: "jsonPath", path: "$.items.length", equals: 2 }, { type: "jsonPath", path: "$.items[-1]", equals: "item-3b" }] }]], [["start", "get"], ["get", "a"]]),
      environment: { base: api.url },
    }));
    expect(last.steps[2].assertions.map((a: any) => [a.name, a.passed])).toEqual([
      ["$.next equals null", true],
      ["$.items.length equals 2", true],
      ['$.items[-1] equals "item-3b"', true],
    ]);
    expect(last.status).toBe("passed");
  });

  test("an endless loop stops at the step cap of 10,000 with status error", async () => {
    await save(svc, flow("forever", [["start", "start"], ["spin", "condition", { expression: "true" }]], [["start", "spin"], ["spin", "spin", "true"]]));
    const r = await runFlow(svc, "forever");
    expect(r.status).toBe("error");
    expect(r.steps).toHaveLength(10_000);
    expect(r.error).toContain("step cap of 10000");
  });

  test("the cap is configurable per flow (maxSteps) and counts subflow steps", async () => {
    await save(svc, flow("spin-inner", [["start", "start"], ["spin", "delay", { ms: 0 }]], [["start", "spin"], ["spin", "spin"]]));
    await save(svc, flow("capped", [["start", "start"], ["sub", "subflow", { flowId: "spin-inner" }]], [["start", "sub"]], { maxSteps: 25 }));
    const r = await runFlow(svc, "capped");
    expect(r.status).toBe("error");
    expect(r.steps.map((s: any) => s.nodeId)).toEqual(["start", "sub"]);
    expect(r.steps[1].subflow.steps).toHaveLength(23);
    expect(r.error).toContain("step cap of 25");
  });
});

describe("subflow", () => {
  test("runs another flow with its inputs as its own variables and returns its outputs", async () => {
    await save(
      svc,
      flow(
        "do-login",
        [
          ["start", "start"],
          ["login", "request", login("{{base}}")],
          ["ok", "assert", { checks: [{ type: "status", equals: 200 }] }],
          ["end", "end", { outputs: { token: "{{token}}", greeting: "hello {{user}}" } }],
          ["grab", "set-variable", { variables: [{ name: "token", from: "jsonPath", path: "token" }] }],
        ],
        [
          ["start", "login"],
          ["login", "ok"],
          ["ok", "grab"],
          ["grab", "end"],
        ],
        { variables: { user: "nobody", password: "none" } },
      ),
    );
    await save(
      svc,
      flow(
        "uses-login",
        [
          ["start", "start"],
          ["sub", "subflow", { flowId: "do-login", inputs: { base: "{{base}}", user: "alice", password: "{{pw}}" }, outputs: { authToken: "token" } }],
          ["me", "request", { method: "GET", url: "{{base}}/me", headers: [{ key: "Authorization", value: "Bearer {{authToken}}" }] }],
          ["ok", "assert", { checks: [{ type: "status", equals: 200 }] }],
          ["sub2", "subflow", { flowId: "do-login", inputs: { base: "{{base}}", user: "alice", password: "{{pw}}" } }],
        ],
        [
          ["start", "sub"],
          ["sub", "me"],
          ["me", "ok"],
          ["ok", "sub2"],
        ],
      ),
    );
    const stored = await ok(svc.call("/api/v1/flows/uses-login"));
    expect(stored.subflowIds).toEqual(["do-login"]);
    const r = await runFlow(svc, "uses-login", { base: api.url, pw: "secret", password: "parent-only" });
    expect(r.status).toBe("passed");
    const sub = r.steps[1];
    expect(sub.subflow.flowId).toBe("do-login");
    expect(sub.subflow.steps.map((s: any) => s.nodeId)).toEqual(["start", "login", "ok", "grab", "end"]);
    // its own variables: its defaults under the inputs; nothing of the parent's leaks in
    expect(sub.subflow.variables).toMatchObject({ user: "alice", password: "secret", base: api.url });
    expect("pw" in sub.subflow.variables).toBe(false);
    // outputs mapped (authToken), or all under their own names (sub2)
    expect(r.variables.authToken).toStartWith("tok-");
    expect("token" in r.variables).toBe(true);
    expect(r.variables.greeting).toBe("hello alice");
    expect(api.authSeen.at(-1)).toBe(`Bearer ${r.variables.authToken}`);
  });

  test("a failing subflow fails its step and the run", async () => {
    const r = await runFlow(svc, "uses-login", { base: api.url, pw: "wrong" });
    expect(r.status).toBe("failed");
    expect(r.steps.map((s: any) => s.nodeId)).toEqual(["start", "sub"]);
    expect(r.steps[1].status).toBe("failed");
  });

  test("recursion is refused before the run starts (direct, and through another flow)", async () => {
    await save(svc, flow("rec-a", [["start", "start"], ["r", "request", { method: "GET", url: `${api.url}/echo?rec` }], ["b", "subflow", { flowId: "rec-b" }]], [["start", "r"], ["r", "b"]]));
    await save(svc, flow("rec-b", [["start", "start"], ["a", "subflow", { flowId: "rec-a" }]], [["start", "a"]]));
    await save(svc, flow("rec-self", [["start", "start"], ["me", "subflow", { flowId: "rec-self" }]], [["start", "me"]]));
    const before = api.seen.length;
    const r = await runFlow(svc, "rec-a");
    expect(r).toMatchObject({ status: "error", steps: [] });
    expect(r.error).toContain("rec-a -> rec-b -> rec-a");
    const self = await runFlow(svc, "rec-self");
    expect(self).toMatchObject({ status: "error", steps: [] });
    expect(self.error).toContain("recursion");
    expect(api.seen.length).toBe(before);
  });

  test("nesting deeper than 16 is refused", async () => {
    for (let i = 0; i < 18; i++) await save(svc, flow(`deep-${i}`, [["start", "start"], ["s", "subflow", { flowId: `deep-${i + 1}` }]], [["start", "s"]]));
    await save(svc, flow("deep-18", [["start", "start"]], []));
    const r = await runFlow(svc, "deep-0");
    expect(r.status).toBe("error");
    expect(r.error).toContain("deeper than 16");
    // 16 levels are fine
    const ok16 = await runFlow(svc, "deep-2");
    expect(ok16.status).toBe("passed");
  });
});

describe("runs", () => {
  test("several runs go at once, each with its own variables", async () => {
    await save(
      svc,
      flow(
        "slow-echo",
        [
          ["start", "start"],
          ["wait", "delay", { ms: 150 }],
          ["echo", "request", { method: "GET", url: "{{base}}/echo?who={{who}}" }],
          ["grab", "set-variable", { variables: [{ name: "got", from: "jsonPath", path: "$.path" }] }],
        ],
        [
          ["start", "wait"],
          ["wait", "echo"],
          ["echo", "grab"],
        ],
      ),
    );
    const whos = ["a", "b", "c", "d"];
    const t0 = performance.now();
    const reports = await Promise.all(whos.map((who) => runFlow(svc, "slow-echo", { base: api.url, who })));
    const elapsed = performance.now() - t0;
    reports.forEach((r, i) => {
      expect(r.status).toBe("passed");
      expect(r.variables).toMatchObject({ who: whos[i], got: `/echo?who=${whos[i]}` });
    });
    expect(new Set(reports.map((r) => r.runId)).size).toBe(4);
    // they overlapped: four sequential runs would take at least 600 ms of delays
    expect(elapsed).toBeLessThan(4 * 150 + 450);
  });

  test("a request node may refer to a compose request, resolved with its collection, environment and the flow variables", async () => {
    const c = await ok(
      post(svc, "/api/v1/compose/collections", {
        name: "flows-ref",
        variables: [{ key: "base", value: api.url }, { key: "who", value: "collection" }],
        defaultHeaders: [{ key: "X-From", value: "{{who}}" }],
        environments: [{ name: "dev", variables: [{ key: "stage", defaultValue: "dev-stage" }] }],
        requests: [{ name: "echo it", method: "GET", url: "{{base}}/echo?stage={{stage}}&n={{n}}", auth: { type: "apiKey", key: "X-Api-Key", value: "k-{{stage}}" } }],
      }),
    );
    await save(
      svc,
      flow(
        "by-ref",
        [
          ["start", "start"],
          ["call", "request", { collectionId: c.id, requestId: c.requests[0].id, environment: "dev" }],
          ["grab", "set-variable", { variables: [{ name: "echoed", from: "body" }, { name: "code", from: "status" }, { name: "ct", from: "header", path: "content-type" }] }],
        ],
        [
          ["start", "call"],
          ["call", "grab"],
        ],
      ),
    );
    const r = await runFlow(svc, "by-ref", { n: 5 });
    expect(r.status).toBe("passed");
    const call = r.steps[1];
    expect(call.name).toBe("echo it");
    const echoed = JSON.parse(r.variables.echoed);
    expect(echoed.path).toBe("/echo?stage=dev-stage&n=5");
    expect(echoed.headers["x-from"]).toBe("collection");
    expect(echoed.headers["x-api-key"]).toBe("k-dev-stage");
    expect(call.request.headers["X-Api-Key"]).toBe("***");
    expect(r.variables.code).toBe(200);
    expect(r.variables.ct).toContain("application/json");
  });
});
