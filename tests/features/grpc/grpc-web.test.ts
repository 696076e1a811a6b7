/**
 * gRPC-Web over HTTP/1.1 through the proxy (gRPC itself needs HTTP/2: its tests come with it): a real gRPC-Web
 * server (Bun.serve, messages encoded with protobufjs), real clients (fetch through the proxy, curl), then
 * GET /traffic/{id}/grpc shows the messages raw without --proto and with field names with it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import protobuf from "protobufjs";
import { decodeGrpcWebText, encodeFrames, splitFrames } from "../../../src/core/grpc/framing.ts";
import { startService } from "../../helpers/service.ts";
import { tempDir } from "../../helpers/tapwire-process.ts";

const PROTO = `
syntax = "proto3";
package demo.v1;
message HelloRequest { string name = 1; int64 times = 2; }
message HelloReply { string message = 1; repeated Tag tags = 2; }
message Tag { string key = 1; Kind kind = 2; }
enum Kind { KIND_UNSPECIFIED = 0; KIND_A = 1; }
service Greeter {
  rpc SayHello (HelloRequest) returns (HelloReply);
  rpc Fail (HelloRequest) returns (HelloReply);
}
`;
const root = protobuf.parse(PROTO).root;
const HelloRequest = root.lookupType("demo.v1.HelloRequest");
const HelloReply = root.lookupType("demo.v1.HelloReply");

let upstream: ReturnType<typeof Bun.serve>;
const protoDir = tempDir();
mkdirSync(join(protoDir, "demo"), { recursive: true });
writeFileSync(join(protoDir, "demo", "greeter.proto"), PROTO);

beforeAll(() => {
  upstream = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    reusePort: false,
    async fetch(req) {
      const ct = req.headers.get("content-type") ?? "";
      if (!ct.startsWith("application/grpc-web")) return new Response("plain", { headers: { "content-type": "text/plain" } });
      const text = ct.startsWith("application/grpc-web-text");
      let body: Uint8Array = new Uint8Array(await req.arrayBuffer());
      if (text) body = decodeGrpcWebText(body);
      const [first] = splitFrames(body, true).messages;
      const hello = HelloRequest.toObject(HelloRequest.decode(first!.data), { longs: String }) as { name: string; times?: string };
      const path = new URL(req.url).pathname;
      let out: Uint8Array;
      if (path.endsWith("/Fail")) out = encodeFrames([], { trailers: [["grpc-status", "5"], ["grpc-message", "no%20such%20greeting"]] });
      else {
        const reply = HelloReply.encode(HelloReply.create({ message: `hello ${hello.name} x${hello.times ?? 0}`, tags: [{ key: "k", kind: 1 }] })).finish();
        const compress = req.headers.get("grpc-accept-encoding")?.includes("gzip") ?? false;
        out = encodeFrames([compress ? gzipSync(reply) : reply], { compressed: compress, trailers: [["grpc-status", "0"]] });
        if (compress) {
          const b = new Uint8Array(out);
          return new Response(text ? Buffer.from(b).toString("base64") : b, {
            headers: { "content-type": text ? "application/grpc-web-text+proto" : "application/grpc-web+proto", "grpc-encoding": "gzip" },
          });
        }
      }
      return new Response(text ? Buffer.from(out).toString("base64") : out, { headers: { "content-type": text ? "application/grpc-web-text+proto" : "application/grpc-web+proto" } });
    },
  });
});
afterAll(() => upstream.stop(true));

function requestBody(name: string, times: number): Uint8Array {
  return encodeFrames([HelloRequest.encode(HelloRequest.create({ name, times })).finish()]);
}

async function callThrough(svc: Awaited<ReturnType<typeof startService>>, path: string, init: { text?: boolean; gzip?: boolean; name: string }) {
  const body = requestBody(init.name, 3);
  const headers: Record<string, string> = { "content-type": init.text ? "application/grpc-web-text" : "application/grpc-web+proto", "x-grpc-web": "1" };
  if (init.gzip) headers["grpc-accept-encoding"] = "gzip";
  const res = await fetch(`http://127.0.0.1:${upstream.port}${path}`, {
    method: "POST",
    headers,
    body: init.text ? Buffer.from(body).toString("base64") : body,
    proxy: `http://127.0.0.1:${svc.proxyPort}`,
  } as RequestInit);
  expect(res.status).toBe(200);
  await res.arrayBuffer();
  const list = (await (await svc.call(`/api/v1/traffic?path=${encodeURIComponent(path)}&limit=1`)).json()) as { items: { id: number }[] };
  return list.items[0]!.id;
}

describe("GET /traffic/{id}/grpc without --proto: raw fields", () => {
  let svc: Awaited<ReturnType<typeof startService>>;
  beforeAll(async () => {
    svc = await startService();
  });
  afterAll(() => svc.stop());

  test("request and response messages, trailers and status from a gRPC-Web exchange", async () => {
    const id = await callThrough(svc, "/demo.v1.Greeter/SayHello", { name: "ada" });
    const res = await svc.call(`/api/v1/traffic/${id}/grpc`);
    expect(res.status).toBe(200);
    const v = (await res.json()) as any;
    expect(v).toMatchObject({ id, protocol: "grpc-web", subtype: "proto", service: "demo.v1.Greeter", method: "SayHello", schema: false });
    expect(v.request.messages).toEqual([
      expect.objectContaining({ index: 0, offset: 0, compressed: false, fields: [{ field: 1, wire: "len", string: "ada" }, { field: 2, wire: "varint", value: "3", sint: "-2" }] }),
    ]);
    expect(v.request.messages[0].text).toBe('1: "ada"\n2: 3\n');
    expect(v.response.messages[0].fields[0]).toEqual({ field: 1, wire: "len", string: "hello ada x3" });
    expect(v.status).toEqual({ code: 0, name: "OK", message: null, source: "trailers" });
    expect(v.trailers).toEqual([["grpc-status", "0"]]);
  });

  test("an error status with its percent-decoded message", async () => {
    const id = await callThrough(svc, "/demo.v1.Greeter/Fail", { name: "x" });
    const v = (await (await svc.call(`/api/v1/traffic/${id}/grpc`)).json()) as any;
    expect(v.response.messages).toEqual([]);
    expect(v.status).toEqual({ code: 5, name: "NOT_FOUND", message: "no such greeting", source: "trailers" });
  });

  test("404 for an unknown entry and not_grpc for a plain HTTP one", async () => {
    expect((await (await svc.call("/api/v1/traffic/999999/grpc")).json()) as object).toEqual({ error: { code: "not_found", message: "no traffic entry 999999" } });
    await fetch(`http://127.0.0.1:${upstream.port}/plain`, { proxy: `http://127.0.0.1:${svc.proxyPort}` } as RequestInit).then((r) => r.arrayBuffer());
    const list = (await (await svc.call(`/api/v1/traffic?path=%2Fplain&limit=1`)).json()) as { items: { id: number }[] };
    const r = await svc.call(`/api/v1/traffic/${list.items[0]!.id}/grpc`);
    expect(r.status).toBe(404);
    expect(((await r.json()) as any).error.code).toBe("not_grpc");
    expect((await svc.call("/api/v1/traffic/1e3/grpc")).status).toBe(400);
  });
});

describe("GET /traffic/{id}/grpc with --proto: field names", () => {
  let svc: Awaited<ReturnType<typeof startService>>;
  beforeAll(async () => {
    svc = await startService({ protoDirs: [protoDir] });
  });
  afterAll(() => svc.stop());

  test("messages decoded with their types (int64 as string, enums by name), gzip-compressed responses inflated", async () => {
    const id = await callThrough(svc, "/demo.v1.Greeter/SayHello", { name: "grace", gzip: true });
    const v = (await (await svc.call(`/api/v1/traffic/${id}/grpc`)).json()) as any;
    expect(v.schema).toBe(true);
    expect(v.request.messages[0]).toMatchObject({ type: "demo.v1.HelloRequest", json: { name: "grace", times: "3" } });
    expect(v.response.encoding).toBe("gzip");
    expect(v.response.messages[0]).toMatchObject({ compressed: true, type: "demo.v1.HelloReply", json: { message: "hello grace x3", tags: [{ key: "k", kind: "KIND_A" }] } });
  });

  test("grpc-web-text (base64 on the wire) decodes the same", async () => {
    const id = await callThrough(svc, "/demo.v1.Greeter/SayHello", { name: "text", text: true });
    const v = (await (await svc.call(`/api/v1/traffic/${id}/grpc`)).json()) as any;
    expect(v.protocol).toBe("grpc-web-text");
    expect(v.request.messages[0].json).toEqual({ name: "text", times: "3" });
    expect(v.response.messages[0].json.message).toBe("hello text x3");
    expect(v.status.code).toBe(0);
  });

  test("a .proto that does not parse stops the start with its file name", async () => {
    const bad = tempDir();
    writeFileSync(join(bad, "broken.proto"), "syntax = \"proto3\"; message { ");
    await expect(startService({ protoDirs: [bad] })).rejects.toThrow(/--proto: broken\.proto/);
  });
});
