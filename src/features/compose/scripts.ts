import type { ScriptRequest, ScriptResponse } from "../scripts/engine/types.ts";
import type { ScriptRunner } from "../scripts/runner.ts";
import type { Collection, ComposeRequest, Environment, Folder, Scripts, SendResult } from "./schema.ts";
import type { SendScopes } from "./variables.ts";

/**
 * Pre-request and test scripts at send (docs/api.md, "Scripts at send"): which scripts run, in Postman's order
 * (the collection's, the enclosing folders' outermost first, the request's), running them one after another on the
 * process's script engine with the send's variable scopes, and masking secret values in what they report.
 */

export type ScriptEvent = "prerequest" | "test";

/** One script to run, and where it comes from (named in `errors`). */
export interface ChainStep {
  source: string;
  code: string;
}

/** The non-empty scripts of one event, in the order they run. */
export function scriptChain(c: Collection, folders: Folder[], r: ComposeRequest, event: ScriptEvent): ChainStep[] {
  const out: ChainStep[] = [];
  const add = (source: string, s: Scripts) => {
    if (s[event].trim() !== "") out.push({ source, code: s[event] });
  };
  add(`collection '${c.name}'`, c.scripts);
  for (const f of folders) add(`folder '${f.name}'`, f.scripts);
  add(`request '${r.name}'`, r.scripts);
  return out;
}

export interface ChainContext {
  request: ScriptRequest;
  response: ScriptResponse | null;
  /** Updated in place with what each script left. */
  scopes: SendScopes;
  info: { requestName: string; requestId: string; environmentName: string; iteration?: number; iterationCount?: number };
  /** Console lines, tests and errors are appended here. */
  result: Pick<SendResult, "console" | "tests" | "errors">;
  /** Stop at the first script that fails (pre-request scripts: the request is then not sent). */
  stopOnError: boolean;
}

/**
 * Runs the scripts one after another: each sees the variables as the previous one left them and, before the
 * request, the request as the previous one changed it. Answers the request as the last script left it.
 */
export async function runScriptChain(runner: ScriptRunner, steps: ChainStep[], event: ScriptEvent, ctx: ChainContext): Promise<{ request: ScriptRequest }> {
  let request = ctx.request;
  const s = ctx.scopes;
  for (const step of steps) {
    const out = await runner.run(
      {
        script: step.code,
        phase: event === "prerequest" ? "request" : "test",
        request,
        response: ctx.response,
        variables: s.variables,
        iterationData: s.iterationData,
        environment: s.environment,
        collectionVariables: s.collectionVariables,
        globals: s.globals,
        info: { ...ctx.info, eventName: event },
      },
      null,
    );
    ctx.result.console.push(...out.console);
    ctx.result.tests.push(...out.tests);
    for (const e of out.errors) ctx.result.errors.push({ source: step.source, event, message: e.message, stack: e.stack, line: e.line });
    s.variables = out.variables;
    s.environment = out.environment;
    s.collectionVariables = out.collectionVariables;
    s.globals = out.globals;
    if (event === "prerequest") request = out.request;
    if (out.errors.length && ctx.stopOnError) break;
  }
  return { request };
}

export const MASK = "***";

/**
 * The values of the environment's secret variables (`isSecret`: defaultValue, currentValue, and values scripts
 * give them during the send), replaced by *** wherever they appear in console lines, test names and messages, and
 * errors. A value is found verbatim (also as it appears inside JSON text, with its quotes and backslashes escaped),
 * so a line that logs a secret inside other text is masked too.
 */
export class SecretMask {
  private readonly keys = new Set<string>();
  private readonly values = new Set<string>();

  constructor(env: Environment | null) {
    for (const v of env?.variables ?? []) {
      if (!v.isSecret) continue;
      this.keys.add(v.key);
      this.add(v.defaultValue);
      if (v.currentValue !== null) this.add(v.currentValue);
    }
  }

  private add(v: string): void {
    if (v === "") return;
    this.values.add(v);
    const escaped = JSON.stringify(v).slice(1, -1);
    if (escaped !== v) this.values.add(escaped);
  }

  /** A script gave the variable `key` this value (null: unset). */
  setValue(key: string, value: string | null): void {
    if (value !== null && this.keys.has(key)) this.add(value);
  }

  text(s: string): string {
    if (!this.values.size || !s) return s;
    // longest first, so that a secret containing another is masked whole
    let out = s;
    for (const v of [...this.values].sort((a, b) => b.length - a.length)) out = out.split(v).join(MASK);
    return out;
  }

  apply(result: Pick<SendResult, "console" | "tests" | "errors" | "error">): void {
    if (!this.values.size) return;
    for (const l of result.console) l.message = this.text(l.message);
    for (const t of result.tests) {
      t.name = this.text(t.name);
      if (t.error !== null) t.error = this.text(t.error);
    }
    for (const e of result.errors) {
      e.message = this.text(e.message);
      if (e.stack !== null) e.stack = this.text(e.stack);
    }
    if (result.error !== null) result.error = this.text(result.error);
  }
}
