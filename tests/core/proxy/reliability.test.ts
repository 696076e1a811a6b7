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
  svc = await startService({ interceptTimeoutSec: 4, idleTimeoutSec: 2, clientHeaderTimeoutSec: 1, clientIdleTimeoutSec: 3 } as never);
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
