import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startService } from "../../helpers/service.ts";
import { curl, startUpstream, type Upstream } from "../../helpers/upstream.ts";

type Svc = Awaited<ReturnType<typeof startService>>;
let up: Upstream;
let svc: Svc;
let proxy: string;
const ids: Record<string, number> = {};

async function json(path: string, init?: RequestInit): Promise<any> {
  const r = await svc.call(path, init);
  return await r.json();
}

beforeAll(async () => {
  up = startUpstream();
  svc = await startService({ upstreamCa: [up.caFile] });
  proxy = `http://127.0.0.1:${svc.proxyPort}`;
  // a known set of flows, in order
  const plan: [string, string[]][] = [
    ["get-a", [`${up.httpUrl}/echo/a?k=1`]],
    ["post-b", ["-d", "payload with findme-token inside", `${up.httpUrl}/echo/b`]],
    ["notfound", [`${up.httpUrl}/missing/page`]],
    ["status500", [`${up.httpUrl}/status/500`]],
    ["put-c", ["-X", "PUT", "--data-binary", '{"a":1,"b":[1,2]}', "-H", "Content-Type: application/json", `${up.httpUrl}/echo/c`]],
    ["https-d", ["--cacert", `${svc.config.dataDir}/ca.pem`, `${up.httpsUrl}/echo/d`]],
  ];
  for (const [name, args] of plan) {
    await curl(["-x", proxy, "-o", "/dev/null", ...args]);
    ids[name] = (await json("/api/v1/traffic?limit=1")).items[0].id;
  }
});
afterAll(async () => {
  await svc.stop();
  up.stop();
});

describe("GET /traffic: filters and paging", () => {
  test("default: newest first, limit 50, offset 0, total", async () => {
    const r = await json("/api/v1/traffic");
    expect(r.limit).toBe(50);
    expect(r.offset).toBe(0);
    expect(r.total).toBe(6);
    expect(r.items.map((e: any) => e.id)).toEqual([ids["https-d"], ids["put-c"], ids.status500, ids.notfound, ids["post-b"], ids["get-a"]]);
    const e = r.items[0];
    for (const k of ["id", "method", "url", "host", "status_code", "content_type", "duration_ms", "timestamp", "client_addr", "has_response"]) expect(k in e).toBe(true);
    expect("req_body" in e).toBe(false);
  });

  test("limit is capped at 500; offset pages", async () => {
    expect((await json("/api/v1/traffic?limit=100000")).limit).toBe(500);
    const p1 = await json("/api/v1/traffic?limit=2");
    const p2 = await json("/api/v1/traffic?limit=2&offset=2");
    expect(p1.items.length).toBe(2);
    expect(p2.items[0].id).toBe(ids.status500);
    expect(p2.total).toBe(6);
    expect(p2.offset).toBe(2);
  });

  test("host, method, status, range, path, search, has_error, since_id, since", async () => {
    const idsOf = async (q: string) => (await json(`/api/v1/traffic?${q}`)).items.map((e: any) => e.id).sort((a: number, b: number) => a - b);
    expect(await idsOf("host=localhost")).toEqual([ids["https-d"]]);
    expect(await idsOf("host=LOCALHOST")).toEqual([ids["https-d"]]);
    expect(await idsOf("method=PUT")).toEqual([ids["put-c"]]);
    expect(await idsOf("method=post")).toEqual([ids["post-b"]]);
    expect(await idsOf("status=404")).toEqual([ids.notfound]);
    expect(await idsOf("status_min=400&status_max=499")).toEqual([ids.notfound]);
    expect(await idsOf("status_min=500")).toEqual([ids.status500]);
    expect(await idsOf("path=/echo/c")).toEqual([ids["put-c"]]);
    expect(await idsOf("path=missing")).toEqual([ids.notfound]);
    expect(await idsOf("search=findme-token")).toEqual([ids["post-b"]]);
    expect(await idsOf("search=k%3D1")).toEqual([ids["get-a"]]);
    expect(await idsOf("has_error=true")).toEqual([ids.notfound, ids.status500]);
    expect((await idsOf("has_error=false")).length).toBe(4);
    expect(await idsOf(`since_id=${ids.status500}`)).toEqual([ids["put-c"], ids["https-d"]]);
    expect(await idsOf("method=GET&has_error=true")).toEqual([ids.notfound, ids.status500]);
    const all = (await json("/api/v1/traffic")).items;
    const tsOfPut = all.find((e: any) => e.id === ids["put-c"]).timestamp;
    expect((await idsOf(`since=${tsOfPut}`)).includes(ids["put-c"])).toBe(true);
    expect(await idsOf(`since=${Date.now() + 60_000}`)).toEqual([]);
  });

  test("since_id polling is oldest-first, so a poller never skips entries", async () => {
    const r = await json(`/api/v1/traffic?since_id=0&limit=2`);
    expect(r.items.map((e: any) => e.id)).toEqual([ids["get-a"], ids["post-b"]]);
    const next = await json(`/api/v1/traffic?since_id=${ids["post-b"]}&limit=2`);
    expect(next.items.map((e: any) => e.id)).toEqual([ids.notfound, ids.status500]);
  });

  test("bad query values are 400", async () => {
    for (const q of ["limit=abc", "limit=-1", "offset=-5", "status=x", "has_error=maybe", "since_id=1.5", "order=up"]) {
      const r = await svc.call(`/api/v1/traffic?${q}`);
      expect({ q, status: r.status }).toEqual({ q, status: 400 });
    }
  });
});

const NUMERIC_PARAMS = ["limit", "offset", "status", "status_min", "status_max", "since_id", "since"];
const NOT_UINTS = ["-1", "1.5", "-0.5", "1e1", "0x10", "+1", "%201", "1%20", "", "abc", "Infinity", "NaN"];

async function errorOf(path: string, init?: RequestInit): Promise<{ status: number; code: string; message: string }> {
  const r = await svc.call(path, init);
  const j: any = await r.json();
  return { status: r.status, code: j?.error?.code, message: j?.error?.message ?? JSON.stringify(j) };
}

describe("GET /traffic: a filter the caller sent is applied or refused, never ignored", () => {
  test("a negative, fractional or non-decimal value of any numeric parameter is 400 naming it, alone or beside other filters", async () => {
    for (const name of NUMERIC_PARAMS) {
      for (const bad of NOT_UINTS) {
        for (const q of [`${name}=${bad}`, `since_id=${ids["get-a"]}&${name}=${bad}&status=404`]) {
          if (q.startsWith("since_id") && name === "since_id") continue;
          const e = await errorOf(`/api/v1/traffic?${q}`);
          expect({ q, status: e.status, code: e.code }).toEqual({ q, status: 400, code: "bad_request" });
          expect({ q, named: e.message.includes(`'${name}'`) }).toEqual({ q, named: true });
        }
      }
    }
    // the reported case: not the unfiltered list
    const e = await errorOf(`/api/v1/traffic?since_id=${ids.status500}&limit=-1`);
    expect(e.status).toBe(400);
    expect(e.message).toContain("'limit'");
  });

  test("every numeric filter is applied when sent with the others", async () => {
    const r = await json(`/api/v1/traffic?since_id=${ids["get-a"]}&status_min=400&status_max=599&limit=1&offset=1&since=0`);
    expect(r.items.map((x: any) => x.id)).toEqual([ids.status500]);
    expect(r.total).toBe(2);
    expect(r.limit).toBe(1);
    expect(r.offset).toBe(1);
    expect((await json(`/api/v1/traffic?status=404&since_id=${ids.notfound}`)).items).toEqual([]);
    expect((await json("/api/v1/traffic?limit=007")).limit).toBe(7);
  });

  test("an unknown or repeated query parameter, or a bad has_error/order, is 400 naming it", async () => {
    for (const [q, name] of [
      ["hots=localhost", "hots"],
      ["status_code=404", "status_code"],
      ["limit=1&limit=2", "limit"],
      ["host=a&host=b", "host"],
      ["has_error=maybe", "has_error"],
      ["has_error=", "has_error"],
      ["order=up", "order"],
    ]) {
      const e = await errorOf(`/api/v1/traffic?${q}`);
      expect({ q, status: e.status }).toEqual({ q, status: 400 });
      expect(e.message).toContain(`'${name}'`);
    }
  });
});

describe("ids in paths: malformed is 400, well-formed and unknown is 404", () => {
  const routes = (id: string, other: string): [string, string][] => [
    ["GET", `/api/v1/traffic/${id}`],
    ["DELETE", `/api/v1/traffic/${id}`],
    ["GET", `/api/v1/traffic/${id}/export/curl`],
    ["GET", `/api/v1/traffic/${id}/export/raw`],
    ["POST", `/api/v1/traffic/${id}/replay`],
    ["GET", `/api/v1/traffic/${id}/diff/${other}`],
  ];

  test("a malformed id is 400 naming the parameter on every route, and leaves the entries alone", async () => {
    const good = String(ids["get-a"]);
    for (const bad of ["1.5", "-1", "1e0", "0x1", "+1", "%201", "abc", "Infinity"]) {
      for (const [method, path] of routes(bad, good)) {
        const e = await errorOf(path, { method });
        expect({ method, path, status: e.status, code: e.code }).toEqual({ method, path, status: 400, code: "bad_request" });
        expect({ path, named: e.message.includes("'id'") }).toEqual({ path, named: true });
      }
      const e = await errorOf(`/api/v1/traffic/${good}/diff/${bad}`);
      expect({ bad, status: e.status }).toEqual({ bad, status: 400 });
      expect(e.message).toContain("'id2'");
    }
    expect((await json("/api/v1/traffic")).total).toBe(6);
  });

  test("a well-formed unknown id is 404 on every route", async () => {
    for (const [method, path] of [...routes("999999", String(ids["get-a"])), ["GET", `/api/v1/traffic/${ids["get-a"]}/diff/999999`]]) {
      const e = await errorOf(path, { method });
      expect({ method, path, status: e.status, code: e.code }).toEqual({ method, path, status: 404, code: "not_found" });
    }
  });
});

describe("POST /traffic/{id}/replay body", () => {
  const replayCount = async () => (await json(`/api/v1/traffic?since_id=${ids["https-d"]}`)).total as number;

  test("malformed JSON, a non-object or an object with fields is 400 and replays nothing", async () => {
    const seen = up.seen.length;
    const entries = await replayCount();
    for (const [body, type, says] of [
      ["{bad", "application/json", "JSON"],
      ['{"x": 1', "application/json", "JSON"],
      ["not json", "text/plain", "JSON"],
      ["[1]", "application/json", "empty JSON object"],
      ["null", "application/json", "empty JSON object"],
      ['"x"', "application/json", "empty JSON object"],
      ['{"headers": {"a": "b"}}', "application/json", "'headers'"],
    ]) {
      const e = await errorOf(`/api/v1/traffic/${ids["post-b"]}/replay`, { method: "POST", body, headers: { "content-type": type } });
      expect({ body, status: e.status, code: e.code }).toEqual({ body, status: 400, code: "bad_request" });
      expect({ body, says: e.message.includes(says) }).toEqual({ body, says: true });
    }
    expect(up.seen.length).toBe(seen);
    expect(await replayCount()).toBe(entries);
  });

  test("{}, an empty body and no body replay", async () => {
    const seen = up.seen.length;
    for (const init of [
      { body: "{}", headers: { "content-type": "application/json" } },
      { body: " { } ", headers: { "content-type": "text/plain" } },
      { body: "", headers: { "content-type": "application/json" } },
      {},
    ] as RequestInit[]) {
      const r = await svc.call(`/api/v1/traffic/${ids["get-a"]}/replay`, { method: "POST", ...init });
      expect({ init, status: r.status }).toEqual({ init, status: 200 });
      expect(((await r.json()) as any).replay_of).toBe(ids["get-a"]);
    }
    const c = await curl(["-X", "POST", "-H", `Authorization: Bearer ${svc.token}`, svc.url(`/api/v1/traffic/${ids["get-a"]}/replay`)]);
    expect(JSON.parse(c.out).status_code).toBe(200);
    expect(up.seen.length).toBe(seen + 5);
  });
});

describe("export/curl of a request that came through the proxy", () => {
  test("the command carries the request, not the client's hop: no proxy credential, no hop-by-hop field", async () => {
    await curl([
      "-x", proxy, "-U", "proxyuser:proxy-secret", "-o", "/dev/null",
      "-H", "Connection: keep-alive, X-Hop", "-H", "X-Hop: for the proxy only", "-H", "Keep-Alive: timeout=5", "-H", "TE: trailers",
      "-H", "X-End: for the upstream", "-H", "Content-Type: application/json", "--data-binary", '{"n":1}',
      `${up.httpUrl}/echo/hop?q=1`,
    ]);
    const id = (await json("/api/v1/traffic?limit=1")).items[0].id;
    const captured = new Map(((await json(`/api/v1/traffic/${id}`)).req_headers as string[][]).map(([n, v]) => [n.toLowerCase(), v]));
    // what the client sent to the proxy, recorded as sent
    for (const n of ["proxy-authorization", "proxy-connection", "connection", "x-hop", "keep-alive", "te", "x-end"]) expect({ n, captured: captured.has(n) }).toEqual({ n, captured: true });

    const cmd = await (await svc.call(`/api/v1/traffic/${id}/export/curl`)).text();
    expect(cmd).not.toContain("proxy-secret");
    expect(cmd).not.toContain(captured.get("proxy-authorization")!);
    expect(cmd).not.toMatch(/Proxy-|Keep-Alive|X-Hop|Connection|TE:|Content-Length/i);
    const before = up.seen.length;
    const p = Bun.spawn(["bash", "-c", cmd + " -s -o /dev/null"], { env: { PATH: process.env.PATH ?? "/usr/bin:/bin" }, stdout: "pipe", stderr: "pipe" });
    expect(await p.exited).toBe(0);
    expect(up.seen.length).toBe(before + 1);
    const got = up.seen[up.seen.length - 1]!;
    const h = new Map(got.headers);
    expect(got.method).toBe("POST");
    expect(new URL(got.url).pathname + new URL(got.url).search).toBe("/echo/hop?q=1");
    expect(new TextDecoder().decode(got.body)).toBe('{"n":1}');
    expect(h.get("x-end")).toBe("for the upstream");
    expect(h.get("content-type")).toBe("application/json");
    expect(h.get("content-length")).toBe("7");
    expect(h.get("user-agent")).toBe(captured.get("user-agent"));
    for (const n of ["proxy-authorization", "proxy-connection", "x-hop", "keep-alive", "te", "transfer-encoding", "upgrade"]) expect({ n, arrived: h.has(n) }).toEqual({ n, arrived: false });
    // replay goes through the proxy's own forwarding, which drops the same fields
    const r = await json(`/api/v1/traffic/${id}/replay`, { method: "POST" });
    expect(r.status_code).toBe(200);
    const rh = new Map(up.seen[up.seen.length - 1]!.headers);
    expect(rh.get("x-end")).toBe("for the upstream");
    for (const n of ["proxy-authorization", "proxy-connection", "x-hop", "keep-alive", "te"]) expect({ n, replayed: rh.has(n) }).toEqual({ n, replayed: false });
    // and the raw export keeps the transcript but not the credential
    const raw = await (await svc.call(`/api/v1/traffic/${id}/export/raw`)).text();
    expect(raw).not.toContain(captured.get("proxy-authorization")!);
    expect(raw).toContain("Proxy-Authorization: (redacted: a credential for the proxy)\r\n");
    expect(raw).toContain("Proxy-Connection: Keep-Alive\r\n");
  });
});

describe("entry detail, delete, export, replay, diff", () => {
  test("detail has headers in wire order with original casing, and bodies", async () => {
    const e = await json(`/api/v1/traffic/${ids["put-c"]}`);
    expect(e.method).toBe("PUT");
    expect(e.req_body).toBe('{"a":1,"b":[1,2]}');
    const names = e.req_headers.map((h: string[]) => h[0]);
    expect(names.slice(0, 3)).toEqual(["Host", "User-Agent", "Accept"]);
    expect(names).toContain("Content-Type");
    expect(JSON.parse(e.res_body).body).toBe('{"a":1,"b":[1,2]}');
    expect(Array.isArray(e.res_headers[0])).toBe(true);
  });

  test("unknown id is 404; a non-numeric id is 400", async () => {
    expect((await svc.call("/api/v1/traffic/999999")).status).toBe(404);
    expect((await svc.call("/api/v1/traffic/abc")).status).toBe(400);
    expect((await svc.call("/api/v1/traffic/999999/export/curl")).status).toBe(404);
    expect((await svc.call("/api/v1/traffic/999999", { method: "DELETE" })).status).toBe(404);
  });

  test("export/curl runs in bash and reproduces the request at the upstream", async () => {
    const cmd = await (await svc.call(`/api/v1/traffic/${ids["post-b"]}/export/curl`)).text();
    expect(cmd.startsWith("curl")).toBe(true);
    const before = up.seen.length;
    const p = Bun.spawn(["bash", "-c", cmd + " -s -o /dev/null"], { stdout: "pipe", stderr: "pipe" });
    expect(await p.exited).toBe(0);
    expect(up.seen.length).toBe(before + 1);
    const seen = up.seen[up.seen.length - 1]!;
    expect(seen.method).toBe("POST");
    expect(new URL(seen.url).pathname).toBe("/echo/b");
    expect(new TextDecoder().decode(seen.body)).toBe("payload with findme-token inside");
  });

  test("export/raw gives the raw request and response", async () => {
    const r = await svc.call(`/api/v1/traffic/${ids["get-a"]}/export/raw`);
    expect(r.headers.get("content-type")).toContain("text/plain");
    const raw = await r.text();
    expect(raw.startsWith("GET /echo/a?k=1 HTTP/1.1\r\n")).toBe(true);
    expect(raw).toContain("HTTP/1.1 200 OK\r\n");
  });

  test("replay re-sends through the pipeline, returns the result and captures a new entry", async () => {
    const before = up.seen.length;
    const r = await json(`/api/v1/traffic/${ids["post-b"]}/replay`, { method: "POST", body: "{}", headers: { "content-type": "application/json" } });
    expect(r.status_code).toBe(200);
    expect(JSON.parse(r.body).body).toBe("payload with findme-token inside");
    expect(Array.isArray(r.headers)).toBe(true);
    expect(typeof r.duration_ms).toBe("number");
    expect(up.seen.length).toBe(before + 1);
    expect(r.id).toBeGreaterThan(ids["https-d"]);
    const e = await json(`/api/v1/traffic/${r.id}`);
    expect(e.url).toBe(`${up.httpUrl}/echo/b`);
    expect(e.client_addr).toBe("tapwire-replay");
    expect(e.req_body).toBe("payload with findme-token inside");
  });

  test("replay of an https entry goes to the https upstream", async () => {
    const r = await json(`/api/v1/traffic/${ids["https-d"]}/replay`, { method: "POST", body: "{}", headers: { "content-type": "application/json" } });
    expect(r.status_code).toBe(200);
    expect(JSON.parse(r.body).path).toBe("/echo/d");
  });

  test("diff compares method, url, status, headers and bodies", async () => {
    const d = await json(`/api/v1/traffic/${ids["get-a"]}/diff/${ids["put-c"]}`);
    expect(d.equal).toBe(false);
    expect(d.method).toMatchObject({ a: "GET", b: "PUT", equal: false });
    expect(d.status.equal).toBe(true);
    expect(d.url.equal).toBe(false);
    expect(d.req_headers.added.map((h: string[]) => h[0].toLowerCase())).toContain("content-type");
    expect(d.res_body.equal).toBe(false);
    const same = await json(`/api/v1/traffic/${ids["get-a"]}/diff/${ids["get-a"]}`);
    expect(same.equal).toBe(true);
    expect((await svc.call(`/api/v1/traffic/${ids["get-a"]}/diff/999999`)).status).toBe(404);
  });

  test("delete one, then delete all", async () => {
    expect((await svc.call(`/api/v1/traffic/${ids["get-a"]}`, { method: "DELETE" })).status).toBe(204);
    expect((await svc.call(`/api/v1/traffic/${ids["get-a"]}`)).status).toBe(404);
    expect((await svc.call("/api/v1/traffic", { method: "DELETE" })).status).toBe(204);
    expect((await json("/api/v1/traffic")).total).toBe(0);
    expect((await json("/api/v1/capture/status")).entry_count).toBe(0);
  });
});
