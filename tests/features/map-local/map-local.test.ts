import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { MapLocalAddon } from "../../../src/features/map-local/addon.ts";
import { MapLocalStore } from "../../../src/features/map-local/store.ts";
import { Flow } from "../../../src/pipeline/flow.ts";
import { startService } from "../../helpers/service.ts";
import { tempDir } from "../../helpers/tapwire-process.ts";
import { curl, startUpstream, type Upstream } from "../../helpers/upstream.ts";

type Svc = Awaited<ReturnType<typeof startService>>;
let up: Upstream;
let svc: Svc;
let proxy: string;
let caFile: string;
let files: string;

beforeAll(async () => {
  up = startUpstream();
  svc = await startService({ upstreamCa: [up.caFile] });
  proxy = `http://127.0.0.1:${svc.proxyPort}`;
  caFile = join(svc.config.dataDir, "ca.pem");
  files = tempDir("tapwire-map-local-files-");
});
afterAll(async () => {
  await svc.stop();
  up.stop();
});

/** Every test starts with no rules and the master flag on. */
beforeEach(async () => {
  const snap = (await (await svc.call("/api/v1/map-local")).json()) as { rules: { id: string }[] };
  for (const r of snap.rules) expect((await svc.call(`/api/v1/map-local/rules/${encodeURIComponent(r.id)}`, { method: "DELETE" })).status).toBe(204);
  await put("/api/v1/map-local/enabled", { enabled: true });
});

const json = { "content-type": "application/json" };
async function post(path: string, body?: unknown) {
  const r = await svc.call(path, { method: "POST", headers: json, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, text, json: text ? JSON.parse(text) : null };
}
async function put(path: string, body: unknown) {
  const r = await svc.call(path, { method: "PUT", headers: json, body: JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, json: text ? JSON.parse(text) : null };
}
async function get(path: string) {
  const r = await svc.call(path);
  const text = await r.text();
  return { status: r.status, json: text ? JSON.parse(text) : null };
}
async function addRule(rule: Record<string, unknown>) {
  const r = await post("/api/v1/map-local/rules", rule);
  expect(r.status).toBe(200);
  return r.json;
}

interface Fetched {
  code: number;
  err: string;
  statusLine: string;
  status: number;
  headers: [string, string][];
  header(name: string): string | undefined;
  body: Buffer;
  ms: number;
}

/** curl through the proxy (HTTPS with the tapwire CA), returning the final status line, headers and body bytes. */
async function via(url: string, extra: string[] = []): Promise<Fetched> {
  const dir = tempDir("tapwire-map-local-curl-");
  const hFile = join(dir, "headers");
  const bFile = join(dir, "body");
  const t0 = performance.now();
  const r = await curl(["-x", proxy, "--cacert", caFile, "-D", hFile, "-o", bFile, ...extra, url]);
  const ms = performance.now() - t0;
  const blocks = existsSync(hFile) ? readFileSync(hFile, "latin1").split("\r\n\r\n").filter((b) => b.trim() !== "") : [];
  const last = blocks[blocks.length - 1] ?? "";
  const [statusLine = "", ...lines] = last.split("\r\n");
  const headers = lines.map((l) => {
    const i = l.indexOf(":");
    return [l.slice(0, i), l.slice(i + 1).trim()] as [string, string];
  });
  return {
    code: r.code,
    err: r.err,
    statusLine,
    status: Number(statusLine.split(" ")[1] ?? 0),
    headers,
    header: (n) => headers.find(([k]) => k.toLowerCase() === n.toLowerCase())?.[1],
    body: existsSync(bFile) ? readFileSync(bFile) : Buffer.alloc(0),
    ms,
  };
}

/** The stored entry of the newest flow (straight from the store: what capture recorded). */
async function newestStored(): Promise<Record<string, any>> {
  const list = (await get("/api/v1/traffic?limit=1")).json;
  return svc.store.get(list.items[0].id) as unknown as Record<string, any>;
}

const upstreamCalls = () => up.seen.length;

describe("Map Local API", () => {
  test("GET snapshot: the master flag (on by default) and every rule", async () => {
    expect(await get("/api/v1/map-local")).toEqual({ status: 200, json: { enabled: true, rules: [] } });
    await addRule({ id: "one", url_pattern: "a.test/x", method: "GET" });
    await addRule({ id: "two", url_pattern: "b.test/**", match_all_methods: true });
    const snap = (await get("/api/v1/map-local")).json;
    expect(snap.enabled).toBe(true);
    expect(snap.rules.map((r: { id: string }) => r.id)).toEqual(["one", "two"]);
  });

  test("POST /rules answers the persisted rule with the spec's defaults filled", async () => {
    const r = await post("/api/v1/map-local/rules", { id: "min", url_pattern: "example.test/api/*", method: "GET", unknown_field: 1 });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({
      id: "min",
      url_pattern: "example.test/api/*",
      method: "GET",
      match_all_methods: false,
      enabled: true,
      source: "inline_body",
      file_path: null,
      inline_body: null,
      inline_format: null,
      status_code: 200,
      response_headers: {},
      delay_ms: 0,
    });
    expect((await get("/api/v1/map-local")).json.rules).toEqual([r.json]);
    const stored = JSON.parse(readFileSync(join(svc.config.dataDir, "map-local.json"), "utf8"));
    expect(stored.rules).toEqual([r.json]);
  });

  test("POST /rules with an existing id is 409 and leaves the rule alone", async () => {
    await addRule({ id: "dup", url_pattern: "a.test", method: "GET", inline_body: "first" });
    const r = await post("/api/v1/map-local/rules", { id: "dup", url_pattern: "b.test", method: "GET" });
    expect(r.status).toBe(409);
    expect(r.json.error.code).toBe("conflict");
    expect((await get("/api/v1/map-local")).json.rules).toHaveLength(1);
    expect((await get("/api/v1/map-local")).json.rules[0].inline_body).toBe("first");
  });

  const base = { id: "bad", url_pattern: "a.test/x", method: "GET" };
  const invalid: [string, Record<string, unknown>, string][] = [
    ["no id", { url_pattern: "a.test", method: "GET" }, "id"],
    ["an empty id", { ...base, id: "" }, "id"],
    ["no url_pattern", { id: "bad", method: "GET" }, "url_pattern"],
    ["a malformed url_pattern", { ...base, url_pattern: "ftp://a.test/x" }, "url_pattern"],
    ["a url_pattern with a scheme but no host", { ...base, url_pattern: "https:///x" }, "url_pattern"],
    ["no method while match_all_methods is false", { id: "bad", url_pattern: "a.test" }, "method"],
    ["a method that is not a token", { ...base, method: "GE T" }, "method"],
    ["a non-boolean match_all_methods", { ...base, match_all_methods: "yes" }, "match_all_methods"],
    ["a non-boolean enabled", { ...base, enabled: 1 }, "enabled"],
    ["a status_code that is a string", { ...base, status_code: "200" }, "status_code"],
    ["a status_code out of range", { ...base, status_code: 99 }, "status_code"],
    ["a 1xx status_code", { ...base, status_code: 101 }, "status_code"],
    ["a negative delay_ms", { ...base, delay_ms: -1 }, "delay_ms"],
    ["a fractional delay_ms", { ...base, delay_ms: 1.5 }, "delay_ms"],
    ["local_file without file_path", { ...base, source: "local_file" }, "file_path"],
    ["local_file with a relative path", { ...base, source: "local_file", file_path: "data/x.json" }, "file_path"],
    ["a non-string inline_body", { ...base, inline_body: 42 }, "inline_body"],
    ["a binary inline_format with a body that is not base64", { ...base, inline_format: "image/png", inline_body: "not base64!" }, "inline_body"],
    ["an inline_format that is no MIME type", { ...base, inline_format: "pictures" }, "inline_format"],
    ["response_headers that are not an object", { ...base, response_headers: ["X-A", "1"] }, "response_headers"],
    ["a response header value that is not a string", { ...base, response_headers: { "X-A": 1 } }, "response_headers.X-A"],
    ["a response header name with a space", { ...base, response_headers: { "X Bad": "1" } }, "response_headers.X Bad"],
    ["a response header value with CRLF", { ...base, response_headers: { "X-Inject": "a\r\nSet-Cookie: x=1" } }, "response_headers.X-Inject"],
  ];
  for (const [what, body, field] of invalid) {
    test(`POST /rules with ${what} is 400 naming '${field}'`, async () => {
      const r = await post("/api/v1/map-local/rules", body);
      expect(r.status).toBe(400);
      expect(r.json.error.code).toBe("bad_request");
      expect(r.json.error.message).toContain(`'${field}'`);
      expect((await get("/api/v1/map-local")).json.rules).toEqual([]);
    });
  }

  test("POST /rules with a body that is not JSON is 400", async () => {
    const r = await svc.call("/api/v1/map-local/rules", { method: "POST", headers: json, body: "{not json" });
    expect(r.status).toBe(400);
  });

  test("match_all_methods makes method optional; any other source behaves as inline_body", async () => {
    const r = await addRule({ id: "all", url_pattern: "a.test", match_all_methods: true, source: "something-else", inline_body: "x" });
    expect(r).toMatchObject({ method: "", match_all_methods: true, source: "something-else" });
  });

  test("PUT /rules/{id} replaces the rule (200, the new rule); unknown id 404; invalid body 400; other id in body 400", async () => {
    await addRule({ id: "r1", url_pattern: "a.test/x", method: "GET", inline_body: "old" });
    const ok = await put("/api/v1/map-local/rules/r1", { id: "r1", url_pattern: "a.test/y", method: "POST", inline_body: "new", status_code: 202 });
    expect(ok.status).toBe(200);
    expect(ok.json).toMatchObject({ id: "r1", url_pattern: "a.test/y", method: "POST", inline_body: "new", status_code: 202, delay_ms: 0, enabled: true });
    expect((await get("/api/v1/map-local")).json.rules).toEqual([ok.json]);

    const missing = await put("/api/v1/map-local/rules/nope", { id: "nope", url_pattern: "a.test", method: "GET" });
    expect(missing.status).toBe(404);
    expect(missing.json.error.code).toBe("not_found");

    const bad = await put("/api/v1/map-local/rules/r1", { id: "r1", url_pattern: "a.test", method: "GET", delay_ms: "slow" });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toContain("'delay_ms'");

    const other = await put("/api/v1/map-local/rules/r1", { id: "r2", url_pattern: "a.test", method: "GET" });
    expect(other.status).toBe(400);
    expect((await get("/api/v1/map-local")).json.rules).toEqual([ok.json]);
  });

  test("DELETE /rules/{id} is 204 with an empty body; then 404", async () => {
    await addRule({ id: "gone", url_pattern: "a.test", method: "GET" });
    const r = await svc.call("/api/v1/map-local/rules/gone", { method: "DELETE" });
    expect(r.status).toBe(204);
    expect(await r.text()).toBe("");
    expect((await get("/api/v1/map-local")).json.rules).toEqual([]);
    const again = await svc.call("/api/v1/map-local/rules/gone", { method: "DELETE" });
    expect(again.status).toBe(404);
    expect(((await again.json()) as any).error.code).toBe("not_found");
  });

  test("POST /rules/{id}/toggle answers the updated rule; unknown id 404", async () => {
    await addRule({ id: "tg", url_pattern: "a.test", method: "GET" });
    const off = await post("/api/v1/map-local/rules/tg/toggle");
    expect(off.status).toBe(200);
    expect(off.json).toMatchObject({ id: "tg", enabled: false, url_pattern: "a.test" });
    expect((await get("/api/v1/map-local")).json.rules[0].enabled).toBe(false);
    expect((await post("/api/v1/map-local/rules/tg/toggle")).json.enabled).toBe(true);
    expect((await post("/api/v1/map-local/rules/nope/toggle")).status).toBe(404);
  });

  test("PUT /enabled sets the master flag and answers {enabled}; invalid body 400", async () => {
    expect(await put("/api/v1/map-local/enabled", { enabled: false })).toEqual({ status: 200, json: { enabled: false } });
    expect((await get("/api/v1/map-local")).json.enabled).toBe(false);
    const bad = await put("/api/v1/map-local/enabled", { enabled: "off" });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toContain("enabled");
    expect((await get("/api/v1/map-local")).json.enabled).toBe(false);
    expect(await put("/api/v1/map-local/enabled", { enabled: true })).toEqual({ status: 200, json: { enabled: true } });
  });

  describe("GET /match", () => {
    const match = (q: Record<string, string>) => get(`/api/v1/map-local/match?${new URLSearchParams(q)}`);

    test("answers {matched: true, rule} for the first enabled matching rule, {matched: false, rule: null} otherwise", async () => {
      const a = await addRule({ id: "a", url_pattern: "https://api.example.test/v1/*", method: "GET" });
      await addRule({ id: "b", url_pattern: "api.example.test/**", match_all_methods: true });
      expect(await match({ method: "GET", url: "https://api.example.test/v1/users?x=1" })).toEqual({ status: 200, json: { matched: true, rule: a } });
      expect((await match({ method: "POST", url: "https://api.example.test/v1/users" })).json.rule.id).toBe("b");
      expect((await match({ method: "GET", url: "http://api.example.test/v1/users" })).json.rule.id).toBe("b");
      expect(await match({ method: "GET", url: "https://other.example.test/v1/users" })).toEqual({ status: 200, json: { matched: false, rule: null } });
    });

    test("method compares case-insensitively, is ignored with match_all_methods, and defaults to GET", async () => {
      await addRule({ id: "p", url_pattern: "a.test/p", method: "post" });
      await addRule({ id: "g", url_pattern: "a.test/g", method: "GET" });
      await addRule({ id: "any", url_pattern: "a.test/any", method: "DELETE", match_all_methods: true });
      expect((await match({ method: "POST", url: "http://a.test/p" })).json.matched).toBe(true);
      expect((await match({ method: "Post", url: "http://a.test/p" })).json.matched).toBe(true);
      expect((await match({ method: "GET", url: "http://a.test/p" })).json.matched).toBe(false);
      expect((await match({ url: "http://a.test/g" })).json.rule.id).toBe("g");
      expect((await match({ method: "PATCH", url: "http://a.test/any" })).json.rule.id).toBe("any");
    });

    test("glob and default-port semantics: * within a segment, ** across, :443/:80 stripped, scheme optional", async () => {
      await addRule({ id: "star", url_pattern: "https://h.test:443/a/*/c", method: "GET" });
      await addRule({ id: "deep", url_pattern: "h.test/deep/**/end", method: "GET" });
      expect((await match({ url: "https://h.test/a/b/c" })).json.rule?.id).toBe("star");
      expect((await match({ url: "https://h.test:443/a/b/c" })).json.rule?.id).toBe("star");
      expect((await match({ url: "https://h.test/a/b/x/c" })).json.matched).toBe(false);
      expect((await match({ url: "https://h.test:8443/a/b/c" })).json.matched).toBe(false);
      expect((await match({ url: "http://h.test:80/deep/1/2/3/end" })).json.rule?.id).toBe("deep");
      expect((await match({ url: "https://H.TEST/deep/x/end" })).json.rule?.id).toBe("deep");
    });

    test("disabled rules never match; the master flag is not consulted by the preview", async () => {
      await addRule({ id: "off", url_pattern: "a.test/x", method: "GET", enabled: false });
      expect((await match({ url: "http://a.test/x" })).json).toEqual({ matched: false, rule: null });
      await post("/api/v1/map-local/rules/off/toggle");
      await put("/api/v1/map-local/enabled", { enabled: false });
      expect((await match({ url: "http://a.test/x" })).json.rule.id).toBe("off");
    });

    test("a missing, empty or non-absolute url is 400", async () => {
      for (const q of [{ method: "GET" }, { url: "" }, { url: "not a url" }, { url: "/relative/path" }, { url: "ftp://a.test/x" }] as Record<string, string>[]) {
        const r = await match(q);
        expect(r.status).toBe(400);
        expect(r.json.error.code).toBe("bad_request");
        expect(r.json.error.message).toContain("url");
      }
    });
  });
});

describe("Map Local through the proxy", () => {
  test("HTTP: an inline text rule answers instead of the upstream: status line, headers, body", async () => {
    await addRule({
      id: "inline",
      url_pattern: "http://mapped.example.test/greeting",
      method: "GET",
      inline_body: "héllo, wörld ✓",
      inline_format: "text/plain; charset=utf-8",
      status_code: 201,
      response_headers: { "X-Mapped": "yes", "Cache-Control": "no-store" },
    });
    const before = upstreamCalls();
    const r = await via("http://mapped.example.test/greeting");
    expect(r.code).toBe(0);
    expect(r.statusLine).toBe("HTTP/1.1 201 Created");
    expect(r.header("content-type")).toBe("text/plain; charset=utf-8");
    expect(r.header("x-mapped")).toBe("yes");
    expect(r.header("cache-control")).toBe("no-store");
    expect(r.body.toString("utf8")).toBe("héllo, wörld ✓");
    expect(r.header("content-length")).toBe(String(Buffer.byteLength("héllo, wörld ✓")));
    expect(upstreamCalls()).toBe(before);
  });

  test("HTTPS (intercepted, curl --cacert): the inline rule answers inside the tunnel", async () => {
    await addRule({ id: "tls", url_pattern: "https://secure.example.test/api/*", method: "GET", inline_body: '{"ok":true}', inline_format: "application/json", status_code: 200 });
    const r = await via("https://secure.example.test/api/v1/thing?q=1", ["--http1.1"]);
    expect(r.code).toBe(0);
    expect(r.statusLine).toBe("HTTP/1.1 200 OK");
    expect(r.header("content-type")).toBe("application/json");
    expect(JSON.parse(r.body.toString())).toEqual({ ok: true });
  });

  test("a binary inline_format means inline_body is base64: the exact bytes are served", async () => {
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    await addRule({ id: "bin", url_pattern: "bin.example.test/img.png", method: "GET", inline_body: bytes.toString("base64"), inline_format: "image/png" });
    const r = await via("http://bin.example.test/img.png");
    expect(r.header("content-type")).toBe("image/png");
    expect(r.header("content-length")).toBe("256");
    expect(Buffer.compare(r.body, bytes)).toBe(0);
  });

  test("a textual inline_format alias sets its Content-Type; an explicit Content-Type in response_headers wins", async () => {
    await addRule({ id: "alias", url_pattern: "fmt.example.test/a", method: "GET", inline_body: "{}", inline_format: "json" });
    await addRule({ id: "explicit", url_pattern: "fmt.example.test/b", method: "GET", inline_body: "<b/>", inline_format: "json", response_headers: { "content-type": "application/xml" } });
    await addRule({ id: "none", url_pattern: "fmt.example.test/c", method: "GET", inline_body: "plain" });
    expect((await via("http://fmt.example.test/a")).header("content-type")).toBe("application/json");
    const b = await via("http://fmt.example.test/b");
    expect(b.headers.filter(([k]) => k.toLowerCase() === "content-type")).toEqual([["content-type", "application/xml"]]);
    const c = await via("http://fmt.example.test/c");
    expect(c.header("content-type")).toBeUndefined();
    expect(c.body.toString()).toBe("plain");
  });

  test("framing headers in response_headers cannot break the answer: Content-Length is computed, hop-by-hop dropped", async () => {
    await addRule({ id: "framing", url_pattern: "frame.example.test", method: "GET", inline_body: "exact", response_headers: { "Content-Length": "999", "Transfer-Encoding": "chunked", "X-Kept": "k" } });
    const r = await via("http://frame.example.test/", ["--max-time", "10"]);
    expect(r.code).toBe(0);
    expect(r.body.toString()).toBe("exact");
    expect(r.headers.filter(([k]) => k.toLowerCase() === "content-length")).toEqual([["Content-Length", "5"]]);
    expect(r.header("transfer-encoding")).toBeUndefined();
    expect(r.header("x-kept")).toBe("k");
  });

  test("an empty inline body and an unusual status code", async () => {
    await addRule({ id: "empty", url_pattern: "empty.example.test", method: "GET", status_code: 404 });
    const r = await via("http://empty.example.test/whatever");
    expect(r.statusLine).toBe("HTTP/1.1 404 Not Found");
    expect(r.header("content-length")).toBe("0");
    expect(r.body.length).toBe(0);
  });

  test("local_file: the file's bytes, Content-Type guessed from the extension, read anew on every request", async () => {
    const path = join(files, "data.json");
    writeFileSync(path, '{"version":1}');
    await addRule({ id: "file", url_pattern: "files.example.test/data", method: "GET", source: "local_file", file_path: path, response_headers: { "X-From": "file" } });
    const first = await via("http://files.example.test/data");
    expect(first.statusLine).toBe("HTTP/1.1 200 OK");
    expect(first.header("content-type")).toContain("application/json");
    expect(first.header("x-from")).toBe("file");
    expect(first.body.toString()).toBe('{"version":1}');
    writeFileSync(path, '{"version":2,"longer":true}');
    const second = await via("http://files.example.test/data");
    expect(second.body.toString()).toBe('{"version":2,"longer":true}');
    expect(second.header("content-length")).toBe(String('{"version":2,"longer":true}'.length));
  });

  test("local_file over HTTPS: binary bytes exact; inline_format overrides the guess; unknown extension is octet-stream", async () => {
    const bytes = Buffer.alloc(200_000);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7919) & 0xff;
    const blob = join(files, "blob.weird-ext");
    writeFileSync(blob, bytes);
    const typed = join(files, "typed.bin");
    writeFileSync(typed, bytes.subarray(0, 10));
    await addRule({ id: "blob", url_pattern: "https://files.example.test/blob", method: "GET", source: "local_file", file_path: blob });
    await addRule({ id: "typed", url_pattern: "https://files.example.test/typed", method: "GET", source: "local_file", file_path: typed, inline_format: "image/webp" });
    const r = await via("https://files.example.test/blob");
    expect(r.code).toBe(0);
    expect(r.header("content-type")).toBe("application/octet-stream");
    expect(r.body.length).toBe(bytes.length);
    expect(Buffer.compare(r.body, bytes)).toBe(0);
    const t = await via("https://files.example.test/typed");
    expect(t.header("content-type")).toBe("image/webp");
    expect(Buffer.compare(t.body, bytes.subarray(0, 10))).toBe(0);
  });

  test("a missing file: 502 naming the file; the entry records the error and the file", async () => {
    const path = join(files, "does-not-exist.json");
    await addRule({ id: "missing", url_pattern: "files.example.test/missing", method: "GET", source: "local_file", file_path: path });
    const r = await via("http://files.example.test/missing");
    expect(r.status).toBe(502);
    expect(r.body.toString()).toContain(path);
    expect(r.body.toString()).toContain("missing");
    const e = await newestStored();
    expect(e.url).toBe("http://files.example.test/missing");
    expect(e.status_code).toBe(502);
    expect(e.error).toContain(path);
    expect(e.map_local_rule).toBe("missing");
    expect(e.map_local_file).toBe(path);
    expect(String(e.map_local_error)).toContain("ENOENT");
  });

  test("a directory or an over-large file is refused with a 502 saying why", async () => {
    const dir = join(files, "a-directory");
    mkdirSync(dir, { recursive: true });
    const huge = join(files, "huge.bin");
    writeFileSync(huge, "");
    truncateSync(huge, svc.proxyCtx.maxBufferedBody + 1); // sparse: nothing is written or read
    await addRule({ id: "dir", url_pattern: "files.example.test/dir", method: "GET", source: "local_file", file_path: dir });
    await addRule({ id: "huge", url_pattern: "files.example.test/huge", method: "GET", source: "local_file", file_path: huge });
    const d = await via("http://files.example.test/dir");
    expect(d.status).toBe(502);
    expect(d.body.toString()).toContain(dir);
    expect(d.body.toString()).toContain("not a regular file");
    const h = await via("http://files.example.test/huge");
    expect(h.status).toBe(502);
    expect(h.body.toString()).toContain(huge);
    expect(h.body.toString()).toContain(String(svc.proxyCtx.maxBufferedBody + 1));
  });

  test("delay_ms: the answer comes no sooner than the delay, without holding up other requests", async () => {
    await addRule({ id: "slow", url_pattern: "slow.example.test", method: "GET", inline_body: "late", delay_ms: 700 });
    await addRule({ id: "fast", url_pattern: "fast.example.test", method: "GET", inline_body: "now" });
    const order: string[] = [];
    const slow = via("http://slow.example.test/x").then((r) => (order.push("slow"), r));
    const fast = via("http://fast.example.test/x").then((r) => (order.push("fast"), r));
    const [s, f] = await Promise.all([slow, fast]);
    expect(s.body.toString()).toBe("late");
    expect(s.ms).toBeGreaterThanOrEqual(700);
    expect(f.body.toString()).toBe("now");
    expect(order).toEqual(["fast", "slow"]);
    const entry = (await svc.store.get((await get("/api/v1/traffic?limit=5")).json.items.find((i: any) => i.url === "http://slow.example.test/x").id))!;
    expect(entry.duration_ms).toBeGreaterThanOrEqual(700);
  });

  test("delay_ms over HTTPS with a file source", async () => {
    const path = join(files, "delayed.txt");
    writeFileSync(path, "delayed file");
    await addRule({ id: "slowfile", url_pattern: "https://slow.example.test/f", method: "GET", source: "local_file", file_path: path, delay_ms: 300 });
    const r = await via("https://slow.example.test/f");
    expect(r.body.toString()).toBe("delayed file");
    expect(r.header("content-type")).toContain("text/plain");
    expect(r.ms).toBeGreaterThanOrEqual(300);
  });

  test("method: compared case-insensitively; a request with another method goes upstream", async () => {
    await addRule({ id: "post-only", url_pattern: `${up.httpUrl}/echo`, method: "post", inline_body: "mapped post" });
    const before = upstreamCalls();
    const g = await via(`${up.httpUrl}/echo`);
    expect(JSON.parse(g.body.toString()).method).toBe("GET");
    expect(upstreamCalls()).toBe(before + 1);
    const p = await via(`${up.httpUrl}/echo`, ["-d", "a request body that is never read upstream"]);
    expect(p.body.toString()).toBe("mapped post");
    expect(upstreamCalls()).toBe(before + 1);
  });

  test("match_all_methods answers every method, a large request body included", async () => {
    await addRule({ id: "all", url_pattern: `${up.httpUrl}/sink`, match_all_methods: true, method: "GET", inline_body: "all methods" });
    const before = upstreamCalls();
    const bodyFile = join(files, "upload.bin");
    writeFileSync(bodyFile, Buffer.alloc(3 * 1024 * 1024, 1));
    for (const args of [[], ["-X", "DELETE"], ["-X", "PUT", "--data-binary", `@${bodyFile}`]]) {
      const r = await via(`${up.httpUrl}/sink`, args);
      expect(r.code).toBe(0);
      expect(r.body.toString()).toBe("all methods");
    }
    expect(upstreamCalls()).toBe(before);
  });

  test("the master flag off, or the rule disabled, lets requests through to the upstream", async () => {
    await addRule({ id: "echo", url_pattern: `${up.httpUrl}/echo/*`, method: "GET", inline_body: "mapped" });
    expect((await via(`${up.httpUrl}/echo/a`)).body.toString()).toBe("mapped");
    await put("/api/v1/map-local/enabled", { enabled: false });
    expect(JSON.parse((await via(`${up.httpUrl}/echo/a`)).body.toString()).path).toBe("/echo/a");
    await put("/api/v1/map-local/enabled", { enabled: true });
    await post("/api/v1/map-local/rules/echo/toggle");
    expect(JSON.parse((await via(`${up.httpUrl}/echo/a`)).body.toString()).path).toBe("/echo/a");
    await post("/api/v1/map-local/rules/echo/toggle");
    expect((await via(`${up.httpUrl}/echo/a`)).body.toString()).toBe("mapped");
  });

  test("a rule change applies to the very next request (PUT replaces what is served)", async () => {
    await addRule({ id: "live", url_pattern: "live.example.test", method: "GET", inline_body: "v1" });
    expect((await via("http://live.example.test/")).body.toString()).toBe("v1");
    await put("/api/v1/map-local/rules/live", { id: "live", url_pattern: "live.example.test", method: "GET", inline_body: "v2", status_code: 203 });
    const r = await via("http://live.example.test/");
    expect(r.status).toBe(203);
    expect(r.body.toString()).toBe("v2");
  });

  test("the first matching rule in list order wins", async () => {
    await addRule({ id: "first", url_pattern: "order.example.test/**", method: "GET", inline_body: "first" });
    await addRule({ id: "second", url_pattern: "order.example.test/a/b", method: "GET", inline_body: "second" });
    expect((await via("http://order.example.test/a/b")).body.toString()).toBe("first");
  });

  test("served flows are captured with map_local_rule = the rule id", async () => {
    await addRule({ id: "cap", url_pattern: "cap.example.test/x", method: "GET", inline_body: "captured", status_code: 202 });
    await via("http://cap.example.test/x?y=1");
    const e = await newestStored();
    expect(e.url).toBe("http://cap.example.test/x?y=1");
    expect(e.status_code).toBe(202);
    expect(e.map_local_rule).toBe("cap");
    expect(e.has_response).toBe(true);
  });

  // Needs the lead: src/features/traffic/routes.ts builds the detail schema with t.Composite, which drops
  // additionalProperties, so Elysia strips every extra field (map_local_rule, original_url, reason...) from
  // GET /traffic/{id}.
  test("GET /traffic/{id} shows map_local_rule", async () => {
    await addRule({ id: "api-extra", url_pattern: "cap.example.test/api", method: "GET", inline_body: "x" });
    await via("http://cap.example.test/api");
    const id = (await get("/api/v1/traffic?limit=1")).json.items[0].id;
    expect((await get(`/api/v1/traffic/${id}`)).json.map_local_rule).toBe("api-extra");
  });

  // Needs the lead: HttpSession.answerFromAddon (src/core/proxy/http-session.ts) adds the answer's bytes to
  // flow.resBody only after the `response` hooks ran, and capture records in a `response` hook, so every
  // addon-answered entry is stored with an empty res_body and res_body_size 0.
  test("the captured entry holds the served body", async () => {
    await addRule({ id: "cap-body", url_pattern: "cap.example.test/body", method: "GET", inline_body: "the served body" });
    await via("http://cap.example.test/body");
    const e = await newestStored();
    expect(e.res_body).toBe("the served body");
    expect(e.res_body_size).toBe("the served body".length);
  });
});

describe("Map Local addon", () => {
  const flowFor = (url: string, method = "GET") => {
    const u = new URL(url);
    const scheme = u.protocol === "https:" ? "https" : "http";
    return new Flow(
      { addr: "127.0.0.1", port: 1, label: Promise.resolve("test") },
      { method, scheme, host: u.hostname, port: Number(u.port) || (scheme === "https" ? 443 : 80), path: u.pathname + u.search, version: "HTTP/1.1", headers: [["Host", u.host]], body: null },
      1024,
    );
  };

  test("a client that leaves during the delay ends the wait at once, and nothing is answered", async () => {
    const store = new MapLocalStore(join(tempDir("tapwire-map-local-unit-"), "map-local.json"));
    store.create(store.parse({ id: "slow", url_pattern: "a.test", method: "GET", inline_body: "late", delay_ms: 600_000 }));
    const addon = new MapLocalAddon(store, () => 1024);
    const flow = flowFor("http://a.test/x");
    const pending = addon.requestHeaders(flow);
    expect(pending).toBeInstanceOf(Promise);
    expect(flow.response).toBeNull();
    expect(typeof flow.onClientGone).toBe("function");
    flow.onClientGone!();
    await pending;
    expect(flow.response).toBeNull();
    expect(flow.onClientGone).toBeNull();
    expect(flow.extra.map_local_rule).toBe("slow");
  });

  test("without a delay an inline rule answers synchronously; the master flag off answers nothing", () => {
    const store = new MapLocalStore(join(tempDir("tapwire-map-local-unit-"), "map-local.json"));
    store.create(store.parse({ id: "now", url_pattern: "a.test", method: "get", inline_body: "AAEC", inline_format: "binary", status_code: 299 }));
    const addon = new MapLocalAddon(store, () => 1024);
    const flow = flowFor("http://a.test/x");
    expect(addon.requestHeaders(flow)).toBeUndefined();
    expect(flow.response).toEqual({ status: 299, reason: "", version: "HTTP/1.1", headers: [["Content-Type", "application/octet-stream"]], body: new Uint8Array([0, 1, 2]) });
    expect(addon.requestHeaders(flowFor("http://a.test/x", "POST"))).toBeUndefined();
    store.setEnabled(false);
    const off = flowFor("http://a.test/x");
    addon.requestHeaders(off);
    expect(off.response).toBeNull();
    expect(off.extra.map_local_rule).toBeUndefined();
  });
});

describe("Map Local persistence", () => {
  test("rules, their enabled flags and the master flag survive a restart, and still serve", async () => {
    const dataDir = tempDir("tapwire-map-local-restart-");
    let s = await startService({ dataDir });
    const call = (p: string, init: RequestInit = {}) => s.call(p, { ...init, headers: json });
    expect((await call("/api/v1/map-local/rules", { method: "POST", body: JSON.stringify({ id: "keep", url_pattern: "keep.example.test", method: "GET", inline_body: "kept", status_code: 207, response_headers: { "X-K": "1" }, delay_ms: 5 }) })).status).toBe(200);
    expect((await call("/api/v1/map-local/rules", { method: "POST", body: JSON.stringify({ id: "off", url_pattern: "off.example.test", match_all_methods: true }) })).status).toBe(200);
    expect((await call("/api/v1/map-local/rules/off/toggle", { method: "POST" })).status).toBe(200);
    expect((await call("/api/v1/map-local/enabled", { method: "PUT", body: JSON.stringify({ enabled: false }) })).status).toBe(200);
    const before = await (await s.call("/api/v1/map-local")).json();
    await s.stop();

    s = await startService({ dataDir });
    try {
      const after = (await (await s.call("/api/v1/map-local")).json()) as any;
      expect(after).toEqual(before);
      expect(after.enabled).toBe(false);
      expect(after.rules.map((r: any) => [r.id, r.enabled])).toEqual([["keep", true], ["off", false]]);
      expect((await s.call("/api/v1/map-local/enabled", { method: "PUT", headers: json, body: JSON.stringify({ enabled: true }) })).status).toBe(200);
      const r = await curl(["-i", "-x", `http://127.0.0.1:${s.proxyPort}`, "http://keep.example.test/"]);
      expect(r.out).toStartWith("HTTP/1.1 207 Multi-Status\r\n");
      expect(r.out).toContain("X-K: 1\r\n");
      expect(r.out.endsWith("\r\n\r\nkept")).toBe(true);
    } finally {
      await s.stop();
    }
  });
});
