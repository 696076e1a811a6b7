/**
 * The report of a runner (`tapwire compose run`, and meant for `tapwire flow run` too): what each step did, the
 * totals, and the files the json and junit reporters write. Plain data, no I/O except writeReports.
 *
 * A step is one executed request (or flow step) in one iteration. It failed when it has an error (it could not
 * run or got no response), a script error, or a failed test.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { junitXml, type ReportCase, type ReportSuite } from "./junit.ts";

export interface StepTest {
  name: string;
  passed: boolean;
  error: string | null;
}

export interface StepScriptError {
  /** e.g. "request 'Login'", "folder 'Users'" */
  source: string;
  /** "prerequest" or "test" */
  event: string;
  message: string;
}

export interface RunStep {
  /** The folder names and the request's name. */
  path: string[];
  /** 0-based */
  iteration: number;
  started_at: string;
  method: string;
  url: string;
  status: number | null;
  status_text: string | null;
  duration_ms: number;
  size_bytes: number;
  traffic_id: number | null;
  tests: StepTest[];
  script_errors: StepScriptError[];
  /** Why the step got no response (connection failure, timeout, a pre-request script that failed...). */
  error: string | null;
  console: { level: string; message: string }[];
}

export interface Count {
  executed: number;
  failed: number;
}

export interface RunStats {
  iterations: Count;
  requests: Count;
  tests: Count;
  script_errors: number;
}

export interface RunReport {
  /** e.g. "tapwire compose run" */
  tool: string;
  version: string;
  /** What ran (the collection's or the flow's name). */
  name: string;
  /** Runner-specific details (collection id, environment...). */
  meta: Record<string, unknown>;
  started_at: string;
  finished_at: string;
  duration_ms: number;
  /** Iterations asked for. */
  iterations: number;
  /** Stopped early by --bail. */
  bailed: boolean;
  /** Stopped early by Ctrl-C. */
  interrupted: boolean;
  stats: RunStats;
  steps: RunStep[];
}

export const stepName = (s: Pick<RunStep, "path">) => s.path.join(" / ");

export function stepFailed(s: RunStep): boolean {
  return s.error !== null || s.script_errors.length > 0 || s.tests.some((t) => !t.passed);
}

export function runStats(steps: RunStep[]): RunStats {
  const iters = new Map<number, boolean>();
  const stats: RunStats = { iterations: { executed: 0, failed: 0 }, requests: { executed: 0, failed: 0 }, tests: { executed: 0, failed: 0 }, script_errors: 0 };
  for (const s of steps) {
    iters.set(s.iteration, (iters.get(s.iteration) ?? false) || stepFailed(s));
    stats.requests.executed++;
    if (s.error !== null) stats.requests.failed++;
    stats.tests.executed += s.tests.length;
    stats.tests.failed += s.tests.filter((t) => !t.passed).length;
    stats.script_errors += s.script_errors.length;
  }
  stats.iterations.executed = iters.size;
  stats.iterations.failed = [...iters.values()].filter(Boolean).length;
  return stats;
}

/** Whether the run failed as a whole: a step failed (exit code 1). */
export function runFailed(r: RunReport): boolean {
  return r.steps.some(stepFailed);
}

/** The JUnit layout: a suite per step, a case per test, an error case per script error and for a step's error. */
export function junitSuites(r: RunReport): ReportSuite[] {
  const classBase = [r.name];
  return r.steps.map((s) => {
    const classname = [...classBase, ...s.path].map((p) => p.replace(/\./g, "_")).join(".");
    const cases: ReportCase[] = [];
    if (s.error !== null) cases.push({ name: `${s.method} ${s.url}`, classname, durationMs: s.duration_ms, error: { message: s.error, type: "RequestError" } });
    for (const e of s.script_errors) {
      cases.push({ name: `${e.event} script of ${e.source}`, classname, durationMs: 0, error: { message: e.message, type: "ScriptError" } });
    }
    for (const t of s.tests) {
      cases.push({ name: t.name, classname, durationMs: 0, failures: t.passed ? undefined : [{ message: t.error ?? "failed", type: "AssertionError" }] });
    }
    const out = s.console.map((l) => `[${l.level}] ${l.message}`).join("\n");
    return {
      name: r.iterations > 1 ? `${stepName(s)} (iteration ${s.iteration + 1})` : stepName(s),
      timestamp: s.started_at,
      durationMs: s.duration_ms,
      cases,
      ...(out ? { systemOut: out } : {}),
    };
  });
}

export type FileReporter = "json" | "junit";

/** Writes the json and/or junit reports into `dir` as `<base>-report.json` and `<base>-junit.xml`; answers the paths. */
export function writeReports(r: RunReport, reporters: readonly FileReporter[], dir: string, base: string): string[] {
  if (!reporters.length) return [];
  mkdirSync(dir, { recursive: true });
  const written: string[] = [];
  if (reporters.includes("json")) {
    const p = join(dir, `${base}-report.json`);
    writeFileSync(p, JSON.stringify(r, null, 2) + "\n");
    written.push(p);
  }
  if (reporters.includes("junit")) {
    const p = join(dir, `${base}-junit.xml`);
    writeFileSync(p, junitXml(junitSuites(r), `${r.tool} ${r.name}`));
    written.push(p);
  }
  return written;
}
