import { afterAll, afterEach, beforeAll, describe, expect, jest, test } from "bun:test";
import { Database } from "bun:sqlite";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import * as zlib from "node:zlib";
import { decodeBody, MAX_DECODED_BYTES } from "../../src/store/body-decode.ts";
import { ftsTable, SCHEMA_VERSION } from "../../src/store/capture-db.ts";
import { CaptureStore, type CaptureStoreOptions, urlPath } from "../../src/store/capture-store.ts";
import type { HeaderList, ListQuery, NewEntry } from "../../src/store/types.ts";
import { tempDirs } from "../helpers/temp-dirs.ts";

const enc = new TextEncoder();
const zstdCompressSync = (zlib as unknown as { zstdCompressSync: (b: Uint8Array) => Buffer }).zstdCompressSync;

const tempDir = tempDirs("tapwire-capture-store-");

const open: CaptureStore[] = [];
async function mkStore(path = ":memory:", opts: CaptureStoreOptions = {}): Promise<CaptureStore> {
  const s = await CaptureStore.open(path, opts);
  open.push(s);
  return s;
}
afterEach(async () => {
  for (const s of open.splice(0)) await s.close(); // closing twice is fine
});

function entry(over: Partial<NewEntry> = {}): NewEntry {
  const url = over.url ?? "https://api.example.com/v1/items?page=1";
  return {
    method: "GET",
    url,
    host: over.host ?? new URL(url).hostname,
    status_code: 200,
    content_type: "application/json",
    duration_ms: 12,
    timestamp: 1_700_000_000_000,
    client_addr: "curl",
    has_response: true,
    req_headers: [["Host", "api.example.com"]],
    res_headers: [["Content-Type", "application/json"]],
    req_body: null,
    req_body_size: 0,
    res_body: null,
    res_body_size: 0,
    ...over,
  };
}

function withResBody(text: string, headers: HeaderList = [["Content-Type", "application/json"]]): Partial<NewEntry> {
  const b = enc.encode(text);
  return { res_body: b, res_body_size: b.length, res_headers: headers };
}

/**
 * The error a promise rejects with (fails when it resolves). Used instead of expect(p).rejects, which does not
 * wait for a rejection that comes from a Worker's message in this Bun version.
 */
async function rejection(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error("expected a rejection");
}

async function ids(s: CaptureStore, q: ListQuery): Promise<number[]> {
  return (await s.list(q)).items.map((i) => i.id);
}

function bigText(n: number): string {
  let out = "";
  for (let i = 0; out.length < n; i++) out += `line ${i}: {"name":"item-${i}","value":${(i * 7919) % 1000}}\n`;
  return out.slice(0, n);
}

// ---------------------------------------------------------------------------------------------------------------
describe("decodeBody", () => {
  const text = bigText(20_000);
  const raw = enc.encode(text);
  const json: HeaderList = [["Content-Type", "application/json"]];
  const withCe = (ce: string): HeaderList => [...json, ["Content-Encoding", ce]];

  test("empty and null bodies are empty utf8", () => {
    expect(decodeBody(null, json, false)).toEqual({ text: "", encoding: "utf8", decodedFrom: "" });
    expect(decodeBody(new Uint8Array(0), withCe("gzip"), false)).toEqual({ text: "", encoding: "utf8", decodedFrom: "" });
  });

  test("plain JSON is text, identity is not a decoding", () => {
    expect(decodeBody(raw, json, false)).toEqual({ text, encoding: "utf8", decodedFrom: "" });
    expect(decodeBody(raw, withCe("identity"), false)).toEqual({ text, encoding: "utf8", decodedFrom: "" });
  });

  const single: [string, (b: Uint8Array) => Uint8Array][] = [
    ["gzip", (b) => zlib.gzipSync(b)],
    ["x-gzip", (b) => zlib.gzipSync(b)],
    ["deflate", (b) => zlib.deflateSync(b)],
    ["br", (b) => zlib.brotliCompressSync(b)],
    ["zstd", (b) => zstdCompressSync(b)],
  ];
  for (const [name, compress] of single) {
    test(`undoes ${name}`, () => {
      expect(decodeBody(compress(raw), withCe(name), false)).toEqual({ text, encoding: "utf8", decodedFrom: name });
    });
  }

  test("deflate without the zlib wrapper (raw deflate)", () => {
    expect(decodeBody(zlib.deflateRawSync(raw), withCe("deflate"), false)).toEqual({
      text,
      encoding: "utf8",
      decodedFrom: "deflate",
    });
  });

  test("zstd: several frames, skippable frames, streamed frames without a content size", async () => {
    const h: HeaderList = [["Content-Encoding", "zstd"], ["Content-Type", "text/plain"]];
    const a = zstdCompressSync(enc.encode("first part|"));
    const b = zstdCompressSync(enc.encode("second part"));
    const skippable = Buffer.alloc(13);
    skippable.writeUInt32LE(0x184d2a50, 0);
    skippable.writeUInt32LE(5, 4);
    expect(decodeBody(Buffer.concat([a, b]), h, false).text).toBe("first part|second part");
    expect(decodeBody(Buffer.concat([skippable, a]), h, false).text).toBe("first part|");
    expect(decodeBody(Buffer.concat([a, b.subarray(0, 6)]), h, false).decodedFrom).toBe("");
    const z = zlib as unknown as { createZstdCompress: () => import("node:stream").Transform };
    const stream = z.createZstdCompress();
    const chunks: Buffer[] = [];
    stream.on("data", (c: Buffer) => chunks.push(c));
    const ended = new Promise((resolve) => stream.on("end", resolve));
    stream.end("streamed zstd body");
    await ended;
    expect(decodeBody(Buffer.concat(chunks), h, false)).toEqual({ text: "streamed zstd body", encoding: "utf8", decodedFrom: "zstd" });
  });

  test("header name and coding names are case-insensitive", () => {
    const r = decodeBody(zlib.gzipSync(raw), [["content-type", "application/json"], ["CONTENT-ENCODING", " GZIP "]], false);
    expect(r.text).toBe(text);
    expect(r.decodedFrom).toBe("gzip");
  });

  test("stacked encodings are undone in reverse order (one header or several)", () => {
    const wire = zlib.brotliCompressSync(zlib.gzipSync(raw)); // gzip applied first, then br
    expect(decodeBody(wire, withCe("gzip, br"), false)).toEqual({ text, encoding: "utf8", decodedFrom: "gzip, br" });
    const two: HeaderList = [...json, ["Content-Encoding", "gzip"], ["content-encoding", "br"]];
    expect(decodeBody(wire, two, false)).toEqual({ text, encoding: "utf8", decodedFrom: "gzip, br" });
    // the wrong order cannot be decoded: the wire bytes are kept
    const wrong = decodeBody(wire, withCe("br, gzip"), false);
    expect(wrong.decodedFrom).toBe("");
    expect(wrong.encoding).toBe("base64");
    expect(Buffer.from(wrong.text, "base64").equals(Buffer.from(wire))).toBe(true);
  });

  for (const [name, compress] of [
    ...single,
    ["deflate", (b: Uint8Array) => zlib.deflateRawSync(b)] as [string, (b: Uint8Array) => Uint8Array],
  ]) {
    test(`truncated ${name}: best-effort prefix at every cut point, never throws`, () => {
      const big = enc.encode(bigText(400_000));
      const full = compress(big);
      let decodedSomething = 0;
      for (let cut = 1; cut < full.length; cut += Math.max(1, Math.floor(full.length / 40))) {
        const r = decodeBody(full.subarray(0, cut), withCe(name), true);
        if (r.decodedFrom === name) {
          expect(r.encoding).toBe("utf8");
          expect(r.text.length).toBeGreaterThan(0);
          expect(Buffer.from(big).toString("utf8").startsWith(r.text)).toBe(true);
          decodedSomething++;
        } else {
          // nothing decodable yet: the captured bytes are kept
          expect(r.decodedFrom).toBe("");
        }
      }
      // zstd only yields whole blocks (up to 128 KiB of output each), so fewer cut points decode anything
      expect(decodedSomething).toBeGreaterThan(10);
      // most of the compressed stream gives a good part of the text
      const most = decodeBody(full.subarray(0, Math.floor(full.length * 0.8)), withCe(name), true);
      expect(most.decodedFrom).toBe(name);
      expect(most.text.length).toBeGreaterThan(big.length / 4);
    });
  }

  test("truncated stacked encoding is decoded best-effort too", () => {
    const big = enc.encode(bigText(300_000));
    const wire = zlib.brotliCompressSync(zlib.gzipSync(big));
    const r = decodeBody(wire.subarray(0, Math.floor(wire.length * 0.6)), withCe("gzip, br"), true);
    expect(r.decodedFrom).toBe("gzip, br");
    expect(r.text.length).toBeGreaterThan(1000);
    expect(Buffer.from(big).toString().startsWith(r.text)).toBe(true);
  });

  test("a cut-off body that is not marked truncated is a decoding failure (raw kept)", () => {
    for (const [name, compress] of single) {
      const full = compress(raw);
      const cut = full.subarray(0, Math.floor(full.length / 2));
      const r = decodeBody(cut, withCe(name), false);
      expect(r.decodedFrom).toBe("");
      expect(r.encoding).toBe("base64");
      expect(Buffer.from(r.text, "base64").equals(Buffer.from(cut))).toBe(true);
    }
  });

  test("undecodable or unknown encodings keep the raw bytes", () => {
    const notGzip = enc.encode('{"plain":"json, not gzip"}');
    expect(decodeBody(notGzip, withCe("gzip"), false)).toEqual({ text: '{"plain":"json, not gzip"}', encoding: "utf8", decodedFrom: "" });
    expect(decodeBody(notGzip, withCe("compress"), false).decodedFrom).toBe("");
    expect(decodeBody(notGzip, withCe("gzip"), true).decodedFrom).toBe("");
    const gz = zlib.gzipSync(raw);
    const r = decodeBody(gz, withCe("br"), false);
    expect(r).toEqual({ text: Buffer.from(gz).toString("base64"), encoding: "base64", decodedFrom: "" });
  });

  test("a decompression bomb beyond the limit is kept as sent", () => {
    const bomb = zlib.gzipSync(new Uint8Array(MAX_DECODED_BYTES + 1024));
    const r = decodeBody(bomb, [["Content-Encoding", "gzip"]], false);
    expect(r.decodedFrom).toBe("");
    expect(r.encoding).toBe("base64");
    expect(r.text.length).toBe(Buffer.from(bomb).toString("base64").length);
  });

  test("text or base64 by content type", () => {
    const ascii = enc.encode("hello=world&x=1");
    const textual = [
      "text/plain",
      "text/html; charset=utf-8",
      "application/json",
      "application/vnd.api+json",
      "application/ld+json",
      "application/xml",
      "image/svg+xml",
      "application/javascript",
      "text/javascript",
      "application/x-www-form-urlencoded",
      "application/graphql",
      "application/x-ndjson",
      "application/yaml",
      "multipart/form-data; boundary=x",
    ];
    for (const ct of textual) expect(decodeBody(ascii, [["Content-Type", ct]], false).encoding).toBe("utf8");
    for (const ct of ["application/octet-stream", "image/png", "application/pdf", "font/woff2", "application/protobuf"]) {
      const r = decodeBody(ascii, [["Content-Type", ct]], false);
      expect(r).toEqual({ text: Buffer.from(ascii).toString("base64"), encoding: "base64", decodedFrom: "" });
    }
  });

  test("binary bytes are base64, even under a textual content type", () => {
    const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0xff, 0xfe]);
    expect(decodeBody(png, [["Content-Type", "image/png"]], false)).toEqual({
      text: Buffer.from(png).toString("base64"),
      encoding: "base64",
      decodedFrom: "",
    });
    const invalidUtf8 = new Uint8Array([0x61, 0xc3, 0x28, 0x62]);
    expect(decodeBody(invalidUtf8, [["Content-Type", "text/plain"]], false).encoding).toBe("base64");
  });

  test("without content type: valid UTF-8 without NUL is text", () => {
    expect(decodeBody(enc.encode("héllo wörld"), [], false)).toEqual({ text: "héllo wörld", encoding: "utf8", decodedFrom: "" });
    expect(decodeBody(enc.encode("a\u0000b"), [], false).encoding).toBe("base64");
    expect(decodeBody(new Uint8Array([0xff, 0x61]), [], false).encoding).toBe("base64");
    expect(decodeBody(enc.encode("x"), [["Content-Type", ""]], false).encoding).toBe("utf8");
  });

  test("a truncated text body cut inside a multi-byte character stays text", () => {
    const t = "prix: 10€ ".repeat(50);
    const b = enc.encode(t);
    const cut = b.subarray(0, b.length - 2); // inside the last "€" (3 bytes) -> ends mid-sequence
    const r = decodeBody(cut, [["Content-Type", "text/plain"]], true);
    expect(r.encoding).toBe("utf8");
    expect(t.startsWith(r.text)).toBe(true);
    expect(r.text.length).toBe(t.length - 2);
    // not truncated: the same bytes are invalid UTF-8
    expect(decodeBody(cut, [["Content-Type", "text/plain"]], false).encoding).toBe("base64");
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe("urlPath", () => {
  test("path without query or fragment", () => {
    expect(urlPath("https://h.example/a/b?x=/c#d")).toBe("/a/b");
    expect(urlPath("http://h.example:8080")).toBe("/");
    expect(urlPath("http://h.example?q=1")).toBe("/");
    expect(urlPath("/relative/path?x")).toBe("/relative/path");
    expect(urlPath("h.example:443")).toBe("");
    expect(urlPath("https://h.example/%7Euser/a%20b")).toBe("/%7Euser/a%20b");
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe("ids and counting", () => {
  test("add assigns increasing ids synchronously; count includes queued entries", async () => {
    const s = await mkStore();
    expect(s.add(entry())).toBe(1);
    expect(s.add(entry())).toBe(2);
    expect(s.add(entry())).toBe(3);
    expect(s.count()).toBe(3);
    await s.flush();
    expect(s.count()).toBe(3);
    expect(await ids(s, {})).toEqual([3, 2, 1]);
  });

  test("ids are never reused after delete, clear and reopen", async () => {
    const path = join(tempDir(), "c.db");
    const s = await mkStore(path);
    for (let i = 0; i < 5; i++) s.add(entry());
    expect(await s.delete(5)).toBe(true);
    expect(s.add(entry())).toBe(6);
    await s.clear();
    expect(s.count()).toBe(0);
    expect(s.add(entry())).toBe(7);
    await s.close();
    const s2 = await mkStore(path);
    expect(s2.count()).toBe(1);
    expect(s2.add(entry())).toBe(8);
    await s2.delete(8);
    await s2.clear();
    await s2.close();
    const s3 = await mkStore(path);
    expect(s3.count()).toBe(0);
    expect(s3.add(entry())).toBe(9);
  });

  /** Runs a child that uses a store on `path`, then kills itself with SIGKILL (no close, no flush). */
  async function crashingChild(path: string, body: string): Promise<void> {
    const script = join(tempDir(), "child.ts");
    const storeModule = join(import.meta.dir, "..", "..", "src", "store", "capture-store.ts");
    writeFileSync(
      script,
      `import { CaptureStore } from ${JSON.stringify(storeModule)};
const s = await CaptureStore.open(${JSON.stringify(path)}, { maxPending: 5 });
const e = { method: "GET", url: "https://crash.example/x", host: "crash.example", status_code: 200, content_type: "",
  duration_ms: 1, timestamp: 1, client_addr: "t", has_response: true, req_headers: [], res_headers: [],
  req_body: null, req_body_size: 0, res_body: new TextEncoder().encode("committed body"), res_body_size: 14 };
${body}
process.kill(process.pid, "SIGKILL");
`,
    );
    const proc = Bun.spawn([process.execPath, script], { stdout: "pipe", stderr: "pipe" });
    await proc.exited;
    expect(proc.signalCode).toBe("SIGKILL");
  }

  test("kill -9: flushed entries survive, and so do queued ones once durable() settled (the write-ahead file); ids are not reused", async () => {
    const path = join(tempDir(), "crash.db");
    await crashingChild(
      path,
      `for (let i = 0; i < 4; i++) s.add(e);
await s.flush();
for (let i = 0; i < 4; i++) s.add({ ...e, url: "https://crash.example/queued" });
await s.durable();`,
    );
    const s = await mkStore(path);
    expect(s.recoveredFrom).toBeNull();
    await s.flush();
    expect(s.count()).toBe(8);
    expect(await ids(s, {})).toEqual([8, 7, 6, 5, 4, 3, 2, 1]);
    expect((await s.get(3))!.res_body).toBe("committed body");
    expect((await s.list({ search: "crash.example/queued" })).total).toBe(4);
    expect(s.add(entry())).toBeGreaterThan(8);
  });

  test("kill -9 in two runs in a row: the second run's write-ahead files (prepared while the writer took in the first's) keep its entries too", async () => {
    const path = join(tempDir(), "crash3.db");
    await crashingChild(path, `for (let i = 0; i < 3; i++) s.add(e);\nawait s.durable();`);
    await crashingChild(path, `for (let i = 0; i < 3; i++) s.add({ ...e, url: "https://crash.example/second" });\nawait s.durable();`);
    const s = await mkStore(path);
    await s.flush();
    // (the second run's ids start past the block the crashed first run had reserved)
    expect(s.count()).toBe(6);
    expect((await ids(s, {})).slice(3)).toEqual([3, 2, 1]);
    expect((await s.list({ search: "crash.example/second" })).total).toBe(3);
    // the prepared files were put in place: none is left under its prepared name
    expect(readdirSync(`${path}.journal`).filter((n) => n.endsWith(".next"))).toEqual([]);
    expect(readdirSync(`${path}.journal`)).toContain("wal-0.twm");
  });

  test("kill -9 after clear: what was cleared stays cleared, later entries survive, ids are not reused", async () => {
    const path = join(tempDir(), "crash2.db");
    await crashingChild(path, `for (let i = 0; i < 4; i++) s.add(e);\nawait s.clear();\nfor (let i = 0; i < 4; i++) s.add(e);\ns.durable(true);`);
    const s = await mkStore(path);
    await s.flush();
    expect(s.count()).toBe(4);
    expect(await ids(s, {})).toEqual([8, 7, 6, 5]);
    expect(s.add(entry())).toBeGreaterThan(8);
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe("flushing", () => {
  function rowsOnDisk(path: string): number {
    const db = new Database(path, { readonly: true });
    try {
      return (db.query("SELECT COUNT(*) AS n FROM entries").get() as { n: number }).n;
    } finally {
      db.close();
    }
  }

  /** Resolves with the value, or fails the test when it takes longer than `ms` (a deadline, not a pause). */
  function within<T>(ms: number, p: Promise<T>, what: string): Promise<T> {
    let timer: ReturnType<typeof setTimeout>;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: not done within ${ms} ms`)), ms);
    });
    return Promise.race([p, late]).finally(() => clearTimeout(timer));
  }

  test("add only queues; the timer posts after flushIntervalMs, then the writer commits", async () => {
    const path = join(tempDir(), "t.db");
    const s = await mkStore(path, { flushIntervalMs: 50 });
    const t0 = performance.now();
    s.add(entry());
    const id = s.add(entry());
    expect(rowsOnDisk(path)).toBe(0);
    expect(s.committedId).toBe(0);
    await within(5_000, s.waitCommitted(id), "timer flush"); // waitCommitted does not hurry the timer
    expect(performance.now() - t0).toBeGreaterThanOrEqual(49);
    expect(rowsOnDisk(path)).toBe(2);
    expect(s.committedId).toBe(id);
    expect(s.lastFlushError).toBeNull();
  });

  test("maxPending queued entries are posted at once", async () => {
    const path = join(tempDir(), "m.db");
    const s = await mkStore(path, { maxPending: 3, flushIntervalMs: 60_000 });
    s.add(entry());
    s.add(entry());
    expect(rowsOnDisk(path)).toBe(0);
    const id = s.add(entry());
    // the timer would take a minute: only the third add() can have posted them
    await within(5_000, s.waitCommitted(id), "maxPending flush");
    expect(rowsOnDisk(path)).toBe(3);
  });

  test("list, get and delete see queued entries", async () => {
    const s = await mkStore(":memory:", { flushIntervalMs: 10_000 });
    const a = s.add(entry({ url: "https://q.example/one" }));
    expect((await s.list({})).total).toBe(1);
    const b = s.add(entry({ url: "https://q.example/two" }));
    expect((await s.get(b))!.url).toBe("https://q.example/two");
    const c = s.add(entry());
    expect(await s.delete(c)).toBe(true);
    expect(await ids(s, {})).toEqual([b, a]);
  });

  test("extras that JSON cannot hold are dropped, not the entry; a body that is no byte array drops its entry", async () => {
    const s = await mkStore(":memory:", { maxPending: 100 });
    const cyclic: Record<string, unknown> = { note: "loops" };
    cyclic.self = cyclic;
    const a = s.add(entry({ url: "https://x.example/bigint", extra: { big: 10n } as unknown as Record<string, unknown> }));
    const b = s.add(entry({ url: "https://x.example/cycle", extra: cyclic }));
    s.add(entry({ url: "https://x.example/bad-body", res_body: "not bytes" as unknown as Uint8Array, res_body_size: 9 }));
    const c = s.add(entry({ url: "https://x.example/fine", extra: { kept: true }, ...withResBody('{"ok":1}') }));
    const err = await rejection(s.flush());
    expect(err.message).toContain("body is not a byte array");
    expect(await ids(s, {})).toEqual([c, b, a]);
    expect((await s.get(a))!.big).toBeUndefined();
    expect((await s.get(b))!.self).toBeUndefined();
    const d = (await s.get(c))!;
    expect(d.kept).toBe(true);
    expect(d.res_body).toBe('{"ok":1}');
  });

  test("a malformed entry is dropped alone; flush() reports it", async () => {
    const s = await mkStore(":memory:", { maxPending: 100 });
    const a = s.add(entry({ url: "https://ok.example/1" }));
    s.add(entry({ method: null as unknown as string })); // refused by SQLite (NOT NULL)
    s.add(entry({ host: undefined as unknown as string, url: "https://bad.example/" })); // fails before SQLite
    const d = s.add(entry({ url: "https://ok.example/2" }));
    expect(await rejection(s.flush())).toBeInstanceOf(Error);
    expect(s.count()).toBe(2);
    expect(await ids(s, {})).toEqual([d, a]);
    expect((await s.get(d))!.url).toBe("https://ok.example/2");
  });

  test("a failed background flush is recorded and logged, never thrown at add()", async () => {
    const logged: unknown[] = [];
    const spy = jest.spyOn(console, "error").mockImplementation((...args: unknown[]) => {
      logged.push(args);
    });
    try {
      const s = await mkStore(":memory:", { maxPending: 1 });
      let bad = 0;
      expect(() => (bad = s.add(entry({ method: null as unknown as string })))).not.toThrow();
      await s.waitCommitted(bad);
      expect(s.lastFlushError).toBeInstanceOf(Error);
      expect(logged.length).toBe(1);
      const id = s.add(entry());
      await s.waitCommitted(id);
      expect(s.lastFlushError).toBeNull();
      expect(await ids(s, {})).toEqual([id]);
    } finally {
      spy.mockRestore();
    }
  });

  test("closed store refuses further calls", async () => {
    const s = await mkStore();
    s.add(entry());
    await s.close();
    expect(() => s.add(entry())).toThrow();
    expect((await rejection(s.list({}))).message).toMatch(/closed/);
    expect((await rejection(s.get(1))).message).toMatch(/closed/);
    expect((await rejection(s.delete(1))).message).toMatch(/closed/);
    expect((await rejection(s.flush())).message).toMatch(/closed/);
    await s.close(); // twice is fine
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe("detail", () => {
  test("headers keep order and casing; bodies decoded; sizes, flags, extras", async () => {
    const s = await mkStore();
    const reqBody = enc.encode('{"q":"Hello"}');
    const resText = bigText(5000);
    const gz = zlib.gzipSync(enc.encode(resText));
    const reqHeaders: HeaderList = [
      ["Host", "api.example.com"],
      ["X-Custom-CASE", "a"],
      ["accept", "*/*"],
      ["X-Custom-CASE", "b"],
      ["Content-Type", "application/json"],
    ];
    const resHeaders: HeaderList = [
      ["Content-Type", "application/json"],
      ["content-encoding", "gzip"],
      ["Set-Cookie", "a=1"],
      ["Set-Cookie", "b=2"],
    ];
    const id = s.add(
      entry({
        method: "POST",
        url: "https://api.example.com/v1/search?x=1",
        status_code: 201,
        content_type: "application/json",
        duration_ms: 33.6,
        timestamp: 1_700_000_000_123,
        client_addr: "Google Chrome",
        req_headers: reqHeaders,
        res_headers: resHeaders,
        req_body: reqBody,
        req_body_size: reqBody.length,
        res_body: gz,
        res_body_size: gz.length,
        extra: { map_local_rule: "r1", intercepted: true, id: 999, url: "not me", error: "not a failure" },
      }),
    );
    const d = (await s.get(id))!;
    expect(d.id).toBe(id);
    expect(d.method).toBe("POST");
    expect(d.url).toBe("https://api.example.com/v1/search?x=1");
    expect(d.host).toBe("api.example.com");
    expect(d.status_code).toBe(201);
    expect(d.duration_ms).toBe(34);
    expect(d.timestamp).toBe(1_700_000_000_123);
    expect(d.client_addr).toBe("Google Chrome");
    expect(d.has_response).toBe(true);
    expect(d.req_headers).toEqual(reqHeaders);
    expect(d.res_headers).toEqual(resHeaders);
    expect(d.req_body).toBe('{"q":"Hello"}');
    expect(d.req_body_encoding).toBe("utf8");
    expect(d.req_body_decoded_from).toBe("");
    expect(d.res_body).toBe(resText);
    expect(d.res_body_encoding).toBe("utf8");
    expect(d.res_body_decoded_from).toBe("gzip");
    expect(d.res_body_size).toBe(gz.length);
    expect(d.req_body_size).toBe(reqBody.length);
    expect(d.req_body_truncated).toBe(false);
    expect(d.res_body_truncated).toBe(false);
    expect(d.map_local_rule).toBe("r1");
    expect(d.intercepted).toBe(true);
    expect("error" in d).toBe(false); // an extra cannot pose as a failure
    const summary = (await s.list({})).items[0]!;
    expect(summary).toEqual({
      id,
      method: "POST",
      url: "https://api.example.com/v1/search?x=1",
      host: "api.example.com",
      status_code: 201,
      content_type: "application/json",
      duration_ms: 34,
      timestamp: 1_700_000_000_123,
      client_addr: "Google Chrome",
      has_response: true,
      res_body_size: gz.length,
    });
  });

  test("failed flow: error in summary and detail, no response", async () => {
    const s = await mkStore();
    const id = s.add(entry({ status_code: 0, has_response: false, content_type: "", error: "upstream refused", res_headers: [] }));
    const d = (await s.get(id))!;
    expect(d.error).toBe("upstream refused");
    expect(d.has_response).toBe(false);
    expect(d.res_headers).toEqual([]);
    expect(d.res_body).toBe("");
    expect(d.res_body_encoding).toBe("utf8");
    expect((await s.list({})).items[0]!.error).toBe("upstream refused");
  });

  test("truncated bodies: flag from sizes, best-effort decoding", async () => {
    const s = await mkStore();
    const text = bigText(300_000);
    const gz = zlib.gzipSync(enc.encode(text));
    const cut = gz.subarray(0, 4096);
    const id = s.add(entry({ res_body: cut, res_body_size: gz.length, res_headers: [["Content-Encoding", "gzip"], ["Content-Type", "text/plain"]] }));
    const d = (await s.get(id))!;
    expect(d.res_body_truncated).toBe(true);
    expect(d.res_body_size).toBe(gz.length);
    expect(d.res_body_decoded_from).toBe("gzip");
    expect(d.res_body.length).toBeGreaterThan(4096);
    expect(text.startsWith(d.res_body)).toBe(true);
  });

  test("binary bodies come back as base64 of the exact bytes", async () => {
    const s = await mkStore();
    const png = new Uint8Array(2048);
    for (let i = 0; i < png.length; i++) png[i] = (i * 131) & 0xff;
    const id = s.add(entry({ ...withResBody("", [["Content-Type", "image/png"]]), res_body: png, res_body_size: png.length }));
    const d = (await s.get(id))!;
    expect(d.res_body_encoding).toBe("base64");
    expect(Buffer.from(d.res_body, "base64").equals(Buffer.from(png))).toBe(true);
  });

  test("get of an unknown id is null", async () => {
    const s = await mkStore();
    s.add(entry());
    expect(await s.get(2)).toBeNull();
    expect(await s.get(-1)).toBeNull();
    expect(await s.get(1.5)).toBeNull();
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe("paging contract", () => {
  async function filled(n: number): Promise<CaptureStore> {
    const s = await mkStore(":memory:", { maxPending: 1000 });
    for (let i = 0; i < n; i++) s.add(entry({ status_code: i % 2 ? 404 : 200 }));
    return s;
  }

  test("limit default 50, newest first, offset, total", async () => {
    const s = await filled(120);
    const r = await s.list({});
    expect(r.limit).toBe(50);
    expect(r.offset).toBe(0);
    expect(r.total).toBe(120);
    expect(r.items.map((i) => i.id)).toEqual(Array.from({ length: 50 }, (_, i) => 120 - i));
    const p3 = await s.list({ offset: 100 });
    expect(p3.items.map((i) => i.id)).toEqual(Array.from({ length: 20 }, (_, i) => 20 - i));
    expect(p3.total).toBe(120);
    expect(await s.list({ offset: 500 })).toEqual({ items: [], total: 120, offset: 500, limit: 50 });
    const f = await s.list({ status: 404, offset: 55, limit: 10 });
    expect(f.total).toBe(60);
    expect(f.items.map((i) => i.id)).toEqual([10, 8, 6, 4, 2]);
    expect(await s.list({ status: 404, offset: 60 })).toEqual({ items: [], total: 60, offset: 60, limit: 50 });
  });

  test("limit is capped at 500; limit 0 gives the total only", async () => {
    const s = await filled(620);
    const r = await s.list({ limit: 10_000 });
    expect(r.limit).toBe(500);
    expect(r.items.length).toBe(500);
    expect(r.total).toBe(620);
    expect(await s.list({ limit: 0 })).toEqual({ items: [], total: 620, offset: 0, limit: 0 });
    expect(await s.list({ limit: 0, status: 200 })).toEqual({ items: [], total: 310, offset: 0, limit: 0 });
  });

  test("order: asc, desc, since_id defaults to asc, explicit order wins", async () => {
    const s = await filled(10);
    expect(await ids(s, { order: "asc", limit: 3 })).toEqual([1, 2, 3]);
    expect(await ids(s, { order: "desc", limit: 3 })).toEqual([10, 9, 8]);
    expect(await ids(s, { since_id: 6 })).toEqual([7, 8, 9, 10]);
    expect(await ids(s, { since_id: 6, order: "desc" })).toEqual([10, 9, 8, 7]);
    expect(await ids(s, { since_id: 6, limit: 2, offset: 1 })).toEqual([8, 9]);
    expect((await s.list({ since_id: 6 })).total).toBe(4);
  });

  test("odd numbers never cause SQL errors", async () => {
    const s = await filled(30);
    expect((await s.list({ limit: -5 })).items).toEqual([]);
    expect((await s.list({ limit: -5 })).total).toBe(30);
    expect((await s.list({ limit: 2.7 })).items.length).toBe(2);
    expect((await s.list({ limit: Number.NaN })).limit).toBe(50);
    expect((await s.list({ offset: -3 })).offset).toBe(0);
    expect((await s.list({ offset: 1.9, limit: 1 })).items[0]!.id).toBe(29);
    expect((await s.list({ status: Number.NaN })).total).toBe(30);
    expect((await s.list({ status: 200.5 })).total).toBe(0);
    expect((await s.list({ since_id: -1e300 })).total).toBe(30);
    expect((await s.list({ since_id: Number.MAX_SAFE_INTEGER * 4 })).total).toBe(0);
    expect((await s.list({ status_min: Infinity })).total).toBe(30);
    expect((await s.list({ host: "'; DROP TABLE entries; --", method: "GET' OR '1'='1" })).total).toBe(0);
    expect((await s.list({ path: "%", search: "'\"%_\\" })).total).toBe(0);
    expect(s.count()).toBe(30);
  });

  test("since_id polling never skips or repeats entries", async () => {
    const s = await mkStore(":memory:", { maxPending: 7 });
    const added: number[] = [];
    const seen: number[] = [];
    let cursor = 0;
    const poll = async () => {
      for (;;) {
        const page = await s.list({ since_id: cursor, limit: 4 });
        for (const it of page.items) seen.push(it.id);
        if (page.items.length > 0) cursor = page.items[page.items.length - 1]!.id;
        if (page.items.length < 4) break;
      }
    };
    let seed = 3;
    for (let round = 0; round < 40; round++) {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      const n = seed % 11; // 0..10 new entries per round, sometimes more than a page
      for (let i = 0; i < n; i++) added.push(s.add(entry()));
      if (round % 3 === 0) await poll();
      if (round % 7 === 0 && added.length > 0) await s.delete(added[0]!); // deletions of old entries do not disturb polling
    }
    await poll();
    expect(seen).toEqual(added);
  });
});

// ---------------------------------------------------------------------------------------------------------------
/**
 * The filter suite runs against three states of the search index: complete, empty (indexing paused from the
 * start: every search scans) and partial (the first half indexed, the rest not): search must be exact in each.
 */
type IndexState = "indexed" | "not indexed" | "half indexed";
for (const state of ["indexed", "not indexed", "half indexed"] as IndexState[]) describe(`filters (${state})`, () => {
  // a fixed, varied data set; every list() answer is compared with a plain filter over it
  interface Known {
    id: number;
    e: NewEntry;
    texts: string[]; // decoded text bodies (base64 bodies are not searchable)
  }
  const HOSTS = ["api.example.com", "API.Stripe.com", "cdn.jsdelivr.net", "localhost", "auth.example.org", "Ünicode.example"];
  const METHODS = ["GET", "GET", "GET", "POST", "PUT", "DELETE", "get", "PATCH"];
  const STATUSES = [200, 200, 201, 204, 301, 304, 400, 401, 404, 404, 500, 502, 0];
  const SEGS = ["users", "Users", "orders", "v1", "api", "search", "a_b", "100%", "items"];
  const WORDS = ["alpha", "Beta", "gamma", "delta", "Invoice", "TOKEN", "x_y", "50%off", 'say "hi"', "ÄRGER", "größe", "back\\slash"];

  let seed = 12345;
  const rnd = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  const pick = <T>(a: readonly T[]): T => a[Math.floor(rnd() * a.length)]!;

  let s: CaptureStore;
  const known: Known[] = [];
  for (let i = 0; i < 400; i++) {
    const host = pick(HOSTS);
    const path = "/" + Array.from({ length: 1 + Math.floor(rnd() * 3) }, () => pick(SEGS)).join("/");
    const query = rnd() < 0.4 ? `?next=/${pick(SEGS)}&w=${pick(WORDS).replace(/[^a-z]/gi, "")}` : "";
    const url = `https://${host.toLowerCase()}${path}${query}`;
    const status = pick(STATUSES);
    const kind = rnd();
    const words = Array.from({ length: 3 }, () => pick(WORDS)).join(" ");
    const texts: string[] = [];
    let res_body: Uint8Array | null = null;
    let res_headers: HeaderList = [];
    if (kind < 0.35) {
      const t = JSON.stringify({ words });
      texts.push(t);
      res_body = enc.encode(t);
      res_headers = [["Content-Type", "application/json"]];
    } else if (kind < 0.6) {
      const t = `<p>${words}</p>`;
      texts.push(t);
      res_body = zlib.gzipSync(enc.encode(t));
      res_headers = [["Content-Type", "text/html"], ["Content-Encoding", "gzip"]];
    } else if (kind < 0.75) {
      // binary: the words are in there, but a base64 body is not searched
      res_body = new Uint8Array([0xff, 0xfe, 1, ...enc.encode(words)]);
      res_headers = [["Content-Type", "application/octet-stream"]];
    }
    let req_body: Uint8Array | null = null;
    let req_headers: HeaderList = [];
    const reqKind = rnd();
    if (reqKind < 0.3) {
      const t = `q=${pick(WORDS)}`;
      texts.push(t);
      req_body = enc.encode(t);
      req_headers = [["Content-Type", "application/x-www-form-urlencoded"]];
    } else if (reqKind < 0.4) {
      req_body = new Uint8Array([0xff, 0xfe, 2, ...enc.encode(`q=${pick(WORDS)}`)]);
      req_headers = [["Content-Type", "application/x-protobuf"]];
    }
    const e = entry({
      method: pick(METHODS),
      url,
      host,
      status_code: status,
      has_response: status !== 0,
      error: status === 0 ? "timeout" : undefined,
      timestamp: 1_700_000_000_000 + i * 1000,
      req_body,
      req_body_size: req_body?.length ?? 0,
      req_headers,
      res_body,
      res_body_size: res_body?.length ?? 0,
      res_headers,
    });
    known.push({ id: i + 1, e, texts });
  }
  beforeAll(async () => {
    s = await CaptureStore.open(":memory:", { maxPending: 64, indexing: state === "indexed" });
    for (const k of known) {
      if (k.id === 201 && state === "half indexed") {
        // the first 200 go into the index, the rest stay above the index mark
        await s.setIndexing(true);
        await s.waitIndexed();
        await s.setIndexing(false);
      }
      expect(s.add(k.e)).toBe(k.id);
    }
    // a few deletions so that ids have gaps (below and above the index mark)
    for (const id of [5, 77, 78, 300]) {
      expect(await s.delete(id)).toBe(true);
      known.splice(
        known.findIndex((k) => k.id === id),
        1,
      );
    }
    if (state === "indexed") await s.waitIndexed();
    const st = await s.writerStatus();
    expect(st.hasFts).toBe(true);
    expect(st.indexedUpto).toBe({ indexed: 400, "not indexed": 0, "half indexed": 200 }[state]);
  });
  afterAll(async () => {
    await s.close();
  });

  const asciiLower = (x: string) => x.replace(/[A-Z]/g, (c) => c.toLowerCase());
  function expected(q: ListQuery): number[] {
    const m = known.filter(({ id, e, texts }) => {
      if (q.host !== undefined && !e.host.toLowerCase().includes(q.host.toLowerCase())) return false;
      if (q.method !== undefined && e.method.toLowerCase() !== q.method.toLowerCase()) return false;
      if (q.status !== undefined && e.status_code !== q.status) return false;
      if (q.status_min !== undefined && e.status_code < q.status_min) return false;
      if (q.status_max !== undefined && e.status_code > q.status_max) return false;
      if (q.path !== undefined && !new URL(e.url).pathname.includes(q.path)) return false;
      if (q.has_error === true && !(e.status_code >= 400)) return false;
      if (q.has_error === false && !(e.status_code < 400)) return false;
      if (q.since_id !== undefined && !(id > q.since_id)) return false;
      if (q.since !== undefined && !(e.timestamp >= q.since)) return false;
      if (q.search !== undefined) {
        const n = asciiLower(q.search);
        if (![e.url, ...texts].some((t) => asciiLower(t).includes(n))) return false;
      }
      return true;
    });
    const asc = q.order ? q.order === "asc" : q.since_id !== undefined;
    const out = m.map((k) => k.id).sort((a, b) => (asc ? a - b : b - a));
    return out;
  }
  async function check(q: ListQuery): Promise<number> {
    const exp = expected(q);
    const all = await s.list({ ...q, limit: 500, offset: 0 });
    expect({ q, ids: all.items.map((i) => i.id) }).toEqual({ q, ids: exp });
    expect({ q, total: all.total }).toEqual({ q, total: exp.length });
    // and one page of it
    const page = await s.list({ ...q, limit: 7, offset: 3 });
    expect({ q, page: page.items.map((i) => i.id) }).toEqual({ q, page: exp.slice(3, 10) });
    expect(page.total).toBe(exp.length);
    return exp.length;
  }

  test("host: substring, case-insensitive", async () => {
    expect(await check({ host: "example" })).toBeGreaterThan(0);
    expect(await check({ host: "STRIPE" })).toBeGreaterThan(0);
    expect(await check({ host: "api.stripe.com" })).toBeGreaterThan(0);
    expect(await check({ host: "nope.invalid" })).toBe(0);
    expect(await check({ host: "ünicode" })).toBeGreaterThan(0);
  });

  test("method: exact, case-insensitive", async () => {
    expect(await check({ method: "get" })).toBeGreaterThan(0);
    expect(await check({ method: "Post" })).toBeGreaterThan(0);
    expect(await check({ method: "GE" })).toBe(0);
  });

  test("status, status_min, status_max", async () => {
    expect(await check({ status: 404 })).toBeGreaterThan(0);
    expect(await check({ status: 0 })).toBeGreaterThan(0);
    expect(await check({ status_min: 400 })).toBeGreaterThan(0);
    expect(await check({ status_max: 299 })).toBeGreaterThan(0);
    expect(await check({ status_min: 300, status_max: 399 })).toBeGreaterThan(0);
    expect(await check({ status: 404, status_min: 500 })).toBe(0);
  });

  test("path: substring of the path, never of the query", async () => {
    expect(await check({ path: "/users" })).toBeGreaterThan(0);
    expect(await check({ path: "Users" })).toBeGreaterThan(0);
    expect(await check({ path: "a_b" })).toBeGreaterThan(0);
    expect(await check({ path: "100%" })).toBeGreaterThan(0);
    // "next=/orders" is in many query strings; only the paths count
    const inQueryOnly = known.filter((k) => k.e.url.includes("/orders") && !new URL(k.e.url).pathname.includes("/orders"));
    expect(inQueryOnly.length).toBeGreaterThan(0);
    const got = new Set(await ids(s, { path: "/orders", limit: 500 }));
    for (const k of inQueryOnly) expect(got.has(k.id)).toBe(false);
    await check({ path: "/orders" });
  });

  test("has_error, since_id, since", async () => {
    expect(await check({ has_error: true })).toBeGreaterThan(0);
    expect(await check({ has_error: false })).toBeGreaterThan(0);
    expect(await check({ since_id: 250 })).toBeGreaterThan(0);
    expect(await check({ since_id: 250, order: "desc" })).toBeGreaterThan(0);
    expect(await check({ since: 1_700_000_000_000 + 390_000 })).toBe(10);
    expect(await check({ since: 1_700_000_000_000 + 399_000 })).toBe(1);
  });

  test("search: URL, request and response bodies (gzip decoded), case-insensitive", async () => {
    expect(await check({ search: "invoice" })).toBeGreaterThan(0);
    expect(await check({ search: "INVOICE" })).toBeGreaterThan(0);
    expect(await check({ search: "token beta" })).toBeGreaterThanOrEqual(0);
    expect(await check({ search: "q=alpha" })).toBeGreaterThan(0); // request bodies
    expect(await check({ search: "jsdelivr.net/users" })).toBeGreaterThan(0); // URL
    expect(await check({ search: "<p>" })).toBeGreaterThan(0); // only in gzip-decoded HTML
    expect(await check({ search: "nothing like this anywhere" })).toBe(0);
  });

  test("search: 1, 2 and 3 characters", async () => {
    for (const q of ["a", "Z", "%", "_", '"', "\\", "ä", "Ä", "al", "AL", "x_", "0%", "ph", "alp", "ALP", "_y", "%o", "Ärg", "ärg", "öß"]) {
      await check({ search: q });
    }
    expect(await check({ search: "%" })).toBeGreaterThan(0);
    expect(await check({ search: "_" })).toBeGreaterThan(0);
  });

  test("search: LIKE wildcards and quotes are literal, non-ASCII matches exactly", async () => {
    expect(await check({ search: "50%off" })).toBeGreaterThan(0);
    expect(await check({ search: "5_%o" })).toBe(0);
    expect(await check({ search: "x_y" })).toBeGreaterThan(0);
    expect(await check({ search: 'say "hi"' })).toBeGreaterThan(0);
    expect(await check({ search: '"hi' })).toBeGreaterThan(0);
    expect(await check({ search: "back\\slash" })).toBeGreaterThan(0);
    expect(await check({ search: "ÄRGER" })).toBeGreaterThan(0);
    expect(await check({ search: "ärger" })).toBe(0); // case folding is ASCII-only
    expect(await check({ search: "GRÖßE" })).toBe(0);
    expect(await check({ search: "größe" })).toBeGreaterThan(0);
  });

  test("search: binary bodies are not searched", async () => {
    const binary = known.filter((k) => k.e.res_body !== null && k.e.res_headers[0]![1] === "application/octet-stream");
    const binaryReq = known.filter((k) => k.e.req_body !== null && k.e.req_headers[0]![1] === "application/x-protobuf");
    expect(binary.length).toBeGreaterThan(0);
    expect(binaryReq.length).toBeGreaterThan(0);
    for (const k of [...binary, ...binaryReq]) {
      const inBinary = Buffer.from((k.e.req_body ?? k.e.res_body)!.subarray(3)).toString();
      const word = inBinary.slice(2, 7);
      const got = await ids(s, { search: word, limit: 500 });
      expect({ word, found: got.includes(k.id) }).toEqual({ word, found: expected({ search: word }).includes(k.id) });
    }
    await check({ search: "q=" });
  });

  test("search: long strings (many trigrams) and very long strings", async () => {
    const long = "x".repeat(10) + "alpha beta gamma delta epsilon zeta eta theta";
    expect(await check({ search: long })).toBe(0);
    const sample = known.find((k) => k.texts.some((t) => t.length > 30))!;
    const sub = sample.texts.find((t) => t.length > 30)!.slice(2, 30);
    expect(await check({ search: sub })).toBeGreaterThan(0);
    expect(await check({ search: "a".repeat(60_000) })).toBe(0);
  });

  test("combinations", async () => {
    const combos: ListQuery[] = [
      { host: "example", method: "GET", status_min: 200, status_max: 299 },
      { host: "stripe", has_error: true },
      { method: "post", search: "alpha" },
      { path: "/users", status: 404 },
      { search: "invoice", host: "api", since_id: 100 },
      { since: 1_700_000_000_000 + 200_000, has_error: false, method: "get" },
      { since_id: 50, since: 1_700_000_000_000 + 100_000, status_max: 399, order: "desc" },
      { search: "al", path: "v1" },
      { host: "LOCALHOST", path: "/", search: "gamma", status_min: 0, status_max: 600 },
    ];
    for (const q of combos) await check(q);
    // and random ones
    const pickOpt = <T>(a: readonly T[]): T | undefined => (rnd() < 0.6 ? undefined : pick(a));
    for (let i = 0; i < 150; i++) {
      const q: ListQuery = {
        host: pickOpt(["example", "API", "net", "local", "x"]),
        method: pickOpt(["GET", "post", "Delete"]),
        status: rnd() < 0.1 ? pick(STATUSES) : undefined,
        status_min: pickOpt([0, 200, 300, 400]),
        status_max: pickOpt([299, 399, 499, 599]),
        path: pickOpt(["/users", "v1", "items", "/"]),
        search: pickOpt(["alpha", "TOKEN", "a", "%", "ta", "x_y", "delta gamma", "example.com/api"]),
        has_error: pickOpt([true, false]),
        since_id: pickOpt([10, 100, 390]),
        since: pickOpt([1_700_000_000_000 + 50_000, 1_700_000_000_000 + 350_000]),
        order: pickOpt(["asc", "desc"] as const),
      };
      for (const k of Object.keys(q) as (keyof ListQuery)[]) if (q[k] === undefined) delete q[k];
      await check(q);
    }
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe("search index upkeep", () => {
  test("a gzip body is findable; deleted and cleared entries are not", async () => {
    const s = await mkStore();
    const gz = zlib.gzipSync(enc.encode('{"secret":"Needle-In-Gzip"}'));
    const a = s.add(entry({ res_body: gz, res_body_size: gz.length, res_headers: [["Content-Encoding", "gzip"], ["Content-Type", "application/json"]] }));
    const b = s.add(entry(withResBody("another needle-in-gzip copy")));
    s.add(entry(withResBody("unrelated")));
    await s.waitIndexed(); // the deletes below take indexed rows out of the index
    expect(await ids(s, { search: "needle-in-gzip" })).toEqual([b, a]);
    expect(await ids(s, { search: "ee" })).toEqual([b, a]);
    expect(await s.delete(b)).toBe(true);
    expect(await s.delete(b)).toBe(false);
    expect(await ids(s, { search: "needle-in-gzip" })).toEqual([a]);
    await s.clear();
    expect((await s.list({ search: "needle-in-gzip" })).total).toBe(0);
    const c = s.add(entry(withResBody("needle-in-gzip again")));
    expect(await ids(s, { search: "needle-in-gzip" })).toEqual([c]);
  });

  test("search in request bodies and with brotli / zstd response bodies", async () => {
    const s = await mkStore();
    const br = zlib.brotliCompressSync(enc.encode("brotli hides WORDONE"));
    const zs = zstdCompressSync(enc.encode("zstd hides wordone too"));
    const req = enc.encode("grant_type=wordone");
    const a = s.add(entry({ res_body: br, res_body_size: br.length, res_headers: [["Content-Encoding", "br"], ["Content-Type", "text/plain"]] }));
    const b = s.add(entry({ res_body: zs, res_body_size: zs.length, res_headers: [["Content-Encoding", "zstd"], ["Content-Type", "text/plain"]] }));
    const c = s.add(entry({ method: "POST", req_body: req, req_body_size: req.length, req_headers: [["Content-Type", "application/x-www-form-urlencoded"]] }));
    expect(await ids(s, { search: "WordOne" })).toEqual([c, b, a]);
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe("eviction", () => {
  test("keeps the newest maxEntries, with their bodies and search rows", async () => {
    const s = await mkStore(":memory:", { maxEntries: 10, maxPending: 4 });
    for (let i = 1; i <= 25; i++) s.add(entry(withResBody(`body number ${i} findme`)));
    await s.flush();
    expect(s.count()).toBe(10);
    expect(await ids(s, { limit: 100 })).toEqual([25, 24, 23, 22, 21, 20, 19, 18, 17, 16]);
    expect(await s.get(15)).toBeNull();
    expect((await s.get(16))!.res_body).toBe("body number 16 findme");
    expect((await s.list({ search: "findme" })).total).toBe(10);
    expect((await s.list({ search: "number 3 " })).total).toBe(0);
    expect((await s.list({ search: "number 23 " })).total).toBe(1);
  });

  test("evicted, deleted and cleared entries leave no rows behind in bodies, details or the search index", async () => {
    const path = join(tempDir(), "rows.db");
    const s = await mkStore(path, { maxEntries: 10, maxPending: 4 });
    const rowCounts = () => {
      const db = new Database(path, { readonly: true });
      try {
        const n = (t: string) => (db.query(`SELECT COUNT(*) AS n FROM ${t}`).get() as { n: number }).n;
        // the search index: one FTS table per generation
        const gens = db.query("SELECT gen FROM fts_gens").all() as { gen: number }[];
        const fts = gens.reduce((sum, g) => sum + n(ftsTable(g.gen)), 0);
        return { entries: n("entries"), details: n("details"), bodies: n("bodies"), fts };
      } finally {
        db.close();
      }
    };
    for (let i = 1; i <= 10; i++) s.add(entry(withResBody(`body ${i}`)));
    await s.flush();
    await s.waitIndexed();
    expect(rowCounts()).toEqual({ entries: 10, details: 10, bodies: 10, fts: 10 });
    // evicts 1..15, among them every indexed one
    for (let i = 11; i <= 25; i++) s.add(entry(withResBody(`body ${i}`)));
    await s.flush();
    await s.waitIndexed();
    expect(rowCounts()).toEqual({ entries: 10, details: 10, bodies: 10, fts: 10 });
    await s.delete(20);
    expect(rowCounts()).toEqual({ entries: 9, details: 9, bodies: 9, fts: 9 });
    // with an index backlog: eviction and delete of indexed rows, delete of a row not indexed yet
    await s.setIndexing(false);
    for (let i = 26; i <= 30; i++) s.add(entry(withResBody(`body ${i}`))); // evicts 16..19 (indexed)
    await s.flush();
    expect(rowCounts()).toEqual({ entries: 10, details: 10, bodies: 10, fts: 5 });
    expect(await s.delete(22)).toBe(true);
    expect(await s.delete(28)).toBe(true);
    expect(rowCounts()).toEqual({ entries: 8, details: 8, bodies: 8, fts: 4 });
    expect(await ids(s, { search: "body", limit: 100 })).toEqual([30, 29, 27, 26, 25, 24, 23, 21]);
    expect(await ids(s, { search: "ody 2" })).toEqual([29, 27, 26, 25, 24, 23, 21]);
    expect(await ids(s, { search: "y 2" })).toEqual([29, 27, 26, 25, 24, 23, 21]); // one ASCII trigram
    await s.clear();
    expect(rowCounts()).toEqual({ entries: 0, details: 0, bodies: 0, fts: 0 });
  });

  test("the count stays right through eviction, delete and reopen", async () => {
    const path = join(tempDir(), "ev.db");
    const s = await mkStore(path, { maxEntries: 5, maxPending: 2 });
    for (let i = 0; i < 12; i++) s.add(entry());
    await s.delete(12);
    await s.flush();
    expect(s.count()).toBe(4);
    await s.close();
    const s2 = await mkStore(path, { maxEntries: 5 });
    expect(s2.count()).toBe(4);
    expect(await ids(s2, {})).toEqual([11, 10, 9, 8]);
    for (let i = 0; i < 3; i++) s2.add(entry());
    await s2.flush();
    expect(await ids(s2, {})).toEqual([15, 14, 13, 11, 10]);
    // fewer allowed than stored: evicted at the next flush
    await s2.close();
    const s3 = await mkStore(path, { maxEntries: 2 });
    s3.add(entry());
    await s3.flush();
    expect(await ids(s3, {})).toEqual([16, 15]);
  });
  test("search index generations: new ones as ids grow, evicted ones dropped, search exact throughout", async () => {
    const path = join(tempDir(), "gens.db");
    // 2,000 entries kept: generations of 1,000 ids (the minimum size)
    const s = await mkStore(path, { maxEntries: 2000, maxPending: 200 });
    const index = () => {
      const db = new Database(path, { readonly: true });
      try {
        const tables = (db.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name GLOB 'entries_fts*'").all() as { name: string }[])
          .map((r) => r.name)
          .filter((n) => /^entries_fts_\d+$/.test(n)) // not the FTS5 shadow tables
          .sort();
        const rows = tables.reduce((sum, t) => sum + (db.query(`SELECT COUNT(*) AS n FROM ${t}`).get() as { n: number }).n, 0);
        return { tables, rows };
      } finally {
        db.close();
      }
    };
    const known: { id: number; text: string }[] = [];
    for (let round = 0; round < 8; round++) {
      for (let i = 0; i < 500; i++) {
        const n = round * 500 + i;
        const text = `entry ${n} word${n % 37} round${round}`;
        known.push({ id: s.add(entry(withResBody(text, [["Content-Type", "text/plain"]]))), text });
      }
      if (round % 2 === 1) await s.waitIndexed(); // else searched with a backlog
      const kept = known.slice(-2000);
      for (const q of ["word5 ", "word36", `round${round}`, "round0", "entry 1999 ", "ord1"]) {
        const exp = kept.filter((k) => k.text.includes(q)).map((k) => k.id).reverse();
        const got = await s.list({ search: q, limit: 500 });
        expect({ q, total: got.total }).toEqual({ q, total: exp.length });
        expect({ q, ids: got.items.map((x) => x.id) }).toEqual({ q, ids: exp.slice(0, 500) });
      }
    }
    await s.waitIndexed();
    const st = await s.writerStatus();
    expect(st.indexedUpto).toBe(4000);
    // ids 2001..4000 are kept, in 2 or 3 generations of up to 1,000 ids; the older ones were dropped
    const ix = index();
    expect(ix.tables.length).toBe(st.generations);
    expect(st.generations).toBeGreaterThanOrEqual(2);
    expect(st.generations).toBeLessThanOrEqual(3);
    expect(ix.tables).not.toContain("entries_fts_1");
    expect(ix.rows).toBe(2000);
    // the generations (their id ranges) survive a reopen; more entries keep rotating them
    await s.close();
    const s2 = await mkStore(path, { maxEntries: 2000 });
    expect((await s2.writerStatus()).generations).toBe(st.generations);
    for (let i = 0; i < 1500; i++) {
      const n = 4000 + i;
      const text = `entry ${n} word${n % 37} round8`;
      known.push({ id: s2.add(entry(withResBody(text, [["Content-Type", "text/plain"]]))), text });
    }
    await s2.flush();
    await s2.waitIndexed();
    const kept = known.slice(-2000);
    for (const q of ["word5 ", "round8", "round7", "round6", "entry 5499 "]) {
      const exp = kept.filter((k) => k.text.includes(q)).map((k) => k.id).reverse();
      const got = await s2.list({ search: q, limit: 500 });
      expect({ q, total: got.total }).toEqual({ q, total: exp.length });
      expect({ q, ids: got.items.map((x) => x.id) }).toEqual({ q, ids: exp.slice(0, 500) });
    }
    expect(index().rows).toBe(2000);
  });

  test("a database written by a newer schema is refused with a clear error, and left as it was", async () => {
    const path = join(tempDir(), "newer.db");
    const s = await mkStore(path);
    s.add(entry(withResBody("kept by the newer version")));
    await s.close();
    const db = new Database(path);
    db.run(`UPDATE meta SET value = ${SCHEMA_VERSION + 1} WHERE key = 'schema_version'`);
    db.close();
    const before = readFileSync(path);
    let error: Error | null = null;
    try {
      await mkStore(path);
    } catch (e) {
      error = e as Error;
    }
    expect(error?.message).toContain(`written by a newer tapwire (schema ${SCHEMA_VERSION + 1}; this build reads schemas up to ${SCHEMA_VERSION})`);
    expect(readdirSync(dirname(path)).filter((f) => f.includes("corrupt"))).toEqual([]); // not taken for damage
    const check = new Database(path, { readonly: true });
    try {
      expect((check.query("SELECT value FROM meta WHERE key = 'schema_version'").get() as { value: number }).value).toBe(SCHEMA_VERSION + 1);
      expect((check.query("SELECT COUNT(*) AS n FROM entries").get() as { n: number }).n).toBe(1);
    } finally {
      check.close();
    }
    expect(readFileSync(path).length).toBe(before.length);
  });

  test("a database from before the lazy index keeps its index (generation 0) until its entries are evicted", async () => {
    const path = join(tempDir(), "legacy.db");
    const s = await mkStore(path);
    for (const word of ["legacy-alpha", "legacy-beta", "legacy-gamma"]) s.add(entry(withResBody(`old ${word} body`)));
    await s.close();
    // rewrite it into the layout of the previous version: one entries_fts holding every entry, no fts_gens
    const db = new Database(path);
    for (const { gen } of db.query("SELECT gen FROM fts_gens").all() as { gen: number }[]) db.run(`DROP TABLE ${ftsTable(gen)}`);
    db.run("DROP TABLE fts_gens");
    db.run("DELETE FROM meta WHERE key IN ('fts_indexed_upto', 'entry_count')");
    db.run("UPDATE meta SET value = 1 WHERE key = 'schema_version'");
    db.run(`CREATE VIRTUAL TABLE entries_fts USING fts5(url, req_body, res_body,
      content='', contentless_delete=1, detail=none, tokenize='trigram')`);
    // only the url goes into the old index here: a body found by search proves that search did not use it
    db.run("INSERT INTO entries_fts (rowid, url, req_body, res_body) SELECT e.id, e.url, '', b.res_body FROM entries e JOIN bodies b ON b.id = e.id");
    db.close();

    const s2 = await mkStore(path, { maxEntries: 3 });
    const st = await s2.writerStatus();
    expect(st.indexedUpto).toBe(3);
    expect(st.generations).toBe(1);
    expect(s2.count()).toBe(3);
    expect(await ids(s2, { search: "legacy-beta" })).toEqual([2]);
    expect(await ids(s2, { search: "legacy" })).toEqual([3, 2, 1]);
    expect(await s2.delete(1)).toBe(true);
    expect(await ids(s2, { search: "legacy" })).toEqual([3, 2]);
    // new entries evict the old ones: the old index goes with the last of them
    for (let i = 0; i < 3; i++) s2.add(entry(withResBody(`new legacy-delta ${i}`)));
    await s2.flush();
    await s2.waitIndexed();
    expect(await ids(s2, { search: "legacy" })).toEqual([6, 5, 4]);
    const st2 = await s2.writerStatus();
    expect(st2.generations).toBe(1);
    const check = new Database(path, { readonly: true });
    try {
      expect(check.query("SELECT name FROM sqlite_master WHERE name = 'entries_fts'").get()).toBeNull();
      expect((check.query("SELECT value FROM meta WHERE key = 'schema_version'").get() as { value: number }).value).toBe(SCHEMA_VERSION);
    } finally {
      check.close();
    }
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe("persistence", () => {
  test("reopen a file database and find everything, search included", async () => {
    const path = join(tempDir(), "p.db");
    const s = await mkStore(path);
    const gz = zlib.gzipSync(enc.encode("persisted gzip payload"));
    const id = s.add(
      entry({
        url: "https://persist.example/a/b?c=d",
        res_body: gz,
        res_body_size: gz.length,
        res_headers: [["Content-Encoding", "gzip"], ["Content-Type", "text/plain"]],
        extra: { intercepted: true },
      }),
    );
    s.add(entry({ url: "https://other.example/" }));
    await s.close();
    // the writer's connection closed last: WAL checkpointed and removed
    expect(existsSync(path + "-wal")).toBe(false);
    const s2 = await mkStore(path);
    expect(s2.recoveredFrom).toBeNull();
    expect(s2.count()).toBe(2);
    const d = (await s2.get(id))!;
    expect(d.res_body).toBe("persisted gzip payload");
    expect(d.res_body_decoded_from).toBe("gzip");
    expect(d.intercepted).toBe(true);
    expect(await ids(s2, { search: "gzip payload" })).toEqual([id]);
    expect(await ids(s2, { path: "/a/b", host: "persist" })).toEqual([id]);
  });

  test("a corrupt file is moved aside and the store starts fresh", async () => {
    const dir = tempDir();
    const path = join(dir, "capture.db");
    const junk = "this is not a sqlite database, just junk bytes ".repeat(100);
    writeFileSync(path, junk);
    writeFileSync(path + "-wal", "stale wal");
    const s = await mkStore(path);
    expect(s.recoveredFrom).toMatch(/capture\.db\.corrupt-\d+$/);
    expect(readFileSync(s.recoveredFrom!, "utf8")).toBe(junk);
    expect(readFileSync(s.recoveredFrom! + "-wal", "utf8")).toBe("stale wal");
    if (existsSync(path + "-wal")) expect(readFileSync(path + "-wal", "utf8")).not.toBe("stale wal");
    expect(s.count()).toBe(0);
    const id = s.add(entry());
    expect(id).toBe(1);
    expect(await s.get(id)).not.toBeNull();
    await s.close();
    const s2 = await mkStore(path);
    expect(s2.recoveredFrom).toBeNull();
    expect(s2.count()).toBe(1);
    expect(existsSync(path)).toBe(true);
  });

  test("an empty file is a valid new database", async () => {
    const path = join(tempDir(), "empty.db");
    writeFileSync(path, "");
    const s = await mkStore(path);
    expect(s.recoveredFrom).toBeNull();
    expect(s.add(entry())).toBe(1);
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe("the writer worker", () => {
  test("an entry is visible to the very next read, however long the batch timer", async () => {
    const s = await mkStore(":memory:", { flushIntervalMs: 60_000, maxPending: 10_000 });
    for (let i = 0; i < 30; i++) {
      const a = s.add(entry({ url: `https://v.example/${i}/first` }));
      expect((await s.list({ limit: 1 })).items.map((x) => x.id)).toEqual([a]);
      const b = s.add(entry({ url: `https://v.example/${i}/second`, ...withResBody(`visible-${i}-token`) }));
      expect((await s.get(b))!.res_body).toBe(`visible-${i}-token`);
      const c = s.add(entry({ url: `https://v.example/${i}/third`, ...withResBody(`found-${i}-word`) }));
      expect(await ids(s, { search: `found-${i}-word` })).toEqual([c]);
      expect(s.count()).toBe(3 * (i + 1));
      expect(s.committedId).toBe(c);
    }
  });

  test("search stays exact while entries are written and indexed (index backlog)", async () => {
    const s = await mkStore(":memory:", { maxPending: 40, indexing: false });
    const WORDS = ["amber", "Basalt", "cobalt", "dune", "ember", "fjord", "granite", "ÄRGER", "größe", "x_y", "50%"];
    let seed = 99;
    const rnd = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const pick = <T>(a: readonly T[]): T => a[Math.floor(rnd() * a.length)]!;
    const known: { id: number; url: string; text: string }[] = [];
    let n = 0;
    const add = (count: number) => {
      for (let i = 0; i < count; i++, n++) {
        const url = `https://h${n % 7}.example/p/${pick(WORDS).toLowerCase()}`;
        const text = `${Array.from({ length: 40 }, () => pick(WORDS)).join(" ")} #${n}`;
        known.push({ id: s.add(entry({ url, ...withResBody(JSON.stringify({ text }), [["Content-Type", "application/json"]]) })), url, text: JSON.stringify({ text }) });
      }
    };
    const asciiLower = (x: string) => x.replace(/[A-Z]/g, (c) => c.toLowerCase());
    const expected = (q: string) => {
      const needle = asciiLower(q);
      return known.filter((k) => asciiLower(k.url).includes(needle) || asciiLower(k.text).includes(needle)).map((k) => k.id).reverse();
    };
    const QUERIES = ["cobalt", "COBALT dune", "ber", "BER", "ot", "ÄRGER", "ärger", "größe", "x_y", "50%", "h3.example/p/fj", "#1", "nowhere-at-all"];
    const checkAll = async () => {
      for (const q of QUERIES) {
        const exp = expected(q);
        const got = await s.list({ search: q, limit: 500 });
        expect({ q, total: got.total }).toEqual({ q, total: exp.length });
        expect({ q, ids: got.items.map((i) => i.id) }).toEqual({ q, ids: exp.slice(0, 500) });
      }
    };

    add(300);
    await checkAll(); // nothing indexed: every search scans
    expect((await s.writerStatus()).indexedUpto).toBe(0);

    for (let round = 0; round < 16; round++) {
      if (round % 4 === 0) {
        await s.setIndexing(true);
        await s.waitIndexed(); // everything so far in the index
      } else if (round % 4 === 1) {
        await s.setIndexing(false); // what this round adds stays above the index mark
      } else if (round % 4 === 2) {
        await s.setIndexing(true); // the writer indexes while the rounds below write and search
      }
      add(60);
      if (round % 3 === 0) {
        // deletions below and above the index mark
        for (const victim of [known[Math.floor(rnd() * 100)]!, known[known.length - 1 - Math.floor(rnd() * 30)]!]) {
          expect(await s.delete(victim.id)).toBe(true);
          known.splice(known.indexOf(victim), 1);
        }
      }
      if (round % 4 === 1) {
        await s.flush(); // written into SQLite (status does not hurry the journal), not indexed
        const st = await s.writerStatus();
        expect(st.indexedUpto).toBeGreaterThan(0);
        expect(st.indexedUpto).toBeLessThan(st.maxId);
      }
      await checkAll();
      if (round % 4 === 3) {
        // searches in flight while more entries are added: each answer holds every entry added before the
        // call, and only entries that match
        const before = QUERIES.map((q) => new Set(expected(q)));
        // (oldest first: the entries added after the call can only come after the ones before it)
        const answers = QUERIES.map((q) => s.list({ search: q, limit: 500, order: "asc" }));
        add(40);
        const after = QUERIES.map((q) => new Set(expected(q)));
        for (let i = 0; i < QUERIES.length; i++) {
          const res = await answers[i]!;
          const got = res.items.map((x) => x.id);
          const b = [...before[i]!].sort((x, y) => x - y);
          const n = Math.min(500, b.length);
          expect({ q: QUERIES[i], first: got.slice(0, n) }).toEqual({ q: QUERIES[i], first: b.slice(0, n) });
          for (const id of got) expect({ q: QUERIES[i], id, matches: after[i]!.has(id) }).toEqual({ q: QUERIES[i], id, matches: true });
          expect(res.total).toBeGreaterThanOrEqual(before[i]!.size);
          expect(res.total).toBeLessThanOrEqual(after[i]!.size);
        }
      }
    }
    await s.setIndexing(true);
    await s.waitIndexed();
    const st = await s.writerStatus();
    expect(st.indexedUpto).toBe(st.maxId);
    await checkAll(); // all from the index
  });

  test("a writer that dies is reported and restarted once; add() never throws", async () => {
    const logged: string[] = [];
    const spy = jest.spyOn(console, "error").mockImplementation((...args: unknown[]) => {
      logged.push(args.map(String).join(" "));
    });
    try {
      const path = join(tempDir(), "restart.db");
      const s = await mkStore(path, { flushIntervalMs: 60_000 });
      const a = s.add(entry({ url: "https://before.example/", ...withResBody("written before the crash") }));
      await s.flush();
      await s.waitIndexed();

      await s.killWriterForTest();
      expect(s.lastFlushError?.message).toMatch(/writer stopped unexpectedly/);
      expect(logged.length).toBe(1);
      expect(logged[0]).toMatch(/restarting/);
      // the new writer carries on: writes, search, delete, count
      const b = s.add(entry({ url: "https://after.example/", ...withResBody("written after the crash") }));
      expect(b).toBe(a + 1);
      expect(await ids(s, {})).toEqual([b, a]);
      expect(await ids(s, { search: "the crash" })).toEqual([b, a]);
      expect((await s.get(a))!.res_body).toBe("written before the crash");
      const c = s.add(entry());
      expect(await s.delete(c)).toBe(true);
      expect(s.count()).toBe(2);
      expect(s.lastFlushError).toBeNull(); // a good write since

      // a second death: no more restarts; reads still work, adds are dropped without throwing
      await s.killWriterForTest();
      expect(s.lastFlushError?.message).toMatch(/not restarted again/);
      expect(logged.length).toBe(2);
      let d = 0;
      expect(() => (d = s.add(entry({ url: "https://dropped.example/" })))).not.toThrow();
      expect(d).toBe(c + 1);
      expect(s.droppedCount).toBe(1); // counted: /capture/status shows it
      expect(await ids(s, {})).toEqual([b, a]);
      expect((await rejection(s.flush())).message).toMatch(/not restarted again/);
      expect((await rejection(s.delete(a))).message).toMatch(/not restarted again/);
      await s.close();

      // what the writers committed is on disk; the id ceiling covers the dropped entry's id
      const s2 = await mkStore(path);
      expect(await ids(s2, {})).toEqual([b, a]);
      expect(s2.add(entry())).toBeGreaterThan(d);
    } finally {
      spy.mockRestore();
    }
  });

  test("the queue the writer has not acknowledged is bounded: the overflow is dropped and counted, the rest stored", async () => {
    const logged: string[] = [];
    const spy = jest.spyOn(console, "error").mockImplementation((...args: unknown[]) => {
      logged.push(args.map(String).join(" "));
    });
    try {
      const s = await mkStore(join(tempDir(), "bounded.db"), { flushIntervalMs: 60_000, maxPending: 1000, maxUnackedEntries: 10 });
      // added in one tick: the writer cannot acknowledge any of them meanwhile
      const added: number[] = [];
      for (let i = 0; i < 15; i++) added.push(s.add(entry({ url: `https://q${i}.example/` })));
      expect(s.droppedCount).toBe(5);
      expect(s.lastFlushError?.message).toMatch(/far behind/);
      expect(logged.some((l) => /far behind/.test(l))).toBe(true);
      await s.flush();
      // the first 10 are stored; the 5 over the bound are not, and their ids are never reused
      expect(await ids(s, {})).toEqual(added.slice(0, 10).reverse());
      expect(s.add(entry())).toBe(added[14]! + 1);
      await s.flush();
      expect(s.droppedCount).toBe(5);
      await s.close();
    } finally {
      spy.mockRestore();
    }
  });

  test("kill -9 mid-traffic loses only what the writer had not acknowledged", async () => {
    const path = join(tempDir(), "midtraffic.db");
    const script = join(tempDir(), "traffic-child.ts");
    const storeModule = join(import.meta.dir, "..", "..", "src", "store", "capture-store.ts");
    writeFileSync(
      script,
      `import { writeSync } from "node:fs";
import { CaptureStore } from ${JSON.stringify(storeModule)};
const s = await CaptureStore.open(${JSON.stringify(path)}, { maxPending: 40, flushIntervalMs: 5 });
const body = new TextEncoder().encode("body of entry ");
const e = (n) => ({ method: "GET", url: "https://traffic.example/" + n, host: "traffic.example", status_code: 200,
  content_type: "text/plain", duration_ms: 1, timestamp: 1, client_addr: "t", has_response: true, req_headers: [],
  res_headers: [["Content-Type", "text/plain"]], req_body: null, req_body_size: 0,
  res_body: new Uint8Array([...body, ...new TextEncoder().encode(String(n))]), res_body_size: 20 });
let last = 0;
for (let round = 0; round < 40; round++) {
  for (let i = 0; i < 25; i++) last = s.add(e(last + 1));
  await new Promise((r) => setImmediate(r)); // the event loop turns: batches are posted and acknowledged meanwhile
}
await s.waitCommitted(500); // at least the first half is acknowledged (the rest may or may not be)
for (let i = 0; i < 25; i++) last = s.add(e(last + 1)); // certainly not acknowledged yet
writeSync(1, JSON.stringify({ committed: s.committedId, assigned: last }) + "\\n");
process.kill(process.pid, "SIGKILL");
`,
    );
    const proc = Bun.spawn([process.execPath, script], { stdout: "pipe", stderr: "pipe" });
    const out = await new Response(proc.stdout).text();
    await proc.exited;
    expect(proc.signalCode).toBe("SIGKILL");
    const { committed, assigned } = JSON.parse(out) as { committed: number; assigned: number };
    expect(assigned).toBe(1025);
    expect(committed).toBeGreaterThanOrEqual(500);
    expect(committed).toBeLessThan(assigned);

    const s = await mkStore(path);
    expect(s.recoveredFrom).toBeNull();
    const stored: number[] = [];
    for (let cursor = 0; ; ) {
      const page = await s.list({ since_id: cursor, limit: 500 });
      stored.push(...page.items.map((i) => i.id));
      if (page.items.length < 500) break;
      cursor = page.items[page.items.length - 1]!.id;
    }
    // every acknowledged entry survived; what was lost is a tail (whole batches, in order)
    const k = stored.length;
    expect(k).toBeGreaterThanOrEqual(committed);
    expect(k).toBeLessThanOrEqual(assigned);
    expect(stored).toEqual(Array.from({ length: k }, (_, i) => i + 1));
    for (const id of [1, committed, k]) {
      const d = (await s.get(id))!;
      expect(d.url).toBe(`https://traffic.example/${id}`);
      expect(d.res_body).toBe(`body of entry ${id}`);
    }
    expect((await s.list({ search: "body of entry" })).total).toBe(k);
    expect(s.add(entry())).toBeGreaterThan(assigned); // ids handed out before the crash are not reused
  });
});

describe("details(): the streamed export", () => {
  test("a search filter holds for compressed bodies too (decided outside SQL), with offset and limit", async () => {
    const s = await mkStore();
    // bodies of several KiB are stored compressed; every third one carries the word searched for
    const big = (i: number) => `{"i": ${i}, "pad": "${"lorem ipsum ".repeat(400)}", "tag": "${i % 3 === 0 ? "needle-word" : "hay"}"}`;
    for (let i = 0; i < 30; i++) s.add(entry({ url: `https://api.example.com/items/${i}`, ...withResBody(big(i)) }));
    const all: number[] = [];
    for await (const d of s.details({ search: "needle-word" })) all.push(d.id);
    expect(all).toEqual(Array.from({ length: 10 }, (_, k) => 1 + 3 * k));
    const page: number[] = [];
    for await (const d of s.details({ search: "needle-word" }, { offset: 2, limit: 3 })) page.push(d.id);
    expect(page).toEqual([7, 10, 13]);
    const none: number[] = [];
    for await (const d of s.details({ search: "absent-word" })) none.push(d.id);
    expect(none).toEqual([]);
  });
});
