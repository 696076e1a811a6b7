import { describe, expect, test } from "bun:test";
import { H2Connection, type H2Settings } from "../../../src/core/http2/connection.ts";
import { FRAME, H2_ERROR } from "../../../src/core/http2/frames.ts";
import { HpackDecoder } from "../../../src/core/http2/hpack.ts";
import { continuationFrame, dataFrame, frame, headersFrame, hpack, parseFrames, pingFrame, PREFACE, requestFields, rstFrame, settingsFrame, type ParsedFrame } from "../../helpers/h2-frames.ts";

// ---------------------------------------------------------------- byte fixtures

/** RFC 7541 C.3.1: GET http://www.example.com/ */
const C31 = Buffer.from("828684410f7777772e6578616d706c652e636f6d", "hex");
const C31_FIELDS = [":method", "GET", ":scheme", "http", ":path", "/", ":authority", "www.example.com"];

const u32 = (v: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(v >>> 0);
  return b;
};
const windowUpdate = (stream: number, inc: number) => frame(FRAME.WINDOW_UPDATE, 0, stream, u32(inc));
const goawayCode = (f: ParsedFrame) => f.payload.readUInt32BE(4);

interface Recorded {
  heads: [number, string[], boolean, boolean][];
  data: [number, string, boolean][];
  resets: [number, number][];
  writables: number[];
  goaways: [number, number][];
  closed: [number, string] | null;
}

function endpoint(role: "server" | "client", local?: Partial<H2Settings>) {
  const out: Buffer[] = [];
  const ev: Recorded = { heads: [], data: [], resets: [], writables: [], goaways: [], closed: null };
  const c = new H2Connection(
    role,
    {
      write: (b) => out.push(Buffer.from(b)),
      headers: (id, f, end, tr) => ev.heads.push([id, f, end, tr]),
      data: (id, b, end) => ev.data.push([id, Buffer.from(b).toString("latin1"), end]),
      reset: (id, code) => ev.resets.push([id, code]),
      writable: (id) => ev.writables.push(id),
      goaway: (l, code) => ev.goaways.push([l, code]),
      closed: (code, r) => (ev.closed = [code, r]),
    },
    local,
  );
  /** the frames written since the last call (flushes first) */
  const frames = () => {
    c.flush();
    let all = Buffer.concat(out);
    if (all.subarray(0, PREFACE.length).equals(PREFACE)) all = all.subarray(PREFACE.length);
    out.length = 0;
    return parseFrames(all);
  };
  return { c, ev, frames, out };
}

/** A server connection past the preface and the client's SETTINGS, its own opening frames taken. */
function server(local?: Partial<H2Settings>, clientSettings: [number, number][] = []) {
  const e = endpoint("server", local);
  e.c.feed(Buffer.concat([PREFACE, settingsFrame(clientSettings)]));
  e.frames();
  return e;
}

const kinds = (fs: ParsedFrame[]) => fs.map((f) => [f.type, f.flags, f.stream]);

describe("H2Connection server role: byte fixtures", () => {
  test("opening frames: SETTINGS (ours), the connection window raised to 16 MiB, the client's SETTINGS acked", () => {
    const { c, frames } = endpoint("server");
    const first = frames();
    expect(first.length).toBe(2);
    expect(first[0]!.type).toBe(FRAME.SETTINGS);
    const settings: Record<number, number> = {};
    for (let p = 0; p < first[0]!.payload.length; p += 6) settings[first[0]!.payload.readUInt16BE(p)] = first[0]!.payload.readUInt32BE(p + 2);
    expect(settings).toEqual({ 3: 100, 4: 1 << 20, 6: 65536 });
    expect([first[1]!.type, first[1]!.stream, first[1]!.payload.readUInt32BE(0)]).toEqual([FRAME.WINDOW_UPDATE, 0, (16 << 20) - 65535]);
    c.feed(Buffer.concat([PREFACE, settingsFrame()]));
    expect(kinds(frames())).toEqual([[FRAME.SETTINGS, 1, 0]]);
  });

  test("RFC 7541 C.3.1 request, answered with HEADERS + DATA in one write; the stream is forgotten once both sides ended", () => {
    const { c, ev, out } = server();
    c.feed(headersFrame(1, C31, true));
    expect(ev.heads).toEqual([[1, C31_FIELDS, true, false]]);
    expect(c.openStreams).toBe(1);
    c.sendHeaders(1, [":status", "200", "content-type", "text/plain"], false);
    expect(c.sendData(1, Buffer.from("hello"), true)).toBe(true);
    expect(c.openStreams).toBe(0);
    c.flush();
    expect(out.length).toBe(1);
    const fs = parseFrames(out[0]!);
    expect(kinds(fs)).toEqual([
      [FRAME.HEADERS, 0x4, 1],
      [FRAME.DATA, 0x1, 1],
    ]);
    const fields: string[] = [];
    new HpackDecoder().decode(fs[0]!.payload, 65536, fields);
    expect(fields).toEqual([":status", "200", "content-type", "text/plain"]);
    expect(fs[1]!.payload.toString()).toBe("hello");
  });

  test("padding, priority, CONTINUATION and trailers; the same events whole or fed one byte at a time", () => {
    const padded = (type: number, flags: number, stream: number, body: Buffer, pad: number, prio = false) =>
      frame(type, flags | 0x8 | (prio ? 0x20 : 0), stream, Buffer.concat([Buffer.of(pad), prio ? Buffer.from("8000000310", "hex") : Buffer.alloc(0), body, Buffer.alloc(pad)]));
    const req = hpack([...requestFields("/up"), ["x-long", "v".repeat(50)]]);
    const bytes = Buffer.concat([
      PREFACE,
      settingsFrame(),
      padded(FRAME.HEADERS, 0, 1, req.subarray(0, 10), 3, true),
      continuationFrame(1, req.subarray(10, 40)),
      continuationFrame(1, req.subarray(40), true),
      padded(FRAME.DATA, 0, 1, Buffer.from("abc"), 5),
      frame(FRAME.PRIORITY, 0, 1, Buffer.from("0000000010", "hex")),
      dataFrame(1, Buffer.from("def")),
      headersFrame(1, hpack([["grpc-status", "0"]]), true),
      pingFrame(),
    ]);
    const expected = {
      heads: [
        [1, [":method", "GET", ":scheme", "https", ":authority", "example.test", ":path", "/up", "x-long", "v".repeat(50)], false, false],
        [1, ["grpc-status", "0"], true, true],
      ],
      data: [
        [1, "abc", false],
        [1, "def", false],
      ],
    };
    const whole = endpoint("server");
    whole.c.feed(bytes);
    expect({ heads: whole.ev.heads, data: whole.ev.data }).toEqual(expected as never);
    const bytewise = endpoint("server");
    for (const b of bytes) bytewise.c.feed(Uint8Array.of(b));
    expect({ heads: bytewise.ev.heads, data: bytewise.ev.data }).toEqual(expected as never);
    expect(bytewise.ev.closed).toBeNull();
    const fs = bytewise.frames();
    // SETTINGS, WINDOW_UPDATE, SETTINGS ack, PING ack
    expect(kinds(fs).slice(2)).toEqual([
      [FRAME.SETTINGS, 1, 0],
      [FRAME.PING, 1, 0],
    ]);
    // padding is credited at once but stays below the batching threshold: no WINDOW_UPDATE yet
    expect(fs.filter((f) => f.type === FRAME.WINDOW_UPDATE).length).toBe(1);
  });

  test("PING is answered with its payload", () => {
    const { c, frames } = server();
    c.feed(frame(FRAME.PING, 0, 0, Buffer.from("0102030405060708", "hex")));
    const fs = frames();
    expect(kinds(fs)).toEqual([[FRAME.PING, 1, 0]]);
    expect(fs[0]!.payload.toString("hex")).toBe("0102030405060708");
  });

  const connErrors: [string, () => Buffer, number][] = [
    ["not the preface", () => Buffer.from("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), H2_ERROR.PROTOCOL_ERROR],
    ["a first frame other than SETTINGS", () => Buffer.concat([PREFACE, pingFrame()]), H2_ERROR.PROTOCOL_ERROR],
    ["DATA on stream 0", () => dataFrame(0, Buffer.from("x")), H2_ERROR.PROTOCOL_ERROR],
    ["DATA on an idle stream", () => dataFrame(9, Buffer.from("x")), H2_ERROR.PROTOCOL_ERROR],
    ["HEADERS on stream 0", () => headersFrame(0, C31), H2_ERROR.PROTOCOL_ERROR],
    ["HEADERS on a server (even) stream", () => headersFrame(2, C31), H2_ERROR.PROTOCOL_ERROR],
    ["PING on a stream", () => frame(FRAME.PING, 0, 1, Buffer.alloc(8)), H2_ERROR.PROTOCOL_ERROR],
    ["PING of 7 bytes", () => frame(FRAME.PING, 0, 0, Buffer.alloc(7)), H2_ERROR.FRAME_SIZE_ERROR],
    ["SETTINGS on a stream", () => frame(FRAME.SETTINGS, 0, 1), H2_ERROR.PROTOCOL_ERROR],
    ["SETTINGS of 5 bytes", () => frame(FRAME.SETTINGS, 0, 0, Buffer.alloc(5)), H2_ERROR.FRAME_SIZE_ERROR],
    ["SETTINGS_MAX_FRAME_SIZE below 16384", () => settingsFrame([[5, 100]]), H2_ERROR.PROTOCOL_ERROR],
    ["SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1", () => settingsFrame([[4, 0x80000000]]), H2_ERROR.FLOW_CONTROL_ERROR],
    ["SETTINGS_ENABLE_PUSH 2", () => settingsFrame([[2, 2]]), H2_ERROR.PROTOCOL_ERROR],
    ["WINDOW_UPDATE overflowing the connection window", () => windowUpdate(0, 0x7fffffff), H2_ERROR.FLOW_CONTROL_ERROR],
    ["WINDOW_UPDATE of 0 on the connection", () => windowUpdate(0, 0), H2_ERROR.PROTOCOL_ERROR],
    ["WINDOW_UPDATE on an idle stream", () => windowUpdate(9, 1), H2_ERROR.PROTOCOL_ERROR],
    ["RST_STREAM on an idle stream", () => rstFrame(9), H2_ERROR.PROTOCOL_ERROR],
    ["a frame larger than SETTINGS_MAX_FRAME_SIZE", () => Buffer.concat([headersFrame(1, C31, false), dataFrame(1, Buffer.alloc(16385))]), H2_ERROR.FRAME_SIZE_ERROR],
    ["a frame inside an unfinished header block", () => Buffer.concat([headersFrame(1, C31, true, false), pingFrame()]), H2_ERROR.PROTOCOL_ERROR],
    ["CONTINUATION of another stream", () => Buffer.concat([headersFrame(1, C31, true, false), continuationFrame(3, Buffer.alloc(0), true)]), H2_ERROR.PROTOCOL_ERROR],
    ["CONTINUATION outside a header block", () => continuationFrame(1, C31, true), H2_ERROR.PROTOCOL_ERROR],
    ["an HPACK index out of range", () => headersFrame(9, Buffer.from([0x82, 0xbf])), H2_ERROR.COMPRESSION_ERROR],
    ["PUSH_PROMISE from a client", () => frame(FRAME.PUSH_PROMISE, 4, 1, Buffer.concat([u32(2), C31])), H2_ERROR.PROTOCOL_ERROR],
  ];
  for (const [name, bytes, code] of connErrors) {
    test(`connection error: ${name} -> GOAWAY ${code}, closed(), streams reset, later bytes ignored`, () => {
      const pre = name === "not the preface" || name === "a first frame other than SETTINGS";
      const e = pre ? endpoint("server") : server();
      if (pre) e.frames();
      if (!pre) {
        e.c.feed(headersFrame(7, C31, false)); // an open stream, reset by the connection error
        expect(e.ev.heads.length).toBe(1);
      }
      e.c.feed(bytes());
      // the GOAWAY was flushed at once, without waiting for the owner's flush()
      expect(e.out.length).toBeGreaterThan(0);
      const g = e.frames().filter((f) => f.type === FRAME.GOAWAY);
      expect(g.length).toBe(1);
      expect(goawayCode(g[0]!)).toBe(code);
      expect(e.ev.closed?.[0]).toBe(code);
      if (!pre) expect(e.ev.resets).toEqual([[7, code]]);
      expect(e.c.isClosed).toBe(true);
      e.c.feed(headersFrame(11, C31));
      expect(e.ev.heads.length).toBe(pre ? 0 : 1);
    });
  }

  test("the GOAWAY of a connection error carries the last stream id and the reason, and is written before closed()", () => {
    const out: Buffer[] = [];
    let atClose = -1;
    const c = new H2Connection("server", {
      write: (b) => out.push(Buffer.from(b)),
      headers: () => {},
      data: () => {},
      reset: () => {},
      writable: () => {},
      goaway: () => {},
      closed: () => (atClose = out.length),
    });
    c.feed(Buffer.concat([PREFACE, settingsFrame(), headersFrame(1, C31, false), headersFrame(3, C31, false), dataFrame(0, Buffer.alloc(1))]));
    expect(atClose).toBeGreaterThan(0);
    const g = parseFrames(Buffer.concat(out)).find((f) => f.type === FRAME.GOAWAY)!;
    expect(g.payload.readUInt32BE(0)).toBe(3);
    expect(goawayCode(g)).toBe(H2_ERROR.PROTOCOL_ERROR);
    expect(g.payload.subarray(8).toString()).toContain("stream 0");
  });

  test("stream errors: RST_STREAM to the peer and reset() to the owner, the connection lives on", () => {
    const { c, ev, frames } = server({ initialWindowSize: 100 });
    c.feed(Buffer.concat([headersFrame(1, C31, false), headersFrame(3, C31, false), headersFrame(5, C31, true), headersFrame(7, C31, false)]));
    c.feed(dataFrame(1, Buffer.alloc(101))); // beyond the stream window of 100
    c.feed(windowUpdate(3, 0x7fffffff)); // the stream's send window overflows
    c.feed(dataFrame(5, Buffer.from("x"))); // after END_STREAM
    c.feed(headersFrame(7, hpack([["x-t", "1"]]), false)); // trailers without END_STREAM
    expect(ev.resets).toEqual([
      [1, H2_ERROR.FLOW_CONTROL_ERROR],
      [3, H2_ERROR.FLOW_CONTROL_ERROR],
      [5, H2_ERROR.STREAM_CLOSED],
      [7, H2_ERROR.PROTOCOL_ERROR],
    ]);
    const rst = frames().filter((f) => f.type === FRAME.RST_STREAM);
    expect(rst.map((f) => [f.stream, f.payload.readUInt32BE(0)])).toEqual(ev.resets);
    expect(c.openStreams).toBe(0);
    expect(ev.closed).toBeNull();
    // frames for the reset streams are dropped; DATA still counts against (and is credited to) the connection window
    c.feed(dataFrame(1, Buffer.alloc(50)));
    c.feed(headersFrame(9, C31));
    expect(ev.heads.at(-1)![0]).toBe(9);
    expect(ev.closed).toBeNull();
  });

  test("max concurrent streams: the stream above the limit gets REFUSED_STREAM, its header block still feeds the HPACK table", () => {
    const { c, ev, frames } = server({ maxConcurrentStreams: 2 });
    c.feed(Buffer.concat([headersFrame(1, C31, false), headersFrame(3, C31, false)]));
    // stream 5 adds "x-a: b" to the dynamic table (literal with incremental indexing, new name)
    const withIndexing = Buffer.concat([C31, Buffer.from([0x40, 3, ...Buffer.from("x-a"), 1, ...Buffer.from("b")])]);
    c.feed(headersFrame(5, withIndexing, false));
    expect(ev.heads.map((h) => h[0])).toEqual([1, 3]);
    expect(kinds(frames())).toEqual([[FRAME.RST_STREAM, 0, 5]]);
    c.sendHeaders(1, [":status", "204"], true);
    c.feed(dataFrame(1, Buffer.alloc(0), true));
    expect(c.openStreams).toBe(1);
    // stream 7 refers to the entry stream 5 added (index 63: C31 itself adds :authority in front of it)
    c.feed(headersFrame(7, Buffer.concat([C31, Buffer.from([0xbf])]), true));
    expect(ev.heads.at(-1)).toEqual([7, [...C31_FIELDS, "x-a", "b"], true, false]);
    expect(ev.closed).toBeNull();
  });

  test("a request head over maxHeaderListSize: answered 431 by the connection (and RST_STREAM NO_ERROR), never seen by the owner", () => {
    const { c, ev, frames } = server({ maxHeaderListSize: 200 });
    c.feed(headersFrame(1, hpack([...requestFields("/"), ["x-big", "y".repeat(300)]]), false));
    expect(ev.heads).toEqual([]);
    const fs = frames();
    expect(kinds(fs)).toEqual([
      [FRAME.HEADERS, 0x5, 1],
      [FRAME.RST_STREAM, 0, 1],
    ]);
    const fields: string[] = [];
    new HpackDecoder().decode(fs[0]!.payload, 1000, fields);
    expect(fields).toEqual([":status", "431"]);
    expect(fs[1]!.payload.readUInt32BE(0)).toBe(H2_ERROR.NO_ERROR);
    c.feed(headersFrame(3, C31));
    expect(ev.heads.map((h) => h[0])).toEqual([3]);
  });

  test("sending is bounded by the stream window: the rest is queued (no copy), sent as WINDOW_UPDATE and SETTINGS open it, then writable()", () => {
    const { c, ev, frames } = server({}, [[4, 10]]);
    c.feed(headersFrame(1, C31, true));
    c.sendHeaders(1, [":status", "200"], false);
    const body = Buffer.from("0123456789abcdefghijklmno"); // 25 bytes
    expect(c.sendData(1, body, false)).toBe(false);
    expect(c.sendData(1, Buffer.alloc(0), true)).toBe(false);
    c.sendHeaders(1, ["x-trailer", "t"], true); // trailers wait behind the queued DATA
    let fs = frames();
    expect(kinds(fs)).toEqual([
      [FRAME.HEADERS, 4, 1],
      [FRAME.DATA, 0, 1],
    ]);
    expect(fs[1]!.payload.toString()).toBe("0123456789");
    expect(c.queuedBytes(1)).toBe(15);
    c.feed(windowUpdate(1, 5));
    fs = frames();
    expect(fs.map((f) => f.payload.toString())).toEqual(["abcde"]);
    expect(ev.writables).toEqual([]);
    // the peer's initial window grows by 10: open streams get the difference (RFC 9113 6.9.2)
    c.feed(settingsFrame([[4, 20]]));
    fs = frames();
    expect(kinds(fs)).toEqual([
      [FRAME.SETTINGS, 1, 0],
      [FRAME.DATA, 0, 1],
      [FRAME.HEADERS, 5, 1],
    ]);
    expect(fs[1]!.payload.toString()).toBe("fghijklmno");
    expect(ev.writables).toEqual([1]);
    expect(c.openStreams).toBe(0);
  });

  test("sending is bounded by the connection window; a connection WINDOW_UPDATE sends the rest", () => {
    const { c, ev, frames } = server({}, [[4, 1 << 20]]);
    c.feed(Buffer.concat([headersFrame(1, C31, true), headersFrame(3, C31, true)]));
    c.sendHeaders(1, [":status", "200"], false);
    c.sendHeaders(3, [":status", "200"], false);
    expect(c.sendData(1, Buffer.alloc(70000, 1), true)).toBe(false);
    expect(c.sendData(3, Buffer.alloc(100, 3), true)).toBe(false);
    let fs = frames().filter((f) => f.type === FRAME.DATA);
    expect(fs.reduce((n, f) => n + f.payload.length, 0)).toBe(65535);
    expect(Math.max(...fs.map((f) => f.payload.length))).toBe(16384);
    c.feed(windowUpdate(0, 10000));
    fs = frames().filter((f) => f.type === FRAME.DATA);
    expect(fs.map((f) => [f.stream, f.payload.length, f.flags])).toEqual([
      [1, 70000 - 65535, 1],
      [3, 100, 1],
    ]);
    expect(ev.writables).toEqual([1, 3]);
  });

  test("receiving: WINDOW_UPDATEs only once half the window is consumed; without consumed() the peer is held to the window", () => {
    const { c, ev, frames } = server({ initialWindowSize: 1000 });
    c.feed(headersFrame(1, C31, false));
    c.feed(dataFrame(1, Buffer.alloc(400)));
    c.consumed(1, 400);
    expect(frames()).toEqual([]);
    c.feed(dataFrame(1, Buffer.alloc(200)));
    c.consumed(1, 200);
    const fs = frames();
    expect(fs.map((f) => [f.type, f.stream, f.payload.readUInt32BE(0)])).toEqual([[FRAME.WINDOW_UPDATE, 1, 600]]);
    // 1000 - 600 + 600 = 1000 bytes allowed now; not consumed: the next byte beyond is a FLOW_CONTROL_ERROR
    c.feed(dataFrame(1, Buffer.alloc(1000)));
    expect(ev.resets).toEqual([]);
    c.feed(dataFrame(1, Buffer.alloc(1)));
    expect(ev.resets).toEqual([[1, H2_ERROR.FLOW_CONTROL_ERROR]]);
  });

  test("the connection window: DATA beyond it is a connection FLOW_CONTROL_ERROR; consumed bytes of any stream reopen it", () => {
    const { c, ev, frames } = server({ connectionWindow: 65535, initialWindowSize: 65535 });
    c.feed(Buffer.concat([headersFrame(1, C31, false), headersFrame(3, C31, false)]));
    c.feed(Buffer.concat([dataFrame(1, Buffer.alloc(16384)), dataFrame(1, Buffer.alloc(16384)), dataFrame(3, Buffer.alloc(16384)), dataFrame(3, Buffer.alloc(16383))]));
    expect(ev.closed).toBeNull();
    c.consumed(1, 32768); // half the connection window (and of stream 1's)
    const fs = frames();
    expect(fs.map((f) => [f.stream, f.payload.readUInt32BE(0)]).sort()).toEqual([
      [0, 32768],
      [1, 32768],
    ]);
    c.feed(Buffer.concat([dataFrame(1, Buffer.alloc(16384)), dataFrame(1, Buffer.alloc(16384))]));
    expect(ev.closed).toBeNull();
    c.feed(dataFrame(1, Buffer.alloc(1)));
    expect(ev.closed?.[0]).toBe(H2_ERROR.FLOW_CONTROL_ERROR);
  });

  test("a stream reset by the owner credits what it held to the connection window", () => {
    const { c, frames } = server({ connectionWindow: 65535, initialWindowSize: 65535 });
    c.feed(Buffer.concat([headersFrame(1, C31, false), dataFrame(1, Buffer.alloc(16384)), dataFrame(1, Buffer.alloc(16384))]));
    frames();
    c.reset(1, H2_ERROR.CANCEL);
    const fs = frames();
    expect(fs.map((f) => [f.type, f.stream, f.payload.readUInt32BE(0)])).toEqual([
      [FRAME.RST_STREAM, 1, H2_ERROR.CANCEL],
      [FRAME.WINDOW_UPDATE, 0, 32768],
    ]);
  });

  test("GOAWAY from the owner: later streams are ignored; GOAWAY from the peer is reported", () => {
    const { c, ev, frames } = server();
    c.feed(headersFrame(1, C31, false));
    c.goaway(H2_ERROR.NO_ERROR, "bye");
    const g = frames().find((f) => f.type === FRAME.GOAWAY)!;
    expect([g.payload.readUInt32BE(0), goawayCode(g), g.payload.subarray(8).toString()]).toEqual([1, 0, "bye"]);
    expect(c.goingAway).toBe(true);
    c.feed(headersFrame(3, C31));
    expect(ev.heads.map((h) => h[0])).toEqual([1]);
    c.feed(dataFrame(1, Buffer.from("still"), true));
    expect(ev.data).toEqual([[1, "still", true]]);
    c.feed(frame(FRAME.GOAWAY, 0, 0, Buffer.concat([u32(0), u32(0)])));
    expect(ev.goaways).toEqual([[0, 0]]);
  });

  test("RST_STREAM from the peer: reset() to the owner, queued DATA dropped", () => {
    const { c, ev } = server({}, [[4, 0]]);
    c.feed(headersFrame(1, C31, true));
    c.sendHeaders(1, [":status", "200"], false);
    expect(c.sendData(1, Buffer.alloc(10), true)).toBe(false);
    c.feed(rstFrame(1, H2_ERROR.CANCEL));
    expect(ev.resets).toEqual([[1, H2_ERROR.CANCEL]]);
    expect(c.openStreams).toBe(0);
    expect(c.sendData(1, Buffer.alloc(1), true)).toBe(true); // a stream that is gone takes nothing
  });
});

describe("H2Connection client role: byte fixtures", () => {
  const client = (local?: Partial<H2Settings>) => endpoint("client", local);

  test("preface, SETTINGS (push disabled) and the request; 1xx, final head, DATA and trailers", () => {
    const { c, ev, frames, out } = client();
    const id = c.openStream(C31_FIELDS, true);
    expect(id).toBe(1);
    c.flush();
    expect(Buffer.concat(out).subarray(0, 24).equals(PREFACE)).toBe(true);
    const fs = frames();
    expect(kinds(fs)).toEqual([
      [FRAME.SETTINGS, 0, 0],
      [FRAME.WINDOW_UPDATE, 0, 0],
      [FRAME.HEADERS, 5, 1],
    ]);
    expect(fs[0]!.payload.readUInt16BE(0)).toBe(2); // ENABLE_PUSH
    expect(fs[0]!.payload.readUInt32BE(2)).toBe(0);
    const fields: string[] = [];
    new HpackDecoder().decode(fs[2]!.payload, 65536, fields);
    expect(fields).toEqual(C31_FIELDS);

    const resp = (status: string) => hpack([[":status", status]]);
    c.feed(Buffer.concat([settingsFrame(), headersFrame(1, resp("103"), false), headersFrame(1, resp("200"), false), dataFrame(1, Buffer.from("ok")), headersFrame(1, hpack([["grpc-status", "0"]]), true)]));
    expect(ev.heads).toEqual([
      [1, [":status", "103"], false, false],
      [1, [":status", "200"], false, false],
      [1, ["grpc-status", "0"], true, true],
    ]);
    expect(ev.data).toEqual([[1, "ok", false]]);
    expect(c.openStreams).toBe(0);
    expect(ev.closed).toBeNull();
  });

  test("GOAWAY: streams above its last stream id are refused, no new streams; PUSH_PROMISE is a PROTOCOL_ERROR", () => {
    const { c, ev } = client();
    c.feed(settingsFrame([[3, 2]]));
    expect(c.peerMaxConcurrentStreams).toBe(2);
    c.openStream(C31_FIELDS, false);
    c.openStream(C31_FIELDS, false);
    expect(() => c.openStream(C31_FIELDS, false)).toThrow();
    c.feed(frame(FRAME.GOAWAY, 0, 0, Buffer.concat([u32(1), u32(0)])));
    expect(ev.goaways).toEqual([[1, 0]]);
    expect(ev.resets).toEqual([[3, H2_ERROR.REFUSED_STREAM]]);
    expect(() => c.openStream(C31_FIELDS, true)).toThrow();
    c.feed(frame(FRAME.PUSH_PROMISE, 4, 1, Buffer.concat([u32(2), C31])));
    expect(ev.closed?.[0]).toBe(H2_ERROR.PROTOCOL_ERROR);
    expect(ev.resets).toEqual([
      [3, H2_ERROR.REFUSED_STREAM],
      [1, H2_ERROR.PROTOCOL_ERROR],
    ]);
  });

  test("a response head over maxHeaderListSize resets the stream (PROTOCOL_ERROR both ways)", () => {
    const { c, ev, frames } = client({ maxHeaderListSize: 100 });
    c.openStream(C31_FIELDS, true);
    frames();
    c.feed(Buffer.concat([settingsFrame(), headersFrame(1, hpack([[":status", "200"], ["x-big", "z".repeat(200)]]), false)]));
    expect(ev.heads).toEqual([]);
    expect(ev.resets).toEqual([[1, H2_ERROR.PROTOCOL_ERROR]]);
    expect(kinds(frames()).at(-1)).toEqual([FRAME.RST_STREAM, 0, 1]);
    expect(ev.closed).toBeNull();
  });

  test("SETTINGS_ENABLE_PUSH 1 from a server is a PROTOCOL_ERROR; a server that does not start with SETTINGS too", () => {
    const a = client();
    a.c.feed(settingsFrame([[2, 1]]));
    expect(a.ev.closed?.[0]).toBe(H2_ERROR.PROTOCOL_ERROR);
    const b = client();
    b.c.feed(pingFrame());
    expect(b.ev.closed?.[0]).toBe(H2_ERROR.PROTOCOL_ERROR);
  });
});
