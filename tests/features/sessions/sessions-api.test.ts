/** Spec 4.8 (session tabs, saved sessions) and the extensions, over the real API of an in-process service. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { NewEntry } from "../../../src/store/types.ts";
import { harErrors } from "../../helpers/har-schema.ts";
import { startService } from "../../helpers/service.ts";

type Svc = Awaited<ReturnType<typeof startService>>;
let svc: Svc;

async function call(path: string, init?: RequestInit): Promise<{ status: number; body: any }> {
  const r = await svc.call(`/api/v1${path}`, init);
  const text = await r.text();
  let body: any = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: r.status, body };
}
const post = (path: string, body?: unknown) => call(path, { method: "POST", ...(body === undefined ? {} : { body: JSON.stringify(body) }) });

let seq = 0;
/** Adds an entry straight to the capture store (as the proxy would) and returns its id. */
function add(over: Partial<NewEntry> = {}): number {
  seq++;
  return svc.store.add({
    method: "GET",
    url: `http://${over.host ?? "a.test"}/item/${seq}`,
    host: "a.test",
    status_code: 200,
    content_type: "text/plain",
    duration_ms: 5,
    timestamp: Date.now(),
    client_addr: "curl",
    has_response: true,
    req_headers: [["Host", over.host ?? "a.test"]],
    res_headers: [["Content-Type", "text/plain"]],
    req_body: null,
    req_body_size: 0,
    res_body: new TextEncoder().encode(`body ${seq}`),
    res_body_size: `body ${seq}`.length,
    ...over,
  });
}

let before: number;

beforeAll(async () => {
  // a data directory that already holds traffic from an earlier run: the live tab starts after it
  svc = await startService();
  before = add({ host: "old.test" });
  await svc.store.flush();
  const dataDir = svc.config.dataDir;
  await svc.stop();
  svc = await startService({ dataDir });
});
afterAll(async () => {
  await svc.stop();
});

describe("GET /session-tabs", () => {
  test("the live tab holds what was captured since start, not what an earlier run stored", async () => {
    const { status, body } = await call("/session-tabs");
    expect(status).toBe(200);
    const live = body.tabs[0];
    expect(live).toMatchObject({ id: "live", name: "Live", kind: "live", entry_count: 0, filter: {}, start_after_id: before });
    expect(typeof live.created_at).toBe("number");
    const id = add();
    expect((await call("/session-tabs")).body.tabs[0].entry_count).toBe(1);
    const page = await call("/session-tabs/live");
    expect(page.status).toBe(200);
    expect(page.body).toMatchObject({ id: "live", name: "Live", total: 1, offset: 0, limit: 50 });
    expect(page.body.items.map((e: any) => e.id)).toEqual([id]);
    // items are GET /traffic's summaries
    const traffic = await call(`/traffic?since_id=${id - 1}`);
    expect(page.body.items[0]).toEqual(traffic.body.items[0]);
  });

  test("unknown tab: 404; bad paging: 400; unknown parameter: 400", async () => {
    expect((await call("/session-tabs/nope")).status).toBe(404);
    expect((await call("/session-tabs/nope")).body.error.code).toBe("not_found");
    for (const q of ["limit=abc", "offset=-1", "since_id=1.5", "order=up", "host=x", "limit=1&limit=2"]) {
      const r = await call(`/session-tabs/live?${q}`);
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("bad_request");
    }
  });
});

describe("created tabs", () => {
  test("a filtered tab collects matching entries from its creation on; since_id takes older ones too", async () => {
    const older = add({ host: "f.test", url: "http://f.test/old" });
    const created = await post("/session-tabs", { name: "f only", filter: { host: "f.test" } });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ name: "f only", kind: "filter", entry_count: 0, filter: { host: "f.test" } });
    expect(created.body.id).toMatch(/^tab-\d+$/);
    const a = add({ host: "f.test", url: "http://f.test/new" });
    add({ host: "g.test", url: "http://g.test/other" });
    const tab = await call(`/session-tabs/${created.body.id}`);
    expect(tab.body.items.map((e: any) => e.id)).toEqual([a]);
    const fromOlder = await post("/session-tabs", { name: "since", filter: { host: "f.test", since_id: older - 1 } });
    expect(fromOlder.body.entry_count).toBe(2);
    expect((await call(`/session-tabs/${fromOlder.body.id}?order=asc`)).body.items.map((e: any) => e.id)).toEqual([older, a]);
    const list = await call("/session-tabs");
    expect(list.body.tabs.map((t: any) => t.id)).toEqual(["live", created.body.id, fromOlder.body.id]);
    expect(list.body.tabs[1].entry_count).toBe(1);
  });

  test("client, method and status filters; a filter field the tab does not know is a 400", async () => {
    const t = await post("/session-tabs", { name: "node posts", filter: { client: "node", method: "POST", status: 201 } });
    const hit = add({ client_addr: "node", method: "POST", status_code: 201 });
    add({ client_addr: "node", method: "POST", status_code: 200 });
    add({ client_addr: "curl", method: "POST", status_code: 201 });
    expect((await call(`/session-tabs/${t.body.id}`)).body.items.map((e: any) => e.id)).toEqual([hit]);
    // the same client filter on GET /traffic (an extension there too)
    expect((await call(`/traffic?client=node&method=POST&status=201`)).body.items.map((e: any) => e.id)).toEqual([hit]);
    for (const bad of [{ name: "x", filter: { colour: "red" } }, { name: "" }, { filter: {} }, { name: "x", filter: { status: "two hundred" } }, { name: "x", filter: { has_error: "maybe" } }, { name: "x", extra: 1 }]) {
      const r = await post("/session-tabs", bad);
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("bad_request");
    }
    expect((await post("/session-tabs", { name: "   " })).status).toBe(400);
  });

  test("paging like GET /traffic: limit, offset, since_id, the 500 cap", async () => {
    const t = await post("/session-tabs", { name: "paging", filter: { host: "p.test" } });
    const ids: number[] = [];
    for (let i = 0; i < 7; i++) ids.push(add({ host: "p.test" }));
    const p1 = await call(`/session-tabs/${t.body.id}?limit=3`);
    expect(p1.body).toMatchObject({ total: 7, offset: 0, limit: 3 });
    expect(p1.body.items.map((e: any) => e.id)).toEqual(ids.slice(4).reverse());
    const p2 = await call(`/session-tabs/${t.body.id}?limit=3&offset=3`);
    expect(p2.body.items.map((e: any) => e.id)).toEqual(ids.slice(1, 4).reverse());
    const since = await call(`/session-tabs/${t.body.id}?since_id=${ids[4]}`);
    expect(since.body.items.map((e: any) => e.id)).toEqual(ids.slice(5));
    expect(since.body.total).toBe(2);
    expect((await call(`/session-tabs/${t.body.id}?limit=100000`)).body.limit).toBe(500);
    expect((await call(`/session-tabs/${t.body.id}?limit=0`)).body).toMatchObject({ items: [], total: 7 });
  });

  test("clear empties the tab (entries stay in /traffic); delete removes the tab, never the entries; live cannot be deleted", async () => {
    const t = await post("/session-tabs", { name: "to clear", filter: { host: "c.test" } });
    const a = add({ host: "c.test" });
    expect((await call(`/session-tabs/${t.body.id}`)).body.total).toBe(1);
    const cleared = await post(`/session-tabs/${t.body.id}/clear`, {});
    expect(cleared.status).toBe(200);
    expect(cleared.body.entry_count).toBe(0);
    expect((await call(`/traffic/${a}`)).status).toBe(200);
    const b = add({ host: "c.test" });
    expect((await call(`/session-tabs/${t.body.id}`)).body.items.map((e: any) => e.id)).toEqual([b]);
    expect((await post(`/session-tabs/${t.body.id}/clear`, { all: true })).status).toBe(400);
    expect((await post("/session-tabs/nope/clear")).status).toBe(404);

    const del = await call(`/session-tabs/${t.body.id}`, { method: "DELETE" });
    expect(del.status).toBe(204);
    expect((await call(`/session-tabs/${t.body.id}`)).status).toBe(404);
    expect((await call(`/session-tabs/${t.body.id}`, { method: "DELETE" })).status).toBe(404);
    expect((await call(`/traffic/${b}`)).status).toBe(200);
    const live = await call("/session-tabs/live", { method: "DELETE" });
    expect(live.status).toBe(409);

    const liveCleared = await post("/session-tabs/live/clear");
    expect(liveCleared.body.entry_count).toBe(0);
    const c = add();
    expect((await call("/session-tabs/live")).body.items.map((e: any) => e.id)).toEqual([c]);
  });

  test("created tabs survive a restart (session-tabs.json, mode 0600)", async () => {
    const t = await post("/session-tabs", { name: "kept", filter: { host: "k.test" } });
    const k = add({ host: "k.test" });
    await svc.store.flush();
    const dataDir = svc.config.dataDir;
    expect(statSync(join(dataDir, "session-tabs.json")).mode & 0o777).toBe(0o600);
    await svc.stop();
    svc = await startService({ dataDir });
    const again = await call(`/session-tabs/${t.body.id}`);
    expect(again.status).toBe(200);
    expect(again.body.items.map((e: any) => e.id)).toEqual([k]);
  });
});

describe("saved sessions", () => {
  test("save a tab: a HAR 1.2 file in sessions/, listed, paged, downloadable, deletable", async () => {
    const t = await post("/session-tabs", { name: "Checkout flow", filter: { host: "s.test" } });
    const ids = [add({ host: "s.test", url: "http://s.test/1" }), add({ host: "s.test", url: "http://s.test/2", status_code: 500 }), add({ host: "s.test", url: "http://s.test/3" })];
    const saved = await post(`/session-tabs/${t.body.id}/save`, { name: "checkout run 1" });
    expect(saved.status).toBe(200);
    expect(saved.body).toMatchObject({ name: "checkout run 1", entry_count: 3 });
    expect(saved.body.id).toMatch(/^checkout-run-1-[0-9a-f]{8}$/);
    const file = join(svc.config.dataDir, "sessions", `${saved.body.id}.har`);
    expect(statSync(file).size).toBe(saved.body.size_bytes);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(join(svc.config.dataDir, "sessions")).mode & 0o777).toBe(0o700);
    // no temp file left behind
    expect(readdirSync(join(svc.config.dataDir, "sessions")).filter((f) => f.startsWith("."))).toEqual([]);

    const list = await call("/session-tabs/saved");
    expect(list.status).toBe(200);
    expect(list.body.sessions.find((s: any) => s.id === saved.body.id)).toEqual(saved.body);

    const entries = await call(`/session-tabs/saved/${saved.body.id}`);
    expect(entries.body).toMatchObject({ id: saved.body.id, name: "checkout run 1", total: 3, offset: 0, limit: 50 });
    // newest first, ids are positions in the file; original_id is the tapwire entry id
    expect(entries.body.items.map((e: any) => [e.id, e.original_id, e.url, e.status_code])).toEqual([
      [3, ids[2], "http://s.test/3", 200],
      [2, ids[1], "http://s.test/2", 500],
      [1, ids[0], "http://s.test/1", 200],
    ]);
    const traffic = (await call(`/traffic/${ids[0]}`)).body;
    const first = entries.body.items[2];
    for (const k of ["method", "url", "host", "status_code", "content_type", "duration_ms", "timestamp", "client_addr", "has_response"]) expect(first[k]).toEqual(traffic[k]);
    const paged = await call(`/session-tabs/saved/${saved.body.id}?since_id=1&limit=1`);
    expect(paged.body.items.map((e: any) => e.id)).toEqual([2]);
    expect(paged.body.total).toBe(2);
    expect((await call(`/session-tabs/saved/${saved.body.id}?offset=2`)).body.items.map((e: any) => e.id)).toEqual([1]);
    expect((await call(`/session-tabs/saved/${saved.body.id}?bogus=1`)).status).toBe(400);

    const har = await svc.call(`/api/v1/session-tabs/saved/${saved.body.id}/har`);
    expect(har.status).toBe(200);
    expect(har.headers.get("content-type")).toContain("application/json");
    const doc: any = await har.json();
    expect(harErrors(doc)).toBeNull();
    expect(doc.log.pages[0].title).toBe("checkout run 1");
    expect(doc.log._tapwire).toMatchObject({ name: "checkout run 1", tab: { id: t.body.id, name: "Checkout flow" } });
    expect(doc.log.entries.map((e: any) => e._tapwire.id)).toEqual(ids);

    // default name: the tab's
    const unnamed = await post(`/session-tabs/${t.body.id}/save`);
    expect(unnamed.body.name).toBe("Checkout flow");
    expect((await post(`/session-tabs/${t.body.id}/save`, { name: "" })).status).toBe(400);
    expect((await post("/session-tabs/nope/save", {})).status).toBe(404);

    expect((await call(`/session-tabs/saved/${saved.body.id}`, { method: "DELETE" })).status).toBe(204);
    expect((await call(`/session-tabs/saved/${saved.body.id}`)).status).toBe(404);
    expect((await call(`/session-tabs/saved/${saved.body.id}/har`)).status).toBe(404);
    expect((await call(`/session-tabs/saved/${saved.body.id}`, { method: "DELETE" })).status).toBe(404);
    expect((await call("/session-tabs/saved/nope")).status).toBe(404);
    expect((await call("/session-tabs/saved/..%2Fsession-tabs.json")).status).toBe(404);
  });

  test("corrupt or non-HAR files in sessions/ are skipped in the list and 404 by id; a hand-placed HAR is listed", async () => {
    const dir = join(svc.config.dataDir, "sessions");
    writeFileSync(join(dir, "broken.har"), '{"log": {"entries": [');
    writeFileSync(join(dir, "not-har.har"), JSON.stringify({ hello: "world" }));
    writeFileSync(join(dir, "bad-entry.har"), JSON.stringify({ log: { version: "1.2", entries: [{ request: {} }] } }));
    writeFileSync(join(dir, "notes.txt"), "not a session");
    const hand = { log: { version: "1.2", creator: { name: "Firefox", version: "1" }, pages: [{ id: "p", title: "From Firefox", startedDateTime: "2026-01-01T00:00:00.000Z", pageTimings: {} }], entries: [{ startedDateTime: "2026-01-01T00:00:00.123Z", time: 12.5, request: { method: "GET", url: "https://x.test/a", httpVersion: "HTTP/2", headers: [], cookies: [], queryString: [], headersSize: -1, bodySize: 0 }, response: { status: 204, statusText: "", httpVersion: "HTTP/2", headers: [], cookies: [], content: { size: 0, mimeType: "" }, redirectURL: "", headersSize: -1, bodySize: 0 }, cache: {}, timings: { send: 0, wait: 12.5, receive: 0 } }] } };
    writeFileSync(join(dir, "hand_placed.v1.har"), JSON.stringify(hand));
    const list = await call("/session-tabs/saved");
    expect(list.status).toBe(200);
    const ids = list.body.sessions.map((s: any) => s.id);
    expect(ids).toContain("hand_placed.v1");
    for (const bad of ["broken", "not-har", "bad-entry", "notes"]) expect(ids).not.toContain(bad);
    for (const bad of ["broken", "not-har", "bad-entry"]) {
      expect((await call(`/session-tabs/saved/${bad}`)).status).toBe(404);
      expect((await call(`/session-tabs/saved/${bad}/har`)).status).toBe(404);
    }
    const hp = await call("/session-tabs/saved/hand_placed.v1");
    expect(hp.body.name).toBe("From Firefox");
    expect(hp.body.items[0]).toMatchObject({ id: 1, method: "GET", url: "https://x.test/a", host: "x.test", status_code: 204, duration_ms: 13, has_response: true, timestamp: Date.parse("2026-01-01T00:00:00.123Z") });
  });

  test("POST /session-tabs/saved imports a HAR as a saved session; a body that is not a HAR is a 400", async () => {
    const doc = { log: { version: "1.2", creator: { name: "x", version: "1" }, entries: [{ startedDateTime: "2026-02-02T10:00:00.000Z", time: 1, request: { method: "POST", url: "http://i.test/x", headers: [{ name: "Content-Type", value: "text/plain" }], postData: { mimeType: "text/plain", text: "hi" } }, response: { status: 200, headers: [], content: { size: 2, mimeType: "text/plain", text: "ok" } }, cache: {}, timings: { send: 0, wait: 1, receive: 0 } }] } };
    const r = await post("/session-tabs/saved?name=imported%20one", doc);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ name: "imported one", entry_count: 1 });
    const items = await call(`/session-tabs/saved/${r.body.id}`);
    expect(items.body.items[0]).toMatchObject({ method: "POST", url: "http://i.test/x", status_code: 200 });
    const file: any = await (await svc.call(`/api/v1/session-tabs/saved/${r.body.id}/har`)).json();
    expect(file.log.entries[0].request.postData.text).toBe("hi");
    for (const bad of [{}, { log: {} }, { log: { entries: [{ startedDateTime: "yesterday", request: { method: "GET", url: "http://x/" } }] } }, { log: { entries: [{ startedDateTime: "2026-01-01T00:00:00Z", request: { method: "GET", url: "/relative" } }] } }]) {
      const b = await post("/session-tabs/saved", bad);
      expect(b.status).toBe(400);
      expect(b.body.error.code).toBe("bad_request");
    }
    expect((await call("/session-tabs/saved", { method: "POST", body: "not json" })).status).toBe(400);
    expect((await post("/session-tabs/saved?colour=red", doc)).status).toBe(400);
  });
});
