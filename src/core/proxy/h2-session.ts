/**
 * The HTTP/2 client connection module: a client that picked `h2` in ALPN inside an intercepted CONNECT. The
 * connection (framing, HPACK, flow control, the frame guard) is H2ServerConnection (core/http2); each stream it
 * yields becomes one H2StreamExchange, the same Exchange the HTTP/1 connection drives, so every addon sees its
 * requests exactly as it sees HTTP/1 ones (request.version "HTTP/2", the stream id in the `h2_stream_id` extra).
 *
 * Backpressure: a stream's request body is paused (no WINDOW_UPDATE, so the client stops) while hooks run or the
 * upstream is full; a response body the client does not take pauses the upstream (socket or HTTP/2 stream).
 */
import type { Socket } from "bun";
import { getHeader, removeHeader, stripHopByHop } from "../http1/headers.ts";
import type { Framing, HeaderList, ResponseHead } from "../http1/types.ts";
import { H2ServerConnection, type H2Request } from "../http2/server-connection.ts";
import { PREFACE, type H2Violation } from "../http2/guard.ts";
import { Flow, type ClientInfo, type Scheme } from "../../pipeline/flow.ts";
import type { ProxyContext } from "./context.ts";
import { Endpoint, type Throttle } from "./endpoint.ts";
import { Exchange } from "./exchange.ts";

export interface H2Target {
  scheme: Scheme;
  host: string;
  port: number;
  servername?: string;
}

/** One client connection speaking HTTP/2 (after CONNECT and TLS with ALPN h2). Lives in socket.data. */
export class H2Session {
  readonly ep: Endpoint;
  private readonly conn: H2ServerConnection;
  readonly streams = new Set<H2StreamExchange>();
  private closed = false;
  /** Set when the frame guard cut the connection (for tests and logs). */
  violation: H2Violation | null = null;

  constructor(
    readonly ctx: ProxyContext,
    socket: Socket<unknown>,
    readonly client: ClientInfo,
    readonly target: H2Target,
    initial?: Uint8Array,
  ) {
    this.ep = new Endpoint(socket);
    socket.data = this;
    ctx.sessions.add(this);
    this.ep.stallMs = ctx.clientIdleSec * 1000;
    this.ep.onStall = () => this.destroy();
    socket.timeout(ctx.clientIdleSec);
    this.conn = new H2ServerConnection(this.ep, {
      pauseReading: () => this.ep.pause(),
      resumeReading: () => this.ep.resume(),
      onRequest: (req) => this.onRequest(req),
      onViolation: (v) => {
        this.violation = v;
        for (const s of [...this.streams]) s.clientGone(`HTTP/2 connection closed: ${v.reason}`);
      },
      limits: ctx.h2Limits,
    });
    if (initial && initial.length) this.conn.feed(initial);
  }

  private onRequest(req: H2Request): void {
    if (this.closed) return req.reset();
    const s = new H2StreamExchange(this, req);
    this.streams.add(s);
    s.start();
  }

  onClientData(d: Uint8Array): void {
    if (!this.closed) this.conn.feed(d);
  }

  onClientDrain(): void {
    this.ep.handleDrain();
  }

  onClientEnd(): void {
    this.onClientClose();
  }

  onClientTimeout(): void {
    // idle: no stream open for --client-idle-timeout
    if (this.streams.size === 0) this.destroy();
  }

  onClientClose(): void {
    if (this.closed) return;
    this.closed = true;
    this.ep.markClosed();
    this.ctx.sessions.delete(this);
    this.conn.socketClosed();
    for (const s of [...this.streams]) s.clientGone("client disconnected");
  }

  destroy(): void {
    this.ep.destroy();
    this.onClientClose();
  }
}

/** One HTTP/2 stream from the client, as an exchange. */
export class H2StreamExchange extends Exchange {
  /** request body pieces that came while the exchange could not take them */
  private held: Uint8Array[] = [];
  private heldEnd = false;
  private responseEnded = false;
  private finished = false;
  private writer: ThrottledWriter | null = null;
  /** The request said `te: trailers`. */
  private acceptsTrailers = false;

  constructor(
    private readonly session: H2Session,
    private readonly req: H2Request,
  ) {
    super(session.ctx, session.client);
  }

  start(): void {
    const req = this.req;
    const t = this.session.target;
    const cl = getHeader(req.headers, "content-length");
    const len = cl !== undefined && /^\d{1,15}$/.test(cl.trim()) ? Number(cl.trim()) : -1;
    const hasBody = !req.bodyless && len !== 0;
    this.reqFraming = !hasBody ? { kind: "none" } : len > 0 ? ({ kind: "length", length: len } as Framing) : ({ kind: "chunked" } as Framing);
    this.reqDecoder = hasBody ? { done: false } : null;
    this.acceptsTrailers = getHeader(req.headers, "te")?.toLowerCase().includes("trailers") ?? false;
    const flow = new Flow(this.client, { method: req.method, scheme: t.scheme, host: t.host, port: t.port, path: req.path, version: "HTTP/2", headers: req.headers, body: null }, this.ctx.bodyLimit);
    flow.extra.h2_stream_id = req.streamId;
    if (hasBody) {
      req.onData = (c) => this.onBodyData(c);
      req.onEnd = (t) => this.onBodyEnd(t);
    } else req.resume(); // a body sent anyway (`content-length: 0` with DATA) is read and dropped
    req.onWritable = () => this.onClientWritable();
    req.onClose = (code) => {
      this.writer?.stop();
      if (!this.finished) this.clientGone(code ? `client reset the stream (code ${code})` : "client closed the stream");
    };
    this.startExchange(flow);
  }

  private onBodyData(c: Uint8Array): void {
    const flow = this.flow;
    if (!flow || this.mode === "closed" || !this.reqDecoder) return;
    if (this.reqState === "stream" || this.reqState === "collect") return this.requestBodyData(flow, [c], false);
    this.held.push(c);
    this.req.pause();
  }

  private onBodyEnd(trailers: HeaderList | null): void {
    if (trailers !== null) this.reqTrailers = trailers;
    const flow = this.flow;
    if (!flow || this.mode === "closed" || !this.reqDecoder) return;
    if (this.reqState === "stream" || this.reqState === "collect") return this.requestBodyData(flow, [], true);
    this.heldEnd = true;
  }

  /** The client went away (connection closed, stream reset) before the exchange ended. */
  clientGone(why: string): void {
    if (this.finished) return;
    this.finished = true;
    this.session.streams.delete(this);
    const flow = this.flow;
    const wasOpen = this.mode !== "closed";
    this.mode = "closed";
    this.dropUpstream();
    if (flow && wasOpen && this.resState !== "done") {
      flow.error ??= why;
      flow.onClientGone?.();
      this.finishFailed(flow);
    }
    this.flow = null;
  }

  // ------------------------------------------------------------------ the exchange's client side (HTTP/2)

  protected upstreamServername(host: string, port: number): string | undefined {
    const t = this.session.target;
    return t.host === host && t.port === port ? t.servername : undefined;
  }

  protected feedHeldRequestBody(_resume: boolean): void {
    const flow = this.flow!;
    const held = this.held;
    this.held = [];
    const end = this.heldEnd;
    this.heldEnd = false;
    if (held.length || end) this.requestBodyData(flow, held, end);
    if (this.mode !== "closed" && (this.reqState === "stream" || this.reqState === "collect")) this.req.resume();
  }

  protected requestBodyChunked(): boolean {
    return this.reqFraming.kind === "chunked";
  }

  protected sendContinue(): void {
    // HTTP/2 clients do not wait for 100 Continue
  }

  protected sendInterim(head: ResponseHead): void {
    if (head.status === 100) return;
    try {
      this.req.interim(head.status, stripHopByHop(head.headers));
    } catch {
      // an interim response node refuses to frame is not relayed
    }
  }

  protected sendResponseHead(flow: Flow, wholeBody: Uint8Array | null): void {
    const res = flow.response!;
    if (flow.throttleDown && !this.writer) this.writer = new ThrottledWriter(flow.throttleDown, this.req, () => this.resumeUpstream());
    const noBody = flow.request.method === "HEAD" || res.status === 204 || res.status === 304;
    const headers = stripHopByHop(res.headers);
    if (wholeBody !== null) {
      removeHeader(headers, "content-length");
      if (!noBody) headers.push(["content-length", String(wholeBody.length)]);
    } else if (this.resFraming.kind !== "length") removeHeader(headers, "content-length");
    this.resHeadSent = true;
    // nothing to stream: the head ends the stream (a trailers-only gRPC answer stays one)
    const f = this.resFraming;
    const endNow = noBody || (wholeBody !== null ? wholeBody.length === 0 : f.kind === "none" || (f.kind === "length" && f.length === 0));
    // Trailers come from an HTTP/2 origin or an HTTP/1 origin's chunked body. The stream waits for them when they
    // may come: the client said it takes them (`te: trailers`, as gRPC does), the response announces them
    // (`trailer`) or is gRPC; otherwise the last DATA frame ends the stream (no empty trailers block per response)
    // and late trailers are only recorded.
    const trailers = this.resTrailers !== null || ((this.h2up !== null || f.kind === "chunked") && (this.acceptsTrailers || getHeader(res.headers, "trailer") !== undefined || (getHeader(res.headers, "content-type") ?? "").startsWith("application/grpc")));
    try {
      this.req.respond(res.status < 200 ? 502 : res.status, headers, endNow, trailers);
    } catch (e) {
      flow.error = `invalid response head for HTTP/2: ${(e as Error).message}`;
      this.req.reset();
      this.responseEnded = true;
      return;
    }
    if (endNow) {
      this.responseEnded = true;
      return;
    }
    if (wholeBody !== null) this.finishResponseBody(wholeBody);
  }

  protected sendWholeResponseAsReceived(_flow: Flow): boolean {
    return false;
  }

  protected writeResponseBody(p: Uint8Array): boolean {
    if (this.responseEnded) return true;
    if (this.writer) return this.writer.write(p);
    // false: the client's window or the socket is full; the upstream resumes at onClientWritable
    return this.req.write(p);
  }

  /** The client's stream takes response bytes again. */
  private onClientWritable(): void {
    if (this.writer) this.writer.writable();
    else if (this.mode !== "closed") this.resumeUpstream();
  }

  protected lastResponsePiece(p: Uint8Array): Uint8Array {
    return p;
  }

  protected finishResponseBody(last: Uint8Array | null): void {
    if (this.responseEnded) return;
    if (last !== null && last.length > 0) {
      // the last piece goes with the end (one DATA frame with END_STREAM when no trailers follow)
      if (this.writer === null) return this.endResponse(last);
      this.writeResponseBody(last);
    }
    this.endResponse();
  }

  private endResponse(last?: Uint8Array): void {
    this.responseEnded = true;
    const trailers = this.resTrailers && this.resTrailers.length ? this.resTrailers : undefined;
    if (this.writer) this.writer.end(() => this.req.end(trailers));
    else this.req.end(trailers, last);
  }

  protected pauseClient(): void {
    this.req.pause();
  }

  protected resumeClient(): void {
    if (this.mode !== "closed") this.req.resume();
  }

  protected corkClient(): void {}
  protected uncorkClient(): void {}
  protected discardClientCork(): boolean {
    return false;
  }

  protected refuseRequest(status: number, text: string): void {
    const flow = this.flow;
    if (!this.resHeadSent) {
      this.resHeadSent = true;
      const body = new TextEncoder().encode(text);
      try {
        this.req.respond(status, [["content-type", "text/plain; charset=utf-8"], ["content-length", String(body.length)]]);
        this.req.write(body);
        this.endResponse();
      } catch {
        this.req.reset();
      }
    } else this.req.reset();
    this.responseEnded = true;
    if (flow) this.clientGoneQuietly();
  }

  /** The exchange is over on our side (refused): no "client gone" error on top. */
  private clientGoneQuietly(): void {
    this.finished = true;
    this.mode = "closed";
    this.session.streams.delete(this);
    this.dropUpstream();
    this.flow = null;
  }

  protected maybeFinish(): void {
    if (this.resState !== "done" || this.finished) return;
    this.finished = true;
    this.session.streams.delete(this);
    // a request body still coming after the response ended is read and dropped (the stream then closes)
    if (this.reqState !== "done") {
      this.reqDecoder = null;
      this.req.onData = null;
      this.req.resume();
    }
    this.flow = null;
    this.mode = "closed";
  }

  destroy(): void {
    this.req.reset();
    this.clientGone("the exchange was aborted");
  }

  protected switchToWebSocket(flow: Flow): void {
    // HTTP/2 requests never carry Upgrade (h2RequestToH1 refuses it), so flow.websocket stays false
    this.failWith502(flow, "WebSocket over HTTP/2 is not supported");
  }

  protected webSocketServerBytes(_d: Uint8Array): void {}
  protected webSocketUpstreamClosed(): void {}
}

/** A response body to an HTTP/2 stream behind a rate limit (throttle addon): bytes leave as the allowance permits. */
class ThrottledWriter {
  private q: Uint8Array[] = [];
  private qBytes = 0;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private full = false;
  private waitingDrain = false;
  private onEnd: (() => void) | null = null;
  private static readonly HIGH = 64 * 1024;
  private static readonly SLICE = 16 * 1024;

  constructor(
    private readonly throttle: Throttle,
    private readonly stream: H2Request,
    private readonly onDrain: () => void,
  ) {}

  /** The stream closed: nothing more goes out. */
  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.q = [];
  }

  /** The stream takes bytes again (after a write that answered false). */
  writable(): void {
    if (!this.waitingDrain) return;
    this.waitingDrain = false;
    this.pump();
  }

  write(p: Uint8Array): boolean {
    this.q.push(p);
    this.qBytes += p.length;
    this.pump();
    const ok = this.qBytes < ThrottledWriter.HIGH;
    if (!ok) this.full = true;
    return ok;
  }

  end(cb: () => void): void {
    this.onEnd = cb;
    this.pump();
  }

  private pump(): void {
    if (this.timer || this.waitingDrain || this.stream.closed) return;
    while (this.q.length) {
      const d = this.q[0]!;
      const want = Math.min(d.length, ThrottledWriter.SLICE);
      const n = this.throttle.take(want);
      if (n <= 0) {
        this.timer = setTimeout(() => {
          this.timer = null;
          this.pump();
        }, Math.max(1, Math.min(1000, this.throttle.waitMs(want))));
        return;
      }
      const accepted = this.stream.write(n === d.length ? d : d.subarray(0, n));
      if (n === d.length) this.q.shift();
      else this.q[0] = d.subarray(n);
      this.qBytes -= n;
      if (!accepted) {
        // the client is slower than the limit: wait for it (writable())
        this.waitingDrain = true;
        return;
      }
    }
    if (this.onEnd) {
      const cb = this.onEnd;
      this.onEnd = null;
      cb();
      return;
    }
    if (this.full) {
      this.full = false;
      this.onDrain();
    }
  }
}

/** Whether bytes begin with the HTTP/2 connection preface (or as much of it as arrived, at least its request line). */
export function startsWithH2Preface(b: Uint8Array): boolean {
  const n = Math.min(b.length, PREFACE.length);
  if (n < 14) return false; // "PRI * HTTP/2.0"
  for (let i = 0; i < n; i++) if (b[i] !== PREFACE[i]) return false;
  return true;
}

/** What a client using HTTP/2 with prior knowledge on the proxy port gets: SETTINGS, then GOAWAY HTTP_1_1_REQUIRED. */

const PRIOR_KNOWLEDGE_TEXT = "tapwire: HTTP/2 with prior knowledge is not accepted on the proxy port. Send HTTP/1.1 (absolute-form or CONNECT); inside a CONNECT to an https origin HTTP/2 is offered by ALPN.\n";

/**
 * A client that spoke HTTP/2 with prior knowledge to the proxy port: it would not read an HTTP/1 answer, so it gets
 * one in HTTP/2: every stream is answered 505 with the reason in the body (curl prints it), and the connection
 * closes when the client is done (or idle).
 */
export class H2PriorKnowledgeRefusal {
  readonly ep: Endpoint;
  private readonly conn: H2ServerConnection;
  private closed = false;

  constructor(
    private readonly ctx: ProxyContext,
    socket: Socket<unknown>,
    initial: Uint8Array,
  ) {
    this.ep = new Endpoint(socket);
    socket.data = this;
    ctx.sessions.add(this);
    socket.timeout(ctx.clientIdleSec);
    const body = new TextEncoder().encode(PRIOR_KNOWLEDGE_TEXT);
    this.conn = new H2ServerConnection(this.ep, {
      pauseReading: () => this.ep.pause(),
      resumeReading: () => this.ep.resume(),
      onRequest: (req) => {
        req.resume(); // any request body is read and dropped
        try {
          req.respond(505, [["content-type", "text/plain; charset=utf-8"], ["content-length", String(body.length)]]);
          req.write(body);
          req.end();
        } catch {
          req.reset();
        }
      },
      limits: ctx.h2Limits,
    });
    this.conn.feed(initial);
  }

  onClientData(d: Uint8Array): void {
    if (!this.closed) this.conn.feed(d);
  }
  onClientDrain(): void {
    this.ep.handleDrain();
  }
  onClientEnd(): void {
    this.onClientClose();
  }
  onClientTimeout(): void {
    this.destroy();
  }
  onClientClose(): void {
    if (this.closed) return;
    this.closed = true;
    this.ep.markClosed();
    this.ctx.sessions.delete(this);
    this.conn.socketClosed();
  }
  destroy(): void {
    this.ep.destroy();
    this.onClientClose();
  }
}
