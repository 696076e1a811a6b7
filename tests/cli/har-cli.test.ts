/** `tapwire har export` and `tapwire har import` end to end with the compiled binary and a running tapwire. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { harErrors } from "../helpers/har-schema.ts";
import type { RunningTapwire } from "../helpers/tapwire-process.ts";
import { tempDirs } from "../helpers/temp-dirs.ts";
import { curl, startUpstream, type Upstream } from "../helpers/upstream.ts";
import { startBinary, tw } from "./cli-helpers.ts";

const temp = tempDirs("tapwire-cli-har-");
let up: Upstream;
let t: RunningTapwire;

beforeAll(async () => {
  up = startUpstream();
  t = await startBinary(["--upstream-ca", up.caFile], temp());
  const proxy = `http://127.0.0.1:${t.handshake.proxy_port}`;
  for (const args of [[`${up.httpUrl}/echo?one`], ["-d", "a=1", `${up.httpUrl}/echo?two`], [`${up.httpUrl}/status/503`]]) {
    const r = await curl(["-x", proxy, "-o", "/dev/null", ...args]);
    expect(r.code).toBe(0);
  }
});

afterAll(async () => {
  await t?.stop();
  up?.stop();
});

const dd = () => ["--data-dir", t.dataDir];

describe("tapwire har export", () => {
  test("-o FILE: a HAR 1.2 file (mode 0600) of the filtered entries", async () => {
    const file = join(temp(), "echo.har");
    const r = await tw(["har", "export", ...dd(), "--path", "/echo", "--title", "echo calls", "-o", file]);
    expect(r.code).toBe(0);
    expect(r.err).toContain(`wrote ${file}`);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const doc = JSON.parse(readFileSync(file, "utf8"));
    expect(harErrors(doc)).toBeNull();
    expect(doc.log.entries.map((e: any) => e.request.url)).toEqual([`${up.httpUrl}/echo?one`, `${up.httpUrl}/echo?two`]);
    expect(doc.log.pages[0].title).toBe("echo calls");
    expect(doc.log.entries[1].request.postData.params).toEqual([{ name: "a", value: "1" }]);
  });

  test("stdout without -o; --status 5xx and --limit", async () => {
    const r = await tw(["har", "export", ...dd(), "--status", "5xx"]);
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.out);
    expect(doc.log.entries.map((e: any) => e.response.status)).toEqual([503]);
    const lim = JSON.parse((await tw(["har", "export", ...dd(), "--limit", "1", "-o", "-"])).out);
    expect(lim.log.entries.length).toBe(1);
  });

  test("usage errors exit 2; --help exits 0 with an example", async () => {
    expect((await tw(["har", "export", ...dd(), "--colour", "red"])).code).toBe(2);
    expect((await tw(["har", "export", ...dd(), "--limit", "many"])).code).toBe(2);
    expect((await tw(["har"])).code).toBe(2);
    expect((await tw(["har", "frobnicate"])).code).toBe(2);
    for (const args of [["har", "--help"], ["har", "export", "--help"], ["har", "import", "--help"]]) {
      const h = await tw(args);
      expect(h.code).toBe(0);
      expect(h.out).toContain("tapwire har");
      expect(h.out).toMatch(/examples?:/);
    }
  });
});

describe("tapwire har import", () => {
  test("FILE: entries added, marked imported; --json; stdin", async () => {
    const file = join(temp(), "all.har");
    expect((await tw(["har", "export", ...dd(), "-o", file])).code).toBe(0);
    const r = await tw(["har", "import", ...dd(), file]);
    expect(r.code).toBe(0);
    const m = /^imported 3 entries \(ids (\d+)-(\d+)\)$/.exec(r.out.trim());
    expect(m).not.toBeNull();
    const shown = JSON.parse((await tw(["traffic", "show", m![1]!, "--json", ...dd()])).out);
    expect(shown.url).toBe(`${up.httpUrl}/echo?one`);
    expect(shown.imported.format).toBe("har");
    const j = await tw(["har", "import", ...dd(), "--json", "-"], { stdin: readFileSync(file, "utf8") });
    expect(j.code).toBe(0);
    expect(JSON.parse(j.out)).toMatchObject({ imported: 3, websocket_connections: 0 });
  });

  test("--session NAME keeps the file as a saved session", async () => {
    const file = join(temp(), "s.har");
    expect((await tw(["har", "export", ...dd(), "--limit", "2", "-o", file])).code).toBe(0);
    const r = await tw(["har", "import", file, "--session", "baseline", ...dd()]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^saved session baseline-[0-9a-f]{8} "baseline": 2 entries/);
    const bare = await tw(["har", "import", file, ...dd(), "--session"]);
    expect(bare.code).toBe(0);
    expect(bare.out).toContain("entries");
  });

  test("a file that is not a HAR fails with the API's reason (exit 1); a missing one too", async () => {
    const bad = join(temp(), "bad.har");
    writeFileSync(bad, JSON.stringify({ log: { entries: [{ startedDateTime: "later" }] } }));
    const r = await tw(["har", "import", ...dd(), bad]);
    expect(r.code).toBe(1);
    expect(r.err).toContain("log.entries[0].startedDateTime");
    const missing = await tw(["har", "import", ...dd(), join(temp(), "nope.har")]);
    expect(missing.code).toBe(1);
    expect(missing.err).toContain("cannot read");
    const notJson = join(temp(), "x.har");
    writeFileSync(notJson, "{");
    expect((await tw(["har", "import", ...dd(), notJson])).code).toBe(1);
    expect((await tw(["har", "import", ...dd()])).code).toBe(2);
  });
});
