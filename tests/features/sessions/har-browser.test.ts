/**
 * A HAR recorded by a real browser: playwright-core's `recordHar` with the system Chromium against a local server
 * (a page with a binary image and a WebSocket, a form POST answered by a redirect), imported with POST
 * /traffic/import and checked field by field, WebSocket frames included. Skipped, saying so, only where
 * /usr/bin/chromium is not installed (.ci/run installs it).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Server } from "bun";
import { startService } from "../../helpers/service.ts";
import { tempDir } from "../../helpers/tapwire-process.ts";

const CHROMIUM = "/usr/bin/chromium";
const hasChromium = existsSync(CHROMIUM);
if (!hasChromium) console.warn(`har-browser.test.ts: SKIPPED — ${CHROMIUM} is not installed (apt-get install chromium)`);

// a real PNG (1x1, red)
const PNG = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==", "base64");
const PAGE = `<!doctype html><html><head><title>har test</title></head><body>
<img id="img" src="/image.png">
<form id="f" method="post" action="/submit"><input name="user" value="Zoë"><input name="note" value="a&b c"><button id="go">go</button></form>
<script>
  window.wsDone = new Promise((resolve) => {
    const ws = new WebSocket("ws://" + location.host + "/ws");
    ws.binaryType = "arraybuffer";
    let got = 0;
    ws.onopen = () => ws.send("hello from the page");
    ws.onmessage = () => { if (++got === 2) { ws.close(1000, "done"); resolve(true); } };
  });
</script></body></html>`;

type Svc = Awaited<ReturnType<typeof startService>>;
let svc: Svc;
let origin: Server<unknown>;
let harPath: string;

beforeAll(async () => {
  if (!hasChromium) return;
  origin = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req, server) {
      const u = new URL(req.url);
      if (u.pathname === "/ws") return server.upgrade(req, { data: undefined }) ? undefined : new Response("upgrade failed", { status: 400 });
      if (u.pathname === "/") return new Response(PAGE, { headers: { "Content-Type": "text/html; charset=utf-8" } });
      if (u.pathname === "/image.png") return new Response(PNG, { headers: { "Content-Type": "image/png", "Cache-Control": "no-store" } });
      if (u.pathname === "/submit" && req.method === "POST") {
        await req.text();
        return new Response(null, { status: 302, headers: { Location: "/done", "Set-Cookie": "flash=saved; Path=/" } });
      }
      if (u.pathname === "/done") return new Response("<p>saved</p>", { headers: { "Content-Type": "text/html; charset=utf-8" } });
      return new Response("no", { status: 404 });
    },
    websocket: {
      message(ws, msg) {
        ws.send(`echo: ${msg}`);
        ws.send(new Uint8Array([0, 1, 2, 250, 255]));
      },
    },
  });
  const { chromium } = await import("playwright-core");
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  harPath = join(tempDir("tapwire-har-browser-"), "recorded.har");
  try {
    const context = await browser.newContext({ recordHar: { path: harPath, content: "embed", mode: "full" } });
    const page = await context.newPage();
    const base = `http://127.0.0.1:${origin.port}`;
    await page.goto(`${base}/`);
    // (strings: they run in the page, whose DOM types this project does not compile against)
    await page.waitForFunction(`document.getElementById("img").complete`);
    await page.evaluate(`window.wsDone`);
    await Promise.all([page.waitForURL(`${base}/done`), page.click("#go")]);
    await context.close(); // writes the HAR
  } finally {
    await browser.close();
  }
  svc = await startService();
}, 60_000);

afterAll(async () => {
  await svc?.stop();
  origin?.stop(true);
});

async function call(path: string, init?: RequestInit): Promise<any> {
  const r = await svc.call(`/api/v1${path}`, init);
  expect(r.status).toBe(200);
  return await r.json();
}

describe(hasChromium ? "a HAR recorded by Chromium (playwright recordHar)" : `a HAR recorded by Chromium — SKIPPED: ${CHROMIUM} is not installed`, () => {
  test.skipIf(!hasChromium)("imports with every field in place: page, binary image, form POST, redirect, WebSocket frames", async () => {
    const har = JSON.parse(readFileSync(harPath, "utf8"));
    const base = `http://127.0.0.1:${origin.port}`;
    const result = await call("/traffic/import", { method: "POST", body: JSON.stringify(har) });
    expect(result.imported).toBe(har.log.entries.length);
    expect(result.websocket_connections).toBe(1);
    const details: any[] = [];
    for (let id = result.first_id; id <= result.last_id; id++) details.push(await call(`/traffic/${id}`));
    const find = (method: string, url: string) => {
      const d = details.find((x) => x.method === method && x.url === url);
      if (!d) throw new Error(`no imported ${method} ${url} among ${details.map((x) => `${x.method} ${x.url}`).join(", ")}`);
      return d;
    };
    const byUrl = (url: string) => har.log.entries.find((e: any) => e.request.url === url);

    // every imported entry: marked, timestamp and duration from the HAR, headers in order, version and timings kept
    for (const d of details) {
      const e = har.log.entries[d.id - result.first_id];
      expect(d.imported).toEqual({ format: "har", creator: expect.stringMatching(/^Playwright/) });
      expect(d.client_addr).toBe("har-import");
      expect(d.timestamp).toBe(Date.parse(e.startedDateTime));
      expect(d.duration_ms).toBe(Math.round(e.time));
      expect(d.req_headers).toEqual(e.request.headers.filter((h: any) => !h.name.startsWith(":")).map((h: any) => [h.name, h.value]));
      expect(d.res_headers).toEqual(e.response.headers.map((h: any) => [h.name, h.value]));
      expect(d.http_version).toBe(e.request.httpVersion);
      expect(d.status_code).toBe(e.response.status);
      if (e.serverIPAddress) expect(d.server_ip).toBe(e.serverIPAddress.replace(/^\[|\]$/g, ""));
      for (const k of ["send", "wait", "receive"]) expect(d.timings[k]).toBe(e.timings[k] >= 0 ? e.timings[k] : -1);
    }

    const page = find("GET", `${base}/`);
    expect(page).toMatchObject({ status_code: 200, host: "127.0.0.1", content_type: "text/html; charset=utf-8", res_body: PAGE, res_body_encoding: "utf8", has_response: true, reason: "OK" });

    const img = find("GET", `${base}/image.png`);
    expect(img).toMatchObject({ status_code: 200, content_type: "image/png", res_body_encoding: "base64", res_body_size: PNG.length });
    expect(Buffer.from(img.res_body, "base64").equals(PNG)).toBe(true);

    const post = find("POST", `${base}/submit`);
    expect(post.status_code).toBe(302);
    expect(post.req_body).toBe("user=Zo%C3%AB&note=a%26b+c");
    expect(post.req_body_encoding).toBe("utf8");
    expect(post.req_headers).toContainEqual(["Content-Type", "application/x-www-form-urlencoded"]);
    expect(post.res_headers).toContainEqual(["Location", "/done"]);
    // Playwright writes the resolved URL; the Location field keeps what the server sent
    expect(byUrl(`${base}/submit`).response.redirectURL).toBe(`${base}/done`);
    expect(post.req_body_size).toBe(Buffer.byteLength("user=Zo%C3%AB&note=a%26b+c"));

    const done = find("GET", `${base}/done`);
    expect(done).toMatchObject({ status_code: 200, res_body: "<p>saved</p>" });
    expect(done.req_headers).toContainEqual(["Cookie", "flash=saved"]);

    // the WebSocket handshake and its frames, Playwright's millisecond times read as milliseconds
    const wsEntry = details.find((d) => d.url === `ws://127.0.0.1:${origin.port}/ws`) ?? find("GET", `${base}/ws`);
    expect(wsEntry.status_code).toBe(101);
    const msgs = byUrl(wsEntry.url)._webSocketMessages;
    const conn = (await call("/websocket/connections")).items.find((c: any) => c.logId === wsEntry.id);
    expect(conn).toMatchObject({ url: `ws://127.0.0.1:${origin.port}/ws`, imported: true, closed: true });
    const frames = (await call(`/websocket/connections/${conn.connId}/frames`)).items;
    const data = frames.filter((f: any) => f.opcode === "text" || f.opcode === "binary");
    expect(data.map((f: any) => [f.dir, f.opcode, f.text])).toEqual([
      ["out", "text", "hello from the page"],
      ["in", "text", "echo: hello from the page"],
      ["in", "binary", Buffer.from([0, 1, 2, 250, 255]).toString("base64")],
    ]);
    expect(data[2].sizeBytes).toBe(5);
    const dataMsgs = msgs.filter((m: any) => m.opcode === 1 || m.opcode === 2);
    expect(data.map((f: any) => f.ts)).toEqual(dataMsgs.map((m: any) => Math.round(m.time > 1e11 ? m.time : m.time * 1000)));
    // real epoch milliseconds: within the last minute
    for (const f of data) expect(Math.abs(f.ts - Date.now())).toBeLessThan(60_000);
  }, 30_000);
});
