// Hostile and malformed clients against the running proxy, over raw TCP sockets.
//
// Every case sends raw bytes to the proxy listener, collects everything the proxy answers until it
// closes the connection (or until the case's own stop condition), and asserts the documented outcome
// (see src/core/http1/parse.ts, src/core/http1/decoders.ts and src/core/proxy/http-session.ts). After
// each case a normal request through the proxy must still succeed: one hostile client never takes the
// proxy down or wedges it for others.
//
// No sleeps: every wait is on an event (data, close, drain) and bounded by a deadline that fails the
// test instead of hanging it.

import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import type { Socket, TCPSocketListener } from "bun";
import * as net from "node:net";
import * as tls from "node:tls";
import { gzipSync } from "node:zlib";
import { startService } from "../../helpers/service.ts";
import { startUpstream, type Upstream } from "../../helpers/upstream.ts";

type Svc = Awaited<ReturnType<typeof startService>>;

let svc: Svc;
let up: Upstream;
/** host:port of the plain HTTP upstream (authority for absolute-form targets and Host headers). */
let upHost: string;

/** Upper bound for any single wait in this file. */
const WAIT_MS = 10_000;
// Each test may chain a few bounded waits; the per-test limit sits above them so a wait fails with its own message.
setDefaultTimeout(45_000);

beforeAll(async () => {
  up = startUpstream();
  svc = await startService({ upstreamCa: [up.caFile] });
  upHost = new URL(up.httpUrl).host;
});

afterAll(async () => {
  await svc?.stop();
  up?.stop();
});

// ------------------------------------------------------------------------------------------------
// helpers

const bytes = (s: string): Uint8Array => Buffer.from(s, "latin1");
const latin1 = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("latin1");
const concat = (...parts: Uint8Array[]): Uint8Array => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
};
const yieldLoop = () => new Promise<void>((r) => setImmediate(r));

/** Absolute-form target on the plain upstream. */
const abs = (path: string) => `${up.httpUrl}${path}`;

interface RawOptions {
  /** Deadline for the whole exchange; exceeding it marks `timedOut` (the socket is then closed by us). */
  timeoutMs?: number;
  /** Stop early (and close our side) once the response so far satisfies this. */
  until?: (text: string, raw: Uint8Array) => boolean;
  /** Half-close our write side (shutdown(2), FIN) after the last step. */
  halfClose?: boolean;
  /** Hang up right after the last step: "fin" closes in order, "rst" aborts (SO_LINGER 0). */
  closeAfterWrite?: "fin" | "rst";
  /** Close the socket abruptly once at least this many response bytes arrived. */
  abortAfterBytes?: number;
  /** Yield to the event loop between chunks (so they reach the proxy as separate reads). */
  spreadChunks?: boolean;
}

interface RawResult {
  /** Everything the proxy sent, latin1-decoded. */
  text: string;
  raw: Uint8Array;
  /** The proxy ended or closed the connection (not us, not the deadline). */
  closedByServer: boolean;
  /** The deadline passed before the exchange finished. */
  timedOut: boolean;
  /** A socket error seen on the client side (ECONNRESET and the like), if any. */
  error: string | null;
}

/** One step of a scripted exchange: bytes to write, or a wait (for the answer so far, or for a promise) then an action. */
type Step =
  | Uint8Array
  | string
  | {
      /** Wait until the answer so far satisfies this, or until this promise settles. */
      waitFor?: ((text: string) => boolean) | Promise<unknown>;
      write?: Uint8Array | string;
      /** Half-close our write side (FIN) at this point. */
      shutdown?: boolean;
      /** Called once the step was carried out. */
      done?: () => void;
    };

/**
 * Connect to `port`, carry out `data` (bytes, or a script of steps), and collect the answer until the
 * server closes, `until` holds, we hang up as asked, or the deadline passes.
 */
function rawExchange(port: number, data: Step | Step[], opts: RawOptions = {}): Promise<RawResult> {
  const steps = (Array.isArray(data) ? data : [data]).map((c) => (typeof c === "string" || c instanceof Uint8Array ? { write: c } : c));
  let textWaiter: { pred: (t: string) => boolean; resolve: () => void } | null = null;
  const received: Uint8Array[] = [];
  let receivedLen = 0;
  let closedByServer = false;
  let timedOut = false;
  let error: string | null = null;
  let weClosed = false;
  let finished = false;
  let sock: Socket<undefined> | null = null;
  let drainWaiter: (() => void) | null = null;
  let serverGone = false;

  return new Promise<RawResult>((resolve) => {
    const finish = () => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      const raw = concat(...received);
      resolve({ text: latin1(raw), raw, closedByServer, timedOut, error });
    };
    const closeOurs = () => {
      if (weClosed) return;
      weClosed = true;
      try {
        sock?.terminate();
      } catch {}
      finish();
    };
    const timer = setTimeout(() => {
      timedOut = true;
      closeOurs();
    }, opts.timeoutMs ?? WAIT_MS);

    const writeAll = async (s: Socket<undefined>) => {
      for (let i = 0; i < steps.length; i++) {
        const step = steps[i]!;
        if (step.waitFor) {
          const w = step.waitFor;
          if (typeof w === "function") {
            const text = () => latin1(concat(...received));
            if (!w(text())) await new Promise<void>((r) => (textWaiter = { pred: w, resolve: r }));
          } else {
            await w;
          }
        }
        let c = typeof step.write === "string" ? bytes(step.write) : (step.write ?? new Uint8Array(0));
        while (c.length > 0) {
          if (serverGone || weClosed) return;
          const n = s.write(c);
          if (n < 0) return;
          c = c.subarray(n);
          if (c.length > 0) await new Promise<void>((r) => (drainWaiter = r));
        }
        if (serverGone || weClosed) return;
        if (step.shutdown) s.shutdown();
        step.done?.();
        if (opts.spreadChunks && i < steps.length - 1) await yieldLoop();
      }
      if (serverGone || weClosed) return;
      if (opts.closeAfterWrite === "rst") return closeOurs();
      if (opts.closeAfterWrite === "fin") {
        weClosed = true;
        s.end();
        return finish();
      }
      if (opts.halfClose) s.shutdown();
    };

    Bun.connect<undefined>({
      hostname: "127.0.0.1",
      port,
      data: undefined,
      allowHalfOpen: true,
      socket: {
        open(s) {
          sock = s;
          s.setNoDelay(true);
          void writeAll(s);
        },
        data(_s, d) {
          received.push(d.slice());
          receivedLen += d.length;
          if (opts.abortAfterBytes !== undefined && receivedLen >= opts.abortAfterBytes) return closeOurs();
          if (opts.until) {
            const raw = concat(...received);
            if (opts.until(latin1(raw), raw)) return closeOurs();
          }
          if (textWaiter && textWaiter.pred(latin1(concat(...received)))) {
            const w = textWaiter;
            textWaiter = null;
            w.resolve();
          }
        },
        drain() {
          const w = drainWaiter;
          drainWaiter = null;
          w?.();
        },
        end() {
          serverGone = true;
          if (!weClosed) closedByServer = true;
          drainWaiter?.();
          textWaiter?.resolve();
          finish();
          try {
            sock?.end();
          } catch {}
        },
        close(_s, err) {
          serverGone = true;
          if (err && !error) error = String((err as Error).message ?? err);
          if (!weClosed) closedByServer = true;
          drainWaiter?.();
          textWaiter?.resolve();
          finish();
        },
        error(_s, err) {
          error ??= String((err as Error).message ?? err);
        },
        connectError(_s, err) {
          error = `connect failed: ${(err as Error).message}`;
          finish();
        },
      },
    }).catch((e) => {
      error = `connect failed: ${(e as Error).message}`;
      finish();
    });
  });
}

interface ParsedResponse {
  status: number;
  reason: string;
  headers: [string, string][];
  body: string;
}

/**
 * Split a byte stream of HTTP/1.1 responses into messages (Content-Length, chunked, bodiless 1xx/204/304
 * and the CONNECT 200). Returns the complete messages and whether trailing bytes were left over.
 */
function parseResponses(text: string, opts: { connectFirst?: boolean } = {}): { responses: ParsedResponse[]; rest: string } {
  const out: ParsedResponse[] = [];
  let p = 0;
  let first = true;
  for (;;) {
    const he = text.indexOf("\r\n\r\n", p);
    if (he < 0) break;
    const lines = text.slice(p, he).split("\r\n");
    const m = /^HTTP\/1\.[01] (\d{3})(?: (.*))?$/.exec(lines[0]!);
    if (!m) break;
    const status = Number(m[1]);
    const headers = lines.slice(1).map((l) => {
      const i = l.indexOf(":");
      return [l.slice(0, i).trim(), l.slice(i + 1).trim()] as [string, string];
    });
    const h = (n: string) => headers.find(([k]) => k.toLowerCase() === n)?.[1];
    let bodyStart = he + 4;
    let body = "";
    const isConnectOk = opts.connectFirst && first && status === 200;
    first = false;
    if (isConnectOk || (status >= 100 && status < 200) || status === 204 || status === 304) {
      // no body
    } else if (h("transfer-encoding")?.toLowerCase() === "chunked") {
      let q = bodyStart;
      let complete = false;
      for (;;) {
        const le = text.indexOf("\r\n", q);
        if (le < 0) break;
        const size = parseInt(text.slice(q, le), 16);
        if (Number.isNaN(size)) break;
        if (size === 0) {
          const te = text.indexOf("\r\n\r\n", le);
          if (te < 0) break;
          q = te + 4;
          complete = true;
          break;
        }
        if (le + 2 + size + 2 > text.length) break;
        body += text.slice(le + 2, le + 2 + size);
        q = le + 2 + size + 2;
      }
      if (!complete) break;
      bodyStart = q;
    } else if (h("content-length") !== undefined) {
      const n = Number(h("content-length"));
      if (bodyStart + n > text.length) break;
      body = text.slice(bodyStart, bodyStart + n);
      bodyStart += n;
    } else {
      body = text.slice(bodyStart);
      bodyStart = text.length;
    }
    out.push({ status, reason: m[2] ?? "", headers, body });
    p = bodyStart;
  }
  return { responses: out, rest: text.slice(p) };
}

/** Stop condition: `n` complete responses have arrived. */
const responsesComplete =
  (n: number, connectFirst = false) =>
  (text: string) =>
    parseResponses(text, { connectFirst }).responses.length >= n;

const statusOf = (text: string): number => Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
const headerOf = (r: ParsedResponse, name: string) => r.headers.find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1];

let aliveCounter = 0;

/** A normal request through the proxy still works (the proxy keeps serving other clients). */
async function stillServing(): Promise<void> {
  const path = `/echo/alive-${++aliveCounter}`;
  const res = await fetch(up.httpUrl + path, { proxy: `http://127.0.0.1:${svc.proxyPort}`, signal: AbortSignal.timeout(WAIT_MS) });
  expect(res.status).toBe(200);
  const j = (await res.json()) as { path: string; method: string };
  expect(j.path).toBe(path);
  expect(j.method).toBe("GET");
}

/** Wait until `cond` holds, re-checking after each event-loop turn; fails after the deadline. */
async function eventually(what: string, cond: () => boolean | Promise<boolean>, ms = WAIT_MS): Promise<void> {
  const end = performance.now() + ms;
  while (!(await cond())) {
    if (performance.now() > end) throw new Error(`timed out waiting for: ${what}`);
    await yieldLoop();
  }
}

/** Requests the upstream saw whose URL contains `s`. */
const seenWith = (s: string) => up.seen.filter((r) => r.url.includes(s));

interface TrafficItem {
  id: number;
  method: string;
  url: string;
  status_code: number;
  has_response: boolean;
  error?: string;
}
async function traffic(limit = 20): Promise<TrafficItem[]> {
  const r = await svc.call(`/api/v1/traffic?limit=${limit}`);
  expect(r.status).toBe(200);
  return ((await r.json()) as { items: TrafficItem[] }).items;
}

/** Live client sessions the proxy tracks (internal; used to detect leaked connections). */
function liveSessions(): number | null {
  const ctx = (svc as unknown as { proxyCtx?: { sessions?: Set<unknown> } }).proxyCtx;
  return ctx?.sessions ? ctx.sessions.size : null;
}

/** A TCP port on 127.0.0.1 where nothing listens (taken from the OS, then released). */
function deadPort(): number {
  const l = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const p = l.port;
  l.stop(true);
  return p;
}

/** Deterministic pseudo-random bytes (xorshift32), so garbage cases are reproducible. */
function prng(seed: number, n: number, avoid: (b: number) => boolean = () => false): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    let b: number;
    do {
      x ^= x << 13;
      x >>>= 0;
      x ^= x >>> 17;
      x ^= x << 5;
      x >>>= 0;
      b = x & 0xff;
    } while (avoid(b));
    out[i] = b;
  }
  return out;
}

/** One connection accepted by a raw upstream. */
interface RawConn {
  socket: Socket<RawConn>;
  /** Everything received on this connection so far (latin1). */
  received: string;
  headSeen: boolean;
  /** Resolves when the connection closes (either side). */
  closed: Promise<void>;
  markClosed: () => void;
  onDrain: (() => void) | null;
}

interface RawUpstream {
  port: number;
  conns: RawConn[];
  /** Resolves with the first connection whose request head is complete. */
  firstHead: Promise<RawConn>;
  stop(): void;
}

/**
 * A raw TCP upstream (fixture) for cases the Bun.serve upstream cannot express: `onHead` is called once per
 * connection with the first complete request head and decides what to answer, and when.
 */
function startRawUpstream(onHead: (c: RawConn, head: string) => void): RawUpstream {
  let headResolve!: (c: RawConn) => void;
  const firstHead = new Promise<RawConn>((r) => (headResolve = r));
  const conns: RawConn[] = [];
  const l: TCPSocketListener<RawConn> = Bun.listen<RawConn>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(s) {
        let markClosed!: () => void;
        const closed = new Promise<void>((r) => (markClosed = r));
        s.data = { socket: s, received: "", headSeen: false, closed, markClosed, onDrain: null };
        conns.push(s.data);
      },
      data(s, d) {
        const c = s.data;
        c.received += latin1(d);
        if (c.headSeen || !c.received.includes("\r\n\r\n")) return;
        c.headSeen = true;
        onHead(c, c.received.slice(0, c.received.indexOf("\r\n\r\n") + 4));
        headResolve(c);
      },
      drain(s) {
        s.data.onDrain?.();
      },
      close(s) {
        s.data?.markClosed();
      },
      error(s) {
        s.data?.markClosed();
      },
    },
  });
  return { port: l.port, conns, firstHead, stop: () => l.stop(true) };
}

/** Reject if `p` does not settle within the bound. */
function within<T>(p: Promise<T>, what: string, ms = WAIT_MS): Promise<T> {
  let t: ReturnType<typeof setTimeout>;
  return Promise.race([p, new Promise<T>((_, rej) => (t = setTimeout(() => rej(new Error(`timed out waiting for: ${what}`)), ms)))]).finally(() =>
    clearTimeout(t),
  );
}

/** Assert a refusal: `status`, text/plain, Connection: close, message contains `msg`, closed by the proxy. */
function expectRefused(r: RawResult, status: number, msg?: string | RegExp): void {
  expect(r.timedOut).toBe(false);
  const { responses, rest } = parseResponses(r.text);
  expect(responses.length).toBe(1);
  const res = responses[0]!;
  expect(res.status).toBe(status);
  expect(headerOf(res, "content-type")).toStartWith("text/plain");
  expect(headerOf(res, "connection")?.toLowerCase()).toBe("close");
  if (msg !== undefined) {
    if (typeof msg === "string") expect(res.body).toContain(msg);
    else expect(res.body).toMatch(msg);
  }
  expect(rest).toBe("");
  expect(r.closedByServer).toBe(true);
}

// ------------------------------------------------------------------------------------------------
// request smuggling

describe("request smuggling defences", () => {
  test("Content-Length and Transfer-Encoding together: 400, nothing reaches the upstream", async () => {
    const smuggled = `GET ${abs("/echo/smuggled-clte")} HTTP/1.1\r\nHost: ${upHost}\r\n\r\n`;
    const body = `0\r\n\r\n${smuggled}`;
    const r = await rawExchange(
      svc.proxyPort!,
      `POST ${abs("/echo/case-clte")} HTTP/1.1\r\nHost: ${upHost}\r\nContent-Length: ${body.length}\r\nTransfer-Encoding: chunked\r\n\r\n${body}`,
    );
    expectRefused(r, 400, "both Transfer-Encoding and Content-Length");
    await stillServing();
    expect(seenWith("smuggled-clte")).toEqual([]);
    expect(seenWith("case-clte")).toEqual([]);
  });

  test("Transfer-Encoding before Content-Length (TE.CL order): 400, nothing reaches the upstream", async () => {
    const smuggled = `GET ${abs("/echo/smuggled-tecl")} HTTP/1.1\r\nHost: ${upHost}\r\n\r\n`;
    const r = await rawExchange(
      svc.proxyPort!,
      `POST ${abs("/echo/case-tecl")} HTTP/1.1\r\nHost: ${upHost}\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n5c\r\n${smuggled}\r\n0\r\n\r\n`,
    );
    expectRefused(r, 400, "both Transfer-Encoding and Content-Length");
    await stillServing();
    expect(seenWith("smuggled-tecl")).toEqual([]);
    expect(seenWith("case-tecl")).toEqual([]);
  });

  test("two different Content-Length headers: 400", async () => {
    const r = await rawExchange(
      svc.proxyPort!,
      `POST ${abs("/echo/case-2cl")} HTTP/1.1\r\nHost: ${upHost}\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!`,
    );
    expectRefused(r, 400, "conflicting Content-Length values");
    await stillServing();
    expect(seenWith("case-2cl")).toEqual([]);
  });

  test("Content-Length: 1, 2 (list with different values): 400", async () => {
    const r = await rawExchange(svc.proxyPort!, `POST ${abs("/echo/case-cl-list")} HTTP/1.1\r\nHost: ${upHost}\r\nContent-Length: 1, 2\r\n\r\nab`);
    expectRefused(r, 400, "conflicting Content-Length values");
    await stillServing();
    expect(seenWith("case-cl-list")).toEqual([]);
  });

  test("Content-Length: 5, 5 (identical list): refused, or forwarded as one valid Content-Length (RFC 9110 8.6)", async () => {
    // The proxy's framing reads this as 5 bytes. It must not pass the list on verbatim: the next parser may
    // read it differently (Bun.serve answers 400), which is a framing disagreement between hops.
    const r = await rawExchange(
      svc.proxyPort!,
      `POST ${abs("/echo/case-cl-same")} HTTP/1.1\r\nHost: ${upHost}\r\nContent-Length: 5, 5\r\nConnection: close\r\n\r\nhello`,
    );
    expect(r.timedOut).toBe(false);
    const { responses } = parseResponses(r.text);
    expect(responses.length).toBe(1);
    const res = responses[0]!;
    if (res.status === 400 && res.body.startsWith("tapwire: bad request")) {
      expect(seenWith("case-cl-same")).toEqual([]);
    } else {
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body)).toMatchObject({ method: "POST", body: "hello", size: 5 });
      const seen = seenWith("case-cl-same");
      expect(seen.length).toBe(1);
      expect(seen[0]!.headers.find(([k]) => k === "content-length")?.[1]).toBe("5");
    }
    await stillServing();
  });

  test("Connection: Content-Length does not strip the body's framing (no smuggling through hop-by-hop stripping)", async () => {
    // RFC 9110 7.6.1 lets Connection name hop-by-hop fields, but Content-Length is the body's framing: if the proxy
    // drops it and still streams the body, the upstream reads the body as a second request.
    const inner = `GET ${abs("/echo/smuggled-conn-cl")} HTTP/1.1\r\nHost: ${upHost}\r\n\r\n`;
    const r = await rawExchange(
      svc.proxyPort!,
      `POST ${abs("/echo/case-conn-cl")} HTTP/1.1\r\nHost: ${upHost}\r\nConnection: Content-Length\r\nContent-Length: ${inner.length}\r\n\r\n${inner}`,
      { until: responsesComplete(1) },
    );
    expect(r.timedOut).toBe(false);
    await stillServing();
    expect(seenWith("smuggled-conn-cl")).toEqual([]);
    const { responses } = parseResponses(r.text);
    expect(responses.length).toBe(1);
    if (responses[0]!.status === 200) {
      // forwarded: the upstream got the whole body as the body
      expect(JSON.parse(responses[0]!.body)).toMatchObject({ path: "/echo/case-conn-cl", body: inner, size: inner.length });
    } else {
      expect(responses[0]!.status).toBe(400);
      expect(seenWith("case-conn-cl")).toEqual([]);
    }
  });

  test("Connection: Transfer-Encoding with a chunked body still frames the body for the upstream", async () => {
    const inner = `GET ${abs("/echo/smuggled-conn-te")} HTTP/1.1\r\nHost: ${upHost}\r\n\r\n`;
    const r = await rawExchange(
      svc.proxyPort!,
      `POST ${abs("/echo/case-conn-te")} HTTP/1.1\r\nHost: ${upHost}\r\nConnection: Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n` +
        `${inner.length.toString(16)}\r\n${inner}\r\n0\r\n\r\n`,
      { until: responsesComplete(1) },
    );
    expect(r.timedOut).toBe(false);
    await stillServing();
    expect(seenWith("smuggled-conn-te")).toEqual([]);
    const { responses } = parseResponses(r.text);
    expect(responses.map((x) => x.status)).toEqual([200]);
    expect(JSON.parse(responses[0]!.body)).toMatchObject({ path: "/echo/case-conn-te", body: inner });
  });

  test("Transfer-Encoding: gzip, chunked: the gzip coding is not silently dropped on the way upstream", async () => {
    // After de-chunking, the body is still gzip transfer-coded. Forwarding it as a plain chunked body with no
    // gzip coding hands the upstream different content than the client sent; the proxy must refuse (501/400),
    // decode it, or keep the coding.
    const gz = gzipSync("hello");
    const r = await rawExchange(
      svc.proxyPort!,
      [
        `POST ${abs("/echo/case-te-gzip")} HTTP/1.1\r\nHost: ${upHost}\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n${gz.length.toString(16)}\r\n`,
        gz,
        "\r\n0\r\n\r\n",
      ],
    );
    expect(r.timedOut).toBe(false);
    await stillServing();
    const seen = seenWith("case-te-gzip");
    if (seen.length === 0) {
      expect([400, 501]).toContain(statusOf(r.text));
    } else {
      expect(seen.length).toBe(1);
      const te = seen[0]!.headers.find(([k]) => k === "transfer-encoding")?.[1] ?? "";
      const decoded = new TextDecoder().decode(seen[0]!.body) === "hello";
      expect({ decoded, gzipKept: /gzip/i.test(te) }).not.toEqual({ decoded: false, gzipKept: false });
    }
  });

  test("absolute-form target with a different Host header: the upstream gets the target's host (RFC 9112 3.2.2)", async () => {
    const r = await rawExchange(
      svc.proxyPort!,
      `GET ${abs("/echo/case-host-mismatch")} HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n`,
    );
    expect(r.timedOut).toBe(false);
    const { responses } = parseResponses(r.text);
    expect(responses.map((x) => x.status)).toEqual([200]);
    expect(JSON.parse(responses[0]!.body).headers.host).toBe(upHost);
    await stillServing();
  });

  for (const [name, value] of [
    ["Content-Length: -1", "-1"],
    ["Content-Length: +5", "+5"],
    ["Content-Length: 0x5", "0x5"],
    ["Content-Length: 5 5 (space inside)", "5 5"],
    ["Content-Length: empty list element", "5,"],
    ["Content-Length: 99999999999999999999 (beyond 2^53)", "99999999999999999999"],
  ] as const) {
    test(`${name}: 400`, async () => {
      const r = await rawExchange(svc.proxyPort!, `POST ${abs("/echo/case-badcl")} HTTP/1.1\r\nHost: ${upHost}\r\nContent-Length: ${value}\r\n\r\nhello`);
      expectRefused(r, 400, /Content-Length/);
      await stillServing();
      expect(seenWith("case-badcl")).toEqual([]);
    });
  }

  test("Transfer-Encoding: chunked, identity (final coding not chunked): 400", async () => {
    const r = await rawExchange(
      svc.proxyPort!,
      `POST ${abs("/echo/case-te-identity")} HTTP/1.1\r\nHost: ${upHost}\r\nTransfer-Encoding: chunked, identity\r\n\r\n5\r\nhello\r\n0\r\n\r\n`,
    );
    expectRefused(r, 400, "final transfer coding is not chunked");
    await stillServing();
    expect(seenWith("case-te-identity")).toEqual([]);
  });

  test("Transfer-Encoding: xchunked: 400 (parse.ts: a final coding other than chunked is 400, not 501)", async () => {
    const r = await rawExchange(
      svc.proxyPort!,
      `POST ${abs("/echo/case-xchunked")} HTTP/1.1\r\nHost: ${upHost}\r\nTransfer-Encoding: xchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n`,
    );
    expectRefused(r, 400, "final transfer coding is not chunked");
    await stillServing();
    expect(seenWith("case-xchunked")).toEqual([]);
  });

  test("Transfer-Encoding: xchunked, chunked (unknown coding before chunked): 501", async () => {
    const r = await rawExchange(
      svc.proxyPort!,
      `POST ${abs("/echo/case-x-then-chunked")} HTTP/1.1\r\nHost: ${upHost}\r\nTransfer-Encoding: xchunked, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n`,
    );
    expectRefused(r, 501, "transfer coding xchunked is not supported");
    await stillServing();
    expect(seenWith("case-x-then-chunked")).toEqual([]);
  });

  test("Transfer-Encoding: chunked twice (two header lines): 400", async () => {
    const r = await rawExchange(
      svc.proxyPort!,
      `POST ${abs("/echo/case-te-twice")} HTTP/1.1\r\nHost: ${upHost}\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n`,
    );
    expectRefused(r, 400, "chunked applied more than once");
    await stillServing();
    expect(seenWith("case-te-twice")).toEqual([]);
  });

  test("Transfer-Encoding with a space before the colon: 400 (never silently ignored)", async () => {
    const r = await rawExchange(
      svc.proxyPort!,
      `POST ${abs("/echo/case-te-space")} HTTP/1.1\r\nHost: ${upHost}\r\nContent-Length: 4\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n`,
    );
    expectRefused(r, 400, "whitespace between header name and colon");
    await stillServing();
    expect(seenWith("case-te-space")).toEqual([]);
  });

  test("Transfer-Encoding in an HTTP/1.0 request: 400", async () => {
    const r = await rawExchange(
      svc.proxyPort!,
      `POST ${abs("/echo/case-te-10")} HTTP/1.0\r\nHost: ${upHost}\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n`,
    );
    expectRefused(r, 400, "Transfer-Encoding in HTTP/1.0 request");
    await stillServing();
    expect(seenWith("case-te-10")).toEqual([]);
  });

  test("a request smuggled in a chunked body behind a bad chunk size: 400, the inner request never reaches the upstream", async () => {
    const inner = `GET ${abs("/echo/smuggled-chunk")} HTTP/1.1\r\nHost: ${upHost}\r\n\r\n`;
    const r = await rawExchange(
      svc.proxyPort!,
      `POST ${abs("/echo/case-smuggle-chunk")} HTTP/1.1\r\nHost: ${upHost}\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n-1\r\n${inner}0\r\n\r\n`,
    );
    expectRefused(r, 400, "invalid chunk size");
    await stillServing();
    expect(seenWith("smuggled-chunk")).toEqual([]);
    expect(seenWith("case-smuggle-chunk")).toEqual([]);
  });
});

// ------------------------------------------------------------------------------------------------
// bad chunking (the head was valid and may already have been forwarded; the body is not)

describe("bad chunked request bodies", () => {
  const head = (path: string) => `POST ${abs(path)} HTTP/1.1\r\nHost: ${upHost}\r\nTransfer-Encoding: chunked\r\n\r\n`;
  const cases: [string, string, string, string][] = [
    ["chunk size 'zz'", "case-chunk-zz", "zz\r\nhello\r\n0\r\n\r\n", "invalid chunk size"],
    ["chunk size with 17 hex digits", "case-chunk-17", "00000000000000005\r\nhello\r\n0\r\n\r\n", "chunk size has too many digits"],
    ["missing CRLF after chunk data", "case-chunk-nocrlf", "5\r\nhelloXX0\r\n\r\n", "missing CRLF after chunk data"],
    ["chunk extension with a control character", "case-chunk-ext", "5;ext=a\x01b\r\nhello\r\n0\r\n\r\n", "invalid chunk extension"],
    ["bare LF ending the chunk size line", "case-chunk-barelf", "5\nhello\r\n0\r\n\r\n", "invalid chunk size"],
    ["a valid chunk, then a bad one", "case-chunk-second", "5\r\nhello\r\nq\r\nworld\r\n0\r\n\r\n", "invalid chunk size"],
    ["a negative chunk size", "case-chunk-neg", "-5\r\nhello\r\n0\r\n\r\n", "invalid chunk size"],
    ["a 5,000-byte chunk extension", "case-chunk-longext", `5;${"e".repeat(5000)}\r\nhello\r\n0\r\n\r\n`, "chunk size line too long"],
    ["a trailer line without a colon", "case-chunk-badtrailer", "5\r\nhello\r\n0\r\nNoColon\r\n\r\n", "header line without colon"],
    ["a 70 KB trailer section", "case-chunk-bigtrailer", `5\r\nhello\r\n0\r\nX-T: ${"t".repeat(70 * 1024)}\r\n\r\n`, "trailer section too large"],
  ];
  for (const [name, path, body, msg] of cases) {
    test(`${name}: 400 and the upstream never gets a complete request`, async () => {
      const r = await rawExchange(svc.proxyPort!, head(`/echo/${path}`) + body);
      expectRefused(r, 400, msg);
      await stillServing();
      expect(seenWith(path)).toEqual([]);
    });
  }

  test("bad chunk split across writes (head and first chunk first, then garbage): 400", async () => {
    const path = "case-chunk-split";
    const r = await rawExchange(svc.proxyPort!, [head(`/echo/${path}`) + "5\r\nhel", "lo\r\n", "g\r\n"], { spreadChunks: true });
    expectRefused(r, 400, "invalid chunk size");
    await stillServing();
    expect(seenWith(path)).toEqual([]);
  });
});

// ------------------------------------------------------------------------------------------------
// malformed heads

describe("malformed request heads", () => {
  const cases: [string, () => string, number, string][] = [
    ["header line without a colon", () => `GET ${abs("/echo/h")} HTTP/1.1\r\nHost: ${upHost}\r\nNoColonHere\r\n\r\n`, 400, "header line without colon"],
    ["space before the colon", () => `GET ${abs("/echo/h")} HTTP/1.1\r\nHost : ${upHost}\r\n\r\n`, 400, "whitespace between header name and colon"],
    ["obs-fold continuation line", () => `GET ${abs("/echo/h")} HTTP/1.1\r\nHost: ${upHost}\r\nX-A: one\r\n two\r\n\r\n`, 400, "obsolete line folding"],
    ["NUL in a header value", () => `GET ${abs("/echo/h")} HTTP/1.1\r\nHost: ${upHost}\r\nX-A: a\x00b\r\n\r\n`, 400, "invalid character 0x0 in header value"],
    ["CR inside a header value", () => `GET ${abs("/echo/h")} HTTP/1.1\r\nHost: ${upHost}\r\nX-A: a\rb\r\n\r\n`, 400, "invalid character 0xd in header value"],
    ["bare LF line endings", () => `GET ${abs("/echo/h")} HTTP/1.1\nHost: ${upHost}\n\n`, 400, "bare LF in message head"],
    ["lowercase method", () => `get ${abs("/echo/h")} HTTP/1.1\r\nHost: ${upHost}\r\n\r\n`, 400, "invalid request method"],
    ["HTTP/2.0 in the request line", () => `GET ${abs("/echo/h")} HTTP/2.0\r\nHost: ${upHost}\r\n\r\n`, 505, "unsupported HTTP version"],
    // (the HTTP/2 connection preface is answered in HTTP/2: tests/core/proxy/h2-proxy.test.ts)
    ["HTTP/1.2", () => `GET ${abs("/echo/h")} HTTP/1.2\r\nHost: ${upHost}\r\n\r\n`, 505, "unsupported HTTP version"],
    ["garbage version", () => `GET ${abs("/echo/h")} HTTP/x\r\nHost: ${upHost}\r\n\r\n`, 400, "malformed request line"],
    ["two spaces after the method", () => `GET  ${abs("/echo/h")} HTTP/1.1\r\nHost: ${upHost}\r\n\r\n`, 400, "empty request target"],
    ["control character in the target", () => `GET ${abs("/echo/h\x01")} HTTP/1.1\r\nHost: ${upHost}\r\n\r\n`, 400, "invalid character in request target"],
    ["two Host headers", () => `GET ${abs("/echo/h")} HTTP/1.1\r\nHost: ${upHost}\r\nHost: evil.example\r\n\r\n`, 400, "multiple Host headers"],
    ["empty header name", () => `GET ${abs("/echo/h")} HTTP/1.1\r\nHost: ${upHost}\r\n: value\r\n\r\n`, 400, "empty header name"],
    ["userinfo in the target", () => `GET http://user:pw@${upHost}/echo/h HTTP/1.1\r\nHost: ${upHost}\r\n\r\n`, 400, "userinfo in request target"],
    ["unsupported scheme", () => `GET ftp://${upHost}/echo/h HTTP/1.1\r\nHost: ${upHost}\r\n\r\n`, 400, "unsupported scheme"],
    ["port out of range", () => `GET http://127.0.0.1:70000/echo/h HTTP/1.1\r\nHost: x\r\n\r\n`, 400, "port out of range"],
    ["asterisk-form with GET", () => `GET * HTTP/1.1\r\nHost: ${upHost}\r\n\r\n`, 400, "asterisk-form is only allowed for OPTIONS"],
    ["invalid character in a header name", () => `GET ${abs("/echo/h")} HTTP/1.1\r\nHost: ${upHost}\r\nX(A): b\r\n\r\n`, 400, "invalid character 0x28 in header name"],
    ["empty host in the target", () => `GET http:///echo/h HTTP/1.1\r\nHost: ${upHost}\r\n\r\n`, 400, "invalid host"],
    ["unterminated IPv6 literal", () => `GET http://[::1/echo/h HTTP/1.1\r\nHost: ${upHost}\r\n\r\n`, 400, "unterminated IPv6 literal"],
    ["CONNECT with an absolute URL", () => `CONNECT ${up.httpUrl}/ HTTP/1.1\r\nHost: x\r\n\r\n`, 400, "invalid port"],
    ["CONNECT without a port", () => `CONNECT ${new URL(up.httpUrl).hostname} HTTP/1.1\r\nHost: x\r\n\r\n`, 400, "port required"],
  ];
  for (const [name, req, status, msg] of cases) {
    test(`${name}: ${status}`, async () => {
      const before = up.seen.length;
      const r = await rawExchange(svc.proxyPort!, req());
      expectRefused(r, status, msg);
      expect(up.seen.length).toBe(before);
      await stillServing();
    });
  }

  test("origin-form request sent to the proxy directly: 400 saying tapwire is a proxy", async () => {
    const r = await rawExchange(svc.proxyPort!, `GET / HTTP/1.1\r\nHost: 127.0.0.1:${svc.proxyPort}\r\n\r\n`);
    expectRefused(r, 400, "tapwire is a proxy");
    await stillServing();
  });

  test("leading empty lines before the request line are tolerated (RFC 9112 2.2)", async () => {
    const r = await rawExchange(svc.proxyPort!, `\r\n\r\nGET ${abs("/echo/case-leading-crlf")} HTTP/1.1\r\nHost: ${upHost}\r\nConnection: close\r\n\r\n`);
    expect(r.timedOut).toBe(false);
    const { responses } = parseResponses(r.text);
    expect(responses.map((x) => x.status)).toEqual([200]);
    expect(JSON.parse(responses[0]!.body).path).toBe("/echo/case-leading-crlf");
    await stillServing();
  });
});

// ------------------------------------------------------------------------------------------------
// oversize heads and slow clients

describe("huge heads and slow clients", () => {
  test("a 70 KB header section: 431", async () => {
    const big = "X-Big: " + "a".repeat(70 * 1024) + "\r\n";
    const r = await rawExchange(svc.proxyPort!, `GET ${abs("/echo/case-big-head")} HTTP/1.1\r\nHost: ${upHost}\r\n${big}\r\n`);
    expectRefused(r, 431, "message head larger than 65536 bytes");
    await stillServing();
    expect(seenWith("case-big-head")).toEqual([]);
  });

  test("a 70 KB request line: 431", async () => {
    const r = await rawExchange(svc.proxyPort!, `GET ${abs("/echo/case-big-line?" + "q".repeat(70 * 1024))} HTTP/1.1\r\nHost: ${upHost}\r\n\r\n`);
    expectRefused(r, 431, "message head larger than 65536 bytes");
    await stillServing();
    expect(seenWith("case-big-line")).toEqual([]);
  });

  test("100,000 tiny headers: 431", async () => {
    const many = "a:b\r\n".repeat(100_000);
    const r = await rawExchange(svc.proxyPort!, `GET ${abs("/echo/case-many-headers")} HTTP/1.1\r\nHost: ${upHost}\r\n${many}\r\n`);
    expectRefused(r, 431, "message head larger than 65536 bytes");
    await stillServing();
    expect(seenWith("case-many-headers")).toEqual([]);
  });

  test("a 60 KB head (under the 64 KiB limit) is accepted and forwarded whole", async () => {
    // Bun.serve caps heads at 16 KiB, so a raw upstream reports what arrived.
    const big = startRawUpstream((c, head) => {
      const pad = /\r\nX-Pad: (p*)\r\n/i.exec(head)?.[1] ?? "";
      const body = String(pad.length);
      c.socket.write(bytes(`HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`));
      c.socket.end();
    });
    try {
      const prefix = `GET http://127.0.0.1:${big.port}/near-limit HTTP/1.1\r\nHost: 127.0.0.1:${big.port}\r\nConnection: close\r\nX-Pad: `;
      const pad = "p".repeat(60 * 1024 - prefix.length);
      const r = await rawExchange(svc.proxyPort!, `${prefix}${pad}\r\n\r\n`);
      expect(r.timedOut).toBe(false);
      const { responses } = parseResponses(r.text);
      expect(responses.map((x) => [x.status, x.body])).toEqual([[200, String(pad.length)]]);
      await stillServing();
    } finally {
      big.stop();
    }
  });

  test("slowloris-ish: a valid head sent one byte at a time is answered normally", async () => {
    const req = `GET ${abs("/echo/case-slow")} HTTP/1.1\r\nHost: ${upHost}\r\nX-Slow: yes\r\n\r\n`;
    const r = await rawExchange(svc.proxyPort!, req.split(""), { spreadChunks: true, until: responsesComplete(1) });
    expect(r.timedOut).toBe(false);
    const { responses } = parseResponses(r.text);
    expect(responses.length).toBe(1);
    expect(responses[0]!.status).toBe(200);
    const j = JSON.parse(responses[0]!.body);
    expect(j.path).toBe("/echo/case-slow");
    expect(j.headers["x-slow"]).toBe("yes");
    // keep-alive request: the proxy did not close on us
    expect(r.closedByServer).toBe(false);
    await stillServing();
  });

  test("slow body: a Content-Length body sent one byte at a time arrives whole", async () => {
    const body = "0123456789abcdefghij";
    const req = [`POST ${abs("/echo/case-slow-body")} HTTP/1.1\r\nHost: ${upHost}\r\nContent-Length: ${body.length}\r\n\r\n`, ...body.split("")];
    const r = await rawExchange(svc.proxyPort!, req, { spreadChunks: true, until: responsesComplete(1) });
    expect(r.timedOut).toBe(false);
    const { responses } = parseResponses(r.text);
    expect(responses.length).toBe(1);
    expect(JSON.parse(responses[0]!.body)).toMatchObject({ body, size: body.length });
    await stillServing();
  });
});

// ------------------------------------------------------------------------------------------------
// CONNECT abuse

describe("CONNECT abuse", () => {
  const CONNECT_OK = "HTTP/1.1 200 Connection Established\r\n\r\n";

  test("random non-TLS, non-HTTP bytes after CONNECT are parsed as HTTP: 400", async () => {
    const garbage = concat(prng(0xc0ffee, 512, (b) => b === 0x16 || b === 0x0a), bytes("\r\n\r\n"));
    const r = await rawExchange(svc.proxyPort!, [bytes(`CONNECT ${upHost} HTTP/1.1\r\nHost: ${upHost}\r\n\r\n`), garbage]);
    expect(r.timedOut).toBe(false);
    expect(r.text.startsWith(CONNECT_OK)).toBe(true);
    const after = parseResponses(r.text.slice(CONNECT_OK.length));
    expect(after.responses.length).toBe(1);
    expect(after.responses[0]!.status).toBe(400);
    expect(after.responses[0]!.body).toContain("tapwire: bad request:");
    expect(headerOf(after.responses[0]!, "connection")).toBe("close");
    expect(r.closedByServer).toBe(true);
    await stillServing();
  });

  test("random bytes with a bare LF right after CONNECT (same write): 400 at once", async () => {
    const r = await rawExchange(svc.proxyPort!, `CONNECT ${upHost} HTTP/1.1\r\nHost: ${upHost}\r\n\r\n\x01\x02\x03garbage\nmore`);
    expect(r.timedOut).toBe(false);
    expect(r.text.startsWith(CONNECT_OK)).toBe(true);
    const after = parseResponses(r.text.slice(CONNECT_OK.length));
    expect(after.responses.map((x) => x.status)).toEqual([400]);
    expect(after.responses[0]!.body).toContain("bare LF in message head");
    expect(r.closedByServer).toBe(true);
    await stillServing();
  });

  test("TLS-looking garbage after CONNECT (0x16 0x03 0x01, not a ClientHello) then half-close: connection closed, no crash", async () => {
    // A complete 16-byte handshake record whose message type is not ClientHello: peekClientHello gives up,
    // the bytes are then read as (incomplete) HTTP; our half-close ends the connection.
    const junk = concat(new Uint8Array([0x16, 0x03, 0x01, 0x00, 0x10]), prng(7, 16, (b) => b === 0x01 || b === 0x0a || b === 0x0d));
    const r = await rawExchange(svc.proxyPort!, [bytes(`CONNECT ${upHost} HTTP/1.1\r\nHost: ${upHost}\r\n\r\n`), junk], { halfClose: true });
    expect(r.timedOut).toBe(false);
    expect(r.text.startsWith(CONNECT_OK)).toBe(true);
    const rest = r.text.slice(CONNECT_OK.length);
    // nothing, or a 400 refusal: never a hang, never anything else
    if (rest.length) expect(statusOf(rest)).toBe(400);
    expect(r.closedByServer).toBe(true);
    await stillServing();
  });

  test("a truncated TLS record after CONNECT, then half-close: the proxy closes the connection", async () => {
    // The record header promises 0x0200 bytes; only 10 follow before the client half-closes. The proxy can
    // never complete the ClientHello, so the client's FIN must end the session.
    const junk = concat(new Uint8Array([0x16, 0x03, 0x01, 0x02, 0x00]), prng(9, 10));
    const before = liveSessions();
    const r = await rawExchange(svc.proxyPort!, [bytes(`CONNECT ${upHost} HTTP/1.1\r\nHost: ${upHost}\r\n\r\n`), junk], { halfClose: true });
    expect(r.timedOut).toBe(false);
    expect(r.closedByServer).toBe(true);
    // The 200 was sent before our FIN; an abortive close by the proxy may still make it vanish on our side.
    expect(CONNECT_OK.startsWith(r.text)).toBe(true);
    if (before !== null) await eventually("the half-closed CONNECT session to be released", () => liveSessions() === before);
    await stillServing();
  });

  test("CONNECT to a dead port, plain HTTP inside: 200, then 502 for the request", async () => {
    const dead = deadPort();
    const r = await rawExchange(
      svc.proxyPort!,
      [bytes(`CONNECT 127.0.0.1:${dead} HTTP/1.1\r\nHost: 127.0.0.1:${dead}\r\n\r\n`), bytes(`GET /x HTTP/1.1\r\nHost: 127.0.0.1:${dead}\r\n\r\n`)],
      { until: responsesComplete(2, true) },
    );
    expect(r.timedOut).toBe(false);
    const { responses } = parseResponses(r.text, { connectFirst: true });
    expect(responses.map((x) => x.status)).toEqual([200, 502]);
    expect(responses[1]!.body).toContain(`connection refused by 127.0.0.1:${dead}`);
    await stillServing();
  });

  test("CONNECT to a dead port, intercepted TLS inside: the request gets a 502", async () => {
    const dead = deadPort();
    const sock = net.connect({ host: "127.0.0.1", port: svc.proxyPort! });
    const result = await new Promise<{ status: number; body: string } | { error: string }>((resolve) => {
      const timer = setTimeout(() => {
        sock.destroy();
        resolve({ error: "timed out" });
      }, WAIT_MS);
      let head = "";
      sock.on("error", (e) => {
        clearTimeout(timer);
        resolve({ error: e.message });
      });
      sock.once("connect", () => sock.write(`CONNECT 127.0.0.1:${dead} HTTP/1.1\r\nHost: 127.0.0.1:${dead}\r\n\r\n`));
      const onData = (d: Buffer) => {
        head += d.toString("latin1");
        if (!head.includes("\r\n\r\n")) return;
        sock.off("data", onData);
        if (head !== CONNECT_OK) {
          clearTimeout(timer);
          sock.destroy();
          return resolve({ error: `unexpected CONNECT answer ${JSON.stringify(head)}` });
        }
        const t = tls.connect({ socket: sock, servername: "localhost", ca: svc.ca.certPem, ALPNProtocols: ["http/1.1"] });
        let text = "";
        t.on("error", (e) => {
          clearTimeout(timer);
          resolve({ error: e.message });
        });
        t.on("secureConnect", () => t.write(`GET /x HTTP/1.1\r\nHost: localhost:${dead}\r\n\r\n`));
        t.on("data", (c: Buffer) => {
          text += c.toString("latin1");
          const { responses } = parseResponses(text);
          if (responses.length) {
            clearTimeout(timer);
            t.destroy();
            resolve({ status: responses[0]!.status, body: responses[0]!.body });
          }
        });
        t.on("close", () => {
          clearTimeout(timer);
          resolve({ error: `closed after ${JSON.stringify(text)}` });
        });
      };
      sock.on("data", onData);
    });
    expect(result).toMatchObject({ status: 502 });
    expect((result as { body: string }).body).toContain(`connection refused by 127.0.0.1:${dead}`);
    await stillServing();
  });

  test("CONNECT inside a plain-HTTP CONNECT tunnel: 400", async () => {
    const r = await rawExchange(
      svc.proxyPort!,
      [bytes(`CONNECT ${upHost} HTTP/1.1\r\nHost: ${upHost}\r\n\r\n`), bytes(`CONNECT ${upHost} HTTP/1.1\r\nHost: ${upHost}\r\n\r\n`)],
    );
    expect(r.timedOut).toBe(false);
    expect(r.text.startsWith(CONNECT_OK)).toBe(true);
    const after = parseResponses(r.text.slice(CONNECT_OK.length));
    expect(after.responses.map((x) => x.status)).toEqual([400]);
    expect(after.responses[0]!.body).toContain("CONNECT inside a CONNECT tunnel is not supported");
    expect(r.closedByServer).toBe(true);
    await stillServing();
  });
});

// ------------------------------------------------------------------------------------------------
// clients that hang up

describe("clients that hang up", () => {
  test("hang-up mid request body (10 of 1,000,000 bytes, then close): no crash, the upstream never gets a complete request", async () => {
    const r = await rawExchange(
      svc.proxyPort!,
      `POST ${abs("/sink?case=hangup-body")} HTTP/1.1\r\nHost: ${upHost}\r\nContent-Length: 1000000\r\n\r\n0123456789`,
      { closeAfterWrite: "fin" },
    );
    expect(r.timedOut).toBe(false);
    await stillServing();
    expect(seenWith("case=hangup-body")).toEqual([]);
  });

  test("hang-up mid request body after it was forwarded: the flow is recorded with an error, the upstream connection dropped", async () => {
    const hold = startRawUpstream(() => {});
    try {
      const r = await rawExchange(
        svc.proxyPort!,
        [
          `POST http://127.0.0.1:${hold.port}/sink?case=hangup-forwarded HTTP/1.1\r\nHost: 127.0.0.1:${hold.port}\r\nContent-Length: 1000000\r\n\r\n0123456789`,
          { waitFor: hold.firstHead },
        ],
        { closeAfterWrite: "fin" },
      );
      expect(r.timedOut).toBe(false);
      expect(r.text).toBe("");
      const conn = await within(hold.firstHead, "the upstream to get the request");
      await within(conn.closed, "the proxy to drop the upstream connection");
      await stillServing();
      let entry: TrafficItem | undefined;
      await eventually("the hung-up flow in the traffic list", async () => {
        entry = (await traffic(20)).find((e) => e.url.includes("case=hangup-forwarded"));
        return entry !== undefined;
      });
      expect(entry!.method).toBe("POST");
      expect(entry!.has_response).toBe(false);
      expect(entry!.error).toBe("client disconnected");
    } finally {
      hold.stop();
    }
  });

  test("hang-up right after the request head, before the client's label is known: the flow is still recorded", async () => {
    // The capture addon decides flow.capture only once the connection's client label resolves (async /proc
    // lookup). A client that hangs up before that is never recorded, although the flow existed and failed.
    const r = await rawExchange(
      svc.proxyPort!,
      `POST ${abs("/sink?case=hangup-before-label")} HTTP/1.1\r\nHost: ${upHost}\r\nContent-Length: 1000000\r\n\r\n0123456789`,
      { closeAfterWrite: "fin" },
    );
    expect(r.timedOut).toBe(false);
    await stillServing();
    let entry: TrafficItem | undefined;
    await eventually("the hung-up flow in the traffic list", async () => {
      entry = (await traffic(20)).find((e) => e.url.includes("case=hangup-before-label"));
      return entry !== undefined;
    });
    expect(entry!.error).toBe("client disconnected");
  });

  test("abortive hang-up (RST) right after a request head: no crash", async () => {
    const r = await rawExchange(svc.proxyPort!, `GET ${abs("/echo/case-hangup-rst")} HTTP/1.1\r\nHost: ${upHost}\r\n\r\n`, { closeAfterWrite: "rst" });
    expect(r.timedOut).toBe(false);
    await stillServing();
  });

  test("hang-up mid response (/bytes?n=50000000): proxy keeps serving, the flow records the disconnect", async () => {
    const r = await rawExchange(svc.proxyPort!, `GET ${abs("/bytes?n=50000000&case=hangup-res")} HTTP/1.1\r\nHost: ${upHost}\r\n\r\n`, {
      abortAfterBytes: 4096,
    });
    expect(r.timedOut).toBe(false);
    expect(statusOf(r.text)).toBe(200);
    expect(r.raw.length).toBeLessThan(50_000_000);
    await stillServing();
    let entry: TrafficItem | undefined;
    await eventually("the hung-up response flow in the traffic list", async () => {
      entry = (await traffic(20)).find((e) => e.url.includes("case=hangup-res"));
      return entry !== undefined;
    });
    expect(entry!.status_code).toBe(200);
    expect(entry!.error).toBe("client disconnected");
  });

  test("hang-up mid response: the proxy drops its upstream connection", async () => {
    const chunk = new Uint8Array(65536).fill(0x62);
    const endless = startRawUpstream((c) => {
      const pump = () => {
        while (c.socket.write(chunk) === chunk.length) {
          // until the kernel pushes back; drain calls pump again
        }
      };
      c.onDrain = pump;
      c.socket.write(bytes("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 50000000000\r\n\r\n"));
      pump();
    });
    try {
      const r = await rawExchange(svc.proxyPort!, `GET http://127.0.0.1:${endless.port}/endless HTTP/1.1\r\nHost: 127.0.0.1:${endless.port}\r\n\r\n`, {
        abortAfterBytes: 200_000,
      });
      expect(r.timedOut).toBe(false);
      expect(statusOf(r.text)).toBe(200);
      const conn = await within(endless.firstHead, "the upstream to get the request");
      await within(conn.closed, "the proxy to close its upstream connection");
      await stillServing();
    } finally {
      endless.stop();
    }
  });

  test("half-close right after a complete GET: the response is still delivered, then the proxy closes", async () => {
    const r = await rawExchange(svc.proxyPort!, `GET ${abs("/echo/case-halfclose")} HTTP/1.1\r\nHost: ${upHost}\r\n\r\n`, { halfClose: true });
    expect(r.timedOut).toBe(false);
    const { responses } = parseResponses(r.text);
    expect(responses.map((x) => x.status)).toEqual([200]);
    expect(JSON.parse(responses[0]!.body).path).toBe("/echo/case-halfclose");
    expect(r.closedByServer).toBe(true);
    await stillServing();
  });

  test("half-close after the request reached the upstream: the late response is still delivered", async () => {
    const hold = startRawUpstream(() => {});
    try {
      let shutDown!: () => void;
      const didShutdown = new Promise<void>((r) => (shutDown = r));
      const ex = rawExchange(svc.proxyPort!, [
        `GET http://127.0.0.1:${hold.port}/late HTTP/1.1\r\nHost: 127.0.0.1:${hold.port}\r\n\r\n`,
        { waitFor: hold.firstHead, shutdown: true, done: shutDown },
      ]);
      const conn = await within(hold.firstHead, "the upstream to get the request");
      await within(didShutdown, "the client half-close");
      // A full exchange through the proxy: its event loop has seen our FIN by the time this returns.
      await stillServing();
      conn.socket.write(bytes("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\nlate"));
      const r = await ex;
      expect(r.timedOut).toBe(false);
      const { responses } = parseResponses(r.text);
      expect(responses.map((x) => [x.status, x.body])).toEqual([[200, "late"]]);
      expect(r.closedByServer).toBe(true);
      await stillServing();
    } finally {
      hold.stop();
    }
  });

  test("bad chunk after the response has started: the proxy closes the connection (no 400 mid-response)", async () => {
    const early = startRawUpstream((c) => {
      // answer at once, without reading the request body, and keep the body open
      c.socket.write(bytes("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\nfirst-part"));
    });
    try {
      const r = await rawExchange(svc.proxyPort!, [
        `POST http://127.0.0.1:${early.port}/early HTTP/1.1\r\nHost: 127.0.0.1:${early.port}\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n`,
        { waitFor: (t) => t.includes("first-part"), write: "zz\r\n" },
      ]);
      expect(r.timedOut).toBe(false);
      expect(r.text.startsWith("HTTP/1.1 200 OK\r\n")).toBe(true);
      expect(r.text).toContain("first-part");
      expect(r.text).not.toContain("400 Bad Request");
      expect(r.closedByServer).toBe(true);
      const conn = await within(early.firstHead, "the upstream to get the request");
      await within(conn.closed, "the proxy to drop the upstream connection");
      expect(conn.received).toContain("5\r\nhello\r\n");
      expect(conn.received).not.toContain("zz");
      await stillServing();
    } finally {
      early.stop();
    }
  });
});

// ------------------------------------------------------------------------------------------------
// pipelining, HTTP/1.0, connection floods

describe("pipelining, HTTP/1.0 and connection floods", () => {
  test("two pipelined GETs in one write: two responses, in order", async () => {
    const r = await rawExchange(
      svc.proxyPort!,
      `GET ${abs("/echo/pipe-1")} HTTP/1.1\r\nHost: ${upHost}\r\n\r\nGET ${abs("/echo/pipe-2")} HTTP/1.1\r\nHost: ${upHost}\r\nConnection: close\r\n\r\n`,
    );
    expect(r.timedOut).toBe(false);
    const { responses, rest } = parseResponses(r.text);
    expect(responses.map((x) => x.status)).toEqual([200, 200]);
    expect(responses.map((x) => JSON.parse(x.body).path)).toEqual(["/echo/pipe-1", "/echo/pipe-2"]);
    expect(rest).toBe("");
    expect(r.closedByServer).toBe(true);
    await stillServing();
  });

  test("pipelined POST with a body then GET, in one write: two responses, in order, bodies intact", async () => {
    const r = await rawExchange(
      svc.proxyPort!,
      `POST ${abs("/echo/pipe-post")} HTTP/1.1\r\nHost: ${upHost}\r\nContent-Length: 5\r\n\r\nhello` +
        `GET ${abs("/echo/pipe-get")} HTTP/1.1\r\nHost: ${upHost}\r\nConnection: close\r\n\r\n`,
    );
    expect(r.timedOut).toBe(false);
    const { responses } = parseResponses(r.text);
    expect(responses.map((x) => x.status)).toEqual([200, 200]);
    const [a, b] = responses.map((x) => JSON.parse(x.body));
    expect(a).toMatchObject({ method: "POST", path: "/echo/pipe-post", body: "hello" });
    expect(b).toMatchObject({ method: "GET", path: "/echo/pipe-get", body: "" });
    await stillServing();
  });

  test("100 pipelined GETs in one write: 100 responses, in order", async () => {
    const N = 100;
    let req = "";
    for (let i = 0; i < N; i++) req += `GET ${abs(`/echo/pipe-many-${i}`)} HTTP/1.1\r\nHost: ${upHost}\r\n${i === N - 1 ? "Connection: close\r\n" : ""}\r\n`;
    const r = await rawExchange(svc.proxyPort!, req);
    expect(r.timedOut).toBe(false);
    const { responses, rest } = parseResponses(r.text);
    expect(responses.map((x) => JSON.parse(x.body).path)).toEqual(Array.from({ length: N }, (_, i) => `/echo/pipe-many-${i}`));
    expect(rest).toBe("");
    expect(r.closedByServer).toBe(true);
    await stillServing();
  });

  test("a request aimed at the proxy's own address does not loop", async () => {
    const r = await rawExchange(
      svc.proxyPort!,
      `GET http://127.0.0.1:${svc.proxyPort}/loop HTTP/1.1\r\nHost: 127.0.0.1:${svc.proxyPort}\r\nConnection: close\r\n\r\n`,
    );
    expect(r.timedOut).toBe(false);
    const { responses } = parseResponses(r.text);
    // forwarded once, in origin-form, which the proxy itself refuses: the refusal comes back as the answer
    expect(responses.map((x) => x.status)).toEqual([400]);
    expect(responses[0]!.body).toContain("tapwire is a proxy");
    await stillServing();
  });

  test("a request pipelined after one with Connection: close is never forwarded", async () => {
    const r = await rawExchange(
      svc.proxyPort!,
      `GET ${abs("/echo/pipe-close-1")} HTTP/1.1\r\nHost: ${upHost}\r\nConnection: close\r\n\r\nGET ${abs("/echo/pipe-close-2")} HTTP/1.1\r\nHost: ${upHost}\r\n\r\n`,
    );
    expect(r.timedOut).toBe(false);
    const { responses, rest } = parseResponses(r.text);
    expect(responses.map((x) => JSON.parse(x.body).path)).toEqual(["/echo/pipe-close-1"]);
    expect(rest).toBe("");
    expect(r.closedByServer).toBe(true);
    await stillServing();
    expect(seenWith("pipe-close-2")).toEqual([]);
  });

  test("a valid request pipelined before a malformed one: the first is answered, then 400 and close", async () => {
    const r = await rawExchange(
      svc.proxyPort!,
      `GET ${abs("/echo/pipe-good")} HTTP/1.1\r\nHost: ${upHost}\r\n\r\nGET ${abs("/echo/pipe-bad")} HTTP/1.1\r\nHost: ${upHost}\r\nBad Header\r\n\r\n`,
    );
    expect(r.timedOut).toBe(false);
    const { responses } = parseResponses(r.text);
    expect(responses.map((x) => x.status)).toEqual([200, 400]);
    expect(JSON.parse(responses[0]!.body).path).toBe("/echo/pipe-good");
    expect(r.closedByServer).toBe(true);
    await stillServing();
    expect(seenWith("pipe-bad")).toEqual([]);
  });

  test("HTTP/1.0 request without Host: answered, Host filled in, connection closed", async () => {
    const r = await rawExchange(svc.proxyPort!, `GET ${abs("/echo/case-http10")} HTTP/1.0\r\n\r\n`);
    expect(r.timedOut).toBe(false);
    const { responses } = parseResponses(r.text);
    expect(responses.map((x) => x.status)).toEqual([200]);
    const j = JSON.parse(responses[0]!.body);
    expect(j.path).toBe("/echo/case-http10");
    expect(j.headers.host).toBe(upHost);
    expect(r.closedByServer).toBe(true);
    await stillServing();
  });

  test("1,000 connections opened and immediately closed: still serving, no leaked sessions", async () => {
    const before = liveSessions();
    const BATCH = 100;
    for (let b = 0; b < 1000; b += BATCH) {
      await within(
        Promise.all(
          Array.from(
            { length: BATCH },
            (_, i) =>
              new Promise<void>((resolve) => {
                Bun.connect({
                  hostname: "127.0.0.1",
                  port: svc.proxyPort!,
                  socket: {
                    open(s) {
                      // alternate an abrupt close and an orderly one
                      if ((b + i) % 2) s.terminate();
                      else s.end();
                    },
                    data() {},
                    close() {
                      resolve();
                    },
                    connectError() {
                      resolve();
                    },
                  },
                }).catch(() => resolve());
              }),
          ),
        ),
        `batch ${b / BATCH} of connections to close`,
      );
    }
    if (before !== null) await eventually("all flood sessions to be released", () => liveSessions() === before);
    await stillServing();
  });
});

// ------------------------------------------------------------------------------------------------
// heads forwarded as received

describe("heads nobody changed go out as received", () => {
  test("request fields and the whole response head keep their bytes: order, casing and spacing", async () => {
    const response = "HTTP/1.1 200 Fine Thanks\r\nx-z: 1\r\nContent-Length: 2\r\nX-A:  spaced \r\n\r\nok";
    const raw = startRawUpstream((c) => c.socket.write(bytes(response)));
    try {
      const fields = `host: 127.0.0.1:${raw.port}\r\nx-lower: a\r\nContent-Length: 3\r\nX-Odd:no-space\r\nX-Trail: b \r\n\r\n`;
      const r = await rawExchange(svc.proxyPort!, `POST http://127.0.0.1:${raw.port}/fidelity?q=1 HTTP/1.1\r\n${fields}abc`, {
        until: (t) => t.endsWith("ok"),
      });
      expect(r.timedOut).toBe(false);
      expect(r.text).toBe(response);
      const conn = await within(raw.firstHead, "the upstream to get the request");
      expect(conn.received).toBe(`POST /fidelity?q=1 HTTP/1.1\r\n${fields}abc`);
      // captured as the lists those bytes say (the store kept the bytes and parsed them when read)
      const item = (await traffic()).find((t) => t.url.endsWith("/fidelity?q=1"))!;
      const detail = (await (await svc.call(`/api/v1/traffic/${item.id}`)).json()) as { req_headers: string[][]; res_headers: string[][] };
      expect(detail.req_headers).toEqual([["host", `127.0.0.1:${raw.port}`], ["x-lower", "a"], ["Content-Length", "3"], ["X-Odd", "no-space"], ["X-Trail", "b"]]);
      expect(detail.res_headers).toEqual([["x-z", "1"], ["Content-Length", "2"], ["X-A", "spaced"]]);
      await stillServing();
    } finally {
      raw.stop();
    }
  });

  test("heads with hop-by-hop fields, repaired fields or a changed Host are rebuilt", async () => {
    const raw = startRawUpstream((c) => c.socket.write(bytes("HTTP/1.1 200 OK\r\nX-Fold: one\r\n two\r\nKeep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\nok")));
    try {
      const r = await rawExchange(
        svc.proxyPort!,
        `GET http://127.0.0.1:${raw.port}/rebuilt HTTP/1.1\r\nHost: elsewhere.test\r\nProxy-Connection: keep-alive\r\nX-Keep: 1\r\n\r\n`,
        { until: (t) => t.endsWith("ok") },
      );
      expect(r.timedOut).toBe(false);
      expect(r.text).toBe("HTTP/1.1 200 OK\r\nX-Fold: one two\r\nContent-Length: 2\r\n\r\nok");
      const conn = await within(raw.firstHead, "the upstream to get the request");
      expect(conn.received).toBe(`GET /rebuilt HTTP/1.1\r\nHost: 127.0.0.1:${raw.port}\r\nX-Keep: 1\r\n\r\n`);
      await stillServing();
    } finally {
      raw.stop();
    }
  });
});
