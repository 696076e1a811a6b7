import type { Addon, ConnectInfo, HookResult } from "./addon.ts";
import type { Flow } from "./flow.ts";

type FlowHook = "requestHeaders" | "request" | "responseHeaders" | "response" | "error";

function isPromise(v: unknown): v is Promise<void> {
  return v !== undefined && v !== null && typeof (v as Promise<void>).then === "function";
}

/**
 * Runs the addons in their fixed order. Stays synchronous as long as every hook does (the hot path), and
 * switches to awaiting only from the first hook that returns a promise.
 */
export class Pipeline {
  private readonly byHook: Record<FlowHook, Addon[]>;
  private readonly connectAddons: Addon[];

  constructor(readonly addons: readonly Addon[]) {
    const pick = (h: FlowHook) => addons.filter((a) => typeof a[h] === "function");
    this.byHook = {
      requestHeaders: pick("requestHeaders"),
      request: pick("request"),
      responseHeaders: pick("responseHeaders"),
      response: pick("response"),
      error: pick("error"),
    };
    this.connectAddons = addons.filter((a) => typeof a.connect === "function");
  }

  connect(info: ConnectInfo): void {
    for (const a of this.connectAddons) a.connect!(info);
  }

  /**
   * Request-phase hooks stop once an addon has answered the flow (set `flow.response`);
   * response-phase hooks always run on every addon.
   */
  run(hook: FlowHook, flow: Flow): HookResult {
    const list = this.byHook[hook];
    const stopOnAnswer = hook === "requestHeaders" || hook === "request";
    for (let i = 0; i < list.length; i++) {
      if (stopOnAnswer && flow.response) return;
      const r = list[i]![hook]!(flow);
      if (isPromise(r)) return this.continueAsync(r, list, i + 1, hook, flow, stopOnAnswer);
    }
  }

  private async continueAsync(first: Promise<void>, list: Addon[], from: number, hook: FlowHook, flow: Flow, stopOnAnswer: boolean): Promise<void> {
    await first;
    for (let i = from; i < list.length; i++) {
      if (stopOnAnswer && flow.response) return;
      // a hook that answered synchronously is not awaited (each await is one more turn of the microtask queue)
      const r = list[i]![hook]!(flow);
      if (isPromise(r)) await r;
    }
  }
}
