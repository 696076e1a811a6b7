import { ApiError } from "../../api/errors.ts";
import type { FlowRunner } from "./runner.ts";
import type { Flow, RunReport } from "./schema.ts";
import type { FlowStore } from "./store.ts";

/** 503 `uiNotRunning` (spec 7): there is nothing to execute the flow (runner off, or the service is stopping). */
export const notRunning = (why: string) => new ApiError(503, "uiNotRunning", why);
/** 504 `timeout` (spec 7, 8): the run outlasted the run timeout; it was cancelled. */
export const runTimeout = (ms: number) => new ApiError(504, "timeout", `the flow run did not finish within ${ms / 1000} s; it was cancelled and its requests aborted`);

export interface FlowServiceOptions {
  /** false: `start --no-flow-runner` (every run is a 503). */
  enabled: boolean;
  /** Time limit of one run, ms. */
  timeoutMs: number;
}

/**
 * Executes flows for the API and the CLI: the runner behind a run timeout and an off switch. A run that outlasts
 * the timeout is cancelled (its request in flight aborted) and the caller gets 504 after the whole timeout; runs
 * still going when the service stops are cancelled and answer 503, as does any run asked for from then on.
 */
export class FlowService {
  private stopping = false;
  private readonly running = new Set<AbortController>();

  constructor(private readonly store: FlowStore, private readonly runner: FlowRunner, readonly opts: FlowServiceOptions) {}

  get available(): boolean {
    return this.opts.enabled && !this.stopping;
  }

  private unavailable(): ApiError {
    return notRunning(this.stopping ? "tapwire is stopping; flows cannot run now" : "the flow runner is off (tapwire was started with --no-flow-runner)");
  }

  /** POST /flows/{id}/run: 404 missing or corrupt, 503 runner off or stopping, 504 timeout; else the report. */
  runStored(id: string, environment?: Record<string, unknown>): Promise<RunReport> {
    const flow = this.store.get(id);
    return this.run(flow, environment);
  }

  /** Runs a flow given whole (not necessarily stored), with the same rules. */
  async run(flow: Flow, environment?: Record<string, unknown>): Promise<RunReport> {
    if (!this.available) throw this.unavailable();
    const ac = new AbortController();
    this.running.add(ac);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<"timeout">((r) => (timer = setTimeout(() => r("timeout"), this.opts.timeoutMs)));
    try {
      const report = this.runner.run(flow, { environment, signal: ac.signal });
      const first = await Promise.race([report, timedOut]);
      if (first === "timeout") {
        ac.abort(new Error("the run was cancelled: it outlasted the run timeout"));
        throw runTimeout(this.opts.timeoutMs);
      }
      if (ac.signal.aborted) throw this.unavailable();
      return first;
    } finally {
      clearTimeout(timer);
      this.running.delete(ac);
    }
  }

  /** The service stops: refuse new runs, cancel the ones going (they answer 503). */
  stop(): void {
    this.stopping = true;
    for (const ac of this.running) ac.abort(new Error("the run was cancelled: tapwire is stopping"));
  }
}
