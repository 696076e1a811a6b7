import { compileCapturePattern, substituteCaptures } from "../rules/matcher.ts";
import { invalidField as invalid, METHOD_TOKEN, RuleStore } from "../rules/rule-store.ts";
import { defaultPort, hostPort, type Scheme } from "../../pipeline/flow.ts";
import { type MapRemoteRule, MapRemoteRuleSchema } from "./schema.ts";

/** Host names compare lower-cased, without IPv6 brackets or a trailing dot (as the proxy core holds them). */
export function normalizeHost(h: string): string {
  let s = h.trim().toLowerCase();
  if (s.startsWith("[") && s.endsWith("]")) s = s.slice(1, -1);
  if (s.endsWith(".")) s = s.slice(0, -1);
  return s;
}

function checkHost(field: string, portField: string, raw: string): void {
  const h = raw.trim();
  if (h === "" || h === "." || h === "[]") invalid(field, "must not be empty");
  if (/[\s/?#@\\*]/.test(h) || /[\x00-\x1f\x7f]/.test(h)) invalid(field, `'${raw}' is not a host name (no scheme, path, wildcard or spaces)`);
  if (h.startsWith("[") || h.endsWith("]")) {
    if (!/^\[[0-9A-Fa-f:.]+\]$/.test(h)) invalid(field, `'${raw}' is not a bracketed IPv6 address`);
    return;
  }
  if ((h.match(/:/g)?.length ?? 0) === 1) invalid(field, `'${raw}' carries a port: give the host alone and the port in ${portField}`);
}

/** What a request looks like to Map Remote: the path without its query, the query apart (null when none). */
export interface RemoteTarget {
  method: string;
  scheme: Scheme;
  host: string;
  port: number;
  path: string;
  query: string | null;
}

export interface RemoteMatch {
  rule: MapRemoteRule;
  /** The rewritten destination; `path` includes the kept query. */
  dest: { scheme: Scheme; host: string; port: number; path: string };
}

/** The rewritten URL (default port omitted). */
export function destUrl(d: RemoteMatch["dest"]): string {
  return `${d.scheme}://${hostPort(d.scheme, d.host, d.port)}${d.path}`;
}

/** The Map Remote rule family: the shared RuleStore plus the checks a schema cannot express, matching and rewriting. */
export class MapRemoteStore extends RuleStore<typeof MapRemoteRuleSchema> {
  constructor(path: string, onCorrupt?: (path: string, movedTo: string, reason: string) => void) {
    super(path, MapRemoteRuleSchema, { onCorrupt });
  }

  /**
   * Schemes are accepted in any case (stored lower-case); then schema validation (defaults filled) plus: hosts
   * without port, path or wildcard; a source_path starting with `/` or `*` and without a query; a dest_path
   * that can go on the wire; a method unless all methods match. Throws RuleStoreError("invalid") naming the field.
   */
  override parse(input: unknown): MapRemoteRule {
    let body = input;
    if (body && typeof body === "object" && !Array.isArray(body)) {
      const o = { ...(body as Record<string, unknown>) };
      for (const k of ["source_scheme", "dest_scheme"]) if (typeof o[k] === "string") o[k] = (o[k] as string).trim().toLowerCase();
      body = o;
    }
    const r = super.parse(body);
    checkHost("source_host", "source_port", r.source_host);
    checkHost("dest_host", "dest_port", r.dest_host);
    if (!r.source_path.startsWith("/") && !r.source_path.startsWith("*")) invalid("source_path", `'${r.source_path}' must start with '/' (or '*')`);
    if (r.source_path.includes("?")) invalid("source_path", "is matched against the path only (the query is kept as it is); remove the '?...'");
    if (/[\s#]/.test(r.dest_path) || /[\x00-\x1f\x7f]/.test(r.dest_path)) invalid("dest_path", "must not contain spaces, control characters or '#'");
    if (!r.match_all_methods) {
      if (r.method.trim() === "") invalid("method", "required when match_all_methods is false");
      if (!METHOD_TOKEN.test(r.method.trim())) invalid("method", `'${r.method}' is not an HTTP method`);
    }
    return r;
  }

  /** The first enabled rule (list order) matching the request, with the rewritten destination; the master flag is
   * not consulted (the addon checks it; the match preview ignores it). */
  match(t: RemoteTarget): RemoteMatch | null {
    if (!t.path.startsWith("/")) return null; // OPTIONS * and the like are never rewritten
    const method = t.method.toUpperCase();
    const host = normalizeHost(t.host);
    for (const rule of this.list()) {
      if (!rule.enabled) continue;
      if (rule.source_scheme !== t.scheme) continue;
      if ((rule.source_port ?? defaultPort(rule.source_scheme)) !== t.port) continue;
      if (normalizeHost(rule.source_host) !== host) continue;
      if (!rule.match_all_methods && rule.method.trim().toUpperCase() !== method) continue;
      const caps = compileCapturePattern(rule.source_path).match(t.path);
      if (caps === null) continue;
      let path = substituteCaptures(rule.dest_path, caps);
      if (!path.startsWith("/")) path = `/${path}`;
      if (t.query !== null) path += `${path.includes("?") ? "&" : "?"}${t.query}`;
      return {
        rule,
        dest: { scheme: rule.dest_scheme, host: normalizeHost(rule.dest_host), port: rule.dest_port ?? defaultPort(rule.dest_scheme), path },
      };
    }
    return null;
  }
}
