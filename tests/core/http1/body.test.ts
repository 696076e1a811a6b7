import { describe, expect, test } from "bun:test";
import {
  ChunkedDecoder,
  HttpParseError,
  LengthDecoder,
  LAST_CHUNK,
  MAX_CHUNK_SIZE_LINE,
  encodeChunk,
  parseRequestHead,
  requestFraming,
  type HeaderList,
} from "../../../src/core/http1/index.ts";

const bytes = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, "latin1"));
const text = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("latin1");

function concat(parts: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** Deterministic PRNG (mulberry32) so random splits are reproducible. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Decoded {
  body: string;
  done: boolean;
  rest: string;
  trailers: HeaderList;
}

/**
 * Feed `input` split at `cuts` into a fresh decoder. Each piece is a fresh copy, and is overwritten
 * after the push (as a connection layer reusing its read buffer would), so slices must be consumed
 * before the next push and the decoder must not keep references into pieces.
 */
function feed(input: Uint8Array, cuts: number[], make: () => ChunkedDecoder | LengthDecoder): Decoded {
  const d = make();
  const body: string[] = [];
  const rest: string[] = [];
  let done = false;
  let prev = 0;
  for (const cut of [...cuts, input.length]) {
    const piece = input.slice(prev, cut);
    prev = cut;
    const r = d.push(piece);
    for (const s of r.data) {
      expect(s.buffer).toBe(piece.buffer); // a view, not a copy
      expect(s.length).toBeGreaterThan(0);
      body.push(text(s));
    }
    if (done) {
      expect(r.done).toBe(true);
      expect(r.data.length).toBe(0);
    }
    if (r.rest !== null) {
      expect(r.done).toBe(true);
      expect(r.rest.length).toBeGreaterThan(0);
      rest.push(text(r.rest));
    }
    done = r.done;
    piece.fill(0x21);
  }
  return { body: body.join(""), done, rest: rest.join(""), trailers: d instanceof ChunkedDecoder ? d.trailers : [] };
}

function everySplit(input: Uint8Array, make: () => ChunkedDecoder | LengthDecoder, expected: Decoded): void {
  // two pieces at every split point
  for (let cut = 0; cut <= input.length; cut++) expect(feed(input, [cut], make)).toEqual(expected);
  // one byte at a time
  const all: number[] = [];
  for (let i = 1; i < input.length; i++) all.push(i);
  expect(feed(input, all, make)).toEqual(expected);
  // random splits
  const rand = rng(input.length * 7919 + 17);
  for (let round = 0; round < 200; round++) {
    const cuts: number[] = [];
    for (let i = 1; i < input.length; i++) if (rand() < 0.15) cuts.push(i);
    expect(feed(input, cuts, make)).toEqual(expected);
  }
}

const chunked = () => new ChunkedDecoder();

describe("ChunkedDecoder: valid bodies", () => {
  const fixtures: { name: string; raw: string; body: string; rest: string; trailers: HeaderList }[] = [
    { name: "single chunk", raw: "5\r\nhello\r\n0\r\n\r\n", body: "hello", rest: "", trailers: [] },
    { name: "empty body", raw: "0\r\n\r\n", body: "", rest: "", trailers: [] },
    {
      name: "several chunks with extensions, trailers and a pipelined request",
      raw:
        "4;name=value\r\nWiki\r\n5 ; foo ; bar=\"q;x\"\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n" +
        "0;last=yes\r\nExpires: Wed, 21 Oct 2015 07:28:00 GMT\r\nX-Checksum:  abc \r\n\r\n" +
        "GET /next HTTP/1.1\r\nHost: a\r\n\r\n",
      body: "Wikipedia in\r\n\r\nchunks.",
      rest: "GET /next HTTP/1.1\r\nHost: a\r\n\r\n",
      trailers: [
        ["Expires", "Wed, 21 Oct 2015 07:28:00 GMT"],
        ["X-Checksum", "abc"],
      ],
    },
    {
      name: "upper/lower hex with leading zeros and whitespace before CRLF",
      raw: "000A\r\n0123456789\r\n1f \r\n" + "x".repeat(31) + "\r\n0\r\n\r\n",
      body: "0123456789" + "x".repeat(31),
      rest: "",
      trailers: [],
    },
    {
      name: "payload containing CRLF and chunk-like text",
      raw: "c\r\n0\r\n\r\n5\r\nab\r\n\r\n0\r\n\r\nX",
      body: "0\r\n\r\n5\r\nab\r\n",
      rest: "X",
      trailers: [],
    },
  ];

  for (const f of fixtures) {
    test(`${f.name}: one push`, () => {
      const d = new ChunkedDecoder();
      const input = bytes(f.raw);
      const r = d.push(input);
      expect(r.done).toBe(true);
      expect(d.done).toBe(true);
      expect(text(concat(r.data))).toBe(f.body);
      expect(r.rest === null ? "" : text(r.rest)).toBe(f.rest);
      expect(d.trailers).toEqual(f.trailers);
      for (const s of r.data) expect(s.buffer).toBe(input.buffer);
    });

    test(`${f.name}: identical output at every split point and in random splits`, () => {
      everySplit(bytes(f.raw), chunked, { body: f.body, done: true, rest: f.rest, trailers: f.trailers });
    });
  }

  test("rest is null when the message ends exactly at the end of the input", () => {
    expect(new ChunkedDecoder().push(bytes("1\r\na\r\n0\r\n\r\n")).rest).toBeNull();
  });

  test("not done until the final CRLF of the trailer section arrives", () => {
    const d = new ChunkedDecoder();
    const r1 = d.push(bytes("3\r\nabc\r\n0\r\nX: y\r\n"));
    expect(r1.done).toBe(false);
    expect(d.done).toBe(false);
    expect(text(concat(r1.data))).toBe("abc");
    expect(d.push(bytes("\r")).done).toBe(false);
    const r2 = d.push(bytes("\nnext"));
    expect(r2.done).toBe(true);
    expect(text(r2.rest!)).toBe("next");
    expect(d.trailers).toEqual([["X", "y"]]);
  });

  test("pushing after done hands everything back as rest", () => {
    const d = new ChunkedDecoder();
    d.push(bytes("0\r\n\r\n"));
    const r = d.push(bytes("more"));
    expect(r).toEqual({ data: [], done: true, rest: bytes("more") });
    expect(d.push(new Uint8Array(0))).toEqual({ data: [], done: true, rest: null });
  });

  test("a large chunk is passed through as views of the input", () => {
    const payload = new Uint8Array(200_000);
    const rand = rng(42);
    for (let i = 0; i < payload.length; i++) payload[i] = (rand() * 256) | 0;
    const input = concat([encodeChunk(payload.subarray(0, 150_000)), encodeChunk(payload.subarray(150_000)), LAST_CHUNK]);
    const d = new ChunkedDecoder();
    const out: Uint8Array[] = [];
    for (let o = 0; o < input.length; o += 16384) {
      const r = d.push(input.subarray(o, Math.min(input.length, o + 16384)));
      for (const s of r.data) {
        expect(s.buffer).toBe(input.buffer);
        out.push(s);
      }
    }
    expect(d.done).toBe(true);
    expect(concat(out)).toEqual(payload);
  });

  test("a chunk-size line of exactly 4096 bytes is accepted", () => {
    const line = "3;" + "e".repeat(MAX_CHUNK_SIZE_LINE - 2);
    expect(line.length).toBe(4096);
    const r = new ChunkedDecoder().push(bytes(line + "\r\nabc\r\n0\r\n\r\n"));
    expect(r.done).toBe(true);
    expect(text(concat(r.data))).toBe("abc");
  });

  test("16 hex digits are accepted when the value fits", () => {
    const r = new ChunkedDecoder().push(bytes("0000000000000003\r\nabc\r\n0\r\n\r\n"));
    expect(text(concat(r.data))).toBe("abc");
  });
});

describe("ChunkedDecoder: hostile corpus → 400", () => {
  const cases: [string, string][] = [
    ["non-hex chunk size zz", "zz\r\nhello\r\n0\r\n\r\n"],
    ["chunk size with 17 hex digits", "00000000000000005\r\nhello\r\n0\r\n\r\n"],
    ["chunk size overflowing a safe integer", "FFFFFFFFFFFFFFFF\r\nx\r\n0\r\n\r\n"],
    ["0x5 chunk size", "0x5\r\nhello\r\n0\r\n\r\n"],
    ["missing CRLF after chunk data", "5\r\nhelloX\r\n0\r\n\r\n"],
    ["chunk data longer than declared", "3\r\nhello\r\n0\r\n\r\n"],
    ["junk byte instead of CR after chunk data", "5\r\nhelloX\n0\r\n\r\n"],
    ["chunk data not followed by CRLF at all", "5\r\nhello0\r\n\r\n"],
    ["CR then junk after chunk data", "5\r\nhello\rx0\r\n\r\n"],
    ["bare LF after chunk data", "5\r\nhello\n0\r\n\r\n"],
    ["CR without LF after chunk data", "5\r\nhello\r0\r\n\r\n"],
    ["empty chunk size", "\r\nhello\r\n0\r\n\r\n"],
    ["extension without size", ";ext\r\nhello\r\n0\r\n\r\n"],
    ["negative chunk size", "-5\r\nhello\r\n0\r\n\r\n"],
    ["plus sign in chunk size", "+5\r\nhello\r\n0\r\n\r\n"],
    ["leading whitespace before size", " 5\r\nhello\r\n0\r\n\r\n"],
    ["garbage after size", "5 x\r\nhello\r\n0\r\n\r\n"],
    ["bare LF ending size line", "5\nhello\r\n0\r\n\r\n"],
    ["bare CR ending size line", "5\rhello\r\n0\r\n\r\n"],
    ["bare LF inside chunk extension", "5;a\nb\r\nhello\r\n0\r\n\r\n"],
    ["NUL inside chunk extension", "5;a\u0000b\r\nhello\r\n0\r\n\r\n"],
    ["chunk-size line longer than 4096 bytes", "5;" + "a".repeat(4095) + "\r\nhello\r\n0\r\n\r\n"],
    ["very long run of zeros", "0".repeat(5000) + "5\r\nhello\r\n0\r\n\r\n"],
    ["trailer without colon", "0\r\nNoColon\r\n\r\n"],
    ["obs-fold in trailer", "0\r\nX: a\r\n b\r\n\r\n"],
    ["space before colon in trailer", "0\r\nX : a\r\n\r\n"],
    ["NUL in trailer value", "0\r\nX: a\u0000\r\n\r\n"],
    ["bare LF in trailer section", "0\r\nX: a\n\r\n"],
    ["bare LF as final line", "0\r\n\n"],
    ["bare CR at the end", "0\r\n\rX"],
  ];

  for (const [name, raw] of cases) {
    test(`${name}: one push and one byte at a time`, () => {
      const input = bytes(raw);
      const statusOf = (pieces: Uint8Array[]): number => {
        const d = new ChunkedDecoder();
        try {
          for (const p of pieces) d.push(p);
        } catch (e) {
          if (e instanceof HttpParseError) return e.status;
          throw e;
        }
        throw new Error("no HttpParseError thrown");
      };
      expect(statusOf([input])).toBe(400);
      const single: Uint8Array[] = [];
      for (let i = 0; i < input.length; i++) single.push(input.subarray(i, i + 1));
      expect(statusOf(single)).toBe(400);
    });
  }

  test("an oversized trailer section is rejected", () => {
    const d = new ChunkedDecoder();
    d.push(bytes("0\r\n"));
    let status = 0;
    try {
      for (let i = 0; i < 2000; i++) d.push(bytes(`X-T${i}: ${"v".repeat(60)}\r\n`));
    } catch (e) {
      status = (e as HttpParseError).status;
    }
    expect(status).toBe(400);
  });
});

describe("LengthDecoder", () => {
  test("passes exactly length bytes, then the rest", () => {
    const input = bytes("hello worldNEXT");
    const d = new LengthDecoder(11);
    expect(d.done).toBe(false);
    const r = d.push(input);
    expect(r.done).toBe(true);
    expect(text(concat(r.data))).toBe("hello world");
    expect(text(r.rest!)).toBe("NEXT");
    expect(r.data[0].buffer).toBe(input.buffer);
    expect(d.done).toBe(true);
    expect(d.left).toBe(0);
  });

  test("identical output at every split point and in random splits", () => {
    everySplit(bytes("0123456789abcdefTAIL"), () => new LengthDecoder(16), {
      body: "0123456789abcdef",
      done: true,
      rest: "TAIL",
      trailers: [],
    });
    everySplit(bytes("0123456789"), () => new LengthDecoder(10), {
      body: "0123456789",
      done: true,
      rest: "",
      trailers: [],
    });
  });

  test("not done while bytes are missing", () => {
    const d = new LengthDecoder(10);
    const r = d.push(bytes("abc"));
    expect(r).toEqual({ data: [bytes("abc")], done: false, rest: null });
    expect(d.left).toBe(7);
    expect(d.push(new Uint8Array(0))).toEqual({ data: [], done: false, rest: null });
  });

  test("length 0 is done at once and hands everything back", () => {
    const d = new LengthDecoder(0);
    expect(d.done).toBe(true);
    expect(d.push(bytes("xy"))).toEqual({ data: [], done: true, rest: bytes("xy") });
  });

  test("rejects invalid lengths", () => {
    expect(() => new LengthDecoder(-1)).toThrow(RangeError);
    expect(() => new LengthDecoder(1.5)).toThrow(RangeError);
    expect(() => new LengthDecoder(Number.MAX_SAFE_INTEGER + 2)).toThrow(RangeError);
  });
});

describe("pipelined messages end to end", () => {
  test("chunked POST, Content-Length POST and GET in one buffer", () => {
    const wire = bytes(
      "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n" +
        "3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nT: 1\r\n\r\n" +
        "POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nwxyz" +
        "\r\nGET /c HTTP/1.1\r\nHost: h\r\n\r\n",
    );
    const seen: { target: string; body: string }[] = [];
    let buf: Uint8Array = wire;
    while (buf.length > 0) {
      const parsed = parseRequestHead(buf)!;
      expect(parsed).not.toBeNull();
      buf = buf.subarray(parsed.end);
      const framing = requestFraming(parsed.head);
      let body = "";
      if (framing.kind === "none") {
        seen.push({ target: parsed.head.target, body });
        continue;
      }
      const dec = framing.kind === "chunked" ? new ChunkedDecoder() : new LengthDecoder(framing.kind === "length" ? framing.length : 0);
      const r = dec.push(buf);
      expect(r.done).toBe(true);
      body = text(concat(r.data));
      seen.push({ target: parsed.head.target, body });
      buf = r.rest ?? new Uint8Array(0);
    }
    expect(seen).toEqual([
      { target: "/a", body: "abcde" },
      { target: "/b", body: "wxyz" },
      { target: "/c", body: "" },
    ]);
  });
});
