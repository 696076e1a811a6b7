import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { startService } from "../../helpers/service.ts";
import { curl, startUpstream, type Upstream } from "../../helpers/upstream.ts";

type Svc = Awaited<ReturnType<typeof startService>>;
let up: Upstream;
let svc: Svc;
let proxy: string;
let caFile: string;

beforeAll(async () => {
  up = startUpstream();
  svc = await startService({ upstreamCa: [up.caFile], scriptTimeoutMs: 1500 });
  proxy = `http://127.0.0.1:${svc.proxyPort}`;
  caFile = join(svc.config.dataDir, "ca.pem");
});
afterAll(async () => {
  await svc.stop();
  up.stop();
});

const json = { "content-type": "application/json" };
async function call(method: string, path: string, body?: unknown) {
  const r = await svc.call(path, { method, headers: json, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, json: text ? JSON.parse(text) : null };
}

interface RuleOver {
  id: string;
  url_pattern?: string;
  method?: string;
  request_script?: string;
  response_script?: string;
  enabled?: boolean;
}
async function addRule(o: RuleOver) {
  const r = await call("POST", "/api/v1/script-rules", {
    name: `rule ${o.id}`,
    method: "",
    url_pattern: "**",
    request_script: "",
    response_script: "",
    enabled: true,
    ...o,
    apply_to_request: (o.request_script ?? "") !== "",
    apply_to_response: (o.response_script ?? "") !== "",
  });
  expect(r.status).toBe(200);
}

/** The newest traffic entry whose URL contains `part`, in detail form. */
async function entryFor(part: string): Promise<Record<string, any>> {
  const list = (await call("GET", "/api/v1/traffic?limit=50")).json as { items: { id: number; url: string }[] };
  const hit = list.items.find((e) => e.url.includes(part));
  expect(hit).toBeDefined();
  return (await call("GET", `/api/v1/traffic/${hit!.id}`)).json;
}

/** Captures are written right after the response's last byte: wait until the entry shows up. */
async function waitForEntry(part: string): Promise<Record<string, any>> {
  for (;;) {
    const list = (await call("GET", "/api/v1/traffic?limit=50")).json as { items: { url: string }[] };
    if (list.items.some((e) => e.url.includes(part))) return entryFor(part);
    await new Promise((r) => setImmediate(r));
  }
}

beforeEach(async () => {
  expect((await call("PUT", "/api/v1/script-rules/sync", [])).status).toBe(200);
  expect((await call("PUT", "/api/v1/script-rules/toggle", { enabled: true })).status).toBe(200);
});

describe("script rules in the proxy", () => {
  test("a request script adds a header the upstream sees (plain HTTP, curl)", async () => {
    await addRule({ id: "hdr", url_pattern: "127.0.0.1/echo*", request_script: "pm.request.headers.add({key: 'X-Scripted', value: 'by-' + pm.info.requestName});" });
    const r = await curl(["-x", proxy, `${up.httpUrl}/echo?a=1`]);
    expect(JSON.parse(r.out).headers["x-scripted"]).toBe("by-rule hdr");
    const e = await waitForEntry("/echo?a=1");
    expect(e.scripts).toEqual([expect.objectContaining({ rule_id: "hdr", phase: "request", applied: true, errors: [] })]);
  });

  test("a request script changes method, URL query and JSON body over HTTPS (Bun fetch); Content-Length follows", async () => {
    await addRule({
      id: "body",
      url_pattern: "https://localhost:*/echo**",
      request_script: [
        "const data = JSON.parse(pm.request.body.raw);",
        "data.added = 'yes';",
        "pm.request.body.raw = JSON.stringify(data);",
        "pm.request.url.query.upsert({key: 'q', value: 'scripted'});",
        "pm.request.method = 'PUT';",
      ].join("\n"),
    });
    const res = await fetch(`${up.httpsUrl}/echo`, {
      method: "POST",
      body: JSON.stringify({ original: 1 }),
      headers: { "content-type": "application/json" },
      proxy,
      tls: { ca: await Bun.file(caFile).text() },
    } as RequestInit);
    const seen = (await res.json()) as { method: string; path: string; body: string; headers: Record<string, string> };
    expect(seen.method).toBe("PUT");
    expect(seen.path).toBe("/echo?q=scripted");
    expect(JSON.parse(seen.body)).toEqual({ original: 1, added: "yes" });
    expect(seen.headers["content-length"]).toBe(String(seen.body.length));
  });

  test("a response script rewrites status, a header and the JSON body the client receives", async () => {
    await addRule({
      id: "res",
      url_pattern: "127.0.0.1/gzip",
      response_script: [
        "const body = pm.response.json();",
        "body.word = body.word.toUpperCase();",
        "body.rewritten = true;",
        "pm.response.code = 503;",
        "pm.response.headers.upsert({key: 'X-Rewritten', value: '1'});",
        "pm.response.setBody(body);",
      ].join("\n"),
    });
    const r = await curl(["-i", "-x", proxy, `${up.httpUrl}/gzip`]);
    const [head, body] = r.out.split("\r\n\r\n");
    expect(head).toStartWith("HTTP/1.1 503 Service Unavailable\r\n");
    expect(head).toContain("X-Rewritten: 1\r\n");
    expect(head!.toLowerCase()).not.toContain("content-encoding");
    expect(JSON.parse(body!)).toEqual({ compressed: true, word: "NEEDLE-IN-GZIP", rewritten: true });
    expect(head + "\r\n").toContain(`Content-Length: ${Buffer.byteLength(body!)}\r\n`);
    const e = await waitForEntry("/gzip");
    expect(e.status_code).toBe(503);
    expect(e.scripts[0]).toMatchObject({ rule_id: "res", phase: "response", applied: true });
  });

  test("request and response scripts of one rule both run; console output is recorded in the entry", async () => {
    await addRule({
      id: "both",
      url_pattern: "127.0.0.1/status/201",
      request_script: "console.log('going', pm.request.method);",
      response_script: "console.warn('came back', pm.response.code); pm.test('is 201', () => pm.response.to.have.status(201));",
    });
    const r = await curl(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-x", proxy, `${up.httpUrl}/status/201`]);
    expect(r.out).toBe("201");
    const e = await waitForEntry("/status/201");
    expect(e.scripts.map((s: any) => [s.phase, s.console.map((c: any) => [c.level, c.message])])).toEqual([
      ["request", [["log", "going GET"]]],
      ["response", [["warn", "came back 201"]]],
    ]);
    expect(e.scripts[1].tests).toEqual([{ name: "is 201", passed: true, error: null }]);
  });

  test("the master switch and the per-rule toggle take effect on the next request", async () => {
    await addRule({ id: "sw", url_pattern: "127.0.0.1/echo/switch", request_script: "pm.request.headers.upsert({key: 'X-Sw', value: 'on'})" });
    const seen = async () => JSON.parse((await curl(["-x", proxy, `${up.httpUrl}/echo/switch`])).out).headers["x-sw"];
    expect(await seen()).toBe("on");
    await call("PUT", "/api/v1/script-rules/toggle", { enabled: false });
    expect(await seen()).toBeUndefined();
    await call("PUT", "/api/v1/script-rules/toggle", { enabled: true });
    expect(await seen()).toBe("on");
    await call("POST", "/api/v1/script-rules/sw/toggle");
    expect(await seen()).toBeUndefined();
    await call("POST", "/api/v1/script-rules/sw/toggle");
    expect(await seen()).toBe("on");
  });

  test("method filter: a POST-only rule leaves GETs alone", async () => {
    await addRule({ id: "post", method: "post", url_pattern: "127.0.0.1/echo/m", request_script: "pm.request.headers.upsert({key: 'X-M', value: 'post'})" });
    expect(JSON.parse((await curl(["-x", proxy, `${up.httpUrl}/echo/m`])).out).headers["x-m"]).toBeUndefined();
    expect(JSON.parse((await curl(["-x", proxy, "-d", "x", `${up.httpUrl}/echo/m`])).out).headers["x-m"]).toBe("post");
  });

  test("rules run in list order, each seeing the previous one's changes", async () => {
    await addRule({ id: "one", url_pattern: "127.0.0.1/echo/order", request_script: "pm.request.headers.upsert({key: 'X-Order', value: 'one'})" });
    await addRule({ id: "two", url_pattern: "127.0.0.1/echo/order", request_script: "pm.request.headers.upsert({key: 'X-Order', value: pm.request.headers.get('X-Order') + ',two'})" });
    expect(JSON.parse((await curl(["-x", proxy, `${up.httpUrl}/echo/order`])).out).headers["x-order"]).toBe("one,two");
  });

  test("a failing script lets the traffic through unchanged and records the error", async () => {
    await addRule({ id: "boom", url_pattern: "127.0.0.1/echo/fail", request_script: "pm.request.headers.upsert({key: 'X-Half', value: '1'}); throw new Error('kaput');" });
    await addRule({ id: "loop", url_pattern: "127.0.0.1/status/202", response_script: "pm.response.code = 500; while (true) {}" });
    const r = await curl(["-x", proxy, `${up.httpUrl}/echo/fail`]);
    expect(JSON.parse(r.out).headers["x-half"]).toBeUndefined();
    const e = await waitForEntry("/echo/fail");
    expect(e.scripts[0].applied).toBe(false);
    expect(e.scripts[0].errors[0].message).toContain("kaput");
    expect(e.status_code).toBe(200);

    const t = await curl(["-i", "-x", proxy, `${up.httpUrl}/status/202`]);
    expect(t.out).toStartWith("HTTP/1.1 202 ");
    expect(t.out.endsWith("status 202")).toBe(true);
    const e2 = await waitForEntry("/status/202");
    expect(e2.scripts[0].applied).toBe(false);
    expect(e2.scripts[0].errors[0].message.toLowerCase()).toContain("time");
  });

  test("pm.environment and pm.globals carry over to the next request, pm.variables do not; a failed run's changes are dropped", async () => {
    await addRule({
      id: "env",
      url_pattern: "127.0.0.1/echo/env*",
      request_script: [
        "const n = (pm.environment.get('i14n') || 0) + 1;",
        "pm.environment.set('i14n', n);",
        "pm.globals.set('i14g', (pm.globals.get('i14g') || '') + 'x');",
        "pm.variables.set('i14local', (pm.variables.get('i14local') || 0) + 1);",
        "pm.request.headers.upsert({key: 'X-N', value: n + '/' + pm.globals.get('i14g') + '/' + pm.variables.get('i14local')});",
        "if (pm.request.url.getPath() === '/echo/env-fail') throw new Error('no');",
      ].join("\n"),
    });
    const seen = async (path: string) => JSON.parse((await curl(["-x", proxy, `${up.httpUrl}${path}`])).out).headers["x-n"];
    expect(await seen("/echo/env")).toBe("1/x/1");
    expect(await seen("/echo/env-fail")).toBeUndefined();
    expect(await seen("/echo/env")).toBe("2/xx/1");
  });

  test("a script that returns an unsendable header is an error, not a broken request", async () => {
    await addRule({ id: "crlf", url_pattern: "127.0.0.1/echo/crlf", request_script: "pm.request.headers.upsert({key: 'X-Bad', value: 'a\\r\\nInjected: 1'})" });
    const r = await curl(["-x", proxy, `${up.httpUrl}/echo/crlf`]);
    const seen = JSON.parse(r.out);
    expect(seen.headers["x-bad"]).toBeUndefined();
    expect(seen.headers.injected).toBeUndefined();
    const e = await waitForEntry("/echo/crlf");
    expect(e.scripts[0].applied).toBe(false);
    expect(e.scripts[0].errors[0].message).toContain("control characters");
  });

  test("pm.sendRequest goes through the proxy (captured as tapwire-script) and never re-triggers its own rule", async () => {
    await addRule({
      id: "chain",
      url_pattern: "127.0.0.1/echo/**",
      request_script: [
        "const res = await pm.sendRequest({url: pm.request.url.toString().replace('/echo/chain', '/echo/token'), method: 'POST', header: {'X-From': 'script'}, body: {mode: 'raw', raw: 'give'}});",
        "pm.request.headers.upsert({key: 'X-Token-Size', value: String(res.json().size)});",
      ].join("\n"),
    });
    const r = await curl(["-x", proxy, `${up.httpUrl}/echo/chain`]);
    expect(JSON.parse(r.out).headers["x-token-size"]).toBe("4");
    const sent = await waitForEntry("/echo/token");
    expect(sent.client_addr).toBe("tapwire-script");
    expect(sent.method).toBe("POST");
    // the rule matches /echo/token too, but a request its own script sent is not run through it again
    expect(sent.scripts).toBeUndefined();
    expect(up.seen.filter((s) => s.url.endsWith("/echo/token")).length).toBe(1);
  });

  test("a response over the 16 MB script cap streams to the client unchanged; the skip is recorded", async () => {
    await addRule({ id: "big", url_pattern: "127.0.0.1/bytes**", response_script: "pm.response.setBody('small')" });
    const n = 17 * 1024 * 1024;
    for (const q of [`n=${n}`, `n=${n}&chunked=1`]) {
      const r = await curl(["-x", proxy, "-o", "/dev/null", "-w", "%{http_code} %{size_download}", `${up.httpUrl}/bytes?${q}`]);
      expect(r.out).toBe(`200 ${n}`);
      const e = await waitForEntry(`/bytes?${q}`);
      expect(e.scripts[0].applied).toBe(false);
      expect(e.scripts[0].skipped).toContain("cap");
    }
    // under the cap it runs
    const small = await curl(["-x", proxy, `${up.httpUrl}/bytes?n=1000&chunked=1`]);
    expect(small.out).toBe("small");
  });
});

describe("a runaway script does not stall the proxy", () => {
  test("one request held by a looping script while 50 others complete with normal latency", async () => {
    await addRule({ id: "spin", url_pattern: "127.0.0.1/echo/spin", request_script: "while (true) {}" });
    const one = async (path: string) => {
      const t0 = performance.now();
      const res = await fetch(`${up.httpUrl}${path}`, { proxy } as RequestInit);
      await res.arrayBuffer();
      return { status: res.status, ms: performance.now() - t0 };
    };
    // baseline latency of the same requests with no script running
    const base: number[] = [];
    for (let i = 0; i < 20; i++) base.push((await one(`/echo/base${i}`)).ms);

    let spinDone = 0;
    const spin = one("/echo/spin").then((r) => {
      spinDone = performance.now();
      return r;
    });
    const lat: number[] = [];
    let lastDone = 0;
    for (let i = 0; i < 50; i++) {
      const r = await one(`/echo/other${i}`);
      expect(r.status).toBe(200);
      lat.push(r.ms);
      lastDone = performance.now();
    }
    const s = await spin;
    // the looping request was still held while all 50 went through, then went on unchanged (the script timed out)
    expect(spinDone === 0 || spinDone > lastDone).toBe(true);
    expect(s.status).toBe(200);
    expect(s.ms).toBeGreaterThanOrEqual(1400);
    lat.sort((a, b) => a - b);
    base.sort((a, b) => a - b);
    const p50 = lat[25]!;
    const max = lat[49]!;
    console.log(`latency while a script loops: p50 ${p50.toFixed(2)} ms, max ${max.toFixed(2)} ms; without: p50 ${base[10]!.toFixed(2)} ms`);
    expect(p50).toBeLessThan(Math.max(25, base[10]! * 5));
    expect(max).toBeLessThan(250);
  });
});
