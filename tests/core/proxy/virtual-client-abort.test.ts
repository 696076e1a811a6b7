/** sendVirtual with an AbortSignal: the exchange rejects at once and the upstream connection of the request is dropped. */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Socket, TCPSocketListener } from "bun";
import { sendVirtual } from "../../../src/core/proxy/virtual-client.ts";
import type { ClientInfo } from "../../../src/pipeline/flow.ts";
import { startService } from "../../helpers/service.ts";

let svc: Awaited<ReturnType<typeof startService>>;
let hang: TCPSocketListener<undefined>;
let got: () => void;
let closed: () => void;
const requestArrived = new Promise<void>((r) => (got = r));
const upstreamClosed = new Promise<void>((r) => (closed = r));

beforeAll(async () => {
  // an upstream that reads the request and never answers; it notes when its connection closes
  hang = Bun.listen({
    hostname: "127.0.0.1",
    port: 0,
    socket: { data: () => got(), close: () => closed(), error: () => closed() },
  });
  svc = await startService();
});
afterAll(async () => {
  await svc?.stop();
  hang?.stop(true);
});

const client = (): ClientInfo => ({ addr: "127.0.0.1", port: 0, label: Promise.resolve("test"), resolvedLabel: "test" });

test("an aborted exchange rejects with the signal's reason and closes the upstream connection", async () => {
  const ac = new AbortController();
  const p = sendVirtual(svc.proxyCtx, { method: "GET", scheme: "http", host: "127.0.0.1", port: hang.port, path: "/", headers: [["Host", `127.0.0.1:${hang.port}`]], body: null }, client(), 60_000, ac.signal);
  await requestArrived;
  ac.abort(new Error("stop now"));
  await expect(p).rejects.toThrow("stop now");
  await upstreamClosed;
});

test("a signal aborted before the call rejects without sending", async () => {
  const ac = new AbortController();
  ac.abort();
  await expect(sendVirtual(svc.proxyCtx, { method: "GET", scheme: "http", host: "127.0.0.1", port: 1, path: "/", headers: [], body: null }, client(), 1000, ac.signal)).rejects.toThrow();
});
