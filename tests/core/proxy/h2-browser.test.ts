/**
 * Chromium (playwright-core, the system binary) through tapwire loading a page with many parallel requests from an
 * h2-only origin: Chromium picks h2 in tapwire's ALPN, tapwire speaks h2 to the origin, and every captured entry
 * shows HTTP/2 with its own stream id. A missing Chromium fails the suite (tests/ui/browser.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { generateCA } from "../../../src/core/tls/ca.ts";
import { LeafCertCache } from "../../../src/core/tls/leaf.ts";
import { startService } from "../../helpers/service.ts";
import { tempDir } from "../../helpers/tapwire-process.ts";
import { launchBrowser } from "../../ui/browser.ts";

const N = 40;
const PNG = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==", "base64");
const PAGE = `<!doctype html><html><head><title>h2 page</title></head><body>
${Array.from({ length: N }, (_, i) => `<img src="/img/${i}.png">`).join("\n")}
<script>window.allLoaded = () => [...document.images].every((i) => i.complete && i.naturalWidth === 1);</script>
</body></html>`;

const originCa = generateCA();
const leaf = new LeafCertCache(originCa).get("localhost");
let h2srv: http2.Http2SecureServer;
let port = 0;
let originStreams = 0;
let originSessions = 0;
type Svc = Awaited<ReturnType<typeof startService>>;
let svc: Svc;

beforeAll(async () => {
  h2srv = http2.createSecureServer({ cert: leaf.cert, key: leaf.key, allowHTTP1: false });
  h2srv.on("session", () => originSessions++);
  h2srv.on("stream", (stream: http2.ServerHttp2Stream, headers) => {
    stream.on("error", () => {});
    originStreams++;
    const path = String(headers[":path"]);
    if (path === "/") {
      stream.respond({ ":status": 200, "content-type": "text/html; charset=utf-8" });
      stream.end(PAGE);
    } else if (path.startsWith("/img/")) {
      stream.respond({ ":status": 200, "content-type": "image/png", "cache-control": "no-store" });
      stream.end(PNG);
    } else {
      stream.respond({ ":status": 404 });
      stream.end();
    }
  });
  await new Promise<void>((r) => h2srv.listen(0, "127.0.0.1", () => r()));
  port = (h2srv.address() as AddressInfo).port;
  const caFile = join(tempDir(), "origin-ca.pem");
  writeFileSync(caFile, originCa.certPem);
  svc = await startService({ upstreamCa: [caFile] });
});
afterAll(async () => {
  await svc?.stop();
  h2srv?.close();
});

describe("Chromium through tapwire to an h2 origin", () => {
  test(`a page with ${N} parallel image requests: all load, every entry shows HTTP/2`, async () => {
    const browser = await launchBrowser();
    try {
      const context = await browser.newContext({ ignoreHTTPSErrors: true, proxy: { server: `http://127.0.0.1:${svc.proxyPort}`, bypass: "<-loopback>" } });
      const page = await context.newPage();
      await page.goto(`https://localhost:${port}/`);
      await page.waitForFunction("window.allLoaded()", undefined, { timeout: 30_000 });
      await context.close();
    } finally {
      await browser.close();
    }
    const deadline = Date.now() + 10_000;
    let items: any[] = [];
    for (;;) {
      // (Chromium may ask for /favicon.ico too: the page and its images are what is checked)
      items = (((await (await svc.call("/api/v1/traffic?limit=500")).json()) as any).items as any[]).filter((e) => String(e.url).startsWith(`https://localhost:${port}/`) && !String(e.url).endsWith("/favicon.ico"));
      if (items.length >= N + 1 || Date.now() > deadline) break;
      await Bun.sleep(50);
    }
    const imgs = items.filter((e) => String(e.url).includes("/img/"));
    expect(imgs.length).toBeGreaterThanOrEqual(N);
    const details = await Promise.all(items.map(async (e) => (await svc.call(`/api/v1/traffic/${e.id}`)).json() as Promise<any>));
    for (const d of details) {
      expect(d.http_version).toBe("HTTP/2");
      expect(d.response_http_version ?? null).toBeNull();
      expect(d.status_code).toBe(200);
    }
    // one client connection carried them: distinct odd stream ids
    const ids = new Set(details.map((d) => d.h2_stream_id));
    expect(ids.size).toBe(details.length);
    // and one upstream session carried them to the origin
    expect(originSessions).toBe(1);
    expect(originStreams).toBeGreaterThanOrEqual(N + 1);
  }, 60_000);
});
