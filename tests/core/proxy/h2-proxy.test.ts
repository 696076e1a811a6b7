/**
 * HTTP/2 through the proxy, with real clients and origins over loopback: curl --http2 and node:http2 inside a
 * CONNECT tunnel (ALPN h2 offered by the MITM), HTTP/2 origins (node:http2, one of them h2-only) reached by HTTP/2
 * and HTTP/1.1 clients, trailers, request bodies streamed both ways, prior knowledge on the plain port refused,
 * and an attack played through the MITM'd connection while a second client is served.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import http2 from "node:http2";
import net from "node:net";
import tls from "node:tls";
import type { AddressInfo } from "node:net";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { generateCA } from "../../../src/core/tls/ca.ts";
import { LeafCertCache } from "../../../src/core/tls/leaf.ts";
import { startService } from "../../helpers/service.ts";
import { tempDir } from "../../helpers/tapwire-process.ts";
import { curl, startUpstream, type Upstream } from "../../helpers/upstream.ts";
import { continuationFrame, hpack, headersFrame, parseFrames, pingFrame, PREFACE, requestFields, rstFrame, settingsFrame } from "../../helpers/h2-frames.ts";

type Svc = Awaited<ReturnType<typeof startService>>;
const originCa = generateCA();
const leaf = new LeafCertCache(originCa).get("localhost");
let up: Upstream;
let svc: Svc;
let proxy: string;
let caFile: string;
let caPem: string;
let h2srv: http2.Http2SecureServer;
let h2port = 0;
let originCaFile = "";
const origin = () => `https://localhost:${h2port}`;

beforeAll(async () => {
  up = startUpstream();
  const dir = tempDir();
  originCaFile = join(dir, "origin-ca.pem");
  writeFileSync(originCaFile, originCa.certPem);
  // an h2-only origin (no HTTP/1.1 fallback): echo, streaming, trailers
  h2srv = http2.createSecureServer({ cert: leaf.cert, key: leaf.key, allowHTTP1: false });
  h2srv.on("stream", (stream: http2.ServerHttp2Stream, headers) => {
    stream.on("error", () => {});
    const path = String(headers[":path"]);
    const chunks: Buffer[] = [];
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("end", () => {
      const body = Buffer.concat(chunks);
      if (path.startsWith("/trailers")) {
        stream.respond({ ":status": 200, "content-type": "application/octet-stream" }, { waitForTrailers: true });
        stream.on("wantTrailers", () => stream.sendTrailers({ "x-checksum": String(body.length) }));
        stream.end(Buffer.from(`got ${body.length}`));
        return;
      }
      if (path.startsWith("/big")) {
        const n = Number(new URL(path, "https://x").searchParams.get("n") ?? "1000000");
        stream.respond({ ":status": 200, "content-length": String(n) });
        stream.end(Buffer.alloc(n, 97));
        return;
      }
      stream.respond({ ":status": 200, "content-type": "text/plain", "x-proto": "h2", "set-cookie": ["a=1", "b=2"] });
      stream.end(`h2 ${headers[":method"]} ${path} ${body.length} cookie=${headers.cookie ?? ""}`);
    });
  });
  await new Promise<void>((r) => h2srv.listen(0, "127.0.0.1", () => r()));
  h2port = (h2srv.address() as AddressInfo).port;
  svc = await startService({ upstreamCa: [up.caFile, originCaFile] });
  proxy = `http://127.0.0.1:${svc.proxyPort}`;
  caFile = join(svc.config.dataDir, "ca.pem");
  caPem = readFileSync(caFile, "utf8");
});
afterAll(async () => {
  await svc?.stop();
  up?.stop();
  h2srv?.close();
});

async function entries(q = ""): Promise<any[]> {
  const r = await svc.call(`/api/v1/traffic?limit=500${q}`);
  return ((await r.json()) as any).items;
}
async function detail(id: number): Promise<any> {
  return await (await svc.call(`/api/v1/traffic/${id}`)).json();
}
/** The newest captured entry whose URL contains `part` (polled: the capture records off the response path). */
async function entryFor(part: string): Promise<any> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const hit = (await entries()).find((e) => String(e.url).includes(part));
    if (hit) return detail(hit.id);
    if (Date.now() > deadline) throw new Error(`no entry for ${part}`);
    await Bun.sleep(20);
  }
}

/** A TLS socket to `host:port` through the proxy's CONNECT, offering `alpn`. */
async function tunnel(host: string, port: number, alpn: string[]): Promise<tls.TLSSocket> {
  const raw = net.connect(svc.proxyPort!, "127.0.0.1");
  await new Promise<void>((res, rej) => raw.once("connect", res).once("error", rej));
  raw.write(`CONNECT ${host}:${port} HTTP/1.1\r\nHost: ${host}:${port}\r\n\r\n`);
  await new Promise<void>((res, rej) => {
    let got = "";
    const onData = (d: Buffer) => {
      got += d.toString("latin1");
      if (got.includes("\r\n\r\n")) {
        raw.off("data", onData);
        if (!got.startsWith("HTTP/1.1 200")) rej(new Error(got));
        else res();
      }
    };
    raw.on("data", onData);
    raw.once("error", rej);
  });
  const t = tls.connect({ socket: raw, servername: host, ca: caPem, ALPNProtocols: alpn } as tls.ConnectionOptions);
  await new Promise<void>((res, rej) => t.once("secureConnect", res).once("error", rej));
  return t;
}

function h2Get(session: http2.ClientHttp2Session, path: string, method = "GET", body?: string, extra: http2.OutgoingHttpHeaders = {}): Promise<{ status: number; headers: http2.IncomingHttpHeaders; body: string; trailers: http2.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = session.request({ ":method": method, ":path": path, ...extra });
    let headers: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders = {};
    const parts: Buffer[] = [];
    req.on("response", (h) => (headers = h));
    req.on("trailers", (h) => (trailers = h));
    req.on("data", (c: Buffer) => parts.push(c));
    req.on("end", () => resolve({ status: Number(headers[":status"]), headers, body: Buffer.concat(parts).toString(), trailers }));
    req.on("error", reject);
    if (body !== undefined) req.end(body);
    else req.end();
  });
}

describe("HTTP/2 through the proxy", () => {
  test("curl --http2 to an h2 origin: HTTP/2 on both sides; the entry records HTTP/2 and the stream id", async () => {
    const r = await curl(["-s", "--http2", "-x", proxy, "--cacert", caFile, "-w", "\n%{http_version}", `${origin()}/hello?a=1`]);
    expect(r.code).toBe(0);
    const [body, version] = r.out.split("\n");
    expect(body).toBe("h2 GET /hello?a=1 0 cookie=");
    expect(version).toBe("2");
    const e = await entryFor("/hello?a=1");
    expect(e.status_code).toBe(200);
    expect(e.http_version).toBe("HTTP/2");
    expect(e.response_http_version ?? null).toBeNull();
    expect(typeof e.h2_stream_id).toBe("number");
    expect(e.h2_stream_id % 2).toBe(1);
    const har: any = await (await svc.call(`/api/v1/traffic/export.har?host=localhost`)).json();
    const he = har.log.entries.find((x: any) => x.request.url.includes("/hello?a=1"));
    expect(he.request.httpVersion).toBe("HTTP/2");
    expect(he.response.httpVersion).toBe("HTTP/2");
  });

  test("curl --http2 to an HTTP/1.1 origin: HTTP/2 to the client, HTTP/1.1 upstream, both recorded", async () => {
    const r = await curl(["-s", "--http2", "-x", proxy, "--cacert", caFile, "-w", "\n%{http_version}", "-d", "x=12345", `${up.httpsUrl}/echo/h2c-h1o`]);
    expect(r.code).toBe(0);
    expect(r.out.endsWith("\n2")).toBe(true);
    expect(r.out).toContain("x=12345");
    const e = await entryFor("/echo/h2c-h1o");
    expect(e.http_version).toBe("HTTP/2");
    expect(e.response_http_version).toBe("HTTP/1.1");
    expect(e.method).toBe("POST");
  });

  test("an HTTP/1.1 client reaches an h2-only origin; request body streamed, many requests on one upstream session", async () => {
    const r = await curl(["-s", "--http1.1", "-x", proxy, "--cacert", caFile, "-w", "\n%{http_version}", "--data-binary", "@-", `${origin()}/h1client`], );
    expect(r.code).toBe(0);
    expect(r.out).toBe("h2 POST /h1client 0 cookie=\n1.1");
    // a 3 MB upload (chunked by curl: unknown length) and a 3 MB download through the translation
    const big = Buffer.alloc(3_000_000, 98);
    const dir = tempDir();
    writeFileSync(join(dir, "up.bin"), big);
    const u = await curl(["-s", "--http1.1", "-x", proxy, "--cacert", caFile, "-H", "Transfer-Encoding: chunked", "--data-binary", `@${join(dir, "up.bin")}`, `${origin()}/trailers-up`]);
    expect(u.out).toBe("got 3000000");
    const d = await curl(["-s", "--http1.1", "-x", proxy, "--cacert", caFile, "-D", "-", "-o", join(dir, "down.bin"), `${origin()}/big?n=3000000`]);
    expect(d.out).toMatch(/content-length: 3000000/i);
    expect(readFileSync(join(dir, "down.bin")).length).toBe(3_000_000);
    const e = await entryFor("/big?n=3000000");
    expect(e.http_version ?? "HTTP/1.1").toBe("HTTP/1.1");
    expect(e.response_http_version).toBe("HTTP/2");
    expect(e.res_body_size).toBe(3_000_000);
    expect(svc.proxyCtx!.h2pool!.sessionCount).toBe(1);
  });

  test("node:http2 connect through a CONNECT tunnel: parallel streams, cookies, trailers kept end to end", async () => {
    const sock = await tunnel("localhost", h2port, ["h2", "http/1.1"]);
    expect(sock.alpnProtocol).toBe("h2");
    const session = http2.connect(origin(), { createConnection: () => sock });
    try {
      const results = await Promise.all(Array.from({ length: 30 }, (_, i) => h2Get(session, `/par${i}`, "POST", "y".repeat(i))));
      results.forEach((res, i) => {
        expect(res.status).toBe(200);
        expect(res.body).toBe(`h2 POST /par${i} ${i} cookie=`);
        expect(res.headers["set-cookie"]).toEqual(["a=1", "b=2"]);
      });
      // a client that takes trailers says so (te: trailers, as gRPC clients do)
      const t = await h2Get(session, "/trailers-n", "POST", "abcdef", { te: "trailers" });
      expect(t.body).toBe("got 6");
      expect(t.trailers["x-checksum"]).toBe("6");
      const e = await entryFor("/trailers-n");
      expect(e.res_trailers).toEqual([["x-checksum", "6"]]);
    } finally {
      session.close();
    }
  });

  test("an HTTP/1.1-only client inside the tunnel still gets HTTP/1.1 (ALPN http/1.1)", async () => {
    const sock = await tunnel("localhost", h2port, ["http/1.1"]);
    expect(sock.alpnProtocol).toBe("http/1.1");
    sock.write(`GET /alpn11 HTTP/1.1\r\nHost: localhost:${h2port}\r\nConnection: close\r\n\r\n`);
    let got = "";
    for await (const c of sock) got += c.toString();
    expect(got.startsWith("HTTP/1.1 200")).toBe(true);
    expect(got).toContain("h2 GET /alpn11 0");
  });

  test("HTTP/2 with prior knowledge on the plain proxy port is refused clearly (no hang)", async () => {
    // curl speaks HTTP/2 straight to the proxy port (through -x it would send HTTP/1.1 to the proxy)
    const r = await curl(["-s", "-S", "--http2-prior-knowledge", "--max-time", "10", `http://127.0.0.1:${svc.proxyPort}/echo`]);
    expect(r.code).toBe(0);
    expect(r.out).toContain("HTTP/2 with prior knowledge is not accepted on the proxy port");
    const f = await curl(["-s", "-S", "-f", "--http2-prior-knowledge", "--max-time", "10", "-w", "%{http_code}", `http://127.0.0.1:${svc.proxyPort}/echo`]);
    expect(f.code).toBe(22); // -f: an HTTP error
    expect(f.out).toBe("505");
  });
});

describe("--no-http2", () => {
  test("HTTP/1.1 only: curl --http2 gets HTTP/1.1 inside the tunnel, and an h2-only origin is asked in HTTP/1.1 (which it refuses)", async () => {
    const off = await startService({ upstreamCa: [up.caFile, originCaFile], http2: false });
    try {
      const offProxy = `http://127.0.0.1:${off.proxyPort}`;
      const offCa = join(off.config.dataDir, "ca.pem");
      const a = await curl(["-s", "--http2", "-x", offProxy, "--cacert", offCa, "-w", "\n%{http_version}", `${up.httpsUrl}/echo/no-h2`]);
      expect(a.out.endsWith("\n1.1")).toBe(true);
      const b = await curl(["-s", "--http2", "-x", offProxy, "--cacert", offCa, "-o", "/dev/null", "-w", "%{http_code}", `${origin()}/no-h2`]);
      // the h2-only origin refuses the HTTP/1.1 request (Bun's node:http2 answers 403; node closes: 502)
      expect(["403", "502"]).toContain(b.out);
      const e = (((await (await off.call("/api/v1/traffic?limit=10")).json()) as any).items as any[]).find((x) => String(x.url).endsWith("/no-h2") && String(x.url).includes(String(h2port)));
      expect(e).toBeDefined();
      const d: any = await (await off.call(`/api/v1/traffic/${e.id}`)).json();
      expect(d.http_version ?? "HTTP/1.1").toBe("HTTP/1.1");
      expect(d.h2_stream_id).toBeUndefined();
      expect(d.upstream_h2_stream_id).toBeUndefined();
    } finally {
      await off.stop();
    }
  });
});

describe("features on HTTP/2 streams", () => {
  test("the global download throttle paces an HTTP/2 response (1 MiB at 256 KiB/s: about 4 s)", async () => {
    const put = await svc.call("/api/v1/throttle", { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify({ bytes_per_second: 256 * 1024 }) });
    expect(put.status).toBe(200);
    try {
      const t0 = performance.now();
      const r = await curl(["-s", "--http2", "-x", proxy, "--cacert", caFile, "-o", "/dev/null", "-w", "%{http_version} %{size_download}", `${origin()}/big?n=1048576&throttled`]);
      const ms = performance.now() - t0;
      expect(r.out).toBe("2 1048576");
      expect(ms).toBeGreaterThan(4000 * 0.75);
    } finally {
      await svc.call("/api/v1/throttle", { method: "DELETE" });
    }
  }, 30_000);
});

describe("HTTP/2 defences through the MITM", () => {
  const block = () => hpack(requestFields("/attack", `localhost:${h2port}`));
  const cases: [string, () => Buffer[], string][] = [
    ["rapid reset", () => Array.from({ length: 2000 }, (_, i) => [headersFrame(1 + 2 * i, hpack(requestFields(`/rr${i}`, `localhost:${h2port}`))), rstFrame(1 + 2 * i)]).flat(), "reset"],
    ["CONTINUATION flood", () => [headersFrame(1, block(), true, false), ...Array.from({ length: 200 }, () => continuationFrame(1, hpack([["x-a", "b".repeat(50)]])))], "CONTINUATION"],
    ["HPACK bomb (a header block over the limit)", () => [headersFrame(1, block(), true, false), ...Array.from({ length: 8 }, () => continuationFrame(1, Buffer.alloc(16 * 1024, 0x41)))], "header block over"],
    ["SETTINGS flood", () => Array.from({ length: 500 }, () => settingsFrame([[4, 65535]])), "SETTINGS"],
    ["PING flood", () => Array.from({ length: 500 }, () => pingFrame()), "PING"],
    ["streams beyond the cap", () => Array.from({ length: 400 }, (_, i) => headersFrame(1 + 2 * i, block(), false)), "streams open at once"],
  ];
  test.each(cases)("%s inside the tunnel: GOAWAY ENHANCE_YOUR_CALM and close; a second client is served meanwhile", async (_name, frames, reason) => {
    const sock = await tunnel("localhost", h2port, ["h2"]);
    expect(sock.alpnProtocol).toBe("h2");
    const got: Buffer[] = [];
    let closed = false;
    sock.on("data", (d: Buffer) => got.push(d));
    sock.on("close", () => (closed = true));
    sock.on("error", () => {});
    sock.write(Buffer.concat([PREFACE, settingsFrame(), ...frames()]));
    // a second client, meanwhile, through the same proxy to the same origin
    const other = await curl(["-s", "--http2", "-x", proxy, "--cacert", caFile, `${origin()}/bystander`]);
    expect(other.out).toBe("h2 GET /bystander 0 cookie=");
    const deadline = Date.now() + 10_000;
    while (!closed && Date.now() < deadline) await Bun.sleep(10);
    expect(closed).toBe(true);
    const goaway = parseFrames(Buffer.concat(got)).find((f) => f.type === 7);
    expect(goaway).toBeDefined();
    expect(goaway!.payload.readUInt32BE(4)).toBe(11); // ENHANCE_YOUR_CALM
    expect(goaway!.payload.subarray(8).toString()).toContain(reason);
  });
});

describe("HTTP/2 flow control across the proxy", () => {
  test("a client that stops reading stops the origin too: tapwire does not buffer a fast origin's body", async () => {
    // the origin writes a 256 MiB body as fast as the stream takes it, counting what the stream accepted
    let accepted = 0;
    let originDone = false;
    const srv = http2.createSecureServer({ cert: leaf.cert, key: leaf.key, allowHTTP1: false });
    srv.on("stream", (stream: http2.ServerHttp2Stream) => {
      stream.on("error", () => {});
      stream.respond({ ":status": 200, "content-type": "application/octet-stream" });
      const chunk = Buffer.alloc(64 * 1024, 7);
      const pump = () => {
        while (accepted < 256 * 1024 * 1024 && !stream.destroyed) {
          accepted += chunk.length;
          if (!stream.write(chunk)) return void stream.once("drain", pump);
        }
        originDone = true;
        stream.end();
      };
      pump();
    });
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", () => r()));
    const port = (srv.address() as AddressInfo).port;
    const sock = await tunnel("localhost", port, ["h2"]);
    const session = http2.connect(`https://localhost:${port}`, { createConnection: () => sock });
    try {
      const req = session.request({ ":method": "GET", ":path": "/slow-reader" });
      req.on("error", () => {});
      await new Promise<void>((res) => req.once("response", () => res()));
      req.pause(); // the client reads nothing
      // let the origin push as much as it can: it must stall at a small multiple of the flow-control windows
      let last = -1;
      for (let i = 0; i < 100 && accepted !== last; i++) {
        last = accepted;
        await Bun.sleep(100);
      }
      expect(originDone).toBe(false);
      expect(accepted).toBeLessThan(32 * 1024 * 1024);
      // and once the client reads, the body flows again
      const before = accepted;
      let read = 0;
      req.on("data", (c: Buffer) => (read += c.length));
      req.resume();
      const until = Date.now() + 10_000;
      while (read < before + 8 * 1024 * 1024 && Date.now() < until) await Bun.sleep(20);
      expect(read).toBeGreaterThan(before);
      req.close(http2.constants.NGHTTP2_CANCEL);
    } finally {
      session.destroy();
      srv.close();
    }
  }, 30_000);
});
