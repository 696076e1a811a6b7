import { describe, expect, test } from "bun:test";
import http2 from "node:http2";
import net from "node:net";
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
const pattern = (n: number, seed = 0) => {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed) & 0xff;
  return b;
};
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

  test("an owner that is a class instance gets its events as method calls (write included)", () => {
    class Owner {
      written = 0;
      heads = 0;
      conn = new H2Connection("server", this);
      write(b: Uint8Array) {
        this.written += b.length;
      }
      headers() {
        this.heads++;
      }
      data() {}
      reset() {}
      writable() {}
      goaway() {}
      closed() {}
    }
    const o = new Owner();
    o.conn.feed(Buffer.concat([PREFACE, settingsFrame(), headersFrame(1, C31)]));
    o.conn.flush();
    expect(o.heads).toBe(1);
    expect(o.written).toBeGreaterThan(0);
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

  const malformed: [string, [string, string][], boolean][] = [
    ["an upper-case field name", [...requestFields("/"), ["X-Up", "1"]], true],
    ["a space in a field name", [...requestFields("/"), ["x up", "1"]], true],
    ["a colon inside a field name", [...requestFields("/"), ["x:up", "1"]], true],
    ["CR LF in a field value", [...requestFields("/"), ["x-a", "1\r\nx-injected: 2"]], true],
    ["LF in :path", requestFields("/a\nb"), true],
    ["NUL in a field value", [...requestFields("/"), ["x-a", "1\u0000"]], true],
    ["a pseudo-header field after a regular one", [["x-a", "1"], ...requestFields("/")], true],
    ["an unknown pseudo-header field", [...requestFields("/"), [":nope", "1"]], true],
    ["a response pseudo-header in a request", [[":status", "200"], ...requestFields("/")], true],
    ["no :path", requestFields("/").filter(([k]) => k !== ":path"), true],
    ["an empty :path", requestFields(""), true],
    ["two :method", [[":method", "GET"], ...requestFields("/")], true],
    ["connection", [...requestFields("/"), ["connection", "keep-alive"]], true],
    ["transfer-encoding", [...requestFields("/"), ["transfer-encoding", "chunked"]], true],
    ["upgrade", [...requestFields("/"), ["upgrade", "websocket"]], true],
    ["te other than trailers", [...requestFields("/"), ["te", "gzip"]], true],
    ["a content-length that is not a number", [...requestFields("/"), ["content-length", "1e3"]], true],
    ["two different content-lengths", [...requestFields("/"), ["content-length", "1"], ["content-length", "2"]], true],
    ["a content-length with END_STREAM on the head", [...requestFields("/"), ["content-length", "3"]], false],
  ];
  for (const [name, fields, openBody] of malformed) {
    test(`a malformed request (${name}) is reset with PROTOCOL_ERROR, the owner never sees it`, () => {
      const { c, ev, frames } = server();
      c.feed(headersFrame(1, hpack(fields), !openBody));
      expect(ev.heads).toEqual([]);
      expect(frames().map((f) => [f.type, f.stream, f.payload.readUInt32BE(0)])).toEqual([[FRAME.RST_STREAM, 1, H2_ERROR.PROTOCOL_ERROR]]);
      c.feed(headersFrame(3, C31));
      expect(ev.heads.map((h) => h[0])).toEqual([3]);
      expect(ev.closed).toBeNull();
    });
  }

  test("well-formed: te: trailers, CONNECT without :scheme/:path, a body matching its content-length", () => {
    const { c, ev, frames } = server();
    c.feed(headersFrame(1, hpack([...requestFields("/"), ["te", "trailers"]])));
    c.feed(headersFrame(3, hpack([[":method", "CONNECT"], [":authority", "example.test:443"]]), false));
    c.feed(headersFrame(5, hpack([...requestFields("/"), ["content-length", "5"]]), false));
    c.feed(dataFrame(5, Buffer.from("ab")));
    c.feed(dataFrame(5, Buffer.from("cde"), true));
    expect(ev.heads.map((h) => h[0])).toEqual([1, 3, 5]);
    expect(ev.data).toEqual([
      [5, "ab", false],
      [5, "cde", true],
    ]);
    expect(frames().filter((f) => f.type === FRAME.RST_STREAM)).toEqual([]);
  });

  test("a request body longer, or shorter, than its content-length is reset with PROTOCOL_ERROR (and reported)", () => {
    const { c, ev } = server();
    const head = hpack([...requestFields("/"), ["content-length", "3"]]);
    c.feed(Buffer.concat([headersFrame(1, head, false), dataFrame(1, Buffer.from("abcd"))]));
    c.feed(Buffer.concat([headersFrame(3, head, false), dataFrame(3, Buffer.from("ab"), true)]));
    c.feed(Buffer.concat([headersFrame(5, head, false), dataFrame(5, Buffer.from("ab")), headersFrame(5, hpack([["x-t", "1"]]), true)]));
    c.feed(Buffer.concat([headersFrame(7, hpack(requestFields("/")), false), headersFrame(7, hpack([[":path", "/"]]), true)]));
    expect(ev.resets).toEqual([
      [1, H2_ERROR.PROTOCOL_ERROR],
      [3, H2_ERROR.PROTOCOL_ERROR],
      [5, H2_ERROR.PROTOCOL_ERROR],
      [7, H2_ERROR.PROTOCOL_ERROR],
    ]);
    expect(ev.data).toEqual([[5, "ab", false]]);
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

  test("many streams blocked on the connection window all progress as connection WINDOW_UPDATEs come, a little at a time", () => {
    const { c, ev, frames } = server({}, [[4, 1 << 20]]);
    const ids = [1, 3, 5, 7, 9];
    for (const id of ids) {
      c.feed(headersFrame(id, C31, true));
      c.sendHeaders(id, [":status", "200"], false);
    }
    // streams 1 and 3 go whole, 5 in part; 5, 7 and 9 wait
    expect(ids.map((id) => c.sendData(id, pattern(30000, id), true))).toEqual([true, true, false, false, false]);
    let got = frames().filter((f) => f.type === FRAME.DATA).reduce((n, f) => n + f.payload.length, 0);
    expect(got).toBe(65535);
    // 2 bytes short of the rest, in steps of 7,000
    const rest = 5 * 30000 - 65535;
    for (let sent = 0; sent < rest - 2; sent += 7000) {
      c.feed(windowUpdate(0, Math.min(7000, rest - 2 - sent)));
      got += frames().filter((f) => f.type === FRAME.DATA).reduce((n, f) => n + f.payload.length, 0);
    }
    expect(got).toBe(5 * 30000 - 2);
    expect(ev.writables).toEqual([5, 7]);
    c.feed(windowUpdate(0, 2));
    const last = frames().filter((f) => f.type === FRAME.DATA);
    expect(last.map((f) => [f.stream, f.payload.length, f.flags])).toEqual([[9, 2, 1]]);
    expect(ev.writables).toEqual([5, 7, 9]);
    expect(c.openStreams).toBe(0);
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
    // a later GOAWAY (here a connection error) does not name the ignored stream 3
    c.feed(dataFrame(0, Buffer.alloc(1)));
    const last = frames().find((f) => f.type === FRAME.GOAWAY)!;
    expect([last.payload.readUInt32BE(0), goawayCode(last)]).toEqual([1, H2_ERROR.PROTOCOL_ERROR]);
  });

  test("close() (the socket closed): every stream gets reset(id, CANCEL), then closed(); nothing is written, later calls are no-ops", () => {
    const { c, ev, frames } = server();
    c.feed(Buffer.concat([headersFrame(1, C31, false), headersFrame(3, C31, true)]));
    frames();
    c.close();
    expect(ev.resets).toEqual([
      [1, H2_ERROR.CANCEL],
      [3, H2_ERROR.CANCEL],
    ]);
    expect(ev.closed).toEqual([H2_ERROR.CANCEL, "connection closed"]);
    expect(c.isClosed).toBe(true);
    expect(c.sendData(3, Buffer.from("x"), true)).toBe(true);
    c.sendHeaders(3, [":status", "200"], true);
    c.ping();
    c.goaway(0);
    c.feed(headersFrame(5, C31));
    expect(frames()).toEqual([]);
    expect(ev.heads.length).toBe(2);
  });

  test("ping() writes a PING; the peer's ack is taken silently", () => {
    const { c, ev, frames } = server();
    c.ping(Buffer.from("abcdefgh"));
    const fs = frames();
    expect(kinds(fs)).toEqual([[FRAME.PING, 0, 0]]);
    expect(fs[0]!.payload.toString()).toBe("abcdefgh");
    c.feed(frame(FRAME.PING, 1, 0, Buffer.from("abcdefgh")));
    expect(frames()).toEqual([]);
    expect(ev.closed).toBeNull();
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

  test("DATA before the final response head (after a 1xx only) is a malformed response: the stream is reset", () => {
    const { c, ev } = client();
    c.openStream(C31_FIELDS, true);
    c.feed(Buffer.concat([settingsFrame(), headersFrame(1, hpack([[":status", "100"]]), false), dataFrame(1, Buffer.from("x"), true)]));
    expect(ev.data).toEqual([]);
    expect(ev.resets).toEqual([[1, H2_ERROR.PROTOCOL_ERROR]]);
    expect(ev.closed).toBeNull();
  });

  test("a response head without :status, or with a request pseudo-header, resets the stream", () => {
    const { c, ev } = client();
    c.openStream(C31_FIELDS, true);
    c.openStream(C31_FIELDS, true);
    c.feed(Buffer.concat([settingsFrame(), headersFrame(1, hpack([["x-a", "1"]]), true), headersFrame(3, hpack([[":status", "200"], [":path", "/"]]), true)]));
    expect(ev.heads).toEqual([]);
    expect(ev.resets).toEqual([
      [1, H2_ERROR.PROTOCOL_ERROR],
      [3, H2_ERROR.PROTOCOL_ERROR],
    ]);
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

// ---------------------------------------------------------------- real peers over loopback TCP

class StreamRec {
  heads: string[][] = [];
  trailers: string[] | null = null;
  chunks: Buffer[] = [];
  bytes = 0;
  /** DATA bytes delivered and not consumed */
  held = 0;
  maxHeld = 0;
  ended = false;
  resetCode: number | null = null;
  /** consumed bytes owed once the echo queue drains */
  owed = 0;
  readonly done: Promise<StreamRec>;
  resolve!: (r: StreamRec) => void;
  /** the code of a reset (by the peer or the connection) */
  readonly wasReset: Promise<number>;
  resetResolve!: (code: number) => void;
  constructor(readonly id: number) {
    this.done = new Promise((r) => (this.resolve = r));
    this.wasReset = new Promise((r) => (this.resetResolve = r));
  }
  body(): Buffer {
    return Buffer.concat(this.chunks);
  }
}

interface PeerHandlers {
  /** server: a request head came (trailers go to rec.trailers) */
  head?(p: Peer, rec: StreamRec, endStream: boolean): void;
  /** DATA came (after it was recorded) */
  data?(p: Peer, rec: StreamRec, bytes: Uint8Array, endStream: boolean): void;
  /** the peer ended its side */
  end?(p: Peer, rec: StreamRec): void;
  writable?(p: Peer, id: number): void;
}

/** An owner of an H2Connection on a socket, the way tapwire's wiring does it: feed on read, flush once per iteration. */
class Peer {
  readonly conn: H2Connection;
  readonly streams = new Map<number, StreamRec>();
  /** consumed() is called as DATA arrives (false: the test decides) */
  autoConsume = true;
  totalHeld = 0;
  maxTotalHeld = 0;
  goaways: [number, number][] = [];
  readonly goawayReceived: Promise<void>;
  private goawayResolve!: () => void;
  closedWith: [number, string] | null = null;
  readonly closed: Promise<void>;
  private closedResolve!: () => void;
  private scheduled = false;
  /** resolved by the next DATA event (tests waiting for the peer to fill a window) */
  private dataWaiters: (() => void)[] = [];

  constructor(
    role: "server" | "client",
    readonly sock: net.Socket,
    local: Partial<H2Settings> | undefined,
    readonly h: PeerHandlers = {},
  ) {
    this.closed = new Promise((r) => (this.closedResolve = r));
    this.goawayReceived = new Promise((r) => (this.goawayResolve = r));
    this.conn = new H2Connection(
      role,
      {
        write: (b) => {
          if (!sock.destroyed) sock.write(b);
        },
        headers: (id, fields, endStream, trailers) => {
          let rec = this.streams.get(id);
          if (!rec) this.streams.set(id, (rec = new StreamRec(id)));
          if (trailers) rec.trailers = fields;
          else rec.heads.push(fields);
          if (!trailers) h.head?.(this, rec, endStream);
          if (endStream) this.ended(rec);
        },
        data: (id, bytes, endStream) => {
          const rec = this.streams.get(id)!;
          rec.chunks.push(Buffer.from(bytes));
          rec.bytes += bytes.length;
          rec.held += bytes.length;
          this.totalHeld += bytes.length;
          if (rec.held > rec.maxHeld) rec.maxHeld = rec.held;
          if (this.totalHeld > this.maxTotalHeld) this.maxTotalHeld = this.totalHeld;
          if (this.autoConsume) this.consume(rec);
          h.data?.(this, rec, bytes, endStream);
          if (endStream) this.ended(rec);
          for (const w of this.dataWaiters.splice(0)) w();
        },
        reset: (id, code) => {
          const rec = this.streams.get(id) ?? new StreamRec(id);
          this.streams.set(id, rec);
          this.totalHeld -= rec.held;
          rec.held = 0;
          rec.resetCode = code;
          rec.resolve(rec);
          rec.resetResolve(code);
        },
        writable: (id) => h.writable?.(this, id),
        goaway: (last, code) => {
          this.goaways.push([last, code]);
          this.goawayResolve();
        },
        closed: (code, reason) => {
          this.closedWith = [code, reason];
          this.closedResolve();
        },
      },
      local,
    );
    sock.on("data", (d: Buffer) => {
      this.conn.feed(d);
      this.sched();
    });
    sock.on("error", () => {});
    sock.on("close", () => {
      this.conn.close();
      this.closedResolve();
    });
    this.sched();
  }

  sched(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.conn.flush();
    });
  }

  private ended(rec: StreamRec): void {
    rec.ended = true;
    this.h.end?.(this, rec);
    rec.resolve(rec);
  }

  consume(rec: StreamRec, n = rec.held): void {
    rec.held -= n;
    this.totalHeld -= n;
    this.conn.consumed(rec.id, n);
    this.sched();
  }

  /** resolves at the next DATA event */
  nextData(): Promise<void> {
    return new Promise((r) => this.dataWaiters.push(r));
  }

  /** client role: a request; the body goes in one sendData (the connection queues what the windows do not allow) */
  request(fields: string[], body?: Uint8Array, trailers?: string[]): StreamRec {
    const id = this.conn.openStream(fields, !body && !trailers);
    const rec = new StreamRec(id);
    this.streams.set(id, rec);
    if (body) this.conn.sendData(id, body, !trailers);
    if (trailers) this.conn.sendHeaders(id, trailers, true);
    this.sched();
    return rec;
  }

  respond(id: number, fields: string[], body?: Uint8Array, trailers?: string[]): void {
    this.conn.sendHeaders(id, fields, !body && !trailers);
    if (body) this.conn.sendData(id, body, !trailers);
    if (trailers) this.conn.sendHeaders(id, trailers, true);
    this.sched();
  }
}

/** An echo server: the request body goes back as it arrives, consumed() once sent (a relay's backpressure). */
const echoHandlers: PeerHandlers = {
  head(p, rec, endStream) {
    const req = rec.heads[0]!;
    const path = req[req.indexOf(":path") + 1]!;
    const extra = path.startsWith("/big-head") ? ["x-big", "h".repeat(40000)] : [];
    p.conn.sendHeaders(rec.id, [":status", "200", "x-path", path, ...extra], false);
    if (endStream) p.conn.sendData(rec.id, Buffer.from(`no body ${path}`), true);
    p.sched();
  },
  data(p, rec, bytes, endStream) {
    if (p.autoConsume) return;
    rec.owed += bytes.length;
    if (p.conn.sendData(rec.id, Buffer.from(bytes), endStream && !rec.trailers)) {
      p.consume(rec, rec.owed);
      rec.owed = 0;
    }
    p.sched();
  },
  writable(p, id) {
    const rec = p.streams.get(id)!;
    p.consume(rec, rec.owed);
    rec.owed = 0;
  },
  end(p, rec) {
    if (rec.trailers) {
      p.conn.sendHeaders(rec.id, ["x-got-trailers", rec.trailers.join("=")], true);
      p.sched();
    }
  },
};

interface TestServer {
  port: number;
  peers: Peer[];
  firstPeer: Promise<Peer>;
  close(): Promise<void>;
}

/** tapwire's server role on a loopback port */
async function serveH2(local?: Partial<H2Settings>, handlers: PeerHandlers = echoHandlers, autoConsume = false): Promise<TestServer> {
  const peers: Peer[] = [];
  let first!: (p: Peer) => void;
  const firstPeer = new Promise<Peer>((r) => (first = r));
  const srv = net.createServer((sock) => {
    const p = new Peer("server", sock, local, handlers);
    p.autoConsume = autoConsume;
    peers.push(p);
    first(p);
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  return {
    port: (srv.address() as net.AddressInfo).port,
    peers,
    firstPeer,
    close: () =>
      new Promise<void>((r) => {
        for (const p of peers) p.sock.destroy();
        srv.close(() => r());
      }),
  };
}

/** node's response head: :status is a number */
type NodeResponseHead = http2.IncomingHttpHeaders & { ":status"?: number };

function nodeRequest(client: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body?: Buffer, options?: http2.ClientSessionRequestOptions) {
  const req = client.request(headers, options);
  const chunks: Buffer[] = [];
  let head: NodeResponseHead | null = null;
  let trailers: http2.IncomingHttpHeaders | null = null;
  req.on("response", (h) => (head = h as NodeResponseHead));
  req.on("trailers", (t) => (trailers = t));
  req.on("data", (d: Buffer) => chunks.push(d));
  const done = new Promise<{ head: NodeResponseHead | null; body: Buffer; trailers: http2.IncomingHttpHeaders | null; rstCode: number }>((resolve) => {
    req.on("close", () => resolve({ head, body: Buffer.concat(chunks), trailers, rstCode: req.rstCode ?? 0 }));
    req.on("error", () => {});
  });
  if (body) req.end(body);
  else if (!options?.waitForTrailers && options?.endStream !== false) req.end();
  return { req, done };
}

describe("H2Connection server role against node:http2's client", () => {
  test("150 parallel streams on one connection, with and without bodies", async () => {
    // node's client opens them all before our SETTINGS arrive: the default limit of 100 would refuse 50
    const s = await serveH2({ maxConcurrentStreams: 256 });
    const client = http2.connect(`http://127.0.0.1:${s.port}`);
    try {
      const reqs = [];
      for (let i = 0; i < 150; i++) reqs.push(nodeRequest(client, { ":path": `/r${i}`, ":method": i % 2 ? "POST" : "GET" }, i % 2 ? pattern(3000, i) : undefined).done);
      const res = await Promise.all(reqs);
      for (let i = 0; i < 150; i++) {
        expect(res[i]!.head?.[":status"]).toBe(200);
        expect(res[i]!.head?.["x-path"]).toBe(`/r${i}`);
        if (i % 2) expect(res[i]!.body.equals(pattern(3000, i))).toBe(true);
        else expect(res[i]!.body.toString()).toBe(`no body /r${i}`);
      }
      const p = await s.firstPeer;
      expect(p.closedWith).toBeNull();
      expect(p.conn.openStreams).toBe(0);
    } finally {
      client.close();
      await s.close();
    }
  });

  test("bodies larger than every window, both ways (4 MiB echoed: our 1 MiB stream window, node's 64 KiB)", async () => {
    const s = await serveH2();
    const client = http2.connect(`http://127.0.0.1:${s.port}`);
    try {
      const body = pattern(4 << 20, 7);
      const [a, b] = await Promise.all([nodeRequest(client, { ":path": "/a", ":method": "POST" }, body).done, nodeRequest(client, { ":path": "/b", ":method": "POST" }, body).done]);
      expect(a.body.length).toBe(body.length);
      expect(a.body.equals(body)).toBe(true);
      expect(b.body.equals(body)).toBe(true);
      const p = await s.firstPeer;
      for (const rec of p.streams.values()) expect(rec.maxHeld).toBeLessThanOrEqual(1 << 20);
    } finally {
      client.close();
      await s.close();
    }
  });

  test("a reader that stops calling consumed() stops the peer: the bytes held stay within the stream and connection windows", async () => {
    const s = await serveH2({ initialWindowSize: 256 * 1024, connectionWindow: 512 * 1024 }, {}, false);
    const client = http2.connect(`http://127.0.0.1:${s.port}`);
    try {
      const body = pattern(1 << 20, 3);
      const reqs = [0, 1, 2].map((i) => nodeRequest(client, { ":path": `/slow${i}`, ":method": "POST" }, body));
      const p = await s.firstPeer;
      while (p.totalHeld < 512 * 1024) await p.nextData();
      // the connection window is full; a PING round trip shows nothing more was on its way
      await new Promise<void>((r, j) => client.ping((err) => (err ? j(err) : r())));
      expect(p.totalHeld).toBe(512 * 1024);
      expect(p.maxTotalHeld).toBe(512 * 1024);
      for (const rec of p.streams.values()) expect(rec.maxHeld).toBeLessThanOrEqual(256 * 1024);
      // the reader takes the bytes again: everything arrives
      p.autoConsume = true;
      for (const rec of p.streams.values()) p.consume(rec);
      const recs = await Promise.all([...p.streams.values()].map((r) => r.done));
      for (const rec of recs) {
        expect(rec.ended).toBe(true);
        expect(rec.body().equals(body)).toBe(true);
        p.respond(rec.id, [":status", "204"]);
      }
      for (const r of reqs) expect((await r.done).head?.[":status"]).toBe(204);
      expect(p.closedWith).toBeNull();
    } finally {
      client.close();
      await s.close();
    }
  });

  test("trailers both ways", async () => {
    const s = await serveH2();
    const client = http2.connect(`http://127.0.0.1:${s.port}`);
    try {
      const { req, done } = nodeRequest(client, { ":path": "/t", ":method": "POST" }, undefined, { waitForTrailers: true });
      req.on("wantTrailers", () => req.sendTrailers({ "x-req-trailer": "yes" }));
      req.end(Buffer.from("payload"));
      const res = await done;
      expect(res.body.toString()).toBe("payload");
      expect(res.trailers?.["x-got-trailers"]).toBe("x-req-trailer=yes");
      const rec = (await s.firstPeer).streams.get(1)!;
      expect(rec.trailers).toEqual(["x-req-trailer", "yes"]);
    } finally {
      client.close();
      await s.close();
    }
  });

  test("RST_STREAM both ways", async () => {
    const s = await serveH2({}, {
      head(p, rec) {
        const path = rec.heads[0]![rec.heads[0]!.indexOf(":path") + 1];
        if (path === "/server-resets") {
          p.conn.reset(rec.id, H2_ERROR.INTERNAL_ERROR);
          p.sched();
        } else {
          p.conn.sendHeaders(rec.id, [":status", "200"], false);
          p.sched();
        }
      },
    });
    const client = http2.connect(`http://127.0.0.1:${s.port}`);
    try {
      const a = nodeRequest(client, { ":path": "/server-resets" });
      expect((await a.done).rstCode).toBe(H2_ERROR.INTERNAL_ERROR);
      const b = nodeRequest(client, { ":path": "/client-resets", ":method": "POST" }, undefined, { endStream: false });
      await new Promise((r) => b.req.on("response", r));
      b.req.close(http2.constants.NGHTTP2_CANCEL);
      const p = await s.firstPeer;
      const rec = await p.streams.get(3)!.done;
      expect(rec.resetCode).toBe(H2_ERROR.CANCEL);
      expect(p.conn.openStreams).toBe(0);
      expect(p.closedWith).toBeNull();
    } finally {
      client.close();
      await s.close();
    }
  });

  test("GOAWAY both ways, and PING", async () => {
    const s = await serveH2();
    const client = http2.connect(`http://127.0.0.1:${s.port}`);
    try {
      const res = await nodeRequest(client, { ":path": "/before" }).done;
      expect(res.head?.[":status"]).toBe(200);
      const payload = Buffer.from("12345678");
      const pong = await new Promise<Buffer>((r, j) => client.ping(payload, (err, _d, back) => (err ? j(err) : r(back))));
      expect(pong.equals(payload)).toBe(true);
      const p = await s.firstPeer;
      const got = new Promise<[number, number]>((r) => client.on("goaway", (code, last) => r([code, last])));
      p.conn.goaway(H2_ERROR.NO_ERROR, "shutting down");
      p.sched();
      expect(await got).toEqual([0, 1]);

      const client2 = http2.connect(`http://127.0.0.1:${s.port}`);
      await nodeRequest(client2, { ":path": "/x" }).done;
      const p2 = s.peers[1]!;
      client2.goaway(http2.constants.NGHTTP2_NO_ERROR);
      await p2.goawayReceived;
      expect(p2.goaways[0]).toEqual([0, 0]); // the last server-initiated stream the client took: none
      client2.close();
    } finally {
      client.close();
      await s.close();
    }
  });

  test("SETTINGS changes mid-connection: the client's initial window grows from 1,000 bytes, and a 30 KB response goes at once", async () => {
    const body = pattern(30 * 1024, 9);
    const sentWhole: boolean[] = [];
    const s = await serveH2({}, {
      head(p, rec) {
        p.conn.sendHeaders(rec.id, [":status", "200"], false);
        sentWhole.push(p.conn.sendData(rec.id, body, true));
        p.sched();
      },
    });
    const client = http2.connect(`http://127.0.0.1:${s.port}`, { settings: { initialWindowSize: 1000 } });
    try {
      const a = await nodeRequest(client, { ":path": "/small-window" }).done;
      expect(a.body.equals(body)).toBe(true);
      // node calls back once our SETTINGS ack arrives
      await new Promise<void>((r) => client.settings({ initialWindowSize: 1 << 20 }, () => r()));
      const b = await nodeRequest(client, { ":path": "/large-window" }).done;
      expect(b.body.equals(body)).toBe(true);
      // with 1,000 bytes of stream window the body had to wait for WINDOW_UPDATEs; with 1 MiB it went at once
      expect(sentWhole).toEqual([false, true]);
      expect((await s.firstPeer).closedWith).toBeNull();
    } finally {
      client.close();
      await s.close();
    }
  });

  test("CONTINUATION both ways: a 40 KB header from the client, a 40 KB header back", async () => {
    const s = await serveH2();
    const client = http2.connect(`http://127.0.0.1:${s.port}`);
    try {
      const big = "c".repeat(40000);
      const res = await nodeRequest(client, { ":path": "/big-head", "x-big-req": big }).done;
      expect(res.head?.["x-big"]).toBe("h".repeat(40000));
      const rec = (await s.firstPeer).streams.get(1)!;
      expect(rec.heads[0]![rec.heads[0]!.indexOf("x-big-req") + 1]).toBe(big);
    } finally {
      client.close();
      await s.close();
    }
  });

  test("a request head over the header list limit gets a 431; the connection serves the next request", async () => {
    const s = await serveH2({ maxHeaderListSize: 16 * 1024 });
    const client = http2.connect(`http://127.0.0.1:${s.port}`, { maxHeaderListPairs: 100000 });
    client.on("error", () => {});
    try {
      const res = await nodeRequest(client, { ":path": "/huge", "x-huge": "x".repeat(20000) }).done;
      expect(res.head?.[":status"]).toBe(431);
      const ok = await nodeRequest(client, { ":path": "/after" }).done;
      expect(ok.head?.[":status"]).toBe(200);
    } finally {
      client.close();
      await s.close();
    }
  });

  test("max concurrent streams: streams beyond our limit are refused (REFUSED_STREAM) until the client knows it, then held back by the client", async () => {
    let held: number[] = [];
    let maxOpen = 0;
    let answerNow = false;
    let twoHeld!: () => void;
    const s = await serveH2({ maxConcurrentStreams: 2 }, {
      head(p, rec) {
        maxOpen = Math.max(maxOpen, p.conn.openStreams);
        if (answerNow) p.respond(rec.id, [":status", "200"]);
        else if (held.push(rec.id) === 2) twoHeld();
      },
    });
    const round = async (client: http2.ClientHttp2Session) => {
      held = [];
      answerNow = false;
      const twoHeldP = new Promise<void>((r) => (twoHeld = r));
      const reqs = [0, 1, 2, 3].map((i) => nodeRequest(client, { ":path": `/h${i}` }));
      await twoHeldP;
      answerNow = true;
      const p = s.peers.at(-1)!;
      for (const id of held) p.respond(id, [":status", "200"]);
      const res = await Promise.all(reqs.map((r) => r.done));
      expect(p.closedWith).toBeNull();
      return res.map((r) => (r.head?.[":status"] === 200 ? "ok" : r.rstCode === H2_ERROR.REFUSED_STREAM ? "refused" : `other ${r.rstCode}`));
    };
    // requests written with the connection preface, before our SETTINGS arrive: the two beyond the limit are refused
    const early = http2.connect(`http://127.0.0.1:${s.port}`);
    let late: http2.ClientHttp2Session | undefined;
    try {
      const a = await round(early);
      // requests made once the client has our SETTINGS: it holds the two beyond the limit back until streams end
      late = http2.connect(`http://127.0.0.1:${s.port}`);
      expect(a.slice(0, 2)).toEqual(["ok", "ok"]);
      for (const r of a.slice(2)) expect(["ok", "refused"]).toContain(r);
      const l = late;
      await new Promise<void>((r) => l.once("remoteSettings", () => r()));
      expect(l.remoteSettings.maxConcurrentStreams).toBe(2);
      expect(await round(l)).toEqual(["ok", "ok", "ok", "ok"]);
      expect(maxOpen).toBeLessThanOrEqual(2);
    } finally {
      early.close();
      late?.close();
      await s.close();
    }
  });

  test("curl --http2-prior-knowledge gets a fixed response", async () => {
    const s = await serveH2({}, {
      head(p, rec) {
        p.respond(rec.id, [":status", "200", "content-type", "text/plain", "content-length", "12"], Buffer.from("fixed answer"));
      },
    });
    try {
      const proc = Bun.spawn(["curl", "-s", "-i", "--http2-prior-knowledge", `http://127.0.0.1:${s.port}/curl`], { stdout: "pipe", stderr: "pipe" });
      const out = await new Response(proc.stdout).text();
      expect(await proc.exited).toBe(0);
      expect(out).toStartWith("HTTP/2 200");
      expect(out).toContain("content-type: text/plain");
      expect(out.endsWith("fixed answer")).toBe(true);
    } finally {
      await s.close();
    }
  });
});

/** tapwire's client role on a socket to a loopback port */
async function connectH2(port: number, local?: Partial<H2Settings>, handlers: PeerHandlers = {}): Promise<Peer> {
  const sock = net.connect(port, "127.0.0.1");
  await new Promise<void>((r, j) => {
    sock.once("connect", () => r());
    sock.once("error", j);
  });
  const p = new Peer("client", sock, local, handlers);
  return p;
}

interface NodeServer {
  port: number;
  sessions: http2.ServerHttp2Session[];
  close(): Promise<void>;
}

/** node:http2's server (h2c, prior knowledge); `onStream` answers */
async function nodeServer(onStream: (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, body: Promise<Buffer>) => void, settings?: http2.Settings): Promise<NodeServer> {
  const server = http2.createServer(settings ? { settings } : {});
  const sessions: http2.ServerHttp2Session[] = [];
  server.on("session", (s) => sessions.push(s));
  server.on("stream", (stream, headers) => {
    stream.on("error", () => {});
    const chunks: Buffer[] = [];
    const body = new Promise<Buffer>((r) => {
      stream.on("data", (d: Buffer) => chunks.push(d));
      stream.on("end", () => r(Buffer.concat(chunks)));
    });
    onStream(stream as http2.ServerHttp2Stream, headers, body);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return {
    port: (server.address() as net.AddressInfo).port,
    sessions,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sessions) s.destroy();
        server.close(() => r());
      }),
  };
}

const GET = (path: string) => [":method", "GET", ":scheme", "http", ":authority", "localhost", ":path", path];
const POST = (path: string) => [":method", "POST", ":scheme", "http", ":authority", "localhost", ":path", path];
const field = (fields: string[] | undefined, name: string) => {
  if (!fields) return undefined;
  for (let i = 0; i < fields.length; i += 2) if (fields[i] === name) return fields[i + 1];
  return undefined;
};

/** echoes the request body (or says the path), with trailers when the request had some */
const nodeEcho = (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, body: Promise<Buffer>) => {
  let reqTrailers: http2.IncomingHttpHeaders | null = null;
  stream.on("trailers", (t) => (reqTrailers = t));
  const path = String(headers[":path"]);
  void body.then((b) => {
    if (stream.destroyed) return;
    const withTrailers = reqTrailers !== null;
    stream.respond({ ":status": 200, "x-path": path, ...(path.startsWith("/big-head") ? { "x-big": "n".repeat(40000) } : {}) }, withTrailers ? { waitForTrailers: true } : {});
    if (withTrailers) stream.on("wantTrailers", () => stream.sendTrailers({ "x-echo-trailer": String(reqTrailers!["x-req-trailer"]) }));
    stream.end(b.length ? b : Buffer.from(`hello ${path}`));
  });
};

describe("H2Connection client role against node:http2's server", () => {
  test("120 parallel streams on one connection, with and without bodies", async () => {
    const s = await nodeServer(nodeEcho);
    const p = await connectH2(s.port);
    try {
      const recs: StreamRec[] = [];
      for (let i = 0; i < 120; i++) recs.push(i % 2 ? p.request(POST(`/r${i}`), pattern(5000, i)) : p.request(GET(`/r${i}`)));
      await Promise.all(recs.map((r) => r.done));
      recs.forEach((r, i) => {
        expect(r.resetCode).toBeNull();
        expect(field(r.heads[0], ":status")).toBe("200");
        expect(field(r.heads[0], "x-path")).toBe(`/r${i}`);
        if (i % 2) expect(r.body().equals(pattern(5000, i))).toBe(true);
        else expect(r.body().toString()).toBe(`hello /r${i}`);
      });
      expect(p.conn.openStreams).toBe(0);
      expect(p.closedWith).toBeNull();
    } finally {
      p.sock.destroy();
      await s.close();
    }
  });

  test("bodies larger than every window, both ways (4 MiB posted and echoed)", async () => {
    const s = await nodeServer(nodeEcho);
    const p = await connectH2(s.port);
    try {
      const body = pattern(4 << 20, 5);
      const [a, b] = [p.request(POST("/a"), body), p.request(POST("/b"), body)];
      await Promise.all([a.done, b.done]);
      expect(a.body().equals(body)).toBe(true);
      expect(b.body().equals(body)).toBe(true);
      expect(Math.max(a.maxHeld, b.maxHeld)).toBeLessThanOrEqual(1 << 20);
    } finally {
      p.sock.destroy();
      await s.close();
    }
  });

  test("a reader that stops calling consumed() stops the server at the stream window; taking the bytes lets it finish", async () => {
    const body = pattern(3 << 20, 1);
    const s = await nodeServer((stream) => {
      stream.respond({ ":status": 200 });
      stream.end(body);
    });
    const p = await connectH2(s.port, { initialWindowSize: 256 * 1024 });
    p.autoConsume = false;
    try {
      const rec = p.request(GET("/slow"));
      while (rec.held < 256 * 1024) await p.nextData();
      // the server's PING comes after any DATA it sent: once it is answered, nothing more was on its way
      await new Promise<void>((r, j) => s.sessions[0]!.ping((err) => (err ? j(err) : r())));
      expect(rec.held).toBe(256 * 1024);
      expect(rec.maxHeld).toBe(256 * 1024);
      p.autoConsume = true;
      p.consume(rec);
      await rec.done;
      expect(rec.body().equals(body)).toBe(true);
      expect(rec.maxHeld).toBeLessThanOrEqual(256 * 1024);
    } finally {
      p.sock.destroy();
      await s.close();
    }
  });

  test("trailers both ways", async () => {
    const s = await nodeServer(nodeEcho);
    const p = await connectH2(s.port);
    try {
      const rec = p.request(POST("/t"), Buffer.from("with trailers"), ["x-req-trailer", "abc"]);
      await rec.done;
      expect(rec.body().toString()).toBe("with trailers");
      expect(rec.trailers).toEqual(["x-echo-trailer", "abc"]);
    } finally {
      p.sock.destroy();
      await s.close();
    }
  });

  test("RST_STREAM both ways", async () => {
    let serverStreamClosed!: (code: number) => void;
    const closedCode = new Promise<number>((r) => (serverStreamClosed = r));
    const s = await nodeServer((stream, headers) => {
      if (headers[":path"] === "/server-resets") {
        stream.respond({ ":status": 200 });
        stream.write("part", () => stream.close(http2.constants.NGHTTP2_CANCEL));
      } else {
        stream.on("close", () => serverStreamClosed(stream.rstCode));
        stream.respond({ ":status": 200 });
        stream.write("part");
      }
    });
    const p = await connectH2(s.port);
    try {
      // (Bun's server answers close() on a stream whose request ended with END_STREAM, not RST_STREAM: the request stays open)
      const a = new StreamRec(p.conn.openStream(POST("/server-resets"), false));
      p.streams.set(a.id, a);
      p.sched();
      expect(await a.wasReset).toBe(H2_ERROR.CANCEL);
      expect(a.body().toString()).toBe("part");
      const b = p.request(GET("/client-resets"));
      await p.nextData();
      p.conn.reset(b.id, H2_ERROR.CANCEL);
      p.sched();
      expect(await closedCode).toBe(H2_ERROR.CANCEL);
      expect(p.conn.openStreams).toBe(0);
      expect(p.closedWith).toBeNull();
    } finally {
      p.sock.destroy();
      await s.close();
    }
  });

  test("the server's PING is answered; its GOAWAY stops new streams", async () => {
    const s = await nodeServer(nodeEcho);
    const p = await connectH2(s.port);
    try {
      await p.request(GET("/first")).done;
      const payload = Buffer.from("abcdefgh");
      const back = await new Promise<Buffer>((r, j) => s.sessions[0]!.ping(payload, (err, _d, b) => (err ? j(err) : r(b))));
      expect(back.equals(payload)).toBe(true);
      s.sessions[0]!.goaway(http2.constants.NGHTTP2_NO_ERROR, 1);
      await p.goawayReceived;
      expect(p.goaways[0]).toEqual([1, 0]);
      expect(p.conn.goingAway).toBe(true);
      expect(() => p.conn.openStream(GET("/after"), true)).toThrow();
    } finally {
      p.sock.destroy();
      await s.close();
    }
  });

  test("SETTINGS changes from the server mid-connection are applied and acked (its initial window shrinks, then grows)", async () => {
    const s = await nodeServer(nodeEcho);
    const p = await connectH2(s.port);
    try {
      await p.request(GET("/first")).done;
      const session = s.sessions[0]!;
      await new Promise<void>((r) => session.settings({ initialWindowSize: 1000 }, () => r()));
      // node calls back when our ACK arrives
      const body = pattern(200 * 1024, 4);
      const rec = p.request(POST("/after-shrink"), body);
      await new Promise<void>((r) => session.settings({ initialWindowSize: 1 << 20 }, () => r()));
      await rec.done;
      expect(rec.body().equals(body)).toBe(true);
      expect(p.closedWith).toBeNull();
    } finally {
      p.sock.destroy();
      await s.close();
    }
  });

  test("CONTINUATION both ways: a 40 KB request header, a 40 KB response header", async () => {
    let gotHeader = "";
    const s = await nodeServer((stream, headers, body) => {
      gotHeader = String(headers["x-big-req"]);
      nodeEcho(stream, headers, body);
    });
    const p = await connectH2(s.port);
    try {
      const rec = p.request([...GET("/big-head"), "x-big-req", "q".repeat(40000)]);
      await rec.done;
      expect(gotHeader).toBe("q".repeat(40000));
      expect(field(rec.heads[0], "x-big")).toBe("n".repeat(40000));
    } finally {
      p.sock.destroy();
      await s.close();
    }
  });

  test("a response head over our header list limit resets that stream; the next request is served", async () => {
    const s = await nodeServer((stream, headers, body) => {
      if (headers[":path"] === "/huge") {
        stream.respond({ ":status": 200, "x-huge": "x".repeat(20000) });
        stream.end();
      } else nodeEcho(stream, headers, body);
    });
    const p = await connectH2(s.port, { maxHeaderListSize: 16 * 1024 });
    try {
      const rec = await p.request(GET("/huge")).done;
      expect(rec.heads).toEqual([]);
      expect(rec.resetCode).toBe(H2_ERROR.PROTOCOL_ERROR);
      const ok = await p.request(GET("/next")).done;
      expect(field(ok.heads[0], ":status")).toBe("200");
      expect(p.closedWith).toBeNull();
    } finally {
      p.sock.destroy();
      await s.close();
    }
  });

  test("the server's max concurrent streams: openStream() throws beyond it", async () => {
    const held: http2.ServerHttp2Stream[] = [];
    let three!: () => void;
    const threeHeld = new Promise<void>((r) => (three = r));
    const s = await nodeServer((stream, headers, body) => {
      if (String(headers[":path"]).startsWith("/hold")) {
        if (held.push(stream) === 3) three();
      }
      else nodeEcho(stream, headers, body);
    }, { maxConcurrentStreams: 3 });
    const p = await connectH2(s.port);
    try {
      await p.request(GET("/first")).done; // the server's SETTINGS came before its answer
      expect(p.conn.peerMaxConcurrentStreams).toBe(3);
      const recs = [1, 2, 3].map((i) => p.request(GET(`/hold${i}`)));
      expect(() => p.conn.openStream(GET("/fourth"), true)).toThrow();
      await threeHeld;
      held[0]!.respond({ ":status": 200 });
      held[0]!.end("released");
      await recs[0]!.done;
      expect(recs[0]!.body().toString()).toBe("released");
      const fourth = await p.request(GET("/fourth")).done;
      expect(field(fourth.heads[0], ":status")).toBe("200");
    } finally {
      p.sock.destroy();
      await s.close();
    }
  });
});

describe("H2Connection client <-> server in memory, bytes re-split at random", () => {
  /** mulberry32: a seeded generator, so a failure can be replayed */
  const rng = (seed: number) => () => {
    seed |= 0;
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };

  for (const seed of [1, 2, 3, 4, 5]) {
    test(`seed ${seed}: 40 streams, bodies up to 300 KB both ways, trailers, small windows; every byte arrives in order`, () => {
      const rand = rng(seed);
      const toServer: Uint8Array[] = [];
      const toClient: Uint8Array[] = [];
      const small = { initialWindowSize: 16384 + Math.floor(rand() * 50000), connectionWindow: 65535 + Math.floor(rand() * 200000), maxFrameSize: 16384 };
      // the server echoes each request body as it comes, consumed() once its copy is sent (a relay's backpressure)
      const owed = new Map<number, number>();
      const reqTrailers = new Map<number, string[]>();
      const server: H2Connection = new H2Connection(
        "server",
        {
          write: (b) => toClient.push(b),
          headers(id, fields, end, trailers) {
            if (trailers) {
              reqTrailers.set(id, fields);
              server.sendHeaders(id, ["x-echo", fields[1]!], true);
              return;
            }
            server.sendHeaders(id, [":status", "200", "x-path", fields[fields.indexOf(":path") + 1]!], end);
          },
          data(id, bytes, end) {
            owed.set(id, (owed.get(id) ?? 0) + bytes.length);
            if (server.sendData(id, bytes.slice(), end)) {
              server.consumed(id, owed.get(id)!);
              owed.set(id, 0);
            }
          },
          reset() {},
          writable(id) {
            server.consumed(id, owed.get(id) ?? 0);
            owed.set(id, 0);
          },
          goaway() {},
          closed(code, reason) {
            throw new Error(`server closed ${code} ${reason}`);
          },
        },
        small,
      );
      const got = new Map<number, { chunks: Buffer[]; heads: string[][]; trailers: string[] | null; ended: boolean }>();
      const client: H2Connection = new H2Connection(
        "client",
        {
          write: (b) => toServer.push(b),
          headers(id, fields, end, trailers) {
            const g = got.get(id)!;
            if (trailers) g.trailers = fields;
            else g.heads.push(fields);
            if (end) g.ended = true;
          },
          data(id, bytes, end) {
            const g = got.get(id)!;
            g.chunks.push(Buffer.from(bytes));
            client.consumed(id, bytes.length);
            if (end) g.ended = true;
          },
          reset(id, code) {
            throw new Error(`stream ${id} reset ${code}`);
          },
          writable() {},
          goaway() {},
          closed(code, reason) {
            throw new Error(`client closed ${code} ${reason}`);
          },
        },
        small,
      );
      const bodies = new Map<number, Buffer>();
      const withTrailers = new Set<number>();
      for (let i = 0; i < 40; i++) {
        const size = rand() < 0.3 ? 0 : Math.floor(rand() * 300000);
        const body = pattern(size, i);
        const trailers = rand() < 0.3;
        const id = client.openStream([":method", "POST", ":scheme", "http", ":authority", "mem", ":path", `/s${i}`], size === 0 && !trailers);
        bodies.set(id, body);
        got.set(id, { chunks: [], heads: [], trailers: null, ended: false });
        if (size > 0) client.sendData(id, body, !trailers);
        if (trailers) {
          withTrailers.add(id);
          client.sendHeaders(id, ["x-req-trailer", `t${id}`], true);
        }
      }
      // the wire: what one side wrote reaches the other in pieces of 1 byte to 20 KB
      const deliver = (q: Uint8Array[], to: H2Connection) => {
        if (q.length === 0) return false;
        const all = Buffer.concat(q.splice(0));
        for (let p = 0; p < all.length; ) {
          const n = Math.min(all.length - p, 1 + Math.floor(rand() * (rand() < 0.2 ? 20 : 20000)));
          to.feed(all.subarray(p, p + n));
          p += n;
        }
        return true;
      };
      for (let turns = 0; turns < 100000; turns++) {
        client.flush();
        server.flush();
        const a = deliver(toServer, server);
        const b = deliver(toClient, client);
        if (!a && !b) break;
      }
      for (const [id, body] of bodies) {
        const g = got.get(id)!;
        expect(g.ended).toBe(true);
        expect(g.heads[0]!.slice(0, 2)).toEqual([":status", "200"]);
        const echoed = Buffer.concat(g.chunks);
        expect(echoed.length).toBe(body.length);
        expect(echoed.equals(body)).toBe(true);
        if (withTrailers.has(id)) {
          expect(reqTrailers.get(id)).toEqual(["x-req-trailer", `t${id}`]);
          expect(g.trailers).toEqual(["x-echo", `t${id}`]);
        }
      }
      expect(client.openStreams).toBe(0);
      expect(server.openStreams).toBe(0);
    });
  }
});
