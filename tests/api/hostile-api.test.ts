// Issue 21, finding 8: input a client can send to the management API is refused with 400/403, never a 500,
// never accepted. Raw sockets, so Host headers and request targets go exactly as written.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startService } from "../helpers/service.ts";
import { parseResponses, rawExchange } from "../helpers/raw-client.ts";

type Svc = Awaited<ReturnType<typeof startService>>;
let svc: Svc;
beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.stop();
});

async function raw(req: string): Promise<{ status: number; body: string }> {
  const r = await rawExchange(svc.apiPort!, req, { timeoutMs: 5000, until: (t) => parseResponses(t).length > 0 });
  const res = parseResponses(r.text)[0];
  expect(res).toBeDefined();
  return { status: res!.status, body: res!.body };
}

describe("8: Host and request target", () => {
  const auth = () => `Authorization: Bearer ${svc.token}\r\n`;
  test("Host 127.0.0.1:PORT@evil.com: 403 forbidden_host, not 500", async () => {
    const r = await raw(`GET /api/v1/traffic HTTP/1.1\r\nHost: 127.0.0.1:${svc.apiPort}@evil.com\r\n${auth()}Connection: close\r\n\r\n`);
    expect(r.status).toBe(403);
    expect(JSON.parse(r.body).error.code).toBe("forbidden_host");
  });

  test("HTTP/1.0 without Host: 400 or 403, not 500", async () => {
    const r = await raw(`GET /api/v1/traffic HTTP/1.0\r\n${auth()}\r\n`);
    expect([400, 403]).toContain(r.status);
    expect(JSON.parse(r.body).error.code).toBeString();
  });

  // an absolute-form target naming another authority: 403 (tests/api/front-door.test.ts has every variant)
  test("an absolute-form target naming another authority: 403 forbidden_host", async () => {
    const r = await raw(`GET http://evil.example/api/v1/traffic HTTP/1.1\r\nHost: 127.0.0.1:${svc.apiPort}\r\n${auth()}Connection: close\r\n\r\n`);
    expect(r.status).toBe(403);
    expect(JSON.parse(r.body).error.code).toBe("forbidden_host");
  });

  test("an absolute-form target naming us is served", async () => {
    const r = await raw(`GET http://127.0.0.1:${svc.apiPort}/api/v1/health HTTP/1.1\r\nHost: 127.0.0.1:${svc.apiPort}\r\nConnection: close\r\n\r\n`);
    expect(r.status).toBe(200);
  });
});

describe("8: numbers are decimal digits only", () => {
  for (const path of ["/api/v1/traffic?limit=1e309", "/api/v1/traffic?limit=1e3", "/api/v1/traffic/1e3", "/api/v1/traffic/0x1", "/api/v1/traffic/99999999999999999999999", "/api/v1/traffic?offset=99999999999999999999999"]) {
    test(`${path}: 400`, async () => {
      const r = await svc.call(path);
      expect(r.status).toBe(400);
      expect(((await r.json()) as any).error.code).toBe("bad_request");
    });
  }
});

describe("8: list entries with control characters or path parts are refused, not persisted", () => {
  for (const [list, values] of [
    ["intercept-hosts", ["a\rb.example", "a\nb.example", "a\u0000b.example", "../etc", "a b.example"]],
    ["ignored-clients", ["cu\rrl", "cu\nrl", "cu\u0000rl", "../../etc/passwd", "a/b"]],
  ] as const) {
    for (const v of values) {
      test(`${list} ${JSON.stringify(v)}: 400`, async () => {
        const r = await svc.call(`/api/v1/${list}/${encodeURIComponent(v)}`, { method: "PUT" });
        expect(r.status).toBe(400);
        const all = (await (await svc.call(`/api/v1/${list}`)).json()) as string[];
        expect(all).not.toContain(v);
      });
    }
  }
  test("ordinary entries still work", async () => {
    expect((await svc.call(`/api/v1/ignored-clients/curl`, { method: "PUT" })).status).toBe(204);
    expect((await svc.call(`/api/v1/ignored-clients/10.0.0.1`, { method: "PUT" })).status).toBe(204);
    expect((await svc.call(`/api/v1/intercept-hosts/api.example.com`, { method: "PUT" })).status).toBe(204);
  });
});
