/**
 * The capture store's list queries on a kept store (`bench/store-bench.ts N DIR` keeps one in DIR), run the way the
 * reader Worker runs them (capture-query.ts on a read-only connection tuned like the reader's), one after the
 * other in this thread. For each query: wall time and this thread's CPU time (user + system: what the query cost,
 * whatever else the machine runs), p50 over the runs.
 *
 * - "cold": a new CaptureQuery for each run (nothing cached between runs, as for the first request of a query);
 *   the others reuse one (a UI paging, polling or repeating a query).
 * - `--base FILE`: a copy of capture-query.ts from another commit (e.g. `git show HEAD~3:src/store/capture-query.ts
 *   > src/store/capture-query-base.ts`, in src/store so that its imports resolve): the same queries on that code,
 *   interleaved with the current code's run by run (base, current, base, current...), each on its own connection,
 *   so a before/after pair shares the machine's state. Both must give the same totals: a difference is printed.
 * - `--plans`: EXPLAIN QUERY PLAN of the statements a few of the queries run (current code), then stops.
 *
 *   node_modules/.bin/bun bench/store-query-bench.ts DIR [--runs 9] [--base src/store/capture-query-base.ts] [--only NAME,...]
 */
import { Database } from "bun:sqlite";
import { join, resolve } from "node:path";
import { tuneConnection } from "../src/store/capture-db.ts";
import { CaptureQuery } from "../src/store/capture-query.ts";
import type { ListQuery, ListResult } from "../src/store/types.ts";

const args = process.argv.slice(2);
const dir = args[0];
if (!dir || dir.startsWith("--")) {
  console.error("usage: bench/store-query-bench.ts DIR [--runs N] [--base FILE] [--only a,b] [--plans]");
  process.exit(2);
}
const opt = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i > 0 ? args[i + 1] : undefined;
};
const RUNS = Number(opt("--runs") ?? 9);
const BASE = opt("--base");
const ONLY = opt("--only")?.split(",");
const RARE = "zanzibarquux"; // bench/store-bench.ts puts it into ~1% of the response bodies

interface QueryLike {
  list(db: Database, q: ListQuery): ListResult;
}
interface Impl {
  name: string;
  make: () => QueryLike;
  db: Database;
}

function connect(): Database {
  const db = new Database(join(dir, "capture.db"), { readonly: true, strict: true });
  tuneConnection(db, "reader");
  return db;
}

const impls: Impl[] = [];
if (BASE) {
  const mod = (await import(resolve(BASE))) as { CaptureQuery: new (hasFts: boolean) => QueryLike };
  impls.push({ name: "base", make: () => new mod.CaptureQuery(true), db: connect() });
}
impls.push({ name: "current", make: () => new CaptureQuery(true), db: connect() });

const top = (impls[0]!.db.query("SELECT MAX(id) AS m FROM entries").get() as { m: number }).m;
const count = (impls[0]!.db.query("SELECT value AS n FROM meta WHERE key = 'entry_count'").get() as { n: number }).n;
const hostFragments = ["api", "github", "example", "amazonaws", "stripe", "google", "slack", "localhost"];
const statusRanges: [number, number][] = [[200, 299], [400, 499], [300, 399], [500, 599]];

interface Spec {
  name: string;
  q: (r: number) => ListQuery;
  /** a new CaptureQuery per run */
  cold?: boolean;
}
const specs: Spec[] = [
  { name: "first page", q: () => ({}) },
  { name: "host only", q: (r) => ({ host: hostFragments[r % hostFragments.length] }) },
  { name: "host matching all (\"\\.\")", q: () => ({ host: "." }) },
  {
    name: "host+method+status range",
    q: (r) => ({
      host: hostFragments[r % hostFragments.length],
      method: r % 3 === 0 ? "post" : "GET",
      status_min: statusRanges[r % statusRanges.length]![0],
      status_max: statusRanges[r % statusRanges.length]![1],
    }),
  },
  { name: "method+status", q: (r) => ({ method: r % 2 ? "DELETE" : "GET", status: 200 }) },
  { name: "path", q: (r) => ({ path: r % 2 ? "/users" : "/orders/" }) },
  { name: "since_id poll (20 new)", q: (r) => ({ since_id: top - 20 - (r % 5) }) },
  { name: "search rare, cold", q: () => ({ search: RARE }), cold: true },
  { name: "search rare, repeated", q: () => ({ search: RARE }) },
  { name: "search rare, page 3", q: () => ({ search: RARE, offset: 100 }) },
  { name: "search rare + since_id poll", q: (r) => ({ search: RARE, since_id: top - 2000 + 10 * r }) },
  { name: "search rare + host, cold", q: (r) => ({ search: RARE, host: hostFragments[r % hostFragments.length] }), cold: true },
];

if (args.includes("--plans")) {
  const db = impls[impls.length - 1]!.db;
  const trace: string[] = [];
  const orig = db.query.bind(db);
  const origPrepare = db.prepare.bind(db);
  const explain = (sql: string) => {
    if (!/^\s*(WITH|SELECT)/i.test(sql) || sql.includes("EXPLAIN")) return;
    trace.push(sql.replace(/\s+/g, " "));
  };
  (db as { query: unknown }).query = (sql: string) => (explain(sql), orig(sql));
  (db as { prepare: unknown }).prepare = (sql: string) => (explain(sql), origPrepare(sql));
  for (const s of specs) {
    if (ONLY && !ONLY.some((o) => s.name.startsWith(o))) continue;
    trace.length = 0;
    const q = new CaptureQuery(true);
    const t0 = performance.now();
    const res = q.list(db, s.q(0));
    console.log(`\n## ${s.name}: total ${res.total}, ${(performance.now() - t0).toFixed(1)} ms`);
    for (const sql of trace) {
      console.log(`  ${sql.slice(0, 300)}`);
      try {
        const params = (sql.match(/\?/g) ?? []).map(() => null);
        for (const p of origPrepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as { detail: string }[]) console.log(`    - ${p.detail}`);
      } catch (e) {
        console.log(`    (no plan: ${(e as Error).message})`);
      }
    }
  }
  process.exit(0);
}

const pct = (a: number[], p: number) => [...a].sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(p * a.length))]!;
console.log(`store: ${count.toLocaleString("en")} entries (ids up to ${top}), ${RUNS} runs per query, shared machine: compare pairs`);
console.log(`query                            | impl    | wall p50 ms | cpu p50 ms | wall min | total`);
for (const s of specs) {
  if (ONLY && !ONLY.some((o) => s.name.startsWith(o))) continue;
  const perImpl = new Map<string, { wall: number[]; cpu: number[]; totals: Set<number> }>();
  const warm = new Map<string, QueryLike>();
  for (const im of impls) {
    perImpl.set(im.name, { wall: [], cpu: [], totals: new Set() });
    const w = im.make();
    w.list(im.db, s.q(0)); // statement cache, and the warm query's cache
    warm.set(im.name, w);
  }
  for (let r = 0; r < RUNS; r++) {
    for (const im of impls) {
      const q = s.cold ? im.make() : warm.get(im.name)!;
      const c0 = process.cpuUsage();
      const t0 = Bun.nanoseconds();
      const res = q.list(im.db, s.q(r));
      const wall = (Bun.nanoseconds() - t0) / 1e6;
      const c = process.cpuUsage(c0);
      const m = perImpl.get(im.name)!;
      m.wall.push(wall);
      m.cpu.push((c.user + c.system) / 1000);
      if (r < hostFragments.length) m.totals.add(res.total);
    }
  }
  const totals = [...perImpl.values()].map((m) => [...m.totals].sort((a, b) => a - b).join("/"));
  for (const [name, m] of perImpl) {
    console.log(
      `${s.name.padEnd(32)} | ${name.padEnd(7)} | ${pct(m.wall, 0.5).toFixed(2).padStart(11)} | ${pct(m.cpu, 0.5).toFixed(2).padStart(10)} | ${Math.min(...m.wall).toFixed(2).padStart(8)} | ${[...m.totals].slice(0, 4).join("/")}`,
    );
  }
  if (new Set(totals).size > 1) console.log(`!! totals differ between implementations: ${totals.join(" vs ")}`);
}
for (const im of impls) im.db.close();
