/**
 * GET /traffic/export.har and POST /traffic/import over real proxied traffic: HAR 1.2 schema validity (ajv +
 * har-schema), field-by-field fidelity, the tapwire → HAR → tapwire round trip, and list/detail/export/diff/replay on
 * imported entries.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { gzipSync } from "node:zlib";
import type { Server } from "bun";
import type { WsStore } from "../../../src/features/websocket/store.ts";
import { harErrors } from "../../helpers/har-schema.ts";
import { startService } from "../../helpers/service.ts";
import { curl } from "../../helpers/upstream.ts";

type Svc = Awaited<ReturnType<typeof startService>>;
let svc: Svc;
let origin: Server<unknown>;
let base: string;
let proxy: string;
const PNG = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52, 0xff, 0x00, 0x80]);
const BIG = "0123456789".repeat(300); // 3000 bytes, over the 1 KiB body limit below
const ids: Record<string, number> = {};

async function call(path: string, init?: RequestInit): Promise<{ status: number; body: any; text: string; headers: Headers }> {
  const r = await svc.call(`/api/v1${path}`, init);
  const text = await r.text();
  let body: any = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: r.status, body, text, headers: r.headers };
}

async function newest(): Promise<number> {
  const r = await call("/traffic?limit=1");
  if (!r.body.items?.[0]) throw new Error(`no entry: ${r.status} ${r.text}`);
  return r.body.items[0].id;
}

beforeAll(async () => {
  origin = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const u = new URL(req.url);
      const body = await req.text();
      switch (u.pathname) {
        case "/redirect":
          return new Response(null, { status: 302, headers: { Location: "/target", "Set-Cookie": "sid=abc; Path=/; HttpOnly; SameSite=Lax" } });
        case "/target":
          return new Response("<p>here</p>", { headers: { "Content-Type": "text/html; charset=utf-8" } });
        case "/form":
          return Response.json({ got: body }, { status: 201 });
        case "/image.png":
          return new Response(PNG, { headers: { "Content-Type": "image/png" } });
        case "/gzip":
          return new Response(gzipSync(JSON.stringify({ zipped: "yes".repeat(50) })), { headers: { "Content-Type": "application/json", "Content-Encoding": "gzip" } });
        case "/big":
          return new Response(BIG, { headers: { "Content-Type": "text/plain" } });
        default:
          return new Response("nope", { status: 404 });
      }
    },
  });
  base = `http://127.0.0.1:${origin.port}`;
  svc = await startService({ bodyLimit: 1024 });
  proxy = `http://127.0.0.1:${svc.proxyPort}`;
  const plan: [string, string[]][] = [
    ["redirect", ["-H", "Cookie: a=1; b=two", "-H", "X-Dup: 1", "-H", "X-Dup: 2", `${base}/redirect?x=1&y=%20z`]],
    ["form", ["-d", "name=J%C3%B6rg&city=Z%C3%BCrich", `${base}/form`]],
    ["multipart", ["-F", "field=value", "-F", "file=@-;filename=a.txt;type=text/plain", `${base}/form`]],
    ["image", [`${base}/image.png`]],
    ["gzip", ["--compressed", `${base}/gzip`]],
    ["big", [`${base}/big`]],
    ["binaryPost", ["--data-binary", "@-", "-H", "Content-Type: application/octet-stream", `${base}/form`]],
    ["refused", ["http://127.0.0.1:1/unreachable"]],
  ];
  for (const [name, args] of plan) {
    const p = Bun.spawn(["curl", "-sS", "-o", "/dev/null", "-x", proxy, ...args], { stdin: "pipe", stdout: "ignore", stderr: "pipe" });
    p.stdin.write(name === "binaryPost" ? new Uint8Array([0, 1, 2, 0xff, 0xfe]) : "file body\n");
    p.stdin.end();
    const [, err] = await Promise.all([p.exited, new Response(p.stderr).text()]);
    if (err && name !== "refused") throw new Error(`curl for ${name}: ${err}`);
    ids[name] = await newest();
  }
  // a WebSocket connection record tied to an entry, as the websocket feature keeps them
  const ws = svc.feature<{ name: string; store: WsStore }>("websocket").store;
  ids.ws = svc.store.add({
    method: "GET", url: `${base}/socket`, host: "127.0.0.1", status_code: 101, content_type: "", duration_ms: 3, timestamp: Date.now(), client_addr: "node", has_response: true,
    req_headers: [["Upgrade", "websocket"], ["Connection", "Upgrade"]], res_headers: [["Upgrade", "websocket"]], req_body: null, req_body_size: 0, res_body: null, res_body_size: 0, reason: "Switching Protocols",
  });
  await svc.store.flush();
  const conn = ws.open(`ws://127.0.0.1:${origin.port}/socket`, () => ids.ws!, false, 1_700_000_000_000);
  const t = 1_700_000_000_123;
  conn.add({ dir: "out", opcode: "text", text: "hello", sizeBytes: 5, truncated: false, ts: t });
  conn.add({ dir: "in", opcode: "binary", text: Buffer.from([1, 2, 3]).toString("base64"), sizeBytes: 3, truncated: false, ts: t + 7 });
  conn.add({ dir: "in", opcode: "close", text: "", sizeBytes: 2, truncated: false, ts: t + 9, closeCode: 1000, closeReason: "" });
});
afterAll(async () => {
  await svc.stop();
  origin.stop(true);
});

let har: any;

describe("GET /traffic/export.har", () => {
  test("streams a HAR 1.2 document that validates against har-schema", async () => {
    const r = await call("/traffic/export.har");
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toContain("application/json");
    expect(r.headers.get("content-disposition")).toContain("attachment");
    har = r.body;
    expect(harErrors(har)).toBeNull();
    expect(har.log.entries.length).toBe(Object.keys(ids).length);
    expect(har.log.entries.map((e: any) => e._tapwire.id)).toEqual(Object.values(ids).sort((a, b) => a - b));
  });

  test("fidelity: request line, headers in order with duplicates, query string, cookies, redirect, timings, server address", async () => {
    const e = har.log.entries.find((x: any) => x._tapwire.id === ids.redirect);
    const d = (await call(`/traffic/${ids.redirect}`)).body;
    expect(e.startedDateTime).toBe(new Date(d.timestamp).toISOString());
    expect(e.startedDateTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(e.time).toBe(d.duration_ms);
    expect(e.request).toMatchObject({ method: "GET", url: `${base}/redirect?x=1&y=%20z`, httpVersion: "HTTP/1.1", bodySize: 0 });
    expect(e.request.headers.map((h: any) => [h.name, h.value])).toEqual(d.req_headers);
    expect(e.request.headers.filter((h: any) => h.name === "X-Dup").map((h: any) => h.value)).toEqual(["1", "2"]);
    expect(e.request.queryString).toEqual([{ name: "x", value: "1" }, { name: "y", value: " z" }]);
    expect(e.request.cookies).toEqual([{ name: "a", value: "1" }, { name: "b", value: "two" }]);
    expect(e.request.headersSize).toBeGreaterThan(50);
    expect(e.response).toMatchObject({ status: 302, statusText: "Found", httpVersion: "HTTP/1.1", redirectURL: "/target", bodySize: 0 });
    expect(e.response.cookies).toEqual([{ name: "sid", value: "abc", path: "/", httpOnly: true, sameSite: "Lax" }]);
    expect(e.response.headers.map((h: any) => [h.name, h.value])).toEqual(d.res_headers);
    // measured by the proxy: every phase a number, -1 only where it does not apply; they add up to about `time`
    for (const k of ["blocked", "send", "wait", "receive"]) expect(e.timings[k]).toBeGreaterThanOrEqual(0);
    expect(e.timings.dns).toBe(-1);
    expect(e.timings.ssl).toBe(-1); // plain http
    expect(e.timings.connect).toBeGreaterThanOrEqual(0); // the first request to this origin opened a connection
    const sum = ["blocked", "connect", "send", "wait", "receive"].reduce((n, k) => n + Math.max(0, e.timings[k]), 0);
    expect(Math.abs(sum - e.time)).toBeLessThanOrEqual(2);
    expect(e.serverIPAddress).toBe("127.0.0.1");
    expect(e.connection).toMatch(/^\d+$/);
    expect(e._tapwire).toMatchObject({ client_addr: "curl", has_response: true, truncated: { request: false, response: false } });
    // the next request to the same origin reused the pooled connection: no connect phase
    const form = har.log.entries.find((x: any) => x._tapwire.id === ids.form);
    expect(form.connection).toBe(e.connection);
    expect(form.timings.connect).toBe(-1);
  });

  test("fidelity: form params, multipart params, binary bodies as base64, compression, truncation, failures", async () => {
    const byId = (id: number) => har.log.entries.find((x: any) => x._tapwire.id === id);
    const form = byId(ids.form!);
    expect(form.request.postData).toMatchObject({ mimeType: "application/x-www-form-urlencoded", text: "name=J%C3%B6rg&city=Z%C3%BCrich" });
    expect(form.request.postData.params).toEqual([{ name: "name", value: "Jörg" }, { name: "city", value: "Zürich" }]);
    expect(form.response).toMatchObject({ status: 201, statusText: "Created" });
    expect(form.response.content).toMatchObject({ mimeType: "application/json;charset=utf-8" });
    const mp = byId(ids.multipart!);
    expect(mp.request.postData.mimeType).toMatch(/^multipart\/form-data; boundary=/);
    expect(mp.request.postData.params).toEqual([{ name: "field", value: "value" }, { name: "file", fileName: "a.txt", contentType: "text/plain" }]);
    const img = byId(ids.image!);
    expect(img.response.content).toEqual({ size: PNG.length, mimeType: "image/png", text: Buffer.from(PNG).toString("base64"), encoding: "base64" });
    const bin = byId(ids.binaryPost!);
    expect(bin.request.postData).toMatchObject({ mimeType: "application/octet-stream", text: Buffer.from([0, 1, 2, 0xff, 0xfe]).toString("base64"), _encoding: "base64" });
    const gz = byId(ids.gzip!);
    const plain = JSON.stringify({ zipped: "yes".repeat(50) });
    expect(gz.response.content.text).toBe(plain);
    expect(gz.response.content.size).toBe(plain.length);
    expect(gz.response.content.compression).toBe(plain.length - gz.response.bodySize);
    expect(gz.response.bodySize).toBeLessThan(plain.length);
    const big = byId(ids.big!);
    expect(big._tapwire.truncated).toEqual({ request: false, response: true });
    expect(big.response.content.comment).toBe("body truncated: 1024 of 3000 bytes captured");
    expect(big.response.content.text).toBe(BIG.slice(0, 1024));
    expect(big.response.bodySize).toBe(3000);
    const refused = byId(ids.refused!);
    expect(refused.response.status).toBe(502);
    expect(refused._error).toContain("refused");
    expect(refused._tapwire.error).toBe(refused._error);
  });

  test("WebSocket frames as _webSocketMessages (Chrome's layout: time in seconds)", () => {
    const e = har.log.entries.find((x: any) => x._tapwire.id === ids.ws);
    expect(e._resourceType).toBe("websocket");
    expect(e._webSocketMessages).toEqual([
      { type: "send", time: 1_700_000_000.123, opcode: 1, data: "hello" },
      { type: "receive", time: 1_700_000_000.13, opcode: 2, data: "AQID" },
      { type: "receive", time: 1_700_000_000.132, opcode: 8, data: "", _sizeBytes: 2, _closeCode: 1000, _closeReason: "" },
    ]);
  });

  test("the /traffic filters apply; limit/offset are uncapped; title makes a page; unknown or order parameters are a 400", async () => {
    const f = await call("/traffic/export.har?method=POST");
    expect(f.body.log.entries.map((e: any) => e._tapwire.id)).toEqual([ids.form, ids.multipart, ids.binaryPost]);
    const s = await call(`/traffic/export.har?status=302&host=127.0.0.1`);
    expect(s.body.log.entries.map((e: any) => e._tapwire.id)).toEqual([ids.redirect]);
    const lim = await call(`/traffic/export.har?limit=2&offset=1`);
    expect(lim.body.log.entries.map((e: any) => e._tapwire.id)).toEqual([ids.form, ids.multipart]);
    const since = await call(`/traffic/export.har?since_id=${ids.big}&search=unreachable`);
    expect(since.body.log.entries.map((e: any) => e._tapwire.id)).toEqual([ids.refused]);
    const client = await call(`/traffic/export.har?client=node`);
    expect(client.body.log.entries.map((e: any) => e._tapwire.id)).toEqual([ids.ws]);
    const titled = await call(`/traffic/export.har?title=ci%20run&has_error=true`);
    expect(harErrors(titled.body)).toBeNull();
    expect(titled.body.log.pages).toEqual([{ id: "page_1", title: "ci run", startedDateTime: titled.body.log.entries[0].startedDateTime, pageTimings: {} }]);
    expect(titled.body.log.entries.every((e: any) => e.pageref === "page_1" && e.response.status >= 400)).toBe(true);
    const none = await call(`/traffic/export.har?host=nowhere.invalid`);
    expect(none.body.log.entries).toEqual([]);
    expect(harErrors(none.body)).toBeNull();
    for (const q of ["order=desc", "colour=red", "limit=x", "status=abc", "limit=1&limit=2"]) {
      const r = await call(`/traffic/export.har?${q}`);
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("bad_request");
    }
  });
});

test("the OpenAPI document describes the HAR and session routes", async () => {
  const doc = (await call("/openapi.json")).body;
  expect(Object.keys(doc.paths["/api/v1/traffic/export.har"])).toEqual(["get"]);
  expect(doc.paths["/api/v1/traffic/export.har"].get.parameters.map((p: any) => p.name)).toEqual(expect.arrayContaining(["host", "client", "limit", "title"]));
  expect(doc.paths["/api/v1/traffic/import"].post.requestBody).toBeDefined();
  for (const p of ["/api/v1/session-tabs/", "/api/v1/session-tabs/{id}", "/api/v1/session-tabs/{id}/save", "/api/v1/session-tabs/saved", "/api/v1/session-tabs/saved/{id}", "/api/v1/session-tabs/saved/{id}/har"]) {
    expect(doc.paths[p]).toBeDefined();
  }
});

describe("POST /traffic/import", () => {
  let imported: { first_id: number; last_id: number };

  test("adds every entry, marked imported; the detail keeps every field the original shows", async () => {
    const r = await call("/traffic/import", { method: "POST", body: JSON.stringify(har) });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ imported: har.log.entries.length, websocket_connections: 1 });
    expect(r.body.last_id - r.body.first_id + 1).toBe(har.log.entries.length);
    imported = r.body;
    for (let i = 0; i < har.log.entries.length; i++) {
      const origId = har.log.entries[i]._tapwire.id;
      const orig = (await call(`/traffic/${origId}`)).body;
      const copy = (await call(`/traffic/${imported.first_id + i}`)).body;
      expect(copy.imported).toEqual({ format: "har", creator: expect.stringMatching(/^tapwire /), original_id: origId });
      const { id: _a, imported: _b, ...restCopy } = copy;
      const { id: _c, ...restOrig } = orig;
      expect(restCopy).toEqual(restOrig);
    }
  });

  test("imported entries work in list, export (again identical), diff and replay", async () => {
    const list = await call(`/traffic?since_id=${imported.first_id - 1}&limit=500`);
    expect(list.body.total).toBe(har.log.entries.length);
    const again = (await call(`/traffic/export.har?since_id=${imported.first_id - 1}`)).body;
    expect(harErrors(again)).toBeNull();
    const strip = (e: any) => {
      const { _tapwire, ...rest } = e;
      const { id: _i, extra, ...tw } = _tapwire;
      const { imported: _m, ...x } = extra;
      return { ...rest, _tapwire: { ...tw, extra: x } };
    };
    expect(again.log.entries.map(strip)).toEqual(har.log.entries.map(strip));
    const formCopy = imported.first_id + har.log.entries.findIndex((e: any) => e._tapwire.id === ids.form);
    const diff = await call(`/traffic/${ids.form}/diff/${formCopy}`);
    expect(diff.status).toBe(200);
    const raw = await call(`/traffic/${formCopy}/export/curl`);
    expect(raw.text).toContain("name=J%C3%B6rg");
    const replay = await call(`/traffic/${formCopy}/replay`, { method: "POST", body: "{}" });
    expect(replay.status).toBe(200);
    expect(replay.body.status_code).toBe(201);
    expect(JSON.parse(replay.body.body)).toEqual({ got: "name=J%C3%B6rg&city=Z%C3%BCrich" });
  });

  test("WebSocket messages go to the WebSocket store, tied to the imported entry", async () => {
    const wsCopy = imported.first_id + har.log.entries.findIndex((e: any) => e._tapwire.id === ids.ws);
    const conns = (await call("/websocket/connections")).body.items;
    const c = conns.find((x: any) => x.logId === wsCopy);
    expect(c).toMatchObject({ url: `ws://127.0.0.1:${origin.port}/socket`, closed: true, frameCount: 3, imported: true });
    const frames = (await call(`/websocket/connections/${c.connId}/frames`)).body.items;
    expect(frames).toEqual([
      { dir: "out", opcode: "text", text: "hello", sizeBytes: 5, truncated: false, ts: 1_700_000_000_123 },
      { dir: "in", opcode: "binary", text: "AQID", sizeBytes: 3, truncated: false, ts: 1_700_000_000_130 },
      { dir: "in", opcode: "close", text: "", sizeBytes: 2, truncated: false, ts: 1_700_000_000_132, closeCode: 1000, closeReason: "" },
    ]);
  });

  test("Playwright's millisecond times and a browser's HTTP/2 pseudo-headers, base64 text bodies, gzip headers", async () => {
    const doc = {
      log: {
        version: "1.2",
        creator: { name: "Playwright", version: "1.65" },
        entries: [
          {
            startedDateTime: "2026-03-03T03:03:03.303Z",
            time: 20.7,
            request: { method: "GET", url: "https://h2.test/ws", httpVersion: "HTTP/2.0", headers: [{ name: ":authority", value: "h2.test" }, { name: ":method", value: "GET" }, { name: "accept", value: "*/*" }], queryString: [], cookies: [], headersSize: -1, bodySize: 0 },
            response: { status: 200, statusText: "", httpVersion: "HTTP/2.0", headers: [{ name: "content-type", value: "application/json" }, { name: "content-encoding", value: "br" }], cookies: [], content: { size: 7, mimeType: "application/json", text: Buffer.from('{"a":1}').toString("base64"), encoding: "base64" }, redirectURL: "", headersSize: -1, bodySize: 5 },
            cache: {},
            timings: { blocked: 1, dns: -1, connect: -1, ssl: -1, send: 0.5, wait: 18, receive: 1.2 },
            serverIPAddress: "[::1]",
            _webSocketMessages: [{ type: "send", time: 1_700_000_001_500.25, opcode: 1, data: "ms" }, { type: "receive", time: 1_700_000_002.5, opcode: 1, data: "s" }],
          },
        ],
      },
    };
    const r = await call("/traffic/import", { method: "POST", body: JSON.stringify(doc) });
    expect(r.status).toBe(200);
    const d = (await call(`/traffic/${r.body.first_id}`)).body;
    expect(d.req_headers).toEqual([["Host", "h2.test"], ["accept", "*/*"]]);
    expect(d).toMatchObject({ client_addr: "har-import", status_code: 200, duration_ms: 21, res_body: '{"a":1}', res_body_encoding: "utf8", res_body_decoded_from: "br", res_body_size: 5, http_version: "HTTP/2.0", server_ip: "::1" });
    expect(d.timings).toEqual({ blocked: 1, dns: -1, connect: -1, ssl: -1, send: 0.5, wait: 18, receive: 1.2 });
    const c = (await call("/websocket/connections")).body.items.find((x: any) => x.logId === r.body.first_id);
    const frames = (await call(`/websocket/connections/${c.connId}/frames`)).body.items;
    expect(frames.map((f: any) => f.ts)).toEqual([1_700_000_001_500, 1_700_000_002_500]);
  });

  test("a malformed HAR is a 400 naming the field, and nothing is added", async () => {
    const count = (await call("/traffic?limit=0")).body.total;
    const good = har.log.entries[0];
    const cases: [unknown, string][] = [
      [{}, "'log'"],
      [{ log: { entries: "x" } }, "log.entries"],
      [{ log: { entries: [good, { ...good, startedDateTime: "soon" }] } }, "log.entries[1].startedDateTime"],
      [{ log: { entries: [{ ...good, request: { ...good.request, url: "/no-origin" } }] } }, "log.entries[0].request.url"],
      [{ log: { entries: [{ ...good, request: { ...good.request, headers: [{ name: "a" }] } }] } }, "log.entries[0].request.headers[0]"],
      [{ log: { entries: [{ ...good, response: { ...good.response, status: "ok" } }] } }, "log.entries[0].response.status"],
      [{ log: { entries: [{ ...good, _webSocketMessages: [{ type: "up", time: 1, opcode: 1, data: "" }] }] } }, "_webSocketMessages[0].type"],
    ];
    for (const [body, where] of cases) {
      const r = await call("/traffic/import", { method: "POST", body: JSON.stringify(body) });
      expect(r.status).toBe(400);
      expect(r.body.error.message).toContain(where);
    }
    expect((await call("/traffic/import", { method: "POST", body: "{" })).status).toBe(400);
    expect((await call("/traffic/import?x=1", { method: "POST", body: JSON.stringify(har) })).status).toBe(400);
    expect((await call("/traffic?limit=0")).body.total).toBe(count);
  });
});
