import type { Socket } from "bun";
import { ChunkedDecoder, LengthDecoder, parseRequestHead, parseResponseHead, parseTarget, requestFraming, responseFraming } from "../http1/parse.ts";
import { chunkHeader, CRLF, encodeChunk, LAST_CHUNK, requestHeadWithFields, serializeRequestHead, serializeResponseHead, statusReason } from "../http1/serialize.ts";
import { forwardableAsIs, getHeader, hasToken, removeHeader, stripHopByHop, unchangedFields, wantsKeepAlive } from "../http1/headers.ts";
import { HttpParseError, type Framing, type HeaderList, type RawHead, type RequestHead, type ResponseHead } from "../http1/types.ts";
import { F_CONNECTION, F_EXPECT, F_HOST, F_UPGRADE } from "../http1/fields.ts";
import { peekClientHello } from "../tls/client-hello.ts";
import { Flow, hostPort, type ClientInfo, type Scheme } from "../../pipeline/flow.ts";
import type { ConnectInfo } from "../../pipeline/addon.ts";
import type { ProxyContext, WebSocketTap } from "./context.ts";
import { concatAll, concatBytes, Endpoint } from "./endpoint.ts";
import { UpstreamError, type UpstreamConn, type UpstreamOwner, type UpstreamTarget } from "./upstream.ts";
import { CONNECT_OK, openTunnel, type Tunnel } from "./tunnel.ts";

const EMPTY = new Uint8Array(0);
/** ALPN protocol list in wire format: only HTTP/1.1 is offered to clients. */
const ALPN_HTTP11 = new Uint8Array([8, ...new TextEncoder().encode("http/1.1")]);
const CONTINUE_100 = new TextEncoder().encode("HTTP/1.1 100 Continue\r\n\r\n");
/** Bytes of a pipelined next request we hold (unparsed) while the current exchange runs, before pausing the client. */
const MAX_HELD = 256 * 1024;
/** Interim (1xx) responses relayed per request; one more fails the exchange (a flood of 103s is not relayed). */
const MAX_INTERIM = 10;
const CHUNKED: Framing = { kind: "chunked" };
/** Chunks this large go out as size line, data and CRLF, without copying the data into a framed buffer. */
const CHUNK_COPY_MAX = 8 * 1024;

/** Writes one chunk of a chunked body (see CHUNK_COPY_MAX). False when the endpoint wants the sender to pause. */
function writeChunk(ep: Endpoint, p: Uint8Array): boolean {
  if (p.length < CHUNK_COPY_MAX) return ep.write(encodeChunk(p));
  ep.write(chunkHeader(p.length));
  ep.write(p);
  return ep.write(CRLF);
}

type BodyDecoder = ChunkedDecoder | LengthDecoder;

/** Where origin-form requests go on a connection that came through CONNECT. */
interface DefaultTarget {
  scheme: Scheme;
  host: string;
  port: number;
  servername?: string;
}

type Mode = "http" | "peek" | "tunnel" | "upgraded" | "websocket" | "closed";
type ReqState = "idle" | "hooks" | "collect" | "connecting" | "stream" | "done";
type ResState = "none" | "head" | "hooks" | "body" | "collect" | "done";

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
 * inside an intercepted CONNECT. It turns bytes into flow events for the pipeline and streams bodies between the
 * client and a pooled upstream connection with backpressure, keeping capped copies for capture.
 */
export class HttpSession implements UpstreamOwner {
  readonly ep: Endpoint;
  private mode: Mode = "http";
  private buf: Uint8Array = EMPTY;
  private held = false;
  /** Set when the connection must close after the current response. */
  private closeAfter = false;
  private clientEnded = false;

  // current exchange
  private flow: Flow | null = null;
  private reqState: ReqState = "idle";
  private reqDecoder: BodyDecoder | null = null;
  private reqFraming: Framing = { kind: "none" };
  private reqChunkedOut = false;
  private reqParts: Uint8Array[] = [];
  private reqPartsSize = 0;
  private reqBodyBytesSent = 0;
  private clientKeepAlive = true;
  private expectContinue = false;
  private upstream: UpstreamConn | null = null;
  private retried = false;
  private resState: ResState = "none";
  private resBuf: Uint8Array = EMPTY;
  private resFraming: Framing = { kind: "none" };
  /** The final response head as parsed, with its bytes: forwarded as it is if nobody changed it. */
  private resHead: ResponseHead | null = null;
  private resDecoder: BodyDecoder | null = null;
  private resChunkedOut = false;
  private resHeadSent = false;
  private resBytes = 0;
  private resParts: Uint8Array[] = [];
  private resPartsSize = 0;
  private wsTap: WebSocketTap | null = null;
  private tunnel: Tunnel | null = null;

  constructor(
    private readonly ctx: ProxyContext,
    socket: Socket<HttpSession>,
    private readonly client: ClientInfo,
    private target: DefaultTarget | null,
  ) {
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
    this.upstream?.ep.resume();
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
    this.reqParts = [];
    this.reqPartsSize = 0;
    this.reqBodyBytesSent = 0;
    this.retried = false;
    this.resState = "none";
    this.resHead = null;
    this.resHeadSent = false;
    this.resBytes = 0;
    this.resParts = [];
    this.resPartsSize = 0;
    this.ep.socket.timeout(0);
    this.reqState = "hooks";
    this.after(this.ctx.pipeline.run("requestHeaders", flow), () => this.afterRequestHeaders(flow));
  }

  /** Run `next` now if the hook finished synchronously, else when its promise settles. */
  private after(r: void | Promise<void>, next: () => void): void {
    if (r === undefined) return next();
    (r as Promise<void>).then(next, (e) => this.addonFailed(e));
  }

  private addonFailed(e: unknown): void {
    const flow = this.flow;
    if (!flow || this.mode === "closed") return;
    flow.error = `addon error: ${e instanceof Error ? e.message : String(e)}`;
    this.failWith502(flow, flow.error);
  }

  private afterRequestHeaders(flow: Flow): void {
    if (this.flow !== flow || this.mode === "closed") return;
    if (flow.response || flow.bufferRequest) {
      // The body is needed whole (buffering addon), or must be read off the wire before an addon's answer.
      if (this.reqDecoder) {
        if (this.expectContinue && !flow.response) this.ep.write(CONTINUE_100);
        if (flow.response && this.expectContinue) {
          // The client waits for 100 before sending a body we do not need: answer and close.
          this.closeAfter = true;
          this.reqDecoder = null;
          return this.afterRequestBody(flow);
        }
        this.reqState = "collect";
        const b = this.buf;
        this.buf = EMPTY;
        // the client may have been paused while the header hooks ran (more than MAX_HELD arrived): the body is
        // read now, so let it flow again
        this.ep.resume();
        if (b.length) this.pushRequestBody(b);
        return;
      }
      return this.afterRequestBody(flow);
    }
    this.reqState = "hooks";
    this.after(this.ctx.pipeline.run("request", flow), () => this.forward(flow));
  }

  /** Collected (or no) body: run the request hooks with it, then answer or forward. */
  private afterRequestBody(flow: Flow): void {
    if (this.flow !== flow || this.mode === "closed") return;
    if (this.reqParts.length) flow.request.body = concatAll(this.reqParts);
    else if (flow.bufferRequest) flow.request.body = EMPTY;
    this.reqParts = [];
    this.reqState = "hooks";
    if (flow.response) return this.answerFromAddon(flow);
    this.after(this.ctx.pipeline.run("request", flow), () => this.forward(flow));
  }

  private pushRequestBody(d: Uint8Array): void {
    const dec = this.reqDecoder;
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
    if (this.reqState === "collect") {
      for (const p of out.data) {
        this.reqPartsSize += p.length;
        if (this.reqPartsSize > this.ctx.maxBufferedBody) {
          flow.error = `request body larger than ${this.ctx.maxBufferedBody} bytes cannot be held for an addon`;
          this.finishFailed(flow);
          this.reqState = "done";
          return this.sendPlain(413, `tapwire: ${flow.error}\n`, true);
        }
        this.reqParts.push(p.slice());
      }
      if (out.done) {
        this.reqDecoder = null;
        this.buf = out.rest ?? EMPTY;
        this.afterRequestBody(flow);
      }
      return;
    }
    // streaming to upstream; a long upload is activity too (the upstream may say nothing until it ends)
    const up = this.upstream!;
    up.touch();
    let ok = true;
    for (const p of out.data) {
      if (flow.capture) flow.reqBody.add(p);
      this.reqBodyBytesSent += p.length;
      ok = (this.reqChunkedOut ? writeChunk(up.ep, p) : up.ep.write(p)) && ok;
    }
    if (out.done) {
      if (this.reqChunkedOut) up.ep.write(LAST_CHUNK);
      this.reqDecoder = null;
      this.reqState = "done";
      if (flow.capture) flow.timing.sent = performance.now();
      if (out.rest && out.rest.length) {
        this.buf = out.rest;
        if (this.buf.length > MAX_HELD) this.ep.pause();
      }
      this.maybeFinish();
    } else if (!ok) {
      this.ep.pause();
      up.ep.onDrain = () => this.ep.resume();
    }
  }

  // ------------------------------------------------------------------ upstream

  private forward(flow: Flow): void {
    if (this.flow !== flow || this.mode === "closed") return;
    if (flow.response) return this.answerFromAddon(flow);
    // phase marks (HAR timings) only for flows that are recorded: performance.now() is not free
    if (flow.capture) flow.timing.forward ||= performance.now();
    const r = flow.request;
    const target: UpstreamTarget = {
      scheme: r.scheme,
      host: r.host,
      port: r.port,
      servername: this.target && this.target.host === r.host && this.target.port === r.port ? this.target.servername : undefined,
    };
    if (flow.websocket) target.websocket = true; // through a parent proxy it takes a CONNECT tunnel
    const idle = this.ctx.pool.takeIdle(target);
    if (idle) return this.sendRequest(flow, idle);
    this.reqState = "connecting";
    this.ctx.pool.connect(target).then(
      (conn) => {
        if (this.flow !== flow || this.mode === "closed") return conn.pool.release(conn);
        this.sendRequest(flow, conn);
      },
      (e: UpstreamError) => {
        if (this.flow !== flow || this.mode === "closed") return;
        flow.error = e.message;
        this.failWith502(flow, e.message, e.kind === "timeout" ? 504 : 502);
      },
    );
  }

  private sendRequest(flow: Flow, conn: UpstreamConn): void {
    conn.owner = this;
    conn.uses++;
    const timing = flow.capture ? flow.timing : null;
    if (timing) {
      timing.send = performance.now();
      timing.conn = conn;
      timing.reused = conn.uses > 1;
    }
    this.upstream = conn;
    conn.ep.onDrain = null;
    conn.ep.throttle = flow.throttleUp;
    this.resState = "head";
    this.resBuf = EMPTY;
    this.interim = 0;
    const r = flow.request;
    const body = r.body;
    let head = body === null && !flow.websocket ? this.requestHeadAsReceived(flow) : null;
    if (head === null) {
      try {
        head = this.rebuildRequestHead(flow);
      } catch (e) {
        conn.pool.release(conn);
        this.upstream = null;
        flow.error = `cannot send the request: ${(e as Error).message}`;
        return this.failWith502(flow, flow.error);
      }
    }
    // through a parent proxy (plain HTTP): absolute-form target and Proxy-Authorization, on the wire only
    if (conn.proxyForm !== null) head = conn.proxyForm.apply(head);
    if (body !== null) {
      if (flow.capture) flow.reqBody.add(body);
      conn.ep.write(body.length && body.length < 16384 ? concatBytes(head, body) : head);
      if (body.length >= 16384) conn.ep.write(body);
      this.reqState = "done";
      if (timing) timing.sent = performance.now();
    } else if (this.reqDecoder) {
      conn.ep.cork();
      conn.ep.write(head);
      this.reqState = "stream";
      const b = this.buf;
      this.buf = EMPTY;
      if (b.length) this.pushRequestBody(b);
      conn.ep.uncork();
    } else {
      conn.ep.write(head);
      this.reqState = "done";
      if (timing) timing.sent = performance.now();
    }
    // the silence clock runs from the request on, fresh or pooled
    conn.watch();
    this.ep.resume();
  }

  /**
   * The request head as received, with a request line for the upstream, when the pipeline left the fields as
   * they were and they hold nothing a proxy must rewrite (see forwardableAsIs); else null.
   */
  private requestHeadAsReceived(flow: Flow): Uint8Array | null {
    const raw = flow.reqRaw;
    const r = flow.request;
    if (raw === null || !unchangedFields(r.headers, raw.fields)) return null;
    const chunked = this.reqDecoder instanceof ChunkedDecoder;
    if (!forwardableAsIs(r.headers, chunked ? CHUNKED : this.reqFraming, true, flow.reqPresent)) return null;
    const head = requestHeadWithFields(r.method, r.path, raw);
    if (head !== null) this.reqChunkedOut = chunked;
    return head;
  }

  /** The request head for the upstream, rebuilt: hop-by-hop fields removed, framing from what was parsed. Throws on an invalid head. */
  private rebuildRequestHead(flow: Flow): Uint8Array {
    const r = flow.request;
    const body = r.body;
    const headers = stripHopByHop(r.headers);
    if (!getHeader(headers, "host")) headers.unshift(["Host", hostPort(r.scheme, r.host, r.port)]);
    if (body !== null) {
      // buffered (possibly rewritten) body: frame it with its real length
      removeHeader(headers, "content-length");
      removeHeader(headers, "expect");
      if (body.length > 0 || methodHasBody(r.method)) headers.push(["Content-Length", String(body.length)]);
      this.reqChunkedOut = false;
    } else if (this.reqDecoder instanceof ChunkedDecoder) {
      removeHeader(headers, "content-length");
      headers.push(["Transfer-Encoding", "chunked"]);
      this.reqChunkedOut = true;
    } else {
      // Framing comes from what we parsed, never from the header list as it stands (a `Connection:
      // Content-Length` or a `5, 5` list must not change how the upstream reads the body).
      removeHeader(headers, "content-length");
      if (this.reqFraming.kind === "length") headers.push(["Content-Length", String(this.reqFraming.length)]);
      this.reqChunkedOut = false;
    }
    if (flow.websocket) {
      headers.push(["Connection", "Upgrade"]);
      const up = getHeader(r.headers, "upgrade");
      headers.push(["Upgrade", up ?? "websocket"]);
    }
    return serializeRequestHead({ method: r.method, target: r.path, version: "HTTP/1.1", headers });
  }

  onUpstreamData(d: Uint8Array): void {
    const flow = this.flow;
    if (!flow) return;
    if (this.mode === "websocket") {
      this.wsTap?.serverBytes(d);
      if (!this.ep.write(d)) this.upstream?.ep.pause();
      return;
    }
    switch (this.resState) {
      case "head":
        if (flow.capture) flow.timing.firstByte ||= performance.now();
        this.resBuf = this.resBuf.length ? concatBytes(this.resBuf, d) : d;
        return this.parseResponse(flow);
      case "body":
      case "collect":
        return this.pushResponseBody(flow, d);
      case "hooks":
        this.resBuf = this.resBuf.length ? concatBytes(this.resBuf, d) : d;
        this.upstream?.ep.pause();
        return;
      default:
        // bytes after the response ended: the upstream connection is out of step
        if (this.upstream) {
          this.upstream.pool.drop(this.upstream);
          this.upstream = null;
        }
    }
  }

  private parseResponse(flow: Flow): void {
    for (;;) {
      let parsed: { head: ResponseHead; end: number } | null;
      try {
        parsed = parseResponseHead(this.resBuf);
      } catch (e) {
        flow.error = `bad response from upstream: ${(e as Error).message}`;
        return this.failWith502(flow, flow.error);
      }
      if (!parsed) return;
      const head = parsed.head;
      this.resBuf = parsed.end === this.resBuf.length ? EMPTY : this.resBuf.subarray(parsed.end);
      if (head.status >= 100 && head.status < 200 && head.status !== 101) {
        // interim response (100 Continue, 103 Early Hints): pass it on and read the final one
        if (++this.interim > MAX_INTERIM) {
          flow.error = `upstream sent more than ${MAX_INTERIM} interim (1xx) responses`;
          return this.failWith502(flow, flow.error);
        }
        if (!(head.status === 100 && flow.request.body !== null)) {
          this.ep.write(serializeResponseHead({ version: "HTTP/1.1", status: head.status, reason: head.reason, headers: stripHopByHop(head.headers) }));
        }
        continue;
      }
      if (head.status === 407 && this.upstream !== null && this.upstream.proxyForm !== null) {
        // the parent proxy wants (other) credentials: that is tapwire's problem, not a question for the client
        flow.error = this.upstream.proxyForm.refusal(head.reason);
        return this.failWith502(flow, flow.error);
      }
      let framing: Framing;
      try {
        framing = head.status === 101 ? { kind: "none" } : responseFraming(flow.request.method, head);
      } catch (e) {
        flow.error = `bad response from upstream: ${(e as Error).message}`;
        return this.failWith502(flow, flow.error);
      }
      this.resFraming = framing;
      this.resHead = head;
      flow.resRaw = head.raw ?? null;
      this.resDecoder = framing.kind === "chunked" ? new ChunkedDecoder() : framing.kind === "length" && framing.length > 0 ? new LengthDecoder(framing.length) : null;
      flow.response = { status: head.status, reason: head.reason, version: head.version, headers: head.headers, body: null };
      const keepAlive = (head.present ?? -1) & F_CONNECTION ? wantsKeepAlive(head.version, head.headers) : head.version === "HTTP/1.1";
      if (!keepAlive) this.upstreamReusable = false;
      this.resState = "hooks";
      this.after(this.ctx.pipeline.run("responseHeaders", flow), () => this.afterResponseHeaders(flow));
      return;
    }
  }

  private upstreamReusable = true;
  /** Interim responses seen for the current request. */
  private interim = 0;

  private afterResponseHeaders(flow: Flow): void {
    if (this.flow !== flow || this.mode === "closed") return;
    const res = flow.response!;
    if (res.status === 101 && flow.websocket) return this.switchToWebSocket(flow);
    if (flow.bufferResponse && this.resFraming.kind === "none") {
      // no body to read, but the response hooks still run before the head goes out
      this.resState = "collect";
      return this.responseBodyCollected(flow);
    }
    if (flow.bufferResponse && this.resFraming.kind !== "none") {
      this.resState = "collect";
    } else {
      if (this.sendWholeResponseAsReceived(flow)) return;
      // head and whatever body already arrived leave in one write
      this.ep.cork();
      this.sendResponseHead(flow, null);
      this.resState = "body";
      // no body to stream: `Content-Length: 0` (a redirect) ends here like a bodiless status does
      if (this.resFraming.kind === "none" || (this.resFraming.kind === "length" && this.resFraming.length === 0)) {
        this.responseComplete(flow);
        this.ep.uncork();
        return;
      }
    }
    const b = this.resBuf;
    this.resBuf = EMPTY;
    this.upstream?.ep.resume();
    if (b.length) this.pushResponseBody(flow, b);
    else if (this.resState === "collect" && this.resFraming.kind === "length" && this.resFraming.length === 0) this.responseBodyCollected(flow);
    this.ep.uncork();
  }

  /** Write the response head to the client, with framing for either a known body or the streamed one. */
  private sendResponseHead(flow: Flow, wholeBody: Uint8Array | null): void {
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
      if (f.kind === "chunked" || (f.kind === "close" && flow.request.version === "HTTP/1.1")) {
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
  private sendWholeResponseAsReceived(flow: Flow): boolean {
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
    this.upstream?.ep.resume();
    this.responseComplete(flow, raw.start === 0 ? raw.buf : raw.buf.subarray(raw.start));
    return true;
  }

  private pushResponseBody(flow: Flow, d: Uint8Array): void {
    let data: Uint8Array[];
    let done: boolean;
    if (this.resDecoder) {
      let out;
      try {
        out = this.resDecoder.push(d);
      } catch (e) {
        flow.error = `bad response body from upstream: ${(e as Error).message}`;
        // the head may still sit in the cork with the first body bytes: nothing reached the client, so it gets a 502
        if (this.resHeadSent && this.resBytes === 0 && this.ep.discardCork()) this.resHeadSent = false;
        if (!this.resHeadSent) return this.failWith502(flow, flow.error);
        this.finishFailed(flow);
        return this.destroy();
      }
      data = out.data;
      done = out.done;
      if (out.rest && out.rest.length) this.upstreamReusable = false;
    } else {
      data = [d]; // read until close
      done = false;
    }
    if (this.resState === "collect") {
      for (let i = 0; i < data.length; i++) {
        const p = data[i]!;
        this.resPartsSize += p.length;
        const soft = flow.bufferResponseMax;
        if (soft !== null && this.resPartsSize > soft && soft <= this.ctx.maxBufferedBody) {
          // past an addon's soft limit: stop holding the body, send what was read, stream the rest
          this.resParts.push(p.slice());
          return this.streamCollectedResponse(flow, data.slice(i + 1), done);
        }
        if (this.resPartsSize > this.ctx.maxBufferedBody) {
          flow.error = `response body larger than ${this.ctx.maxBufferedBody} bytes cannot be held for an addon`;
          return this.failWith502(flow, flow.error);
        }
        this.resParts.push(p.slice());
      }
      if (done) this.responseBodyCollected(flow);
      return;
    }
    let ok = true;
    // the last piece of a complete response waits until the flow is recorded (see responseComplete)
    let last: Uint8Array | null = null;
    for (let i = 0; i < data.length; i++) {
      const p = data[i]!;
      this.resBytes += p.length;
      if (flow.capture) flow.resBody.add(p);
      // the last piece is held for responseComplete as one buffer (framed by copy); the others go out at once
      if (done && i === data.length - 1) last = this.resChunkedOut ? encodeChunk(p) : p;
      else ok = (this.resChunkedOut ? writeChunk(this.ep, p) : this.ep.write(p)) && ok;
    }
    if (done) return this.responseComplete(flow, last);
    if (!ok) this.upstream?.ep.pause();
  }

  /** A response being collected outgrew flow.bufferResponseMax: head and held parts go out, the rest streams. */
  private streamCollectedResponse(flow: Flow, rest: Uint8Array[], done: boolean): void {
    flow.bufferResponse = false;
    this.ep.cork();
    this.sendResponseHead(flow, null);
    this.resState = "body";
    const held = this.resParts;
    this.resParts = [];
    this.resBytes = 0;
    let ok = true;
    const all = held.concat(rest);
    let last: Uint8Array | null = null;
    for (let i = 0; i < all.length; i++) {
      const p = all[i]!;
      this.resBytes += p.length;
      if (flow.capture) flow.resBody.add(p);
      if (done && i === all.length - 1) last = this.resChunkedOut ? encodeChunk(p) : p;
      else ok = (this.resChunkedOut ? writeChunk(this.ep, p) : this.ep.write(p)) && ok;
    }
    if (done) {
      this.responseComplete(flow, last);
      this.ep.uncork();
      return;
    }
    this.ep.uncork();
    if (!ok) this.upstream?.ep.pause();
  }

  private responseBodyCollected(flow: Flow): void {
    const res = flow.response!;
    res.body = concatAll(this.resParts);
    this.resParts = [];
    this.resBytes = res.body.length;
    this.resState = "hooks";
    this.after(this.ctx.pipeline.run("response", flow), () => {
      if (this.flow !== flow || this.mode === "closed") return;
      const body = flow.response!.body ?? EMPTY;
      if (flow.capture) flow.resBody.add(body);
      this.ctx.durable?.(true); // recorded in the hooks: on disk before the answer
      this.sendResponseHead(flow, body);
      this.resState = "done";
      this.endExchange(flow, false);
    });
  }

  /**
   * The response is complete: the response hooks run (the capture records the flow there) before its last bytes
   * (`last`, then the chunked terminator) go to the client, so a flow whose response a client received is in the
   * capture store's write-ahead file, whatever happens to the process next.
   */
  private responseComplete(flow: Flow, last: Uint8Array | null = null): void {
    this.resState = "done";
    flow.durationMs = Math.round(performance.now() - flow.t0);
    const send = () => {
      if (this.mode === "closed") return;
      if (last !== null) this.ep.write(last);
      if (this.resChunkedOut) this.ep.write(LAST_CHUNK);
      this.endExchange(flow, false);
    };
    const r = this.ctx.pipeline.run("response", flow);
    if (r === undefined) {
      const d = this.ctx.durable?.();
      if (d === undefined) return send();
      d.then(send);
      return;
    }
    r.then(
      () => this.durableThen(send),
      () => this.durableThen(send),
    );
  }

  /** Runs `next` once the capture has what was recorded so far on disk. */
  private durableThen(next: () => void): void {
    const d = this.ctx.durable?.();
    if (d === undefined) next();
    else d.then(next);
  }

  /** The response was fully sent: run the response hooks (if not run yet), recycle connections, go on. */
  private endExchange(flow: Flow, runResponseHooks: boolean): void {
    flow.durationMs ||= Math.round(performance.now() - flow.t0);
    const up = this.upstream;
    this.upstream = null;
    if (up) {
      up.ep.onDrain = null;
      up.ep.throttle = null;
      if (this.reqState === "done" && this.upstreamReusable && this.resFraming.kind !== "close") up.pool.release(up);
      else up.pool.drop(up);
    }
    this.upstreamReusable = true;
    if (runResponseHooks) {
      const r = this.ctx.pipeline.run("response", flow);
      if (r) r.catch(() => {});
    }
    this.maybeFinish();
  }

  /** Both directions done: ready for the next request on this connection (or close). */
  private maybeFinish(): void {
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

  onUpstreamClose(err: UpstreamError | null): void {
    const flow = this.flow;
    const conn = this.upstream;
    this.upstream = null;
    if (!flow || this.mode === "closed") return;
    if (this.mode === "websocket") {
      this.wsTap?.closed();
      this.wsTap = null;
      this.ep.end();
      this.mode = "closed";
      this.ctx.sessions.delete(this);
      return;
    }
    if (this.resState === "body" && this.resFraming.kind === "close") return this.responseComplete(flow);
    if (this.resState === "collect" && this.resFraming.kind === "close") return this.responseBodyCollected(flow);
    // the whole response was read and addons hold it: the connection just cannot be reused
    if (this.resState === "hooks" && flow.response?.body != null) {
      this.upstreamReusable = false;
      return;
    }
    // A pooled connection the server had already closed: retry once if nothing of the request body was lost
    // (never after a timeout: the upstream got the request and said nothing, a retry would only double the wait).
    if (conn && conn.uses > 1 && err?.kind !== "timeout" && this.resState === "head" && this.resBuf.length === 0 && !this.retried && (flow.request.body !== null || (this.reqBodyBytesSent === 0 && !this.reqDecoder))) {
      this.retried = true;
      this.reqState = "hooks";
      return this.forward(flow);
    }
    const why = err?.message ?? `${flow.request.host}:${flow.request.port} closed the connection ${this.resState === "head" ? "before responding" : "mid-response"}`;
    flow.error = why;
    if (!this.resHeadSent) return this.failWith502(flow, why, err?.kind === "timeout" ? 504 : 502);
    this.finishFailed(flow);
    this.destroy();
  }

  // ------------------------------------------------------------------ answers that do not come from upstream

  private answerFromAddon(flow: Flow): void {
    flow.answeredByAddon = true;
    const res = flow.response!;
    this.resState = "hooks";
    this.resFraming = { kind: "none" };
    this.after(this.ctx.pipeline.run("responseHeaders", flow), () => {
      if (this.flow !== flow || this.mode === "closed") return;
      // the body is known before the response hooks (capture records in them); a hook may still replace it
      const before = flow.response!.body ?? EMPTY;
      if (flow.capture) {
        flow.resBody.reset();
        flow.resBody.add(before);
      }
      this.after(this.ctx.pipeline.run("response", flow), () => {
        if (this.flow !== flow || this.mode === "closed") return;
        const b = flow.response!.body ?? EMPTY;
        if (flow.capture && b !== before) {
          flow.resBody.reset();
          flow.resBody.add(b);
        }
        if (this.reqState !== "done" && this.reqDecoder) this.closeAfter = true; // unread request body
        this.reqState = this.reqDecoder ? this.reqState : "done";
        this.ctx.durable?.(true); // recorded in the hooks: on disk before the answer
        this.sendResponseHead(flow, b);
        this.resState = "done";
        this.endExchange(flow, false);
      });
    });
  }

  /** Upstream failed before any response byte reached the client: answer 502 (504 for a timeout) naming the cause, record it. */
  private failWith502(flow: Flow, why: string, status: 502 | 504 = 502): void {
    if (this.upstream) {
      this.upstream.pool.drop(this.upstream);
      this.upstream = null;
    }
    if (this.resHeadSent) {
      this.finishFailed(flow);
      return this.destroy();
    }
    const body = new TextEncoder().encode(`tapwire: ${why}\n`);
    flow.response = { status, reason: statusReason(status), version: "HTTP/1.1", headers: [["Content-Type", "text/plain; charset=utf-8"]], body };
    if (flow.capture) {
      flow.resBody.reset();
      flow.resBody.add(body);
    }
    if (this.reqState !== "done") this.closeAfter = true;
    this.resState = "done";
    flow.durationMs = Math.round(performance.now() - flow.t0);
    // recorded (and on disk) before the answer goes out (see responseComplete)
    const r = this.ctx.pipeline.run("error", flow);
    if (r) r.catch(() => {});
    this.ctx.durable?.(true);
    this.sendResponseHead(flow, body);
    this.reqState = "done";
    this.maybeFinish();
  }

  /** The flow failed after the client got (part of) a response, or the client left: record, no answer. */
  private finishFailed(flow: Flow): void {
    flow.durationMs = Math.round(performance.now() - flow.t0);
    const r = this.ctx.pipeline.run("error", flow);
    if (r) r.catch(() => {});
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
        tls: { cert: leaf.cert, key: leaf.key, ALPNProtocols: ALPN_HTTP11 },
        initialData: bytes,
        socket: {
          ...clientSocketHandlers,
          open(s: Socket<HttpSession>) {
            new HttpSession(ctx, s, client, target);
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

  // ------------------------------------------------------------------ WebSocket

  private switchToWebSocket(flow: Flow): void {
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

function methodHasBody(method: string): boolean {
  return method === "POST" || method === "PUT" || method === "PATCH";
}


