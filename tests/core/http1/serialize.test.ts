import { describe, expect, test } from "bun:test";
import {
  ChunkedDecoder,
  CRLF,
  LAST_CHUNK,
  chunkHeader,
  encodeChunk,
  parseRequestHead,
  parseResponseHead,
  requestHeadWithFields,
  serializeRequestHead,
  serializeResponseHead,
  serializeTrailers,
  statusReason,
  type RequestHead,
  type ResponseHead,
} from "../../../src/core/http1/index.ts";

const bytes = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, "latin1"));
const text = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("latin1");

describe("serializeRequestHead", () => {
  test("exact bytes", () => {
    const head: RequestHead = {
      method: "POST",
      target: "/submit?x=1",
      version: "HTTP/1.1",
      headers: [
        ["Host", "example.com"],
        ["content-length", "3"],
      ],
    };
    expect(text(serializeRequestHead(head))).toBe("POST /submit?x=1 HTTP/1.1\r\nHost: example.com\r\ncontent-length: 3\r\n\r\n");
  });

  test("no headers", () => {
    expect(text(serializeRequestHead({ method: "GET", target: "/", version: "HTTP/1.0", headers: [] }))).toBe(
      "GET / HTTP/1.0\r\n\r\n",
    );
  });

  test("latin1 values go out byte for byte, wider chars as UTF-8", () => {
    const out = serializeRequestHead({
      method: "GET",
      target: "/",
      version: "HTTP/1.1",
      headers: [
        ["X-Latin", "caf\u00e9\u0080"],
        ["X-Wide", "\u20ac"],
      ],
    });
    expect([...out]).toEqual([
      ...bytes("GET / HTTP/1.1\r\nX-Latin: caf"),
      0xe9,
      0x80,
      ...bytes("\r\nX-Wide: "),
      0xe2,
      0x82,
      0xac,
      ...bytes("\r\n\r\n"),
    ]);
  });

  test("header injection through values or names is refused", () => {
    const base = (headers: [string, string][]): RequestHead => ({ method: "GET", target: "/", version: "HTTP/1.1", headers });
    for (const v of ["a\r\nX-Injected: 1", "a\nb", "a\rb", "a\u0000b", "a\u0001b", "a\u007f"]) {
      expect(() => serializeRequestHead(base([["X", v]]))).toThrow(Error);
    }
    for (const n of ["X\r\nY", "X Y", "X:", "", "X\u00e9", "X\u0000"]) {
      expect(() => serializeRequestHead(base([[n, "v"]]))).toThrow(Error);
    }
    // tabs and obs-text are legitimate in values
    expect(() => serializeRequestHead(base([["X", "a\tb\u00ff"]]))).not.toThrow();
  });

  test("invalid method, target or version is refused", () => {
    const ok: RequestHead = { method: "GET", target: "/", version: "HTTP/1.1", headers: [] };
    expect(() => serializeRequestHead({ ...ok, method: "G T" })).toThrow(Error);
    expect(() => serializeRequestHead({ ...ok, method: "get" })).toThrow(Error);
    expect(() => serializeRequestHead({ ...ok, method: "" })).toThrow(Error);
    expect(() => serializeRequestHead({ ...ok, target: "/a b" })).toThrow(Error);
    expect(() => serializeRequestHead({ ...ok, target: "/a\r\nX: y" })).toThrow(Error);
    expect(() => serializeRequestHead({ ...ok, target: "" })).toThrow(Error);
    expect(() => serializeRequestHead({ ...ok, version: "HTTP/2.0" as "HTTP/1.1" })).toThrow(Error);
  });
});

describe("serializeResponseHead", () => {
  test("standard and custom reason phrases are written as given", () => {
    expect(text(serializeResponseHead({ version: "HTTP/1.1", status: 200, reason: "OK", headers: [["A", "b"]] }))).toBe(
      "HTTP/1.1 200 OK\r\nA: b\r\n\r\n",
    );
    expect(text(serializeResponseHead({ version: "HTTP/1.1", status: 203, reason: "Mocked Up", headers: [] }))).toBe(
      "HTTP/1.1 203 Mocked Up\r\n\r\n",
    );
  });

  test("an empty reason keeps the SP after the status code", () => {
    expect(text(serializeResponseHead({ version: "HTTP/1.0", status: 204, reason: "", headers: [] }))).toBe(
      "HTTP/1.0 204 \r\n\r\n",
    );
  });

  test("invalid status, reason or header values are refused", () => {
    const ok: ResponseHead = { version: "HTTP/1.1", status: 200, reason: "OK", headers: [] };
    for (const status of [99, 1000, 200.5, NaN]) expect(() => serializeResponseHead({ ...ok, status })).toThrow(Error);
    expect(() => serializeResponseHead({ ...ok, reason: "OK\r\nSet-Cookie: a=b" })).toThrow(Error);
    expect(() => serializeResponseHead({ ...ok, headers: [["Location", "/x\r\n\r\n<html>"]] })).toThrow(Error);
  });
});

describe("round trips", () => {
  const requests = [
    "GET /index.html?a=1 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: curl/8.0\r\nAccept: */*\r\n\r\n",
    "POST /upload HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nX-Dup: 1\r\nx-dup: 2\r\n\r\n",
    "CONNECT [2001:db8::1]:443 HTTP/1.1\r\nHost: [2001:db8::1]:443\r\nProxy-Authorization: Basic eDp5\r\n\r\n",
    "GET http://example.com/p?q HTTP/1.0\r\nX-Empty: \r\nX-Obs: \u00e9\u00ff\u0080\r\n\r\n",
    "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
  ];
  for (const raw of requests) {
    test(`request: ${raw.slice(0, raw.indexOf("\r"))}`, () => {
      const first = parseRequestHead(bytes(raw))!;
      const wire = serializeRequestHead(first.head);
      expect(text(wire)).toBe(raw);
      const second = parseRequestHead(wire)!;
      expect(second.head).toEqual(first.head);
      expect(second.end).toBe(wire.length);
    });
  }

  const responses = [
    "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: 0\r\n\r\n",
    "HTTP/1.1 203 Mocked Up\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n",
    "HTTP/1.0 404 \r\n\r\n",
  ];
  for (const raw of responses) {
    test(`response: ${raw.slice(0, raw.indexOf("\r"))}`, () => {
      const first = parseResponseHead(bytes(raw))!;
      const wire = serializeResponseHead(first.head);
      expect(text(wire)).toBe(raw);
      expect(parseResponseHead(wire)!.head).toEqual(first.head);
    });
  }

  test("normalising round trip: trimmed values, reason-less status line, unfolded response header", () => {
    const req = parseRequestHead(bytes("GET / HTTP/1.1\r\nX:   padded\t\r\n\r\n"))!;
    expect(text(serializeRequestHead(req.head))).toBe("GET / HTTP/1.1\r\nX: padded\r\n\r\n");
    const res = parseResponseHead(bytes("HTTP/1.1 200\r\nX-A: one\r\n two\r\n\r\n"))!;
    const wire = serializeResponseHead(res.head);
    expect(text(wire)).toBe("HTTP/1.1 200 \r\nX-A: one two\r\n\r\n");
    const { raw: _a, ...reparsed } = parseResponseHead(wire)!.head;
    const { raw: _b, ...original } = res.head;
    expect(reparsed).toEqual(original);
  });
});

describe("requestHeadWithFields (a new request line before field lines as received)", () => {
  const received = bytes("GET http://a.test/p?q=1 HTTP/1.1\r\nHost: a.test\r\nx-b:  2\r\n\r\n");
  const raw = parseRequestHead(received)!.head.raw!;

  test("joins the request line and the field lines byte for byte (long field blocks too)", () => {
    const long = bytes(`GET / HTTP/1.1\r\nHost: a.test\r\nX-Long: ${"v".repeat(2000)}\r\n\r\n`);
    const longRaw = parseRequestHead(long)!.head.raw!;
    expect(text(requestHeadWithFields("PUT", "/l", longRaw)!)).toBe(`PUT /l HTTP/1.1\r\nHost: a.test\r\nX-Long: ${"v".repeat(2000)}\r\n\r\n`);
    expect(text(requestHeadWithFields("GET", "/p?q=1", raw)!)).toBe("GET /p?q=1 HTTP/1.1\r\nHost: a.test\r\nx-b:  2\r\n\r\n");
  });

  test("leaves anything unusual in the method or target to serializeRequestHead (null)", () => {
    expect(requestHeadWithFields("get", "/", raw)).toBeNull();
    expect(requestHeadWithFields("", "/", raw)).toBeNull();
    expect(requestHeadWithFields("GET", "", raw)).toBeNull();
    expect(requestHeadWithFields("GET", "/a b", raw)).toBeNull();
    expect(requestHeadWithFields("GET", "/a\r\nX: y", raw)).toBeNull();
    expect(requestHeadWithFields("GET", "/caf\u00e9\u2603", raw)).toBeNull();
    expect(text(requestHeadWithFields("GET", "/caf\u00e9", raw)!)).toStartWith("GET /caf\u00e9 HTTP/1.1\r\n");
  });
});

describe("chunked encoding", () => {
  test("encodeChunk writes hex size, CRLF, data, CRLF", () => {
    expect(text(encodeChunk(bytes("hello")))).toBe("5\r\nhello\r\n");
    expect(text(encodeChunk(new Uint8Array(255).fill(0x61)))).toBe("ff\r\n" + "a".repeat(255) + "\r\n");
    expect(text(encodeChunk(new Uint8Array(4096).fill(0x62)).subarray(0, 6))).toBe("1000\r\n");
  });

  test("an empty chunk encodes to nothing (it would otherwise end the body)", () => {
    expect(encodeChunk(new Uint8Array(0)).length).toBe(0);
  });

  test("LAST_CHUNK, CRLF and chunkHeader", () => {
    expect(text(LAST_CHUNK)).toBe("0\r\n\r\n");
    expect(text(CRLF)).toBe("\r\n");
    expect(text(chunkHeader(26))).toBe("1a\r\n");
  });

  test("serializeTrailers ends the body with trailer fields", () => {
    expect(text(serializeTrailers([]))).toBe("0\r\n\r\n");
    expect(text(serializeTrailers([["X-Sum", "abc"]]))).toBe("0\r\nX-Sum: abc\r\n\r\n");
    expect(() => serializeTrailers([["X", "a\nb"]])).toThrow(Error);
  });

  test("encode → ChunkedDecoder round trip", () => {
    const parts = [bytes("first"), bytes(""), new Uint8Array(1000).fill(7), bytes("\r\n0\r\n\r\n")];
    const wire: number[] = [];
    for (const p of parts) wire.push(...encodeChunk(p));
    wire.push(...serializeTrailers([["Checksum", "42"]]));
    const d = new ChunkedDecoder();
    const r = d.push(new Uint8Array(wire));
    expect(r.done).toBe(true);
    expect(r.rest).toBeNull();
    const out: number[] = [];
    for (const s of r.data) out.push(...s);
    const expected: number[] = [];
    for (const p of parts) expected.push(...p);
    expect(out).toEqual(expected);
    expect(d.trailers).toEqual([["Checksum", "42"]]);
  });
});

describe("statusReason", () => {
  test("standard phrases", () => {
    expect(statusReason(200)).toBe("OK");
    expect(statusReason(101)).toBe("Switching Protocols");
    expect(statusReason(204)).toBe("No Content");
    expect(statusReason(304)).toBe("Not Modified");
    expect(statusReason(404)).toBe("Not Found");
    expect(statusReason(407)).toBe("Proxy Authentication Required");
    expect(statusReason(413)).toBe("Content Too Large");
    expect(statusReason(431)).toBe("Request Header Fields Too Large");
    expect(statusReason(502)).toBe("Bad Gateway");
    expect(statusReason(505)).toBe("HTTP Version Not Supported");
  });

  test("unknown codes give an empty phrase", () => {
    expect(statusReason(299)).toBe("");
    expect(statusReason(799)).toBe("");
  });
});
