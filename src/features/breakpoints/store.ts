import { Value } from "@sinclair/typebox/value";
import { compileUrlPattern, PatternError, type UrlMatcher } from "../rules/matcher.ts";
import { JsonState } from "../../store/json-state.ts";
import { Breakpoint, BreakpointInput, checkInput, InvalidInput } from "./models.ts";

export type Phase = "request" | "response";

/**
 * The breakpoint list (spec 2.6, 4.4), keyed by pattern, in insertion order, persisted in breakpoints.json.
 * Every change is written before it is visible. Patterns are compiled by the shared URL matcher.
 */
export class BreakpointStore {
  private readonly state: JsonState<Breakpoint[]>;
  private compiled: { bp: Breakpoint; m: UrlMatcher }[] = [];

  constructor(path: string, onCorrupt?: (path: string, movedTo: string, reason: string) => void) {
    this.state = new JsonState<Breakpoint[]>(path, {
      initial: () => [],
      validate: (v) => {
        if (!Array.isArray(v)) return "expected an array of breakpoints";
        for (const b of v) {
          if (!Value.Check(Breakpoint, b)) return `a stored breakpoint does not match the schema: ${JSON.stringify(b).slice(0, 200)}`;
          try {
            compileUrlPattern(b.pattern);
          } catch (e) {
            return (e as Error).message;
          }
        }
        return null;
      },
      onCorrupt,
    });
    this.recompile();
  }

  list(): Breakpoint[] {
    return this.state.get().map((b) => ({ ...b }));
  }

  /** Validates an input object (defaults filled in, pattern compiled); throws InvalidInput naming the field. */
  parse(input: unknown): Breakpoint {
    const b = checkInput(BreakpointInput, input) as Breakpoint;
    const pattern = b.pattern.trim();
    if (!pattern) throw new InvalidInput("invalid body field 'pattern': must not be empty");
    try {
      compileUrlPattern(pattern);
    } catch (e) {
      if (e instanceof PatternError) throw new InvalidInput(`invalid body field 'pattern': ${e.message}`);
      throw e;
    }
    return { pattern, intercept_request: b.intercept_request, intercept_response: b.intercept_response };
  }

  /** Creates or replaces (same pattern) a breakpoint; returns true when it was new. */
  put(bp: Breakpoint): boolean {
    const cur = this.state.get();
    const i = cur.findIndex((b) => b.pattern === bp.pattern);
    this.state.set(i >= 0 ? cur.map((b, j) => (j === i ? bp : b)) : [...cur, bp]);
    this.recompile();
    return i < 0;
  }

  /** Removes the breakpoint with this pattern; false when there was none. */
  delete(pattern: string): boolean {
    const p = pattern.trim();
    const cur = this.state.get();
    if (!cur.some((b) => b.pattern === p)) return false;
    this.state.set(cur.filter((b) => b.pattern !== p));
    this.recompile();
    return true;
  }

  clear(): void {
    this.state.set([]);
    this.recompile();
  }

  /** Whether any breakpoint exists (lets the addon skip building URLs on the hot path). */
  get isEmpty(): boolean {
    return this.compiled.length === 0;
  }

  /** The first breakpoint (in list order) that pauses this phase and matches one of the URLs. */
  match(phase: Phase, urls: readonly string[]): Breakpoint | null {
    for (const { bp, m } of this.compiled) {
      if (phase === "request" ? !bp.intercept_request : !bp.intercept_response) continue;
      for (const u of urls) if (m.match(u)) return bp;
    }
    return null;
  }

  private recompile(): void {
    this.compiled = this.state.get().map((bp) => ({ bp, m: compileUrlPattern(bp.pattern) }));
  }
}
