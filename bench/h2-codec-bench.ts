/**
 * CPU per request of tapwire's sans-io HTTP/2 codec (src/core/http2/connection.ts) against Bun's node:http2, in one
 * process, same load: GET requests answered 200 with a body of --body bytes (default 1 KiB), --concurrency streams
 * in flight on one connection (default 100), --requests per round (default 20,000), --rounds interleaved rounds
 * (default 5), medians printed.
 *
 *   node      node:http2 client -> node:http2 server (h2c over loopback TCP): the reference
 *   tapwire   H2Connection client role -> H2Connection server role (h2c over loopback TCP), owners that flush once
 *             per event-loop iteration, as tapwire's wiring does
 *   memory    the two H2Connections fed each other's bytes directly (no sockets): the codec alone
 *
 * CPU is process.cpuUsage() (user + system) over the round divided by requests: both ends of the connection are in
 * this process, so each figure is the cost of a client and a server.
 *
 * Usage: bun bench/h2-codec-bench.ts [--requests N] [--rounds N] [--concurrency N] [--body BYTES] [--only node,tapwire,memory]
 */
import http2 from "node:http2";
import net from "node:net";
import { H2Connection, type H2Events } from "../src/core/http2/connection.ts";

const arg = (name: string, def: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const REQUESTS = arg("requests", 20000);
const ROUNDS = arg("rounds", 5);
const CONC = arg("concurrency", 100);
const BODY = new Uint8Array(arg("body", 1024)).fill(0x61);
const onlyIdx = process.argv.indexOf("--only");
const MODES = (onlyIdx > 0 ? process.argv[onlyIdx + 1]! : "node,tapwire,memory").split(",");

const REQ = [":method", "GET", ":scheme", "http", ":authority", "127.0.0.1", ":path", "/bench", "user-agent", "h2-codec-bench", "accept", "*/*"];
const RESP = [":status", "200", "content-type", "text/plain", "content-length", String(BODY.length)];

interface Setup {
  run(n: number): Promise<void>;
  close(): Promise<void>;
}

// ---------------------------------------------------------------- node:http2 both ends

async function nodeSetup(): Promise<Setup> {
  const server = http2.createServer();
  server.on("stream", (s: http2.ServerHttp2Stream) => {
    s.respond({ ":status": 200, "content-type": "text/plain", "content-length": BODY.length });
    s.end(BODY);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const client = http2.connect(`http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, { settings: { initialWindowSize: 1 << 20 } });
  await new Promise<void>((r) => client.once("remoteSettings", () => r()));
  const headers = { ":path": "/bench", "user-agent": "h2-codec-bench", accept: "*/*" };
  return {
    run: (n) =>
      new Promise<void>((resolve) => {
        let started = 0;
        let done = 0;
        const one = () => {
          started++;
          const req = client.request(headers);
          req.on("data", () => {});
          req.on("close", () => {
            if (++done === n) resolve();
            else if (started < n) one();
          });
          req.end();
        };
        for (let i = 0; i < Math.min(CONC, n); i++) one();
      }),
    close: async () => {
      client.close();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

// ---------------------------------------------------------------- H2Connection both ends

/** the owner of a server-role connection: answers every request with RESP + BODY */
class ServerOwner implements H2Events {
  conn: H2Connection;
  private scheduled = false;
  constructor(readonly out: (b: Uint8Array) => void) {
    this.conn = new H2Connection("server", this, { maxConcurrentStreams: 1000 });
    this.sched();
  }
  sched(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.conn.flush();
    });
  }
  write(b: Uint8Array): void {
    this.out(b);
  }
  headers(id: number, _f: string[], end: boolean): void {
    if (!end) return;
    this.conn.sendHeaders(id, RESP, false);
    this.conn.sendData(id, BODY, true);
    this.sched();
  }
  data(id: number, b: Uint8Array): void {
    this.conn.consumed(id, b.length);
  }
  reset(): void {}
  writable(): void {}
  goaway(): void {}
  closed(): void {}
}

class ClientOwner implements H2Events {
  conn: H2Connection;
  private scheduled = false;
  private started = 0;
  private done = 0;
  private target = 0;
  private resolve: (() => void) | null = null;
  constructor(readonly out: (b: Uint8Array) => void) {
    this.conn = new H2Connection("client", this);
    this.sched();
  }
  sched(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.conn.flush();
    });
  }
  run(n: number): Promise<void> {
    this.started = this.done = 0;
    this.target = n;
    return new Promise<void>((r) => {
      this.resolve = r;
      for (let i = 0; i < Math.min(CONC, n); i++) this.one();
      this.sched();
    });
  }
  private one(): void {
    this.started++;
    this.conn.openStream(REQ, true);
  }
  private finish(): void {
    if (++this.done === this.target) this.resolve!();
    else if (this.started < this.target) {
      this.one();
      this.sched();
    }
  }
  write(b: Uint8Array): void {
    this.out(b);
  }
  headers(_id: number, _f: string[], end: boolean): void {
    if (end) this.finish();
  }
  data(id: number, b: Uint8Array, end: boolean): void {
    this.conn.consumed(id, b.length);
    if (end) this.finish();
  }
  reset(): void {
    this.finish();
  }
  writable(): void {}
  goaway(): void {}
  closed(): void {}
}

async function tapwireSetup(): Promise<Setup> {
  let serverOwner: ServerOwner | null = null;
  const server = net.createServer((sock) => {
    sock.setNoDelay(true);
    const o = new ServerOwner((b) => sock.write(b));
    serverOwner = o;
    sock.on("data", (d: Buffer) => {
      o.conn.feed(d);
      o.sched();
    });
    sock.on("error", () => {});
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const sock = net.connect((server.address() as net.AddressInfo).port, "127.0.0.1");
  await new Promise<void>((r) => sock.once("connect", () => r()));
  sock.setNoDelay(true);
  const c = new ClientOwner((b) => sock.write(b));
  sock.on("data", (d: Buffer) => {
    c.conn.feed(d);
    c.sched();
  });
  return {
    run: (n) => c.run(n),
    close: async () => {
      sock.destroy();
      void serverOwner;
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

async function memorySetup(): Promise<Setup> {
  // eslint-disable-next-line prefer-const
  let s: ServerOwner;
  const c = new ClientOwner((b) => s.conn.feed(b));
  s = new ServerOwner((b) => c.conn.feed(b));
  return { run: (n) => c.run(n), close: async () => {} };
}

const SETUPS: Record<string, () => Promise<Setup>> = { node: nodeSetup, tapwire: tapwireSetup, memory: memorySetup };

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

const setups: Record<string, Setup> = {};
for (const m of MODES) {
  setups[m] = await SETUPS[m]!();
  await setups[m]!.run(Math.min(2000, REQUESTS)); // warm-up
}
const cpu: Record<string, number[]> = {};
const rps: Record<string, number[]> = {};
for (let r = 0; r < ROUNDS; r++) {
  const line: string[] = [];
  for (const m of MODES) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    await setups[m]!.run(REQUESTS);
    const t1 = performance.now();
    const c1 = process.cpuUsage(c0);
    const us = (c1.user + c1.system) / REQUESTS;
    (cpu[m] ??= []).push(us);
    (rps[m] ??= []).push(REQUESTS / ((t1 - t0) / 1000));
    line.push(`${m} ${us.toFixed(2)} µs/req ${Math.round(REQUESTS / ((t1 - t0) / 1000))} req/s`);
  }
  console.log(`round ${r + 1}: ${line.join(" | ")}`);
}
console.log(`\nmedians over ${ROUNDS} rounds of ${REQUESTS} requests, ${CONC} streams in flight, ${BODY.length}-byte bodies (client + server CPU in one process):`);
for (const m of MODES) console.log(`  ${m.padEnd(8)} ${median(cpu[m]!).toFixed(2)} µs CPU/req   ${Math.round(median(rps[m]!))} req/s`);
if (cpu.node && cpu.tapwire) console.log(`  tapwire / node CPU per request: ${((median(cpu.tapwire) / median(cpu.node)) * 100).toFixed(0)}%`);
for (const m of MODES) await setups[m]!.close();
process.exit(0);
