/** Spec 4.14 routes and the authoring extensions, with files on disk; 503 and 504 of POST /flows/{id}/run. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync, writeFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { startService } from "../../helpers/service.ts";
import { answer, flow, JSON_HEADERS, ok, post, runFlow, save, type Svc } from "./flow-helpers.ts";
import { type LoginApi, startLoginApi } from "./login-api.ts";

let svc: Svc;
let api: LoginApi;
const F = "/api/v1/flows";

beforeAll(async () => {
  api = startLoginApi();
  svc = await startService();
});
afterAll(async () => {
  await svc?.stop();
  api?.stop();
});

const flowsDir = () => join(svc.config.dataDir, "flows");
const writeRaw = (name: string, text: string) => {
  mkdirSync(flowsDir(), { recursive: true });
  writeFileSync(join(flowsDir(), name), text);
};

describe("reading", () => {
  test("GET /flows lists the readable flows and skips corrupt files silently; GET of a corrupt file is 404", async () => {
    await save(svc, flow("listed-a", [["start", "start"], ["e", "end"]], [["start", "e"]]));
    // a flow written by hand: only id, name, nodes and edges
    writeRaw("by-hand.json", JSON.stringify({ id: "by-hand", name: "By hand", nodes: [{ id: "s", type: "start" }], edges: [] }));
    writeRaw("not-json.json", "{ this is not json");
    writeRaw("wrong-shape.json", JSON.stringify({ id: "wrong-shape", name: "x", nodes: "none", edges: [] }));
    writeRaw("other-id.json", JSON.stringify({ id: "elsewhere", name: "x", nodes: [], edges: [] }));
    writeRaw("dup-node.json", JSON.stringify({ id: "dup-node", name: "x", nodes: [{ id: "a", type: "start" }, { id: "a", type: "end" }], edges: [] }));
    const list = await ok(svc.call(F));
    const ids = list.flows.map((f: any) => f.id);
    expect(ids).toContain("listed-a");
    expect(ids).toContain("by-hand");
    for (const bad of ["not-json", "wrong-shape", "other-id", "elsewhere", "dup-node"]) expect(ids).not.toContain(bad);
    const a = list.flows.find((f: any) => f.id === "listed-a");
    expect(a).toEqual({ id: "listed-a", name: "listed-a", nodeCount: 2, edgeCount: 1, createdAt: a.createdAt, updatedAt: a.updatedAt });
    expect(a.createdAt).toBeGreaterThan(1.7e12);
    for (const bad of ["not-json", "wrong-shape", "other-id", "dup-node", "missing"]) {
      const r = await answer(svc.call(`${F}/${bad}`));
      expect(r.status).toBe(404);
      expect(r.body.error.code).toBe("not_found");
    }
    // the hand-written one is completed with the defaults of the format
    const hand = await ok(svc.call(`${F}/by-hand`));
    const mtime = Math.floor(statSync(join(flowsDir(), "by-hand.json")).mtimeMs);
    expect(hand).toEqual({
      id: "by-hand",
      name: "By hand",
      description: "",
      variables: {},
      nodes: [{ id: "s", type: "start", position: { x: 0, y: 0 }, data: {} }],
      edges: [],
      viewport: { x: 0, y: 0, zoom: 1 },
      createdAt: mtime,
      updatedAt: mtime,
      subflowIds: [],
    });
  });

  test("subflowIds: the de-duplicated flowIds of the subflow nodes, in node order; editor fields are kept", async () => {
    const stored = await save(svc, {
      ...flow(
        "with-subs",
        [
          ["start", "start"],
          ["s1", "subflow", { flowId: "zeta" }],
          ["s2", "subflow", { flowId: "alpha" }],
          ["r", "request", { method: "GET", url: "http://x/" }],
          ["s3", "subflow", { flowId: "zeta" }],
          ["s4", "subflow", { flowId: "mid" }],
          ["s5", "subflow", { flowId: "alpha" }],
        ],
        [["start", "s1"]],
      ),
      viewport: { x: 10, y: -20, zoom: 1.5 },
    });
    expect(stored.subflowIds).toEqual(["zeta", "alpha", "mid"]);
    // an editor's own fields on nodes survive a round trip
    const raw = JSON.parse(readFileSync(join(flowsDir(), "with-subs.json"), "utf8"));
    raw.nodes[0].width = 150;
    raw.nodes[0].selected = true;
    writeRaw("with-subs.json", JSON.stringify(raw));
    const got = await ok(svc.call(`${F}/with-subs`));
    expect(got.subflowIds).toEqual(["zeta", "alpha", "mid"]);
    expect(got.viewport).toEqual({ x: 10, y: -20, zoom: 1.5 });
    expect(got.nodes[0]).toMatchObject({ width: 150, selected: true });
    expect(got.edges[0]).toEqual({ id: "e-start-s1", source: "start", target: "s1", sourceHandle: null, label: "" });
  });

  test("the OpenAPI document describes the routes and their bodies", async () => {
    const doc = await ok(svc.call("/api/v1/openapi.json"));
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(["/api/v1/flows", "/api/v1/flows/{id}", "/api/v1/flows/{id}/run", "/api/v1/flows/validate", "/api/v1/flows/run"]));
    const run = doc.paths["/api/v1/flows/{id}/run"].post;
    expect(run.requestBody.required).toBe(false);
    expect(JSON.stringify(run.requestBody)).toContain("environment");
    expect(run.summary ?? run.description).toContain("uiNotRunning");
    expect(JSON.stringify(doc.paths["/api/v1/flows"].post.requestBody)).toContain("nodes");
  });

  test("an unknown query parameter is a 400", async () => {
    const r = await answer(svc.call(`${F}?limit=5`));
    expect(r.status).toBe(400);
    expect(r.body.error.message).toContain("limit");
  });
});

describe("authoring extensions", () => {
  test("POST stores a file (0600, folder 0700), PUT replaces it keeping createdAt, DELETE removes it", async () => {
    const created = await save(svc, flow("crud", [["start", "start"]], [], { description: "first" }));
    expect(created).toMatchObject({ id: "crud", description: "first", subflowIds: [] });
    const file = join(flowsDir(), "crud.json");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(flowsDir()).mode & 0o777).toBe(0o700);
    expect(readdirSync(flowsDir()).filter((n) => n.includes(".tmp"))).toEqual([]);
    const dup = await answer(post(svc, F, flow("crud", [], [])));
    expect(dup.status).toBe(409);
    const put = await ok(svc.call(`${F}/crud`, { method: "PUT", headers: JSON_HEADERS, body: JSON.stringify(flow("crud", [["start", "start"], ["e", "end"]], [["start", "e"]], { description: "second" })) }));
    expect(put).toMatchObject({ description: "second", createdAt: created.createdAt });
    expect(put.updatedAt).toBeGreaterThan(created.updatedAt);
    expect(JSON.parse(readFileSync(file, "utf8")).description).toBe("second");
    const mismatch = await answer(svc.call(`${F}/crud`, { method: "PUT", headers: JSON_HEADERS, body: JSON.stringify(flow("other", [], [])) }));
    expect(mismatch.status).toBe(400);
    const putMissing = await answer(svc.call(`${F}/nope`, { method: "PUT", headers: JSON_HEADERS, body: JSON.stringify({ name: "x", nodes: [], edges: [] }) }));
    expect(putMissing.status).toBe(404);
    const del = await svc.call(`${F}/crud`, { method: "DELETE" });
    expect(del.status).toBe(204);
    expect((await answer(svc.call(`${F}/crud`))).status).toBe(404);
    expect((await svc.call(`${F}/crud`, { method: "DELETE" })).status).toBe(404);
  });

  test("POST without an id gets a fresh one; bad bodies are 400 naming the field", async () => {
    const a = await save(svc, { name: "anon", nodes: [], edges: [] });
    expect(a.id).toMatch(/^[0-9a-f-]{36}$/);
    for (const [body, field] of [
      [{ name: "x", nodes: [{ id: "a" }], edges: [] }, "type"],
      [{ name: "x", nodes: [], edges: [{ source: "a" }] }, "target"],
      [{ name: "x", nodes: [{ id: "a", type: "start" }, { id: "a", type: "end" }], edges: [] }, "used twice"],
      [{ id: "bad id!", name: "x", nodes: [], edges: [] }, "id"],
      // a string where an object is expected is refused, not turned into {"0": ...}
      [{ name: "x", nodes: [], edges: [], variables: "y" }, "variables"],
      [{ name: "x", nodes: [{ id: "a", type: "start", data: "x" }], edges: [] }, "nodes.0.data"],
    ] as const) {
      const r = await answer(post(svc, F, body));
      expect(r.status).toBe(400);
      expect(r.body.error.message).toContain(field);
    }
    const notJson = await answer(post(svc, F, "{nope"));
    expect(notJson.status).toBe(400);
    const noBody = await answer(svc.call(F, { method: "POST" }));
    expect(noBody.status).toBe(400);
    const adhoc = await answer(post(svc, `${F}/run`, { flow: { name: "x", nodes: [], edges: [] }, environment: "x" }));
    expect(adhoc.status).toBe(400);
    expect(adhoc.body.error.message).toContain("environment");
  });

  test("POST /flows/validate reports unknown node types, dangling edges, missing subflows, unreachable nodes and more", async () => {
    const v = await ok(
      post(
        svc,
        `${F}/validate`,
        flow(
          "check-me",
          [
            ["start", "start"],
            ["x", "teleport"],
            ["sub", "subflow", { flowId: "does-not-exist" }],
            ["cond", "condition", { expression: "true" }],
            ["lonely", "delay", { ms: 5 }],
            ["bad", "assert", { checks: [{ type: "status" }] }],
            ["req", "request", { method: "GET" }],
          ],
          [
            ["start", "x"],
            ["x", "sub"],
            ["sub", "ghost"],
            ["sub", "cond"],
            ["cond", "bad"],
            ["bad", "req"],
          ],
        ),
      ),
    );
    expect(v.valid).toBe(false);
    const codes = v.problems.map((p: any) => `${p.severity}:${p.code}:${p.nodeId ?? p.edgeId}`);
    expect(codes).toContain("error:unknownNodeType:x");
    expect(codes).toContain("error:danglingEdge:e-sub-ghost");
    expect(codes).toContain("error:missingSubflow:sub");
    expect(codes).toContain("error:conditionHandle:e-cond-bad");
    expect(codes).toContain("error:invalidNodeData:bad");
    expect(codes).toContain("error:invalidNodeData:req");
    expect(codes).toContain("warning:unreachableNode:lonely");
    const good = await ok(post(svc, `${F}/validate`, flow("fine", [["start", "start"], ["e", "end"], ["island", "end"]], [["start", "e"]])));
    expect(good.valid).toBe(true);
    expect(good.problems).toEqual([{ severity: "warning", code: "unreachableNode", message: expect.stringContaining("island"), nodeId: "island" }]);
  });

  test("a flow that is not valid does not run: status error naming the problems, no steps", async () => {
    await save(svc, flow("invalid-run", [["start", "start"], ["x", "teleport"]], [["start", "x"]]));
    const r = await runFlow(svc, "invalid-run");
    expect(r).toMatchObject({ status: "error", steps: [] });
    expect(r.error).toContain("teleport");
  });

  test("POST /flows/run runs a flow sent whole without storing it", async () => {
    const r = await ok(post(svc, `${F}/run`, { flow: flow("adhoc", [["start", "start"], ["r", "request", { method: "GET", url: "{{base}}/echo?adhoc" }]], [["start", "r"]]), environment: { base: api.url } }));
    expect(r).toMatchObject({ flowId: "adhoc", status: "passed" });
    expect((await answer(svc.call(`${F}/adhoc`))).status).toBe(404);
  });
});

describe("POST /flows/{id}/run", () => {
  beforeAll(async () => {
    await save(
      svc,
      flow(
        "echo-vars",
        [
          ["start", "start"],
          ["r", "request", { method: "GET", url: "{{base}}/echo?greeting={{greeting}}" }],
        ],
        [["start", "r"]],
        { variables: { base: "http://127.0.0.1:1", greeting: "default" } },
      ),
    );
  });

  test("without a body, with {}, and with overrides", async () => {
    // without a body: the flow's own defaults (base points nowhere: the request step errors)
    const bare = await answer(svc.call(`${F}/echo-vars/run`, { method: "POST" }));
    expect(bare.status).toBe(200);
    expect(bare.body).toMatchObject({ flowId: "echo-vars", status: "error" });
    expect(bare.body.variables).toEqual({ base: "http://127.0.0.1:1", greeting: "default" });
    const empty = await answer(post(svc, `${F}/echo-vars/run`, {}));
    expect(empty.status).toBe(200);
    expect(empty.body.variables).toEqual({ base: "http://127.0.0.1:1", greeting: "default" });
    const over = await ok(post(svc, `${F}/echo-vars/run`, { environment: { base: api.url, greeting: "hi there", extra: { nested: [1, 2] } } }));
    expect(over.status).toBe("passed");
    expect(over.variables).toEqual({ base: api.url, greeting: "hi there", extra: { nested: [1, 2] } });
    expect(JSON.parse(over.steps[1].response.body).path).toBe("/echo?greeting=hi%20there");
    // the report's fields
    const step = over.steps[1];
    expect(Object.keys(over).sort()).toEqual(["durationMs", "error", "finishedAt", "flowId", "outputs", "runId", "startedAt", "status", "steps", "variables"]);
    for (const k of ["nodeId", "type", "name", "status", "startedAt", "durationMs", "request", "response", "assertions", "console", "error"]) expect(step).toHaveProperty(k);
  });

  test("404 for a missing or corrupt flow; 400 for a body that is not an object of overrides", async () => {
    writeRaw("corrupt-run.json", "[1,2");
    for (const id of ["missing-flow", "corrupt-run"]) {
      const r = await answer(post(svc, `${F}/${id}/run`, {}));
      expect(r.status).toBe(404);
    }
    for (const body of [{ environment: "x" }, { environment: [1] }, { env: {} }, [1], "text"]) {
      const bad = await answer(post(svc, `${F}/echo-vars/run`, body));
      expect(bad.status).toBe(400);
      expect(bad.body.error.code).toBe("bad_request");
    }
  });
});

describe("503 and 504", () => {
  test("503 uiNotRunning when the runner is off (--no-flow-runner); the flows can still be read", async () => {
    const off = await startService({ flowRunner: false });
    try {
      await save(off, flow("idle", [["start", "start"]], []));
      const r = await answer(post(off, `${F}/idle/run`));
      expect(r.status).toBe(503);
      expect(r.body.error.code).toBe("uiNotRunning");
      expect((await answer(off.call(`${F}/idle`))).status).toBe(200);
      expect((await ok(off.call("/api/v1/health"))).flow_runner).toBe(false);
      expect((await ok(svc.call("/api/v1/health"))).flow_runner).toBe(true);
      // a missing flow is still a 404
      expect((await answer(post(off, `${F}/nope/run`))).status).toBe(404);
    } finally {
      await off.stop();
    }
  });

  test("504 timeout after the whole run timeout against an upstream that never answers; the request is aborted", async () => {
    const short = await startService({ flowTimeoutMs: 1000 });
    try {
      await save(short, flow("hangs", [["start", "start"], ["r", "request", { method: "GET", url: `${api.url}/hang` }]], [["start", "r"]]));
      const t0 = performance.now();
      const r = await answer(post(short, `${F}/hangs/run`));
      const waited = performance.now() - t0;
      expect(r.status).toBe(504);
      expect(r.body.error.code).toBe("timeout");
      expect(waited).toBeGreaterThanOrEqual(990);
      // the in-flight request was aborted: the upstream sees its connection go away
      const deadline = Date.now() + 10_000;
      while (api.hanging() > 0 && Date.now() < deadline) await Bun.sleep(20);
      expect(api.hanging()).toBe(0);
    } finally {
      await short.stop();
    }
  });

  test("503 uiNotRunning for a run in progress when the service stops", async () => {
    const s = await startService();
    let stopped: Promise<void> | null = null;
    try {
      await save(s, flow("hangs", [["start", "start"], ["r", "request", { method: "GET", url: `${api.url}/hang?stop` }]], [["start", "r"]]));
      const pending = answer(post(s, `${F}/hangs/run`));
      const deadline = Date.now() + 10_000;
      while (!api.seen.includes("GET /hang?stop") && Date.now() < deadline) await Bun.sleep(10);
      expect(api.seen).toContain("GET /hang?stop");
      stopped = s.stop();
      const r = await pending;
      expect(r.status).toBe(503);
      expect(r.body.error.code).toBe("uiNotRunning");
    } finally {
      await (stopped ?? s.stop());
    }
  });
});
