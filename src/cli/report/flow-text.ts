import type { RunReport, StepReport } from "../../features/flows/schema.ts";
import { formatDuration } from "../command.ts";

const MARK: Record<string, string> = { passed: "ok  ", failed: "FAIL", error: "ERR " };

/** What one step did, in a few words. */
function detail(s: StepReport): string {
  if (s.type === "request") {
    const to = s.request ? `${s.request.method} ${s.request.url}` : "";
    return s.response ? `${to} -> ${s.response.status} (${formatDuration(s.response.durationMs)})` : to;
  }
  if (s.type === "condition" && s.branch) return `-> ${s.branch}`;
  if (s.assertions.length) return `${s.assertions.filter((a) => a.passed).length}/${s.assertions.length} checks passed`;
  if (s.type === "subflow" && s.subflow) return `${s.subflow.flowId}: ${s.subflow.status}`;
  return "";
}

/** The `cli` reporter: one line per step, failed checks and errors under their step, and a summary line. */
export function flowText(report: RunReport, name = report.flowId): string[] {
  const lines: string[] = [];
  const counts = { passed: 0, failed: 0, error: 0 };
  const walk = (steps: StepReport[], indent: string) => {
    for (const s of steps) {
      counts[s.status]++;
      lines.push(`${indent}${MARK[s.status]} ${s.type.padEnd(12)} ${s.name}${detail(s) ? `  ${detail(s)}` : ""}`.trimEnd());
      for (const a of s.assertions) if (!a.passed) lines.push(`${indent}       x ${a.name}${a.error ? `: ${a.error}` : ""}`);
      for (const c of s.console) if (s.status !== "passed" || c.level === "error" || c.level === "warn") lines.push(`${indent}       ${c.level}: ${c.message}`);
      if (s.error && !s.subflow) lines.push(`${indent}       error: ${s.error}`);
      if (s.subflow) walk(s.subflow.steps, `${indent}    `);
    }
  };
  lines.push(`flow ${name} (run ${report.runId})`);
  walk(report.steps, "  ");
  if (report.error) lines.push(`  error: ${report.error}`);
  const parts = (["passed", "failed", "error"] as const).filter((k) => counts[k]).map((k) => `${counts[k]} ${k}`);
  lines.push(`${report.status.toUpperCase()}: ${parts.join(", ") || "no steps"} in ${formatDuration(report.durationMs)}`);
  return lines;
}
