import { describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { junitSuites, type RunReport, type RunStep, runFailed, runStats, stepFailed, writeReports } from "../../../src/cli/report/run-report.ts";
import { progressLine, stepLines, summaryLines } from "../../../src/cli/report/summary.ts";
import { tempDirs } from "../../helpers/temp-dirs.ts";

const temp = tempDirs("tapwire-run-report-");

const step = (over: Partial<RunStep>): RunStep => ({
  path: ["F", "r"],
  iteration: 0,
  started_at: "2026-11-25T10:00:00.000Z",
  method: "GET",
  url: "https://h.test/r",
  status: 200,
  status_text: "OK",
  duration_ms: 12,
  size_bytes: 2048,
  traffic_id: 1,
  tests: [],
  script_errors: [],
  error: null,
  console: [],
  ...over,
});

function report(steps: RunStep[], iterations = 1): RunReport {
  return { tool: "t", version: "0", name: "C.x", meta: {}, started_at: "", finished_at: "", duration_ms: 1500, iterations, bailed: false, interrupted: false, stats: runStats(steps), steps };
}

describe("run reports", () => {
  const ok = step({ tests: [{ name: "a", passed: true, error: null }] });
  const failedTest = step({ iteration: 1, tests: [{ name: "b", passed: false, error: "nope" }, { name: "c", passed: true, error: null }] });
  const noResponse = step({ iteration: 1, path: ["s"], status: null, status_text: null, error: "connection refused", console: [{ level: "log", message: "hi" }] });
  const scriptError = step({ iteration: 2, script_errors: [{ source: "request 'r'", event: "test", message: "TypeError: x" }] });

  test("a step fails on a failed test, a script error or an error; the stats count each kind", () => {
    expect([ok, failedTest, noResponse, scriptError].map(stepFailed)).toEqual([false, true, true, true]);
    expect(runStats([ok, failedTest, noResponse, scriptError])).toEqual({
      iterations: { executed: 3, failed: 2 },
      requests: { executed: 4, failed: 1 },
      tests: { executed: 3, failed: 1 },
      script_errors: 1,
    });
    expect(runFailed(report([ok]))).toBe(false);
    expect(runFailed(report([ok, scriptError]))).toBe(true);
  });

  test("JUnit suites: one per step, iteration in the name when several, a case per test, error cases", () => {
    const suites = junitSuites(report([ok, noResponse, scriptError], 3));
    expect(suites.map((s) => s.name)).toEqual(["F / r (iteration 1)", "s (iteration 2)", "F / r (iteration 3)"]);
    expect(suites[0]!.cases).toEqual([{ name: "a", classname: "C_x.F.r", durationMs: 0, failures: undefined }]);
    expect(suites[1]!.cases[0]).toMatchObject({ name: "GET https://h.test/r", error: { message: "connection refused", type: "RequestError" } });
    expect(suites[1]!.systemOut).toBe("[log] hi");
    expect(suites[2]!.cases[0]).toMatchObject({ name: "test script of request 'r'", error: { message: "TypeError: x", type: "ScriptError" } });
  });

  test("cli lines: the step line with its failures under it, the summary table, the progress line cut to the width", () => {
    expect(stepLines(failedTest)).toEqual(["✗ F / r  GET https://h.test/r  200 OK  12ms  2 kB  1/2 tests", "    ✗ b: nope"]);
    expect(stepLines(noResponse)).toEqual(["✗ s  GET https://h.test/r  no response", "    ! connection refused"]);
    const lines = summaryLines(report([ok, failedTest]));
    expect(lines.slice(0, 4)).toEqual(["            executed  failed", "iterations  2         1", "requests    2         0", "tests       3         1"]);
    expect(lines).toContain("total run duration: 1.5s");
    expect(lines.at(-1)).toBe("FAILED: 1 of 2 request(s) failed");
    expect(progressLine(2, 10, "GET " + "x".repeat(100), 40)).toHaveLength(39);
  });

  test("writeReports writes only the files asked for", () => {
    const dir = temp();
    expect(writeReports(report([ok]), ["junit"], dir, "flow")).toEqual([`${dir}/flow-junit.xml`]);
    expect(readdirSync(dir)).toEqual(["flow-junit.xml"]);
  });
});
