import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import net from "node:net";
import { join } from "node:path";
import { startService } from "../../helpers/service.ts";
import { curl, startUpstream, type Upstream } from "../../helpers/upstream.ts";
import { tempDir } from "../../helpers/tapwire-process.ts";
import { InterceptHosts } from "../../../src/features/breakpoints/hosts.ts";
import { BreakpointStore } from "../../../src/features/breakpoints/store.ts";
import { normalizeHost, PersistedList } from "../../../src/features/ignore/lists.ts";

type Svc = Awaited<ReturnType<typeof startService>>;
let up: Upstream;
let svc: Svc;
let proxy: string;
let caFile: string;
let caPem: string;
/** The HTTPS upstream by name (localhost) and the HTTP one by IP: two different hosts for matching. */
let httpsBase: string;
let httpBase: string;
let httpByName: string;

beforeAll(async () => {
  up = startUpstream();
  // a bounded intercept timeout: a test that fails to resume a flow does not hold it for 300 s
  svc = await startService({ upstreamCa: [up.caFile], interceptTimeoutSec: 30 });
  proxy = `http://127.0.0.1:${svc.proxyPort}`;
  caFile = join(svc.config.dataDir, "ca.pem");
  caPem = readFileSync(caFile, "utf8");
  httpsBase = up.httpsUrl;
  httpBase = up.httpUrl;
  httpByName = `http://localhost:${up.http.port}`;
});
afterAll(async () => {
  await svc.stop();
  up.stop();
});

// ---------------------------------------------------------------- helpers

async function api(s: Svc, path: string, method = "GET", body?: unknown): Promise<Response> {
  const init: RequestInit = { method };
  if (body !== undefined) {
    init.body = typeof body === "string" ? body : JSON.stringify(body);
    init.headers = { "content-type": "application/json" };
  }
  return s.call(path, init);
}

async function json(s: Svc, path: string): Promise<any> {
  const r = await s.call(path);
  expect(r.status).toBe(200);
  return await r.json();
}

/** Polls `fn` until it returns something truthy; fails after `ms`. */
async function waitFor<T>(what: string, fn: () => Promise<T | null | undefined | false>, ms = 4_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await Bun.sleep(15);
  }
}

async function paused(s: Svc): Promise<any[]> {
  return json(s, "/api/v1/intercepts");
}

/** Waits until a paused flow whose URL contains `urlPart` is listed. */
function waitPaused(s: Svc, urlPart: string, phase?: "request" | "response"): Promise<any> {
  return waitFor(`a paused flow for ${urlPart}`, async () => (await paused(s)).find((p) => p.url.includes(urlPart) && (!phase || p.phase === phase)));
}

function waitNotListed(s: Svc, id: string): Promise<true> {
  return waitFor(`paused flow ${id} to leave the list`, async () => !(await paused(s)).some((p) => p.id === id));
}

function resume(s: Svc, id: string, rewrite?: unknown): Promise<Response> {
  return api(s, `/api/v1/intercepts/${id}/resume`, "POST", rewrite);
}

/** curl in the background: the test can look at the paused flow while curl waits. */
function bgCurl(args: string[]): { proc: ReturnType<typeof Bun.spawn>; done: Promise<{ code: number; out: string; err: string }> } {
  const proc = Bun.spawn(["curl", "-sS", "--max-time", "60", ...args], { stdout: "pipe", stderr: "pipe" });
  const done = (async () => {
    const [out, err, code] = await Promise.all([new Response(proc.stdout as ReadableStream).text(), new Response(proc.stderr as ReadableStream).text(), proc.exited]);
    return { code, out, err };
  })();
  return { proc, done };
}

/** Splits `curl -i` output into status, lower-cased headers and body (the last response head wins). */
function parseCurlI(out: string): { status: number; headers: Record<string, string>; body: string } {
  let rest = out;
  let head = "";
  for (;;) {
    const i = rest.indexOf("\r\n\r\n");
    head = rest.slice(0, i);
    rest = rest.slice(i + 4);
    // interim responses and the proxy's answer to CONNECT come first
    if (!/^HTTP\/1\.[01] (1\d\d |200 Connection established)/i.test(head)) break;
  }
  const [statusLine, ...lines] = head.split("\r\n");
  const headers: Record<string, string> = {};
  for (const l of lines) {
    const c = l.indexOf(":");
    headers[l.slice(0, c).toLowerCase()] = l.slice(c + 1).trim();
  }
  return { status: Number(statusLine!.split(" ")[1]), headers, body: rest };
}

/** The newest captured entry whose URL ends with `urlEnd` (id from the API). */
async function entryId(s: Svc, urlEnd: string): Promise<number> {
  const e = await waitFor(`an entry for ${urlEnd}`, async () => ((await json(s, "/api/v1/traffic?limit=500")).items as any[]).find((x) => x.url.endsWith(urlEnd)));
  return e.id;
}

/** GET /traffic/{id} of that entry (with the extra fields the flow recorded). */
async function entryFor(s: Svc, urlEnd: string): Promise<any> {
  return json(s, `/api/v1/traffic/${await entryId(s, urlEnd)}`);
}

/** A raw client socket that sends `request` through the proxy and can reset (RST) its connection. */
function rawClient(request: string): { reset: () => void } {
  const sock = net.connect(svc.proxyPort!, "127.0.0.1", () => sock.write(request));
  sock.on("error", () => {});
  return { reset: () => sock.resetAndDestroy() };
}

function seenFor(path: string) {
  return up.seen.filter((r) => new URL(r.url).pathname === path);
}

async function putBreakpoint(s: Svc, bp: { pattern: string; intercept_request?: boolean; intercept_response?: boolean }): Promise<void> {
  const r = await api(s, "/api/v1/breakpoints", "PUT", bp);
  expect(r.status).toBe(204);
}

async function deleteBreakpoint(s: Svc, pattern: string): Promise<void> {
  const r = await api(s, "/api/v1/breakpoints/delete", "POST", { pattern });
  expect(r.status).toBe(204);
}

// ---------------------------------------------------------------- routes

describe("breakpoint routes", () => {
  test("PUT creates with defaults and updates by pattern, GET lists in order, POST /delete and DELETE clear", async () => {
    expect(await json(svc, "/api/v1/breakpoints")).toEqual([]);
    await putBreakpoint(svc, { pattern: "https://api.example.com/v1/*" });
    await putBreakpoint(svc, { pattern: "*.example.com/login", intercept_request: false, intercept_response: true });
    expect(await json(svc, "/api/v1/breakpoints")).toEqual([
      { pattern: "https://api.example.com/v1/*", intercept_request: true, intercept_response: true },
      { pattern: "*.example.com/login", intercept_request: false, intercept_response: true },
    ]);
    // same pattern: replaced in place, not added
    await putBreakpoint(svc, { pattern: "https://api.example.com/v1/*", intercept_request: true, intercept_response: false });
    expect(await json(svc, "/api/v1/breakpoints")).toEqual([
      { pattern: "https://api.example.com/v1/*", intercept_request: true, intercept_response: false },
      { pattern: "*.example.com/login", intercept_request: false, intercept_response: true },
    ]);
    const del = await api(svc, "/api/v1/breakpoints/delete", "POST", { pattern: "*.example.com/login" });
    expect(del.status).toBe(204);
    expect(await del.text()).toBe("");
    expect((await json(svc, "/api/v1/breakpoints")).map((b: any) => b.pattern)).toEqual(["https://api.example.com/v1/*"]);
    const again = await api(svc, "/api/v1/breakpoints/delete", "POST", { pattern: "*.example.com/login" });
    expect(again.status).toBe(404);
    expect(((await again.json()) as any).error.code).toBe("not_found");
    const clear = await api(svc, "/api/v1/breakpoints", "DELETE");
    expect(clear.status).toBe(204);
    expect(await json(svc, "/api/v1/breakpoints")).toEqual([]);
    expect((await api(svc, "/api/v1/breakpoints", "DELETE")).status).toBe(204);
  });

  test("bad bodies are 400 naming the field, and change nothing", async () => {
    const cases: [unknown, string][] = [
      [{}, "pattern"],
      [{ pattern: 7 }, "pattern"],
      [{ pattern: "" }, "pattern"],
      [{ pattern: "   " }, "pattern"],
      [{ pattern: "ftp://example.com/*" }, "pattern"],
      [{ pattern: "example.com", intercept_request: "yes" }, "intercept_request"],
      [{ pattern: "example.com", intercept_respones: true }, "intercept_respones"],
      [[], "(body)"],
      ["", "(body)"],
    ];
    for (const [body, field] of cases) {
      const r = await api(svc, "/api/v1/breakpoints", "PUT", body);
      expect(r.status).toBe(400);
      const e = (await r.json()) as any;
      expect(e.error.code).toBe("bad_request");
      expect(e.error.message).toContain(field === "(body)" ? "invalid body" : `'${field}'`);
    }
    expect((await api(svc, "/api/v1/breakpoints", "PUT", "{not json")).status).toBe(400);
    for (const body of [{}, { pattern: 1 }, { pattern: "x", extra: 1 }]) {
      expect((await api(svc, "/api/v1/breakpoints/delete", "POST", body)).status).toBe(400);
    }
    expect(await json(svc, "/api/v1/breakpoints")).toEqual([]);
  });

  test("the routes need the bearer token", async () => {
    expect((await fetch(svc.url("/api/v1/breakpoints"))).status).toBe(401);
    expect((await fetch(svc.url("/api/v1/intercepts"))).status).toBe(401);
    expect((await fetch(svc.url("/api/v1/intercept-hosts"))).status).toBe(401);
  });
});

describe("intercept-host routes", () => {
  test("PUT adds (idempotent, normalised), DELETE removes (204 also when absent), bad hosts are 400", async () => {
    expect(await json(svc, "/api/v1/intercept-hosts")).toEqual([]);
    expect((await api(svc, "/api/v1/intercept-hosts/API.Example.COM", "PUT")).status).toBe(204);
    expect((await api(svc, "/api/v1/intercept-hosts/api.example.com", "PUT")).status).toBe(204);
    expect((await api(svc, "/api/v1/intercept-hosts/*.example.org", "PUT")).status).toBe(204);
    expect(await json(svc, "/api/v1/intercept-hosts")).toEqual(["api.example.com", "*.example.org"]);
    for (const bad of ["a%2Fb", "a%20b", "ex*ample.com", "host:80", "api.example.com:443", "%5B%3A%3A1%5D%3A80"]) {
      const r = await api(svc, `/api/v1/intercept-hosts/${bad}`, "PUT");
      expect(r.status).toBe(400);
      expect(((await r.json()) as any).error.code).toBe("bad_request");
    }
    expect((await api(svc, "/api/v1/intercept-hosts/api.example.com", "DELETE")).status).toBe(204);
    expect((await api(svc, "/api/v1/intercept-hosts/api.example.com", "DELETE")).status).toBe(204);
    expect(await json(svc, "/api/v1/intercept-hosts")).toEqual(["*.example.org"]);
    expect((await api(svc, "/api/v1/intercept-hosts", "DELETE")).status).toBe(204);
    expect(await json(svc, "/api/v1/intercept-hosts")).toEqual([]);
  });
});

describe("intercept routes without paused flows", () => {
  test("GET is an empty list; resuming an unknown id is 404", async () => {
    expect(await paused(svc)).toEqual([]);
    const r = await resume(svc, "12345", {});
    expect(r.status).toBe(404);
    expect(((await r.json()) as any).error.code).toBe("not_found");
    expect((await resume(svc, "nope")).status).toBe(404);
  });
});

// ---------------------------------------------------------------- pausing real traffic

describe("request phase", () => {
  test("HTTP: a paused POST is listed with its fields, bad rewrites are 400 and leave it paused, the rewrite reaches the upstream and the client", async () => {
    const pattern = `${httpBase}/echo/req-*`;
    await putBreakpoint(svc, { pattern, intercept_request: true, intercept_response: false });
    try {
      const c = bgCurl(["-x", proxy, "-H", "X-Original: 1", "-H", "Content-Type: text/plain", "--data-binary", "original body", `${httpBase}/echo/req-a?q=1`]);
      const p = await waitPaused(svc, "/echo/req-a");
      expect(p).toMatchObject({
        phase: "request",
        method: "POST",
        url: `${httpBase}/echo/req-a?q=1`,
        host: "127.0.0.1",
        breakpoint: pattern,
        body: "original body",
        body_encoding: "utf8",
        body_size: 13,
        body_truncated: false,
      });
      expect(typeof p.id).toBe("string");
      expect(Math.abs(p.paused_at - Date.now())).toBeLessThan(10_000);
      expect(p.resumes_at - p.paused_at).toBe(30_000);
      expect(p.status_code).toBeUndefined();
      expect(p.headers).toContainEqual(["X-Original", "1"]);
      expect(seenFor("/echo/req-a")).toHaveLength(0);

      // invalid rewrites: 400 naming the field, the flow stays paused
      const bad: [unknown, string][] = [
        [{ status_code: 201 }, "status_code"],
        [{ headers: [["bad name", "x"]] }, "headers.0.0"],
        [{ headers: [["X-A", "line\r\nbreak"]] }, "headers.0.1"],
        [{ headers: [["X-A"]] }, "headers.0.1"],
        [{ headers: "X-A: 1" }, "headers"],
        [{ body: 5 }, "body"],
        [{ url: "ftp://example.com/" }, "url"],
        [{ url: "not a url" }, "url"],
        [{ abort: "yes" }, "abort"],
        [{ staus_code: 200 }, "staus_code"],
        [{ body: "!!", body_encoding: "base64" }, "body"],
        [{ body_encoding: "hex", body: "00" }, "body_encoding"],
        [[1], "(body)"],
        [JSON.stringify("plain text"), "(body)"],
      ];
      for (const [rw, field] of bad) {
        const r = await resume(svc, p.id, rw);
        expect(r.status).toBe(400);
        const msg = ((await r.json()) as any).error.message as string;
        expect(msg).toContain(field === "(body)" ? "invalid body" : `'${field}'`);
      }
      expect((await paused(svc)).map((x) => x.id)).toContain(p.id);

      const ok = await resume(svc, p.id, {
        url: `${httpBase}/echo/req-rewritten?x=2`,
        headers: [
          ["Host", `127.0.0.1:${up.http.port}`],
          ["X-Rewritten", "yes"],
          ["Content-Type", "application/json"],
          ["Content-Length", "999"],
        ],
        body: '{"rewritten":true}',
      });
      expect(ok.status).toBe(204);
      expect(await ok.text()).toBe("");
      const res = await c.done;
      expect(res.code).toBe(0);
      const echoed = JSON.parse(res.out);
      expect(echoed.path).toBe("/echo/req-rewritten?x=2");
      expect(echoed.body).toBe('{"rewritten":true}');
      expect(echoed.headers["x-rewritten"]).toBe("yes");
      expect(echoed.headers["x-original"]).toBeUndefined();
      // Content-Length recomputed from the new body
      expect(echoed.headers["content-length"]).toBe("18");
      const seen = seenFor("/echo/req-rewritten");
      expect(seen).toHaveLength(1);
      expect(new TextDecoder().decode(seen[0]!.body)).toBe('{"rewritten":true}');
      expect(seenFor("/echo/req-a")).toHaveLength(0);

      // gone once resumed
      expect((await resume(svc, p.id, {})).status).toBe(404);
      expect((await paused(svc)).some((x) => x.id === p.id)).toBe(false);

      const e = await entryFor(svc, "/echo/req-rewritten?x=2");
      expect(e.original_url).toBe(`${httpBase}/echo/req-a?q=1`);
      expect(e.intercepted).toEqual({ request: { breakpoint: pattern, rewritten: true, outcome: "resumed" } });
      expect(e.req_body).toBe('{"rewritten":true}');
    } finally {
      await deleteBreakpoint(svc, pattern);
    }
  });

  test("HTTPS with fetch: an intercept host pauses every request to it; {} resumes unchanged", async () => {
    expect((await api(svc, "/api/v1/intercept-hosts/localhost", "PUT")).status).toBe(204);
    try {
      const f = fetch(`${httpsBase}/echo/ih-1`, { proxy, tls: { ca: caPem }, method: "PUT", body: "unchanged" });
      const p = await waitPaused(svc, "/echo/ih-1");
      expect(p).toMatchObject({ phase: "request", method: "PUT", url: `${httpsBase}/echo/ih-1`, host: "localhost", intercept_host: "localhost", body: "unchanged" });
      expect(p.breakpoint).toBeUndefined();
      expect((await resume(svc, p.id, {})).status).toBe(204);
      const r = await f;
      expect(r.status).toBe(200);
      const echoed = (await r.json()) as any;
      expect(echoed).toMatchObject({ method: "PUT", path: "/echo/ih-1", body: "unchanged" });
      expect(echoed.headers.host).toBe(`localhost:${up.https.port}`);
      const e = await entryFor(svc, "/echo/ih-1");
      expect(e.intercepted).toEqual({ request: { intercept_host: "localhost", rewritten: false, outcome: "resumed" } });

      // no body at all resumes unchanged too
      const g = fetch(`${httpsBase}/echo/ih-2`, { proxy, tls: { ca: caPem } });
      const p2 = await waitPaused(svc, "/echo/ih-2");
      expect(p2).toMatchObject({ method: "GET", body: "", body_size: 0 });
      expect((await svc.call(`/api/v1/intercepts/${p2.id}/resume`, { method: "POST" })).status).toBe(204);
      expect(((await (await g).json()) as any).path).toBe("/echo/ih-2");
    } finally {
      expect((await api(svc, "/api/v1/intercept-hosts/localhost", "DELETE")).status).toBe(204);
    }
  });

  test("a url rewrite to another host updates the Host header (unless headers are given)", async () => {
    const pattern = `${httpByName}/echo/host-*`;
    await putBreakpoint(svc, { pattern, intercept_response: false });
    try {
      const c = bgCurl(["-x", proxy, `${httpByName}/echo/host-a`]);
      const p = await waitPaused(svc, "/echo/host-a");
      expect(p.headers).toContainEqual(["Host", `localhost:${up.http.port}`]);
      expect((await resume(svc, p.id, { url: `${httpBase}/echo/moved-a` })).status).toBe(204);
      expect(JSON.parse((await c.done).out).headers.host).toBe(`127.0.0.1:${up.http.port}`);

      const c2 = bgCurl(["-x", proxy, `${httpByName}/echo/host-b`]);
      const p2 = await waitPaused(svc, "/echo/host-b");
      expect((await resume(svc, p2.id, { url: `${httpBase}/echo/moved-b`, headers: [["Host", "custom.example"], ["X-Only", "1"]] })).status).toBe(204);
      const echoed = JSON.parse((await c2.done).out);
      expect(echoed.path).toBe("/echo/moved-b");
      expect(echoed.headers.host).toBe("custom.example");
      expect(echoed.headers["x-only"]).toBe("1");
      expect(echoed.headers["user-agent"]).toBeUndefined();
    } finally {
      await deleteBreakpoint(svc, pattern);
    }
  });

  test("a binary body over 64 KiB is previewed as capped base64 and goes upstream whole", async () => {
    const pattern = `${httpBase}/sink`;
    await putBreakpoint(svc, { pattern, intercept_response: false });
    try {
      const data = new Uint8Array(70_000);
      for (let i = 0; i < data.length; i++) data[i] = (i * 7) & 0xff;
      const f = fetch(`${httpBase}/sink`, { proxy, method: "POST", body: data, headers: { "content-type": "application/octet-stream" } });
      const p = await waitPaused(svc, "/sink");
      expect(p).toMatchObject({ body_encoding: "base64", body_size: 70_000, body_truncated: true });
      expect(new Uint8Array(Buffer.from(p.body, "base64"))).toEqual(data.subarray(0, 65_536));
      expect((await resume(svc, p.id)).status).toBe(204);
      expect(await (await f).json()).toEqual({ received: 70_000 });
      expect(Buffer.from(up.seen.at(-1)!.body).equals(Buffer.from(data))).toBe(true);
    } finally {
      await deleteBreakpoint(svc, pattern);
    }
  });

  test("abort answers 502 without contacting the upstream and is recorded as aborted", async () => {
    const pattern = `${httpBase}/echo/abort-req`;
    await putBreakpoint(svc, { pattern, intercept_response: true });
    try {
      const c = bgCurl(["-x", proxy, "-i", "--data-binary", "never sent", `${httpBase}/echo/abort-req`]);
      const p = await waitPaused(svc, "/echo/abort-req", "request");
      expect((await resume(svc, p.id, { abort: true, body: "ignored" })).status).toBe(204);
      const r = parseCurlI((await c.done).out);
      expect(r.status).toBe(502);
      expect(r.body).toBe("tapwire: aborted at breakpoint\n");
      expect(r.headers["content-length"]).toBe(String(r.body.length));
      expect(seenFor("/echo/abort-req")).toHaveLength(0);
      // the response breakpoint does not pause the abort's own answer
      expect((await paused(svc)).filter((x) => x.url.includes("/echo/abort-req"))).toEqual([]);
      const e = await entryFor(svc, "/echo/abort-req");
      expect(e.status_code).toBe(502);
      expect(e.error).toBe("aborted at breakpoint");
      expect(e.aborted).toBe(true);
      expect(e.req_body).toBe("never sent");
      expect(e.intercepted).toEqual({ request: { breakpoint: pattern, rewritten: false, outcome: "aborted" } });
    } finally {
      await deleteBreakpoint(svc, pattern);
    }
  });
});

describe("response phase", () => {
  test("HTTPS with curl: the paused response is listed, rewritten, and the client receives exactly the rewrite", async () => {
    const pattern = "https://localhost/echo/res-*";
    await putBreakpoint(svc, { pattern, intercept_request: false, intercept_response: true });
    try {
      const c = bgCurl(["-x", proxy, "--cacert", caFile, "-i", `${httpsBase}/echo/res-a`]);
      const p = await waitPaused(svc, "/echo/res-a");
      expect(p).toMatchObject({ phase: "response", method: "GET", url: `${httpsBase}/echo/res-a`, host: "localhost", breakpoint: pattern, status_code: 200, body_encoding: "utf8", body_truncated: false });
      expect(JSON.parse(p.body).path).toBe("/echo/res-a");
      expect(p.body_size).toBe(p.body.length);
      expect(p.headers.some(([n, v]: [string, string]) => n.toLowerCase() === "content-type" && v.includes("application/json"))).toBe(true);
      // the upstream already answered
      expect(seenFor("/echo/res-a")).toHaveLength(1);
      expect((await resume(svc, p.id, { url: "http://example.com/" })).status).toBe(400);

      const ok = await resume(svc, p.id, {
        status_code: 201,
        headers: [
          ["Content-Type", "text/plain"],
          ["X-Rewritten", "yes"],
          ["Content-Length", "1"],
        ],
        body: "hello from the breakpoint",
      });
      expect(ok.status).toBe(204);
      const r = parseCurlI((await c.done).out);
      expect(r.status).toBe(201);
      expect(r.headers["x-rewritten"]).toBe("yes");
      expect(r.headers["content-type"]).toBe("text/plain");
      expect(r.headers["content-length"]).toBe("25");
      expect(r.body).toBe("hello from the breakpoint");
      expect((await resume(svc, p.id)).status).toBe(404);

      const e = await entryFor(svc, "/echo/res-a");
      expect(e.status_code).toBe(201);
      expect(e.res_headers).toContainEqual(["X-Rewritten", "yes"]);
      expect(e.intercepted).toEqual({ response: { breakpoint: pattern, rewritten: true, outcome: "resumed" } });
    } finally {
      await deleteBreakpoint(svc, pattern);
    }
  });

  test("both phases of one flow pause in turn; a base64 body rewrite is sent as bytes", async () => {
    const pattern = `${httpBase}/echo/both`;
    await putBreakpoint(svc, { pattern });
    try {
      const f = fetch(`${httpBase}/echo/both`, { proxy });
      const req = await waitPaused(svc, "/echo/both", "request");
      expect((await resume(svc, req.id, { headers: [["X-Step", "request"]] })).status).toBe(204);
      const res = await waitPaused(svc, "/echo/both", "response");
      expect(res.id).not.toBe(req.id);
      expect(JSON.parse(res.body).headers["x-step"]).toBe("request");
      const bytes = Uint8Array.of(0, 1, 2, 255, 254);
      expect((await resume(svc, res.id, { headers: [["Content-Type", "application/octet-stream"]], body: Buffer.from(bytes).toString("base64"), body_encoding: "base64" })).status).toBe(204);
      const r = await f;
      expect(r.status).toBe(200);
      expect(new Uint8Array(await r.arrayBuffer())).toEqual(bytes);
      const e = await entryFor(svc, "/echo/both");
      expect(e.intercepted).toEqual({
        request: { breakpoint: pattern, rewritten: true, outcome: "resumed" },
        response: { breakpoint: pattern, rewritten: true, outcome: "resumed" },
      });
    } finally {
      await deleteBreakpoint(svc, pattern);
    }
  });

  test("abort at the response phase answers 502 to the client", async () => {
    const pattern = `${httpBase}/echo/abort-res`;
    await putBreakpoint(svc, { pattern, intercept_request: false });
    try {
      const c = bgCurl(["-x", proxy, "-i", `${httpBase}/echo/abort-res`]);
      const p = await waitPaused(svc, "/echo/abort-res", "response");
      expect((await resume(svc, p.id, { abort: true })).status).toBe(204);
      const r = parseCurlI((await c.done).out);
      expect(r.status).toBe(502);
      expect(r.body).toBe("tapwire: aborted at breakpoint\n");
      expect(seenFor("/echo/abort-res")).toHaveLength(1);
      const e = await entryFor(svc, "/echo/abort-res");
      expect(e).toMatchObject({ status_code: 502, error: "aborted at breakpoint", aborted: true });
      expect(e.intercepted).toEqual({ response: { breakpoint: pattern, rewritten: false, outcome: "aborted" } });
    } finally {
      await deleteBreakpoint(svc, pattern);
    }
  });
});

describe("paused flows and other traffic", () => {
  test("while one flow is paused, requests to other hosts (and other requests to the same host) complete", async () => {
    const pattern = `${httpByName}/echo/hold`;
    await putBreakpoint(svc, { pattern, intercept_response: false });
    try {
      const c = bgCurl(["-x", proxy, `${httpByName}/echo/hold`]);
      const p = await waitPaused(svc, "/echo/hold");
      const other = await curl(["-x", proxy, `${httpBase}/echo/other-host`]);
      expect(JSON.parse(other.out).path).toBe("/echo/other-host");
      const sameHost = await fetch(`${httpByName}/echo/same-host`, { proxy });
      expect(((await sameHost.json()) as any).path).toBe("/echo/same-host");
      const https = await fetch(`${httpsBase}/echo/other-https`, { proxy, tls: { ca: caPem } });
      expect(https.status).toBe(200);
      // still paused, and the upstream has not seen it
      expect((await paused(svc)).map((x) => x.id)).toEqual([p.id]);
      expect(((await (await fetch(svc.url("/api/v1/health"))).json()) as any).paused_flows).toBe(1);
      expect(seenFor("/echo/hold")).toHaveLength(0);
      expect((await resume(svc, p.id)).status).toBe(204);
      expect(JSON.parse((await c.done).out).path).toBe("/echo/hold");
    } finally {
      await deleteBreakpoint(svc, pattern);
    }
  });

  test("a client that resets its connection while paused leaves the list (both phases) and is recorded as gone", { timeout: 20_000 }, async () => {
    const pattern = `${httpBase}/echo/rst-*`;
    await putBreakpoint(svc, { pattern });
    try {
      // request phase
      const a = rawClient(`GET ${httpBase}/echo/rst-req HTTP/1.1\r\nHost: 127.0.0.1:${up.http.port}\r\n\r\n`);
      const p = await waitPaused(svc, "/echo/rst-req", "request");
      a.reset();
      await waitNotListed(svc, p.id);
      expect((await resume(svc, p.id)).status).toBe(404);
      const e = await entryFor(svc, "/echo/rst-req");
      expect(e.error).toBe("client disconnected");
      expect(e.intercepted).toEqual({ request: { breakpoint: pattern, rewritten: false, outcome: "client_gone" } });
      expect(seenFor("/echo/rst-req")).toHaveLength(0);

      // response phase
      const b = rawClient(`GET ${httpBase}/echo/rst-res HTTP/1.1\r\nHost: 127.0.0.1:${up.http.port}\r\n\r\n`);
      const pr = await waitPaused(svc, "/echo/rst-res", "request");
      expect((await resume(svc, pr.id)).status).toBe(204);
      const ps = await waitPaused(svc, "/echo/rst-res", "response");
      b.reset();
      await waitNotListed(svc, ps.id);
      expect((await resume(svc, ps.id, { body: "too late" })).status).toBe(404);
      const e2 = await entryFor(svc, "/echo/rst-res");
      expect(e2.error).toBe("client disconnected");
      expect(e2.intercepted.response).toEqual({ breakpoint: pattern, rewritten: false, outcome: "client_gone" });
    } finally {
      await deleteBreakpoint(svc, pattern);
    }
  });
});

describe("matching", () => {
  test("flows to an ignored host are never paused", { timeout: 15_000 }, async () => {
    const pattern = `${httpByName}/echo/ignored`;
    await putBreakpoint(svc, { pattern });
    expect((await api(svc, "/api/v1/intercept-hosts/localhost", "PUT")).status).toBe(204);
    expect((await api(svc, "/api/v1/ignored-hosts/localhost", "PUT")).status).toBe(204);
    try {
      const r = await curl(["-x", proxy, "--max-time", "8", `${httpByName}/echo/ignored`]);
      expect(r.code).toBe(0);
      expect(JSON.parse(r.out).path).toBe("/echo/ignored");
    } finally {
      expect((await api(svc, "/api/v1/ignored-hosts/localhost", "DELETE")).status).toBe(204);
      expect((await api(svc, "/api/v1/intercept-hosts/localhost", "DELETE")).status).toBe(204);
      await deleteBreakpoint(svc, pattern);
    }
  });

  test("intercept hosts: exact names and *.suffix entries, case-insensitive; the matching entry is named", () => {
    const list = new PersistedList(join(tempDir(), "intercept-hosts.json"), normalizeHost);
    const hosts = new InterceptHosts(list);
    expect(hosts.match("api.example.com")).toBeNull();
    list.add("API.example.com");
    list.add("*.example.org");
    expect(hosts.match("api.example.com")).toBe("api.example.com");
    expect(hosts.match("Api.Example.Com.")).toBe("api.example.com");
    expect(hosts.match("www.example.com")).toBeNull();
    expect(hosts.match("a.b.example.org")).toBe("*.example.org");
    expect(hosts.match("example.org")).toBeNull();
    list.remove("api.example.com");
    expect(hosts.match("api.example.com")).toBeNull();
  });

  test("breakpoints: first match in list order, per phase, against the URL asked for or as rewritten", () => {
    const store = new BreakpointStore(join(tempDir(), "breakpoints.json"));
    store.put(store.parse({ pattern: "api.example.com/v1/*", intercept_response: false }));
    store.put(store.parse({ pattern: "https://*.example.com/login" }));
    expect(store.match("request", ["https://api.example.com/v1/users?x=1"])?.pattern).toBe("api.example.com/v1/*");
    expect(store.match("response", ["https://api.example.com/v1/users"])).toBeNull();
    expect(store.match("response", ["https://www.example.com:443/login"])?.pattern).toBe("https://*.example.com/login");
    expect(store.match("request", ["http://www.example.com/login"])).toBeNull();
    expect(store.match("request", ["http://other.test/", "http://api.example.com:8080/v1/x"])?.pattern).toBe("api.example.com/v1/*");
  });
});

// ---------------------------------------------------------------- timeout and persistence (own services)

describe("intercept timeout", () => {
  test("a paused flow resumes unchanged after --intercept-timeout and the entry says so", { timeout: 20_000 }, async () => {
    const s = await startService({ upstreamCa: [up.caFile], interceptTimeoutSec: 1 });
    try {
      const px = `http://127.0.0.1:${s.proxyPort}`;
      await putBreakpoint(s, { pattern: `${httpBase}/echo/timeout-*` });
      const started = Date.now();
      const c = bgCurl(["-x", px, "--data-binary", "as sent", `${httpBase}/echo/timeout-a`]);
      const p = await waitPaused(s, "/echo/timeout-a", "request");
      expect(p.resumes_at - p.paused_at).toBe(1000);
      // it goes on by itself: request phase, then response phase, each after 1 s
      const res = await c.done;
      expect(Date.now() - started).toBeGreaterThanOrEqual(2000);
      expect(JSON.parse(res.out)).toMatchObject({ path: "/echo/timeout-a", body: "as sent" });
      expect(await paused(s)).toEqual([]);
      expect((await resume(s, p.id)).status).toBe(404);
      const e = await entryFor(s, "/echo/timeout-a");
      expect(e.intercept_timeout).toBe(true);
      expect(e.intercepted.request).toMatchObject({ rewritten: false, outcome: "timeout" });
      expect(e.intercepted.response).toMatchObject({ rewritten: false, outcome: "timeout" });
      expect(e.status_code).toBe(200);
    } finally {
      await s.stop();
    }
  });
});

describe("persistence", () => {
  test("breakpoints and intercept hosts survive a restart; paused flows do not block stop", { timeout: 20_000 }, async () => {
    const s1 = await startService({ upstreamCa: [up.caFile] });
    const dataDir = s1.config.dataDir;
    let s2: Svc | null = null;
    try {
      await putBreakpoint(s1, { pattern: "https://api.example.com/v1/*", intercept_response: false });
      await putBreakpoint(s1, { pattern: `${httpBase}/echo/persist` });
      expect((await api(s1, "/api/v1/intercept-hosts/Persist.Example.com", "PUT")).status).toBe(204);
      // a flow is paused when the service stops
      const c = bgCurl(["-x", `http://127.0.0.1:${s1.proxyPort}`, `${httpBase}/echo/persist`]);
      await waitPaused(s1, "/echo/persist");
      await s1.stop();
      expect((await c.done).code).not.toBe(0);

      s2 = await startService({ upstreamCa: [up.caFile], dataDir });
      expect(await json(s2, "/api/v1/breakpoints")).toEqual([
        { pattern: "https://api.example.com/v1/*", intercept_request: true, intercept_response: false },
        { pattern: `${httpBase}/echo/persist`, intercept_request: true, intercept_response: true },
      ]);
      expect(await json(s2, "/api/v1/intercept-hosts")).toEqual(["persist.example.com"]);
      expect(await paused(s2)).toEqual([]);
      // and they still pause traffic
      const c2 = bgCurl(["-x", `http://127.0.0.1:${s2.proxyPort}`, `${httpBase}/echo/persist`]);
      const p = await waitPaused(s2, "/echo/persist", "request");
      expect((await resume(s2, p.id)).status).toBe(204);
      const p2 = await waitPaused(s2, "/echo/persist", "response");
      expect((await resume(s2, p2.id, { body: "after restart" })).status).toBe(204);
      expect((await c2.done).out).toBe("after restart");
    } finally {
      await s1.stop();
      await s2?.stop();
    }
  });
});

// ---------------------------------------------------------------- held flows meeting the core's edge cases

describe("client FIN, bodiless responses, upstream close while held, recorded rewrites", () => {
  // a FIN from a client whose flow is held counts as the client going away
  test("a client that goes away (curl killed: a FIN, no RST) while paused leaves the list", { timeout: 20_000 }, async () => {
    const pattern = `${httpBase}/echo/gone-*`;
    await putBreakpoint(svc, { pattern });
    try {
      // request phase: curl is killed while its request is held
      const c = bgCurl(["-x", proxy, `${httpBase}/echo/gone-req`]);
      const p = await waitPaused(svc, "/echo/gone-req", "request");
      c.proc.kill("SIGKILL");
      await c.proc.exited;
      const reqLeft = await waitNotListed(svc, p.id).catch(() => false);

      // response phase: curl is killed while its response is held
      const c2 = bgCurl(["-x", proxy, `${httpBase}/echo/gone-res`]);
      const pr = await waitPaused(svc, "/echo/gone-res", "request");
      expect((await resume(svc, pr.id)).status).toBe(204);
      const ps = await waitPaused(svc, "/echo/gone-res", "response");
      c2.proc.kill("SIGKILL");
      await c2.proc.exited;
      const resLeft = await waitNotListed(svc, ps.id).catch(() => false);
      expect({ reqLeft, resLeft }).toEqual({ reqLeft: true, resLeft: true });
    } finally {
      await deleteBreakpoint(svc, pattern);
      // let whatever is still held go, so later tests start clean
      for (const x of await paused(svc)) await resume(svc, x.id, { abort: true });
    }
  });

  // responses without a body are held too
  test("a bodiless response (HEAD, 204) pauses before it reaches the client", async () => {
    const pattern = `${httpBase}/status/204`;
    await putBreakpoint(svc, { pattern, intercept_request: false });
    try {
      const c = bgCurl(["-x", proxy, "-i", `${httpBase}/status/204`]);
      const p = await waitPaused(svc, "/status/204", "response");
      expect(p.status_code).toBe(204);
      expect((await resume(svc, p.id, { status_code: 200, body: "now with a body" })).status).toBe(204);
      const r = parseCurlI((await c.done).out);
      expect(r.status).toBe(200);
      expect(r.body).toBe("now with a body");
    } finally {
      await deleteBreakpoint(svc, pattern);
    }
  });

  // the upstream closing does not fail a complete response that an addon holds
  test("a paused response survives the upstream closing its connection", { timeout: 20_000 }, async () => {
    // an upstream that answers with Connection: close, and closes when the test says so
    let upstreamSock: { end(): void } | null = null;
    let upstreamClosed!: () => void;
    const closed = new Promise<void>((r) => (upstreamClosed = r));
    const raw = Bun.listen({
      hostname: "127.0.0.1",
      port: 0,
      socket: {
        data(s) {
          s.write("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 8\r\nConnection: close\r\n\r\nupstream");
          upstreamSock = s;
        },
        close() {
          upstreamClosed();
        },
      },
    });
    const base = `http://127.0.0.1:${raw.port}`;
    const pattern = `${base}/closing`;
    await putBreakpoint(svc, { pattern, intercept_request: false });
    try {
      const c = bgCurl(["-x", proxy, "-i", `${base}/closing`]);
      const p = await waitPaused(svc, "/closing", "response");
      expect(p.body).toBe("upstream");
      // the upstream closes; the proxy answers the FIN with its own once it has handled it
      upstreamSock!.end();
      await closed;
      const listed = (await paused(svc)).some((x) => x.id === p.id);
      const resumed = (await resume(svc, p.id, { body: "rewritten" })).status;
      const r = parseCurlI((await c.done).out);
      expect({ listed, resumed, status: r.status, body: r.body }).toEqual({ listed: true, resumed: 204, status: 200, body: "rewritten" });
    } finally {
      await deleteBreakpoint(svc, pattern);
      raw.stop(true);
    }
  });

  // core/capture: responseBodyCollected adds the body to flow.resBody only after the response hooks (capture records in one)
  test("a paused-and-rewritten response is captured with the body the client received", async () => {
    const pattern = `${httpBase}/echo/captured-body`;
    await putBreakpoint(svc, { pattern, intercept_request: false });
    try {
      const f = fetch(`${httpBase}/echo/captured-body`, { proxy });
      const p = await waitPaused(svc, "/echo/captured-body", "response");
      expect((await resume(svc, p.id, { body: "sent to the client" })).status).toBe(204);
      expect(await (await f).text()).toBe("sent to the client");
      const e = await entryFor(svc, "/echo/captured-body");
      expect({ res_body: e.res_body, res_body_size: e.res_body_size }).toEqual({ res_body: "sent to the client", res_body_size: 18 });
    } finally {
      await deleteBreakpoint(svc, pattern);
    }
  });
});
