/**
 * HTTP/2 to origins. tapwire offers `h2` and `http/1.1` in ALPN and remembers, per origin (host, port, TLS name),
 * what the origin picked; an origin that picked h2 gets one HTTP/2 session that carries many streams (a new one
 * when it is closing, refused streams or reaches its concurrent-stream limit). Built on node:http2 over a node:tls
 * socket (Bun implements both; measured here: ~7k req/s over one session with the server in the same process).
 *
 * Streams keep node's flow control: a response body is a Readable, and a reader that stops reading stops the
 * WINDOW_UPDATEs, so a fast origin cannot make tapwire buffer without bound.
 */
import http2, { type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders } from "node:http2";
import { Duplex } from "node:stream";
import tls from "node:tls";
import type { HeaderList } from "../http1/types.ts";
import { batchSessionWrites } from "../http2/batched-writes.ts";
import { classifyConnectError, UpstreamError } from "./upstream.ts";

export interface H2Target {
  host: string;
  port: number;
  /** TLS server name (SNI and verification name); defaults to host */
  servername?: string;
}

export interface H2PoolOptions {
  rejectUnauthorized: boolean;
  ca?: string[];
  connectTimeoutMs: number;
}

export type Alpn = "h2" | "http/1.1";

export interface H2Response {
  status: number;
  headers: HeaderList;
  streamId: number;
  /**
   * the body, with HTTP/2 flow control behind it; paused until read. Read it with 'data' + resume() and 'end':
   * Bun 1.4.5's finished() (so for-await and pipeline) reports "Premature close" for a stream whose HTTP/2 side
   * closed while its body is still buffered, which is normal when the whole response came in one read
   */
  body: ClientHttp2Stream;
  /** the HEADERS frame ended the stream: no body, no trailers (a gRPC "trailers-only" answer) */
  headOnly: boolean;
  /** the trailers, once the body ended ([] when there were none); rejects when the stream failed */
  trailers: Promise<HeaderList>;
}

/** What openStreamWith reports (see there). */
export interface H2StreamHandlers {
  response(res: H2Response): void;
  end(trailers: HeaderList): void;
  failed(e: UpstreamError): void;
}

/** H2Response.trailers of a response handed to openStreamWith's handlers (they get the trailers through `end`). */
const NO_TRAILERS_PROMISE: Promise<HeaderList> = Promise.resolve([]);

const keyOf = (t: H2Target) => `${t.host}:${t.port}/${t.servername ?? t.host}`;

/** node's header object as an ordered list (repeated fields as separate entries), without pseudo-headers. */
export function headerList(h: IncomingHttpHeaders): HeaderList {
  const out: HeaderList = [];
  for (const [k, v] of Object.entries(h)) {
    if (k.startsWith(":") || v === undefined) continue;
    if (Array.isArray(v)) for (const x of v) out.push([k, x]);
    else out.push([k, String(v)]);
  }
  return out;
}

/** An ordered list as node's header object (repeated names become arrays; set-cookie and friends stay separate). */
function headerObject(fields: HeaderList): Record<string, string | string[]> {
  const o: Record<string, string | string[]> = {};
  for (const [k, v] of fields) {
    const prev = o[k];
    if (prev === undefined) o[k] = v;
    else if (Array.isArray(prev)) prev.push(v);
    else o[k] = [prev, v];
  }
  return o;
}

export class H2UpstreamPool {
  private readonly alpn = new Map<string, Alpn>();
  private readonly sessions = new Map<string, ClientHttp2Session>();
  private readonly connecting = new Map<string, Promise<ClientHttp2Session | null>>();
  private closed = false;

  constructor(private readonly opts: H2PoolOptions) {}

  /** What the origin picked the last time (undefined: not asked yet). */
  known(t: H2Target): Alpn | undefined {
    return this.alpn.get(keyOf(t));
  }

  /** Sessions open now (for tests and /health). */
  get sessionCount(): number {
    let n = 0;
    for (const s of this.sessions.values()) if (!s.closed && !s.destroyed) n++;
    return n;
  }

  /**
   * The origin's open session, found without waiting: a session, null when the origin speaks only HTTP/1.1, or
   * undefined when one has to be opened first (call session()). The proxy's hot path: no promise per request.
   */
  ready(t: H2Target): ClientHttp2Session | null | undefined {
    if (this.closed) return undefined;
    const key = keyOf(t);
    if (this.alpn.get(key) === "http/1.1") return null;
    const s = this.sessions.get(key);
    return s && !s.closed && !s.destroyed ? s : undefined;
  }

  /**
   * An HTTP/2 session to the origin, or null when the origin speaks only HTTP/1.1 (remembered: later calls answer
   * null at once). Throws UpstreamError (dns, refused, tls, timeout...) when the origin cannot be reached.
   */
  async session(t: H2Target): Promise<ClientHttp2Session | null> {
    if (this.closed) throw new UpstreamError("closed", "the HTTP/2 pool is closed");
    const key = keyOf(t);
    if (this.alpn.get(key) === "http/1.1") return null;
    const s = this.sessions.get(key);
    if (s && !s.closed && !s.destroyed) return s;
    const pending = this.connecting.get(key);
    if (pending) return pending;
    const p = this.open(t, key).finally(() => this.connecting.delete(key));
    this.connecting.set(key, p);
    return p;
  }

  private open(t: H2Target, key: string): Promise<ClientHttp2Session | null> {
    const servername = t.servername ?? t.host;
    return new Promise((resolve, reject) => {
      let settled = false;
      const sock = tls.connect({
        host: t.host,
        port: t.port,
        servername: /^[\d.]+$|:/.test(servername) ? undefined : servername,
        ALPNProtocols: ["h2", "http/1.1"],
        rejectUnauthorized: this.opts.rejectUnauthorized,
        checkServerIdentity: this.opts.rejectUnauthorized ? (_h, cert) => tls.checkServerIdentity(servername, cert) : () => undefined,
        ...(this.opts.ca ? { ca: this.opts.ca } : {}),
      });
      const timer = setTimeout(() => fail(new UpstreamError("timeout", `connect to ${t.host}:${t.port} timed out after ${this.opts.connectTimeoutMs / 1000} s`)), this.opts.connectTimeoutMs);
      const fail = (e: UpstreamError) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        sock.destroy();
        reject(e);
      };
      sock.once("error", (e: Error & { code?: string }) => {
        const code = e.code ?? "";
        if (/CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS|HOSTNAME|altname/i.test(code + " " + e.message)) {
          fail(new UpstreamError("tls", `TLS verification of ${servername} failed: ${code || e.message}`));
        } else fail(classifyConnectError(e, t.host, t.port));
      });
      sock.once("secureConnect", () => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        const picked: Alpn = sock.alpnProtocol === "h2" ? "h2" : "http/1.1";
        this.alpn.set(key, picked);
        if (picked !== "h2") {
          sock.destroy();
          return resolve(null);
        }
        const conn = batchedSocket(sock);
        const session = http2.connect(`https://${servername}:${t.port}`, { createConnection: () => conn });
        session.on("error", () => {}); // reported on the streams; the session is then dropped
        const drop = () => {
          if (this.sessions.get(key) === session) this.sessions.delete(key);
        };
        session.once("close", drop);
        session.once("goaway", drop);
        this.sessions.set(key, session);
        resolve(session);
      });
    });
  }

  /**
   * Sends one request on the origin's session. `fields` are HTTP/2 fields, pseudo-headers first (see
   * h1RequestToH2). The body, when given, is written with backpressure; `signal` aborts the stream (RST_STREAM
   * CANCEL). Resolves at the response head; throws UpstreamError when the origin is unreachable or resets the
   * stream before answering.
   */
  async request(session: ClientHttp2Session, fields: HeaderList, body: Uint8Array | AsyncIterable<Uint8Array> | null, signal?: AbortSignal): Promise<H2Response> {
    const o = this.openStream(session, fields, body === null, signal);
    if (body instanceof Uint8Array) o.stream.end(body);
    else if (body !== null) void pump(o.stream, body);
    return o.response;
  }

  /**
   * Opens one stream on the origin's session and leaves the request body to the caller (`endStream`: there is
   * none; `waitForTrailers`: the body ends with trailers sent on 'wantTrailers'). `response` resolves at the response head, `trailers` once the stream closed (see request). Throws
   * (synchronously) when the session cannot open a stream any more.
   */
  openStream(session: ClientHttp2Session, fields: HeaderList, endStream: boolean, signal?: AbortSignal, waitForTrailers = false): { stream: ClientHttp2Stream; response: Promise<H2Response>; trailers: Promise<HeaderList> } {
    let onResponse!: (r: H2Response) => void;
    let onEnd!: (t: HeaderList) => void;
    let failHead!: (e: UpstreamError) => void;
    let failEnd!: (e: UpstreamError) => void;
    const response = new Promise<H2Response>((res, rej) => ((onResponse = res), (failHead = rej)));
    const trailers = new Promise<HeaderList>((res, rej) => ((onEnd = res), (failEnd = rej)));
    response.catch(() => {});
    trailers.catch(() => {}); // the caller may not wait for them
    const stream = this.openStreamWith(session, headerObject(fields), endStream, waitForTrailers, {
      response: (r) => onResponse({ ...r, trailers }),
      end: onEnd,
      failed: (e) => {
        failHead(e);
        failEnd(e);
      },
    });
    if (signal) {
      if (signal.aborted) stream.close(http2.constants.NGHTTP2_CANCEL);
      else signal.addEventListener("abort", () => stream.close(http2.constants.NGHTTP2_CANCEL), { once: true });
    }
    return { stream, response, trailers };
  }

  /**
   * openStream without promises (the proxy's hot path: one stream per request): `headers` is node's header object
   * (pseudo-headers included). The handlers are called synchronously from the stream's events, at most one of
   * `end` and `failed`, and `response` (at most once) before `end`:
   *   response  the final response head (read at the 'response' event, see H2Response.headOnly)
   *   end       the stream closed cleanly, with these trailers ([] when there were none)
   *   failed    the stream failed (error, reset by the origin, closed before a response); also after `response`
   * The body is paused until the caller reads it (see below). Throws (synchronously) when the session cannot open
   * a stream any more.
   */
  openStreamWith(session: ClientHttp2Session, headers: http2.OutgoingHttpHeaders, endStream: boolean, waitForTrailers: boolean, on: H2StreamHandlers): ClientHttp2Stream {
    const stream = session.request(headers, { endStream, waitForTrailers: waitForTrailers && !endStream } as http2.ClientSessionRequestOptions);
    // Paused until the caller reads the body. Bun 1.4.5 resumes a client stream that closes while nobody has
    // started reading it (readableFlowing === null), which emits its buffered body to no listener: the body is
    // lost and 'end' follows. When HEADERS, DATA and END_STREAM arrive in one read, that happens before a
    // 'response' promise's continuation could attach a reader. An explicit pause (readableFlowing === false) keeps
    // the body buffered; the caller resumes (a 'data' listener alone does not, after pause()).
    stream.pause();
    let state = 0; // 0: waiting for the head, 1: head seen, 2: settled (ended or failed)
    let got: HeaderList | null = null;
    // a stream error is reported once, however often it is emitted
    stream.on("error", (e: Error) => {
      if (state === 2) return;
      const before = state === 0;
      state = 2;
      on.failed(new UpstreamError("reset", before ? `HTTP/2 stream failed before the response: ${e.message}` : `HTTP/2 stream failed: ${e.message}`));
    });
    // endAfterHeaders read when the head arrives: later, Bun 1.4.5 answers whether the origin's side has ended
    // by then (true with a body buffered when HEADERS, DATA and END_STREAM came in one read; false for a
    // head-only answer once the stream has closed)
    // `on`, not `once`, here and for 'close' (no wrapper per stream): `state` already ignores a repeat
    stream.on("response", (h) => {
      if (state !== 0) return;
      state = 1;
      on.response({ status: Number(h[":status"]), headers: headerList(h), streamId: stream.id ?? 0, body: stream, trailers: NO_TRAILERS_PROMISE, headOnly: stream.endAfterHeaders === true });
    });
    stream.on("trailers", (h) => (got = headerList(h)));
    stream.on("close", () => {
      if (state === 2) return;
      const before = state === 0;
      state = 2;
      const code = stream.rstCode;
      if (code && code !== http2.constants.NGHTTP2_NO_ERROR) on.failed(new UpstreamError("reset", `the origin reset the stream (code ${code})`));
      else if (before) on.failed(new UpstreamError("closed", "the HTTP/2 stream closed before a response"));
      else on.end(got ?? []);
    });
    return stream;
  }

  close(): void {
    this.closed = true;
    for (const s of this.sessions.values()) s.close();
    this.sessions.clear();
  }
}

/**
 * The origin's TLS socket as the session sees it: a Duplex without a native handle. Given the TLS socket itself,
 * Bun's session writes to the native socket directly, once per flush, and it flushes at every stream it opens and
 * ends (one TLS record and one send() per request at least). Through this Duplex the frames written in one
 * event-loop iteration leave as one socket write, as on the client side (H2ServerConnection: batchSessionWrites).
 * Backpressure both ways: while the socket is full the session's writes answer false until 'drain'; a session that
 * does not take the bytes pauses the socket.
 */
function batchedSocket(sock: tls.TLSSocket): Duplex {
  const d = new Duplex({
    read: () => void sock.resume(),
    final: (cb) => {
      writes.flush();
      sock.end();
      cb();
    },
    destroy: (err, cb) => {
      writes.flush();
      sock.destroy();
      cb(err);
    },
  });
  const writes = batchSessionWrites(d, (b) => sock.write(b), () => sock.destroyed);
  sock.on("drain", writes.drained);
  sock.on("data", (b: Buffer) => {
    if (!d.push(b)) sock.pause();
  });
  sock.on("end", () => d.push(null));
  sock.on("close", () => d.destroy());
  sock.on("error", (e) => d.destroy(e));
  Object.defineProperty(d, "remoteAddress", { get: () => sock.remoteAddress });
  return d;
}

async function pump(stream: ClientHttp2Stream, body: AsyncIterable<Uint8Array>): Promise<void> {
  try {
    for await (const chunk of body) {
      if (!stream.write(chunk)) await new Promise((r) => stream.once("drain", r));
      if (stream.destroyed) return;
    }
    stream.end();
  } catch (e) {
    stream.destroy(e as Error);
  }
}
