import { describe, expect, test } from "bun:test";
import { H2TranslateError, h1RequestToH2, h1RequestToH2Flat, h1ResponseToH2, h1ResponseToH2Flat, h2RequestToH1, h2RequestToH1Flat, h2ResponseToH1, h2ResponseToH1Flat, trailerFields, trailersFromFlat } from "../../../src/core/http2/headers.ts";

describe("HTTP/1 -> HTTP/2", () => {
  test("request: pseudo-headers first, Host becomes :authority, names lower-cased, connection-specific fields dropped", () => {
    const h = h1RequestToH2(
      {
        method: "POST",
        target: "/a?b=1",
        headers: [
          ["Host", "example.test:8443"],
          ["Connection", "keep-alive, X-Hop"],
          ["X-Hop", "1"],
          ["Keep-Alive", "timeout=5"],
          ["Proxy-Connection", "keep-alive"],
          ["Transfer-Encoding", "chunked"],
          ["Upgrade", "h2c"],
          ["TE", "trailers, deflate"],
          ["Content-Type", "application/json"],
          ["Cookie", "a=1; b=2"],
        ],
      },
      "https",
    );
    expect(h).toEqual([
      [":method", "POST"],
      [":scheme", "https"],
      [":authority", "example.test:8443"],
      [":path", "/a?b=1"],
      ["te", "trailers"],
      ["content-type", "application/json"],
      ["cookie", "a=1; b=2"],
    ]);
  });

  test("a te without trailers is dropped; no Host and no authority is refused", () => {
    expect(h1RequestToH2({ method: "GET", target: "/", headers: [["Host", "h"], ["TE", "gzip"]] }, "http")).toEqual([
      [":method", "GET"],
      [":scheme", "http"],
      [":authority", "h"],
      [":path", "/"],
    ]);
    expect(() => h1RequestToH2({ method: "GET", target: "/", headers: [] }, "https")).toThrow(H2TranslateError);
  });

  test("response: :status first, hop-by-hop and Trailer fields dropped", () => {
    expect(h1ResponseToH2(204, [["Connection", "close"], ["Content-Type", "text/plain"], ["Trailer", "x-checksum"], ["Set-Cookie", "a=1"], ["Set-Cookie", "b=2"]])).toEqual([
      [":status", "204"],
      ["content-type", "text/plain"],
      ["set-cookie", "a=1"],
      ["set-cookie", "b=2"],
    ]);
  });
});

describe("HTTP/2 -> HTTP/1", () => {
  test("request: Host from :authority, cookie crumbs joined with '; ', order of other fields kept", () => {
    const r = h2RequestToH1([
      [":method", "GET"],
      [":scheme", "https"],
      [":authority", "example.test"],
      [":path", "/x"],
      ["cookie", "a=1"],
      ["accept", "*/*"],
      ["cookie", "b=2"],
      ["te", "trailers"],
    ]);
    expect(r).toEqual({ method: "GET", scheme: "https", authority: "example.test", path: "/x", headers: [["host", "example.test"], ["accept", "*/*"], ["te", "trailers"], ["cookie", "a=1; b=2"]] });
  });

  test.each([
    ["a pseudo-header after a regular field", [[":method", "GET"], ["accept", "*/*"], [":path", "/"]]],
    ["an unknown pseudo-header", [[":method", "GET"], [":scheme", "https"], [":path", "/"], [":foo", "x"]]],
    ["a repeated pseudo-header", [[":method", "GET"], [":method", "POST"], [":scheme", "https"], [":path", "/"]]],
    ["an upper-case name", [[":method", "GET"], [":scheme", "https"], [":path", "/"], ["Accept", "x"]]],
    ["a connection-specific field", [[":method", "GET"], [":scheme", "https"], [":path", "/"], ["connection", "close"]]],
    ["te other than trailers", [[":method", "GET"], [":scheme", "https"], [":path", "/"], ["te", "gzip"]]],
    ["no :path", [[":method", "GET"], [":scheme", "https"]]],
    ["extended CONNECT", [[":method", "CONNECT"], [":protocol", "websocket"], [":scheme", "https"], [":path", "/"], [":authority", "h"]]],
  ] as [string, [string, string][]][])("malformed request: %s", (_n, fields) => {
    expect(() => h2RequestToH1(fields)).toThrow(H2TranslateError);
  });

  test("response: status and fields; an invalid :status is refused", () => {
    expect(h2ResponseToH1([[":status", "200"], ["content-type", "text/html"]])).toEqual({ status: 200, headers: [["content-type", "text/html"]] });
    expect(() => h2ResponseToH1([["content-type", "x"]])).toThrow(H2TranslateError);
    expect(() => h2ResponseToH1([[":status", "abc"]])).toThrow(H2TranslateError);
  });

  test("trailers keep their fields, lower-cased, minus the ones no trailer may carry", () => {
    expect(trailerFields([["grpc-status", "0"], ["Grpc-Message", "ok"], ["content-length", "5"], [":status", "200"]])).toEqual([
      ["grpc-status", "0"],
      ["grpc-message", "ok"],
    ]);
  });
});

describe("one-pass flat field lists (the codec's form, the proxy's hot path) say what the field lists say", () => {
  const flat = (fields: [string, string][]) => fields.flat();
  const requests: { method: string; target: string; headers: [string, string][] }[] = [
    { method: "GET", target: "/", headers: [["Host", "h"]] },
    { method: "POST", target: "/a?b", headers: [["Host", "example.test:8443"], ["Connection", "keep-alive, X-Hop"], ["X-Hop", "1"], ["Keep-Alive", "t=5"], ["TE", "trailers, deflate"], ["Accept", "a"], ["accept", "b"], ["Set-Cookie", "x"], ["set-cookie", "y"]] },
    { method: "GET", target: "", headers: [["host", "first"], ["Host", "second"], ["TE", "gzip"], ["Upgrade", "h2c"], ["Transfer-Encoding", "chunked"], ["Proxy-Connection", "x"]] },
    { method: "CONNECT", target: "h:443", headers: [["Host", "h:443"], ["X-A", "1"]] },
  ];

  test("requests: same fields, same order, same refusal; a reframed body drops Content-Length and Expect", () => {
    for (const r of requests) {
      expect(h1RequestToH2Flat(r, "https")).toEqual(flat(h1RequestToH2(r, "https")));
      expect(h1RequestToH2Flat(r, "http", "given:1")).toEqual(flat(h1RequestToH2(r, "http", "given:1")));
    }
    expect(() => h1RequestToH2Flat({ method: "GET", target: "/", headers: [["Accept", "*/*"]] }, "https")).toThrow(H2TranslateError);
    const post = { method: "POST", target: "/u", headers: [["Host", "h"], ["Content-Length", "5"], ["Expect", "100-continue"], ["X-A", "1"]] as [string, string][] };
    expect(h1RequestToH2Flat(post, "https", undefined, true)).toEqual([":method", "POST", ":scheme", "https", ":authority", "h", ":path", "/u", "x-a", "1"]);
    expect(h1RequestToH2Flat(post, "https")).toContain("content-length");
  });

  test("responses: same fields, same order, both ways; trailers without pseudo-headers", () => {
    const lists: [string, string][][] = [
      [],
      [["Content-Type", "text/plain"], ["Content-Length", "3"]],
      [["Connection", "close, X-Gone"], ["X-Gone", "1"], ["Trailer", "grpc-status"], ["TE", "trailers"], ["Set-Cookie", "a=1"], ["Set-Cookie", "b=2"], ["Vary", "a"], ["vary", "b"], ["Keep-Alive", "t"]],
    ];
    for (const l of lists) {
      const out = h1ResponseToH2Flat(204, l);
      expect(out).toEqual(flat(h1ResponseToH2(204, l)));
      expect(h2ResponseToH1Flat(out)).toEqual(h2ResponseToH1(h1ResponseToH2(204, l)));
    }
    expect(() => h2ResponseToH1Flat(["content-type", "x"])).toThrow(H2TranslateError);
    expect(() => h2ResponseToH1Flat([":status", "200", ":path", "/"])).toThrow(H2TranslateError);
    expect(trailersFromFlat([":status", "200", "grpc-status", "0", "grpc-message", "ok"])).toEqual([["grpc-status", "0"], ["grpc-message", "ok"]]);
  });

  test("h2RequestToH1Flat reads node's flat rawHeaders as h2RequestToH1 reads pairs", () => {
    const raw = [":method", "GET", ":scheme", "https", ":authority", "a.test", ":path", "/x", "cookie", "a=1", "accept", "*/*", "cookie", "b=2", "host", "ignored"];
    const pairs: [string, string][] = [];
    for (let i = 0; i < raw.length; i += 2) pairs.push([raw[i]!, raw[i + 1]!]);
    expect(h2RequestToH1Flat(raw)).toEqual(h2RequestToH1(pairs));
    expect(h2RequestToH1Flat(raw).headers).toEqual([["host", "a.test"], ["accept", "*/*"], ["cookie", "a=1; b=2"]]);
    for (const bad of [
      [":method", "GET", ":method", "GET", ":scheme", "https", ":path", "/"],
      [":method", "GET", ":scheme", "https", ":path", "/", "x-a", "1", ":authority", "late"],
      [":method", "GET", ":scheme", "https", ":path", "/", "X-Upper", "1"],
      [":method", "GET", ":scheme", "https", ":path", "/", "connection", "close"],
      [":method", "GET", ":scheme", "https", ":path", "/", "te", "gzip"],
      [":method", "CONNECT", ":authority", "h:443", ":protocol", "websocket"],
      [":method", "GET", ":scheme", "https"],
      [":scheme", "https", ":path", "/"],
      [":method", "GET", ":scheme", "https", ":path", "/", ":bogus", "1"],
    ])
      expect(() => h2RequestToH1Flat(bad)).toThrow(H2TranslateError);
  });
});
