import type { Socket, TCPSocketListener } from "bun";
import { Endpoint } from "../core/proxy/endpoint.ts";
import {
  ChunkedDecoder,
  CRLF,
  HttpParseError,
  LAST_CHUNK,
  LengthDecoder,
  chunkHeader,
  getHeader,
  getHeaderAll,
  hasToken,
  parseRequestHead,
  parseTarget,
  requestFraming,
  serializeResponseHead,
  statusReason,
  wantsKeepAlive,
  type HeaderList,
  type RequestHead,
} from "../core/http1/index.ts";
import { errorResponse } from "./errors.ts";

/**
 * The management API's front door: a Bun.listen TCP listener speaking HTTP/1 with tapwire's own sans-io codec
 * (src/core/http1), handing each request to the Elysia app as a `Request` and streaming its `Response` back.
 *
 * Why not Bun.serve: it rebuilds `request.url` from the Host header and drops an absolute-form target's authority
 * (`GET http://evil.example/x`), so the Host check could not see where a request was really addressed. Here the
 * request line is parsed once, by the same parser as the proxy's, and the `Request` carries the target as sent:
 * an absolute-form target becomes the URL itself, so the guard (guard.ts) judges its authority.
 *
 * One request at a time per connection (keep-alive, pipelined requests wait in order); request bodies reach the
 * handler as a stream with backpressure (the socket is paused while the handler has not read what was sent);
 * response bodies are written as they are produced, paused while the client does not read.
 */

/** Largest request head, bytes (431 above). */
export const API_MAX_HEAD = 64 * 1024;
/** Largest request body, bytes (413 above): what Bun.serve allowed before. */
export const API_MAX_BODY = 128 * 1024 * 1024;
/** A connection with no request in progress is closed after this long without a byte. */
export const API_IDLE_MS = 10_000;
/** The whole request head must arrive within this long from its first byte: 408 and close. */
export const API_HEAD_MS = 10_000;
/** A request body that stops arriving (while the handler waits for it) for this long: the connection is closed. */
export const API_BODY_IDLE_MS = 30_000;
/** A client that accepts none of the response bytes waiting for it for this long is disconnected. */
export const API_STALL_MS = 60_000;

/** Bytes of request body buffered for a handler that has not read them yet, before the socket is paused. */
const BODY_HIGH_WATER = 256 * 1024;
/** A response whose body is fully available within this many bytes is sent with Content-Length, else chunked. */
const COLLECT_MAX = 256 * 1024;
/** Bytes of pipelined requests read ahead while a response is being produced, before the socket is paused. */
const PIPELINE_HIGH_WATER = API_MAX_HEAD;
/** How much of an unread request body is read and dropped to keep the connection; above it the connection closes. */
const DISCARD_MAX = 1024 * 1024;

const EMPTY = new Uint8Array(0);
const CONTINUE = new TextEncoder().encode("HTTP/1.1 100 Continue\r\n\r\n");
/** Response fields the front door owns: framing and connection management. */
const OWN_FIELDS = new Set(["connection", "keep-alive", "transfer-encoding", "content-length", "date", "upgrade", "proxy-connection"]);

let dateSecond = 0;
let dateValue = "";
function httpDate(): string {
  const s = Math.floor(Date.now() / 1000);
  if (s !== dateSecond) {
    dateSecond = s;
    dateValue = new Date(s * 1000).toUTCString();
  }
  return dateValue;
}

export type ApiHandler = (request: Request) => Response | Promise<Response>;

export interface ApiServerOptions {
  hostname: string;
  port: number;
  handler: ApiHandler;
  /** Called with a message when the handler throws (a bug; the client gets a 500). */
  log?: (line: string) => void;
}

type BodySink = ReadableStreamDefaultController<Uint8Array>;
type ReadResult = { done: true; value?: undefined } | { done: false; value: unknown };
interface Reader {
  read(): Promise<ReadResult>;
  cancel(reason?: unknown): Promise<void>;
}

interface IncomingBody {
  decoder: ChunkedDecoder | LengthDecoder;
  /** Where the bytes go: the handler's stream, or null once nobody wants them (they are dropped). */
  sink: BodySink | null;
  received: number;
  dropped: number;
}

export class ApiServer {
  private listener: TCPSocketListener<ApiConnection | undefined> | null = null;
  readonly connections = new Set<ApiConnection>();
  private sweeper: ReturnType<typeof setInterval> | null = null;
  stopping = false;

  constructor(readonly opts: ApiServerOptions) {}

  /** Starts listening; returns the port. */
  listen(): number {
    // biome-ignore lint: the listener's handlers are bound to this server
    const server = this;
    this.listener = Bun.listen<ApiConnection | undefined>({
      hostname: this.opts.hostname,
      port: this.opts.port,
      allowHalfOpen: true,
      socket: {
        open(s) {
          s.setNoDelay(true);
          s.data = new ApiConnection(server, s);
          server.connections.add(s.data);
        },
        data(s, d) {
          s.data?.onData(d);
        },
        drain(s) {
          s.data?.ep.handleDrain();
        },
        end(s) {
          s.data?.onEnd();
        },
        close(s) {
          s.data?.onClose();
        },
        error(s) {
          s.data?.onClose();
        },
      },
    });
    // one timer for every connection's deadline (head, idle, body): a deadline is met within a second
    this.sweeper = setInterval(() => {
      const now = performance.now();
      for (const c of this.connections) if (c.deadline > 0 && now >= c.deadline) c.onDeadline();
    }, 1000);
    this.sweeper.unref?.();
    return this.listener.port;
  }

  get port(): number {
    return this.listener?.port ?? 0;
  }

  /**
   * Stops listening; idle connections close at once, a request in progress is answered (then its connection
   * closes). Resolves when every connection is gone, or after `graceMs` (the rest are cut).
   */
  async stop(graceMs = 5000): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.listener?.stop(false);
    this.listener = null;
    // idle connections go at once (nothing is in progress on them); a request in progress is answered, then closed
    for (const c of [...this.connections]) if (!c.busy) c.destroy();
    const until = performance.now() + graceMs;
    while (this.connections.size > 0 && performance.now() < until) await new Promise((r) => setTimeout(r, 20));
    for (const c of [...this.connections]) c.destroy();
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = null;
  }
}

class ApiConnection {
  readonly ep: Endpoint;
  /** Bytes received and not yet parsed (a partial head, or pipelined requests waiting for their turn). */
  private buf: Uint8Array = EMPTY;
  /** A request is being answered. */
  busy = false;
  private body: IncomingBody | null = null;
  /** The request body failed (bad chunking, too large): the answer is this error, and the connection closes. */
  private bodyFailure: { status: number; message: string } | null = null;
  /** Close after the current response. */
  private closeAfter = false;
  /** The client half-closed: requests it sent are answered, then the connection closes. */
  private clientEnded = false;
  /** Nothing more is read from this connection: whatever arrives is dropped (after a refusal, before the close). */
  private discardAll = false;
  private dead = false;
  /** When the current deadline expires (performance.now() ms), 0 for none; `deadlineKind` says which. */
  deadline = 0;
  private deadlineKind: "idle" | "head" | "body" | "closing" = "idle";
  private headStart = 0;
  private abort: AbortController | null = null;
  private reader: Reader | null = null;
  private drainWaiter: (() => void) | null = null;
  /** The body stream is full: the socket is paused until the handler reads. */
  private bodyPaused = false;
  /** Too many pipelined bytes wait: the socket is paused until they are parsed. */
  private pipelinePaused = false;

  constructor(
    private readonly server: ApiServer,
    socket: Socket<ApiConnection | undefined>,
  ) {
    this.ep = new Endpoint(socket as Socket<any>);
    this.ep.stallMs = API_STALL_MS;
    this.ep.onStall = () => this.destroy();
    this.ep.onDrain = () => {
      const w = this.drainWaiter;
      this.drainWaiter = null;
      w?.();
    };
    this.setDeadline("idle", API_IDLE_MS);
  }

  private setDeadline(kind: ApiConnection["deadlineKind"], ms: number): void {
    this.deadlineKind = kind;
    this.deadline = performance.now() + ms;
  }

  onData(chunk: Uint8Array): void {
    if (this.dead || this.discardAll) return;
    let rest: Uint8Array | null = chunk;
    if (this.body) rest = this.feedBody(chunk);
    if (rest === null || this.dead) return;
    if (rest.length > 0) this.buf = this.buf.length === 0 ? rest : concat(this.buf, rest);
    if (!this.busy) this.next();
    else if (this.buf.length > PIPELINE_HIGH_WATER && !this.pipelinePaused) {
      this.pipelinePaused = true;
      this.ep.pause();
    }
  }

  /**
   * The client half-closed: what it sent is answered, then the connection closes. The request's signal is aborted
   * (as Bun.serve did on a client's FIN), so a handler that streams until its reader goes (the event stream) ends.
   */
  onEnd(): void {
    this.clientEnded = true;
    this.abort?.abort(new Error("client closed its side of the connection"));
    if (this.body && !this.body.decoder.done) {
      // the body can never be complete
      this.failBody(400, "request body ended early (connection closed)");
    }
    if (!this.busy && !this.dead) this.next();
  }

  onClose(): void {
    if (this.dead) return;
    this.dead = true;
    this.ep.markClosed();
    this.server.connections.delete(this);
    this.abort?.abort(new Error("client disconnected"));
    try {
      this.body?.sink?.error(new Error("client disconnected"));
    } catch {}
    this.body = null;
    this.reader?.cancel(new Error("client disconnected")).catch(() => {});
    const w = this.drainWaiter;
    this.drainWaiter = null;
    w?.();
  }

  destroy(): void {
    this.ep.destroy();
    this.onClose();
  }

  onDeadline(): void {
    this.deadline = 0;
    switch (this.deadlineKind) {
      case "idle":
      case "closing":
        this.destroy();
        return;
      case "head":
        void this.refuse(408, "request_timeout", `the request head did not arrive within ${API_HEAD_MS / 1000} s`);
        return;
      case "body":
        this.failBody(408, `the request body stopped arriving for ${API_BODY_IDLE_MS / 1000} s`);
        this.destroy();
        return;
    }
  }

  /** Feeds request body bytes; returns the bytes after the body once it is complete, null while it is not. */
  private feedBody(chunk: Uint8Array): Uint8Array | null {
    const b = this.body!;
    let r;
    try {
      r = b.decoder.push(chunk);
    } catch (e) {
      this.failBody(e instanceof HttpParseError ? e.status : 400, (e as Error).message);
      return null;
    }
    for (const d of r.data) {
      b.received += d.length;
      if (b.received > API_MAX_BODY) {
        this.failBody(413, `request body larger than ${API_MAX_BODY} bytes`);
        return null;
      }
      if (b.sink) b.sink.enqueue(d);
      else b.dropped += d.length;
    }
    if (r.done) {
      try {
        b.sink?.close();
      } catch {}
      this.body = null;
      if (this.bodyPaused) {
        this.bodyPaused = false;
        this.ep.resume();
      }
      if (this.busy) this.deadline = 0;
      return r.rest ?? EMPTY;
    }
    if (b.sink && (b.sink.desiredSize ?? 1) <= 0 && !this.bodyPaused) {
      this.bodyPaused = true;
      this.ep.pause();
    }
    if (!b.sink && b.dropped > DISCARD_MAX) {
      // nobody wants the rest of a long body: stop reading it
      this.destroy();
      return null;
    }
    if (this.bodyPaused) this.deadline = 0;
    else this.setDeadline(this.busy ? "body" : "closing", API_BODY_IDLE_MS);
    return null;
  }

  /** The request body cannot be read to its end: the handler's stream fails, the answer is this error, then close. */
  private failBody(status: number, message: string): void {
    this.bodyFailure ??= { status, message };
    this.closeAfter = true;
    this.discardAll = true;
    const b = this.body;
    this.body = null;
    try {
      b?.sink?.error(new HttpParseError(message, status));
    } catch {}
    if (this.bodyPaused) {
      this.bodyPaused = false;
      this.ep.resume();
    }
    if (!this.busy) this.destroy();
  }

  /** Parses and starts the next request, if a whole head is there. */
  private next(): void {
    if (this.dead || this.busy || this.body) return;
    if (this.pipelinePaused) {
      this.pipelinePaused = false;
      this.ep.resume();
    }
    if (this.buf.length === 0) {
      this.headStart = 0;
      if (this.closeAfter || this.clientEnded) {
        this.ep.end();
        this.setDeadline("closing", API_IDLE_MS);
      } else this.setDeadline("idle", API_IDLE_MS);
      return;
    }
    let parsed: ReturnType<typeof parseRequestHead>;
    try {
      parsed = parseRequestHead(this.buf, API_MAX_HEAD);
    } catch (e) {
      const status = e instanceof HttpParseError ? e.status : 400;
      void this.refuse(status, status === 431 ? "header_too_large" : "bad_request", (e as Error).message);
      return;
    }
    if (parsed === null) {
      if (this.headStart === 0) {
        this.headStart = performance.now();
        this.setDeadline("head", API_HEAD_MS);
      }
      if (this.clientEnded) this.destroy(); // the client half-closed in the middle of a head
      return;
    }
    this.headStart = 0;
    this.deadline = 0;
    const rest = this.buf.subarray(parsed.end);
    this.buf = EMPTY;
    this.start(parsed.head, rest);
  }

  /** Answers with an error before any handler ran, then closes. */
  private async refuse(status: number, code: string, message: string): Promise<void> {
    this.busy = true;
    this.closeAfter = true;
    this.discardAll = true;
    this.deadline = 0;
    await this.writeResponse(errorResponse(status, code, message), false, false);
    this.ep.end();
    this.setDeadline("closing", API_IDLE_MS);
  }

  private start(head: RequestHead, rest: Uint8Array): void {
    this.busy = true;
    this.http11 = head.version === "HTTP/1.1";
    const port = this.server.port;
    let framing;
    try {
      framing = requestFraming(head);
    } catch (e) {
      void this.refuse(e instanceof HttpParseError ? e.status : 400, "bad_request", (e as Error).message);
      return;
    }
    const hosts = getHeaderAll(head.headers, "host");
    if (hosts.length === 0) {
      void this.refuse(400, "bad_request", `missing Host header; send Host: 127.0.0.1:${port}`);
      return;
    }
    if (hosts.length > 1) {
      void this.refuse(400, "bad_request", "more than one Host header");
      return;
    }
    let url: string;
    try {
      const t = parseTarget(head.method, head.target);
      if (t.form === "absolute") {
        // the target as sent: its authority is judged by the guard, like the Host header
        const host = t.host!.includes(":") ? `[${t.host}]` : t.host!;
        url = `${t.scheme}://${host}:${t.port}${t.path}`;
      } else if (t.form === "origin") {
        const h = hosts[0]!;
        url = `http://${h === `localhost:${port}` ? h : `127.0.0.1:${port}`}${t.path}`;
      } else {
        void this.refuse(400, "bad_request", `a ${t.form}-form request target is not served here (this is the management API, not the proxy)`);
        return;
      }
    } catch (e) {
      void this.refuse(400, "bad_request", `invalid request target: ${(e as Error).message}`);
      return;
    }
    const expect = getHeader(head.headers, "expect");
    if (expect !== undefined && !(head.version === "HTTP/1.1" && expect.trim().toLowerCase() === "100-continue")) {
      void this.refuse(417, "bad_request", `unsupported Expect: ${JSON.stringify(expect.slice(0, 100))}`);
      return;
    }
    const length = framing.kind === "length" ? framing.length : framing.kind === "chunked" ? -1 : 0;
    if (length > API_MAX_BODY) {
      void this.refuse(413, "payload_too_large", `request body larger than ${API_MAX_BODY} bytes`);
      return;
    }
    const keepAlive = wantsKeepAlive(head.version, head.headers);
    if (!keepAlive) this.closeAfter = true;
    const method = head.method;
    const canHaveBody = method !== "GET" && method !== "HEAD";
    let stream: ReadableStream<Uint8Array> | null = null;
    if (length !== 0) {
      const body: IncomingBody = {
        decoder: length > 0 ? new LengthDecoder(length) : new ChunkedDecoder(),
        sink: null,
        received: 0,
        dropped: 0,
      };
      if (canHaveBody) {
        stream = new ReadableStream<Uint8Array>(
          {
            start: (c) => {
              body.sink = c;
            },
            pull: () => {
              if (this.bodyPaused && this.body === body) {
                this.bodyPaused = false;
                this.ep.resume();
                this.setDeadline("body", API_BODY_IDLE_MS);
              }
            },
            cancel: () => {
              body.sink = null;
              if (this.bodyPaused && this.body === body) {
                this.bodyPaused = false;
                this.ep.resume();
              }
            },
          },
          { highWaterMark: BODY_HIGH_WATER, size: (c) => c?.byteLength ?? 0 },
        );
      }
      this.body = body;
      // 100-continue: the client may send the body now (as Node's server does, before the handler runs)
      if (expect !== undefined) this.ep.write(CONTINUE);
      this.setDeadline("body", API_BODY_IDLE_MS);
    }
    this.abort = new AbortController();
    let request: Request;
    try {
      request = new Request(url, {
        method,
        headers: head.headers, // the Request builds its Headers from the list once
        body: stream,
        signal: this.abort.signal,
        duplex: "half",
      } as RequestInit);
    } catch (e) {
      // a target the URL parser refuses, or a field the Headers class does (the HTTP/1 parser let both through)
      this.body = null;
      void this.refuse(400, "bad_request", `invalid request: ${(e as Error).message}`);
      return;
    }
    if (rest.length > 0) {
      const after = this.body ? this.feedBody(rest) : rest;
      if (after !== null && after.length > 0) this.buf = after;
    }
    if (this.dead) return;
    void this.answer(request, method === "HEAD");
  }

  private async answer(request: Request, isHead: boolean): Promise<void> {
    let response: Response;
    try {
      response = await this.server.opts.handler(request);
    } catch (e) {
      this.server.opts.log?.(`tapwire: API error: ${(e as Error)?.stack ?? e}`);
      response = errorResponse(500, "internal_error", (e as Error)?.message ?? String(e));
    }
    if (this.bodyFailure) {
      response.body?.cancel().catch(() => {});
      const f = this.bodyFailure;
      response = errorResponse(f.status, f.status === 413 ? "payload_too_large" : f.status === 408 ? "request_timeout" : "bad_request", f.message);
    }
    if (this.dead) {
      response.body?.cancel().catch(() => {});
      return;
    }
    if (this.server.stopping) this.closeAfter = true;
    const keep = await this.writeResponse(response, isHead, !this.closeAfter);
    this.finish(keep);
  }

  /**
   * Writes a response: head, then the body (Content-Length when the whole body is at hand within COLLECT_MAX,
   * chunked otherwise; read to the end of the connection for an HTTP/1.0 client). Returns whether the connection
   * may carry another request.
   */
  private async writeResponse(response: Response, isHead: boolean, keepAlive: boolean): Promise<boolean> {
    const status = response.status;
    const noBody = isHead || status === 204 || status === 304 || (status >= 100 && status < 200);
    const chunks: Uint8Array[] = [];
    let total = 0;
    let ended = true;
    let pending: Promise<ReadResult> | null = null;
    // 204, 304 and 1xx carry no body; a HEAD answer reads it only to say its length
    const body = noBody && !isHead ? (response.body?.cancel().catch(() => {}), null) : response.body;
    let reader: Reader | null = null;
    if (body) {
      reader = body.getReader() as unknown as Reader;
      this.reader = reader;
      ended = false;
      try {
        for (;;) {
          const p: Promise<ReadResult> = reader.read();
          if (Bun.peek.status(p) === "pending") await null;
          if (Bun.peek.status(p) === "pending") {
            pending = p;
            break;
          }
          const r = await p;
          if (r.done) {
            ended = true;
            break;
          }
          const v = toBytes(r.value);
          if (v.length > 0) {
            chunks.push(v);
            total += v.length;
          }
          if (total >= COLLECT_MAX) break;
        }
      } catch (e) {
        // the body failed before a byte was sent: that is an error response
        this.server.opts.log?.(`tapwire: API response body failed: ${(e as Error)?.message ?? e}`);
        if (this.dead) return false;
        reader = null;
        this.reader = null;
        return this.writeResponse(errorResponse(500, "internal_error", (e as Error)?.message ?? String(e)), isHead, keepAlive);
      }
    }
    const fields: HeaderList = [];
    for (const [n, v] of response.headers) if (!OWN_FIELDS.has(n)) fields.push([n, v]);
    fields.push(["Date", httpDate()]);
    let chunked = false;
    if (noBody) {
      if (isHead && status !== 204 && status !== 304 && status >= 200) {
        // what a GET would have carried: the app's own Content-Length (Elysia answers HEAD with it and no body),
        // else the body's length when it was read whole
        const declared = response.headers.get("content-length");
        if (declared !== null && /^\d{1,15}$/.test(declared)) fields.push(["Content-Length", declared]);
        else if (ended && body) fields.push(["Content-Length", String(total)]);
      }
    } else if (ended) {
      fields.push(["Content-Length", String(total)]);
    } else if (this.isHttp11()) {
      fields.push(["Transfer-Encoding", "chunked"]);
      chunked = true;
    } else {
      keepAlive = false; // HTTP/1.0: the body ends with the connection
    }
    if (!keepAlive) fields.push(["Connection", "close"]);
    else if (!this.isHttp11()) fields.push(["Connection", "keep-alive"]);
    let head: Uint8Array;
    try {
      head = serializeResponseHead({ version: "HTTP/1.1", status, reason: statusReason(status), headers: fields });
    } catch (e) {
      reader?.cancel().catch(() => {});
      this.reader = null;
      return this.writeResponse(errorResponse(500, "internal_error", `invalid response head: ${(e as Error).message}`), isHead, keepAlive);
    }
    this.ep.cork();
    this.ep.write(head);
    if (!noBody) for (const c of chunks) this.writeBody(c, chunked);
    if (noBody || ended) {
      if (!ended) reader?.cancel().catch(() => {});
      this.reader = null;
      this.ep.uncork();
      return keepAlive;
    }
    if (!this.ep.uncork()) await this.drained();
    // the rest of the body as it is produced, paused while the client does not read
    try {
      for (;;) {
        if (this.dead) return false;
        const r = pending ? await pending : await reader!.read();
        pending = null;
        if (r.done) break;
        const v = toBytes(r.value);
        if (v.length === 0) continue;
        if (!this.writeBody(v, chunked)) await this.drained();
      }
    } catch (e) {
      // mid-body: the only honest signal left is to close without the last chunk
      this.server.opts.log?.(`tapwire: API response body failed mid-stream: ${(e as Error)?.message ?? e}`);
      this.reader = null;
      this.destroy();
      return false;
    }
    this.reader = null;
    if (this.dead) return false;
    if (chunked) this.ep.write(LAST_CHUNK);
    return keepAlive;
  }

  private writeBody(data: Uint8Array, chunked: boolean): boolean {
    if (!chunked) return this.ep.write(data);
    this.ep.write(chunkHeader(data.length));
    this.ep.write(data);
    return this.ep.write(CRLF);
  }

  private drained(): Promise<void> {
    if (this.dead || this.ep.queued === 0) return Promise.resolve();
    return new Promise((r) => (this.drainWaiter = r));
  }

  private http11 = true;
  private isHttp11(): boolean {
    return this.http11;
  }

  /** The response is written: the next request, or close. */
  private finish(keepAlive: boolean): void {
    this.busy = false;
    this.abort = null;
    this.bodyFailure = null;
    if (this.dead) return;
    if (!keepAlive || this.closeAfter) {
      this.closeAfter = true;
      // drop what the client still sends (the rest of a body) until it sees our FIN
      this.discardAll = true;
      this.body = null;
      if (this.bodyPaused || this.pipelinePaused) {
        this.bodyPaused = this.pipelinePaused = false;
        this.ep.resume();
      }
      this.ep.end();
      this.setDeadline("closing", API_IDLE_MS);
      return;
    }
    if (this.body) {
      // the handler did not read the whole body: drop the rest (up to DISCARD_MAX), then serve the next request
      const b = this.body;
      try {
        b.sink?.error(new Error("response already sent"));
      } catch {}
      b.sink = null;
      if (this.bodyPaused) {
        this.bodyPaused = false;
        this.ep.resume();
      }
      if (b.decoder instanceof LengthDecoder && b.decoder.left > DISCARD_MAX) {
        this.closeAfter = true;
        this.discardAll = true;
        this.body = null;
        this.ep.end();
        this.setDeadline("closing", API_IDLE_MS);
        return;
      }
      this.setDeadline("closing", API_BODY_IDLE_MS);
      return; // feedBody calls next() when the body has been read
    }
    this.next();
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

/** Response chunks may be strings or other views in hand-made streams. */
function toBytes(v: unknown): Uint8Array {
  if (v instanceof Uint8Array) return v;
  if (typeof v === "string") return new TextEncoder().encode(v);
  if (ArrayBuffer.isView(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  if (v instanceof ArrayBuffer) return new Uint8Array(v);
  return EMPTY;
}
