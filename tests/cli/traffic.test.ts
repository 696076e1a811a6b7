/** `tapwire traffic`, `api`, `status`, `stop` and `ca` end to end with the compiled binary. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { X509Certificate } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { RunningTapwire } from "../helpers/tapwire-process.ts";
import { tempDirs } from "../helpers/temp-dirs.ts";
import { curl, startUpstream, type Upstream } from "../helpers/upstream.ts";
import { spawnTw, startBinary, tw } from "./cli-helpers.ts";

const temp = tempDirs("tapwire-cli-traffic-");
let up: Upstream;
let t: RunningTapwire;
let dd: string[];

beforeAll(async () => {
  up = startUpstream();
  t = await startBinary(["--upstream-ca", up.caFile], temp());
  dd = ["--data-dir", t.dataDir];
});

afterAll(async () => {
  await t?.stop();
  up?.stop();
});

/** A request through the proxy, trusting tapwire's CA. */
function through(url: string, ...args: string[]) {
  return curl(["-x", `http://127.0.0.1:${t.handshake.proxy_port}`, "--cacert", join(t.dataDir, "ca.pem"), ...args, url]);
}

describe("traffic list, show, export, clear", () => {
  let ids: number[] = [];
  beforeAll(async () => {
    expect((await through(`${up.httpsUrl}/echo/list-a?q=1`)).code).toBe(0);
    expect((await through(`${up.httpsUrl}/status/500`)).code).toBe(0);
    expect((await through(`${up.httpUrl}/echo/list-b`, "--data", "posted-body")).code).toBe(0);
    const r: any = await (await t.api("/api/v1/traffic?limit=3")).json();
    ids = r.items.map((e: any) => e.id).reverse();
  });

  test("list: JSON (GET /traffic's answer), tab-separated lines, filters", async () => {
    const json = await tw(["traffic", "list", ...dd, "--json", "--limit", "2"]);
    expect(json.code).toBe(0);
    const r = JSON.parse(json.out);
    expect(r.limit).toBe(2);
    expect(r.items.map((e: any) => e.id)).toEqual([ids[2], ids[1]]);

    const tsv = await tw(["traffic", "list", ...dd, "--host", "127.0.0.1", "--method", "post"]);
    expect(tsv.code).toBe(0);
    const fields = tsv.out.trim().split("\n").map((l) => l.split("\t"));
    expect(fields.map((f) => [Number(f[0]), f[2], f[3], f[6]])).toEqual([[ids[2], "POST", "200", `${up.httpUrl}/echo/list-b`]]);

    const errors = await tw(["traffic", "list", ...dd, "--status", "5xx", "--json"]);
    expect(JSON.parse(errors.out).items.map((e: any) => e.status_code)).toEqual([500]);
    const search = await tw(["traffic", "list", ...dd, "--search", "posted-body", "--json"]);
    expect(JSON.parse(search.out).items.map((e: any) => e.id)).toEqual([ids[2]]);
    const since = await tw(["traffic", "list", ...dd, "--since-id", String(ids[0]), "--json"]);
    expect(JSON.parse(since.out).items.map((e: any) => e.id)).toEqual([ids[1], ids[2]]);
  });

  test("show: readable, and --json", async () => {
    const r = await tw(["traffic", "show", String(ids[2]), ...dd]);
    expect(r.code).toBe(0);
    expect(r.out).toContain(`#${ids[2]}  POST ${up.httpUrl}/echo/list-b`);
    expect(r.out).toContain("> POST /echo/list-b HTTP/1.1");
    expect(r.out).toContain("posted-body");
    expect(r.out).toContain("< HTTP/1.1 200 OK");
    const j = await tw(["traffic", "show", String(ids[2]), ...dd, "--json"]);
    expect(JSON.parse(j.out).req_body).toBe("posted-body");
    const missing = await tw(["traffic", "show", "999999", ...dd]);
    expect(missing.code).toBe(1);
    expect(missing.err).toContain("no traffic entry 999999");
  });

  test("export: curl, raw, json, har, --out", async () => {
    const c = await tw(["traffic", "export", String(ids[2]), ...dd]);
    expect(c.out).toStartWith("curl ");
    expect(c.out).toContain(`${up.httpUrl}/echo/list-b`);
    const raw = await tw(["traffic", "export", String(ids[2]), "--format", "raw", ...dd]);
    expect(raw.out).toStartWith("POST /echo/list-b HTTP/1.1");
    const json = await tw(["traffic", "export", String(ids[0]), "--format", "json", ...dd]);
    expect(JSON.parse(json.out).url).toBe(`${up.httpsUrl}/echo/list-a?q=1`);
    const out = join(temp(), "one.har");
    const har = await tw(["traffic", "export", String(ids[1]), "--format", "har", "--out", out, ...dd]);
    expect(har.code).toBe(0);
    const log = JSON.parse(readFileSync(out, "utf8")).log;
    expect(log.entries.map((e: any) => [e.request.url, e.response.status])).toEqual([[`${up.httpsUrl}/status/500`, 500]]);
    const bad = await tw(["traffic", "export", String(ids[1]), "--format", "xml", ...dd]);
    expect(bad.code).toBe(2);
  });

  test("clear deletes everything", async () => {
    const c = await tw(["traffic", "clear", ...dd]);
    expect(c.code).toBe(0);
    const r = await tw(["traffic", "list", ...dd, "--json"]);
    expect(JSON.parse(r.out).total).toBe(0);
  });
});

describe("traffic wait", () => {
  test("returns as soon as the matching traffic arrives", async () => {
    const w = await spawnTw(["traffic", "wait", ...dd, "--new", "--host", "localhost", "--path", "/echo/wait/**", "--timeout", "30s", "--json"]);
    expect(await w.waitErr((l) => l.includes("waiting up to 30s"))).not.toBeNull();
    // non-matching traffic first: it keeps waiting
    expect((await through(`${up.httpsUrl}/echo/other`)).code).toBe(0);
    expect((await through(`${up.httpUrl}/echo/wait/x`)).code).toBe(0); // host 127.0.0.1: no match
    expect((await through(`${up.httpsUrl}/echo/wait/deep/er?x=1`)).code).toBe(0);
    const sent = Date.now();
    const code = await w.proc.exited;
    const took = Date.now() - sent;
    expect(code).toBe(0);
    expect(took).toBeLessThan(2000);
    const found = JSON.parse(await w.stdout);
    expect(found.map((e: any) => e.url)).toEqual([`${up.httpsUrl}/echo/wait/deep/er?x=1`]);
  });

  test("counts what was captured before it started, unless --new; --count N", async () => {
    expect((await through(`${up.httpsUrl}/echo/counted`)).code).toBe(0);
    expect((await through(`${up.httpsUrl}/echo/counted`)).code).toBe(0);
    const r = await tw(["traffic", "wait", ...dd, "--path", "/echo/counted", "--count", "2", "--timeout", "5s"]);
    expect(r.code).toBe(0);
    expect(r.out.trim().split("\n")).toHaveLength(2);
  });

  test("times out with exit 1, printing what it found", async () => {
    expect((await through(`${up.httpsUrl}/status/201`)).code).toBe(0);
    const started = Date.now();
    const r = await tw(["traffic", "wait", ...dd, "--path", "/status/*", "--status", "201", "--count", "2", "--timeout", "800ms"]);
    const took = Date.now() - started;
    expect(r.code).toBe(1);
    expect(took).toBeGreaterThanOrEqual(800);
    expect(took).toBeLessThan(5000);
    expect(r.err).toContain("timed out after 800ms: 1 of 2 matching entries captured");
    expect(r.out).toContain(`${up.httpsUrl}/status/201`);
    const none = await tw(["traffic", "wait", ...dd, "--new", "--host", "never.example", "--timeout", "300ms"]);
    expect(none.code).toBe(1);
    expect(none.out).toBe("");
  });
});

describe("api", () => {
  test("GET prints the body; a relative or an /api/v1 path", async () => {
    const r = await tw(["api", "GET", "/health", ...dd]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toMatchObject({ status: "ok", pid: t.handshake.pid });
    const abs = await tw(["api", "/api/v1/capture/status", ...dd]);
    expect(JSON.parse(abs.out)).toMatchObject({ capturing: true });
  });

  test("POST with -d JSON, PUT with -d @file and -d @-, then GET round-trips", async () => {
    const rule = { id: "cli-rule", url_pattern: "https://cli.test/*", method: "GET", inline_body: "from the cli", inline_format: "text" };
    const post = await tw(["api", "POST", "/map-local/rules", "-d", JSON.stringify(rule), ...dd]);
    expect(post.code).toBe(0);
    expect(JSON.parse(post.out)).toMatchObject(rule);

    const file = join(temp(), "rule.json");
    writeFileSync(file, JSON.stringify({ ...rule, inline_body: "from a file" }));
    const put = await tw(["api", "PUT", "/map-local/rules/cli-rule", "-d", `@${file}`, ...dd]);
    expect(put.code).toBe(0);
    expect(JSON.parse(put.out).inline_body).toBe("from a file");

    const stdin = await tw(["api", "PUT", "/map-local/enabled", "-d", "@-", ...dd], { stdin: '{"enabled": false}' });
    expect(stdin.code).toBe(0);
    expect(JSON.parse(stdin.out)).toEqual({ enabled: false });

    const get = await tw(["api", "GET", "/map-local", ...dd]);
    const state = JSON.parse(get.out);
    expect(state.enabled).toBe(false);
    expect(state.rules.map((x: any) => [x.id, x.inline_body])).toEqual([["cli-rule", "from a file"]]);

    const del = await tw(["api", "DELETE", "/map-local/rules/cli-rule", "-i", ...dd]);
    expect(del.code).toBe(0);
    expect(del.out).toStartWith("HTTP 204\n");
  });

  test("HTTP >= 400: the error body on stderr, exit 1", async () => {
    const r = await tw(["api", "POST", "/map-local/rules", "-d", '{"id": ""}', ...dd]);
    expect(r.code).toBe(1);
    expect(r.out).toBe("");
    expect(JSON.parse(r.err.split("\n")[0]!).error.code).toBe("bad_request");
    expect(r.err).toContain("answered 400");
    const missing = await tw(["api", "GET", "/no/such/route", ...dd]);
    expect(missing.code).toBe(1);
  });

  test("usage mistakes exit 2", async () => {
    expect((await tw(["api", ...dd])).code).toBe(2);
    expect((await tw(["api", "GE T", "/x", ...dd])).code).toBe(2);
    expect((await tw(["api", "GET", "/x", "-H", "no-colon", ...dd])).code).toBe(2);
    expect((await tw(["api", "POST", "/x", "-d", "@/no/such/file", ...dd])).code).toBe(2);
  });
});

describe("ca", () => {
  test("path, show, export pem and der", async () => {
    const p = await tw(["ca", "path", ...dd]);
    expect(p.out.trim()).toBe(join(t.dataDir, "ca.pem"));
    const b = await tw(["ca", "path", "--bundle", ...dd]);
    expect(b.out.trim()).toBe(join(t.dataDir, "ca-bundle.pem"));
    const pem = readFileSync(join(t.dataDir, "ca.pem"), "utf8");
    const cert = new X509Certificate(pem);
    const show = await tw(["ca", "show", "--json", ...dd]);
    expect(JSON.parse(show.out)).toMatchObject({ path: join(t.dataDir, "ca.pem"), sha256_fingerprint: cert.fingerprint256 });
    expect((await tw(["ca", "export", ...dd])).out).toBe(pem);
    const der = join(temp(), "ca.der");
    expect((await tw(["ca", "export", "--format", "der", "--out", der, ...dd])).code).toBe(0);
    expect(new Uint8Array(readFileSync(der))).toEqual(new Uint8Array(cert.raw));
  });

  test("a data directory without a CA gets one (no running tapwire needed)", async () => {
    const dir = temp();
    const r = await tw(["ca", "path", "--data-dir", dir]);
    expect(r.code).toBe(0);
    expect(r.err).toContain("generated a new CA");
    expect(existsSync(join(dir, "ca.pem"))).toBe(true);
    expect(existsSync(join(dir, "ca-key.pem"))).toBe(true);
  });
});

describe("status and stop", () => {
  test("status: running (text and --json); not running: exit 1", async () => {
    const r = await tw(["status", ...dd]);
    expect(r.code).toBe(0);
    expect(r.out).toContain(`is running (pid ${t.handshake.pid}`);
    expect(r.out).toContain(`proxy         127.0.0.1:${t.handshake.proxy_port}`);
    const j = JSON.parse((await tw(["status", ...dd, "--json"])).out);
    expect(j).toMatchObject({ running: true, data_dir: t.dataDir, pid: t.handshake.pid, proxy_port: t.handshake.proxy_port, api_port: t.handshake.port });
    const dir = temp();
    const not = await tw(["status", "--data-dir", dir, "--json"]);
    expect(not.code).toBe(1);
    expect(JSON.parse(not.out)).toMatchObject({ running: false, data_dir: dir });
  });

  test("status --wait waits for a tapwire that is starting", async () => {
    const dir = temp();
    const waiting = tw(["status", "--data-dir", dir, "--wait", "20s", "--json"]);
    const s = await startBinary([], dir);
    try {
      const r = await waiting;
      expect(r.code).toBe(0);
      expect(JSON.parse(r.out).pid).toBe(s.proc.pid);
    } finally {
      await s.stop();
    }
  });

  test("stop: the process has exited when it returns, the handshake is gone; again: exit 1", async () => {
    const s = await startBinary([], temp());
    const r = await tw(["stop", "--data-dir", s.dataDir]);
    expect(r.code).toBe(0);
    expect(r.err).toContain(`stopped (pid ${s.proc.pid})`);
    expect(() => process.kill(s.proc.pid, 0)).toThrow(); // gone (and reaped) when stop returned
    expect(await s.proc.exited).toBe(0);
    expect(existsSync(join(s.dataDir, "api-handshake.json"))).toBe(false);
    const again = await tw(["stop", "--data-dir", s.dataDir]);
    expect(again.code).toBe(1);
    expect(again.err).toContain("not running");
  });
});
