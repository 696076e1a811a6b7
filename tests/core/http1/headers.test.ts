import { describe, expect, test } from "bun:test";
import {
  getHeader,
  getHeaderAll,
  hasToken,
  removeHeader,
  setHeader,
  forwardableAsIs,
  parseRequestHead,
  stripHopByHop,
  unchangedFields,
  wantsKeepAlive,
  type HeaderList,
} from "../../../src/core/http1/index.ts";

const sample = (): HeaderList => [
  ["Host", "example.com"],
  ["Accept", "text/html"],
  ["X-Dup", "1"],
  ["Cookie", "a=1"],
  ["x-dup", "2"],
  ["X-DUP", "3"],
];

describe("getHeader / getHeaderAll", () => {
  test("case-insensitive, first match", () => {
    expect(getHeader(sample(), "host")).toBe("example.com");
    expect(getHeader(sample(), "X-DUP")).toBe("1");
    expect(getHeader(sample(), "missing")).toBeUndefined();
    expect(getHeader([["X", ""]], "x")).toBe("");
  });

  test("all values in wire order", () => {
    expect(getHeaderAll(sample(), "x-dup")).toEqual(["1", "2", "3"]);
    expect(getHeaderAll(sample(), "missing")).toEqual([]);
  });
});

describe("setHeader", () => {
  test("replaces all, keeping the position of the first", () => {
    const h = sample();
    setHeader(h, "x-Dup", "new");
    expect(h).toEqual([
      ["Host", "example.com"],
      ["Accept", "text/html"],
      ["x-Dup", "new"],
      ["Cookie", "a=1"],
    ]);
  });

  test("appends when absent", () => {
    const h = sample();
    setHeader(h, "Via", "1.1 tapwire");
    expect(h.length).toBe(7);
    expect(h[6]).toEqual(["Via", "1.1 tapwire"]);
  });

  test("does not mutate the replaced tuple (it may be shared)", () => {
    const tuple: [string, string] = ["A", "old"];
    const h: HeaderList = [tuple];
    setHeader(h, "a", "new");
    expect(tuple).toEqual(["A", "old"]);
    expect(h).toEqual([["a", "new"]]);
  });
});

describe("removeHeader", () => {
  test("removes every occurrence and reports whether any was removed", () => {
    const h = sample();
    expect(removeHeader(h, "X-DUP")).toBe(true);
    expect(h).toEqual([
      ["Host", "example.com"],
      ["Accept", "text/html"],
      ["Cookie", "a=1"],
    ]);
    expect(removeHeader(h, "x-dup")).toBe(false);
    expect(h.length).toBe(3);
  });
});

describe("hasToken", () => {
  test("comma lists across repeated headers, case-insensitive, whitespace tolerant", () => {
    const h: HeaderList = [
      ["Connection", "keep-alive , Upgrade"],
      ["connection", "X-Foo"],
      ["Upgrade", "websocket"],
    ];
    expect(hasToken(h, "connection", "upgrade")).toBe(true);
    expect(hasToken(h, "Connection", "KEEP-ALIVE")).toBe(true);
    expect(hasToken(h, "connection", "x-foo")).toBe(true);
    expect(hasToken(h, "connection", "close")).toBe(false);
    expect(hasToken(h, "upgrade", "WebSocket")).toBe(true);
    expect(hasToken(h, "missing", "x")).toBe(false);
  });

  test("matches whole tokens only", () => {
    const h: HeaderList = [["Connection", "keep-alive-ish, closed"]];
    expect(hasToken(h, "connection", "keep-alive")).toBe(false);
    expect(hasToken(h, "connection", "close")).toBe(false);
  });
});

describe("stripHopByHop", () => {
  test("removes the fixed hop-by-hop set and fields named in Connection", () => {
    const h: HeaderList = [
      ["Host", "a"],
      ["Connection", "keep-alive, X-Private, Upgrade"],
      ["Keep-Alive", "timeout=5"],
      ["Proxy-Connection", "keep-alive"],
      ["Proxy-Authenticate", "Basic"],
      ["Proxy-Authorization", "Basic eDp5"],
      ["TE", "trailers"],
      ["Trailer", "X-Sum"],
      ["Transfer-Encoding", "chunked"],
      ["Upgrade", "websocket"],
      ["x-private", "secret"],
      ["Accept", "*/*"],
      ["Authorization", "Bearer t"],
      ["Content-Length", "5"],
    ];
    const before = structuredClone(h);
    expect(stripHopByHop(h)).toEqual([
      ["Host", "a"],
      ["Accept", "*/*"],
      ["Authorization", "Bearer t"],
      ["Content-Length", "5"],
    ]);
    expect(h).toEqual(before); // input untouched
  });

  test("without a Connection header only the fixed set goes", () => {
    expect(
      stripHopByHop([
        ["Date", "x"],
        ["keep-alive", "1"],
        ["X-Other", "y"],
      ]),
    ).toEqual([
      ["Date", "x"],
      ["X-Other", "y"],
    ]);
  });
});

describe("wantsKeepAlive", () => {
  test("HTTP/1.1 persists unless Connection: close", () => {
    expect(wantsKeepAlive("HTTP/1.1", [])).toBe(true);
    expect(wantsKeepAlive("HTTP/1.1", [["Connection", "keep-alive"]])).toBe(true);
    expect(wantsKeepAlive("HTTP/1.1", [["Connection", "Close"]])).toBe(false);
    expect(wantsKeepAlive("HTTP/1.1", [["connection", "upgrade, close"]])).toBe(false);
  });

  test("HTTP/1.0 persists only with Connection: keep-alive", () => {
    expect(wantsKeepAlive("HTTP/1.0", [])).toBe(false);
    expect(wantsKeepAlive("HTTP/1.0", [["Connection", "Keep-Alive"]])).toBe(true);
    expect(wantsKeepAlive("HTTP/1.0", [["Connection", "keep-alive, close"]])).toBe(false);
  });
});

describe("unchangedFields", () => {
  const fields = ["Host", "a", "X-B", "2"];
  test("the same names and values in the same order", () => {
    expect(unchangedFields([["Host", "a"], ["X-B", "2"]], fields)).toBe(true);
    expect(unchangedFields([], [])).toBe(true);
  });
  test("a value, a name's casing, the order, an added or a removed field all count as changes", () => {
    expect(unchangedFields([["Host", "a"], ["X-B", "3"]], fields)).toBe(false);
    expect(unchangedFields([["Host", "a"], ["x-b", "2"]], fields)).toBe(false);
    expect(unchangedFields([["X-B", "2"], ["Host", "a"]], fields)).toBe(false);
    expect(unchangedFields([["Host", "a"], ["X-B", "2"], ["X-C", "3"]], fields)).toBe(false);
    expect(unchangedFields([["Host", "a"]], fields)).toBe(false);
  });
});

describe("forwardableAsIs", () => {
  const length = (n: number) => ({ kind: "length" as const, length: n });
  const chunked = { kind: "chunked" as const };
  const none = { kind: "none" as const };
  test("plain end-to-end fields with the framing field that says what was parsed", () => {
    expect(forwardableAsIs([["Host", "a"], ["content-length", "5"], ["X", "1"]], length(5), true)).toBe(true);
    expect(forwardableAsIs([["Host", "a"], ["Transfer-Encoding", "chunked"]], chunked, true)).toBe(true);
    expect(forwardableAsIs([["Host", "a"], ["Accept", "*/*"]], none, true)).toBe(true);
    expect(forwardableAsIs([["Content-Length", "0"]], length(0), false)).toBe(true);
  });
  test("any other hop-by-hop field means the head must be rebuilt", () => {
    for (const name of ["Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization", "Proxy-Authenticate", "TE", "Trailer", "Upgrade"]) {
      expect(forwardableAsIs([["Host", "a"], [name, "x"]], none, true)).toBe(false);
    }
  });
  test("framing fields that do not say exactly what was parsed", () => {
    expect(forwardableAsIs([["Host", "a"], ["Content-Length", "5, 5"]], length(5), true)).toBe(false);
    expect(forwardableAsIs([["Host", "a"], ["Content-Length", "05"]], length(5), true)).toBe(false);
    expect(forwardableAsIs([["Host", "a"], ["Content-Length", "5"], ["Content-Length", "5"]], length(5), true)).toBe(false);
    expect(forwardableAsIs([["Host", "a"]], length(5), true)).toBe(false);
    expect(forwardableAsIs([["Host", "a"], ["Transfer-Encoding", "gzip, chunked"]], chunked, true)).toBe(false);
    expect(forwardableAsIs([["Host", "a"], ["Transfer-Encoding", "chunked"], ["Content-Length", "5"]], chunked, true)).toBe(false);
    expect(forwardableAsIs([["Host", "a"], ["Content-Length", "0"]], none, true)).toBe(false);
    expect(forwardableAsIs([["Content-Length", "5"]], { kind: "close" }, false)).toBe(false);
  });
  test("with the parser's bits for this very list, most heads need no scan, and the answers agree", () => {
    const cases: [HeaderList, Parameters<typeof forwardableAsIs>[1], boolean][] = [
      [[["Host", "a"], ["Accept", "*/*"]], none, true],
      [[["Accept", "*/*"]], none, true],
      [[["Host", "a"], ["Connection", "close"]], none, true],
      [[["Host", "a"], ["content-length", "5"]], length(5), true],
      [[["Host", "a"], ["content-length", "6"]], length(5), true],
      [[["Content-Length", "2"], ["Keep-Alive", "timeout=5"]], length(2), false],
    ];
    for (const [headers, framing, needHost] of cases) {
      const head = parseRequestHead(new Uint8Array(Buffer.from(`GET / HTTP/1.1\r\n${headers.map(([n, v]) => `${n}: ${v}\r\n`).join("")}\r\n`, "latin1")))!.head;
      expect(forwardableAsIs(headers, framing, needHost, head.present)).toBe(forwardableAsIs(headers, framing, needHost));
    }
  });

  test("a request needs exactly one Host field", () => {
    expect(forwardableAsIs([["Accept", "*/*"]], none, true)).toBe(false);
    expect(forwardableAsIs([["Host", "a"], ["host", "b"]], none, true)).toBe(false);
    expect(forwardableAsIs([["Accept", "*/*"]], none, false)).toBe(true);
  });
});
