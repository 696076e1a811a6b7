/**
 * The web UI in a real browser (the system Chromium through playwright-core): the acceptance points of the UI
 * issue, against a real tapwire service, a real upstream (HTTP and WebSocket) and real clients (curl, WebSocket).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Server } from "bun";
import type { Browser, Page } from "playwright-core";
import { startService } from "../helpers/service.ts";
import { ROOT } from "../helpers/tapwire-process.ts";
import { curl } from "../helpers/upstream.ts";
import { launchBrowser, openUi } from "./browser.ts";

// Page-side globals: the callbacks given to page.evaluate run in the browser (this tsconfig has no DOM library).
// biome-ignore lint: browser objects are untyped here
declare const document: any, window: any, requestAnimationFrame: any, MutationObserver: any, getComputedStyle: any;
type HTMLDivElement = any;
type HTMLImageElement = any;

type Svc = Awaited<ReturnType<typeof startService>>;
let svc: Svc;
let browser: Browser;
let upstream: Server<unknown>;
let base: string;
let page: Page;
let pageErrors: string[];

/** A 3x2 PNG (red, green, blue / white, black, grey). */
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAMAAAACCAIAAAASFvFNAAAAF0lEQVR4nGP4z8Dwn4GB4T8DEwMDAwMADv0C/gbEKpsAAAAASUVORK5CYII=",
  "base64",
);

const seenBodies: string[] = [];

beforeAll(async () => {
  svc = await startService();
  upstream = Bun.serve<undefined>({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req, s) {
      const url = new URL(req.url);
      if (url.pathname === "/ws" && s.upgrade(req)) return;
      const body = await req.text();
      if (url.pathname === "/json") return Response.json({ user: { name: "Ada", roles: ["admin", "dev"] }, count: 2, nested: { deep: { leaf: true } } });
      if (url.pathname === "/image.png") return new Response(PNG, { headers: { "content-type": "image/png" } });
      if (url.pathname.startsWith("/echo")) {
        seenBodies.push(body);
        return Response.json({ method: req.method, path: url.pathname, body, marker: req.headers.get("x-marker") });
      }
      return new Response("not found", { status: 404 });
    },
    websocket: {
      message(ws, m) {
        ws.send(typeof m === "string" ? `echo:${m}` : m);
      },
    },
  });
  base = `http://127.0.0.1:${upstream.port}`;
  browser = await launchBrowser();
  const o = await openUi(browser, svc.apiPort, svc.token);
  page = o.page;
  page.setDefaultTimeout(10_000);
  pageErrors = o.errors;
  await page.getByTestId("live").filter({ hasText: "live" }).waitFor({ timeout: 15_000 });
});

afterAll(async () => {
  await browser?.close();
  await svc?.stop();
  upstream?.stop(true);
});

const viaProxy = (args: string[]) => curl(["--noproxy", "", "-x", `http://127.0.0.1:${svc.proxyPort}`, ...args]);

async function entryIds(): Promise<number[]> {
  const r = (await (await svc.call("/api/v1/traffic?limit=500")).json()) as { items: { id: number }[] };
  return r.items.map((i) => i.id);
}

async function showTraffic(): Promise<void> {
  await page.click(".top [data-tab=traffic]");
  await page.locator(".traffic").waitFor();
}

describe("token", () => {
  test("without a token the page says to open it from `tapwire open`, and calls no API", async () => {
    const o = await openUi(browser, svc.apiPort, null);
    const apiCalls: string[] = [];
    o.page.on("request", (r) => {
      if (r.url().includes("/api/")) apiCalls.push(r.url());
    });
    const msg = o.page.getByTestId("no-token");
    await msg.waitFor();
    expect(await msg.textContent()).toContain("tapwire open");
    expect(apiCalls).toEqual([]);
    await o.context.close();
  });

  test("a wrong token is refused by the API and the page says so", async () => {
    const o = await openUi(browser, svc.apiPort, "0".repeat(64));
    const msg = o.page.getByTestId("no-token");
    await msg.waitFor();
    expect(await msg.textContent()).toContain("refused");
    expect(await o.page.evaluate(() => sessionStorage.getItem("tapwire.token"))).toBeNull();
    await o.context.close();
  });

  test("the token leaves the address bar, stays in sessionStorage, and a reload keeps working", async () => {
    expect(page.url()).toBe(`http://127.0.0.1:${svc.apiPort}/ui/`);
    expect(await page.evaluate(() => sessionStorage.getItem("tapwire.token"))).toBe(svc.token);
    const o = await openUi(browser, svc.apiPort, svc.token);
    await o.page.reload();
    await o.page.getByTestId("live").filter({ hasText: "live" }).waitFor();
    expect(await o.page.getByTestId("no-token").count()).toBe(0);
    // every API call carried the bearer token; none carried it in the URL
    const calls: { url: string; auth: string | undefined }[] = [];
    o.page.on("request", (r) => {
      if (r.url().includes("/api/")) calls.push({ url: r.url(), auth: r.headers().authorization });
    });
    await o.page.click(".top [data-tab=rules]");
    await o.page.getByText("Map Local rules").waitFor();
    expect(calls.length).toBeGreaterThan(0);
    for (const c of calls) {
      expect(c.auth).toBe(`Bearer ${svc.token}`);
      expect(c.url).not.toContain(svc.token);
    }
    await o.context.close();
  });
});

describe("traffic", () => {
  test("traffic made by curl through the proxy appears live in the list", async () => {
    await showTraffic();
    const t0 = performance.now();
    const r = await viaProxy([`${base}/json`]);
    expect(r.code).toBe(0);
    const row = page.locator(".list .row", { hasText: "/json" });
    await row.first().waitFor({ timeout: 10_000 });
    console.log(`  entry shown ${Math.round(performance.now() - t0)} ms after curl started (event stream, no polling)`);
    await viaProxy([`${base}/image.png`, "-o", "/dev/null"]);
    await viaProxy([`${base}/echo/a`, "-d", "one"]);
    await page.locator(".list .row", { hasText: "/echo/a" }).waitFor();
    await page.locator(".list .row", { hasText: "/image.png" }).waitFor();
    const texts = await page.locator(".list .row").allTextContents();
    expect(texts.length).toBe(3);
    expect(texts[0]).toContain("GET");
    expect(texts[0]).toContain("127.0.0.1");
    expect(texts[0]).toContain("200");
    expect(await page.getByTestId("total").textContent()).toContain("3 entries");
  });

  test("filter: path, method and status narrow the list (and Clear restores it)", async () => {
    const onlyRow = async (text: string) => {
      await page.waitForFunction((t) => {
        const rows = [...document.querySelectorAll(".list .row")];
        return rows.length === 1 && rows[0]!.textContent!.includes(t);
      }, text);
      expect(await page.getByTestId("total").textContent()).toBe("1 entries");
    };
    await page.fill("input[name=path]", "image");
    await page.click("form.filters button[type=submit]");
    await onlyRow("/image.png");
    await page.fill("input[name=path]", "");
    await page.selectOption("select[name=method]", "POST");
    await page.click("form.filters button[type=submit]");
    await onlyRow("/echo/a");
    await page.selectOption("select[name=method]", "");
    await page.fill("input[name=status]", "4xx");
    await page.click("form.filters button[type=submit]");
    await page.getByTestId("total").filter({ hasText: /^0 entries$/ }).waitFor();
    await page.getByText("Clear", { exact: true }).click();
    await page.getByTestId("total").filter({ hasText: /^3 entries$/ }).waitFor();
  });

  test("detail: a JSON body is shown as a tree that folds", async () => {
    await page.locator(".list .row", { hasText: "/json" }).click();
    const tree = page.getByTestId("json-tree");
    await tree.waitFor();
    const text = await tree.textContent();
    for (const s of ["user", '"Ada"', "roles", "count", "2"]) expect(text).toContain(s);
    // depth 2 and below starts folded
    expect(text).not.toContain("leaf");
    expect(text).not.toContain('"admin"');
    await tree.locator(".json-toggle", { hasText: "roles" }).click();
    expect(await tree.textContent()).toContain('"admin"');
    await tree.locator(".json-toggle", { hasText: "deep" }).click();
    expect(await tree.textContent()).toContain("leaf");
    await tree.locator(".json-toggle", { hasText: "user" }).click();
    expect(await tree.textContent()).not.toContain('"Ada"');
    // headers of both sides
    expect(await page.getByTestId("detail").textContent()).toMatch(/content-type/i);
    await page.getByRole("tab", { name: "Request" }).click();
    expect(await page.getByTestId("detail").textContent()).toMatch(/User-Agent/i);
    await page.getByRole("tab", { name: "Timing" }).click();
    expect(await page.getByTestId("detail").textContent()).toContain("Duration");
    await page.getByRole("tab", { name: /Response/ }).click();
    await tree.waitFor();
    mkdirSync(join(ROOT, "docs"), { recursive: true });
    await page.screenshot({ path: join(ROOT, "docs", "ui-screenshot.png") });
  });

  test("detail: an image body is shown as an image; hex view of it", async () => {
    await page.locator(".list .row", { hasText: "/image.png" }).click();
    const img = page.getByTestId("body-image");
    await img.waitFor();
    await page.waitForFunction(() => (document.querySelector("[data-testid=body-image]") as HTMLImageElement | null)?.naturalWidth === 3);
    expect(await img.evaluate((i: HTMLImageElement) => [i.naturalWidth, i.naturalHeight])).toEqual([3, 2]);
    await page.click(".body-bar [data-mode=hex]");
    expect(await page.locator("pre.hex").textContent()).toContain("89 50 4e 47 0d 0a 1a 0a");
  });

  test("replay creates a new entry, which the list shows and selects", async () => {
    const before = await entryIds();
    await page.locator(".list .row", { hasText: "/echo/a" }).click();
    await page.getByRole("button", { name: "Replay", exact: true }).click();
    const newId = Math.max(...before) + 1;
    // the page selects the new entry (its detail opens)
    await page.locator(`[data-testid=detail][data-entry="${newId}"]`).waitFor();
    const after = await entryIds();
    expect(after.length).toBe(before.length + 1);
    expect(Math.max(...after)).toBe(newId);
    await page.locator(`.list .row[data-id="${newId}"]`).waitFor();
    await page.locator(`[data-testid=detail][data-entry="${newId}"]`).waitFor();
    const e = (await (await svc.call(`/api/v1/traffic/${newId}`)).json()) as { url: string; client_addr: string };
    expect(e.url).toBe(`${base}/echo/a`);
    expect(e.client_addr).toBe("tapwire-replay");
  });

  test("edit and replay: the upstream receives the edited method, header and body", async () => {
    await page.locator(".list .row", { hasText: "/echo/a" }).first().click();
    await page.getByRole("button", { name: "Edit & replay" }).click();
    const dlg = page.getByRole("dialog", { name: "edit and replay" });
    await dlg.getByLabel("method").fill("PUT");
    await dlg.getByLabel("url").fill(`${base}/echo/edited`);
    const headers = await dlg.getByLabel("headers").inputValue();
    await dlg.getByLabel("headers").fill(headers + "\nX-Marker: from-the-ui");
    await dlg.getByLabel("body").fill("edited body");
    const before = await entryIds();
    await dlg.getByRole("button", { name: "Send" }).click();
    await page.locator(`[data-testid=detail][data-entry="${Math.max(...before) + 1}"]`).waitFor();
    await dlg.waitFor({ state: "detached" });
    expect(seenBodies.at(-1)).toBe("edited body");
    const last = (await (await svc.call("/api/v1/traffic?limit=1")).json()) as { items: { id: number; method: string; url: string }[] };
    expect(last.items[0]).toMatchObject({ method: "PUT", url: `${base}/echo/edited` });
    const d = (await (await svc.call(`/api/v1/traffic/${last.items[0]!.id}`)).json()) as { res_body: string };
    expect(JSON.parse(d.res_body)).toMatchObject({ method: "PUT", body: "edited body", marker: "from-the-ui" });
  });

  test("keyboard: arrows move the selection, Space marks two entries, Diff shows them side by side", async () => {
    await page.locator(".list").focus();
    await page.keyboard.press("Home");
    await page.waitForFunction(() => document.querySelector(".list .row.selected")?.style.transform === "translateY(0px)");
    const firstId = await page.locator(".list .row.selected").getAttribute("data-id");
    await page.keyboard.press("ArrowDown");
    await page.waitForFunction((id) => document.querySelector(".list .row.selected")?.getAttribute("data-id") !== id, firstId);
    const secondId = await page.locator(".list .row.selected").getAttribute("data-id");
    expect(Number(secondId)).toBeGreaterThan(Number(firstId));
    await page.locator(`[data-testid=detail][data-entry="${secondId}"]`).waitFor();
    await page.keyboard.press("Space");
    await page.keyboard.press("ArrowUp");
    await page.keyboard.press("Space");
    await page.waitForFunction(() => document.querySelectorAll(".list .row.marked").length === 2);
    await page.getByRole("button", { name: "Diff 2/2" }).click();
    const diff = page.getByTestId("diff");
    await diff.waitFor();
    await diff.getByText("The entries differ.").waitFor();
    expect(await diff.textContent()).toContain(`Diff #${firstId} ↔ #${secondId}`);
    // same request replayed later: method and URL equal, the Date header differs
    expect(await diff.textContent()).toContain("Response headers");
    await diff.getByRole("button", { name: "Close" }).click();
  });

  test("delete removes the selected entry; capture off keeps new traffic out of the list", async () => {
    const before = await entryIds();
    const victim = Math.min(...before);
    await page.locator(`.list .row[data-id="${victim}"]`).click();
    await page.getByTestId("detail").getByRole("button", { name: "Delete" }).click();
    await page.locator(`.list .row[data-id="${victim}"]`).waitFor({ state: "detached" });
    expect(await entryIds()).not.toContain(victim);

    await page.getByTestId("capture-toggle").click();
    for (let i = 0; i < 50 && ((await (await svc.call("/api/v1/capture/status")).json()) as { capturing: boolean }).capturing; i++) await Bun.sleep(20);
    expect(((await (await svc.call("/api/v1/capture/status")).json()) as { capturing: boolean }).capturing).toBe(false);
    const n = (await entryIds()).length;
    expect((await viaProxy([`${base}/echo/not-captured`])).code).toBe(0);
    expect((await entryIds()).length).toBe(n);
    await page.getByTestId("capture-toggle").click();
    for (let i = 0; i < 50 && !((await (await svc.call("/api/v1/capture/status")).json()) as { capturing: boolean }).capturing; i++) await Bun.sleep(20);
    expect(((await (await svc.call("/api/v1/capture/status")).json()) as { capturing: boolean }).capturing).toBe(true);
  });
});

describe("intercepts", () => {
  test("a paused request is edited in the page and resumed; the client receives the edit", async () => {
    await page.click(".top [data-tab=intercepts]");
    await page.getByTestId("breakpoint-form").getByLabel("breakpoint pattern").fill(`${base}/echo/pause*`);
    await page.getByTestId("breakpoint-form").getByRole("button", { name: "Add breakpoint" }).click();
    await page.locator(".plain-list li", { hasText: `${base}/echo/pause*` }).waitFor();
    const bps = (await (await svc.call("/api/v1/breakpoints")).json()) as { pattern: string; intercept_request: boolean; intercept_response: boolean }[];
    expect(bps).toEqual([{ pattern: `${base}/echo/pause*`, intercept_request: true, intercept_response: false }]);

    const client = viaProxy([`${base}/echo/pause-me`, "-H", "X-Marker: original", "--data-binary", "original body"]);
    const editor = page.getByTestId("paused-editor");
    await editor.waitFor({ timeout: 10_000 });
    expect(await page.locator(".top [data-tab=intercepts]").textContent()).toBe("Intercepts (1)");
    expect(await editor.getByLabel("body").inputValue()).toBe("original body");
    await editor.getByLabel("method").fill("PATCH");
    await editor.getByLabel("url").fill(`${base}/echo/pause-edited`);
    const headers = await editor.getByLabel("headers").inputValue();
    await editor.getByLabel("headers").fill(headers.replace("X-Marker: original", "X-Marker: edited-in-ui"));
    await editor.getByLabel("body").fill("body edited in the browser");
    await editor.getByRole("button", { name: "Resume" }).click();
    const r = await client;
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toEqual({ method: "PATCH", path: "/echo/pause-edited", body: "body edited in the browser", marker: "edited-in-ui" });
    await editor.waitFor({ state: "detached" });
    expect(await page.locator(".top [data-tab=intercepts]").textContent()).toBe("Intercepts");
  });

  test("abort answers the paused client with an error; intercept hosts editor adds and removes", async () => {
    await page.getByLabel("add to Intercept hosts").fill("abort.test");
    await page.locator("form[data-list=intercept-hosts] button[type=submit]").click();
    await page.locator(".plain-list li", { hasText: "abort.test" }).waitFor();
    expect(await (await svc.call("/api/v1/intercept-hosts")).json()).toEqual(["abort.test"]);
    const client = viaProxy([`${base}/echo/pause-abort`, "-o", "/dev/null", "-w", "%{http_code}"]);
    const editor = page.getByTestId("paused-editor");
    await editor.waitFor({ timeout: 10_000 });
    await editor.getByRole("button", { name: "Abort" }).click();
    expect((await client).out).toBe("502");
    await page.getByRole("button", { name: "remove abort.test" }).click();
    await page.locator(".plain-list li", { hasText: "abort.test" }).waitFor({ state: "detached" });
    expect(await (await svc.call("/api/v1/intercept-hosts")).json()).toEqual([]);
    await page.locator(".plain-list li", { hasText: `${base}/echo/pause*` }).getByRole("button", { name: "remove" }).click();
    await page.locator(".plain-list li", { hasText: `${base}/echo/pause*` }).waitFor({ state: "detached" });
  });
});

describe("rules", () => {
  test("a mock rule created in the page answers on the mock listener started from the page", async () => {
    await page.click(".top [data-tab=rules]");
    await page.click(".tabs.sub [data-tab=mock]");
    await page.getByTestId("mock-status").filter({ hasText: "stopped" }).waitFor();
    await page.getByLabel("mock port").fill("0");
    await page.getByTestId("mock-listener").getByRole("button", { name: "Start" }).click();
    await page.getByTestId("mock-status").filter({ hasText: "running" }).waitFor();
    const port = Number(/:(\d+)$/.exec((await page.getByTestId("mock-status").textContent())!)![1]);
    expect(port).toBeGreaterThan(0);
    await page.getByTestId("new-mock").click();
    const form = page.getByTestId("rule-form");
    await form.locator("[name=name]").fill("hello mock");
    await form.locator("[name=url_pattern]").fill("/hello/*");
    await form.locator("[name=status_code]").fill("201");
    await form.locator("[name=headers]").fill("Content-Type: text/plain\nX-Mock: yes");
    await form.locator("[name=body]").fill("mocked from the UI");
    await form.getByRole("button", { name: "Save" }).click();
    await form.waitFor({ state: "detached" });
    await page.locator("tr[data-rule]", { hasText: "hello mock" }).waitFor();
    const res = await fetch(`http://127.0.0.1:${port}/hello/world`);
    expect(res.status).toBe(201);
    expect(res.headers.get("x-mock")).toBe("yes");
    expect(await res.text()).toBe("mocked from the UI");
    // toggle it off from the list: the listener falls back to 404
    await page.locator("tr[data-rule]", { hasText: "hello mock" }).locator("input[type=checkbox]").click();
    for (let i = 0; i < 100 && (await fetch(`http://127.0.0.1:${port}/hello/world`)).status !== 404; i++) await Bun.sleep(20);
    expect((await fetch(`http://127.0.0.1:${port}/hello/world`)).status).toBe(404);
    await page.getByTestId("mock-listener").getByRole("button", { name: "Stop" }).click();
    await page.getByTestId("mock-status").filter({ hasText: "stopped" }).waitFor();
  });

  test("a Map Local rule saved in the page answers proxied requests; a bad rule shows the API's message", async () => {
    await page.click(".tabs.sub [data-tab=map-local]");
    await page.getByTestId("new-map-local").click();
    const form = page.getByTestId("rule-form");
    await form.locator("[name=url_pattern]").fill(`${base}/mapped`);
    await form.locator("[name=inline_body]").fill('{"mapped":true}');
    await form.getByRole("button", { name: "Save" }).click();
    await form.waitFor({ state: "detached" });
    expect(JSON.parse((await viaProxy([`${base}/mapped`])).out)).toEqual({ mapped: true });
    await page.getByTestId("new-map-local").click();
    await form.locator("[name=status_code]").fill("abc");
    await form.getByRole("button", { name: "Save" }).click();
    expect(await form.locator(".error-box").textContent()).toContain("status_code");
    await form.getByRole("button", { name: "Cancel" }).click();
  });

  test("scripts: run in test mode shows tests, console and errors", async () => {
    await page.click(".tabs.sub [data-tab=scripts]");
    const box = page.getByTestId("script-test");
    await box.getByLabel("test script").fill('pm.test("is 200", () => pm.response.to.have.status(200));\npm.test("is 404", () => pm.response.to.have.status(404));\nconsole.log("hello from the script");\nundefinedFn();');
    await box.getByRole("button", { name: "Run in test mode" }).click();
    const out = page.getByTestId("script-output");
    await out.waitFor({ timeout: 20_000 });
    const text = (await out.textContent())!;
    expect(text).toContain("✓ is 200");
    expect(text).toContain("✗ is 404");
    expect(text).toContain("hello from the script");
    expect(text).toContain("undefinedFn");
  });

  test("ignored hosts and the global throttle are edited from the page", async () => {
    await page.click(".tabs.sub [data-tab=ignore]");
    await page.getByLabel("add to Ignored hosts").fill("ignored.test");
    await page.locator("form[data-list=ignored-hosts] button[type=submit]").click();
    await page.locator(".plain-list li", { hasText: "ignored.test" }).waitFor();
    expect(await (await svc.call("/api/v1/ignored-hosts")).json()).toEqual(["ignored.test"]);
    await page.click(".tabs.sub [data-tab=throttle]");
    await page.getByLabel("bytes per second").fill("123456");
    await page.getByRole("button", { name: "Set" }).click();
    await page.getByTestId("throttle-state").filter({ hasText: "123,456 bytes/s" }).waitFor();
    await page.getByRole("button", { name: "Turn off" }).click();
    await page.getByTestId("throttle-state").filter({ hasText: "off" }).waitFor();
  });
});

describe("websocket", () => {
  test("a WebSocket's frames show, with a text/hex toggle", async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${upstream.port}/ws`, { proxy: `http://127.0.0.1:${svc.proxyPort}` } as unknown as string[]);
    await new Promise<void>((resolve, reject) => {
      ws.onopen = () => resolve();
      ws.onerror = () => reject(new Error("WebSocket through the proxy failed"));
    });
    const got: unknown[] = [];
    ws.onmessage = (e) => got.push(e.data);
    ws.send("hello-ws");
    ws.send(new Uint8Array([0xde, 0xad, 0xbe, 0xef]));
    for (let i = 0; i < 250 && got.length < 2; i++) await Bun.sleep(20);
    expect(got.length).toBe(2);
    await page.click(".top [data-tab=websocket]");
    await page.locator("[data-conn]", { hasText: "/ws" }).click();
    const frames = page.getByTestId("frames");
    await frames.locator("tr[data-frame]").nth(3).waitFor({ timeout: 10_000 });
    const rows = await frames.locator("tr[data-frame]").allTextContents();
    expect(rows[0]).toContain("out");
    expect(rows[0]).toContain("text");
    expect(rows[0]).toContain("hello-ws");
    expect(rows.some((r) => r.includes("in") && r.includes("echo:hello-ws"))).toBe(true);
    expect(rows.some((r) => r.includes("binary") && r.includes("4 B"))).toBe(true);
    await frames.getByTestId("hex-toggle").click();
    const hex = await frames.locator("tr[data-frame]").allTextContents();
    expect(hex[0]).toContain("68 65 6c 6c 6f 2d 77 73");
    expect(hex.some((r) => r.includes("de ad be ef"))).toBe(true);
    ws.close();
  });
});

describe("page", () => {
  test("dark and light themes follow the system", async () => {
    const bg = async (scheme: "light" | "dark") => {
      const o = await openUi(browser, svc.apiPort, svc.token, { colorScheme: scheme });
      await o.page.locator(".top").waitFor();
      const c = await o.page.evaluate(() => getComputedStyle(document.body).backgroundColor);
      await o.context.close();
      return c;
    };
    expect(await bg("light")).toBe("rgb(255, 255, 255)");
    expect(await bg("dark")).toBe("rgb(17, 19, 24)");
  });

  test("no script error and no Content-Security-Policy violation in the whole session", () => {
    expect(pageErrors.filter((e) => !/status of (400|404|409)/.test(e))).toEqual([]);
  });
});
