import { describe, expect, test } from "bun:test";
import http2 from "node:http2";
import { connect, createServer } from "node:net";
import { decodeInteger, encodeInteger, HeaderListTooLarge, HpackDecoder, HpackEncoder, HpackError, HUFFMAN_BITS, HUFFMAN_CODES, learnedNeverIndexedNames, STATIC_TABLE } from "../../../src/core/http2/hpack.ts";

const hex = (s: string) => Uint8Array.from(Buffer.from(s.replace(/\s+/g, ""), "hex"));
const toHex = (b: Uint8Array) => Buffer.from(b).toString("hex");
const BIG = 1 << 20;

function decode(d: HpackDecoder, block: Uint8Array, max = BIG): string[] {
  const out: string[] = [];
  d.decode(block, max, out);
  return out;
}

/** A seeded PRNG (mulberry32): the random tests are repeatable. */
function rng(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe("RFC 7541 C.1 integers", () => {
  test("C.1.1 10 with a 5-bit prefix, C.1.2 1337 with a 5-bit prefix, C.1.3 42 at an octet boundary", () => {
    expect(toHex(encodeInteger(10, 5))).toBe("0a");
    expect(toHex(encodeInteger(1337, 5))).toBe("1f9a0a");
    expect(toHex(encodeInteger(42, 8))).toBe("2a");
    expect(decodeInteger(hex("0a"), 0, 5)).toEqual({ value: 10, end: 1 });
    expect(decodeInteger(hex("ff 1f9a0a"), 1, 5)).toEqual({ value: 1337, end: 4 });
    expect(decodeInteger(hex("2a"), 0, 8)).toEqual({ value: 42, end: 1 });
    expect(decodeInteger(hex("e0"), 0, 5)).toEqual({ value: 0, end: 1 }); // bits above the prefix ignored
  });

  test("round trips at the prefix boundaries, up to 2^31-1", () => {
    for (const bits of [1, 4, 5, 6, 7, 8]) {
      for (const v of [0, 1, (1 << bits) - 2, (1 << bits) - 1, 1 << bits, 127, 128, 255, 16383, 16384, 2 ** 31 - 1]) {
        const b = encodeInteger(v, bits);
        expect(decodeInteger(b, 0, bits)).toEqual({ value: v, end: b.length });
      }
    }
  });

  test("truncated and overflowing integers are HpackError", () => {
    expect(() => decodeInteger(hex("1f"), 0, 5)).toThrow(HpackError);
    expect(() => decodeInteger(hex("1f 9a"), 0, 5)).toThrow(HpackError);
    expect(() => decodeInteger(hex("1f ffffffff0f"), 0, 5)).toThrow(HpackError); // > 2^31-1
    expect(() => decodeInteger(hex("1f 8080808080808000"), 0, 5)).toThrow(HpackError); // too many octets
  });
});

describe("RFC 7541 C.2 header field representations", () => {
  test("C.2.1 literal with indexing", () => {
    const d = new HpackDecoder();
    expect(decode(d, hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"))).toEqual(["custom-key", "custom-header"]);
    expect(d.tableEntries()).toEqual([["custom-key", "custom-header"]]);
    expect(d.tableSize).toBe(55);
  });

  test("C.2.2 literal without indexing", () => {
    const d = new HpackDecoder();
    expect(decode(d, hex("040c 2f73 616d 706c 652f 7061 7468"))).toEqual([":path", "/sample/path"]);
    expect(d.tableEntries()).toEqual([]);
  });

  test("C.2.3 literal never indexed", () => {
    const d = new HpackDecoder();
    expect(decode(d, hex("1008 7061 7373 776f 7264 0673 6563 7265 74"))).toEqual(["password", "secret"]);
    expect(d.tableEntries()).toEqual([]);
  });

  test("C.2.4 indexed", () => {
    const d = new HpackDecoder();
    expect(decode(d, hex("82"))).toEqual([":method", "GET"]);
    expect(d.tableEntries()).toEqual([]);
  });

  test("every static table entry decodes from its index", () => {
    expect(STATIC_TABLE.length).toBe(61);
    const d = new HpackDecoder();
    for (let i = 1; i <= 61; i++) expect(decode(d, encodeInteger(i, 7, 0x80))).toEqual([...STATIC_TABLE[i - 1]]);
  });
});

const REQ1 = [":method", "GET", ":scheme", "http", ":path", "/", ":authority", "www.example.com"];
const REQ2 = [...REQ1, "cache-control", "no-cache"];
const REQ3 = [":method", "GET", ":scheme", "https", ":path", "/index.html", ":authority", "www.example.com", "custom-key", "custom-value"];
const REQ_TABLES: [string, string][][] = [
  [[":authority", "www.example.com"]],
  [["cache-control", "no-cache"], [":authority", "www.example.com"]],
  [["custom-key", "custom-value"], ["cache-control", "no-cache"], [":authority", "www.example.com"]],
];
const REQ_SIZES = [57, 110, 164];

const C3 = [
  "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
  "8286 84be 5808 6e6f 2d63 6163 6865",
  "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
];
const C4 = [
  "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
  "8286 84be 5886 a8eb 1064 9cbf",
  "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
];

describe("RFC 7541 C.3 / C.4 requests (one connection, three blocks)", () => {
  for (const [label, blocks, huffman] of [["C.3 without Huffman", C3, false], ["C.4 with Huffman", C4, true]] as const) {
    test(`${label}: decoded fields and the dynamic table after each block`, () => {
      const d = new HpackDecoder();
      [REQ1, REQ2, REQ3].forEach((fields, i) => {
        expect(decode(d, hex(blocks[i]))).toEqual(fields);
        expect(d.tableEntries()).toEqual(REQ_TABLES[i]);
        expect(d.tableSize).toBe(REQ_SIZES[i]);
      });
    });

    test(`${label}: the encoder produces the same bytes and table`, () => {
      const e = new HpackEncoder();
      e.huffman = huffman;
      [REQ1, REQ2, REQ3].forEach((fields, i) => {
        expect(toHex(e.encode(fields))).toBe(blocks[i].replace(/\s+/g, ""));
        expect(e.tableEntries()).toEqual(REQ_TABLES[i]);
        expect(e.tableSize).toBe(REQ_SIZES[i]);
      });
    });
  }
});

const DATE1 = "Mon, 21 Oct 2013 20:13:21 GMT";
const DATE2 = "Mon, 21 Oct 2013 20:13:22 GMT";
const LOC = "https://www.example.com";
const COOKIE = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
const RES1 = [":status", "302", "cache-control", "private", "date", DATE1, "location", LOC];
const RES2 = [":status", "307", "cache-control", "private", "date", DATE1, "location", LOC];
const RES3 = [":status", "200", "cache-control", "private", "date", DATE2, "location", LOC, "content-encoding", "gzip", "set-cookie", COOKIE];
const RES_TABLES: [string, string][][] = [
  [["location", LOC], ["date", DATE1], ["cache-control", "private"], [":status", "302"]],
  [[":status", "307"], ["location", LOC], ["date", DATE1], ["cache-control", "private"]],
  [["set-cookie", COOKIE], ["content-encoding", "gzip"], ["date", DATE2]],
];
const RES_SIZES = [222, 222, 215];
const C5 = [
  "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
  "4803 3330 37c1 c0bf",
  "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31",
];
const C6 = [
  "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
  "4883 640e ffc1 c0bf",
  "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
];

describe("RFC 7541 C.5 / C.6 responses (256-byte table, evictions)", () => {
  for (const [label, blocks] of [["C.5 without Huffman", C5], ["C.6 with Huffman", C6]] as const) {
    test(`${label}: decoded fields and the dynamic table after each block`, () => {
      const d = new HpackDecoder(256);
      [RES1, RES2, RES3].forEach((fields, i) => {
        expect(decode(d, hex(blocks[i]))).toEqual(fields);
        expect(d.tableEntries()).toEqual(RES_TABLES[i]);
        expect(d.tableSize).toBe(RES_SIZES[i]);
      });
    });
  }

  test("the same responses through our encoder (peer table 256) decode back, tables in step", () => {
    const e = new HpackEncoder();
    e.setPeerMaxTableSize(256);
    const d = new HpackDecoder(256);
    for (const fields of [RES1, RES2, RES3, RES1, RES3]) {
      expect(decode(d, e.encode(fields))).toEqual(fields);
      expect(d.tableEntries()).toEqual(e.tableEntries());
      expect(d.tableSize).toBeLessThanOrEqual(256);
    }
  });
});

describe("Huffman code (RFC 7541 Appendix B)", () => {
  test("codes and lengths of sample symbols, from the RFC's table", () => {
    const rfc: [number, number, number][] = [
      [0, 0x1ff8, 13], [1, 0x7fffd8, 23], [9, 0xffffea, 24], [10, 0x3ffffffc, 30], [22, 0x3ffffffe, 30], [32, 0x14, 6],
      [48, 0x0, 5], [97, 0x3, 5], [88, 0xfc, 8], [92, 0x7fff0, 19], [126, 0x1ffd, 13], [127, 0xffffffc, 28],
      [128, 0xfffe6, 20], [192, 0x3ffffe0, 26], [200, 0x3ffffe2, 26], [220, 0xffffffd, 28], [249, 0xffffffe, 28],
      [255, 0x3ffffee, 26], [256, 0x3fffffff, 30],
    ];
    for (const [sym, code, bits] of rfc) expect([sym, HUFFMAN_CODES[sym], HUFFMAN_BITS[sym]]).toEqual([sym, code, bits]);
  });

  test("every octet 0-255 round trips through Huffman strings", () => {
    const e = new HpackEncoder();
    const d = new HpackDecoder();
    for (let c = 0; c < 256; c++) {
      const v = "eeeeeeeeeeeeeeee" + String.fromCharCode(c) + "aaaaaaaaaaaa"; // short codes around it: Huffman wins
      const block = e.encode(["x-octet", v]);
      expect(decode(d, block)).toEqual(["x-octet", v]);
    }
    let all = "";
    for (let c = 0; c < 256; c++) all += String.fromCharCode(c);
    expect(decode(d, e.encode(["x-all", all]))).toEqual(["x-all", all]);
  });

  test("Huffman is used only when shorter", () => {
    const e = new HpackEncoder();
    const long = e.encode(["x-a", "\u0000\u0001\u0002\u0003\u0004\u0005"]); // 13-28 bit codes: raw is shorter
    expect(long[0]).toBe(0x40);
    expect(long[5] & 0x80).toBe(0); // value length octet: raw
    const short = e.encode(["x-b", "aaaaaaaaaa"]);
    expect(short[5] & 0x80).toBe(0x80);
  });
});

describe("round trips of random field lists (shared state across blocks)", () => {
  const NAMES = [":method", ":path", ":authority", ":status", "accept", "user-agent", "content-type", "x-trace", "x-custom-header", "cookie", "authorization", "set-cookie", "date", "content-length", "grpc-status", "x-big"];

  function randomValue(r: () => number): string {
    const kind = r();
    const len = Math.floor(r() * (kind < 0.05 ? 700 : 40));
    let s = "";
    for (let i = 0; i < len; i++) {
      if (kind < 0.6) s += String.fromCharCode(0x61 + Math.floor(r() * 26)); // lower-case letters
      else if (kind < 0.8) s += String.fromCharCode(0x20 + Math.floor(r() * 95)); // printable
      else if (kind < 0.95) s += String.fromCharCode(Math.floor(r() * 256)); // any octet
      else s += String.fromCharCode(0x20 + Math.floor(r() * 0x2000)); // code units > 255: UTF-8
    }
    return s;
  }

  const latin1OfUtf8 = (s: string) => Buffer.from(s, "utf8").toString("latin1");
  const expected = (fields: string[]) => fields.map((f) => (/[^\u0000-\u00ff]/.test(f) ? latin1OfUtf8(f) : f));

  for (const seed of [1, 2, 3, 4]) {
    test(`seed ${seed}: 400 blocks, values reused, peer table size changes`, () => {
      const r = rng(seed);
      const e = new HpackEncoder();
      const d = new HpackDecoder(4096);
      const pool: string[] = [];
      for (let block = 0; block < 400; block++) {
        if (r() < 0.05) {
          const n = [0, 64, 256, 1024, 4096, 8192][Math.floor(r() * 6)];
          e.setPeerMaxTableSize(n);
          if (r() < 0.5) e.setPeerMaxTableSize([0, 100, 4096][Math.floor(r() * 3)]); // twice between blocks
        }
        const fields: string[] = [];
        const count = 1 + Math.floor(r() * 12);
        for (let i = 0; i < count; i++) {
          const name = r() < 0.8 ? NAMES[Math.floor(r() * NAMES.length)] : "x-" + randomValue(r).toLowerCase().replace(/[^a-z]/g, "") + "n";
          let value: string;
          if (pool.length > 0 && r() < 0.5) value = pool[Math.floor(r() * pool.length)];
          else {
            value = randomValue(r);
            if (pool.length < 50) pool.push(value);
          }
          fields.push(name, value);
        }
        const from = r() < 0.2 ? 2 : 0;
        const out = decode(d, e.encode(fields, from));
        expect(out).toEqual(expected(fields.slice(from)));
        expect(d.tableEntries()).toEqual(e.tableEntries().map(([n, v]) => [n, expected([v])[0]]));
        expect(d.tableSize).toBeLessThanOrEqual(d.tableMaxSize);
      }
    });
  }
});

describe("encoder policy", () => {
  test("credentials go out as never-indexed literals and stay out of the table; long cookies are indexed", () => {
    const e = new HpackEncoder();
    const d = new HpackDecoder();
    const longCookie = "session=0123456789abcdef0123456789";
    for (const [name, value] of [["authorization", "Bearer abc"], ["proxy-authorization", "Basic eDp5"], ["set-cookie", "a=b; Path=/"], ["cookie", "a=b"]]) {
      const block = e.encode([name, value]);
      expect(block[0] & 0xf0).toBe(0x10);
      expect(decode(d, block)).toEqual([name, value]);
    }
    expect(e.tableEntries()).toEqual([]);
    expect(d.tableEntries()).toEqual([]);
    expect(e.encode(["cookie", longCookie])[0] & 0xc0).toBe(0x40);
    expect(e.tableEntries()).toEqual([["cookie", longCookie]]);
    expect(toHex(e.encode(["cookie", longCookie]))).toBe("be"); // indexed: 62
  });

  test("per-message values are not indexed; repeated fields become one indexed octet", () => {
    const e = new HpackEncoder();
    e.encode(["content-length", "123", "date", DATE1, "x-app", "v1"]);
    expect(e.tableEntries()).toEqual([["x-app", "v1"]]);
    expect(toHex(e.encode(["x-app", "v1", ":status", "200"]))).toBe("be88");
  });

  test("a name received as a never-indexed literal is never indexed when forwarded (RFC 7541 7.1.3)", () => {
    const d = new HpackDecoder();
    expect(learnedNeverIndexedNames()).not.toContain("x-api-key");
    const e = new HpackEncoder();
    e.huffman = false;
    expect(e.encode(["x-api-key", "k1"])[0]).toBe(0x40); // indexed before
    decode(d, hex("10 09 782d6170692d6b6579 02 6b32")); // x-api-key: k2, never indexed
    decode(d, hex("1f 02 02 6b32")); // accept-language (static 17): k2, never indexed
    decode(d, hex("1f 11 03 613d62")); // cookie (static 32) a=b: short, never indexed as our own policy does
    expect(learnedNeverIndexedNames()).toContain("x-api-key");
    expect(learnedNeverIndexedNames()).toContain("accept-language");
    expect(learnedNeverIndexedNames()).not.toContain("cookie");
    const e2 = new HpackEncoder();
    e2.huffman = false;
    expect(toHex(e2.encode(["x-api-key", "k3"]))).toBe("1009782d6170692d6b6579026b33");
    expect(toHex(e2.encode(["x-api-key", "k3"]))).toBe("1009782d6170692d6b6579026b33");
    expect(toHex(e2.encode(["accept-language", "fr"]))).toBe("1f02026672");
    expect(e2.encode(["cookie", "session=0123456789abcdef0123456789"])[0] & 0xc0).toBe(0x40); // long cookies: indexed
    expect(e2.tableEntries().map(([n]) => n)).toEqual(["cookie"]);
    expect(toHex(e.encode(["x-api-key", "k1"]))).toBe("be"); // an entry made before stays usable
  });

  test(":path is indexed on second sight: unique paths stay out of the table, repeated ones get indexed", () => {
    const e = new HpackEncoder();
    e.huffman = false;
    expect(toHex(e.encode([":path", "/a"]))).toBe("04022f61"); // literal without indexing, name index 4
    expect(e.tableEntries()).toEqual([]);
    expect(toHex(e.encode([":path", "/b"]))).toBe("04022f62");
    expect(toHex(e.encode([":path", "/a"]))).toBe("44022f61"); // seen before: incremental indexing
    expect(toHex(e.encode([":path", "/a"]))).toBe("be");
    expect(e.tableEntries()).toEqual([[":path", "/a"]]);
    for (let i = 0; i < 100; i++) e.encode([":path", `/u${i}`]); // more than it remembers: it forgets, no growth
    expect(toHex(e.encode([":path", "/b"]))).toBe("04022f62");
  });

  test("the scratch buffer grows for big blocks (view and copy)", () => {
    const e = new HpackEncoder();
    const d = new HpackDecoder();
    const big = ["x-big", "z".repeat(5000), "x-big2", "\u00ff".repeat(3000)];
    expect(decode(d, e.encodeView(big))).toEqual(big);
    expect(decode(d, e.encode([...big].reverse()))).toEqual([...big].reverse());
  });

  test("a value with code units above 255 is sent as UTF-8", () => {
    const e = new HpackEncoder();
    e.huffman = false;
    const block = e.encode(["x-name", "h\u00e9\u20ac"]);
    expect(toHex(block.subarray(block.length - 7))).toBe("06" + Buffer.from("h\u00e9\u20ac", "utf8").toString("hex"));
  });

  test("peer table size: shrink emits an update at the next block (smallest first), growth stops at 4096", () => {
    const e = new HpackEncoder();
    const d = new HpackDecoder();
    decode(d, e.encode(["x-a", "1", "x-b", "2"]));
    e.setPeerMaxTableSize(8192);
    expect(e.encode(["x-a", "1"])[0]).toBe(0xbf); // no update: we keep 4096; x-a: 1 is index 63
    e.setPeerMaxTableSize(0);
    const b0 = e.encode([":method", "GET"]);
    expect(toHex(b0)).toBe("2082");
    expect(decode(d, hex("bf"))).toEqual(["x-a", "1"]); // (the previous block, delivered late for the check)
    decode(d, b0);
    expect(d.tableEntries()).toEqual([]);
    expect(e.tableEntries()).toEqual([]);
    e.setPeerMaxTableSize(100);
    e.setPeerMaxTableSize(50);
    e.setPeerMaxTableSize(4096);
    const b1 = e.encode(["x-c", "3"]);
    expect(toHex(b1.subarray(0, 3))).toBe("3f133f"); // 50, then 4096 (3f e1 1f)
    expect(decode(d, b1)).toEqual(["x-c", "3"]);
    expect(d.tableMaxSize).toBe(4096);
    expect(d.tableEntries()).toEqual(e.tableEntries());
  });

  test("encode returns a copy; encodeView a view valid until the next call; from/to select pairs", () => {
    const e = new HpackEncoder();
    const a = e.encode([":method", "GET"]);
    const v = e.encodeView([":method", "POST"]);
    expect(toHex(v)).toBe("83");
    e.encode([":status", "200"]);
    expect(toHex(a)).toBe("82");
    expect(toHex(v)).toBe("88");
    expect(toHex(e.encode([":method", "GET", ":status", "204", ":status", "304"], 2, 4))).toBe("89");
  });
});

describe("decoder: limits and table size updates", () => {
  test("HeaderListTooLarge: the block is decoded to the end (table in sync), nothing appended, the next block decodes", () => {
    const e = new HpackEncoder();
    const d = new HpackDecoder();
    const big = ["x-one", "a".repeat(100), "x-two", "b".repeat(100)];
    const out = ["kept", "pair"];
    expect(() => d.decode(e.encode(big), 200, out)).toThrow(HeaderListTooLarge);
    expect(out).toEqual(["kept", "pair"]);
    expect(d.tableEntries()).toEqual(e.tableEntries());
    expect(d.tableEntries().length).toBe(2);
    expect(decode(d, e.encode(big), 300)).toEqual(big); // 2 x (5 + 100 + 32) = 274: fits, from indexed entries
    expect(decode(d, e.encode([":method", "GET"]), 42)).toEqual([":method", "GET"]); // exactly at the limit
    expect(() => decode(d, e.encode([":method", "GET"]), 41)).toThrow(HeaderListTooLarge);
  });

  test("size updates: several at the start are fine, shrinking evicts, an entry larger than the table empties it", () => {
    const d = new HpackDecoder();
    decode(d, hex(C3[0]));
    decode(d, hex(C3[1]));
    expect(decode(d, hex("3f11 3f e11f 82"))).toEqual([":method", "GET"]); // 48, then 4096
    expect(d.tableEntries()).toEqual([]);
    decode(d, hex(C3[0]));
    expect(d.tableSize).toBe(57);
    expect(decode(d, hex("3f1b 82"))).toEqual([":method", "GET"]); // 58: the entry (57) stays
    expect(d.tableEntries()).toEqual([[":authority", "www.example.com"]]);
    decode(d, hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572")); // 55 + 57 > 58: evicts
    expect(d.tableEntries()).toEqual([["custom-key", "custom-header"]]);
    decode(d, hex("3f03")); // 34
    expect(d.tableEntries()).toEqual([]);
    decode(d, hex("4003 6162 63 00")); // "abc": "" is 35 > 34: not added, table empty
    expect(d.tableEntries()).toEqual([]);
  });

  test("a table above 4096 when our setting allows it", () => {
    const d = new HpackDecoder(65536);
    const e = new HpackEncoder();
    expect(decode(d, hex("3fe1ff03"))).toEqual([]); // 65536
    expect(d.tableMaxSize).toBe(65536);
    for (let i = 0; i < 300; i++) decode(d, e.encode(["x-k" + i, "v".repeat(100)]));
    expect(d.tableEntries().length).toBe(300);
    expect(d.tableEntries()[299]).toEqual(["x-k0", "v".repeat(100)]);
  });
});

describe("decoder: malformed blocks are HpackError", () => {
  const cases: [string, string][] = [
    ["truncated integer", "ff"],
    ["truncated integer continuation", "ff 80"],
    ["integer overflow", "ff ffffffff0f"],
    ["index 0", "80"],
    ["index out of range (empty dynamic table)", "be"],
    ["index beyond the static table far", "ff 8001"],
    ["name index out of range", "7e 0161"],
    ["never-indexed name index out of range", "1f 2f 0161"],
    ["string longer than the block", "40 05 6162"],
    ["literal without its value", "40 0161"],
    ["Huffman padding not all ones", "0003 6162 63 81 18"],
    ["Huffman padding longer than 7 bits", "0003 6162 63 82 1fff"],
    ["EOS in a Huffman string", "0003 6162 63 84 ffffffff"],
    ["size update after a field", "82 20"],
    ["size update above our maximum", "3f e21f"],
  ];
  for (const [label, bytes] of cases) {
    test(label, () => {
      expect(() => decode(new HpackDecoder(), hex(bytes))).toThrow(HpackError);
    });
  }

  test("blocks that are views into a larger read (byteOffset > 0) and Buffers decode the same", () => {
    for (const huffman of [false, true]) {
      const e = new HpackEncoder();
      e.huffman = huffman;
      const fields = ["x-abc", "hello there", "x-def", "w\u00f6rld \u00ff\u0080"];
      const block = e.encode(fields);
      const read = new Uint8Array(block.length + 80).fill(0x41);
      read.set(block, 37);
      expect(decode(new HpackDecoder(), read.subarray(37, 37 + block.length))).toEqual(fields);
      expect(decode(new HpackDecoder(), Buffer.from(block))).toEqual(fields);
    }
  });

  test("the well-formed neighbours of those cases decode", () => {
    expect(decode(new HpackDecoder(), hex("0003 6162 63 81 1f"))).toEqual(["abc", "a"]); // 'a' + 3 ones
    expect(decode(new HpackDecoder(), hex("0003 6162 63 80"))).toEqual(["abc", ""]);
    expect(decode(new HpackDecoder(), hex("3f e11f 82"))).toEqual([":method", "GET"]); // 4096: allowed
    expect(decode(new HpackDecoder(), hex(""))).toEqual([]);
  });
});

describe("interop with Bun's node:http2 (an independent HPACK implementation)", () => {
  const frame = (type: number, flags: number, stream: number, payload: Uint8Array) => {
    const h = Buffer.alloc(9);
    h.writeUIntBE(payload.length, 0, 3);
    h[3] = type;
    h[4] = flags;
    h.writeUInt32BE(stream, 5);
    return Buffer.concat([h, payload]);
  };
  const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

  // every printable octet, each after three short codes, so that the encoders pick Huffman for them
  const headers: Record<string, string> = { "user-agent": "tapwire-interop/1.0" };
  for (let c = 0x21; c < 0x7f; c++) headers[`x-c${c >> 4}`] = (headers[`x-c${c >> 4}`] ?? "a a") + "aea" + String.fromCharCode(c);

  test("we decode the HEADERS blocks of two requests from node:http2's client (Huffman, dynamic table)", async () => {
    const blocks: Uint8Array[] = [];
    let done!: () => void;
    const twoBlocks = new Promise<void>((r) => (done = r));
    const server = createServer((sock) => {
      let buf = Buffer.alloc(0);
      let p = PREFACE.length;
      sock.on("data", (d: Buffer) => {
        buf = Buffer.concat([buf, d]);
        while (p + 9 <= buf.length && p + 9 + buf.readUIntBE(p, 3) <= buf.length) {
          const len = buf.readUIntBE(p, 3);
          if (buf[p + 3] === 1) {
            expect(buf[p + 4] & 0x28).toBe(0); // no padding, no priority: the payload is the block
            expect(buf[p + 4] & 0x04).toBe(0x04); // END_HEADERS
            blocks.push(buf.subarray(p + 9, p + 9 + len));
            if (blocks.length === 2) done();
          }
          p += 9 + len;
        }
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as { port: number }).port;
    const client = http2.connect(`http://127.0.0.1:${port}`);
    client.on("error", () => {});
    for (const path of ["/first", "/second?q=1"]) client.request({ ":path": path, ...headers }).on("error", () => {});
    await twoBlocks;
    client.destroy();
    server.close();
    const d = new HpackDecoder();
    const rawLength = Object.entries(headers).reduce((n, [k, v]) => n + k.length + v.length, 0);
    expect(blocks[0].length).toBeLessThan(rawLength); // Huffman (and nothing indexed yet) made it shorter
    expect(blocks[1].length).toBeLessThan(blocks[0].length / 4); // the second mostly refers to the dynamic table
    for (const [i, block] of blocks.entries()) {
      const out = decode(d, block);
      const got = new Map<string, string>();
      for (let k = 0; k < out.length; k += 2) got.set(out[k], out[k + 1]);
      expect(got.get(":path")).toBe(i === 0 ? "/first" : "/second?q=1");
      for (const [k, v] of Object.entries(headers)) expect([k, got.get(k)]).toEqual([k, v]);
    }
  });

  test("node:http2's server decodes two requests from our encoder (Huffman, dynamic table, never-indexed, latin1)", async () => {
    const server = http2.createServer();
    const got: Record<string, string | string[] | undefined>[] = [];
    let done!: () => void;
    const two = new Promise<void>((r) => (done = r));
    server.on("stream", (stream: http2.ServerHttp2Stream, h: http2.IncomingHttpHeaders) => {
      got.push({ ...h });
      stream.respond({ ":status": 204 });
      stream.end();
      if (got.length === 2) done();
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as { port: number }).port;
    const fields = [":method", "GET", ":scheme", "http", ":authority", "127.0.0.1", ":path", "/x?y=z", "authorization", "Bearer abc",
      "x-latin1", "h\u00e9llo w\u00f6rld \u00ff"];
    for (const [k, v] of Object.entries(headers)) fields.push(k, v);
    const e = new HpackEncoder();
    const b1 = e.encode(fields);
    const b2 = e.encode(fields);
    expect(b2.length).toBeLessThan(b1.length / 4);
    const sock = connect(port, "127.0.0.1");
    sock.on("data", () => {});
    sock.on("error", () => {});
    sock.write(Buffer.concat([PREFACE, frame(4, 0, 0, new Uint8Array(0)), frame(1, 5, 1, b1), frame(1, 5, 3, b2)]));
    await two;
    sock.destroy();
    server.close();
    for (const h of got) for (let i = 0; i < fields.length; i += 2) expect([fields[i], h[fields[i]]]).toEqual([fields[i], fields[i + 1]]);
  });
});

describe("decoder: random and mutated input", () => {
  test("random bytes and bit-flipped valid blocks decode or throw HpackError / HeaderListTooLarge, nothing else", () => {
    const r = rng(7);
    const e = new HpackEncoder();
    const valid = [REQ1, REQ3, RES1, RES3, ["x-fuzz", "b".repeat(300), "cookie", "k=v"]].map((f) => e.encode(f));
    const kinds = { ok: 0, hpack: 0, tooLarge: 0 };
    for (let i = 0; i < 5000; i++) {
      let block: Uint8Array;
      if (i % 2 === 0) {
        block = new Uint8Array(Math.floor(r() * 40));
        for (let k = 0; k < block.length; k++) block[k] = Math.floor(r() * 256);
      } else {
        block = valid[i % valid.length].slice();
        for (let k = 0; k < 1 + Math.floor(r() * 3); k++) block[Math.floor(r() * block.length)] ^= 1 << Math.floor(r() * 8);
      }
      const d = new HpackDecoder(r() < 0.5 ? 4096 : 256);
      const out: string[] = [];
      try {
        d.decode(block, 200, out);
        kinds.ok++;
        expect(out.length % 2).toBe(0);
        for (const s of out) expect(typeof s).toBe("string");
      } catch (err) {
        if (err instanceof HeaderListTooLarge) kinds.tooLarge++;
        else if (err instanceof HpackError) kinds.hpack++;
        else throw err;
      }
      expect(d.tableSize).toBeLessThanOrEqual(d.tableMaxSize);
    }
    expect(kinds.ok).toBeGreaterThan(100); // the inputs reach every outcome
    expect(kinds.hpack).toBeGreaterThan(100);
    expect(kinds.tooLarge).toBeGreaterThan(10);
  });
});
