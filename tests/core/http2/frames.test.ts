import { describe, expect, test } from "bun:test";
import { COPY_LIMIT, FRAME, FrameWriter, frameFlags, frameLength, frameStream, frameType, read31, read32 } from "../../../src/core/http2/frames.ts";
import { parseFrames } from "../../helpers/h2-frames.ts";

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");

describe("frame header reads", () => {
  test("length, type, flags and stream (reserved bit cleared) read in place at an offset", () => {
    const b = Uint8Array.from([0xee, 0x01, 0x02, 0x03, 0x01, 0x05, 0xff, 0xff, 0xff, 0xff]);
    expect(frameLength(b, 1)).toBe(0x010203);
    expect(frameType(b, 1)).toBe(1);
    expect(frameFlags(b, 1)).toBe(5);
    expect(frameStream(b, 1)).toBe(0x7fffffff);
    expect(read31(Uint8Array.from([0x80, 0, 0, 1]), 0)).toBe(1);
    expect(read32(Uint8Array.from([0xff, 0xff, 0xff, 0xfe]), 0)).toBe(0xfffffffe);
  });
});

describe("FrameWriter", () => {
  test("every control frame, byte for byte", () => {
    const w = new FrameWriter(16);
    w.settings([4, 0x100000, 3, 100]);
    w.settingsAck();
    w.ping(Uint8Array.from([1, 2, 3, 4, 5, 6, 7, 8]), 0, true);
    w.rstStream(3, 8);
    w.windowUpdate(0, 0x7fffffff);
    w.goaway(7, 1, new TextEncoder().encode("x"));
    w.priority(5, 3, true, 16);
    w.pushPromise(1, 2, Uint8Array.of(0x82));
    expect(hex(w.takeAll())).toBe(
      "00000c040000000000" + "000400100000" + "000300000064" +
        "000000040100000000" +
        "000008060100000000" + "0102030405060708" +
        "000004030000000003" + "00000008" +
        "000004080000000000" + "7fffffff" +
        "000009070000000000" + "00000007" + "00000001" + "78" +
        "000005020000000005" + "80000003" + "0f" +
        "000005050400000001" + "00000002" + "82",
    );
    expect(w.empty).toBe(true);
  });

  test("a header block longer than the frame size goes as HEADERS + CONTINUATION, END_HEADERS on the last only", () => {
    const w = new FrameWriter(8);
    const block = new Uint8Array(16384 * 2 + 10).map((_, i) => i & 0xff);
    w.headers(1, block, true, 16384);
    const frames = parseFrames(Buffer.from(w.takeAll()));
    expect(frames.map((f) => [f.type, f.flags, f.stream, f.payload.length])).toEqual([
      [FRAME.HEADERS, 0x1, 1, 16384],
      [FRAME.CONTINUATION, 0, 1, 16384],
      [FRAME.CONTINUATION, 0x4, 1, 10],
    ]);
    expect(Buffer.concat(frames.map((f) => f.payload)).equals(Buffer.from(block))).toBe(true);
  });

  test("small DATA is copied into the gather buffer (one write); large DATA is a part of its own, not copied", () => {
    const w = new FrameWriter(16);
    const small = Uint8Array.of(1, 2, 3);
    const big = new Uint8Array(COPY_LIMIT + 100).fill(7);
    w.windowUpdate(1, 10);
    w.data(1, small, 0, 3, false);
    const parts1: Uint8Array[] = [];
    w.take({ write: (b) => parts1.push(b) });
    expect(parts1.length).toBe(1);
    expect(hex(parts1[0]!)).toBe("000004080000000001" + "0000000a" + "000003000000000001" + "010203");

    w.data(3, small, 1, 3, false);
    w.data(3, big, 0, big.length, true);
    w.rstStream(5, 0);
    const parts: Uint8Array[] = [];
    w.take({ write: (b) => parts.push(b) });
    expect(parts.length).toBe(3);
    expect(parts[1]).toBe(big); // the caller's bytes themselves
    const all = Buffer.concat(parts);
    const frames = parseFrames(all);
    expect(frames.map((f) => [f.type, f.flags, f.stream, f.payload.length])).toEqual([
      [FRAME.DATA, 0, 3, 2],
      [FRAME.DATA, 1, 3, big.length],
      [FRAME.RST_STREAM, 0, 5, 4],
    ]);
  });

  test("what take() hands out stays valid when the writer is reused", () => {
    const w = new FrameWriter(16);
    w.windowUpdate(1, 1);
    let first: Uint8Array | undefined;
    w.take({ write: (b) => (first = b) });
    const copy = hex(first!);
    for (let i = 0; i < 100; i++) w.windowUpdate(3, 2);
    w.takeAll();
    expect(hex(first!)).toBe(copy);
  });
});

describe("FrameWriter.take, transient", () => {
  test("hands a view of the gather buffer, which the next frames overwrite; the default hands a copy", () => {
    const w = new FrameWriter();
    const got: Uint8Array[] = [];
    w.windowUpdate(1, 100);
    w.take({ write: (b) => got.push(b) }, true);
    w.windowUpdate(1, 100);
    w.take({ write: (b) => got.push(b) });
    w.windowUpdate(3, 7);
    w.take({ write: (b) => got.push(b) }, true);
    expect(got.length).toBe(3);
    // the first (transient) view now shows the third frame: same memory
    expect(got[0]!.buffer).toBe(got[2]!.buffer);
    expect([...got[0]!]).toEqual([...got[2]!]);
    expect(got[2]![8]).toBe(3);
    // the copy kept its bytes
    expect(got[1]!.buffer).not.toBe(got[2]!.buffer);
    expect(got[1]![8]).toBe(1);
    expect(got[1]![12]).toBe(100);
  });
});
