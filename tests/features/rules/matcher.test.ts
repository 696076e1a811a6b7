import { describe, expect, test } from "bun:test";
import {
  LruCache,
  PatternError,
  clearPatternCaches,
  compileCapturePattern,
  compilePathPattern,
  compileUrlPattern,
  normalizeUrl,
  patternCacheSizes,
  substituteCaptures,
} from "../../../src/features/rules/matcher.ts";

// [pattern, url, expected]
const URL_TABLE: [string, string, boolean][] = [
  // ── no path: whole host ──
  ["example.com", "http://example.com/", true],
  ["example.com", "https://example.com/any/deep/path?q=1", true],
  ["example.com", "http://example.com", true],
  ["example.com", "http://example.org/", false],
  ["example.com", "http://www.example.com/", false],
  ["example.com", "http://example.com.evil.net/", false],
  // ── root only ──
  ["example.com/", "http://example.com/", true],
  ["example.com/", "http://example.com", true],
  ["example.com/", "http://example.com/?x=1", true],
  ["example.com/", "http://example.com/a", false],
  // ── single * stays within one segment ──
  ["example.com/v1/*/items", "https://example.com/v1/42/items", true],
  ["example.com/v1/*/items", "https://example.com/v1/4/2/items", false],
  ["example.com/v1/*/items", "https://example.com/v1//items", true],
  ["example.com/a*b/c", "http://example.com/axxb/c", true],
  ["example.com/a*b/c", "http://example.com/ax/b/c", false],
  // a non-trailing * must not run into the query
  ["example.com/a*b", "http://example.com/a?x=b", false],
  // ── ** crosses segments ──
  ["example.com/v1/**/items", "https://example.com/v1/a/b/c/items", true],
  ["example.com/v1/**/items", "https://example.com/v1/x/items", true],
  ["example.com/v1/**/items", "https://example.com/v1/a/b/c/other", false],
  ["example.com/**.png", "http://example.com/img/a/b.png", true],
  ["example.com/**.png", "http://example.com/img/a/b.png?v=2", true],
  ["example.com/**.png", "http://example.com/img/a/b.jpg", false],
  // ── trailing * matches any rest ──
  ["api.example.com/v1/*", "https://api.example.com/v1/users", true],
  ["api.example.com/v1/*", "https://api.example.com/v1/users/42/posts", true],
  ["api.example.com/v1/*", "https://api.example.com/v1/users?page=2", true],
  ["api.example.com/v1/*", "https://api.example.com/v1/", true],
  ["api.example.com/v1/*", "https://api.example.com/v1", false],
  ["api.example.com/v1/*", "https://api.example.com/v2/users", false],
  ["api.example.com/v1*", "https://api.example.com/v1", true],
  ["api.example.com/v1*", "https://api.example.com/v10/x", true],
  ["api.example.com/v1/**", "https://api.example.com/v1/a/b?c", true],
  ["*", "http://anything.test:1234/x?y", true],
  ["**", "wss://anything.test/", true],
  ["example.*", "http://example.org:8080/x?y=1", true],
  ["example.*", "http://www.example.org/", false],
  ["example.com:*", "http://example.com:9999/a/b", true],
  // ── host globs ──
  ["*.example.com", "https://api.example.com/x", true],
  ["*.example.com", "https://a.b.example.com/x", true],
  ["*.example.com", "https://example.com/x", false],
  ["*.example.com", "https://notexample.com/x", false],
  ["*.example.com/v1/*", "https://a.b.example.com:8443/v1/z", true],
  ["api.*.example.com/x", "http://api.eu.example.com/x", true],
  ["api.*.example.com/x", "http://api.eu.west.example.com/x", true],
  // ── case: host insensitive, path sensitive ──
  ["API.Example.COM/Users", "http://api.example.com/Users", true],
  ["api.example.com/Users", "http://API.EXAMPLE.COM/Users", true],
  ["api.example.com/Users", "http://api.example.com/users", false],
  ["api.example.com/x?Q=A", "http://api.example.com/x?q=a", false],
  // ── schemes ──
  ["https://example.com/x", "https://example.com/x", true],
  ["https://example.com/x", "http://example.com/x", false],
  ["http://example.com/x", "https://example.com/x", false],
  ["HTTP://example.com/x", "http://example.com/x", true],
  ["*://example.com/x", "https://example.com/x", true],
  ["example.com/x", "http://example.com/x", true],
  ["example.com/x", "https://example.com/x", true],
  ["wss://example.com/socket", "https://example.com/socket", true],
  ["wss://example.com/socket", "http://example.com/socket", false],
  ["https://example.com/socket", "wss://example.com/socket", true],
  ["ws://example.com/socket", "ws://example.com/socket", true],
  ["example.com/socket", "ws://example.com/socket", true],
  // ── ports: default stripped on either side ──
  ["https://example.com:443/x", "https://example.com/x", true],
  ["https://example.com/x", "https://example.com:443/x", true],
  ["http://example.com:80/x", "http://example.com/x", true],
  ["http://example.com/x", "http://example.com:80/x", true],
  ["example.com:443/x", "https://example.com/x", true],
  ["example.com:443/x", "http://example.com/x", false],
  ["example.com:443/x", "http://example.com:443/x", true],
  ["https://example.com:443/x", "https://example.com:8443/x", false],
  ["https://example.com:80/x", "https://example.com/x", false],
  // ── ports: explicit non-default must match exactly; none = any ──
  ["localhost:3000/api/*", "http://localhost:3000/api/x", true],
  ["localhost:3000/api/*", "http://localhost:3001/api/x", false],
  ["localhost:3000/api/*", "http://localhost/api/x", false],
  ["localhost:8080", "http://localhost:80/", false],
  ["localhost/*", "http://localhost:3000/x", true],
  ["localhost/*", "https://localhost/x", true],
  ["localhost:300*/x", "http://localhost:3005/x", true],
  ["localhost:300*/x", "http://localhost:4000/x", false],
  ["localhost:0300/x", "http://localhost:300/x", true],
  // ── queries ──
  ["example.com/search", "http://example.com/search?q=cats", true],
  ["example.com/search?q=cats", "http://example.com/search?q=cats", true],
  ["example.com/search?q=cats", "http://example.com/search?q=dogs", false],
  ["example.com/search?q=cats", "http://example.com/search", false],
  ["example.com/search?q=cats", "http://example.com/search?q=cats&x=1", false],
  ["example.com/search?q=*&page=1", "http://example.com/search?q=dogs&page=1", true],
  ["example.com/search?q=*&page=1", "http://example.com/search?q=a&b&page=1", false],
  ["example.com/search?q=**&page=1", "http://example.com/search?q=a&b&page=1", true],
  ["example.com/search?q=*", "http://example.com/search?q=a&page=9", true],
  ["example.com/search?", "http://example.com/search", true],
  ["example.com/search?", "http://example.com/search?", true],
  ["example.com/search?", "http://example.com/search?a", false],
  ["example.com?a=1", "http://example.com/?a=1", true],
  ["example.com?a=1", "http://example.com/x?a=1", false],
  ["example.com/a.b+c(d)?x=[1]", "http://example.com/a.b+c(d)?x=[1]", true],
  // ── regex metacharacters are literal ──
  ["example.com/a.b", "http://example.com/aXb", false],
  ["example.com/a.b", "http://example.com/a.b", true],
  ["example.com/a+b", "http://example.com/aab", false],
  ["example.com/a+b", "http://example.com/a+b", true],
  ["example.com/(x|y)", "http://example.com/x", false],
  ["example.com/(x|y)", "http://example.com/(x|y)", true],
  ["example.com/$^{2}[a]\\", "http://example.com/$^{2}[a]\\", true],
  ["e.ample.com", "http://example.com/", false],
  // ── IPv4 ──
  ["127.0.0.1:8080/*", "http://127.0.0.1:8080/health", true],
  ["127.0.0.1:8080/*", "http://127.0.0.1:8081/health", false],
  ["127.0.0.1", "https://127.0.0.1/x", true],
  ["127.0.0.*", "http://127.0.0.42:9000/x", true],
  ["127.0.0.1", "http://127.0.0.10/", false],
  // ── IPv6 ──
  ["[::1]:8080/x", "http://[::1]:8080/x", true],
  ["[::1]:8080/x", "http://[::1]:8081/x", false],
  ["[::1]/x", "http://[::1]:8081/x", true],
  ["[::1]/x", "https://[0:0:0:0:0:0:0:1]/x", true],
  ["[0:0::1]", "http://[::1]/", true],
  ["[::1]", "http://[::2]/", false],
  ["[fe80::*]/x", "http://[fe80::abcd]/x", true],
  ["*/x", "http://[::1]:8080/x", true],
  ["https://*:8443/x", "https://[::1]:8443/x", true],
  ["https://*:8443/x", "https://any.test:8443/x", true],
  ["https://*:8443/x", "https://any.test/x", false],
  ["*.example.com./x", "http://a.example.com/x", true],
  // ── path-only URL pattern = any host ──
  ["/api/*", "http://a.test/api/x", true],
  ["/api/*", "https://b.test:8443/api/x/y?z", true],
  ["/api/*", "https://b.test/other/api/x", false],
  // ── misc URL forms ──
  ["example.com/x", "http://user:pw@example.com/x", true],
  ["example.com/x", "http://example.com/x#frag", true],
  ["example.com/x", "http://example.com./x", true],
  ["example.com./x", "http://example.com/x", true],
  ["bücher.example/x", "http://xn--bcher-kva.example/x", true],
  ["  example.com/x  ", "http://example.com/x", true],
  // ── not a matchable URL ──
  ["*", "/relative/path", false],
  ["*", "ftp://example.com/", false],
  ["*", "http://bad:port/", false],
  ["*", "http://example.com:70000/", false],
];

describe("compileUrlPattern table", () => {
  test("table has at least 60 rows", () => {
    expect(URL_TABLE.length).toBeGreaterThanOrEqual(60);
  });
  for (const [pattern, url, expected] of URL_TABLE) {
    test(`${JSON.stringify(pattern)} ${expected ? "matches" : "does not match"} ${url}`, () => {
      expect(compileUrlPattern(pattern).match(url)).toBe(expected);
    });
  }
});

describe("compileUrlPattern", () => {
  test("same URL against many patterns in a row (memoised parse) stays correct", () => {
    const a = compileUrlPattern("a.test/*");
    const b = compileUrlPattern("b.test/*");
    const u1 = "http://a.test/x";
    const u2 = "http://b.test/x";
    expect([a.match(u1), b.match(u1), a.match(u2), b.match(u2), a.match(u1)]).toEqual([true, false, false, true, true]);
  });

  test("literalHost is set only for glob-free hosts", () => {
    expect(compileUrlPattern("API.Example.com/x").literalHost).toBe("api.example.com");
    expect(compileUrlPattern("*.example.com/x").literalHost).toBeNull();
    expect(compileUrlPattern("/x").literalHost).toBeNull();
    expect(compileUrlPattern("[0:0::1]:80").literalHost).toBe("[::1]");
  });

  test.each([
    [""],
    ["   "],
    ["ftp://example.com/"],
    ["https://"],
    ["https:///path"],
    ["::1/x"],
    ["fe80::1:8080/x"],
    ["example.com:http/x"],
    ["example.com:99999/x"],
    ["[::1/x"],
    ["[::1]x/y"],
    ["?a=1"],
  ])("rejects malformed pattern %p", (pattern) => {
    expect(() => compileUrlPattern(pattern)).toThrow(PatternError);
  });

  test("a failed compile is not cached", () => {
    expect(() => compileUrlPattern("ftp://x")).toThrow(PatternError);
    expect(() => compileUrlPattern("ftp://x")).toThrow(PatternError);
  });
});

describe("pattern cache", () => {
  test("compiling the same pattern twice returns the cached object", () => {
    clearPatternCaches();
    const before = patternCacheSizes();
    expect(before).toEqual({ url: 0, path: 0, capture: 0 });
    const a = compileUrlPattern("cache.test/v1/*");
    const b = compileUrlPattern("cache.test/v1/*");
    expect(b).toBe(a);
    expect(compilePathPattern("/cached/*")).toBe(compilePathPattern("/cached/*"));
    expect(compileCapturePattern("/c/*")).toBe(compileCapturePattern("/c/*"));
    expect(patternCacheSizes()).toEqual({ url: 1, path: 1, capture: 1 });
    clearPatternCaches();
    const c = compileUrlPattern("cache.test/v1/*");
    expect(c).not.toBe(a);
    expect(c.match("http://cache.test/v1/z")).toBe(true);
  });

  test("cached compile is much cheaper than a fresh compile", () => {
    const patterns = Array.from({ length: 2000 }, (_, i) => `host${i}.cache-timing.test/v${i}/**/x?q=*&r=${i}`);
    clearPatternCaches();
    let t = performance.now();
    for (const p of patterns) compileUrlPattern(p);
    const fresh = performance.now() - t;
    t = performance.now();
    for (let r = 0; r < 5; r++) for (const p of patterns) compileUrlPattern(p);
    const cached = (performance.now() - t) / 5;
    console.log(`compile 2000 patterns: fresh ${fresh.toFixed(2)} ms, cached ${cached.toFixed(2)} ms`);
    expect(cached).toBeLessThan(fresh);
  });

  test("LruCache evicts the least recently used entry", () => {
    const c = new LruCache<number>(3);
    c.set("a", 1);
    c.set("b", 2);
    c.set("c", 3);
    expect(c.get("a")).toBe(1); // a is now most recent
    c.set("d", 4); // evicts b
    expect(c.has("b")).toBe(false);
    expect([c.get("a"), c.get("c"), c.get("d")]).toEqual([1, 3, 4]);
    expect(c.size).toBe(3);
    c.set("c", 30); // update does not evict
    expect(c.size).toBe(3);
    expect(c.get("c")).toBe(30);
    expect(() => new LruCache(0)).toThrow(RangeError);
  });
});

// [pattern, pathAndQuery, expected]
const PATH_TABLE: [string, string, boolean][] = [
  ["/api/users", "/api/users", true],
  ["/api/users", "/api/users?page=2", true],
  ["/api/users", "/api/users/", false],
  ["/api/users", "/API/users", false],
  ["/api/users/*", "/api/users/42", true],
  ["/api/users/*", "/api/users/42/posts", true],
  ["/api/users/*", "/api/users", false],
  ["/api/*", "/api/a/b", true],
  ["/api/*/posts", "/api/7/posts", true],
  ["/api/*/posts", "/api/7/8/posts", false],
  ["/api/**/posts", "/api/7/8/posts", true],
  ["/api/*/posts", "/api/7/posts?x=1", true],
  ["/search?q=*", "/search?q=cats&page=2", true],
  ["/search?q=*&page=2", "/search?q=cats&page=2", true],
  ["/search?q=cats", "/search?q=dogs", false],
  ["/search?q=cats", "/search", false],
  ["/search?", "/search", true],
  ["api/users", "/api/users", true],
  ["*", "/anything/at/all?x", true],
  ["/file.json", "/fileXjson", false],
  ["/a(b)", "/a(b)", true],
  ["/api/users/*", "http://localhost:9100/api/users/9?x=1", true],
  ["/api/users", "http://localhost:9100/api/users#top", true],
  ["/", "http://localhost:9100", true],
  ["/", "", true],
];

describe("compilePathPattern table", () => {
  for (const [pattern, input, expected] of PATH_TABLE) {
    test(`${JSON.stringify(pattern)} ${expected ? "matches" : "does not match"} ${JSON.stringify(input)}`, () => {
      expect(compilePathPattern(pattern).match(input)).toBe(expected);
    });
  }
  test("rejects an empty pattern", () => {
    expect(() => compilePathPattern(" ")).toThrow(PatternError);
  });
});

// [source_path glob, input, expected captures or null, dest template, expected rewrite]
const CAPTURE_TABLE: [string, string, string[] | null, string, string][] = [
  ["/api/*", "/api/users/42", ["users/42"], "/v2/$1", "/v2/users/42"],
  ["/api/*/items/*", "/api/7/items/9", ["7", "9"], "/x/$2/$1", "/x/9/7"],
  ["/api/*", "/other/x", null, "", ""],
  ["/a.b/*", "/aXb/1", null, "", ""],
  ["/a.b/*", "/a.b/1", ["1"], "/$1.json", "/1.json"],
  ["/img/*.png", "/img/a/b.png", ["a/b"], "/cdn/$1.webp", "/cdn/a/b.webp"],
  ["/exact", "/exact", [], "/moved", "/moved"],
  ["/exact", "/exact/", null, "", ""],
  ["*", "", [""], "[$1]", "[]"],
  ["/p/**", "/p/q/r", ["q/r", ""], "$1|$2", "q/r|"],
  ["/(x)/*", "/(x)/y", ["y"], "$$1=$1", "$1=y"],
  ["/CASE/*", "/case/x", null, "", ""],
];

describe("compileCapturePattern + substituteCaptures table", () => {
  for (const [glob, input, caps, template, rewritten] of CAPTURE_TABLE) {
    test(`${JSON.stringify(glob)} on ${JSON.stringify(input)}`, () => {
      const m = compileCapturePattern(glob);
      const got = m.match(input);
      expect(got).toEqual(caps);
      if (got !== null) expect(substituteCaptures(template, got)).toBe(rewritten);
    });
  }

  test("captureCount counts every *", () => {
    expect(compileCapturePattern("/a/*/b/*").captureCount).toBe(2);
    expect(compileCapturePattern("/a/**").captureCount).toBe(2);
    expect(compileCapturePattern("/a").captureCount).toBe(0);
  });

  test("twelve captures: $10..$12 address captures 10..12", () => {
    const glob = Array.from({ length: 12 }, () => "*").join("-");
    const input = "a-b-c-d-e-f-g-h-i-j-k-l";
    const caps = compileCapturePattern(glob).match(input);
    expect(caps).toEqual(input.split("-"));
    expect(substituteCaptures("$1/$9/$10/$11/$12", caps!)).toBe("a/i/j/k/l");
    expect(substituteCaptures("${1}0", caps!)).toBe("a0");
  });

  test("substitution rules", () => {
    const three = ["x", "y", "z"];
    expect(substituteCaptures("$10", three)).toBe("x0"); // fewer than 10 captures
    expect(substituteCaptures("$3$2$1", three)).toBe("zyx");
    expect(substituteCaptures("$4", three)).toBe(""); // missing capture → empty
    expect(substituteCaptures("${3}", three)).toBe("z");
    expect(substituteCaptures("${12}", three)).toBe("");
    expect(substituteCaptures("$$", three)).toBe("$");
    expect(substituteCaptures("$$$1", three)).toBe("$x");
    expect(substituteCaptures("$0", three)).toBe("$0");
    expect(substituteCaptures("cost: $", three)).toBe("cost: $");
    expect(substituteCaptures("$a ${x} ${", three)).toBe("$a ${x} ${");
    expect(substituteCaptures("/plain/path", three)).toBe("/plain/path");
  });
});

describe("normalizeUrl", () => {
  test.each([
    ["https://Example.COM:443/a/b?x=1#f", { scheme: "https", host: "example.com", port: null, path: "/a/b", query: "x=1" }],
    ["http://example.com:80", { scheme: "http", host: "example.com", port: null, path: "/", query: null }],
    ["http://example.com:443/", { scheme: "http", host: "example.com", port: 443, path: "/", query: null }],
    ["https://example.com:80/", { scheme: "https", host: "example.com", port: 80, path: "/", query: null }],
    ["HTTP://u:p@Host.test:8080/p?", { scheme: "http", host: "host.test", port: 8080, path: "/p", query: "" }],
    ["http://[::1]:8080/x", { scheme: "http", host: "[::1]", port: 8080, path: "/x", query: null }],
    ["https://[0:0:0:0:0:0:0:1]/", { scheme: "https", host: "[::1]", port: null, path: "/", query: null }],
    ["wss://chat.test:443/s", { scheme: "wss", host: "chat.test", port: null, path: "/s", query: null }],
    ["ws://chat.test:80/s", { scheme: "ws", host: "chat.test", port: null, path: "/s", query: null }],
    ["http://h.test:/x", { scheme: "http", host: "h.test", port: null, path: "/x", query: null }],
    ["http://h.test/a%20b?c=d?e", { scheme: "http", host: "h.test", port: null, path: "/a%20b", query: "c=d?e" }],
  ])("%s", (url, expected) => {
    expect(normalizeUrl(url)).toEqual(expected as ReturnType<typeof normalizeUrl>);
  });

  test.each([["/path"], ["example.com/x"], ["ftp://x/"], ["http:///x"], ["http://h:abc/"], ["http://[::1/"], ["http://a:b:c/"]])(
    "throws on %p",
    (url) => {
      expect(() => normalizeUrl(url)).toThrow(TypeError);
    },
  );
});

describe("performance (printed, not asserted)", () => {
  type Matcher = ReturnType<typeof compileUrlPattern>;
  /** best-of-7 microseconds per URL for testing each URL against every matcher; also the hit count */
  const measure = (matchers: Matcher[], urls: string[]) => {
    let best = Infinity;
    let hits = 0;
    for (let round = 0; round < 9; round++) {
      hits = 0;
      const t = performance.now();
      for (const u of urls) for (const m of matchers) if (m.match(u)) hits++;
      const us = ((performance.now() - t) * 1000) / urls.length;
      if (round >= 2 && us < best) best = us; // first two rounds are warm-up
    }
    return { us: best, hits };
  };

  test("one URL against 1,000 compiled patterns", () => {
    // 1) rules on 1,000 different literal hosts: the host compare rejects almost all
    const literal = Array.from({ length: 1000 }, (_, i) => compileUrlPattern(`api${i}.perf.test/v1/*`));
    const literalUrls = Array.from({ length: 200 }, (_, i) => `https://api${i}.perf.test/v1/users/${i}?q=${i}`);
    // 2) glob hosts: rejected by the host prefix/suffix or port prefilter
    const globbed = Array.from({ length: 1000 }, (_, i) =>
      compileUrlPattern(i % 2 === 0 ? `*.perf${i}.test/v1/**/items/*` : `https://*.perf.test:${8000 + i}/v${i}/*/x?q=*`),
    );
    // 3) worst case: every rule passes the prefilters, so every regex runs;
    //    URL i matches exactly the rule ending in /${2 * i}
    const sameHost = Array.from({ length: 1000 }, (_, i) => compileUrlPattern(`https://api.perf.test/v1/*/items/**/${i}?q=*`));
    const sameHostUrls = Array.from({ length: 200 }, (_, i) => `https://api.perf.test/v1/u${i}/items/a/b/${2 * i}?q=${i}`);

    const a = measure(literal, literalUrls);
    const b = measure(globbed, literalUrls);
    const c = measure(sameHost, sameHostUrls);
    console.log(
      `match 1 URL vs 1,000 patterns (best of 7, µs per URL): ` +
        `distinct literal hosts ${a.us.toFixed(1)}, glob hosts ${b.us.toFixed(1)}, ` +
        `worst case (all 1,000 regexes run) ${c.us.toFixed(1)}`,
    );
    expect(a.hits).toBe(200);
    expect(b.hits).toBe(0);
    expect(c.hits).toBe(200);
  });
});
