import { describe, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { compilePathPattern } from "../../../src/features/rules/matcher.ts";
import { MockIndex, MockMatcher, pathOf } from "../../../src/features/mock/matcher.ts";
import { compileRuleResponse, fallbackResponse, Persist } from "../../../src/features/mock/response.ts";
import { decodeBase64Strict, type MockRule, MockRuleSchema, MockRuleStore } from "../../../src/features/mock/schema.ts";
import { Type } from "@sinclair/typebox";
import { RuleStore, RuleStoreError } from "../../../src/features/rules/rule-store.ts";

const dec = new TextDecoder();

function rule(over: Partial<MockRule> & { id: string; url_pattern: string }): MockRule {
  return {
    name: "",
    enabled: true,
    method: "",
    status_code: 200,
    status_text: null,
    headers: [],
    body: "",
    body_is_base64: false,
    latency_ms: null,
    ...over,
  };
}

/** The specification of matching: the first enabled rule, in order, whose method and pattern match. */
function linear(rules: MockRule[], method: string, pq: string): string | null {
  for (const r of rules) {
    if (!r.enabled) continue;
    const m = r.method.trim().toUpperCase();
    if (m !== "" && m !== method.toUpperCase()) continue;
    if (compilePathPattern(r.url_pattern).match(pq)) return r.id;
  }
  return null;
}

/** A seeded PRNG (mulberry32), so a failure can be replayed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe("MockIndex: the index only prunes, it never changes which rule wins", () => {
  test("random rule sets against random requests agree with a linear scan", () => {
    const rnd = prng(20240611);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
    const segs = ["a", "b", "ab", "api", "v1", "x.y", ""] as const;
    const patSegs = ["a", "b", "ab", "api", "v1", "x.y", "*", "**", "a*", "*b", ""] as const;
    const queries = ["", "?", "?q=1", "?q=*", "?*", "?q=1&r=2"] as const;
    const methods = ["", "", "", "GET", "post", "Put"] as const;
    const reqMethods = ["GET", "POST", "PUT", "DELETE"] as const;
    let checked = 0;
    let matchedCount = 0;
    for (let round = 0; round < 40; round++) {
      const rules: MockRule[] = [];
      const n = 1 + Math.floor(rnd() * 60);
      for (let i = 0; i < n; i++) {
        const depth = Math.floor(rnd() * 4);
        let p = "";
        for (let d = 0; d < depth; d++) p += "/" + pick(patSegs);
        if (p === "" || rnd() < 0.15) p += "/";
        if (rnd() < 0.1) p = p.slice(1); // no leading slash: the matcher adds one
        if (rnd() < 0.05) p = "*" + p;
        if (rnd() < 0.2) p += pick(queries);
        if (rnd() < 0.05) p = `  ${p} `;
        if (p.trim() === "") p = "/";
        rules.push(rule({ id: `r${i}`, url_pattern: p, method: pick(methods), enabled: rnd() > 0.15 }));
      }
      const index = new MockIndex(rules);
      for (let k = 0; k < 150; k++) {
        const depth = Math.floor(rnd() * 5);
        let path = "";
        for (let d = 0; d < depth; d++) path += "/" + pick(segs);
        if (path === "" || rnd() < 0.2) path += "/";
        const q = rnd() < 0.3 ? pick(["?q=1", "?q=1&r=2", "?", "?z"]) : "";
        const method = pick(reqMethods);
        const want = linear(rules, method, path + q);
        const got = index.match(method, path + q)?.rule.id ?? null;
        if (got !== want) throw new Error(`${method} ${path + q}: index gave ${got}, linear ${want}; rules ${JSON.stringify(rules.map((r) => [r.id, r.url_pattern, r.method, r.enabled]))}`);
        checked++;
        if (want !== null) matchedCount++;
      }
    }
    expect(checked).toBe(40 * 150);
    // the generator must exercise both outcomes, or the comparison proves little
    expect(matchedCount).toBeGreaterThan(checked / 10);
    expect(matchedCount).toBeLessThan(checked - checked / 10);
  });

  test("first enabled match wins, across exact, trie and root lists", () => {
    const rules = [
      rule({ id: "deep-disabled", url_pattern: "/api/users/*", enabled: false }),
      rule({ id: "root-star", url_pattern: "**/special", method: "PATCH" }),
      rule({ id: "exact", url_pattern: "/api/users/42" }),
      rule({ id: "deep", url_pattern: "/api/users/*" }),
      rule({ id: "any", url_pattern: "/**" }),
    ];
    const idx = new MockIndex(rules);
    expect(idx.size).toBe(4);
    expect(idx.match("GET", "/api/users/42")?.rule.id).toBe("exact");
    expect(idx.match("GET", "/api/users/42?x=1")?.rule.id).toBe("exact"); // a pattern without ? ignores the query
    expect(idx.match("GET", "/api/users/7")?.rule.id).toBe("deep");
    expect(idx.match("PATCH", "/x/special")?.rule.id).toBe("root-star");
    expect(idx.match("patch", "/x/special")?.rule.id).toBe("root-star");
    expect(idx.match("GET", "/x/special")?.rule.id).toBe("any");
    expect(idx.match("GET", "/")?.rule.id).toBe("any");
  });

  test("1,000 rules: the rule near the end is found, and a miss is a miss", () => {
    const rules: MockRule[] = [];
    for (let i = 0; i < 999; i++) rules.push(rule({ id: `r${i}`, url_pattern: i % 2 ? `/api/v1/items/${i}/*` : `/api/v1/items/${i}` }));
    rules.push(rule({ id: "last", url_pattern: "/bench/*", method: "GET" }));
    const idx = new MockIndex(rules);
    expect(idx.match("GET", "/bench/hello")?.rule.id).toBe("last");
    expect(idx.match("GET", "/api/v1/items/998")?.rule.id).toBe("r998");
    expect(idx.match("GET", "/api/v1/items/997/x")?.rule.id).toBe("r997");
    expect(idx.match("GET", "/api/v1/items/997")).toBeNull();
    expect(idx.match("POST", "/bench/hello")).toBeNull();
  });

  test("pathOf: query, fragment and absolute URLs", () => {
    expect(pathOf("/a/b?c=d")).toBe("/a/b");
    expect(pathOf("/a#f?x")).toBe("/a");
    expect(pathOf("http://h:1/x/y?z")).toBe("/x/y");
    expect(pathOf("rel/x")).toBe("/rel/x");
  });

  test("MockMatcher rebuilds on every store version change and honours the master flag", () => {
    const src = { version: 0, enabled: true, rules: [rule({ id: "a", url_pattern: "/a" })], list() { return this.rules; } };
    const m = new MockMatcher(src);
    expect(m.match("GET", "/a")?.rule.id).toBe("a");
    src.rules = [rule({ id: "b", url_pattern: "/a" })];
    expect(m.match("GET", "/a")?.rule.id).toBe("a"); // same version: the cached index
    src.version++;
    expect(m.match("GET", "/a")?.rule.id).toBe("b");
    src.enabled = false;
    expect(m.match("GET", "/a")).toBeNull();
  });
});

describe("canned responses", () => {
  test("status line, headers, computed Content-Length; managed headers replaced", () => {
    const r = compileRuleResponse(
      rule({
        id: "x",
        url_pattern: "/",
        status_code: 203,
        status_text: "Mocked Up",
        headers: [["X-A", "1"], ["content-length", "999"], ["Transfer-Encoding", "chunked"], ["Content-Type", "text/plain"]],
        body: "héllo",
      }),
    );
    expect(dec.decode(r.bytes(Persist.Keep, false))).toBe("HTTP/1.1 203 Mocked Up\r\nX-A: 1\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\nhéllo");
    expect(dec.decode(r.bytes(Persist.Keep, true))).toBe("HTTP/1.1 203 Mocked Up\r\nX-A: 1\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\n");
    expect(dec.decode(r.bytes(Persist.Close, false))).toContain("Content-Length: 6\r\nConnection: close\r\n\r\nhéllo");
    expect(dec.decode(r.bytes(Persist.Keep10, false))).toContain("Connection: keep-alive\r\n\r\n");
    expect(r.contentType).toBe("text/plain");
  });

  test("null status_text gives the standard phrase; an empty one is sent empty; unknown codes have none", () => {
    expect(dec.decode(compileRuleResponse(rule({ id: "x", url_pattern: "/", status_code: 201 })).bytes(Persist.Keep, true))).toStartWith("HTTP/1.1 201 Created\r\n");
    expect(dec.decode(compileRuleResponse(rule({ id: "x", url_pattern: "/", status_code: 201, status_text: "" })).bytes(Persist.Keep, true))).toStartWith("HTTP/1.1 201 \r\n");
    expect(dec.decode(compileRuleResponse(rule({ id: "x", url_pattern: "/", status_code: 299 })).bytes(Persist.Keep, true))).toStartWith("HTTP/1.1 299 \r\n");
  });

  test("204 and 304 carry neither body nor Content-Length; Connection: close in a rule forces close", () => {
    const r = compileRuleResponse(rule({ id: "x", url_pattern: "/", status_code: 204, body: "ignored", headers: [["Connection", "close"]] }));
    expect(r.forcesClose).toBe(true);
    expect(dec.decode(r.bytes(Persist.Close, false))).toBe("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
    const n = compileRuleResponse(rule({ id: "x", url_pattern: "/", status_code: 304, body: "x" }));
    expect(dec.decode(n.bytes(Persist.Keep, false))).toBe("HTTP/1.1 304 Not Modified\r\n\r\n");
  });

  test("base64 bodies are decoded to raw bytes", () => {
    const bytes = Uint8Array.from({ length: 256 }, (_, i) => i);
    const r = compileRuleResponse(rule({ id: "x", url_pattern: "/", body: Buffer.from(bytes).toString("base64"), body_is_base64: true }));
    expect(r.body).toEqual(bytes);
    const wire = r.bytes(Persist.Keep, false);
    expect(wire.subarray(wire.length - 256)).toEqual(bytes);
  });

  test("the fallback names method and path and says whether the master flag is off", () => {
    const on = JSON.parse(dec.decode(fallbackResponse("GET", "/x?y", true).body));
    expect(on).toEqual({ error: { code: "no_mock_rule", message: "no mock rule matched GET /x?y" }, method: "GET", path: "/x?y", mock_enabled: true });
    const off = JSON.parse(dec.decode(fallbackResponse("POST", "/z", false).body));
    expect(off.mock_enabled).toBe(false);
    expect(off.error.message).toContain("master flag off");
  });

  test("strict base64", () => {
    expect(decodeBase64Strict("aGk=")).toEqual(new TextEncoder().encode("hi"));
    expect(decodeBase64Strict("aGk")).toEqual(new TextEncoder().encode("hi"));
    expect(decodeBase64Strict("aG\nk=")).toEqual(new TextEncoder().encode("hi"));
    expect(decodeBase64Strict("-_8")).toEqual(new Uint8Array([0xfb, 0xff]));
    expect(decodeBase64Strict("")).toEqual(new Uint8Array(0));
    for (const bad of ["a", "aGk==", "aGk=x", "a+_b", "héllo", "aG k=!"]) expect(decodeBase64Strict(bad)).toBeNull();
  });
});

describe("MockRuleStore.parse", () => {
  const store = new MockRuleStore(join(mkdtempSync(join(tmpdir(), "tapwire-mock-")), "mock.json"), MockRuleSchema);
  const bad = (input: unknown, field: string) => {
    let err: unknown;
    try {
      store.parse(input);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(RuleStoreError);
    expect((err as RuleStoreError).kind).toBe("invalid");
    expect((err as Error).message).toContain(`'${field}'`);
  };

  test("defaults", () => {
    expect(store.parse({ id: "a", url_pattern: "/x" })).toEqual(rule({ id: "a", url_pattern: "/x" }));
  });

  test("every invalid field is named", () => {
    bad({ url_pattern: "/x" }, "id");
    bad({ id: "a" }, "url_pattern");
    bad({ id: "a", url_pattern: "   " }, "url_pattern");
    bad({ id: "a", url_pattern: "/x", status_code: "200" }, "status_code");
    bad({ id: "a", url_pattern: "/x", status_code: 101 }, "status_code");
    bad({ id: "a", url_pattern: "/x", status_code: 1000 }, "status_code");
    bad({ id: "a", url_pattern: "/x", status_text: "OK\r\nX-Injected: 1" }, "status_text");
    bad({ id: "a", url_pattern: "/x", headers: [["Bad Name", "v"]] }, "headers.0.0");
    bad({ id: "a", url_pattern: "/x", headers: [["X-Ok", "v"], ["X-B", "a\nb"]] }, "headers.1.1");
    bad({ id: "a", url_pattern: "/x", headers: { "X-A": "1" } }, "headers");
    bad({ id: "a", url_pattern: "/x", body: "not base64!", body_is_base64: true }, "body");
    bad({ id: "a", url_pattern: "/x", latency_ms: -1 }, "latency_ms");
    bad({ id: "a", url_pattern: "/x", method: "GE T" }, "method");
    bad({ id: "a", url_pattern: "/x", enabled: "yes" }, "enabled");
  });
});

describe("RuleStore (src/rules, shared by every family)", () => {
  // Regression: TypeBox's Value.Default merges an object given for a field whose default is an array into that
  // default, so `headers: {"X-A": "1"}` used to become [] instead of being refused.
  test("an object given for an array field with a default is refused, not replaced by the default", () => {
    const schema = Type.Object({ id: Type.String(), enabled: Type.Boolean({ default: true }), tags: Type.Array(Type.String(), { default: [] }) });
    const store = new RuleStore(join(mkdtempSync(join(tmpdir(), "tapwire-rules-")), "r.json"), schema);
    expect(() => store.parse({ id: "a", tags: { x: "1" } })).toThrow(/'tags'/);
  });
});
