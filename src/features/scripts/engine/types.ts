/**
 * The script engine's public types: what a caller hands ScriptEngine.run and what it gets back.
 * Everything here is plain data (JSON-compatible): it crosses into a Worker and into QuickJS as JSON.
 */

export type Phase = "request" | "response" | "test";

/** Header fields in order, with their case and duplicates preserved. */
export type HeaderList = [string, string][];

export interface ScriptRequest {
  method: string;
  url: string;
  headers: HeaderList;
  body: string;
}

export interface ScriptResponse {
  status: number;
  statusText?: string;
  headers: HeaderList;
  body: string;
  responseTime?: number;
}

export type VarScope = Record<string, unknown>;

export interface ScriptInput {
  script: string;
  phase: Phase;
  request: ScriptRequest;
  /** Present in the response and test phases. */
  response?: ScriptResponse | null;
  /** pm.variables (local). */
  variables?: VarScope;
  environment?: VarScope;
  collectionVariables?: VarScope;
  globals?: VarScope;
  /** pm.iterationData (read-only in scripts): a collection run's data row. Default empty. */
  iterationData?: VarScope;
  /**
   * pm.info and pm.environment.name. eventName defaults from the phase: request -> "prerequest",
   * response and test -> "test". environmentName (default "") is what pm.environment.name returns.
   * iteration (0-based, default 0) and iterationCount (default 1) are a collection run's.
   */
  info?: { requestName?: string; requestId?: string; eventName?: string; environmentName?: string; iteration?: number; iterationCount?: number };
}

export interface ConsoleLine {
  level: "log" | "info" | "warn" | "error";
  message: string;
  /** Epoch milliseconds when the script logged the line. */
  ts: number;
}

export interface TestResult {
  name: string;
  passed: boolean;
  error: string | null;
}

export interface ScriptError {
  message: string;
  stack: string | null;
  /** 1-based line in the script, when known. */
  line: number | null;
}

export interface ScriptOutput {
  console: ConsoleLine[];
  tests: TestResult[];
  /** As mutated by the script (the input, unchanged, when the run timed out, ran out of memory or crashed). */
  request: ScriptRequest;
  response: ScriptResponse | null;
  variables: VarScope;
  environment: VarScope;
  collectionVariables: VarScope;
  globals: VarScope;
  /** Thrown errors, syntax errors (with line), "timeout", "out of memory"... Empty when the script ran cleanly. */
  errors: ScriptError[];
  duration_ms: number;
}

export interface RunOptions {
  /** Wall-clock limit of the whole run (pm.sendRequest round trips and timers included). Default from the engine. */
  timeoutMs?: number;
  /** QuickJS heap limit for this run. Default from the engine. */
  memoryBytes?: number;
  /**
   * pm.sendRequest: the host performs the request (the proxy sends it through its own pipeline).
   * Absent = pm.sendRequest reports an error to the script.
   */
  sendRequest?: (req: ScriptRequest) => Promise<ScriptResponse>;
}
