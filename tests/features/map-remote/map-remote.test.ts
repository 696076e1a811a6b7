import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { startService } from "../../helpers/service.ts";
import { tempDir } from "../../helpers/tapwire-process.ts";
import { curl, startUpstream, type SeenRequest, type Upstream } from "../../helpers/upstream.ts";

type Svc = Awaited<ReturnType<typeof startService>>;
let up: Upstream;
let svc: Svc;
let proxy: string;
let caFile: string;
let httpPort: number;
let httpsPort: number;

beforeAll(async () => {
  up = startUpstream();
  svc = await startService({ upstreamCa: [up.caFile] });
  proxy = `http://127.0.0.1:${svc.proxyPort}`;
  caFile = join(svc.config.dataDir, "ca.pem");
  httpPort = up.http.port!;
  httpsPort = up.https.port!;
});
afterAll(async () => {
  await svc.stop();
  up.stop();
});

/** Every test starts with no rules and the master flag on. */
beforeEach(async () => {
  const snap = (await (await svc.call("/api/v1/map-remote")).json()) as { rules: { id: string }[] };
  for (const r of snap.rules) expect((await svc.call(`/api/v1/map-remote/rules/${encodeURIComponent(r.id)}`, { method: "DELETE" })).status).toBe(204);
  await put("/api/v1/map-remote/enabled", { enabled: true });
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
  const r = await post("/api/v1/map-remote/rules", rule);
  expect(r.status).toBe(200);
  return r.json;
}

/** A complete rule sending http://legacy.example.test/old/* to the HTTP upstream's /echo/new/$1. */
const rule = (over: Record<string, unknown> = {}) => ({
  id: "r",
  source_scheme: "http",
  source_host: "legacy.example.test",
  source_path: "/old/*",
  method: "GET",
  dest_scheme: "http",
  dest_host: "127.0.0.1",
  dest_port: httpPort,
  dest_path: "/echo/new/$1",
  ...over,
});

/** curl through the proxy (HTTPS with the tapwire CA); returns the exit code and the body. */
async function via(url: string, extra: string[] = []) {
  return curl(["-x", proxy, "--cacert", caFile, ...extra, url]);
}

/** The one upstream request a step caused. */
async function upstreamSaw(step: () => Promise<unknown>): Promise<SeenRequest & { path: string; host: string | undefined }> {
  const before = up.seen.length;
  await step();
  expect(up.seen.length).toBe(before + 1);
  const s = up.seen[up.seen.length - 1]!;
  const u = new URL(s.url);
  return { ...s, path: u.pathname + u.search, host: s.headers.find(([k]) => k === "host")?.[1] };
}

async function newestStored(): Promise<Record<string, any>> {
  const list = (await get("/api/v1/traffic?limit=1")).json;
  return svc.store.get(list.items[0].id) as unknown as Record<string, any>;
}

describe("Map Remote API", () => {
  test("GET snapshot: the master flag (on by default) and every rule", async () => {
    expect(await get("/api/v1/map-remote")).toEqual({ status: 200, json: { enabled: true, rules: [] } });
    await addRule(rule({ id: "a" }));
    await addRule(rule({ id: "b" }));
    expect((await get("/api/v1/map-remote")).json.rules.map((r: { id: string }) => r.id)).toEqual(["a", "b"]);
  });

  test("POST /rules answers the persisted rule with the spec's defaults filled", async () => {
    const r = await post("/api/v1/map-remote/rules", {
      id: "min",
      source_scheme: "https",
      source_host: "api.example.test",
      source_path: "/v1/*",
      match_all_methods: true,
      dest_scheme: "http",
      dest_host: "localhost",
      dest_path: "/v2/$1",
      unknown_field: true,
    });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({
      id: "min",
      enabled: true,
      source_scheme: "https",
      source_host: "api.example.test",
      source_port: null,
      source_path: "/v1/*",
      method: "",
      match_all_methods: true,
      dest_scheme: "http",
      dest_host: "localhost",
      dest_port: null,
      dest_path: "/v2/$1",
      preserve_original_host_header: false,
    });
    expect((await get("/api/v1/map-remote")).json.rules).toEqual([r.json]);
    expect(JSON.parse(readFileSync(join(svc.config.dataDir, "map-remote.json"), "utf8")).rules).toEqual([r.json]);
  });

  test("schemes are accepted in any case and stored lower-case", async () => {
    const r = await addRule(rule({ source_scheme: "HTTP", dest_scheme: "Https" }));
    expect(r.source_scheme).toBe("http");
    expect(r.dest_scheme).toBe("https");
  });

  test("POST /rules with an existing id is 409 and leaves the rule alone", async () => {
    await addRule(rule({ id: "dup" }));
    const r = await post("/api/v1/map-remote/rules", rule({ id: "dup", dest_host: "elsewhere.test" }));
    expect(r.status).toBe(409);
    expect(r.json.error.code).toBe("conflict");
    expect((await get("/api/v1/map-remote")).json.rules.map((x: any) => x.dest_host)).toEqual(["127.0.0.1"]);
  });

  const invalid: [string, Record<string, unknown>, string][] = [
    ["no id", { ...rule(), id: undefined }, "id"],
    ["an unknown source_scheme", rule({ source_scheme: "ftp" }), "source_scheme"],
    ["no source_scheme", rule({ source_scheme: undefined }), "source_scheme"],
    ["a dest_scheme that is not a string", rule({ dest_scheme: 1 }), "dest_scheme"],
    ["no source_host", rule({ source_host: undefined }), "source_host"],
    ["a source_host with a port", rule({ source_host: "legacy.example.test:8080" }), "source_host"],
    ["a source_host with a scheme", rule({ source_host: "http://legacy.example.test" }), "source_host"],
    ["a dest_host with a path", rule({ dest_host: "127.0.0.1/x" }), "dest_host"],
    ["an empty dest_host", rule({ dest_host: "" }), "dest_host"],
    ["a source_port of 0", rule({ source_port: 0 }), "source_port"],
    ["a dest_port above 65535", rule({ dest_port: 70000 }), "dest_port"],
    ["a dest_port given as a string", rule({ dest_port: "8080" }), "dest_port"],
    ["no source_path", rule({ source_path: undefined }), "source_path"],
    ["a source_path without a leading /", rule({ source_path: "old/*" }), "source_path"],
    ["a source_path with a query", rule({ source_path: "/old/*?x=1" }), "source_path"],
    ["no dest_path", rule({ dest_path: undefined }), "dest_path"],
    ["a dest_path with a space", rule({ dest_path: "/a b" }), "dest_path"],
    ["no method while match_all_methods is false", rule({ method: undefined }), "method"],
    ["a method that is not a token", rule({ method: "G ET" }), "method"],
    ["a non-boolean preserve_original_host_header", rule({ preserve_original_host_header: "yes" }), "preserve_original_host_header"],
    ["a non-boolean enabled", rule({ enabled: "true" }), "enabled"],
  ];
  for (const [what, body, field] of invalid) {
    test(`POST /rules with ${what} is 400 naming '${field}'`, async () => {
      const r = await post("/api/v1/map-remote/rules", body);
      expect(r.status).toBe(400);
      expect(r.json.error.code).toBe("bad_request");
      expect(r.json.error.message).toContain(`'${field}'`);
      expect((await get("/api/v1/map-remote")).json.rules).toEqual([]);
    });
  }

  test("PUT /rules/{id} replaces the rule (200, the new rule); unknown id 404; invalid body 400", async () => {
    await addRule(rule({ id: "r1" }));
    const ok = await put("/api/v1/map-remote/rules/r1", rule({ id: "r1", dest_path: "/echo/replaced/$1", preserve_original_host_header: true }));
    expect(ok.status).toBe(200);
    expect(ok.json).toMatchObject({ id: "r1", dest_path: "/echo/replaced/$1", preserve_original_host_header: true, enabled: true });
    expect((await get("/api/v1/map-remote")).json.rules).toEqual([ok.json]);
    const missing = await put("/api/v1/map-remote/rules/nope", rule({ id: "nope" }));
    expect(missing.status).toBe(404);
    expect(missing.json.error.code).toBe("not_found");
    const bad = await put("/api/v1/map-remote/rules/r1", rule({ id: "r1", dest_scheme: "gopher" }));
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toContain("'dest_scheme'");
    expect((await put("/api/v1/map-remote/rules/r1", rule({ id: "r2" }))).status).toBe(400);
    expect((await get("/api/v1/map-remote")).json.rules).toEqual([ok.json]);
  });

  test("DELETE /rules/{id} is 204 with an empty body; then 404", async () => {
    await addRule(rule({ id: "gone" }));
    const r = await svc.call("/api/v1/map-remote/rules/gone", { method: "DELETE" });
    expect(r.status).toBe(204);
    expect(await r.text()).toBe("");
    expect((await svc.call("/api/v1/map-remote/rules/gone", { method: "DELETE" })).status).toBe(404);
  });

  test("POST /rules/{id}/toggle answers the updated rule; unknown id 404", async () => {
    await addRule(rule({ id: "tg" }));
    const off = await post("/api/v1/map-remote/rules/tg/toggle");
    expect(off.status).toBe(200);
    expect(off.json).toMatchObject({ id: "tg", enabled: false, dest_host: "127.0.0.1" });
    expect((await post("/api/v1/map-remote/rules/tg/toggle")).json.enabled).toBe(true);
    expect((await post("/api/v1/map-remote/rules/nope/toggle")).status).toBe(404);
  });

  test("PUT /enabled sets the master flag and answers {enabled}; invalid body 400", async () => {
    expect(await put("/api/v1/map-remote/enabled", { enabled: false })).toEqual({ status: 200, json: { enabled: false } });
    expect((await get("/api/v1/map-remote")).json.enabled).toBe(false);
    expect((await put("/api/v1/map-remote/enabled", { on: true })).status).toBe(400);
    expect(await put("/api/v1/map-remote/enabled", { enabled: true })).toEqual({ status: 200, json: { enabled: true } });
  });

  describe("GET /match", () => {
    const match = (q: Record<string, string>) => get(`/api/v1/map-remote/match?${new URLSearchParams(q)}`);

    test("answers the rule and the rewritten URL: captures substituted, query kept, default ports omitted", async () => {
      const r = await addRule({
        id: "caps",
        source_scheme: "https",
        source_host: "api.example.test",
        source_path: "/v1/*/items/*",
        match_all_methods: true,
        dest_scheme: "http",
        dest_host: "Backend.Internal",
        dest_port: 8080,
        dest_path: "/api/$2/of/$1",
      });
      expect(await match({ method: "GET", url: "https://api.example.test/v1/users/items/42?full=1&x=y" })).toEqual({
        status: 200,
        json: { matched: true, rule: r, url: "http://backend.internal:8080/api/42/of/users?full=1&x=y" },
      });
      expect((await match({ url: "https://API.example.test:443/v1/a/b/items/c/d" })).json.url).toBe("http://backend.internal:8080/api/c/d/of/a/b");
    });

    test("no match: {matched: false, rule: null, url: null}", async () => {
      await addRule(rule());
      for (const url of [
        "https://legacy.example.test/old/x", // scheme differs
        "http://legacy.example.test:8080/old/x", // port differs (null = 80)
        "http://other.example.test/old/x", // host differs
        "http://legacy.example.test/older/x", // path differs
      ]) {
        expect(await match({ method: "GET", url })).toEqual({ status: 200, json: { matched: false, rule: null, url: null } });
      }
    });

    test("source_port, dest defaults per scheme, host case-insensitive, method case-insensitive", async () => {
      await addRule(rule({ id: "port", source_host: "Legacy.Example.Test", source_port: 8080, method: "post", dest_scheme: "https", dest_host: "secure.test", dest_port: null, dest_path: "/p/$1" }));
      expect((await match({ method: "POST", url: "http://legacy.example.test:8080/old/z" })).json.url).toBe("https://secure.test/p/z");
      expect((await match({ method: "post", url: "http://LEGACY.example.test:8080/old/z" })).json.matched).toBe(true);
      expect((await match({ method: "GET", url: "http://legacy.example.test:8080/old/z" })).json.matched).toBe(false);
      expect((await match({ method: "POST", url: "http://legacy.example.test/old/z" })).json.matched).toBe(false);
    });

    test("method defaults to GET; match_all_methods ignores it; disabled rules never match; master flag not consulted", async () => {
      await addRule(rule({ id: "get" }));
      expect((await match({ url: "http://legacy.example.test/old/1" })).json.rule.id).toBe("get");
      await addRule(rule({ id: "all", source_path: "/all/*", method: "PUT", match_all_methods: true }));
      expect((await match({ method: "DELETE", url: "http://legacy.example.test/all/1" })).json.rule.id).toBe("all");
      await post("/api/v1/map-remote/rules/get/toggle");
      expect((await match({ url: "http://legacy.example.test/old/1" })).json.matched).toBe(false);
      await put("/api/v1/map-remote/enabled", { enabled: false });
      expect((await match({ method: "DELETE", url: "http://legacy.example.test/all/1" })).json.matched).toBe(true);
    });

    test("a dest_path with its own query gets the request's query appended; $$ and ${N} substitutions", async () => {
      await addRule(rule({ id: "q", source_path: "/s/*", dest_path: "/t/${1}0?fixed=$$1" }));
      expect((await match({ url: "http://legacy.example.test/s/a?b=c" })).json.url).toBe(`http://127.0.0.1:${httpPort}/t/a0?fixed=$1&b=c`);
      expect((await match({ url: "http://legacy.example.test/s/a" })).json.url).toBe(`http://127.0.0.1:${httpPort}/t/a0?fixed=$1`);
    });

    test("IPv6 hosts: brackets optional in the rule, kept in the rewritten URL", async () => {
      await addRule(rule({ id: "v6", source_host: "[::1]", source_port: 8080, dest_host: "::2", dest_port: 9090 }));
      expect((await match({ url: "http://[::1]:8080/old/z?q" })).json.url).toBe("http://[::2]:9090/echo/new/z?q");
    });

    test("a missing or non-absolute url is 400", async () => {
      for (const q of [{}, { url: "" }, { url: "legacy.example.test/old/x" }, { url: "mailto:x@y.z" }]) {
        const r = await match(q as Record<string, string>);
        expect(r.status).toBe(400);
        expect(r.json.error.message).toContain("url");
      }
    });
  });
});

describe("Map Remote through the proxy", () => {
  test("HTTP → HTTP: path rewritten with captures, query kept, Host follows the destination", async () => {
    await addRule(rule({ source_path: "/old/*/x/*", dest_path: "/echo/$2/$1" }));
    let out = "";
    const seen = await upstreamSaw(async () => {
      const r = await via("http://legacy.example.test/old/a/x/b/c?k=v&k2=v2");
      expect(r.code).toBe(0);
      out = r.out;
    });
    expect(seen.path).toBe("/echo/b/c/a?k=v&k2=v2");
    expect(seen.host).toBe(`127.0.0.1:${httpPort}`);
    expect(JSON.parse(out).path).toBe("/echo/b/c/a?k=v&k2=v2");
    const e = await newestStored();
    expect(e.url).toBe(`http://127.0.0.1:${httpPort}/echo/b/c/a?k=v&k2=v2`);
    expect(e.original_url).toBe("http://legacy.example.test/old/a/x/b/c?k=v&k2=v2");
    expect(e.map_remote_rule).toBe("r");
    expect(e.status_code).toBe(200);
  });

  test("preserve_original_host_header keeps the client's Host", async () => {
    await addRule(rule({ preserve_original_host_header: true }));
    const seen = await upstreamSaw(() => via("http://legacy.example.test/old/p?z=1"));
    expect(seen.path).toBe("/echo/new/p?z=1");
    expect(seen.host).toBe("legacy.example.test");
  });

  test("HTTPS → HTTPS (intercepted, curl --cacert): rewritten to the TLS upstream; Host follows", async () => {
    await addRule(rule({ source_scheme: "https", source_host: "secure.example.test", source_path: "/api/*/users", dest_scheme: "https", dest_host: "localhost", dest_port: httpsPort, dest_path: "/echo/users/$1" }));
    const seen = await upstreamSaw(async () => {
      const r = await via("https://secure.example.test/api/v2/users?id=7");
      expect(r.code).toBe(0);
      expect(JSON.parse(r.out).path).toBe("/echo/users/v2?id=7");
    });
    expect(seen.path).toBe("/echo/users/v2?id=7");
    expect(seen.host).toBe(`localhost:${httpsPort}`);
    const e = await newestStored();
    expect(e.url).toBe(`https://localhost:${httpsPort}/echo/users/v2?id=7`);
    expect(e.original_url).toBe("https://secure.example.test/api/v2/users?id=7");
  });

  test("HTTPS → HTTP: an intercepted request goes to a plain-HTTP upstream, original Host preserved", async () => {
    await addRule(rule({ source_scheme: "https", source_host: "secure.example.test", source_path: "/*", dest_scheme: "http", dest_host: "127.0.0.1", dest_port: httpPort, dest_path: "/echo/plain$1", preserve_original_host_header: true }));
    const seen = await upstreamSaw(async () => {
      const r = await via("https://secure.example.test/some/where?q=%20x");
      expect(r.code).toBe(0);
    });
    expect(seen.path).toBe("/echo/plainsome/where?q=%20x");
    expect(seen.host).toBe("secure.example.test");
    expect((await newestStored()).url).toBe(`http://127.0.0.1:${httpPort}/echo/plainsome/where?q=%20x`);
  });

  test("HTTP → HTTPS: a plain request is sent upstream over TLS", async () => {
    await addRule(rule({ source_host: "plain.example.test", source_path: "/*", dest_scheme: "https", dest_host: "localhost", dest_port: httpsPort, dest_path: "/echo/tls/$1" }));
    const seen = await upstreamSaw(async () => {
      const r = await via("http://plain.example.test/x/y?z");
      expect(r.code).toBe(0);
      expect(JSON.parse(r.out).path).toBe("/echo/tls/x/y?z");
    });
    expect(new URL(seen.url).protocol).toBe("https:");
    expect(seen.url.startsWith(`https://localhost:${httpsPort}/`)).toBe(true);
    expect(seen.host).toBe(`localhost:${httpsPort}`);
  });

  test("the request body and method go to the new destination; other methods are not rewritten", async () => {
    await addRule(rule({ source_host: "127.0.0.1", source_port: httpPort, source_path: "/echo/src", method: "post", dest_path: "/echo/dst" }));
    const posted = await upstreamSaw(async () => {
      const r = await via(`http://127.0.0.1:${httpPort}/echo/src`, ["-d", "payload=1"]);
      expect(JSON.parse(r.out)).toMatchObject({ method: "POST", path: "/echo/dst", body: "payload=1" });
    });
    expect(posted.path).toBe("/echo/dst");
    expect(new TextDecoder().decode(posted.body)).toBe("payload=1");
    const got = await upstreamSaw(() => via(`http://127.0.0.1:${httpPort}/echo/src`));
    expect(got.path).toBe("/echo/src");
  });

  test("source_port null means the scheme's default: a request on another port is not rewritten", async () => {
    await addRule(rule({ id: "default-port", source_host: "127.0.0.1", source_port: null, source_path: "/echo/*", dest_path: "/echo/rewritten" }));
    const seen = await upstreamSaw(() => via(`http://127.0.0.1:${httpPort}/echo/orig`));
    expect(seen.path).toBe("/echo/orig");
    await addRule(rule({ id: "named-port", source_host: "127.0.0.1", source_port: httpPort, source_path: "/echo/*", dest_path: "/echo/rewritten" }));
    const again = await upstreamSaw(() => via(`http://127.0.0.1:${httpPort}/echo/orig`));
    expect(again.path).toBe("/echo/rewritten");
  });

  test("the master flag off, or the rule disabled, leaves requests alone", async () => {
    await addRule(rule({ id: "sw", source_host: "127.0.0.1", source_port: httpPort, source_path: "/echo/*", dest_path: "/echo/mapped" }));
    const path = async () => (await upstreamSaw(() => via(`http://127.0.0.1:${httpPort}/echo/raw`))).path;
    expect(await path()).toBe("/echo/mapped");
    await put("/api/v1/map-remote/enabled", { enabled: false });
    expect(await path()).toBe("/echo/raw");
    await put("/api/v1/map-remote/enabled", { enabled: true });
    await post("/api/v1/map-remote/rules/sw/toggle");
    expect(await path()).toBe("/echo/raw");
    await post("/api/v1/map-remote/rules/sw/toggle");
    expect(await path()).toBe("/echo/mapped");
  });

  test("several requests on one kept-alive connection are each rewritten", async () => {
    await addRule(rule({ source_path: "/ka/*", dest_path: "/echo/ka/$1" }));
    const before = up.seen.length;
    const w = ["-o", "/dev/null", "-w", "%{num_connects} "];
    const r = await curl(["-x", proxy, ...w, "http://legacy.example.test/ka/1", "--next", "-x", proxy, ...w, "http://legacy.example.test/ka/2?two"]);
    expect(r.code).toBe(0);
    expect(r.out.trim()).toBe("1 0"); // the second request reused the connection
    const paths = up.seen.slice(before).map((s) => new URL(s.url).pathname + new URL(s.url).search);
    expect(paths).toEqual(["/echo/ka/1", "/echo/ka/2?two"]);
  });

  test("inside one HTTPS tunnel, a rewritten request does not redirect the next, unmatched one", async () => {
    await addRule(rule({ source_scheme: "https", source_host: "localhost", source_port: httpsPort, source_path: "/echo/moved/*", dest_scheme: "http", dest_host: "127.0.0.1", dest_port: httpPort, dest_path: "/echo/plain/$1" }));
    const before = up.seen.length;
    const w = ["-o", "/dev/null", "-w", "%{num_connects} "];
    const tls = ["-x", proxy, "--cacert", caFile, ...w];
    const r = await curl([...tls, `https://localhost:${httpsPort}/echo/moved/1`, "--next", ...tls, `https://localhost:${httpsPort}/echo/stays`]);
    expect(r.code).toBe(0);
    expect(r.out.trim()).toBe("1 0");
    const seen = up.seen.slice(before).map((s) => s.url);
    expect(seen).toEqual([`http://127.0.0.1:${httpPort}/echo/plain/1`, `https://localhost:${httpsPort}/echo/stays`]);
  });

  // Needs the lead: src/features/traffic/routes.ts builds the detail schema with t.Composite, which drops
  // additionalProperties, so Elysia strips every extra field (map_remote_rule, original_url...) from GET /traffic/{id}.
  test("GET /traffic/{id} shows map_remote_rule and original_url", async () => {
    await addRule(rule({ id: "api-extra" }));
    await via("http://legacy.example.test/old/api");
    const id = (await get("/api/v1/traffic?limit=1")).json.items[0].id;
    const d = (await get(`/api/v1/traffic/${id}`)).json;
    expect(d.url).toBe(`http://127.0.0.1:${httpPort}/echo/new/api`);
    expect(d.map_remote_rule).toBe("api-extra");
    expect(d.original_url).toBe("http://legacy.example.test/old/api");
  });
});

describe("Map Remote persistence", () => {
  test("rules, their enabled flags and the master flag survive a restart, and still rewrite", async () => {
    const dataDir = tempDir("tapwire-map-remote-restart-");
    let s = await startService({ dataDir });
    const call = (p: string, init: RequestInit = {}) => s.call(p, { ...init, headers: json });
    expect((await call("/api/v1/map-remote/rules", { method: "POST", body: JSON.stringify(rule({ id: "keep", source_path: "/keep/*", dest_path: "/echo/kept/$1" })) })).status).toBe(200);
    expect((await call("/api/v1/map-remote/rules", { method: "POST", body: JSON.stringify(rule({ id: "off", source_port: 81 })) })).status).toBe(200);
    expect((await call("/api/v1/map-remote/rules/off/toggle", { method: "POST" })).status).toBe(200);
    expect((await call("/api/v1/map-remote/enabled", { method: "PUT", body: JSON.stringify({ enabled: false }) })).status).toBe(200);
    const before = await (await s.call("/api/v1/map-remote")).json();
    await s.stop();

    s = await startService({ dataDir });
    try {
      const after = (await (await s.call("/api/v1/map-remote")).json()) as any;
      expect(after).toEqual(before);
      expect(after.enabled).toBe(false);
      expect(after.rules.map((r: any) => [r.id, r.enabled])).toEqual([["keep", true], ["off", false]]);
      expect((await s.call("/api/v1/map-remote/enabled", { method: "PUT", headers: json, body: JSON.stringify({ enabled: true }) })).status).toBe(200);
      const seen = await upstreamSaw(() => curl(["-x", `http://127.0.0.1:${s.proxyPort}`, "http://legacy.example.test/keep/it?q=1"]));
      expect(seen.path).toBe("/echo/kept/it?q=1");
    } finally {
      await s.stop();
    }
  });
});
