import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { startService } from "../../helpers/service.ts";
import { startUpstream, type Upstream } from "../../helpers/upstream.ts";

type Svc = Awaited<ReturnType<typeof startService>>;
let svc: Svc;
let up: Upstream;

const JSON_HEADERS = { "content-type": "application/json" };
const C = "/api/v1/compose/collections";
const post = (path: string, body: unknown) => svc.call(path, { method: "POST", body: JSON.stringify(body), headers: JSON_HEADERS });

async function ok(r: Response | Promise<Response>): Promise<any> {
  const res = await r;
  const text = await res.text();
  expect({ status: res.status, text }).toMatchObject({ status: 200 });
  return JSON.parse(text);
}

beforeAll(async () => {
  up = startUpstream();
  svc = await startService({ upstreamCa: [up.caFile], scriptTimeoutMs: 1000 });
});
afterAll(async () => {
  await svc?.stop();
  up?.stop();
});

const send = (c: any, requestId: string, extra: Record<string, unknown> = {}) => ok(post("/api/v1/compose/send", { collection_id: c.id, request_id: requestId, ...extra }));
const byName = (list: any[], name: string) => list.find((x) => x.name === name);
const byKey = (list: any[], key: string) => list.find((x) => x.key === key);
const upstreamCount = () => up.seen.length;

describe("scripts at send", () => {
  let c: any;
  const ids: Record<string, string> = {};
  beforeAll(async () => {
    c = await ok(
      post(C, {
        name: "Scripted",
        variables: [{ key: "base", value: up.httpsUrl }],
        scripts: {
          prerequest: 'pm.variables.set("order", "c");',
          test: 'pm.test("collection test", () => pm.response.to.have.status(200));',
        },
        environments: [
          {
            name: "dev",
            variables: [
              { key: "token", defaultValue: "tok-default" },
              { key: "apiSecret", defaultValue: "s3cr3t-value", isSecret: true },
              { key: "plain", defaultValue: "visible-value" },
            ],
          },
        ],
        folders: [
          {
            name: "outer",
            scripts: { prerequest: 'pm.variables.set("order", pm.variables.get("order") + ",outer");', test: 'console.log("outer test");' },
            folders: [
              {
                name: "inner",
                scripts: { prerequest: 'pm.variables.set("order", pm.variables.get("order") + ",inner");', test: "" },
                requests: [
                  {
                    name: "chain",
                    method: "POST",
                    url: "{{base}}/echo/chain",
                    headers: [{ key: "X-Static", value: "s" }],
                    body: '{"order":"{{order}}","made":"{{made}}"}',
                    contentType: "application/json",
                    scripts: {
                      prerequest: [
                        'pm.variables.set("order", pm.variables.get("order") + ",request");',
                        'pm.variables.set("made", "by-script");',
                        'pm.request.headers.add({ key: "X-Order", value: "{{order}}" });',
                        'pm.request.headers.add({ key: "X-Token", value: pm.environment.get("token") });',
                        'console.log("sending", pm.info.requestName, pm.info.eventName);',
                      ].join("\n"),
                      test: [
                        "const seen = pm.response.json();",
                        'pm.test("upstream saw the script header", () => pm.expect(seen.headers["x-order"]).to.eql("c,outer,inner,request"));',
                        'pm.test("body resolved with script variables", () => pm.expect(JSON.parse(seen.body)).to.eql({ order: "c,outer,inner,request", made: "by-script" }));',
                        'pm.test("a failing one", () => pm.expect(seen.method).to.eql("GET"));',
                        'pm.environment.set("token", "tok-from-test-" + seen.method);',
                        'pm.collectionVariables.set("fromTest", "cv-1");',
                        'pm.variables.set("localOnly", "gone-after-send");',
                        'pm.environment.set("created", { n: 1 });',
                      ].join("\n"),
                    },
                  },
                ],
              },
            ],
          },
        ],
        requests: [
          { name: "uses", method: "GET", url: "{{base}}/echo/uses?token={{token}}&cv={{fromTest}}&local={{localOnly}}" },
          { name: "pre-throws", method: "GET", url: "{{base}}/echo/never", scripts: { prerequest: 'pm.environment.set("token", "set-before-throw");\nthrow new Error("boom");', test: 'pm.test("never", () => {});' } },
          { name: "test-throws", method: "GET", url: "{{base}}/echo/t", scripts: { prerequest: "", test: 'pm.test("before", () => {});\nnull.x;' } },
          { name: "pre-loops", method: "GET", url: "{{base}}/echo/loop", scripts: { prerequest: "while (true) {}", test: "" } },
          {
            name: "secrets",
            method: "GET",
            url: "{{base}}/echo/secrets",
            scripts: {
              prerequest: [
                'const s = pm.environment.get("apiSecret");',
                'console.log("secret is", s);',
                'console.log("Authorization: Bearer " + s + "!");',
                "console.log(JSON.stringify({ k: s }));",
                'console.log("plain is", pm.environment.get("plain"));',
                'pm.environment.set("apiSecret", "rotated-" + "secret");',
                'console.log("now", pm.environment.get("apiSecret"));',
              ].join("\n"),
              test: 'pm.test("secret " + pm.environment.get("apiSecret"), () => pm.expect(pm.environment.get("apiSecret")).to.eql("x"));',
            },
          },
          {
            name: "data",
            method: "GET",
            url: "{{base}}/echo/data?user={{user}}",
            scripts: { prerequest: "", test: 'pm.test("iteration " + pm.info.iteration + "/" + pm.info.iterationCount + " " + pm.iterationData.get("user"), () => {});' },
          },
        ],
      }),
    );
    ids.chain = c.folders[0].folders[0].requests[0].id;
    for (const r of c.requests) ids[r.name] = r.id;
  });

  test("pre-request scripts run collection, folders outermost first, request; what they set reaches the upstream", async () => {
    const r = await send(c, ids.chain!, { environment: "dev" });
    expect(r.error).toBeNull();
    expect(r.status).toBe(200);
    const seen = JSON.parse(r.body);
    expect(seen.headers["x-order"]).toBe("c,outer,inner,request");
    expect(seen.headers["x-token"]).toBe("tok-default");
    expect(seen.headers["x-static"]).toBe("s");
    expect(seen.headers["content-type"]).toBe("application/json");
    expect(JSON.parse(seen.body)).toEqual({ order: "c,outer,inner,request", made: "by-script" });
    expect(r.unresolved).toEqual([]);
    // test scripts in the same order; results and console lines in the layouts of /scripts/execute
    expect(r.tests).toEqual([
      { name: "collection test", passed: true, error: null },
      { name: "upstream saw the script header", passed: true, error: null },
      { name: "body resolved with script variables", passed: true, error: null },
      { name: "a failing one", passed: false, error: expect.stringContaining("expected 'POST' to deeply equal 'GET'") },
    ]);
    expect(r.console.map((l: any) => [l.level, l.message])).toEqual([
      ["log", "sending chain prerequest"],
      ["log", "outer test"],
    ]);
    expect(typeof r.console[0].ts).toBe("number");
    expect(r.errors).toEqual([]);
  });

  test("pm.environment.set changes currentValue (session only), collectionVariables last the session, pm.variables the send", async () => {
    const got = await ok(svc.call(`${C}/${c.id}`));
    const dev = byName(got.environments, "dev");
    expect(byKey(dev.variables, "token")).toEqual({ key: "token", defaultValue: "tok-default", currentValue: "tok-from-test-POST", enabled: true, isSecret: false });
    // nothing of the session went to the file
    const file = readFileSync(join(svc.config.dataDir, "compose", `${c.id}.json`), "utf8");
    // a key the environment did not have is a session-only variable (a non-string value is kept as its text)
    expect(byKey(dev.variables, "created")).toEqual({ key: "created", defaultValue: "", currentValue: '{"n":1}', enabled: true, isSecret: false });
    expect(file).not.toContain("tok-from-test-POST");
    const onDisk = JSON.parse(file);
    expect(onDisk.environments[0].variables.map((v: any) => v.key)).toEqual(["token", "apiSecret", "plain"]);
    expect(onDisk.environments[0].variables[0]).toEqual({ key: "token", defaultValue: "tok-default", enabled: true, isSecret: false });
    expect(onDisk.variables).toEqual([{ key: "base", value: up.httpsUrl, enabled: true }]);

    const r = await send(c, ids.uses!, { environment: "dev" });
    expect(JSON.parse(r.body).path).toBe("/echo/uses?token=tok-from-test-POST&cv=cv-1&local={{localOnly}}");
    expect(r.unresolved).toEqual(["localOnly"]);
  });

  test("a pre-request script that throws stops the request (as in Postman): 200 with error and errors; what it set before is kept", async () => {
    const before = upstreamCount();
    const r = await send(c, ids["pre-throws"]!, { environment: "dev" });
    expect(r.status).toBeNull();
    expect(r.error).toBe("the pre-request script of request 'pre-throws' failed, so the request was not sent: Error: boom");
    expect(r.errors).toEqual([{ source: "request 'pre-throws'", event: "prerequest", message: "Error: boom", stack: expect.any(String), line: 2 }]);
    expect(r.tests).toEqual([]);
    expect(r.traffic_id).toBeNull();
    expect(upstreamCount()).toBe(before);
    const dev = byName((await ok(svc.call(`${C}/${c.id}`))).environments, "dev");
    expect(byKey(dev.variables, "token").currentValue).toBe("set-before-throw");
  });

  test("a test script that throws is reported in errors; the response and the tests before it stay", async () => {
    const r = await send(c, ids["test-throws"]!);
    expect(r.status).toBe(200);
    expect(r.error).toBeNull();
    expect(r.tests).toEqual([
      { name: "collection test", passed: true, error: null },
      { name: "before", passed: true, error: null },
    ]);
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0]).toMatchObject({ source: "request 'test-throws'", event: "test", line: 2 });
    expect(r.errors[0].message).toContain("TypeError");
  });

  test("a pre-request script that runs past the time limit stops the request with the timeout as its error", async () => {
    const before = upstreamCount();
    const r = await send(c, ids["pre-loops"]!);
    expect(r.status).toBeNull();
    expect(r.errors).toEqual([{ source: "request 'pre-loops'", event: "prerequest", message: "Script timed out after 1000 ms", stack: null, line: null }]);
    expect(r.error).toContain("Script timed out after 1000 ms");
    expect(upstreamCount()).toBe(before);
  });

  test("secret variables are masked in console lines, test names and messages, also inside other text and after a script changed them", async () => {
    const r = await send(c, ids.secrets!, { environment: "dev" });
    expect(r.status).toBe(200);
    expect(r.console.map((l: any) => l.message)).toEqual(["secret is ***", "Authorization: Bearer ***!", '{"k":"***"}', "plain is visible-value", "now ***"]);
    expect(r.tests).toEqual([
      { name: "collection test", passed: true, error: null },
      { name: "secret ***", passed: false, error: "expected '***' to deeply equal 'x'" },
    ]);
    expect(JSON.stringify(r)).not.toContain("s3cr3t-value");
    expect(JSON.stringify(r)).not.toContain("rotated-secret");
    // the value itself is kept (the masking is of the output only)
    const dev = byName((await ok(svc.call(`${C}/${c.id}`))).environments, "dev");
    expect(byKey(dev.variables, "apiSecret")).toMatchObject({ currentValue: "rotated-secret", isSecret: true });
  });

  test("a run's data row and iteration reach resolution and pm.iterationData / pm.info", async () => {
    const r = await send(c, ids.data!, { data: { user: "ada" }, iteration: { index: 1, count: 3 }, environment: "dev" });
    expect(JSON.parse(r.body).path).toBe("/echo/data?user=ada");
    expect(r.tests.at(-1)).toEqual({ name: "iteration 1/3 ada", passed: true, error: null });
  });

  test("a collection file written before folders had scripts still reads (its folders get empty scripts)", async () => {
    const id = "old-layout";
    const old = { ...c, id, folders: [{ id: "f1", name: "F", requests: [], folders: [], auth: null, headers: [] }], environments: [] };
    await Bun.write(join(svc.config.dataDir, "compose", `${id}.json`), JSON.stringify(old));
    const got = await ok(svc.call(`${C}/${id}`));
    expect(got.folders).toEqual([{ id: "f1", name: "F", requests: [], folders: [], auth: null, headers: [], scripts: { prerequest: "", test: "" } }]);
  });
});
