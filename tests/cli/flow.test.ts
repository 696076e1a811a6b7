/**
 * `tapwire flow run` (in-process: main() with a recording Io): the example of docs/flows.md as shown there, with and
 * without a running tapwire, the exit codes, and the json/junit reporters.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { main } from "../../src/cli/main.ts";
import type { Io } from "../../src/cli/command.ts";
import { ROOT } from "../helpers/tapwire-process.ts";
import { startService } from "../helpers/service.ts";
import { tempDirs } from "../helpers/temp-dirs.ts";
import { flow, save, type Svc } from "../features/flows/flow-helpers.ts";
import { tw } from "./cli-helpers.ts";
import { type LoginApi, startLoginApi } from "../features/flows/login-api.ts";

const temp = tempDirs("tapwire-cli-flow-");
const EXAMPLE = join(ROOT, "docs/examples/flows/login.json");
let api: LoginApi;

beforeAll(() => {
  api = startLoginApi();
});
afterAll(() => api?.stop());

/** Runs the CLI in this process; collects stdout and stderr. */
async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const io: Io = {
    out: (l) => void (out += `${l}\n`),
    err: (l) => void (err += `${l}\n`),
    write: (d) => void (out += typeof d === "string" ? d : new TextDecoder().decode(d)),
    isTTY: false,
    columns: 120,
    env: { PATH: process.env.PATH },
    readStdin: async () => new Uint8Array(0),
  };
  const code = await main(args, io);
  return { code, out, err };
}

describe("the example of docs/flows.md", () => {
  test("the doc shows the example file verbatim", () => {
    const doc = readFileSync(join(ROOT, "docs/flows.md"), "utf8");
    const file = readFileSync(EXAMPLE, "utf8");
    expect(doc).toContain("```json\n" + file + "```");
  });

  test("runs as shown, without a running tapwire (an embedded one on a temporary data directory)", async () => {
    const dataDir = temp();
    const r = await cli(["flow", "run", EXAMPLE, "--env", `baseUrl=${api.url}`, "--data-dir", dataDir]);
    expect({ code: r.code, err: r.err }).toEqual({ code: 0, err: "" });
    const lines = r.out.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^flow Log in and read my profile \(run [0-9a-f-]{36}\)$/);
    const doc = readFileSync(join(ROOT, "docs/flows.md"), "utf8");
    // the lines the doc shows, with this run's address, id and times in place of the doc's
    const shown = doc.split("<!-- example-output -->")[1]!.split("```text\n")[1]!.split("```")[0]!.trimEnd().split("\n").slice(1);
    const norm = (l: string) => l.replace(/\(\d+(\.\d+)?m?s\)|in \d+(\.\d+)?m?s/g, "(T)").replace(/http:\/\/127\.0\.0\.1:\d+/g, "BASE").replace(/\(run [0-9a-f-]+\)/, "(run ID)");
    expect(lines.map(norm)).toEqual(["flow Log in and read my profile (run ID)", ...shown.map(norm)]);
    // the embedded tapwire wrote nothing into the data directory
    expect(readdirSync(dataDir)).toEqual([]);
  });

  test("the json reporter gives the run report with the outputs", async () => {
    const r = await cli(["flow", "run", EXAMPLE, "--env", `baseUrl=${api.url}`, "--reporter", "cli,json", "--data-dir", temp()]);
    expect(r.code).toBe(0);
    const report = JSON.parse(r.out);
    expect(report).toMatchObject({ flowId: "login", status: "passed", outputs: { greeting: "Hello, Alice" } });
    expect(report.outputs.token).toStartWith("tok-");
    // the cli lines went to stderr, out of the way of the JSON
    expect(r.err).toContain("PASSED:");
  });
});

describe("with a running tapwire", () => {
  let svc: Svc;
  beforeAll(async () => {
    svc = await startService();
    await save(
      svc,
      flow(
        "cli-fails",
        [
          ["start", "start"],
          ["r", "request", { method: "GET", url: "{{base}}/me" }],
          ["a", "assert", { checks: [{ type: "status", equals: 200 }, { type: "body", contains: "unauthorized" }] }],
        ],
        [["start", "r"], ["r", "a"]],
      ),
    );
    await save(svc, flow("cli-error", [["start", "start"], ["s", "script", { script: "throw new Error('no good')" }]], [["start", "s"]]));
  });
  afterAll(async () => svc?.stop());

  test("a stored flow by id through the API: exit 1 when it fails; --reporter json,junit --out DIR writes both", async () => {
    const out = temp();
    const before = ((await (await svc.call("/api/v1/traffic")).json()) as any).total;
    const r = await cli(["flow", "run", "cli-fails", "--env", `base=${api.url}`, "--reporter", "cli,json,junit", "--out", out, "--data-dir", svc.config.dataDir]);
    expect(r.code).toBe(1);
    expect(r.out).toContain("FAIL assert");
    expect(r.out).toContain("x status equals 200: expected status equals 200, got 401");
    expect(r.out).toMatch(/^FAILED: /m);
    expect(readdirSync(out).sort()).toEqual(["cli-fails.junit.xml", "cli-fails.report.json"]);
    expect(JSON.parse(readFileSync(join(out, "cli-fails.report.json"), "utf8")).status).toBe("failed");
    const xml = readFileSync(join(out, "cli-fails.junit.xml"), "utf8");
    expect(xml).toContain('<testsuites name="tapwire flow cli-fails" tests="3" failures="1" errors="0"');
    expect(xml).toContain('<failure message="expected status equals 200, got 401"');
    // it ran in the running tapwire: captured there
    const after = ((await (await svc.call("/api/v1/traffic")).json()) as any).total;
    expect(after).toBe(before + 1);
  });

  test("a flow file through the running tapwire (POST /flows/run), and exit 2 on an error", async () => {
    const r = await cli(["flow", "run", EXAMPLE, "--env", `baseUrl=${api.url}`, "--data-dir", svc.config.dataDir]);
    expect(r.code).toBe(0);
    expect(((await (await svc.call("/api/v1/flows/login")).json()) as any).error.code).toBe("not_found");
    const e = await cli(["flow", "run", "cli-error", "--data-dir", svc.config.dataDir]);
    expect(e.code).toBe(2);
    expect(e.out).toContain("ERR  script");
    expect(e.out).toContain("no good");
    expect(e.out).toMatch(/^ERROR: /m);
  });

  test("exit 2: no such flow, no such file, bad flags", async () => {
    const dd = svc.config.dataDir;
    const missing = await cli(["flow", "run", "no-such-flow", "--data-dir", dd]);
    expect(missing.code).toBe(2);
    expect(missing.err).toContain("no flow 'no-such-flow'");
    expect((await cli(["flow", "run", "./nope.json", "--data-dir", dd])).code).toBe(2);
    const badEnv = await cli(["flow", "run", "cli-fails", "--env", "novalue", "--data-dir", dd]);
    expect(badEnv.code).toBe(2);
    expect(badEnv.err).toContain("--env takes NAME=VALUE");
    expect((await cli(["flow", "run", "cli-fails", "--reporter", "tap", "--data-dir", dd])).code).toBe(2);
    expect((await cli(["flow", "run", "cli-fails", "--reporter", "json,junit", "--data-dir", dd])).code).toBe(2);
    const notFlow = join(temp(), "x.json");
    writeFileSync(notFlow, "[1]");
    expect((await cli(["flow", "run", notFlow, "--data-dir", dd])).code).toBe(2);
  });

  test("flow list", async () => {
    const r = await cli(["flow", "list", "--json", "--data-dir", svc.config.dataDir]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out).flows.map((f: any) => f.id)).toEqual(expect.arrayContaining(["cli-fails", "cli-error"]));
  });
});

test("without a running tapwire, a stored flow id runs from a copy of the data directory's flows (subflows too)", async () => {
  const dataDir = temp();
  mkdirSync(join(dataDir, "flows"));
  const child = flow("child", [["start", "start"], ["r", "request", { method: "GET", url: "{{base}}/echo?child" }], ["end", "end", { outputs: { seen: "yes" } }]], [["start", "r"], ["r", "end"]]);
  const parent = flow("parent", [["start", "start"], ["sub", "subflow", { flowId: "child", inputs: { base: "{{base}}" } }]], [["start", "sub"]]);
  writeFileSync(join(dataDir, "flows", "child.json"), JSON.stringify(child));
  writeFileSync(join(dataDir, "flows", "parent.json"), JSON.stringify(parent));
  const r = await cli(["flow", "run", "parent", "--env", `base=${api.url}`, "--reporter", "json", "--data-dir", dataDir]);
  expect(r.code).toBe(0);
  expect(JSON.parse(r.out).variables.seen).toBe("yes");
  expect(api.seen).toContain("GET /echo?child");
  // nothing was added to the data directory (no CA, no capture database)
  expect(readdirSync(dataDir)).toEqual(["flows"]);
  expect(existsSync(join(dataDir, "ca.pem"))).toBe(false);
});

test("the compiled binary runs the example (scripts and conditions on the engine's workers inside the binary)", async () => {
  const out = temp();
  const r = await tw(["flow", "run", EXAMPLE, "--env", `baseUrl=${api.url}`, "--reporter", "cli,junit", "--out", out, "--data-dir", temp()]);
  expect({ code: r.code, err: r.err }).toEqual({ code: 0, err: `tapwire: wrote ${join(out, "login.junit.xml")}\n` });
  expect(r.out).toContain("ok   script       admin profile  1/1 checks passed");
  expect(r.out).toMatch(/^PASSED: 8 passed in /m);
  const xml = readFileSync(join(out, "login.junit.xml"), "utf8");
  expect(xml).toContain('failures="0" errors="0"');
  expect(xml).toContain('<testcase name="it is the user who logged in"');
});
