/**
 * Header lists kept packed in the store (src/store/header-pack.ts, schema 4): every list comes back exactly as it
 * was captured (order, case, repeated names, any characters), a damaged blob reads as an empty list and never
 * throws out of a read, and rows that earlier versions wrote as JSON text are still read.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { packHeaders, storedHeaders, unpackHeaders } from "../../src/store/header-pack.ts";
import { CaptureStore } from "../../src/store/capture-store.ts";
import type { HeaderList, NewEntry } from "../../src/store/types.ts";
import { tempDir } from "../helpers/tapwire-process.ts";

const LISTS: [string, HeaderList][] = [
  ["empty", []],
  ["known names, lower and capitalised", [["content-type", "a/b"], ["Content-Type", "c/d"], ["Host", "h"], ["host", "h2"], ["Sec-Ch-Ua", "x"]]],
  ["other spellings of known names are kept", [["CONTENT-TYPE", "x"], ["content-Type", "y"], ["WWW-Authenticate", "Basic"], ["ETag", '"1"']]],
  ["unknown names, repeated, in order", [["X-Custom-CASE", "a"], ["x-custom-case", "b"], ["X-Custom-CASE", "c"], ["Set-Cookie", "a=1"], ["Set-Cookie", "b=2"]]],
  ["empty names and values", [["", ""], ["X", ""], ["", "v"]]],
  ["latin-1 bytes off the wire, and beyond", [["X-L1", "caf\u00e9 \u00ff\u0080"], ["X-Uni", "\u20ac \u{1F600} \u4e2d"], ["X-\u00e9", "v"]]],
  ["lengths at the varint boundaries", [["X-127", "a".repeat(127)], ["X-128", "b".repeat(128)], ["X-16383", "c".repeat(16383)], ["X-16384", "d".repeat(16384)], ["e".repeat(300), "\u00e9".repeat(200)]]],
  ["coded values (V2) and near misses written out", [
    ["Date", "Thu, 26 Nov 2026 04:00:00 GMT"], ["Expires", "Thu, 01 Jan 1970 00:00:00 GMT"], ["X-Date", "Mon, 26 Nov 2026 04:00:00 GMT"],
    ["Last-Modified", "Thu, 26 Nov 2026 04:00:00 UTC"], ["Date", "thu, 26 Nov 2026 04:00:00 GMT"], ["Date", "Thu, 26 Nov 2026 04:00:60 GMT"],
    ["Content-Length", "0"], ["Content-Length", "999999999"], ["Content-Length", "1000000000"], ["Content-Length", "007"],
    ["Content-Length", "-1"], ["Content-Length", "1e3"], ["Content-Length", " 12"], ["Age", "4294967295"],
    ["Content-Type", "application/json"], ["Content-Type", "Application/json"], ["X-Unknown", "gzip"], ["Accept", "*/*"],
  ]],
  ["a list bigger than the scratch buffer", Array.from({ length: 40 }, (_, i): [string, string] => [`X-${i}`, "v".repeat(1000 + i)])],
];

describe("packHeaders / unpackHeaders", () => {
  for (const [name, list] of LISTS) {
    test(`round trip: ${name}`, () => {
      const packed = packHeaders(list);
      expect(packed).toBeInstanceOf(Uint8Array);
      expect(unpackHeaders(packed as Uint8Array)).toEqual(list);
      expect(storedHeaders(packed)).toEqual(list);
    });
  }

  test("known names take one byte: smaller than JSON", () => {
    const list: HeaderList = [["X-Type", "application/x-thing"], ["X-Length", "12 bytes"]];
    const packed = packHeaders(list) as Uint8Array;
    // 1 version byte, per header a code byte (0: the name follows), the name and the value with their lengths
    expect(packed.length).toBe(1 + list.reduce((n, [k, v]) => n + 3 + k.length + v.length, 0));
    const known: HeaderList = [["Content-Type", "application/x-thing"], ["Content-Length", "12 bytes"]];
    expect((packHeaders(known) as Uint8Array).length).toBe(1 + known.reduce((n, [, v]) => n + 2 + v.length, 0));
  });

  test("frequent values, dates and integers are coded (V2): a code byte, a value code, its argument", () => {
    const list: HeaderList = [["Content-Type", "application/json"], ["Content-Length", "12345"], ["Cache-Control", "no-cache"], ["Date", "Thu, 26 Nov 2026 04:00:00 GMT"]];
    const packed = packHeaders(list) as Uint8Array;
    // version; type 2; length 1 + varint(12345) 2 + 1; cache-control 2; date 1 + 1 + varint(seconds) 5
    expect(packed.length).toBe(1 + 2 + 4 + 2 + 7);
    expect(packed.length).toBeLessThan(JSON.stringify(list).length / 5);
    expect(unpackHeaders(packed)).toEqual(list);
  });

  test("a value that is the entry's host is coded; read back with the host, [] without it", () => {
    const list: HeaderList = [["Host", "Api.Example.com"], ["X-Forwarded-Host", "Api.Example.com"], ["X-Other", "api.example.com"]];
    const packed = packHeaders(list, "Api.Example.com") as Uint8Array;
    // version; Host 2; X-Forwarded-Host (name written out) 1 + 1 + 16 + 1; X-Other written out
    expect(packed.length).toBe(1 + 2 + 19 + (1 + 1 + 7 + 1 + 15));
    expect(unpackHeaders(packed, "Api.Example.com")).toEqual(list);
    expect(storedHeaders(packed, "Api.Example.com")).toEqual(list);
    expect(() => unpackHeaders(packed)).toThrow();
    expect(storedHeaders(packed)).toEqual([]);
    // an empty host is never coded
    expect(unpackHeaders(packHeaders([["Host", ""]], "") as Uint8Array)).toEqual([["Host", ""]]);
  });

  test("lists packed by schema 4 (V1: every value written out) still read", () => {
    // V1: version 1, then code 17 + 2*... : Content-Type (capitalised) is 2 + 2*16 = 34, Date 2 + 2*18 = 38
    const v1 = Uint8Array.of(1, 34, 3, 0x61, 0x2f, 0x62, 38, 1, 0x78);
    expect(unpackHeaders(v1)).toEqual([["Content-Type", "a/b"], ["Date", "x"]]);
  });

  test("a lone surrogate keeps the list as JSON text, exactly", () => {
    const list: HeaderList = [["X-Odd", "a\ud800b"], ["Host", "h"]];
    const stored = packHeaders(list);
    expect(typeof stored).toBe("string");
    expect(storedHeaders(stored)).toEqual(list);
  });

  test("damaged blobs throw in unpackHeaders and read as [] in storedHeaders", () => {
    const good = packHeaders([["Content-Type", "text/plain"], ["X-Long", "z".repeat(300)]]) as Uint8Array;
    const damaged = [
      new Uint8Array(0),
      Uint8Array.of(9, 1, 0), // unknown version
      good.subarray(0, good.length - 1), // cut short
      Uint8Array.of(1, 127, 0), // unknown name code
      Uint8Array.of(1, 0), // literal name without its length
      Uint8Array.of(1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), // a length that never ends
      Uint8Array.of(1, 1, 0xff, 0xff, 0xff, 0x07), // a length far beyond the blob
      Uint8Array.of(1, 0x81, 2), // a coded value in a V1 list
      Uint8Array.of(2, 0x81, 127), // unknown value code
      Uint8Array.of(2, 0x81, 0), // a date without its seconds
      Uint8Array.of(2, 0x81, 1, 0x80), // an integer cut short
      Uint8Array.of(2, 0x80), // literal name without its length, coded value
    ];
    for (const d of damaged) {
      expect(() => unpackHeaders(d)).toThrow();
      expect(storedHeaders(d)).toEqual([]);
    }
    expect(storedHeaders("not json")).toEqual([]);
    expect(storedHeaders('{"a":1}')).toEqual([]);
    expect(storedHeaders(null)).toEqual([]);
  });
});

describe("in the store", () => {
  const open: CaptureStore[] = [];
  afterEach(async () => {
    for (const s of open.splice(0)) await s.close();
  });

  const entry = (req: HeaderList, res: HeaderList): NewEntry => ({
    method: "GET",
    url: "https://h.example/x",
    host: "h.example",
    status_code: 200,
    content_type: "text/plain",
    duration_ms: 1,
    timestamp: 1_700_000_000_000,
    client_addr: "curl",
    has_response: true,
    req_headers: req,
    res_headers: res,
    req_body: null,
    req_body_size: 0,
    res_body: null,
    res_body_size: 0,
  });

  test("lists are stored packed and read back exactly; rows written as JSON text by earlier versions still read", async () => {
    const path = join(tempDir(), "h.db");
    const s = await CaptureStore.open(path);
    open.push(s);
    const ids = LISTS.map(([, list], i) => s.add(entry(list, LISTS[(i + 1) % LISTS.length]![1])));
    await s.flush();
    for (let i = 0; i < LISTS.length; i++) {
      const d = (await s.get(ids[i]!))!;
      expect({ i, req: d.req_headers }).toEqual({ i, req: LISTS[i]![1] });
      expect({ i, res: d.res_headers }).toEqual({ i, res: LISTS[(i + 1) % LISTS.length]![1] });
    }
    const legacyId = s.add(entry([["Host", "legacy"]], []));
    await s.close();
    open.pop();
    // as schema 3 wrote them: JSON text
    const db = new Database(path);
    try {
      expect(db.query("SELECT typeof(req_headers) AS t FROM details WHERE id = ?").get(ids[1]!)).toEqual({ t: "blob" });
      db.query("UPDATE details SET req_headers = ?, res_headers = ? WHERE id = ?").run(JSON.stringify([["X-Old", "json"], ["Host", "legacy"]]), "[]", legacyId);
    } finally {
      db.close();
    }
    const s2 = await CaptureStore.open(path);
    open.push(s2);
    const d = (await s2.get(legacyId))!;
    expect(d.req_headers).toEqual([["X-Old", "json"], ["Host", "legacy"]]);
    expect(d.res_headers).toEqual([]);
    expect((await s2.get(ids[3]!))!.req_headers).toEqual(LISTS[3]![1]);
    // exports read them the same way
    const all: HeaderList[] = [];
    for await (const e of s2.details({})) all.push(e.req_headers);
    expect(all).toEqual([...LISTS.map(([, l]) => l), [["X-Old", "json"], ["Host", "legacy"]]]);
  });
});
