/**
 * Throttling beyond plain HTTP exchanges: WebSocket relays (both directions, and no stale limit from an earlier
 * exchange on the same connection) and byte-for-byte tunnels to ignored hosts (global cap).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import net from "node:net";
import { join } from "node:path";
import type { Server } from "bun";
import { writeFileAtomic } from "../../../src/store/json-state.ts";
import type { ThrottleFeature } from "../../../src/features/throttle/feature.ts";
import { RULES_FILE } from "../../../src/features/throttle/rules-file.ts";
import { startService } from "../../helpers/service.ts";
import { curl, startUpstream, type Upstream } from "../../helpers/upstream.ts";

type Svc = Awaited<ReturnType<typeof startService>>;
const RATE = 262144;

let up: Upstream;
let svc: Svc;
let ws: Server<unknown>;
/** Size of the binary message the WebSocket origin sends as soon as a client connects (?n=bytes). */
beforeAll(async () => {
  up = startUpstream();
  svc = await startService({ upstreamCa: [up.caFile] });
  ws = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req, server) {
      const u = new URL(req.url);
      if (u.pathname === "/ws" && server.upgrade(req, { data: Number(u.searchParams.get("n") ?? "0") })) return undefined;
      return new Response("small", { headers: { "content-type": "text/plain" } });
    },
    websocket: {
      open(s) {
        s.sendBinary(new Uint8Array(s.data as number).fill(120));
      },
      message() {},
    },
  });
});
afterAll(async () => {
  await svc.stop();
  ws.stop(true);
  up.stop();
});

const json = (body: unknown): RequestInit => ({ headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

/**
 * Raw client on one proxy connection: optionally a plain GET first (keep-alive), then a WebSocket upgrade; returns
 * the milliseconds from the 101 until `frameBytes` bytes of frames arrived, or null if they did not within `limitMs`.
 */
function wsDownloadMs(path: string, frameBytes: number, limitMs: number, firstGet?: string): Promise<number | null> {
  const origin = `127.0.0.1:${ws.port}`;
  return new Promise((resolve, reject) => {
    const sock = net.connect(svc.proxyPort!, "127.0.0.1");
    let buf = Buffer.alloc(0);
    let phase: "get" | "upgrade" | "frames" = firstGet ? "get" : "upgrade";
    let t101 = 0;
    let got = 0;
    let limit: ReturnType<typeof setTimeout> | null = null;
    const finish = (v: number | null) => {
      if (limit) clearTimeout(limit);
      sock.destroy();
      resolve(v);
    };
    const sendUpgrade = () =>
      sock.write(
        `GET http://${origin}${path} HTTP/1.1\r\nHost: ${origin}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`,
      );
    sock.on("connect", () => {
      if (firstGet) sock.write(`GET http://${origin}${firstGet} HTTP/1.1\r\nHost: ${origin}\r\n\r\n`);
      else sendUpgrade();
    });
    sock.on("data", (d: Buffer) => {
      if (phase === "frames") {
        got += d.length;
      } else {
        buf = Buffer.concat([buf, d]);
        const end = buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = buf.subarray(0, end).toString();
        if (phase === "get") {
          const len = Number(/content-length:\s*(\d+)/i.exec(head)?.[1] ?? "0");
          if (buf.length < end + 4 + len) return;
          buf = Buffer.alloc(0);
          phase = "upgrade";
          sendUpgrade();
          return;
        }
        if (!head.startsWith("HTTP/1.1 101")) return reject(new Error(`no 101: ${head}`));
        phase = "frames";
        t101 = performance.now();
        got = buf.length - (end + 4);
        limit = setTimeout(() => finish(null), limitMs);
      }
      if (got >= frameBytes) finish(performance.now() - t101);
    });
    sock.on("error", reject);
  });
}

describe("throttling beyond HTTP exchanges", () => {
  // Server-to-client frames take the 101 flow's download throttle.
  test("WebSocket frames from the server follow the global download cap", async () => {
    const r = await svc.call("/api/v1/throttle", { method: "PUT", ...json({ bytes_per_second: RATE }) });
    expect(r.status).toBe(200);
    try {
      const n = 1024 * 1024; // 4 s at 256 KiB/s
      const ms = await wsDownloadMs(`/ws?n=${n}`, n, 20_000);
      console.log(`WebSocket 1 MiB under a 256 KiB/s global cap: ${ms === null ? "not done in 20 s" : `${ms.toFixed(0)} ms`}`);
      expect(ms).not.toBeNull();
      expect(ms!).toBeGreaterThan(4000 * 0.9);
    } finally {
      await svc.call("/api/v1/throttle", { method: "DELETE" });
    }
  }, 30_000);

  // The client endpoint must not keep the previous exchange's throttle for a WebSocket on the same connection.
  test("a WebSocket on a keep-alive connection is not throttled by the previous request's rule", async () => {
    const f = svc.feature<ThrottleFeature>("throttle").rulesFile;
    const next = f.nextReload();
    writeFileAtomic(
      join(svc.config.dataDir, RULES_FILE),
      JSON.stringify({ rules: [{ id: "slow-page", url_pattern: `http://127.0.0.1:${ws.port}/slow`, down_bytes_per_second: 32768 }] }),
    );
    expect((await next).ok).toBe(true);
    try {
      const n = 256 * 1024; // 8 s at the stale rule's 32 KiB/s; immediate without a throttle
      const ms = await wsDownloadMs(`/ws?n=${n}`, n, 3000, "/slow");
      console.log(`WebSocket 256 KiB after a throttled GET on the same connection: ${ms === null ? "not done in 3 s" : `${ms.toFixed(0)} ms`}`);
      expect(ms).not.toBeNull();
      expect(ms!).toBeLessThan(1500);
    } finally {
      const cleared = f.nextReload();
      writeFileAtomic(join(svc.config.dataDir, RULES_FILE), JSON.stringify({ rules: [] }));
      await cleared;
    }
  }, 30_000);

  // A tunnel to an ignored host takes from the global buckets (the throttle addon's connect hook).
  test("a tunnel to an ignored host follows the global cap", async () => {
    expect((await svc.call("/api/v1/ignored-hosts/localhost", { method: "PUT" })).status).toBe(204);
    const r = await svc.call("/api/v1/throttle", { method: "PUT", ...json({ bytes_per_second: RATE }) });
    expect(r.status).toBe(200);
    try {
      const n = 1024 * 1024;
      const c = await curl(["-x", `http://127.0.0.1:${svc.proxyPort}`, "--cacert", up.caFile, "-o", "/dev/null", "-w", "%{time_total} %{size_download}", "--max-time", "20", `${up.httpsUrl}/bytes?n=${n}`]);
      expect(c.code).toBe(0);
      const [t, size] = c.out.split(" ");
      console.log(`tunnel (ignored host) 1 MiB under a 256 KiB/s global cap: ${t} s`);
      expect(Number(size)).toBe(n);
      expect(Number(t)).toBeGreaterThan(4 * 0.9);
    } finally {
      await svc.call("/api/v1/throttle", { method: "DELETE" });
      await svc.call("/api/v1/ignored-hosts/localhost", { method: "DELETE" });
    }
  }, 30_000);
});
