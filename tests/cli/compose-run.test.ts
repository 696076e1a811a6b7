/**
 * `tapwire compose run` end to end: the CLI as a process (bun src/cli/main.ts) against a running tapwire (an
 * in-process service of this test) and with the tapwire it embeds, sending to a real local HTTPS upstream.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { main } from "../../src/cli/main.ts";
import type { Io } from "../../src/cli/command.ts";
import { startService } from "../helpers/service.ts";
import { BUN, ROOT } from "../helpers/tapwire-process.ts";
import { tempDirs } from "../helpers/temp-dirs.ts";
import { startUpstream, type Upstream } from "../helpers/upstream.ts";
import { tw } from "./cli-helpers.ts";

const temp = tempDirs("tapwire-compose-run-");
let up: Upstream;
let svc: Awaited<ReturnType<typeof startService>>;
let work: string;
let collectionFile: string;

const POSTMAN_V21 = "https://schema.getpostman.com/json/collection/v2.1.0/collection.json";
const ev = (listen: string, ...lines: string[]) => ({ listen, script: { type: "text/javascript", exec: lines } });

/** A Postman v2.1 collection, as a user would export it: a top-level request before two folders. */
function postmanCollection(base: string) {
  return {
    info: { name: "Runner", schema: POSTMAN_V21 },
    variable: [
      { key: "base", value: base },
      { key: "user", value: "nobody" },
      { key: "code", value: "200" },
    ],
    item: [
      {
        name: "status",
        request: { method: "GET", url: "{{base}}/status/{{code}}" },
        event: [ev("test", 'pm.test("status is 200", () => pm.response.to.have.status(200));')],
      },
      {
        name: "Auth",
        item: [
          {
            name: "login",
            request: { method: "POST", url: "{{base}}/echo/login", body: { mode: "raw", raw: '{"user":"{{user}}"}', options: { raw: { language: "json" } } } },
            event: [
              ev(
                "test",
                'pm.test("login ok", () => pm.response.to.have.status(200));',
                'pm.collectionVariables.set("session", "sess-" + JSON.parse(pm.response.json().body).user);',
              ),
            ],
          },
        ],
      },
      {
        name: "Users",
        item: [
          {
            name: "me",
            request: {
              method: "GET",
              url: "{{base}}/echo/me",
              header: [
                { key: "X-User", value: "{{user}}" },
                { key: "X-Session", value: "{{session}}" },
              ],
            },
            event: [ev("test", 'pm.test("user header", () => pm.expect(pm.response.json().headers["x-user"]).to.eql(pm.iterationData.get("user") || "nobody"));')],
          },
        ],
      },
    ],
  };
}

interface Ran {
  code: number;
  out: string;
  err: string;
}

/** The CLI as its own process (source, not the compiled binary). */
async function cli(args: string[]): Promise<Ran> {
  const p = Bun.spawn([BUN, join(ROOT, "src/cli/main.ts"), ...args], { cwd: work, stdout: "pipe", stderr: "pipe", stdin: "ignore", env: { ...process.env, TAPWIRE_DATA_DIR: "" } });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out, err };
}

/** Parses JUnit XML with Python's standard library (a real XML parser) into a digest. */
function parseJunit(xml: string): any {
  const script = `
import json, sys, xml.etree.ElementTree as ET
root = ET.fromstring(sys.stdin.buffer.read())
suites = []
for s in root.findall("testsuite"):
    suites.append({"attrs": s.attrib, "cases": [{"name": c.get("name"), "children": [k.tag for k in c]} for c in s.findall("testcase")]})
print(json.dumps({"tag": root.tag, "attrs": root.attrib, "suites": suites}))
`;
  const r = Bun.spawnSync(["python3", "-c", script], { stdin: Buffer.from(xml) });
  if (r.exitCode !== 0) throw new Error(`python could not parse the JUnit XML: ${r.stderr.toString()}`);
  return JSON.parse(r.stdout.toString());
}

const report = (dir: string) => JSON.parse(readFileSync(join(dir, "compose-report.json"), "utf8"));
const junit = (dir: string) => parseJunit(readFileSync(join(dir, "compose-junit.xml"), "utf8"));
const seenAt = (path: string) => up.seen.filter((s) => new URL(s.url).pathname === path);
const header = (s: { headers: [string, string][] }, name: string) => s.headers.find(([n]) => n === name)?.[1];

beforeAll(async () => {
  up = startUpstream();
  svc = await startService({ upstreamCa: [up.caFile] });
  work = temp();
  collectionFile = join(work, "runner.postman_collection.json");
  writeFileSync(collectionFile, JSON.stringify(postmanCollection(up.httpsUrl)));
});
afterAll(async () => {
  await svc?.stop();
  up?.stop();
});

describe("without a running tapwire (embedded, temporary data directory)", () => {
  test("a Postman file runs in order, passes (exit 0), and writes JSON and JUnit reports whose counts match", async () => {
    const out = join(work, "reports-pass");
    const empty = temp();
    const r = await cli(["compose", "run", collectionFile, "--data-dir", empty, "--upstream-ca", up.caFile, "--out", out]);
    expect({ code: r.code, err: r.err }).toEqual({ code: 0, err: `tapwire: wrote ${join(out, "compose-report.json")} and ${join(out, "compose-junit.xml")}\n` });
    // folders first (depth-first), then the level's own requests; one line per request
    const lines = r.out.split("\n");
    expect(lines[0]).toBe("Runner · embedded tapwire");
    expect(lines.filter((l) => l.startsWith("  ✓ "))).toEqual([
      expect.stringMatching(new RegExp(`^  ✓ Auth / login  POST ${up.httpsUrl}/echo/login  200 OK  \\d+ms  \\d+ B  1/1 tests$`)),
      expect.stringMatching(new RegExp(`^  ✓ Users / me  GET ${up.httpsUrl}/echo/me  200 OK  \\d+ms  \\d+ B  1/1 tests$`)),
      expect.stringMatching(new RegExp(`^  ✓ status  GET ${up.httpsUrl}/status/200  200 OK  \\d+ms  \\d+ B  1/1 tests$`)),
    ]);
    expect(r.out).toMatch(/ +executed  failed\niterations +1 +0\nrequests +3 +0\ntests +3 +0\n/);
    expect(r.out).toContain("passed: 3 request(s)");
    expect(r.out).not.toContain("\x1b"); // no progress line when stdout is no terminal

    const rep = report(out);
    expect(rep).toMatchObject({ tool: "tapwire compose run", name: "Runner", iterations: 1, bailed: false, interrupted: false });
    expect(rep.meta).toMatchObject({ embedded: true, environment: null });
    expect(rep.stats).toEqual({ iterations: { executed: 1, failed: 0 }, requests: { executed: 3, failed: 0 }, tests: { executed: 3, failed: 0 }, script_errors: 0 });
    expect(rep.steps.map((s: any) => s.path)).toEqual([["Auth", "login"], ["Users", "me"], ["status"]]);
    // a collection variable a test script set is seen by the next request
    expect(header(seenAt("/echo/me").at(-1)!, "x-session")).toBe("sess-nobody");

    const doc = junit(out);
    expect(doc.tag).toBe("testsuites");
    expect(doc.attrs).toMatchObject({ tests: "3", failures: "0", errors: "0" });
    expect(doc.suites.map((s: any) => [s.attrs.name, s.attrs.tests])).toEqual([
      ["Auth / login", "1"],
      ["Users / me", "1"],
      ["status", "1"],
    ]);
  });

  test("--data CSV binds a row per iteration (the last row again past the end); a failed test exits 1; --bail stops there", async () => {
    const csv = join(work, "users.csv");
    writeFileSync(csv, 'user,code\r\nada,200\r\n"bob, jr",500\r\n');
    const out = join(work, "reports-csv");
    const r = await cli(["compose", "run", collectionFile, "--data-dir", temp(), "--upstream-ca", up.caFile, "--data", csv, "--iterations", "3", "--reporter", "json,junit", "--out", out]);
    expect(r.code).toBe(1);
    expect(r.out).toBe(""); // no cli reporter
    const rep = report(out);
    expect(rep.iterations).toBe(3);
    expect(rep.steps).toHaveLength(9);
    expect(rep.stats).toEqual({ iterations: { executed: 3, failed: 2 }, requests: { executed: 9, failed: 0 }, tests: { executed: 9, failed: 2 }, script_errors: 0 });
    const failed = rep.steps.filter((s: any) => s.tests.some((t: any) => !t.passed));
    expect(failed.map((s: any) => [s.iteration, s.path.join("/"), s.status])).toEqual([
      [1, "status", 500],
      [2, "status", 500],
    ]);
    expect(failed[0].tests[0]).toEqual({ name: "status is 200", passed: false, error: "expected response to have status code 200 but got 500" });
    const users = seenAt("/echo/me").slice(-3).map((s) => [header(s, "x-user"), header(s, "x-session")]);
    expect(users).toEqual([
      ["ada", "sess-ada"],
      ["bob, jr", "sess-bob, jr"],
      ["bob, jr", "sess-bob, jr"],
    ]);
    const doc = junit(out);
    expect(doc.attrs).toMatchObject({ tests: "9", failures: "2", errors: "0" });
    expect(doc.suites).toHaveLength(9);
    expect(doc.suites[5].attrs).toMatchObject({ name: "status (iteration 2)", failures: "1" });
    expect(doc.suites[5].cases).toEqual([{ name: "status is 200", children: ["failure"] }]);

    const bailOut = join(work, "reports-bail");
    const b = await cli(["compose", "run", collectionFile, "--data-dir", temp(), "--upstream-ca", up.caFile, "--data", csv, "--iterations", "3", "--bail", "--out", bailOut]);
    expect(b.code).toBe(1);
    expect(b.out).toContain("  ✗ status  GET");
    expect(b.out).toContain("    ✗ status is 200: expected response to have status code 200 but got 500");
    expect(b.out).toContain("stopped at the first failure (--bail)");
    const bailed = report(bailOut);
    expect(bailed.bailed).toBe(true);
    expect(bailed.steps).toHaveLength(6);
    expect(junit(bailOut).attrs).toMatchObject({ tests: "6", failures: "1" });
  });

  test("--data JSON with --folder runs only that folder, once per row", async () => {
    const data = join(work, "users.json");
    writeFileSync(data, JSON.stringify([{ user: "cleo" }, { user: "dan" }]));
    const out = join(work, "reports-json");
    const r = await cli(["compose", "run", collectionFile, "--data-dir", temp(), "--upstream-ca", up.caFile, "--data", data, "--folder", "Users", "--out", out]);
    expect(r.code).toBe(0);
    const rep = report(out);
    expect(rep.steps.map((s: any) => [s.iteration, s.path.join(" / "), s.tests[0].passed])).toEqual([
      [0, "Users / me", true],
      [1, "Users / me", true],
    ]);
    expect(seenAt("/echo/me").slice(-2).map((s) => header(s, "x-user"))).toEqual(["cleo", "dan"]);
    expect(r.out).toContain("iteration 2/2");
  });

  test("a request that gets no response, or whose pre-request script throws, fails the run (exit 1) as a JUnit error", async () => {
    const dead = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("x") });
    const deadPort = dead.port;
    dead.stop(true);
    const file = join(work, "dead.json");
    writeFileSync(
      file,
      JSON.stringify({
        name: "Dead",
        requests: [
          { name: "gone", method: "GET", url: `http://127.0.0.1:${deadPort}/x` },
          { name: "guarded", method: "GET", url: `${up.httpsUrl}/echo/guarded`, scripts: { prerequest: 'throw new Error("refused by script")' } },
        ],
      }),
    );
    const before = seenAt("/echo/guarded").length;
    const out = join(work, "reports-dead");
    const r = await cli(["compose", "run", file, "--data-dir", temp(), "--out", out]);
    expect(r.code).toBe(1);
    expect(r.out).toContain(`  ✗ gone  GET http://127.0.0.1:${deadPort}/x  no response`);
    // a pre-request script that throws stops its request (as in Postman), named once
    expect(r.out).toContain(`  ✗ guarded  GET ${up.httpsUrl}/echo/guarded  no response\n      ! prerequest script of request 'guarded': Error: refused by script\n      ! not sent: its pre-request script failed\n`);
    expect(seenAt("/echo/guarded").length).toBe(before);
    const rep = report(out);
    expect(rep.stats).toMatchObject({ requests: { executed: 2, failed: 2 }, script_errors: 1 });
    expect(rep.steps[0].error).toBeString();
    expect(rep.steps[1].script_errors).toEqual([{ source: "request 'guarded'", event: "prerequest", message: "Error: refused by script" }]);
    const doc = junit(out);
    expect(doc.attrs).toMatchObject({ tests: "3", failures: "0", errors: "3" });
    expect(doc.suites[0].cases[0].children).toEqual(["error"]);
    expect(doc.suites[1].cases.map((c: any) => [c.name, c.children])).toEqual([
      [`GET ${up.httpsUrl}/echo/guarded`, ["error"]],
      ["prerequest script of request 'guarded'", ["error"]],
    ]);
  });
});

describe("the compiled binary", () => {
  test("runs a collection with its scripts (the script worker is in the executable)", async () => {
    const out = join(work, "reports-binary");
    const r = await tw(["compose", "run", collectionFile, "--data-dir", temp(), "--upstream-ca", up.caFile, "--reporter", "junit", "--out", out], { cwd: work });
    expect({ code: r.code, out: r.out }).toEqual({ code: 0, out: "" });
    expect(junit(out).attrs).toMatchObject({ tests: "3", failures: "0", errors: "0" });
  });
});

describe("with a running tapwire", () => {
  const C = "/api/v1/compose/collections";
  const post = (path: string, body: unknown) => svc.call(path, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } });

  test("by id with -e NAME: runs on that collection; pm.environment.set in a test script updates its currentValue there", async () => {
    const res = await post(C, {
      name: "Live",
      environments: [{ name: "dev", variables: [{ key: "base", defaultValue: up.httpsUrl }, { key: "seen", defaultValue: "no" }] }],
      requests: [
        {
          name: "ping",
          method: "GET",
          url: "{{base}}/echo/ping",
          scripts: { prerequest: "", test: 'pm.test("ok", () => pm.response.to.have.status(200));\npm.environment.set("seen", "yes-" + pm.info.iteration);' },
        },
      ],
    });
    const c = (await res.json()) as any;
    const before = seenAt("/echo/ping").length;
    const r = await cli(["compose", "run", c.id, "-e", "dev", "--data-dir", svc.config.dataDir]);
    expect({ code: r.code, err: r.err }).toEqual({ code: 0, err: "" });
    expect(r.out.split("\n")[0]).toBe("Live · environment dev");
    expect(seenAt("/echo/ping").length).toBe(before + 1);
    const after = (await (await svc.call(`${C}/${c.id}`)).json()) as any;
    expect(after.environments[0].variables.find((v: any) => v.key === "seen").currentValue).toBe("yes-0");
    // the requests went through the running tapwire's pipeline: captured there
    const list = (await (await svc.call("/api/v1/traffic?limit=5")).json()) as any;
    expect(list.items.some((e: any) => e.url === `${up.httpsUrl}/echo/ping`)).toBe(true);
  });

  test("a file is imported for the run and deleted afterwards", async () => {
    const ids = async () => ((await (await svc.call(C)).json()) as any[]).map((x) => x.id).sort();
    const before = await ids();
    const r = await cli(["compose", "run", collectionFile, "--data-dir", svc.config.dataDir, "--folder", "Auth"]);
    expect(r.code).toBe(0);
    expect(r.out).toContain("  ✓ Auth / login  POST");
    expect(await ids()).toEqual(before);
  });

  test("a progress line shows on a terminal only", async () => {
    const res = await post(C, { name: "Tty", requests: [{ name: "one", method: "GET", url: `${up.httpsUrl}/echo/tty` }] });
    const c = (await res.json()) as any;
    const run = async (isTTY: boolean) => {
      let text = "";
      const io: Io = {
        out: (l) => void (text += l + "\n"),
        err: () => {},
        write: (d) => void (text += typeof d === "string" ? d : new TextDecoder().decode(d)),
        isTTY,
        columns: 80,
        env: { ...process.env, TAPWIRE_DATA_DIR: "" },
        readStdin: async () => new Uint8Array(),
      };
      const code = await main(["compose", "run", c.id, "--data-dir", svc.config.dataDir], io);
      return { code, text };
    };
    const tty = await run(true);
    expect(tty.code).toBe(0);
    expect(tty.text).toContain("\r\x1b[K[1/1] GET one\r\x1b[K  ✓ one  GET");
    const pipe = await run(false);
    expect(pipe.code).toBe(0);
    expect(pipe.text).not.toContain("\x1b");
  });
});

describe("usage errors exit 2", () => {
  const cases: [string, string[], string][] = [
    ["no COLLECTION", ["compose", "run"], "missing argument"],
    ["an unknown reporter", ["compose", "run", "x.json", "--reporter", "cli,html"], "unknown reporter 'html'"],
    ["a bad --iterations", ["compose", "run", "x.json", "--iterations", "0"], "--iterations must be between 1"],
    ["an unknown subcommand", ["compose", "walk"], "unknown compose command 'walk'"],
  ];
  for (const [why, args, message] of cases) {
    test(why, async () => {
      const r = await cli(args);
      expect(r.code).toBe(2);
      expect(r.err).toContain(message);
    });
  }

  test("a collection id nobody has, an unknown folder or environment, a broken data file", async () => {
    const empty = temp();
    const noSuch = await cli(["compose", "run", "no-such-collection", "--data-dir", empty]);
    expect(noSuch.code).toBe(2);
    expect(noSuch.err).toContain("no file no-such-collection, and no collection of that id");
    const folder = await cli(["compose", "run", collectionFile, "--data-dir", svc.config.dataDir, "--folder", "Nope"]);
    expect(folder.code).toBe(2);
    expect(folder.err).toContain("--folder: no folder 'Nope' in collection 'Runner'");
    const env = await cli(["compose", "run", collectionFile, "--data-dir", svc.config.dataDir, "-e", "prod"]);
    expect(env.code).toBe(2);
    expect(env.err).toContain("no environment or file 'prod' (the collection's environments: none)");
    const bad = join(work, "bad.csv");
    writeFileSync(bad, 'a,b\n1,"unclosed\n');
    const data = await cli(["compose", "run", collectionFile, "--data-dir", empty, "--data", bad]);
    expect(data.code).toBe(2);
    expect(data.err).toContain("a quoted field is not closed");
  });

  test("--help answers with an example", async () => {
    const r = await cli(["compose", "run", "--help"]);
    expect(r.code).toBe(0);
    expect(r.out).toContain("usage: tapwire compose run COLLECTION");
    expect(r.out).toContain("examples:\n  tapwire compose run");
  });
});
