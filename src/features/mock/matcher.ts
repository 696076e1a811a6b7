import { compilePathPattern, type PathMatcher } from "../rules/matcher.ts";
import { compileRuleResponse, type CannedResponse } from "./response.ts";
import type { MockRule } from "./schema.ts";

/** One enabled rule, ready to be tested and answered. */
export interface CompiledRule {
  /** Position in the rule list: the lowest matching position wins. */
  readonly index: number;
  readonly rule: MockRule;
  /** Upper-cased method; "" matches any. */
  readonly method: string;
  readonly matcher: PathMatcher;
  /** Cheap necessary conditions on the request path, checked before the matcher: its literal start and end. */
  readonly prefix: string;
  readonly suffix: string;
  /** The canned response, or the reason it cannot be served (a hand-edited state file). */
  readonly response: CannedResponse | Error;
}

class TrieNode {
  /** Rules whose literal prefix ends with this node's segments followed by `/`, in rule order. */
  readonly rules: CompiledRule[] = [];
  children: Map<string, TrieNode> | null = null;

  child(seg: string): TrieNode {
    this.children ??= new Map();
    let n = this.children.get(seg);
    if (n === undefined) {
      n = new TrieNode();
      this.children.set(seg, n);
    }
    return n;
  }
}

/** The path of a path-and-query (or absolute URL), as compilePathPattern's matchers see it: no query, no fragment. */
export function pathOf(pathAndQuery: string): string {
  let s = pathAndQuery;
  if (s.charCodeAt(0) !== 47 /* / */) {
    const sep = s.indexOf("://");
    if (sep > 0 && /^[A-Za-z][A-Za-z0-9+.-]*$/.test(s.slice(0, sep))) {
      let end = sep + 3;
      while (end < s.length && s[end] !== "/" && s[end] !== "?" && s[end] !== "#") end++;
      s = s.slice(end);
    }
    if (s.charCodeAt(0) !== 47) s = `/${s}`;
  }
  let cut = s.length;
  const q = s.indexOf("?");
  if (q >= 0) cut = q;
  const h = s.indexOf("#");
  if (h >= 0 && h < cut) cut = h;
  return cut === s.length ? s : s.slice(0, cut);
}

/**
 * First-match-wins lookup over the enabled rules, indexed so that 1,000 rules cost a handful of tests per request:
 *
 * - a pattern whose path part (before any `?`) has no `*` can only match that one path (`/a/b`, `/search?q=*`):
 *   those rules sit in a Map keyed by the path;
 * - every other pattern starts with a literal prefix (before its first `*`); the complete segments of
 *   that prefix (`/api/users/` of `/api/users/*`, or `/api/` of `/api/us*`) place the rule in a trie of segments.
 *   A request path walks the trie along its own complete segments, so only rules whose literal prefix it could
 *   start with are tested. Patterns that start with `*` sit at the root and are tested for every request.
 *
 * Every candidate is confirmed by the shared matcher (compilePathPattern), so the index only prunes: it decides
 * nothing about glob semantics. Each candidate list is in rule order; a list is abandoned as soon as its next rule
 * comes after the best match found so far.
 */
export class MockIndex {
  private readonly exact = new Map<string, CompiledRule[]>();
  private readonly root = new TrieNode();
  readonly size: number;

  constructor(rules: readonly MockRule[], onBadRule: (rule: MockRule, why: string) => void = () => {}) {
    let n = 0;
    rules.forEach((rule, index) => {
      if (!rule.enabled) return;
      let matcher: PathMatcher;
      try {
        matcher = compilePathPattern(rule.url_pattern);
      } catch (e) {
        onBadRule(rule, `skipped: ${(e as Error).message}`);
        return;
      }
      let response: CannedResponse | Error;
      try {
        response = compileRuleResponse(rule);
      } catch (e) {
        response = e as Error;
        onBadRule(rule, `answers 500 when it matches: ${response.message}`);
      }
      // the same normalisation as compilePathPattern
      let p = rule.url_pattern.trim();
      if (!p.startsWith("/") && !p.startsWith("*")) p = `/${p}`;
      const q = p.indexOf("?");
      const pathPart = q >= 0 ? p.slice(0, q) : p;
      const star = pathPart.indexOf("*");
      const prefix = star >= 0 ? pathPart.slice(0, star) : pathPart;
      // without a query part the path is matched to its end, so it ends with whatever follows the last `*`
      const suffix = q < 0 && star >= 0 && !pathPart.endsWith("*") ? pathPart.slice(pathPart.lastIndexOf("*") + 1) : "";
      const cr: CompiledRule = { index, rule, method: rule.method.trim().toUpperCase(), matcher, prefix, suffix, response };
      this.place(cr, pathPart, star);
      n++;
    });
    this.size = n;
  }

  private place(cr: CompiledRule, pathPart: string, star: number): void {
    if (star < 0) {
      // a path without `*` is matched whole: with or without a query part, the request path must equal it
      let list = this.exact.get(pathPart);
      if (list === undefined) this.exact.set(pathPart, (list = []));
      list.push(cr);
      return;
    }
    const literal = pathPart.slice(0, star);
    let node = this.root;
    // complete segments: every piece of the literal prefix that a `/` follows
    let i = 1;
    for (;;) {
      const j = literal.indexOf("/", i);
      if (j < 0) break;
      node = node.child(literal.slice(i, j));
      i = j + 1;
    }
    node.rules.push(cr);
  }

  /** The first enabled rule (in list order) whose method and url_pattern match, or null. */
  match(method: string, pathAndQuery: string): CompiledRule | null {
    const m = method.toUpperCase();
    const path = pathOf(pathAndQuery);
    let best: CompiledRule | null = null;
    const exact = this.exact.get(path);
    if (exact !== undefined) best = scan(exact, m, path, pathAndQuery, best);
    let node: TrieNode | undefined = this.root;
    if (node.rules.length > 0) best = scan(node.rules, m, path, pathAndQuery, best);
    let i = 1;
    while (node.children !== null) {
      const j = path.indexOf("/", i);
      if (j < 0) break;
      node = node.children.get(path.slice(i, j));
      if (node === undefined) break;
      if (node.rules.length > 0) best = scan(node.rules, m, path, pathAndQuery, best);
      i = j + 1;
    }
    return best;
  }
}

// startsWith/endsWith cost ~15 ns a call in JavaScriptCore; a char loop rejects at the first differing char.
function hasPrefix(s: string, p: string): boolean {
  const n = p.length;
  if (s.length < n) return false;
  for (let i = 0; i < n; i++) if (s.charCodeAt(i) !== p.charCodeAt(i)) return false;
  return true;
}

function hasSuffix(s: string, p: string): boolean {
  const n = p.length;
  const o = s.length - n;
  if (o < 0) return false;
  for (let i = n - 1; i >= 0; i--) if (s.charCodeAt(o + i) !== p.charCodeAt(i)) return false;
  return true;
}

/** The first rule of `list` (in rule order, before `best`) that matches, else `best`. */
function scan(list: CompiledRule[], method: string, path: string, pathAndQuery: string, best: CompiledRule | null): CompiledRule | null {
  const limit = best === null ? Number.MAX_SAFE_INTEGER : best.index;
  for (let k = 0; k < list.length; k++) {
    const cr = list[k];
    if (cr.index >= limit) break;
    if (cr.method !== "" && cr.method !== method) continue;
    if (!hasSuffix(path, cr.suffix) || !hasPrefix(path, cr.prefix)) continue;
    if (cr.matcher.match(pathAndQuery)) return cr;
  }
  return best;
}

/** Something that holds the rules and bumps `version` on every change (the family's RuleStore). */
export interface RuleSource {
  readonly version: number;
  readonly enabled: boolean;
  list(): MockRule[];
}

/** The index of a RuleSource, rebuilt lazily when the source's version changes. */
export class MockMatcher {
  private index: MockIndex | null = null;
  private builtFor = -1;

  constructor(private readonly source: RuleSource, private readonly onBadRule?: (rule: MockRule, why: string) => void) {}

  /** The current index (rebuilt if the rules changed since the last call). */
  current(): MockIndex {
    const v = this.source.version;
    if (this.index === null || this.builtFor !== v) {
      this.index = new MockIndex(this.source.list(), this.onBadRule);
      this.builtFor = v;
    }
    return this.index;
  }

  /** What the listener answers: null when no enabled rule matches or the master flag is off. */
  match(method: string, pathAndQuery: string): CompiledRule | null {
    if (!this.source.enabled) return null;
    return this.current().match(method, pathAndQuery);
  }
}
