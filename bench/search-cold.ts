/**
 * First-time body searches on a kept store (`bench/store-bench.ts N DIR` keeps one in DIR), through the reader
 * Worker the API uses (src/store/capture-reader.ts: its own connections, and the helper it starts for searches
 * with many candidates), with nothing else open on the store. Each search string is new to the reader that runs
 * it (substrings of the rare word: ~1% of the entries).
 *
 * `--ref ROOT`: another checkout (e.g. a worktree of main) whose reader Worker runs the same strings, interleaved
 * string by string with this one's (the order alternating), so that a pair shares the machine's state. Both must
 * give the same totals (a difference is printed). Each generation starts fresh readers (every string new again).
 *
 * Printed per build: wall time, the process's CPU time (every thread: the reader, its helper) and the busiest
 * thread's (/proc/self/task/TID/schedstat: time on a core), p50 over all searches; with --ref, in how many pairs
 * this build was lower.
 *
 *   node_modules/.bin/bun bench/search-cold.ts DIR [--ref ROOT] [--gens 3] [--lens 9,10,11]
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { RARE_WORD } from "./store-mix.ts";

const args = process.argv.slice(2);
const dir = args[0];
if (!dir || dir.startsWith("--")) {
  console.error("usage: bench/search-cold.ts DIR [--ref ROOT] [--gens N] [--lens 9,10,11]");
  process.exit(2);
}
const opt = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i > 0 ? args[i + 1] : undefined;
};
const GENS = Number(opt("--gens") ?? 3);
const LENS = (opt("--lens") ?? "9,10,11").split(",").map(Number);
const REF = opt("--ref");
const dbPath = join(resolve(dir), "capture.db");
const strings = LENS.flatMap((n) => Array.from({ length: RARE_WORD.length - n + 1 }, (_, i) => RARE_WORD.slice(i, i + n)));

interface Build {
  name: string;
  root: string;
  wall: number[];
  cpu: number[];
  busiest: number[];
}
const builds: Build[] = [{ name: "this", root: resolve(import.meta.dir, ".."), wall: [], cpu: [], busiest: [] }];
if (REF) builds.unshift({ name: "ref", root: resolve(REF), wall: [], cpu: [], busiest: [] });

/** Time on a core (ns) of each thread of this process. */
function threadTimes(): Map<string, number> {
  const m = new Map<string, number>();
  for (const tid of readdirSync("/proc/self/task")) {
    try {
      m.set(tid, Number(readFileSync(`/proc/self/task/${tid}/schedstat`, "utf8").split(" ")[0]));
    } catch {
      // ended meanwhile
    }
  }
  return m;
}

class Reader {
  private seq = 0;
  private waiting = new Map<number, (v: { value?: unknown; error?: string }) => void>();
  private constructor(readonly w: Worker) {}

  static async open(root: string): Promise<Reader> {
    const w = new Worker(join(root, "src/store/capture-reader.ts"));
    const r = new Reader(w);
    await new Promise<void>((res, rej) => {
      w.onmessage = (ev) => {
        const m = ev.data;
        if (m.t === "opened") {
          if (m.ok) res();
          else rej(new Error(m.error));
        } else if (m.t === "reply") {
          r.waiting.get(m.seq)?.(m);
          r.waiting.delete(m.seq);
        }
      };
      w.postMessage({ t: "open", path: dbPath, hasFts: true });
    });
    return r;
  }

  ask(m: Record<string, unknown>): Promise<unknown> {
    const seq = ++this.seq;
    return new Promise((res, rej) => {
      this.waiting.set(seq, (v) => (v.error ? rej(new Error(v.error)) : res(v.value)));
      this.w.postMessage({ ...m, seq });
    });
  }

  async close(): Promise<void> {
    await this.ask({ t: "close" });
    this.w.terminate();
  }
}

const pct = (a: number[], p: number) => {
  const s = a.slice().sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
};

console.log(`store ${dbPath}; ${strings.length} strings (${LENS.join(",")} characters of ${RARE_WORD}) x ${GENS} generations; builds: ${builds.map((b) => `${b.name}=${b.root}`).join(", ")}`);
const pairsLower = { wall: 0, cpu: 0, n: 0 };
for (let g = 0; g < GENS; g++) {
  const readers = await Promise.all(builds.map((b) => Reader.open(b.root)));
  // each reader's first search (starts its helper, reads the index's first pages): not counted
  for (const r of readers) await r.ask({ t: "list", q: { search: RARE_WORD, limit: 50 } });
  for (let i = 0; i < strings.length; i++) {
    const order = (i + g) % 2 === 0 ? builds.map((_, k) => k) : builds.map((_, k) => builds.length - 1 - k);
    const totals: number[] = [];
    const got: { wall: number; cpu: number }[] = [];
    for (const k of order) {
      const t0 = threadTimes();
      const c0 = process.cpuUsage();
      const w0 = performance.now();
      const res = (await readers[k]!.ask({ t: "list", q: { search: strings[i], limit: 50 } })) as { total: number };
      const wall = performance.now() - w0;
      const c = process.cpuUsage(c0);
      const t1 = threadTimes();
      let busiest = 0;
      for (const [tid, v] of t1) busiest = Math.max(busiest, (v - (t0.get(tid) ?? 0)) / 1e6);
      const b = builds[k]!;
      b.wall.push(wall);
      b.cpu.push((c.user + c.system) / 1000);
      b.busiest.push(busiest);
      totals[k] = res.total;
      got[k] = { wall, cpu: (c.user + c.system) / 1000 };
    }
    if (builds.length === 2) {
      if (totals[0] !== totals[1]) console.log(`TOTALS DIFFER for ${strings[i]}: ${totals.join(" vs ")}`);
      pairsLower.n++;
      if (got[1]!.wall < got[0]!.wall) pairsLower.wall++;
      if (got[1]!.cpu < got[0]!.cpu) pairsLower.cpu++;
    }
    if (g === 0 && i === 0) console.log(`"${strings[i]}": ${totals[0]} matches`);
  }
  for (const r of readers) await r.close();
}
const load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
console.log(`build | searches | wall p50 ms | process CPU p50 ms | busiest thread p50 ms | wall min`);
for (const b of builds) {
  console.log(`${b.name.padEnd(5)} | ${String(b.wall.length).padStart(8)} | ${pct(b.wall, 0.5).toFixed(1).padStart(11)} | ${pct(b.cpu, 0.5).toFixed(1).padStart(18)} | ${pct(b.busiest, 0.5).toFixed(1).padStart(21)} | ${Math.min(...b.wall).toFixed(1)}`);
}
if (builds.length === 2) console.log(`this build lower in ${pairsLower.wall}/${pairsLower.n} pairs (wall), ${pairsLower.cpu}/${pairsLower.n} (CPU); load average at the end ${load}`);
process.exit(0);
