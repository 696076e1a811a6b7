import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import net from "node:net";
import { join } from "node:path";
import { TapwireService } from "../../../src/service/service.ts";
import { DEFAULTS, type ServiceConfig } from "../../../src/service/config.ts";
import { noProxyMatcher, ParentProxy, parseNoProxyList, parseProxyUrl } from "../../../src/core/proxy/parent-proxy.ts";
import { UpstreamPool } from "../../../src/core/proxy/upstream.ts";
import { parseUpstreamNoProxy, parseUpstreamProxy } from "../../../src/cli/args.ts";
import { UsageError } from "../../../src/cli/args.ts";
import { START_USAGE } from "../../../src/cli/args.ts";
import { closedPort, startParentProxy, type ParentProxyServer } from "../../helpers/parent-proxy.ts";
import { startTapwire, tempDir } from "../../helpers/tapwire-process.ts";
import { curl, startUpstream, type Upstream } from "../../helpers/upstream.ts";

const USER = "ci-user";
const PASS = "s3cr=t:p@ss";
/** The URL form: the password percent-encoded. */
const PASS_IN_URL = encodeURIComponent(PASS);
const BASIC = "Basic " + Buffer.from(`${USER}:${PASS}`).toString("base64");

interface Chained {
  svc: TapwireService;
  proxy: string;
  caFile: string;
  logs: string[];
  call(p: string, init?: RequestInit): Promise<Response>;
  /** Every traffic entry in full, as the API answers them. */
  details(): Promise<any[]>;
}

/** An in-process service (ports from the OS) whose log lines are kept. */
async function startChained(over: Partial<ServiceConfig>): Promise<Chained> {
  const logs: string[] = [];
  const svc = new TapwireService({ ...DEFAULTS, dataDir: tempDir(), proxyPort: 0, upstreamInsecure: false, upstreamCa: [], mockPort: null, ...over }, (l) => logs.push(l));
  await svc.start();
  const call = (p: string, init: RequestInit = {}) =>
    fetch(`http://127.0.0.1:${svc.apiPort}${p}`, { ...init, headers: { authorization: `Bearer ${svc.token}`, ...((init.headers as Record<string, string>) ?? {}) } });
  return {
    svc,
    proxy: `http://127.0.0.1:${svc.proxyPort}`,
    caFile: join(svc.config.dataDir, "ca.pem"),
    logs,
    call,
    async details() {
      const list = (await (await call("/api/v1/traffic?limit=500")).json()) as { items: { id: number }[] };
      return Promise.all(list.items.map(async (i) => (await call(`/api/v1/traffic/${i.id}`)).json()));
    },
  };
}

async function newest(c: Chained): Promise<any> {
  const list = (await (await c.call("/api/v1/traffic?limit=1")).json()) as { items: { id: number }[] };
  return (await c.call(`/api/v1/traffic/${list.items[0]!.id}`)).json();
}

/** No trace of the credentials: the password (plain and percent-encoded) and the Basic token. */
function expectNoCredentials(text: string): void {
  expect(text).not.toContain(PASS);
  expect(text).not.toContain(PASS_IN_URL);
  expect(text).not.toContain(BASIC.slice(6));
}

let up: Upstream;
let parent: ParentProxyServer;

beforeAll(async () => {
  up = startUpstream();
  parent = await startParentProxy({ auth: { user: USER, pass: PASS } });
});
afterAll(async () => {
  up.stop();
  await parent.stop();
});

describe("chaining through a parent proxy that wants credentials", () => {
  let c: Chained;
  beforeAll(async () => {
    c = await startChained({ upstreamProxy: `http://${USER}:${PASS_IN_URL}@127.0.0.1:${parent.port}`, upstreamCa: [up.caFile] });
  });
  afterAll(async () => {
    await c.svc.stop();
  });

  test("plain HTTP goes to the parent in absolute form with Proxy-Authorization; the origin never sees it", async () => {
    const before = parent.seen.length;
    const r = await curl(["-x", c.proxy, "-w", "\n%{http_code}", `${up.httpUrl}/echo?via=parent`]);
    expect(r.code).toBe(0);
    const [body, status] = r.out.split("\n");
    expect(status).toBe("200");
    const echoed = JSON.parse(body!);
    expect(echoed.path).toBe("/echo?via=parent");
    expect(Object.keys(echoed.headers).map((h) => h.toLowerCase())).not.toContain("proxy-authorization");
    const seen = parent.seen.slice(before);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ method: "GET", target: `${up.httpUrl}/echo?via=parent`, proxyAuthorization: BASIC, accepted: true });
    const e = await newest(c);
    expect(e).toMatchObject({ method: "GET", url: `${up.httpUrl}/echo?via=parent`, status_code: 200 });
    expect(e.req_headers.map((h: [string, string]) => h[0].toLowerCase())).not.toContain("proxy-authorization");
  });

  test("a POST body goes through, and the connection to the parent is pooled (no new connection)", async () => {
    await curl(["-x", c.proxy, `${up.httpUrl}/echo`]); // the pool holds a connection to the parent for this origin now
    const conns = parent.connections;
    const before = parent.seen.length;
    const r = await curl(["-x", c.proxy, "-d", "a=1&b=2", `${up.httpUrl}/echo`]);
    expect(JSON.parse(r.out)).toMatchObject({ method: "POST", body: "a=1&b=2" });
    expect(parent.seen.slice(before).map((s) => `${s.method} ${s.target}`)).toEqual([`POST ${up.httpUrl}/echo`]);
    expect(parent.connections).toBe(conns);
  });

  test("intercepted HTTPS: CONNECT to the parent with credentials, then TLS to the origin inside the tunnel", async () => {
    const before = parent.seen.length;
    const r = await curl(["-x", c.proxy, "--cacert", c.caFile, "-w", "\n%{http_code}", `${up.httpsUrl}/echo?tls=1`]);
    expect(r.code).toBe(0);
    const [body, status] = r.out.split("\n");
    expect(status).toBe("200");
    expect(JSON.parse(body!).path).toBe("/echo?tls=1");
    const seen = parent.seen.slice(before);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ method: "CONNECT", target: `localhost:${up.https.port}`, proxyAuthorization: BASIC, accepted: true });
    const e = await newest(c);
    expect(e).toMatchObject({ url: `${up.httpsUrl}/echo?tls=1`, status_code: 200 });
    // a second request reuses the TLS connection through the tunnel
    const again = await curl(["-x", c.proxy, "--cacert", c.caFile, `${up.httpsUrl}/echo?tls=2`]);
    expect(JSON.parse(again.out).path).toBe("/echo?tls=2");
    expect(parent.seen.length).toBe(before + 1);
  });

  test("a tunnel to an ignored host is a CONNECT through the parent too (the client sees the origin's certificate)", async () => {
    expect((await c.call("/api/v1/ignored-hosts/localhost", { method: "PUT" })).status).toBe(204);
    try {
      const before = parent.seen.length;
      // trusting only the upstream's own CA proves the bytes were not intercepted
      const r = await curl(["-x", c.proxy, "--cacert", up.caFile, `${up.httpsUrl}/echo?blind=1`]);
      expect(r.code).toBe(0);
      expect(JSON.parse(r.out).path).toBe("/echo?blind=1");
      expect(parent.seen.slice(before)).toMatchObject([{ method: "CONNECT", target: `localhost:${up.https.port}`, proxyAuthorization: BASIC }]);
    } finally {
      await c.call("/api/v1/ignored-hosts/localhost", { method: "DELETE" });
    }
  });

  test("a plain WebSocket upgrade goes through a CONNECT tunnel to the parent (absolute-form would lose the Upgrade)", async () => {
    const wsServer = Bun.serve<undefined>({
      port: 0,
      hostname: "127.0.0.1",
      fetch(req, s) {
        if (s.upgrade(req)) return;
        return new Response("upgrade required", { status: 426 });
      },
      websocket: {
        message(ws, m) {
          ws.send(`echo:${m}`);
        },
      },
    });
    try {
      const before = parent.seen.length;
      const ws = new WebSocket(`ws://127.0.0.1:${wsServer.port}/chat`, { proxy: c.proxy } as unknown as string[]);
      const reply = await new Promise<string>((resolve, reject) => {
        ws.onopen = () => ws.send("hello");
        ws.onmessage = (e) => resolve(String(e.data));
        ws.onerror = () => reject(new Error("WebSocket through tapwire and the parent failed"));
      });
      ws.close();
      expect(reply).toBe("echo:hello");
      expect(parent.seen.slice(before)).toMatchObject([{ method: "CONNECT", target: `127.0.0.1:${wsServer.port}`, proxyAuthorization: BASIC }]);
    } finally {
      wsServer.stop(true);
    }
  });

  test("the credentials are in no traffic entry and no log line", async () => {
    const all = await c.details();
    expect(all.length).toBeGreaterThanOrEqual(4);
    expectNoCredentials(JSON.stringify(all));
    expectNoCredentials(c.logs.join("\n"));
    expect(c.logs.join("\n")).toContain(`upstream proxy http://127.0.0.1:${parent.port} with credentials`);
    expect(c.logs.join("\n")).not.toContain(USER);
    // the config object is the only place that holds them, and the health answer does not show it
    expectNoCredentials(await (await c.call("/api/v1/health")).text());
  });
});

describe("--upstream-no-proxy", () => {
  let open: ParentProxyServer;
  let c: Chained;
  beforeAll(async () => {
    open = await startParentProxy();
    c = await startChained({ upstreamProxy: open.url, upstreamNoProxy: ["localhost", ".example.invalid"], upstreamCa: [up.caFile] });
  });
  afterAll(async () => {
    await c.svc.stop();
    await open.stop();
  });

  test("a listed host is reached directly, for HTTP and HTTPS; loopback by IP is not listed and goes through the parent", async () => {
    const before = open.seen.length;
    const direct = await curl(["-x", c.proxy, `http://localhost:${up.http.port}/echo?direct=1`]);
    expect(JSON.parse(direct.out).path).toBe("/echo?direct=1");
    const directTls = await curl(["-x", c.proxy, "--cacert", c.caFile, `${up.httpsUrl}/echo?direct=2`]);
    expect(JSON.parse(directTls.out).path).toBe("/echo?direct=2");
    expect(open.seen.length).toBe(before);
    const via = await curl(["-x", c.proxy, `${up.httpUrl}/echo?via=1`]);
    expect(JSON.parse(via.out).path).toBe("/echo?via=1");
    expect(open.seen.slice(before)).toMatchObject([{ method: "GET", target: `${up.httpUrl}/echo?via=1`, proxyAuthorization: null }]);
  });
});

describe("failures of the parent become 502s naming it", () => {
  let wrong: Chained;
  let unreachable: Chained;
  let deadPort: number;
  beforeAll(async () => {
    deadPort = await closedPort();
    wrong = await startChained({ upstreamProxy: `http://${USER}:wrong-password@127.0.0.1:${parent.port}`, upstreamCa: [up.caFile] });
    unreachable = await startChained({ upstreamProxy: `http://${USER}:${PASS_IN_URL}@127.0.0.1:${deadPort}`, upstreamCa: [up.caFile] });
  });
  afterAll(async () => {
    await wrong.svc.stop();
    await unreachable.svc.stop();
  });

  test("wrong credentials, plain HTTP: the parent's 407 becomes a 502 naming the parent and the 407", async () => {
    const r = await curl(["-x", wrong.proxy, "-w", "\n%{http_code}", `${up.httpUrl}/echo?auth=wrong`]);
    const lines = r.out.trimEnd().split("\n");
    expect(lines.at(-1)).toBe("502");
    const msg = lines.slice(0, -1).join("\n");
    expect(msg).toContain(`upstream proxy 127.0.0.1:${parent.port} refused`);
    expect(msg).toContain("407");
    expect(msg).toContain("did not accept the credentials");
    expect(parent.seen.at(-1)).toMatchObject({ target: `${up.httpUrl}/echo?auth=wrong`, accepted: false });
    const e = await newest(wrong);
    expect(e.status_code).toBe(502);
    expect(e.error).toContain("407");
  });

  test("wrong credentials, HTTPS: the refused CONNECT becomes a 502 inside the intercepted tunnel", async () => {
    const r = await curl(["-x", wrong.proxy, "--cacert", wrong.caFile, "-w", "\n%{http_code}", `${up.httpsUrl}/echo?auth=wrong`]);
    const lines = r.out.trimEnd().split("\n");
    expect(lines.at(-1)).toBe("502");
    expect(lines[0]).toContain(`upstream proxy 127.0.0.1:${parent.port} refused CONNECT localhost:${up.https.port}: 407`);
    const e = await newest(wrong);
    expect(e).toMatchObject({ url: `${up.httpsUrl}/echo?auth=wrong`, status_code: 502 });
    expect(e.error).toContain("407 Proxy Authentication Required");
    expect(JSON.stringify(await wrong.details())).not.toContain("wrong-password");
    expect(wrong.logs.join("\n")).not.toContain("wrong-password");
  });

  test("wrong credentials, tunnel to an ignored host: the client's CONNECT is answered 502", async () => {
    expect((await wrong.call("/api/v1/ignored-hosts/localhost", { method: "PUT" })).status).toBe(204);
    const r = await curl(["-x", wrong.proxy, "--cacert", up.caFile, `${up.httpsUrl}/echo`]);
    expect(r.code).not.toBe(0);
    expect(r.err).toContain("502");
    await wrong.call("/api/v1/ignored-hosts/localhost", { method: "DELETE" });
  });

  test("parent unreachable: plain HTTP and HTTPS get a 502 naming the parent", async () => {
    const plain = await curl(["-x", unreachable.proxy, "-w", "\n%{http_code}", `${up.httpUrl}/echo`]);
    expect(plain.out.trimEnd().split("\n").at(-1)).toBe("502");
    expect(plain.out).toContain(`cannot reach upstream proxy 127.0.0.1:${deadPort}`);
    expect(plain.out).toContain("refused");
    const tls = await curl(["-x", unreachable.proxy, "--cacert", unreachable.caFile, "-w", "\n%{http_code}", `${up.httpsUrl}/echo`]);
    expect(tls.out.trimEnd().split("\n").at(-1)).toBe("502");
    expect(tls.out).toContain(`cannot reach upstream proxy 127.0.0.1:${deadPort}`);
    const all = await unreachable.details();
    expect(all.map((e) => e.status_code)).toEqual([502, 502]);
    expect(all[0].error).toContain(`upstream proxy 127.0.0.1:${deadPort}`);
    expectNoCredentials(JSON.stringify(all));
    expectNoCredentials(unreachable.logs.join("\n"));
  });
});

describe("a parent that never answers CONNECT", () => {
  test("the connect timeout applies to the whole CONNECT exchange: 504 naming the parent", async () => {
    const silent = net.createServer(() => {}); // accepts, then says nothing
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    const port = (silent.address() as net.AddressInfo).port;
    const c = await startChained({ upstreamProxy: `http://127.0.0.1:${port}`, connectTimeoutSec: 1, upstreamCa: [up.caFile] });
    try {
      const t0 = performance.now();
      const r = await curl(["-x", c.proxy, "--cacert", c.caFile, "-w", "\n%{http_code}", `${up.httpsUrl}/echo`]);
      expect(r.out.trimEnd().split("\n").at(-1)).toBe("504");
      expect(r.out).toContain(`through upstream proxy 127.0.0.1:${port} timed out after 1 s`);
      expect(performance.now() - t0).toBeGreaterThan(900);
      expect(c.svc.config.connectTimeoutSec).toBe(1);
    } finally {
      await c.svc.stop();
      silent.close();
    }
  });
});

describe("parsing the flags", () => {
  test("parseUpstreamProxy: parts, normalised URL, port 80 by default, percent-decoded credentials", () => {
    const p = parseUpstreamProxy(`http://${USER}:${PASS_IN_URL}@Proxy.Corp.Example:3128/`);
    expect(p).toMatchObject({ host: "proxy.corp.example", port: 3128, username: USER, password: PASS });
    expect(p.url).toBe(`http://${USER}:${PASS_IN_URL}@proxy.corp.example:3128`);
    expect(p.display).toBe(`http://${USER}:***@proxy.corp.example:3128`);
    expect(parseUpstreamProxy("http://10.0.0.1")).toMatchObject({ host: "10.0.0.1", port: 80, username: "", password: "" });
    expect(parseUpstreamProxy("http://[::1]:8080").host).toBe("::1");
  });

  test("parseUpstreamProxy refuses what it cannot use, with usage errors that never show the password", () => {
    const bad = ["", "proxy:3128", "https://u:pw-123@proxy:3128", "socks5://proxy:1080", "http://proxy:3128/path", "http://proxy:99999", "http://u:pw-123@:3128"];
    for (const b of bad) {
      let err: unknown;
      try {
        parseUpstreamProxy(b);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(UsageError);
      expect((err as Error).message).toStartWith("--upstream-proxy: ");
      expect((err as Error).message).not.toContain("pw-123");
    }
  });

  test("parseUpstreamNoProxy: comma lists and repeated flags, normalised; bad entries name themselves", () => {
    expect(parseUpstreamNoProxy(" localhost, .Corp.Example ,*.svc.local,,127.0.0.1,[::1]")).toEqual(["localhost", ".corp.example", "*.svc.local", "127.0.0.1", "::1"]);
    expect(parseUpstreamNoProxy(["a.example", "b.example,a.example"])).toEqual(["a.example", "b.example"]);
    expect(parseUpstreamNoProxy(undefined)).toEqual([]);
    for (const b of ["http://x.example", "x.example:8080", "10.0.0.0/8", "a*.example"]) {
      expect(() => parseUpstreamNoProxy(b)).toThrow(UsageError);
      expect(() => parseUpstreamNoProxy(b)).toThrow(`'${b}'`);
    }
  });

  test("no-proxy matching: exact hosts, .domain, *.domain, *; loopback only when listed", () => {
    const m = noProxyMatcher(parseNoProxyList("localhost,.corp.example,*.svc.local,::1"));
    expect(m("localhost")).toBe(true);
    expect(m("LOCALHOST.")).toBe(true);
    expect(m("127.0.0.1")).toBe(false);
    expect(m("::1")).toBe(true);
    expect(m("corp.example")).toBe(true);
    expect(m("git.corp.example")).toBe(true);
    expect(m("notcorp.example")).toBe(false);
    expect(m("svc.local")).toBe(false);
    expect(m("api.svc.local")).toBe(true);
    expect(m("example.com")).toBe(false);
    expect(noProxyMatcher(["*"])("anything.example")).toBe(true);
    expect(noProxyMatcher([])("localhost")).toBe(false);
  });

  test("the parent's bytes: CONNECT and absolute-form heads carry the credentials; describe() and JSON do not", () => {
    const p = ParentProxy.from(`http://${USER}:${PASS_IN_URL}@127.0.0.1:3128`, ["localhost"]);
    expect(new TextDecoder().decode(p.connectRequest("::1", 443))).toBe(`CONNECT [::1]:443 HTTP/1.1\r\nHost: [::1]:443\r\nProxy-Authorization: ${BASIC}\r\n\r\n`);
    const head = new TextEncoder().encode("GET /a?b HTTP/1.1\r\nHost: h.example\r\n\r\n");
    expect(new TextDecoder().decode(p.proxyForm("h.example", 80).apply(head))).toBe(`GET http://h.example/a?b HTTP/1.1\r\nProxy-Authorization: ${BASIC}\r\nHost: h.example\r\n\r\n`);
    const star = new TextEncoder().encode("OPTIONS * HTTP/1.1\r\nHost: h.example:8080\r\n\r\n");
    expect(new TextDecoder().decode(ParentProxy.from("http://127.0.0.1:3128").proxyForm("h.example", 8080).apply(star))).toBe("OPTIONS http://h.example:8080 HTTP/1.1\r\nHost: h.example:8080\r\n\r\n");
    expect(p.routes("localhost")).toBe(false);
    expect(p.routes("127.0.0.1")).toBe(true);
    expectNoCredentials(p.describe() + JSON.stringify(p) + Bun.inspect(p));
  });

  test("pool keys: connections through the parent never share a key with direct ones", () => {
    const parentProxy = ParentProxy.from("http://127.0.0.1:3128", ["direct.example"]);
    const pool = new UpstreamPool({ rejectUnauthorized: true, connectTimeoutMs: 1000, idleTimeoutSec: 60, maxIdlePerKey: 4, parent: parentProxy });
    const direct = new UpstreamPool({ rejectUnauthorized: true, connectTimeoutMs: 1000, idleTimeoutSec: 60, maxIdlePerKey: 4 });
    const key = (p: UpstreamPool, t: Parameters<UpstreamPool["takeIdle"]>[0]) => (p as any).parent === null ? null : (p as any).routeOf(t).key;
    expect(key(direct, { scheme: "http", host: "a.example", port: 80 })).toBeNull();
    expect(key(pool, { scheme: "http", host: "a.example", port: 80 })).toBe("via absolute http://a.example:80");
    expect(key(pool, { scheme: "https", host: "a.example", port: 443 })).toBe("via tunnel https://a.example:443#a.example");
    expect(key(pool, { scheme: "http", host: "a.example", port: 80, websocket: true })).toBe("via tunnel http://a.example:80");
    expect(key(pool, { scheme: "http", host: "direct.example", port: 80 })).toBe("http://direct.example:80");
  });

  test("an invalid --upstream-proxy stops the service from starting, without showing the password", async () => {
    const svc = new TapwireService({ ...DEFAULTS, dataDir: tempDir(), proxyPort: 0, upstreamInsecure: false, upstreamCa: [], mockPort: null, upstreamProxy: "ftp://u:pw-123@proxy:21" }, () => {});
    let err: unknown;
    try {
      await svc.start();
    } catch (e) {
      err = e;
    }
    expect((err as Error).message).toStartWith("--upstream-proxy: ");
    expect((err as Error).message).not.toContain("pw-123");
  });
});

// Through the CLI once `tapwire start` has the flags (src/cli/args.ts).
const wired = START_USAGE.includes("--upstream-proxy");
describe.skipIf(!wired)("tapwire start --upstream-proxy (CLI)", () => {
  test("traffic goes through the parent and the credentials appear nowhere on stderr", async () => {
    const tw = await startTapwire({ args: ["--upstream-proxy", `http://${USER}:${PASS_IN_URL}@127.0.0.1:${parent.port}`, "--upstream-no-proxy", "localhost"] });
    try {
      const before = parent.seen.length;
      const r = await curl(["-x", `http://127.0.0.1:${tw.handshake.proxy_port}`, `${up.httpUrl}/echo?cli=1`]);
      expect(JSON.parse(r.out).path).toBe("/echo?cli=1");
      expect(parent.seen.slice(before)).toMatchObject([{ target: `${up.httpUrl}/echo?cli=1`, proxyAuthorization: BASIC }]);
    } finally {
      expect(await tw.stop()).toBe(0);
    }
    expectNoCredentials(tw.stderr.join("\n"));
    expectNoCredentials(readFileSync(join(tw.dataDir, "ca.pem"), "utf8"));
  });
});
