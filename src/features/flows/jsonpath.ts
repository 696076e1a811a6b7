/**
 * The JSON paths of assert checks and set-variable assignments: a small, predictable subset of JSONPath that picks
 * one value. `$` is the document; then `.name`, `['name']` / `["name"]` and `[N]` (a negative N counts from the
 * end) in any order. The leading `$` may be left out (`data.items[0].id`). `.length` of an array or a string is
 * its length.
 */

export type PathPart = string | number;

/** The parts of a path; throws an Error saying what is wrong with it. */
export function parsePath(path: string): PathPart[] {
  let s = path.trim();
  if (s.startsWith("$")) s = s.slice(1);
  else if (s !== "" && !s.startsWith(".") && !s.startsWith("[")) s = `.${s}`;
  const parts: PathPart[] = [];
  let i = 0;
  while (i < s.length) {
    const c = s[i];
    if (c === ".") {
      const m = /^[^.[\]]+/.exec(s.slice(i + 1));
      if (!m) throw new Error(`JSON path '${path}': a name must follow '.' at ${i + 1}`);
      parts.push(m[0]);
      i += 1 + m[0].length;
    } else if (c === "[") {
      const rest = s.slice(i);
      const idx = /^\[\s*(-?\d+)\s*\]/.exec(rest);
      const quoted = /^\[\s*(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")\s*\]/.exec(rest);
      if (idx) {
        parts.push(Number(idx[1]));
        i += idx[0].length;
      } else if (quoted) {
        parts.push((quoted[1] ?? quoted[2]!).replace(/\\(.)/g, "$1"));
        i += quoted[0].length;
      } else throw new Error(`JSON path '${path}': expected [N] or ['name'] at ${i}`);
    } else throw new Error(`JSON path '${path}': unexpected '${c}' at ${i}`);
  }
  return parts;
}

/** The value at the path: `{found: false}` when a part is missing. */
export function pick(doc: unknown, path: string): { found: boolean; value: unknown } {
  let cur: unknown = doc;
  for (const p of parsePath(path)) {
    if (typeof p === "number") {
      if (!Array.isArray(cur)) return { found: false, value: undefined };
      const i = p < 0 ? cur.length + p : p;
      if (i < 0 || i >= cur.length) return { found: false, value: undefined };
      cur = cur[i];
    } else if (p === "length" && (Array.isArray(cur) || typeof cur === "string")) {
      cur = cur.length;
    } else {
      if (cur === null || typeof cur !== "object" || Array.isArray(cur) || !Object.hasOwn(cur, p)) return { found: false, value: undefined };
      cur = (cur as Record<string, unknown>)[p];
    }
  }
  return { found: true, value: cur };
}
