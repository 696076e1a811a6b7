/**
 * Trailers kept in both directions through the HTTP/2 <-> HTTP/1 translation, with real peers over loopback: a
 * node:http2 client and origin, a raw HTTP/1.1 client that writes and reads chunked trailer sections itself, and
 * a raw HTTP/1.1 TLS origin that does the same. Request trailers (h2 client -> h2 / h1 origin, h1 client -> h2 /
 * h1 origin) and response trailers (h2 origin -> h1 client, h1 chunked origin -> h2 / h1 client), each recorded
 * in the entry (req_trailers, res_trailers). And interim (1xx) responses to HTTP/2 clients: 103 relayed, 100 not.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import http2 from "node:http2";
import tls from "node:tls";
import type { AddressInfo } from "node:net";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { generateCA } from "../../../src/core/tls/ca.ts";
import { LeafCertCache } from "../../../src/core/tls/leaf.ts";
import { startService } from "../../helpers/service.ts";
import { tempDir } from "../../helpers/tapwire-process.ts";
import { tlsTunnel } from "../../helpers/tls-tunnel.ts";

type Svc = Awaited<ReturnType<typeof startService>>;
const originCa = generateCA();
const leaf = new LeafCertCache(originCa).get("localhost");
let svc: Svc;
let caPem: string;
let h2srv: http2.Http2SecureServer;
let h2port = 0;
let h1srv: tls.Server;
let h1port = 0;

/** A chunked body parsed by hand: its data and its trailer lines (the independent reader of a trailer section). */
function parseChunked(s: string): { body: string; trailers: string[]; rest: string } | null {
  let i = 0;
  let body = "";
  for (;;) {
    const eol = s.indexOf("\r\n", i);
    if (eol < 0) return null;
    const size = parseInt(s.slice(i, eol).split(";")[0]!, 16);
    i = eol + 2;
    if (size === 0) break;
    if (s.length < i + size + 2) return null;
    body += s.slice(i, i + size);
    i += size + 2;
  }
  const trailers: string[] = [];
  for (;;) {
    const eol = s.indexOf("\r\n", i);
    if (eol < 0) return null;
    const line = s.slice(i, eol);
    i = eol + 2;
    if (line === "") return { body, trailers, rest: s.slice(i) };
    trailers.push(line.toLowerCase());
  }
}

beforeAll(async () => {
  // an h2-only origin: echoes the request body and its trailers; answers with trailers (`?cl=1`: and a length)
  h2srv = http2.createSecureServer({ cert: leaf.cert, key: leaf.key, allowHTTP1: false });
  h2srv.on("stream", (stream: http2.ServerHttp2Stream, headers) => {
    stream.on("error", () => {});
    let reqTrailers: http2.IncomingHttpHeaders = {};
    stream.on("trailers", (t) => (reqTrailers = t));
    const parts: Buffer[] = [];
    stream.on("data", (c: Buffer) => parts.push(c));
    stream.on("end", () => {
      const body = Buffer.concat(parts).toString();
      const out = Buffer.from(JSON.stringify({ body, trailers: reqTrailers }));
      const withLength = String(headers[":path"]).includes("cl=1");
      if (String(headers[":path"]).startsWith("/early")) stream.additionalHeaders({ ":status": 103, link: "</h2.css>; rel=preload" });
      stream.respond({ ":status": 200, "content-type": "application/json", trailer: "x-sum", ...(withLength ? { "content-length": String(out.length) } : {}) }, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "x-sum": String(body.length) }));
      stream.end(out);
    });
  });
  await new Promise<void>((r) => h2srv.listen(0, "127.0.0.1", () => r()));
  h2port = (h2srv.address() as AddressInfo).port;

  // an HTTP/1.1-only TLS origin written by hand: reads a chunked request with its trailer section, answers chunked
  // with a trailer section of its own, the body saying what it received
  h1srv = tls.createServer({ cert: leaf.cert, key: leaf.key, ALPNProtocols: ["http/1.1"] }, (sock) => {
    let got = "";
    sock.on("error", () => {});
    sock.on("data", (d: Buffer) => {
      got += d.toString("latin1");
      for (;;) {
        const he = got.indexOf("\r\n\r\n");
        if (he < 0) return;
        const head = got.slice(0, he).toLowerCase();
        let body = "";
        let trailers: string[] = [];
        let rest = got.slice(he + 4);
        if (head.includes("transfer-encoding: chunked")) {
          const p = parseChunked(rest);
          if (!p) return;
          ({ body, trailers, rest } = p);
        } else {
          const m = /content-length: (\d+)/.exec(head);
          const n = m ? Number(m[1]) : 0;
          if (rest.length < n) return;
          body = rest.slice(0, n);
          rest = rest.slice(n);
        }
        got = rest;
        // interim responses first: 100 Continue (for tapwire to handle) and 103 Early Hints (to relay)
        if (head.includes(" /interim")) sock.write("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </h1.css>; rel=preload\r\n\r\n");
        const out = JSON.stringify({ body, trailers });
        sock.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\ntrailer: x-sum\r\n\r\n${out.length.toString(16)}\r\n${out}\r\n0\r\nx-sum: ${body.length}\r\n\r\n`);
      }
    });
  });
  await new Promise<void>((r) => h1srv.listen(0, "127.0.0.1", () => r()));
  h1port = (h1srv.address() as AddressInfo).port;

  const dir = tempDir();
  const originCaFile = join(dir, "origin-ca.pem");
  writeFileSync(originCaFile, originCa.certPem);
  svc = await startService({ upstreamCa: [originCaFile] });
  caPem = readFileSync(join(svc.config.dataDir, "ca.pem"), "utf8");
});
afterAll(async () => {
  await svc?.stop();
  h2srv?.close();
  h1srv?.close();
});

/** The newest captured entry whose URL contains `part` (polled: the capture records off the response path). */
async function entryFor(part: string): Promise<any> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const items = ((await (await svc.call(`/api/v1/traffic?limit=200`)).json()) as any).items as any[];
    const hit = items.find((e) => String(e.url).includes(part));
    if (hit) return await (await svc.call(`/api/v1/traffic/${hit.id}`)).json();
    if (Date.now() > deadline) throw new Error(`no entry for ${part}`);
    await Bun.sleep(20);
  }
}

/** A TLS socket to localhost:port through the proxy's CONNECT, offering `alpn`. */
function tunnel(port: number, alpn: string[]): Promise<tls.TLSSocket> {
  return tlsTunnel(svc.proxyPort!, port, caPem, alpn);
}

/** One raw HTTP/1.1 exchange through the proxy (Connection: close): the response's head and its raw body bytes. */
async function rawH1(port: number, request: string): Promise<{ head: string; body: string }> {
  const t = await tunnel(port, ["http/1.1"]);
  t.write(request);
  const all = await new Promise<string>((res, rej) => {
    let got = "";
    t.on("data", (d: Buffer) => (got += d.toString("latin1")));
    t.once("close", () => res(got));
    t.once("error", rej);
  });
  const he = all.indexOf("\r\n\r\n");
  return { head: all.slice(0, he).toLowerCase(), body: all.slice(he + 4) };
}

/** A node:http2 session through the proxy. */
async function h2Session(port: number): Promise<http2.ClientHttp2Session> {
  const t = await tunnel(port, ["h2"]);
  expect(t.alpnProtocol).toBe("h2");
  const s = http2.connect(`https://localhost:${port}`, { createConnection: () => t });
  s.on("error", () => {});
  return s;
}

/** A POST whose body ends with request trailers; resolves with the response body and its trailers. */
function h2PostWithTrailers(s: http2.ClientHttp2Session, path: string, body: string, trailers: Record<string, string>): Promise<{ status: number; body: string; trailers: http2.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = s.request({ ":method": "POST", ":path": path, te: "trailers", "content-type": "text/plain" }, { waitForTrailers: true });
    req.on("wantTrailers", () => req.sendTrailers(trailers));
    let status = 0;
    let got: http2.IncomingHttpHeaders = {};
    const parts: Buffer[] = [];
    req.on("response", (h) => (status = Number(h[":status"])));
    req.on("trailers", (h) => (got = h));
    req.on("data", (c: Buffer) => parts.push(c));
    req.on("end", () => resolve({ status, body: Buffer.concat(parts).toString(), trailers: got }));
    req.on("error", reject);
    req.end(body);
  });
}

const chunkedPost = (port: number, path: string, te = "") =>
  `POST ${path} HTTP/1.1\r\nHost: localhost:${port}\r\nTransfer-Encoding: chunked\r\nTrailer: x-req-sum\r\n${te}Connection: close\r\n\r\n5\r\nhello\r\n0\r\nX-Req-Sum: 5\r\n\r\n`;

describe("trailers through the proxy", () => {
  test("HTTP/2 client -> HTTP/2 origin: request trailers reach the origin, response trailers the client; both recorded", async () => {
    const s = await h2Session(h2port);
    try {
      const r = await h2PostWithTrailers(s, "/h2h2", "hello", { "x-req-sum": "5" });
      expect(r.status).toBe(200);
      expect(JSON.parse(r.body)).toEqual({ body: "hello", trailers: { "x-req-sum": "5" } });
      expect(r.trailers["x-sum"]).toBe("5");
    } finally {
      s.close();
    }
    const e = await entryFor("/h2h2");
    expect(e.req_trailers).toEqual([["x-req-sum", "5"]]);
    expect(e.res_trailers).toEqual([["x-sum", "5"]]);
  });

  test("HTTP/2 client -> HTTP/1.1 origin: request trailers become a chunked trailer section; the origin's come back as HTTP/2 trailers", async () => {
    const s = await h2Session(h1port);
    try {
      const r = await h2PostWithTrailers(s, "/h2h1-post", "hello", { "x-req-sum": "5" });
      expect(r.status).toBe(200);
      expect(JSON.parse(r.body)).toEqual({ body: "hello", trailers: ["x-req-sum: 5"] });
      expect(r.trailers["x-sum"]).toBe("5");
      // a client that did not say `te: trailers` still gets the announced (`trailer: x-sum`) ones
      const plain = await new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
        const req = s.request({ ":method": "GET", ":path": "/h2h1-get" });
        let t: http2.IncomingHttpHeaders = {};
        req.on("trailers", (h) => (t = h));
        req.resume();
        req.on("end", () => resolve(t));
        req.on("error", reject);
      });
      expect(plain["x-sum"]).toBe("0");
    } finally {
      s.close();
    }
    const e = await entryFor("/h2h1-post");
    expect(e.response_http_version).toBe("HTTP/1.1");
    expect(e.req_trailers).toEqual([["x-req-sum", "5"]]);
    expect(e.res_trailers).toEqual([["x-sum", "5"]]);
  });

  test("raw HTTP/1.1 client -> HTTP/2 origin: chunked trailer section relayed as HTTP/2 trailers, the origin's as a trailer section", async () => {
    const r = await rawH1(h2port, chunkedPost(h2port, "/h1h2"));
    expect(r.head).toStartWith("http/1.1 200");
    expect(r.head).toContain("transfer-encoding: chunked");
    const p = parseChunked(r.body)!;
    expect(JSON.parse(p.body)).toEqual({ body: "hello", trailers: { "x-req-sum": "5" } });
    expect(p.trailers).toEqual(["x-sum: 5"]);
    const e = await entryFor("/h1h2");
    expect(e.response_http_version).toBe("HTTP/2");
    expect(e.req_trailers).toEqual([["X-Req-Sum", "5"]]);
    expect(e.res_trailers).toEqual([["x-sum", "5"]]);
  });

  test("HTTP/2 origin, length-framed response: Content-Length kept (trailers recorded only) unless the HTTP/1.1 client sent TE: trailers", async () => {
    const plain = await rawH1(h2port, chunkedPost(h2port, "/h1h2-cl?cl=1"));
    expect(plain.head).toMatch(/content-length: \d+/);
    expect(plain.head).not.toContain("transfer-encoding");
    expect(JSON.parse(plain.body)).toEqual({ body: "hello", trailers: { "x-req-sum": "5" } });
    expect((await entryFor("/h1h2-cl?cl=1")).res_trailers).toEqual([["x-sum", "5"]]);

    const asked = await rawH1(h2port, chunkedPost(h2port, "/h1h2-te?cl=1", "TE: trailers\r\n"));
    expect(asked.head).toContain("transfer-encoding: chunked");
    expect(asked.head).not.toContain("content-length");
    const p = parseChunked(asked.body)!;
    expect(JSON.parse(p.body).body).toBe("hello");
    expect(p.trailers).toEqual(["x-sum: 5"]);
  });

  test("raw HTTP/1.1 client -> HTTP/1.1 origin: chunked trailer sections pass both ways", async () => {
    const r = await rawH1(h1port, chunkedPost(h1port, "/h1h1"));
    expect(r.head).toStartWith("http/1.1 200");
    const p = parseChunked(r.body)!;
    expect(JSON.parse(p.body)).toEqual({ body: "hello", trailers: ["x-req-sum: 5"] });
    expect(p.trailers).toEqual(["x-sum: 5"]);
    const e = await entryFor("/h1h1");
    expect(e.req_trailers).toEqual([["X-Req-Sum", "5"]]);
    expect(e.res_trailers).toEqual([["x-sum", "5"]]);
  });
});

/** A request whose interim (1xx) heads are collected ('headers' events) besides the final response. */
function h2WithInterim(s: http2.ClientHttp2Session, path: string, body: string): Promise<{ interim: http2.IncomingHttpHeaders[]; status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = s.request({ ":method": "POST", ":path": path, "content-type": "text/plain" });
    const interim: http2.IncomingHttpHeaders[] = [];
    let status = 0;
    const parts: Buffer[] = [];
    req.on("headers", (h) => interim.push(h));
    req.on("response", (h) => (status = Number(h[":status"])));
    req.on("data", (c: Buffer) => parts.push(c));
    req.on("end", () => resolve({ interim, status, body: Buffer.concat(parts).toString() }));
    req.on("error", reject);
    req.end(body);
  });
}

describe("interim (1xx) responses to HTTP/2 clients", () => {
  test("103 Early Hints from an HTTP/2 origin is relayed before the final response", async () => {
    const s = await h2Session(h2port);
    try {
      const r = await h2WithInterim(s, "/early-h2", "abc");
      expect(r.interim.map((h) => Number(h[":status"]))).toEqual([103]);
      expect(r.interim[0]!.link).toBe("</h2.css>; rel=preload");
      expect(r.status).toBe(200);
      expect(JSON.parse(r.body).body).toBe("abc");
    } finally {
      s.close();
    }
  });

  test("from an HTTP/1.1 origin: 100 Continue is handled by tapwire (not relayed), 103 is relayed with its fields", async () => {
    const s = await h2Session(h1port);
    try {
      const r = await h2WithInterim(s, "/interim-h1", "abc");
      expect(r.interim.map((h) => Number(h[":status"]))).toEqual([103]);
      expect(r.interim[0]!.link).toBe("</h1.css>; rel=preload");
      expect(r.status).toBe(200);
      expect(JSON.parse(r.body).body).toBe("abc");
    } finally {
      s.close();
    }
    const e = await entryFor("/interim-h1");
    expect(e.status_code).toBe(200);
  });
});
