/**
 * Messages between ScriptEngine (main thread) and a script worker. Kept small: the input crosses as one JSON string
 * without bodies (the worker hands bodies to the sandbox only when a script reads them), the output as one JSON
 * string holding only what the script changed (output.ts merges it with the input).
 */
import type { ScriptResponse } from "./types.ts";

export type HostToWorker =
  /** First message: the memory limit this worker's WebAssembly instance is built with (runs use the same). */
  | { t: "init"; memoryBytes: number }
  | RunWire
  /** Several runs posted in one message (those dispatched in the same turn of the host's event loop). */
  | RunBatchWire
  /** The answer to a "send" (pm.sendRequest): result is a SendResult as JSON. */
  | { t: "sent"; id: number; op: number; result: string };

/**
 * A run. On the wire it is a RunWire: the messages of every run are tuples, which Bun clones in about half the
 * time of an object with named fields.
 */
export interface RunMessage {
  t: "run";
  id: number;
  script: string;
  /** SandboxInput in parts (SandboxInputHead). */
  input: string;
  requestBody: string;
  responseBody: string | null;
  timeoutMs: number;
  memoryBytes: number;
}

export type RunWire = [t: "run", id: number, script: string, input: string, requestBody: string, responseBody: string | null, timeoutMs: number, memoryBytes: number];

export type RunBatchWire = [t: "batch", runs: RunWire[]];

export const runToWire = (m: RunMessage): RunWire => ["run", m.id, m.script, m.input, m.requestBody, m.responseBody, m.timeoutMs, m.memoryBytes];

export const runFromWire = (w: RunWire): RunMessage => ({ t: "run", id: w[1], script: w[2], input: w[3], requestBody: w[4], responseBody: w[5], timeoutMs: w[6], memoryBytes: w[7] });

/** A run's normal end on the wire: output is SandboxOutput as JSON. */
export type DoneWire = [t: "done", id: number, output: string];

/** Several answers in one message (runs the worker did back to back), in order. */
export type DoneBatchWire = [t: "batch", done: DoneWire[]];

export type SendResult = { ok: true; response: ScriptResponse } | { ok: false; error: string };

export type FailureKind = "timeout" | "oom" | "crash";

export type WorkerToHost =
  | { t: "ready" }
  | { t: "initFailed"; message: string }
  | DoneWire
  | DoneBatchWire
  /** The run could not finish normally; the worker must be replaced. */
  | { t: "failed"; id: number; kind: FailureKind; message: string }
  /** pm.sendRequest: request is a ScriptRequest as JSON. */
  | { t: "send"; id: number; op: number; request: string };

/**
 * What the sandbox's start() gets (bodies travel separately): RunMessage.input is the JSON of SandboxInputHead, then
 * of request, response, variables, environment, collectionVariables and globals, joined by "\n" (never in
 * JSON.stringify's output); the sandbox parses each part on first use.
 */
export type SandboxInputHead = Pick<SandboxInput, "phase" | "memoryBytes" | "info" | "iterationData">;

export interface SandboxInput {
  phase: string;
  memoryBytes: number;
  request: { method: string; url: string; headers: [string, string][] };
  response: { status: number; statusText?: string; headers: [string, string][]; responseTime?: number } | null;
  variables: Record<string, unknown>;
  environment: Record<string, unknown>;
  collectionVariables: Record<string, unknown>;
  globals: Record<string, unknown>;
  /** pm.iterationData (left out when empty). */
  iterationData?: Record<string, unknown>;
  info: { requestName?: string; requestId?: string; eventName?: string; environmentName?: string; iteration?: number; iterationCount?: number };
}

/**
 * What the sandbox's finish() answers. Console lines, tests and errors are tuples to keep the text short; request,
 * response and scopes are present only when the script changed them (and hold only the changed parts).
 */
export interface SandboxOutput {
  /** console, tests and errors: left out when empty. */
  console?: [string, string, number][];
  tests?: [string, boolean, string | null][];
  errors?: [string, string | null, number | null][];
  oom?: boolean;
  request?: { method?: string; url?: string; headers?: [string, string][]; body?: string };
  response?: { status?: number; statusText?: string; headers?: [string, string][]; body?: string };
  variables?: Record<string, unknown>;
  environment?: Record<string, unknown>;
  collectionVariables?: Record<string, unknown>;
  globals?: Record<string, unknown>;
}
