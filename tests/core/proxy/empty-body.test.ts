/**
 * A streamed response framed by `Content-Length: 0` (a redirect, an empty 200) ends its exchange: the flow is
 * captured and the client's keep-alive connection carries the next request. (It used to leave the flow open: no
 * entry, and a second request on the connection was never answered.)
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Server } from "bun";
import { startService } from "../../helpers/service.ts";

type Svc = Awaited<ReturnType<typeof startService>>;
let svc: Svc;
let origin: Server<unknown>;

beforeAll(async () => {
  origin = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      const p = new URL(req.url).pathname;
      if (p === "/redirect") return new Response(null, { status: 302, headers: { Location: "/next" } });
      if (p === "/empty") return new Response("", { status: 200 });
      return new Response("next");
    },
  });
  svc = await startService();
});
afterAll(async () => {
  await svc.stop();
  origin.stop(true);
});

test("302 and 200 with Content-Length: 0, then another request on the same connection", async () => {
  const base = `http://127.0.0.1:${origin.port}`;
  // one curl, three URLs: it reuses its connection to the proxy
  const p = Bun.spawn(["curl", "-sS", "--max-time", "10", "-x", `http://127.0.0.1:${svc.proxyPort}`, "-w", "%{http_code} %{num_connects}\\n", "-o", "/dev/null", `${base}/redirect`, "-o", "/dev/null", `${base}/empty`, "-o", "/dev/null", `${base}/next`], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  expect(err).toBe("");
  expect(code).toBe(0);
  expect(out.trim().split("\n")).toEqual(["302 1", "200 0", "200 0"]);
  const list = (await (await svc.call("/api/v1/traffic?order=asc")).json()) as { items: { url: string; status_code: number }[] };
  expect(list.items.map((e) => [e.url, e.status_code])).toEqual([[`${base}/redirect`, 302], [`${base}/empty`, 200], [`${base}/next`, 200]]);
});
