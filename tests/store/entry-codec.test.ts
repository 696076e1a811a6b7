/**
 * The binary form of captured entries (src/store/entry-codec.ts): what the proxy's thread encodes at add() comes
 * back field for field in the writer, strings exactly (latin1, wide characters, lone surrogates), bodies byte for
 * byte; refused entries are left out alone; damaged records are counted, not thrown.
 */
import { describe, expect, test } from "bun:test";
import { BatchBuilder, type BuiltBatch, batchBytes, decodeBatch } from "../../src/store/entry-codec.ts";
import type { NewEntry } from "../../src/store/types.ts";

const enc = new TextEncoder();

function entry(over: Partial<NewEntry> = {}): NewEntry {
  return {
    method: "GET",
    url: "http://codec.example:8080/path?q=1",
    host: "codec.example",
    status_code: 200,
    content_type: "text/plain; charset=utf-8",
    duration_ms: 7,
    timestamp: 1_763_800_000_123,
    client_addr: "curl",
    has_response: true,
    req_headers: [["Host", "codec.example:8080"], ["User-Agent", "curl/8"], ["X-Empty", ""]],
    res_headers: [["Content-Type", "text/plain; charset=utf-8"], ["content-length", "5"]],
    req_body: null,
    req_body_size: 0,
    res_body: enc.encode("hello"),
    res_body_size: 5,
    ...over,
  };
}

function roundTrip(entries: NewEntry[], firstId = 1, ringBytes = 1024 * 1024) {
  const b = new BatchBuilder(new SharedArrayBuffer(ringBytes));
  const ok = entries.map((e, i) => b.add(firstId + i, e));
  const built = b.take();
  const decoded = built ? decodeBatch(batchBytes(b.ring, built)) : null;
  return { ok, built, decoded, bytes: built ? batchBytes(b.ring, built) : null };
}

const urlsOf = (b: BatchBuilder, built: BuiltBatch) => decodeBatch(batchBytes(b.ring, built)).rows.map((r) => r[2]);

describe("entry codec", () => {
  test("every field comes back", () => {
    const { built, decoded } = roundTrip([entry({ error: "upstream refused", extra: { map_local_rule: "r1", n: 2 }, reason: "OK" })], 41);
    expect([built!.count, built!.first, built!.last, built!.failed]).toEqual([1, 41, 41, 0]);
    const [row] = decoded!.rows;
    expect(row).toEqual([
      41, "GET", "http://codec.example:8080/path?q=1", "codec.example", 200, "text/plain; charset=utf-8", 7, 1_763_800_000_123,
      "curl", true, "upstream refused",
      [["Host", "codec.example:8080"], ["User-Agent", "curl/8"], ["X-Empty", ""]],
      [["Content-Type", "text/plain; charset=utf-8"], ["content-length", "5"]],
      -1, 0, 5, 5,
      { map_local_rule: "r1", n: 2, reason: "OK" },
    ]);
    expect(decoded!.reqBodies).toEqual([null]);
    expect(new TextDecoder().decode(decoded!.resBodies[0]!)).toBe("hello");
  });

  test("strings survive exactly: latin1 bytes, wide characters, lone surrogates, empty and null", () => {
    const latin1 = "caf\u00e9 \u00ff\u0080";
    const wide = "\u65e5\u672c \u{1f600} x";
    const lone = "a\ud800b\udfff";
    const { decoded } = roundTrip([
      entry({ url: `http://x.example/${wide}`, client_addr: lone, content_type: "", req_headers: [["X-L", latin1], ["X-W", wide], ["X-S", lone]], error: undefined }),
    ]);
    const row = decoded!.rows[0]!;
    expect(row[2]).toBe(`http://x.example/${wide}`);
    expect(row[8]).toBe(lone);
    expect(row[5]).toBe("");
    expect(row[10]).toBeNull();
    expect(row[17]).toBeNull();
    expect(row[11]).toEqual([["X-L", latin1], ["X-W", wide], ["X-S", lone]]);
  });

  test("long strings (written UTF-8 by native code) come back too; a lone surrogate in one becomes U+FFFD", () => {
    const cookie = "session=" + "caf\u00e9-".repeat(600);
    const wideLong = "\u65e5\u672c".repeat(40) + "\u{1f600}";
    const loneLong = "x".repeat(60) + "\ud800" + "y";
    const { decoded } = roundTrip([entry({ url: `http://long.example/${"p".repeat(3000)}`, req_headers: [["Cookie", cookie], ["X-W", wideLong], ["X-S", loneLong]] })]);
    const row = decoded!.rows[0]!;
    expect(row[2]).toBe(`http://long.example/${"p".repeat(3000)}`);
    expect(row[11]).toEqual([["Cookie", cookie], ["X-W", wideLong], ["X-S", "x".repeat(60) + "\ufffd" + "y"]]);
  });

  test("bodies come back byte for byte, one larger than the ring gets a buffer of its own; any typed array is accepted", () => {
    const big = new Uint8Array(300_000);
    for (let i = 0; i < big.length; i++) big[i] = (i * 7) & 0xff;
    const view = new DataView(big.buffer, 10, 20);
    const { decoded, built } = roundTrip([entry({ req_body: big, req_body_size: 1_000_000 }), entry({ res_body: view as unknown as Uint8Array })], 1, 64 * 1024);
    expect(built!.data).toBeInstanceOf(ArrayBuffer);
    expect(built!.length).toBeGreaterThan(300_000);
    expect(Buffer.compare(Buffer.from(decoded!.reqBodies[0]!), Buffer.from(big))).toBe(0);
    expect(decoded!.rows[0]![14]).toBe(1_000_000);
    expect([...decoded!.resBodies[1]!]).toEqual([...big.subarray(10, 30)]);
  });

  test("an entry that cannot be encoded is left out alone, with the reason; extras JSON cannot hold are dropped", () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const { ok, built, decoded } = roundTrip([
      entry({ url: "http://a/" }),
      entry({ res_body: "text" as unknown as Uint8Array }),
      entry({ url: "http://c/", extra: cyclic }),
      entry({ timestamp: "soon" as unknown as number }),
      entry({ url: "http://e/", extra: { big: 1n } as unknown as Record<string, unknown>, reason: "Fine" }),
      entry({ host: 42 as unknown as string }),
    ]);
    expect(ok).toEqual([true, false, true, false, true, false]);
    expect([built!.count, built!.failed, built!.first, built!.last]).toEqual([3, 3, 1, 5]);
    expect(built!.error).toBe("body is not a byte array");
    expect(decoded!.rows.map((r) => [r[0], r[2], r[17]])).toEqual([
      [1, "http://a/", null],
      [3, "http://c/", null],
      [5, "http://e/", { reason: "Fine" }],
    ]);
  });

  test("null header lists and fields are kept as null (the writer decides what they mean)", () => {
    const { decoded } = roundTrip([entry({ method: null as unknown as string, req_headers: null as unknown as [], res_headers: undefined as unknown as [] })]);
    const row = decoded!.rows[0]!;
    expect(row[1]).toBeNull();
    expect(row[11]).toBeNull();
    expect(row[12]).toBeNull();
  });

  test("take() hands the batch over as a run of the ring and starts the next one after it; nothing added gives null", () => {
    const b = new BatchBuilder(new SharedArrayBuffer(64 * 1024));
    expect(b.take()).toBeNull();
    b.add(1, entry());
    const first = b.take()!;
    b.add(2, entry({ url: "http://second/" }));
    const second = b.take()!;
    expect([first.data, second.data]).toEqual([undefined, undefined]);
    expect([first.start, second.start]).toEqual([0, first.length]);
    expect(b.held).toBe(2);
    expect(urlsOf(b, first)).toEqual(["http://codec.example:8080/path?q=1"]);
    expect(decodeBatch(batchBytes(b.ring, second)).rows.map((r) => r[0])).toEqual([2]);
    // every entry refused: still a batch, so that its error reaches the caller; it holds nothing of the ring
    b.add(3, entry({ req_body: 5 as unknown as Uint8Array }));
    const refused = b.take()!;
    expect([refused.count, refused.failed, refused.length, refused.data?.byteLength]).toEqual([0, 1, 0, 0]);
    expect(b.held).toBe(2);
    // once the reader is done with everything, writing starts over at the ring's start
    b.release();
    b.release();
    b.add(4, entry());
    expect(b.take()!.start).toBe(0);
  });

  test("the ring: a batch that reaches the end is handed over early, the next wraps round; no run in use is overwritten", () => {
    const ring = new SharedArrayBuffer(4096);
    const b = new BatchBuilder(ring);
    const posted: BuiltBatch[] = [];
    const seen: string[][] = [];
    b.onFull = () => {
      const x = b.take()!;
      posted.push(x);
      seen.push(urlsOf(b, x)); // read at once, as the writer would before answering
    };
    const e = (n: number) => entry({ url: `http://ring/${n}` });
    let n = 0;
    // fill most of the ring in batches of 3, the reader answering none of them
    while (posted.length < 2) {
      for (let i = 0; i < 3; i++) expect(b.add(++n, e(n))).toBe(true);
      const x = b.take()!;
      posted.push(x);
      seen.push(urlsOf(b, x));
    }
    // each batch is a run of the ring, none overlapping
    const runs = posted.filter((p) => !p.data).map((p) => [p.start, p.start + p.length]);
    for (let i = 1; i < runs.length; i++) expect(runs[i]![0]).toBeGreaterThanOrEqual(runs[i - 1]![1]);
    // with nothing released the ring fills: the rest go to buffers of their own, and nothing already handed over changes
    const before = posted.map((p) => Buffer.from(batchBytes(ring, p)));
    for (let i = 0; i < 12; i++) expect(b.add(++n, e(n))).toBe(true);
    posted.push(b.take()!);
    seen.push(urlsOf(b, posted.at(-1)!));
    before.forEach((bytes, i) => expect(Buffer.compare(bytes, Buffer.from(batchBytes(ring, posted[i]!)))).toBe(0));
    expect(posted.some((p) => p.data !== undefined)).toBe(true);
    // every entry is in exactly one batch, in order
    expect(seen.flat()).toEqual(Array.from({ length: n }, (_, i) => `http://ring/${i + 1}`));
    // the reader answers the oldest batches: the space at the ring's start is used again, after a wrap round
    const inRing = posted.filter((p) => !p.data).length;
    for (let i = 0; i < inRing; i++) b.release();
    b.add(++n, e(n));
    const again = b.take()!;
    expect([again.data, again.start]).toEqual([undefined, 0]);
    expect(urlsOf(b, again)).toEqual([`http://ring/${n}`]);
  });

  test("the ring wraps round before the oldest run in use, and stops short of it", () => {
    const ring = new SharedArrayBuffer(4096);
    const b = new BatchBuilder(ring);
    const size = (() => {
      const probe = new BatchBuilder(new SharedArrayBuffer(4096));
      probe.add(1, entry({ url: "http://w/001" }));
      return probe.take()!.length;
    })();
    const fit = Math.floor(4096 / size);
    const batches: BuiltBatch[] = [];
    for (let i = 1; i <= fit; i++) {
      b.add(i, entry({ url: `http://w/${String(i).padStart(3, "0")}` }));
      batches.push(b.take()!);
    }
    expect(batches.every((x) => !x.data)).toBe(true);
    // the two oldest are done with: the next batch wraps round to 0, and the one after it has room for one more
    b.release();
    b.release();
    const pinned = Buffer.from(batchBytes(ring, batches[2]!));
    const more: BuiltBatch[] = [];
    for (let i = fit + 1; i <= fit + 3; i++) {
      b.add(i, entry({ url: `http://w/${String(i).padStart(3, "0")}` }));
      more.push(b.take()!);
    }
    expect(more.map((x) => (x.data ? "own" : x.start))).toEqual([0, size, "own"]);
    expect(Buffer.compare(pinned, Buffer.from(batchBytes(ring, batches[2]!)))).toBe(0);
    // discard() drops what was added since the last take: nothing of it is handed over
    b.add(99, entry());
    b.discard();
    expect(b.take()).toBeNull();
  });

  test("header blocks as received are kept as bytes and come back as the lists they were parsed into", () => {
    const wire = (s: string) => new Uint8Array(Buffer.from(s, "latin1"));
    const req = wire("GET http://codec.example/ HTTP/1.1\r\nHost: codec.example\r\nx-pad:  v \r\nX-Latin: caf\xe9\r\n\r\nbody");
    const reqFields = { buf: req, fieldsAt: req.indexOf(10) + 1, end: req.length - 4 };
    const res = wire("HTTP/1.1 204 No Content\r\n\r\n");
    const resFields = { buf: res, fieldsAt: res.length - 2, end: res.length };
    const long = wire(`HTTP/1.1 200 OK\r\nX-Long: ${"L".repeat(3000)}\r\n\r\n`);
    const longFields = { buf: long, fieldsAt: 17, end: long.length };
    const { ok, decoded } = roundTrip([
      entry({ url: "http://raw/", req_fields: reqFields, res_fields: resFields, req_headers: [["ignored", "list"]] }),
      entry({ url: "http://long/", res_fields: longFields }),
      entry({ url: "http://unterminated/", req_fields: { buf: req, fieldsAt: reqFields.fieldsAt, end: reqFields.end - 2 } }),
      entry({ url: "http://out-of-range/", req_fields: { buf: req, fieldsAt: 0, end: req.length + 1 } }),
      entry({ url: "http://lists/", req_fields: null }),
    ]);
    expect(ok).toEqual([true, true, false, false, true]);
    const rows = decoded!.rows;
    expect(rows.map((r) => r[2])).toEqual(["http://raw/", "http://long/", "http://lists/"]);
    expect(rows[0]![11]).toEqual([["Host", "codec.example"], ["x-pad", "v"], ["X-Latin", "caf\u00e9"]]);
    expect(rows[0]![12]).toEqual([]);
    expect(rows[1]![12]).toEqual([["X-Long", "L".repeat(3000)]]);
    expect(rows[2]![11]).toEqual([["Host", "codec.example:8080"], ["User-Agent", "curl/8"], ["X-Empty", ""]]);
  });

  test("a damaged header block loses its entry alone", () => {
    const wire = new Uint8Array(Buffer.from("GET / HTTP/1.1\r\nHost: a\r\n\r\n", "latin1"));
    const fields = { buf: wire, fieldsAt: 16, end: wire.length };
    const bytes = roundTrip([entry({ url: "http://one/", req_fields: fields }), entry({ url: "http://two/", req_fields: fields })]).bytes!.slice();
    // break the first record's header block: its last byte is no longer the empty line's LF
    const dv = new DataView(bytes.buffer);
    const len1 = dv.getUint32(0, true);
    const text = Buffer.from(bytes.subarray(0, len1)).toString("latin1");
    bytes[text.indexOf("Host: a\r\n\r\n") + 10] = 0x20;
    const d = decodeBatch(bytes);
    expect(d.rows.map((r) => r[2])).toEqual(["http://two/"]);
    expect([d.failed, d.error]).toEqual([1, "entry header block is not terminated"]);
  });

  test("damaged records are counted, never thrown", () => {
    const bytes = roundTrip([entry({ url: "http://one/" }), entry({ url: "http://two/" }), entry({ url: "http://three/" })]).bytes!.slice();
    const dv = new DataView(bytes.buffer);
    const len1 = dv.getUint32(0, true);
    // the second record's url length points past its end: that entry alone is lost
    const urlAt = len1 + 4 + 6 * 8 + 2 + 4 + 3; // its method "GET" (u32 + 3 bytes), then the url's u32
    dv.setUint32(urlAt, 0x7ffffff0 << 1, true);
    const d = decodeBatch(bytes);
    expect(d.rows.map((r) => r[2])).toEqual(["http://one/", "http://three/"]);
    expect([d.failed, d.error]).toEqual([1, "entry record is cut short"]);
    // a batch cut in the middle of a record keeps what came before
    const cut = decodeBatch(bytes.subarray(0, len1 + 10));
    expect(cut.rows.length).toBe(1);
    expect(cut.failed).toBe(1);
  });

  test("res_body_at: the body from that offset of a read is stored, byte for byte as the body alone would be", () => {
    const body = enc.encode("0123456789abcdef");
    const read = new Uint8Array(7 + body.length);
    read.set(enc.encode("HEAD\r\n\r"), 0);
    read.set(body, 7);
    const alone = roundTrip([entry({ res_body: body, res_body_size: body.length })]);
    const inRead = roundTrip([entry({ res_body: read, res_body_at: 7, res_body_size: body.length })]);
    expect(Buffer.from(inRead.bytes!).equals(Buffer.from(alone.bytes!))).toBe(true);
    expect(new TextDecoder().decode(inRead.decoded!.resBodies[0]!)).toBe("0123456789abcdef");
    // the whole read, and nothing of it
    const whole = roundTrip([entry({ res_body: read, res_body_at: 0, res_body_size: read.length }), entry({ res_body: read, res_body_at: read.length, res_body_size: 0 })]);
    expect(Buffer.from(whole.decoded!.resBodies[0]!).equals(Buffer.from(read))).toBe(true);
    expect(whole.decoded!.resBodies[1]!.length).toBe(0);
  });

  test("a res_body_at outside res_body refuses its entry alone", () => {
    const { ok, decoded } = roundTrip([
      entry({ res_body_at: 6 }),
      entry({ res_body_at: -1 }),
      entry({ res_body_at: 1.5 }),
      entry({ res_body: null, res_body_at: 1 }),
      entry({ res_body_at: 2 }),
    ]);
    expect(ok).toEqual([false, false, false, false, true]);
    expect(decoded!.rows.length).toBe(1);
    expect(new TextDecoder().decode(decoded!.resBodies[0]!)).toBe("llo");
  });
});
