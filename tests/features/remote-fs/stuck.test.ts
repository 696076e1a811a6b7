/**
 * A server that accepts connections and never answers: a transfer to it is stuck before its first byte. Cancel and
 * pause must still answer at once, and the service must still stop (both used to wait for the stuck step).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startService } from "../../helpers/service.ts";
import { tempDir } from "../../helpers/tapwire-process.ts";

let silent: Bun.TCPSocketListener<undefined>;
let svc: Awaited<ReturnType<typeof startService>>;
let dataDir: string;
const held: unknown[] = [];

beforeAll(async () => {
  process.env.TW_STUCK_PW = "p";
  silent = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { open: (s) => void held.push(s), data() {} } });
  dataDir = tempDir("tw-remote-stuck-");
  writeFileSync(
    join(dataDir, "remote-connections.json"),
    JSON.stringify({ connections: [{ id: "silent", protocol: "webdav", host: "127.0.0.1", port: silent.port, label: "never answers", username: "u", auth: { password_env: "TW_STUCK_PW" }, options: { url: `http://127.0.0.1:${silent.port}/` } }] }),
    { mode: 0o600 },
  );
  svc = await startService({ dataDir });
});
afterAll(() => silent.stop(true));

const call = async (method: string, path: string, body?: unknown) => {
  const r = await svc.call(`/api/v1/remote-fs${path}`, { method, headers: { "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: r.status, json: (await r.json()) as any };
};

async function running(id: string): Promise<void> {
  for (const deadline = Date.now() + 10_000; Date.now() < deadline; await Bun.sleep(10)) {
    if ((await call("GET", `/transfers/${id}`)).json.state === "running") return;
  }
  throw new Error(`transfer ${id} never started`);
}

test("cancel and pause of a transfer stuck before its first byte answer at once; the service stops", async () => {
  const local = join(tempDir("tw-remote-stuck-out-"), "x.bin");
  const a = await call("POST", "/connections/silent/download", { remote_path: "/x.bin", local_path: local });
  expect(a).toMatchObject({ status: 202 });
  await running(a.json.transferId);
  const t0 = performance.now();
  const c = await call("POST", `/transfers/${a.json.transferId}/cancel`);
  expect(c.status).toBe(200);
  expect(c.json.state).toBe("cancelled");
  expect(performance.now() - t0).toBeLessThan(10_000); // at most the 2 s grace, not the stuck step
  expect(existsSync(local)).toBe(false);

  const b = await call("POST", "/connections/silent/download", { remote_path: "/y.bin", local_path: local });
  await running(b.json.transferId);
  const p = await call("POST", `/transfers/${b.json.transferId}/pause`);
  expect(p.json.state).toBe("paused");

  const u = await call("POST", "/connections/silent/upload", { local_path: join(dataDir, "remote-connections.json"), remote_path: "/z.json" });
  await running(u.json.transferId);
  // stop cancels what runs: it must not wait for the stuck upload
  await svc.stop();
}, 30_000);
