import { afterAll, afterEach, describe, expect, jest, test } from "bun:test";
import { Database } from "bun:sqlite";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as zlib from "node:zlib";
import { decodeBody, MAX_DECODED_BYTES } from "../src/store/body-decode.ts";
import { CaptureStore, urlPath } from "../src/store/capture-store.ts";
import type { HeaderList, ListQuery, NewEntry } from "../src/store/types.ts";

const enc = new TextEncoder();
const zstdCompressSync = (zlib as unknown as { zstdCompressSync: (b: Uint8Array) => Buffer }).zstdCompressSync;

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "tapwire-capture-store-"));
  dirs.push(d);
  return d;
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const open: CaptureStore[] = [];
function mkStore(path = ":memory:", opts: ConstructorParameters<typeof CaptureStore>[1] = {}): CaptureStore {
  const s = new CaptureStore(path, opts);
  open.push(s);
  return s;
}
afterEach(() => {
  jest.useRealTimers();
  for (const s of open.splice(0)) {
    try {
      s.close();
    } catch {
      // closed by the test
    }
  }
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

function ids(s: CaptureStore, q: ListQuery): number[] {
  return s.list(q).items.map((i) => i.id);
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
  test("add assigns increasing ids synchronously; count includes queued entries", () => {
    const s = mkStore();
    expect(s.add(entry())).toBe(1);
    expect(s.add(entry())).toBe(2);
    expect(s.add(entry())).toBe(3);
    expect(s.count()).toBe(3);
    s.flush();
    expect(s.count()).toBe(3);
    expect(ids(s, {})).toEqual([3, 2, 1]);
  });

  test("ids are never reused after delete, clear and reopen", () => {
    const path = join(tempDir(), "c.db");
    const s = mkStore(path);
    for (let i = 0; i < 5; i++) s.add(entry());
    expect(s.delete(5)).toBe(true);
    expect(s.add(entry())).toBe(6);
    s.clear();
    expect(s.count()).toBe(0);
    expect(s.add(entry())).toBe(7);
    s.close();
    const s2 = mkStore(path);
    expect(s2.count()).toBe(1);
    expect(s2.add(entry())).toBe(8);
    s2.delete(8);
    s2.clear();
    s2.close();
    const s3 = mkStore(path);
    expect(s3.count()).toBe(0);
    expect(s3.add(entry())).toBe(9);
  });

  /** Runs a child that uses a store on `path`, then kills itself with SIGKILL (no close, no flush). */
  async function crashingChild(path: string, body: string): Promise<void> {
    const script = join(tempDir(), "child.ts");
    const storeModule = join(import.meta.dir, "..", "src", "store", "capture-store.ts");
    writeFileSync(
      script,
      `import { CaptureStore } from ${JSON.stringify(storeModule)};
const s = new CaptureStore(${JSON.stringify(path)}, { maxPending: 5 });
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

  test("kill -9: flushed entries survive, queued ones are lost, their ids are not reused", async () => {
    const path = join(tempDir(), "crash.db");
    await crashingChild(
      path,
      `for (let i = 0; i < 4; i++) s.add(e);
s.flush();
for (let i = 0; i < 4; i++) s.add({ ...e, url: "https://crash.example/lost" });`,
    );
    const s = mkStore(path);
    expect(s.recoveredFrom).toBeNull();
    expect(s.count()).toBe(4);
    expect(ids(s, {})).toEqual([4, 3, 2, 1]);
    expect(s.get(3)!.res_body).toBe("committed body");
    expect(s.list({ search: "lost" }).total).toBe(0);
    expect(s.add(entry())).toBeGreaterThan(8);
  });

  test("kill -9 after clear: ids handed out after the clear are not reused either", async () => {
    const path = join(tempDir(), "crash2.db");
    await crashingChild(path, `for (let i = 0; i < 4; i++) s.add(e);\ns.clear();\nfor (let i = 0; i < 4; i++) s.add(e);`);
    const s = mkStore(path);
    expect(s.count()).toBe(0);
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

  test("add only queues; the timer writes after flushIntervalMs", () => {
    jest.useFakeTimers();
    const path = join(tempDir(), "t.db");
    const s = mkStore(path, { flushIntervalMs: 50 });
    s.add(entry());
    s.add(entry());
    expect(rowsOnDisk(path)).toBe(0);
    jest.advanceTimersByTime(49);
    expect(rowsOnDisk(path)).toBe(0);
    jest.advanceTimersByTime(1);
    expect(rowsOnDisk(path)).toBe(2);
    expect(s.lastFlushError).toBeNull();
  });

  test("maxPending queued entries are written at once", () => {
    jest.useFakeTimers();
    const path = join(tempDir(), "m.db");
    const s = mkStore(path, { maxPending: 3, flushIntervalMs: 10_000 });
    s.add(entry());
    s.add(entry());
    expect(rowsOnDisk(path)).toBe(0);
    s.add(entry());
    expect(rowsOnDisk(path)).toBe(3);
  });

  test("list, get and delete see queued entries", () => {
    const s = mkStore(":memory:", { flushIntervalMs: 10_000 });
    const a = s.add(entry({ url: "https://q.example/one" }));
    expect(s.list({}).total).toBe(1);
    const b = s.add(entry({ url: "https://q.example/two" }));
    expect(s.get(b)!.url).toBe("https://q.example/two");
    const c = s.add(entry());
    expect(s.delete(c)).toBe(true);
    expect(ids(s, {})).toEqual([b, a]);
  });

  test("a malformed entry is dropped alone; flush() reports it", () => {
    const s = mkStore(":memory:", { maxPending: 100 });
    const a = s.add(entry({ url: "https://ok.example/1" }));
    s.add(entry({ method: null as unknown as string })); // refused by SQLite (NOT NULL)
    s.add(entry({ host: undefined as unknown as string, url: "https://bad.example/" })); // fails before SQLite
    const d = s.add(entry({ url: "https://ok.example/2" }));
    expect(() => s.flush()).toThrow();
    expect(s.count()).toBe(2);
    expect(ids(s, {})).toEqual([d, a]);
    expect(s.get(d)!.url).toBe("https://ok.example/2");
  });

  test("a failed background flush is recorded and logged, never thrown at add()", () => {
    const logged: unknown[] = [];
    const spy = jest.spyOn(console, "error").mockImplementation((...args: unknown[]) => {
      logged.push(args);
    });
    try {
      const s = mkStore(":memory:", { maxPending: 1 });
      expect(() => s.add(entry({ method: null as unknown as string }))).not.toThrow();
      expect(s.lastFlushError).toBeInstanceOf(Error);
      expect(logged.length).toBe(1);
      const id = s.add(entry());
      expect(s.lastFlushError).toBeNull();
      expect(ids(s, {})).toEqual([id]);
    } finally {
      spy.mockRestore();
    }
  });

  test("closed store refuses further calls", () => {
    const s = mkStore();
    s.add(entry());
    s.close();
    expect(() => s.add(entry())).toThrow();
    expect(() => s.list({})).toThrow();
    s.close(); // twice is fine
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe("detail", () => {
  test("headers keep order and casing; bodies decoded; sizes, flags, extras", () => {
    const s = mkStore();
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
    const d = s.get(id)!;
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
    const summary = s.list({}).items[0]!;
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
    });
  });

  test("failed flow: error in summary and detail, no response", () => {
    const s = mkStore();
    const id = s.add(entry({ status_code: 0, has_response: false, content_type: "", error: "upstream refused", res_headers: [] }));
    const d = s.get(id)!;
    expect(d.error).toBe("upstream refused");
    expect(d.has_response).toBe(false);
    expect(d.res_headers).toEqual([]);
    expect(d.res_body).toBe("");
    expect(d.res_body_encoding).toBe("utf8");
    expect(s.list({}).items[0]!.error).toBe("upstream refused");
  });

  test("truncated bodies: flag from sizes, best-effort decoding", () => {
    const s = mkStore();
    const text = bigText(300_000);
    const gz = zlib.gzipSync(enc.encode(text));
    const cut = gz.subarray(0, 4096);
    const id = s.add(entry({ res_body: cut, res_body_size: gz.length, res_headers: [["Content-Encoding", "gzip"], ["Content-Type", "text/plain"]] }));
    const d = s.get(id)!;
    expect(d.res_body_truncated).toBe(true);
    expect(d.res_body_size).toBe(gz.length);
    expect(d.res_body_decoded_from).toBe("gzip");
    expect(d.res_body.length).toBeGreaterThan(4096);
    expect(text.startsWith(d.res_body)).toBe(true);
  });

  test("binary bodies come back as base64 of the exact bytes", () => {
    const s = mkStore();
    const png = new Uint8Array(2048);
    for (let i = 0; i < png.length; i++) png[i] = (i * 131) & 0xff;
    const id = s.add(entry({ ...withResBody("", [["Content-Type", "image/png"]]), res_body: png, res_body_size: png.length }));
    const d = s.get(id)!;
    expect(d.res_body_encoding).toBe("base64");
    expect(Buffer.from(d.res_body, "base64").equals(Buffer.from(png))).toBe(true);
  });

  test("get of an unknown id is null", () => {
    const s = mkStore();
    s.add(entry());
    expect(s.get(2)).toBeNull();
    expect(s.get(-1)).toBeNull();
    expect(s.get(1.5)).toBeNull();
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe("paging contract", () => {
  function filled(n: number): CaptureStore {
    const s = mkStore(":memory:", { maxPending: 1000 });
    for (let i = 0; i < n; i++) s.add(entry({ status_code: i % 2 ? 404 : 200 }));
    return s;
  }

  test("limit default 50, newest first, offset, total", () => {
    const s = filled(120);
    const r = s.list({});
    expect(r.limit).toBe(50);
    expect(r.offset).toBe(0);
    expect(r.total).toBe(120);
    expect(r.items.map((i) => i.id)).toEqual(Array.from({ length: 50 }, (_, i) => 120 - i));
    const p3 = s.list({ offset: 100 });
    expect(p3.items.map((i) => i.id)).toEqual(Array.from({ length: 20 }, (_, i) => 20 - i));
    expect(p3.total).toBe(120);
    expect(s.list({ offset: 500 })).toEqual({ items: [], total: 120, offset: 500, limit: 50 });
    const f = s.list({ status: 404, offset: 55, limit: 10 });
    expect(f.total).toBe(60);
    expect(f.items.map((i) => i.id)).toEqual([10, 8, 6, 4, 2]);
    expect(s.list({ status: 404, offset: 60 })).toEqual({ items: [], total: 60, offset: 60, limit: 50 });
  });

  test("limit is capped at 500; limit 0 gives the total only", () => {
    const s = filled(620);
    const r = s.list({ limit: 10_000 });
    expect(r.limit).toBe(500);
    expect(r.items.length).toBe(500);
    expect(r.total).toBe(620);
    expect(s.list({ limit: 0 })).toEqual({ items: [], total: 620, offset: 0, limit: 0 });
    expect(s.list({ limit: 0, status: 200 })).toEqual({ items: [], total: 310, offset: 0, limit: 0 });
  });

  test("order: asc, desc, since_id defaults to asc, explicit order wins", () => {
    const s = filled(10);
    expect(ids(s, { order: "asc", limit: 3 })).toEqual([1, 2, 3]);
    expect(ids(s, { order: "desc", limit: 3 })).toEqual([10, 9, 8]);
    expect(ids(s, { since_id: 6 })).toEqual([7, 8, 9, 10]);
    expect(ids(s, { since_id: 6, order: "desc" })).toEqual([10, 9, 8, 7]);
    expect(ids(s, { since_id: 6, limit: 2, offset: 1 })).toEqual([8, 9]);
    expect(s.list({ since_id: 6 }).total).toBe(4);
  });

  test("odd numbers never cause SQL errors", () => {
    const s = filled(30);
    expect(s.list({ limit: -5 }).items).toEqual([]);
    expect(s.list({ limit: -5 }).total).toBe(30);
    expect(s.list({ limit: 2.7 }).items.length).toBe(2);
    expect(s.list({ limit: Number.NaN }).limit).toBe(50);
    expect(s.list({ offset: -3 }).offset).toBe(0);
    expect(s.list({ offset: 1.9, limit: 1 }).items[0]!.id).toBe(29);
    expect(s.list({ status: Number.NaN }).total).toBe(30);
    expect(s.list({ status: 200.5 }).total).toBe(0);
    expect(s.list({ since_id: -1e300 }).total).toBe(30);
    expect(s.list({ since_id: Number.MAX_SAFE_INTEGER * 4 }).total).toBe(0);
    expect(s.list({ status_min: Infinity }).total).toBe(30);
    expect(s.list({ host: "'; DROP TABLE entries; --", method: "GET' OR '1'='1" }).total).toBe(0);
    expect(s.list({ path: "%", search: "'\"%_\\" }).total).toBe(0);
    expect(s.count()).toBe(30);
  });

  test("since_id polling never skips or repeats entries", () => {
    const s = mkStore(":memory:", { maxPending: 7 });
    const added: number[] = [];
    const seen: number[] = [];
    let cursor = 0;
    const poll = () => {
      for (;;) {
        const page = s.list({ since_id: cursor, limit: 4 });
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
      if (round % 3 === 0) poll();
      if (round % 7 === 0 && added.length > 0) s.delete(added[0]!); // deletions of old entries do not disturb polling
    }
    poll();
    expect(seen).toEqual(added);
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe("filters", () => {
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

  const s = new CaptureStore(":memory:", { maxPending: 64 });
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
    known.push({ id: s.add(e), e, texts });
  }
  // a few deletions so that ids have gaps
  for (const id of [5, 77, 78, 300]) {
    s.delete(id);
    known.splice(
      known.findIndex((k) => k.id === id),
      1,
    );
  }
  afterAll(() => s.close());

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
  function check(q: ListQuery): number {
    const exp = expected(q);
    const all = s.list({ ...q, limit: 500, offset: 0 });
    expect({ q, ids: all.items.map((i) => i.id) }).toEqual({ q, ids: exp });
    expect({ q, total: all.total }).toEqual({ q, total: exp.length });
    // and one page of it
    const page = s.list({ ...q, limit: 7, offset: 3 });
    expect({ q, page: page.items.map((i) => i.id) }).toEqual({ q, page: exp.slice(3, 10) });
    expect(page.total).toBe(exp.length);
    return exp.length;
  }

  test("host: substring, case-insensitive", () => {
    expect(check({ host: "example" })).toBeGreaterThan(0);
    expect(check({ host: "STRIPE" })).toBeGreaterThan(0);
    expect(check({ host: "api.stripe.com" })).toBeGreaterThan(0);
    expect(check({ host: "nope.invalid" })).toBe(0);
    expect(check({ host: "ünicode" })).toBeGreaterThan(0);
  });

  test("method: exact, case-insensitive", () => {
    expect(check({ method: "get" })).toBeGreaterThan(0);
    expect(check({ method: "Post" })).toBeGreaterThan(0);
    expect(check({ method: "GE" })).toBe(0);
  });

  test("status, status_min, status_max", () => {
    expect(check({ status: 404 })).toBeGreaterThan(0);
    expect(check({ status: 0 })).toBeGreaterThan(0);
    expect(check({ status_min: 400 })).toBeGreaterThan(0);
    expect(check({ status_max: 299 })).toBeGreaterThan(0);
    expect(check({ status_min: 300, status_max: 399 })).toBeGreaterThan(0);
    expect(check({ status: 404, status_min: 500 })).toBe(0);
  });

  test("path: substring of the path, never of the query", () => {
    expect(check({ path: "/users" })).toBeGreaterThan(0);
    expect(check({ path: "Users" })).toBeGreaterThan(0);
    expect(check({ path: "a_b" })).toBeGreaterThan(0);
    expect(check({ path: "100%" })).toBeGreaterThan(0);
    // "next=/orders" is in many query strings; only the paths count
    const inQueryOnly = known.filter((k) => k.e.url.includes("/orders") && !new URL(k.e.url).pathname.includes("/orders"));
    expect(inQueryOnly.length).toBeGreaterThan(0);
    const got = new Set(ids(s, { path: "/orders", limit: 500 }));
    for (const k of inQueryOnly) expect(got.has(k.id)).toBe(false);
    check({ path: "/orders" });
  });

  test("has_error, since_id, since", () => {
    expect(check({ has_error: true })).toBeGreaterThan(0);
    expect(check({ has_error: false })).toBeGreaterThan(0);
    expect(check({ since_id: 250 })).toBeGreaterThan(0);
    expect(check({ since_id: 250, order: "desc" })).toBeGreaterThan(0);
    expect(check({ since: 1_700_000_000_000 + 390_000 })).toBe(10);
    expect(check({ since: 1_700_000_000_000 + 399_000 })).toBe(1);
  });

  test("search: URL, request and response bodies (gzip decoded), case-insensitive", () => {
    expect(check({ search: "invoice" })).toBeGreaterThan(0);
    expect(check({ search: "INVOICE" })).toBeGreaterThan(0);
    expect(check({ search: "token beta" })).toBeGreaterThanOrEqual(0);
    expect(check({ search: "q=alpha" })).toBeGreaterThan(0); // request bodies
    expect(check({ search: "jsdelivr.net/users" })).toBeGreaterThan(0); // URL
    expect(check({ search: "<p>" })).toBeGreaterThan(0); // only in gzip-decoded HTML
    expect(check({ search: "nothing like this anywhere" })).toBe(0);
  });

  test("search: 1, 2 and 3 characters", () => {
    for (const q of ["a", "Z", "%", "_", '"', "\\", "ä", "Ä", "al", "AL", "x_", "0%", "ph", "alp", "ALP", "_y", "%o", "Ärg", "ärg", "öß"]) {
      check({ search: q });
    }
    expect(check({ search: "%" })).toBeGreaterThan(0);
    expect(check({ search: "_" })).toBeGreaterThan(0);
  });

  test("search: LIKE wildcards and quotes are literal, non-ASCII matches exactly", () => {
    expect(check({ search: "50%off" })).toBeGreaterThan(0);
    expect(check({ search: "5_%o" })).toBe(0);
    expect(check({ search: "x_y" })).toBeGreaterThan(0);
    expect(check({ search: 'say "hi"' })).toBeGreaterThan(0);
    expect(check({ search: '"hi' })).toBeGreaterThan(0);
    expect(check({ search: "back\\slash" })).toBeGreaterThan(0);
    expect(check({ search: "ÄRGER" })).toBeGreaterThan(0);
    expect(check({ search: "ärger" })).toBe(0); // case folding is ASCII-only
    expect(check({ search: "GRÖßE" })).toBe(0);
    expect(check({ search: "größe" })).toBeGreaterThan(0);
  });

  test("search: binary bodies are not searched", () => {
    const binary = known.filter((k) => k.e.res_body !== null && k.e.res_headers[0]![1] === "application/octet-stream");
    const binaryReq = known.filter((k) => k.e.req_body !== null && k.e.req_headers[0]![1] === "application/x-protobuf");
    expect(binary.length).toBeGreaterThan(0);
    expect(binaryReq.length).toBeGreaterThan(0);
    for (const k of [...binary, ...binaryReq]) {
      const inBinary = Buffer.from((k.e.req_body ?? k.e.res_body)!.subarray(3)).toString();
      const word = inBinary.slice(2, 7);
      const got = ids(s, { search: word, limit: 500 });
      expect({ word, found: got.includes(k.id) }).toEqual({ word, found: expected({ search: word }).includes(k.id) });
    }
    check({ search: "q=" });
  });

  test("search: long strings (many trigrams) and very long strings", () => {
    const long = "x".repeat(10) + "alpha beta gamma delta epsilon zeta eta theta";
    expect(check({ search: long })).toBe(0);
    const sample = known.find((k) => k.texts.some((t) => t.length > 30))!;
    const sub = sample.texts.find((t) => t.length > 30)!.slice(2, 30);
    expect(check({ search: sub })).toBeGreaterThan(0);
    expect(check({ search: "a".repeat(60_000) })).toBe(0);
  });

  test("combinations", () => {
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
    for (const q of combos) check(q);
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
      check(q);
    }
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe("search index upkeep", () => {
  test("a gzip body is findable; deleted and cleared entries are not", () => {
    const s = mkStore();
    const gz = zlib.gzipSync(enc.encode('{"secret":"Needle-In-Gzip"}'));
    const a = s.add(entry({ res_body: gz, res_body_size: gz.length, res_headers: [["Content-Encoding", "gzip"], ["Content-Type", "application/json"]] }));
    const b = s.add(entry(withResBody("another needle-in-gzip copy")));
    s.add(entry(withResBody("unrelated")));
    expect(ids(s, { search: "needle-in-gzip" })).toEqual([b, a]);
    expect(ids(s, { search: "ee" })).toEqual([b, a]);
    expect(s.delete(b)).toBe(true);
    expect(s.delete(b)).toBe(false);
    expect(ids(s, { search: "needle-in-gzip" })).toEqual([a]);
    s.clear();
    expect(s.list({ search: "needle-in-gzip" }).total).toBe(0);
    const c = s.add(entry(withResBody("needle-in-gzip again")));
    expect(ids(s, { search: "needle-in-gzip" })).toEqual([c]);
  });

  test("search in request bodies and with brotli / zstd response bodies", () => {
    const s = mkStore();
    const br = zlib.brotliCompressSync(enc.encode("brotli hides WORDONE"));
    const zs = zstdCompressSync(enc.encode("zstd hides wordone too"));
    const req = enc.encode("grant_type=wordone");
    const a = s.add(entry({ res_body: br, res_body_size: br.length, res_headers: [["Content-Encoding", "br"], ["Content-Type", "text/plain"]] }));
    const b = s.add(entry({ res_body: zs, res_body_size: zs.length, res_headers: [["Content-Encoding", "zstd"], ["Content-Type", "text/plain"]] }));
    const c = s.add(entry({ method: "POST", req_body: req, req_body_size: req.length, req_headers: [["Content-Type", "application/x-www-form-urlencoded"]] }));
    expect(ids(s, { search: "WordOne" })).toEqual([c, b, a]);
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe("eviction", () => {
  test("keeps the newest maxEntries, with their bodies and search rows", () => {
    const s = mkStore(":memory:", { maxEntries: 10, maxPending: 4 });
    for (let i = 1; i <= 25; i++) s.add(entry(withResBody(`body number ${i} findme`)));
    s.flush();
    expect(s.count()).toBe(10);
    expect(ids(s, { limit: 100 })).toEqual([25, 24, 23, 22, 21, 20, 19, 18, 17, 16]);
    expect(s.get(15)).toBeNull();
    expect(s.get(16)!.res_body).toBe("body number 16 findme");
    expect(s.list({ search: "findme" }).total).toBe(10);
    expect(s.list({ search: "number 3 " }).total).toBe(0);
    expect(s.list({ search: "number 23 " }).total).toBe(1);
  });

  test("evicted, deleted and cleared entries leave no rows behind in bodies, details or the search index", () => {
    const path = join(tempDir(), "rows.db");
    const s = mkStore(path, { maxEntries: 10, maxPending: 4 });
    const rowCounts = () => {
      const db = new Database(path, { readonly: true });
      try {
        const n = (t: string) => (db.query(`SELECT COUNT(*) AS n FROM ${t}`).get() as { n: number }).n;
        return { entries: n("entries"), details: n("details"), bodies: n("bodies"), fts: n("entries_fts") };
      } finally {
        db.close();
      }
    };
    for (let i = 1; i <= 25; i++) s.add(entry(withResBody(`body ${i}`)));
    s.flush();
    expect(rowCounts()).toEqual({ entries: 10, details: 10, bodies: 10, fts: 10 });
    s.delete(20);
    expect(rowCounts()).toEqual({ entries: 9, details: 9, bodies: 9, fts: 9 });
    s.clear();
    expect(rowCounts()).toEqual({ entries: 0, details: 0, bodies: 0, fts: 0 });
  });

  test("the count stays right through eviction, delete and reopen", () => {
    const path = join(tempDir(), "ev.db");
    const s = mkStore(path, { maxEntries: 5, maxPending: 2 });
    for (let i = 0; i < 12; i++) s.add(entry());
    s.delete(12);
    s.flush();
    expect(s.count()).toBe(4);
    s.close();
    const s2 = mkStore(path, { maxEntries: 5 });
    expect(s2.count()).toBe(4);
    expect(ids(s2, {})).toEqual([11, 10, 9, 8]);
    for (let i = 0; i < 3; i++) s2.add(entry());
    s2.flush();
    expect(ids(s2, {})).toEqual([15, 14, 13, 11, 10]);
    // fewer allowed than stored: evicted at the next flush
    s2.close();
    const s3 = mkStore(path, { maxEntries: 2 });
    s3.add(entry());
    s3.flush();
    expect(ids(s3, {})).toEqual([16, 15]);
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe("persistence", () => {
  test("reopen a file database and find everything, search included", () => {
    const path = join(tempDir(), "p.db");
    const s = mkStore(path);
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
    s.close();
    const s2 = mkStore(path);
    expect(s2.recoveredFrom).toBeNull();
    expect(s2.count()).toBe(2);
    const d = s2.get(id)!;
    expect(d.res_body).toBe("persisted gzip payload");
    expect(d.res_body_decoded_from).toBe("gzip");
    expect(d.intercepted).toBe(true);
    expect(ids(s2, { search: "gzip payload" })).toEqual([id]);
    expect(ids(s2, { path: "/a/b", host: "persist" })).toEqual([id]);
  });

  test("a corrupt file is moved aside and the store starts fresh", () => {
    const dir = tempDir();
    const path = join(dir, "capture.db");
    const junk = "this is not a sqlite database, just junk bytes ".repeat(100);
    writeFileSync(path, junk);
    writeFileSync(path + "-wal", "stale wal");
    const s = mkStore(path);
    expect(s.recoveredFrom).toMatch(/capture\.db\.corrupt-\d+$/);
    expect(readFileSync(s.recoveredFrom!, "utf8")).toBe(junk);
    expect(readFileSync(s.recoveredFrom! + "-wal", "utf8")).toBe("stale wal");
    if (existsSync(path + "-wal")) expect(readFileSync(path + "-wal", "utf8")).not.toBe("stale wal");
    expect(s.count()).toBe(0);
    const id = s.add(entry());
    expect(id).toBe(1);
    expect(s.get(id)).not.toBeNull();
    s.close();
    const s2 = mkStore(path);
    expect(s2.recoveredFrom).toBeNull();
    expect(s2.count()).toBe(1);
    expect(existsSync(path)).toBe(true);
  });

  test("an empty file is a valid new database", () => {
    const path = join(tempDir(), "empty.db");
    writeFileSync(path, "");
    const s = mkStore(path);
    expect(s.recoveredFrom).toBeNull();
    expect(s.add(entry())).toBe(1);
  });
});
