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
