import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Socket } from "bun";
import { parseResponseHead } from "../../../src/core/http1/parse.ts";
import type { MockFeature } from "../../../src/features/mock/feature.ts";
import { startService } from "../../helpers/service.ts";
import { curl } from "../../helpers/upstream.ts";

/** A response body as JSON (typed loosely, for assertions). */
async function json(r: Response | Promise<Response>): Promise<any> {
  return await (await r).json();
}

type Svc = Awaited<ReturnType<typeof startService>>;
let svc: Svc;
let port: number;
let base: string;

const enc = new TextEncoder();
const dec = new TextDecoder();
const latin1 = (b: Uint8Array) => Buffer.from(b).toString("latin1");
const JSON_HEADERS = { "content-type": "application/json" };

async function api(path: string, method = "GET", body?: unknown): Promise<any> {
  const r = await svc.call(path, body === undefined ? { method } : { method, body: JSON.stringify(body), headers: JSON_HEADERS });
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
  return r.status === 204 ? null : await json(r);
}

/** Replaces every mock rule by `rules`, in order, and turns the master flag on. */
async function setRules(rules: Record<string, unknown>[]): Promise<void> {
  for (const r of (await api("/api/v1/mock")).rules) await api(`/api/v1/mock/rules/${encodeURIComponent(r.id)}`, "DELETE");
  for (const r of rules) await api("/api/v1/mock/rules", "POST", r);
  await api("/api/v1/mock/enabled", "PUT", { enabled: true });
}

interface ParsedResponse {
  status: number;
  reason: string;
  headers: [string, string][];
  body: Uint8Array;
  /** the bytes of the whole response as received */
  raw: Uint8Array;
}

/**
 * Splits a byte stream into complete responses (1xx interim responses are kept as their own entries).
 * `bodyless[i]` tells that the i-th final response answers a HEAD. Returns null while a response is incomplete.
 */
function splitResponses(buf: Uint8Array, bodyless: boolean[] = []): ParsedResponse[] | null {
  const out: ParsedResponse[] = [];
  let off = 0;
  let finals = 0;
  while (off < buf.length) {
    const rest = buf.subarray(off);
    const p = parseResponseHead(rest);
    if (p === null) return null;
    const { head, end } = p;
    const cl = head.headers.find(([n]) => n.toLowerCase() === "content-length");
    let len = 0;
    if (head.status >= 200 && !bodyless[finals] && head.status !== 204 && head.status !== 304) len = cl ? Number(cl[1]) : 0;
    if (rest.length < end + len) return null;
    out.push({ status: head.status, reason: head.reason, headers: head.headers, body: rest.slice(end, end + len), raw: rest.slice(0, end + len) });
    if (head.status >= 200) finals++;
    off += end + len;
  }
  return out;
}

interface RawResult {
  bytes: Uint8Array;
  /** the server closed the connection */
  closed: boolean;
}

/**
 * Opens a raw TCP connection to the mock listener, writes `parts` (in separate writes), and resolves once
 * `until(bytes)` holds or the server closes. A 10 s guard fails a stuck exchange instead of hanging the suite.
 */
function rawExchange(
  parts: (string | Uint8Array)[],
  opts: { until?: (b: Uint8Array) => boolean; halfClose?: boolean; onSocket?: (s: Socket<undefined>, got: () => Uint8Array) => void } = {},
): Promise<RawResult> {
  return new Promise((resolve, reject) => {
    let bytes = new Uint8Array(0);
    let done = false;
    const guard = setTimeout(() => finish(new Error(`raw exchange timed out; got ${JSON.stringify(latin1(bytes))}`)), 10_000);
    let sock: Socket<undefined> | null = null;
    // everything to send, written as the socket takes it (write() may take only part of a large buffer)
    const out = parts.map((p) => (typeof p === "string" ? enc.encode(p) : p));
    const total = out.reduce((n, p) => n + p.length, 0);
    const pending = new Uint8Array(total);
    out.reduce((o, p) => (pending.set(p, o), o + p.length), 0);
    let written = 0;
    const pump = (s: Socket<undefined>) => {
      while (written < total) {
        const n = s.write(pending.subarray(written));
        if (n <= 0) return;
        written += n;
      }
      if (opts.halfClose) s.shutdown();
    };
    const finish = (err: Error | null, closed = false) => {
      if (done) return;
      done = true;
      clearTimeout(guard);
      if (!closed) sock?.end();
      if (err) reject(err);
      else resolve({ bytes, closed });
    };
    Bun.connect({
      hostname: "127.0.0.1",
      port,
      socket: {
        open(s) {
          sock = s;
          pump(s);
          opts.onSocket?.(s, () => bytes);
        },
        drain(s) {
          pump(s);
        },
        data(_s, d) {
          const next = new Uint8Array(bytes.length + d.length);
          next.set(bytes);
          next.set(d, bytes.length);
          bytes = next;
          if (opts.until?.(bytes)) finish(null);
        },
        close() {
          finish(null, true);
        },
        error(_s, e) {
          finish(e);
        },
      },
    }).catch((e) => finish(e));
  });
}

/** Until `n` complete final responses have arrived. */
const responses = (n: number, bodyless: boolean[] = []) => (b: Uint8Array) => (splitResponses(b, bodyless)?.filter((r) => r.status >= 200).length ?? 0) >= n;

const header = (r: ParsedResponse, name: string) => r.headers.find(([n]) => n.toLowerCase() === name.toLowerCase())?.[1];

async function traffic(): Promise<any[]> {
  return (await api("/api/v1/traffic?limit=500")).items;
}

async function detail(id: number): Promise<any> {
  return await api(`/api/v1/traffic/${id}`);
}

/** The newest traffic entry whose URL ends with `suffix`. */
async function entryFor(suffix: string): Promise<any> {
  const hit = (await traffic()).find((e) => e.url.endsWith(suffix));
  if (!hit) throw new Error(`no traffic entry for ${suffix}`);
  return await detail(hit.id);
}

beforeAll(async () => {
  svc = await startService();
  port = (await api("/api/v1/mock/start", "POST", { port: 0 })).port;
  base = `http://127.0.0.1:${port}`;
});
afterAll(async () => {
  await svc?.stop();
});
beforeEach(async () => {
  await api("/api/v1/capture/start", "POST");
});

describe("the wire: status line, headers, body", () => {
  beforeAll(async () => {
    await setRules([
      { id: "mocked", url_pattern: "/mocked", status_code: 203, status_text: "Mocked Up", headers: [["X-Mock", "yes"], ["Content-Type", "text/plain"]], body: "hello mock" },
      { id: "std", url_pattern: "/std", status_code: 201 },
      { id: "bin", url_pattern: "/bin", headers: [["Content-Type", "application/octet-stream"]], body: Buffer.from(Uint8Array.from({ length: 256 }, (_, i) => i)).toString("base64"), body_is_base64: true },
      { id: "dup", url_pattern: "/dup", headers: [["Set-Cookie", "a=1"], ["Set-Cookie", "b=2"], ["Content-Length", "999"]], body: "ok" },
      { id: "nocontent", url_pattern: "/nocontent", status_code: 204, body: "dropped" },
      { id: "utf8", url_pattern: "/utf8", status_text: "Très Bien", headers: [["X-Name", "Zoë"]], body: "żółw 🐢" },
    ]);
  });

  test("raw socket: the exact bytes of the response, custom reason phrase included", async () => {
    const { bytes } = await rawExchange(["GET /mocked HTTP/1.1\r\nHost: x\r\n\r\n"], { until: responses(1) });
    expect(latin1(bytes)).toBe("HTTP/1.1 203 Mocked Up\r\nX-Mock: yes\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\nhello mock");
  });

  test("curl: status line, headers and body", async () => {
    const r = await curl(["-i", `${base}/mocked`]);
    expect(r.code).toBe(0);
    expect(r.out).toStartWith("HTTP/1.1 203 Mocked Up\r\n");
    expect(r.out).toContain("\r\nX-Mock: yes\r\n");
    expect(r.out).toContain("\r\nContent-Length: 10\r\n");
    expect(r.out).toEndWith("\r\n\r\nhello mock");
  });

  test("status_text null: the standard reason phrase", async () => {
    const { bytes } = await rawExchange(["GET /std HTTP/1.1\r\nHost: x\r\n\r\n"], { until: responses(1) });
    expect(latin1(bytes)).toBe("HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n");
  });

  test("a non-ASCII reason phrase, header value and body all go out as UTF-8", async () => {
    const { bytes } = await rawExchange(["GET /utf8 HTTP/1.1\r\nHost: x\r\n\r\n"], { until: responses(1) });
    const body = enc.encode("żółw 🐢");
    expect(bytes).toEqual(enc.encode(`HTTP/1.1 200 Très Bien\r\nX-Name: Zoë\r\nContent-Length: ${body.length}\r\n\r\nżółw 🐢`));
  });

  test("base64 body: raw binary bytes, Content-Length computed (curl)", async () => {
    const out = join(mkdtempSync(join(tmpdir(), "tapwire-mock-")), "bin");
    const r = await curl(["-o", out, "-w", "%{http_code} %{size_download}", `${base}/bin`]);
    expect(r.out).toBe("200 256");
    expect(new Uint8Array(readFileSync(out))).toEqual(Uint8Array.from({ length: 256 }, (_, i) => i));
  });

  test("headers in order, repeated names kept; a rule's Content-Length is replaced by the computed one", async () => {
    const { bytes } = await rawExchange(["GET /dup HTTP/1.1\r\nHost: x\r\n\r\n"], { until: responses(1) });
    expect(latin1(bytes)).toBe("HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: 2\r\n\r\nok");
  });

  test("204: no body and no Content-Length, and the connection stays usable", async () => {
    const { bytes } = await rawExchange(["GET /nocontent HTTP/1.1\r\nHost: x\r\n\r\nGET /std HTTP/1.1\r\nHost: x\r\n\r\n"], { until: responses(2) });
    expect(latin1(bytes)).toBe("HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n");
  });

  test("HEAD: the head with the GET body's Content-Length, and no body", async () => {
    const { bytes } = await rawExchange(["HEAD /mocked HTTP/1.1\r\nHost: x\r\n\r\nGET /std HTTP/1.1\r\nHost: x\r\n\r\n"], { until: responses(2, [true]) });
    expect(latin1(bytes)).toBe(
      "HTTP/1.1 203 Mocked Up\r\nX-Mock: yes\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\n" + "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
    );
    const c = await curl(["-I", `${base}/mocked`]);
    expect(c.out).toStartWith("HTTP/1.1 203 Mocked Up\r\n");
  });
});

describe("matching", () => {
  test("first match wins; disabled rules are skipped; toggling changes the winner at once", async () => {
    await setRules([
      { id: "first", url_pattern: "/api/*", body: "first" },
      { id: "second", url_pattern: "/api/items/*", body: "second" },
      { id: "exact", url_pattern: "/api/items/1", body: "exact" },
    ]);
    expect((await curl([`${base}/api/items/1`])).out).toBe("first");
    await api("/api/v1/mock/rules/first/toggle", "POST");
    expect((await curl([`${base}/api/items/1`])).out).toBe("second");
    await api("/api/v1/mock/rules/second/toggle", "POST");
    expect((await curl([`${base}/api/items/1`])).out).toBe("exact");
    await api("/api/v1/mock/rules/first/toggle", "POST");
    expect((await curl([`${base}/api/items/1`])).out).toBe("first");
  });

  test("method: empty matches any, otherwise case-insensitive", async () => {
    await setRules([
      { id: "post", method: "post", url_pattern: "/m", body: "post" },
      { id: "any", method: "", url_pattern: "/m", body: "any" },
    ]);
    expect((await curl(["-X", "POST", `${base}/m`])).out).toBe("post");
    expect((await curl([`${base}/m`])).out).toBe("any");
    expect((await curl(["-X", "DELETE", `${base}/m`])).out).toBe("any");
  });

  test("query: a pattern without ? ignores it; a pattern with ? matches it", async () => {
    await setRules([
      { id: "q", url_pattern: "/s?q=*", body: "with-query" },
      { id: "plain", url_pattern: "/s", body: "plain" },
    ]);
    expect((await curl([`${base}/s?q=abc`])).out).toBe("with-query");
    expect((await curl([`${base}/s?other=1`])).out).toBe("plain");
    expect((await curl([`${base}/s`])).out).toBe("plain");
  });

  test("an absolute-form request target is matched by its path", async () => {
    await setRules([{ id: "abs", url_pattern: "/abs/*", body: "abs" }]);
    const { bytes } = await rawExchange(["GET http://example.com/abs/x?y=1 HTTP/1.1\r\nHost: example.com\r\n\r\n"], { until: responses(1) });
    expect(latin1(bytes)).toEndWith("\r\n\r\nabs");
  });

  test("404 fallback: JSON naming method and path when no rule matches", async () => {
    await setRules([{ id: "only", url_pattern: "/only" }]);
    const { bytes } = await rawExchange(["DELETE /missing/thing?x=1 HTTP/1.1\r\nHost: x\r\n\r\n"], { until: responses(1) });
    const [r] = splitResponses(bytes)!;
    expect(r.status).toBe(404);
    expect(r.reason).toBe("Not Found");
    expect(header(r, "content-type")).toBe("application/json");
    expect(JSON.parse(dec.decode(r.body))).toEqual({
      error: { code: "no_mock_rule", message: "no mock rule matched DELETE /missing/thing?x=1" },
      method: "DELETE",
      path: "/missing/thing?x=1",
      mock_enabled: true,
    });
  });

  test("404 fallback for every request while the master flag is off", async () => {
    await setRules([{ id: "all", url_pattern: "/**", body: "mocked" }]);
    expect((await curl([`${base}/anything`])).out).toBe("mocked");
    await api("/api/v1/mock/enabled", "PUT", { enabled: false });
    const r = await curl(["-w", "\n%{http_code}", `${base}/anything`]);
    const [body, code] = r.out.split("\n");
    expect(code).toBe("404");
    expect(JSON.parse(body!)).toMatchObject({ method: "GET", path: "/anything", mock_enabled: false, error: { code: "no_mock_rule" } });
    await api("/api/v1/mock/enabled", "PUT", { enabled: true });
    expect((await curl([`${base}/anything`])).out).toBe("mocked");
  });
});

describe("latency", () => {
  test("a slow rule answers after latency_ms, while another request to the listener is answered at once", async () => {
    const LATENCY = 1500;
    await setRules([
      { id: "slow", url_pattern: "/slow", latency_ms: LATENCY, body: "slow" },
      { id: "fast", url_pattern: "/fast", body: "fast" },
    ]);
    const t0 = performance.now();
    let slowDoneAt = 0;
    const slow = curl([`${base}/slow`]).then((r) => {
      slowDoneAt = performance.now();
      return r;
    });
    // the fast request starts once the slow one is waiting at the listener
    const mock = svc.feature<MockFeature>("mock");
    while (mock.listener.pendingRequests() === 0) await new Promise((r) => setImmediate(r));
    const fast = await curl([`${base}/fast`]);
    const fastDoneAt = performance.now();
    expect(fast.out).toBe("fast");
    expect(slowDoneAt).toBe(0); // still waiting
    expect(fastDoneAt - t0).toBeLessThan(LATENCY);
    expect((await slow).out).toBe("slow");
    expect(slowDoneAt - t0).toBeGreaterThanOrEqual(LATENCY);
    const e = await entryFor("/slow");
    expect(e.duration_ms).toBeGreaterThanOrEqual(LATENCY - 1);
  });

  test("pipelined behind a slow request, a fast one waits its turn (responses stay in request order)", async () => {
    await setRules([
      { id: "slow", url_pattern: "/slow", latency_ms: 300, body: "slow" },
      { id: "fast", url_pattern: "/fast", body: "fast" },
    ]);
    const t0 = performance.now();
    const { bytes } = await rawExchange(["GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /fast HTTP/1.1\r\nHost: x\r\n\r\n"], { until: responses(2) });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(300);
    expect(splitResponses(bytes)!.map((r) => dec.decode(r.body))).toEqual(["slow", "fast"]);
  });
});

describe("HTTP/1.1 connection handling", () => {
  beforeAll(async () => {
    await setRules([
      { id: "a", url_pattern: "/a", body: "A" },
      { id: "b", url_pattern: "/b", body: "BB" },
      { id: "closer", url_pattern: "/closer", headers: [["Connection", "close"]], body: "bye" },
    ]);
  });

  test("keep-alive: several requests on one connection, one by one", async () => {
    const r = await curl(["-v", `${base}/a`, `${base}/b`, `${base}/a`]);
    expect(r.out).toBe("ABBA");
    expect(r.err.match(/Re-using existing connection/g)?.length).toBe(2);
  });

  test("pipelining: requests in one write, with Content-Length and chunked bodies, answered in order", async () => {
    const pipelined =
      "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello" +
      "POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nTrailer-X: 1\r\n\r\n" +
      "GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n" +
      "GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
    const { bytes, closed } = await rawExchange([pipelined], { until: responses(4) });
    expect(closed).toBe(false);
    const rs = splitResponses(bytes)!;
    expect(rs.map((r) => r.status)).toEqual([200, 200, 404, 200]);
    expect(rs.map((r) => dec.decode(r.body)).filter((b) => !b.startsWith("{"))).toEqual(["A", "BB", "A"]);
  });

  test("requests split across many writes (one byte at a time) are parsed the same", async () => {
    const req = "POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nwxyz\r\n0\r\n\r\nGET /a HTTP/1.1\r\nHost: x\r\n\r\n";
    const result = await rawExchange([], {
      until: responses(2),
      onSocket: (s) => {
        let i = 0;
        const step = () => {
          if (i >= req.length) return;
          s.write(req[i++]!);
          s.flush();
          setImmediate(step);
        };
        step();
      },
    });
    expect(splitResponses(result.bytes)!.map((r) => dec.decode(r.body))).toEqual(["BB", "A"]);
  });

  test("Connection: close from the client: the response says so and the server closes", async () => {
    const { bytes, closed } = await rawExchange(["GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n"]);
    expect(closed).toBe(true);
    expect(latin1(bytes)).toBe("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\nA");
  });

  test("a rule's Connection: close closes after its response", async () => {
    const { bytes, closed } = await rawExchange(["GET /closer HTTP/1.1\r\nHost: x\r\n\r\n"]);
    expect(closed).toBe(true);
    expect(latin1(bytes)).toBe("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nbye");
  });

  test("HTTP/1.0: closes by default; keeps alive when asked", async () => {
    const one = await rawExchange(["GET /a HTTP/1.0\r\n\r\n"]);
    expect(one.closed).toBe(true);
    expect(latin1(one.bytes)).toBe("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\nA");
    const ka = await rawExchange(["GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /b HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"], { until: responses(2) });
    expect(ka.closed).toBe(false);
    expect(latin1(ka.bytes)).toBe("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: keep-alive\r\n\r\nAHTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nBB");
  });

  test("Expect: 100-continue gets an interim 100 before the body is sent", async () => {
    let sentBody = false;
    const { bytes } = await rawExchange(["POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"], {
      until: (b) => {
        return responses(1)(b);
      },
      onSocket: (s, got) => {
        // send the body only once the 100 has arrived
        const poll = () => {
          if (latin1(got()).startsWith("HTTP/1.1 100 Continue\r\n\r\n")) {
            sentBody = true;
            s.write("data");
            return;
          }
          setImmediate(poll);
        };
        poll();
      },
    });
    expect(sentBody).toBe(true);
    expect(latin1(bytes)).toBe("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nA");
  });

  test("a client that half-closes after its request still gets the response", async () => {
    const { bytes, closed } = await rawExchange(["GET /b HTTP/1.1\r\nHost: x\r\n\r\n"], { halfClose: true });
    expect(closed).toBe(true);
    expect(latin1(bytes)).toBe("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nBB");
  });

  test("a large request body (1 MiB + chunked 3 MiB) is read and the connection stays in sync", async () => {
    const big = new Uint8Array(1024 * 1024).fill(0x61);
    const chunk = new Uint8Array(64 * 1024).fill(0x62);
    const parts: (string | Uint8Array)[] = [`POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: ${big.length}\r\n\r\n`, big, "POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"];
    for (let i = 0; i < 48; i++) parts.push(`${chunk.length.toString(16)}\r\n`, chunk, "\r\n");
    parts.push("0\r\n\r\nGET /a HTTP/1.1\r\nHost: x\r\n\r\n");
    const { bytes } = await rawExchange(parts, { until: responses(3) });
    expect(splitResponses(bytes)!.map((r) => dec.decode(r.body))).toEqual(["A", "BB", "A"]);
  });
});

describe("malformed requests: 400 (or the codec's status) and close", () => {
  beforeAll(async () => {
    await setRules([{ id: "a", url_pattern: "/a", body: "A" }]);
  });

  const cases: [string, string, number][] = [
    ["garbage request line", "GARBAGE\r\n\r\n", 400],
    ["lowercase method", "get /a HTTP/1.1\r\nHost: x\r\n\r\n", 400],
    ["bare LF", "GET /a HTTP/1.1\nHost: x\n\n", 400],
    ["bad Content-Length", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n", 400],
    ["conflicting Content-Length", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400],
    ["Transfer-Encoding with Content-Length", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n", 400],
    ["two Host headers", "GET /a HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400],
    ["bad chunk size", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400],
    ["HTTP/2.0 request line", "GET /a HTTP/2.0\r\nHost: x\r\n\r\n", 505],
    ["unsupported transfer coding", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501],
    ["CONNECT", "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", 405],
  ];
  for (const [name, req, status] of cases) {
    test(`${name} → ${status}, connection closed`, async () => {
      const { bytes, closed } = await rawExchange([req]);
      expect(closed).toBe(true);
      const rs = splitResponses(bytes)!;
      expect(rs.length).toBe(1);
      expect(rs[0]!.status).toBe(status);
      expect(header(rs[0]!, "connection")).toBe("close");
      expect(JSON.parse(dec.decode(rs[0]!.body)).error.code).toBe("bad_request");
    });
  }

  test("a head larger than 64 KiB → 431", async () => {
    const { bytes, closed } = await rawExchange([`GET /a HTTP/1.1\r\nHost: x\r\nX-Big: ${"v".repeat(70 * 1024)}\r\n\r\n`]);
    expect(closed).toBe(true);
    expect(splitResponses(bytes)![0]!.status).toBe(431);
  });

  test("a good request pipelined before a bad one is answered first", async () => {
    const { bytes, closed } = await rawExchange(["GET /a HTTP/1.1\r\nHost: x\r\n\r\nBAD REQUEST LINE\r\n\r\nGET /a HTTP/1.1\r\nHost: x\r\n\r\n"]);
    expect(closed).toBe(true);
    expect(splitResponses(bytes)!.map((r) => r.status)).toEqual([200, 400]);
  });
});

describe("capture", () => {
  beforeAll(async () => {
    await setRules([
      { id: "cap", url_pattern: "/cap/*", status_code: 203, status_text: "Mocked Up", headers: [["Content-Type", "application/json"], ["X-Mock", "1"]], body: '{"ok":true}' },
    ]);
  });

  test("a request to the listener becomes a traffic entry: method, url, host, status, headers, bodies, duration, client, rule", async () => {
    const t0 = Date.now();
    const r = await curl(["-X", "PUT", "-H", "Content-Type: text/plain", "-H", "X-Test: abc", "--data-binary", "request body here", `${base}/cap/item?x=1`]);
    expect(r.out).toBe('{"ok":true}');
    const list = await traffic();
    const summary = list.find((e) => e.url === `${base}/cap/item?x=1`);
    expect(summary).toMatchObject({
      method: "PUT",
      url: `http://127.0.0.1:${port}/cap/item?x=1`,
      host: "127.0.0.1",
      status_code: 203,
      content_type: "application/json",
      has_response: true,
      client_addr: "curl",
    });
    expect(summary.timestamp).toBeGreaterThanOrEqual(t0 - 5);
    expect(summary.duration_ms).toBeGreaterThanOrEqual(0);
    const d = await detail(summary.id);
    expect(d.req_body).toBe("request body here");
    expect(d.res_body).toBe('{"ok":true}');
    expect(d.req_headers).toContainEqual(["X-Test", "abc"]);
    expect(d.req_headers).toContainEqual(["Content-Length", "17"]);
    expect(d.res_headers).toEqual([["Content-Type", "application/json"], ["X-Mock", "1"], ["Content-Length", "11"]]);
    // the extra fields, as stored (see the next test for the API's detail route)
    const stored = (await svc.store.get(summary.id))!;
    expect(stored.mock_rule).toBe("cap");
    expect(stored.reason).toBe("Mocked Up");
  });

  // Fails while GET /api/v1/traffic/{id} drops extra fields: its response schema is a t.Composite of two objects with
  // additionalProperties: true, and Composite does not keep that flag, so Elysia strips every extra (mock_rule,
  // map_local_rule, reason...) from the response. src/features/traffic/routes.ts is not the mock's to change.
  test("GET /traffic/{id} shows the entry's extra.mock_rule", async () => {
    await curl([`${base}/cap/api-extra`]);
    const d = await entryFor("/cap/api-extra");
    expect(d.mock_rule).toBe("cap");
  });

  test("a chunked request body is captured de-chunked", async () => {
    const { bytes } = await rawExchange(["POST /cap/chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"], { until: responses(1) });
    expect(splitResponses(bytes)![0]!.status).toBe(203);
    const d = await entryFor("/cap/chunked");
    expect(d.req_body).toBe("hello world");
    expect(d.req_body_size).toBe(11);
  });

  test("the 404 fallback is captured with mock_rule null; HEAD has no response body", async () => {
    await curl([`${base}/not/mocked`]);
    const d = await entryFor("/not/mocked");
    expect(d.status_code).toBe(404);
    expect((await svc.store.get(d.id))!.mock_rule).toBeNull();
    expect(JSON.parse(d.res_body).path).toBe("/not/mocked");
    await curl(["-I", `${base}/cap/head`]);
    const h = await entryFor("/cap/head");
    expect(h.method).toBe("HEAD");
    expect(h.status_code).toBe(203);
    expect(h.res_body).toBe("");
  });

  test("nothing is recorded while capture is off", async () => {
    await api("/api/v1/capture/stop", "POST");
    const before = (await api("/api/v1/capture/status")).entry_count;
    expect((await curl([`${base}/cap/off`])).out).toBe('{"ok":true}');
    expect((await api("/api/v1/capture/status")).entry_count).toBe(before);
    await api("/api/v1/capture/start", "POST");
    await curl([`${base}/cap/on`]);
    expect((await api("/api/v1/capture/status")).entry_count).toBe(before + 1);
  });

  test("a client that hangs up while its response is delayed is recorded as a failed entry", async () => {
    await setRules([{ id: "late", url_pattern: "/late", latency_ms: 60_000 }]);
    const mock = svc.feature<MockFeature>("mock");
    const before = (await api("/api/v1/capture/status")).entry_count;
    await rawExchange(["GET /late HTTP/1.1\r\nHost: x\r\n\r\n"], {
      until: () => false,
      onSocket: (s) => {
        // hang up once the request is queued at the listener
        const poll = () => {
          if (mock.listener.pendingRequests() > 0) s.terminate();
          else setImmediate(poll);
        };
        poll();
      },
    });
    // the listener sees the close asynchronously: wait for the entry, bounded by the suite timeout
    while ((await api("/api/v1/capture/status")).entry_count === before) await new Promise((r) => setImmediate(r));
    const d = await entryFor("/late");
    expect(d.has_response).toBe(false);
    expect(d.status_code).toBe(0);
    expect((await svc.store.get(d.id))!.mock_rule).toBe("late");
    expect(d.error).toContain("client closed");
  });
});

describe("listener lifecycle", () => {
  test("stop closes open connections and cancels pending latency; start again serves on a new port", async () => {
    await setRules([
      { id: "late", url_pattern: "/late", latency_ms: 60_000 },
      { id: "a", url_pattern: "/a", body: "A" },
    ]);
    const mock = svc.feature<MockFeature>("mock");
    const pending = rawExchange(["GET /late HTTP/1.1\r\nHost: x\r\n\r\n"]);
    while (mock.listener.pendingRequests() === 0) await new Promise((r) => setImmediate(r));
    expect((await svc.call("/api/v1/mock/stop", { method: "POST" })).status).toBe(204);
    const r = await pending;
    expect(r.closed).toBe(true);
    expect(r.bytes.length).toBe(0);
    expect(mock.listener.connections.size).toBe(0);
    port = (await api("/api/v1/mock/start", "POST", { port: 0 })).port;
    base = `http://127.0.0.1:${port}`;
    expect((await curl([`${base}/a`])).out).toBe("A");
  });

  test("the listener is stopped with the service", async () => {
    const s = await startService({ mockPort: 0 });
    const p = (await json(s.call("/api/v1/mock/status"))).port;
    expect((await fetch(`http://127.0.0.1:${p}/`)).status).toBe(404);
    await s.stop();
    const probe = Bun.listen({ hostname: "127.0.0.1", port: p, socket: { data() {} } });
    expect(probe.port).toBe(p);
    probe.stop(true);
  });

  test("a hand-edited state file with a rule that cannot be put on the wire: that rule answers 500, others work", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "tapwire-mock-"));
    const good = { id: "good", name: "", enabled: true, method: "", url_pattern: "/good", status_code: 200, status_text: null, headers: [], body: "fine", body_is_base64: false, latency_ms: null };
    writeFileSync(join(dataDir, "mock.json"), JSON.stringify({ enabled: true, rules: [{ ...good, id: "broken", url_pattern: "/broken", status_text: "Bad\r\nInjected: 1" }, good] }));
    const s = await startService({ dataDir, mockPort: 0 });
    try {
      const p = (await json(s.call("/api/v1/mock/status"))).port;
      const broken = await curl(["-i", `http://127.0.0.1:${p}/broken`]);
      expect(broken.out).toStartWith("HTTP/1.1 500 Internal Server Error\r\n");
      expect(broken.out).not.toContain("Injected");
      expect((await curl([`http://127.0.0.1:${p}/good`])).out).toBe("fine");
    } finally {
      await s.stop();
    }
  });
});
