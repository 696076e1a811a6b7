/** The HAR builder (src/features/traffic/har.ts) on entry details of every kind. */
import { describe, expect, test } from "bun:test";
import { gzipSync } from "node:zlib";
import { buildHar } from "../../src/features/traffic/har.ts";
import type { EntryDetail } from "../../src/store/types.ts";

function entry(over: Partial<EntryDetail>): EntryDetail {
  return {
    id: 1,
    method: "GET",
    url: "https://api.test/items?a=1&b=two",
    host: "api.test",
    status_code: 200,
    content_type: "application/json",
    duration_ms: 12,
    timestamp: Date.UTC(2026, 0, 2, 3, 4, 5, 678),
    client_addr: "curl",
    has_response: true,
    req_headers: [["Host", "api.test"]],
    req_body: "",
    res_headers: [["Content-Type", "application/json"]],
    res_body: '{"ok":true}',
    req_body_encoding: "utf8",
    res_body_encoding: "utf8",
    req_body_size: 0,
    res_body_size: 11,
    req_body_truncated: false,
    res_body_truncated: false,
    req_body_decoded_from: "",
    res_body_decoded_from: "",
    ...over,
  };
}

/** The fields HAR 1.2 requires, with their types. */
function checkHar12(har: any): void {
  expect(har.log.version).toBe("1.2");
  expect(typeof har.log.creator.name).toBe("string");
  expect(typeof har.log.creator.version).toBe("string");
  for (const e of har.log.entries) {
    expect(Number.isNaN(Date.parse(e.startedDateTime))).toBe(false);
    expect(typeof e.time).toBe("number");
    for (const k of ["method", "url", "httpVersion"]) expect(typeof e.request[k]).toBe("string");
    for (const k of ["cookies", "headers", "queryString"]) expect(Array.isArray(e.request[k])).toBe(true);
    for (const k of ["headersSize", "bodySize"]) expect(typeof e.request[k]).toBe("number");
    if (e.request.postData) {
      expect(typeof e.request.postData.mimeType).toBe("string");
      expect(typeof e.request.postData.text).toBe("string");
    }
    for (const k of ["status", "headersSize", "bodySize"]) expect(typeof e.response[k]).toBe("number");
    for (const k of ["statusText", "httpVersion", "redirectURL"]) expect(typeof e.response[k]).toBe("string");
    for (const k of ["cookies", "headers"]) expect(Array.isArray(e.response[k])).toBe(true);
    expect(typeof e.response.content.size).toBe("number");
    expect(typeof e.response.content.mimeType).toBe("string");
    expect(typeof e.cache).toBe("object");
    for (const k of ["send", "wait", "receive"]) expect(typeof e.timings[k]).toBe("number");
    for (const h of [...e.request.headers, ...e.response.headers]) expect(Object.keys(h).sort()).toEqual(["name", "value"]);
  }
  JSON.parse(JSON.stringify(har));
}

describe("buildHar", () => {
  test("a GET: times, headers in order, query string, cookies both ways, redirect", () => {
    const har = buildHar(
      [
        entry({
          status_code: 302,
          reason: "Found",
          req_headers: [
            ["Host", "api.test"],
            ["Cookie", "sid=abc; theme=dark"],
          ],
          res_headers: [
            ["Location", "/elsewhere"],
            ["Set-Cookie", "sid=new; Path=/; Domain=api.test; Expires=Wed, 21 Oct 2026 07:28:00 GMT; HttpOnly; Secure; SameSite=Lax"],
            ["Content-Type", "application/json"],
          ],
        }),
      ],
      { version: "9.9.9" },
    );
    checkHar12(har);
    expect(har.log.creator).toEqual({ name: "tapwire", version: "9.9.9" });
    expect(har.log.pages).toBeUndefined();
    const e = har.log.entries[0]!;
    expect(e.startedDateTime).toBe("2026-01-02T03:04:05.678Z");
    expect(e.time).toBe(12);
    expect(e.timings).toMatchObject({ send: 0, wait: 12, receive: 0 });
    expect(e.request.queryString).toEqual([
      { name: "a", value: "1" },
      { name: "b", value: "two" },
    ]);
    expect(e.request.cookies).toEqual([
      { name: "sid", value: "abc" },
      { name: "theme", value: "dark" },
    ]);
    expect(e.request.postData).toBeUndefined();
    expect(e.response.status).toBe(302);
    expect(e.response.statusText).toBe("Found");
    expect(e.response.redirectURL).toBe("/elsewhere");
    expect(e.response.headers.map((h) => h.name)).toEqual(["Location", "Set-Cookie", "Content-Type"]);
    expect(e.response.cookies).toEqual([
      { name: "sid", value: "new", path: "/", domain: "api.test", expires: "2026-10-21T07:28:00.000Z", httpOnly: true, secure: true, sameSite: "Lax" },
    ]);
    expect(e.response.content).toEqual({ size: 11, mimeType: "application/json", text: '{"ok":true}' });
    expect(e._tapwire.id).toBe(1);
    expect(e._tapwire.client_addr).toBe("curl");
  });

  test("bodies: a form post, a binary request, a base64 response, a decoded gzip response, a truncated one", () => {
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 3]);
    const json = JSON.stringify({ word: "x".repeat(200) });
    const har = buildHar(
      [
        entry({
          id: 2,
          method: "POST",
          req_headers: [["Content-Type", "application/x-www-form-urlencoded"]],
          req_body: "a=1&b=x+y",
          req_body_size: 9,
        }),
        entry({
          id: 3,
          method: "PUT",
          req_headers: [["Content-Type", "application/octet-stream"]],
          req_body: png.toString("base64"),
          req_body_encoding: "base64",
          req_body_size: png.length,
          content_type: "image/png",
          res_body: png.toString("base64"),
          res_body_encoding: "base64",
          res_body_size: png.length,
        }),
        entry({ id: 4, res_body: json, res_body_size: gzipSync(json).length, res_body_decoded_from: "gzip" }),
        entry({ id: 5, res_body: "abc", res_body_size: 1000, res_body_truncated: true }),
      ],
      { version: "1" },
    );
    checkHar12(har);
    const [form, bin, gz, cut] = har.log.entries;
    expect(form!.request.postData).toEqual({ mimeType: "application/x-www-form-urlencoded", text: "a=1&b=x+y", params: [{ name: "a", value: "1" }, { name: "b", value: "x y" }] });
    expect(form!.request.bodySize).toBe(9);
    expect(bin!.request.postData).toEqual({ mimeType: "application/octet-stream", text: png.toString("base64"), _encoding: "base64" });
    expect(bin!.response.content).toEqual({ size: png.length, mimeType: "image/png", text: png.toString("base64"), encoding: "base64" });
    expect(gz!.response.content.size).toBe(json.length);
    expect(gz!.response.bodySize).toBe(gzipSync(json).length);
    expect(gz!.response.content.compression).toBe(json.length - gzipSync(json).length);
    expect(cut!.response.content.comment).toBe("body truncated: 3 of 1000 bytes captured");
  });

  test("failed flows keep their status and carry _error", () => {
    const har = buildHar(
      [
        entry({ id: 6, status_code: 502, reason: "Bad Gateway", error: "connection refused", res_body: "tapwire: connection refused", res_body_size: 27 }),
        entry({ id: 7, status_code: 0, has_response: false, error: "client disconnected", res_headers: [], res_body: "", res_body_size: 0, content_type: "" }),
      ],
      { version: "1" },
    );
    checkHar12(har);
    const [bad, none] = har.log.entries;
    expect(bad!.response.status).toBe(502);
    expect(bad!._error).toBe("connection refused");
    expect(none!.response.status).toBe(0);
    expect(none!.response.httpVersion).toBe("");
    expect(none!.response.bodySize).toBe(-1);
    expect(none!._error).toBe("client disconnected");
  });

  test("entries are sorted by start time; a page title groups them", () => {
    const t0 = Date.UTC(2026, 0, 1);
    const har = buildHar([entry({ id: 9, timestamp: t0 + 500 }), entry({ id: 8, timestamp: t0 })], { version: "1", pageTitle: "ci run", comment: "hello" });
    checkHar12(har);
    expect(har.log.entries.map((e) => e._tapwire.id)).toEqual([8, 9]);
    expect(har.log.pages).toEqual([{ startedDateTime: new Date(t0).toISOString(), id: "page_1", title: "ci run", pageTimings: {} }]);
    expect(har.log.entries.every((e) => e.pageref === "page_1")).toBe(true);
    expect(har.log.creator.comment).toBe("ci run");
    expect(har.log.comment).toBe("hello");
    expect(buildHar([], { version: "1" }).log.entries).toEqual([]);
  });
});
