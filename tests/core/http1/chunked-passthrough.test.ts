/**
 * ChunkedDecoder's passthrough bookkeeping (src/core/http1/decoders.ts): after each push, which pushed bytes may be
 * forwarded as they came (`[0, forwardEnd)`, after `prefix`), so that a proxy relays a chunked body's framing
 * unchanged up to the last chunk and writes its own end (filtered trailers). Checked on byte fixtures at every
 * split point, one byte at a time and in random splits: what is forwarded is exactly the raw bytes before the last
 * chunk's size line, the payload (slices, or only their count with `skipData`) and trailers are as without
 * passthrough, and nothing after the body (a pipelined next message) is ever forwarded.
 */
import { describe, expect, test } from "bun:test";
import { ChunkedDecoder, LAST_CHUNK, MAX_CHUNK_SIZE_LINE, encodeChunk, type HeaderList } from "../../../src/core/http1/index.ts";

const bytes = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, "latin1"));
const text = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("latin1");

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

interface Relayed {
  /** What a proxy would write: prefix and [0, forwardEnd) of every push, in order. */
  forwarded: string;
  body: string;
  payload: number;
  done: boolean;
  rest: string;
  trailers: HeaderList;
}

/**
 * Feeds `input` split at `cuts` into a passthrough decoder. Each piece is a fresh Buffer that is overwritten after
 * the push (a connection layer moving on, or its read released), so whatever the decoder keeps across pushes must
 * be its own copy.
 */
function relay(input: Uint8Array, cuts: number[], skipData: boolean): Relayed {
  const d = new ChunkedDecoder();
  expect(d.startPassthrough()).toBe(true);
  d.skipData = skipData;
  let forwarded = "";
  let body = "";
  let rest = "";
  let payload = 0;
  let done = false;
  let prev = 0;
  for (const cut of [...cuts, input.length]) {
    // a Buffer, as Bun's sockets hand out: its `slice` is a view, so a decoder that kept one would see the fill below
    const piece = Buffer.from(input.subarray(prev, cut));
    prev = cut;
    const r = d.push(piece);
    expect(d.forwardEnd).toBeGreaterThanOrEqual(0);
    expect(d.forwardEnd).toBeLessThanOrEqual(piece.length);
    if (d.prefix !== null) forwarded += text(d.prefix);
    forwarded += text(piece.subarray(0, d.forwardEnd));
    if (skipData) expect(r.data.length).toBe(0);
    for (const s of r.data) body += text(s);
    payload += d.payloadBytes;
    if (r.rest !== null) {
      expect(r.done).toBe(true);
      // the rest lies after everything forwarded
      expect(d.forwardEnd).toBeLessThanOrEqual(piece.length - r.rest.length);
      rest += text(r.rest);
    }
    done = r.done;
    piece.fill(0x21);
  }
  return { forwarded, body: skipData ? "" : body, payload, done, rest, trailers: d.trailers };
}

function everySplit(raw: string, expected: Relayed, skipData = false): void {
  const input = bytes(raw);
  for (let cut = 0; cut <= input.length; cut++) expect(relay(input, [cut], skipData)).toEqual(expected);
  const all: number[] = [];
  for (let i = 1; i < input.length; i++) all.push(i);
  expect(relay(input, all, skipData)).toEqual(expected);
  const rand = rng(input.length * 31 + 7);
  for (let round = 0; round < 150; round++) {
    const cuts: number[] = [];
    for (let i = 1; i < input.length; i++) if (rand() < 0.2) cuts.push(i);
    expect(relay(input, cuts, skipData)).toEqual(expected);
  }
}

const fixtures: { name: string; framed: string; end: string; rest: string; body: string; trailers: HeaderList }[] = [
  { name: "one chunk", framed: "5\r\nhello\r\n", end: "0\r\n\r\n", rest: "", body: "hello", trailers: [] },
  { name: "empty body", framed: "", end: "0\r\n\r\n", rest: "", body: "", trailers: [] },
  {
    name: "extensions, trailers and a pipelined next response",
    framed: '4;name=value\r\nWiki\r\n5 ; foo ; bar="q;x"\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n',
    end: "0;last=yes\r\nExpires: Wed, 21 Oct 2015 07:28:00 GMT\r\nX-Checksum:  abc \r\n\r\n",
    rest: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    body: "Wikipedia in\r\n\r\nchunks.",
    trailers: [
      ["Expires", "Wed, 21 Oct 2015 07:28:00 GMT"],
      ["X-Checksum", "abc"],
    ],
  },
  {
    name: "sizes with leading zeros (undecided until a non-zero digit), zero-padded last chunk",
    framed: "000A\r\n0123456789\r\n0001;x=0\r\nZ\r\n00000000010\r\n" + "y".repeat(16) + "\r\n1f \r\n" + "x".repeat(31) + "\r\n",
    end: "0000 ;e\r\n\r\n",
    rest: "X",
    body: "0123456789Z" + "y".repeat(16) + "x".repeat(31),
    trailers: [],
  },
  {
    name: "payload that looks like a last chunk",
    framed: "c\r\n0\r\n\r\n5\r\nab\r\n\r\n",
    end: "0\r\nA: 1\r\n\r\n",
    rest: "0\r\n\r\n",
    body: "0\r\n\r\n5\r\nab\r\n",
    trailers: [["A", "1"]],
  },
];

describe("ChunkedDecoder passthrough", () => {
  for (const f of fixtures) {
    const expected: Relayed = { forwarded: f.framed, body: f.body, payload: f.body.length, done: true, rest: f.rest, trailers: f.trailers };
    test(`${f.name}: forwarded bytes are the framing before the last chunk, at every split point`, () => {
      everySplit(f.framed + f.end + f.rest, expected);
    });
    test(`${f.name}: with skipData, no slices but the same count and the same forwarded bytes`, () => {
      everySplit(f.framed + f.end + f.rest, { ...expected, body: "" }, true);
    });
  }

  test("a body cut off before its end: the framing so far is forwarded, an undecided size line held back", () => {
    expect(relay(bytes("3\r\nabc\r\n00"), [], false)).toEqual({ forwarded: "3\r\nabc\r\n", body: "abc", payload: 3, done: false, rest: "", trailers: [] });
    // a size line that starts non-zero is a data chunk at once: forwarded even before its CRLF arrives
    expect(relay(bytes("3\r\nabc\r\n1f"), [], false).forwarded).toBe("3\r\nabc\r\n1f");
    // inside the trailer section nothing is forwarded
    expect(relay(bytes("3\r\nabc\r\n0\r\nX: y\r\n"), [7, 12], false).forwarded).toBe("3\r\nabc\r\n");
  });

  test("a held size line (leading zeros and a long extension) spanning many pushes is forwarded whole once decided", () => {
    const line = "0".repeat(15) + "4;" + "e".repeat(MAX_CHUNK_SIZE_LINE - 19);
    expect(line.length).toBe(MAX_CHUNK_SIZE_LINE - 2);
    const raw = "2\r\nab\r\n" + "000" + line.slice(3) + "\r\nwxyz\r\n0\r\n\r\n";
    const cuts: number[] = [];
    for (let i = 5; i < raw.length; i += 97) cuts.push(i);
    expect(relay(bytes(raw), cuts, false)).toEqual({ forwarded: raw.slice(0, raw.length - 5), body: "abwxyz", payload: 6, done: true, rest: "", trailers: [] });
  });

  test("big chunks in big reads: one forwarded range per push, no prefix, views of the input", () => {
    const payload = new Uint8Array(600_000);
    const rand = rng(9);
    for (let i = 0; i < payload.length; i++) payload[i] = (rand() * 256) | 0;
    const input = new Uint8Array(Buffer.concat([encodeChunk(payload.subarray(0, 262_144)), encodeChunk(payload.subarray(262_144, 524_288)), encodeChunk(payload.subarray(524_288)), LAST_CHUNK]));
    const d = new ChunkedDecoder();
    d.startPassthrough();
    const framedEnd = input.length - LAST_CHUNK.length;
    let sent = 0;
    let count = 0;
    for (let o = 0; o < input.length; o += 65_536) {
      const piece = input.subarray(o, Math.min(input.length, o + 65_536));
      const r = d.push(piece);
      expect(d.prefix).toBeNull();
      for (const s of r.data) expect(s.buffer).toBe(input.buffer);
      count += d.payloadBytes;
      expect(Buffer.from(piece.subarray(0, d.forwardEnd)).equals(Buffer.from(input.subarray(sent, sent + d.forwardEnd)))).toBe(true);
      sent += d.forwardEnd;
    }
    expect(d.done).toBe(true);
    expect(sent).toBe(framedEnd);
    expect(count).toBe(payload.length);
  });

  test("passthrough cannot start once bytes were decoded; without it nothing is marked forwardable", () => {
    const d = new ChunkedDecoder();
    d.push(bytes("3\r\nab"));
    expect(d.startPassthrough()).toBe(false);
    expect(d.isPassthrough).toBe(false);
    d.push(bytes("c\r\n0\r\n\r\n"));
    expect(d.forwardEnd).toBe(0);
    expect(d.prefix).toBeNull();
    expect(d.payloadBytes).toBe(1);
  });

  test("invalid framing still throws in passthrough", () => {
    for (const bad of ["3\r\nabcX", "g\r\n", "0;\x01\r\n\r\n", "00\r\nX\n\r\n"]) {
      const d = new ChunkedDecoder();
      d.startPassthrough();
      expect(() => d.push(bytes(bad))).toThrow();
    }
  });
});
