import { describe, expect, test } from "bun:test";
import * as zlib from "node:zlib";
import { type PerMessageDeflateParams, parseExtensions } from "../../../src/core/ws/deflate.ts";
import { encodeCloseFrame, encodeFrame } from "../../../src/core/ws/frame-encoder.ts";
import { DEFAULT_PREVIEW_CAP, WsFrameParser, type WsFrameParserOptions, type WsMessage } from "../../../src/core/ws/frame-parser.ts";
import { RawInflater } from "../../../src/core/ws/inflate.ts";

const KEY = new Uint8Array([0x37, 0xfa, 0x21, 0x3d]);
const enc = new TextEncoder();
const SYNC = { finishFlush: zlib.constants.Z_SYNC_FLUSH };

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

function b64(b: Uint8Array): string {
  return Buffer.from(b).toString("base64");
}

/** Deterministic pseudo-random bytes. */
function prng(n: number, seed: number): Uint8Array {
  const b = new Uint8Array(n);
  let x = seed >>> 0;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    b[i] = x >>> 24;
  }
  return b;
}

/** Wordy text with long-range repetition, so deflate produces matches and dynamic blocks. */
function prose(n: number, seed: number): string {
  const words = ["alpha", "beta", "gamma", "δέλτα", "epsilon", "ζ", "ünïcödé", "websocket", "frame", "😀", "proxy", "\n"];
  const r = prng(n, seed);
  let s = "";
  for (let i = 0; s.length < n; i++) s += words[r[i % n] % words.length] + " ";
  return s.slice(0, n);
}

interface Harness {
  parser: WsFrameParser;
  msgs: WsMessage[];
  errors: Error[];
}

function harness(opts: Partial<WsFrameParserOptions> = {}): Harness {
  const msgs: WsMessage[] = [];
  const errors: Error[] = [];
  const parser = new WsFrameParser({
    dir: "out",
    ...opts,
    onMessage: (m) => msgs.push(m),
    onError: (e) => errors.push(e),
  });
  return { parser, msgs, errors };
}

function parseAll(bytes: Uint8Array, opts: Partial<WsFrameParserOptions> = {}): Harness {
  const h = harness(opts);
  h.parser.push(bytes);
  return h;
}

/** permessage-deflate payload of one message: raw deflate, sync flush, trailing 00 00 ff ff removed. */
function pmdCompress(data: Uint8Array | string, opts: zlib.ZlibOptions = {}): Uint8Array {
  const raw = typeof data === "string" ? enc.encode(data) : data;
  const c = zlib.deflateRawSync(raw, { ...SYNC, ...opts });
  expect([...c.subarray(c.length - 4)]).toEqual([0x00, 0x00, 0xff, 0xff]);
  return c.subarray(0, c.length - 4);
}

const PMD: PerMessageDeflateParams = {
  serverNoContextTakeover: false,
  clientNoContextTakeover: false,
  serverMaxWindowBits: 15,
  clientMaxWindowBits: 15,
};

describe("frame encoder", () => {
  test("length forms and masking", () => {
    expect(encodeFrame({ opcode: "text", payload: "" })).toEqual(new Uint8Array([0x81, 0x00]));
    const f125 = encodeFrame({ opcode: "binary", payload: new Uint8Array(125) });
    expect([f125[0], f125[1], f125.length]).toEqual([0x82, 125, 127]);
    const f126 = encodeFrame({ opcode: "binary", payload: new Uint8Array(126), mask: KEY });
    expect([...f126.subarray(0, 8)]).toEqual([0x82, 0x80 | 126, 0, 126, ...KEY]);
    expect([...f126.subarray(8, 12)]).toEqual([...KEY]); // zero payload xor key = key
    const f64k = encodeFrame({ opcode: "binary", payload: new Uint8Array(65536) });
    expect([...f64k.subarray(0, 10)]).toEqual([0x82, 127, 0, 0, 0, 0, 0, 1, 0, 0]);
    expect(encodeFrame({ opcode: "text", payload: "x", fin: false, rsv1: true })[0]).toBe(0x41);
  });

  test("close frame", () => {
    expect([...encodeCloseFrame(1000, "ok")]).toEqual([0x88, 4, 0x03, 0xe8, 0x6f, 0x6b]);
    expect([...encodeCloseFrame()]).toEqual([0x88, 0]);
    expect(() => encodeCloseFrame(1000, "x".repeat(124))).toThrow();
  });
});

describe("WsFrameParser: framing", () => {
  const lengths = [0, 125, 126, 65535, 65536, 70 * 1024];
  for (const masked of [false, true]) {
    for (const len of lengths) {
      test(`binary ${len} bytes, ${masked ? "masked" : "unmasked"}`, () => {
        const payload = prng(len, len + 1);
        const frame = encodeFrame({ opcode: "binary", payload, mask: masked ? KEY : undefined });
        const { msgs, errors } = parseAll(frame);
        expect(errors).toEqual([]);
        expect(msgs).toHaveLength(1);
        const kept = payload.subarray(0, Math.min(len, DEFAULT_PREVIEW_CAP));
        expect(msgs[0]).toEqual({ opcode: "binary", text: b64(kept), sizeBytes: len, truncated: len > DEFAULT_PREVIEW_CAP });
      });

      test(`text ${len} bytes, ${masked ? "masked" : "unmasked"}, fed in 1000-byte chunks`, () => {
        const s = "abcdefghijklmnopqrstuvwxyz0123456789".repeat(Math.ceil(len / 36)).slice(0, len);
        const frame = encodeFrame({ opcode: "text", payload: s, mask: masked ? KEY : undefined });
        const h = harness();
        for (let o = 0; o < frame.length; o += 1000) h.parser.push(frame.subarray(o, o + 1000));
        expect(h.errors).toEqual([]);
        expect(h.msgs).toEqual([
          { opcode: "text", text: s.slice(0, DEFAULT_PREVIEW_CAP), sizeBytes: len, truncated: len > DEFAULT_PREVIEW_CAP },
        ]);
      });
    }
  }

  // A small but varied sequence: masked text, ping, fragmented binary with a pong inside, empty text, close.
  const sequence = concat(
    encodeFrame({ opcode: "text", payload: "héllo", mask: KEY }),
    encodeFrame({ opcode: "ping", payload: "p1", mask: new Uint8Array([1, 2, 3, 4]) }),
    encodeFrame({ opcode: "binary", payload: new Uint8Array([1, 2, 3]), fin: false, mask: KEY }),
    encodeFrame({ opcode: "pong", payload: "", mask: KEY }),
    encodeFrame({ opcode: "continuation", payload: new Uint8Array([4, 5]), fin: false }),
    encodeFrame({ opcode: "continuation", payload: new Uint8Array([6]), mask: new Uint8Array([9, 9, 9, 9]) }),
    encodeFrame({ opcode: "text", payload: "", mask: KEY }),
    encodeCloseFrame(1001, "going", KEY),
  );
  const expected: WsMessage[] = [
    { opcode: "text", text: "héllo", sizeBytes: 6, truncated: false },
    { opcode: "ping", text: "", sizeBytes: 2, truncated: false },
    { opcode: "pong", text: "", sizeBytes: 0, truncated: false },
    { opcode: "binary", text: b64(new Uint8Array([1, 2, 3, 4, 5, 6])), sizeBytes: 6, truncated: false },
    { opcode: "text", text: "", sizeBytes: 0, truncated: false },
    { opcode: "close", text: "", sizeBytes: 7, truncated: false, closeCode: 1001, closeReason: "going" },
  ];

  test("whole sequence in one push", () => {
    const { msgs, errors } = parseAll(sequence);
    expect(errors).toEqual([]);
    expect(msgs).toEqual(expected);
  });

  test("every split point into two and three pieces, and byte by byte", () => {
    const n = sequence.length;
    for (let i = 0; i <= n; i++) {
      for (let j = i; j <= n; j++) {
        const h = harness();
        h.parser.push(sequence.subarray(0, i));
        h.parser.push(sequence.subarray(i, j));
        h.parser.push(sequence.subarray(j));
        if (h.errors.length || !Bun.deepEquals(h.msgs, expected)) {
          throw new Error(`split at ${i}/${j}: ${JSON.stringify(h.msgs)} ${h.errors}`);
        }
      }
    }
    const h = harness();
    for (let i = 0; i < n; i++) h.parser.push(sequence.subarray(i, i + 1));
    expect(h.msgs).toEqual(expected);
  });

  test("fragmented text with a ping in the middle: ping reported first, text reassembled", () => {
    const seq = concat(
      encodeFrame({ opcode: "text", payload: "Hello, ", fin: false, mask: KEY }),
      encodeFrame({ opcode: "continuation", payload: "wor", fin: false, mask: KEY }),
      encodeFrame({ opcode: "ping", payload: "are you there?", mask: KEY }),
      encodeFrame({ opcode: "continuation", payload: "ld!", mask: KEY }),
    );
    const h = harness();
    const seen: string[] = [];
    const p = new WsFrameParser({ dir: "out", onMessage: (m) => seen.push(m.opcode), onError: (e) => h.errors.push(e) });
    p.push(seq.subarray(0, seq.length - 5));
    expect(seen).toEqual(["ping"]); // reported as soon as it arrives, before the data message completes
    p.push(seq.subarray(seq.length - 5));
    expect(seen).toEqual(["ping", "text"]);
    const { msgs } = parseAll(seq);
    expect(msgs).toEqual([
      { opcode: "ping", text: "", sizeBytes: 14, truncated: false },
      { opcode: "text", text: "Hello, world!", sizeBytes: 13, truncated: false },
    ]);
  });

  test("text split mid-character across fragments decodes correctly", () => {
    const bytes = enc.encode("a€b");
    const seq = concat(
      encodeFrame({ opcode: "text", payload: bytes.subarray(0, 2), fin: false }),
      encodeFrame({ opcode: "continuation", payload: bytes.subarray(2) }),
    );
    expect(parseAll(seq).msgs).toEqual([{ opcode: "text", text: "a€b", sizeBytes: 5, truncated: false }]);
  });

  test("close frames: code and reason, code only, empty, UTF-8 reason", () => {
    const seq = concat(
      encodeCloseFrame(1000, "normal closure"),
      encodeCloseFrame(4001, "", KEY),
      encodeCloseFrame(),
      encodeCloseFrame(1011, "ошибка ⚠", KEY),
    );
    const { msgs, errors } = parseAll(seq, { dir: "in" });
    expect(errors).toEqual([]);
    expect(msgs).toEqual([
      { opcode: "close", text: "", sizeBytes: 16, truncated: false, closeCode: 1000, closeReason: "normal closure" },
      { opcode: "close", text: "", sizeBytes: 2, truncated: false, closeCode: 4001, closeReason: "" },
      { opcode: "close", text: "", sizeBytes: 0, truncated: false },
      { opcode: "close", text: "", sizeBytes: 2 + enc.encode("ошибка ⚠").length, truncated: false, closeCode: 1011, closeReason: "ошибка ⚠" },
    ]);
  });

  test("binary preview is base64 of the unmasked payload", () => {
    const payload = new Uint8Array([0, 255, 128, 7, 0xfb, 0xff]);
    const { msgs } = parseAll(encodeFrame({ opcode: "binary", payload, mask: KEY }));
    expect(msgs[0].text).toBe("AP+AB/v/");
  });

  test("preview truncation at 64 KB across many fragments keeps the true size", () => {
    const fragments: Uint8Array[] = [];
    const total = 200_000;
    const chunk = 7_777;
    const all = prng(total, 5);
    for (let o = 0; o < total; o += chunk) {
      fragments.push(
        encodeFrame({
          opcode: o === 0 ? "binary" : "continuation",
          payload: all.subarray(o, o + chunk),
          fin: o + chunk >= total,
          mask: KEY,
        }),
      );
    }
    const { msgs } = parseAll(concat(...fragments));
    expect(msgs).toEqual([{ opcode: "binary", text: b64(all.subarray(0, 65536)), sizeBytes: total, truncated: true }]);
  });

  test("exactly the cap is not truncated; one byte more is", () => {
    const at = parseAll(encodeFrame({ opcode: "text", payload: "x".repeat(65536) })).msgs[0];
    expect([at.text.length, at.truncated]).toEqual([65536, false]);
    const over = parseAll(encodeFrame({ opcode: "text", payload: "x".repeat(65537) })).msgs[0];
    expect([over.text.length, over.sizeBytes, over.truncated]).toEqual([65536, 65537, true]);
  });

  test("UTF-8 preview is cut on a character boundary", () => {
    // 3-byte characters: 65536 = 3 * 21845 + 1, so the last kept character would be split.
    const euro = "€".repeat(30000);
    const m = parseAll(encodeFrame({ opcode: "text", payload: euro, mask: KEY })).msgs[0];
    expect(m.text).toBe("€".repeat(21845));
    expect(m.sizeBytes).toBe(90000);
    expect(m.truncated).toBe(true);
    // Small caps over 2-, 3- and 4-byte characters, cutting at every offset.
    const s = "aé€😀bé😀€";
    const bytes = enc.encode(s);
    for (let cap = 0; cap < bytes.length; cap++) {
      const got = parseAll(encodeFrame({ opcode: "text", payload: bytes }), { previewCap: cap }).msgs[0];
      expect(got.text).not.toContain("\uFFFD");
      expect(s.startsWith(got.text)).toBe(true);
      const kept = enc.encode(got.text).length;
      expect(kept).toBeLessThanOrEqual(cap);
      expect(cap - kept).toBeLessThan(4);
      // the next character would not have fit
      const next = [...s.slice(got.text.length)][0];
      expect(kept + enc.encode(next).length).toBeGreaterThan(cap);
      expect(got.truncated).toBe(true);
      expect(got.sizeBytes).toBe(bytes.length);
    }
  });

  test("a byte-order mark is kept and invalid UTF-8 becomes U+FFFD", () => {
    const payload = new Uint8Array([0xef, 0xbb, 0xbf, 0x41, 0xff, 0x42]);
    expect(parseAll(encodeFrame({ opcode: "text", payload })).msgs[0].text).toBe("\uFEFFA\uFFFDB");
  });

  test("64-bit length beyond 2^32 is counted exactly without buffering the payload", () => {
    const len = 2 ** 32 + 10;
    const header = new Uint8Array([0x82, 127, 0, 0, 0, 1, 0, 0, 0, 10]);
    const h = harness({ dir: "in" });
    h.parser.push(header);
    const block = new Uint8Array(1 << 20).fill(0x5a);
    let left = len;
    while (left > 0) {
      const k = Math.min(left, block.length);
      h.parser.push(block.subarray(0, k));
      left -= k;
    }
    expect(h.errors).toEqual([]);
    expect(h.msgs).toEqual([
      { opcode: "binary", text: b64(new Uint8Array(65536).fill(0x5a)), sizeBytes: len, truncated: true },
    ]);
  });
});

describe("WsFrameParser: protocol errors", () => {
  const good = encodeFrame({ opcode: "text", payload: "before", mask: KEY });
  const after = encodeFrame({ opcode: "text", payload: "after", mask: KEY });
  const cases: [string, Uint8Array, RegExp, Partial<WsFrameParserOptions>?][] = [
    ["reserved data opcode", encodeFrame({ opcode: 3, payload: "x" }), /reserved data opcode 0x3/],
    ["reserved control opcode", encodeFrame({ opcode: 0xb, payload: "x" }), /reserved control opcode 0xb/],
    ["RSV1 without extension", encodeFrame({ opcode: "text", payload: "x", rsv1: true }), /RSV1 set without/],
    ["RSV2", encodeFrame({ opcode: "text", payload: "x", rsv2: true }), /RSV2\/RSV3/],
    ["RSV3 even with deflate", encodeFrame({ opcode: "binary", payload: "x", rsv3: true }), /RSV2\/RSV3/, { deflate: PMD }],
    ["RSV1 on a control frame", encodeFrame({ opcode: "ping", rsv1: true }), /RSV1 set on a control/, { deflate: PMD }],
    ["control frame > 125 bytes", encodeFrame({ opcode: "ping", payload: new Uint8Array(126), mask: KEY }), /control frame payload of 126/],
    ["fragmented control frame", encodeFrame({ opcode: "pong", payload: "x", fin: false }), /fragmented control frame/],
    ["64-bit length with MSB set", new Uint8Array([0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 1]), /most significant bit/],
    ["64-bit length beyond 2^53", new Uint8Array([0x82, 127, 0, 0x20, 0, 0, 0, 0, 0, 0]), /beyond 2\^53/],
    ["continuation without a message", encodeFrame({ opcode: "continuation", payload: "x" }), /continuation frame without/],
    [
      "new message inside a fragmented one",
      concat(encodeFrame({ opcode: "text", payload: "a", fin: false }), encodeFrame({ opcode: "binary", payload: "b" })),
      /before the fragmented one finished/,
    ],
    [
      "RSV1 on a continuation frame",
      concat(
        encodeFrame({ opcode: "text", payload: pmdCompress("ab"), fin: false, rsv1: true }),
        encodeFrame({ opcode: "continuation", payload: "x", rsv1: true }),
      ),
      /RSV1 set on a continuation/,
      { deflate: PMD },
    ],
    ["corrupt compressed data", encodeFrame({ opcode: "text", payload: new Uint8Array([0xff, 0xff, 0xff]), rsv1: true }), /inflate: invalid/, { deflate: PMD }],
  ];
  for (const [name, bad, re, opts] of cases) {
    test(name, () => {
      const bytes = concat(good, bad, after);
      for (const split of [bytes.length, good.length + 1, good.length + 3]) {
        const h = harness(opts);
        h.parser.push(bytes.subarray(0, split));
        h.parser.push(bytes.subarray(split));
        h.parser.push(after);
        expect(h.msgs).toEqual([{ opcode: "text", text: "before", sizeBytes: 6, truncated: false }]);
        expect(h.errors).toHaveLength(1);
        expect(h.errors[0].message).toMatch(re);
        expect(h.parser.failed).toBe(true);
      }
    });
  }

  test("valid traffic does not fail", () => {
    const h = harness();
    h.parser.push(concat(good, after));
    expect(h.parser.failed).toBe(false);
    expect(h.msgs.map((m) => m.text)).toEqual(["before", "after"]);
  });
});

describe("parseExtensions", () => {
  test("absent or other extensions", () => {
    expect(parseExtensions(undefined)).toBeNull();
    expect(parseExtensions("")).toBeNull();
    expect(parseExtensions("x-webkit-deflate-frame")).toBeNull();
    expect(parseExtensions("permessage-deflate-x; client_max_window_bits")).toBeNull();
  });

  test("defaults and parameters", () => {
    expect(parseExtensions("permessage-deflate")).toEqual(PMD);
    expect(
      parseExtensions(
        "Permessage-Deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=10; client_max_window_bits=9",
      ),
    ).toEqual({ serverNoContextTakeover: true, clientNoContextTakeover: true, serverMaxWindowBits: 10, clientMaxWindowBits: 9 });
    expect(parseExtensions('foo; bar="a,b", permessage-deflate ; client_max_window_bits = "12" ; SERVER_NO_CONTEXT_TAKEOVER')).toEqual({
      ...PMD,
      clientMaxWindowBits: 12,
      serverNoContextTakeover: true,
    });
  });

  test("invalid window bits fall back to 15; the first offer wins", () => {
    expect(parseExtensions("permessage-deflate; server_max_window_bits=7; client_max_window_bits=abc")).toEqual(PMD);
    expect(parseExtensions("permessage-deflate; client_no_context_takeover, permessage-deflate")).toEqual({
      ...PMD,
      clientNoContextTakeover: true,
    });
  });
});

describe("RawInflater", () => {
  test("matches zlib on varied data, fixed/dynamic/stored blocks, every chunk size", () => {
    const inputs = [
      enc.encode(prose(300_000, 1)),
      prng(100_000, 2),
      new Uint8Array(100_000),
      enc.encode("ab"),
      new Uint8Array(0),
    ];
    for (const data of inputs) {
      for (const opts of [{ level: 0 }, { level: 1 }, { level: 9 }, { strategy: zlib.constants.Z_FIXED }, { strategy: zlib.constants.Z_HUFFMAN_ONLY }]) {
        const c = pmdCompress(data, opts);
        for (const step of [1, 3, 1000, c.length + 1]) {
          if (step < 1000 && c.length > 20_000) continue;
          const parts: Uint8Array[] = [];
          const inf = new RawInflater((b) => parts.push(b.slice()));
          for (let o = 0; o < c.length; o += step) inf.write(c.subarray(o, o + step));
          inf.endMessage();
          expect(Buffer.concat(parts).equals(data)).toBe(true);
        }
      }
    }
  });

  test("a stream closed with BFINAL=1 is accepted and the next message starts a new bit stream", () => {
    const parts: Uint8Array[] = [];
    const inf = new RawInflater((b) => parts.push(b.slice()));
    inf.write(zlib.deflateRawSync(enc.encode("first message, first message"))); // Z_FINISH: final block
    inf.endMessage();
    inf.write(pmdCompress("second", { dictionary: enc.encode("first message, first message") }));
    inf.endMessage();
    expect(Buffer.concat(parts).toString()).toBe("first message, first messagesecond");
  });
});

describe("WsFrameParser: permessage-deflate", () => {
  test("single compressed messages, masked out and unmasked in", () => {
    const s = prose(5000, 3);
    const payload = pmdCompress(s);
    for (const [dir, mask] of [["out", KEY], ["in", undefined]] as const) {
      const { msgs, errors } = parseAll(encodeFrame({ opcode: "text", payload, rsv1: true, mask }), { dir, deflate: PMD });
      expect(errors).toEqual([]);
      expect(msgs).toEqual([
        { opcode: "text", text: s, sizeBytes: enc.encode(s).length, truncated: false, compressed: true, wireSizeBytes: payload.length },
      ]);
    }
  });

  test("compressed binary fragmented across frames, control frame in the middle", () => {
    const data = prng(3000, 9);
    const c = pmdCompress(concat(data, data, data));
    const third = Math.floor(c.length / 3);
    const seq = concat(
      encodeFrame({ opcode: "binary", payload: c.subarray(0, third), fin: false, rsv1: true, mask: KEY }),
      encodeFrame({ opcode: "ping", payload: "x", mask: KEY }),
      encodeFrame({ opcode: "continuation", payload: c.subarray(third, 2 * third), fin: false, mask: KEY }),
      encodeFrame({ opcode: "continuation", payload: c.subarray(2 * third), mask: KEY }),
    );
    const { msgs, errors } = parseAll(seq, { deflate: PMD });
    expect(errors).toEqual([]);
    expect(msgs).toEqual([
      { opcode: "ping", text: "", sizeBytes: 1, truncated: false },
      { opcode: "binary", text: b64(concat(data, data, data)), sizeBytes: 9000, truncated: false, compressed: true, wireSizeBytes: c.length },
    ]);
  });

  test("context takeover: the second message references the first one's window", () => {
    const m1 = prose(200_000, 11); // several times the 32 KB window, so the ring wraps
    const m2 = m1.slice(170_000, 190_000) + " tail";
    const c1 = pmdCompress(m1);
    const c2 = pmdCompress(m2, { dictionary: enc.encode(m1) });
    // Prove the fixture needs the window: alone it does not inflate.
    expect(() => zlib.inflateRawSync(concat(c2, new Uint8Array([0, 0, 0xff, 0xff])), SYNC)).toThrow();
    const seq = concat(
      encodeFrame({ opcode: "text", payload: c1, rsv1: true }),
      encodeFrame({ opcode: "text", payload: c2, rsv1: true }),
    );
    const { msgs, errors } = parseAll(seq, { dir: "in", deflate: PMD, previewCap: 1 << 20 });
    expect(errors).toEqual([]);
    expect(msgs.map((m) => m.text)).toEqual([m1, m2]);
    expect(msgs.map((m) => m.truncated)).toEqual([false, false]);
    expect(msgs.map((m) => m.wireSizeBytes)).toEqual([c1.length, c2.length]);
  });

  test("context takeover with a streaming compressor, many messages, every split point of the stream", async () => {
    const d = zlib.createDeflateRaw();
    const out: Buffer[] = [];
    d.on("data", (b: Buffer) => out.push(b));
    const texts = ["The quick brown fox", "The quick brown fox jumps", "over the lazy dog; the quick brown fox jumps", "fox fox fox"];
    const frames: Uint8Array[] = [];
    for (const t of texts) {
      d.write(enc.encode(t));
      await new Promise<void>((r) => d.flush(zlib.constants.Z_SYNC_FLUSH, () => r()));
      const c = Buffer.concat(out.splice(0));
      expect([...c.subarray(c.length - 4)]).toEqual([0, 0, 0xff, 0xff]);
      frames.push(encodeFrame({ opcode: "text", payload: c.subarray(0, c.length - 4), rsv1: true, mask: KEY }));
      frames.push(encodeFrame({ opcode: "pong", mask: KEY }));
    }
    d.close();
    const seq = concat(...frames);
    const want = texts.flatMap((t) => [t, ""]);
    for (let i = 0; i <= seq.length; i++) {
      const h = harness({ deflate: PMD });
      h.parser.push(seq.subarray(0, i));
      h.parser.push(seq.subarray(i));
      if (h.errors.length || !Bun.deepEquals(h.msgs.map((m) => m.text), want)) {
        throw new Error(`split ${i}: ${JSON.stringify(h.msgs)} ${h.errors}`);
      }
    }
  });

  test("no_context_takeover resets the window for that direction only", () => {
    const m1 = "a message that the next one would like to reference";
    const m2 = "a message that the next one";
    const seq = concat(
      encodeFrame({ opcode: "text", payload: pmdCompress(m1), rsv1: true }),
      encodeFrame({ opcode: "text", payload: pmdCompress(m2, { dictionary: enc.encode(m1) }), rsv1: true }),
    );
    // "in" frames use server_* parameters.
    const reset = parseAll(seq, { dir: "in", deflate: { ...PMD, serverNoContextTakeover: true } });
    expect(reset.msgs.map((m) => m.text)).toEqual([m1]);
    expect(reset.errors).toHaveLength(1);
    expect(reset.errors[0].message).toMatch(/too far back/);
    const kept = parseAll(seq, { dir: "in", deflate: { ...PMD, clientNoContextTakeover: true } });
    expect(kept.errors).toEqual([]);
    expect(kept.msgs.map((m) => m.text)).toEqual([m1, m2]);
    // "out" frames use client_* parameters.
    const outReset = parseAll(seq, { dir: "out", deflate: { ...PMD, clientNoContextTakeover: true } });
    expect(outReset.errors).toHaveLength(1);
    // Independently compressed messages decode with the reset in place.
    const indep = concat(
      encodeFrame({ opcode: "text", payload: pmdCompress(m1), rsv1: true, mask: KEY }),
      encodeFrame({ opcode: "text", payload: pmdCompress(m2), rsv1: true, mask: KEY }),
    );
    const ok = parseAll(indep, { dir: "out", deflate: { ...PMD, clientNoContextTakeover: true } });
    expect(ok.errors).toEqual([]);
    expect(ok.msgs.map((m) => m.text)).toEqual([m1, m2]);
  });

  test("uncompressed messages interleave with compressed ones; empty compressed messages", () => {
    const seq = concat(
      encodeFrame({ opcode: "text", payload: pmdCompress("zip zip zip"), rsv1: true }),
      encodeFrame({ opcode: "text", payload: "plain" }),
      encodeFrame({ opcode: "text", payload: pmdCompress(""), rsv1: true }), // the single 0x00 byte form
      encodeFrame({ opcode: "binary", payload: new Uint8Array(0), rsv1: true }),
      encodeFrame({ opcode: "text", payload: pmdCompress("zip zip", { dictionary: enc.encode("zip zip zip") }), rsv1: true }),
    );
    const { msgs, errors } = parseAll(seq, { dir: "in", deflate: PMD });
    expect(errors).toEqual([]);
    expect(msgs.map((m) => [m.opcode, m.text, m.sizeBytes, m.compressed ?? false])).toEqual([
      ["text", "zip zip zip", 11, true],
      ["text", "plain", 5, false],
      ["text", "", 0, true],
      ["binary", "", 0, true],
      ["text", "zip zip", 7, true],
    ]);
  });

  test("compressed preview is capped; sizeBytes is the inflated size; highly compressible input is not retained", () => {
    const big = new Uint8Array(50_000_000).fill(0x61);
    const c = pmdCompress(big);
    expect(c.length).toBeLessThan(100_000);
    const frame = encodeFrame({ opcode: "text", payload: c, rsv1: true, mask: KEY });
    const { msgs, errors } = parseAll(frame, { deflate: PMD, inflateBudget: 64 * 1024 * 1024 });
    expect(errors).toEqual([]);
    expect(msgs).toEqual([
      { opcode: "text", text: "a".repeat(65536), sizeBytes: 50_000_000, truncated: true, compressed: true, wireSizeBytes: c.length },
    ]);
  });

  test("past the inflate budget (default 4 MiB) a message is counted on the wire only: sizeBytes is 'at least'", () => {
    const big = new Uint8Array(50_000_000).fill(0x61);
    const c = pmdCompress(big);
    const frame = encodeFrame({ opcode: "text", payload: c, rsv1: true, mask: KEY });
    const small = encodeFrame({ opcode: "text", payload: pmdCompress("next"), rsv1: true, mask: KEY });
    const { msgs, errors } = parseAll(concat(frame, small), { deflate: PMD });
    expect(errors).toEqual([]);
    expect(msgs[0]).toEqual({ opcode: "text", text: "a".repeat(65536), sizeBytes: 4 * 1024 * 1024, sizeAtLeast: true, truncated: true, compressed: true, wireSizeBytes: c.length });
    // with context takeover the window is gone: the next message cannot be inflated (0 bytes, "at least")
    expect(msgs[1]).toMatchObject({ text: "", sizeBytes: 0, sizeAtLeast: true });
    // without it (the sender resets its window per message) the next one is inflated afresh
    const fresh = parseAll(concat(frame, small), { deflate: { ...PMD, clientNoContextTakeover: true, serverNoContextTakeover: true } });
    expect(fresh.errors).toEqual([]);
    expect(fresh.msgs[1]).toMatchObject({ text: "next", sizeBytes: 4 });
  });

  test("compressed UTF-8 preview is cut on a character boundary", () => {
    const s = "😀".repeat(20_000); // 80 000 bytes; 65536 = 4 * 16384 exactly, so use a cap that splits
    const { msgs } = parseAll(encodeFrame({ opcode: "text", payload: pmdCompress(s), rsv1: true }), {
      dir: "in",
      deflate: PMD,
      previewCap: 65535,
    });
    expect(msgs[0].text).toBe("😀".repeat(16383));
    expect(msgs[0].sizeBytes).toBe(80_000);
  });
});

describe("permessage-deflate end to end with Bun.serve", () => {
  // `true` makes Bun negotiate no context takeover both ways; "dedicated" keeps a sliding window (context
  // takeover); "32KB" keeps a window too but limits it to 12 bits (and compresses less eagerly), so the
  // second send shrinks less. `shrink`: how many times smaller the second send must be on the wire.
  type Pmd = boolean | { compress: "dedicated" | "32KB"; decompress: "dedicated" | "32KB" };
  const configs: { name: string; pmd: Pmd; takeover: boolean; windowBits: number; shrink: number }[] = [
    { name: "perMessageDeflate: true", pmd: true, takeover: false, windowBits: 15, shrink: 1 },
    { name: "dedicated compressor (context takeover)", pmd: { compress: "dedicated", decompress: "dedicated" }, takeover: true, windowBits: 15, shrink: 4 },
    { name: "32KB compressor (server_max_window_bits=12)", pmd: { compress: "32KB", decompress: "32KB" }, takeover: true, windowBits: 12, shrink: 1 },
  ];
  for (const cfg of configs) {
    test(`${cfg.name}: raw TCP handshake, masked compressed client frames, server frames parsed`, async () => {
      // Repetitive within the message (a 2500-character unit, 4 times) and across the two sends.
      const repetitive = (prose(2500, 21) + "\n").repeat(4);
      const fromClient = ["client says hello hello hello hello", "client says hello hello again"];
      const serverGot: string[] = [];
      const server = Bun.serve({
        port: 0,
        hostname: "127.0.0.1",
        fetch(req, srv) {
          if (srv.upgrade(req)) return undefined;
          return new Response("no", { status: 400 });
        },
        websocket: {
          perMessageDeflate: cfg.pmd,
          message(ws, message) {
            serverGot.push(String(message));
            if (serverGot.length < fromClient.length) return;
            ws.send(repetitive, true);
            ws.send(repetitive, true);
            ws.close(1000, "done");
          },
        },
      });
      try {
        const inMsgs: WsMessage[] = [];
        const inErrors: Error[] = [];
        let inParser: WsFrameParser | null = null;
        let head: Uint8Array = new Uint8Array(0);
        let params: PerMessageDeflateParams | null = null;
        let statusLine = "";
        let clientFrames: Uint8Array = new Uint8Array(0);
        const done = Promise.withResolvers<void>();
        const onMessage = (m: WsMessage) => {
          inMsgs.push(m);
          if (m.opcode === "close") done.resolve();
        };
        const socket = await Bun.connect({
          hostname: "127.0.0.1",
          port: server.port!,
          socket: {
            data(sock, data) {
              if (inParser) {
                inParser.push(data);
                return;
              }
              head = concat(head, data);
              const end = Buffer.from(head).indexOf("\r\n\r\n");
              if (end < 0) return;
              const lines = Buffer.from(head.subarray(0, end)).toString("latin1").split("\r\n");
              statusLine = lines[0];
              const ext = lines.find((l) => l.toLowerCase().startsWith("sec-websocket-extensions:"));
              params = parseExtensions(ext?.slice(ext.indexOf(":") + 1));
              inParser = new WsFrameParser({ dir: "in", deflate: params, onMessage, onError: (e) => inErrors.push(e) });
              // Client messages compressed as the negotiated client parameters allow.
              const first = pmdCompress(fromClient[0]);
              const second = params?.clientNoContextTakeover
                ? pmdCompress(fromClient[1])
                : pmdCompress(fromClient[1], { dictionary: enc.encode(fromClient[0]) });
              clientFrames = concat(
                encodeFrame({ opcode: "text", payload: first, rsv1: true, mask: KEY }),
                encodeFrame({ opcode: "text", payload: second, rsv1: true, mask: new Uint8Array([0xde, 0xad, 0xbe, 0xef]) }),
              );
              sock.write(clientFrames);
              inParser.push(head.subarray(end + 4));
            },
            close() {
              done.resolve();
            },
            error(_s, e) {
              done.reject(e);
            },
          },
        });
        socket.write(
          "GET /chat HTTP/1.1\r\n" +
            `Host: 127.0.0.1:${server.port}\r\n` +
            "Upgrade: websocket\r\nConnection: Upgrade\r\n" +
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
            "Sec-WebSocket-Version: 13\r\n" +
            "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n",
        );
        await done.promise;
        socket.end();

        expect(statusLine).toStartWith("HTTP/1.1 101");
        const p = params as PerMessageDeflateParams | null;
        expect(p).not.toBeNull();
        expect(p!.serverNoContextTakeover).toBe(!cfg.takeover);
        expect(p!.serverMaxWindowBits).toBe(cfg.windowBits);
        expect(serverGot).toEqual(fromClient);
        expect(inErrors).toEqual([]);
        const data = inMsgs.filter((m) => m.opcode === "text");
        expect(data.map((m) => m.text)).toEqual([repetitive, repetitive]);
        for (const m of data) {
          expect(m.compressed).toBe(true);
          expect(m.sizeBytes).toBe(enc.encode(repetitive).length);
          expect(m.wireSizeBytes!).toBeLessThan(repetitive.length / 4);
        }
        if (cfg.takeover) {
          // The repeat is almost entirely a back-reference into the previous message's window.
          expect(data[1].wireSizeBytes!).toBeLessThan(data[0].wireSizeBytes! / cfg.shrink);
        } else {
          expect(data[1].wireSizeBytes).toBe(data[0].wireSizeBytes);
        }
        expect(inMsgs.at(-1)).toEqual({ opcode: "close", text: "", sizeBytes: 6, truncated: false, closeCode: 1000, closeReason: "done" });

        // The client direction, observed from the bytes we wrote.
        const out = parseAll(clientFrames, { dir: "out", deflate: p });
        expect(out.errors).toEqual([]);
        expect(out.msgs.map((m) => m.text)).toEqual(fromClient);
      } finally {
        server.stop(true);
      }
    });
  }
});
