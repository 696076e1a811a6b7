import net from "node:net";
import { createHash } from "node:crypto";
import { deflateRawSync, constants as zc } from "node:zlib";

/**
 * A misbehaving HTTP/1.1 upstream on loopback for reliability tests: every request path picks a fault.
 * It reads real request heads (and Content-Length bodies) off real sockets and answers with raw bytes, so it can
 * lie, stall and break framing in ways a well-behaved server library cannot.
 *
 * Paths (query parameters in brackets):
 *   /ok[?n=BYTES]            200 with a Content-Length body (default "ok"), keep-alive
 *   /stall                   reads the request, never answers (the connection stays open)
 *   /reset                   reads the request, then resets the connection (RST)
 *   /close-before-head       reads the request, then closes in order without a byte
 *   /bad-chunk               a 200 head with Transfer-Encoding: chunked, then an invalid chunk size, in one write
 *   /bad-chunk-later         the same head, then (after the client had it) an invalid chunk size
 *   /short?claim=N&send=M    Content-Length: N, then M bytes and close (a lie about the length)
 *   /early-hints?n=N         N `103 Early Hints` interim responses, then 200 "done"
 *   /big?n=BYTES             200 with Content-Length n, written as fast as the proxy takes it (backpressure honoured)
 *   /gzip-bomb?mib=N         200, Content-Encoding: gzip, N MiB of zeros compressed
 *   /ws-bomb?mib=N&count=K   WebSocket upgrade with permessage-deflate, then K compressed messages of N MiB of zeros
 *                            each (about 1 KB per MiB on the wire), then a small text message "after"
 * Every request is recorded in `seen` (method, target, raw head) when its head arrives.
 */
export interface FaultSeen {
  method: string;
  target: string;
  head: string;
}

export interface FaultUpstream {
  port: number;
  /** http://127.0.0.1:PORT */
  url: string;
  seen: FaultSeen[];
  /** Connections accepted so far. */
  readonly connections: number;
  /** Connections open now. */
  readonly open: number;
  stop(): Promise<void>;
}

const ZERO_MIB = Buffer.alloc(1024 * 1024);
/** 16 MiB of zeros as raw DEFLATE blocks ending in a sync flush (byte aligned, not final): copies concatenate. */
let zeroSegment: Buffer | null = null;
function zeros16MiB(): Buffer {
  zeroSegment ??= deflateRawSync(Buffer.alloc(16 * 1024 * 1024), { level: 9, finishFlush: zc.Z_SYNC_FLUSH });
  return zeroSegment;
}

/** A permessage-deflate payload that inflates to `mib` MiB of zeros (multiple of 16), without the 00 00 ff ff tail. */
export function deflatedZeros(mib: number): Buffer {
  const seg = zeros16MiB();
  const copies = Math.max(1, Math.round(mib / 16));
  const all = Buffer.concat(Array.from({ length: copies }, () => seg));
  return all.subarray(0, all.length - 4);
}

function wsFrame(opcode: number, payload: Buffer, rsv1: boolean): Buffer {
  const n = payload.length;
  const head = n < 126 ? Buffer.alloc(2) : n < 65536 ? Buffer.alloc(4) : Buffer.alloc(10);
  head[0] = 0x80 | (rsv1 ? 0x40 : 0) | opcode;
  if (n < 126) head[1] = n;
  else if (n < 65536) {
    head[1] = 126;
    head.writeUInt16BE(n, 2);
  } else {
    head[1] = 127;
    head.writeBigUInt64BE(BigInt(n), 2);
  }
  return Buffer.concat([head, payload]);
}

export async function startFaultUpstream(): Promise<FaultUpstream> {
  const seen: FaultSeen[] = [];
  const sockets = new Set<net.Socket>();
  let connections = 0;
  const server = net.createServer((sock) => {
    connections++;
    sockets.add(sock);
    sock.on("close", () => sockets.delete(sock));
    sock.on("error", () => {});
    let buf: Buffer = Buffer.alloc(0);
    let bodyLeft = 0;
    let busy = false;
    const onData = (d: Buffer): void => {
      buf = buf.length ? Buffer.concat([buf, d]) : d;
      pump();
    };
    sock.on("data", onData);
    const pump = () => {
      while (!busy) {
        if (bodyLeft > 0) {
          const n = Math.min(bodyLeft, buf.length);
          buf = buf.subarray(n);
          bodyLeft -= n;
          if (bodyLeft > 0) return;
        }
        const end = buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = buf.subarray(0, end + 4).toString("latin1");
        buf = buf.subarray(end + 4);
        const [method = "", target = ""] = head.split("\r\n")[0]!.split(" ");
        seen.push({ method, target, head });
        const cl = /\r\ncontent-length:\s*(\d+)/i.exec(head);
        bodyLeft = cl ? Number(cl[1]) : 0;
        busy = true;
        answer(sock, method, target, head, () => {
          busy = false;
          pump();
        });
      }
    };
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    seen,
    get connections() {
      return connections;
    },
    get open() {
      return sockets.size;
    },
    async stop() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

function answer(sock: net.Socket, method: string, target: string, head: string, next: () => void): void {
  const u = new URL(target.startsWith("/") ? `http://x${target}` : target);
  const q = (k: string, d: number) => Number(u.searchParams.get(k) ?? d);
  switch (u.pathname) {
    case "/ok": {
      const n = q("n", 0);
      const body = n > 0 ? Buffer.alloc(n, 97) : Buffer.from("ok");
      sock.write(Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n`), body]));
      return next();
    }
    case "/stall":
      return; // never answers
    case "/reset":
      sock.resetAndDestroy();
      return;
    case "/close-before-head":
      sock.end();
      return;
    case "/bad-chunk":
      sock.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n");
      sock.end();
      return;
    case "/bad-chunk-later":
      sock.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n");
      setTimeout(() => {
        sock.write("zz\r\nbad\r\n");
        sock.end();
      }, 300);
      return;
    case "/short": {
      const claim = q("claim", 100);
      const send = q("send", 10);
      sock.write(`HTTP/1.1 200 OK\r\nContent-Length: ${claim}\r\n\r\n`);
      sock.end(Buffer.alloc(send, 98));
      return;
    }
    case "/early-hints": {
      const n = q("n", 1);
      const hint = Buffer.from("HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n");
      const all = Buffer.alloc(hint.length * n);
      for (let i = 0; i < n; i++) hint.copy(all, i * hint.length);
      sock.write(all);
      sock.write("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ndone");
      return next();
    }
    case "/big": {
      const n = q("n", 1024 * 1024);
      sock.write(`HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: ${n}\r\n\r\n`);
      const chunk = Buffer.alloc(64 * 1024, 97);
      let sent = 0;
      const more = () => {
        while (sent < n) {
          const k = Math.min(chunk.length, n - sent);
          sent += k;
          if (!sock.write(k === chunk.length ? chunk : chunk.subarray(0, k))) return void sock.once("drain", more);
        }
        next();
      };
      return more();
    }
    case "/gzip-bomb": {
      const mib = q("mib", 64);
      const { gzipSync } = require("node:zlib") as typeof import("node:zlib");
      const parts: Buffer[] = [];
      for (let i = 0; i < mib; i++) parts.push(ZERO_MIB);
      const body = gzipSync(Buffer.concat(parts), { level: 9 });
      sock.write(Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: ${body.length}\r\n\r\n`), body]));
      return next();
    }
    case "/ws-bomb": {
      const key = /\r\nsec-websocket-key:\s*(\S+)/i.exec(head)?.[1] ?? "";
      const accept = createHash("sha1").update(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");
      sock.write(
        `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n` +
          `Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; client_no_context_takeover\r\n\r\n`,
      );
      const payload = deflatedZeros(q("mib", 1024));
      const count = q("count", 1);
      for (let i = 0; i < count; i++) sock.write(wsFrame(2, payload, true));
      sock.write(wsFrame(1, Buffer.from("after"), false));
      sock.removeAllListeners("data");
      sock.on("data", () => {});
      return;
    }
    default:
      sock.write("HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found");
      return next();
  }
  void method;
}
