import { describe, expect, test } from "bun:test";
import { junitXml, xmlEscape } from "../../../src/cli/report/junit.ts";

/** Parses the XML with Python's standard library (a real XML parser, not ours) and returns a JSON digest. */
function parseWithPython(xml: string): any {
  const script = `
import json, sys, xml.etree.ElementTree as ET
root = ET.fromstring(sys.stdin.buffer.read())
out = {"tag": root.tag, "attrs": root.attrib, "suites": []}
for s in root.findall("testsuite"):
    cases = []
    for c in s.findall("testcase"):
        cases.append({"attrs": c.attrib, "children": [{"tag": k.tag, "attrs": k.attrib, "text": k.text} for k in c]})
    out["suites"].append({"attrs": s.attrib, "cases": cases})
print(json.dumps(out))
`;
  const r = Bun.spawnSync(["python3", "-c", script], { stdin: Buffer.from(xml) });
  if (r.exitCode !== 0) throw new Error(`python could not parse the XML: ${r.stderr.toString()}`);
  return JSON.parse(r.stdout.toString());
}

describe("junitXml", () => {
  test("counts, nesting and escaping survive a real XML parser", () => {
    const xml = junitXml([
      {
        name: "Users / <login>",
        timestamp: "2026-11-25T10:00:00.000Z",
        durationMs: 1234,
        cases: [
          { name: 'status is "200" & fast', classname: "api.users.login", durationMs: 12 },
          { name: "token set", classname: "api.users.login", durationMs: 3, failures: [{ message: "expected 'a' to equal 'b'", type: "AssertionError" }], systemOut: "log\u0001line" },
        ],
      },
      { name: "broken", timestamp: "2026-11-25T10:00:01.000Z", durationMs: 5, cases: [{ name: "request", classname: "api.broken", durationMs: 5, error: { message: "ECONNREFUSED" } }, { name: "later", classname: "api.broken", durationMs: 0, skipped: true }] },
    ]);
    const doc = parseWithPython(xml);
    expect(doc.tag).toBe("testsuites");
    expect(doc.attrs).toMatchObject({ tests: "4", failures: "1", errors: "1", skipped: "1", time: "1.239" });
    expect(doc.suites[0].attrs).toMatchObject({ name: "Users / <login>", tests: "2", failures: "1", errors: "0", time: "1.234" });
    expect(doc.suites[0].cases[0].attrs.name).toBe('status is "200" & fast');
    expect(doc.suites[0].cases[1].children[0]).toMatchObject({ tag: "failure", attrs: { message: "expected 'a' to equal 'b'", type: "AssertionError" } });
    expect(doc.suites[0].cases[1].children[1]).toMatchObject({ tag: "system-out", text: "log\uFFFDline" });
    expect(doc.suites[1].cases[0].children[0]).toMatchObject({ tag: "error", attrs: { message: "ECONNREFUSED" } });
    expect(doc.suites[1].cases[1].children[0].tag).toBe("skipped");
  });

  test("xmlEscape replaces characters XML 1.0 cannot hold", () => {
    expect(xmlEscape("a\u0000b\uD800c<")).toBe("a\uFFFDb\uFFFDc&lt;");
  });
});
