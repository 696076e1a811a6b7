// The management API's own HTTP/1 front door (src/api/server.ts), over raw sockets against the real service:
// issue 21 finding 8 (an absolute-form target naming another authority is refused; nothing a client sends is a
// 500), and what Bun.serve did before and must still be done: keep-alive, pipelining, chunked request bodies,
// 100-continue, HEAD, streamed responses (SSE) that end when the client goes away, size limits.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startService } from "../helpers/service.ts";
import { parseResponses, rawExchange, waitUntil } from "../helpers/raw-client.ts";

type Svc = Awaited<ReturnType<typeof startService>>;
let svc: Svc;
beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.stop();
});

const host = () => `Host: 127.0.0.1:${svc.apiPort}\r\n`;
const auth = () => `Authorization: Bearer ${svc.token}\r\n`;

/** One exchange; the first complete response. */
async function one(req: string | (string | { write?: string; waitFor?: (t: string) => boolean })[]) {
  const r = await rawExchange(svc.apiPort!, req as never, { timeoutMs: 8000, until: (t) => parseResponses(t).some((x) => x.status >= 200) });
  const res = parseResponses(r.text).find((x) => x.status >= 200);
  if (!res) throw new Error(`no response; got ${JSON.stringify(r.text.slice(0, 300))}`);
  return { ...res, raw: r.text, closed: r.closedByServer };
}

const errorCode = (body: string) => (JSON.parse(body) as { error: { code: string; message: string } }).error.code;

describe("8: an absolute-form request target must name us", () => {
  const foreign = (p: string) => [
    `http://evil.example${p}`,
    `http://evil.example:${0}${p}`.replace(":0", ":8080"),
    `http://127.0.0.1${p}`, // port 80: not ours
    `http://127.0.0.1:1${p}`,
    `https://127.0.0.1:PORT${p}`,
    `ws://127.0.0.1:PORT${p}`,
    `http://[::1]:PORT${p}`,
  ];
  for (const path of ["/api/v1/traffic", "/api/v1/health"]) {
    test(`GET <foreign authority>${path} with our Host and a valid token: 403 forbidden_host`, async () => {
      for (const target of foreign(path)) {
        const t = target.replace("PORT", String(svc.apiPort));
        const r = await one(`GET ${t} HTTP/1.1\r\n${host()}${auth()}Connection: close\r\n\r\n`);
        expect({ t, status: r.status }).toEqual({ t, status: 403 });
        expect(errorCode(r.body)).toBe("forbidden_host");
        expect(r.body).not.toContain('"items"');
      }
    });
  }

  test("an absolute-form target naming us is served (127.0.0.1 and localhost)", async () => {
    for (const a of [`127.0.0.1:${svc.apiPort}`, `localhost:${svc.apiPort}`]) {
      const r = await one(`GET http://${a}/api/v1/traffic?limit=1 HTTP/1.1\r\n${host()}${auth()}Connection: close\r\n\r\n`);
      expect(r.status).toBe(200);
      expect(JSON.parse(r.body)).toHaveProperty("items");
    }
  });

  test("a foreign Host with our absolute-form target is still 403", async () => {
    const r = await one(`GET http://127.0.0.1:${svc.apiPort}/api/v1/health HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n`);
    expect(r.status).toBe(403);
    expect(errorCode(r.body)).toBe("forbidden_host");
  });
});

describe("8: every malformed request is a 4xx/5xx-by-the-codec with the JSON error shape, never a 500", () => {
  const cases: [string, () => string, number][] = [
    ["Host 127.0.0.1:PORT@evil.com", () => `GET /api/v1/traffic HTTP/1.1\r\nHost: 127.0.0.1:${svc.apiPort}@evil.com\r\n${auth()}\r\n`, 403],
    ["absolute-form with userinfo", () => `GET http://127.0.0.1:${svc.apiPort}@evil.com/api/v1/traffic HTTP/1.1\r\n${host()}${auth()}\r\n`, 400],
    ["HTTP/1.0 without Host", () => `GET /api/v1/traffic HTTP/1.0\r\n${auth()}\r\n`, 400],
    ["HTTP/1.1 without Host", () => `GET /api/v1/health HTTP/1.1\r\n\r\n`, 400],
    ["two Host headers", () => `GET /api/v1/health HTTP/1.1\r\n${host()}Host: evil.example\r\n\r\n`, 400],
    ["CONNECT", () => `CONNECT 127.0.0.1:${svc.apiPort} HTTP/1.1\r\n${host()}\r\n`, 400],
    ["OPTIONS *", () => `OPTIONS * HTTP/1.1\r\n${host()}\r\n`, 400],
    ["garbage request line", () => `HELLO\r\n\r\n`, 400],
    ["bare LF", () => `GET /api/v1/health HTTP/1.1\n${host()}\n`, 400],
    ["Content-Length and Transfer-Encoding", () => `POST /api/v1/compose/collections HTTP/1.1\r\n${host()}${auth()}Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`, 400],
    ["Transfer-Encoding not ending in chunked", () => `POST /api/v1/compose/collections HTTP/1.1\r\n${host()}${auth()}Transfer-Encoding: gzip\r\n\r\n`, 400],
    ["unknown transfer coding", () => `POST /api/v1/compose/collections HTTP/1.1\r\n${host()}${auth()}Transfer-Encoding: gzip, chunked\r\n\r\n`, 501],
    ["HTTP/2.0 request line", () => `GET /api/v1/health HTTP/2.0\r\n${host()}\r\n`, 505],
    ["head over 64 KiB", () => `GET /api/v1/health HTTP/1.1\r\n${host()}X-Big: ${"a".repeat(70_000)}\r\n\r\n`, 431],
    ["bad chunk size", () => `POST /api/v1/compose/collections HTTP/1.1\r\n${host()}${auth()}Transfer-Encoding: chunked\r\n\r\nzz\r\n`, 400],
    ["Expect other than 100-continue", () => `POST /api/v1/compose/collections HTTP/1.1\r\n${host()}${auth()}Expect: 200-ok\r\nContent-Length: 2\r\n\r\n{}`, 417],
    ["Content-Length over 128 MiB", () => `POST /api/v1/traffic/import HTTP/1.1\r\n${host()}${auth()}Content-Length: ${129 * 1024 * 1024}\r\n\r\n`, 413],
  ];
  for (const [name, req, status] of cases) {
    test(`${name}: ${status}`, async () => {
      const r = await one(req());
      expect(r.status).toBe(status);
      expect(r.headers.find(([k]) => k.toLowerCase() === "content-type")?.[1]).toContain("application/json");
      expect(errorCode(r.body)).toBeString();
    });
  }

  test("after all of them the API still serves", async () => {
    const r = await one(`GET /api/v1/health HTTP/1.1\r\n${host()}Connection: close\r\n\r\n`);
    expect(r.status).toBe(200);
  });
});

describe("HTTP/1 behaviour kept from Bun.serve", () => {
  test("keep-alive: three pipelined requests in one write get three answers in order on one connection", async () => {
    const req = (p: string) => `GET ${p} HTTP/1.1\r\n${host()}${auth()}\r\n`;
    const r = await rawExchange(svc.apiPort!, req("/api/v1/health") + req("/api/v1/nope") + req("/api/v1/capture/status"), {
      timeoutMs: 8000,
      until: (t) => parseResponses(t).length >= 3,
    });
    const rs = parseResponses(r.text);
    expect(rs.map((x) => x.status)).toEqual([200, 404, 200]);
    expect(JSON.parse(rs[2]!.body)).toHaveProperty("capturing");
    expect(r.closedByServer).toBe(false);
  });

  test("a client that half-closes after two pipelined requests gets both answers, then the close", async () => {
    const req = (p: string) => `GET ${p} HTTP/1.1\r\n${host()}${auth()}\r\n`;
    const r = await rawExchange(svc.apiPort!, [{ write: req("/api/v1/capture/status") + req("/api/v1/health"), end: true }], { timeoutMs: 8000 });
    expect(parseResponses(r.text).map((x) => x.status)).toEqual([200, 200]);
    expect(r.closedByServer).toBe(true);
  });

  test("a body the handler never reads (401) is skipped, and the connection serves the next request", async () => {
    const body = JSON.stringify({ name: "y".repeat(20_000) });
    const r = await rawExchange(
      svc.apiPort!,
      `POST /api/v1/compose/collections HTTP/1.1\r\n${host()}Content-Length: ${body.length}\r\n\r\n${body}GET /api/v1/capture/status HTTP/1.1\r\n${host()}${auth()}\r\n`,
      { timeoutMs: 8000, until: (t) => parseResponses(t).length >= 2 },
    );
    const rs = parseResponses(r.text);
    expect(rs.map((x) => x.status)).toEqual([401, 200]);
    expect(JSON.parse(rs[1]!.body)).toHaveProperty("capturing");
  });

  test("a chunked request body in pieces reaches the handler whole", async () => {
    const body = JSON.stringify({ name: "chunked-" + "x".repeat(5000) });
    const a = body.slice(0, 1000);
    const b = body.slice(1000);
    const r = await one([
      `POST /api/v1/compose/collections HTTP/1.1\r\n${host()}${auth()}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n`,
      `${a.length.toString(16)}\r\n${a}\r\n`,
      `${b.length.toString(16)};ext=1\r\n${b}\r\n0\r\n\r\n`,
    ]);
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body).name).toBe(JSON.parse(body).name);
  });

  test("Expect: 100-continue gets 100 Continue before the body is sent, then the answer", async () => {
    const body = JSON.stringify({ name: "continued" });
    const r = await one([
      `POST /api/v1/compose/collections HTTP/1.1\r\n${host()}${auth()}Content-Length: ${body.length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`,
      { waitFor: (t) => t.startsWith("HTTP/1.1 100 Continue\r\n\r\n"), write: body },
    ]);
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body).name).toBe("continued");
  });

  test("HEAD: the head with its Content-Length, no body; the connection serves the next request", async () => {
    const r = await rawExchange(svc.apiPort!, `HEAD /api/v1/capture/status HTTP/1.1\r\n${host()}${auth()}\r\nGET /api/v1/capture/status HTTP/1.1\r\n${host()}${auth()}\r\n`, {
      timeoutMs: 8000,
      until: (t) => /\r\n\r\n\{.*\}$/s.test(t) && t.split("HTTP/1.1 200").length === 3,
    });
    const [headPart, getPart] = r.text.split(/(?=HTTP\/1\.1 200)/).filter(Boolean);
    expect(headPart).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    const len = Number(/content-length: (\d+)/i.exec(headPart!)?.[1]);
    expect(headPart!.endsWith("\r\n\r\n")).toBe(true);
    const got = getPart!.slice(getPart!.indexOf("\r\n\r\n") + 4);
    expect(len).toBe(got.length);
    expect(JSON.parse(got)).toHaveProperty("capturing");
  });

  test("HTTP/1.0: answered with Content-Length and closed unless keep-alive was asked", async () => {
    const r = await rawExchange(svc.apiPort!, `GET /api/v1/health HTTP/1.0\r\n${host()}\r\n`, { timeoutMs: 8000 });
    expect(r.closedByServer).toBe(true);
    expect(parseResponses(r.text)[0]?.status).toBe(200);
    const k = await rawExchange(svc.apiPort!, `GET /api/v1/health HTTP/1.0\r\n${host()}Connection: keep-alive\r\n\r\n`, {
      timeoutMs: 8000,
      until: (t) => parseResponses(t).length > 0,
    });
    expect(k.closedByServer).toBe(false);
    expect(k.text).toMatch(/connection: keep-alive/i);
  });

  test("server-sent events stream as they happen (chunked) and end when the client goes away", async () => {
    const hub = (svc as unknown as { web: { hub: { size: number } } }).web.hub;
    const before = hub.size;
    const r = await rawExchange(svc.apiPort!, `GET /api/v1/events HTTP/1.1\r\n${host()}${auth()}\r\n`, {
      timeoutMs: 8000,
      until: (t) => t.includes("event: hello"),
    });
    expect(r.text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(r.text).toMatch(/transfer-encoding: chunked/i);
    expect(r.text).toMatch(/content-type: text\/event-stream/i);
    // rawExchange closed the socket: the stream's subscriber goes at once (the keep-alive comment comes only every 5 s)
    await waitUntil("event stream unsubscribed", () => hub.size === before, 3000);
  });

  test("a large HAR import streams in (Content-Length and chunked), and the export streams out", async () => {
    const body = "z".repeat(256 * 1024);
    const entry = (i: number) => ({
      startedDateTime: new Date(1_700_000_000_000 + i).toISOString(),
      time: 1,
      request: { method: "GET", url: `http://big.example/${i}`, httpVersion: "HTTP/1.1", headers: [], queryString: [], cookies: [], headersSize: -1, bodySize: 0 },
      response: { status: 200, statusText: "OK", httpVersion: "HTTP/1.1", headers: [], cookies: [], content: { size: body.length, mimeType: "text/plain", text: body }, redirectURL: "", headersSize: -1, bodySize: body.length },
      cache: {},
      timings: { send: 0, wait: 1, receive: 0 },
    });
    const har = JSON.stringify({ log: { version: "1.2", creator: { name: "t", version: "1" }, entries: Array.from({ length: 80 }, (_, i) => entry(i)) } });
    expect(har.length).toBeGreaterThan(20 * 1024 * 1024);
    const plain = await svc.call("/api/v1/traffic/import", { method: "POST", body: har });
    expect(plain.status).toBe(200);
    expect(((await plain.json()) as { imported: number }).imported).toBe(80);
    // chunked: a stream body, sent in 1 MiB pieces
    const bytes = new TextEncoder().encode(har);
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        for (let o = 0; o < bytes.length; o += 1 << 20) c.enqueue(bytes.subarray(o, o + (1 << 20)));
        c.close();
      },
    });
    const chunked = await svc.call("/api/v1/traffic/import", { method: "POST", body: stream, duplex: "half" } as RequestInit);
    expect(chunked.status).toBe(200);
    expect(((await chunked.json()) as { imported: number }).imported).toBe(80);
    const out = await svc.call("/api/v1/traffic/export.har?host=big.example");
    expect(out.status).toBe(200);
    expect(out.headers.get("transfer-encoding")).toBe("chunked");
    expect(((await out.json()) as { log: { entries: unknown[] } }).log.entries.length).toBe(160);
  });

  test("a request body larger than 128 MiB sent chunked is refused with 413 and the connection closed", async () => {
    // the limit is checked as bytes arrive: send the head and about 129 MiB, fast
    const piece = new Uint8Array(4 * 1024 * 1024).fill(0x61);
    const chunk = Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from("\r\n")]);
    const parts: (string | Uint8Array)[] = [`POST /api/v1/traffic/import HTTP/1.1\r\n${host()}${auth()}Transfer-Encoding: chunked\r\n\r\n`];
    for (let i = 0; i < 33; i++) parts.push(chunk);
    const r = await rawExchange(svc.apiPort!, parts, { timeoutMs: 30_000, until: (t) => parseResponses(t).length > 0 });
    const res = parseResponses(r.text)[0];
    expect(res?.status).toBe(413);
    expect(errorCode(res!.body)).toBe("payload_too_large");
  });
});
