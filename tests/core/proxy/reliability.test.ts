// Issue 21: hostile and unlucky peers against a running service, over real sockets.
// Each describe block is one numbered finding; each test failed against the code before its fix.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import net from "node:net";
import { startService } from "../../helpers/service.ts";
import { startFaultUpstream, type FaultUpstream } from "../../helpers/fault-upstream.ts";
import { parseResponses, rawExchange, waitUntil } from "../../helpers/raw-client.ts";

setDefaultTimeout(60_000);
type Svc = Awaited<ReturnType<typeof startService>>;

let fault: FaultUpstream;
let svc: Svc;
let host: string;

beforeAll(async () => {
  fault = await startFaultUpstream();
  host = `127.0.0.1:${fault.port}`;
  svc = await startService({ interceptTimeoutSec: 4, idleTimeoutSec: 2, clientHeaderTimeoutSec: 2, clientIdleTimeoutSec: 8, maxConnections: 200 });
});
afterAll(async () => {
  await svc?.stop();
  await fault?.stop();
});

const post = (path: string, size: number) => `POST http://${host}${path} HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${size}\r\nConnection: close\r\n\r\n`;
const get = (path: string, extra = "") => `GET http://${host}${path} HTTP/1.1\r\nHost: ${host}\r\n${extra}\r\n`;

async function stillServing(): Promise<void> {
  const r = await rawExchange(svc.proxyPort!, get("/ok", "Connection: close\r\n"), { timeoutMs: 10_000 });
  expect(parseResponses(r.text).map((x) => x.status)).toEqual([200]);
}

async function entries(path: string): Promise<any[]> {
  const r = await svc.call(`/api/v1/traffic?limit=200`);
  const j = (await r.json()) as { items: any[] };
  return j.items.filter((e) => String(e.url).includes(path));
}

describe("1: a paused request of any size is listed, resumable and bound by the intercept timeout", () => {
  for (const size of [64 * 1024, 900 * 1024, 1024 * 1024, 1536 * 1024]) {
    test(`POST of ${size} bytes in one write: listed, resumed, answered`, async () => {
      const path = `/ok?bp=${size}`;
      expect((await svc.call("/api/v1/breakpoints", { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify({ pattern: `${host}/ok`, intercept_response: false }) })).status).toBeLessThan(300);
      try {
        const body = Buffer.alloc(size, 120);
        const pending = rawExchange(svc.proxyPort!, Buffer.concat([Buffer.from(post(path, size)), body]), { timeoutMs: 20_000 });
        const paused = await waitUntil(
          "the flow listed in /intercepts",
          async () => ((await (await svc.call("/api/v1/intercepts")).json()) as any[]).find((f) => String(f.url).includes(`bp=${size}`)),
        );
        expect((await svc.call(`/api/v1/intercepts/${paused.id}/resume`, { method: "POST" })).status).toBe(204);
        const r = await pending;
        expect(parseResponses(r.text).map((x) => x.status)).toEqual([200]);
        expect(fault.seen.some((s) => s.target.includes(`bp=${size}`))).toBe(true);
      } finally {
        await svc.call("/api/v1/breakpoints", { method: "DELETE" });
      }
    });
  }

  test("a 1 MiB POST that nobody resumes is released by --intercept-timeout", async () => {
    const size = 1024 * 1024;
    await svc.call("/api/v1/breakpoints", { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify({ pattern: `${host}/ok`, intercept_response: false }) });
    try {
      const r = await rawExchange(svc.proxyPort!, Buffer.concat([Buffer.from(post("/ok?bp=timeout", size)), Buffer.alloc(size, 121)]), { timeoutMs: 15_000 });
      expect(r.timedOut).toBe(false);
      expect(parseResponses(r.text).map((x) => x.status)).toEqual([200]);
    } finally {
      await svc.call("/api/v1/breakpoints", { method: "DELETE" });
    }
  });
});

/** A GET for `n` bytes from /big that stops reading after the first bytes for `pauseMs` (forever when null). */
function pausedDownload(n: number, pauseMs: number | null): Promise<{ bytes: number; complete: boolean }> {
  return new Promise((resolve) => {
    const sock = net.connect(svc.proxyPort!, "127.0.0.1");
    let got = 0;
    let headEnd = -1;
    let head = "";
    let paused = false;
    const done = (complete: boolean) => {
      sock.destroy();
      resolve({ bytes: got, complete });
    };
    sock.on("connect", () => sock.write(get(`/big?n=${n}`, "Connection: close\r\n")));
    sock.on("data", (d) => {
      if (headEnd < 0) {
        head += d.toString("latin1");
        headEnd = head.indexOf("\r\n\r\n");
        if (headEnd >= 0) got = head.length - headEnd - 4;
      } else got += d.length;
      if (!paused) {
        paused = true;
        sock.pause();
        if (pauseMs !== null) setTimeout(() => sock.resume(), pauseMs);
      }
      if (got >= n) done(true);
    });
    sock.on("close", () => done(got >= n));
    sock.on("error", () => {});
  });
}

describe("2: a slow or paused reader gets the whole body; the upstream is not blamed", () => {
  test("a client that stops reading a 64 MiB download for 6 s (idle timeout 2 s) gets every byte", async () => {
    const n = 64 * 1024 * 1024;
    const r = await pausedDownload(n, 6000);
    expect(r).toEqual({ bytes: n, complete: true });
    const e = (await entries(`/big?n=${n}`))[0];
    expect(e?.error ?? null).toBeNull();
  });

  test("a client that never reads again is closed by --client-idle-timeout, and the entry says the client stalled", async () => {
    const n = 48 * 1024 * 1024;
    void pausedDownload(n, null);
    const e = await waitUntil("the entry with the client's stall", async () => (await entries(`/big?n=${n}`)).find((x) => x.error), 20_000);
    expect(e.error).toContain("client accepted nothing for 8 s");
    expect(e.error).not.toContain("sent nothing");
  });
});

describe("5: upstream timeouts fire on time, fresh or pooled, and answer 504", () => {
  test("never-answering upstream on a fresh connection: 504 after --idle-timeout (2 s) within 10%", async () => {
    const t0 = performance.now();
    const r = await rawExchange(svc.proxyPort!, get("/stall?fresh", "Connection: close\r\n"), { timeoutMs: 20_000 });
    const s = (performance.now() - t0) / 1000;
    const res = parseResponses(r.text);
    expect(res.map((x) => x.status)).toEqual([504]);
    expect(res[0]!.body).toContain("sent nothing for 2 s");
    expect(s).toBeGreaterThan(1.9);
    expect(s).toBeLessThan(2.2 + 0.3); // 10% plus scheduling slack on a loaded machine
    const e = (await entries("/stall?fresh"))[0];
    expect(e.status_code).toBe(504);
    expect(e.error).toContain("sent nothing for 2 s");
  });

  test("never-answering upstream on a pooled connection: 504 within 10% too", async () => {
    let t1 = 0;
    const r = await rawExchange(
      svc.proxyPort!,
      [get("/ok"), { waitFor: (t) => t.includes("\r\n\r\nok"), write: get("/stall?pooled", "Connection: close\r\n") }],
      { timeoutMs: 20_000, until: (t) => t.includes("504") && t.endsWith("\n") && t.includes("sent nothing") },
    );
    void t1;
    const res = parseResponses(r.text);
    expect(res.map((x) => x.status)).toEqual([200, 504]);
    expect(fault.seen.filter((x) => x.target.includes("/stall?pooled")).length).toBe(1);
    const e = (await entries("/stall?pooled"))[0];
    expect(e.status_code).toBe(504);
    // timing of the pooled case: measured from the second request
    const t0 = performance.now();
    const r2 = await rawExchange(svc.proxyPort!, [get("/ok"), { waitFor: (t) => t.includes("\r\n\r\nok"), write: get("/stall?pooled2", "Connection: close\r\n") }], {
      timeoutMs: 20_000,
      until: (t) => /504[\s\S]*sent nothing for 2 s\n/.test(t),
    });
    const s = (performance.now() - t0) / 1000;
    expect(parseResponses(r2.text).map((x) => x.status)).toEqual([200, 504]);
    expect(s).toBeGreaterThan(1.9);
    expect(s).toBeLessThan(2.5);
  });
});

describe("3: a WebSocket compression bomb does not freeze the proxy", () => {
  test("five 1 GiB-inflating messages (about 1 MB each on the wire): the event loop never stalls, sizes are 'at least'", async () => {
    // The service runs in this process: the longest gap between 5 ms ticks is the stall every client would feel.
    let last = performance.now();
    let maxGap = 0;
    const tick = setInterval(() => {
      const now = performance.now();
      maxGap = Math.max(maxGap, now - last);
      last = now;
    }, 5);
    try {
      const key = Buffer.from("0123456789abcdef").toString("base64");
      const r = await rawExchange(
        svc.proxyPort!,
        `GET http://${host}/ws-bomb?mib=1024&count=5 HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n` +
          `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Extensions: permessage-deflate; client_no_context_takeover\r\n\r\n`,
        { timeoutMs: 60_000, until: (t) => t.endsWith("\x81\x05after") },
      );
      expect(r.text.startsWith("HTTP/1.1 101")).toBe(true);
      expect(r.text.endsWith("\x81\x05after")).toBe(true);
    } finally {
      clearInterval(tick);
    }
    expect(maxGap).toBeLessThan(500); // before the fix: about 1,800 ms per message
    const conns = (await (await svc.call("/api/v1/websocket/connections")).json()) as { items: any[] };
    const c = conns.items.find((x) => String(x.url).includes("ws-bomb"));
    const frames = await waitUntil("the six frames recorded", async () => {
      const f = (await (await svc.call(`/api/v1/websocket/connections/${c.connId}/frames`)).json()) as { items: any[] };
      return f.items.length >= 6 ? f.items : null;
    });
    const bombs = frames.filter((f) => f.opcode === "binary");
    expect(bombs.length).toBe(5);
    for (const b of bombs) {
      expect(b.sizeAtLeast).toBe(true);
      expect(b.truncated).toBe(true);
      expect(b.sizeBytes).toBeGreaterThanOrEqual(64 * 1024);
      expect(b.compressed).toBe(true);
    }
    expect(frames.find((f) => f.opcode === "text")?.text).toBe("after");
  });
});

describe("4: slow clients cannot hold sockets: head deadline and connection cap", () => {
  test("a head trickled one byte every 50 ms: 408 and close at --client-header-timeout (2 s)", async () => {
    const head = `GET http://${host}/ok HTTP/1.1\r\nHost: ${host}\r\nX-Slow: ${"a".repeat(400)}\r\n\r\n`;
    const parts = [...head].map((c) => ({ write: c, afterMs: 50 }));
    const r = await rawExchange(svc.proxyPort!, parts, { timeoutMs: 15_000 });
    expect(r.timedOut).toBe(false);
    expect(parseResponses(r.text).map((x) => x.status)).toEqual([408]);
    expect(r.closedByServer).toBe(true);
    expect(r.ms).toBeLessThan(3500);
    expect(fault.seen.some((s) => s.head.includes("X-Slow"))).toBe(false);
    await stillServing();
  });

  test("100 connections that send only 'GET ': every one gets 408 and is closed", async () => {
    const all = await Promise.all(Array.from({ length: 100 }, () => rawExchange(svc.proxyPort!, "GET ", { timeoutMs: 15_000 })));
    expect(all.every((r) => !r.timedOut && r.closedByServer && r.text.startsWith("HTTP/1.1 408"))).toBe(true);
    await stillServing();
  });

  test("--max-connections 20: the 21st connection is refused at once; room again once some close", async () => {
    const small = await startService({ maxConnections: 20 });
    const socks: net.Socket[] = [];
    try {
      for (let i = 0; i < 20; i++) {
        const s = net.connect(small.proxyPort!, "127.0.0.1");
        s.on("error", () => {});
        await new Promise<void>((r) => s.once("connect", () => r()));
        socks.push(s);
      }
      const sessions = (small as unknown as { proxyCtx: { sessions: Set<unknown> } }).proxyCtx.sessions;
      await waitUntil("20 sessions", () => sessions.size === 20);
      const over = await rawExchange(small.proxyPort!, `GET http://${host}/ok HTTP/1.1\r\nHost: ${host}\r\n\r\n`, { timeoutMs: 5000 });
      expect(over.timedOut).toBe(false);
      expect(parseResponses(over.text).map((x) => x.status)).toEqual([503]);
      expect(over.closedByServer).toBe(true);
      for (const s of socks.splice(0, 5)) s.destroy();
      await waitUntil("sessions freed", () => sessions.size === 15);
      const ok = await rawExchange(small.proxyPort!, `GET http://${host}/ok HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`, { timeoutMs: 5000 });
      expect(parseResponses(ok.text).map((x) => x.status)).toEqual([200]);
    } finally {
      for (const s of socks) s.destroy();
      await small.stop();
    }
  });
});

describe("6: a failure before the first response byte is a 502, and the entry says so", () => {
  test("head then an invalid chunk size in the same read: the client gets 502, the entry records 502", async () => {
    const r = await rawExchange(svc.proxyPort!, get("/bad-chunk", "Connection: close\r\n"), { timeoutMs: 10_000 });
    const res = parseResponses(r.text);
    expect(res.map((x) => x.status)).toEqual([502]);
    expect(res[0]!.body).toContain("bad response body from upstream");
    const e = await waitUntil("entry", async () => (await entries("/bad-chunk"))[0]);
    expect(e.status_code).toBe(502);
    expect(e.error).toContain("bad response body");
    await stillServing();
  });

  test("an invalid chunk after the head went out: the client saw 200, the entry says 200 with the error", async () => {
    const r = await rawExchange(svc.proxyPort!, get("/bad-chunk-later", "Connection: close\r\n"), { timeoutMs: 10_000 });
    expect(r.text.startsWith("HTTP/1.1 200")).toBe(true);
    expect(r.closedByServer).toBe(true);
    const e = await waitUntil("entry", async () => (await entries("/bad-chunk-later"))[0]);
    expect(e.status_code).toBe(200);
    expect(e.error).toContain("bad response body");
  });
});

describe("10: --upstream-insecure accepts any certificate; a stalled ClientHello is cut at the head deadline", () => {
  test("CONNECT 127.0.0.1 with SNI example.test, upstream certificate for localhost, --upstream-insecure: 200", async () => {
    const { startUpstream } = await import("../../helpers/upstream.ts");
    const { curl } = await import("../../helpers/upstream.ts");
    const up = startUpstream();
    const insecure = await startService({ upstreamInsecure: true });
    try {
      const port = up.https.port;
      const ca = `${insecure.config.dataDir}/ca.pem`;
      const r = await curl(["-x", `http://127.0.0.1:${insecure.proxyPort}`, "--cacert", ca, "--connect-to", `example.test:${port}:127.0.0.1:${port}`, "-w", "\n%{http_code}", `https://example.test:${port}/echo`]);
      expect(r.out.trimEnd().split("\n").at(-1)).toBe("200");
      // without the flag the same request fails, naming the name mismatch
      const strict = await startService({ upstreamCa: [up.caFile] });
      try {
        const s = await curl(["-x", `http://127.0.0.1:${strict.proxyPort}`, "--cacert", `${strict.config.dataDir}/ca.pem`, "--connect-to", `example.test:${port}:127.0.0.1:${port}`, "-w", "\n%{http_code}", `https://example.test:${port}/echo`]);
        expect(s.out.trimEnd().split("\n").at(-1)).toBe("502");
        expect(s.out).toContain("example.test");
      } finally {
        await strict.stop();
      }
    } finally {
      await insecure.stop();
      up.stop();
    }
  });

  test("a truncated ClientHello after CONNECT: closed at --client-header-timeout (2 s), not at the idle timer", async () => {
    // a TLS handshake record header announcing 512 bytes, then only 5 of them
    const partial = Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03]);
    const r = await rawExchange(svc.proxyPort!, [`CONNECT ${host} HTTP/1.1\r\nHost: ${host}\r\n\r\n`, { waitFor: (t) => t.includes("\r\n\r\n"), write: partial }], { timeoutMs: 15_000 });
    expect(r.text.startsWith("HTTP/1.1 200")).toBe(true);
    expect(r.timedOut).toBe(false);
    expect(r.closedByServer).toBe(true);
    expect(r.ms).toBeLessThan(4000);
  });
});

describe("11: 1xx floods, requests without Host, tapwire's own token", () => {
  test("5,000 '103 Early Hints' from the upstream: at most 10 relayed, then 502", async () => {
    const r = await rawExchange(svc.proxyPort!, get("/early-hints?n=5000", "Connection: close\r\n"), { timeoutMs: 10_000 });
    const res = parseResponses(r.text);
    expect(res.filter((x) => x.status === 103).length).toBeLessThanOrEqual(10);
    expect(res.at(-1)!.status).toBe(502);
    expect(res.at(-1)!.body).toContain("interim");
    // two hints are fine
    const ok = await rawExchange(svc.proxyPort!, get("/early-hints?n=2", "Connection: close\r\n"), { timeoutMs: 10_000 });
    expect(parseResponses(ok.text).map((x) => x.status)).toEqual([103, 103, 200]);
  });

  test("an HTTP/1.1 request without Host: 400, nothing forwarded", async () => {
    const r = await rawExchange(svc.proxyPort!, `GET http://${host}/ok?nohost HTTP/1.1\r\n\r\n`, { timeoutMs: 10_000 });
    expect(parseResponses(r.text).map((x) => x.status)).toEqual([400]);
    expect(fault.seen.some((s) => s.target.includes("nohost"))).toBe(false);
    await stillServing();
  });

  test("a request through the proxy to tapwire's own API: the bearer token is not in the capture", async () => {
    const api = `127.0.0.1:${svc.apiPort}`;
    const r = await rawExchange(svc.proxyPort!, `GET http://${api}/api/v1/capture/status HTTP/1.1\r\nHost: ${api}\r\nAuthorization: Bearer ${svc.token}\r\nConnection: close\r\n\r\n`, { timeoutMs: 10_000 });
    expect(parseResponses(r.text).map((x) => x.status)).toEqual([200]);
    const e = await waitUntil("entry", async () => (await entries(`${api}/api/v1/capture/status`))[0]);
    const detail = (await (await svc.call(`/api/v1/traffic/${e.id}`)).json()) as any;
    const text = JSON.stringify(detail);
    expect(text).not.toContain(svc.token);
    expect(text).toContain("[redacted]");
    const raw = await (await svc.call(`/api/v1/traffic/${e.id}/export/raw`)).text().catch(() => "");
    expect(raw).not.toContain(svc.token);
  });
});
