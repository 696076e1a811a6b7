/**
 * gRPC over HTTP/2 through the proxy: a real @grpc/grpc-js server (TLS, h2 only) and client (through tapwire's
 * CONNECT via grpc-js's own proxy support: the grpc_proxy variable), unary and server-streaming calls, then
 * GET /traffic/{id}/grpc shows the captured messages decoded (raw without --proto, named with it) and the status
 * from the HTTP/2 trailers.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { generateCA } from "../../../src/core/tls/ca.ts";
import { LeafCertCache } from "../../../src/core/tls/leaf.ts";
import { startService } from "../../helpers/service.ts";
import { tempDir } from "../../helpers/tapwire-process.ts";

const PROTO = `
syntax = "proto3";
package demo.v2;
message HelloRequest { string name = 1; int32 times = 2; }
message HelloReply { string message = 1; int32 index = 2; }
service Greeter {
  rpc SayHello (HelloRequest) returns (HelloReply);
  rpc Stream (HelloRequest) returns (stream HelloReply);
  rpc Fail (HelloRequest) returns (HelloReply);
}
`;
const protoDir = tempDir();
mkdirSync(join(protoDir, "demo"), { recursive: true });
writeFileSync(join(protoDir, "demo", "greeter.proto"), PROTO);
const def = protoLoader.loadSync(join(protoDir, "demo", "greeter.proto"), { keepCase: true });
const pkg = grpc.loadPackageDefinition(def) as any;
const Greeter = pkg.demo.v2.Greeter;

const originCa = generateCA();
const leaf = new LeafCertCache(originCa).get("localhost");
let server: grpc.Server;
let port = 0;
type Svc = Awaited<ReturnType<typeof startService>>;
let svc: Svc;
let client: any;
const savedEnv = { grpc_proxy: process.env.grpc_proxy, no_grpc_proxy: process.env.no_grpc_proxy, no_proxy: process.env.no_proxy };

beforeAll(async () => {
  server = new grpc.Server();
  server.addService(Greeter.service, {
    SayHello: (call: any, cb: any) => cb(null, { message: `hello ${call.request.name}`, index: call.request.times }),
    Stream: (call: any) => {
      for (let i = 0; i < call.request.times; i++) call.write({ message: `${call.request.name} #${i}`, index: i });
      call.end();
    },
    Fail: (_call: any, cb: any) => cb({ code: grpc.status.NOT_FOUND, details: "no such greeting" }),
  });
  port = await new Promise<number>((res, rej) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createSsl(null, [{ cert_chain: Buffer.from(leaf.cert), private_key: Buffer.from(leaf.key) }]), (e, p) => (e ? rej(e) : res(p))),
  );
  const dir = tempDir();
  const originCaFile = join(dir, "origin-ca.pem");
  writeFileSync(originCaFile, originCa.certPem);
  svc = await startService({ upstreamCa: [originCaFile], protoDirs: [protoDir] });
  // grpc-js reads its proxy from the environment when a channel is made
  process.env.grpc_proxy = `http://127.0.0.1:${svc.proxyPort}`;
  delete process.env.no_grpc_proxy;
  delete process.env.no_proxy;
  const tapwireCa = readFileSync(join(svc.config.dataDir, "ca.pem"));
  client = new Greeter(`localhost:${port}`, grpc.credentials.createSsl(tapwireCa));
});
afterAll(async () => {
  client?.close();
  for (const [k, v] of Object.entries(savedEnv)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  server?.forceShutdown();
  await svc?.stop();
});

async function grpcEntry(method: string): Promise<{ entry: any; view: any }> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const items = ((await (await svc.call("/api/v1/traffic?limit=100")).json()) as any).items as any[];
    const hit = items.find((e) => String(e.url).endsWith(`/demo.v2.Greeter/${method}`));
    if (hit) {
      const entry = await (await svc.call(`/api/v1/traffic/${hit.id}`)).json();
      const res = await svc.call(`/api/v1/traffic/${hit.id}/grpc`);
      expect(res.status).toBe(200);
      return { entry, view: await res.json() };
    }
    if (Date.now() > deadline) throw new Error(`no entry for ${method}`);
    await Bun.sleep(20);
  }
}

describe("gRPC (grpc-js) through the proxy over HTTP/2", () => {
  test("unary: the reply arrives; the entry is HTTP/2 with its messages decoded and the status from the trailers", async () => {
    const reply = await new Promise<any>((res, rej) => client.SayHello({ name: "ada", times: 3 }, (e: Error | null, r: any) => (e ? rej(e) : res(r))));
    expect(reply).toEqual({ message: "hello ada", index: 3 });
    const { entry, view } = await grpcEntry("SayHello");
    expect(entry.http_version).toBe("HTTP/2");
    expect(entry.response_http_version ?? null).toBeNull();
    expect(entry.res_trailers).toContainEqual(["grpc-status", "0"]);
    expect(view.request.messages[0]).toMatchObject({ type: "demo.v2.HelloRequest", json: { name: "ada", times: 3 } });
    expect(view.response.messages[0]).toMatchObject({ type: "demo.v2.HelloReply", json: { message: "hello ada", index: 3 } });
    expect(view.status).toMatchObject({ code: 0, name: "OK", source: "trailers" });
  });

  test("server streaming: every message arrives and is captured in order", async () => {
    const got: any[] = [];
    await new Promise<void>((res, rej) => {
      const call = client.Stream({ name: "grace", times: 5 });
      call.on("data", (m: any) => got.push(m));
      call.on("end", () => res());
      call.on("error", rej);
    });
    expect(got.map((m) => m.message)).toEqual(["grace #0", "grace #1", "grace #2", "grace #3", "grace #4"]);
    const { view } = await grpcEntry("Stream");
    expect(view.response.messages.length).toBe(5);
    expect(view.response.messages.map((m: any) => m.json.message)).toEqual(["grace #0", "grace #1", "grace #2", "grace #3", "grace #4"]);
    expect(view.response.messages[4]).toMatchObject({ type: "demo.v2.HelloReply", json: { message: "grace #4", index: 4 } });
    expect(view.status.code).toBe(0);
  });

  test("an error status reaches the client and is shown with its message", async () => {
    const err = await new Promise<any>((res) => client.Fail({ name: "x" }, (e: any) => res(e)));
    if (err.code !== grpc.status.NOT_FOUND) console.log(err);
    expect(err.code).toBe(grpc.status.NOT_FOUND);
    expect(err.details).toBe("no such greeting");
    const { view } = await grpcEntry("Fail");
    expect(view.status).toMatchObject({ code: 5, name: "NOT_FOUND", message: "no such greeting" });
  });
});
