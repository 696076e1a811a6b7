import { describe, expect, test } from "bun:test";
import type { EntryDetail } from "../../../src/store/types.ts";
import {
  JSON_DIFF_MAX_CHANGES,
  LINE_DIFF_MAX_BYTES,
  LINE_DIFF_MAX_EDITS,
  diffEntries,
  jsonDiff,
  myersDiff,
  splitLines,
  unifiedDiff,
} from "../../../src/features/traffic/diff.ts";

function entry(over: Partial<EntryDetail>): EntryDetail {
  return {
    id: 1,
    method: "GET",
    url: "https://api.example.test/v1/items?page=2&sort=asc",
    host: "api.example.test",
    status_code: 200,
    content_type: "application/json",
    duration_ms: 12,
    timestamp: 1_700_000_000_000,
    client_addr: "curl",
    has_response: true,
    req_headers: [
      ["Host", "api.example.test"],
      ["Accept", "application/json"],
      ["User-Agent", "test/1"],
    ],
    req_body: "",
    res_headers: [
      ["Content-Type", "application/json"],
      ["Set-Cookie", "a=1"],
      ["Set-Cookie", "b=2"],
    ],
    res_body: '{"items":[{"id":1,"name":"one"},{"id":2,"name":"two"}],"total":2}',
    req_body_encoding: "utf8",
    res_body_encoding: "utf8",
    req_body_size: 0,
    res_body_size: 65,
    req_body_truncated: false,
    res_body_truncated: false,
    req_body_decoded_from: "",
    res_body_decoded_from: "",
    ...over,
  } as EntryDetail;
}

/** Apply a unified diff produced by unifiedDiff to `a` (test oracle, independent of the differ). */
function applyUnified(a: string, patch: string): string {
  if (patch === "") return a;
  const src = splitLines(a);
  const lines = patch.split("\n");
  expect(lines[0]).toBe("--- a");
  expect(lines[1]).toBe("+++ b");
  const out: string[] = [];
  let pos = 0;
  let i = 2;
  const stripLast = () => {
    const last = out.length - 1;
    out[last] = out[last].replace(/\n$/, "");
  };
  while (i < lines.length && lines[i] !== "") {
    const m = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@$/.exec(lines[i]);
    expect(m).not.toBeNull();
    const aStart = Number(m![1]);
    const aCount = m![2] === undefined ? 1 : Number(m![2]);
    const from = aCount === 0 ? aStart : aStart - 1;
    while (pos < from) out.push(src[pos++]);
    i++;
    while (i < lines.length && lines[i] !== "" && !lines[i].startsWith("@@")) {
      const t = lines[i][0];
      const body = lines[i].slice(1) + "\n";
      if (t === " ") {
        expect(src[pos]?.replace(/\n?$/, "\n")).toBe(body);
        out.push(src[pos++]);
      } else if (t === "-") {
        expect(src[pos]?.replace(/\n?$/, "\n")).toBe(body);
        pos++;
      } else if (t === "+") out.push(body);
      else if (lines[i] === "\\ No newline at end of file") {
        if (lines[i - 1][0] !== "-") stripLast();
      } else throw new Error("bad line " + lines[i]);
      i++;
    }
  }
  while (pos < src.length) out.push(src[pos++]);
  return out.join("");
}

describe("diffEntries: whole-entry layout", () => {
  test("identical entries are equal everywhere", () => {
    const d = diffEntries(entry({ id: 1 }), entry({ id: 2 }));
    expect(d.equal).toBe(true);
    expect(d.a_id).toBe(1);
    expect(d.b_id).toBe(2);
    expect(d.method).toEqual({ a: "GET", b: "GET", equal: true });
    expect(d.status).toEqual({ a: 200, b: 200, equal: true });
    expect(d.url.equal).toBe(true);
    expect(d.url.query).toEqual({ equal: true, added: [], removed: [], changed: [] });
    expect(d.req_headers).toEqual({ equal: true, added: [], removed: [], changed: [] });
    expect(d.res_headers).toEqual({ equal: true, added: [], removed: [], changed: [] });
    expect(d.req_body).toEqual({
      equal: true,
      a_size: 0,
      b_size: 0,
      a_truncated: false,
      b_truncated: false,
      kind: "text",
      unified: "",
      json: null,
      note: "",
    });
    expect(d.res_body.equal).toBe(true);
    expect(d.res_body.kind).toBe("json");
    expect(d.res_body.json).toEqual([]);
    expect(d.res_body.unified).toBe("");
    expect(d.res_body.a_size).toBe(65);
  });

  test("method and status changes", () => {
    const d = diffEntries(entry({}), entry({ method: "POST", status_code: 404 }));
    expect(d.equal).toBe(false);
    expect(d.method).toEqual({ a: "GET", b: "POST", equal: false });
    expect(d.status).toEqual({ a: 200, b: 404, equal: false });
    expect(d.url.equal).toBe(true);
  });

  test("URL components: scheme, host, port, path and query parameters", () => {
    const d = diffEntries(
      entry({ url: "http://a.example.test/v1/items?page=2&sort=asc&tag=x&tag=y&gone=1" }),
      entry({ url: "https://b.example.test:8443/v2/items?page=3&sort=asc&tag=y&tag=z&new=%20sp" }),
    );
    expect(d.equal).toBe(false);
    expect(d.url.equal).toBe(false);
    expect(d.url.scheme).toEqual({ a: "http", b: "https", equal: false });
    expect(d.url.host).toEqual({ a: "a.example.test", b: "b.example.test", equal: false });
    expect(d.url.port).toEqual({ a: 80, b: 8443, equal: false });
    expect(d.url.path).toEqual({ a: "/v1/items", b: "/v2/items", equal: false });
    expect(d.url.query).toEqual({
      equal: false,
      added: [["new", " sp"]],
      removed: [["gone", "1"]],
      changed: [
        { name: "page", a: "2", b: "3" },
        { name: "tag", a: "x", b: "z" },
      ],
    });
  });

  test("default port equals explicit port; only the string differs", () => {
    const d = diffEntries(entry({ url: "https://h.test/x" }), entry({ url: "https://h.test:443/x" }));
    expect(d.url.equal).toBe(false);
    expect(d.url.port).toEqual({ a: 443, b: 443, equal: true });
    expect(d.url.host.equal && d.url.path.equal && d.url.scheme.equal && d.url.query.equal).toBe(true);
    expect(d.equal).toBe(false);
  });

  test("headers: added, removed, changed, names case-insensitive", () => {
    const d = diffEntries(
      entry({
        req_headers: [
          ["Host", "api.example.test"],
          ["Accept", "application/json"],
          ["User-Agent", "test/1"],
          ["X-Old", "gone"],
        ],
      }),
      entry({
        req_headers: [
          ["host", "api.example.test"],
          ["ACCEPT", "text/html"],
          ["User-Agent", "test/1"],
          ["X-New", "here"],
        ],
      }),
    );
    expect(d.req_headers).toEqual({
      equal: false,
      added: [["X-New", "here"]],
      removed: [["X-Old", "gone"]],
      changed: [{ name: "Accept", a: "application/json", b: "text/html" }],
    });
    expect(d.res_headers.equal).toBe(true);
    expect(d.equal).toBe(false);
  });

  test("repeated headers are compared as ordered value lists", () => {
    const base: [string, string][] = [["Content-Type", "application/json"]];
    const d1 = diffEntries(
      entry({ res_headers: [...base, ["Set-Cookie", "a=1"], ["Set-Cookie", "b=2"], ["Set-Cookie", "c=3"]] }),
      entry({ res_headers: [...base, ["set-cookie", "b=2"], ["set-cookie", "c=4"]] }),
    );
    expect(d1.res_headers).toEqual({ equal: false, added: [], removed: [["Set-Cookie", "c=3"]], changed: [{ name: "Set-Cookie", a: "a=1", b: "c=4" }] });

    const d2 = diffEntries(
      entry({ res_headers: [...base, ["Set-Cookie", "a=1"], ["Set-Cookie", "b=2"]] }),
      entry({ res_headers: [...base, ["Set-Cookie", "b=2"], ["Set-Cookie", "a=1"]] }),
    );
    expect(d2.res_headers).toEqual({ equal: false, added: [], removed: [], changed: [{ name: "Set-Cookie", a: "a=1, b=2", b: "b=2, a=1" }] });

    const d3 = diffEntries(
      entry({ res_headers: [...base, ["Set-Cookie", "a=1"]] }),
      entry({ res_headers: [...base, ["Set-Cookie", "a=1"], ["Set-Cookie", "z=9"]] }),
    );
    expect(d3.res_headers).toEqual({ equal: false, added: [["Set-Cookie", "z=9"]], removed: [], changed: [] });
  });

  test("header order across different names is ignored", () => {
    const d = diffEntries(
      entry({ req_headers: [["A", "1"], ["B", "2"]] }),
      entry({ req_headers: [["B", "2"], ["A", "1"]] }),
    );
    expect(d.req_headers.equal).toBe(true);
    expect(d.equal).toBe(true);
  });
});

describe("bodies", () => {
  test("text body: unified diff with exact hunks", () => {
    const a = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu"].join("\n") + "\n";
    const b = ["alpha", "BETA", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "lambda", "mu", "nu"].join("\n") + "\n";
    const d = diffEntries(
      entry({ method: "POST", req_headers: [["Content-Type", "text/plain"]], req_body: a, req_body_size: a.length }),
      entry({ method: "POST", req_headers: [["Content-Type", "text/plain"]], req_body: b, req_body_size: b.length }),
    );
    expect(d.req_body.kind).toBe("text");
    expect(d.req_body.equal).toBe(false);
    expect(d.req_body.json).toBeNull();
    expect(d.req_body.a_size).toBe(a.length);
    expect(d.req_body.unified).toBe(
      [
        "--- a",
        "+++ b",
        "@@ -1,5 +1,5 @@",
        " alpha",
        "-beta",
        "+BETA",
        " gamma",
        " delta",
        " epsilon",
        "@@ -7,6 +7,6 @@",
        " eta",
        " theta",
        " iota",
        "-kappa",
        " lambda",
        " mu",
        "+nu",
        "",
      ].join("\n"),
    );
    expect(applyUnified(a, d.req_body.unified)).toBe(b);
  });

  test("nearby changes merge into one hunk; insertion into empty text; missing final newline", () => {
    expect(unifiedDiff("1\n2\n3\n4\n5\n6\n7\n8\n", "1\nX\n3\n4\n5\n6\n7\nY\n")).toBe(
      "--- a\n+++ b\n@@ -1,8 +1,8 @@\n 1\n-2\n+X\n 3\n 4\n 5\n 6\n 7\n-8\n+Y\n",
    );
    expect(unifiedDiff("", "new\n")).toBe("--- a\n+++ b\n@@ -0,0 +1 @@\n+new\n");
    expect(unifiedDiff("a\nb", "a\nb\n")).toBe("--- a\n+++ b\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n");
    expect(unifiedDiff("same", "same")).toBe("");
  });

  test("JSON bodies: structural paths for nested objects, arrays and type changes", () => {
    const a = {
      items: [
        { id: 1, name: "one", tags: ["x"] },
        { id: 2, name: "two" },
        { id: 3, name: "three" },
      ],
      meta: { page: 1, owner: { name: "ann" }, flag: true },
      "odd key": 1,
      gone: "bye",
      list: [1, 2, 3],
    };
    const b = {
      items: [
        { id: 1, name: "one", tags: ["x", "y"] },
        { id: 2, name: "TWO", extra: null },
        { id: 3, name: "three" },
      ],
      meta: { page: "1", owner: ["ann"], flag: true },
      "odd key": 2,
      list: [1, 2],
      added: { deep: [1] },
    };
    const d = diffEntries(entry({ res_body: JSON.stringify(a, null, 2) }), entry({ res_body: JSON.stringify(b) }));
    expect(d.res_body.kind).toBe("json");
    expect(d.res_body.equal).toBe(false);
    expect(d.res_body.json).toEqual([
      { path: "$.items[0].tags[1]", op: "added", b: "y" },
      { path: "$.items[1].name", op: "changed", a: "two", b: "TWO" },
      { path: "$.items[1].extra", op: "added", b: null },
      { path: "$.meta.page", op: "changed", a: 1, b: "1" },
      { path: "$.meta.owner", op: "changed", a: { name: "ann" }, b: ["ann"] },
      { path: '$["odd key"]', op: "changed", a: 1, b: 2 },
      { path: "$.gone", op: "removed", a: "bye" },
      { path: "$.list[2]", op: "removed", a: 3 },
      { path: "$.added", op: "added", b: { deep: [1] } },
    ]);
    // still a text diff too
    expect(d.res_body.unified.startsWith("--- a\n+++ b\n@@ ")).toBe(true);
  });

  test("JSON: root type change, and formatting-only difference", () => {
    expect(jsonDiff({ a: 1 }, [1]).changes).toEqual([{ path: "$", op: "changed", a: { a: 1 }, b: [1] }]);
    const d = diffEntries(entry({ res_body: '{"a":1,"b":[1,2]}' }), entry({ res_body: '{\n  "a": 1,\n  "b": [1, 2]\n}' }));
    expect(d.res_body.kind).toBe("json");
    expect(d.res_body.equal).toBe(false);
    expect(d.res_body.json).toEqual([]);
    expect(d.equal).toBe(false);
  });

  test("JSON change list is capped", () => {
    const a = JSON.stringify(Array.from({ length: JSON_DIFF_MAX_CHANGES + 500 }, (_, i) => i));
    const b = JSON.stringify(Array.from({ length: JSON_DIFF_MAX_CHANGES + 500 }, (_, i) => -i - 1));
    const d = diffEntries(entry({ res_body: a }), entry({ res_body: b }));
    expect(d.res_body.json!.length).toBe(JSON_DIFF_MAX_CHANGES);
    expect(d.res_body.json![JSON_DIFF_MAX_CHANGES - 1]).toEqual({ path: `$[${JSON_DIFF_MAX_CHANGES - 1}]`, op: "changed", a: 999, b: -1000 });
    expect(d.res_body.note).toBe(`JSON change list stopped after ${JSON_DIFF_MAX_CHANGES} changes`);
  });

  test("JSON detection needs JSON on both sides", () => {
    const d = diffEntries(entry({ res_body: '{"a":1}' }), entry({ res_body: "{not json" }));
    expect(d.res_body.kind).toBe("text");
    expect(d.res_body.json).toBeNull();
    const plain = [["Content-Type", "text/plain"]] as [string, string][];
    // scalar JSON without a JSON content type stays text
    const d2 = diffEntries(entry({ res_headers: plain, res_body: "12" }), entry({ res_headers: plain, res_body: "13" }));
    expect(d2.res_body.kind).toBe("text");
    const d3 = diffEntries(entry({ res_body: "12" }), entry({ res_body: "13" }));
    expect(d3.res_body.kind).toBe("json");
    expect(d3.res_body.json).toEqual([{ path: "$", op: "changed", a: 12, b: 13 }]);
  });

  test("binary bodies: byte equality, sizes, no unified diff", () => {
    const x = Buffer.from([0, 1, 2, 255]).toString("base64");
    const y = Buffer.from([0, 1, 3, 255, 9]).toString("base64");
    const bin = { res_body_encoding: "base64" as const, res_headers: [["Content-Type", "image/png"]] as [string, string][] };
    const d = diffEntries(entry({ ...bin, res_body: x }), entry({ ...bin, res_body: y }));
    expect(d.res_body).toEqual({
      equal: false,
      a_size: 4,
      b_size: 5,
      a_truncated: false,
      b_truncated: false,
      kind: "binary",
      unified: "",
      json: null,
      note: "",
    });
    const same = diffEntries(entry({ ...bin, res_body: x }), entry({ ...bin, res_body: x }));
    expect(same.res_body.equal).toBe(true);
    expect(same.equal).toBe(true);
    // same bytes stored as utf8 on one side and base64 on the other are equal
    const mixed = diffEntries(entry({ res_body: "hi" }), entry({ res_body: Buffer.from("hi").toString("base64"), res_body_encoding: "base64" }));
    expect(mixed.res_body.equal).toBe(true);
    expect(mixed.res_body.kind).toBe("binary");
  });

  test("truncation flags are reported", () => {
    const d = diffEntries(entry({ res_body_truncated: true }), entry({}));
    expect(d.res_body.a_truncated).toBe(true);
    expect(d.res_body.b_truncated).toBe(false);
  });
});

describe("line diff caps", () => {
  test("bodies over the size cap: note, no unified diff", () => {
    const big = "x".repeat(80) + "\n";
    const a = big.repeat(Math.ceil((LINE_DIFF_MAX_BYTES + 10) / big.length));
    const b = a + "tail\n";
    const plain = [["Content-Type", "text/plain"]] as [string, string][];
    const d = diffEntries(entry({ res_headers: plain, res_body: a }), entry({ res_headers: plain, res_body: b }));
    expect(d.res_body.equal).toBe(false);
    expect(d.res_body.unified).toBe("");
    expect(d.res_body.note).toBe(`bodies differ; too large to diff line by line (over ${LINE_DIFF_MAX_BYTES} bytes)`);
    expect(d.res_body.a_size).toBe(a.length);
    expect(d.res_body.b_size).toBe(b.length);
  });

  test("too many changed lines: note, no unified diff", () => {
    const n = LINE_DIFF_MAX_EDITS; // n deletions + n insertions > cap
    const a = Array.from({ length: n }, (_, i) => `a${i}\n`).join("");
    const b = Array.from({ length: n }, (_, i) => `b${i}\n`).join("");
    const plain = [["Content-Type", "text/plain"]] as [string, string][];
    const d = diffEntries(entry({ res_headers: plain, res_body: a }), entry({ res_headers: plain, res_body: b }));
    expect(d.res_body.unified).toBe("");
    expect(d.res_body.note).toBe(`bodies differ; too many changed lines to diff line by line (over ${LINE_DIFF_MAX_EDITS} edits)`);
    expect(myersDiff(splitLines(a), splitLines(b))).toBeNull();
    // just under the cap it works
    const half = Math.floor(LINE_DIFF_MAX_EDITS / 2);
    const a2 = Array.from({ length: half }, (_, i) => `a${i}\n`).join("");
    const b2 = Array.from({ length: half }, (_, i) => `b${i}\n`).join("");
    expect(applyUnified(a2, unifiedDiff(a2, b2)!)).toBe(b2);
  });

  test("a 1 MiB body with one changed line diffs to one small hunk", () => {
    const lines = Array.from({ length: 16384 }, (_, i) => `line ${i} ${"p".repeat(60)}\n`);
    const a = lines.join("");
    expect(a.length).toBeGreaterThan(1024 * 1024);
    const bl = [...lines];
    bl[8000] = "changed\n";
    const b = bl.join("");
    const u = unifiedDiff(a, b)!;
    expect(u).toBe(
      "--- a\n+++ b\n@@ -7998,7 +7998,7 @@\n" +
        [7997, 7998, 7999].map((i) => " " + lines[i]).join("") +
        "-" +
        lines[8000] +
        "+changed\n" +
        [8001, 8002, 8003].map((i) => " " + lines[i]).join(""),
    );
  });

  test("line diff is minimal and round-trips (randomised, fixed seed)", () => {
    let seed = 12345;
    const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
    const gen = () => {
      let s = "";
      const n = Math.floor(rnd() * 20);
      for (let i = 0; i < n; i++) s += "abcde"[Math.floor(rnd() * 5)] + "\n";
      if (rnd() < 0.3) s += "z";
      return s;
    };
    for (let t = 0; t < 400; t++) {
      const a = gen();
      const b = gen();
      const la = splitLines(a);
      const lb = splitLines(b);
      const ops = myersDiff(la, lb)!;
      const edits = ops.filter((o) => o !== 0).length;
      // LCS by dynamic programming as the oracle for the minimal edit count
      const L = Array.from({ length: la.length + 1 }, () => new Array<number>(lb.length + 1).fill(0));
      for (let x = la.length - 1; x >= 0; x--)
        for (let y = lb.length - 1; y >= 0; y--) L[x][y] = la[x] === lb[y] ? L[x + 1][y + 1] + 1 : Math.max(L[x + 1][y], L[x][y + 1]);
      expect(edits).toBe(la.length + lb.length - 2 * L[0][0]);
      expect(applyUnified(a, unifiedDiff(a, b)!)).toBe(b);
    }
  });
});
