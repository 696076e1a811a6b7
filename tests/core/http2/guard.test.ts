import { describe, expect, test } from "bun:test";
import { DEFAULT_H2_LIMITS, ERROR, goawayFrame, H2FrameGuard } from "../../../src/core/http2/guard.ts";
import { continuationFrame, dataFrame, headersFrame, hpack, parseFrames, pingFrame, PREFACE, requestFields, rstFrame, settingsFrame } from "../../helpers/h2-frames.ts";

const start = () => Buffer.concat([PREFACE, settingsFrame()]);
const block = hpack(requestFields("/"));

describe("H2FrameGuard: byte fixtures", () => {
  test("ordinary traffic passes, fed whole or one byte at a time", () => {
    const bytes = Buffer.concat([start(), headersFrame(1, block, false), dataFrame(1, Buffer.from("hi"), true), headersFrame(3, block), pingFrame(), settingsFrame([], true), rstFrame(5)]);
    expect(new H2FrameGuard().feed(bytes)).toBeNull();
    const g = new H2FrameGuard();
    for (const b of bytes) expect(g.feed(Uint8Array.of(b))).toBeNull();
    expect(g.openStreams).toBe(0);
  });

  test("not the preface: PROTOCOL_ERROR", () => {
    expect(new H2FrameGuard().feed(Buffer.from("GET / HTTP/1.1\r\n\r\n"))).toMatchObject({ code: ERROR.PROTOCOL_ERROR });
  });

  test("rapid reset: streams opened and reset beyond the per-window limit", () => {
    let t = 0;
    const g = new H2FrameGuard({}, () => t);
    expect(g.feed(start())).toBeNull();
    let v = null;
    for (let i = 0; i < DEFAULT_H2_LIMITS.maxResetsPerWindow && !v; i++) v = g.feed(Buffer.concat([headersFrame(1 + 2 * i, block), rstFrame(1 + 2 * i)]));
    expect(v).toBeNull();
    t += 10;
    v = g.feed(Buffer.concat([headersFrame(9999, block), rstFrame(9999)]));
    expect(v).toMatchObject({ code: ERROR.ENHANCE_YOUR_CALM, lastStreamId: 9999 });
    expect(v!.reason).toContain("rapid reset");
  });

  test("the same number of resets spread over windows is fine", () => {
    let t = 0;
    const g = new H2FrameGuard({ maxResetsPerWindow: 10 }, () => t);
    g.feed(start());
    for (let i = 0; i < 50; i++) {
      t += 200; // 5 per second
      expect(g.feed(Buffer.concat([headersFrame(1 + 2 * i, block), rstFrame(1 + 2 * i)]))).toBeNull();
    }
  });

  test("CONTINUATION flood: too many frames, or too many bytes, in one header block", () => {
    const g = new H2FrameGuard();
    g.feed(Buffer.concat([start(), headersFrame(1, block, true, false)]));
    let v = null;
    for (let i = 0; i < 100 && !v; i++) v = g.feed(continuationFrame(1, hpack([["x-a", "b"]])));
    expect(v).toMatchObject({ code: ERROR.ENHANCE_YOUR_CALM });
    const g2 = new H2FrameGuard({ maxHeaderBlockBytes: 4096 });
    g2.feed(Buffer.concat([start(), headersFrame(1, block, true, false)]));
    expect(g2.feed(continuationFrame(1, Buffer.alloc(5000)))).toMatchObject({ code: ERROR.ENHANCE_YOUR_CALM });
  });

  test("a frame between HEADERS and its CONTINUATION is a PROTOCOL_ERROR", () => {
    const g = new H2FrameGuard();
    expect(g.feed(Buffer.concat([start(), headersFrame(1, block, true, false), pingFrame()]))).toMatchObject({ code: ERROR.PROTOCOL_ERROR });
  });

  test("SETTINGS and PING floods; their ACKs do not count", () => {
    const s = new H2FrameGuard();
    s.feed(start());
    let v = null;
    for (let i = 0; i < 1000 && !v; i++) v = s.feed(settingsFrame([], true));
    expect(v).toBeNull();
    for (let i = 0; i < 1000 && !v; i++) v = s.feed(settingsFrame([[4, 65535]]));
    expect(v).toMatchObject({ code: ERROR.ENHANCE_YOUR_CALM });
    const p = new H2FrameGuard();
    p.feed(start());
    v = null;
    for (let i = 0; i < 1000 && !v; i++) v = p.feed(pingFrame());
    expect(v!.reason).toContain("PING");
  });

  test("empty DATA frames flood", () => {
    const g = new H2FrameGuard();
    g.feed(Buffer.concat([start(), headersFrame(1, block, false)]));
    let v = null;
    for (let i = 0; i < 1000 && !v; i++) v = g.feed(dataFrame(1, Buffer.alloc(0)));
    expect(v!.reason).toContain("empty frames");
  });

  test("too many streams open at once; ended ones do not count", () => {
    const g = new H2FrameGuard({ maxOpenStreams: 10 });
    g.feed(start());
    for (let i = 0; i < 100; i++) expect(g.feed(headersFrame(1 + 2 * i, block, true))).toBeNull();
    let v = null;
    for (let i = 100; i < 120 && !v; i++) v = g.feed(headersFrame(1 + 2 * i, block, false));
    expect(v!.reason).toContain("streams open at once");
  });

  test("an oversized frame is a FRAME_SIZE_ERROR; the GOAWAY frame carries the code and the reason", () => {
    const g = new H2FrameGuard();
    const v = g.feed(Buffer.concat([start(), dataFrame(1, Buffer.alloc(20000))]))!;
    expect(v.code).toBe(ERROR.FRAME_SIZE_ERROR);
    const [f] = parseFrames(Buffer.from(goawayFrame(v)));
    expect(f!.type).toBe(7);
    expect(f!.stream).toBe(0);
    expect(f!.payload.readUInt32BE(4)).toBe(ERROR.FRAME_SIZE_ERROR);
    expect(f!.payload.subarray(8).toString()).toContain("20000");
  });
});

describe("H2FrameGuard: frame headers split across reads", () => {
  test("any split of the same bytes gives the same verdict (headers read in place or pieced together)", () => {
    const ok = Buffer.concat([start(), headersFrame(1, block, false), dataFrame(1, Buffer.from("hello"), true), headersFrame(3, block, false), pingFrame(), rstFrame(5), headersFrame(7, block, false)]);
    const flood = Buffer.concat([start(), ...Array.from({ length: DEFAULT_H2_LIMITS.maxPingsPerWindow + 1 }, () => pingFrame())]);
    for (const size of [1, 2, 7, 9, 10, 13, 17, 64]) {
      const g = new H2FrameGuard({}, () => 0);
      for (let i = 0; i < ok.length; i += size) expect(g.feed(ok.subarray(i, i + size))).toBeNull();
      expect(g.openStreams).toBe(2); // 3 and 7 are open; 1 ended, 5 was reset
      const f = new H2FrameGuard({}, () => 0);
      let v = null;
      for (let i = 0; i < flood.length && !v; i += size) v = f.feed(flood.subarray(i, i + size));
      expect(v).toMatchObject({ code: ERROR.ENHANCE_YOUR_CALM });
    }
  });
});
