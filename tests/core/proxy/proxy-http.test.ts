import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import http from "node:http";
import https from "node:https";
import tls from "node:tls";
import { readFileSync } from "node:fs";
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
  svc = await startService({ upstreamCa: [up.caFile] });
  proxy = `http://127.0.0.1:${svc.proxyPort}`;
  caFile = join(svc.config.dataDir, "ca.pem");
});
afterAll(async () => {
  await svc.stop();
  up.stop();
});

async function entries(q = ""): Promise<any[]> {
  const r = await svc.call(`/api/v1/traffic?limit=500${q}`);
  return ((await r.json()) as any).items;
}
async function detail(id: number): Promise<any> {
  return await (await svc.call(`/api/v1/traffic/${id}`)).json();
}
async function newest(): Promise<any> {
  return detail((await entries())[0].id);
}

/** node:https request tunnelled through CONNECT by hand (no proxy agent library). */
function nodeHttpsViaConnect(url: string, opts: { method?: string; body?: string; ca: string }): Promise<{ status: number; body: string }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port: svc.proxyPort, method: "CONNECT", path: `${u.hostname}:${u.port}` });
    req.on("connect", (res, socket) => {
      if (res.statusCode !== 200) return reject(new Error(`CONNECT ${res.statusCode}`));
      const r = https.request(
        { host: u.hostname, port: u.port, path: u.pathname + u.search, method: opts.method ?? "GET", createConnection: () => tls.connect({ socket, servername: u.hostname, ca: opts.ca }) },
        (res2) => {
          const chunks: Buffer[] = [];
          res2.on("data", (c) => chunks.push(c));
          res2.on("end", () => resolve({ status: res2.statusCode!, body: Buffer.concat(chunks).toString() }));
        },
      );
      r.on("error", reject);
      if (opts.body) r.write(opts.body);
      r.end();
    });
    req.on("error", reject);
    req.end();
  });
}

describe("plain HTTP forward proxying", () => {
  test("curl GET through the proxy is answered and captured", async () => {
    const r = await curl(["-x", proxy, `${up.httpUrl}/echo?x=1`]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out).path).toBe("/echo?x=1");
    const e = await newest();
    expect(e.method).toBe("GET");
    expect(e.url).toBe(`${up.httpUrl}/echo?x=1`);
    expect(e.status_code).toBe(200);
    expect(e.host).toBe("127.0.0.1");
    expect(e.has_response).toBe(true);
    expect(JSON.parse(e.res_body).path).toBe("/echo?x=1");
    expect(e.content_type).toContain("application/json");
  });

  test("POST with a fixed body and PUT with a chunked body arrive intact and are captured with their bodies", async () => {
    const post = await curl(["-x", proxy, "-d", "hello=world", `${up.httpUrl}/echo`]);
    expect(JSON.parse(post.out)).toMatchObject({ method: "POST", body: "hello=world" });
    const postEntry = await newest();
    expect(postEntry.req_body).toBe("hello=world");
    expect(postEntry.req_body_size).toBe(11);
    const put = await curl(["-x", proxy, "-X", "PUT", "-H", "Transfer-Encoding: chunked", "--data-binary", "chunky body", `${up.httpUrl}/echo`]);
    expect(JSON.parse(put.out)).toMatchObject({ method: "PUT", body: "chunky body" });
    const putEntry = await newest();
    expect(putEntry.req_body).toBe("chunky body");
    expect(putEntry.req_headers.some(([n, v]: [string, string]) => n.toLowerCase() === "transfer-encoding" && v === "chunked")).toBe(true);
  });

  test("a chunked response streams through and is captured whole", async () => {
    const r = await curl(["-x", proxy, `${up.httpUrl}/chunked`]);
    expect(r.out).toBe("alpha-beta-gamma");
    expect((await newest()).res_body).toBe("alpha-beta-gamma");
  });

  test("Bun fetch with proxy: GET and POST", async () => {
    const g = await fetch(`${up.httpUrl}/echo/bun`, { proxy });
    expect(((await g.json()) as any).path).toBe("/echo/bun");
    const p = await fetch(`${up.httpUrl}/echo`, { proxy, method: "POST", body: "from bun" });
    expect(((await p.json()) as any).body).toBe("from bun");
  });

  test("keep-alive on both sides: one client connection, one upstream connection for several requests", async () => {
    const before = up.seen.length;
    const r = await curl(["-v", "-x", proxy, `${up.httpUrl}/echo/1`, `${up.httpUrl}/echo/2`, `${up.httpUrl}/echo/3`]);
    expect(r.code).toBe(0);
    expect(r.err).toContain("Re-using existing connection");
    const ports = new Set(up.seen.slice(before).map((s) => s.remotePort));
    expect(up.seen.length - before).toBe(3);
    expect(ports.size).toBe(1);
  });

  test("HEAD, 204 and 304 have no bodies and keep the connection usable", async () => {
    const r = await curl(["-v", "-x", proxy, "-I", `${up.httpUrl}/head-test`]);
    expect(r.out).toContain("content-length: 12");
    const s = await curl(["-v", "-x", proxy, "-o", "/dev/null", "-o", "/dev/null", "-o", "/dev/null", "-w", "%{http_code} ", `${up.httpUrl}/status/204`, `${up.httpUrl}/status/304`, `${up.httpUrl}/echo`]);
    expect(s.out.trim()).toBe("204 304 200");
    expect(s.err).toContain("Re-using existing connection");
  });

  test("Expect: 100-continue is relayed", async () => {
    const body = "x".repeat(5000);
    const r = await curl(["-v", "-x", proxy, "-H", "Expect: 100-continue", "--data-binary", body, `${up.httpUrl}/echo`]);
    expect(JSON.parse(r.out).size).toBe(5000);
    expect(r.err).toContain("100 Continue");
  });

  test("hop-by-hop headers are not forwarded, end-to-end ones are, no Via is added", async () => {
    const r = await curl(["-x", proxy, "-H", "Connection: keep-alive, X-Hop", "-H", "X-Hop: secret", "-H", "Proxy-Authorization: Basic Zm9v", "-H", "X-Keep: yes", `${up.httpUrl}/echo`]);
    const h = JSON.parse(r.out).headers;
    expect(h["x-keep"]).toBe("yes");
    expect(h["x-hop"]).toBeUndefined();
    expect(h["proxy-authorization"]).toBeUndefined();
    expect(h.via).toBeUndefined();
  });

  test("gzip response bodies are stored decoded and findable by search", async () => {
    const r = await curl(["-x", proxy, "--compressed", `${up.httpUrl}/gzip`]);
    expect(JSON.parse(r.out).word).toBe("needle-in-gzip");
    const e = await newest();
    expect(JSON.parse(e.res_body).word).toBe("needle-in-gzip");
    expect(e.res_body_decoded_from).toBe("gzip");
    const found = await entries("&search=needle-in-gzip");
    expect(found.map((x) => x.id)).toContain(e.id);
  });

  test("binary bodies are stored as base64 with the encoding named", async () => {
    await curl(["-x", proxy, "-o", "/dev/null", `${up.httpUrl}/bytes?n=300`]);
    const e = await newest();
    expect(e.res_body_encoding).toBe("base64");
    expect(Buffer.from(e.res_body, "base64").length).toBe(300);
  });
});

describe("HTTPS interception through CONNECT", () => {
  test("curl with --cacert trusts the minted leaf; GET and POST are captured as https", async () => {
    // (--http1.1: curl would pick h2, which tapwire offers too: tests/core/proxy/h2-proxy.test.ts)
    const r = await curl(["-v", "--http1.1", "-x", proxy, "--cacert", caFile, `${up.httpsUrl}/echo?s=1`]);
    expect(r.code).toBe(0);
    expect(r.err).toContain("ALPN: server accepted http/1.1");
    expect(JSON.parse(r.out).path).toBe("/echo?s=1");
    const e = await newest();
    expect(e.url).toBe(`${up.httpsUrl}/echo?s=1`);
    const p = await curl(["-x", proxy, "--cacert", caFile, "-d", "secret=1", `${up.httpsUrl}/echo`]);
    expect(JSON.parse(p.out).body).toBe("secret=1");
    expect((await newest()).req_body).toBe("secret=1");
  });

  test("Bun fetch with an https URL through the proxy", async () => {
    const ca = readFileSync(caFile, "utf8");
    const r = await fetch(`${up.httpsUrl}/echo/fetch`, { proxy, tls: { ca } });
    expect(((await r.json()) as any).path).toBe("/echo/fetch");
  });

  test("node:https over CONNECT", async () => {
    const ca = readFileSync(caFile, "utf8");
    const r = await nodeHttpsViaConnect(`${up.httpsUrl}/echo/node?q=2`, { method: "POST", body: "node body", ca });
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body)).toMatchObject({ path: "/echo/node?q=2", body: "node body" });
  });

  test("a client that sends host:port as its TLS server name (hey does) is still intercepted", async () => {
    const { cleanSni } = await import("../../../src/core/proxy/http-session.ts");
    expect(cleanSni("localhost:8443")).toBe("localhost");
    expect(cleanSni("not a name")).toBeNull();
    const ca = readFileSync(caFile, "utf8");
    const u = new URL(up.httpsUrl);
    const body = await new Promise<string>((resolve, reject) => {
      const req = http.request({ host: "127.0.0.1", port: svc.proxyPort, method: "CONNECT", path: `${u.hostname}:${u.port}` });
      req.on("connect", (_res, socket) => {
        // the certificate is checked against "localhost" below, whatever the SNI says
        const t = tls.connect({ socket, servername: `localhost:${u.port}`, ca, checkServerIdentity: (_h, cert) => tls.checkServerIdentity("localhost", cert) }, () => {
          t.write(`GET /echo/sni HTTP/1.1\r\nHost: localhost:${u.port}\r\nConnection: close\r\n\r\n`);
        });
        let out = "";
        t.on("data", (d) => (out += d));
        t.on("end", () => resolve(out));
        t.on("error", reject);
      });
      req.on("error", reject);
      req.end();
    });
    expect(body.split("\r\n")[0]).toBe("HTTP/1.1 200 OK");
    expect(body).toContain('"path":"/echo/sni"');
  });

  test("the leaf for an IP address carries an IP SAN", async () => {
    // The upstream cert covers localhost only, so the upstream leg fails verification (502);
    // the client-side leg must still verify against our CA for 127.0.0.1.
    const r = await curl(["-x", proxy, "--cacert", caFile, "-o", "/dev/null", "-w", "%{http_code}", `https://127.0.0.1:${up.https.port}/echo`]);
    expect(r.code).toBe(0);
    expect(r.out).toBe("502");
  });

  test("bytes after CONNECT that are not TLS are treated as plain HTTP", async () => {
    const r = await curl(["-x", proxy, "--proxytunnel", `${up.httpUrl}/echo/tunnelled`]);
    expect(JSON.parse(r.out).path).toBe("/echo/tunnelled");
    const e = await newest();
    expect(e.url).toBe(`${up.httpUrl}/echo/tunnelled`);
  });
});

describe("upstream failures", () => {
  test("connection refused → 502 naming the cause, captured with status 502 and an error", async () => {
    const dead = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    const port = dead.port;
    dead.stop(true);
    const r = await curl(["-x", proxy, "-w", "\n%{http_code}", `http://127.0.0.1:${port}/x`]);
    expect(r.out).toContain("connection refused");
    expect(r.out.trim().endsWith("502")).toBe(true);
    const e = await newest();
    expect(e.status_code).toBe(502);
    expect(e.error).toContain("refused");
  });

  test("DNS failure → 502", async () => {
    const r = await curl(["-x", proxy, "-w", "\n%{http_code}", "http://no-such-host.invalid/x"]);
    expect(r.out).toContain("DNS");
    expect(r.out.trim().endsWith("502")).toBe(true);
    expect((await newest()).error).toContain("DNS");
  });

  test("upstream TLS verification failure → 502 naming it", async () => {
    const other = await startService(); // does not trust the upstream's CA
    try {
      const r = await curl(["-x", `http://127.0.0.1:${other.proxyPort}`, "--cacert", join(other.config.dataDir, "ca.pem"), "-w", "\n%{http_code}", `${up.httpsUrl}/echo`]);
      expect(r.out).toContain("TLS verification");
      expect(r.out.trim().endsWith("502")).toBe(true);
      const insecure = await startService({ upstreamInsecure: true });
      try {
        const ok = await curl(["-x", `http://127.0.0.1:${insecure.proxyPort}`, "--cacert", join(insecure.config.dataDir, "ca.pem"), `${up.httpsUrl}/echo`]);
        expect(JSON.parse(ok.out).path).toBe("/echo");
      } finally {
        await insecure.stop();
      }
    } finally {
      await other.stop();
    }
  });

  test("upstream reset before responding → 502", async () => {
    const rude = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data(s) { s.terminate(); } } });
    try {
      const r = await curl(["-x", proxy, "-w", "\n%{http_code}", `http://127.0.0.1:${rude.port}/x`]);
      expect(r.out.trim().endsWith("502")).toBe(true);
      expect((await newest()).status_code).toBe(502);
    } finally {
      rude.stop(true);
    }
  });

  test("upstream silent past the idle timeout → 504 (a timeout is a gateway timeout)", async () => {
    const mute = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    const quick = await startService({ idleTimeoutSec: 1 });
    try {
      const r = await curl(["-x", `http://127.0.0.1:${quick.proxyPort}`, "-w", "\n%{http_code}", `http://127.0.0.1:${mute.port}/x`]);
      expect(r.out).toContain("sent nothing for 1 s");
      expect(r.out.trim().endsWith("504")).toBe(true);
    } finally {
      await quick.stop();
      mute.stop(true);
    }
  });
});

describe("capture control, ignored hosts and ignored clients", () => {
  test("capture stopped: traffic flows, nothing is stored; started again: stored", async () => {
    const count = async () => ((await (await svc.call("/api/v1/capture/status")).json()) as any).entry_count;
    expect((await svc.call("/api/v1/capture/stop", { method: "POST" })).status).toBe(204);
    const before = await count();
    const r = await curl(["-x", proxy, `${up.httpUrl}/echo/uncaptured`]);
    expect(JSON.parse(r.out).path).toBe("/echo/uncaptured");
    expect(await count()).toBe(before);
    await svc.call("/api/v1/capture/start", { method: "POST" });
    await curl(["-x", proxy, `${up.httpUrl}/echo/captured-again`]);
    expect(await count()).toBe(before + 1);
  });

  test("an ignored host is tunnelled byte-for-byte (the client sees the upstream's own certificate) and not captured", async () => {
    expect((await svc.call("/api/v1/ignored-hosts/localhost", { method: "PUT" })).status).toBe(204);
    expect(await (await svc.call("/api/v1/ignored-hosts")).json()).toEqual(["localhost"]);
    const before = (await entries()).length;
    // trusting only the upstream's CA proves there was no interception
    const r = await curl(["-x", proxy, "--cacert", up.caFile, `${up.httpsUrl}/echo/ignored`]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out).path).toBe("/echo/ignored");
    expect((await entries()).length).toBe(before);
    expect((await svc.call("/api/v1/ignored-hosts/localhost", { method: "DELETE" })).status).toBe(204);
    const r2 = await curl(["-x", proxy, "--cacert", up.caFile, `${up.httpsUrl}/echo/ignored`]);
    expect(r2.code).not.toBe(0); // intercepted again: our leaf is not signed by the upstream's CA
  });

  test("wildcard ignored host matches subdomains only", async () => {
    await svc.call("/api/v1/ignored-hosts/*.example.test", { method: "PUT" });
    const { HostSet, PersistedList } = await import("../../../src/features/ignore/lists.ts");
    const hs = new HostSet(svc.feature<{ name: string; hosts: InstanceType<typeof PersistedList> }>("ignore-hosts").hosts);
    expect(hs.matches("a.example.test")).toBe(true);
    expect(hs.matches("a.b.example.test")).toBe(true);
    expect(hs.matches("example.test")).toBe(false);
    await svc.call("/api/v1/ignored-hosts", { method: "DELETE" });
    expect(await (await svc.call("/api/v1/ignored-hosts")).json()).toEqual([]);
  });

  test("a bad host entry is 400", async () => {
    const r = await svc.call(`/api/v1/ignored-hosts/${encodeURIComponent("http://x/y")}`, { method: "PUT" });
    expect(r.status).toBe(400);
  });

  test("an ignored client (by label) is proxied but not captured", async () => {
    await curl(["-x", proxy, `${up.httpUrl}/echo/labelled`]);
    const label = (await newest()).client_addr as string;
    expect(label.length).toBeGreaterThan(0);
    expect((await svc.call(`/api/v1/ignored-clients/${encodeURIComponent(label)}`, { method: "PUT" })).status).toBe(204);
    expect(await (await svc.call("/api/v1/ignored-clients")).json()).toEqual([label]);
    const before = (await entries()).length;
    const r = await curl(["-x", proxy, `${up.httpUrl}/echo/ignored-client`]);
    expect(JSON.parse(r.out).path).toBe("/echo/ignored-client");
    expect((await entries()).length).toBe(before);
    expect((await svc.call(`/api/v1/ignored-clients/${encodeURIComponent(label)}`, { method: "DELETE" })).status).toBe(204);
  });

  test("loopback clients are labelled with their process name", async () => {
    await curl(["-x", proxy, `${up.httpUrl}/echo/who`]);
    const who = await newest();
    expect({ label: who.client_addr, url: who.url }).toEqual({ label: "curl", url: `${up.httpUrl}/echo/who` });
  });

  test("ignore lists survive a restart", async () => {
    const a = await startService();
    await a.call("/api/v1/ignored-hosts/persist.example", { method: "PUT" });
    await a.call(`/api/v1/ignored-clients/${encodeURIComponent("my tool")}`, { method: "PUT" });
    const dir = a.config.dataDir;
    await a.stop();
    const b = await startService({ dataDir: dir });
    try {
      expect(await (await b.call("/api/v1/ignored-hosts")).json()).toEqual(["persist.example"]);
      expect(await (await b.call("/api/v1/ignored-clients")).json()).toEqual(["my tool"]);
    } finally {
      await b.stop();
    }
  });
});

describe("capture limits", () => {
  test("bodies are capped at --body-limit and the true size is recorded", async () => {
    const small = await startService({ bodyLimit: 1000 });
    try {
      const r = await curl(["-x", `http://127.0.0.1:${small.proxyPort}`, "-o", "/dev/null", "-w", "%{size_download}", `${up.httpUrl}/bytes?n=5000`]);
      expect(r.out).toBe("5000");
      const list = ((await (await small.call("/api/v1/traffic")).json()) as any).items;
      const e: any = await (await small.call(`/api/v1/traffic/${list[0].id}`)).json();
      expect(e.res_body_size).toBe(5000);
      expect(e.res_body_truncated).toBe(true);
      expect(Buffer.from(e.res_body, "base64").length).toBe(1000);
    } finally {
      await small.stop();
    }
  });
});
