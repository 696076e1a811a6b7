import { describe, expect, test } from "bun:test";
import { gzipSync } from "node:zlib";
import { decodeGrpcWebText, decompressMessage, encodeFrames, grpcProtocol, MAX_INFLATED_MESSAGE, splitFrames } from "../../../src/core/grpc/framing.ts";

const te = new TextEncoder();

describe("grpc framing", () => {
  test.each([
    ["application/grpc", "grpc"],
    ["application/grpc+proto; charset=x", "grpc"],
    ["application/grpc-web", "grpc-web"],
    ["application/grpc-web+proto", "grpc-web"],
    ["application/grpc-web-text", "grpc-web-text"],
    ["application/grpc-web-text+proto", "grpc-web-text"],
    ["application/json", null],
    ["application/grpcx", null],
  ])("grpcProtocol(%s) = %s", (ct, want) => expect(grpcProtocol(ct)).toBe(want as never));

  test("splits length-prefixed messages (byte fixture)", () => {
    const body = new Uint8Array([0, 0, 0, 0, 3, 0x08, 0x96, 0x01, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0xaa, 0xbb]);
    const r = splitFrames(body, false);
    expect(r.incomplete).toBeNull();
    expect(r.trailers).toBeNull();
    expect(r.messages.map((m) => [m.offset, m.compressed, [...m.data]])).toEqual([
      [0, false, [0x08, 0x96, 0x01]],
      [8, false, []],
      [13, true, [0xaa, 0xbb]],
    ]);
  });

  test("a body cut inside a frame says where and how much was missing", () => {
    expect(splitFrames(new Uint8Array([0, 0, 0, 0, 9, 1, 2]), false).incomplete).toEqual({ offset: 0, declared: 9, available: 2 });
    expect(splitFrames(new Uint8Array([0, 0, 0, 0, 1, 7, 0, 0]), false)).toMatchObject({ messages: [{ offset: 0 }], incomplete: { offset: 6, declared: null, available: 2 } });
  });

  test("gRPC-Web trailers frame (flag 0x80) is parsed, and is a message frame for plain gRPC", () => {
    const body = encodeFrames([new Uint8Array([8, 1])], { trailers: [["grpc-status", "5"], ["Grpc-Message", "not%20found"]] });
    const web = splitFrames(body, true);
    expect(web.messages.length).toBe(1);
    expect(web.trailers).toEqual([["grpc-status", "5"], ["grpc-message", "not%20found"]]);
    expect(splitFrames(body, false).messages.length).toBe(2);
  });

  test("grpc-web-text: several padded base64 chunks", () => {
    const a = encodeFrames([te.encode("ab")]);
    const b = encodeFrames([], { trailers: [["grpc-status", "0"]] });
    const text = Buffer.from(a).toString("base64") + Buffer.from(b).toString("base64");
    expect(text.slice(0, -1).includes("=")).toBe(true); // padding in the middle
    const r = splitFrames(decodeGrpcWebText(text), true);
    expect(new TextDecoder().decode(r.messages[0]!.data)).toBe("ab");
    expect(r.trailers).toEqual([["grpc-status", "0"]]);
  });

  test("decompression: gzip, unknown encodings, identity with the flag set, and a bomb stops at the cap", () => {
    expect(new TextDecoder().decode(decompressMessage(gzipSync("hi"), "gzip"))).toBe("hi");
    expect(() => decompressMessage(gzipSync("hi"), "snappy")).toThrow(/unsupported grpc-encoding 'snappy'/);
    expect(() => decompressMessage(gzipSync("hi"), null)).toThrow(/identity/);
    expect(() => decompressMessage(new Uint8Array([1, 2, 3]), "gzip")).toThrow(/does not decompress as gzip/);
    const bomb = gzipSync(Buffer.alloc(MAX_INFLATED_MESSAGE + 1024));
    expect(() => decompressMessage(bomb, "gzip")).toThrow(/inflates to more than/);
  });
});
