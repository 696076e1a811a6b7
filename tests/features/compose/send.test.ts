import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startService } from "../../helpers/service.ts";
import { startUpstream, type Upstream } from "../../helpers/upstream.ts";

type Svc = Awaited<ReturnType<typeof startService>>;
let svc: Svc;
let up: Upstream;
let hang: ReturnType<typeof Bun.serve>;

const JSON_HEADERS = { "content-type": "application/json" };
const C = "/api/v1/compose/collections";
const post = (path: string, body: unknown) => svc.call(path, { method: "POST", body: JSON.stringify(body), headers: JSON_HEADERS });
const patch = (path: string, body: unknown) => svc.call(path, { method: "PATCH", body: JSON.stringify(body), headers: JSON_HEADERS });

async function ok(r: Response | Promise<Response>): Promise<any> {
  const res = await r;
  const text = await res.text();
  expect({ status: res.status, text }).toMatchObject({ status: 200 });
  return JSON.parse(text);
}

beforeAll(async () => {
  up = startUpstream();
  // an upstream that never answers (for the timeout)
  hang = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Promise<Response>(() => {}) });
  svc = await startService({ upstreamCa: [up.caFile] });
});
afterAll(async () => {
  await svc?.stop();
  up?.stop();
  hang?.stop(true);
});

/** The last request the upstream saw at this path prefix. */
function seen(path: string) {
  const s = [...up.seen].reverse().find((x) => new URL(x.url).pathname.startsWith(path));
  expect(s).toBeDefined();
  return s!;
}
const hdr = (s: ReturnType<typeof seen>, name: string) => s.headers.find(([n]) => n === name.toLowerCase())?.[1];

describe("POST /compose/send", () => {
  let c: any;
  beforeAll(async () => {
    c = await ok(
      post(C, {
        name: "Send",
        variables: [
          { key: "base", value: `${up.httpsUrl}` },
          { key: "who", value: "collection" },
          { key: "token", value: "col-token" },
        ],
        defaultHeaders: [
          { key: "X-Default", value: "d-{{who}}" },
          { key: "X-Shared", value: "default" },
        ],
        defaultAuth: { type: "bearer", token: "{{token}}" },
        requests: [
          {
            name: "echo",
            method: "POST",
            url: "{{base}}/echo/{{who}}",
            headers: [
              { key: "X-Shared", value: "request" },
              { key: "X-Who", value: "{{who}}" },
              { key: "X-Missing", value: "{{nope}}" },
              { key: "X-Off", value: "x", enabled: false },
            ],
            queryParams: [
              { key: "q", value: "a b&{{who}}" },
              { key: "off", value: "1", enabled: false },
            ],
            body: '{"who":"{{who}}","id":"{{$guid}}"}',
            contentType: "application/json",
          },
          { name: "bin", method: "GET", url: "{{base}}/bytes?n=3", auth: { type: "none" } },
        ],
        folders: [
          {
            name: "keyed",
            auth: { type: "apiKey", key: "X-Api-Key", value: "{{token}}" },
            headers: [{ key: "X-Folder", value: "f" }],
            requests: [
              { name: "inherits", method: "GET", url: "{{base}}/echo/folder" },
              { name: "basic", method: "GET", url: "{{base}}/echo/basic", auth: { type: "basic", username: "{{who}}", password: "p@ss" } },
            ],
          },
        ],
        environments: [
          {
            name: "dev",
            variables: [
              { key: "who", defaultValue: "env-default" },
              { key: "token", defaultValue: "env-token", enabled: false },
            ],
          },
        ],
      }),
    );
  });

  test("resolves URL, query, headers, body and auth; what arrived upstream is what the answer says", async () => {
    const r = await ok(post("/api/v1/compose/send", { collection_id: c.id, request_id: c.requests[0].id, environment: "dev", variables: {} }));
    expect(r.error).toBeNull();
    expect(r.status).toBe(200);
    expect(r.status_text).toBe("OK");
    expect(r.unresolved).toEqual(["nope"]);
    expect(r.tests).toEqual([]);
    expect(r.console).toEqual([]);
    expect(r.resolved_url).toBe(`${up.httpsUrl}/echo/env-default?q=a%20b%26env-default`);
    expect(r.body_encoding).toBe("utf8");
    const echoed = JSON.parse(r.body);
    expect(echoed.method).toBe("POST");
    expect(echoed.path).toBe("/echo/env-default?q=a%20b%26env-default");
    expect(r.size_bytes).toBe(Buffer.byteLength(r.body));
    expect(typeof r.duration_ms).toBe("number");
    expect(r.headers.some(([n, v]: [string, string]) => n.toLowerCase() === "content-type" && v.includes("json"))).toBe(true);

    const s = seen("/echo/env-default");
    expect(s.method).toBe("POST");
    expect(new URL(s.url).search).toBe("?q=a%20b%26env-default");
    expect(hdr(s, "x-default")).toBe("d-env-default");
    expect(hdr(s, "x-shared")).toBe("request");
    expect(hdr(s, "x-who")).toBe("env-default");
    expect(hdr(s, "x-missing")).toBe("{{nope}}");
    expect(hdr(s, "x-off")).toBeUndefined();
    expect(hdr(s, "content-type")).toBe("application/json");
    // the disabled env token falls through to the collection's
    expect(hdr(s, "authorization")).toBe("Bearer col-token");
    const body = JSON.parse(new TextDecoder().decode(s.body));
    expect(body.who).toBe("env-default");
    expect(body.id).toMatch(/^[0-9a-f-]{36}$/);
  });

  test("call variables win; the environment's currentValue (PATCH) beats its default", async () => {
    await ok(patch(`${C}/${c.id}/environments/dev/variables/who`, { currentValue: "env-current" }));
    await ok(post("/api/v1/compose/send", { collection_id: c.id, request_id: c.requests[0].id, environment: "dev" }));
    expect(hdr(seen("/echo/env-current"), "x-who")).toBe("env-current");
    await ok(post("/api/v1/compose/send", { collection_id: c.id, request_id: c.requests[0].id, environment: "dev", variables: { who: "call", nope: "found", token: "call-token" } }));
    const s = seen("/echo/call");
    expect(hdr(s, "x-who")).toBe("call");
    expect(hdr(s, "x-missing")).toBe("found");
    expect(hdr(s, "authorization")).toBe("Bearer call-token");
    // without an environment: the collection's variables
    const r = await ok(post("/api/v1/compose/send", { collection_id: c.id, request_id: c.requests[0].id }));
    expect(r.resolved_url).toContain("/echo/collection?");
  });

  test("folder auth and headers are inherited; a request's own auth wins", async () => {
    const [inherits, basic] = c.folders[0].requests;
    await ok(post("/api/v1/compose/send", { collection_id: c.id, request_id: inherits.id, environment: "dev", variables: {} }));
    const s = seen("/echo/folder");
    expect(hdr(s, "x-api-key")).toBe("col-token");
    expect(hdr(s, "authorization")).toBeUndefined();
    expect(hdr(s, "x-folder")).toBe("f");
    // the current value set by the test above
    expect(hdr(s, "x-default")).toBe("d-env-current");
    await ok(post("/api/v1/compose/send", { collection_id: c.id, request_id: basic.id, environment: "dev", variables: { who: "alice" } }));
    expect(hdr(seen("/echo/basic"), "authorization")).toBe(`Basic ${Buffer.from("alice:p@ss").toString("base64")}`);
  });

  test("the request is captured (GET /traffic) with the tapwire-compose client, and traffic_id names the entry", async () => {
    const r = await ok(post("/api/v1/compose/send", { collection_id: c.id, request_id: c.requests[0].id, variables: { who: "captured" } }));
    expect(typeof r.traffic_id).toBe("number");
    const list = await ok(svc.call("/api/v1/traffic?path=/echo/captured"));
    expect(list.items.length).toBe(1);
    expect(list.items[0].id).toBe(r.traffic_id);
    expect(list.items[0].method).toBe("POST");
    const detail = await ok(svc.call(`/api/v1/traffic/${r.traffic_id}`));
    expect(detail.url).toBe(r.resolved_url.replace(":443", ""));
    expect(JSON.stringify(detail)).toContain("tapwire-compose");
    expect(detail.req_headers.find(([n]: [string, string]) => n.toLowerCase() === "x-who")[1]).toBe("captured");
  });

  test("a binary response is base64", async () => {
    const r = await ok(post("/api/v1/compose/send", { collection_id: c.id, request_id: c.requests[1].id }));
    expect(r.status).toBe(200);
    expect(r.body_encoding).toBe("base64");
    expect(Buffer.from(r.body, "base64").toString()).toBe("aaa");
    expect(r.size_bytes).toBe(3);
    expect(hdr(seen("/bytes"), "authorization")).toBeUndefined();
  });

  test("404 for an unknown collection, request or environment; 400 for a bad body", async () => {
    const send = (b: unknown) => post("/api/v1/compose/send", b);
    for (const [b, what] of [
      [{ collection_id: "nope", request_id: c.requests[0].id }, "nope"],
      [{ collection_id: c.id, request_id: "nope" }, "nope"],
      [{ collection_id: c.id, request_id: c.requests[0].id, environment: "staging" }, "staging"],
    ] as const) {
      const r = await send(b);
      expect(r.status).toBe(404);
      expect(((await r.json()) as any).error.message).toContain(what);
    }
    const bad = await send({ collection_id: c.id, request_id: c.requests[0].id, variables: { n: 5 } });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as any).error.message).toContain("variables");
    const missing = await send({ collection_id: c.id });
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as any).error.message).toContain("request_id");
  });

  test("a connection failure, a timeout or an unusable URL answer 200 with error set", async () => {
    const closed = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    const deadPort = closed.port;
    closed.stop(true);
    const col = await ok(
      post(C, {
        name: "Failures",
        requests: [
          { name: "refused", method: "GET", url: `http://127.0.0.1:${deadPort}/x` },
          { name: "slow", method: "GET", url: `http://127.0.0.1:${hang.port}/slow`, timeout: 300 },
          { name: "unresolved", method: "GET", url: "{{baseUrl}}/x" },
        ],
      }),
    );
    const refused = await ok(post("/api/v1/compose/send", { collection_id: col.id, request_id: col.requests[0].id }));
    expect(refused.status).toBeNull();
    expect(typeof refused.error).toBe("string");
    expect(refused.error).toContain("127.0.0.1");
    expect(refused.resolved_url).toBe(`http://127.0.0.1:${deadPort}/x`);
    // the failed flow is captured too
    expect(typeof refused.traffic_id).toBe("number");

    const t0 = Date.now();
    const slow = await ok(post("/api/v1/compose/send", { collection_id: col.id, request_id: col.requests[1].id }));
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(slow.status).toBeNull();
    expect(slow.error).toContain("no response");

    // an upstream's own 502 is an ordinary response
    const bad = await ok(post(`${C}/${col.id}/requests`, { request: { name: "502", method: "GET", url: `${up.httpsUrl}/status/502` } }));
    const upstream502 = await ok(post("/api/v1/compose/send", { collection_id: col.id, request_id: bad.id }));
    expect(upstream502.error).toBeNull();
    expect(upstream502.status).toBe(502);
    expect(upstream502.body).toBe("status 502");

    const unresolved = await ok(post("/api/v1/compose/send", { collection_id: col.id, request_id: col.requests[2].id }));
    expect(unresolved.status).toBeNull();
    expect(unresolved.unresolved).toEqual(["baseUrl"]);
    expect(unresolved.error).toContain("baseUrl");
  });
});

describe("currentValue is session-only", () => {
  test("it is gone after a restart on the same data directory; defaultValue stays", async () => {
    const a = await startService({ upstreamCa: [up.caFile] });
    const dataDir = a.config.dataDir;
    let b: Svc | null = null;
    try {
      const col = await ok(
        a.call(C, {
          method: "POST",
          headers: JSON_HEADERS,
          body: JSON.stringify({ name: "Restart", requests: [{ name: "r", method: "GET", url: `${up.httpsUrl}/echo/{{who}}` }], environments: [{ name: "dev", variables: [{ key: "who", defaultValue: "default" }] }] }),
        }),
      );
      await ok(a.call(`${C}/${col.id}/environments/dev/variables/who`, { method: "PATCH", headers: JSON_HEADERS, body: JSON.stringify({ currentValue: "session" }) }));
      const before = await ok(a.call("/api/v1/compose/send", { method: "POST", headers: JSON_HEADERS, body: JSON.stringify({ collection_id: col.id, request_id: col.requests[0].id, environment: "dev" }) }));
      expect(before.resolved_url).toEndWith("/echo/session");
      await a.stop();

      b = await startService({ dataDir, upstreamCa: [up.caFile] });
      const again = await ok(b.call(`${C}/${col.id}`));
      expect(again.environments[0].variables[0]).toEqual({ key: "who", defaultValue: "default", currentValue: null, enabled: true, isSecret: false });
      const after = await ok(b.call("/api/v1/compose/send", { method: "POST", headers: JSON_HEADERS, body: JSON.stringify({ collection_id: col.id, request_id: col.requests[0].id, environment: "dev" }) }));
      expect(after.resolved_url).toEndWith("/echo/default");
      expect(hdr(seen("/echo/default"), "host")).toBe(new URL(up.httpsUrl).host);
    } finally {
      await a.stop();
      await b?.stop();
    }
  });
});
