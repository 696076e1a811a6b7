import type { Socket } from "bun";
import { ChunkedDecoder, LengthDecoder, parseRequestHead, parseTarget, requestFraming } from "../http1/parse.ts";
import { encodeChunk, LAST_CHUNK, serializeResponseHead, statusReason } from "../http1/serialize.ts";
import { forwardableAsIs, getHeader, hasToken, removeHeader, stripHopByHop, unchangedFields, wantsKeepAlive } from "../http1/headers.ts";
import { HttpParseError, type HeaderList, type RawHead, type RequestHead, type ResponseHead } from "../http1/types.ts";
import { F_CONNECTION, F_EXPECT, F_HOST, F_UPGRADE } from "../http1/fields.ts";
import { peekClientHello } from "../tls/client-hello.ts";
import { Flow, hostPort, type ClientInfo, type Scheme } from "../../pipeline/flow.ts";
import type { ConnectInfo } from "../../pipeline/addon.ts";
import type { ProxyContext, WebSocketTap } from "./context.ts";
import { concatBytes, Endpoint } from "./endpoint.ts";
import { CONNECT_OK, openTunnel, type Tunnel } from "./tunnel.ts";
import { EMPTY, Exchange, trailerSection, writeChunk, type BodyDecoder } from "./exchange.ts";
import { H2PriorKnowledgeRefusal, H2Session, startsWithH2Preface } from "./h2-session.ts";

/** ALPN protocol lists in wire format offered to clients: HTTP/1.1 only, or h2 first (see h2-session.ts). */
const ALPN_HTTP11 = new Uint8Array([8, ...new TextEncoder().encode("http/1.1")]);
const ALPN_H2_HTTP11 = new Uint8Array([2, ...new TextEncoder().encode("h2"), 8, ...new TextEncoder().encode("http/1.1")]);
const CONTINUE_100 = new TextEncoder().encode("HTTP/1.1 100 Continue\r\n\r\n");
/** Bytes of a pipelined next request we hold (unparsed) while the current exchange runs, before pausing the client. */
const MAX_HELD = 256 * 1024;

/** Where origin-form requests go on a connection that came through CONNECT. */
interface DefaultTarget {
  scheme: Scheme;
  host: string;
  port: number;
  servername?: string;
}

/** Handlers shared by every accepted client socket (plain and TLS); the session lives in socket.data. */
export const clientSocketHandlers = {
  data(s: Socket<HttpSession>, d: Uint8Array) {
    s.data?.onClientData(d);
  },
  drain(s: Socket<HttpSession>) {
    s.data?.onClientDrain();
  },
  close(s: Socket<HttpSession>) {
    s.data?.onClientClose();
  },
  end(s: Socket<HttpSession>) {
    s.data?.onClientEnd();
  },
  error(s: Socket<HttpSession>) {
    s.data?.onClientClose();
  },
  timeout(s: Socket<HttpSession>) {
    s.data?.onClientTimeout();
  },
  handshake(s: Socket<HttpSession>, success: boolean) {
    if (!success) s.data?.onClientClose();
  },
};

/**
 * One client connection speaking HTTP/1.1 to the proxy: absolute-form requests on the listener, origin-form ones
 * inside an intercepted CONNECT. It turns bytes into requests for the exchange (exchange.ts: pipeline, upstream,
 * capture) and the exchange's response back into bytes, with backpressure; CONNECT, tunnels and WebSocket relays
 * are handled here.
 */
export class HttpSession extends Exchange {
  readonly ep: Endpoint;
  private buf: Uint8Array = EMPTY;
  private held = false;
  private clientEnded = false;
  private clientKeepAlive = true;
  private resChunkedOut = false;
  private wsTap: WebSocketTap | null = null;
  private tunnel: Tunnel | null = null;

  constructor(
    ctx: ProxyContext,
    socket: Socket<HttpSession>,
    client: ClientInfo,
    private target: DefaultTarget | null,
  ) {
    super(ctx, client);
    this.ep = new Endpoint(socket);
    socket.data = this;
    ctx.sessions.add(this);
    this.ep.onDrain = () => this.onClientWritable();
    // a client that stops taking what it asked for is governed by its own timer, never the upstream's
    this.ep.stallMs = ctx.clientIdleSec * 1000;
    this.ep.onStall = () => this.onClientStalled();
    socket.timeout(ctx.clientIdleSec);
    this.armHeadDeadline();
  }

  /** --client-header-timeout: the whole request head (or, after CONNECT, the ClientHello) must arrive within it. */
  private headTimer: ReturnType<typeof setTimeout> | null = null;
  private headBytes = false;

  private armHeadDeadline(): void {
    const sec = this.ctx.clientHeaderSec ?? 0;
    if (sec <= 0 || this.headTimer) return;
    this.headTimer = setTimeout(() => this.onHeadDeadline(), sec * 1000);
  }

  private clearHeadDeadline(): void {
    if (this.headTimer) clearTimeout(this.headTimer);
    this.headTimer = null;
    this.headBytes = false;
  }

  private onHeadDeadline(): void {
    this.headTimer = null;
    if (this.mode === "peek") return this.destroy(); // no complete ClientHello in time
    if (this.mode !== "http" || this.reqState !== "idle") return;
    // nothing at all on a fresh connection: just close (as nginx); a partial head: 408
    if (!this.headBytes && this.buf.length === 0) return this.destroy();
    this.buf = EMPTY;
    this.reqState = "done";
    this.sendPlain(408, `tapwire: the request head did not arrive within ${this.ctx.clientHeaderSec} s\n`, true);
  }

  /** The client accepted none of the bytes waiting for it for --client-idle-timeout: close, record why. */
  private onClientStalled(): void {
    if (this.flow && !this.flow.error) this.flow.error = `client accepted nothing for ${this.ctx.clientIdleSec} s`;
    this.destroy();
  }

  // ------------------------------------------------------------------ client socket events

  onClientData(d: Uint8Array): void {
    switch (this.mode) {
      case "http":
        return this.onHttpBytes(d);
      case "peek":
        this.buf = concatBytes(this.buf, d);
        return this.peekAfterConnect();
      case "tunnel":
        return this.tunnel?.clientBytes(d);
      case "websocket":
        this.wsTap?.clientBytes(d);
        if (this.upstream && !this.upstream.ep.write(d)) this.ep.pause();
        return;
      default:
        return; // "upgraded": the raw socket under TLS still sees ciphertext; "closed": ignore
    }
  }

  onClientDrain(): void {
    this.ep.handleDrain();
  }

  /** The client socket can take more: resume whatever feeds it. */
  private onClientWritable(): void {
    this.resumeUpstream();
  }

  onClientEnd(): void {
    this.clientEnded = true;
    if (this.mode === "tunnel") return this.tunnel?.clientEnded();
    if (this.mode === "peek" || this.mode === "closed" || this.mode === "upgraded") return this.destroy();
    if (this.mode === "websocket") {
      this.upstream?.ep.end();
      return;
    }
    // A half-close between requests ends the connection (after any request already buffered);
    // after a complete request the response is still delivered; in the middle of a body it is a hang-up.
    if (this.reqState === "idle") return this.destroy(); // a partial head can never complete now
    // An addon holding the flow (a paused intercept) must not wait for a client that left: a FIN is taken as gone.
    if (this.flow?.onClientGone && (this.reqState === "hooks" || this.resState === "hooks")) return this.destroy();
    const bodyComplete = this.reqState === "done" || this.reqDecoder === null || this.reqDecoder.done;
    if (bodyComplete) this.closeAfter = true;
    else this.onClientClose();
  }

  onClientTimeout(): void {
    // Armed between exchanges and while waiting for the bytes after a CONNECT.
    if (this.mode === "websocket" || this.mode === "tunnel") return;
    if (this.reqState === "idle" || this.mode === "peek") this.destroy();
  }

  onClientClose(): void {
    this.clearHeadDeadline();
    this.ep.markClosed();
    if (this.mode === "closed") return;
    if (this.mode === "tunnel") {
      this.mode = "closed";
      this.ctx.sessions.delete(this);
      this.tunnel?.clientClosed();
      return;
    }
    const wasWs = this.mode === "websocket";
    this.mode = "closed";
    this.ctx.sessions.delete(this);
    const flow = this.flow;
    if (wasWs) {
      this.wsTap?.closed();
      this.wsTap = null;
      if (this.upstream) this.upstream.pool.drop(this.upstream);
      this.upstream = null;
      return;
    }
    if (flow && !(this.reqState === "idle")) {
      if (this.upstream) {
        this.upstream.pool.drop(this.upstream);
        this.upstream = null;
      }
      if (this.resState !== "done") {
        flow.error ??= "client disconnected";
        flow.onClientGone?.();
        this.finishFailed(flow);
      }
    }
    this.flow = null;
  }

  destroy(): void {
    this.ep.destroy();
    this.onClientClose();
  }

  // ------------------------------------------------------------------ request side

  private onHttpBytes(d: Uint8Array): void {
    switch (this.reqState) {
      case "idle":
        this.buf = this.buf.length ? concatBytes(this.buf, d) : d;
        this.headBytes = true;
        this.parseNext();
        // a head still incomplete: its deadline runs (armed only now, so a whole head in one read costs no timer)
        if (this.reqState === "idle" && this.mode === "http" && this.buf.length > 0) this.armHeadDeadline();
        return;
      case "stream":
      case "collect":
        return this.pushRequestBody(d);
      default:
        // hooks running, connecting, or waiting for the response: hold the bytes
        this.buf = this.buf.length ? concatBytes(this.buf, d) : d;
        if (this.buf.length > MAX_HELD) this.ep.pause();
    }
  }

  private parseNext(): void {
    if (this.mode !== "http" || this.reqState !== "idle" || this.buf.length === 0) return;
    let parsed: { head: RequestHead; end: number } | null;
    try {
      parsed = parseRequestHead(this.buf);
    } catch (e) {
      return this.refuse(e);
    }
    if (!parsed) return; // need more bytes
    this.clearHeadDeadline();
    this.buf = parsed.end === this.buf.length ? EMPTY : this.buf.subarray(parsed.end);
    try {
      this.onRequestHead(parsed.head);
    } catch (e) {
      this.refuse(e);
    }
  }

  /** A malformed request: answer 400 (or the parser's status) to this client only and close. */
  private refuse(e: unknown): void {
    if (startsWithH2Preface(this.buf)) return this.refusePriorKnowledge();
    const status = e instanceof HttpParseError ? e.status : 400;
    const msg = e instanceof Error ? e.message : String(e);
    this.flow = null;
    this.reqState = "done";
    this.sendPlain(status, `tapwire: bad request: ${msg}\n`, true);
  }

  private onRequestHead(head: RequestHead): void {
    const t = parseTarget(head.method, head.target);
    if (head.method === "CONNECT") {
      if (this.target) throw new HttpParseError("CONNECT inside a CONNECT tunnel is not supported", 400);
      return this.onConnect(t.host!, t.port!);
    }
    // RFC 9112 3.2: a server must answer 400 to an HTTP/1.1 request without Host (never make one up)
    if (head.version === "HTTP/1.1" && (head.present !== undefined ? (head.present & F_HOST) === 0 : getHeader(head.headers, "host") === undefined)) throw new HttpParseError("HTTP/1.1 request without a Host header", 400);
    let scheme: Scheme;
    let host: string;
    let port: number;
    let path = t.path;
    if (t.form === "absolute") {
      scheme = t.scheme === "https" || t.scheme === "wss" ? "https" : "http";
      host = t.host!;
      port = t.port!;
      if (this.target && this.target.scheme === "https" && scheme === "http") scheme = "https";
      // RFC 9112 3.2.2: a proxy replaces Host with the authority of an absolute-form target
      const authority = hostPort(scheme, host, port);
      if (getHeader(head.headers, "host") !== authority) {
        removeHeader(head.headers, "host");
        head.headers.unshift(["Host", authority]);
      }
    } else if (this.target) {
      scheme = this.target.scheme;
      host = this.target.host;
      port = this.target.port;
      if (t.form === "asterisk") path = "*";
    } else {
      throw new HttpParseError("tapwire is a proxy: send absolute-form requests (http://host/path) or CONNECT", 400);
    }
    const framing = requestFraming(head);
    this.reqFraming = framing;
    const flow = new Flow(this.client, { method: head.method, scheme, host, port, path, version: head.version, headers: head.headers, body: null }, this.ctx.bodyLimit);
    flow.reqRaw = head.raw ?? null;
    flow.reqPresent = head.present;
    this.flow = flow;
    // the parser says which of these fields are there at all (the Host fix above leaves them alone)
    const present = head.present ?? -1;
    this.clientKeepAlive = present & F_CONNECTION ? wantsKeepAlive(head.version, head.headers) : head.version === "HTTP/1.1";
    this.expectContinue = present & F_EXPECT ? hasToken(head.headers, "expect", "100-continue") : false;
    flow.websocket = present & F_UPGRADE ? hasToken(head.headers, "upgrade", "websocket") && hasToken(head.headers, "connection", "upgrade") : false;
    this.reqDecoder = framing.kind === "chunked" ? new ChunkedDecoder() : framing.kind === "length" && framing.length > 0 ? new LengthDecoder(framing.length) : null;
    this.ep.socket.timeout(0);
    this.startExchange(flow);
  }

  /** Request body bytes as they came from the client: unframed by the decoder, then on to the exchange. */
  private pushRequestBody(d: Uint8Array): void {
    const dec = this.reqDecoder as BodyDecoder | null;
    const flow = this.flow;
    if (!dec || !flow) return;
    let out;
    try {
      out = dec.push(d);
    } catch (e) {
      // bad chunking from the client: 400 if we have not answered yet, else just close
      if (this.upstream) this.upstream.pool.drop(this.upstream);
      this.upstream = null;
      flow.error = `bad request body: ${(e as Error).message}`;
      if (!this.resHeadSent) {
        this.finishFailed(flow);
        return this.refuse(e);
      }
      return this.destroy();
    }
    if (out.done) {
      if (dec instanceof ChunkedDecoder && dec.trailers.length) this.reqTrailers = dec.trailers;
      // a pipelined next request right behind the body: held until this exchange ends
      if (this.reqState === "collect") this.buf = out.rest ?? EMPTY;
      else if (out.rest && out.rest.length) {
        this.buf = out.rest;
        if (this.buf.length > MAX_HELD) this.ep.pause();
      }
    }
    // a body going upstream chunked as it came: its framing is relayed with it (see Exchange.sendRequest)
    const streaming = this.reqState === "stream";
    this.requestBodyData(flow, out.data, out.done, streaming && dec instanceof ChunkedDecoder && dec.isPassthrough ? d : null);
    // streamed to an HTTP/1 origin, the read is referred to by nothing but what was written of it
    if (streaming && !out.done && this.h2up === null) this.upstream?.ep.release(d);
  }

  // ------------------------------------------------------------------ the exchange's client side (HTTP/1)

  protected upstreamServername(host: string, port: number): string | undefined {
    const t = this.target;
    return t && t.host === host && t.port === port ? t.servername : undefined;
  }

  protected feedHeldRequestBody(resume: boolean): void {
    const b = this.buf;
    this.buf = EMPTY;
    if (resume) this.ep.resume();
    if (b.length) this.pushRequestBody(b);
  }

  protected requestBodyChunked(): boolean {
    return this.reqDecoder instanceof ChunkedDecoder;
  }

  protected sendContinue(): void {
    this.ep.write(CONTINUE_100);
  }

  protected sendInterim(head: ResponseHead): void {
    this.ep.write(serializeResponseHead({ version: "HTTP/1.1", status: head.status, reason: head.reason, headers: stripHopByHop(head.headers) }));
  }

  protected writeResponseBody(p: Uint8Array): boolean {
    return this.resChunkedOut ? writeChunk(this.ep, p) : this.ep.write(p);
  }

  protected override chunkedClientEndpoint(): Endpoint | null {
    return this.resChunkedOut ? this.ep : null;
  }

  protected override clientEndpoint(): Endpoint {
    return this.ep;
  }

  protected lastResponsePiece(p: Uint8Array): Uint8Array {
    return this.resChunkedOut ? encodeChunk(p) : p;
  }

  protected finishResponseBody(last: Uint8Array | null): void {
    if (last !== null) this.ep.write(last);
    // a chunked body ends with the response's trailers, when it had any (RFC 9112 7.1.2)
    if (this.resChunkedOut) this.ep.write(this.resTrailers !== null && this.resTrailers.length ? trailerSection(this.resTrailers) : LAST_CHUNK);
  }

  protected pauseClient(): void {
    this.ep.pause();
  }

  protected resumeClient(): void {
    this.ep.resume();
  }

  protected corkClient(): void {
    this.ep.cork();
  }

  protected uncorkClient(): void {
    this.ep.uncork();
  }

  protected discardClientCork(): boolean {
    return this.ep.discardCork();
  }

  protected refuseRequest(status: number, text: string): void {
    this.sendPlain(status, text, true);
  }

  protected webSocketServerBytes(d: Uint8Array): void {
    this.wsTap?.serverBytes(d);
    if (!this.ep.write(d)) this.upstream?.ep.pause();
  }

  protected webSocketUpstreamClosed(): void {
    this.wsTap?.closed();
    this.wsTap = null;
    this.ep.end();
    this.mode = "closed";
    this.ctx.sessions.delete(this);
  }

  /** Write the response head to the client, with framing for either a known body or the streamed one. */
  protected sendResponseHead(flow: Flow, wholeBody: Uint8Array | null): void {
    const res = flow.response!;
    this.ep.throttle = flow.throttleDown;
    const noBody = flow.request.method === "HEAD" || res.status === 204 || res.status === 304 || (res.status >= 100 && res.status < 200);
    if (wholeBody === null && this.sendResponseHeadAsReceived(flow)) return;
    const headers = stripHopByHop(res.headers);
    this.resChunkedOut = false;
    let closeDelimited = false;
    if (wholeBody !== null) {
      if (!noBody) {
        removeHeader(headers, "content-length");
        headers.push(["Content-Length", String(wholeBody.length)]);
      }
    } else if (!noBody) {
      const f = this.resFraming;
      // A length-framed body from an HTTP/2 origin keeps its Content-Length (its trailers are then only recorded),
      // unless the client said it takes trailers (`TE: trailers`) and the response announces them or is gRPC:
      // then it goes chunked so that the trailer section can follow it.
      const trailersWanted = f.kind === "length" && this.h2up !== null && flow.request.version === "HTTP/1.1" && hasToken(flow.request.headers, "te", "trailers") && (getHeader(res.headers, "trailer") !== undefined || (getHeader(res.headers, "content-type") ?? "").startsWith("application/grpc"));
      if (f.kind === "chunked" || (f.kind === "close" && flow.request.version === "HTTP/1.1") || trailersWanted) {
        removeHeader(headers, "content-length");
        headers.push(["Transfer-Encoding", outerChunked(res.headers)]);
        this.resChunkedOut = true;
      } else if (f.kind === "close") {
        closeDelimited = true;
      } else if (f.kind === "length") {
        removeHeader(headers, "content-length");
        headers.push(["Content-Length", String(f.length)]);
      } else if (f.kind === "none" && !getHeader(headers, "content-length")) {
        headers.push(["Content-Length", "0"]);
      }
    }
    const keep = this.clientKeepAlive && !this.closeAfter && !closeDelimited && !this.clientEnded;
    if (!keep) {
      this.closeAfter = true;
      headers.push(["Connection", "close"]);
    } else if (flow.request.version === "HTTP/1.0") {
      headers.push(["Connection", "keep-alive"]);
    }
    let head: Uint8Array;
    try {
      head = serializeResponseHead({ version: "HTTP/1.1", status: res.status, reason: res.reason, headers });
    } catch (e) {
      head = serializeResponseHead({ version: "HTTP/1.1", status: 502, reason: "Bad Gateway", headers: [["Content-Length", "0"], ["Connection", "close"]] });
      this.closeAfter = true;
      flow.error = `invalid response head: ${(e as Error).message}`;
    }
    this.resHeadSent = true;
    if (wholeBody !== null && !noBody && wholeBody.length > 0) {
      if (wholeBody.length < 16384) this.ep.write(concatBytes(head, wholeBody));
      else {
        this.ep.write(head);
        this.ep.write(wholeBody);
      }
    } else {
      this.ep.write(head);
    }
  }

  /**
   * Send the upstream's head as it came, when nothing in it needs rewriting: the response and its fields are as
   * parsed, HTTP/1.1, kept alive on both sides, framed by one Content-Length or `Transfer-Encoding: chunked`, no
   * other hop-by-hop field. Returns false (nothing sent) otherwise.
   */
  private sendResponseHeadAsReceived(flow: Flow): boolean {
    const raw = this.responseHeadAsReceived(flow);
    if (raw === null) return false;
    this.resChunkedOut = this.resFraming.kind === "chunked";
    this.resHeadSent = true;
    this.ep.write(raw.buf.subarray(raw.start, raw.end));
    return true;
  }

  /** The upstream's head as it came, if it can go to the client so (see sendResponseHeadAsReceived), else null. */
  private responseHeadAsReceived(flow: Flow): RawHead | null {
    const res = flow.response!;
    const parsed = this.resHead;
    const raw = parsed?.raw;
    if (!parsed || !raw || parsed.version !== "HTTP/1.1" || res.status !== parsed.status || res.reason !== parsed.reason) return null;
    // a response without a body (HEAD, 1xx, 204, 304) is framed "none": sendResponseHead decides what its head says
    const kind = this.resFraming.kind;
    if (kind !== "length" && kind !== "chunked") return null;
    if (flow.request.version !== "HTTP/1.1" || !this.clientKeepAlive || this.closeAfter || this.clientEnded) return null;
    if (!unchangedFields(res.headers, raw.fields) || !forwardableAsIs(res.headers, this.resFraming, false, parsed.present)) return null;
    return raw;
  }

  /**
   * The common small response: its head can go as it came and its whole Content-Length body arrived right behind
   * it in the same read. Both leave as that read's bytes (no views, no join), and the exchange ends here.
   */
  protected sendWholeResponseAsReceived(flow: Flow): boolean {
    const f = this.resFraming;
    const body = this.resBuf;
    if (f.kind !== "length" || body.length !== f.length || body.length === 0) return false;
    const raw = this.responseHeadAsReceived(flow);
    if (raw === null || raw.buf.length !== raw.end + body.length) return false;
    this.ep.throttle = flow.throttleDown;
    this.resChunkedOut = false;
    this.resHeadSent = true;
    this.resState = "body";
    this.resBuf = EMPTY;
    this.resDecoder = null;
    this.resBytes += body.length;
    if (flow.capture) flow.resBody.add(body);
    this.resumeUpstream();
    this.responseComplete(flow, raw.start === 0 ? raw.buf : raw.buf.subarray(raw.start));
    return true;
  }

  /**
   * The same for a response whose header hooks ran synchronously: head and body are `buf` (the upstream's read,
   * body from `at`), and the capture keeps a view of the body in it rather than a copy: Bun hands out a new buffer
   * per read, and this one is only written to the client from here on (never released, see Endpoint.release).
   */
  protected override sendWholeReadAsReceived(flow: Flow, buf: Uint8Array, at: number): boolean {
    const f = this.resFraming;
    const n = buf.length - at;
    if (f.kind !== "length" || n !== f.length || this.flow !== flow || this.mode === "closed" || flow.bufferResponse) return false;
    const raw = this.responseHeadAsReceived(flow);
    if (raw === null || raw.buf !== buf || raw.end !== at) return false;
    this.ep.throttle = flow.throttleDown;
    this.resChunkedOut = false;
    this.resHeadSent = true;
    this.resState = "body";
    this.resDecoder = null;
    this.resBytes += n;
    if (flow.capture) flow.resBody.addRead(buf, at);
    this.resumeUpstream();
    this.responseComplete(flow, raw.start === 0 ? buf : buf.subarray(raw.start));
    return true;
  }

  protected maybeFinish(): void {
    if (this.resState !== "done" || this.mode !== "http") return;
    if (this.reqState !== "done") {
      // the response ended before the request body did: this connection cannot be reused
      this.closeAfter = true;
    }
    this.flow = null;
    if (this.closeAfter || this.clientEnded) {
      this.mode = "closed";
      this.ctx.sessions.delete(this);
      this.ep.end();
      return;
    }
    this.reqState = "idle";
    this.resState = "none";
    this.ep.socket.timeout(this.ctx.clientIdleSec);
    this.ep.resume();
    if (this.buf.length) this.parseNext();
  }


  private sendPlain(status: number, text: string, close: boolean): void {
    const body = new TextEncoder().encode(text);
    const headers: HeaderList = [
      ["Content-Type", "text/plain; charset=utf-8"],
      ["Content-Length", String(body.length)],
    ];
    if (close) headers.push(["Connection", "close"]);
    this.ep.write(concatBytes(serializeResponseHead({ version: "HTTP/1.1", status, reason: statusReason(status), headers }), body));
    if (close) {
      this.mode = "closed";
      this.ctx.sessions.delete(this);
      this.ep.end();
    }
  }

  /** HTTP/2 with prior knowledge (the connection preface) on the proxy port: refused in HTTP/2 (see h2-session.ts). */
  private refusePriorKnowledge(): void {
    const bytes = this.buf;
    this.flow = null;
    this.reqState = "done";
    this.buf = EMPTY;
    this.clearHeadDeadline();
    this.mode = "closed";
    this.ctx.sessions.delete(this);
    new H2PriorKnowledgeRefusal(this.ctx, this.ep.socket as Socket<unknown>, bytes);
  }

  // ------------------------------------------------------------------ CONNECT

  private connectHost = "";
  private connectPort = 0;

  private onConnect(host: string, port: number): void {
    this.reqState = "done";
    const info: ConnectInfo = { host, port, clientAddr: this.client.addr, tunnel: false };
    this.ctx.pipeline.connect(info);
    this.connectHost = host;
    this.connectPort = port;
    const rest = this.buf;
    this.buf = EMPTY;
    if (info.tunnel) {
      this.mode = "tunnel";
      this.ep.socket.timeout(0);
      this.tunnel = openTunnel(this.ctx, this.ep, info, rest);
      return;
    }
    this.ep.write(CONNECT_OK);
    this.mode = "peek";
    this.armHeadDeadline();
    this.buf = rest;
    if (rest.length) this.peekAfterConnect();
  }

  /** Decide what the bytes after CONNECT are: a TLS ClientHello (intercept) or anything else (plain HTTP). */
  private peekAfterConnect(): void {
    const hello = peekClientHello(this.buf);
    if (hello.tls && !hello.complete) return;
    this.clearHeadDeadline();
    const bytes = this.buf;
    this.buf = EMPTY;
    if (hello.tls && !hello.error) {
      const sni = cleanSni(hello.sni);
      const name = sni ?? this.connectHost;
      let leaf;
      try {
        leaf = this.ctx.leafCerts.get(name);
      } catch {
        leaf = this.ctx.leafCerts.get(this.connectHost);
      }
      this.mode = "upgraded";
      this.clearHeadDeadline();
      this.ctx.sessions.delete(this);
      const raw = this.ep.socket as Socket<HttpSession>;
      const target: DefaultTarget = { scheme: "https", host: this.connectHost, port: this.connectPort, servername: sni ?? undefined };
      const ctx = this.ctx;
      const client = this.client;
      raw.upgradeTLS({
        data: undefined as unknown as HttpSession,
        tls: { cert: leaf.cert, key: leaf.key, ALPNProtocols: ctx.http2 === false ? ALPN_HTTP11 : ALPN_H2_HTTP11 },
        initialData: bytes,
        socket: {
          ...clientSocketHandlers,
          open(s: Socket<HttpSession>) {
            new HttpSession(ctx, s, client, target);
          },
          handshake(s: Socket<HttpSession>, success: boolean) {
            if (!success) return s.data?.onClientClose();
            // the client picked h2: the connection becomes an HTTP/2 session (no byte was read as HTTP/1 yet)
            if ((s as unknown as { alpnProtocol: string | false | null }).alpnProtocol === "h2") s.data?.handOverToH2(s);
          },
        },
      } as unknown as Parameters<typeof raw.upgradeTLS>[0]);
      return;
    }
    // not TLS: plain HTTP to the CONNECT target
    this.mode = "http";
    this.target = { scheme: "http", host: this.connectHost, port: this.connectPort };
    this.reqState = "idle";
    this.flow = null;
    this.buf = bytes;
    this.headBytes = bytes.length > 0;
    this.armHeadDeadline();
    this.parseNext();
  }

  /** Right after the TLS handshake inside a CONNECT, the client chose h2 in ALPN: an H2Session takes the socket. */
  handOverToH2(s: Socket<HttpSession>): void {
    if (this.mode !== "http" || this.reqState !== "idle" || this.buf.length > 0 || !this.target) return;
    this.clearHeadDeadline();
    this.mode = "closed";
    this.ctx.sessions.delete(this);
    new H2Session(this.ctx, s as unknown as Socket<unknown>, this.client, this.target);
  }

  // ------------------------------------------------------------------ WebSocket

  protected switchToWebSocket(flow: Flow): void {
    this.mode = "websocket";
    this.resState = "done";
    this.reqState = "done";
    flow.durationMs = Math.round(performance.now() - flow.t0);
    // recorded (and on disk) before the 101 goes out (see responseComplete)
    const r = this.ctx.pipeline.run("response", flow);
    if (r) r.catch(() => {});
    this.ctx.durable?.(true);
    this.sendResponseHeadRaw(flow);
    this.wsTap = this.ctx.webSocketOpened?.(flow) ?? null;
    const up = this.upstream!;
    up.ep.onDrain = () => this.ep.resume();
    this.ep.onDrain = () => up.ep.resume();
    this.ep.socket.timeout(0);
    up.unwatch();
    up.idleSec = 0;
    const held = this.buf;
    this.buf = EMPTY;
    if (held.length) this.onClientData(held);
    const early = this.resBuf;
    this.resBuf = EMPTY;
    if (early.length) this.onUpstreamData(early);
  }

  /** A 101's head goes to the client with its Connection/Upgrade headers intact. */
  private sendResponseHeadRaw(flow: Flow): void {
    const res = flow.response!;
    this.ep.throttle = flow.throttleDown; // this flow's limit (or none): never the previous exchange's
    this.resHeadSent = true;
    this.ep.write(serializeResponseHead({ version: "HTTP/1.1", status: res.status, reason: res.reason, headers: res.headers }));
  }
}

const DNS_NAME = /^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9])?)*\.?$/i;

/**
 * The server name a client sent in its ClientHello, if usable: some clients (hey, for one) send `host:port`;
 * the port is dropped, and anything that is not a DNS name is ignored (the CONNECT host is used instead).
 */
export function cleanSni(sni: string | undefined): string | null {
  if (!sni) return null;
  const name = sni.replace(/:\d{1,5}$/, "");
  return DNS_NAME.test(name) ? name : null;
}

/** Transfer-Encoding for a body we re-chunk: the upstream's other codings (e.g. gzip) stay, chunked goes last. */
function outerChunked(upstreamHeaders: HeaderList): string {
  const codings: string[] = [];
  for (const [n, v] of upstreamHeaders) {
    if (n.toLowerCase() !== "transfer-encoding") continue;
    for (const c of v.split(",")) {
      const t = c.trim();
      if (t && t.toLowerCase() !== "chunked") codings.push(t);
    }
  }
  codings.push("chunked");
  return codings.join(", ");
}

