/**
 * Socket reads given back to the allocator once written (Endpoint.release, issue 20 streaming RSS): a read's
 * ArrayBuffer is detached as soon as the kernel has its bytes, or after the bytes queued before it when the peer
 * is slow. Detaching too early would lose or corrupt bytes, so every transfer here is checked byte for byte
 * (SHA-256 of seeded random data): downloads with and without a length, through a client reading at a limited
 * rate (the queue path), through the global throttle (bytes copied into its queue), and uploads with a length and
 * chunked to a slow-reading origin. A spy on Endpoint.release checks that both paths ran and that every read it
 * took is detached by the end (no marker left behind). The capture's copy must survive the release of the reads
 * it came from.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Endpoint } from "../../../src/core/proxy/endpoint.ts";
import { generateCA } from "../../../src/core/tls/ca.ts";
import { LeafCertCache } from "../../../src/core/tls/leaf.ts";
import { startService } from "../../helpers/service.ts";
import { tempDir } from "../../helpers/tapwire-process.ts";
import { curl } from "../../helpers/upstream.ts";

const MB = 1024 * 1024;
const BODY_LIMIT = 64 * 1024;
type Svc = Awaited<ReturnType<typeof startService>>;
let svc: Svc;
let origin: ReturnType<typeof Bun.serve>;
/** The same origin over TLS (reached through CONNECT, intercepted: reads come from TLS sockets on both sides). */
let tlsOrigin: ReturnType<typeof Bun.serve>;
let proxy = "";
let tapwireCa = "";
let originCaFile = "";

/** Seeded random bytes (xorshift32), the same for the same seed and size. */
function randomBytes(seed: number, n: number): Uint8Array {
  const out = new Uint8Array(n);
  const v = new Uint32Array(out.buffer, 0, n >>> 2);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < v.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    v[i] = x >>> 0;
  }
  return out;
}
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

/** What Endpoint.release was given: each read, whether bytes were queued then, and (after) whether it got detached. */
const released: { buf: ArrayBufferLike; queued: boolean }[] = [];
const realRelease = Endpoint.prototype.release;

beforeAll(async () => {
  Endpoint.prototype.release = function (this: Endpoint, d: Uint8Array) {
    // (while writes are corked, release leaves the read alone by design: the cork holds views of it)
    if (d.byteOffset === 0 && d.byteLength >= 16 * 1024 && d.byteLength === d.buffer.byteLength && (this as unknown as { corked: unknown }).corked === null) released.push({ buf: d.buffer, queued: this.queued > 0 });
    return realRelease.call(this, d);
  };
  const originCa = generateCA();
  const leaf = new LeafCertCache(originCa).get("localhost");
  const caFile = join(tempDir(), "origin-ca.pem");
  writeFileSync(caFile, originCa.certPem);
  originCaFile = caFile;
  const serve = (tls: boolean) => Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    maxRequestBodySize: 1024 * MB,
    ...(tls ? { tls: { cert: leaf.cert, key: leaf.key } } : {}),
    async fetch(req) {
      const url = new URL(req.url);
      const n = Number(url.searchParams.get("n") ?? 0);
      const seed = Number(url.searchParams.get("seed") ?? 1);
      if (url.pathname === "/len") return new Response(randomBytes(seed, n), { headers: { "content-type": "application/octet-stream" } });
      if (url.pathname === "/chunked") {
        const all = randomBytes(seed, n);
        let at = 0;
        return new Response(
          new ReadableStream({
            type: "direct",
            async pull(c) {
              while (at < all.length) {
                const take = Math.min(200 * 1024 + (at % 7) * 1000, all.length - at);
                await c.write(all.subarray(at, at + take));
                at += take;
              }
              c.close();
            },
          }),
          { headers: { "content-type": "application/octet-stream" } },
        );
      }
      if (url.pathname === "/sha") {
        // a slow reader: the proxy's writes to it queue up
        const h = createHash("sha256");
        let size = 0;
        let k = 0;
        for await (const c of req.body!) {
          h.update(c);
          size += c.byteLength;
          if (++k % 16 === 0) await Bun.sleep(1);
        }
        return Response.json({ size, sha: h.digest("hex") });
      }
      return new Response("not found", { status: 404 });
    },
  });
  origin = serve(false);
  tlsOrigin = serve(true);
  svc = await startService({ bodyLimit: BODY_LIMIT, upstreamCa: [caFile] });
  proxy = `http://127.0.0.1:${svc.proxyPort}`;
  tapwireCa = join(svc.config.dataDir, "ca.pem");
  expect(readFileSync(tapwireCa, "utf8")).toContain("BEGIN CERTIFICATE");
});
afterAll(async () => {
  Endpoint.prototype.release = realRelease;
  await svc?.stop();
  origin?.stop(true);
  tlsOrigin?.stop(true);
});

/** Every read release took is detached by now (markers in a queue are processed once the bytes before them go). */
function expectAllDetached(from: number): void {
  const mine = released.slice(from);
  expect(mine.length).toBeGreaterThan(0);
  expect(mine.filter((r) => r.buf.byteLength !== 0).length).toBe(0);
}

async function newest(path: string): Promise<any> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const items = ((await (await svc.call(`/api/v1/traffic?limit=50`)).json()) as any).items as any[];
    const hit = items.find((e) => String(e.url).includes(path));
    if (hit) return await (await svc.call(`/api/v1/traffic/${hit.id}`)).json();
    if (Date.now() > deadline) throw new Error(`no entry for ${path}`);
    await Bun.sleep(20);
  }
}

describe("reads released once written, bytes intact", () => {
  for (const kind of ["len", "chunked"] as const) {
    test(`${kind}: 48 MiB download, fast client and a client reading at 40 MB/s; the capture copy is intact`, async () => {
      const n = 48 * MB;
      const want = sha(randomBytes(7, n));
      const from = released.length;
      const fast = await curl(["-x", proxy, "-o", "-", `http://127.0.0.1:${origin.port}/${kind}?n=${n}&seed=7&run=fast`]);
      expect(fast.code).toBe(0);
      expect(sha(fast.bytes)).toBe(want);
      const slow = await curl(["-x", proxy, "--limit-rate", "40M", "-o", "-", `http://127.0.0.1:${origin.port}/${kind}?n=${n}&seed=7&run=slow`]);
      expect(slow.code).toBe(0);
      expect(sha(slow.bytes)).toBe(want);
      const mine = released.slice(from);
      // both ways of releasing ran: at once, and after queued bytes (the slow client)
      expect(mine.some((r) => !r.queued)).toBe(true);
      expect(mine.some((r) => r.queued)).toBe(true);
      expectAllDetached(from);
      const e = await newest(`run=slow`);
      expect(e.res_body_size).toBe(n);
      expect(e.res_body_truncated).toBe(true);
      expect(Buffer.from(e.res_body, "base64").equals(Buffer.from(randomBytes(7, n).subarray(0, BODY_LIMIT)))).toBe(true);
    });
  }

  test("through the global throttle (bytes copied into its queue): 3 MiB at 12 MiB/s arrive intact", async () => {
    const put = await svc.call("/api/v1/throttle", { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify({ bytes_per_second: 12 * MB }) });
    expect(put.status).toBe(200);
    try {
      const from = released.length;
      const r = await curl(["-x", proxy, "-o", "-", `http://127.0.0.1:${origin.port}/chunked?n=${3 * MB}&seed=9`]);
      expect(r.code).toBe(0);
      expect(sha(r.bytes)).toBe(sha(randomBytes(9, 3 * MB)));
      expectAllDetached(from);
    } finally {
      await svc.call("/api/v1/throttle", { method: "DELETE" });
    }
  });

  test("HTTPS, intercepted (TLS sockets both sides): 32 MiB downloads with and without a length, and a 32 MiB upload, intact", async () => {
    const n = 32 * MB;
    const base = `https://localhost:${tlsOrigin.port}`;
    const tls = ["--http1.1", "--cacert", tapwireCa, "-x", proxy];
    const from = released.length;
    for (const kind of ["len", "chunked"]) {
      const r = await curl([...tls, "--limit-rate", "60M", "-o", "-", `${base}/${kind}?n=${n}&seed=13`]);
      expect(r.code).toBe(0);
      expect(sha(r.bytes)).toBe(sha(randomBytes(13, n)));
    }
    const data = randomBytes(17, n);
    const file = join(tempDir(), "up-tls.bin");
    writeFileSync(file, data);
    const up = await curl([...tls, "-H", "Expect:", "-T", file, `${base}/sha?mode=tls`]);
    expect(up.code).toBe(0);
    expect(JSON.parse(up.out)).toEqual({ size: n, sha: sha(data) });
    expectAllDetached(from);
  });

  test("a CONNECT tunnel (ignored host, not intercepted): 32 MiB down and up, intact", async () => {
    expect((await svc.call("/api/v1/ignored-hosts/localhost", { method: "PUT" })).status).toBeLessThan(300);
    try {
      const n = 32 * MB;
      const base = `https://localhost:${tlsOrigin.port}`;
      const via = ["--http1.1", "--cacert", originCaFile, "-x", proxy];
      const from = released.length;
      const r = await curl([...via, "--limit-rate", "60M", "-o", "-", `${base}/chunked?n=${n}&seed=19`]);
      expect(r.code).toBe(0);
      expect(sha(r.bytes)).toBe(sha(randomBytes(19, n)));
      const data = randomBytes(23, n);
      const file = join(tempDir(), "up-tunnel.bin");
      writeFileSync(file, data);
      const up = await curl([...via, "-H", "Expect:", "-T", file, `${base}/sha?mode=tunnel`]);
      expect(up.code).toBe(0);
      expect(JSON.parse(up.out)).toEqual({ size: n, sha: sha(data) });
      expectAllDetached(from);
      // nothing of it was intercepted: no entry has these URLs
      const items = ((await (await svc.call(`/api/v1/traffic?limit=50`)).json()) as any).items as any[];
      expect(items.some((e) => String(e.url).includes("seed=19") || String(e.url).includes("mode=tunnel"))).toBe(false);
    } finally {
      await svc.call("/api/v1/ignored-hosts/localhost", { method: "DELETE" });
    }
  });

  for (const mode of ["length", "chunked"] as const) {
    test(`${mode} upload of 48 MiB to a slow-reading origin arrives intact`, async () => {
      const n = 48 * MB;
      const data = randomBytes(11, n);
      const file = join(tempDir(), "up.bin");
      writeFileSync(file, data);
      const from = released.length;
      const args = mode === "length" ? ["-T", file] : ["-H", "Transfer-Encoding: chunked", "--data-binary", `@${file}`];
      const r = await curl(["-x", proxy, "-H", "Expect:", ...args, `http://127.0.0.1:${origin.port}/sha?mode=${mode}`]);
      expect(r.code).toBe(0);
      expect(JSON.parse(r.out)).toEqual({ size: n, sha: sha(data) });
      expectAllDetached(from);
      const e = await newest(`mode=${mode}`);
      expect(e.req_body_size).toBe(n);
      expect(Buffer.from(e.req_body, "base64").equals(Buffer.from(data.subarray(0, BODY_LIMIT)))).toBe(true);
    });
  }
});
