/**
 * Messages between ScriptEngine (main thread) and a script worker. Kept small: the input crosses as one JSON string
 * without bodies (the worker hands bodies to the sandbox only when a script reads them), the output as one JSON
 * string holding only what the script changed (output.ts merges it with the input).
 */
import type { ScriptResponse } from "./types.ts";

export type HostToWorker =
  /** First message: the memory limit this worker's WebAssembly instance is built with (runs use the same). */
  | { t: "init"; memoryBytes: number }
  | {
      t: "run";
      id: number;
      script: string;
      /** SandboxInput as JSON. */
      input: string;
      requestBody: string;
      responseBody: string | null;
      timeoutMs: number;
      memoryBytes: number;
    }
  /** The answer to a "send" (pm.sendRequest): result is a SendResult as JSON. */
  | { t: "sent"; id: number; op: number; result: string };

export type SendResult = { ok: true; response: ScriptResponse } | { ok: false; error: string };

export type FailureKind = "timeout" | "oom" | "crash";

export type WorkerToHost =
  | { t: "ready" }
  | { t: "initFailed"; message: string }
  /** output: SandboxOutput as JSON. */
  | { t: "done"; id: number; output: string }
  /** The run could not finish normally; the worker must be replaced. */
  | { t: "failed"; id: number; kind: FailureKind; message: string }
  /** pm.sendRequest: request is a ScriptRequest as JSON. */
  | { t: "send"; id: number; op: number; request: string };

/** What the sandbox's start() parses (bodies travel separately). */
export interface SandboxInput {
  phase: string;
  memoryBytes: number;
  request: { method: string; url: string; headers: [string, string][] };
  response: { status: number; statusText?: string; headers: [string, string][]; responseTime?: number } | null;
  variables: Record<string, unknown>;
  environment: Record<string, unknown>;
  collectionVariables: Record<string, unknown>;
  globals: Record<string, unknown>;
  info: { requestName?: string; eventName?: string; environmentName?: string };
}

/**
 * What the sandbox's finish() answers. Console lines, tests and errors are tuples to keep the text short; request,
 * response and scopes are present only when the script changed them (and hold only the changed parts).
 */
export interface SandboxOutput {
  console: [string, string, number][];
  tests: [string, boolean, string | null][];
  errors: [string, string | null, number | null][];
  oom?: boolean;
  request?: { method?: string; url?: string; headers?: [string, string][]; body?: string };
  response?: { status?: number; statusText?: string; headers?: [string, string][]; body?: string };
  variables?: Record<string, unknown>;
  environment?: Record<string, unknown>;
  collectionVariables?: Record<string, unknown>;
  globals?: Record<string, unknown>;
}
