import { getHeader, setHeader } from "../../core/http1/headers.ts";
import type { HeaderList } from "../../core/http1/types.ts";
import { statusReason } from "../../core/http1/serialize.ts";
import { hostPort, type Flow, type Scheme } from "../../pipeline/flow.ts";
import { normalizeUrl } from "../rules/matcher.ts";
import { checkInput, InvalidInput, Rewrite, type PausedFlow } from "./models.ts";
import { previewBody } from "./preview.ts";
import type { Phase } from "./store.ts";

/** What paused a flow. */
export type PausedBy = { breakpoint: string } | { intercept_host: string };

/** How a pause ended (recorded in the entry's `intercepted`). */
export type Outcome = "resumed" | "aborted" | "timeout" | "client_gone" | "failed";

export const ABORT_ERROR = "aborted at breakpoint";

export class InterceptError extends Error {
  constructor(readonly kind: "not_found" | "invalid", message: string) {
    super(message);
  }
}

interface Held {
  id: string;
  flow: Flow;
  phase: Phase;
  by: PausedBy;
  pausedAt: number;
  resumesAt: number;
  timer: ReturnType<typeof setTimeout>;
  previousGone: (() => void) | null;
  release: () => void;
}

/** A validated rewrite with its body already as bytes and its URL already parsed. */
interface Change {
  abort: boolean;
  method?: string;
  url?: { scheme: Scheme; host: string; port: number; path: string };
  status?: number;
  headers?: HeaderList;
  body?: Uint8Array;
}

/**
 * Paused flows (spec 2.7, 4.5): holds a flow's hook until it is resumed (optionally rewritten or aborted) through
 * the API, the intercept timeout passes (resumed unchanged), or the client goes away (dropped). Knows nothing of
 * HTTP routes; the addon calls `hold`, the routes call `list` and `resume`.
 */
export class InterceptService {
  private readonly held = new Map<string, Held>();
  private readonly byFlow = new WeakMap<Flow, Held>();
  private nextId = 1;
  private readonly changeListeners = new Set<(count: number) => void>();
  /** Flows this service answered with an abort (their later hooks must not pause them again). */
  readonly aborted = new WeakSet<Flow>();

  private readonly timeoutMs: number;

  constructor(timeoutMs: number) {
    // setTimeout cannot wait longer than 2^31-1 ms (~24.8 days)
    this.timeoutMs = Math.max(0, Math.min(timeoutMs, 2_147_483_647));
  }

  get size(): number {
    return this.held.size;
  }

  /** Be told the number of paused flows whenever a flow is paused or leaves the list; returns an unsubscribe. */
  onChange(listener: (count: number) => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  private changed(): void {
    for (const l of this.changeListeners) l(this.held.size);
  }

  /** Pause `flow` at `phase`; the promise settles when the flow may go on (rewritten in place if asked). */
  hold(flow: Flow, phase: Phase, by: PausedBy): Promise<void> {
    return new Promise<void>((resolve) => {
      const id = String(this.nextId++);
      const now = Date.now();
      const h: Held = {
        id,
        flow,
        phase,
        by,
        pausedAt: now,
        resumesAt: now + this.timeoutMs,
        timer: setTimeout(() => this.finish(h, "timeout", false, true), this.timeoutMs),
        previousGone: flow.onClientGone,
        release: resolve,
      };
      flow.onClientGone = () => {
        this.finish(h, "client_gone", false, false);
        h.previousGone?.();
      };
      this.held.set(id, h);
      this.byFlow.set(flow, h);
      this.changed();
    });
  }

  list(): PausedFlow[] {
    return [...this.held.values()].map((h) => view(h));
  }

  /**
   * Resume a paused flow, optionally rewritten (see Rewrite). An invalid rewrite throws InterceptError("invalid")
   * and leaves the flow paused; an unknown id throws InterceptError("not_found").
   */
  resume(id: string, input: unknown): void {
    const h = this.held.get(id);
    if (!h) throw new InterceptError("not_found", `no paused flow with id '${id}' (already resumed, timed out or gone)`);
    const change = parseRewrite(h.phase, input);
    if (change.abort) {
      abortFlow(h.flow, h.phase);
      this.aborted.add(h.flow);
      return this.finish(h, "aborted", false, true);
    }
    const rewritten = applyChange(h.flow, h.phase, change);
    this.finish(h, "resumed", rewritten, true);
  }

  /** The core failed a flow while it was held (its client left, its upstream went away): it leaves the list. */
  failed(flow: Flow): void {
    const h = this.byFlow.get(flow);
    if (h) this.finish(h, flow.error === "client disconnected" ? "client_gone" : "failed", false, false);
  }

  /** Drop every paused flow without releasing it (the proxy closes their connections). */
  stop(): void {
    for (const h of [...this.held.values()]) {
      clearTimeout(h.timer);
      this.held.delete(h.id);
      this.byFlow.delete(h.flow);
      h.flow.onClientGone = h.previousGone;
    }
  }

  /**
   * Takes a flow off the list and records how. `release` lets its hook go on; a flow the core already failed is
   * not released (its hook promise is left to be collected: going on would record it a second time).
   */
  private finish(h: Held, outcome: Outcome, rewritten: boolean, release: boolean): void {
    if (this.held.get(h.id) !== h) return;
    this.held.delete(h.id);
    this.byFlow.delete(h.flow);
    clearTimeout(h.timer);
    h.flow.onClientGone = h.previousGone;
    const rec = (h.flow.extra.intercepted ??= {}) as Record<string, unknown>;
    rec[h.phase] = { ...h.by, rewritten, outcome };
    if (outcome === "timeout") h.flow.extra.intercept_timeout = true;
    if (outcome === "aborted") h.flow.extra.aborted = true;
    if (release) h.release();
    this.changed();
  }
}

function view(h: Held): PausedFlow {
  const f = h.flow;
  const isResponse = h.phase === "response" && f.response !== null;
  const headers = isResponse ? f.response!.headers : f.request.headers;
  const body = isResponse ? f.response!.body : f.request.body;
  return {
    id: h.id,
    phase: h.phase,
    method: f.request.method,
    url: f.url,
    host: f.request.host,
    paused_at: h.pausedAt,
    resumes_at: h.resumesAt,
    ...h.by,
    ...(isResponse ? { status_code: f.response!.status } : {}),
    headers: headers.map(([n, v]) => [n, v] as [string, string]),
    ...previewBody(body, headers),
  };
}

function invalid(message: string): never {
  throw new InterceptError("invalid", message);
}

function parseRewrite(phase: Phase, input: unknown): Change {
  if (input === undefined || input === null || input === "") return { abort: false };
  let rw: Rewrite;
  try {
    rw = checkInput(Rewrite, input);
  } catch (e) {
    if (e instanceof InvalidInput) invalid(e.message);
    throw e;
  }
  const change: Change = { abort: rw.abort === true };
  if (phase === "request" && rw.status_code !== undefined) invalid("invalid body field 'status_code': applies only at the response phase");
  if (phase === "response" && rw.url !== undefined) invalid("invalid body field 'url': applies only at the request phase");
  if (phase === "response" && rw.method !== undefined) invalid("invalid body field 'method': applies only at the request phase");
  if (rw.method !== undefined) change.method = rw.method.toUpperCase();
  if (rw.body_encoding !== undefined && rw.body === undefined) invalid("invalid body field 'body_encoding': given without 'body'");
  if (rw.url !== undefined) change.url = parseTargetUrl(rw.url);
  if (rw.status_code !== undefined) change.status = rw.status_code;
  if (rw.headers !== undefined) change.headers = rw.headers.map(([n, v]) => [n, v] as [string, string]);
  if (rw.body !== undefined) {
    if (rw.body_encoding === "base64") {
      if (!/^[A-Za-z0-9+/]*={0,2}$/.test(rw.body) || rw.body.length % 4 !== 0) invalid("invalid body field 'body': not valid base64");
      change.body = new Uint8Array(Buffer.from(rw.body, "base64"));
    } else {
      change.body = new TextEncoder().encode(rw.body);
    }
  }
  return change;
}

function parseTargetUrl(raw: string): NonNullable<Change["url"]> {
  if (/[\s\u0000-\u001f\u007f]/.test(raw)) invalid("invalid body field 'url': must not contain spaces or control characters");
  let n;
  try {
    n = normalizeUrl(raw);
  } catch {
    invalid(`invalid body field 'url': not an absolute http(s) URL: ${JSON.stringify(raw)}`);
  }
  if (n.scheme !== "http" && n.scheme !== "https") invalid("invalid body field 'url': the scheme must be http or https");
  const host = n.host.startsWith("[") ? n.host.slice(1, -1) : n.host;
  const port = n.port ?? (n.scheme === "https" ? 443 : 80);
  return { scheme: n.scheme, host, port, path: n.query === null ? n.path : `${n.path}?${n.query}` };
}

/** Applies a rewrite in place; true when anything was given to change. */
function applyChange(flow: Flow, phase: Phase, c: Change): boolean {
  let rewritten = false;
  if (phase === "request") {
    const r = flow.request;
    if (c.method !== undefined && c.method !== r.method) {
      r.method = c.method;
      rewritten = true;
    }
    if (c.url) {
      const before = hostPort(r.scheme, r.host, r.port);
      r.scheme = c.url.scheme;
      r.host = c.url.host;
      r.port = c.url.port;
      r.path = c.url.path;
      const after = hostPort(r.scheme, r.host, r.port);
      // the Host header follows the new authority, unless the rewrite gives the whole header list
      if (!c.headers && after !== before && getHeader(r.headers, "host") !== undefined) setHeader(r.headers, "Host", after);
      rewritten = true;
    }
    if (c.headers) {
      r.headers = c.headers;
      rewritten = true;
    }
    if (c.body) {
      r.body = c.body;
      rewritten = true;
    }
    return rewritten;
  }
  const res = flow.response;
  if (!res) return false;
  if (c.status !== undefined) {
    if (c.status !== res.status) res.reason = statusReason(c.status);
    res.status = c.status;
    rewritten = true;
  }
  if (c.headers) {
    res.headers = c.headers;
    rewritten = true;
  }
  if (c.body) {
    res.body = c.body;
    rewritten = true;
  }
  return rewritten;
}

/** Answer the client 502 instead of going on (request phase: the upstream is never contacted). */
function abortFlow(flow: Flow, phase: Phase): void {
  const body = new TextEncoder().encode(`tapwire: ${ABORT_ERROR}\n`);
  if (phase === "request" && flow.capture && flow.request.body && flow.request.body.length) {
    // the core copies a buffered request body into the capture only when it sends it upstream
    flow.reqBody.add(flow.request.body);
  }
  flow.error = ABORT_ERROR;
  flow.response = { status: 502, reason: "Bad Gateway", version: "HTTP/1.1", headers: [["Content-Type", "text/plain; charset=utf-8"]], body };
}
