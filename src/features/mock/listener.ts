import type { Socket, TCPSocketListener } from "bun";
import { hasToken, wantsKeepAlive } from "../../core/http1/headers.ts";
import { type BodyChunk, ChunkedDecoder, LengthDecoder, parseRequestHead, parseTarget, requestFraming } from "../../core/http1/parse.ts";
import { HttpParseError, type RequestHead } from "../../core/http1/types.ts";
import { ClientLabeler, normalizeIp } from "../../core/proxy/client-label.ts";
import { concatAll, concatBytes, Endpoint, HIGH_WATER } from "../../core/proxy/endpoint.ts";
import type { NewEntry } from "../../store/types.ts";
import type { CompiledRule, MockMatcher } from "./matcher.ts";
import { type CannedResponse, errorResponse, fallbackResponse, Persist } from "./response.ts";

/** Seconds a connection may sit idle (nothing pending) before it is closed. */
const IDLE_SEC = 120;
/** Requests queued on one connection (pipelined, or waiting for their latency) before reading pauses. */
const MAX_QUEUED = 128;
const CONTINUE_100 = new TextEncoder().encode("HTTP/1.1 100 Continue\r\n\r\n");

/** What the listener needs from the service. */
export interface MockListenerDeps {
  matcher: MockMatcher;
  /** The master flag (for the fallback's message). */
  masterEnabled: () => boolean;
  /** Whether capture is on right now. */
  capturing: () => boolean;
  /** Records a traffic entry. */
  record: (e: NewEntry) => void;
  /** Cap of the captured copy of each body. */
  bodyLimit: number;
  log: (line: string) => void;
}

/** One request on a connection, from its head to its response. */
class Exchange {
  /** The body was read completely. */
  complete = false;
  /** The latency has passed; the response may go out once every earlier one has. */
  ready = false;
  timer: ReturnType<typeof setTimeout> | null = null;
  continueSent = false;
  /** Captured request body pieces (copies), capped. */
  reqParts: Uint8Array[] | null = null;
  reqKept = 0;
  reqSize = 0;

  constructor(
    readonly method: string,
    /** path and query, origin-form */
    readonly target: string,
    readonly head: RequestHead | null,
    readonly persist: Persist,
    readonly rule: CompiledRule | null,
    /** The canned answer; null for a prebuilt protocol error (see `raw`). */
    readonly response: CannedResponse | null,
    readonly raw: Uint8Array | null,
    readonly capture: boolean,
    readonly expectContinue: boolean,
    readonly t0: number,
    readonly startedAt: number,
  ) {}
}

/**
 * One client connection: parses requests with the proxy's sans-io HTTP/1.1 codec, reads (and discards, keeping a
 * capped copy for capture) Content-Length and chunked bodies, answers each request with its rule's canned bytes
 * in request order (pipelining-safe; a request's latency delays it and the ones behind it on this connection, not
 * other connections), and closes after a protocol error, `Connection: close` or an HTTP/1.0 request without
 * keep-alive.
 */
export class MockConnection {
  readonly ep: Endpoint;
  private buf: Uint8Array | null = null;
  private decoder: ChunkedDecoder | LengthDecoder | null = null;
  private current: Exchange | null = null;
  private readonly queue: Exchange[] = [];
  /** No further request is read (one asked to close, a protocol error, or the client half-closed). */
  private noMore = false;
  private closed = false;
  private label: string | undefined;
  private labelWait: Promise<void> | null = null;
  private readonly addr: string;
  private readonly remotePort: number;

  constructor(private readonly owner: MockListener, socket: Socket<MockConnection>) {
    this.ep = new Endpoint(socket);
    this.ep.onDrain = () => this.updateFlow();
    this.addr = normalizeIp(socket.remoteAddress);
    this.remotePort = (socket as unknown as { remotePort: number }).remotePort;
    if (owner.deps.capturing()) this.resolveLabel();
  }

  private resolveLabel(): Promise<void> {
    this.labelWait ??= this.owner.labeler.resolve(this.addr, this.remotePort, this.owner.port, () => !this.closed).then(
      (l) => void (this.label = l),
      () => void (this.label = this.addr),
    );
    return this.labelWait;
  }

  onData(chunk: Uint8Array): void {
    if (this.noMore || this.closed) return;
    try {
      this.consume(chunk);
    } catch (e) {
      this.fail(e);
    }
    this.flush();
  }

  private consume(chunk: Uint8Array): void {
    let data: Uint8Array | null = chunk;
    while (data !== null && !this.noMore) {
      if (this.decoder !== null) {
        const r: BodyChunk = this.decoder.push(data);
        const ex = this.current!;
        for (const d of r.data) this.keepBody(ex, d);
        if (!r.done) return;
        this.decoder = null;
        this.current = null;
        this.finish(ex);
        data = r.rest;
        continue;
      }
      const input: Uint8Array = this.buf === null ? data : concatBytes(this.buf, data);
      const parsed = parseRequestHead(input);
      if (parsed === null) {
        this.buf = input;
        return;
      }
      this.buf = null;
      data = parsed.end < input.length ? input.subarray(parsed.end) : null;
      this.begin(parsed.head);
    }
  }

  private begin(head: RequestHead): void {
    const framing = requestFraming(head);
    let target = head.target;
    if (target.charCodeAt(0) !== 47 /* / */) {
      if (head.method === "CONNECT") throw new HttpParseError("CONNECT is not supported: this is the mock server, not the proxy", 405);
      target = parseTarget(head.method, target).path; // absolute-form: its path and query; asterisk-form: "*"
    }
    const keep = wantsKeepAlive(head.version, head.headers);
    const rule = this.owner.deps.matcher.match(head.method, target);
    let response: CannedResponse;
    if (rule === null) {
      response = fallbackResponse(head.method, target, this.owner.deps.masterEnabled());
    } else if (rule.response instanceof Error) {
      throw new MockRuleError(rule.rule.id, rule.response.message);
    } else {
      response = rule.response;
    }
    const close = !keep || response.forcesClose;
    const persist = close ? Persist.Close : head.version === "HTTP/1.0" ? Persist.Keep10 : Persist.Keep;
    const hasBody = framing.kind === "chunked" || (framing.kind === "length" && framing.length > 0);
    const expectContinue = hasBody && head.version === "HTTP/1.1" && hasToken(head.headers, "expect", "100-continue");
    const ex = new Exchange(
      head.method,
      target,
      head,
      persist,
      rule,
      response,
      null,
      this.owner.deps.capturing(),
      expectContinue,
      performance.now(),
      Date.now(),
    );
    if (ex.capture && this.label === undefined) this.resolveLabel();
    this.queue.push(ex);
    if (!hasBody) {
      this.finish(ex);
      return;
    }
    this.current = ex;
    this.decoder = framing.kind === "chunked" ? new ChunkedDecoder() : new LengthDecoder((framing as { length: number }).length);
    if (expectContinue && this.queue[0] === ex) this.sendContinue(ex);
  }

  private keepBody(ex: Exchange, d: Uint8Array): void {
    ex.reqSize += d.length;
    if (!ex.capture) return;
    const room = this.owner.deps.bodyLimit - ex.reqKept;
    if (room <= 0) return;
    const piece = d.length <= room ? d.slice() : d.slice(0, room);
    (ex.reqParts ??= []).push(piece);
    ex.reqKept += piece.length;
  }

  private sendContinue(ex: Exchange): void {
    if (ex.continueSent || ex.complete) return;
    ex.continueSent = true;
    this.ep.write(CONTINUE_100);
  }

  /** The request is complete: answer after its latency. */
  private finish(ex: Exchange): void {
    ex.complete = true;
    // nothing after a request that closes the connection is read
    if (ex.persist === Persist.Close) this.noMore = true;
    const latency = ex.rule?.rule.latency_ms ?? 0;
    if (latency > 0) {
      ex.timer = setTimeout(() => {
        ex.timer = null;
        ex.ready = true;
        this.flush();
      }, latency);
    } else {
      ex.ready = true;
    }
  }

  /** A protocol error: answered (after every earlier response) with its status, then the connection closes. */
  private fail(e: unknown): void {
    let status = 400;
    let message: string;
    if (e instanceof HttpParseError) {
      status = e.status;
      message = e.message;
    } else if (e instanceof MockRuleError) {
      status = 500;
      message = e.message;
    } else {
      status = 500;
      message = `internal error: ${(e as Error)?.message ?? String(e)}`;
      this.owner.deps.log(`tapwire: mock listener: ${(e as Error)?.stack ?? message}`);
    }
    // a request whose body was being read can never complete now
    if (this.current !== null) {
      const cur = this.current;
      const i = this.queue.indexOf(cur);
      if (i >= 0) this.queue.splice(i, 1);
      this.current = null;
      this.recordAborted(cur, `invalid request body: ${message}`);
    }
    this.decoder = null;
    this.buf = null;
    this.noMore = true;
    const ex = new Exchange("", "", null, Persist.Close, null, null, errorResponse(status, message), false, false, performance.now(), Date.now());
    ex.complete = true;
    ex.ready = true;
    this.queue.push(ex);
  }

  /** Writes every response that is due, in request order. */
  private flush(): void {
    if (this.closed) return;
    const q = this.queue;
    while (q.length > 0 && q[0].ready) {
      const ex = q[0];
      if (ex.capture && this.label === undefined && this.owner.deps.capturing()) {
        // the first captured request of a connection waits for the client's label (resolved since the
        // connection opened), so its entry is in the store by the time the client has the response
        void this.resolveLabel().then(() => this.flush());
        return;
      }
      q.shift();
      let bytes: Uint8Array;
      if (ex.raw !== null) {
        bytes = ex.raw;
      } else {
        bytes = ex.response!.bytes(ex.persist, ex.method === "HEAD");
      }
      this.ep.write(bytes);
      if (ex.capture) this.record(ex);
      if (ex.persist === Persist.Close) {
        this.shutdown();
        return;
      }
      if (q.length > 0 && q[0].expectContinue) this.sendContinue(q[0]);
    }
    if (q.length === 0 && this.noMore && this.decoder === null) {
      // half-closed by the client, nothing left to answer
      this.shutdown();
      return;
    }
    this.updateFlow();
  }

  /** Pause reading while the client does not read its responses or too many requests are queued. */
  private updateFlow(): void {
    if (this.closed) return;
    const full = this.ep.queued >= HIGH_WATER || this.queue.length >= MAX_QUEUED;
    if (full) this.ep.pause();
    else if (this.ep.isPaused) this.ep.resume();
  }

  private record(ex: Exchange): void {
    const d = this.owner.deps;
    if (!d.capturing()) return;
    const res = ex.response!;
    const headOnly = ex.method === "HEAD";
    const head = ex.head!;
    d.record({
      method: ex.method,
      url: `http://127.0.0.1:${this.owner.port}${ex.target}`,
      host: "127.0.0.1",
      status_code: res.status,
      content_type: res.contentType,
      duration_ms: Math.round(performance.now() - ex.t0),
      timestamp: ex.startedAt,
      client_addr: this.label ?? this.addr,
      has_response: true,
      req_headers: head.headers,
      res_headers: res.wireHeaders(ex.persist),
      req_body: ex.reqParts === null ? null : concatAll(ex.reqParts),
      req_body_size: ex.reqSize,
      res_body: headOnly || res.body.length === 0 ? null : res.body.length <= d.bodyLimit ? res.body : res.body.subarray(0, d.bodyLimit),
      res_body_size: headOnly ? 0 : res.body.length,
      extra: { mock_rule: ex.rule?.rule.id ?? null, ...(res.reason !== "" ? { reason: res.reason } : {}) },
    });
  }

  /** Requests that got no response because the client went away are recorded as failed entries. */
  private recordAborted(ex: Exchange, reason?: string): void {
    const d = this.owner.deps;
    if (!ex.capture || ex.head === null || !d.capturing()) return;
    const write = () =>
      d.record({
        method: ex.method,
        url: `http://127.0.0.1:${this.owner.port}${ex.target}`,
        host: "127.0.0.1",
        status_code: 0,
        content_type: "",
        duration_ms: Math.round(performance.now() - ex.t0),
        timestamp: ex.startedAt,
        client_addr: this.label ?? this.addr,
        has_response: false,
        req_headers: ex.head!.headers,
        res_headers: [],
        req_body: ex.reqParts === null ? null : concatAll(ex.reqParts),
        req_body_size: ex.reqSize,
        res_body: null,
        res_body_size: 0,
        error: reason ?? (ex.complete ? "client closed the connection before the mock response was sent" : "client closed the connection during the request body"),
        extra: { mock_rule: ex.rule?.rule.id ?? null },
      });
    if (this.label !== undefined) write();
    else void this.resolveLabel().then(write);
  }

  private shutdown(): void {
    this.noMore = true;
    this.ep.end();
  }

  onEnd(): void {
    // a half-close after complete requests still gets their responses; a partial request can never complete
    if (this.current !== null) {
      const ex = this.current;
      const i = this.queue.indexOf(ex);
      if (i >= 0) this.queue.splice(i, 1);
      this.current = null;
      this.decoder = null;
      this.recordAborted(ex);
    }
    this.buf = null;
    this.noMore = true;
    this.flush();
  }

  onTimeout(): void {
    if (this.queue.length === 0 && this.current === null) {
      this.destroy();
      return;
    }
    this.ep.socket.timeout(IDLE_SEC);
  }

  onClose(): void {
    if (this.closed) return;
    this.closed = true;
    this.ep.closed = true;
    for (const ex of this.queue) {
      if (ex.timer !== null) clearTimeout(ex.timer);
      ex.timer = null;
      this.recordAborted(ex);
    }
    this.queue.length = 0;
    this.owner.connections.delete(this);
  }

  destroy(): void {
    this.onClose();
    this.ep.destroy();
  }

  /** Requests received and not yet answered (waiting for their body, their latency or an earlier response). */
  get pending(): number {
    return this.queue.length;
  }

}

class MockRuleError extends Error {
  constructor(id: string, why: string) {
    super(`mock rule '${id}' cannot be served: ${why}`);
  }
}

export class PortInUseError extends Error {
  constructor(readonly port: number) {
    super(`port ${port} is in use`);
  }
}

/** The Mock Server's own TCP listener on 127.0.0.1 (Bun.listen + the proxy's HTTP/1.1 codec). */
export class MockListener {
  private listener: TCPSocketListener<MockConnection> | null = null;
  readonly connections = new Set<MockConnection>();
  readonly labeler = new ClientLabeler();
  private boundPort = 0;

  constructor(readonly deps: MockListenerDeps) {}

  get running(): boolean {
    return this.listener !== null;
  }

  /** The bound port while running, else the last one bound (0 if never). */
  get port(): number {
    return this.boundPort;
  }

  /** Requests received on every open connection and not answered yet. */
  pendingRequests(): number {
    let n = 0;
    for (const c of this.connections) n += c.pending;
    return n;
  }

  /** Listens on 127.0.0.1:port (0 = a free port); returns the bound port. Throws PortInUseError. */
  start(port: number): number {
    if (this.listener !== null) throw new Error("the mock listener is already running");
    const owner = this;
    try {
      this.listener = Bun.listen<MockConnection>({
        hostname: "127.0.0.1",
        port,
        // a client's FIN right after its request must not cost it the response
        allowHalfOpen: true,
        socket: {
          open(s) {
            s.setNoDelay(true);
            s.timeout(IDLE_SEC);
            const c = new MockConnection(owner, s);
            s.data = c;
            owner.connections.add(c);
          },
          data(s, d) {
            s.data.onData(d);
          },
          drain(s) {
            s.data.ep.handleDrain();
          },
          end(s) {
            s.data?.onEnd();
          },
          close(s) {
            s.data?.onClose();
          },
          error(s) {
            s.data?.destroy();
          },
          timeout(s) {
            s.data?.onTimeout();
          },
        },
      });
    } catch (e) {
      this.listener = null;
      if ((e as { code?: string }).code === "EADDRINUSE") throw new PortInUseError(port);
      throw e;
    }
    this.boundPort = this.listener.port;
    return this.boundPort;
  }

  /** Closes the listener and every connection (pending latency timers included). Idempotent. */
  stop(): void {
    const l = this.listener;
    this.listener = null;
    l?.stop(true);
    for (const c of [...this.connections]) c.destroy();
    this.connections.clear();
  }
}
