/**
 * Structured diff of two captured entries (spec 2.4). Layout documented in docs/diff.md.
 */
import type { EntryDetail, HeaderList } from "../../store/types.ts";

// ---------------------------------------------------------------------------
// Result layout

export interface ValueDiff<T> {
  a: T;
  b: T;
  equal: boolean;
}

export interface PairChange {
  name: string;
  a: string;
  b: string;
}

/** Differences between two [name, value] lists (headers, query parameters). */
export interface PairListDiff {
  equal: boolean;
  /** Pairs only in b. */
  added: [string, string][];
  /** Pairs only in a. */
  removed: [string, string][];
  /** Same name on both sides, different value(s). */
  changed: PairChange[];
}

export interface UrlDiff {
  a: string;
  b: string;
  /** Exact string equality of the two URLs. */
  equal: boolean;
  /** "http", "https", ... ("" when the URL does not parse). */
  scheme: ValueDiff<string>;
  /** Host name, lower-cased, without port. */
  host: ValueDiff<string>;
  /** Effective port: explicit, else the scheme default (80/443); null when unknown. */
  port: ValueDiff<number | null>;
  path: ValueDiff<string>;
  /** Query parameters (decoded), names compared case-sensitively. */
  query: PairListDiff;
}

export type BodyKind = "json" | "text" | "binary";

export interface JsonChange {
  /** JSONPath-like location: `$`, `$.items[2].name`, `$["odd key"]`. */
  path: string;
  op: "added" | "removed" | "changed";
  /** Value in a (removed, changed). */
  a?: unknown;
  /** Value in b (added, changed). */
  b?: unknown;
}

export interface BodyDiff {
  /** Byte equality of the stored (decoded) bodies. */
  equal: boolean;
  /** Size in bytes of the stored (decoded, possibly truncated) body. */
  a_size: number;
  b_size: number;
  a_truncated: boolean;
  b_truncated: boolean;
  kind: BodyKind;
  /** Unified line diff (`--- a`, `+++ b`, `@@` hunks, 3 lines of context); "" when equal, binary or over the caps. */
  unified: string;
  /** Structural changes when kind is "json" (empty when the values are deep-equal), else null. */
  json: JsonChange[] | null;
  /** Why a part of the diff was left out ("" when nothing was). */
  note: string;
}

export interface DiffResult {
  /** True when method, URL, status, both header lists and both bodies are equal. */
  equal: boolean;
  a_id: number;
  b_id: number;
  method: ValueDiff<string>;
  url: UrlDiff;
  status: ValueDiff<number>;
  req_headers: PairListDiff;
  res_headers: PairListDiff;
  req_body: BodyDiff;
  res_body: BodyDiff;
}

// ---------------------------------------------------------------------------
// Limits (documented in docs/diff.md)

/** No line diff when either body is larger than this many bytes. */
export const LINE_DIFF_MAX_BYTES = 2 * 1024 * 1024;
/** No line diff when more than this many lines must be inserted + deleted (after trimming common prefix/suffix). */
export const LINE_DIFF_MAX_EDITS = 2000;
/** No line diff when the search would compare more than this many line pairs. */
export const LINE_DIFF_MAX_WORK = 20_000_000;
/** Structural JSON diff stops after this many changes. */
export const JSON_DIFF_MAX_CHANGES = 1000;
/** Lines of context around each hunk. */
export const UNIFIED_CONTEXT = 3;

// ---------------------------------------------------------------------------
// Name/value lists

function diffPairs(a: HeaderList, b: HeaderList, foldCase: boolean): PairListDiff {
  const key = (n: string) => (foldCase ? n.toLowerCase() : n);
  const groups = new Map<string, { a: [string, string][]; b: [string, string][] }>();
  for (const p of a) {
    const k = key(p[0]);
    let g = groups.get(k);
    if (!g) groups.set(k, (g = { a: [], b: [] }));
    g.a.push(p);
  }
  for (const p of b) {
    const k = key(p[0]);
    let g = groups.get(k);
    if (!g) groups.set(k, (g = { a: [], b: [] }));
    g.b.push(p);
  }
  const added: [string, string][] = [];
  const removed: [string, string][] = [];
  const changed: PairChange[] = [];
  for (const g of groups.values()) {
    if (g.b.length === 0) {
      for (const [n, v] of g.a) removed.push([n, v]);
      continue;
    }
    if (g.a.length === 0) {
      for (const [n, v] of g.b) added.push([n, v]);
      continue;
    }
    const va = g.a.map((p) => p[1]);
    const vb = g.b.map((p) => p[1]);
    if (va.length === vb.length && va.every((v, i) => v === vb[i])) continue;
    const name = g.a[0][0];
    // multiset difference, keeping each side's order
    const counts = new Map<string, number>();
    for (const v of vb) counts.set(v, (counts.get(v) ?? 0) + 1);
    const onlyA: string[] = [];
    for (const v of va) {
      const c = counts.get(v) ?? 0;
      if (c > 0) counts.set(v, c - 1);
      else onlyA.push(v);
    }
    const countsA = new Map<string, number>();
    for (const v of va) countsA.set(v, (countsA.get(v) ?? 0) + 1);
    const onlyB: string[] = [];
    for (const v of vb) {
      const c = countsA.get(v) ?? 0;
      if (c > 0) countsA.set(v, c - 1);
      else onlyB.push(v);
    }
    if (onlyA.length === 0 && onlyB.length === 0) {
      // same values, different order
      changed.push({ name, a: va.join(", "), b: vb.join(", ") });
      continue;
    }
    const n = Math.min(onlyA.length, onlyB.length);
    for (let i = 0; i < n; i++) changed.push({ name, a: onlyA[i], b: onlyB[i] });
    for (let i = n; i < onlyA.length; i++) removed.push([name, onlyA[i]]);
    for (let i = n; i < onlyB.length; i++) added.push([g.b[0][0], onlyB[i]]);
  }
  return { equal: added.length === 0 && removed.length === 0 && changed.length === 0, added, removed, changed };
}

// ---------------------------------------------------------------------------
// URL

interface UrlParts {
  scheme: string;
  host: string;
  port: number | null;
  path: string;
  query: [string, string][];
}

function urlParts(raw: string): UrlParts {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return { scheme: "", host: "", port: null, path: "", query: [] };
  }
  const scheme = u.protocol.replace(/:$/, "");
  let port: number | null = u.port !== "" ? Number(u.port) : null;
  if (port === null) port = scheme === "https" || scheme === "wss" ? 443 : scheme === "http" || scheme === "ws" ? 80 : null;
  const query: [string, string][] = [];
  for (const [k, v] of u.searchParams) query.push([k, v]);
  return { scheme, host: u.hostname, port, path: u.pathname, query };
}

function vd<T>(a: T, b: T): ValueDiff<T> {
  return { a, b, equal: a === b };
}

function diffUrl(a: string, b: string): UrlDiff {
  const pa = urlParts(a);
  const pb = urlParts(b);
  return {
    a,
    b,
    equal: a === b,
    scheme: vd(pa.scheme, pb.scheme),
    host: vd(pa.host, pb.host),
    port: vd(pa.port, pb.port),
    path: vd(pa.path, pb.path),
    query: diffPairs(pa.query, pb.query, false),
  };
}

// ---------------------------------------------------------------------------
// Line diff (Myers, O((N+M)·D) time, O(D²) memory, both capped)

type Op = 0 | 1 | 2; // 0 = equal, 1 = delete (a only), 2 = insert (b only)

/** Lines with their terminators kept, so "x" and "x\n" differ. */
export function splitLines(text: string): string[] {
  if (text === "") return [];
  const lines: string[] = [];
  let start = 0;
  for (;;) {
    const nl = text.indexOf("\n", start);
    if (nl < 0) {
      if (start < text.length) lines.push(text.slice(start));
      break;
    }
    lines.push(text.slice(start, nl + 1));
    start = nl + 1;
  }
  return lines;
}

/**
 * Edit script turning `a` into `b`, or null when it would need more than `maxEdits`
 * insertions + deletions or more than `maxWork` steps.
 */
export function myersDiff(a: string[], b: string[], maxEdits = LINE_DIFF_MAX_EDITS, maxWork = LINE_DIFF_MAX_WORK): Op[] | null {
  // common prefix and suffix cost nothing to find
  let pre = 0;
  while (pre < a.length && pre < b.length && a[pre] === b[pre]) pre++;
  let suf = 0;
  while (suf < a.length - pre && suf < b.length - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) suf++;

  // intern the middle lines
  const ids = new Map<string, number>();
  const intern = (s: string) => {
    let id = ids.get(s);
    if (id === undefined) ids.set(s, (id = ids.size));
    return id;
  };
  const A = Int32Array.from(a.slice(pre, a.length - suf), intern);
  const B = Int32Array.from(b.slice(pre, b.length - suf), intern);
  const N = A.length;
  const M = B.length;

  const middle: Op[] = [];
  if (N === 0 || M === 0) {
    for (let i = 0; i < N; i++) middle.push(1);
    for (let j = 0; j < M; j++) middle.push(2);
    if (N + M > maxEdits) return null;
  } else {
    const maxD = Math.min(N + M, maxEdits);
    const off = maxD + 1;
    const V = new Int32Array(2 * maxD + 3);
    const trace: Int32Array[] = [];
    let work = 0;
    let found = -1;
    for (let d = 0; d <= maxD && found < 0; d++) {
      for (let k = -d; k <= d; k += 2) {
        let x: number;
        if (k === -d || (k !== d && V[off + k - 1] < V[off + k + 1])) x = V[off + k + 1];
        else x = V[off + k - 1] + 1;
        let y = x - k;
        while (x < N && y < M && A[x] === B[y]) {
          x++;
          y++;
          work++;
        }
        work++;
        V[off + k] = x;
        if (x >= N && y >= M) {
          found = d;
          break;
        }
      }
      trace.push(V.slice(off - d, off + d + 1));
      if (work > maxWork && found < 0) return null;
    }
    if (found < 0) return null;
    // backtrack
    const rev: Op[] = [];
    let x = N;
    let y = M;
    for (let d = found; d > 0; d--) {
      const prev = trace[d - 1]; // index k + (d - 1)
      const at = (k: number) => prev[k + d - 1];
      const k = x - y;
      const prevK = k === -d || (k !== d && at(k - 1) < at(k + 1)) ? k + 1 : k - 1;
      const prevX = at(prevK);
      const prevY = prevX - prevK;
      while (x > prevX && y > prevY) {
        rev.push(0);
        x--;
        y--;
      }
      if (prevK === k + 1) {
        rev.push(2);
        y--;
      } else {
        rev.push(1);
        x--;
      }
    }
    while (x > 0 && y > 0) {
      rev.push(0);
      x--;
      y--;
    }
    for (let i = rev.length - 1; i >= 0; i--) middle.push(rev[i]);
  }
  const ops: Op[] = new Array(pre).fill(0);
  for (const o of middle) ops.push(o);
  for (let i = 0; i < suf; i++) ops.push(0);
  return ops;
}

function rangeText(start: number, count: number): string {
  // `start` is 0-based; unified format is 1-based, and an empty range names the line before it
  if (count === 1) return String(start + 1);
  if (count === 0) return `${start},0`;
  return `${start + 1},${count}`;
}

function lineOut(prefix: string, line: string): string {
  if (line.endsWith("\n")) return prefix + line;
  return prefix + line + "\n\\ No newline at end of file\n";
}

/** Unified diff text ("" when equal). */
export function unifiedFromOps(a: string[], b: string[], ops: Op[], context = UNIFIED_CONTEXT): string {
  // positions (in a and b) before each op
  const n = ops.length;
  const apos = new Int32Array(n + 1);
  const bpos = new Int32Array(n + 1);
  for (let i = 0; i < n; i++) {
    apos[i + 1] = apos[i] + (ops[i] !== 2 ? 1 : 0);
    bpos[i + 1] = bpos[i] + (ops[i] !== 1 ? 1 : 0);
  }
  const changes: number[] = [];
  for (let i = 0; i < n; i++) if (ops[i] !== 0) changes.push(i);
  if (changes.length === 0) return "";
  let out = "--- a\n+++ b\n";
  let ci = 0;
  while (ci < changes.length) {
    let last = changes[ci];
    let cj = ci + 1;
    while (cj < changes.length && changes[cj] - last - 1 <= 2 * context) last = changes[cj++];
    const from = Math.max(0, changes[ci] - context);
    const to = Math.min(n, last + 1 + context); // exclusive
    const aStart = apos[from];
    const bStart = bpos[from];
    out += `@@ -${rangeText(aStart, apos[to] - aStart)} +${rangeText(bStart, bpos[to] - bStart)} @@\n`;
    for (let i = from; i < to; i++) {
      if (ops[i] === 0) out += lineOut(" ", a[apos[i]]);
      else if (ops[i] === 1) out += lineOut("-", a[apos[i]]);
      else out += lineOut("+", b[bpos[i]]);
    }
    ci = cj;
  }
  return out;
}

/** Unified diff of two texts, or null when over the caps. */
export function unifiedDiff(a: string, b: string): string | null {
  if (a === b) return "";
  const la = splitLines(a);
  const lb = splitLines(b);
  const ops = myersDiff(la, lb);
  if (!ops) return null;
  return unifiedFromOps(la, lb, ops);
}

// ---------------------------------------------------------------------------
// JSON structural diff

function jsonPathKey(path: string, key: string): string {
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}

function jsonType(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  return typeof v;
}

/** Structural changes between two JSON values; arrays are compared index by index. */
export function jsonDiff(a: unknown, b: unknown, max = JSON_DIFF_MAX_CHANGES): { changes: JsonChange[]; complete: boolean } {
  const changes: JsonChange[] = [];
  let complete = true;
  const push = (c: JsonChange) => {
    if (changes.length >= max) {
      complete = false;
      return false;
    }
    changes.push(c);
    return true;
  };
  const walk = (x: unknown, y: unknown, path: string, depth: number): boolean => {
    const tx = jsonType(x);
    const ty = jsonType(y);
    if (tx !== ty) return push({ path, op: "changed", a: x, b: y });
    if (tx === "array") {
      const xa = x as unknown[];
      const ya = y as unknown[];
      if (depth > 500) return JSON.stringify(xa) === JSON.stringify(ya) || push({ path, op: "changed", a: x, b: y });
      const n = Math.min(xa.length, ya.length);
      for (let i = 0; i < n; i++) if (!walk(xa[i], ya[i], `${path}[${i}]`, depth + 1)) return false;
      for (let i = n; i < xa.length; i++) if (!push({ path: `${path}[${i}]`, op: "removed", a: xa[i] })) return false;
      for (let i = n; i < ya.length; i++) if (!push({ path: `${path}[${i}]`, op: "added", b: ya[i] })) return false;
      return true;
    }
    if (tx === "object") {
      const xo = x as Record<string, unknown>;
      const yo = y as Record<string, unknown>;
      if (depth > 500) return JSON.stringify(xo) === JSON.stringify(yo) || push({ path, op: "changed", a: x, b: y });
      for (const k of Object.keys(xo)) {
        const p = jsonPathKey(path, k);
        if (!Object.hasOwn(yo, k)) {
          if (!push({ path: p, op: "removed", a: xo[k] })) return false;
        } else if (!walk(xo[k], yo[k], p, depth + 1)) return false;
      }
      for (const k of Object.keys(yo)) {
        if (!Object.hasOwn(xo, k) && !push({ path: jsonPathKey(path, k), op: "added", b: yo[k] })) return false;
      }
      return true;
    }
    if (x !== y) return push({ path, op: "changed", a: x, b: y });
    return true;
  };
  walk(a, b, "$", 0);
  return { changes, complete };
}

// ---------------------------------------------------------------------------
// Bodies

function bytesOf(body: string, encoding: string): Uint8Array {
  if (encoding === "base64") return new Uint8Array(Buffer.from(body, "base64"));
  return new Uint8Array(Buffer.from(body, "utf8"));
}

function sameBytes(x: Uint8Array, y: Uint8Array): boolean {
  return x.length === y.length && Buffer.compare(x, y) === 0;
}

function contentType(headers: HeaderList): string {
  for (const [n, v] of headers) if (n.toLowerCase() === "content-type") return v;
  return "";
}

function isJsonType(ct: string): boolean {
  const mt = ct.split(";")[0].trim().toLowerCase();
  return mt === "application/json" || mt.endsWith("+json") || mt === "text/json";
}

function tryJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

interface BodySide {
  body: string;
  encoding: string;
  truncated: boolean;
  contentType: string;
}

function diffBody(x: BodySide, y: BodySide): BodyDiff {
  const bx = bytesOf(x.body, x.encoding);
  const by = bytesOf(y.body, y.encoding);
  const equal = sameBytes(bx, by);
  const result: BodyDiff = {
    equal,
    a_size: bx.length,
    b_size: by.length,
    a_truncated: x.truncated,
    b_truncated: y.truncated,
    kind: "text",
    unified: "",
    json: null,
    note: "",
  };
  if (x.encoding === "base64" || y.encoding === "base64") {
    result.kind = "binary";
    return result;
  }
  const notes: string[] = [];
  const tooLarge = bx.length > LINE_DIFF_MAX_BYTES || by.length > LINE_DIFF_MAX_BYTES;
  // JSON: both sides parse, and either a JSON content type or both look like an object/array
  if (x.body.trim() !== "" && y.body.trim() !== "") {
    const looksStructured = (s: string) => /^\s*[\[{]/.test(s);
    const hinted =
      isJsonType(x.contentType) || isJsonType(y.contentType) || (looksStructured(x.body) && looksStructured(y.body));
    if (hinted) {
      const jx = tryJson(x.body);
      const jy = jx.ok ? tryJson(y.body) : jx;
      if (jx.ok && jy.ok) {
        result.kind = "json";
        if (equal) result.json = [];
        else {
          const { changes, complete } = jsonDiff(jx.value, jy.value);
          result.json = changes;
          if (!complete) notes.push(`JSON change list stopped after ${JSON_DIFF_MAX_CHANGES} changes`);
        }
      }
    }
  }
  if (!equal) {
    if (tooLarge) {
      notes.push(`bodies differ; too large to diff line by line (over ${LINE_DIFF_MAX_BYTES} bytes)`);
    } else {
      const u = unifiedDiff(x.body, y.body);
      if (u === null) notes.push(`bodies differ; too many changed lines to diff line by line (over ${LINE_DIFF_MAX_EDITS} edits)`);
      else result.unified = u;
    }
  }
  result.note = notes.join("; ");
  return result;
}

// ---------------------------------------------------------------------------

/** Structured diff of entry a against entry b. */
export function diffEntries(a: EntryDetail, b: EntryDetail): DiffResult {
  const method = vd(a.method, b.method);
  const url = diffUrl(a.url, b.url);
  const status = vd(a.status_code, b.status_code);
  const reqH = diffPairs(a.req_headers ?? [], b.req_headers ?? [], true);
  const resH = diffPairs(a.res_headers ?? [], b.res_headers ?? [], true);
  const reqB = diffBody(
    { body: a.req_body ?? "", encoding: a.req_body_encoding, truncated: !!a.req_body_truncated, contentType: contentType(a.req_headers ?? []) },
    { body: b.req_body ?? "", encoding: b.req_body_encoding, truncated: !!b.req_body_truncated, contentType: contentType(b.req_headers ?? []) },
  );
  const resB = diffBody(
    { body: a.res_body ?? "", encoding: a.res_body_encoding, truncated: !!a.res_body_truncated, contentType: contentType(a.res_headers ?? []) },
    { body: b.res_body ?? "", encoding: b.res_body_encoding, truncated: !!b.res_body_truncated, contentType: contentType(b.res_headers ?? []) },
  );
  return {
    equal: method.equal && url.equal && status.equal && reqH.equal && resH.equal && reqB.equal && resB.equal,
    a_id: a.id,
    b_id: b.id,
    method,
    url,
    status,
    req_headers: reqH,
    res_headers: resH,
    req_body: reqB,
    res_body: resB,
  };
}
