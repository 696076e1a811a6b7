#!/usr/bin/env bun
/**
 * The floor for HTTP/2 through any Bun process: a bare h2 relay. It accepts TLS (ALPN h2) with a node:http2 server
 * session, keeps one node:http2 client session to the target origin, and pipes each stream to a stream on that
 * session: request head as received, response head as received, bodies piped both ways. No CONNECT, no header
 * translation, no pipeline, no capture, no frame guard: what it costs is the two HTTP/2 endpoints (HPACK, framing,
 * flow control) and the two TLS sockets every HTTP/2 MITM proxy in Bun has to run.
 *
 *   bun bench/peers/bun-h2-relay.ts TARGET_PORT CERT KEY CA [--batched]
 *       prints `PORT n` once it listens on 127.0.0.1 (TLS for `localhost` with CERT/KEY; the origin verified by CA)
 *
 * --batched: the socket plumbing of tapwire: the client's TLS socket is a Bun.listen one and the origin's a node:tls
 * one, and each session runs on a Duplex that writes the frames of one turn as one socket write (see
 * src/core/http2/server-connection.ts and src/core/proxy/h2-upstream.ts) instead of on the TLS socket itself,
 * where Bun's session writes once per flush (one TLS record and one send() per stream event). What tapwire adds
 * to this relay is its own work: CONNECT, the frame guard, header translation, the exchange, addons and capture.
 *
 * bench/h2-bench.ts runs it beside direct and tapwire so the ratio to direct can be read against what Bun allows.
 */
import http2 from "node:http2";
import { readFileSync } from "node:fs";
import { Duplex } from "node:stream";
import tls from "node:tls";
import type { Socket } from "bun";

const [targetArg, certFile, keyFile, caFile] = process.argv.slice(2);
const batched = process.argv.includes("--batched");
const target = Number(targetArg);
if (!Number.isInteger(target) || target <= 0 || !certFile || !keyFile || !caFile) {
  console.error("usage: bun-h2-relay.ts TARGET_PORT CERT KEY CA [--batched]");
  process.exit(2);
}
const cert = readFileSync(certFile);
const key = readFileSync(keyFile);
const ca = readFileSync(caFile);

/** A socket as a Duplex whose writes within one turn leave as one socket write (backpressure both ways). */
function batchedDuplex(sock: tls.TLSSocket): Duplex {
  let pending: Buffer[] = [];
  let scheduled = false;
  let blocked = false;
  let waiting: (() => void) | null = null;
  const flush = () => {
    scheduled = false;
    const parts = pending;
    pending = [];
    if (parts.length === 0 || sock.destroyed) return;
    if (!sock.write(parts.length === 1 ? parts[0]! : Buffer.concat(parts))) blocked = true;
  };
  sock.on("drain", () => {
    blocked = false;
    const cb = waiting;
    waiting = null;
    cb?.();
  });
  const d = new Duplex({
    read: () => void sock.resume(),
    write: (chunk: Buffer, _enc, cb) => {
      pending.push(chunk);
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
      if (blocked) waiting = () => cb();
      else cb();
    },
    final: (cb) => {
      flush();
      sock.end();
      cb();
    },
    destroy: (err, cb) => {
      flush();
      sock.destroy();
      cb(err);
    },
  });
  sock.on("data", (b: Buffer) => {
    if (!d.push(b)) sock.pause();
  });
  sock.on("end", () => d.push(null));
  sock.on("close", () => d.destroy());
  sock.on("error", (e) => d.destroy(e));
  return d;
}

/** The origin's session (one, reconnected when it closes). */
let upstream: http2.ClientHttp2Session | null = null;
function origin(): http2.ClientHttp2Session {
  if (upstream && !upstream.closed && !upstream.destroyed) return upstream;
  const opts = { ca, servername: "localhost", ALPNProtocols: ["h2"] };
  const s = batched
    ? http2.connect(`https://localhost:${target}`, {
        createConnection: () => batchedDuplex(tls.connect({ host: "127.0.0.1", port: target, ...opts })),
      })
    : http2.connect(`https://localhost:${target}`, { ...opts, host: "127.0.0.1" } as http2.SecureClientSessionOptions);
  s.on("error", () => {});
  upstream = s;
  return s;
}

function onStream(down: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
  down.on("error", () => {});
  const ended = down.readableEnded || (down as unknown as { endAfterHeaders?: boolean }).endAfterHeaders === true;
  const up = origin().request(headers, { endStream: ended });
  up.on("error", () => down.close(http2.constants.NGHTTP2_INTERNAL_ERROR));
  up.on("response", (h) => {
    down.respond(h);
    up.on("data", (c: Buffer) => {
      if (!down.write(c)) up.pause();
    });
    down.on("drain", () => up.resume());
    up.on("end", () => down.end());
  });
  if (!ended) down.pipe(up);
  down.on("close", () => {
    if (!up.closed) up.close(http2.constants.NGHTTP2_CANCEL);
  });
}

/**
 * A Bun.listen TLS socket as a Duplex for the server session, as tapwire's client side has it: reads pushed in
 * (the socket paused while the session does not take them), the writes of one turn sent as one socket write, the
 * session's write callbacks held while the kernel does not take more.
 */
interface ClientSide {
  duplex: Duplex;
  queue: Uint8Array[];
  waiting: (() => void) | null;
}
function clientDuplex(s: Socket<ClientSide>): Duplex {
  let pending: Buffer[] = [];
  let scheduled = false;
  const send = (b: Uint8Array) => {
    const side = s.data;
    if (side.queue.length > 0) return void side.queue.push(b);
    const n = s.write(b);
    if (n < b.length) side.queue.push(b.subarray(Math.max(0, n)));
  };
  const flush = () => {
    scheduled = false;
    const parts = pending;
    pending = [];
    if (parts.length) send(parts.length === 1 ? parts[0]! : Buffer.concat(parts));
  };
  return new Duplex({
    read: () => s.resume(),
    write: (chunk: Buffer, _enc, cb) => {
      pending.push(chunk);
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
      if (s.data.queue.length > 0) s.data.waiting = () => cb();
      else cb();
    },
    final: (cb) => {
      flush();
      s.end();
      cb();
    },
    destroy: (err, cb) => {
      s.end();
      cb(err);
    },
  });
}

const settings = { maxConcurrentStreams: 1000 };
let port: number;
if (batched) {
  // the client side as tapwire's: a Bun.listen TLS socket, a Duplex batching the session's writes per turn
  const h2 = http2.createServer({ settings });
  h2.on("stream", onStream);
  const listener = Bun.listen<ClientSide>({
    hostname: "127.0.0.1",
    port: 0,
    tls: { cert: cert.toString(), key: key.toString(), ALPNProtocols: new Uint8Array([2, 104, 50]) } as unknown as Parameters<typeof Bun.listen>[0]["tls"],
    socket: {
      open(s) {
        s.data = { duplex: null as unknown as Duplex, queue: [], waiting: null };
        s.data.duplex = clientDuplex(s);
      },
      handshake(s, success) {
        if (success) h2.emit("connection", s.data.duplex);
        else s.end();
      },
      data(s, b) {
        if (!s.data.duplex.push(b)) s.pause();
      },
      drain(s) {
        const side = s.data;
        while (side.queue.length > 0) {
          const b = side.queue[0]!;
          const n = s.write(b);
          if (n < b.length) {
            side.queue[0] = b.subarray(Math.max(0, n));
            return;
          }
          side.queue.shift();
        }
        const cb = side.waiting;
        side.waiting = null;
        cb?.();
      },
      close(s) {
        s.data.duplex.push(null);
        s.data.duplex.destroy();
      },
      error(s) {
        s.data.duplex.destroy();
      },
    },
  });
  port = listener.port;
} else {
  const srv = http2.createSecureServer({ cert, key, settings });
  srv.on("stream", onStream);
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", () => r()));
  port = (srv.address() as { port: number }).port;
}
console.log(`PORT ${port}`);
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) process.exit(0);
}, 1000);
// a clean exit on SIGINT (the bench stops its children so), so that --cpu-prof writes its profile
process.on("SIGINT", () => process.exit(0));
