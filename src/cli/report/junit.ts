/**
 * JUnit XML for the runners (`tapwire compose run`, `tapwire flow run`), in the layout CI systems read (Jenkins,
 * GitLab, GitHub test reporters): one <testsuites> root, one <testsuite> per request or flow step, one <testcase>
 * per test or assertion. A failed check is a <failure>; a step that could not run (connection error, script error)
 * is an <error>.
 */

export interface ReportCase {
  name: string;
  /** dotted path of where the case sits, e.g. "collection.folder.request" */
  classname: string;
  durationMs: number;
  /** failed assertions, each with its message */
  failures?: { message: string; type?: string; detail?: string }[];
  /** the case could not run */
  error?: { message: string; type?: string; detail?: string };
  skipped?: boolean;
  /** console output of the case */
  systemOut?: string;
}

export interface ReportSuite {
  name: string;
  /** ISO 8601 start time */
  timestamp: string;
  durationMs: number;
  cases: ReportCase[];
  systemOut?: string;
}

// XML 1.0 forbids these code points even as character references
const INVALID_XML = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** Escapes text for an XML attribute or element and drops characters XML cannot carry. */
export function xmlEscape(s: string): string {
  return s
    .replace(INVALID_XML, "\uFFFD")
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&apos;");
}

const secs = (ms: number) => (Math.max(0, ms) / 1000).toFixed(3);

function detailed(tag: string, f: { message: string; type?: string; detail?: string }): string {
  const type = f.type ? ` type="${xmlEscape(f.type)}"` : "";
  return `      <${tag} message="${xmlEscape(f.message)}"${type}>${xmlEscape(f.detail ?? f.message)}</${tag}>\n`;
}

export function junitXml(suites: ReportSuite[], name = "tapwire"): string {
  let tests = 0;
  let failures = 0;
  let errors = 0;
  let skipped = 0;
  let total = 0;
  let body = "";
  suites.forEach((s, id) => {
    const sf = s.cases.filter((c) => !c.error && (c.failures?.length ?? 0) > 0).length;
    const se = s.cases.filter((c) => c.error).length;
    const ss = s.cases.filter((c) => c.skipped && !c.error && !(c.failures?.length ?? 0)).length;
    tests += s.cases.length;
    failures += sf;
    errors += se;
    skipped += ss;
    total += s.durationMs;
    body +=
      `  <testsuite id="${id}" name="${xmlEscape(s.name)}" tests="${s.cases.length}" failures="${sf}" errors="${se}" ` +
      `skipped="${ss}" timestamp="${xmlEscape(s.timestamp)}" time="${secs(s.durationMs)}">\n`;
    for (const c of s.cases) {
      body += `    <testcase name="${xmlEscape(c.name)}" classname="${xmlEscape(c.classname)}" time="${secs(c.durationMs)}">\n`;
      if (c.error) body += detailed("error", c.error);
      else for (const f of c.failures ?? []) body += detailed("failure", f);
      if (c.skipped && !c.error && !(c.failures?.length ?? 0)) body += "      <skipped/>\n";
      if (c.systemOut) body += `      <system-out>${xmlEscape(c.systemOut)}</system-out>\n`;
      body += "    </testcase>\n";
    }
    if (s.systemOut) body += `    <system-out>${xmlEscape(s.systemOut)}</system-out>\n`;
    body += "  </testsuite>\n";
  });
  return (
    `<?xml version="1.0" encoding="UTF-8"?>\n` +
    `<testsuites name="${xmlEscape(name)}" tests="${tests}" failures="${failures}" errors="${errors}" skipped="${skipped}" time="${secs(total)}">\n` +
    body +
    `</testsuites>\n`
  );
}
