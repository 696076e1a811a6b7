import { describe, expect, test } from "bun:test";
import { HttpParseError, parseRequestHead, parseResponseHead, parseTarget, requestFraming, responseFraming } from "../../../src/core/http1/index.ts";
import { F_CONNECTION, F_CONTENT_LENGTH, F_EXPECT, F_HOST, F_OTHER_HOP, F_TRANSFER_ENCODING, F_UPGRADE } from "../../../src/core/http1/fields.ts";

const bytes = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, "latin1"));

/** A parsed head without its `raw` bytes and `present` bits (checked on their own below). */
function fieldsOf<T extends { raw?: unknown; present?: number }>(head: T): Omit<T, "raw" | "present"> {
  const { raw: _raw, present: _present, ...rest } = head;
  return rest;
}

const latin1 = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("latin1");

/** Run fn and return the HttpParseError status it throws (fails the test if it does not throw one). */
function errorStatus(fn: () => unknown): number {
  try {
    fn();
  } catch (e) {
    if (e instanceof HttpParseError) return e.status;
    throw e;
  }
  throw new Error("expected an HttpParseError, nothing was thrown");
}

describe("parseRequestHead: valid requests", () => {
  test("simple GET", () => {
    const raw = "GET /index.html?a=1&b=2 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: curl/8.0\r\nAccept: */*\r\n\r\n";
    const r = parseRequestHead(bytes(raw))!;
    expect(r).not.toBeNull();
    expect(r.end).toBe(raw.length);
    expect(fieldsOf(r.head)).toEqual({
      method: "GET",
      target: "/index.html?a=1&b=2",
      version: "HTTP/1.1",
      headers: [
        ["Host", "example.com"],
        ["User-Agent", "curl/8.0"],
        ["Accept", "*/*"],
      ],
    });
  });

  test("POST with Content-Length: end points at the body", () => {
    const head = "POST /submit HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n";
    const r = parseRequestHead(bytes(head + '{"hello":"x"}'))!;
    expect(r.end).toBe(head.length);
    expect(r.head.method).toBe("POST");
    expect(r.head.headers[2]).toEqual(["Content-Length", "13"]);
  });

  test("header casing and order are preserved, repeated headers kept", () => {
    const r = parseRequestHead(
      bytes("GET / HTTP/1.1\r\nhOsT: a\r\nX-Dup: 1\r\nx-dup: 2\r\nCookie: a=1\r\nCookie: b=2\r\n\r\n"),
    )!;
    expect(r.head.headers).toEqual([
      ["hOsT", "a"],
      ["X-Dup", "1"],
      ["x-dup", "2"],
      ["Cookie", "a=1"],
      ["Cookie", "b=2"],
    ]);
  });

  test("field values are trimmed of SP/HT but inner whitespace is kept", () => {
    const r = parseRequestHead(bytes("GET / HTTP/1.1\r\nX-A: \t a \t b \t\r\nX-Empty:\r\nX-Blank:   \r\n\r\n"))!;
    expect(r.head.headers).toEqual([
      ["X-A", "a \t b"],
      ["X-Empty", ""],
      ["X-Blank", ""],
    ]);
  });

  test("obs-text bytes in values survive as latin1 code points", () => {
    const r = parseRequestHead(new Uint8Array([...bytes("GET / HTTP/1.1\r\nX: "), 0x80, 0x9f, 0xe9, 0xff, ...bytes("\r\n\r\n")]))!;
    const v = r.head.headers[0][1];
    expect([...v].map((c) => c.charCodeAt(0))).toEqual([0x80, 0x9f, 0xe9, 0xff]);
  });

  test("leading empty lines are skipped and counted in end", () => {
    const raw = "\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
    const r = parseRequestHead(bytes(raw))!;
    expect(r.head.method).toBe("GET");
    expect(r.end).toBe(raw.length);
  });

  test("HTTP/1.0 request without headers", () => {
    const r = parseRequestHead(bytes("GET / HTTP/1.0\r\n\r\n"))!;
    expect(fieldsOf(r.head)).toEqual({ method: "GET", target: "/", version: "HTTP/1.0", headers: [] });
    expect(r.end).toBe(18);
  });

  test("absolute-form target", () => {
    const r = parseRequestHead(bytes("GET http://example.com:8080/p?q=1 HTTP/1.1\r\nHost: example.com:8080\r\n\r\n"))!;
    expect(r.head.target).toBe("http://example.com:8080/p?q=1");
  });

  test("CONNECT with bracketed IPv6 authority", () => {
    const r = parseRequestHead(bytes("CONNECT [2001:db8::1]:443 HTTP/1.1\r\nHost: [2001:db8::1]:443\r\n\r\n"))!;
    expect(r.head.method).toBe("CONNECT");
    expect(r.head.target).toBe("[2001:db8::1]:443");
  });

  test("extension methods with hyphen (WebDAV, SSDP) are tokens", () => {
    expect(parseRequestHead(bytes("VERSION-CONTROL /x HTTP/1.1\r\n\r\n"))!.head.method).toBe("VERSION-CONTROL");
    expect(parseRequestHead(bytes("M-SEARCH * HTTP/1.1\r\n\r\n"))!.head.method).toBe("M-SEARCH");
  });

  test("pipelined requests in one buffer", () => {
    const one = "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n";
    const two = "POST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc";
    const three = "GET /3 HTTP/1.1\r\nHost: a\r\n\r\n";
    const buf = bytes(one + two + three);
    const r1 = parseRequestHead(buf)!;
    expect(r1.head.target).toBe("/1");
    expect(r1.end).toBe(one.length);
    const r2 = parseRequestHead(buf.subarray(r1.end))!;
    expect(r2.head.target).toBe("/2");
    const bodyStart = r1.end + r2.end;
    expect(Buffer.from(buf.subarray(bodyStart, bodyStart + 3)).toString()).toBe("abc");
    const r3 = parseRequestHead(buf.subarray(bodyStart + 3))!;
    expect(r3.head.target).toBe("/3");
    expect(bodyStart + 3 + r3.end).toBe(buf.length);
  });

  test("works on a subarray with a non-zero byteOffset", () => {
    const big = bytes("xxxxGET /off HTTP/1.1\r\nA: b\r\n\r\n");
    const r = parseRequestHead(big.subarray(4))!;
    expect(r.head.target).toBe("/off");
    expect(r.head.headers).toEqual([["A", "b"]]);
  });
});

describe("parseRequestHead: incomplete input", () => {
  const raw = "\r\nPUT /upload HTTP/1.1\r\nHost: example.com\r\nContent-Length: 5\r\nX-Long: abcdefghijklmnop\r\n\r\nhello";
  const headEnd = raw.indexOf("\r\n\r\n", 2) + 4;

  test("returns null at every split point before the end of head, the same head after", () => {
    const full = bytes(raw);
    const expected = parseRequestHead(full)!;
    expect(expected.end).toBe(headEnd);
    for (let cut = 0; cut <= full.length; cut++) {
      const r = parseRequestHead(full.slice(0, cut));
      if (cut < headEnd) {
        expect(r).toBeNull();
      } else {
        expect(r!.end).toBe(expected.end);
        expect(fieldsOf(r!.head)).toEqual(fieldsOf(expected.head));
        expect(r!.head.raw!.fields).toEqual(expected.head.raw!.fields);
      }
    }
  });

  test("empty buffer and lone CRs are incomplete", () => {
    expect(parseRequestHead(new Uint8Array(0))).toBeNull();
    expect(parseRequestHead(bytes("\r"))).toBeNull();
    expect(parseRequestHead(bytes("\r\n"))).toBeNull();
    expect(parseRequestHead(bytes("GET / HTTP/1.1\r\n\r"))).toBeNull();
  });
});

describe("parseRequestHead: limits", () => {
  test("70 KB head without an end → 431", () => {
    const raw = "GET / HTTP/1.1\r\n" + "X-Filler: " + "a".repeat(70 * 1024);
    expect(errorStatus(() => parseRequestHead(bytes(raw)))).toBe(431);
  });

  test("70 KB complete head → 431", () => {
    const raw = "GET / HTTP/1.1\r\n" + "X-Filler: " + "a".repeat(70 * 1024) + "\r\n\r\n";
    expect(errorStatus(() => parseRequestHead(bytes(raw)))).toBe(431);
  });

  test("a head of exactly maxHead bytes is accepted, one more byte is not", () => {
    const raw = "GET / HTTP/1.1\r\nX: abc\r\n\r\n";
    expect(parseRequestHead(bytes(raw), raw.length)!.end).toBe(raw.length);
    expect(errorStatus(() => parseRequestHead(bytes(raw), raw.length - 1))).toBe(431);
    // incomplete and still under the limit: wait
    expect(parseRequestHead(bytes(raw.slice(0, 10)), raw.length)).toBeNull();
    // incomplete and at the limit: cannot complete any more
    expect(errorStatus(() => parseRequestHead(bytes(raw.slice(0, 10)), 10))).toBe(431);
  });
});

describe("parseRequestHead: hostile corpus", () => {
  const cases: [string, string, number][] = [
    ["header without colon", "GET / HTTP/1.1\r\nHost example.com\r\n\r\n", 400],
    ["space before colon", "GET / HTTP/1.1\r\nHost : example.com\r\n\r\n", 400],
    ["tab before colon", "GET / HTTP/1.1\r\nHost\t: example.com\r\n\r\n", 400],
    ["obs-fold", "GET / HTTP/1.1\r\nX-A: one\r\n two\r\n\r\n", 400],
    ["obs-fold with tab", "GET / HTTP/1.1\r\nX-A: one\r\n\ttwo\r\n\r\n", 400],
    ["first header line folded", "GET / HTTP/1.1\r\n X-A: one\r\n\r\n", 400],
    ["bare LF terminating headers", "GET / HTTP/1.1\nHost: a\n\n", 400],
    ["bare LF inside head", "GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n", 400],
    ["bare LF as final empty line", "GET / HTTP/1.1\r\nHost: a\r\n\n", 400],
    ["leading bare LF", "\nGET / HTTP/1.1\r\n\r\n", 400],
    ["bare CR in value", "GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", 400],
    ["bare CR in request line", "GET /\r HTTP/1.1\r\n\r\n", 400],
    ["NUL in value", "GET / HTTP/1.1\r\nX: a\u0000b\r\n\r\n", 400],
    ["control char in value", "GET / HTTP/1.1\r\nX: a\u0001b\r\n\r\n", 400],
    ["DEL in value", "GET / HTTP/1.1\r\nX: a\u007fb\r\n\r\n", 400],
    ["invalid char in header name", "GET / HTTP/1.1\r\nX(A): b\r\n\r\n", 400],
    ["non-ASCII header name", "GET / HTTP/1.1\r\nX\u00e9: b\r\n\r\n", 400],
    ["empty header name", "GET / HTTP/1.1\r\n: b\r\n\r\n", 400],
    ["HTTP/2.0 request line", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505],
    ["HTTP/0.9 version", "GET / HTTP/0.9\r\n\r\n", 505],
    ["HTTP/1.2 version", "GET / HTTP/1.2\r\n\r\n", 505],
    ["h2 prior-knowledge preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505],
    ["lowercase method", "get / HTTP/1.1\r\nHost: a\r\n\r\n", 400],
    ["mixed-case method", "Get / HTTP/1.1\r\nHost: a\r\n\r\n", 400],
    ["invalid method token", "G@T / HTTP/1.1\r\nHost: a\r\n\r\n", 400],
    ["method with non-ASCII", "G\u00c9T / HTTP/1.1\r\n\r\n", 400],
    ["empty method", " / HTTP/1.1\r\n\r\n", 400],
    ["double space after method", "GET  / HTTP/1.1\r\n\r\n", 400],
    ["tab as separator", "GET\t/ HTTP/1.1\r\n\r\n", 400],
    ["missing version", "GET /\r\n\r\n", 400],
    ["lowercase version", "GET / http/1.1\r\n\r\n", 400],
    ["trailing space after version", "GET / HTTP/1.1 \r\n\r\n", 400],
    ["space in target", "GET /a b HTTP/1.1\r\n\r\n", 400],
    ["control char in target", "GET /a\u0001 HTTP/1.1\r\n\r\n", 400],
    ["tab between target and version", "GET /a\tHTTP/1.1\r\n\r\n", 400],
    ["control char between target and version", "GET /a\u0001HTTP/1.1\r\n\r\n", 400],
    ["garbage request line", "HELLO\r\n\r\n", 400],
    ["duplicate Host", "GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", 400],
  ];
  for (const [name, raw, status] of cases) {
    test(`${name} → ${status}`, () => {
      expect(errorStatus(() => parseRequestHead(bytes(raw)))).toBe(status);
    });
  }

  test("errors are HttpParseError instances with a message", () => {
    try {
      parseRequestHead(bytes("GET / HTTP/1.1\r\nBad Header\r\n\r\n"));
      throw new Error("not thrown");
    } catch (e) {
      expect(e).toBeInstanceOf(HttpParseError);
      expect(e).toBeInstanceOf(Error);
      expect((e as HttpParseError).message.length).toBeGreaterThan(0);
      expect((e as HttpParseError).status).toBe(400);
    }
  });
});

describe("parseResponseHead", () => {
  test("200 OK with headers and a body after the head", () => {
    const head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\n";
    const r = parseResponseHead(bytes(head + "hi"))!;
    expect(r.end).toBe(head.length);
    expect(fieldsOf(r.head)).toEqual({
      version: "HTTP/1.1",
      status: 200,
      reason: "OK",
      headers: [
        ["Content-Type", "text/plain"],
        ["Content-Length", "2"],
      ],
    });
  });

  test("custom and multi-word reason phrases are kept verbatim", () => {
    expect(parseResponseHead(bytes("HTTP/1.1 203 Mocked Up\r\n\r\n"))!.head.reason).toBe("Mocked Up");
    expect(parseResponseHead(bytes("HTTP/1.0 404 Not  Found \r\n\r\n"))!.head.reason).toBe("Not  Found ");
  });

  test("empty reason, with and without the SP", () => {
    const a = parseResponseHead(bytes("HTTP/1.1 200 \r\nX: 1\r\n\r\n"))!;
    expect(a.head.status).toBe(200);
    expect(a.head.reason).toBe("");
    const b = parseResponseHead(bytes("HTTP/1.1 200\r\nX: 1\r\n\r\n"))!;
    expect(b.head.status).toBe(200);
    expect(b.head.reason).toBe("");
    expect(b.head.headers).toEqual([["X", "1"]]);
  });

  test("HTTP/1.0 and 1xx responses", () => {
    expect(parseResponseHead(bytes("HTTP/1.0 304 Not Modified\r\n\r\n"))!.head.version).toBe("HTTP/1.0");
    expect(parseResponseHead(bytes("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n"))!.end).toBe(25);
  });

  test("obs-fold in a response is unfolded into one SP", () => {
    const r = parseResponseHead(bytes("HTTP/1.1 200 OK\r\nX-A: one\r\n   two\r\n\tthree \r\nX-B: b\r\n\r\n"))!;
    expect(r.head.headers).toEqual([
      ["X-A", "one two three"],
      ["X-B", "b"],
    ]);
  });

  test("whitespace before the colon in a response is removed", () => {
    const r = parseResponseHead(bytes("HTTP/1.1 200 OK\r\nServer : x\r\n\r\n"))!;
    expect(r.head.headers).toEqual([["Server", "x"]]);
  });

  test("incomplete response heads return null at every split point", () => {
    const raw = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nX: y\r\n\r\n";
    const full = bytes(raw);
    const expected = parseResponseHead(full)!;
    for (let cut = 0; cut < full.length; cut++) expect(parseResponseHead(full.slice(0, cut))).toBeNull();
    expect(expected.end).toBe(raw.length);
  });

  const hostile: [string, string, number][] = [
    ["bare LF", "HTTP/1.1 200 OK\nContent-Length: 0\n\n", 502],
    ["NUL in value", "HTTP/1.1 200 OK\r\nX: \u0000\r\n\r\n", 502],
    ["header without colon", "HTTP/1.1 200 OK\r\nNoColon\r\n\r\n", 502],
    ["fold before any header", "HTTP/1.1 200 OK\r\n folded\r\n\r\n", 502],
    ["two-digit status", "HTTP/1.1 20 OK\r\n\r\n", 502],
    ["four-digit status", "HTTP/1.1 2000 OK\r\n\r\n", 502],
    ["status below 100", "HTTP/1.1 099 Weird\r\n\r\n", 502],
    ["non-digit status", "HTTP/1.1 2x0 OK\r\n\r\n", 502],
    ["HTTP/2.0 status line", "HTTP/2.0 200 OK\r\n\r\n", 502],
    ["not a status line", "SSH-2.0-OpenSSH\r\n\r\n", 502],
    ["control char in reason", "HTTP/1.1 200 O\u0001K\r\n\r\n", 502],
    ["oversized head", "HTTP/1.1 200 OK\r\nX: " + "a".repeat(70 * 1024) + "\r\n\r\n", 431],
  ];
  for (const [name, raw, status] of hostile) {
    test(`hostile response: ${name} → ${status}`, () => {
      expect(errorStatus(() => parseResponseHead(bytes(raw)))).toBe(status);
    });
  }
});

describe("raw heads (kept for forwarding a head nobody changed)", () => {
  const span = (b: Uint8Array, from: number, to: number) => latin1(b.subarray(from, to));

  test("a request's raw head: where it lies in the bytes (after any leading empty lines), its field lines, its list", () => {
    const head = "POST /x HTTP/1.1\r\nHost: a.test\r\ncontent-length:3\r\nX-Pad:  v  \r\n\r\n";
    const buf = bytes("\r\n" + head + "abc");
    const raw = parseRequestHead(buf)!.head.raw!;
    expect(raw.buf).toBe(buf);
    expect(span(raw.buf, raw.start, raw.end)).toBe(head);
    expect(span(raw.buf, raw.fieldsAt, raw.end)).toBe("Host: a.test\r\ncontent-length:3\r\nX-Pad:  v  \r\n\r\n");
    expect(raw.fields).toEqual(["Host", "a.test", "content-length", "3", "X-Pad", "v"]);
  });

  test("a head without fields: fieldsAt points at the empty line", () => {
    const raw = parseRequestHead(bytes("GET / HTTP/1.1\r\n\r\n"))!.head.raw!;
    expect(span(raw.buf, raw.fieldsAt, raw.end)).toBe("\r\n");
    expect(raw.fields).toEqual([]);
  });

  test("a response's raw head includes its status line", () => {
    const head = "HTTP/1.1 201 Made It\r\nx-a: 1\r\nContent-Length: 0\r\n\r\n";
    const raw = parseResponseHead(bytes(head + "next"))!.head.raw!;
    expect(span(raw.buf, raw.start, raw.end)).toBe(head);
    expect(raw.fieldsAt).toBe("HTTP/1.1 201 Made It\r\n".length);
    expect(raw.fields).toEqual(["x-a", "1", "Content-Length", "0"]);
  });

  test("a response repaired by lenient parsing has no raw head (its bytes no longer say what the list says)", () => {
    expect(parseResponseHead(bytes("HTTP/1.1 200 OK\r\nX-A: one\r\n two\r\n\r\n"))!.head.raw).toBeNull();
    expect(parseResponseHead(bytes("HTTP/1.1 200 OK\r\nX-A : one\r\n\r\n"))!.head.raw).toBeNull();
    expect(parseResponseHead(bytes("HTTP/1.1 200 OK\r\nX-A: one\r\n\r\n"))!.head.raw).not.toBeNull();
  });
});

describe("present: the framing and hop-by-hop fields a head holds, found while parsing", () => {
  const presentOf = (fields: string) => parseRequestHead(bytes(`GET / HTTP/1.1\r\n${fields}\r\n`))!.head.present;

  test("one bit per name, whatever its casing; other names set none", () => {
    expect(presentOf("")).toBe(0);
    expect(presentOf("Accept: */*\r\nX-Host: a\r\nContent-Type: x\r\nHosts: b\r\n")).toBe(0);
    expect(presentOf("HOST: a\r\n")).toBe(F_HOST);
    expect(presentOf("content-LENGTH: 1\r\n")).toBe(F_CONTENT_LENGTH);
    expect(presentOf("Transfer-Encoding: chunked\r\n")).toBe(F_TRANSFER_ENCODING);
    expect(presentOf("Connection: close\r\nExpect: 100-continue\r\nUpgrade: websocket\r\n")).toBe(F_CONNECTION | F_EXPECT | F_UPGRADE);
    for (const name of ["Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "TE", "Trailer"]) {
      expect(presentOf(`${name}: x\r\n`)).toBe(F_OTHER_HOP);
    }
  });

  test("a second Host field in any casing refuses the request (RFC 9112 3.2); responses may repeat it", () => {
    for (const fields of ["Host: a\r\nHost: b\r\n", "HOST: a\r\nX: y\r\nhost: a\r\n"]) {
      expect(() => parseRequestHead(bytes(`GET / HTTP/1.1\r\n${fields}\r\n`))).toThrow("multiple Host headers");
    }
    expect(parseResponseHead(bytes("HTTP/1.1 200 OK\r\nHost: a\r\nHost: b\r\n\r\n"))!.head.headers.length).toBe(2);
  });

  test("a response's bits leave out the repair flag", () => {
    expect(parseResponseHead(bytes("HTTP/1.1 200 OK\r\nX-A: one\r\n two\r\nContent-Length: 0\r\n\r\n"))!.head.present).toBe(F_CONTENT_LENGTH);
  });

  test("framing decided with the bits is the framing decided by scanning the list", () => {
    const requests = [
      "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: a\r\ncontent-length: 12\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 007\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
    ];
    for (const r of requests) {
      const head = parseRequestHead(bytes(r))!.head;
      expect(requestFraming(head)).toEqual(requestFraming({ ...head, present: undefined }));
    }
    const responses = [
      "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n",
      "HTTP/1.1 200 OK\r\nX: y\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
      "HTTP/1.1 204 No Content\r\n\r\n",
    ];
    for (const r of responses) {
      const head = parseResponseHead(bytes(r))!.head;
      expect(responseFraming("GET", head)).toEqual(responseFraming("GET", { ...head, present: undefined }));
    }
    const bad = parseRequestHead(bytes("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1x\r\n\r\n"))!.head;
    expect(errorStatus(() => requestFraming(bad))).toBe(400);
    const conflict = parseRequestHead(bytes("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"))!.head;
    expect(errorStatus(() => requestFraming(conflict))).toBe(400);
  });
});

describe("parseTarget", () => {
  test("back-to-back targets on one authority give the same answers as fresh parses (the last authority is remembered)", () => {
    const seq = ["http://a.test:8080/x", "http://a.test:8080?q=1", "http://a.test:8080", "http://a.test:8080#f", "http://a.test:8080/y/z"];
    const got = seq.map((t) => parseTarget("GET", t));
    expect(got.map((t) => [t.form, t.scheme, t.host, t.port, t.path])).toEqual([
      ["absolute", "http", "a.test", 8080, "/x"],
      ["absolute", "http", "a.test", 8080, "/?q=1"],
      ["absolute", "http", "a.test", 8080, "/"],
      ["absolute", "http", "a.test", 8080, "/#f"],
      ["absolute", "http", "a.test", 8080, "/y/z"],
    ]);
    // a longer authority that starts with the remembered one is parsed afresh
    expect(errorStatus(() => parseTarget("GET", "http://a.test:80801/y"))).toBe(400);
    expect(errorStatus(() => parseTarget("GET", "http://a.test:8080.evil/p"))).toBe(400);
    parseTarget("GET", "http://a.test:8080/x");
    expect(errorStatus(() => parseTarget("GET", "http://a.test:8080@evil/p"))).toBe(400);
    expect(parseTarget("GET", "http://a.test:80").port).toBe(80);
    expect(parseTarget("GET", "http://a.test:8080/x").port).toBe(8080);
  });

  test("origin-form", () => {
    expect(parseTarget("GET", "/a/b?c=d")).toEqual({ form: "origin", path: "/a/b?c=d" });
    expect(parseTarget("GET", "/")).toEqual({ form: "origin", path: "/" });
  });

  test("absolute-form with default and explicit ports", () => {
    expect(parseTarget("GET", "http://example.com/p?q")).toEqual({
      form: "absolute",
      scheme: "http",
      host: "example.com",
      port: 80,
      path: "/p?q",
    });
    expect(parseTarget("POST", "https://example.com:8443/x")).toEqual({
      form: "absolute",
      scheme: "https",
      host: "example.com",
      port: 8443,
      path: "/x",
    });
    expect(parseTarget("GET", "https://example.com")).toMatchObject({ port: 443, path: "/" });
    expect(parseTarget("GET", "ws://h/chat")).toMatchObject({ scheme: "ws", port: 80 });
    expect(parseTarget("GET", "wss://h/chat")).toMatchObject({ scheme: "wss", port: 443 });
    expect(parseTarget("GET", "HTTP://H.example?x=1")).toMatchObject({ scheme: "http", host: "H.example", path: "/?x=1" });
    expect(parseTarget("GET", "http://h:/p")).toMatchObject({ port: 80 });
    expect(parseTarget("GET", "http://[::1]:8080/p")).toMatchObject({ host: "::1", port: 8080, path: "/p" });
    expect(parseTarget("GET", "http://127.0.0.1/")).toMatchObject({ host: "127.0.0.1", port: 80 });
  });

  test("authority-form for CONNECT", () => {
    expect(parseTarget("CONNECT", "example.com:443")).toEqual({
      form: "authority",
      host: "example.com",
      port: 443,
      path: "",
    });
    expect(parseTarget("CONNECT", "[2001:db8::1]:8443")).toEqual({
      form: "authority",
      host: "2001:db8::1",
      port: 8443,
      path: "",
    });
    expect(parseTarget("CONNECT", "[::ffff:1.2.3.4]:443")).toMatchObject({ host: "::ffff:1.2.3.4" });
  });

  test("asterisk-form for OPTIONS", () => {
    expect(parseTarget("OPTIONS", "*")).toEqual({ form: "asterisk", path: "*" });
  });

  const invalid: [string, string][] = [
    ["CONNECT", "example.com"],
    ["CONNECT", "example.com:"],
    ["CONNECT", "example.com:0"],
    ["CONNECT", "example.com:65536"],
    ["CONNECT", "example.com:44x"],
    ["CONNECT", "example.com:443/path"],
    ["CONNECT", "/"],
    ["CONNECT", "http://example.com:443"],
    ["CONNECT", ":443"],
    ["CONNECT", "[::1]"],
    ["CONNECT", "[::1:443"],
    ["CONNECT", "[not-ipv6]:443"],
    ["CONNECT", "::1:443"],
    ["GET", "*"],
    ["GET", "example.com:443"],
    ["GET", "ftp://example.com/"],
    ["GET", "http:///path"],
    ["GET", "http://user:pw@example.com/"],
    ["GET", "http://exa mple.com/"],
    ["GET", "http://example.com:99999/"],
    ["GET", "index.html"],
  ];
  for (const [method, target] of invalid) {
    test(`invalid: ${method} ${target} → 400`, () => {
      expect(errorStatus(() => parseTarget(method, target))).toBe(400);
    });
  }
});

describe("field lines read in one pass (the line's end found by the value scan)", () => {
  const message = (raw: string, response = false): string => {
    try {
      if (response) parseResponseHead(bytes(raw));
      else parseRequestHead(bytes(raw));
    } catch (e) {
      return (e as Error).message;
    }
    return "parsed";
  };
  test("each malformed line is refused with the message naming its first bad byte", () => {
    expect(message("GET / HTTP/1.1\r\nX: a\r\r\n\r\n")).toBe("invalid character 0xd in header value");
    expect(message("GET / HTTP/1.1\r\nX: a\rb\r\n\r\n")).toBe("invalid character 0xd in header value");
    expect(message("GET / HTTP/1.1\r\nX: a \u0000 \r\n\r\n")).toBe("invalid character 0x0 in header value");
    expect(message("GET / HTTP/1.1\r\nNoColon\r\n\r\n")).toBe("header line without colon");
    expect(message("GET / HTTP/1.1\r\nX\rY: a\r\n\r\n")).toBe("invalid character 0xd in header name");
    expect(message("GET / HTTP/1.1\r\n\rX: a\r\n\r\n")).toBe("invalid character 0xd in header name");
    expect(message("GET / HTTP/1.1\r\nHost : a\r\n\r\n")).toBe("whitespace between header name and colon");
    expect(message("HTTP/1.1 200 OK\r\nX-A \r\n\r\n", true)).toBe("invalid header name");
  });
  test("empty and whitespace-only values, and whitespace around values, come out as before", () => {
    const { head } = parseRequestHead(bytes("GET / HTTP/1.1\r\nHost: a\r\nX-Empty:\r\nX-Blank: \t \r\nX-Pad: \t v a l \t\r\nX-Last:z\r\n\r\n"))!;
    expect(head.headers).toEqual([
      ["Host", "a"],
      ["X-Empty", ""],
      ["X-Blank", ""],
      ["X-Pad", "v a l"],
      ["X-Last", "z"],
    ]);
    const r = parseResponseHead(bytes("HTTP/1.1 200 OK\r\nX-A: one\r\n two\r\nContent-Length: 0\r\n\r\n"))!;
    expect(r.head.headers).toEqual([
      ["X-A", "one two"],
      ["Content-Length", "0"],
    ]);
  });
});
