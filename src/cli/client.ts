import { resolveDataDir } from "../service/datadir.ts";
import { type Handshake, pidAlive, readHandshake } from "../service/handshake.ts";

/** The running service could not be found or reached (the message says which, and how to fix it). */
export class NotRunningError extends Error {}

export interface ApiAnswer {
  status: number;
  headers: Headers;
  text: string;
  /** The body parsed as JSON, or undefined when it is not JSON (or empty). */
  json: unknown;
}

/**
 * Bun's fetch reads HTTP_PROXY / NO_PROXY from process.env at each call. In a shell set up by `tapwire env` (whose
 * NO_PROXY is empty, so that loopback traffic is captured too) the API calls would otherwise go through the proxy
 * itself: be recorded, and fail once the proxy has stopped. This adds 127.0.0.1 to this process's NO_PROXY (both
 * spellings) when a proxy variable is set; processes started afterwards get their environment explicitly.
 */
export function bypassProxyForLoopback(env: Record<string, string | undefined> = process.env): void {
  if (!["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"].some((k) => env[k])) return;
  for (const k of ["NO_PROXY", "no_proxy"]) {
    const list = (env[k] ?? "").split(",").map((x) => x.trim()).filter(Boolean);
    if (!list.includes("127.0.0.1")) env[k] = [...list, "127.0.0.1"].join(",");
  }
}

/**
 * A client of the running service's management API, found through api-handshake.json in its data directory. The
 * CLI commands and the MCP server use it; the token never leaves this object (it is not printed or logged).
 */
export class ApiClient {
  private constructor(readonly dataDir: string, readonly handshake: Handshake) {}

  /** Reads the handshake of the service on this data directory (--data-dir, else $TAPWIRE_DATA_DIR, else the default). */
  static fromDataDir(dataDirFlag?: string, env: Record<string, string | undefined> = process.env): ApiClient {
    const dataDir = resolveDataDir(dataDirFlag, env);
    const hs = readHandshake(dataDir);
    if (!hs || typeof hs.port !== "number" || typeof hs.token !== "string") {
      throw new NotRunningError(`tapwire is not running on data directory ${dataDir} (no readable api-handshake.json); start it with 'tapwire start'`);
    }
    if (!pidAlive(hs.pid)) throw new NotRunningError(`tapwire is not running on data directory ${dataDir} (the handshake names pid ${hs.pid}, which has exited)`);
    return new ApiClient(dataDir, hs);
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${this.handshake.port}`;
  }

  get proxyPort(): number | null {
    return this.handshake.proxy_port;
  }

  /** Like request, but answers the Response unread, for bodies to stream (a HAR export). */
  async stream(method: string, path: string): Promise<Response> {
    const p = path.startsWith("/api/") ? path : `/api/v1${path.startsWith("/") ? "" : "/"}${path}`;
    bypassProxyForLoopback();
    try {
      return await fetch(this.baseUrl + p, { method: method.toUpperCase(), headers: { authorization: `Bearer ${this.handshake.token}` } });
    } catch (e) {
      throw new NotRunningError(`cannot reach tapwire (pid ${this.handshake.pid}) on 127.0.0.1:${this.handshake.port}: ${(e as Error).message}`);
    }
  }

  /** Calls `/api/v1/...` (a path without the prefix gets it). Never throws for an HTTP status; throws NotRunningError when unreachable. */
  async request(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<ApiAnswer> {
    const p = path.startsWith("/api/") ? path : `/api/v1${path.startsWith("/") ? "" : "/"}${path}`;
    const init: RequestInit = { method: method.toUpperCase(), headers: { authorization: `Bearer ${this.handshake.token}`, ...headers } };
    if (body !== undefined) {
      init.body = typeof body === "string" ? body : JSON.stringify(body);
      (init.headers as Record<string, string>)["content-type"] ??= "application/json";
    }
    bypassProxyForLoopback();
    let res: Response;
    try {
      res = await fetch(this.baseUrl + p, init);
    } catch (e) {
      throw new NotRunningError(`cannot reach tapwire (pid ${this.handshake.pid}) on 127.0.0.1:${this.handshake.port}: ${(e as Error).message}`);
    }
    const text = await res.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, text, json };
  }
}
