/**
 * An h2-only origin that allows 2 streams at once, asked 12 requests at once through the proxy (HTTP/2 client in a
 * CONNECT tunnel): streams it refuses (REFUSED_STREAM, or not opened because the connection is full) are sent
 * again, on a new upstream connection when the open one is full, so every request gets its answer.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
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

const originCa = generateCA();
const leaf = new LeafCertCache(originCa).get("localhost");
let svc: Awaited<ReturnType<typeof startService>>;
let h2srv: http2.Http2SecureServer;
let h2port = 0;
let caPem = "";
let refused = 0;
let sessions = 0;

beforeAll(async () => {
  const dir = tempDir();
  const originCaFile = join(dir, "origin-ca.pem");
  writeFileSync(originCaFile, originCa.certPem);
  h2srv = http2.createSecureServer({ cert: leaf.cert, key: leaf.key, allowHTTP1: false, settings: { maxConcurrentStreams: 2 } });
  h2srv.on("session", (s) => {
    sessions++;
    let open = 0;
    s.on("stream", (stream: http2.ServerHttp2Stream, headers) => {
      stream.on("error", () => {});
      // above the limit (a client that opened streams before it read the SETTINGS): refused, as RFC 9113 5.1.2 says
      if (open >= 2) {
        refused++;
        return stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
      }
      open++;
      stream.on("close", () => open--);
      // answered a turn later, so that the streams overlap
      setImmediate(() => {
        stream.respond({ ":status": 200, "content-type": "text/plain" });
        stream.end(`ok ${headers[":path"]}`);
      });
    });
  });
  await new Promise<void>((r) => h2srv.listen(0, "127.0.0.1", () => r()));
  h2port = (h2srv.address() as AddressInfo).port;
  svc = await startService({ upstreamCa: [originCaFile] });
  caPem = readFileSync(join(svc.config.dataDir, "ca.pem"), "utf8");
});
afterAll(async () => {
  await svc?.stop();
  h2srv?.close();
});

function tunnel(): Promise<tls.TLSSocket> {
  return tlsTunnel(svc.proxyPort!, h2port, caPem);
}

test("12 requests at once to an origin allowing 2 streams: every one is answered 200", async () => {
  const sock = await tunnel();
  const session = http2.connect(`https://localhost:${h2port}`, { createConnection: () => sock });
  const one = (i: number) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = session.request({ ":path": `/r${i}` });
      let status = 0;
      let body = "";
      req.on("response", (h) => (status = Number(h[":status"])));
      req.setEncoding("utf8");
      req.on("data", (d) => (body += d));
      req.on("end", () => resolve({ status, body }));
      req.on("error", reject);
      req.end();
    });
  const results = await Promise.all(Array.from({ length: 12 }, (_, i) => one(i)));
  session.close();
  expect(results.map((r) => r.status)).toEqual(Array(12).fill(200));
  expect(results.map((r) => r.body)).toEqual(Array.from({ length: 12 }, (_, i) => `ok /r${i}`));
  // the first requests went out before the origin's SETTINGS arrived: some were refused and sent again
  expect(refused + sessions).toBeGreaterThan(1);
});
