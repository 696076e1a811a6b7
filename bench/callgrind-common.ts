/**
 * What bench/h2-callgrind.ts and bench/http1-callgrind.ts share: starting a proxy (tapwire or a bare relay) under
 * valgrind's callgrind with instrumentation off, switching it on only for the measured requests, and reading the
 * instructions per thread from that window's dump.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateCA } from "../src/core/tls/ca.ts";
import { LeafCertCache } from "../src/core/tls/leaf.ts";

export type Kid = ReturnType<typeof Bun.spawn>;

/**
 * A bench's scratch: a temporary directory, the children it starts (stopped with SIGINT at exit) and a log
 * prefixed with its name; the directory is removed at exit unless `keep`.
 */
export function benchScratch(name: string, keep = false): { tmp: string; kids: Kid[]; log: (s: string) => void } {
  const tmp = mkdtempSync(join(tmpdir(), `tapwire-${name}-`));
  const kids: Kid[] = [];
  process.on("exit", () => {
    for (const k of kids) {
      try {
        k.kill("SIGINT");
      } catch {}
    }
    if (!keep) rmSync(tmp, { recursive: true, force: true });
  });
  return { tmp, kids, log: (s: string) => console.error(`[${name}] ${s}`) };
}

/** bench-upstream.ts (GET /1k.txt, 1,024 bytes; it wants a certificate for its HTTPS side): its HTTP port. */
export async function startHttpUpstream(tmp: string, kids: Kid[]): Promise<number> {
  const leaf = new LeafCertCache(generateCA()).get("localhost");
  writeFileSync(join(tmp, "cert.pem"), leaf.cert);
  writeFileSync(join(tmp, "key.pem"), leaf.key);
  const upstream = Bun.spawn([process.execPath, join(import.meta.dir, "bench-upstream.ts"), join(tmp, "cert.pem"), join(tmp, "key.pem")], { stdout: "pipe", stderr: "inherit" });
  kids.push(upstream);
  return JSON.parse(await firstLine(upstream, /\n/)).http as number;
}

export function requireCallgrind(): void {
  if (Bun.spawnSync(["which", "callgrind_control"]).exitCode !== 0) {
    console.error("valgrind is not installed (apt-get install -y valgrind)");
    process.exit(2);
  }
}

/** Reads a child's stdout until `re` matches what came so far; returns that text. */
export async function firstLine(child: Kid, re: RegExp): Promise<string> {
  const reader = (child.stdout as ReadableStream<Uint8Array>).getReader();
  let text = "";
  while (!re.test(text)) {
    const { value, done } = await reader.read();
    if (done) throw new Error("the process exited before it was ready");
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return text;
}

export interface UnderCallgrind {
  pid: number;
  port: number;
  /** tapwire's data directory (its CA is ca.pem there); undefined for a relay. */
  dataDir?: string;
}

function valgrindArgs(out: string): string[] {
  return ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes", `--callgrind-out-file=${out}/cg.%p`];
}

function env(out: string, jitdump: boolean): Record<string, string | undefined> {
  return { ...process.env, ...(jitdump ? { BUN_JSC_useJITDump: "true", BUN_JSC_jitDumpDirectory: out } : {}) };
}

/** A relay script under callgrind that prints `PORT n` once listening. */
export async function startRelay(kids: Kid[], out: string, jitdump: boolean, argv: string[]): Promise<UnderCallgrind> {
  const c = Bun.spawn([...valgrindArgs(out), process.execPath, ...argv], { stdout: "pipe", stderr: "ignore", env: env(out, jitdump) });
  kids.push(c);
  const port = Number(/PORT (\d+)/.exec(await firstLine(c, /PORT \d+\n/))![1]);
  return { pid: c.pid, port };
}

/** `tapwire start` from checkout `dir` under callgrind; with `noCapture`, capture is stopped through the API. */
export async function startTapwire(kids: Kid[], out: string, jitdump: boolean, dir: string, dataDir: string, extra: string[], noCapture: boolean): Promise<UnderCallgrind> {
  const c = Bun.spawn([...valgrindArgs(out), process.execPath, join(dir, "src/cli/main.ts"), "start", "--data-dir", dataDir, "--port", "0", ...extra], { stdout: "ignore", stderr: "ignore", env: env(out, jitdump) });
  kids.push(c);
  const hsFile = join(dataDir, "api-handshake.json");
  let hs: { proxy_port: number | null; port: number; token: string } | null = null;
  while (hs === null) {
    await Bun.sleep(200);
    if (c.exitCode !== null) throw new Error("tapwire exited under valgrind");
    try {
      const j = JSON.parse(readFileSync(hsFile, "utf8"));
      if (j.proxy_port) hs = j;
    } catch {}
  }
  if (noCapture) {
    const r = await fetch(`http://127.0.0.1:${hs.port}/api/v1/capture/stop`, { method: "POST", headers: { authorization: `Bearer ${hs.token}` } });
    if (r.status !== 204) throw new Error(`capture/stop: ${r.status}`);
  }
  return { pid: c.pid, port: hs.proxy_port!, dataDir };
}

/** Zeroes the counters, instruments `run()` only, dumps the window as "measured"; returns run's result and seconds. */
export async function measured<T>(pid: number, run: () => Promise<T>): Promise<{ result: T; secs: number }> {
  const ctl = (...a: string[]) => Bun.spawnSync(["callgrind_control", ...a, String(pid)]);
  ctl("-z");
  ctl("-i", "on");
  const t0 = performance.now();
  const result = await run();
  const secs = (performance.now() - t0) / 1000;
  ctl("-i", "off");
  ctl("-d", "measured");
  await Bun.sleep(1000);
  return { result, secs };
}

/** Instructions per thread from the dump of the measured window (one file per thread: cg.PID.1-TT). */
export function instructionsPerThread(out: string): { thread: string; ir: number }[] {
  const perThread: { thread: string; ir: number }[] = [];
  for (const f of readdirSync(out)) {
    const m = /^cg\.\d+\.1-(\d+)$/.exec(f);
    if (!m) continue;
    const text = Bun.spawnSync(["callgrind_annotate", join(out, f)]).stdout.toString();
    const line = text.split("\n").find((l) => l.includes("PROGRAM TOTALS"));
    const ir = line ? Number(line.trim().split(/\s+/)[0]!.replace(/,/g, "")) : NaN;
    if (Number.isFinite(ir) && ir > 0) perThread.push({ thread: m[1]!, ir });
  }
  return perThread.sort((a, b) => Number(a.thread) - Number(b.thread));
}

/** Prints the main thread's and every thread's instructions per request. */
export function printPerRequest(label: string, ok: number, secs: number, out: string, keep: boolean): void {
  const perThread = instructionsPerThread(out);
  const main = perThread.find((t) => t.thread === "01");
  console.log(`\n${label}: ${ok} requests in ${secs.toFixed(1)} s under callgrind`);
  console.log(`main thread: ${main ? (main.ir / ok / 1000).toFixed(1) : "?"}k instructions per request`);
  console.log(`every thread (JIT compiler, GC helpers and the capture writer included, not comparable with production): ${(perThread.reduce((s, t) => s + t.ir, 0) / ok / 1000).toFixed(1)}k`);
  for (const t of perThread) console.log(`  thread ${t.thread}: ${(t.ir / ok / 1000).toFixed(1)}k`);
  if (keep) console.log(`callgrind files (and jitdump with --jitdump): ${out}`);
}

/** JIT code ranges from JSC's jitdump files in `out` (BUN_JSC_useJITDump): code address range and name. */
function jitRanges(out: string): { lo: bigint; hi: bigint; name: string }[] {
  const ranges: { lo: bigint; hi: bigint; name: string }[] = [];
  for (const f of readdirSync(out)) {
    if (!/^jit-.*\.dump$/.test(f)) continue;
    const b = readFileSync(join(out, f));
    const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
    let off = dv.getUint32(8, true); // the file header's size
    while (off + 16 <= b.length) {
      const id = dv.getUint32(off, true);
      const size = dv.getUint32(off + 4, true);
      if (size === 0) break;
      if (id === 0) {
        // JIT_CODE_LOAD: header (16), pid, tid, vma, code_addr, code_size, code_index, name\0, code
        const lo = dv.getBigUint64(off + 32, true);
        const hi = lo + dv.getBigUint64(off + 40, true);
        let e = off + 56;
        while (e < b.length && b[e] !== 0) e++;
        ranges.push({ lo, hi, name: b.toString("latin1", off + 56, e) });
      }
      off += size;
    }
  }
  return ranges;
}

/**
 * Areas of plain-HTTP work for a JS function name. A name defined in several files goes to the first matching
 * hot-path file (the proxy core first); names the lookup cannot place go to "other JS".
 */
const HOT_ORDER: [RegExp, string][] = [
  [/^core\/proxy\/(http-session|exchange|endpoint)\.ts$/, "session, exchange, endpoint"],
  [/^core\/http1\//, "HTTP/1 parse and serialise"],
  [/^core\/proxy\/upstream\.ts$/, "upstream pool"],
  [/^(features\/capture\/|store\/)/, "capture (main thread)"],
  [/^(pipeline\/|features\/)/, "pipeline and features' addons"],
];
function areaOf(name: string, defsByFile: Map<string, string[]>): string {
  const files = defsByFile.get(name) ?? [];
  for (const [re, area] of HOT_ORDER) if (files.some((f) => re.test(f))) return area;
  return "other JS";
}

/**
 * The main thread's instructions of the measured window by area (needs --jitdump for the JIT code's names):
 * Bun's native code (stripped: sockets, the JSC runtime, GC and allocation are not told apart), libc, JSC's
 * stubs, and tapwire's JavaScript by the file that defines each function. Prints k instructions per request.
 */
export function printAreas(out: string, ok: number, srcDir: string): void {
  const main = readdirSync(out).find((f) => /^cg\.\d+\.1-01$/.test(f));
  if (!main) return;
  const ranges = jitRanges(out);
  // every file defining a name, for names defined in several files
  const defsByFile = new Map<string, string[]>();
  const files = [...new Bun.Glob("**/*.ts").scanSync(srcDir)].sort();
  const re = /^\s*(?:export\s+)?(?:async\s+)?(?:function\*?\s+|(?:(?:private|protected|public|static|override|readonly|get|set)\s+)*)([A-Za-z_$][\w$]*)\s*(?:<[^>]*>)?\(/gm;
  for (const f of files) {
    const text = readFileSync(join(srcDir, f), "utf8");
    for (const r of [re, /\bclass\s+([A-Za-z_$][\w$]*)/g]) for (const m of text.matchAll(r)) {
      const l = defsByFile.get(m[1]!) ?? [];
      if (!l.includes(f)) l.push(f);
      defsByFile.set(m[1]!, l);
    }
  }
  const text = Bun.spawnSync(["callgrind_annotate", "--threshold=100", join(out, main)]).stdout.toString();
  const areas = new Map<string, number>();
  const fns = new Map<string, number>();
  for (const line of text.split("\n")) {
    const m = /^\s*([\d,]+) \([^)]*\)\s+(.*)$/.exec(line);
    if (!m || m[2]!.includes("PROGRAM TOTALS")) continue;
    const ir = Number(m[1]!.replace(/,/g, ""));
    let area: string;
    let fn: string | null = null;
    const a = /\?\?\?:0x([0-9a-f]+)\S* \[\?\?\?\]/.exec(m[2]!);
    if (a) {
      const x = BigInt("0x" + a[1]);
      let hit: string | undefined;
      for (const r of ranges) if (x >= r.lo && x < r.hi) hit = r.name; // the newest code at that address
      const j = hit ? /^[^:]*: ([A-Za-z_$][\w$]*)#/.exec(hit) : null;
      if (j) {
        fn = j[1]!;
        area = areaOf(fn, defsByFile);
      } else area = "JSC stubs and unnamed JIT code";
    } else if (m[2]!.includes("bun.exe") || m[2]!.includes("/bun ")) area = "Bun native (sockets, JSC runtime, GC, allocation)";
    else area = "libc and other libraries";
    areas.set(area, (areas.get(area) ?? 0) + ir);
    if (fn) fns.set(fn, (fns.get(fn) ?? 0) + ir);
  }
  const total = [...areas.values()].reduce((s, v) => s + v, 0);
  console.log(`\nmain thread by area${ranges.length ? "" : " (no jitdump: JIT code unnamed; run with --jitdump)"}, k instructions per request:`);
  for (const [k, v] of [...areas].sort((x, y) => y[1] - x[1])) console.log(`  ${(v / ok / 1000).toFixed(1).padStart(6)}k ${((100 * v) / total).toFixed(1).padStart(5)}%  ${k}`);
  console.log(`top JS functions (all tiers), k instructions per request:`);
  for (const [k, v] of [...fns].sort((x, y) => y[1] - x[1]).slice(0, 15)) console.log(`  ${(v / ok / 1000).toFixed(2).padStart(6)}k  ${k} (${areaOf(k, defsByFile)})`);
}
