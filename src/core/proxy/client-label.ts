// Client labels for captured traffic (management API 2.3 `client_addr`): the name of the local
// process for loopback clients, the IP address for remote devices.
//
// Linux: the client's socket is found in /proc/net/tcp{,6} (its local end is the address the proxy
// sees as remote, its remote port is the proxy's listening port), which gives its inode; the process
// holding an fd that links to `socket:[inode]` owns the connection, and its /proc/<pid>/comm is the label.
// macOS: lsof. Anything else, and any failure: the IP.
//
// Costs (measured on a 2-vCPU Linux 6.18 VM with a 262144-bucket TCP hash table):
// - reading /proc/net/tcp walks the kernel's whole established-connection hash table: 4-6 ms per
//   file however few sockets exist, mostly in the kernel. So it is read with async fs calls (sync
//   would block the event loop that long), only the file(s) needed, stopping at the wanted line, and
//   lookups made together share one read.
// - scanning /proc/<pid>/fd: ~6 µs per fd with sync calls; with fs.promises the wall time was 1.5x
//   higher at 7000 fds and the event loop still stalled up to ~9 ms handling completions. It is done
//   with sync calls in slices of about SLICE_MS (observed worst slice ~1 ms), yielding between slices.
// - one readlink or the comm file: ~6-11 µs sync against ~20-27 µs async, so those are sync.

import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { open } from "node:fs/promises";
import { endianness } from "node:os";

export interface ClientLabelerOptions {
  platform?: NodeJS.Platform;
  /** Root of the proc filesystem; tests point it at a fixture tree. */
  procRoot?: string;
  /** How long a resolved label is kept per (client port, socket inode). */
  cacheTtlMs?: number;
}

/** Counters, for diagnostics and tests. */
export interface ClientLabelerStats {
  resolves: number;
  /** Reads of /proc/net/tcp or /proc/net/tcp6. */
  netReads: number;
  /** Scans of the fds of recently seen client processes only. */
  hotScans: number;
  /** Scans of every process's fds. */
  fullScans: number;
  /** Resolves answered from the per-(port, inode) cache. */
  cacheHits: number;
  /** Second looks after a miss (a fresh table read, or one more full scan). */
  retries: number;
}

const DEFAULT_TTL_MS = 2000;
/** Minimum spacing between two full /proc scans. */
const FULL_SCAN_INTERVAL_MS = 25;
/** Longest stretch of synchronous fd scanning before yielding to the event loop. */
const SLICE_MS = 0.5;
/** How many recently seen client processes are scanned before falling back to a full scan. */
const HOT_PIDS = 4;
const RESULT_CACHE_MAX = 4096;
const LSOF_TIMEOUT_MS = 3000;
/** Pauses before the further looks at a connection that is still open and was not found (see resolve()). */
const MISS_DELAYS_MS = [5, 20, 50];

// ---------------------------------------------------------------------------------------------
// IP helpers

function parseIPv4(s: string): number[] | null {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(s);
  if (!m) return null;
  const b = [Number(m[1]), Number(m[2]), Number(m[3]), Number(m[4])];
  return b.every((x) => x <= 255) ? b : null;
}

/** 16 bytes of an IPv6 address (zone id ignored), or null if `s` is not one. */
function parseIPv6(s: string): number[] | null {
  const zone = s.indexOf("%");
  if (zone >= 0) s = s.slice(0, zone);
  if (!s.includes(":")) return null;
  let v4: number[] = [];
  const lastColon = s.lastIndexOf(":");
  if (s.includes(".", lastColon)) {
    const p = parseIPv4(s.slice(lastColon + 1));
    if (!p) return null;
    v4 = p;
    // "::ffff:1.2.3.4" -> "::ffff", "::1.2.3.4" -> "::", "1:2:3:4:5:6:1.2.3.4" -> "1:2:3:4:5:6".
    s = s.slice(0, lastColon + 1);
    if (!s.endsWith("::")) s = s.slice(0, -1);
  }
  const groupsWanted = v4.length ? 6 : 8;
  const parseGroups = (part: string): number[] | null => {
    if (part === "") return [];
    const out: number[] = [];
    for (const g of part.split(":")) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return null;
      out.push(parseInt(g, 16));
    }
    return out;
  };
  let groups: number[];
  const dbl = s.indexOf("::");
  if (dbl >= 0) {
    if (s.indexOf("::", dbl + 1) >= 0) return null;
    const head = parseGroups(s.slice(0, dbl));
    const tail = parseGroups(s.slice(dbl + 2));
    if (!head || !tail || head.length + tail.length >= groupsWanted) return null;
    groups = [...head, ...new Array<number>(groupsWanted - head.length - tail.length).fill(0), ...tail];
  } else {
    const all = parseGroups(s);
    if (!all || all.length !== groupsWanted) return null;
    groups = all;
  }
  const bytes: number[] = [];
  for (const g of groups) bytes.push(g >> 8, g & 0xff);
  return [...bytes, ...v4];
}

function isMapped(b: number[]): boolean {
  for (let i = 0; i < 10; i++) if (b[i] !== 0) return false;
  return b[10] === 0xff && b[11] === 0xff;
}

/** Strips the ::ffff: prefix of IPv4-mapped IPv6 addresses; anything else is returned unchanged. */
export function normalizeIp(addr: string): string {
  const b = parseIPv6(addr);
  return b && isMapped(b) ? b.slice(12).join(".") : addr;
}

/** 127.0.0.0/8, ::1 and ::ffff:127.x.x.x (in any spelling). */
export function isLoopback(addr: string): boolean {
  const v4 = parseIPv4(addr);
  if (v4) return v4[0] === 127;
  const b = parseIPv6(addr);
  if (!b) return false;
  if (isMapped(b)) return b[12] === 127;
  for (let i = 0; i < 15; i++) if (b[i] !== 0) return false;
  return b[15] === 1;
}

/** Canonical comparison key: dotted quad for IPv4 (and IPv4-mapped), 32 hex digits for IPv6. */
function ipKeyFromBytes(b: number[]): string {
  if (b.length === 4) return b.join(".");
  if (isMapped(b)) return b.slice(12).join(".");
  return b.map((x) => x.toString(16).padStart(2, "0")).join("");
}

function ipKey(addr: string): string | null {
  const b = parseIPv4(addr) ?? parseIPv6(addr);
  return b ? ipKeyFromBytes(b) : null;
}

/**
 * Address field of /proc/net/tcp{,6}: the kernel prints the address as 1 (IPv4) or 4 (IPv6)
 * 32-bit words in host byte order, so on little-endian machines each word's bytes are reversed.
 */
function ipKeyFromProcHex(hex: string, littleEndian: boolean): string | null {
  if (hex.length !== 8 && hex.length !== 32) return null;
  const b: number[] = [];
  for (let w = 0; w < hex.length; w += 8) {
    const word = [0, 2, 4, 6].map((i) => parseInt(hex.slice(w + i, w + i + 2), 16));
    if (word.some(Number.isNaN)) return null;
    b.push(...(littleEndian ? word.reverse() : word));
  }
  return ipKeyFromBytes(b);
}

// ---------------------------------------------------------------------------------------------
// Shared work

function settle(p: Promise<unknown>): Promise<void> {
  return p.then(
    () => undefined,
    () => undefined,
  );
}

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function yieldToLoop(): Promise<void> {
  return new Promise((r) => setImmediate(r));
}

/**
 * Runs `task` on demand, sharing runs between callers: get(since) resolves once a run that started
 * at or after `since` has finished (one already finished, the current one, or one queued behind it),
 * and runs start at least `minIntervalMs` apart.
 */
class SharedRun {
  private current: { startedAt: number; promise: Promise<void> } | null = null;
  private queued: Promise<void> | null = null;
  private lastStart = -Infinity;
  /** Start time of the latest run that has finished. */
  private lastDoneStart = -Infinity;

  constructor(
    private readonly task: () => Promise<void>,
    private readonly minIntervalMs: number,
  ) {}

  get(since: number): Promise<void> {
    if (this.lastDoneStart >= since) return Promise.resolve();
    if (this.current && this.current.startedAt >= since) return this.current.promise;
    if (this.queued) return this.queued;
    if (!this.current && performance.now() >= this.lastStart + this.minIntervalMs) return this.start();
    // There is an await before start() in every path, so `queued` is assigned before start() clears it.
    const queued = (async () => {
      if (this.current) await settle(this.current.promise);
      const wait = this.lastStart + this.minIntervalMs - performance.now();
      if (wait > 0) await delay(wait);
      return this.start();
    })();
    this.queued = queued;
    return queued;
  }

  private start(): Promise<void> {
    this.queued = null;
    const startedAt = performance.now();
    this.lastStart = startedAt;
    const promise = this.task();
    const run = { startedAt, promise };
    this.current = run;
    const clear = () => {
      if (this.current === run) this.current = null;
      this.lastDoneStart = Math.max(this.lastDoneStart, startedAt);
    };
    promise.then(clear, clear);
    return promise;
  }
}

// ---------------------------------------------------------------------------------------------
// /proc/net/tcp{,6}

interface SocketWant {
  /** ipKey of the client's address. */
  addr: string;
  /** Client's port (local port of the client's socket). */
  localPort: number;
  /** Proxy's port (remote port of the client's socket). */
  remotePort: number;
}

/**
 * One /proc/net/tcp-style file. Lookups made in the same tick are served by one read, which stops as
 * soon as every wanted socket has been seen; lookups made while a read runs get the next read.
 */
class ProcNetTable {
  private queued: { wanted: Map<string, SocketWant>; promise: Promise<Map<string, number>> } | null = null;
  private running: Promise<unknown> | null = null;
  private buf: Buffer | null = null;

  constructor(
    private readonly path: string,
    private readonly littleEndian: boolean,
    private readonly onRead: () => void,
  ) {}

  async lookup(want: SocketWant): Promise<number | null> {
    const key = `${want.addr}|${want.localPort}|${want.remotePort}`;
    if (!this.queued) {
      const wanted = new Map<string, SocketWant>();
      const promise = (async () => {
        // Always yield first: every lookup made in this tick joins `wanted` before the read starts.
        await settle(this.running ?? Promise.resolve());
        if (this.queued?.wanted === wanted) this.queued = null;
        const read = this.read(wanted);
        this.running = read;
        try {
          return await read;
        } finally {
          if (this.running === read) this.running = null;
        }
      })();
      this.queued = { wanted, promise };
    }
    this.queued.wanted.set(key, want);
    const found = await this.queued.promise;
    return found.get(key) ?? null;
  }

  /** Inodes of the wanted sockets, by key. A missing file or unreadable table yields what was found. */
  private async read(wanted: Map<string, SocketWant>): Promise<Map<string, number>> {
    const found = new Map<string, number>();
    const ports = new Set<string>();
    for (const w of wanted.values()) ports.add(`${w.localPort}|${w.remotePort}`);
    let fh;
    try {
      fh = await open(this.path, "r");
    } catch {
      return found;
    }
    this.onRead();
    try {
      // One read() per 256 KiB: fewer boundaries at which the kernel can reshuffle the table under us.
      // Reads of one table never overlap, so the buffer is kept.
      const buf = (this.buf ??= Buffer.allocUnsafe(256 * 1024));
      let carry = "";
      for (;;) {
        const { bytesRead } = await fh.read(buf, 0, buf.length, null);
        const text = carry + buf.toString("latin1", 0, bytesRead);
        const lines = text.split("\n");
        carry = bytesRead === 0 ? "" : (lines.pop() ?? "");
        for (const line of lines) {
          const hit = this.match(line, ports, wanted);
          if (hit && !found.has(hit.key)) {
            found.set(hit.key, hit.inode);
            if (found.size === wanted.size) return found;
          }
        }
        if (bytesRead === 0) return found;
      }
    } catch {
      return found;
    } finally {
      await fh.close().catch(() => {});
    }
  }

  private match(line: string, ports: Set<string>, wanted: Map<string, SocketWant>): { key: string; inode: number } | null {
    // "  sl  local_address rem_address   st tx_queue:rx_queue tr:tm->when retrnsmt   uid  timeout inode ..."
    const f = line.trim().split(/\s+/);
    if (f.length < 10 || !f[0].endsWith(":")) return null;
    const local = f[1].split(":");
    const remote = f[2].split(":");
    if (local.length !== 2 || remote.length !== 2) return null;
    const lport = parseInt(local[1], 16);
    const rport = parseInt(remote[1], 16);
    if (!ports.has(`${lport}|${rport}`)) return null;
    const addr = ipKeyFromProcHex(local[0], this.littleEndian);
    if (addr === null) return null;
    const key = `${addr}|${lport}|${rport}`;
    if (!wanted.has(key)) return null;
    const inode = Number(f[9]);
    // Inode 0: a socket no longer attached to a file (TIME_WAIT and the like).
    return Number.isSafeInteger(inode) && inode > 0 ? { key, inode } : null;
  }
}

// ---------------------------------------------------------------------------------------------
// Socket inode -> owning process

interface Owner {
  pid: number;
  fd: string;
}

class OwnerIndex {
  readonly byInode = new Map<number, Owner>();
  private readonly byPid = new Map<number, number[]>();

  /** Replaces everything known about `pid` with `sockets` (inode, fd). */
  setPid(pid: number, sockets: [number, string][]): void {
    for (const inode of this.byPid.get(pid) ?? []) {
      if (this.byInode.get(inode)?.pid === pid) this.byInode.delete(inode);
    }
    this.byPid.set(pid, sockets.map(([inode]) => inode));
    for (const [inode, fd] of sockets) this.byInode.set(inode, { pid, fd });
  }

  dropPid(pid: number): void {
    this.setPid(pid, []);
    this.byPid.delete(pid);
  }
}

function socketInode(link: string): number | null {
  // "socket:[12345]"
  if (!link.startsWith("socket:[") || !link.endsWith("]")) return null;
  const n = Number(link.slice(8, -1));
  return Number.isSafeInteger(n) && n > 0 ? n : null;
}

// ---------------------------------------------------------------------------------------------
// lsof (macOS)

export interface LsofProcess {
  pid: number;
  command: string;
  /** `n` fields of the process's files, e.g. "127.0.0.1:52344->127.0.0.1:8080". */
  names: string[];
}

/** Parses `lsof -F` output (one field per line, first character is the field id). */
export function parseLsofOutput(text: string): LsofProcess[] {
  const out: LsofProcess[] = [];
  let cur: LsofProcess | null = null;
  for (const raw of text.split("\n")) {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (line.length === 0) continue;
    const id = line[0];
    const value = line.slice(1);
    if (id === "p") {
      const pid = Number(value);
      cur = Number.isSafeInteger(pid) && pid > 0 ? { pid, command: "", names: [] } : null;
      if (cur) out.push(cur);
    } else if (cur && id === "c") {
      cur.command = value;
    } else if (cur && id === "n") {
      cur.names.push(value);
    }
  }
  return out;
}

function portOf(endpoint: string): number | null {
  const i = endpoint.lastIndexOf(":");
  if (i < 0) return null;
  const n = Number(endpoint.slice(i + 1));
  return Number.isInteger(n) ? n : null;
}

/**
 * The client's process among lsof's answer for `-iTCP@<clientAddr>:<clientPort>`, which lists both
 * ends when the client is local: the one whose connection runs from clientPort to proxyPort; failing
 * names, the first process that is not `selfPid`, failing that the first one.
 */
export function pickLsofOwner(
  procs: LsofProcess[],
  clientPort: number,
  proxyPort: number,
  selfPid: number,
): LsofProcess | null {
  for (const p of procs) {
    for (const name of p.names) {
      const arrow = name.indexOf("->");
      if (arrow < 0) continue;
      if (portOf(name.slice(0, arrow)) === clientPort && portOf(name.slice(arrow + 2)) === proxyPort) return p;
    }
  }
  return procs.find((p) => p.pid !== selfPid) ?? procs[0] ?? null;
}

// ---------------------------------------------------------------------------------------------

export class ClientLabeler {
  readonly stats: ClientLabelerStats = { resolves: 0, netReads: 0, hotScans: 0, fullScans: 0, cacheHits: 0, retries: 0 };

  private readonly platform: NodeJS.Platform;
  private readonly procRoot: string;
  private readonly ttlMs: number;
  private readonly results = new Map<string, { label: string; expires: number }>();
  private readonly tcp4: ProcNetTable;
  private readonly tcp6: ProcNetTable;
  private owners = new OwnerIndex();
  /** Most recently seen client processes, newest first. */
  private hotPids: number[] = [];
  private readonly hotScan: SharedRun;
  private readonly fullScan: SharedRun;

  constructor(opts: ClientLabelerOptions = {}) {
    this.platform = opts.platform ?? process.platform;
    this.procRoot = (opts.procRoot ?? "/proc").replace(/\/+$/, "");
    this.ttlMs = opts.cacheTtlMs ?? DEFAULT_TTL_MS;
    const le = endianness() === "LE";
    const onRead = () => void this.stats.netReads++;
    this.tcp4 = new ProcNetTable(`${this.procRoot}/net/tcp`, le, onRead);
    this.tcp6 = new ProcNetTable(`${this.procRoot}/net/tcp6`, le, onRead);
    this.hotScan = new SharedRun(() => this.scanHot(), 0);
    this.fullScan = new SharedRun(() => this.scanAll(), FULL_SCAN_INTERVAL_MS);
  }

  /**
   * Label for a client connection accepted by the proxy: remoteAddr/remotePort are the client's end, localPort the
   * proxy's listening port. `alive`, when given, tells whether the proxy's end of the connection is still open: a
   * miss for a connection that is still open is looked up again, after MISS_DELAYS_MS, because its client socket
   * must still exist (reads of /proc/net/tcp are not snapshots: the kernel hands it out a page per read() and can
   * skip a line when the table changes between two of them; the fd scan can race the same way).
   */
  async resolve(remoteAddr: string, remotePort: number, localPort: number, alive?: () => boolean): Promise<string> {
    this.stats.resolves++;
    const ip = normalizeIp(remoteAddr);
    if (!isLoopback(ip) || !validPort(remotePort) || !validPort(localPort)) return ip;
    try {
      if (this.platform === "linux") {
        let label = await this.resolveLinux(ip, remotePort, localPort);
        for (let i = 0; label === null && alive !== undefined && i < MISS_DELAYS_MS.length && alive(); i++) {
          this.stats.retries++;
          await delay(MISS_DELAYS_MS[i] as number);
          if (!alive()) break;
          label = await this.resolveLinux(ip, remotePort, localPort);
        }
        return label ?? ip;
      }
      if (this.platform === "darwin") return (await this.resolveDarwin(ip, remotePort, localPort)) ?? ip;
    } catch {
      // Fall through to the IP.
    }
    return ip;
  }

  // --- Linux ---

  private async resolveLinux(ip: string, clientPort: number, proxyPort: number): Promise<string | null> {
    // The client's socket existed before this call; any scan starting from now on will see it.
    const since = performance.now();
    const addr = ipKey(ip);
    if (addr === null) return null;
    const want: SocketWant = { addr, localPort: clientPort, remotePort: proxyPort };
    let inode = await this.socketInode(addr, want);
    // The client is still connected (it waits for its response), so a miss is most likely a read of the
    // table that raced the kernel's reshuffling of it between two read() calls: one fresh read settles it.
    if (inode === null) {
      this.stats.retries++;
      inode = await this.socketInode(addr, want);
    }
    if (inode === null) return null;

    const cacheKey = `${clientPort}:${inode}`;
    const cached = this.results.get(cacheKey);
    if (cached && cached.expires > performance.now()) {
      this.stats.cacheHits++;
      return cached.label;
    }

    let pid = this.ownerOf(inode);
    if (pid === null && this.hotPids.length > 0) {
      await this.hotScan.get(since);
      pid = this.ownerOf(inode);
    }
    if (pid === null) {
      await this.fullScan.get(since);
      pid = this.ownerOf(inode);
    }
    if (pid === null) {
      // Same reasoning for the fd scan: one more full scan, started after the first, before giving up.
      this.stats.retries++;
      await this.fullScan.get(performance.now());
      pid = this.ownerOf(inode);
    }
    const comm = pid === null ? null : this.readComm(pid);
    if (pid !== null && comm !== null) this.markHot(pid);
    // Misses are not kept: a second look at the same connection must look again.
    if (comm !== null) this.remember(cacheKey, comm);
    return comm;
  }

  private async socketInode(addr: string, want: SocketWant): Promise<number | null> {
    // An IPv4 client's socket is in tcp, or in tcp6 as ::ffff:a.b.c.d if it is a dual-stack socket.
    const inode = addr.includes(".") ? await this.tcp4.lookup(want) : null;
    return inode ?? (await this.tcp6.lookup(want));
  }

  /** The pid holding socket `inode`, if the index knows it and the fd still links to that socket. */
  private ownerOf(inode: number): number | null {
    const o = this.owners.byInode.get(inode);
    if (!o) return null;
    try {
      if (readlinkSync(`${this.procRoot}/${o.pid}/fd/${o.fd}`) === `socket:[${inode}]`) return o.pid;
    } catch {
      // fd closed or process gone.
    }
    this.owners.byInode.delete(inode);
    return null;
  }

  private readComm(pid: number): string | null {
    try {
      const comm = readFileSync(`${this.procRoot}/${pid}/comm`, "utf8").trim();
      return comm.length > 0 ? comm : null;
    } catch {
      return null;
    }
  }

  private markHot(pid: number): void {
    this.hotPids = [pid, ...this.hotPids.filter((p) => p !== pid)].slice(0, HOT_PIDS);
  }

  private async scanHot(): Promise<void> {
    this.stats.hotScans++;
    const pids = [...this.hotPids];
    const gone = await this.scanPids(pids.map(String), this.owners);
    if (gone.length > 0) {
      this.hotPids = this.hotPids.filter((p) => !gone.includes(p));
      for (const p of gone) this.owners.dropPid(p);
    }
  }

  private async scanAll(): Promise<void> {
    this.stats.fullScans++;
    let entries: string[];
    try {
      entries = readdirSync(this.procRoot);
    } catch {
      return;
    }
    const index = new OwnerIndex();
    await this.scanPids(entries.filter((e) => /^\d+$/.test(e)), index);
    this.owners = index;
  }

  /**
   * Records the sockets held by each of `pids` into `index`, with synchronous fs calls in slices of
   * at most SLICE_MS between yields to the event loop. Returns the pids whose fd directory could not
   * be read (exited, or not ours to read).
   */
  private async scanPids(pids: string[], index: OwnerIndex): Promise<number[]> {
    const unreadable: number[] = [];
    let sliceStart = performance.now();
    for (const p of pids) {
      const pid = Number(p);
      const dir = `${this.procRoot}/${p}/fd`;
      let fds: string[];
      try {
        fds = readdirSync(dir);
      } catch {
        unreadable.push(pid);
        continue;
      }
      const sockets: [number, string][] = [];
      for (const fd of fds) {
        try {
          const inode = socketInode(readlinkSync(`${dir}/${fd}`));
          if (inode !== null) sockets.push([inode, fd]);
        } catch {
          // fd closed meanwhile.
        }
        if (performance.now() - sliceStart > SLICE_MS) {
          await yieldToLoop();
          sliceStart = performance.now();
        }
      }
      index.setPid(pid, sockets);
    }
    return unreadable;
  }

  private remember(key: string, label: string): void {
    const now = performance.now();
    if (this.results.size >= RESULT_CACHE_MAX) {
      for (const [k, v] of this.results) if (v.expires <= now) this.results.delete(k);
      // Still full: drop the oldest entries (Map iterates in insertion order).
      for (const k of this.results.keys()) {
        if (this.results.size < RESULT_CACHE_MAX) break;
        this.results.delete(k);
      }
    }
    this.results.set(key, { label, expires: now + this.ttlMs });
  }

  // --- macOS ---

  private async resolveDarwin(ip: string, clientPort: number, proxyPort: number): Promise<string | null> {
    // No inode to tell connections apart here; the 4-tuple (client addr and port, proxy port) stands in.
    const cacheKey = `${ip}|${clientPort}|${proxyPort}`;
    const cached = this.results.get(cacheKey);
    if (cached && cached.expires > performance.now()) {
      this.stats.cacheHits++;
      return cached.label;
    }
    const endpoint = ip.includes(":") ? `[${ip}]:${clientPort}` : `${ip}:${clientPort}`;
    // +c 0: commands untruncated (lsof cuts them to 9 characters by default).
    const proc = Bun.spawn(["lsof", "-nP", "+c", "0", `-iTCP@${endpoint}`, "-sTCP:ESTABLISHED", "-Fpcn"], {
      stdin: "ignore",
      stdout: "pipe",
      stderr: "ignore",
    });
    const timer = setTimeout(() => proc.kill(), LSOF_TIMEOUT_MS);
    try {
      const text = await new Response(proc.stdout).text();
      await proc.exited;
      const owner = pickLsofOwner(parseLsofOutput(text), clientPort, proxyPort, process.pid);
      const label = owner && owner.command.length > 0 ? owner.command : null;
      if (label !== null) this.remember(cacheKey, label);
      return label;
    } finally {
      clearTimeout(timer);
    }
  }
}

function validPort(p: number): boolean {
  return Number.isInteger(p) && p > 0 && p < 65536;
}
