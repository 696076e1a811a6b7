/**
 * Chunked bodies relayed with their framing as it came (issue 20, streaming): an HTTP/1.1 origin written by hand
 * answers chunked, a raw HTTP/1.1 client reads the bytes tapwire sends. The client must get the origin's chunk-size
 * lines (extensions included: RFC 9112 7.1.1 lets a proxy forward them) and data byte for byte, then a trailer
 * section that tapwire wrote itself (fields that may not be trailers dropped), and never a byte the origin sent
 * after the body. The same for a chunked request going to the origin. The capture's copy stops at --body-limit
 * while the true size is recorded. The decoder's own bookkeeping is checked at every split point in
 * tests/core/http1/chunked-passthrough.test.ts; here the origin also splits its writes at every byte of a body.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { createHash } from "node:crypto";
import { startService } from "../../helpers/service.ts";
import { curl } from "../../helpers/upstream.ts";

type Svc = Awaited<ReturnType<typeof startService>>;
const BODY_LIMIT = 4096;
let svc: Svc;
let origin: net.Server;
let port = 0;
/** What the origin received as the body section of each chunked request, by path. */
const received = new Map<string, string>();
/** Origin responses by path: the pieces it writes, in order (a timer turn between pieces). */
const responses = new Map<string, string[]>();

function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A chunked body parsed by hand (an independent reader): its data, trailer lines, where it ends, and the rest. */
function parseChunked(s: string): { body: string; trailers: string[]; framedEnd: number; rest: string } | null {
  let i = 0;
  let body = "";
  let framedEnd = 0;
  for (;;) {
    const eol = s.indexOf("\r\n", i);
    if (eol < 0) return null;
    const size = parseInt(s.slice(i, eol).split(";")[0]!.trim(), 16);
    if (size === 0) {
      framedEnd = i;
      i = eol + 2;
      break;
    }
    i = eol + 2;
    if (s.length < i + size + 2) return null;
    body += s.slice(i, i + size);
    i += size + 2;
  }
  const trailers: string[] = [];
  for (;;) {
    const eol = s.indexOf("\r\n", i);
    if (eol < 0) return null;
    const line = s.slice(i, eol);
    i = eol + 2;
    if (line === "") return { body, trailers, framedEnd, rest: s.slice(i) };
    trailers.push(line.toLowerCase());
  }
}

const headOf = (framing: string, extra = "") => `HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n${extra}${framing}`;

beforeAll(async () => {
  origin = net.createServer((sock) => {
    sock.setNoDelay(true);
    sock.on("error", () => {});
    let got = "";
    let busy = false;
    sock.on("data", async (d: Buffer) => {
      got += d.toString("latin1");
      if (busy) return;
      busy = true;
      try {
        for (;;) {
          const he = got.indexOf("\r\n\r\n");
          if (he < 0) break;
          const head = got.slice(0, he);
          const path = head.split(" ")[1]!;
          let rest = got.slice(he + 4);
          if (/transfer-encoding: chunked/i.test(head)) {
            const p = parseChunked(rest);
            if (!p) break;
            received.set(path, rest.slice(0, rest.length - p.rest.length));
            rest = p.rest;
          }
          got = rest;
          const pieces = responses.get(path) ?? [`HTTP/1.1 200 OK\r\ncontent-length: ${path.length}\r\n\r\n${path}`];
          for (let k = 0; k < pieces.length; k++) {
            if (k > 0) await new Promise((r) => setTimeout(r, 1)); // a gap, so that the proxy reads the pieces apart
            sock.write(Buffer.from(pieces[k]!, "latin1"));
          }
        }
      } finally {
        busy = false;
      }
    });
  });
  await new Promise<void>((r) => origin.listen(0, "127.0.0.1", () => r()));
  port = (origin.address() as AddressInfo).port;
  svc = await startService({ bodyLimit: BODY_LIMIT });
});
afterAll(async () => {
  await svc?.stop();
  origin?.close();
});

/** A raw client connection to the proxy that reads one response at a time (head, then a chunked or sized body). */
class RawClient {
  private sock: net.Socket;
  private buf = "";
  private wake: (() => void) | null = null;
  closed = false;
  constructor() {
    this.sock = net.connect(svc.proxyPort!, "127.0.0.1");
    this.sock.setNoDelay(true);
    this.sock.on("data", (d: Buffer) => {
      this.buf += d.toString("latin1");
      this.wake?.();
    });
    this.sock.on("close", () => {
      this.closed = true;
      this.wake?.();
    });
    this.sock.on("error", () => {});
  }
  write(s: string): Promise<void> {
    return new Promise((r) => this.sock.write(Buffer.from(s, "latin1"), () => r()));
  }
  private async more(): Promise<void> {
    if (this.closed) throw new Error(`connection closed; unread: ${JSON.stringify(this.buf.slice(0, 200))}`);
    await new Promise<void>((r) => (this.wake = r));
    this.wake = null;
  }
  /** The next response: its head (lower-cased) and its body section as sent (chunked: framing included). */
  async response(): Promise<{ head: string; raw: string }> {
    for (;;) {
      const he = this.buf.indexOf("\r\n\r\n");
      if (he >= 0) {
        const head = this.buf.slice(0, he).toLowerCase();
        const after = this.buf.slice(he + 4);
        if (head.includes("transfer-encoding: chunked")) {
          const p = parseChunked(after);
          if (p) {
            this.buf = p.rest;
            return { head, raw: after.slice(0, after.length - p.rest.length) };
          }
        } else {
          const n = Number(/content-length: (\d+)/.exec(head)?.[1] ?? 0);
          if (after.length >= n) {
            this.buf = after.slice(n);
            return { head, raw: after.slice(0, n) };
          }
        }
      }
      await this.more();
    }
  }
  /** Bytes received and not yet read as a response. */
  get pending(): string {
    return this.buf;
  }
  end(): void {
    this.sock.destroy();
  }
}

const get = (path: string) => `GET http://127.0.0.1:${port}${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`;

async function entryFor(path: string): Promise<any> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const items = ((await (await svc.call(`/api/v1/traffic?limit=500`)).json()) as any).items as any[];
    const hit = items.find((e) => String(e.url).endsWith(path));
    if (hit) return await (await svc.call(`/api/v1/traffic/${hit.id}`)).json();
    if (Date.now() > deadline) throw new Error(`no entry for ${path}`);
    await Bun.sleep(20);
  }
}

/** Many small chunks, some with extensions, of seeded random sizes; returns the framing and the payload. */
function manyChunks(seed: number, count: number): { framed: string; payload: string } {
  const rand = rng(seed);
  let framed = "";
  let payload = "";
  for (let i = 0; i < count; i++) {
    const n = 1 + Math.floor(rand() * 40);
    let data = "";
    for (let k = 0; k < n; k++) data += String.fromCharCode(32 + Math.floor(rand() * 95));
    const ext = i % 7 === 3 ? `;i=${i};q="a b"` : i % 11 === 5 ? " ;x" : "";
    framed += `${n.toString(16)}${ext}\r\n${data}\r\n`;
    payload += data;
  }
  return { framed, payload };
}

describe("chunked response relayed as it came", () => {
  test("many small chunks with extensions: the client gets the origin's framing byte for byte, then tapwire's trailer section", async () => {
    const { framed, payload } = manyChunks(1, 1500);
    expect(payload.length).toBeGreaterThan(BODY_LIMIT);
    // the origin's writes cut the body anywhere (inside size lines, data, CRLFs)
    const all = headOf("trailer: x-sum\r\n\r\n") + framed + "0;end=1\r\nX-Sum: 42\r\nContent-Length: 5\r\nAuthorization: no\r\n\r\n";
    const pieces: string[] = [];
    const rand = rng(2);
    for (let o = 0; o < all.length; ) {
      const n = 1 + Math.floor(rand() * 3000);
      pieces.push(all.slice(o, o + n));
      o += n;
    }
    responses.set("/many", pieces);
    const c = new RawClient();
    try {
      await c.write(get("/many"));
      const r = await c.response();
      expect(r.head).toStartWith("http/1.1 200");
      expect(r.raw.slice(0, framed.length)).toBe(framed);
      // the end is tapwire's: the last chunk without its extension, the trailers that may be trailers
      expect(r.raw.slice(framed.length)).toBe("0\r\nx-sum: 42\r\n\r\n");
      expect(parseChunked(r.raw)!.body).toBe(payload);
    } finally {
      c.end();
    }
    const e = await entryFor("/many");
    // the capture's copy stops at its cap; the size is the whole body's
    expect(e.res_body_size).toBe(payload.length);
    expect(e.res_body_truncated).toBe(true);
    expect(e.res_body).toBe(payload.slice(0, BODY_LIMIT));
    expect(e.res_trailers).toContainEqual(["X-Sum", "42"]);
  });

  test("the origin's writes split at every byte of the body: each response arrives intact on one kept-alive connection", async () => {
    const framed = "3;a=b\r\nabc\r\n000A\r\n0123456789\r\n01\r\nZ\r\n";
    const end = "00;z\r\nX-T: 1\r\n\r\n";
    const head = headOf("\r\n");
    const body = framed + end;
    const c = new RawClient();
    try {
      for (let k = 0; k <= body.length; k++) {
        const path = `/split-${k}`;
        responses.set(path, [head + body.slice(0, k), body.slice(k)]);
        await c.write(get(path));
        const r = await c.response();
        expect(r.raw).toBe(framed + "0\r\nx-t: 1\r\n\r\n");
        expect(c.pending).toBe("");
      }
    } finally {
      c.end();
    }
    const e = await entryFor(`/split-${body.length}`);
    expect(e.res_body).toBe("abc0123456789Z");
    expect(e.res_body_truncated).toBe(false);
    expect(e.res_trailers).toEqual([["X-T", "1"]]);
  });

  test("bytes the origin sends after the body never reach the client; the next request gets its own response", async () => {
    responses.set("/extra", [headOf("\r\n") + "4\r\ngood\r\n0\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nSMUGG"]);
    responses.set("/extra-split", [headOf("\r\n") + "4\r\ngood\r\n0\r\n", "\r\nHTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nSMUGG"]);
    const c = new RawClient();
    try {
      for (const path of ["/extra", "/extra-split"]) {
        await c.write(get(path));
        const r = await c.response();
        expect(r.raw).toBe("4\r\ngood\r\n0\r\n\r\n");
        await c.write(get(`/after${path}`));
        const next = await c.response();
        expect(next.head).toStartWith("http/1.1 200");
        expect(next.raw).toBe(`/after${path}`);
        expect(c.pending).toBe("");
      }
    } finally {
      c.end();
    }
  });

  test("16 MiB of random bytes in 1-64 KiB chunks: curl reads them intact", async () => {
    const rand = rng(5);
    const parts: Buffer[] = [];
    const data: Buffer[] = [];
    let total = 0;
    while (total < 16 * 1024 * 1024) {
      const n = 1024 + Math.floor(rand() * 63 * 1024);
      const d = Buffer.alloc(n);
      for (let i = 0; i < n; i += 4) d.writeUInt32LE((rand() * 0x100000000) >>> 0, Math.min(i, n - 4));
      data.push(d);
      parts.push(Buffer.from(`${n.toString(16)}\r\n`), d, Buffer.from("\r\n"));
      total += n;
    }
    const sha = createHash("sha256").update(Buffer.concat(data)).digest("hex");
    // the origin writes it in 256 KiB pieces (latin1 strings keep the bytes as they are)
    const wire = Buffer.concat([Buffer.from(headOf("\r\n")), ...parts, Buffer.from("0\r\n\r\n")]);
    const pieces: string[] = [];
    for (let o = 0; o < wire.length; o += 256 * 1024) pieces.push(wire.subarray(o, o + 256 * 1024).toString("latin1"));
    responses.set("/big", pieces);
    const r = await curl(["-x", `http://127.0.0.1:${svc.proxyPort}`, "-o", "-", `http://127.0.0.1:${port}/big`]);
    expect(r.code).toBe(0);
    expect(createHash("sha256").update(r.bytes).digest("hex")).toBe(sha);
    const e = await entryFor("/big");
    expect(e.res_body_size).toBe(total);
    expect(e.res_body_truncated).toBe(true);
  });
});

describe("chunked request relayed as it came", () => {
  test("a chunked upload sent in small pieces reaches the origin with its framing as sent and a filtered trailer section", async () => {
    const { framed, payload } = manyChunks(3, 400);
    const c = new RawClient();
    try {
      const msg = `POST http://127.0.0.1:${port}/upload HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nTransfer-Encoding: chunked\r\nTrailer: x-req\r\n\r\n` + framed + "0;z=1\r\nX-Req: 7\r\nContent-Type: text/evil\r\n\r\n";
      const rand = rng(4);
      for (let o = 0; o < msg.length; ) {
        const n = 1 + Math.floor(rand() * 700);
        await c.write(msg.slice(o, o + n));
        o += n;
      }
      const r = await c.response();
      expect(r.raw).toBe("/upload");
    } finally {
      c.end();
    }
    expect(received.get("/upload")).toBe(framed + "0\r\nx-req: 7\r\n\r\n");
    const e = await entryFor("/upload");
    expect(e.req_body_size).toBe(payload.length);
    expect(e.req_body).toBe(payload.slice(0, BODY_LIMIT));
    expect(e.req_trailers).toContainEqual(["X-Req", "7"]);
  });
});
