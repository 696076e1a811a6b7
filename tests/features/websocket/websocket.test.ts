import type { WsConnectionView } from "../../../src/features/websocket/store.ts";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import * as net from "node:net";
import { join } from "node:path";
import * as tls from "node:tls";
import * as zlib from "node:zlib";
import type { Server, ServerWebSocket } from "bun";
import type WsPackage from "ws";
import { generateCA } from "../../../src/core/tls/ca.ts";
import { LeafCertCache } from "../../../src/core/tls/leaf.ts";
import { encodeCloseFrame, encodeFrame, type EncodeFrameOptions } from "../../../src/core/ws/frame-encoder.ts";
import { startService } from "../../helpers/service.ts";
import { tempDir } from "../../helpers/tapwire-process.ts";

// Under Bun a bare `import "ws"` resolves to Bun's built-in re-implementation (backed by Bun's own client);
// loading the package by path gets the real `ws` library, a second, independent client implementation.
const WS: typeof WsPackage = createRequire(import.meta.url)("../../../node_modules/ws/index.js");

type Svc = Awaited<ReturnType<typeof startService>>;
let svc: Svc;
/** PEM of tapwire's CA (clients trust it to accept the intercepted wss). */
let proxyCa: string;
/** The upstreams' test CA (tapwire trusts it). */
let upstreamCa: ReturnType<typeof generateCA>;
let upstreamLeaf: { cert: string; key: string };

const enc = new TextEncoder();
const KEY = new Uint8Array([0x5a, 0x13, 0xc7, 0x88]);
const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

beforeAll(async () => {
  upstreamCa = generateCA();
  const leaf = new LeafCertCache(upstreamCa).get("localhost");
  upstreamLeaf = { cert: leaf.cert as unknown as string, key: leaf.key as unknown as string };
  const caFile = join(tempDir("tapwire-ws-ca-"), "upstream-ca.pem");
  writeFileSync(caFile, upstreamCa.certPem);
  svc = await startService({ upstreamCa: [caFile] });
  proxyCa = readFileSync(join(svc.config.dataDir, "ca.pem"), "utf8");
});
afterAll(async () => {
  await svc.stop();
});

// ---------------------------------------------------------------- small utilities

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

function prng(n: number, seed: number): Uint8Array {
  const b = new Uint8Array(n);
  let x = seed >>> 0;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    b[i] = x >>> 24;
  }
  return b;
}

const b64 = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.length).toString("base64");
const bytesOf = (d: unknown): Uint8Array => (typeof d === "string" ? enc.encode(d) : d instanceof ArrayBuffer ? new Uint8Array(d) : new Uint8Array((d as Uint8Array).buffer, (d as Uint8Array).byteOffset, (d as Uint8Array).byteLength).slice());

/** permessage-deflate payload of one message without context takeover (RFC 7692 7.2.1: the 00 00 ff ff tail removed). */
function deflateMessage(data: Uint8Array): Uint8Array {
  const out = new Uint8Array(zlib.deflateRawSync(data, { finishFlush: zlib.constants.Z_SYNC_FLUSH }));
  expect([...out.subarray(out.length - 4)]).toEqual([0, 0, 0xff, 0xff]);
  return out.subarray(0, out.length - 4);
}

/** An append-only list whose readers can wait for a condition (no polling, no sleeps). */
class Log<T> {
  readonly items: T[] = [];
  private waiters: { pred: (items: T[]) => boolean; resolve: () => void }[] = [];
  push(x: T): void {
    this.items.push(x);
    this.waiters = this.waiters.filter((w) => (w.pred(this.items) ? (w.resolve(), false) : true));
  }
  until(pred: (items: T[]) => boolean): Promise<T[]> {
    if (pred(this.items)) return Promise.resolve(this.items);
    return new Promise((resolve) => this.waiters.push({ pred, resolve: () => resolve(this.items) }));
  }
  count(n: number): Promise<T[]> {
    return this.until((i) => i.length >= n);
  }
}

/** Received bytes; readers wait for a length or for the end of an HTTP head. */
class ByteLog {
  private chunks: Uint8Array[] = [];
  length = 0;
  private waiters: { n: number; resolve: () => void }[] = [];
  push(d: Uint8Array): void {
    this.chunks.push(d.slice());
    this.length += d.length;
    this.waiters = this.waiters.filter((w) => (this.length >= w.n ? (w.resolve(), false) : true));
  }
  bytes(): Uint8Array {
    if (this.chunks.length !== 1) this.chunks = [concat(this.chunks)];
    return this.chunks[0] ?? new Uint8Array(0);
  }
  atLeast(n: number): Promise<void> {
    if (this.length >= n) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ n, resolve }));
  }
  /** Waits for `\r\n\r\n` at or after `from`; returns the index just past it. */
  async headEnd(from: number): Promise<number> {
    for (;;) {
      const b = this.bytes();
      const i = Buffer.from(b.buffer, b.byteOffset, b.length).indexOf("\r\n\r\n", from, "latin1");
      if (i >= 0) return i + 4;
      await this.atLeast(this.length + 1);
    }
  }
}

/** Collects everything a socket receives; `ended` settles when the peer ends or the socket closes. */
function collect(sock: net.Socket | tls.TLSSocket): { log: ByteLog; ended: Promise<void>; detach(): void } {
  const log = new ByteLog();
  const onData = (d: Buffer) => log.push(new Uint8Array(d.buffer, d.byteOffset, d.length));
  sock.on("data", onData);
  const ended = new Promise<void>((resolve) => {
    sock.once("end", () => resolve());
    sock.once("close", () => resolve());
  });
  return { log, ended, detach: () => sock.off("data", onData) };
}

const latin1 = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.length).toString("latin1");

// ---------------------------------------------------------------- API helpers

type ConnView = WsConnectionView;
interface FrameView {
  dir: "in" | "out";
  opcode: string;
  text: string;
  sizeBytes: number;
  truncated: boolean;
  ts: number;
  closeCode?: number;
  closeReason?: string;
  compressed?: boolean;
  wireSizeBytes?: number;
}

async function connections(): Promise<{ items: ConnView[]; total: number }> {
  const r = await svc.call("/api/v1/websocket/connections");
  expect(r.status).toBe(200);
  return (await r.json()) as { items: ConnView[]; total: number };
}
async function connByUrl(url: string): Promise<ConnView> {
  const found = (await connections()).items.filter((c) => c.url === url);
  expect(found.length).toBe(1);
  return found[0];
}
async function frames(connId: number): Promise<{ connId: number; url: string; items: FrameView[]; total: number }> {
  const r = await svc.call(`/api/v1/websocket/connections/${connId}/frames`);
  expect(r.status).toBe(200);
  return (await r.json()) as { connId: number; url: string; items: FrameView[]; total: number };
}
const brief = (f: FrameView) => [f.opcode, f.text, f.sizeBytes, f.truncated];

/** The record's handshake entry: a recorded 101 for the same URL (ws→http, wss→https). */
async function expectHandshakeEntry(c: ConnView): Promise<void> {
  expect(c.logId).not.toBeNull();
  const r = await svc.call(`/api/v1/traffic/${c.logId}`);
  expect(r.status).toBe(200);
  const e = (await r.json()) as { status_code: number; url: string; method: string };
  expect(e.status_code).toBe(101);
  expect(e.method).toBe("GET");
  expect(e.url).toBe(c.url.replace(/^ws/, "http"));
}

// ---------------------------------------------------------------- a real WebSocket server (Bun.serve)

type SrvEvent = { kind: "text" | "binary" | "ping" | "pong" | "close"; data: Uint8Array; code?: number; reason?: string };

interface EchoServer {
  server: Server<unknown>;
  url(path: string): string;
  /** Events per upgrade path. */
  events(path: string): Log<SrvEvent>;
  stop(): void;
}

/**
 * Echoes every data message back (compressed when permessage-deflate was negotiated); the text `srv-ping:<x>`
 * makes it send a ping with payload x instead; `srv-close` makes it close with 4001 "server bye".
 */
function echoServer(opts: { secure: boolean; deflate: false | "shared" | "dedicated" }): EchoServer {
  const logs = new Map<string, Log<SrvEvent>>();
  const events = (path: string) => {
    let l = logs.get(path);
    if (!l) logs.set(path, (l = new Log()));
    return l;
  };
  const server = Bun.serve<{ path: string }>({
    port: 0,
    hostname: "127.0.0.1",
    tls: opts.secure ? upstreamLeaf : undefined,
    fetch(req, srv) {
      if (srv.upgrade(req, { data: { path: new URL(req.url).pathname } })) return;
      return new Response("upgrade required", { status: 426 });
    },
    websocket: {
      perMessageDeflate: opts.deflate === false ? false : opts.deflate === "shared" ? true : { compress: "dedicated", decompress: "dedicated" },
      idleTimeout: 0,
      message(ws: ServerWebSocket<{ path: string }>, m) {
        events(ws.data.path).push({ kind: typeof m === "string" ? "text" : "binary", data: bytesOf(m) });
        if (typeof m === "string" && m.startsWith("srv-ping:")) return void ws.ping(m.slice(9));
        if (m === "srv-close") return void ws.close(4001, "server bye");
        ws.send(m, opts.deflate !== false);
      },
      ping(ws, d) {
        events(ws.data.path).push({ kind: "ping", data: bytesOf(d) });
      },
      pong(ws, d) {
        events(ws.data.path).push({ kind: "pong", data: bytesOf(d) });
      },
      close(ws, code, reason) {
        events(ws.data.path).push({ kind: "close", data: new Uint8Array(0), code, reason });
      },
    },
  });
  const base = opts.secure ? `wss://localhost:${server.port}` : `ws://127.0.0.1:${server.port}`;
  return { server, url: (p) => base + p, events, stop: () => server.stop(true) };
}

// ---------------------------------------------------------------- Bun's WebSocket client with the proxy option

const TEXT = "hello ünïcödé 😀 through tapwire";
const BIN = Uint8Array.from({ length: 256 }, (_, i) => i);
/** 70 KiB: past the 64 KiB preview cap. */
const BIG_TEXT = "0123456789abcdef".repeat((70 * 1024) / 16);

for (const secure of [false, true]) {
  for (const deflate of [false, "shared"] as const) {
    const label = `${secure ? "wss" : "ws"}${deflate ? " + permessage-deflate" : ""}`;
    describe(`Bun WebSocket client with { proxy } (CONNECT), ${label}`, () => {
      let srv: EchoServer;
      beforeAll(() => {
        srv = echoServer({ secure, deflate });
      });
      afterAll(() => srv.stop());

      test("text, binary, a 70 KiB message, pings both ways, close: both ends get exactly what was sent, every frame is recorded", async () => {
        const path = `/bun-${secure ? "s" : "p"}-${deflate ? "z" : "n"}`;
        const url = srv.url(path);
        const ws = new WebSocket(url, { proxy: `http://127.0.0.1:${svc.proxyPort}`, tls: { ca: proxyCa } } as unknown as string[]);
        ws.binaryType = "arraybuffer";
        const got = new Log<{ kind: "text" | "binary"; data: Uint8Array }>();
        ws.onmessage = (e) => got.push({ kind: typeof e.data === "string" ? "text" : "binary", data: bytesOf(e.data) });
        const closed = new Promise<CloseEvent>((resolve) => (ws.onclose = resolve));
        await new Promise<void>((resolve, reject) => {
          ws.onopen = () => resolve();
          ws.onerror = (e) => reject(new Error(`WebSocket through the proxy failed: ${(e as ErrorEvent).message}`));
        });
        if (deflate) expect(ws.extensions).toContain("permessage-deflate");
        const sev = srv.events(path);

        ws.send(TEXT);
        ws.send(BIN);
        ws.send(BIG_TEXT);
        await got.count(3);
        ws.ping("cli-ping");
        await sev.until((e) => e.some((x) => x.kind === "ping"));
        ws.send("srv-ping:hello");
        await sev.until((e) => e.some((x) => x.kind === "pong"));
        ws.close(1000, "done");
        const ce = await closed;
        expect(ce.code).toBe(1000);
        await sev.until((e) => e.some((x) => x.kind === "close"));

        // What the two ends actually received.
        expect(got.items.map((m) => m.kind)).toEqual(["text", "binary", "text"]);
        expect(new TextDecoder().decode(got.items[0].data)).toBe(TEXT);
        expect(got.items[1].data).toEqual(BIN);
        expect(new TextDecoder().decode(got.items[2].data)).toBe(BIG_TEXT);
        const s = sev.items;
        expect(s.map((x) => x.kind)).toEqual(["text", "binary", "text", "ping", "text", "pong", "close"]);
        expect(new TextDecoder().decode(s[0].data)).toBe(TEXT);
        expect(s[1].data).toEqual(BIN);
        expect(new TextDecoder().decode(s[2].data)).toBe(BIG_TEXT);
        expect(new TextDecoder().decode(s[3].data)).toBe("cli-ping");
        expect(new TextDecoder().decode(s[5].data)).toBe("hello");
        expect(s[6]).toMatchObject({ code: 1000, reason: "done" });

        // What tapwire recorded.
        const c = await connByUrl(url);
        expect(c.url.startsWith(secure ? "wss://localhost:" : "ws://127.0.0.1:")).toBe(true);
        await expectHandshakeEntry(c);
        expect(c.closed).toBe(true);
        expect(c.closedTs).not.toBeNull();
        expect(c.closedTs!).toBeGreaterThanOrEqual(c.openedTs);
        expect(c.compressed).toBe(deflate !== false);
        expect(c.error).toBeNull();
        const f = await frames(c.connId);
        expect(f.connId).toBe(c.connId);
        expect(f.url).toBe(url);
        expect(f.total).toBe(f.items.length);
        expect(c.frameCount).toBe(f.total);
        expect(c.framesSeen).toBe(f.total);
        const out = f.items.filter((x) => x.dir === "out");
        const inn = f.items.filter((x) => x.dir === "in");
        expect(out.map(brief)).toEqual([
          ["text", TEXT, enc.encode(TEXT).length, false],
          ["binary", b64(BIN), 256, false],
          ["text", BIG_TEXT.slice(0, 65536), 70 * 1024, true],
          ["ping", "", 8, false],
          ["text", "srv-ping:hello", 14, false],
          ["pong", "", 5, false],
          ["close", "", 6, false],
        ]);
        expect(out[6]).toMatchObject({ closeCode: 1000, closeReason: "done" });
        expect(inn.map(brief).slice(0, 5)).toEqual([
          ["text", TEXT, enc.encode(TEXT).length, false],
          ["binary", b64(BIN), 256, false],
          ["text", BIG_TEXT.slice(0, 65536), 70 * 1024, true],
          ["pong", "", 8, false],
          ["ping", "", 5, false],
        ]);
        expect(inn.length).toBe(6);
        expect(inn[5]).toMatchObject({ opcode: "close", text: "", closeCode: 1000 });
        for (const m of inn.slice(0, 3)) {
          if (deflate) {
            expect(m.compressed).toBe(true);
            expect(m.wireSizeBytes).toBeGreaterThan(0);
          } else expect(m.compressed).toBeUndefined();
        }
        // control frames are never compressed
        for (const m of f.items.filter((x) => x.opcode !== "text" && x.opcode !== "binary")) expect(m.compressed).toBeUndefined();
        // the echo is recorded after the message it echoes, and timestamps never go backwards
        expect(f.items.findIndex((x) => x.dir === "in")).toBeGreaterThan(0);
        for (let i = 1; i < f.items.length; i++) expect(f.items[i].ts).toBeGreaterThanOrEqual(f.items[i - 1].ts);
        expect(f.items[0].ts).toBeGreaterThanOrEqual(c.openedTs);
      });
    });
  }
}

// ---------------------------------------------------------------- the `ws` package through CONNECT

/** Opens a CONNECT tunnel through tapwire (and TLS inside it for wss) and returns the socket for the client. */
async function connectTunnel(host: string, port: number, secure: boolean): Promise<net.Socket> {
  const raw = net.connect(svc.proxyPort!, "127.0.0.1");
  await new Promise<void>((resolve, reject) => raw.once("connect", resolve).once("error", reject));
  const c = collect(raw);
  raw.write(`CONNECT ${host}:${port} HTTP/1.1\r\nHost: ${host}:${port}\r\n\r\n`);
  const end = await c.log.headEnd(0);
  c.detach();
  expect(latin1(c.log.bytes().subarray(0, end))).toStartWith("HTTP/1.1 200 ");
  expect(c.log.length).toBe(end);
  if (!secure) return raw;
  const t = tls.connect({ socket: raw, ca: proxyCa, servername: host });
  await new Promise<void>((resolve, reject) => t.once("secureConnect", resolve).once("error", reject));
  return t;
}

for (const secure of [false, true]) {
  for (const deflate of [false, "dedicated"] as const) {
    const label = `${secure ? "wss" : "ws"}${deflate ? " + permessage-deflate with context takeover" : ""}`;
    describe(`ws package through CONNECT, ${label}`, () => {
      let srv: EchoServer;
      beforeAll(() => {
        srv = echoServer({ secure, deflate });
      });
      afterAll(() => srv.stop());

      test("compressed and fragmented messages, 70 KiB binary, pings, close", async () => {
        const path = `/wspkg-${secure ? "s" : "p"}-${deflate ? "z" : "n"}`;
        const url = srv.url(path);
        const u = new URL(url);
        const sock = await connectTunnel(u.hostname, Number(u.port), secure);
        const ws = new WS(url, { perMessageDeflate: deflate ? { threshold: 0 } : false, createConnection: () => sock } as WsPackage.ClientOptions);
        const got = new Log<{ binary: boolean; data: Uint8Array }>();
        const pongs = new Log<Uint8Array>();
        ws.on("message", (d, isBinary) => got.push({ binary: isBinary, data: bytesOf(d) }));
        ws.on("pong", (d) => pongs.push(bytesOf(d)));
        const closed = new Promise<number>((resolve) => ws.on("close", (code) => resolve(code)));
        await new Promise<void>((resolve, reject) => ws.once("open", () => resolve()).once("error", reject));
        if (deflate) expect(ws.extensions).toContain("permessage-deflate");
        const sev = srv.events(path);

        const REPEAT = "the same sentence, again and again; ".repeat(20);
        const big = prng(70 * 1024, 7);
        ws.send(REPEAT);
        ws.send(REPEAT);
        ws.send("frag-1 ", { fin: false });
        ws.send("frag-2 ", { fin: false });
        ws.send("frag-3", { fin: true });
        ws.send(big, { binary: true });
        await got.count(4);
        ws.ping("ws-ping");
        await pongs.count(1);
        ws.send("srv-ping:from-server");
        await sev.until((e) => e.some((x) => x.kind === "pong"));
        ws.close(4000, "ws bye");
        expect(await closed).toBe(4000);
        await sev.until((e) => e.some((x) => x.kind === "close"));

        const dec = (b: Uint8Array) => new TextDecoder().decode(b);
        expect(got.items.map((m) => (m.binary ? "bin" : dec(m.data)))).toEqual([REPEAT, REPEAT, "frag-1 frag-2 frag-3", "bin"]);
        expect(got.items[3].data).toEqual(big);
        expect(dec(pongs.items[0])).toBe("ws-ping");
        const s = sev.items;
        expect(s.map((x) => x.kind)).toEqual(["text", "text", "text", "binary", "ping", "text", "pong", "close"]);
        expect(dec(s[2].data)).toBe("frag-1 frag-2 frag-3");
        expect(s[3].data).toEqual(big);
        expect(dec(s[6].data)).toBe("from-server");
        expect(s[7]).toMatchObject({ code: 4000, reason: "ws bye" });

        const c = await connByUrl(url);
        await expectHandshakeEntry(c);
        expect(c).toMatchObject({ closed: true, compressed: deflate !== false, error: null });
        const f = await frames(c.connId);
        const out = f.items.filter((x) => x.dir === "out");
        const inn = f.items.filter((x) => x.dir === "in");
        const bigPreview = b64(big.subarray(0, 65536));
        expect(out.map(brief)).toEqual([
          ["text", REPEAT, REPEAT.length, false],
          ["text", REPEAT, REPEAT.length, false],
          ["text", "frag-1 frag-2 frag-3", 20, false],
          ["binary", bigPreview, 70 * 1024, true],
          ["ping", "", 7, false],
          ["text", "srv-ping:from-server", 20, false],
          ["pong", "", 11, false],
          ["close", "", 8, false],
        ]);
        expect(out[7]).toMatchObject({ closeCode: 4000, closeReason: "ws bye" });
        expect(inn.map(brief).slice(0, 6)).toEqual([
          ["text", REPEAT, REPEAT.length, false],
          ["text", REPEAT, REPEAT.length, false],
          ["text", "frag-1 frag-2 frag-3", 20, false],
          ["binary", bigPreview, 70 * 1024, true],
          ["pong", "", 7, false],
          ["ping", "", 11, false],
        ]);
        expect(inn[6]).toMatchObject({ opcode: "close", closeCode: 4000 });
        if (deflate) {
          for (const m of [...out.slice(0, 4), ...inn.slice(0, 4)]) expect(m.compressed).toBe(true);
          // context takeover: the second identical message is mostly a back-reference to the first
          expect(out[1].wireSizeBytes!).toBeLessThan(out[0].wireSizeBytes!);
          expect(inn[1].wireSizeBytes!).toBeLessThan(inn[0].wireSizeBytes!);
        } else {
          for (const m of f.items) expect(m.compressed).toBeUndefined();
        }
      });
    });
  }
}

// ---------------------------------------------------------------- raw client and raw upstream: the relay is byte-exact

interface RawUpConn {
  head: string;
  /** Bytes received after the request head. */
  log: ByteLog;
  sock: net.Socket;
  ended: Promise<void>;
}

interface RawUpstream {
  port: number;
  conns: Log<RawUpConn>;
  stop(): void;
}

/** A hand-written WebSocket server: answers each upgrade with `respond(head)` (101 head plus any early frames) and records every byte after the request head. */
function rawUpstream(secure: boolean, respond: (head: string) => Uint8Array): Promise<RawUpstream> {
  const conns = new Log<RawUpConn>();
  const onConn = (sock: net.Socket) => {
    const c = collect(sock);
    sock.on("error", () => {});
    void c.log.headEnd(0).then((end) => {
      const all = c.log.bytes();
      const head = latin1(all.subarray(0, end));
      const log = new ByteLog();
      c.detach();
      log.push(all.subarray(end));
      sock.on("data", (d: Buffer) => log.push(new Uint8Array(d.buffer, d.byteOffset, d.length)));
      sock.write(respond(head));
      conns.push({ head, log, sock, ended: c.ended });
    });
  };
  const server = secure ? tls.createServer({ cert: upstreamLeaf.cert, key: upstreamLeaf.key }, onConn) : net.createServer(onConn);
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      resolve({ port: (server.address() as net.AddressInfo).port, conns, stop: () => server.close() });
    });
  });
}

function acceptFor(head: string): string {
  const key = /\r\nsec-websocket-key:\s*(\S+)/i.exec(head)?.[1] ?? "";
  return createHash("sha1").update(key + GUID).digest("base64");
}

function switching(head: string, extensions?: string): string {
  return `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptFor(head)}\r\n${extensions ? `Sec-WebSocket-Extensions: ${extensions}\r\n` : ""}\r\n`;
}

type Via = "absolute-ws" | "absolute-http" | "connect" | "connect-tls";

interface RawClient {
  sock: net.Socket;
  /** Bytes received after the 101 head. */
  log: ByteLog;
  head101: string;
  ended: Promise<void>;
}

/** A hand-written WebSocket client through tapwire: absolute-form (ws:// or http:// target) or inside CONNECT (plain or TLS). */
async function rawClient(opts: { via: Via; host: string; port: number; path: string; offerDeflate?: boolean; early?: Uint8Array }): Promise<RawClient> {
  let sock: net.Socket;
  if (opts.via === "connect" || opts.via === "connect-tls") sock = await connectTunnel(opts.host, opts.port, opts.via === "connect-tls");
  else {
    sock = net.connect(svc.proxyPort!, "127.0.0.1");
    await new Promise<void>((resolve, reject) => sock.once("connect", resolve).once("error", reject));
  }
  sock.on("error", () => {});
  const authority = `${opts.host}:${opts.port}`;
  const target = opts.via === "absolute-ws" ? `ws://${authority}${opts.path}` : opts.via === "absolute-http" ? `http://${authority}${opts.path}` : opts.path;
  const key = b64(prng(16, opts.port));
  const head =
    `GET ${target} HTTP/1.1\r\nHost: ${authority}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n` +
    (opts.offerDeflate ? "Sec-WebSocket-Extensions: permessage-deflate; client_no_context_takeover\r\n" : "") +
    "\r\n";
  const c = collect(sock);
  sock.write(opts.early ? concat([enc.encode(head), opts.early]) : enc.encode(head));
  const end = await c.log.headEnd(0);
  const all = c.log.bytes();
  const head101 = latin1(all.subarray(0, end));
  expect(head101).toStartWith("HTTP/1.1 101 ");
  expect(head101.toLowerCase()).toContain(`sec-websocket-accept: ${createHash("sha1").update(key + GUID).digest("base64").toLowerCase()}`);
  const log = new ByteLog();
  c.detach();
  log.push(all.subarray(end));
  sock.on("data", (d: Buffer) => log.push(new Uint8Array(d.buffer, d.byteOffset, d.length)));
  return { sock, log, head101, ended: c.ended };
}

/** Writes `data` in pseudo-random pieces (frames split at arbitrary points). */
function writeInPieces(sock: net.Socket, data: Uint8Array, seed: number): void {
  const r = prng(64, seed);
  let i = 0;
  let k = 0;
  while (i < data.length) {
    const n = 1 + (r[k++ % r.length] * 97) % 9000;
    sock.write(data.subarray(i, Math.min(data.length, i + n)));
    i += n;
  }
}

const masked = (o: EncodeFrameOptions) => encodeFrame({ ...o, mask: KEY });

describe("raw client ↔ tapwire ↔ raw server: byte-exact relay, every framing case recorded", () => {
  const PROSE = "Lorem ipsum dolor sit amet, websocket frames through a proxy. ".repeat(50);
  const FRAG_BIN = prng(2000, 3).map((x) => x & 0x0f); // compressible
  const BIG_BIN = prng(70 * 1024, 11);
  const EURO = "€".repeat(23894); // 71682 bytes: the 64 KiB cut falls inside a character
  const zBin = deflateMessage(FRAG_BIN);
  const zProse = deflateMessage(enc.encode(PROSE));
  const zServer = deflateMessage(enc.encode("server says " + PROSE));
  const hello = masked({ opcode: "text", payload: "hello raw" });
  const clientFrames = concat([
    masked({ opcode: "text", payload: "frag-a ", fin: false }),
    masked({ opcode: "ping", payload: "mid" }),
    masked({ opcode: "continuation", payload: "frag-b ", fin: false }),
    masked({ opcode: "continuation", payload: "frag-c", fin: true }),
    masked({ opcode: "binary", payload: BIG_BIN }),
    masked({ opcode: "text", payload: zProse, rsv1: true }),
    masked({ opcode: "binary", payload: zBin.subarray(0, 700), rsv1: true, fin: false }),
    masked({ opcode: "continuation", payload: zBin.subarray(700) }),
    masked({ opcode: "text", payload: "" }),
    encodeCloseFrame(1000, "raw bye", KEY),
  ]);
  const welcome = encodeFrame({ opcode: "text", payload: "welcome" });
  const serverFrames = concat([
    encodeFrame({ opcode: "text", payload: zServer, rsv1: true }),
    encodeFrame({ opcode: "text", payload: EURO }),
    encodeFrame({ opcode: "pong", payload: "mid" }),
    encodeFrame({ opcode: "binary", payload: new Uint8Array(0) }),
    encodeCloseFrame(1000),
  ]);
  const DEFLATE = "permessage-deflate; server_no_context_takeover; client_no_context_takeover";

  const cases: { via: Via; secure: boolean; early: boolean }[] = [
    { via: "absolute-ws", secure: false, early: true },
    { via: "absolute-http", secure: false, early: false },
    { via: "connect", secure: false, early: false },
    { via: "connect-tls", secure: true, early: true },
  ];
  for (const k of cases) {
    test(`${k.via}${k.early ? " (client frame sent with the upgrade request, server frame with the 101)" : ""}`, async () => {
      const up = await rawUpstream(k.secure, (head) => concat([enc.encode(switching(head, DEFLATE)), welcome]));
      try {
        const host = k.secure ? "localhost" : "127.0.0.1";
        const path = `/raw/${k.via}`;
        const cl = await rawClient({ via: k.via, host, port: up.port, path, offerDeflate: true, early: k.early ? hello : undefined });
        expect(cl.head101.toLowerCase()).toContain("sec-websocket-extensions: permessage-deflate; server_no_context_takeover; client_no_context_takeover");
        const [srvConn] = await up.conns.count(1);
        expect(srvConn.head.startsWith(`GET ${path} HTTP/1.1\r\n`)).toBe(true);
        expect(srvConn.head.toLowerCase()).toContain("\r\nupgrade: websocket\r\n");
        expect(srvConn.head.toLowerCase()).toContain("sec-websocket-extensions: permessage-deflate; client_no_context_takeover");

        if (!k.early) cl.sock.write(hello);
        writeInPieces(cl.sock, clientFrames, 1);
        writeInPieces(srvConn.sock, serverFrames, 2);
        const clientSent = concat([hello, clientFrames]);
        const serverSent = concat([welcome, serverFrames]);
        await srvConn.log.atLeast(clientSent.length);
        await cl.log.atLeast(serverSent.length);
        expect(srvConn.log.bytes()).toEqual(clientSent);
        expect(cl.log.bytes()).toEqual(serverSent);

        const url = `${k.secure ? "wss" : "ws"}://${host}:${up.port}${path}`;
        const c = await connByUrl(url);
        await expectHandshakeEntry(c);
        expect(c).toMatchObject({ closed: true, compressed: true, error: null });
        const f = await frames(c.connId);
        const out = f.items.filter((x) => x.dir === "out");
        const inn = f.items.filter((x) => x.dir === "in");
        expect(out.map(brief)).toEqual([
          ["text", "hello raw", 9, false],
          ["ping", "", 3, false],
          ["text", "frag-a frag-b frag-c", 20, false],
          ["binary", b64(BIG_BIN.subarray(0, 65536)), 70 * 1024, true],
          ["text", PROSE, PROSE.length, false],
          ["binary", b64(FRAG_BIN), 2000, false],
          ["text", "", 0, false],
          ["close", "", 9, false],
        ]);
        expect(out[4]).toMatchObject({ compressed: true, wireSizeBytes: zProse.length });
        expect(out[5]).toMatchObject({ compressed: true, wireSizeBytes: zBin.length });
        expect(out[7]).toMatchObject({ closeCode: 1000, closeReason: "raw bye" });
        expect(inn.map(brief)).toEqual([
          ["text", "welcome", 7, false],
          ["text", "server says " + PROSE, 12 + PROSE.length, false],
          ["text", "€".repeat(21845), 71682, true],
          ["pong", "", 3, false],
          ["binary", "", 0, false],
          ["close", "", 2, false],
        ]);
        expect(inn[1]).toMatchObject({ compressed: true, wireSizeBytes: zServer.length });
        expect(inn[5]).toMatchObject({ closeCode: 1000, closeReason: "" });
        cl.sock.destroy();
      } finally {
        up.stop();
      }
    });
  }

  test("a frame the parser rejects is reported on the record; the relay goes on byte for byte and the other direction is still recorded", async () => {
    // RSV1 set although no extension was negotiated: a protocol error for the observer, not for the relay.
    const bad = encodeFrame({ opcode: "text", payload: "not really compressed", rsv1: true });
    const up = await rawUpstream(false, (head) => concat([enc.encode(switching(head)), bad]));
    try {
      const cl = await rawClient({ via: "absolute-ws", host: "127.0.0.1", port: up.port, path: "/raw/bad" });
      const [srvConn] = await up.conns.count(1);
      const later = encodeFrame({ opcode: "text", payload: "after the bad frame" });
      srvConn.sock.write(later);
      const mine = masked({ opcode: "text", payload: "client still recorded" });
      cl.sock.write(mine);
      await cl.log.atLeast(bad.length + later.length);
      await srvConn.log.atLeast(mine.length);
      expect(cl.log.bytes()).toEqual(concat([bad, later]));
      expect(srvConn.log.bytes()).toEqual(mine);
      const c = await connByUrl(`ws://127.0.0.1:${up.port}/raw/bad`);
      expect(c.error).toContain("RSV1 set without a negotiated extension");
      expect(c.compressed).toBe(false);
      const f = await frames(c.connId);
      expect(f.items.map((x) => [x.dir, x.text])).toEqual([["out", "client still recorded"]]);
      cl.sock.destroy();
    } finally {
      up.stop();
    }
  });

  test("the server ending the connection marks the record closed, without any close frame", async () => {
    const up = await rawUpstream(false, (head) => enc.encode(switching(head)));
    try {
      const cl = await rawClient({ via: "absolute-ws", host: "127.0.0.1", port: up.port, path: "/raw/server-ends" });
      const url = `ws://127.0.0.1:${up.port}/raw/server-ends`;
      const before = await connByUrl(url);
      expect(before).toMatchObject({ closed: false, closedTs: null, frameCount: 0 });
      const [srvConn] = await up.conns.count(1);
      srvConn.sock.end();
      await cl.ended;
      const c = await connByUrl(url);
      expect(c.closed).toBe(true);
      expect(c.closedTs!).toBeGreaterThanOrEqual(c.openedTs);
      expect(c.frameCount).toBe(0);
    } finally {
      up.stop();
    }
  });

  test("the client ending the connection marks the record closed", async () => {
    const up = await rawUpstream(false, (head) => enc.encode(switching(head)));
    try {
      const cl = await rawClient({ via: "connect", host: "127.0.0.1", port: up.port, path: "/raw/client-ends" });
      const [srvConn] = await up.conns.count(1);
      cl.sock.end();
      await srvConn.ended;
      await cl.ended;
      const c = await connByUrl(`ws://127.0.0.1:${up.port}/raw/client-ends`);
      expect(c.closed).toBe(true);
      expect(c.closedTs).not.toBeNull();
    } finally {
      up.stop();
    }
  });
});

// ---------------------------------------------------------------- limits (spec 8)

describe("store limits through the proxy", () => {
  let up: RawUpstream;
  beforeAll(async () => {
    up = await rawUpstream(false, (head) => enc.encode(switching(head)));
  });
  afterAll(() => up.stop());

  async function open(path: string): Promise<{ cl: RawClient; srv: RawUpConn; conn: ConnView }> {
    const n = up.conns.items.length;
    const cl = await rawClient({ via: "absolute-ws", host: "127.0.0.1", port: up.port, path });
    const srv = (await up.conns.count(n + 1))[n];
    expect(srv.head.startsWith(`GET ${path} `)).toBe(true);
    return { cl, srv, conn: await connByUrl(`ws://127.0.0.1:${up.port}${path}`) };
  }

  test("501 frames: the 500 newest are kept", async () => {
    const { cl, srv, conn } = await open("/limits/frames");
    const all = concat(Array.from({ length: 501 }, (_, i) => masked({ opcode: "text", payload: `m${i}` })));
    writeInPieces(cl.sock, all, 3);
    await srv.log.atLeast(all.length);
    expect(srv.log.bytes()).toEqual(all);
    const f = await frames(conn.connId);
    expect(f.total).toBe(500);
    expect(f.items.length).toBe(500);
    expect(f.items[0].text).toBe("m1");
    expect(f.items[499].text).toBe("m500");
    const c = await connByUrl(conn.url);
    expect(c.frameCount).toBe(500);
    expect(c.framesSeen).toBe(501);
    cl.sock.destroy();
  });

  test("over 2 MiB of previews: the oldest frames go (each frame costs min(sizeBytes, 64 KiB))", async () => {
    const { cl, srv, conn } = await open("/limits/bytes");
    const payload = (i: number) => {
      const p = prng(70 * 1024, 100 + i);
      p[0] = i;
      return p;
    };
    const big = concat(Array.from({ length: 40 }, (_, i) => masked({ opcode: "binary", payload: payload(i) })));
    writeInPieces(cl.sock, big, 4);
    await srv.log.atLeast(big.length);
    let f = await frames(conn.connId);
    // 32 × 64 KiB = exactly 2 MiB fits
    expect(f.total).toBe(32);
    expect(f.items.map((x) => Buffer.from(x.text, "base64")[0])).toEqual(Array.from({ length: 32 }, (_, i) => 8 + i));
    for (const x of f.items) expect(x).toMatchObject({ opcode: "binary", sizeBytes: 70 * 1024, truncated: true });
    expect(f.items[0].text).toBe(b64(payload(8).subarray(0, 65536)));
    // one more byte of preview evicts one more frame
    const tiny = masked({ opcode: "text", payload: "z" });
    cl.sock.write(tiny);
    await srv.log.atLeast(big.length + tiny.length);
    f = await frames(conn.connId);
    expect(f.total).toBe(32);
    expect(Buffer.from(f.items[0].text, "base64")[0]).toBe(9);
    expect(f.items[31]).toMatchObject({ opcode: "text", text: "z", sizeBytes: 1 });
    const c = await connByUrl(conn.url);
    expect(c).toMatchObject({ frameCount: 32, framesSeen: 41 });
    cl.sock.destroy();
  });

  test("101 connections: the oldest is evicted (404 on its frames) and its relay is unaffected", async () => {
    const first = await open("/limits/conn/0");
    const firstFrame = masked({ opcode: "text", payload: "first" });
    first.cl.sock.write(firstFrame);
    await first.srv.log.atLeast(firstFrame.length);
    expect((await frames(first.conn.connId)).total).toBe(1);
    const opened = [first.conn.connId];
    for (let i = 1; i <= 100; i++) {
      const o = await open(`/limits/conn/${i}`);
      opened.push(o.conn.connId);
      o.cl.sock.destroy();
    }
    const list = await connections();
    expect(list.total).toBe(100);
    expect(list.items.length).toBe(100);
    // newest first
    expect(list.items.map((c) => c.connId)).toEqual(opened.slice(1).reverse());
    const gone = await svc.call(`/api/v1/websocket/connections/${first.conn.connId}/frames`);
    expect(gone.status).toBe(404);
    expect(((await gone.json()) as { error: { code: string } }).error.code).toBe("not_found");
    expect((await svc.call(`/api/v1/websocket/connections/${opened[1]}/frames`)).status).toBe(200);

    // the evicted connection is still open and relays both ways, byte for byte
    const more = masked({ opcode: "binary", payload: prng(5000, 9) });
    first.cl.sock.write(more);
    await first.srv.log.atLeast(firstFrame.length + more.length);
    expect(first.srv.log.bytes()).toEqual(concat([firstFrame, more]));
    const back = encodeFrame({ opcode: "text", payload: "still relayed" });
    first.srv.sock.write(back);
    await first.cl.log.atLeast(back.length);
    expect(first.cl.log.bytes()).toEqual(back);
    expect((await connections()).items.some((c) => c.connId === first.conn.connId)).toBe(false);
    first.cl.sock.destroy();
  });
});

// ---------------------------------------------------------------- capture on/off and API errors

describe("capture control and API errors", () => {
  let srv: EchoServer;
  beforeAll(() => {
    srv = echoServer({ secure: false, deflate: false });
  });
  afterAll(async () => {
    srv.stop();
    await svc.call("/api/v1/capture/start", { method: "POST" });
  });

  async function openBun(path: string): Promise<{ ws: WebSocket; got: Log<string>; closed: Promise<unknown> }> {
    const ws = new WebSocket(srv.url(path), { proxy: `http://127.0.0.1:${svc.proxyPort}` } as unknown as string[]);
    const got = new Log<string>();
    ws.onmessage = (e) => got.push(String(e.data));
    const closed = new Promise((resolve) => (ws.onclose = resolve));
    await new Promise<void>((resolve, reject) => {
      ws.onopen = () => resolve();
      ws.onerror = () => reject(new Error("WebSocket through the proxy failed"));
    });
    return { ws, got, closed };
  }

  test("an upgrade while capture is off is relayed but not recorded", async () => {
    expect((await svc.call("/api/v1/capture/stop", { method: "POST" })).status).toBe(204);
    const before = (await connections()).items.map((c) => c.connId);
    const { ws, got, closed } = await openBun("/capture-off");
    ws.send("unseen");
    expect(await got.count(1)).toEqual(["unseen"]);
    ws.close();
    await closed;
    expect((await connections()).items.map((c) => c.connId)).toEqual(before);
    expect((await connections()).items.some((c) => c.url.endsWith("/capture-off"))).toBe(false);
    expect((await svc.call("/api/v1/capture/start", { method: "POST" })).status).toBe(204);
  });

  test("frames are stored only while capture is on; framesSeen counts all of them", async () => {
    const { ws, got, closed } = await openBun("/capture-toggle");
    ws.send("before");
    await got.count(1);
    await svc.call("/api/v1/capture/stop", { method: "POST" });
    ws.send("while-off");
    await got.count(2);
    await svc.call("/api/v1/capture/start", { method: "POST" });
    ws.send("after");
    await got.count(3);
    expect(got.items).toEqual(["before", "while-off", "after"]);
    const c = await connByUrl(srv.url("/capture-toggle"));
    expect(c).toMatchObject({ frameCount: 4, framesSeen: 6, closed: false, closedTs: null });
    expect((await frames(c.connId)).items.map((f) => [f.dir, f.text])).toEqual([
      ["out", "before"],
      ["in", "before"],
      ["out", "after"],
      ["in", "after"],
    ]);
    ws.close();
    await closed;
  });

  test("unknown id → 404, non-numeric id → 400, no token → 401", async () => {
    const r = await svc.call("/api/v1/websocket/connections/987654/frames");
    expect(r.status).toBe(404);
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe("not_found");
    expect((await svc.call("/api/v1/websocket/connections/abc/frames")).status).toBe(400);
    expect((await fetch(svc.url("/api/v1/websocket/connections"))).status).toBe(401);
  });

  test("a malformed id is 400 naming it; a query parameter (the routes take none) is 400, not ignored", async () => {
    for (const bad of ["-1", "1.5", "1e0", "0x1", "+1", "%201"]) {
      const r = await svc.call(`/api/v1/websocket/connections/${bad}/frames`);
      expect({ bad, status: r.status }).toEqual({ bad, status: 400 });
      expect(((await r.json()) as { error: { message: string } }).error.message).toContain("'id'");
    }
    expect((await svc.call("/api/v1/websocket/connections/0/frames")).status).toBe(404);
    for (const path of ["/api/v1/websocket/connections?limit=5", "/api/v1/websocket/connections/987654/frames?limit=5"]) {
      const r = await svc.call(path);
      expect({ path, status: r.status }).toEqual({ path, status: 400 });
      expect(((await r.json()) as { error: { message: string } }).error.message).toContain("'limit'");
    }
  });

  test("the routes are in the OpenAPI document", async () => {
    const doc = (await (await svc.call("/api/v1/openapi.json")).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths)).toContain("/api/v1/websocket/connections");
    expect(Object.keys(doc.paths)).toContain("/api/v1/websocket/connections/{id}/frames");
  });
});
