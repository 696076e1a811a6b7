import type { RunReport, StepReport } from "../../features/flows/schema.ts";
import type { ReportCase, ReportSuite } from "./junit.ts";

/**
 * A flow run report as JUnit suites (for junitXml): one suite per step that checks or does something (start and
 * end nodes are left out), one case per assertion, or one case for the step itself when it has none. Steps of a
 * subflow follow their subflow step, named `subflow > step`.
 */
export function flowSuites(report: RunReport, flowName = report.flowId): ReportSuite[] {
  const suites: ReportSuite[] = [];
  const add = (steps: StepReport[], path: string[]) => {
    for (const s of steps) {
      if (s.type === "start" || s.type === "end") continue;
      const name = [...path, s.name].join(" > ");
      const classname = [flowName, ...path, s.name].join(".");
      const cases: ReportCase[] = s.assertions.map((a) => ({
        name: a.name,
        classname,
        durationMs: 0,
        ...(a.passed ? {} : { failures: [{ message: a.error ?? "failed", type: "AssertionError" }] }),
      }));
      if (cases.length === 0 || s.status === "error") {
        const own: ReportCase = { name: s.type === "request" && s.response ? `${s.name} -> ${s.response.status}` : s.name, classname, durationMs: s.durationMs };
        if (s.status === "error") own.error = { message: s.error ?? "error", type: s.type };
        else if (s.status === "failed") own.failures = [{ message: s.error ?? "failed" }];
        cases.push(own);
      }
      if (cases.length && cases[0]!.durationMs === 0) cases[0]!.durationMs = s.durationMs;
      const out = s.console.map((c) => `[${c.level}] ${c.message}`).join("\n");
      suites.push({ name, timestamp: new Date(s.startedAt).toISOString(), durationMs: s.durationMs, cases, ...(out ? { systemOut: out } : {}) });
      if (s.subflow) add(s.subflow.steps, [...path, s.name]);
    }
  };
  add(report.steps, []);
  if (report.error && report.status === "error") {
    suites.push({
      name: `${flowName} (run)`,
      timestamp: new Date(report.startedAt).toISOString(),
      durationMs: report.durationMs,
      cases: [{ name: "run", classname: flowName, durationMs: report.durationMs, error: { message: report.error, type: "FlowError" } }],
    });
  }
  return suites;
}
