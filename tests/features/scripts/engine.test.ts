/**
 * ScriptEngine: the pm API, run in real QuickJS inside real Workers (no mocks). Limits, escapes and isolation are
 * in sandbox.test.ts. Values a script computes are mostly checked by having it log them as JSON.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ScriptEngine } from "../../../src/features/scripts/engine/engine.ts";
import type { RunOptions, ScriptInput, ScriptOutput, ScriptRequest, ScriptResponse } from "../../../src/features/scripts/engine/types.ts";

const engine = new ScriptEngine({ workers: 2 });
beforeAll(() => engine.start(), 30_000);
afterAll(() => engine.close());

const REQUEST: ScriptRequest = {
  method: "POST",
  url: "https://api.example.com:8443/v1/users?page=2&tag=a&tag=b#top",
  headers: [
    ["Host", "api.example.com:8443"],
    ["Content-Type", "application/json"],
    ["X-Multi", "one"],
    ["x-multi", "two"],
    ["Cookie", "sid=s1; lang=en"],
  ],
  body: '{"name":"Ada"}',
};

const BODY = { data: { items: [{ id: 7, name: "first" }, { id: 8, name: "second" }], total: 2 }, token: "tok-123", ok: true };
const RESPONSE: ScriptResponse = {
  status: 200,
  statusText: "OK",
  headers: [
    ["Content-Type", "application/json; charset=utf-8"],
    ["Set-Cookie", "session=abc123; Path=/; HttpOnly"],
    ["Set-Cookie", "theme=dark"],
    ["X-Request-Id", "r-42"],
  ],
  body: JSON.stringify(BODY),
  responseTime: 87,
};

/** Runs a script; phase "test" with REQUEST and RESPONSE unless overridden. */
function run(script: string, over: Partial<ScriptInput> = {}, opts?: RunOptions): Promise<ScriptOutput> {
  const phase = over.phase ?? "test";
  return engine.run({ request: REQUEST, response: phase === "request" ? null : RESPONSE, ...over, phase, script }, opts);
}

/** The first console line, parsed as JSON (scripts log their findings with console.log(JSON.stringify(...))). */
function logged(out: ScriptOutput): unknown {
  expect(out.errors).toEqual([]);
  expect(out.console.length).toBeGreaterThan(0);
  return JSON.parse(out.console[0]!.message);
}

function clean(out: ScriptOutput): ScriptOutput {
  expect(out.errors).toEqual([]);
  expect(out.tests.filter((t) => !t.passed)).toEqual([]);
  return out;
}

describe("output shape", () => {
  test("a script that changes nothing returns the input, as plain objects", async () => {
    const out = await run("1 + 1", { environment: { e: "1" }, globals: { g: 2 } });
    expect(out.request).toEqual(REQUEST);
    expect(out.response).toEqual(RESPONSE);
    expect(out.request).not.toBe(REQUEST);
    expect(out.request.headers).not.toBe(REQUEST.headers);
    expect(out.environment).toEqual({ e: "1" });
    expect(out.globals).toEqual({ g: 2 });
    expect(out.variables).toEqual({});
    expect(out.collectionVariables).toEqual({});
    expect(out.console).toEqual([]);
    expect(out.tests).toEqual([]);
    expect(out.errors).toEqual([]);
    expect(typeof out.duration_ms).toBe("number");
    expect(out.duration_ms).toBeGreaterThanOrEqual(0);
  });

  test("request phase: response is null", async () => {
    const out = await run("console.log(typeof pm.response)", { phase: "request" });
    expect(out.response).toBeNull();
    expect(out.console[0]!.message).toBe("undefined");
  });

  test("top-level declarations stay local to each run (the compiled script is reused)", async () => {
    for (let i = 0; i < 4; i++) {
      const out = await run("const token = 'x'; let n = 1; function helper() { return n } console.log(token + helper())");
      expect(out.errors).toEqual([]);
      expect(out.console[0]!.message).toBe("x1");
    }
  });

  test("input that cannot run comes back with an error, run() does not reject", async () => {
    const out = await engine.run({ script: "1", phase: "bogus" as ScriptInput["phase"], request: REQUEST });
    expect(out.errors).toEqual([{ message: "Invalid script input: invalid phase 'bogus' (request, response or test)", stack: null, line: null }]);
    expect(out.request).toEqual(REQUEST);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const bad = await run("1", { environment: cyclic });
    expect(bad.errors[0]!.message).toStartWith("Invalid script input: environment cannot be passed to a script");
  });

  test("top-level await and return work", async () => {
    const out = await run("const v = await Promise.resolve(5); console.log(v); if (v === 5) return; console.log('not here')");
    expect(out.console.map((c) => c.message)).toEqual(["5"]);
    expect(out.errors).toEqual([]);
  });
});

describe("pm.request", () => {
  test("method, url parts and query", async () => {
    const out = await run(
      `const u = pm.request.url;
       console.log(JSON.stringify({
         method: pm.request.method, url: u.toString(), str: String(u), host: u.getHost(), path: u.getPath(),
         qs: u.getQueryString(), pwq: u.getPathWithQuery(), remote: u.getRemote(), protocol: u.protocol, port: u.port,
         hostParts: u.host, pathParts: u.path, hash: u.hash,
         page: u.query.get('page'), tag: u.query.get('tag'), hasPage: u.query.has('page'), hasNope: u.query.has('nope'),
         qobj: u.query.toObject(), count: u.query.count(),
       }))`,
      { phase: "request" },
    );
    expect(logged(out)).toEqual({
      method: "POST",
      url: REQUEST.url,
      str: REQUEST.url,
      host: "api.example.com",
      path: "/v1/users",
      qs: "page=2&tag=a&tag=b",
      pwq: "/v1/users?page=2&tag=a&tag=b",
      remote: "api.example.com:8443",
      protocol: "https",
      port: "8443",
      hostParts: ["api", "example", "com"],
      pathParts: ["v1", "users"],
      hash: "top",
      page: "2",
      tag: "b",
      hasPage: true,
      hasNope: false,
      qobj: { page: "2", tag: ["a", "b"] },
      count: 3,
    });
    expect(out.request.url).toBe(REQUEST.url);
  });

  test("query add, upsert, remove change the URL", async () => {
    const out = await run(
      `const q = pm.request.url.query;
       q.add({ key: 'new', value: 'a b&c' });
       q.upsert({ key: 'page', value: '3' });
       q.upsert({ key: 'size', value: '10' });
       q.remove('tag');`,
      { phase: "request" },
    );
    expect(out.errors).toEqual([]);
    expect(out.request.url).toBe("https://api.example.com:8443/v1/users?page=3&new=a%20b%26c&size=10#top");
  });

  test("assigning pm.request.url replaces it; an untouched URL stays byte for byte", async () => {
    const set = await run("pm.request.url = 'http://other.test:8080/a/b?x=1'; console.log(pm.request.url.getHost())", { phase: "request" });
    expect(set.errors).toEqual([]);
    expect(set.request.url).toBe("http://other.test:8080/a/b?x=1");
    expect(set.console[0]!.message).toBe("other.test");

    const odd = { ...REQUEST, url: "http://x.test/p?q={a|b}&e=%7B" };
    const read = await run("pm.request.url.getQueryString(); pm.request.url.getHost()", { phase: "request", request: odd });
    expect(read.request.url).toBe(odd.url);
  });

  test("addQueryParams / removeQueryParams and url.update", async () => {
    const out = await run("pm.request.addQueryParams('a=1&b=2'); pm.request.removeQueryParams(['page', 'tag']); pm.request.url.update(pm.request.url.toString().replace('/v1/', '/v2/'))", {
      phase: "request",
    });
    expect(out.errors).toEqual([]);
    expect(out.request.url).toBe("https://api.example.com:8443/v2/users?a=1&b=2#top");
  });

  test("headers: get (case-insensitive, last of repeated), has, toObject, each, count, all", async () => {
    const out = await run(
      `const h = pm.request.headers; const seen = [];
       h.each((x) => seen.push(x.key + '=' + x.value));
       console.log(JSON.stringify({
         ct: h.get('content-type'), CT: h.get('CONTENT-TYPE'), multi: h.get('X-MULTI'), missing: h.get('nope') === undefined,
         has: h.has('host'), hasValue: h.has('x-multi', 'one'), hasWrongValue: h.has('x-multi', 'three'), hasNot: h.has('nope'),
         obj: h.toObject(), count: h.count(), seen, first: h.all()[0].key, one: h.one('x-multi').value, str: h.idx(0).toString(),
       }))`,
      { phase: "request" },
    );
    expect(logged(out)).toEqual({
      ct: "application/json",
      CT: "application/json",
      multi: "two",
      missing: true,
      has: true,
      hasValue: true,
      hasWrongValue: false,
      hasNot: false,
      obj: { host: "api.example.com:8443", "content-type": "application/json", "x-multi": ["one", "two"], cookie: "sid=s1; lang=en" },
      count: 5,
      seen: ["Host=api.example.com:8443", "Content-Type=application/json", "X-Multi=one", "x-multi=two", "Cookie=sid=s1; lang=en"],
      first: "Host",
      one: "two",
      str: "Host: api.example.com:8443",
    });
  });

  test("headers: add, upsert, remove and the request helpers", async () => {
    const out = await run(
      `pm.request.headers.add({ key: 'X-Trace', value: 't1' });
       pm.request.headers.add('X-Line: from text');
       pm.request.headers.upsert({ key: 'content-type', value: 'text/plain' });
       pm.request.headers.upsert({ key: 'X-New', value: 5 });
       pm.request.headers.remove('x-multi');
       pm.request.addHeader({ key: 'X-Added', value: 'a' });
       pm.request.upsertHeader({ key: 'X-Added', value: 'b' });
       pm.request.removeHeader('cookie');
       console.log(JSON.stringify(pm.request.getHeaders()));`,
      { phase: "request" },
    );
    expect(out.errors).toEqual([]);
    expect(out.request.headers).toEqual([
      ["Host", "api.example.com:8443"],
      ["Content-Type", "text/plain"],
      ["X-Trace", "t1"],
      ["X-Line", "from text"],
      ["X-New", "5"],
      ["X-Added", "b"],
    ]);
    expect(JSON.parse(out.console[0]!.message)).toEqual({
      Host: "api.example.com:8443",
      "Content-Type": "text/plain",
      "X-Trace": "t1",
      "X-Line": "from text",
      "X-New": 5,
      "X-Added": "b",
    });
  });

  test("headers: reads and changes before any item is asked for agree with the items built afterwards", async () => {
    // get/has/add/upsert/remove/toObject/count work on the host's pairs until an item is needed (lists.sandbox.js)
    const out = await run(
      `const h = pm.request.headers;
       h.upsert({ key: 'x-multi', value: 'three' });
       h.upsert({ key: 'X-Num', value: 7 });
       h.add({ key: 'X-Off', value: 'no', disabled: true });
       h.add({ key: 'X-On', value: 'yes' });
       h.remove('cookie');
       const before = { multi: h.get('X-Multi'), num: h.get('x-num'), has: h.has('x-multi', 'one'), count: h.count(), obj: h.toObject() };
       const item = h.one('x-num');
       item.value = 8;
       console.log(JSON.stringify({ before, same: h.one('x-num') === item, after: h.get('X-NUM'), keys: h.map((i) => i.key), off: h.one('x-off').disabled === true }));`,
      { phase: "request" },
    );
    expect(logged(out)).toEqual({
      before: {
        multi: "three",
        num: 7,
        has: true,
        count: 7,
        obj: { host: "api.example.com:8443", "content-type": "application/json", "x-multi": ["one", "three"], "x-num": 7, "x-off": "no", "x-on": "yes" },
      },
      same: true,
      after: 8,
      keys: ["Host", "Content-Type", "X-Multi", "x-multi", "X-Num", "X-Off", "X-On"],
      off: true,
    });
    // the disabled header is left out; values go out as text; the host's own list is not changed in place
    expect(out.request.headers).toEqual([
      ["Host", "api.example.com:8443"],
      ["Content-Type", "application/json"],
      ["X-Multi", "one"],
      ["x-multi", "three"],
      ["X-Num", "8"],
      ["X-On", "yes"],
    ]);
    expect(REQUEST.headers).toHaveLength(5);
    const untouched = await run(`pm.request.headers.get('host'); pm.request.headers.upsert({ key: 'Host', value: 'api.example.com:8443' })`, { phase: "request" });
    expect(untouched.errors).toEqual([]);
    expect(untouched.request.headers).toEqual(REQUEST.headers);
  });

  test("body: raw, mode, set raw, update, isEmpty; method change", async () => {
    const read = await run("console.log(JSON.stringify([pm.request.body.mode, pm.request.body.raw, pm.request.body.isEmpty(), JSON.parse(pm.request.body.raw).name, String(pm.request.body)]))", {
      phase: "request",
    });
    expect(logged(read)).toEqual(["raw", REQUEST.body, false, "Ada", REQUEST.body]);
    expect(read.request.body).toBe(REQUEST.body);

    const setRaw = await run("const b = JSON.parse(pm.request.body.raw); b.name = 'Grace'; pm.request.body.raw = JSON.stringify(b); pm.request.method = 'PUT'", { phase: "request" });
    expect(setRaw.errors).toEqual([]);
    expect(setRaw.request.body).toBe('{"name":"Grace"}');
    expect(setRaw.request.method).toBe("PUT");

    const update = await run("pm.request.body.update('plain text')", { phase: "request" });
    expect(update.request.body).toBe("plain text");
    const updateObj = await run("pm.request.body.update({ mode: 'raw', raw: 'from object' })", { phase: "request" });
    expect(updateObj.request.body).toBe("from object");
    const assign = await run("pm.request.body = { mode: 'raw', raw: 'assigned' }", { phase: "request" });
    expect(assign.request.body).toBe("assigned");
    const other = await run("pm.request.body.update({ mode: 'formdata', formdata: [] })", { phase: "request" });
    expect(other.errors[0]!.message).toBe("TypeError: only raw bodies are supported (mode 'formdata')");
  });

  test("pm.request.to.have.header", async () => {
    const out = await run("pm.test('h', () => { pm.request.to.have.header('Content-Type', 'application/json'); pm.request.to.not.have.header('X-Nope'); })");
    clean(out);
    expect(out.tests).toEqual([{ name: "h", passed: true, error: null }]);
  });
});

describe("pm.response", () => {
  test("code, status, headers, responseTime, text, json, size, reason", async () => {
    const out = await run(
      `const r = pm.response;
       console.log(JSON.stringify({
         code: r.code, status: r.status, reason: r.reason(), rt: r.responseTime, ct: r.headers.get('content-type'),
         cookies: r.headers.getAll('set-cookie'), text: r.text(), id: r.json().data.items[1].id, size: r.size(), rsize: r.responseSize,
       }))`,
    );
    const body = RESPONSE.body;
    const size = logged(out) as { size: { body: number; header: number; total: number } };
    expect(size).toMatchObject({
      code: 200,
      status: "OK",
      reason: "OK",
      rt: 87,
      ct: "application/json; charset=utf-8",
      cookies: ["session=abc123; Path=/; HttpOnly", "theme=dark"],
      text: body,
      id: 8,
      rsize: body.length,
    });
    expect(size.size.body).toBe(body.length);
    expect(size.size.header).toBeGreaterThan(100);
    expect(size.size.total).toBe(size.size.body + size.size.header);
  });

  test("a missing reason phrase comes from the status code; json() of a non-JSON body throws JSONError", async () => {
    const out = await run("console.log(pm.response.status); try { pm.response.json() } catch (e) { console.log(e.name) }", {
      response: { status: 404, headers: [], body: "<html>" },
    });
    expect(out.console.map((c) => c.message)).toEqual(["Not Found", "JSONError"]);
  });

  test("assertions that pass", async () => {
    const out = await run(
      `pm.test('all', () => {
         pm.response.to.have.status(200);
         pm.response.to.have.status('OK');
         pm.response.to.not.have.status(404);
         pm.response.to.be.ok;
         pm.response.to.be.success;
         pm.response.to.not.be.error;
         pm.response.to.be.json;
         pm.response.to.be.withBody;
         pm.response.to.have.header('Content-Type');
         pm.response.to.have.header('x-request-id', 'r-42');
         pm.response.to.not.have.header('X-Missing');
         pm.response.to.have.jsonBody();
         pm.response.to.have.jsonBody('data.items[0].id');
         pm.response.to.have.jsonBody('data.items[1].name', 'second');
         pm.response.to.not.have.jsonBody('data.nope');
         pm.response.to.have.body(${JSON.stringify(RESPONSE.body)});
         pm.response.to.have.body(/tok-123/);
         pm.response.to.have.body(${JSON.stringify(BODY)});
         pm.response.to.have.statusCode(200);
         pm.response.to.have.statusReason('OK');
         pm.expect(pm.response.code).to.be.oneOf([200, 201]);
       });`,
    );
    clean(out);
    expect(out.tests).toHaveLength(1);
  });

  test("assertions that fail give Postman's messages", async () => {
    const checks: [string, string][] = [
      ["pm.response.to.have.status(201)", "expected response to have status code 201 but got 200"],
      ["pm.response.to.have.status('Created')", "expected response to have status reason 'Created' but got 'OK'"],
      ["pm.response.to.not.have.status(200)", "expected response to not have status code 200"],
      ["pm.response.to.have.header('X-Nope')", "expected response to have header with key 'X-Nope'"],
      ["pm.response.to.not.have.header('content-type')", "expected response to not have header with key 'content-type'"],
      ["pm.response.to.have.header('X-Request-Id', 'r-1')", "expected 'X-Request-Id' response header to be 'r-1' but got 'r-42'"],
      ["pm.response.to.have.body('nope')", "expected response body to equal 'nope' but got "],
      ["pm.response.to.have.jsonBody('data.items[0].id', 9)", 'expected response body json at "data.items[0].id" to contain 9 but got 7'],
      ["pm.response.to.be.clientError", "expected response code to be 4XX but found 200"],
      ["pm.response.to.be.notFound", "expected response to have status code 404 but got 200"],
    ];
    const out = await run(checks.map(([c], i) => `pm.test('t${i}', () => { ${c} });`).join("\n"));
    expect(out.errors).toEqual([]);
    expect(out.tests).toHaveLength(checks.length);
    checks.forEach(([, message], i) => {
      expect(out.tests[i]!.passed).toBe(false);
      expect(out.tests[i]!.error!.startsWith(message)).toBe(true);
    });
  });

  test("ok means status 200 on a response (as in Postman); success means 2XX", async () => {
    const out = await run("pm.test('ok', () => pm.response.to.be.ok); pm.test('success', () => pm.response.to.be.success)", {
      response: { ...RESPONSE, status: 201, statusText: "Created" },
    });
    expect(out.tests).toEqual([
      { name: "ok", passed: false, error: "expected response to have status code 200 but got 201" },
      { name: "success", passed: true, error: null },
    ]);
  });

  test("response phase: code, status, headers and body can be changed", async () => {
    const out = await run(
      `pm.response.code = 503;
       pm.response.headers.upsert({ key: 'Retry-After', value: '30' });
       pm.response.headers.upsert({ key: 'content-type', value: 'application/problem+json' });
       pm.response.headers.remove('set-cookie');
       pm.response.setBody({ error: 'maintenance', was: pm.response.json().token });`,
      { phase: "response" },
    );
    expect(out.errors).toEqual([]);
    expect(out.response).toEqual({
      status: 503,
      statusText: "Service Unavailable",
      headers: [
        ["Content-Type", "application/problem+json"],
        ["X-Request-Id", "r-42"],
        ["Retry-After", "30"],
      ],
      body: '{"error":"maintenance","was":"tok-123"}',
      responseTime: 87,
    });
    const reason = await run("pm.response.code = 299; pm.response.status = 'Fine'; pm.response.setBody('text body')", { phase: "response" });
    expect(reason.response).toMatchObject({ status: 299, statusText: "Fine", body: "text body" });
  });

  test("pm.cookies: Set-Cookie of the response; the Cookie header in the request phase", async () => {
    const res = await run("console.log(JSON.stringify([pm.cookies.get('session'), pm.cookies.has('theme'), pm.cookies.has('nope'), pm.cookies.toObject(), pm.cookies.count()]))");
    expect(logged(res)).toEqual(["abc123", true, false, { session: "abc123", theme: "dark" }, 2]);
    const req = await run("console.log(JSON.stringify([pm.cookies.get('sid'), pm.cookies.get('lang')]))", { phase: "request" });
    expect(logged(req)).toEqual(["s1", "en"]);
  });
});

describe("variables", () => {
  const scopes = {
    variables: { local: "L", shared: "from-local" },
    environment: { env: "E", shared: "from-env", host: "api.example.com" },
    collectionVariables: { coll: "C", shared: "from-coll" },
    globals: { glob: "G", shared: "from-glob", nested: "{{host}}/v1" },
  };

  test("pm.variables resolves local > environment > collection > globals; replaceIn", async () => {
    const out = await run(
      `console.log(JSON.stringify({
         shared: pm.variables.get('shared'), env: pm.variables.get('env'), coll: pm.variables.get('coll'), glob: pm.variables.get('glob'),
         has: pm.variables.has('coll'), hasNot: pm.variables.has('nope'), missing: pm.variables.get('nope') === undefined,
         all: pm.variables.toObject(),
         replaced: pm.variables.replaceIn('https://{{nested}}/{{local}}?e={{env}}&x={{unknown}}'),
         envOnly: pm.environment.replaceIn('{{env}}-{{local}}'),
       }))`,
      scopes,
    );
    expect(logged(out)).toEqual({
      shared: "from-local",
      env: "E",
      coll: "C",
      glob: "G",
      has: true,
      hasNot: false,
      missing: true,
      all: { glob: "G", shared: "from-local", nested: "{{host}}/v1", coll: "C", env: "E", host: "api.example.com", local: "L" },
      replaced: "https://api.example.com/v1/L?e=E&x={{unknown}}",
      envOnly: "E-{{local}}",
    });
    // nothing was changed: every scope comes back as it came in
    expect(out.variables).toEqual(scopes.variables);
    expect(out.environment).toEqual(scopes.environment);
    expect(out.collectionVariables).toEqual(scopes.collectionVariables);
    expect(out.globals).toEqual(scopes.globals);
  });

  test("set, unset, clear, has, toObject on every scope; the final state is returned", async () => {
    const out = await run(
      `pm.variables.set('local2', 'x'); pm.variables.unset('local');
       pm.environment.set('token', 'abc'); pm.environment.set('count', 3); pm.environment.unset('shared');
       pm.collectionVariables.set({ a: '1', b: { deep: true } });
       pm.globals.clear(); pm.globals.set('only', 'one');
       console.log(JSON.stringify([pm.environment.has('token'), pm.environment.get('count'), pm.environment.toObject(), pm.globals.toObject(), pm.variables.get('token')]));`,
      scopes,
    );
    expect(logged(out)).toEqual([true, 3, { env: "E", host: "api.example.com", token: "abc", count: 3 }, { only: "one" }, "abc"]);
    expect(out.variables).toEqual({ shared: "from-local", local2: "x" });
    expect(out.environment).toEqual({ env: "E", host: "api.example.com", token: "abc", count: 3 });
    expect(out.collectionVariables).toEqual({ coll: "C", shared: "from-coll", a: "1", b: { deep: true } });
    expect(out.globals).toEqual({ only: "one" });
  });

  test("dynamic variables, pm.environment.name, pm.iterationData", async () => {
    const out = await run(
      `console.log(JSON.stringify([pm.variables.replaceIn('{{$guid}}'), pm.variables.replaceIn('{{$timestamp}}'), pm.variables.replaceIn('{{$randomInt}}'),
         pm.environment.name, pm.iterationData.get('x') === undefined, pm.iterationData.has('x'), pm.iterationData.toObject()]))`,
      { info: { environmentName: "staging" } },
    );
    const [guid, ts, int, name, iterUndefined, iterHas, iterObj] = logged(out) as [string, string, string, string, boolean, boolean, object];
    expect(guid).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(Math.abs(Number(ts) - Date.now() / 1000)).toBeLessThan(60);
    expect(Number(int)).toBeGreaterThanOrEqual(0);
    expect(name).toBe("staging");
    expect(iterUndefined).toBe(true);
    expect(iterHas).toBe(false);
    expect(iterObj).toEqual({});
    const noName = await run("console.log(JSON.stringify(pm.environment.name))");
    expect(noName.console[0]!.message).toBe('""');
  });
});

describe("pm.test and pm.expect", () => {
  test("sync, async and done-style tests; a failing test does not stop the script", async () => {
    const out = await run(
      `pm.test('sync pass', () => pm.expect(1).to.equal(1));
       pm.test('sync fail', () => pm.expect(200).to.equal(201));
       pm.test('async pass', async () => { const v = await Promise.resolve(3); pm.expect(v).to.equal(3); });
       pm.test('async fail', async () => { await null; pm.expect({ a: 1 }).to.have.property('b'); });
       pm.test('done pass', (done) => { setTimeout(() => { pm.expect(true).to.be.true; done(); }, 5); });
       pm.test('done fail', (done) => { done(new Error('bad thing')); });
       pm.test('throws TypeError', () => { null.x; });
       console.log('after the tests');`,
    );
    expect(out.errors).toEqual([]);
    expect(out.console.map((c) => c.message)).toEqual(["after the tests"]);
    expect(out.tests).toEqual([
      { name: "sync pass", passed: true, error: null },
      { name: "sync fail", passed: false, error: "expected 200 to equal 201" },
      { name: "async pass", passed: true, error: null },
      { name: "async fail", passed: false, error: "expected { a: 1 } to have property 'b'" },
      { name: "done pass", passed: true, error: null },
      { name: "done fail", passed: false, error: "Error: bad thing" },
      { name: "throws TypeError", passed: false, error: "TypeError: cannot read property 'x' of null" },
    ]);
  });

  test("pm.expect chains as Postman users write them (all passing)", async () => {
    const out = await run(
      `pm.test('chains', () => {
         pm.expect(1).to.equal(1); pm.expect({ a: [1] }).to.eql({ a: [1] }); pm.expect({ a: 1 }).to.deep.equal({ a: 1 });
         pm.expect('hello').to.include('ell'); pm.expect([1, 2]).to.contain(2); pm.expect({ a: 1, b: 2 }).to.include({ a: 1 });
         pm.expect({ a: 1 }).to.have.property('a'); pm.expect({ a: 1 }).to.have.property('a', 1);
         pm.expect([1, 2, 3]).to.have.lengthOf(3); pm.expect('abc').to.have.lengthOf(3);
         pm.expect('s').to.be.a('string'); pm.expect([]).to.be.an('array'); pm.expect({}).to.be.an('object'); pm.expect(1).to.be.a('number');
         pm.expect(5).to.be.above(1); pm.expect(5).to.be.below(10); pm.expect(5).to.be.at.least(5); pm.expect(5).to.be.at.most(5);
         pm.expect('abc-123').to.match(/^abc-\\d+$/);
         pm.expect(1).to.be.ok; pm.expect(true).to.be.true; pm.expect(false).to.be.false; pm.expect(null).to.be.null;
         pm.expect(undefined).to.be.undefined; pm.expect([]).to.be.empty; pm.expect('').to.be.empty; pm.expect({}).to.be.empty;
         pm.expect(2).to.not.equal(3); pm.expect('x').to.not.be.empty; pm.expect(5).to.be.oneOf([4, 5]);
         pm.expect({ a: 1, b: 2 }).to.have.keys('a', 'b'); pm.expect({ a: 1, b: 2 }).to.have.all.keys(['a', 'b']);
         pm.expect(0).to.exist; pm.expect(null).to.not.exist;
       });`,
    );
    clean(out);
  });

  test("pm.expect failures carry chai's messages", async () => {
    const checks: [string, string][] = [
      ["pm.expect(200).to.equal(201)", "expected 200 to equal 201"],
      ["pm.expect({ a: 1 }).to.have.property('b')", "expected { a: 1 } to have property 'b'"],
      ["pm.expect({ a: 1 }).to.have.property('a', 2)", "expected { a: 1 } to have property 'a' of 2, but got 1"],
      ["pm.expect([1, 2]).to.have.lengthOf(3)", "expected [ 1, 2 ] to have a length of 3 but got 2"],
      ["pm.expect('abc').to.include('x')", "expected 'abc' to include 'x'"],
      ["pm.expect(5).to.be.above(10)", "expected 5 to be above 10"],
      ["pm.expect(9).to.be.below(5)", "expected 9 to be below 5"],
      ["pm.expect(3).to.be.at.least(5)", "expected 3 to be at least 5"],
      ["pm.expect(9).to.be.at.most(5)", "expected 9 to be at most 5"],
      ["pm.expect('x').to.be.a('number')", "expected 'x' to be a number"],
      ["pm.expect(5).to.be.oneOf([1, 2])", "expected 5 to be one of [ 1, 2 ]"],
      ["pm.expect({ a: 1 }).to.have.keys('a', 'b')", "expected { a: 1 } to have keys 'a', and 'b'"],
      ["pm.expect(null).to.exist", "expected null to exist"],
      ["pm.expect([]).to.not.be.empty", "expected [] not to be empty"],
      ["pm.expect('abc').to.match(/x/)", "expected 'abc' to match /x/"],
      ["pm.expect({ a: [1] }).to.deep.equal({ a: [2] })", "expected { a: [ 1 ] } to deeply equal { a: [ 2 ] }"],
      ["pm.expect(1).to.be.true", "expected 1 to be true"],
      ["pm.expect(1).to.be.null", "expected 1 to be null"],
      ["pm.expect(1).to.not.equal(1)", "expected 1 to not equal 1"],
    ];
    const out = await run(checks.map(([c], i) => `pm.test('t${i}', () => { ${c} });`).join("\n"));
    expect(out.errors).toEqual([]);
    expect(out.tests.map((t) => t.error)).toEqual(checks.map(([, m]) => m));
  });

  test("a mistyped chain is an error, not a silent pass", async () => {
    const out = await run("pm.test('typo', () => pm.expect(1).to.be.tru)");
    expect(out.tests[0]).toEqual({ name: "typo", passed: false, error: 'Error: Invalid Chai property: tru. Did you mean "true"?' });
  });

  test("an assertion outside pm.test throws: reported in errors with its line, the rest of the script does not run", async () => {
    const out = await run("console.log('before');\n\npm.expect(pm.response.code).to.equal(404);\nconsole.log('after');");
    expect(out.console.map((c) => c.message)).toEqual(["before"]);
    expect(out.errors).toHaveLength(1);
    expect(out.errors[0]!.message).toBe("AssertionError: expected 200 to equal 404");
    expect(out.errors[0]!.line).toBe(3);
    expect(out.errors[0]!.stack).toContain("script.js:3");
  });

  test("pm.test.skip neither runs nor reports; pm.test returns pm", async () => {
    const out = await run("pm.test.skip('skipped', () => { throw new Error('ran') }); console.log(pm.test('x', () => {}) === pm)");
    expect(out.tests).toEqual([{ name: "x", passed: true, error: null }]);
    expect(out.console[0]!.message).toBe("true");
  });
});

describe("console, pm.info, globals", () => {
  test("levels, formatting and timestamps", async () => {
    const before = Date.now();
    const out = await run(
      "console.log('text', 1, true, null, undefined); console.info({ a: 1, b: [1, 'x'] }); console.warn([1, 2]); console.error(new TypeError('boom')); console.log(new Map([[1, 'a']]), new Set([1]), function named() {}); const c = {}; c.self = c; console.log(c)",
    );
    expect(out.console.map((c) => [c.level, c.message])).toEqual([
      ["log", "text 1 true null undefined"],
      ["info", '{"a":1,"b":[1,"x"]}'],
      ["warn", "[1,2]"],
      ["error", "TypeError: boom"],
      ["log", 'Map(1) { 1 => "a" } Set(1) { 1 } [Function: named]'],
      ["log", "{ self: [Circular] }"],
    ]);
    for (const c of out.console) {
      expect(c.ts).toBeGreaterThanOrEqual(before - 1000);
      expect(c.ts).toBeLessThanOrEqual(Date.now() + 1000);
    }
  });

  test("console output is capped at 1000 lines per run", async () => {
    const out = await run("for (let i = 0; i < 1500; i++) console.log(i); console.log('x'.repeat(20000))");
    expect(out.console).toHaveLength(1001);
    expect(out.console[999]!.message).toBe("999");
    expect(out.console[1000]).toMatchObject({ level: "warn", message: "… 501 more console lines dropped (at most 1000 per run)" });
    const long = await run("console.log('x'.repeat(20000))");
    expect(long.console[0]!.message).toBe("x".repeat(10000) + "… (truncated)");
  });

  test("pm.info, with eventName from the phase", async () => {
    const req = await run("console.log(JSON.stringify(pm.info))", { phase: "request", info: { requestName: "Create user" } });
    expect(logged(req)).toEqual({ eventName: "prerequest", requestName: "Create user", requestId: "", iteration: 0, iterationCount: 1 });
    const res = await run("console.log(pm.info.eventName)", { phase: "response" });
    expect(res.console[0]!.message).toBe("test");
    const given = await run("console.log(pm.info.eventName)", { info: { eventName: "custom" } });
    expect(given.console[0]!.message).toBe("custom");
  });

  test("atob, btoa, JSON, Math, Date; setTimeout within the run", async () => {
    const out = await run(
      "console.log(JSON.stringify([btoa('user:pass'), atob('dXNlcjpwYXNz'), JSON.parse('[1]'), Math.max(1, 3), typeof Date.now(), new Date(0).toISOString()])); setTimeout((x) => console.log('timer', x), 10, 'arg'); const id = setTimeout(() => console.log('cleared'), 5); clearTimeout(id); let n = 0; const iv = setInterval(() => { if (++n === 3) { clearInterval(iv); console.log('interval done'); } }, 1);",
    );
    expect(out.errors).toEqual([]);
    expect(JSON.parse(out.console[0]!.message)).toEqual(["dXNlcjpwYXNz", "user:pass", [1], 3, "number", "1970-01-01T00:00:00.000Z"]);
    expect(out.console.slice(1).map((c) => c.message).sort()).toEqual(["interval done", "timer arg"]);
  });
});

describe("errors", () => {
  test("a syntax error reports its line", async () => {
    const out = await run("const a = 1;\nconst b = 2;\nconst c = ;\n");
    expect(out.errors).toHaveLength(1);
    expect(out.errors[0]!.message).toMatch(/^SyntaxError: .+ \(line 3\)$/);
    expect(out.errors[0]!.line).toBe(3);
    expect(out.request).toEqual(REQUEST);
  });

  test("a thrown error reports message, stack and line; changes made before it are kept", async () => {
    const out = await run("pm.request.headers.add({ key: 'X-Before', value: '1' });\nfunction inner() {\n  throw new RangeError('went wrong');\n}\ninner();", {
      phase: "request",
    });
    expect(out.errors).toEqual([{ message: "RangeError: went wrong", stack: expect.stringContaining("script.js:3") as unknown as string, line: 3 }]);
    expect(out.request.headers).toContainEqual(["X-Before", "1"]);
  });

  test("throwing a non-Error, and an error inside a timer callback", async () => {
    const thrown = await run("throw 'plain string'");
    expect(thrown.errors[0]!.message).toBe("Uncaught plain string");
    const timer = await run("setTimeout(() => { throw new Error('in timer') }, 1)");
    expect(timer.errors[0]!.message).toBe("Error: in timer");
  });
});

describe("pm.sendRequest", () => {
  let server: ReturnType<typeof Bun.serve>;
  let base = "";
  const sendRequest = async (req: ScriptRequest): Promise<ScriptResponse> => {
    const res = await fetch(req.url, { method: req.method, headers: req.headers, body: req.method === "GET" || req.method === "HEAD" ? undefined : req.body });
    return { status: res.status, statusText: res.statusText, headers: [...res.headers], body: await res.text() };
  };

  beforeAll(() => {
    server = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      async fetch(req) {
        const url = new URL(req.url);
        if (url.pathname === "/login" && req.method === "POST") {
          const creds = (await req.json()) as { user?: string };
          return Response.json({ access_token: `token-for-${creds.user}`, expires_in: 3600 }, { headers: { "X-Login": "yes" } });
        }
        if (url.pathname === "/me") {
          const auth = req.headers.get("authorization");
          if (auth !== "Bearer token-for-ada") return Response.json({ error: "unauthorized" }, { status: 401 });
          return Response.json({ id: 1, name: "Ada" });
        }
        if (url.pathname === "/echo") {
          return Response.json({ method: req.method, headers: Object.fromEntries(req.headers), body: await req.text(), query: url.search });
        }
        return new Response("not found", { status: 404 });
      },
    });
    base = `http://127.0.0.1:${server.port}`;
  });
  afterAll(() => server.stop(true));

  test("callback form with a URL string", async () => {
    const out = await run(`pm.sendRequest('${base}/echo?x=1', (err, res) => { console.log(JSON.stringify([err, res.code, res.status, res.json().method, res.json().query, res.headers.get('Content-Type')])); })`, {}, { sendRequest });
    expect(logged(out)).toEqual([null, 200, "OK", "GET", "?x=1", "application/json;charset=utf-8"]);
  });

  test("promise form with a request object: method, header list and raw body", async () => {
    const out = await run(
      `const res = await pm.sendRequest({ url: '${base}/echo', method: 'POST', header: [{ key: 'X-One', value: '1' }, { key: 'Content-Type', value: 'text/plain' }], body: { mode: 'raw', raw: 'payload' } });
       const j = res.json();
       console.log(JSON.stringify([res.code, j.method, j.headers['x-one'], j.headers['content-type'], j.body]));
       pm.test('echo', () => res.to.have.status(200));`,
      {},
      { sendRequest },
    );
    expect(logged(out)).toEqual([200, "POST", "1", "text/plain", "payload"]);
    expect(out.tests).toEqual([{ name: "echo", passed: true, error: null }]);
  });

  test("header as an object, urlencoded body", async () => {
    const out = await run(
      `const res = await pm.sendRequest({ url: '${base}/echo', method: 'put', header: { 'X-Obj': 'o' }, body: { mode: 'urlencoded', urlencoded: [{ key: 'a', value: '1 2' }, { key: 'b', value: 'x&y' }] } });
       const j = res.json(); console.log(JSON.stringify([j.method, j.headers['x-obj'], j.headers['content-type'], j.body]));`,
      {},
      { sendRequest },
    );
    expect(logged(out)).toEqual(["PUT", "o", "application/x-www-form-urlencoded", "a=1%202&b=x%26y"]);
  });

  test("chaining: log in, keep the token in the environment, call an authorised endpoint", async () => {
    const out = await run(
      `pm.sendRequest({ url: '${base}/login', method: 'POST', header: { 'Content-Type': 'application/json' }, body: { mode: 'raw', raw: JSON.stringify({ user: 'ada' }) } }, (err, res) => {
         pm.environment.set('access_token', res.json().access_token);
         pm.sendRequest({ url: '${base}/me', header: { Authorization: 'Bearer ' + pm.environment.get('access_token') } }, (err2, me) => {
           pm.test('me', () => { pm.expect(me.code).to.equal(200); pm.expect(me.json().name).to.equal('Ada'); });
         });
       });`,
      { phase: "request" },
      { sendRequest },
    );
    clean(out);
    expect(out.tests).toEqual([{ name: "me", passed: true, error: null }]);
    expect(out.environment).toEqual({ access_token: "token-for-ada" });
  });

  test("errors: a failing sender, an unsupported scheme, and no sender at all", async () => {
    const failing = await run("pm.sendRequest('http://127.0.0.1:9/', (err, res) => console.log(err.message, res === undefined))", {}, {
      sendRequest: () => Promise.reject(new Error("connect ECONNREFUSED")),
    });
    expect(failing.console[0]!.message).toBe("connect ECONNREFUSED true");

    const scheme = await run("try { await pm.sendRequest('file:///etc/passwd') } catch (e) { console.log(e.message) }", {}, { sendRequest });
    expect(scheme.console[0]!.message).toBe("pm.sendRequest: only http:// and https:// URLs can be sent (got 'file:///etc/passwd')");

    const none = await run(`pm.sendRequest('${base}/echo', (err) => console.log(err.message))`);
    expect(none.console[0]!.message).toBe("pm.sendRequest is not available here (this run was given no way to send requests)");
  });

  test("an exception in a callback is a script error", async () => {
    const out = await run(`pm.sendRequest('${base}/echo', () => { throw new Error('in callback') })`, {}, { sendRequest });
    expect(out.errors[0]!.message).toBe("Error: in callback");
  });
});

describe("scripts as Postman users write them", () => {
  test("1. extract an auth token into an environment variable", async () => {
    const out = await run(
      `var jsonData = pm.response.json();
       pm.test("Token is present", function () {
           pm.expect(jsonData).to.have.property("token");
           pm.expect(jsonData.token).to.be.a("string").and.not.empty;
       });
       pm.environment.set("authToken", jsonData.token);`,
    );
    clean(out);
    expect(out.environment).toEqual({ authToken: "tok-123" });
  });

  test("2. JSON schema-ish checks on the body", async () => {
    const out = await run(
      `const body = pm.response.json();
       pm.test("Body has the expected shape", () => {
           pm.expect(body).to.be.an("object").that.has.all.keys("data", "token", "ok");
           pm.expect(body.data.items).to.be.an("array").with.lengthOf(body.data.total);
           body.data.items.forEach((item) => {
               pm.expect(item).to.have.property("id").that.is.a("number");
               pm.expect(item.name).to.be.a("string");
           });
       });
       pm.test("Items are sorted by id", () => {
           const ids = body.data.items.map((i) => i.id);
           pm.expect(ids).to.eql([...ids].sort((a, b) => a - b));
       });`,
    );
    clean(out);
    expect(out.tests.map((t) => t.name)).toEqual(["Body has the expected shape", "Items are sorted by id"]);
  });

  test("3. status and header assertions", async () => {
    const out = await run(
      `pm.test("Status code is 200", function () { pm.response.to.have.status(200); });
       pm.test("Content-Type is present", function () { pm.response.to.have.header("Content-Type"); });
       pm.test("Content-Type is JSON", function () { pm.expect(pm.response.headers.get("Content-Type")).to.include("application/json"); });
       pm.test("Response time is less than 200ms", function () { pm.expect(pm.response.responseTime).to.be.below(200); });
       pm.test("Successful POST request", function () { pm.expect(pm.response.code).to.be.oneOf([201, 202]); });`,
    );
    expect(out.errors).toEqual([]);
    expect(out.tests.map((t) => [t.name, t.passed])).toEqual([
      ["Status code is 200", true],
      ["Content-Type is present", true],
      ["Content-Type is JSON", true],
      ["Response time is less than 200ms", true],
      ["Successful POST request", false],
    ]);
    expect(out.tests[4]!.error).toBe("expected 200 to be one of [ 201, 202 ]");
  });

  test("4. pre-request: build an Authorization header from variables with replaceIn", async () => {
    const out = await run(
      `const user = pm.environment.get("username");
       const pass = pm.environment.get("password");
       pm.request.headers.upsert({ key: "Authorization", value: "Basic " + btoa(user + ":" + pass) });
       pm.request.headers.add({ key: "X-Api-Version", value: pm.variables.replaceIn("{{apiVersion}}") });
       pm.request.url = pm.variables.replaceIn("{{baseUrl}}/users/{{userId}}");`,
      { phase: "request", environment: { username: "ada", password: "s3cret", baseUrl: "https://staging.example.com" }, globals: { apiVersion: "2024-01" }, variables: { userId: "42" } },
    );
    expect(out.errors).toEqual([]);
    expect(out.request.headers).toContainEqual(["Authorization", `Basic ${Buffer.from("ada:s3cret").toString("base64")}`]);
    expect(out.request.headers).toContainEqual(["X-Api-Version", "2024-01"]);
    expect(out.request.url).toBe("https://staging.example.com/users/42");
  });

  test("5. pre-request: timestamp and request id headers", async () => {
    const out = await run(
      `const timestamp = Math.floor(Date.now() / 1000);
       pm.environment.set("timestamp", timestamp);
       pm.request.headers.add({ key: "X-Timestamp", value: String(timestamp) });
       pm.request.headers.add({ key: "X-Request-Id", value: pm.variables.replaceIn("{{$guid}}") });`,
      { phase: "request" },
    );
    expect(out.errors).toEqual([]);
    const ts = out.request.headers.find(([k]) => k === "X-Timestamp")![1];
    expect(Math.abs(Number(ts) - Date.now() / 1000)).toBeLessThan(60);
    expect(out.environment.timestamp).toBe(Number(ts));
    expect(out.request.headers.find(([k]) => k === "X-Request-Id")![1]).toMatch(/^[0-9a-f-]{36}$/);
  });

  test("6. loop over items and test each one", async () => {
    const out = await run(
      `const items = pm.response.json().data.items;
       for (const item of items) {
           pm.test("Item " + item.id + " has a name", () => { pm.expect(item.name).to.be.a("string").and.have.length.above(0); });
       }
       pm.test("There are two items", () => pm.expect(items).to.have.lengthOf(2));`,
    );
    clean(out);
    expect(out.tests.map((t) => t.name)).toEqual(["Item 7 has a name", "Item 8 has a name", "There are two items"]);
  });

  test("7. keep a header and a cookie in collection variables", async () => {
    const out = await run(
      `pm.collectionVariables.set("requestId", pm.response.headers.get("X-Request-Id"));
       pm.collectionVariables.set("session", pm.cookies.get("session"));
       pm.test("Session cookie set", () => pm.expect(pm.cookies.has("session")).to.be.true);`,
    );
    clean(out);
    expect(out.collectionVariables).toEqual({ requestId: "r-42", session: "abc123" });
  });

  test("8. branch on the status code", async () => {
    const script = `if (pm.response.code === 401) {
           pm.test("Error message explains", () => pm.expect(pm.response.json().error).to.equal("unauthorized"));
           pm.environment.unset("authToken");
       } else {
           pm.test("Success", () => pm.response.to.be.success);
       }`;
    const denied = await run(script, { response: { status: 401, headers: [["Content-Type", "application/json"]], body: '{"error":"unauthorized"}' }, environment: { authToken: "old" } });
    clean(denied);
    expect(denied.tests.map((t) => t.name)).toEqual(["Error message explains"]);
    expect(denied.environment).toEqual({});
    const ok = await run(script, { environment: { authToken: "old" } });
    clean(ok);
    expect(ok.tests.map((t) => t.name)).toEqual(["Success"]);
    expect(ok.environment).toEqual({ authToken: "old" });
  });

  test("9. rewrite a JSON response in the response phase", async () => {
    const out = await run(
      `const body = pm.response.json();
       body.data.items = body.data.items.filter((i) => i.id !== 8);
       body.data.total = body.data.items.length;
       body.rewrittenBy = "tapwire";
       pm.response.setBody(body);
       pm.response.headers.upsert({ key: "X-Rewritten", value: "1" });`,
      { phase: "response" },
    );
    expect(out.errors).toEqual([]);
    expect(JSON.parse(out.response!.body)).toEqual({ data: { items: [{ id: 7, name: "first" }], total: 1 }, token: "tok-123", ok: true, rewrittenBy: "tapwire" });
    expect(out.response!.headers).toContainEqual(["X-Rewritten", "1"]);
  });

  test("10. count runs in a global and log progress (var at top level, no declarations leaking)", async () => {
    const script = `var count = Number(pm.globals.get("runs") || 0) + 1;
       pm.globals.set("runs", count);
       console.log("run number " + count);`;
    let globals: Record<string, unknown> = {};
    for (let i = 1; i <= 3; i++) {
      const out = await run(script, { globals });
      expect(out.errors).toEqual([]);
      expect(out.console[0]!.message).toBe(`run number ${i}`);
      globals = out.globals;
    }
    expect(globals).toEqual({ runs: 3 });
  });

  test("11. sloppy-mode implicit globals, as old Postman snippets use them", async () => {
    const out = await run(
      `jsonData = JSON.parse(responseBodyText = pm.response.text());
       tests = {};
       pm.test("has data", function () { pm.expect(jsonData.data).to.exist; });`,
    );
    clean(out);
  });
});
