/** H2UpstreamPool against real TLS origins: an HTTP/2 one (node:http2) and an HTTP/1.1-only one (node:https). */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import http2 from "node:http2";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { generateCA } from "../../../src/core/tls/ca.ts";
import { LeafCertCache } from "../../../src/core/tls/leaf.ts";
import { h1RequestToH2 } from "../../../src/core/http2/headers.ts";
import { H2UpstreamPool } from "../../../src/core/proxy/h2-upstream.ts";
import { UpstreamError } from "../../../src/core/proxy/upstream.ts";

const ca = generateCA();
const leaf = new LeafCertCache(ca).get("localhost");
let h2srv: http2.Http2SecureServer;
let h1srv: https.Server;
let h2port = 0;
let h1port = 0;
let sessions = 0;
const seen: Record<string, string | string[] | undefined>[] = [];

beforeAll(async () => {
  h2srv = http2.createSecureServer({ cert: leaf.cert, key: leaf.key });
  h2srv.on("session", () => sessions++);
  h2srv.on("stream", (stream: http2.ServerHttp2Stream, headers) => {
    stream.on("error", () => {}); // the refused stream errors on this side too
    seen.push({ ...headers });
    const path = String(headers[":path"]);
    if (path === "/reset") return stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
    const chunks: Buffer[] = [];
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("end", () => {
      stream.respond({ ":status": 200, "content-type": "text/plain", "set-cookie": ["a=1", "b=2"] }, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0", "x-len": String(Buffer.concat(chunks).length) }));
      stream.end(`hello ${path}`);
    });
  });
  await new Promise<void>((r) => h2srv.listen(0, "127.0.0.1", () => r()));
  h2port = (h2srv.address() as AddressInfo).port;
  h1srv = https.createServer({ cert: leaf.cert, key: leaf.key }, (_req, res) => res.end("h1"));
  await new Promise<void>((r) => h1srv.listen(0, "127.0.0.1", () => r()));
  h1port = (h1srv.address() as AddressInfo).port;
});
afterAll(() => {
  h2srv.close();
  h1srv.close();
});

const read = async (body: Promise<Uint8Array>) => new TextDecoder().decode(await body);

describe("H2UpstreamPool", () => {
  test("an h2 origin: ALPN picks h2; many streams share one session; headers, body and trailers arrive", async () => {
    const pool = new H2UpstreamPool({ rejectUnauthorized: true, ca: [ca.certPem], connectTimeoutMs: 5000 });
    const target = { host: "127.0.0.1", port: h2port, servername: "localhost" };
    const before = sessions;
    const results = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const session = await pool.session(target);
        expect(session).not.toBeNull();
        const fields = h1RequestToH2({ method: "POST", target: `/r${i}`, headers: [["Host", `localhost:${h2port}`], ["Content-Type", "text/plain"], ["Connection", "keep-alive"]] }, "https");
        const res = await pool.request(session!, fields, new TextEncoder().encode("x".repeat(i)));
        return { res, body: await read(res.body), trailers: await res.trailers };
      }),
    );
    expect(pool.known(target)).toBe("h2");
    expect(sessions - before).toBe(1);
    expect(pool.sessionCount).toBe(1);
    results.forEach(({ res, body, trailers }, i) => {
      expect(res.status).toBe(200);
      expect(res.headers).toContainEqual(["set-cookie", "a=1"]);
      expect(res.headers).toContainEqual(["set-cookie", "b=2"]);
      expect(body).toBe(`hello /r${i}`);
      expect(trailers).toEqual([["grpc-status", "0"], ["x-len", String(i)]]);
      expect(res.streamId % 2).toBe(1);
    });
    const last = seen.at(-1)!;
    expect(last[":authority"]).toBe(`localhost:${h2port}`);
    expect(last["connection"]).toBeUndefined();
    pool.close();
  });

  test("a streamed request body is written with backpressure", async () => {
    const pool = new H2UpstreamPool({ rejectUnauthorized: true, ca: [ca.certPem], connectTimeoutMs: 5000 });
    const session = (await pool.session({ host: "127.0.0.1", port: h2port, servername: "localhost" }))!;
    async function* body() {
      for (let i = 0; i < 64; i++) yield new Uint8Array(64 * 1024).fill(97);
    }
    const res = await pool.request(session, [[":method", "PUT"], [":scheme", "https"], [":authority", "localhost"], [":path", "/up"]], body());
    await read(res.body);
    expect(await res.trailers).toContainEqual(["x-len", String(64 * 64 * 1024)]);
    pool.close();
  });

  test("an HTTP/1.1-only origin answers null, remembered for the next call", async () => {
    const pool = new H2UpstreamPool({ rejectUnauthorized: true, ca: [ca.certPem], connectTimeoutMs: 5000 });
    const target = { host: "127.0.0.1", port: h1port, servername: "localhost" };
    expect(await pool.session(target)).toBeNull();
    expect(pool.known(target)).toBe("http/1.1");
    expect(await pool.session(target)).toBeNull();
    pool.close();
  });

  test("a refused stream rejects with an UpstreamError; the session stays usable", async () => {
    const pool = new H2UpstreamPool({ rejectUnauthorized: true, ca: [ca.certPem], connectTimeoutMs: 5000 });
    const session = (await pool.session({ host: "127.0.0.1", port: h2port, servername: "localhost" }))!;
    await expect(pool.request(session, [[":method", "GET"], [":scheme", "https"], [":authority", "localhost"], [":path", "/reset"]], null)).rejects.toBeInstanceOf(UpstreamError);
    const ok = await pool.request(session, [[":method", "GET"], [":scheme", "https"], [":authority", "localhost"], [":path", "/after"]], null);
    expect(await read(ok.body)).toBe("hello /after");
    pool.close();
  });

  test("failures are UpstreamErrors with their kind: untrusted certificate, wrong name, refused port", async () => {
    const untrusted = new H2UpstreamPool({ rejectUnauthorized: true, connectTimeoutMs: 5000 });
    await expect(untrusted.session({ host: "127.0.0.1", port: h2port, servername: "localhost" })).rejects.toMatchObject({ kind: "tls" });
    const pool = new H2UpstreamPool({ rejectUnauthorized: true, ca: [ca.certPem], connectTimeoutMs: 5000 });
    await expect(pool.session({ host: "127.0.0.1", port: h2port, servername: "example.test" })).rejects.toMatchObject({ kind: "tls" });
    const insecure = new H2UpstreamPool({ rejectUnauthorized: false, connectTimeoutMs: 5000 });
    expect(await insecure.session({ host: "127.0.0.1", port: h2port, servername: "example.test" })).not.toBeNull();
    insecure.close();
    const closedPort = await new Promise<number>((r) => {
      const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
      const p = s.port;
      s.stop(true);
      r(p);
    });
    await expect(pool.session({ host: "127.0.0.1", port: closedPort })).rejects.toMatchObject({ kind: "refused" });
  });
});
