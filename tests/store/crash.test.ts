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

/** A child script: `code` runs with CaptureStore (and the names it imports itself) in scope. */
function childScript(code: string): string {
  const storeModule = join(import.meta.dir, "..", "..", "src", "store", "capture-store.ts");
  return `import { CaptureStore } from ${JSON.stringify(storeModule)};\n${code}`;
}

/** Writes the script into `dir`, runs it in a child process and returns the signal that ended it. */
async function killedChild(dir: string, script: string): Promise<unknown> {
  const file = join(dir, "child.ts");
  await Bun.write(file, script);
  const proc = Bun.spawn([process.execPath, file], { stdout: "pipe", stderr: "pipe" });
  await proc.exited;
  return proc.signalCode;
}

test("kill -9 right after durable(): large entries whose batches left the ring (transferred to the writer) survive too", async () => {
  const dir = tempDir("tapwire-crash-big-");
  try {
    const path = join(dir, "capture.db");
    const script = childScript(
      `const s = await CaptureStore.open(${JSON.stringify(path)}, { ringBytes: 4096, maxPending: 1 });
const body = new Uint8Array(20000).fill(65);
for (let i = 0; i < 20; i++) s.add({ method: "POST", url: "https://big.example/" + i, host: "big.example", status_code: 200, content_type: "",
  duration_ms: 1, timestamp: 1, client_addr: "t", has_response: true, req_headers: [], res_headers: [],
  req_body: body, req_body_size: body.length, res_body: body, res_body_size: body.length });
await s.durable();
process.kill(process.pid, "SIGKILL");
`,
    );
    expect(await killedChild(dir, script)).toBe("SIGKILL");
    const { CaptureStore } = await import("../../src/store/capture-store.ts");
    const s = await CaptureStore.open(path);
    try {
      await s.flush();
      expect(s.count()).toBe(20);
      expect((await s.get(20))!.req_body_size).toBe(20000);
    } finally {
      await s.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("kill -9 after more records than the mapped write-ahead files hold (rotation, the write() queue): every entry survives", async () => {
  const dir = tempDir("tapwire-crash-rotate-");
  try {
    const path = join(dir, "capture.db");
    // 40 entries of 1 MiB of random bytes (zstd cannot shrink them): 40 MiB of records against two 8 MiB mappings
    const script = childScript(
      `import { randomBytes } from "node:crypto";
const s = await CaptureStore.open(${JSON.stringify(path)});
for (let i = 1; i <= 40; i++) {
  const body = new Uint8Array(randomBytes(1024 * 1024));
  s.add({ method: "GET", url: "https://rotate.example/" + i, host: "rotate.example", status_code: 200, content_type: "",
    duration_ms: 1, timestamp: 1, client_addr: "t", has_response: true, req_headers: [], res_headers: [],
    req_body: null, req_body_size: 0, res_body: body, res_body_size: body.length });
  if (i % 7 === 0) await s.durable();
}
await s.durable();
process.kill(process.pid, "SIGKILL");
`,
    );
    expect(await killedChild(dir, script)).toBe("SIGKILL");
    const { CaptureStore } = await import("../../src/store/capture-store.ts");
    const s = await CaptureStore.open(path);
    try {
      await s.flush();
      expect(s.count()).toBe(40);
      for (const id of [1, 17, 40]) expect((await s.get(id))!.res_body_size).toBe(1024 * 1024);
    } finally {
      await s.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
