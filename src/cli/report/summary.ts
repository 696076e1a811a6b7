/**
 * The cli reporter of the runners: one line per step (with its failed tests and errors under it), a progress line
 * on a terminal, and the summary table at the end. Text only; the caller writes it.
 */
import { formatDuration, table } from "../command.ts";
import { type RunReport, type RunStep, stepFailed, stepName } from "./run-report.ts";

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${+(n / 1024).toFixed(1)} kB`;
  return `${+(n / 1024 / 1024).toFixed(1)} MB`;
}

/**
 * `✓ Users / Login  POST https://…/login  200 OK  41ms  312 B  2/2 tests`, then, indented, each failed test
 * (`✗ name: message`), each script error and the step's error (`! …`).
 */
export function stepLines(s: RunStep): string[] {
  const passed = s.tests.filter((t) => t.passed).length;
  const parts = [`${stepFailed(s) ? "✗" : "✓"} ${stepName(s)}`, `${s.method} ${s.url}`];
  if (s.status !== null) parts.push(`${s.status}${s.status_text ? ` ${s.status_text}` : ""}`, formatDuration(s.duration_ms), formatBytes(s.size_bytes));
  else parts.push("no response");
  if (s.tests.length) parts.push(`${passed}/${s.tests.length} tests`);
  const lines = [parts.join("  ")];
  for (const t of s.tests) if (!t.passed) lines.push(`    ✗ ${t.name}: ${t.error ?? "failed"}`);
  for (const e of s.script_errors) lines.push(`    ! ${e.event} script of ${e.source}: ${e.message}`);
  if (s.error !== null) lines.push(`    ! ${s.error}`);
  return lines;
}

/** The progress line shown (on a terminal only) while a step runs: `[3/12] Users / Login`. */
export function progressLine(done: number, total: number, what: string, width: number): string {
  const line = `[${done + 1}/${total}] ${what}`;
  return line.length > width - 1 ? line.slice(0, Math.max(10, width - 2)) + "…" : line;
}

/** Carriage return and erase-line: puts a progress line in place, or clears it. */
export const CLEAR_LINE = "\r\x1b[K";

/** The summary table and the totals under it. */
export function summaryLines(r: RunReport): string[] {
  const s = r.stats;
  const rows = [
    ["iterations", String(s.iterations.executed), String(s.iterations.failed)],
    ["requests", String(s.requests.executed), String(s.requests.failed)],
    ["tests", String(s.tests.executed), String(s.tests.failed)],
  ];
  const lines = table(["", "executed", "failed"], rows);
  if (s.script_errors) lines.push(`script errors: ${s.script_errors}`);
  const times = r.steps.filter((x) => x.status !== null).map((x) => x.duration_ms);
  const received = r.steps.reduce((n, x) => n + x.size_bytes, 0);
  lines.push("");
  lines.push(`total run duration: ${formatDuration(r.duration_ms)}`);
  lines.push(`total data received: ${formatBytes(received)}`);
  if (times.length) {
    const avg = times.reduce((a, b) => a + b, 0) / times.length;
    lines.push(`average response time: ${formatDuration(avg)} [min ${formatDuration(Math.min(...times))}, max ${formatDuration(Math.max(...times))}]`);
  }
  if (r.bailed) lines.push("stopped at the first failure (--bail)");
  if (r.interrupted) lines.push("interrupted");
  const failed = r.steps.filter(stepFailed).length;
  lines.push(failed ? `FAILED: ${failed} of ${r.steps.length} request(s) failed` : `passed: ${r.steps.length} request(s)`);
  return lines;
}
