/**
 * Bytes through the HTTP/2 codec on both sides arrive intact: the codec hands out views of socket reads (and
 * copies only frames pieced together from two reads), so a body held while a side is slow must not change under
 * it. 8 MiB of random bytes each way, HTTP/2 client in a CONNECT tunnel, h2-only origin, compared by SHA-256;
 * the client reads in bursts (paused and resumed) so that tapwire holds what it cannot hand on.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createHash, randomBytes } from "node:crypto";
import http2 from "node:http2";
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
const SIZE = 8 * 1024 * 1024;
const down = randomBytes(SIZE);
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
let svc: Awaited<ReturnType<typeof startService>>;
let h2srv: http2.Http2SecureServer;
let h2port = 0;
let caPem = "";

beforeAll(async () => {
  const dir = tempDir();
  const originCaFile = join(dir, "origin-ca.pem");
  writeFileSync(originCaFile, originCa.certPem);
  h2srv = http2.createSecureServer({ cert: leaf.cert, key: leaf.key, allowHTTP1: false });
  h2srv.on("stream", (stream: http2.ServerHttp2Stream, headers) => {
    stream.on("error", () => {});
    if (headers[":path"] === "/early") {
      // answers at once, before the request body, and does not reset the stream: the rest of the body is the
      // client's (tapwire's) to stop
      stream.respond({ ":status": 200, "content-type": "text/plain" });
      stream.end("early");
      return;
    }
    const h = createHash("sha256");
    let n = 0;
    stream.on("data", (c: Buffer) => {
      h.update(c);
      n += c.length;
    });
    stream.on("end", () => {
      if (headers[":path"] === "/down") {
        stream.respond({ ":status": 200, "content-type": "application/octet-stream" });
        // in 64 KiB writes of the same random bytes
        for (let o = 0; o < SIZE; o += 65536) stream.write(down.subarray(o, o + 65536));
        stream.end();
      } else {
        stream.respond({ ":status": 200, "content-type": "text/plain" });
        stream.end(`${n} ${h.digest("hex")}`);
      }
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

async function session(): Promise<http2.ClientHttp2Session> {
  const t = await tlsTunnel(svc.proxyPort!, h2port, caPem);
  return http2.connect(`https://localhost:${h2port}`, { createConnection: () => t });
}

test("8 MiB of random bytes down (read in bursts) and up, through HTTP/2 on both sides, arrive intact", async () => {
  const s = await session();
  const got = await new Promise<Buffer>((resolve, reject) => {
    const req = s.request({ ":path": "/down" });
    const parts: Buffer[] = [];
    let chunks = 0;
    req.on("data", (c: Buffer) => {
      parts.push(Buffer.from(c));
      // every 8th chunk, stop reading for two turns of the event loop
      if (++chunks % 8 === 0) {
        req.pause();
        setImmediate(() => setImmediate(() => req.resume()));
      }
    });
    req.on("end", () => resolve(Buffer.concat(parts)));
    req.on("error", reject);
    req.end();
  });
  expect(got.length).toBe(SIZE);
  expect(sha(got)).toBe(sha(down));
  const up = randomBytes(SIZE);
  const answer = await new Promise<string>((resolve, reject) => {
    const req = s.request({ ":method": "POST", ":path": "/up" });
    let text = "";
    req.setEncoding("utf8");
    req.on("data", (d) => (text += d));
    req.on("end", () => resolve(text));
    req.on("error", reject);
    for (let o = 0; o < SIZE; o += 100_000) req.write(up.subarray(o, o + 100_000));
    req.end();
  });
  expect(answer).toBe(`${SIZE} ${sha(up)}`);
  s.close();
});

test("an origin that answers before the request body ended: the client gets the answer, the origin stream is closed", async () => {
  const s = await session();
  const answer = await new Promise<string>((resolve, reject) => {
    const req = s.request({ ":method": "POST", ":path": "/early" });
    let text = "";
    req.setEncoding("utf8");
    req.on("data", (d) => (text += d));
    req.on("end", () => resolve(text));
    req.on("error", reject);
    req.write(randomBytes(64 * 1024));
    // the rest of the body goes once the answer is in (the client may still send it; tapwire drops it)
    req.once("response", () => req.end(randomBytes(64 * 1024)));
  });
  expect(answer).toBe("early");
  // the same client connection still works, and no stream stays open on the origin connection
  const again = await new Promise<number>((resolve, reject) => {
    const req = s.request({ ":path": "/up" });
    let status = 0;
    req.on("response", (h) => (status = Number(h[":status"])));
    req.on("end", () => resolve(status));
    req.on("error", reject);
    req.resume();
    req.end();
  });
  expect(again).toBe(200);
  s.close();
  const pool = svc.proxyCtx!.h2pool! as unknown as { sessions: Map<string, { conn: { openStreams: number } }> };
  const open = [...pool.sessions.values()].map((o) => o.conn.openStreams);
  expect(open.length).toBeGreaterThan(0);
  expect(open.every((n) => n === 0)).toBe(true);
});
