import type { HeaderList } from "../../core/http1/types.ts";
import type { ProxyContext } from "../../core/proxy/context.ts";
import { sendVirtual } from "../../core/proxy/virtual-client.ts";
import type { ClientInfo } from "../../pipeline/flow.ts";
import { decodeBodyBytes } from "../../store/body-decode.ts";
import type { RawRun, RunEnd, ScriptEngine } from "./engine/engine.ts";
import type { RunOptions, ScriptInput, ScriptOutput, ScriptRequest, ScriptResponse } from "./engine/types.ts";

/** The client label of requests a script sends with pm.sendRequest (they go through the proxy and are captured). */
export const SCRIPT_CLIENT_LABEL = "tapwire-script";

/** Time limit of one pm.sendRequest (the execution's own deadline still applies). */
const SEND_TIMEOUT_MS = 30_000;
/** Rules whose runRaw() options are kept (all forgotten when full). */
const MAX_KEPT_OPTIONS = 256;

/** Decoded body text (Content-Encoding undone) when it is text; null for binary bodies. */
export function bodyText(body: Uint8Array | null, headers: HeaderList): string | null {
  const d = decodeBodyBytes(body, headers, false);
  return d.encoding === "utf8" ? d.text : null;
}

/**
 * Runs scripts on the engine with the service's limits and gives them pm.sendRequest: a request a script sends goes
 * through tapwire's own pipeline from an in-process client labelled "tapwire-script", so it is captured like any
 * other, and it remembers which rule sent it so that rule never runs on it again.
 */
export class ScriptRunner {
  private readonly origin = new WeakMap<ClientInfo, string | null>();
  /** runRaw()'s options by rule id. */
  private readonly rawOpts = new Map<string, RunOptions>();

  constructor(
    readonly engine: ScriptEngine,
    private readonly proxy: () => ProxyContext,
    readonly limits: { timeoutMs: number; memoryBytes: number },
  ) {}

  /** The id of the rule whose script sent this client's request (null: test mode); undefined if no script did. */
  originRule(client: ClientInfo): string | null | undefined {
    return this.origin.get(client);
  }

  run(input: ScriptInput, ruleId: string | null): Promise<ScriptOutput> {
    const opts: RunOptions = {
      timeoutMs: this.limits.timeoutMs,
      memoryBytes: this.limits.memoryBytes,
      sendRequest: (req) => this.send(req, ruleId),
    };
    return this.engine.run(input, opts);
  }

  /**
   * engine.runRaw() with the service's limits and pm.sendRequest for this rule (the proxy's script addon). The
   * options are made once per rule and kept.
   */
  runRaw(run: RawRun, ruleId: string, end: RunEnd): void {
    let opts = this.rawOpts.get(ruleId);
    if (!opts) {
      if (this.rawOpts.size >= MAX_KEPT_OPTIONS) this.rawOpts.clear();
      opts = { timeoutMs: this.limits.timeoutMs, memoryBytes: this.limits.memoryBytes, sendRequest: (req) => this.send(req, ruleId) };
      this.rawOpts.set(ruleId, opts);
    }
    this.engine.runRaw(run, opts, end);
  }

  /** The memory limit runs get (what the sandbox's input head says: engine.memoryLimitFor). */
  memoryBytes(): number {
    return this.engine.memoryLimitFor(this.limits.memoryBytes);
  }

  private async send(req: ScriptRequest, ruleId: string | null): Promise<ScriptResponse> {
    let url: URL;
    try {
      url = new URL(req.url);
    } catch {
      throw new Error(`pm.sendRequest: '${req.url}' is not an absolute URL`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error(`pm.sendRequest: only http and https URLs can be sent, not ${url.protocol}`);
    const scheme = url.protocol === "https:" ? "https" : "http";
    const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
    const port = url.port ? Number(url.port) : scheme === "https" ? 443 : 80;
    const body = req.body ? new TextEncoder().encode(req.body) : null;
    const client: ClientInfo = { addr: "127.0.0.1", port: 0, label: Promise.resolve(SCRIPT_CLIENT_LABEL), resolvedLabel: SCRIPT_CLIENT_LABEL };
    this.origin.set(client, ruleId);
    const t0 = performance.now();
    const res = await sendVirtual(
      this.proxy(),
      { method: (req.method || "GET").toUpperCase(), scheme, host, port, path: url.pathname + url.search, headers: req.headers.map(([n, v]) => [n, v] as [string, string]), body },
      client,
      SEND_TIMEOUT_MS,
    );
    const text = bodyText(res.body, res.headers);
    return {
      status: res.status,
      statusText: res.reason,
      headers: res.headers,
      body: text ?? Buffer.from(res.body).toString("base64"),
      responseTime: Math.round(performance.now() - t0),
    };
  }
}
