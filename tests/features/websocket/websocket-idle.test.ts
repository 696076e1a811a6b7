import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Server } from "bun";
import { startService } from "../../helpers/service.ts";

/*
 * A WebSocket through tapwire must live as long as its two ends keep it open. The upstream socket of the relay
 * still carries the pool's "idle" timeout (config idleTimeoutSec), and in Bun 1.4.5 `socket.timeout(n)` on a
 * Bun.connect socket is a deadline from when it was armed, not an inactivity timer: received data does not
 * re-arm it. So the connection is cut about idleTimeoutSec after the upstream connect (rounded up to Bun's
 * 4-second timer tick) even while messages flow both ways. Here idleTimeoutSec = 1, and the connection keeps
 * exchanging a message every 100 ms for 6 seconds.
 */

type Svc = Awaited<ReturnType<typeof startService>>;
let svc: Svc;
let srv: Server<unknown>;

beforeAll(async () => {
  svc = await startService({ idleTimeoutSec: 1 });
  srv = Bun.serve<undefined>({
    port: 0,
    hostname: "127.0.0.1",
    fetch(req, s) {
      if (s.upgrade(req)) return;
      return new Response("upgrade required", { status: 426 });
    },
    websocket: {
      idleTimeout: 0,
      message(ws, m) {
        ws.send(m);
      },
    },
  });
});
afterAll(async () => {
  await svc.stop();
  srv.stop(true);
});

test(
  "a WebSocket exchanging messages outlives the upstream idle timeout",
  async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${srv.port}/chatty`, { proxy: `http://127.0.0.1:${svc.proxyPort}` } as unknown as string[]);
    let closedAfterMs: number | null = null;
    const t0 = performance.now();
    ws.onclose = () => (closedAfterMs = Math.round(performance.now() - t0));
    await new Promise<void>((resolve, reject) => {
      ws.onopen = () => resolve();
      ws.onerror = () => reject(new Error("WebSocket through the proxy failed"));
    });
    const RUN_MS = 6000;
    let sent = 0;
    let echoed = 0;
    // one message in flight at a time: send, wait for its echo, pause 100 ms, repeat, for RUN_MS
    await new Promise<void>((resolve) => {
      ws.onmessage = (e) => {
        expect(String(e.data)).toBe(`n${echoed}`);
        echoed++;
        if (performance.now() - t0 >= RUN_MS) return resolve();
        setTimeout(() => {
          if (ws.readyState === WebSocket.OPEN) ws.send(`n${sent++}`);
        }, 100);
      };
      ws.addEventListener("close", () => resolve());
      ws.send(`n${sent++}`);
    });
    expect(closedAfterMs).toBeNull();
    expect(echoed).toBe(sent);
    expect(echoed).toBeGreaterThan(20);
    const c = (await (await svc.call("/api/v1/websocket/connections")).json()) as { items: { closed: boolean; framesSeen: number }[] };
    expect(c.items[0].closed).toBe(false);
    expect(c.items[0].framesSeen).toBe(2 * echoed);
    ws.close();
  },
  20000,
);
