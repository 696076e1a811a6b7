/**
 * H2ServerConnection on a Bun.listen socket (prior knowledge, plain TCP: the TLS case feeds the same bytes after
 * the handshake), driven by real HTTP/2 clients: node:http2 and curl --http2-prior-knowledge; attacks played over
 * raw sockets are cut with a GOAWAY while another client is served.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import http2 from "node:http2";
import net from "node:net";
import type { Socket } from "bun";
import { ERROR } from "../../../src/core/http2/guard.ts";
import { type H2Request, H2ServerConnection } from "../../../src/core/http2/server-connection.ts";
import { Endpoint } from "../../../src/core/proxy/endpoint.ts";
import { continuationFrame, headersFrame, hpack, parseFrames, pingFrame, PREFACE, requestFields, rstFrame, settingsFrame } from "../../helpers/h2-frames.ts";

const seen: H2Request[] = [];
let server: Bun.TCPSocketListener<{ conn: H2ServerConnection; ep: Endpoint }>;

/** The "application": echoes what it got; /trailers answers with trailers; /big streams 8 MiB. */
async function app(req: H2Request) {
  seen.push(req);
  const chunks: Buffer[] = [];
  if (!req.bodyless) {
    await new Promise<void>((resolve) => {
      req.onData = (c) => chunks.push(Buffer.from(c));
      req.onEnd = () => resolve();
    });
  }
  const body = Buffer.concat(chunks);
  if (req.path === "/big") {
    req.respond(200, [["Content-Type", "application/octet-stream"]]);
    const part = new Uint8Array(64 * 1024).fill(120);
    for (let i = 0; i < 128; i++) if (!req.write(part)) await new Promise<void>((r) => (req.onWritable = r));
    return req.end();
  }
  req.respond(200, [["Content-Type", "application/json"], ["Connection", "keep-alive"], ["Set-Cookie", "a=1"], ["Set-Cookie", "b=2"]]);
  req.write(new TextEncoder().encode(JSON.stringify({ method: req.method, path: req.path, headers: req.headers, body: body.toString() })));
  req.end(req.path === "/trailers" ? [["grpc-status", "0"], ["Content-Length", "9"]] : undefined);
}

beforeAll(() => {
  server = Bun.listen<{ conn: H2ServerConnection; ep: Endpoint }>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(sock: Socket<{ conn: H2ServerConnection; ep: Endpoint }>) {
        const ep = new Endpoint(sock);
        const conn = new H2ServerConnection(
          { write: (b) => ep.write(b), set onDrain(f) { ep.onDrain = f; }, get onDrain() { return ep.onDrain; }, end: () => sock.end() },
          { pauseReading: () => sock.pause(), resumeReading: () => sock.resume(), onRequest: (r) => void app(r) },
        );
        sock.data = { conn, ep };
      },
      data(sock, bytes) {
        sock.data.conn.feed(bytes);
      },
      drain(sock) {
        sock.data.ep.handleDrain();
      },
      close(sock) {
        sock.data?.conn.socketClosed();
      },
    },
  });
});
afterAll(() => server.stop(true));

describe("H2ServerConnection", () => {
  test("node:http2 client: requests become HTTP/1-style heads; responses, cookies and trailers come back", async () => {
    const c = http2.connect(`http://127.0.0.1:${server.port}`);
    const one = (path: string, body?: string) =>
      new Promise<{ status: number; headers: http2.IncomingHttpHeaders; text: string; trailers: http2.IncomingHttpHeaders | null }>((resolve, reject) => {
        const r = c.request({ ":path": path, ":method": body ? "POST" : "GET", cookie: ["x=1", "y=2"], "x-test": "1" }, { endStream: !body });
        let text = "";
        let status = 0;
        let headers: http2.IncomingHttpHeaders = {};
        let trailers: http2.IncomingHttpHeaders | null = null;
        r.on("response", (h) => ((status = Number(h[":status"])), (headers = h)));
        r.on("trailers", (t) => (trailers = t));
        r.setEncoding("utf8");
        r.on("data", (d) => (text += d));
        r.on("end", () => resolve({ status, headers, text, trailers }));
        r.on("error", reject);
        if (body) r.end(body);
      });
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => one(`/r${i}`, i % 2 ? `body${i}` : undefined)));
    results.forEach((r, i) => {
      expect(r.status).toBe(200);
      const echo = JSON.parse(r.text);
      expect(echo.path).toBe(`/r${i}`);
      expect(echo.body).toBe(i % 2 ? `body${i}` : "");
      expect(echo.headers[0][0]).toBe("host");
      expect(echo.headers).toContainEqual(["cookie", "x=1; y=2"]);
      expect(r.headers["set-cookie"]).toEqual(["a=1", "b=2"]);
      expect(r.headers["connection"]).toBeUndefined();
    });
    const t = await one("/trailers");
    expect(t.trailers?.["grpc-status"]).toBe("0");
    expect(t.trailers?.["content-length"]).toBeUndefined();
    c.close();
  });

  test("curl --http2-prior-knowledge gets the response cleanly, with and without trailers", async () => {
    for (const path of ["/plain", "/trailers"]) {
      const p = Bun.spawn(["curl", "-sS", "--http2-prior-knowledge", "-o", "-", "-w", "\n%{http_version} %{response_code}", `http://127.0.0.1:${server.port}${path}`], { stderr: "pipe" });
      const out = await new Response(p.stdout).text();
      expect(await p.exited).toBe(0);
      expect(out.trim().split("\n").at(-1)).toBe("2 200");
      expect(JSON.parse(out.split("\n")[0]!).path).toBe(path);
    }
  });

  test("an 8 MiB response body to a client that reads it all arrives whole", async () => {
    const c = http2.connect(`http://127.0.0.1:${server.port}`);
    const r = c.request({ ":path": "/big" });
    let n = 0;
    r.on("data", (d: Buffer) => (n += d.length));
    await new Promise((res) => r.on("end", res));
    expect(n).toBe(128 * 64 * 1024);
    c.close();
  });

  test("rapid reset over a raw socket: GOAWAY ENHANCE_YOUR_CALM and close, while another client is served", async () => {
    const sock = net.connect(server.port, "127.0.0.1");
    await new Promise((r) => sock.once("connect", r));
    let recv = Buffer.alloc(0);
    sock.on("data", (d: Buffer) => (recv = Buffer.concat([recv, d])));
    const closed = new Promise((r) => sock.once("close", r));
    sock.on("error", () => {});
    sock.write(Buffer.concat([PREFACE, settingsFrame()]));
    const block = hpack(requestFields("/rr"));
    const burst: Buffer[] = [];
    for (let i = 0; i < 1000; i++) burst.push(headersFrame(1 + 2 * i, block), rstFrame(1 + 2 * i));
    sock.write(Buffer.concat(burst));
    // meanwhile a well-behaved client
    const c = http2.connect(`http://127.0.0.1:${server.port}`);
    const status = await new Promise((res) => c.request({ ":path": "/ok" }).on("response", (h) => res(h[":status"])));
    expect(status).toBe(200);
    c.close();
    await closed;
    const goaway = parseFrames(recv).find((f) => f.type === 7);
    expect(goaway).toBeDefined();
    expect(goaway!.payload.readUInt32BE(4)).toBe(ERROR.ENHANCE_YOUR_CALM);
    expect(goaway!.payload.subarray(8).toString()).toContain("rapid reset");
  });
});

describe("attacks over raw sockets: the connection gets its GOAWAY and closes; a second client is served meanwhile", () => {
  const block = hpack(requestFields("/a"));
  const cases: [string, () => Buffer[], number, string][] = [
    ["CONTINUATION flood", () => [headersFrame(1, block, true, false), ...Array.from({ length: 200 }, () => continuationFrame(1, hpack([["x-a", "b".repeat(50)]])))], ERROR.ENHANCE_YOUR_CALM, "CONTINUATION"],
    ["HPACK bomb (a header block over the limit)", () => [headersFrame(1, block, true, false), ...Array.from({ length: 8 }, () => continuationFrame(1, Buffer.alloc(16 * 1024, 0x41)))], ERROR.ENHANCE_YOUR_CALM, "header block over"],
    ["SETTINGS flood", () => Array.from({ length: 500 }, () => settingsFrame([[4, 65535]])), ERROR.ENHANCE_YOUR_CALM, "SETTINGS"],
    ["PING flood", () => Array.from({ length: 500 }, () => pingFrame()), ERROR.ENHANCE_YOUR_CALM, "PING"],
    ["streams beyond the cap", () => Array.from({ length: 400 }, (_, i) => headersFrame(1 + 2 * i, block, false)), ERROR.ENHANCE_YOUR_CALM, "streams open at once"],
  ];
  test.each(cases)("%s", async (_name, frames, code, reason) => {
    const sock = net.connect(server.port, "127.0.0.1");
    await new Promise((r) => sock.once("connect", r));
    let recv = Buffer.alloc(0);
    sock.on("data", (d: Buffer) => (recv = Buffer.concat([recv, d])));
    const closed = new Promise((r) => sock.once("close", r));
    sock.on("error", () => {});
    sock.write(Buffer.concat([PREFACE, settingsFrame(), ...frames()]));
    const c = http2.connect(`http://127.0.0.1:${server.port}`);
    const status = await new Promise((res) => c.request({ ":path": "/ok" }).on("response", (h) => res(h[":status"])));
    expect(status).toBe(200);
    c.close();
    await closed;
    const goaway = parseFrames(recv).find((f) => f.type === 7);
    expect(goaway).toBeDefined();
    expect(goaway!.payload.readUInt32BE(4)).toBe(code);
    expect(goaway!.payload.subarray(8).toString()).toContain(reason);
  });
});
