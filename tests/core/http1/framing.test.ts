import { describe, expect, test } from "bun:test";
import {
  HttpParseError,
  parseRequestHead,
  parseResponseHead,
  requestFraming,
  responseFraming,
  type HeaderList,
  type RequestHead,
  type ResponseHead,
} from "../../../src/core/http1/index.ts";

const bytes = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, "latin1"));

function errorStatus(fn: () => unknown): number {
  try {
    fn();
  } catch (e) {
    if (e instanceof HttpParseError) return e.status;
    throw e;
  }
  throw new Error("expected an HttpParseError, nothing was thrown");
}

const req = (headers: HeaderList, version: RequestHead["version"] = "HTTP/1.1"): RequestHead => ({
  method: "POST",
  target: "/",
  version,
  headers,
});

const res = (status: number, headers: HeaderList, version: ResponseHead["version"] = "HTTP/1.1"): ResponseHead => ({
  version,
  status,
  reason: "",
  headers,
});

/** Parse a raw request head and compute its framing (the hostile corpus goes through the real parser). */
function framingOf(raw: string) {
  return requestFraming(parseRequestHead(bytes(raw))!.head);
}

describe("requestFraming: valid", () => {
  test("no Content-Length and no Transfer-Encoding → none", () => {
    expect(requestFraming(req([["Host", "a"]]))).toEqual({ kind: "none" });
    expect(requestFraming(req([], "HTTP/1.0"))).toEqual({ kind: "none" });
  });

  test("Content-Length → length", () => {
    expect(requestFraming(req([["Content-Length", "13"]]))).toEqual({ kind: "length", length: 13 });
    expect(requestFraming(req([["content-length", "0"]]))).toEqual({ kind: "length", length: 0 });
    expect(requestFraming(req([["Content-Length", "007"]]))).toEqual({ kind: "length", length: 7 });
    expect(requestFraming(req([["Content-Length", "5"]], "HTTP/1.0"))).toEqual({ kind: "length", length: 5 });
    expect(requestFraming(req([["Content-Length", String(Number.MAX_SAFE_INTEGER)]]))).toEqual({
      kind: "length",
      length: Number.MAX_SAFE_INTEGER,
    });
  });

  test("identical Content-Length values (list or repeated) are accepted", () => {
    expect(requestFraming(req([["Content-Length", "5, 5"]]))).toEqual({ kind: "length", length: 5 });
    expect(requestFraming(req([["Content-Length", "5,5,5"]]))).toEqual({ kind: "length", length: 5 });
    expect(
      requestFraming(
        req([
          ["Content-Length", "5"],
          ["content-length", "5"],
        ]),
      ),
    ).toEqual({ kind: "length", length: 5 });
  });

  test("Transfer-Encoding: chunked (any case) → chunked; any other coding before it → 501", () => {
    expect(requestFraming(req([["Transfer-Encoding", "chunked"]]))).toEqual({ kind: "chunked" });
    expect(requestFraming(req([["transfer-encoding", "Chunked"]]))).toEqual({ kind: "chunked" });
    for (const te of [[["Transfer-Encoding", "gzip, chunked"]], [["Transfer-Encoding", "gzip"], ["Transfer-Encoding", "chunked"]]] as HeaderList[]) {
      try {
        requestFraming(req(te));
        throw new Error("accepted");
      } catch (e) {
        expect(e).toBeInstanceOf(HttpParseError);
        expect((e as HttpParseError).status).toBe(501);
      }
    }
  });

  test("framing of parsed fixtures", () => {
    expect(framingOf("POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\n")).toEqual({ kind: "length", length: 4 });
    expect(framingOf("POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")).toEqual({ kind: "chunked" });
    expect(framingOf("GET /a HTTP/1.1\r\nHost: a\r\n\r\n")).toEqual({ kind: "none" });
  });
});

describe("requestFraming: hostile corpus", () => {
  const cases: [string, string, number][] = [
    ["CL + TE", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", 400],
    ["TE + CL (other order)", "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", 400],
    ["TE + CL 0", "Transfer-Encoding: chunked\r\nContent-Length: 0\r\n", 400],
    ["TE: chunked, identity", "Transfer-Encoding: chunked, identity\r\n", 400],
    ["TE: xchunked", "Transfer-Encoding: xchunked\r\n", 400],
    ["TE: chunkedx", "Transfer-Encoding: chunkedx\r\n", 400],
    ["TE: gzip (final coding not chunked)", "Transfer-Encoding: gzip\r\n", 400],
    ["TE: chunked then TE: gzip", "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n", 400],
    ["TE: chunked, chunked", "Transfer-Encoding: chunked, chunked\r\n", 400],
    ["TE: empty", "Transfer-Encoding: \r\n", 400],
    ["TE with parameters", 'Transfer-Encoding: chunked;q="1"\r\n', 400],
    ["TE: quoted chunked", 'Transfer-Encoding: "chunked"\r\n', 400],
    ["TE: unknown coding before chunked", "Transfer-Encoding: foo, chunked\r\n", 501],
    ["TE: identity, chunked", "Transfer-Encoding: identity, chunked\r\n", 501],
    ["Content-Length: 1, 2", "Content-Length: 1, 2\r\n", 400],
    ["two differing Content-Length headers", "Content-Length: 1\r\nContent-Length: 2\r\n", 400],
    ["Content-Length: -1", "Content-Length: -1\r\n", 400],
    ["Content-Length: +5", "Content-Length: +5\r\n", 400],
    ["Content-Length: 1 2 (space inside)", "Content-Length: 1 2\r\n", 400],
    ["Content-Length: 0x10", "Content-Length: 0x10\r\n", 400],
    ["Content-Length: 1.5", "Content-Length: 1.5\r\n", 400],
    ["Content-Length: 5e2", "Content-Length: 5e2\r\n", 400],
    ["Content-Length: empty", "Content-Length: \r\n", 400],
    ["Content-Length: 5, (empty element)", "Content-Length: 5,\r\n", 400],
    ["Content-Length beyond MAX_SAFE_INTEGER", "Content-Length: 9007199254740992\r\n", 400],
    ["Content-Length huge", "Content-Length: 99999999999999999999999999\r\n", 400],
  ];
  for (const [name, fields, status] of cases) {
    test(`${name} → ${status}`, () => {
      expect(errorStatus(() => framingOf(`POST / HTTP/1.1\r\nHost: a\r\n${fields}\r\n`))).toBe(status);
    });
  }

  test("any Transfer-Encoding in HTTP/1.0 → 400", () => {
    expect(errorStatus(() => framingOf("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"))).toBe(400);
  });
});

describe("responseFraming", () => {
  test("responses without a body", () => {
    expect(responseFraming("HEAD", res(200, [["Content-Length", "100"]]))).toEqual({ kind: "none" });
    expect(responseFraming("HEAD", res(200, [["Transfer-Encoding", "chunked"]]))).toEqual({ kind: "none" });
    expect(responseFraming("GET", res(100, []))).toEqual({ kind: "none" });
    expect(responseFraming("GET", res(101, [["Upgrade", "websocket"]]))).toEqual({ kind: "none" });
    expect(responseFraming("GET", res(103, []))).toEqual({ kind: "none" });
    expect(responseFraming("GET", res(204, [["Content-Length", "10"]]))).toEqual({ kind: "none" });
    expect(responseFraming("GET", res(304, [["Content-Length", "10"]]))).toEqual({ kind: "none" });
    expect(responseFraming("CONNECT", res(200, []))).toEqual({ kind: "none" });
    expect(responseFraming("CONNECT", res(299, [["Content-Length", "3"]]))).toEqual({ kind: "none" });
  });

  test("a non-2xx response to CONNECT has a body", () => {
    expect(responseFraming("CONNECT", res(407, [["Content-Length", "3"]]))).toEqual({ kind: "length", length: 3 });
    expect(responseFraming("CONNECT", res(502, []))).toEqual({ kind: "close" });
  });

  test("Transfer-Encoding: chunked as last coding → chunked", () => {
    expect(responseFraming("GET", res(200, [["Transfer-Encoding", "chunked"]]))).toEqual({ kind: "chunked" });
    expect(responseFraming("GET", res(200, [["Transfer-Encoding", "gzip, chunked"]]))).toEqual({ kind: "chunked" });
    expect(responseFraming("POST", res(500, [["transfer-encoding", "CHUNKED"]]))).toEqual({ kind: "chunked" });
  });

  test("Transfer-Encoding overrides Content-Length", () => {
    expect(
      responseFraming(
        "GET",
        res(200, [
          ["Content-Length", "10"],
          ["Transfer-Encoding", "chunked"],
        ]),
      ),
    ).toEqual({ kind: "chunked" });
  });

  test("other Transfer-Encoding → close", () => {
    expect(responseFraming("GET", res(200, [["Transfer-Encoding", "gzip"]]))).toEqual({ kind: "close" });
    expect(responseFraming("GET", res(200, [["Transfer-Encoding", "chunked, gzip"]]))).toEqual({ kind: "close" });
    expect(responseFraming("GET", res(200, [["Transfer-Encoding", "xchunked"]]))).toEqual({ kind: "close" });
    expect(responseFraming("GET", res(200, [["Transfer-Encoding", "chunked, chunked"]]))).toEqual({ kind: "close" });
    expect(responseFraming("GET", res(200, [["Transfer-Encoding", '"chunked"']]))).toEqual({ kind: "close" });
  });

  test("Transfer-Encoding in an HTTP/1.0 response → close", () => {
    expect(responseFraming("GET", res(200, [["Transfer-Encoding", "chunked"]], "HTTP/1.0"))).toEqual({ kind: "close" });
  });

  test("Content-Length → length, none of them → close", () => {
    expect(responseFraming("GET", res(200, [["Content-Length", "42"]]))).toEqual({ kind: "length", length: 42 });
    expect(responseFraming("GET", res(200, [["Content-Length", "42, 42"]]))).toEqual({ kind: "length", length: 42 });
    expect(responseFraming("GET", res(404, [["Content-Length", "0"]]))).toEqual({ kind: "length", length: 0 });
    expect(responseFraming("GET", res(200, []))).toEqual({ kind: "close" });
    expect(responseFraming("GET", res(200, [], "HTTP/1.0"))).toEqual({ kind: "close" });
  });

  test("invalid or conflicting Content-Length → 502", () => {
    for (const v of ["1, 2", "-1", "+5", "abc", "", "9007199254740992"]) {
      expect(errorStatus(() => responseFraming("GET", res(200, [["Content-Length", v]])))).toBe(502);
    }
    expect(
      errorStatus(() =>
        responseFraming(
          "GET",
          res(200, [
            ["Content-Length", "3"],
            ["Content-Length", "4"],
          ]),
        ),
      ),
    ).toBe(502);
  });

  test("framing of a parsed response fixture", () => {
    const r = parseResponseHead(bytes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"))!;
    expect(responseFraming("GET", r.head)).toEqual({ kind: "chunked" });
  });
});
