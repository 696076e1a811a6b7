#!/usr/bin/env bun
/**
 * Engine benchmark: the JavaScript cost per request of tapwire's HTTP/1.1 proxy engine, in process, without sockets.
 *
 * What it measures: a real TapwireService (real pipeline with every feature's addon, real capture store and its
 * writer Worker, temporary data dir) whose HttpSessions are driven through fake sockets. One iteration = what a
 * `hey -c 32` client and the bench upstream (bench/bench-upstream.ts) cause on one keep-alive connection:
 *   1. the client's request arrives:   session.onClientData(fresh copy of the request bytes)
 *      -> parse, requestHeaders/request hooks, pooled upstream taken, request head written to the fake upstream;
 *   2. the upstream's response arrives: conn.owner.onUpstreamData(fresh copy of head + 1 KiB body), exactly as the
 *      pool's socket data handler does it (src/core/proxy/upstream.ts)
 *      -> parse, response hooks, head + body written (one corked write) to the fake client socket, capture entry
 *      encoded into the store's ring (posted to the writer Worker every 200 entries), connection released.
 * Iterations go round-robin over S sessions (default 32, like hey -c 32), each with its own pooled upstream
 * connection (a real UpstreamConn around a fake socket, handed out by a fake pool). The loop yields to the event
 * loop (setImmediate) every --yield-every iterations so batches, writer acks and timers flow as they do under load
 * (the yields and what runs in them are timed with the iterations). A full GC (untimed) precedes every round.
 * How much the yield interval matters (measured in one process each, main-cpu per request): every 1000 and every
 * 100 iterations are within ~0.2 µs of each other; every 10 adds ~0.3-0.6 µs and every iteration ~1.5-2.5 µs (the
 * cost of an event-loop turn, which is Bun and the kernel, not the engine); with capture on, not yielding within
 * a round costs ~2 µs more (unacknowledged batches pile up), so 1000 is the default.
 *
 * Per round it prints ns per request of
 *   wall       performance.now() (includes the yields and what the event loop ran in them),
 *   main-cpu   CPU time of the main JS thread, process.threadCpuUsage() read right after process.cpuUsage() (which
 *              brings the running thread's runtime up to date: ns-accurate, = /proc/self/task/<pid>/schedstat);
 *              "ticks" is /proc/self/task/<pid>/stat utime+stime (10 ms ticks: ±1% on a 1 s round),
 *   proc-cpu   process.cpuUsage(): every thread, i.e. also the capture writer Worker and JSC's GC and JIT helper
 *              threads ("other threads" = proc - main),
 * plus the heap after the round and how busy OTHER processes kept the machine meanwhile (in % of one core, from
 * /proc/stat). A round during which other processes used more than --max-others % (default 10) is measured again,
 * at most 2 x --rounds times (with --baseline, only if --max-others is given). At the end, one line starting with
 * `engine:` gives the median and the minimum of each figure across the rounds kept. GC counts are not reported
 * (JSC has no cheap counter); GC work is in the CPU times.
 *
 * What it does NOT measure: the kernel (syscalls, loopback TCP), Bun's socket layer (uSockets reads and writes,
 * socket.timeout() timers, the native-to-JS transitions of the data callbacks), TLS, connection setup (every
 * request reuses a pooled upstream connection), and the load generator. Its absolute figures are below what a load
 * test shows per request; differences between builds are what it is for. Also printed: the harness's own cost per
 * iteration (the two buffer copies and counters, no proxy), which is included in every figure.
 *
 * A/B use. Separate runs are only comparable on a quiet, steady machine: run it 2-3 times per build, alternating
 * builds, and compare the medians of main-cpu (with capture on, proc-cpu adds the writer's work). On the shared
 * 2-core VM this was written on, the medians of three back-to-back runs of the SAME build spread by 0.5-1.4 µs
 * (5-15%): the VM's speed drifts from minute to minute and from process to process. For differences of a few
 * tenths of a µs use --baseline DIR: it loads a second copy of the engine from another source tree into the SAME
 * process and alternates the two every --yield-every iterations (the first of each pair alternating), so both
 * builds see the same machine; it prints each build's figures, per round new - base (this tree minus DIR), and an
 * `engine-diff:` line with the median of those differences. Measured there (7 rounds x 100,000): A/A runs (two
 * copies of the same sources) gave medians of -90..+123 ns/req; a copy with a 275 ns busy-wait added per request
 * was found at -111..-395 ns/req (6 runs). So: average the engine-diff medians of 3 runs (more --rounds helps
 * too); a single run is good to about ±150 ns. DIR must hold src/ of the other build and a node_modules (a symlink
 * to this one is fine), e.g. the last commit against the working tree:
 *     mkdir /tmp/tapwire-base && git archive HEAD | tar -x -C /tmp/tapwire-base
 *     ln -s "$PWD/node_modules" /tmp/tapwire-base/node_modules
 *     node_modules/.bin/bun bench/engine-bench.ts --baseline /tmp/tapwire-base [--no-capture]
 * "new" is the tree this file is in, as it is when the run starts: while others edit src/, run it from a copy
 * (src/ and bench/ copied elsewhere, node_modules symlinked) so that both sides stay what you think they are.
 *
 *   node_modules/.bin/bun bench/engine-bench.ts [--no-capture] [--sessions 32] [--rounds 7] [--per-round 100000]
 *                                               [--warmup 300000] [--yield-every 1000] [--max-others 10]
 *                                               [--baseline DIR] [--no-gc]
 * (--yield-every 0: only between rounds; --no-gc: no full GC before each round.)
 *
 * Self-checks (exit 1 with a message if one fails): every iteration wrote the same number of request-head bytes to
 * the upstream (the first head starting `GET /1k.txt HTTP/1.1`) and exactly one response's bytes to the client (the
 * first one `HTTP/1.1 200 ...`, the head as received + the 1024-byte body), no upstream connection was dropped or
 * newly connected, no client connection was closed; with capture on the store holds entries (the latest one is this
 * request) and reported no error (e.g. dropped entries), with --no-capture it holds none.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import type { Socket } from "bun";
import { heapSize } from "bun:jsc";
import { parseStartArgs } from "../src/cli/args.ts";
import { HttpSession } from "../src/core/proxy/http-session.ts";
import { UpstreamConn, UpstreamError, type UpstreamPool, type UpstreamTarget } from "../src/core/proxy/upstream.ts";
import type { ClientInfo } from "../src/pipeline/flow.ts";
import { TapwireService } from "../src/service/service.ts";

// ------------------------------------------------------------------------------------------------ options

function parseOptions() {
  return parseArgs({
    args: Bun.argv.slice(2),
    strict: true,
    options: {
      "no-capture": { type: "boolean", default: false },
      sessions: { type: "string", default: "32" },
      rounds: { type: "string", default: "7" },
      "per-round": { type: "string", default: "100000" },
      warmup: { type: "string", default: "300000" },
      "yield-every": { type: "string", default: "1000" },
      "max-others": { type: "string" },
      "no-gc": { type: "boolean", default: false },
      baseline: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  }).values;
}
let opt: ReturnType<typeof parseOptions>;
try {
  opt = parseOptions();
} catch (e) {
  console.error(`engine-bench: ${(e as Error).message} (--help for the options)`);
  process.exit(2);
}
if (opt.help) {
  console.log(readFileSync(import.meta.path, "utf8").split("*/")[0]!.replace(/^#!.*\n\/\*\*\n/, "").replace(/^ \* ?/gm, ""));
  process.exit(0);
}
const CAPTURE = !opt["no-capture"];
const SESSIONS = Math.floor(Number(opt.sessions));
const ROUNDS = Math.floor(Number(opt.rounds));
const PER_ROUND = Math.floor(Number(opt["per-round"]));
const WARMUP = Math.floor(Number(opt.warmup));
/** 0: yield only between rounds. */
const YIELD_EVERY = Math.floor(Number(opt["yield-every"]));
/**
 * A round during which other processes used more than this % of a core is measured again (at most 2 x rounds
 * times). Default 10; with --baseline, where both builds share whatever the machine does, rounds are not redone.
 */
const MAX_OTHERS = Number(opt["max-others"] ?? (opt.baseline ? Infinity : 10));
/** A full collection before each round (untimed), so every round starts from the same heap. */
const GC_BETWEEN = !opt["no-gc"];
const BASELINE = opt.baseline ? resolve(opt.baseline) : null;
if (![SESSIONS, ROUNDS, PER_ROUND].every((n) => Number.isFinite(n) && n >= 1) || !(WARMUP >= 0) || !(YIELD_EVERY >= 0) || !(MAX_OTHERS >= 0)) {
  console.error("engine-bench: --sessions, --rounds, --per-round take numbers >= 1; --warmup, --yield-every, --max-others numbers >= 0");
  process.exit(2);
}
/** Iterations between two yields to the event loop (and, with --baseline, between two switches of build). */
const CHUNK = YIELD_EVERY || PER_ROUND;

const log = (s: string): void => void process.stderr.write(`[bench] ${s}\n`);

class BenchFailure extends Error {}
function fail(why: string): never {
  throw new BenchFailure(why);
}

// ------------------------------------------------------------------------------------------------ wire bytes

const enc = new TextEncoder();
const dec = new TextDecoder();
/** What `hey -x http://proxy http://127.0.0.1:41234/1k.txt` sends. */
const REQ = enc.encode("GET http://127.0.0.1:41234/1k.txt HTTP/1.1\r\nHost: 127.0.0.1:41234\r\nUser-Agent: hey/0.0.1\r\nAccept-Encoding: gzip\r\n\r\n");
/** What bench/bench-upstream.ts (Bun.serve) answers to it. */
const RES_HEAD = 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\netag: "934b751dafab9707"\r\nDate: Sun, 22 Nov 2026 13:24:25 GMT\r\nContent-Length: 1024\r\n\r\n';
const RES = enc.encode(RES_HEAD + "x".repeat(1024));
const UPSTREAM_KEY = "http://127.0.0.1:41234";

/** A socket hands each read over in a buffer of its own: so do we (this copy is part of the harness cost). */
const fresh = (b: Uint8Array): Uint8Array => Buffer.from(b);

// ------------------------------------------------------------------------------------------------ fakes

/**
 * What Endpoint, HttpSession and UpstreamConn use of a Bun Socket: write (takes everything), end, terminate, pause,
 * resume, timeout, setNoDelay, data, remoteAddress/remotePort. Writes are counted, not kept (except the very first
 * one per side, for the self-check).
 */
class FakeSocket {
  data: unknown = undefined;
  readonly remoteAddress = "127.0.0.1";
  bytes = 0;
  writes = 0;
  ended = false;
  terminated = false;
  paused = false;
  timeoutSec = 0;
  constructor(readonly remotePort: number, private readonly side: { first: Uint8Array | null }) {}
  write(d: Uint8Array): number {
    this.bytes += d.length;
    this.writes++;
    if (this.side.first === null) this.side.first = d.slice();
    return d.length;
  }
  end(): void {
    this.ended = true;
  }
  terminate(): void {
    this.terminated = true;
  }
  pause(): void {
    this.paused = true;
  }
  resume(): void {
    this.paused = false;
  }
  timeout(sec: number): void {
    this.timeoutSec = sec;
  }
  setNoDelay(_on?: boolean): boolean {
    return true;
  }
}

/** The classes the harness needs from one build of the engine (this tree's, or --baseline's). */
interface EngineModules {
  TapwireService: typeof TapwireService;
  parseStartArgs: typeof parseStartArgs;
  HttpSession: typeof HttpSession;
  UpstreamConn: typeof UpstreamConn;
  UpstreamError: typeof UpstreamError;
}

/**
 * Stands in for UpstreamPool: one connection per session, in that session's slot (the harness sets `current`
 * before it feeds a session). release() applies the real pool's checks; drop() and connect() must not happen.
 */
class FakePool {
  current = 0;
  drops = 0;
  connects = 0;
  readonly slots: (UpstreamConn | null)[] = [];
  readonly slotOf = new Map<UpstreamConn, number>();
  constructor(readonly opts: UpstreamPool["opts"], private readonly Err: typeof UpstreamError) {}
  takeIdle(_t: UpstreamTarget): UpstreamConn | null {
    const c = this.slots[this.current] ?? null;
    if (c === null || !c.open || c.ep.closed) return null;
    this.slots[this.current] = null;
    return c;
  }
  connect(t: UpstreamTarget): Promise<UpstreamConn> {
    this.connects++;
    return Promise.reject(new this.Err("refused", `engine-bench: no connect to ${t.host}:${t.port} expected`));
  }
  release(c: UpstreamConn): void {
    c.owner = null;
    if (!c.open || c.ep.closed || c.ep.queued > 0) return this.drop(c);
    this.slots[this.slotOf.get(c)!] = c;
  }
  drop(c: UpstreamConn): void {
    this.drops++;
    c.owner = null;
    if (c.open) {
      c.open = false;
      c.ep.destroy();
    }
  }
  get idleCount(): number {
    return this.slots.filter((c) => c !== null).length;
  }
  closeAll(): void {
    for (let i = 0; i < this.slots.length; i++) {
      const c = this.slots[i];
      if (c && c.open) {
        c.open = false;
        c.ep.destroy();
      }
      this.slots[i] = null;
    }
  }
}

interface Slot {
  session: HttpSession;
  client: FakeSocket;
  upSock: FakeSocket;
  /** Response bytes this client should have received so far. */
  expected: number;
}

// ------------------------------------------------------------------------------------------------ one engine

/** A started service of one build with S fake sessions, and the iteration that drives them. */
class Engine {
  readonly dataDir = mkdtempSync(join(tmpdir(), "tapwire-engine-bench-"));
  svc: TapwireService | null = null;
  pool!: FakePool;
  private realPool!: UpstreamPool;
  readonly slots: Slot[] = [];
  readonly clientSide = { first: null as Uint8Array | null };
  readonly upstreamSide = { first: null as Uint8Array | null };
  private next = 0;
  /** Bytes of the request head sent upstream, learnt from the first iteration. */
  private fwdLen = -1;
  /** The response head is forwarded as received, with its body. */
  private readonly resLen = RES.length;
  iterations = 0;

  constructor(readonly name: string, private readonly m: EngineModules) {}

  async start(): Promise<void> {
    const m = this.m;
    const svc = new m.TapwireService(m.parseStartArgs(["--data-dir", this.dataDir, "--port", "0"]), (l) => log(`${this.name}: ${l}`));
    this.svc = svc;
    await svc.start();
    if (!svc.proxyCtx || !svc.capture || !svc.store) fail(`${this.name}: the service has no proxyCtx, capture or store`);
    if (!CAPTURE) svc.capture.stop(); // the same CaptureControl as POST /api/v1/capture/stop
    const ctx = svc.proxyCtx;
    this.realPool = ctx.pool;
    this.pool = new FakePool(this.realPool.opts, m.UpstreamError);
    ctx.pool = this.pool as unknown as UpstreamPool;
    for (let i = 0; i < SESSIONS; i++) {
      const upSock = new FakeSocket(41234, this.upstreamSide);
      const conn = new m.UpstreamConn(UPSTREAM_KEY, upSock as unknown as Socket<any>, this.pool as unknown as UpstreamPool);
      // as the real pool does once a connection is ready (its open handler, then ready())
      upSock.data = conn;
      conn.idleSec = this.realPool.opts.idleTimeoutSec;
      upSock.timeout(conn.idleSec);
      this.pool.slots.push(conn);
      this.pool.slotOf.set(conn, i);
      const client = new FakeSocket(50000 + i, this.clientSide);
      const info: ClientInfo = { addr: "127.0.0.1", port: client.remotePort, label: Promise.resolve("hey"), resolvedLabel: "hey" };
      const session = new m.HttpSession(ctx, client as unknown as Socket<HttpSession>, info, null);
      this.slots.push({ session, client, upSock, expected: 0 });
    }
  }

  /** One request/response on slot i. The per-iteration checks are a few integer comparisons. */
  private once(i: number): void {
    const s = this.slots[i]!;
    this.pool.current = i;
    const up0 = s.upSock.bytes;
    // as clientSocketHandlers.data does: s.data.onClientData(d)
    (s.client.data as HttpSession).onClientData(fresh(REQ));
    const sent = s.upSock.bytes - up0;
    if (sent !== this.fwdLen) {
      if (this.fwdLen !== -1 || sent === 0)
        fail(`${this.name}, session ${i}: ${sent} bytes went upstream (expected ${this.fwdLen === -1 ? "a request head" : this.fwdLen}); is the pipeline no longer synchronous?`);
      this.fwdLen = sent;
    }
    // as the pool's socket data handler does (src/core/proxy/upstream.ts)
    const c = s.upSock.data as UpstreamConn;
    if (c.idleSec) s.upSock.timeout(c.idleSec);
    if (c.owner === null) fail(`${this.name}, session ${i}: the upstream connection has no owner after the request`);
    c.owner.onUpstreamData(fresh(RES));
    // the response's last bytes may be held until the capture journal is written (issue #21): checked in settle()
    s.expected += this.resLen;
  }

  /**
   * n iterations, round-robin over the sessions. After each turn (every session fed once) the event loop gets one
   * turn when a response is still held for the capture journal (a responded client's last bytes wait for the
   * journal write, one per event-loop turn for every connection): what the proxy does under load too, so its cost
   * is counted. Then every session must have received exactly one more response.
   */
  async run(n: number): Promise<void> {
    for (let k = 0; k < n; ) {
      const m = Math.min(SESSIONS - this.next, n - k);
      for (let j = 0; j < m; j++) this.once(this.next++);
      k += m;
      if (this.next === SESSIONS) {
        this.next = 0;
        await this.settle();
      }
    }
    this.iterations += n;
  }

  /** Every session has its responses: at once, or after the event-loop turn(s) that write the capture journal. */
  private async settle(): Promise<void> {
    for (let t = 0; ; t++) {
      let short = -1;
      for (let i = 0; i < this.slots.length; i++) if (this.slots[i]!.client.bytes !== this.slots[i]!.expected) short = i;
      if (short === -1) return;
      if (t === 100) {
        const s = this.slots[short]!;
        fail(`${this.name}, session ${short}: ${s.client.bytes} bytes reached the client (expected ${s.expected}) after 100 event-loop turns`);
      }
      await tick();
    }
  }

  clientBytes(): number {
    let n = 0;
    for (const s of this.slots) n += s.client.bytes;
    return n;
  }

  clientWrites(): number {
    let n = 0;
    for (const s of this.slots) n += s.client.writes;
    return n;
  }

  /** After the warm-up: the first exchange, kept once, is what hey and the upstream expect. */
  checkFirstExchange(): void {
    const firstReq = this.upstreamSide.first ? dec.decode(this.upstreamSide.first) : "";
    const firstRes = this.clientSide.first ? dec.decode(this.clientSide.first) : "";
    if (!firstReq.startsWith("GET /1k.txt HTTP/1.1\r\n")) fail(`${this.name}: the upstream received ${JSON.stringify(firstReq.slice(0, 120))}`);
    if (!firstRes.startsWith("HTTP/1.1 200")) fail(`${this.name}: the client received ${JSON.stringify(firstRes.slice(0, 120))}`);
    if (this.clientSide.first!.length !== this.resLen) fail(`${this.name}: the first response is ${this.clientSide.first!.length} bytes (expected ${this.resLen} = head + 1024)`);
    if (!firstRes.endsWith("\r\n\r\n" + "x".repeat(1024))) fail(`${this.name}: the first response does not end with the 1 KiB body`);
    if (this.clientBytes() !== this.iterations * this.resLen) fail(`${this.name}: ${this.clientBytes()} bytes reached the clients in ${this.iterations} iterations`);
  }

  /** After the rounds: connections intact; back to the real pool; what capture stored. */
  async finish(): Promise<void> {
    const pool = this.pool;
    if (pool.drops || pool.connects) fail(`${this.name}: ${pool.drops} upstream connections dropped, ${pool.connects} connects: an exchange did not complete cleanly`);
    const closed = this.slots.filter((s) => s.client.ended || s.client.terminated).length;
    if (closed) fail(`${this.name}: ${closed} client connections were closed by the proxy`);
    if (this.clientBytes() !== this.iterations * this.resLen) fail(`${this.name}: ${this.clientBytes()} bytes reached the clients in ${this.iterations} iterations`);
    for (const s of this.slots) s.session.destroy();
    pool.closeAll();
    const svc = this.svc!;
    svc.proxyCtx.pool = this.realPool;
    const store = svc.store;
    await store.flush();
    const count = store.count();
    if (store.lastFlushError) fail(`${this.name}: the capture store reported: ${store.lastFlushError.message}`);
    if (CAPTURE) {
      const last = (await store.list({ limit: 1 })).items[0];
      if (!last || last.url !== "http://127.0.0.1:41234/1k.txt" || last.status_code !== 200) fail(`${this.name}: capture store: latest entry is ${JSON.stringify(last)}`);
      if (count === 0) fail(`${this.name}: capture is on but the store holds no entries`);
      log(`${this.name}: capture store holds ${count} entries (capped by --max-entries), latest #${last.id} ${last.method} ${last.url} ${last.status_code}`);
    } else {
      if (count !== 0) fail(`${this.name}: capture is off but the store holds ${count} entries`);
      log(`${this.name}: capture store holds 0 entries (capture off)`);
    }
  }

  async stop(): Promise<void> {
    try {
      await this.svc?.stop();
    } finally {
      rmSync(this.dataDir, { recursive: true, force: true });
    }
  }
}

/** The engine classes of another source tree (--baseline), imported next to this tree's. */
async function loadModules(root: string): Promise<EngineModules> {
  if (!existsSync(join(root, "src/service/service.ts"))) fail(`--baseline ${root}: no src/service/service.ts there`);
  if (!existsSync(join(root, "node_modules"))) fail(`--baseline ${root}: no node_modules there (ln -s ${join(import.meta.dir, "..", "node_modules")} ${join(root, "node_modules")})`);
  const src = (p: string) => import(join(root, "src", p));
  const [service, args, session, upstream] = await Promise.all([src("service/service.ts"), src("cli/args.ts"), src("core/proxy/http-session.ts"), src("core/proxy/upstream.ts")]);
  return {
    TapwireService: service.TapwireService,
    parseStartArgs: args.parseStartArgs,
    HttpSession: session.HttpSession,
    UpstreamConn: upstream.UpstreamConn,
    UpstreamError: upstream.UpstreamError,
  };
}

// ------------------------------------------------------------------------------------------------ clocks

const PID = process.pid; // the main thread's tid
const NS_PER_TICK = 1e9 / 100; // CLK_TCK is 100 on Linux

/** ns: wall, main thread CPU, whole process CPU. */
interface Clock {
  wall: number;
  main: number;
  proc: number;
}

function clock(): Clock {
  // cpuUsage() first: getrusage(RUSAGE_SELF) updates the running thread's runtime, which threadCpuUsage() then
  // reads exactly (alone, it is only as fresh as the last scheduler tick, 4 ms)
  const u = process.cpuUsage();
  const t = process.threadCpuUsage();
  return { wall: performance.now() * 1e6, main: (t.user + t.system) * 1000, proc: (u.user + u.system) * 1000 };
}

function mainThreadTicksNs(): number {
  const s = readFileSync(`/proc/self/task/${PID}/stat`, "utf8");
  const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) * NS_PER_TICK;
}

/** Busy time of all CPUs (/proc/stat), to tell how much other processes ran meanwhile. */
function machineBusyNs(): number {
  const f = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal
  const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
  return (total - (f[3] ?? 0) - (f[4] ?? 0)) * NS_PER_TICK;
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

/** Per-request figures of one engine in one round, ns. */
interface Row {
  wall: number;
  main: number;
  proc: number;
}

const median = (v: number[]): number => {
  const s = [...v].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const ns = (x: number): string => x.toFixed(0);
const signed = (x: number): string => (x >= 0 ? "+" : "") + x.toFixed(0);

// ------------------------------------------------------------------------------------------------ run

const engines: Engine[] = [];
let exitCode = 0;

// interrupted: no graceful stop (the writer Workers end with the process), but no temp dirs left behind
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.on(sig, () => {
    log(`${sig}: removing the temp data dirs and exiting`);
    for (const e of engines) rmSync(e.dataDir, { recursive: true, force: true });
    process.exit(130);
  });
}

try {
  if (BASELINE) {
    const base = await loadModules(BASELINE);
    engines.push(new Engine("base", base), new Engine("new", { TapwireService, parseStartArgs, HttpSession, UpstreamConn, UpstreamError }));
  } else {
    engines.push(new Engine("engine", { TapwireService, parseStartArgs, HttpSession, UpstreamConn, UpstreamError }));
  }
  for (const e of engines) await e.start();

  // harness alone: the two copies and the counters a fake socket keeps, no proxy
  {
    const sink = new FakeSocket(1, { first: new Uint8Array(0) });
    const hn = 1_000_000;
    const h0 = performance.now();
    for (let k = 0; k < hn; k++) {
      sink.write(fresh(REQ));
      sink.write(fresh(RES));
    }
    log(`harness alone (2 buffer copies + counters): ${ns(((performance.now() - h0) * 1e6) / hn)} ns/iteration`);
  }

  log(
    `capture=${CAPTURE ? "on" : "off"} sessions=${SESSIONS}: warm-up ${WARMUP} iterations, then ${ROUNDS} rounds of ${PER_ROUND}, yield every ${YIELD_EVERY || "round"}` +
      (BASELINE ? `; new = ${join(import.meta.dir, "..")}, base = ${BASELINE}, alternating every ${CHUNK} iterations` : ""),
  );
  // the engines take turns chunk by chunk, the first one alternating, so each sees the same machine
  const interleaved = async (n: number, acc: Row[] | null): Promise<void> => {
    for (let done = 0, c = 0; done < n; done += CHUNK, c++) {
      const k = Math.min(CHUNK, n - done);
      for (let j = 0; j < engines.length; j++) {
        const idx = c % 2 === 0 ? j : engines.length - 1 - j;
        const a = acc ? clock() : null;
        await engines[idx]!.run(k);
        await tick();
        if (a) {
          const b = clock();
          const r = acc![idx]!;
          r.wall += b.wall - a.wall;
          r.main += b.main - a.main;
          r.proc += b.proc - a.proc;
        }
      }
    }
  };
  await interleaved(WARMUP, null);
  await tick();
  for (const e of engines) e.checkFirstExchange();

  const rows: Row[][] = engines.map(() => []);
  let discarded = 0;
  for (let r = 1; rows[0]!.length < ROUNDS; r++) {
    if (GC_BETWEEN) Bun.gc(true);
    await tick();
    const writes0 = engines.map((e) => e.clientWrites());
    const acc: Row[] = engines.map(() => ({ wall: 0, main: 0, proc: 0 }));
    const t0 = clock(), ticks0 = mainThreadTicksNs(), m0 = machineBusyNs();
    await interleaved(PER_ROUND, acc);
    const t1 = clock(), ticks1 = mainThreadTicksNs(), m1 = machineBusyNs();
    // other processes' CPU meanwhile, in % of one core (10 ms ticks): they share caches, memory and the host with us
    const others = Math.max(0, (m1 - m0 - (t1.proc - t0.proc)) / (t1.wall - t0.wall)) * 100;
    const drop = others > MAX_OTHERS && discarded < 2 * ROUNDS;
    if (drop) discarded++;
    const per = acc.map((x) => ({ wall: x.wall / PER_ROUND, main: x.main / PER_ROUND, proc: x.proc / PER_ROUND }));
    if (!drop) per.forEach((p, j) => rows[j]!.push(p));
    const note = drop ? "  -> discarded, measured again" : others > MAX_OTHERS ? "  -> kept (too many discarded already)" : "";
    const heap = `heap ${(heapSize() / 1048576).toFixed(0)} MiB  other processes ${others.toFixed(0)}%`;
    if (engines.length === 1) {
      const p = per[0]!;
      const writes = engines[0]!.clientWrites() - writes0[0]!;
      console.log(
        `round ${r}: wall ${ns(p.wall)} ns/req  main-cpu ${ns(p.main)} (ticks ${ns((ticks1 - ticks0) / PER_ROUND)})  proc-cpu ${ns(p.proc)} ` +
          `(other threads ${ns(p.proc - p.main)})  writes/resp ${(writes / PER_ROUND).toFixed(2)}  ${heap}${note}`,
      );
    } else {
      const [b, n] = per as [Row, Row];
      console.log(
        `round ${r}: main-cpu base ${ns(b.main)} new ${ns(n.main)} diff ${signed(n.main - b.main)} ns/req  ` +
          `wall diff ${signed(n.wall - b.wall)}  proc-cpu base ${ns(b.proc)} new ${ns(n.proc)} diff ${signed(n.proc - b.proc)}  ${heap}${note}`,
      );
    }
  }

  const fmt = (v: number[]) => `med ${ns(median(v))} ns/req (min ${ns(Math.min(...v))})`;
  const tail = `[${ROUNDS}x${PER_ROUND}, yield ${YIELD_EVERY || "per round"}, ${discarded} noisy rounds redone]`;
  engines.forEach((e, j) => {
    const rs = rows[j]!;
    console.log(
      `engine: ${engines.length > 1 ? `${e.name} ` : ""}capture=${CAPTURE ? "on" : "off"} sessions=${SESSIONS} wall ${fmt(rs.map((x) => x.wall))} ` +
        `main-cpu ${fmt(rs.map((x) => x.main))} proc-cpu ${fmt(rs.map((x) => x.proc))} ${tail}`,
    );
  });
  if (engines.length === 2) {
    const d = (k: keyof Row) => {
      const v = rows[1]!.map((x, i) => x[k] - rows[0]![i]![k]);
      const rel = (100 * median(v)) / median(rows[0]!.map((x) => x[k]));
      return `med ${signed(median(v))} ns/req (${rel >= 0 ? "+" : ""}${rel.toFixed(1)}%, rounds ${signed(Math.min(...v))}..${signed(Math.max(...v))})`;
    };
    console.log(`engine-diff: new - base capture=${CAPTURE ? "on" : "off"} main-cpu ${d("main")} wall ${d("wall")} proc-cpu ${d("proc")} ${tail}`);
  }

  for (const e of engines) await e.finish();
} catch (e) {
  exitCode = 1;
  console.error(e instanceof BenchFailure ? `engine-bench: FAILED: ${e.message}` : e);
} finally {
  for (const e of engines) {
    try {
      await e.stop();
    } catch (err) {
      exitCode = 1;
      console.error(`engine-bench: stopping ${e.name} failed:`, err);
    }
  }
}
process.exit(exitCode);
