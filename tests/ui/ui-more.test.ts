/**
 * The Sessions, Compose, Flows and Remote files views in a real browser (system Chromium through playwright-core),
 * against a real tapwire service, a real HTTP upstream, curl through the proxy and a real S3 server (s3rver).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Server } from "bun";
import type { Browser, Page } from "playwright-core";
import { startS3rver, type RemoteServer } from "../helpers/remote-servers.ts";
import { startService } from "../helpers/service.ts";
import { tempDir } from "../helpers/tapwire-process.ts";
import { curl } from "../helpers/upstream.ts";
import { launchBrowser, openUi } from "./browser.ts";

type Svc = Awaited<ReturnType<typeof startService>>;
let svc: Svc;
let browser: Browser;
let upstream: Server<unknown>;
let s3: RemoteServer & { bucket: string };
let slow: Server<unknown>;
let base: string;
let page: Page;
let pageErrors: string[];
const requestUrls: string[] = [];
const work = tempDir("tapwire-ui-more-");

beforeAll(async () => {
  upstream = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch(req) {
      const url = new URL(req.url);
      if (url.pathname === "/login") return Response.json({ token: "tok-1", user: url.searchParams.get("user") });
      return Response.json({ path: url.pathname, agent: req.headers.get("user-agent") });
    },
  });
  base = `http://127.0.0.1:${upstream.port}`;
  s3 = await startS3rver();
  process.env.TW_UI_S3_KEY = s3.user;
  process.env.TW_UI_S3_SECRET = s3.password;
  slow = startSlowS3();
  const dataDir = tempDir();
  writeFileSync(
    join(dataDir, "remote-connections.json"),
    JSON.stringify({
      connections: [
        { id: "bucket", protocol: "s3", host: "127.0.0.1", port: s3.port, label: "Test bucket", homePath: "", auth: { access_key_env: "TW_UI_S3_KEY", secret_key_env: "TW_UI_S3_SECRET" }, options: { bucket: s3.bucket, endpoint: `http://127.0.0.1:${s3.port}`, force_path_style: true, region: "us-east-1" } },
        { id: "slow", protocol: "s3", host: "127.0.0.1", port: slow.port, label: "Slow server", homePath: "", auth: { access_key_env: "TW_UI_S3_KEY", secret_key_env: "TW_UI_S3_SECRET" }, options: { bucket: "b", endpoint: `http://127.0.0.1:${slow.port}`, force_path_style: true, region: "us-east-1" } },
      ],
    }),
    { mode: 0o600 },
  );
  svc = await startService({ dataDir });
  browser = await launchBrowser();
  const o = await openUi(browser, svc.apiPort, svc.token);
  page = o.page;
  page.setDefaultTimeout(10_000);
  pageErrors = o.errors;
  page.on("request", (r) => requestUrls.push(r.url()));
  await page.getByTestId("live").filter({ hasText: "live" }).waitFor({ timeout: 15_000 });
});

afterAll(async () => {
  await browser?.close();
  await svc?.stop();
  upstream?.stop(true);
  await s3?.stop();
  slow?.stop(true);
});

/**
 * A minimal S3 endpoint whose one object, /b/big.bin (100 MB), sends its first 64 KiB and then nothing more: a
 * download from it stays running (with bytes done) until it is paused or cancelled. Counts the GETs of the object.
 */
let slowGets = 0;
function startSlowS3(): Server<unknown> {
  const SIZE = 100_000_000;
  return Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    idleTimeout: 0,
    fetch(req) {
      const url = new URL(req.url);
      if (url.pathname === "/b" || url.pathname === "/b/")
        return new Response('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix></Prefix><KeyCount>0</KeyCount><MaxKeys>1</MaxKeys><IsTruncated>false</IsTruncated></ListBucketResult>', { headers: { "content-type": "application/xml" } });
      if (url.pathname !== "/b/big.bin") return new Response('<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>no</Message></Error>', { status: 404, headers: { "content-type": "application/xml" } });
      const head = { "content-type": "application/octet-stream", "last-modified": new Date(0).toUTCString(), etag: '"1"' };
      if (req.method === "HEAD") return new Response(null, { headers: { ...head, "content-length": String(SIZE) } });
      slowGets++;
      const from = Number(/bytes=(\d+)-/.exec(req.headers.get("range") ?? "")?.[1] ?? 0);
      const body = new ReadableStream({
        pull(c) {
          if ((c as unknown as { sent?: boolean }).sent) return new Promise(() => {});
          (c as unknown as { sent?: boolean }).sent = true;
          c.enqueue(new Uint8Array(64 * 1024));
        },
      });
      return new Response(body, { status: from ? 206 : 200, headers: { ...head, "content-length": String(SIZE - from), ...(from ? { "content-range": `bytes ${from}-${SIZE - 1}/${SIZE}` } : {}) } });
    },
  });
}

async function api<T>(path: string, body?: unknown): Promise<T> {
  const r = await svc.call(path, body === undefined ? {} : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  if (r.status >= 300) throw new Error(`${path}: HTTP ${r.status} ${await r.text()}`);
  return (r.status === 204 ? undefined : await r.json()) as T;
}

const viaProxy = (url: string) => curl(["--noproxy", "", "-sS", "-x", `http://127.0.0.1:${svc.proxyPort}`, url]);

/** With TAPWIRE_UI_SHOTS=<folder>: screenshots of the view in both themes, to look at. */
async function shots(name: string): Promise<void> {
  const dir = process.env.TAPWIRE_UI_SHOTS;
  if (!dir) return;
  for (const scheme of ["light", "dark"] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.screenshot({ path: join(dir, `${name}-${scheme}.png`) });
  }
  await page.emulateMedia({ colorScheme: "light" });
}

async function show(view: string): Promise<void> {
  await page.click(`.top [data-tab=${view}]`);
}

describe("sessions", () => {
  test("create a filtered tab, see its entries, save it as a session, export its HAR and import it back", async () => {
    await show("sessions");
    const form = page.getByRole("form", { name: "new session tab" });
    await form.getByLabel("tab name").fill("Marked calls");
    await form.getByLabel("tab search filter").fill("sess-marker");
    await form.getByRole("button", { name: "Create tab" }).click();
    await page.locator(".detail .section-head h3", { hasText: "Marked calls" }).waitFor();
    for (const p of ["/sess-marker/1", "/sess-marker/2", "/other"]) await viaProxy(base + p);
    // the event stream brings the tab's new count and its entries (a table) without a refresh
    const tabRow = page.locator("[data-list=tabs] li", { hasText: "Marked calls" });
    await tabRow.filter({ hasText: "2 entries" }).waitFor();
    const rows = page.locator(".detail table.entries tbody tr");
    await rows.nth(1).waitFor();
    expect(await rows.count()).toBe(2);
    expect(await rows.nth(0).textContent()).toContain(`${base}/sess-marker/1`);
    expect(await rows.nth(0).locator("td").nth(3).textContent()).toBe("200");

    await page.getByLabel("session name").fill("Saved marked");
    await page.getByRole("button", { name: "Save as session" }).click();
    const savedRow = page.locator("[data-list=saved] li", { hasText: "Saved marked" });
    await savedRow.filter({ hasText: "2 entries" }).waitFor();
    await page.locator(".detail .section-head h3", { hasText: "Saved marked · 2 entries" }).waitFor();

    const [dl] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Export HAR" }).click()]);
    expect(dl.suggestedFilename()).toMatch(/\.har$/);
    expect(dl.url()).toStartWith("blob:");
    const file = join(work, "exported.har");
    await dl.saveAs(file);
    const har = JSON.parse(readFileSync(file, "utf8")) as { log: { version: string; entries: { request: { url: string }; response: { status: number } }[] } };
    expect(har.log.version).toBe("1.2");
    expect(har.log.entries.map((e) => e.request.url)).toEqual([`${base}/sess-marker/1`, `${base}/sess-marker/2`]);
    expect(har.log.entries.map((e) => e.response.status)).toEqual([200, 200]);
    await shots("sessions");

    // import the file back: a new saved session with the same entries
    await page.getByLabel("import a HAR file").setInputFiles({ name: "reimported.har", mimeType: "application/json", buffer: readFileSync(file) });
    await page.locator("[data-list=saved] li", { hasText: "reimported" }).filter({ hasText: "2 entries" }).waitFor();
    await page.locator(".detail .section-head h3", { hasText: "reimported · 2 entries" }).waitFor();
    const listed = (await api<{ sessions: { name: string }[] }>("/api/v1/session-tabs/saved")).sessions.map((s) => s.name).sort();
    expect(listed).toEqual(["Saved marked", "reimported"]);
    // delete the imported one
    await page.getByRole("button", { name: "Delete", exact: true }).click();
    await page.locator("[data-list=saved] li", { hasText: "reimported" }).waitFor({ state: "detached" });
    expect((await api<{ sessions: unknown[] }>("/api/v1/session-tabs/saved")).sessions.length).toBe(1);
  });

  test("clear and delete a created tab", async () => {
    await page.locator("[data-list=tabs] button", { hasText: "Marked calls" }).click();
    await page.getByRole("button", { name: "Clear", exact: true }).click();
    await page.locator("[data-list=tabs] li", { hasText: "Marked calls" }).filter({ hasText: "0 entries" }).waitFor();
    await page.getByRole("button", { name: "Delete tab" }).click();
    await page.locator("[data-list=tabs] li", { hasText: "Marked calls" }).waitFor({ state: "detached" });
    expect((await api<{ tabs: { id: string }[] }>("/api/v1/session-tabs")).tabs.map((t) => t.id)).toEqual(["live"]);
  });
});

describe("traffic", () => {
  test("Export HAR in the traffic view downloads the entries matching the filters", async () => {
    await show("traffic");
    await page.getByLabel("path filter").fill("/sess-marker");
    await page.getByLabel("path filter").press("Enter");
    await page.getByTestId("total").filter({ hasText: /^2 entries$/ }).waitFor();
    const [dl] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Export HAR" }).click()]);
    expect(dl.url()).toStartWith("blob:");
    const file = join(work, "traffic.har");
    await dl.saveAs(file);
    const har = JSON.parse(readFileSync(file, "utf8")) as { log: { entries: { request: { url: string } }[] } };
    expect(har.log.entries.map((e) => e.request.url)).toEqual([`${base}/sess-marker/1`, `${base}/sess-marker/2`]);
  });
});

describe("sessions paging", () => {
  test("a tab's entries are paged by 50", async () => {
    const har = JSON.parse(readFileSync(join(work, "exported.har"), "utf8")) as { log: { entries: unknown[] } };
    har.log.entries = Array.from({ length: 30 }, () => har.log.entries).flat();
    const r = await svc.call("/api/v1/traffic/import", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(har) });
    expect(r.status).toBe(200);
    const total = ((await api<{ total: number }>("/api/v1/session-tabs/live?limit=0")) as { total: number }).total;
    expect(total).toBeGreaterThan(60);
    await show("sessions");
    await page.locator("[data-list=tabs] button", { hasText: "live" }).click();
    const pager = page.locator(".detail .row", { hasText: `1–50 of ${total}` });
    await pager.waitFor();
    expect(await page.locator(".detail table.entries tbody tr").count()).toBe(50);
    await pager.getByRole("button", { name: "Next ›" }).click();
    await page.locator(".detail .row", { hasText: `51–${Math.min(100, total)} of ${total}` }).waitFor();
    expect(await page.locator(".detail table.entries tbody tr").first().locator("td").first().textContent()).toBe("51");
  });
});

describe("compose", () => {
  test("send a collection request with an environment: status, test results, console and body", async () => {
    await api("/api/v1/compose/collections", {
      name: "Local API",
      requests: [
        {
          name: "Log in",
          method: "GET",
          url: "{{baseUrl}}/login?user={{user}}",
          scripts: { prerequest: "", test: 'pm.test("status is 200", () => pm.response.to.have.status(200));\npm.test("token is tok-2", () => pm.expect(pm.response.json().token).to.eql("tok-2"));\nconsole.log("user", pm.response.json().user);' },
        },
      ],
      environments: [{ name: "local", variables: [{ key: "baseUrl", defaultValue: base }] }],
    });
    await show("compose");
    await page.locator(".compose button.item", { hasText: "Local API" }).click();
    await page.locator("[data-list=requests] button", { hasText: "Log in" }).click();
    await page.getByLabel("Environment").selectOption("local");
    await page.getByRole("button", { name: "Send" }).click();
    const res = page.locator(".compose .detail .section");
    await res.locator("h3", { hasText: "Response 200 OK" }).waitFor();
    expect(await res.locator(".tests li.pass").textContent()).toContain("status is 200");
    expect(await res.locator(".tests li.fail").textContent()).toContain("token is tok-2");
    expect(await res.locator(".notice").textContent()).toContain("{{user}}");
    expect(await res.locator(".console").textContent()).toContain("[log] user {{user}}");
    expect(await res.textContent()).toContain("tok-1");
    expect(await res.locator(".compose-meta").textContent()).toContain(`${base}/login?user={{user}}`);
    await shots("compose");
  });
});

describe("flows", () => {
  test("run a stored flow with an environment override and see the passed report with its steps", async () => {
    await api("/api/v1/flows", {
      id: "ui-login",
      name: "UI login flow",
      variables: { baseUrl: "http://127.0.0.1:1", user: "ada" },
      nodes: [
        { id: "start", type: "start", data: {} },
        { id: "login", type: "request", data: { name: "GET /login", method: "GET", url: "{{baseUrl}}/login?user={{user}}" } },
        { id: "check", type: "assert", data: { name: "logged in", checks: [{ type: "status", equals: 200 }, { type: "jsonPath", path: "$.user", equals: "grace" }] } },
        { id: "end", type: "end", data: {} },
      ],
      edges: [
        { source: "start", target: "login" },
        { source: "login", target: "check" },
        { source: "check", target: "end" },
      ],
    });
    await show("flows");
    await page.locator(".flows button.item", { hasText: "UI login flow" }).click();
    await page.locator(".flows table.nodes tbody tr").nth(3).waitFor();
    expect(await page.locator(".flows table.nodes tbody tr").nth(1).textContent()).toContain("GET /login");
    await page.getByLabel("Environment overrides (name=value per line)").fill(`baseUrl=${base}\nuser=grace`);
    await page.getByRole("button", { name: "Run", exact: true }).click();
    await page.getByTestId("run-status").filter({ hasText: "passed" }).waitFor({ timeout: 20_000 });
    const steps = page.locator(".flows table.steps tbody tr");
    expect(await steps.count()).toBe(4);
    const texts = await steps.allTextContents();
    expect(texts[1]).toContain("GET /login");
    expect(texts[1]).toContain("HTTP 200");
    expect(texts[2]).toContain("logged in");
    expect(await steps.nth(2).locator(".tests li.pass").count()).toBe(2);
    for (const row of await steps.all()) expect(await row.locator("td").nth(2).textContent()).toBe("passed");
    await shots("flows");
  });

  test("a failing run shows failed and the assertion's message", async () => {
    await page.getByLabel("Environment overrides (name=value per line)").fill(`baseUrl=${base}\nuser=linus`);
    await page.getByRole("button", { name: "Run", exact: true }).click();
    await page.getByTestId("run-status").filter({ hasText: "failed" }).waitFor({ timeout: 20_000 });
    expect(await page.locator(".flows table.steps .tests li.fail").count()).toBe(1);
  });
});

describe("remote files", () => {
  test("browse a connection, upload a file into a folder and download it; transfers reach done", async () => {
    // a folder made over the API; the rest through the page
    await api("/api/v1/remote-fs/connections/bucket/mkdir", { path: "/reports" });
    const up = join(work, "up");
    const down = join(work, "down");
    mkdirSync(up);
    mkdirSync(down);
    const content = "quarterly figures\n".repeat(5000);
    writeFileSync(join(up, "q3.txt"), content);

    await show("remote");
    const conn = page.locator(".remote li", { hasText: "Test bucket" });
    await conn.waitFor();
    expect(await conn.textContent()).toContain("not encrypted");
    await conn.locator("button").click();
    await page.locator(".remote button[data-dir=reports]").click();
    await page.locator(".remote .detail h3", { hasText: "/reports" }).waitFor();
    await page.locator(".remote table.files", { hasText: "empty folder" }).waitFor();

    await page.getByLabel("Upload (local file)").fill(join(up, "q3.txt"));
    await page.getByRole("button", { name: "Upload here" }).click();
    await page.locator(".remote table.transfers tr[data-state=done]", { hasText: "upload" }).waitFor({ timeout: 20_000 });
    // the folder is read again when the transfers are over
    const file = page.locator(".remote table.files tr", { hasText: "q3.txt" });
    await file.waitFor();
    expect(await conn.textContent()).toContain("connected");

    // a relative local path is refused in the page, before any call
    await page.getByLabel("Download to (local folder)").fill("relative/dir");
    await file.getByRole("button", { name: "download q3.txt" }).click();
    await page.locator(".remote > .error-box", { hasText: "must be absolute" }).waitFor();

    await page.getByLabel("Download to (local folder)").fill(down);
    await file.getByRole("button", { name: "download q3.txt" }).click();
    const done = page.locator(".remote table.transfers tr[data-state=done]", { hasText: "download" });
    await done.waitFor({ timeout: 20_000 });
    expect(await done.textContent()).toContain(join(down, "q3.txt"));
    expect(readFileSync(join(down, "q3.txt"), "utf8")).toBe(content);

    // Up goes back to the root
    await page.getByRole("button", { name: "Up", exact: true }).click();
    await page.locator(".remote button[data-dir=reports]").waitFor();
  });

  test("a running transfer's progress is followed; pause, resume and cancel from the page", async () => {
    const { transferId } = await api<{ transferId: string }>("/api/v1/remote-fs/connections/slow/download", { remote_path: "/big.bin", local_path: join(work, "big.bin") });
    await page.locator(".remote .section-head", { hasText: "Transfers" }).getByRole("button", { name: "Refresh" }).click();
    const sel = `.remote table.transfers tr[data-transfer-id="${transferId}"]`;
    const row = page.locator(sel);
    // polled while running: the 64 KiB the server sent show up
    await page.locator(`${sel}[data-state=running]`, { hasText: "64.0 KB of 95.4 MB" }).waitFor({ timeout: 20_000 });
    await page.locator(".remote h3", { hasText: "Transfers (running)" }).waitFor();
    await row.getByRole("button", { name: "pause" }).click();
    await page.locator(`${sel}[data-state=paused]`).waitFor();
    await shots("remote");
    const gets = slowGets;
    await row.getByRole("button", { name: "resume" }).click();
    await page.locator(`${sel}[data-state=running]`, { hasText: "128.0 KB of 95.4 MB" }).waitFor({ timeout: 20_000 });
    expect(slowGets).toBe(gets + 1);
    await row.getByRole("button", { name: "cancel" }).click();
    await page.locator(`${sel}[data-state=cancelled]`).waitFor({ timeout: 20_000 });
    expect((await api<{ state: string }>(`/api/v1/remote-fs/transfers/${transferId}`)).state).toBe("cancelled");
    await page.locator(".remote h3", { hasText: /^Transfers$/ }).waitFor();
  });
});

describe("page", () => {
  test("no token in any URL the page requested; no script error or CSP violation", () => {
    expect(requestUrls.length).toBeGreaterThan(10);
    expect(requestUrls.filter((u) => u.includes(svc.token))).toEqual([]);
    expect(pageErrors.filter((e) => !/status of (400|404|409)/.test(e))).toEqual([]);
  });
});
