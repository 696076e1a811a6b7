import { ChunkedDecoder, LengthDecoder, parseResponseHead, responseFraming } from "../http1/parse.ts";
import { chunkHeader, CRLF, encodeChunk, LAST_CHUNK, requestHeadWithFields, serializeRequestHead, serializeTrailers, statusReason } from "../http1/serialize.ts";
import { forwardableAsIs, getHeader, removeHeader, stripHopByHop, unchangedFields, wantsKeepAlive } from "../http1/headers.ts";
import type { Framing, HeaderList, ResponseHead } from "../http1/types.ts";
import { h1RequestToH2Flat, trailerFields } from "../http2/headers.ts";
import { type H2Origin, H2Refused, type H2StreamHandler, type H2UpstreamStream } from "./h2-upstream.ts";
import { type Deadline, DeadlineList } from "./deadlines.ts";
import { F_CONNECTION } from "../http1/fields.ts";
import { type BodyCapture, type ClientInfo, type Flow, hostPort } from "../../pipeline/flow.ts";
import type { ProxyContext } from "./context.ts";
import { concatAll, concatBytes, type Endpoint } from "./endpoint.ts";
import { type UpstreamConn, UpstreamError, type UpstreamOwner, type UpstreamTarget } from "./upstream.ts";

export const EMPTY = new Uint8Array(0);
/** Interim (1xx) responses relayed per request; one more fails the exchange (a flood of 103s is not relayed). */
const MAX_INTERIM = 10;
/** Refused HTTP/2 streams sent again per request (see retryH2). */
const MAX_H2_REFUSALS = 5;
const CHUNKED: Framing = { kind: "chunked" };
/** Chunks this large go out as size line, data and CRLF, without copying the data into a framed buffer. */
const CHUNK_COPY_MAX = 8 * 1024;

/** Writes one chunk of a chunked body (see CHUNK_COPY_MAX). False when the endpoint wants the sender to pause. */
export function writeChunk(ep: Endpoint, p: Uint8Array): boolean {
  if (p.length < CHUNK_COPY_MAX) return ep.write(encodeChunk(p));
  ep.write(chunkHeader(p.length));
  ep.write(p);
  return ep.write(CRLF);
}

export type BodyDecoder = ChunkedDecoder | LengthDecoder;

/** What the client connection is doing (an HTTP/2 stream only ever is "http" or "closed"). */
export type Mode = "http" | "peek" | "tunnel" | "upgraded" | "websocket" | "closed";
export type ReqState = "idle" | "hooks" | "collect" | "connecting" | "stream" | "done";
export type ResState = "none" | "head" | "hooks" | "body" | "collect" | "done";

/** A request body still to come from the client (an HTTP/1 body decoder, or an HTTP/2 stream's DATA). */
export interface RequestBodySource {
  readonly done: boolean;
}

/**
 * The protocol-independent half of the proxy: one exchange (a request and its response) at a time travelling
 * through the pipeline's hooks (requestHeaders, request, responseHeaders, response, error), to an upstream
 * connection from the pool and back, with capped copies for capture and backpressure both ways. It knows nothing
 * of how the client frames its messages: a client connection module (HTTP/1 in http-session.ts, one HTTP/2
 * stream in h2-session.ts) subclasses it, feeds it the request (startExchange, requestBodyData) and implements the
 * client-side operations below (send the response head, body pieces, interim responses, pause/resume the client).
 */
export abstract class Exchange implements UpstreamOwner, H2StreamHandler {
  protected mode: Mode = "http";
  /** Set when the client connection must close after the current response. */
  protected closeAfter = false;

  // current exchange
  protected flow: Flow | null = null;
  protected reqState: ReqState = "idle";
  /** The request body still to come, or null when there is none (or it was all read). */
  protected reqDecoder: RequestBodySource | null = null;
  protected reqFraming: Framing = { kind: "none" };
  protected reqChunkedOut = false;
  protected reqParts: Uint8Array[] = [];
  protected reqPartsSize = 0;
  protected reqBodyBytesSent = 0;
  protected expectContinue = false;
  protected upstream: UpstreamConn | null = null;
  protected retried = false;
  protected resState: ResState = "none";
  protected resBuf: Uint8Array = EMPTY;
  protected resFraming: Framing = { kind: "none" };
  /** The final response head as parsed, with its bytes: forwarded as it is if nobody changed it. */
  protected resHead: ResponseHead | null = null;
  protected resDecoder: BodyDecoder | null = null;
  protected resHeadSent = false;
  protected resBytes = 0;
  protected resParts: Uint8Array[] = [];
  protected resPartsSize = 0;
  /**
   * The client endpoint that takes this response's chunked framing as the upstream sent it (see
   * ChunkedDecoder's passthrough and forwardFramedResponse), or null when the body is framed again.
   */
  protected resFramedTo: Endpoint | null = null;
  protected upstreamReusable = true;
  /** Interim responses seen for the current request. */
  protected interim = 0;
  /** The origin's HTTP/2 stream carrying this exchange (instead of `upstream`), its body being read, its end seen. */
  protected h2up: H2UpstreamStream | null = null;
  protected h2Reading = false;
  protected upstreamEnded = false;
  /** Trailers of the response (from an HTTP/2 origin), for a client that can take them. */
  protected resTrailers: HeaderList | null = null;
  /** Trailers of the request body (HTTP/1 chunked trailer section, or an HTTP/2 client's trailing HEADERS), once it ended. */
  protected reqTrailers: HeaderList | null = null;
  /** The last piece of an HTTP/2 origin's body (its announced length reached), held until the stream ends. */
  private h2Last: Uint8Array | null = null;
  /** The deadlines of origin streams waiting for their response head (shared by every exchange, see headDeadlines). */
  private h2Deadlines: DeadlineList | null = null;
  /** The deadline of this exchange's origin stream waiting for its response head. */
  private h2Deadline: Deadline | null = null;
  /** Times this request's HTTP/2 stream was refused and sent again (see retryH2). */
  private h2Refusals = 0;

  constructor(
    protected readonly ctx: ProxyContext,
    protected readonly client: ClientInfo,
  ) {}

  // ------------------------------------------------------------------ what the client connection implements

  /** Write the response head to the client, framed for `wholeBody` (known) or for the body streamed next (null). */
  protected abstract sendResponseHead(flow: Flow, wholeBody: Uint8Array | null): void;
  /** Send head and body as the upstream's bytes when nothing needs rewriting; false (nothing sent) otherwise. */
  protected abstract sendWholeResponseAsReceived(flow: Flow): boolean;
  /** One piece of a streamed response body; false when the client wants the sender to pause. */
  protected abstract writeResponseBody(p: Uint8Array): boolean;
  /** The last piece of a response body, framed, to be written by finishResponseBody. */
  protected abstract lastResponsePiece(p: Uint8Array): Uint8Array;
  /** The response body ends: write `last` (if any) and whatever ends the body on the client's side. */
  protected abstract finishResponseBody(last: Uint8Array | null): void;
  /** An interim (1xx) response from upstream. */
  protected abstract sendInterim(head: ResponseHead): void;
  /** `Expect: 100-continue` and the body is wanted: tell the client to send it. */
  protected abstract sendContinue(): void;
  /** The request body was held while hooks ran: feed what the client sent meanwhile (resume: let it flow again first). */
  protected abstract feedHeldRequestBody(resume: boolean): void;
  /** Whether the request body still to come has no known length (it goes upstream chunked). */
  protected abstract requestBodyChunked(): boolean;
  /** Stop / restart reading the client. */
  protected abstract pauseClient(): void;
  protected abstract resumeClient(): void;
  /** Buffer the next writes to the client into one / flush them. */
  protected abstract corkClient(): void;
  protected abstract uncorkClient(): void;
  /** Drop what is corked (nothing reached the client yet); false when nothing could be dropped. */
  protected abstract discardClientCork(): boolean;
  /** Answer with a plain-text error and end (the request body cannot be read on). */
  protected abstract refuseRequest(status: number, text: string): void;
  /** Both directions of the exchange are done: go on to the next one, or close. */
  protected abstract maybeFinish(): void;
  /** The TLS name for an upstream (the client's SNI when the request goes where its CONNECT did), or undefined. */
  protected abstract upstreamServername(host: string, port: number): string | undefined;
  /** Tear the client side down at once (an exchange that cannot be completed). */
  abstract destroy(): void;
  /**
   * The client endpoint when the response body goes to it chunked over HTTP/1 (so an upstream's chunked framing
   * can be relayed as it came), else null. An HTTP/2 client frames the body itself.
   */
  protected chunkedClientEndpoint(): Endpoint | null {
    return null;
  }
  /**
   * The client's endpoint when response body pieces written to the client are written to it (HTTP/1), so a
   * socket read of the body can be released there once written (Endpoint.release); null otherwise (an HTTP/2
   * stream may keep what it was given).
   */
  protected clientEndpoint(): Endpoint | null {
    return null;
  }
  /** A 101 to a WebSocket upgrade: the client connection becomes a relay. */
  protected abstract switchToWebSocket(flow: Flow): void;
  /** Bytes from upstream while relaying a WebSocket. */
  protected abstract webSocketServerBytes(d: Uint8Array): void;
  /** The upstream of a WebSocket relay closed. */
  protected abstract webSocketUpstreamClosed(): void;

  // ------------------------------------------------------------------ the exchange

  /** Stop / restart reading the response from upstream (the client is not taking it, or hooks hold it). */
  protected pauseUpstream(): void {
    this.upstream?.ep.pause();
    if (this.h2Reading) this.h2up?.pause();
  }

  protected resumeUpstream(): void {
    this.upstream?.ep.resume();
    if (this.h2Reading) this.h2up?.resume();
  }

  /** A new request arrived (flow.request holds its head; reqDecoder, reqFraming, expectContinue are set): run it. */
  protected startExchange(flow: Flow): void {
    this.flow = flow;
    this.reqParts = [];
    this.reqPartsSize = 0;
    this.reqBodyBytesSent = 0;
    this.retried = false;
    this.h2Refusals = 0;
    this.resState = "none";
    this.resHead = null;
    this.resHeadSent = false;
    this.resBytes = 0;
    this.resParts = [];
    this.resPartsSize = 0;
    this.resFramedTo = null;
    this.resTrailers = null;
    this.reqTrailers = null;
    this.h2Last = null;
    this.upstreamEnded = false;
    this.reqState = "hooks";
    this.after(this.ctx.pipeline.run("requestHeaders", flow), () => this.afterRequestHeaders(flow));
  }

  protected after(r: void | Promise<void>, next: () => void): void {
    if (r === undefined) return next();
    (r as Promise<void>).then(next, (e) => this.addonFailed(e));
  }

  protected addonFailed(e: unknown): void {
    const flow = this.flow;
    if (!flow || this.mode === "closed") return;
    flow.error = `addon error: ${e instanceof Error ? e.message : String(e)}`;
    this.failWith502(flow, flow.error);
  }

  protected afterRequestHeaders(flow: Flow): void {
    if (this.flow !== flow || this.mode === "closed") return;
    if (flow.response || flow.bufferRequest) {
      // The body is needed whole (buffering addon), or must be read off the wire before an addon's answer.
      if (this.reqDecoder) {
        if (this.expectContinue && !flow.response) this.sendContinue();
        if (flow.response && this.expectContinue) {
          // The client waits for 100 before sending a body we do not need: answer and close.
          this.closeAfter = true;
          this.reqDecoder = null;
          return this.afterRequestBody(flow);
        }
        this.reqState = "collect";
        // the client may have been paused while the header hooks ran: the body is read now, so let it flow again
        this.feedHeldRequestBody(true);
        return;
      }
      return this.afterRequestBody(flow);
    }
    this.reqState = "hooks";
    this.after(this.ctx.pipeline.run("request", flow), () => this.forward(flow));
  }

  /** Collected (or no) body: run the request hooks with it, then answer or forward. */
  protected afterRequestBody(flow: Flow): void {
    if (this.flow !== flow || this.mode === "closed") return;
    if (this.reqParts.length) flow.request.body = concatAll(this.reqParts);
    else if (flow.bufferRequest) flow.request.body = EMPTY;
    this.reqParts = [];
    this.reqState = "hooks";
    if (flow.response) return this.answerFromAddon(flow);
    this.after(this.ctx.pipeline.run("request", flow), () => this.forward(flow));
  }

  /**
   * Pieces of the request body as the client sent them (unframed); `done`: the body is complete. Collected for an
   * addon, or streamed to upstream with backpressure.
   */
  protected requestBodyData(flow: Flow, data: Uint8Array[], done: boolean, framed: Uint8Array | null = null): void {
    if (done && this.reqTrailers !== null && this.reqTrailers.length) flow.extra.req_trailers = this.reqTrailers;
    if (this.reqState === "collect") {
      for (const p of data) {
        this.reqPartsSize += p.length;
        if (this.reqPartsSize > this.ctx.maxBufferedBody) {
          flow.error = `request body larger than ${this.ctx.maxBufferedBody} bytes cannot be held for an addon`;
          this.finishFailed(flow);
          this.reqState = "done";
          return this.refuseRequest(413, `tapwire: ${flow.error}\n`);
        }
        this.reqParts.push(p.slice());
      }
      if (done) {
        this.reqDecoder = null;
        this.afterRequestBody(flow);
      }
      return;
    }
    if (this.h2up !== null) return this.requestBodyToH2(flow, this.h2up, data, done);
    // streaming to upstream; a long upload is activity too (the upstream may say nothing until it ends)
    const up = this.upstream;
    if (up === null) return; // the origin's HTTP/2 stream ended before the body did (see h2BodyEnded): dropped
    up.touch();
    let ok = true;
    const dec = framed !== null ? (this.reqDecoder as ChunkedDecoder) : null;
    if (dec !== null) {
      // `framed`: the bytes the client sent, its chunked framing relayed as it came (see ChunkedDecoder)
      if (flow.capture) teeFramed(flow.reqBody, dec, data);
      this.reqBodyBytesSent += dec.payloadBytes;
      if (dec.prefix !== null) ok = up.ep.write(dec.prefix);
      const end = dec.forwardEnd;
      if (end > 0) ok = up.ep.write(end === framed!.length ? framed! : framed!.subarray(0, end)) && ok;
    } else {
      for (const p of data) {
        if (flow.capture) flow.reqBody.add(p);
        this.reqBodyBytesSent += p.length;
        ok = (this.reqChunkedOut ? writeChunk(up.ep, p) : up.ep.write(p)) && ok;
      }
    }
    if (done) {
      // the trailer section goes on when the body goes upstream chunked (a length-framed body has no place for it)
      if (this.reqChunkedOut) up.ep.write(this.reqTrailers !== null && this.reqTrailers.length ? trailerSection(this.reqTrailers) : LAST_CHUNK);
      this.reqDecoder = null;
      this.reqState = "done";
      if (flow.capture) flow.timing.sent = performance.now();
      this.maybeFinish();
    } else if (!ok) {
      this.pauseClient();
      up.ep.onDrain = () => this.resumeClient();
    }
  }

  // ------------------------------------------------------------------ upstream

  protected forward(flow: Flow): void {
    if (this.flow !== flow || this.mode === "closed") return;
    if (flow.response) return this.answerFromAddon(flow);
    // phase marks (HAR timings) only for flows that are recorded: performance.now() is not free
    if (flow.capture) flow.timing.forward ||= performance.now();
    const r = flow.request;
    const target: UpstreamTarget = {
      scheme: r.scheme,
      host: r.host,
      port: r.port,
      servername: this.upstreamServername(r.host, r.port),
    };
    if (flow.websocket) target.websocket = true; // through a parent proxy it takes a CONNECT tunnel
    else if (r.scheme === "https" && this.ctx.h2pool) {
      // the origin's session, when one is open, without a promise per request
      const s = this.ctx.h2pool.ready(target);
      if (s) return this.sendRequestH2(flow, s);
      if (s === undefined) return this.forwardH2(flow, target);
    }
    return this.forwardH1(flow, target);
  }

  protected forwardH1(flow: Flow, target: UpstreamTarget): void {
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

  // ------------------------------------------------------------------ upstream over HTTP/2

  /**
   * An https origin that picked (or may pick) h2 in ALPN: the request goes as a stream on the origin's pooled
   * HTTP/2 session. An origin that picks http/1.1 is remembered and gets the HTTP/1 pool; one that cannot be
   * reached is tried once more through the HTTP/1 pool, so the error a user sees is the same either way.
   */
  protected forwardH2(flow: Flow, target: UpstreamTarget): void {
    const pool = this.ctx.h2pool!;
    this.reqState = "connecting";
    pool.session(target).then(
      (session) => {
        if (this.flow !== flow || this.mode === "closed") return;
        if (session === null) return this.forwardH1(flow, target);
        this.sendRequestH2(flow, session);
      },
      (e: UpstreamError) => {
        if (this.flow !== flow || this.mode === "closed") return;
        if (e.kind !== "timeout") return this.forwardH1(flow, target);
        flow.error = e.message;
        this.failWith502(flow, e.message, 504);
      },
    );
  }

  private sendRequestH2(flow: Flow, origin: H2Origin): void {
    const r = flow.request;
    const body = r.body;
    let stream: H2UpstreamStream;
    // a body still to come may end with trailers: the stream then ends with them (none: an empty DATA frame ends it)
    const mayTrail = this.reqDecoder !== null || (body !== null && this.reqTrailers !== null && this.reqTrailers.length > 0);
    try {
      // buffered (possibly rewritten) body: its real length
      const fields = h1RequestToH2Flat({ method: r.method, target: r.path, headers: r.headers }, r.scheme, undefined, body !== null);
      if (body !== null && (body.length > 0 || methodHasBody(r.method))) fields.push("content-length", String(body.length));
      // this exchange is the stream's handler: its events come to the h2* methods (no closures per request)
      stream = origin.open(fields, body === null && this.reqDecoder === null, mayTrail, this);
    } catch (e) {
      // the connection filled up (or went away) since the pool handed it out: once more, on another
      if (e instanceof H2Refused && this.retryH2(flow)) return;
      flow.error = `cannot send the request over HTTP/2: ${(e as Error).message}`;
      return this.failWith502(flow, flow.error);
    }
    this.h2up = stream;
    this.h2Reading = false;
    this.upstreamEnded = false;
    const timing = flow.capture ? flow.timing : null;
    if (timing) {
      timing.send = performance.now();
      const info = h2ConnInfo(origin);
      timing.conn = info;
      timing.reused = info.streams++ > 0;
    }
    flow.extra.upstream_h2_stream_id = stream.id || null;
    this.interim = 0;
    this.resState = "head";
    this.resBuf = EMPTY;
    const idleSec = this.ctx.pool.opts.idleTimeoutSec;
    if (idleSec > 0) {
      // no response head within the upstream idle timeout: 504 (as an HTTP/1 upstream that stays silent); one
      // timer for all the streams waiting (see DeadlineList)
      if (this.h2Deadlines === null || this.h2Deadlines.ms !== idleSec * 1000) this.h2Deadlines = headDeadlines(idleSec * 1000);
      this.h2Deadline = this.h2Deadlines.add(() => {
        this.h2Deadline = null;
        this.h2Failed(stream, new UpstreamError("timeout", `${r.host}:${r.port} sent no response within ${idleSec} s`));
      });
    }
    if (body !== null) {
      if (flow.capture) flow.reqBody.add(body);
      stream.end(mayTrail ? this.reqTrailers : null, body);
      this.reqState = "done";
      if (timing) timing.sent = performance.now();
    } else if (this.reqDecoder) {
      this.reqState = "stream";
      this.feedHeldRequestBody(false);
    } else {
      this.reqState = "done";
      if (timing) timing.sent = performance.now();
    }
    this.resumeClient();
  }

  /** The origin stream's head deadline no longer applies. */
  private stopH2Clock(): void {
    if (this.h2Deadline !== null) this.h2Deadlines!.cancel(this.h2Deadline);
    this.h2Deadline = null;
  }

  /** Request body pieces to the upstream's HTTP/2 stream, with its backpressure. */
  private requestBodyToH2(flow: Flow, stream: H2UpstreamStream, data: Uint8Array[], done: boolean): void {
    let ok = true;
    for (const p of data) {
      if (flow.capture) flow.reqBody.add(p);
      this.reqBodyBytesSent += p.length;
      ok = stream.write(p) && ok;
    }
    if (done) {
      stream.end(this.reqTrailers);
      this.reqDecoder = null;
      this.reqState = "done";
      if (flow.capture) flow.timing.sent = performance.now();
      this.maybeFinish();
    } else if (!ok) this.pauseClient(); // until h2Writable
  }

  h2Writable(stream: H2UpstreamStream): void {
    if (this.h2up === stream && this.mode !== "closed") this.resumeClient();
  }

  h2Response(stream: H2UpstreamStream, status: number, headers: HeaderList, headOnly: boolean): void {
    this.stopH2Clock();
    const flow = this.flow;
    if (this.h2up !== stream || !flow || this.mode === "closed") return;
    if (flow.capture) flow.timing.firstByte ||= performance.now();
    flow.response = { status, reason: statusReason(status), version: "HTTP/2", headers, body: null };
    flow.resRaw = null;
    this.resHead = null;
    this.resDecoder = null;
    // a response that ended with its head (a gRPC trailers-only answer, say) has no body either
    const noBody = flow.request.method === "HEAD" || status === 204 || status === 304 || headOnly;
    const cl = noBody ? undefined : getHeader(headers, "content-length");
    // a known length frames the body for HTTP/1 clients; the body ends when the stream does either way
    this.resFraming = noBody ? { kind: "none" } : cl !== undefined && /^\d{1,15}$/.test(cl.trim()) ? { kind: "length", length: Number(cl.trim()) } : { kind: "close" };
    this.resState = "hooks";
    this.h2Reading = true; // the body comes to h2Data; hooks pause the stream again through onUpstreamData
    this.after(this.ctx.pipeline.run("responseHeaders", flow), () => this.afterResponseHeaders(flow));
  }

  h2Data(stream: H2UpstreamStream, chunk: Uint8Array): void {
    if (this.h2up === stream) this.onUpstreamData(chunk);
  }

  /** An interim (1xx) head from the origin's stream: relayed as from an HTTP/1 origin (see parseResponse). */
  h2Interim(stream: H2UpstreamStream, status: number, headers: HeaderList): void {
    const flow = this.flow;
    if (this.h2up !== stream || !flow || this.mode === "closed" || this.resHeadSent) return;
    if (!(status >= 100 && status < 200) || status === 101) return;
    if (++this.interim > MAX_INTERIM) {
      flow.error = `upstream sent more than ${MAX_INTERIM} interim (1xx) responses`;
      return this.failWith502(flow, flow.error);
    }
    if (status === 100 && flow.request.body !== null) return; // the body went whole: nobody waits for a 100
    this.sendInterim({ version: "HTTP/1.1", status, reason: statusReason(status), headers });
  }

  /** The origin's stream ended (with these trailers): the response is complete once its body went out. */
  h2End(stream: H2UpstreamStream, trailers: HeaderList): void {
    this.stopH2Clock();
    const flow = this.flow;
    if (this.h2up !== stream || !flow || this.mode === "closed") return;
    if (trailers.length) {
      flow.extra.res_trailers = trailers;
      this.resTrailers = trailers;
    }
    this.upstreamEnded = true;
    this.h2BodyEnded(flow);
  }

  /** After the stream ended: complete the response, unless the hooks still hold it (afterResponseHeaders calls again). */
  protected h2BodyEnded(flow: Flow): void {
    if (!this.upstreamEnded || this.h2up === null) return;
    // the origin answered before the request body ended: the rest of it is not sent (RST_STREAM CANCEL, so the
    // stream does not stay open our way on the connection); what the client still sends is dropped
    // (requestBodyData), and the client connection does as after any response that outran its request
    if (this.reqState !== "done" && this.resState !== "hooks") this.h2up.reset(NGHTTP2_CANCEL);
    if (this.resState === "body") {
      this.h2up = null;
      const held = this.h2Last;
      this.h2Last = null;
      return this.responseComplete(flow, held === null ? null : this.lastResponsePiece(held));
    }
    if (this.resState === "collect") {
      this.h2up = null;
      return this.responseBodyCollected(flow);
    }
    if (this.resState === "done") this.h2up = null;
  }

  h2Failed(stream: H2UpstreamStream, e: UpstreamError): void {
    this.stopH2Clock();
    const flow = this.flow;
    if (this.h2up !== stream || !flow || this.mode === "closed") return;
    this.cancelH2();
    if (this.resState === "done") return;
    // refused (REFUSED_STREAM, or above the last stream id of a GOAWAY): the origin did not process it (RFC 9113 8.7)
    if (e instanceof H2Refused && this.retryH2(flow)) return;
    flow.error = e.message;
    if (!this.resHeadSent) return this.failWith502(flow, e.message, e.kind === "timeout" ? 504 : 502);
    this.finishFailed(flow);
    this.destroy();
  }

  /**
   * Sends the request again after its HTTP/2 stream was refused (up to MAX_H2_REFUSALS times: an origin with a low
   * stream limit under many concurrent requests refuses several in a row, each time on a fuller connection), when
   * nothing of it is lost: no response
   * byte reached the client and the body (if any) is held whole or was not sent yet. False: not retried.
   */
  private retryH2(flow: Flow): boolean {
    if (this.h2Refusals >= MAX_H2_REFUSALS || this.resHeadSent || this.interim > 0 || !(flow.request.body !== null || (this.reqBodyBytesSent === 0 && !this.reqDecoder))) return false;
    this.h2Refusals++;
    this.h2up = null;
    this.reqState = "hooks";
    this.forward(flow);
    return true;
  }

  /** Lets go of the upstream connection or stream of this exchange (the exchange is abandoned). */
  protected dropUpstream(): void {
    if (this.upstream) {
      this.upstream.pool.drop(this.upstream);
      this.upstream = null;
    }
    this.cancelH2();
  }

  /** Drops the origin's HTTP/2 stream of this exchange (RST_STREAM CANCEL if it is still open). */
  protected cancelH2(): void {
    const s = this.h2up;
    if (s === null) return;
    this.h2up = null;
    this.h2Reading = false;
    this.stopH2Clock();
    s.reset(NGHTTP2_CANCEL);
  }

  protected sendRequest(flow: Flow, conn: UpstreamConn): void {
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
    this.resFramedTo = null;
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
      // chunked in, chunked out, nobody changes the body: the client's framing goes on as it came
      const dec = this.reqDecoder;
      if (this.reqChunkedOut && dec instanceof ChunkedDecoder && dec.startPassthrough()) dec.skipData = !flow.capture || flow.reqBody.kept >= flow.reqBody.limit;
      conn.ep.cork();
      conn.ep.write(head);
      this.reqState = "stream";
      this.feedHeldRequestBody(false);
      conn.ep.uncork();
    } else {
      conn.ep.write(head);
      this.reqState = "done";
      if (timing) timing.sent = performance.now();
    }
    // the silence clock runs from the request on, fresh or pooled
    conn.watch();
    this.resumeClient();
  }

  /**
   * The request head as received, with a request line for the upstream, when the pipeline left the fields as
   * they were and they hold nothing a proxy must rewrite (see forwardableAsIs); else null.
   */
  protected requestHeadAsReceived(flow: Flow): Uint8Array | null {
    const raw = flow.reqRaw;
    const r = flow.request;
    if (raw === null || !unchangedFields(r.headers, raw.fields)) return null;
    const chunked = this.requestBodyChunked();
    if (!forwardableAsIs(r.headers, chunked ? CHUNKED : this.reqFraming, true, flow.reqPresent)) return null;
    const head = requestHeadWithFields(r.method, r.path, raw);
    if (head !== null) this.reqChunkedOut = chunked;
    return head;
  }

  /** The request head for the upstream, rebuilt: hop-by-hop fields removed, framing from what was parsed. Throws on an invalid head. */
  protected rebuildRequestHead(flow: Flow): Uint8Array {
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
    } else if (this.requestBodyChunked()) {
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
      return this.webSocketServerBytes(d);
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
        this.pauseUpstream();
        return;
      default:
        // bytes after the response ended: the upstream connection is out of step
        if (this.upstream) {
          this.upstream.pool.drop(this.upstream);
          this.upstream = null;
        }
    }
  }

  protected parseResponse(flow: Flow): void {
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
      // the bytes after the head: their view is made only when needed (see sendWholeReadAsReceived)
      const buf = this.resBuf;
      const end = parsed.end;
      if (head.status >= 100 && head.status < 200 && head.status !== 101) {
        this.resBuf = end === buf.length ? EMPTY : buf.subarray(end);
        // interim response (100 Continue, 103 Early Hints): pass it on and read the final one
        if (++this.interim > MAX_INTERIM) {
          flow.error = `upstream sent more than ${MAX_INTERIM} interim (1xx) responses`;
          return this.failWith502(flow, flow.error);
        }
        if (!(head.status === 100 && flow.request.body !== null)) {
          this.sendInterim(head);
        }
        continue;
      }
      this.resBuf = EMPTY; // what follows the head is set below, once the header hooks have run
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
      this.resDecoder = null; // made below, when the body is read (the whole-read path needs none)
      flow.response = { status: head.status, reason: head.reason, version: head.version, headers: head.headers, body: null };
      const keepAlive = (head.present ?? -1) & F_CONNECTION ? wantsKeepAlive(head.version, head.headers) : head.version === "HTTP/1.1";
      if (!keepAlive) this.upstreamReusable = false;
      this.resState = "hooks";
      const r = this.ctx.pipeline.run("responseHeaders", flow);
      // the common small response (hooks done at once, head and whole body in this read): see sendWholeReadAsReceived
      if (r === undefined && end < buf.length && this.sendWholeReadAsReceived(flow, buf, end)) return;
      this.resBuf = end === buf.length ? EMPTY : buf.subarray(end);
      this.resDecoder = framing.kind === "chunked" ? new ChunkedDecoder() : framing.kind === "length" && framing.length > 0 ? new LengthDecoder(framing.length) : null;
      this.after(r, () => this.afterResponseHeaders(flow));
      return;
    }
  }

  /**
   * Right after the response header hooks ran synchronously, when `buf` (one read) holds the head and, from `at`
   * on, more bytes: send head and body as that read if it is the whole response and nothing needs rewriting, and
   * end the exchange. False (nothing done) otherwise; the usual path then takes the bytes from `at` on.
   */
  protected sendWholeReadAsReceived(_flow: Flow, _buf: Uint8Array, _at: number): boolean {
    return false;
  }

  protected afterResponseHeaders(flow: Flow): void {
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
      this.corkClient();
      this.sendResponseHead(flow, null);
      this.resState = "body";
      // no body to stream: `Content-Length: 0` (a redirect) ends here like a bodiless status does
      if (this.resFraming.kind === "none" || (this.resFraming.kind === "length" && this.resFraming.length === 0)) {
        this.responseComplete(flow);
        this.uncorkClient();
        return;
      }
      // chunked from an HTTP/1 origin, chunked to an HTTP/1 client, streamed unchanged: the framing goes as it came
      const dec = this.resDecoder;
      const to = this.chunkedClientEndpoint();
      if (to !== null && dec instanceof ChunkedDecoder && dec.startPassthrough()) {
        this.resFramedTo = to;
        dec.skipData = !flow.capture || flow.resBody.kept >= flow.resBody.limit;
      }
    }
    const b = this.resBuf;
    this.resBuf = EMPTY;
    this.resumeUpstream();
    if (b.length) this.pushResponseBody(flow, b);
    else if (this.resState === "collect" && this.resFraming.kind === "length" && this.resFraming.length === 0) this.responseBodyCollected(flow);
    if (this.upstreamEnded && this.flow === flow) this.h2BodyEnded(flow);
    this.uncorkClient();
  }

  /** Write the response head to the client, with framing for either a known body or the streamed one. */

  protected pushResponseBody(flow: Flow, d: Uint8Array): void {
    let data: Uint8Array[];
    let done: boolean;
    if (this.resDecoder) {
      let out;
      try {
        out = this.resDecoder.push(d);
      } catch (e) {
        flow.error = `bad response body from upstream: ${(e as Error).message}`;
        // the head may still sit in the cork with the first body bytes: nothing reached the client, so it gets a 502
        if (this.resHeadSent && this.resBytes === 0 && this.discardClientCork()) this.resHeadSent = false;
        if (!this.resHeadSent) return this.failWith502(flow, flow.error);
        this.finishFailed(flow);
        return this.destroy();
      }
      data = out.data;
      done = out.done;
      if (out.rest && out.rest.length) this.upstreamReusable = false;
      // a chunked body's trailer section: recorded, and relayed where the client's framing has room for it
      if (done && this.resDecoder instanceof ChunkedDecoder && this.resDecoder.trailers.length) {
        this.resTrailers = this.resDecoder.trailers;
        flow.extra.res_trailers = this.resTrailers;
      }
    } else {
      data = [d]; // read until close
      done = false;
    }
    if (this.resFramedTo !== null) return this.forwardFramedResponse(flow, this.resFramedTo, d, data, done);
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
    if (this.h2Last !== null) {
      // more than the announced length (the stream then fails): what was held goes first
      ok = this.writeResponseBody(this.h2Last);
      this.h2Last = null;
    }
    for (let i = 0; i < data.length; i++) {
      const p = data[i]!;
      this.resBytes += p.length;
      if (flow.capture) flow.resBody.add(p);
      // the last piece is held for responseComplete as one buffer (framed by copy); the others go out at once
      if (done && i === data.length - 1) last = this.lastResponsePiece(p);
      // an HTTP/2 origin's body reached its announced length: held until its stream ends (h2BodyEnded), to go
      // with the end of the response (for an HTTP/2 client one DATA frame with END_STREAM, not two)
      else if (this.h2up !== null && this.resFraming.kind === "length" && this.resBytes === this.resFraming.length && i === data.length - 1) this.h2Last = p;
      else ok = this.writeResponseBody(p) && ok;
    }
    if (done) return this.responseComplete(flow, last);
    if (!ok) this.pauseUpstream();
    // a read from an HTTP/1 origin: what was written of it is all that refers to it (the capture copies)
    if (this.h2up === null) this.clientEndpoint()?.release(d);
  }

  /**
   * One read of a chunked response relayed with its framing as the upstream sent it (see ChunkedDecoder's
   * passthrough): one write per read, where framing each chunk again took three. The decoder still runs over the
   * bytes, for the capture's capped copy and to find the end; the end itself (last chunk, trailer section) is not
   * relayed but written by finishResponseBody once the flow is recorded, with the trailers filtered as always.
   */
  private forwardFramedResponse(flow: Flow, to: Endpoint, d: Uint8Array, data: Uint8Array[], done: boolean): void {
    const dec = this.resDecoder as ChunkedDecoder;
    this.resBytes += dec.payloadBytes;
    if (flow.capture) teeFramed(flow.resBody, dec, data);
    const end = dec.forwardEnd;
    const bytes = end === 0 ? null : end === d.length ? d : d.subarray(0, end);
    const pre = dec.prefix;
    if (done) {
      // what this read holds before the last chunk waits until the flow is recorded (see responseComplete)
      return this.responseComplete(flow, pre === null ? bytes : bytes === null ? pre : concatBytes(pre, bytes));
    }
    let ok = true;
    if (pre !== null) ok = to.write(pre);
    if (bytes !== null) ok = to.write(bytes) && ok;
    if (!ok) this.pauseUpstream();
    to.release(d); // the decoder and the capture keep copies only
  }

  /** A response being collected outgrew flow.bufferResponseMax: head and held parts go out, the rest streams. */
  protected streamCollectedResponse(flow: Flow, rest: Uint8Array[], done: boolean): void {
    flow.bufferResponse = false;
    this.corkClient();
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
      if (done && i === all.length - 1) last = this.lastResponsePiece(p);
      else ok = this.writeResponseBody(p) && ok;
    }
    if (done) {
      this.responseComplete(flow, last);
      this.uncorkClient();
      return;
    }
    this.uncorkClient();
    if (!ok) this.pauseUpstream();
  }

  protected responseBodyCollected(flow: Flow): void {
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
  protected responseComplete(flow: Flow, last: Uint8Array | null = null): void {
    this.resState = "done";
    flow.durationMs = Math.round(performance.now() - flow.t0);
    const send = () => {
      if (this.mode === "closed") return;
      this.finishResponseBody(last);
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
  protected durableThen(next: () => void): void {
    const d = this.ctx.durable?.();
    if (d === undefined) next();
    else d.then(next);
  }

  /** The response was fully sent: run the response hooks (if not run yet), recycle connections, go on. */
  protected endExchange(flow: Flow, runResponseHooks: boolean): void {
    flow.durationMs ||= Math.round(performance.now() - flow.t0);
    if (this.h2up !== null) this.cancelH2(); // the response ended before the origin's stream did
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

  onUpstreamClose(err: UpstreamError | null): void {
    const flow = this.flow;
    const conn = this.upstream;
    this.upstream = null;
    if (!flow || this.mode === "closed") return;
    if (this.mode === "websocket") {
      return this.webSocketUpstreamClosed();
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

  protected answerFromAddon(flow: Flow): void {
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
  protected failWith502(flow: Flow, why: string, status: 502 | 504 = 502): void {
    this.cancelH2();
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
  protected finishFailed(flow: Flow): void {
    this.cancelH2();
    flow.durationMs = Math.round(performance.now() - flow.t0);
    const r = this.ctx.pipeline.run("error", flow);
    if (r) r.catch(() => {});
  }
}

const NGHTTP2_CANCEL = 0x8;

/** One deadline list per timeout length (one per proxy in practice): a timer for all waiting streams, not one each. */
const deadlineLists = new Map<number, DeadlineList>();
function headDeadlines(ms: number): DeadlineList {
  let d = deadlineLists.get(ms);
  if (!d) {
    d = new DeadlineList(ms);
    deadlineLists.set(ms, d);
  }
  return d;
}

/** What HAR timings show of an origin's HTTP/2 connection (one per session: its streams share it). */
interface H2ConnInfo {
  readonly id: number;
  readonly remoteAddr: string;
  readonly connectMs: number;
  readonly sslMs: number;
  streams: number;
}
const h2Conns = new WeakMap<H2Origin, H2ConnInfo>();
let nextH2ConnId = 1_000_000_000;
function h2ConnInfo(origin: H2Origin): H2ConnInfo {
  let c = h2Conns.get(origin);
  if (!c) {
    c = { id: nextH2ConnId++, remoteAddr: origin.remoteAddress, connectMs: -1, sslMs: -1, streams: 0 };
    h2Conns.set(origin, c);
  }
  return c;
}

/**
 * The capture's copy of a body whose chunked framing is relayed as it came: the decoder's payload slices while the
 * copy is below its cap, then only their count (the decoder stops making slices: `skipData`).
 */
function teeFramed(cap: BodyCapture, dec: ChunkedDecoder, data: Uint8Array[]): void {
  if (dec.skipData) cap.size += dec.payloadBytes;
  else for (let i = 0; i < data.length; i++) cap.add(data[i]!);
  dec.skipData = cap.kept >= cap.limit;
}

/** The last chunk with these trailers (the ones a trailer section may carry) and the empty line. */
export function trailerSection(trailers: HeaderList): Uint8Array {
  const t = trailerFields(trailers);
  return t.length ? serializeTrailers(t) : LAST_CHUNK;
}

function methodHasBody(method: string): boolean {
  return method === "POST" || method === "PUT" || method === "PATCH";
}
