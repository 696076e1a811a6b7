import { describe, expect, test } from "bun:test";
import protobuf from "protobufjs";
import { decodeRaw, formatRaw, ProtobufDecodeError, tryDecodeRaw } from "../../../src/core/grpc/protobuf-raw.ts";

const bytes = (...b: number[]) => new Uint8Array(b);

describe("decodeRaw: byte fixtures", () => {
  test("the varint example of the protobuf encoding guide (08 96 01)", () => {
    expect(decodeRaw(bytes(0x08, 0x96, 0x01))).toEqual([{ field: 1, wire: "varint", value: "150" }]);
  });

  test("a string field (12 07 'testing')", () => {
    expect(decodeRaw(bytes(0x12, 0x07, ...new TextEncoder().encode("testing")))).toEqual([{ field: 2, wire: "len", string: "testing" }]);
  });

  test("a nested message (1a 03 08 96 01)", () => {
    expect(decodeRaw(bytes(0x1a, 0x03, 0x08, 0x96, 0x01))).toEqual([{ field: 3, wire: "len", message: [{ field: 1, wire: "varint", value: "150" }] }]);
  });

  test("fixed32 and fixed64 as hex with their float and double readings", () => {
    const f = decodeRaw(bytes(0x25, 0x00, 0x00, 0x80, 0x3f, 0x29, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f));
    expect(f).toEqual([
      { field: 4, wire: "fixed32", value: "0x3f800000", float: 1 },
      { field: 5, wire: "fixed64", value: "0x3ff0000000000000", double: 1 },
    ]);
  });

  test("a 64-bit varint keeps every digit and shows its zigzag reading", () => {
    // -1 as int64: ten bytes ff..ff 01
    const f = decodeRaw(bytes(0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01));
    expect(f).toEqual([{ field: 1, wire: "varint", value: "18446744073709551615", sint: "-9223372036854775808" }]);
  });

  test("binary that is not a message stays bytes (base64)", () => {
    expect(decodeRaw(bytes(0x0a, 0x02, 0xff, 0xfe))).toEqual([{ field: 1, wire: "len", bytes: "//4=" }]);
  });

  test("groups (wire types 3 and 4)", () => {
    expect(decodeRaw(bytes(0x0b, 0x10, 0x01, 0x0c))).toEqual([{ field: 1, wire: "group", message: [{ field: 2, wire: "varint", value: "1", sint: "-1" }] }]);
  });

  test.each([
    ["truncated varint", bytes(0x08, 0x96)],
    ["length past the end", bytes(0x0a, 0x05, 0x41)],
    ["field number 0", bytes(0x00, 0x01)],
    ["invalid wire type 7", bytes(0x0f)],
    ["unmatched group end", bytes(0x0c)],
    ["unclosed group", bytes(0x0b, 0x10, 0x01)],
  ])("not a message: %s", (_name, b) => {
    expect(() => decodeRaw(b)).toThrow(ProtobufDecodeError);
    expect(tryDecodeRaw(b)).toBeNull();
  });

  test("formatRaw prints what protoc --decode_raw prints", () => {
    const f = decodeRaw(bytes(0x08, 0x96, 0x01, 0x12, 0x03, 0x61, 0x22, 0x62, 0x1a, 0x03, 0x08, 0x96, 0x01, 0x22, 0x02, 0xff, 0x00));
    expect(formatRaw(f)).toBe(`1: 150\n2: "a\\"b"\n3 {\n  1: 150\n}\n4: "\\377\\000"\n`);
  });
});

describe("decodeRaw against messages encoded by protobufjs", () => {
  const root = protobuf.parse(`
    syntax = "proto3";
    message Inner { int32 id = 1; string name = 2; }
    message Outer { string title = 1; repeated Inner items = 2; double ratio = 3; sint64 delta = 4; bytes blob = 5; map<string, int32> counts = 6; }
  `).root;
  const Outer = root.lookupType("Outer");

  test("every field comes back with its number, wire type and value", () => {
    const msg = Outer.encode(
      Outer.create({ title: "hello", items: [{ id: 7, name: "seven" }, { id: 300 }], ratio: 0.5, delta: -3, blob: Buffer.from([0, 159, 146, 150]), counts: { a: 1 } }),
    ).finish();
    const f = decodeRaw(msg);
    expect(f[0]).toEqual({ field: 1, wire: "len", string: "hello" });
    expect(f[1]).toEqual({ field: 2, wire: "len", message: [{ field: 1, wire: "varint", value: "7", sint: "-4" }, { field: 2, wire: "len", string: "seven" }] });
    expect(f[2]).toEqual({ field: 2, wire: "len", message: [{ field: 1, wire: "varint", value: "300" }] });
    expect(f[3]).toMatchObject({ field: 3, wire: "fixed64", double: 0.5 });
    expect(f[4]).toEqual({ field: 4, wire: "varint", value: "5", sint: "-3" });
    expect(f[5]).toEqual({ field: 5, wire: "len", bytes: Buffer.from([0, 159, 146, 150]).toString("base64") });
    expect(f[6]).toEqual({ field: 6, wire: "len", message: [{ field: 1, wire: "len", string: "a" }, { field: 2, wire: "varint", value: "1", sint: "-1" }] });
  });
});
