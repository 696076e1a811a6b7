// Issue 21, finding 7: kill -9 under traffic, several rounds. Every flow whose response a client fully received
// is in the capture after the restart, the database passes PRAGMA integrity_check, and a rule change the API
// acknowledged before the kill is still there.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { rmSync } from "node:fs";
import { startTapwire, tempDir, type RunningTapwire } from "../helpers/tapwire-process.ts";
import { startUpstream, type Upstream } from "../helpers/upstream.ts";

let up: Upstream;
const dataDir = tempDir("tapwire-crash-");
beforeAll(() => {
  up = startUpstream();
});
afterAll(() => {
  up?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

const ROUNDS = 5;
const CLIENTS = 12;

/** Every URL in the capture (paged). */
async function capturedUrls(t: RunningTapwire): Promise<Set<string>> {
  const urls = new Set<string>();
  for (let offset = 0; ; offset += 500) {
    const r = await t.api(`/api/v1/traffic?limit=500&offset=${offset}`);
    expect(r.status).toBe(200);
    const j = (await r.json()) as { items: { url: string }[]; total: number };
    for (const e of j.items) urls.add(e.url);
    if (j.items.length < 500) break;
  }
  return urls;
}

test(`kill -9 under traffic, ${ROUNDS} rounds: nothing a client received is lost; integrity_check ok; acknowledged rules kept`, async () => {
  let prev: { received: string[]; host: string } | null = null;
  let seed = 12345;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  let checked = 0;
  for (let round = 0; round <= ROUNDS; round++) {
    const t = await startTapwire({ dataDir });
    try {
      if (prev) {
        const urls = await capturedUrls(t);
        const missing = prev.received.filter((u) => !urls.has(u));
        expect({ round, missing }).toEqual({ round, missing: [] });
        checked += prev.received.length;
        const hosts = (await (await t.api("/api/v1/intercept-hosts")).json()) as string[];
        expect(hosts).toContain(prev.host);
      }
      if (round === ROUNDS) break;
      const host = `round-${round}.crash.test`;
      expect((await t.api(`/api/v1/intercept-hosts/${host}`, { method: "PUT" })).status).toBe(204);
      const received: string[] = [];
      let stop = false;
      const proxy = `http://127.0.0.1:${t.handshake.proxy_port}`;
      const loops = Array.from({ length: CLIENTS }, async (_, c) => {
        for (let n = 0; !stop; n++) {
          const url = `${up.httpUrl}/echo/r${round}-c${c}-${n}`;
          try {
            const res = await fetch(url, { proxy, signal: AbortSignal.timeout(5000) });
            const body = await res.text();
            if (res.status === 200 && body.includes(`r${round}-c${c}-${n}`)) received.push(url);
          } catch {
            return; // the proxy is gone
          }
        }
      });
      // traffic for a random while, then the kill
      const runFor = 300 + Math.floor(rand() * 700);
      await new Promise((r) => setTimeout(r, runFor));
      t.proc.kill("SIGKILL");
      await t.proc.exited;
      stop = true;
      await Promise.all(loops);
      expect(received.length).toBeGreaterThan(0);
      // the database as the crash left it passes SQLite's own check
      const db = new Database(join(dataDir, "capture", "capture.db"));
      try {
        expect((db.query("PRAGMA integrity_check").get() as { integrity_check: string }).integrity_check).toBe("ok");
      } finally {
        db.close();
      }
      prev = { received, host };
    } finally {
      if (t.proc.exitCode === null) await t.stop();
    }
  }
  expect(checked).toBeGreaterThan(ROUNDS * 10);
}, 120_000);
