#!/usr/bin/env bun
/**
 * Every benchmark in one command, one table: measure, goal, value, PASS/FAIL, and the machine's core count.
 * Runs, one after the other, each in its own process (their own output goes to the log file next to --json, or
 * is dropped):
 *   streaming-bench.ts  1 GiB download and upload, direct and through tapwire (capture on), paired rounds, RSS
 *   proxy-bench.ts      plain HTTP keep-alive, 32 connections, 1 KB: tapwire against direct (and the peers with
 *                       --peers: http-mitm-proxy, mockttp, mitmdump must be installed, see proxy-bench.ts)
 *   store-bench.ts      the capture store at --store-size entries (default 200,000; the goals are stated for
 *                       1,000,000): page, filter and search latency, fill rate, index lag, stall, RSS, disk, reopen
 *   writer-bench.ts     the capture writer's CPU per entry (written and indexed) and disk per entry, in process
 *   mock-bench.ts       the mock listener against a bare Bun.serve
 *   startup.ts          the compiled binary's start-up (builds it first)
 *   engine-bench.ts     the engine's JavaScript cost per request (information: no goal)
 * A bench that fails is a FAIL row with its error; the others still run.
 *
 *   npx bun bench/all.ts [--json FILE] [--store-size N] [--quick] [--peers] [--only streaming,proxy,store,writer,...]
 *
 * --quick: shorter runs (128 MiB transfers, one round, 2 s load runs, 50,000 store entries): a smoke test of the
 * benches, not figures to quote. Benches print figures; tests never time anything.
 */
import { ALLOCATOR_ENV } from "../src/cli/allocator.ts";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";

const { values: opt } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    json: { type: "string" },
    "store-size": { type: "string" },
    quick: { type: "boolean", default: false },
    peers: { type: "boolean", default: false },
    only: { type: "string" },
    help: { type: "boolean", short: "h", default: false },
  },
});
if (opt.help) {
  console.log(
    (await Bun.file(import.meta.path).text())
      .split("*/")[0]!
      .replace(/^#!.*\n\/\*\*\n/, "")
      .replace(/^ \* ?/gm, ""),
  );
  process.exit(0);
}

const DIR = import.meta.dir;
const BUN = process.execPath;
const CORES = navigator.hardwareConcurrency;
const QUICK = opt.quick!;
const STORE_SIZE = Number(opt["store-size"] ?? (QUICK ? 50_000 : 200_000));
const ONLY = opt.only ? new Set(opt.only.split(",")) : null;
const logPath = opt.json ? `${opt.json}.log` : null;
const logChunks: string[] = [];

interface Row {
  bench: string;
  measure: string;
  goal: string;
  value: string;
  pass: boolean | null;
}
const rows: Row[] = [];

function row(bench: string, measure: string, goal: string, value: number | null, fmt: (v: number) => string, ok: ((v: number) => boolean) | null): void {
  rows.push({ bench, measure, goal, value: value === null || !Number.isFinite(value) ? "-" : fmt(value), pass: value === null || ok === null ? null : ok(value) });
}

/**
 * Runs one bench. tapwireProcess: the bench measures tapwire's store or writer in its own process, so it runs with
 * the allocator setting `tapwire start` gives itself (src/cli/allocator.ts); benches that start tapwire get it from
 * tapwire, and their other processes (direct upstreams, relays, peers) keep the defaults.
 */
async function runBench(name: string, args: string[], timeoutSec: number, tapwireProcess = false): Promise<string> {
  console.error(`all: ${name}: bun ${args.join(" ")}`);
  const t0 = performance.now();
  const env = tapwireProcess ? { ...process.env, ...ALLOCATOR_ENV } : process.env;
  const p = Bun.spawn([BUN, ...args], { cwd: join(DIR, ".."), stdout: "pipe", stderr: "pipe", stdin: "ignore", env });
  const timer = setTimeout(() => p.kill("SIGTERM"), timeoutSec * 1000);
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  clearTimeout(timer);
  logChunks.push(`===== ${name} (exit ${code}, ${((performance.now() - t0) / 1000).toFixed(0)} s): bun ${args.join(" ")}\n${out}\n--- stderr\n${err}\n`);
  console.error(`all: ${name} done in ${((performance.now() - t0) / 1000).toFixed(0)} s (exit ${code})`);
  if (code !== 0) throw new Error(`exit ${code}: ${(err || out).trim().split("\n").slice(-3).join(" | ").slice(0, 300)}`);
  return out;
}

function result(out: string): Record<string, number> {
  const line = out.split("\n").findLast((l) => l.startsWith("RESULT "));
  if (!line) throw new Error("no RESULT line in its output");
  return JSON.parse(line.slice(7));
}

function failed(bench: string, e: unknown): void {
  rows.push({ bench, measure: "(bench did not finish)", goal: "-", value: String((e as Error).message ?? e).slice(0, 160), pass: false });
}

const want = (name: string) => !ONLY || ONLY.has(name);
const f2 = (v: number) => v.toFixed(2);
const ms = (v: number) => `${v.toFixed(1)} ms`;
const mib = (v: number) => `${v.toFixed(0)} MiB`;
const started = new Date();

if (want("streaming")) {
  try {
    const r = result(await runBench("streaming", [join(DIR, "streaming-bench.ts"), ...(QUICK ? ["--size-mib", "128", "--rounds", "1"] : [])], 1800));
    const size = `${r.size_mib} MiB`;
    row("streaming", `${size} download via tapwire / direct (capture on, median of ${r.rounds})`, ">= 0.70", r.download_ratio!, f2, (v) => v >= 0.7);
    row("streaming", `${size} download: tapwire RSS growth`, "< 64 MiB", r.download_rss_growth_mib!, mib, (v) => v < 64);
    row("streaming", `${size} upload via tapwire / direct (capture on, median of ${r.rounds})`, ">= 0.70", r.upload_ratio!, f2, (v) => v >= 0.7);
    row("streaming", `${size} upload: tapwire RSS growth`, "< 64 MiB", r.upload_rss_growth_mib!, mib, (v) => v < 64);
    row("streaming", "download MiB/s: direct / bare Bun relay / tapwire", "-", r.download_direct_mibs!, (v) => `${v.toFixed(0)} / ${r.download_relay_mibs!.toFixed(0)} / ${r.download_tapwire_mibs!.toFixed(0)}`, null);
    row("streaming", "upload MiB/s: direct / bare Bun relay / tapwire", "-", r.upload_direct_mibs!, (v) => `${v.toFixed(0)} / ${r.upload_relay_mibs!.toFixed(0)} / ${r.upload_tapwire_mibs!.toFixed(0)}`, null);
    row("streaming", "download: tapwire / bare Bun relay (the ceiling for a Bun process)", "-", r.download_vs_relay!, f2, null);
    row("streaming", "upload: tapwire / bare Bun relay", "-", r.upload_vs_relay!, f2, null);
  } catch (e) {
    failed("streaming", e);
  }
}

if (want("proxy")) {
  try {
    const args = [join(DIR, "proxy-bench.ts"), "--no-extra", "--duration", QUICK ? "2" : "5", "--pairs", QUICK ? "1" : "3"];
    if (!opt.peers) args.push("--skip-peers");
    const out = await runBench("proxy", args, 3600);
    // the goal lines: "  PASS  (b)/(a) ... 0.57   (goal >= 0.40)"; the paired section comes first when there is one
    const paired = out.includes("Goals, HTTP: median of") ? out.split("Goals, HTTP: median of")[1]!.split("\nGoals (hey rows")[0]! : null;
    const single = out.split("\nGoals (hey rows")[1] ?? "";
    const pick = (text: string, re: RegExp): number | null => {
      const m = new RegExp(`${re.source}[^\\n]*?\\s(-?[\\d.]+)\\s+\\(goal`).exec(text);
      return m ? Number(m[1]) : null;
    };
    const src = paired ?? single;
    const how = paired ? "median of paired rounds" : "one run each, no peers";
    row("proxy", `plain HTTP, 32 conns, 1 KB: tapwire / direct req/s (${how})`, ">= 0.60", pick(src, /\(b\)\/\(a\)/), f2, (v) => v >= 0.6);
    row("proxy", `plain HTTP: tapwire / fastest peer req/s (${how})`, ">= 4x", pick(src, /\(b\)\/fastest peer HTTP/), f2, (v) => v >= 4);
    row("proxy", `plain HTTP: added p99 latency (${how})`, "< 2 ms", pick(src, /added p99 latency/), ms, (v) => v < 2);
    row("proxy", "HTTPS (CONNECT): tapwire / fastest peer req/s", ">= 2x", pick(single, /\(c\)\/fastest peer HTTPS/), f2, (v) => v >= 2);
    const info = (re: RegExp): number | null => {
      const m = new RegExp(`${re.source}[^\\n]*?\\s(-?[\\d.]+)(?:\\s|$)`, "m").exec(out);
      return m ? Number(m[1]) : null;
    };
    // the capture's catch-up after tapwire's capturing rows (the writer defers its SQLite work while traffic flows)
    const cu = /(\d+) entries queryable after ([\d.]+) s[^\n]*the first search answered after ([\d.]+) s; entries dropped by the capture queue: (\d+)/.exec(out);
    const kept = cu ? Number(cu[1]).toLocaleString("en") : "?";
    row("proxy", `lag: end of the capturing rows to the first search answered (${kept} entries kept)`, "< 5 s", cu ? Number(cu[3]) : null, (v) => `${v.toFixed(2)} s`, (v) => v < 5);
    row("proxy", "  of it: until every captured entry was queryable", "-", cu ? Number(cu[2]) : null, (v) => `${v.toFixed(2)} s`, null);
    row("proxy", "capture entries dropped in the bench (the queue is bounded; /capture/status dropped)", "-", cu ? Number(cu[4]) : null, (v) => String(v), null);
    row("proxy", "plain HTTP: bare Bun TCP relay / direct req/s (the floor for a Bun process, one run)", "-", info(/\(a-relay\)\/\(a\)/), f2, null);
    row("proxy", "plain HTTP: tapwire / bare Bun relay req/s (one run)", "-", info(/\(b\)\/\(a-relay\)/), f2, null);
  } catch (e) {
    failed("proxy", e);
  }
}

if (want("store")) {
  try {
    const r = result(await runBench("store", [join(DIR, "store-bench.ts"), String(STORE_SIZE)], 7200, true));
    const at = `at ${r.entries!.toLocaleString("en")}`;
    row("store", `first page p50 ${at}`, "< 10 ms", r.first_page_p50_ms!, ms, (v) => v < 10);
    row("store", `host filter p50 ${at} (store call, no HTTP)`, "< 15 ms", r.host_filter_p50_ms!, ms, (v) => v < 15);
    row("store", `host+method+status filter p50 ${at}`, "< 10 ms", r.filtered_p50_ms!, ms, (v) => v < 10);
    row("store", `body search p50 ${at} (indexed; a string not searched before)`, "< 50 ms", r.search_p50_ms!, ms, (v) => v < 50);
    row("store", "  the same search again, its next pages, its polls (matches kept)", "-", r.search_repeat_p50_ms ?? null, ms, null);
    row("store", "fill rate of the writer", ">= 15k/s", r.fill_per_s!, (v) => `${(v / 1000).toFixed(1)}k/s`, (v) => v >= 15_000);
    row("store", "search index lag after the fill", "< 5 s", r.index_lag_s!, (v) => `${v.toFixed(1)} s`, (v) => v < 5);
    row("store", "longest event-loop stall, writer at capacity", "< 20 ms", r.stall_max_ms!, ms, (v) => v < 20);
    row("store", "  of it: main thread on a core (tapwire's work, GC)", "-", r.stall_on_core_ms ?? null, ms, null);
    row("store", "  of it: main thread waiting for a core (the machine's load)", "-", r.stall_runqueue_ms ?? null, ms, null);
    row("store", "  of it: main thread asleep or blocked (a system call, a lock, the timer)", "-", r.stall_blocked_ms ?? null, ms, null);
    row("store", "longest event-loop stall, scanning searches running", "< 20 ms", r.search_stall_max_ms ?? null, ms, (v) => v < 20);
    row("store", `RSS after the query mix ${at} (the store alone: bench/store-rss.ts)`, "< 300 MiB", r.rss_mib ?? null, mib, (v) => v < 300);
    row("store", "  the bench's own process (holds its 20,000 generated entries)", "-", r.rss_bench_process_mib ?? null, mib, null);
    row("store", "disk per entry (bench body mix)", "<= 2 KB", r.bytes_per_entry!, (v) => `${(v / 1024).toFixed(2)} KB`, (v) => v <= 2048);
    row("store", `reopen + first page ${at}`, "< 200 ms", r.reopen_ms!, ms, (v) => v < 200);
  } catch (e) {
    failed("store", e);
  }
}

if (want("writer")) {
  try {
    // --group 5: batches of 200 written 1,000 entries to a transaction, as the writer Worker does (GROUP_MAX_ENTRIES)
    const base = [join(DIR, "writer-bench.ts"), QUICK ? "10000" : "30000", "--inline", "--group", "5", "--rounds", QUICK ? "1" : "3"];
    const r = result(await runBench("writer", base, 1800, true));
    row("writer", "capture writer CPU per entry, written + indexed, bench body mix (200-5,000 B)", "-", r.total_us!, (v) => `${v.toFixed(0)} µs (${(1e6 / v / 1000).toFixed(1)}k/s a core)`, null);
    row("writer", "  disk per entry of the same entries (bench body mix)", "<= 2 KB", r.bytes_per_entry!, (v) => `${(v / 1024).toFixed(2)} KB`, (v) => v <= 2048);
    // the fill-rate goal is for small entries (the proxy's own peak: 1 KB bodies): bodies of 200-1,024 B
    const s = result(await runBench("writer", [...base, "--body-max", "1024"], 1800, true));
    row("writer", "capture writer CPU per small entry (bodies 200-1,024 B), written + indexed", "<= 66 µs (15k/s a core)", s.total_us!, (v) => `${v.toFixed(0)} µs (${(1e6 / v / 1000).toFixed(1)}k/s a core)`, (v) => v <= 66);
  } catch (e) {
    failed("writer", e);
  }
}

if (want("mock")) {
  try {
    const out = await runBench("mock", [join(DIR, "mock-bench.ts"), "--duration", QUICK ? "2" : "5", "--repeat", QUICK ? "1" : "3"], 1800);
    const m = /ratio, mock \(capture off\) \/ bare: ([\d.]+)%/.exec(out);
    row("mock", "mock listener (1,000 rules) / bare Bun.serve req/s", ">= 80%", m ? Number(m[1]) : null, (v) => `${v.toFixed(0)}%`, (v) => v >= 80);
  } catch (e) {
    failed("mock", e);
  }
}

if (want("startup")) {
  try {
    const out = await runBench("startup", [join(DIR, "startup.ts"), "--runs", QUICK ? "3" : "5"], 900);
    const m = /median ([\d.]+) ms/.exec(out);
    row("startup", "compiled binary: spawn to handshake (empty store), median", "< 150 ms", m ? Number(m[1]) : null, ms, (v) => v < 150);
  } catch (e) {
    failed("startup", e);
  }
}

if (want("engine")) {
  try {
    const out = await runBench("engine", [join(DIR, "engine-bench.ts"), "--rounds", QUICK ? "3" : "5"], 1800);
    const m = /^engine: .*?main-cpu med ([\d.,]+) ns\/req/m.exec(out);
    row("engine", "engine JS cost per request, main thread (capture on)", "-", m ? Number(m[1]!.replace(/,/g, "")) : null, (v) => `${v.toFixed(0)} ns`, null);
  } catch (e) {
    failed("engine", e);
  }
}

// ------------------------------------------------------------------------------------------------ the table
const head = ["bench", "measure", "goal", "value", "result", "cores"];
const cells = rows.map((r) => [r.bench, r.measure, r.goal, r.value, r.pass === null ? "info" : r.pass ? "PASS" : "FAIL", String(CORES)]);
const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
const line = (c: string[]) => `| ${c.map((x, i) => x.padEnd(widths[i]!)).join(" | ")} |`;
console.log(`\ntapwire benchmarks, ${started.toISOString()}, ${CORES} cores, bun ${Bun.version}${QUICK ? " (--quick: smoke test, not figures)" : ""}`);
console.log(line(head));
console.log(`|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`);
for (const c of cells) console.log(line(c));
const fails = rows.filter((r) => r.pass === false).length;
console.log(`\n${rows.filter((r) => r.pass === true).length} PASS, ${fails} FAIL, ${rows.filter((r) => r.pass === null).length} info`);
if (logPath) writeFileSync(logPath, logChunks.join("\n"));
if (opt.json) {
  writeFileSync(opt.json, `${JSON.stringify({ date: started.toISOString(), cores: CORES, bun: Bun.version, quick: QUICK, store_size: STORE_SIZE, rows }, null, 2)}\n`);
  console.log(`written: ${opt.json} (and the benches' own output: ${logPath})`);
}
