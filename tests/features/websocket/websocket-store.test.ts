import { describe, expect, test } from "bun:test";
import { encodeCloseFrame, encodeFrame } from "../../../src/core/ws/frame-encoder.ts";
import { frameCost, WS_LIMITS, WsStore, type WsFrameRecord } from "../../../src/features/websocket/store.ts";
import { WsRecorder } from "../../../src/features/websocket/tap.ts";

const frame = (i: number, sizeBytes = 1): WsFrameRecord => ({ dir: "out", opcode: "text", text: `f${i}`, sizeBytes, truncated: sizeBytes > 65536, ts: i });

describe("WsStore limits (spec 8)", () => {
  test("the limits are the spec's", () => {
    expect(WS_LIMITS).toEqual({ maxConnections: 100, maxFrames: 500, maxBytes: 2 * 1024 * 1024, previewCap: 65536 });
  });

  test("100 connections kept; the 101st evicts the oldest, which stops recording", () => {
    const s = new WsStore();
    const conns = Array.from({ length: 101 }, (_, i) => s.open(`ws://h/${i}`, null, false));
    expect(s.size).toBe(100);
    expect(s.get(conns[0].connId)).toBeUndefined();
    expect(conns[0].evicted).toBe(true);
    expect(s.get(conns[1].connId)).toBe(conns[1]);
    expect(conns[1].evicted).toBe(false);
    const listed = s.list().map((c) => c.connId);
    expect(listed[0]).toBe(conns[100].connId); // newest first
    expect(listed[99]).toBe(conns[1].connId);
    s.open("ws://h/next", null, false);
    expect(s.get(conns[1].connId)).toBeUndefined();
  });

  test("500 frames kept per connection, oldest evicted; framesSeen is kept by the tap, not the store", () => {
    const c = new WsStore().open("ws://h/", null, false);
    for (let i = 0; i < 501; i++) c.add(frame(i));
    expect(c.frameCount).toBe(500);
    const items = c.items();
    expect(items[0].text).toBe("f1");
    expect(items[499].text).toBe("f500");
    // keep going past the internal compaction point: order and count stay right
    for (let i = 501; i < 1700; i++) c.add(frame(i));
    expect(c.frameCount).toBe(500);
    expect(c.items()[0].text).toBe("f1200");
    expect(c.items()[499].text).toBe("f1699");
    expect(c.bytes).toBe(500);
  });

  test("2 MiB of previews per connection: cost is min(sizeBytes, 64 KiB); exactly 2 MiB fits, one byte more evicts", () => {
    expect(frameCost({ sizeBytes: 10 }, 65536)).toBe(10);
    expect(frameCost({ sizeBytes: 71680 }, 65536)).toBe(65536);
    const c = new WsStore().open("ws://h/", null, false);
    for (let i = 0; i < 32; i++) c.add(frame(i, 70 * 1024));
    expect(c.frameCount).toBe(32);
    expect(c.bytes).toBe(2 * 1024 * 1024);
    c.add(frame(32, 1));
    expect(c.frameCount).toBe(32);
    expect(c.items()[0].text).toBe("f1");
    expect(c.items()[31].text).toBe("f32");
    expect(c.bytes).toBe(31 * 65536 + 1);
  });

  test("logId is read lazily until the handshake entry is stored", () => {
    let id: number | null = null;
    const c = new WsStore().open("ws://h/", () => id, false);
    expect(c.logId).toBeNull();
    id = 7;
    expect(c.view().logId).toBe(7);
    id = null;
    expect(c.logId).toBe(7);
  });
});

describe("WsRecorder", () => {
  const KEY = new Uint8Array([1, 2, 3, 4]);

  test("records both directions, marks close, and stores only while recording", () => {
    const s = new WsStore();
    const c = s.open("ws://h/", null, false);
    let on = true;
    let now = 1000;
    const r = new WsRecorder(c, null, 65536, () => on, () => now);
    r.clientBytes(encodeFrame({ opcode: "text", payload: "a", mask: KEY }));
    on = false;
    r.serverBytes(encodeFrame({ opcode: "text", payload: "b" }));
    on = true;
    now = 2000;
    r.serverBytes(encodeCloseFrame(1001, "away"));
    expect(c.items().map((f) => [f.dir, f.opcode, f.text])).toEqual([
      ["out", "text", "a"],
      ["in", "close", ""],
    ]);
    expect(c.items()[1]).toMatchObject({ closeCode: 1001, closeReason: "away", sizeBytes: 6, ts: 2000 });
    expect(c.framesSeen).toBe(3);
    expect(c.closed).toBe(true);
    expect(c.closedTs).toBe(2000);
    now = 3000;
    r.closed();
    expect(c.closedTs).toBe(2000); // the first close wins
  });

  test("a parse error is recorded on the connection and stops only that direction; nothing throws", () => {
    const c = new WsStore().open("ws://h/", null, false);
    const r = new WsRecorder(c, null, 65536, () => true);
    expect(() => r.serverBytes(new Uint8Array([0x83, 0x00]))).not.toThrow(); // reserved opcode 3
    expect(c.error).toContain("reserved data opcode");
    r.serverBytes(encodeFrame({ opcode: "text", payload: "ignored" }));
    r.clientBytes(encodeFrame({ opcode: "text", payload: "still", mask: KEY }));
    expect(c.items().map((f) => f.text)).toEqual(["still"]);
  });

  test("a tap whose record was evicted stops parsing", () => {
    const s = new WsStore({ ...WS_LIMITS, maxConnections: 1 });
    const c = s.open("ws://h/1", null, false);
    const r = new WsRecorder(c, null, 65536, () => true);
    r.clientBytes(encodeFrame({ opcode: "text", payload: "x", mask: KEY }));
    expect(c.framesSeen).toBe(1);
    s.open("ws://h/2", null, false);
    r.clientBytes(encodeFrame({ opcode: "text", payload: "y", mask: KEY }));
    expect(c.framesSeen).toBe(1);
    expect(c.frameCount).toBe(0);
  });
});
