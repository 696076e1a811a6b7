import { badRequest } from "../../api/errors.ts";
import type { HeaderList } from "../../core/http1/types.ts";
import type { Phase, ScriptOutput, ScriptResponse } from "./engine/types.ts";
import type { ScriptRunner } from "./runner.ts";
import type { ExecuteBody } from "./schema.ts";

const PHASES: readonly Phase[] = ["request", "response", "test"];

const toList = (h: Record<string, string> | undefined): HeaderList => Object.entries(h ?? {}).map(([n, v]) => [n, v]);

/** Header lists leave as objects, as they came in; repeated names are joined with ", " (set-cookie with "\n"). */
function toObject(h: HeaderList): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [n, v] of h) {
    const prev = Object.keys(out).find((k) => k.toLowerCase() === n.toLowerCase());
    if (prev === undefined) out[n] = v;
    else out[prev] += (n.toLowerCase() === "set-cookie" ? "\n" : ", ") + v;
  }
  return out;
}

/** The test-mode answer (docs/api.md, "POST /scripts/execute"): the engine's output with header lists as objects. */
export interface ExecuteResult extends Omit<ScriptOutput, "request" | "response"> {
  request: { method: string; url: string; headers: Record<string, string>; body: string };
  response: { status: number; statusText?: string; headers: Record<string, string>; body: string; responseTime?: number } | null;
}

/**
 * POST /scripts/execute (spec 4.15): runs one script in test mode. The phase must be request, response or test;
 * response and test need `input.response`. The route works whenever the body is valid: a script that throws,
 * times out or runs out of memory still answers 200, with the failure in `errors`.
 */
export async function executeScript(runner: ScriptRunner, body: ExecuteBody): Promise<ExecuteResult> {
  const input = body.input;
  const phase = input.phase as Phase;
  if (!PHASES.includes(phase)) throw badRequest(`invalid body field 'input.phase': '${input.phase}' is not one of ${PHASES.join(", ")}`);
  if (phase !== "request" && !input.response) throw badRequest(`invalid body field 'input.response': required for phase '${phase}'`);
  const req = input.request ?? {};
  const url = req.url ?? "http://localhost/";
  try {
    new URL(url);
  } catch {
    throw badRequest(`invalid body field 'input.request.url': '${url}' is not an absolute URL`);
  }
  const response: ScriptResponse | null = input.response
    ? { status: input.response.status ?? 200, headers: toList(input.response.headers), body: input.response.body ?? "" }
    : null;
  const out = await runner.run(
    {
      script: input.script,
      phase,
      request: { method: (req.method ?? "GET").toUpperCase(), url, headers: toList(req.headers), body: req.body ?? "" },
      response,
      variables: input.variables ?? {},
      environment: input.environment ?? {},
      collectionVariables: input.collectionVariables ?? {},
      globals: input.globals ?? {},
      info: { requestName: "test-mode" },
    },
    null,
  );
  return {
    ...out,
    request: { ...out.request, headers: toObject(out.request.headers) },
    response: out.response ? { ...out.response, headers: toObject(out.response.headers) } : null,
  };
}
