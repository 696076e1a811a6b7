/**
 * The capture writer's own cost, in process, without the Worker: N entries of the store benches' mix
 * (bench/store-mix.ts) are encoded as the proxy's thread encodes them (batches of 200), then, timed:
 *   - write: decodeBatch + CaptureWriter.writeBatch for every batch (what materialising a journal record costs;
 *     with --inline, indexing each batch in its transaction included),
 *   - index: CaptureWriter.indexStep until the search index has caught up (what the writer's idle steps cost),
 * each as CPU time of this thread per entry (/proc/<pid>/task/<pid>/schedstat: what load does not distort much,
 * unlike wall time), then the database's size per entry and where it goes (SQLite's dbstat).
 *
 *   bun bench/writer-bench.ts [entries=30000] [--inline] [--rounds 1] [--step-ms 4] [--step-rows 256] [--batch 200] [--group 1] [--no-dbstat] [--body-max 5000] [--without fts,ckpt,INDEX...]
 *
 * --without fts,entries_method,...: an experiment, to know what a part costs: the search index is left out (fts),
 * the named secondary indexes of entries are dropped before the writes, or (ckpt) WAL auto-checkpoints are off.
 *
 * --body-max 1024: response bodies of 200-1,024 characters (the small entries of the proxy at its peak) instead of
 * the mix's 200-5,000.
 *
 * Ends with `RESULT {json}`. To compare two builds, run this file against each one after the other, a few times.
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CaptureWriter } from "../src/store/capture-db.ts";
import { BatchBuilder, batchBytes, decodeBatch } from "../src/store/entry-codec.ts";
import { entryMix } from "./store-mix.ts";

const args = process.argv.slice(2);
const opt = (name: string, dflt: number): number => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const N = Number(args.find((a) => /^\d+$/.test(a)) ?? 30_000);
const ROUNDS = opt("rounds", 1);
const STEP_MS = opt("step-ms", 4);
const STEP_ROWS = opt("step-rows", 256);
const BATCH = opt("batch", 200);
const INLINE = args.includes("--inline");
const GROUP = Math.max(1, opt("group", 1));
const BODY_MAX = opt("body-max", 5000);
const WITHOUT = new Set(args.includes("--without") ? (args[args.indexOf("--without") + 1] ?? "").split(",").filter(Boolean) : []);

const schedPath = `/proc/${process.pid}/task/${process.pid}/schedstat`;
/** CPU time of this thread so far (ms); process CPU time where /proc is not there. */
function cpuMs(): number {
  try {
    return Number(readFileSync(schedPath, "latin1").split(" ")[0]) / 1e6;
  } catch {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  }
}

// encode once, as the proxy's thread does (the bytes are kept: a batch is what the journal holds)
const now = Date.now();
const make = entryMix(undefined, undefined, BODY_MAX);
const batches: Uint8Array[] = [];
{
  const b = new BatchBuilder();
  for (let i = 0; i < N; i++) {
    b.add(i + 1, make(i, now, N));
    if (b.count >= BATCH || i === N - 1) {
      const built = b.take()!;
      batches.push(batchBytes(b.ring, built).slice());
      if (!built.data) b.release();
    }
  }
}

interface Round { writeUs: number; indexUs: number; writeWallMs: number; indexWallMs: number; bytesPerEntry: number; breakdown: Record<string, number> }
const rounds: Round[] = [];
for (let r = 0; r < ROUNDS; r++) {
  const dir = mkdtempSync(join(tmpdir(), "tapwire-writer-bench-"));
  try {
    const path = join(dir, "capture.db");
    const w = new CaptureWriter(path, { maxEntries: N, assigned: 0, idReserve: 1000 });
    // --inline: batches indexed as they are written (what the writer does while it keeps up); else the index is
    // filled afterwards by index steps (what it does after a pause of indexing or a backlog): both parts timed apart
    (w as unknown as { inlineIndex: boolean }).inlineIndex = INLINE;
    for (const x of WITHOUT) {
      if (x === "fts") w.hasFts = false;
      else if (x === "ckpt") w.db.run("PRAGMA wal_autocheckpoint = 0");
      else w.db.run(`DROP INDEX ${x}`);
    }
    Bun.gc(true);
    let c0 = cpuMs();
    let t0 = performance.now();
    let id = 0;
    // --group K: K batches in one transaction (each batch's own nests as a savepoint), as the writer Worker
    // materialises consecutive journal records
    const writeOne = (bytes: Uint8Array) => {
      const d = decodeBatch(bytes);
      id += d.rows.length;
      const res = w.writeBatch(d, id + 1000);
      if (res.failed) throw new Error(`write failed: ${res.error}`);
    };
    for (let i = 0; i < batches.length; i += GROUP) {
      const some = batches.slice(i, i + GROUP);
      if (GROUP === 1) writeOne(some[0]!);
      else w.inOneTransaction(() => some.forEach(writeOne));
    }
    const writeUs = ((cpuMs() - c0) * 1000) / N;
    const writeWallMs = performance.now() - t0;
    c0 = cpuMs();
    t0 = performance.now();
    while (w.indexStep(STEP_MS, STEP_ROWS) > 0);
    const indexUs = ((cpuMs() - c0) * 1000) / N;
    const indexWallMs = performance.now() - t0;
    if (w.backlog) throw new Error("index did not catch up");
    w.db.run("PRAGMA wal_checkpoint(TRUNCATE)");
    const breakdown: Record<string, number> = {};
    if (!args.includes("--no-dbstat")) {
      try {
        const rows = w.db.query("SELECT name, SUM(pgsize) AS b FROM dbstat GROUP BY name").all() as { name: string; b: number }[];
        for (const { name, b } of rows) {
          const k = /fts/.test(name) ? "search index" : name;
          breakdown[k] = (breakdown[k] ?? 0) + b / N;
        }
      } catch (e) {
        breakdown.unavailable = 0;
        console.log(`dbstat: ${(e as Error).message}`);
      }
    }
    w.close(id + 1000);
    const bytesPerEntry = statSync(path).size / N;
    rounds.push({ writeUs, indexUs, writeWallMs, indexWallMs, bytesPerEntry, breakdown });
    const top = Object.entries(breakdown).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${v.toFixed(0)}`).join(", ");
    console.log(`round ${r + 1}: write ${writeUs.toFixed(1)} µs/entry cpu (${(N / (writeWallMs / 1000)).toFixed(0)}/s wall), index ${indexUs.toFixed(1)} µs/entry cpu (${(N / (indexWallMs / 1000)).toFixed(0)}/s wall), total ${(writeUs + indexUs).toFixed(1)} µs/entry; disk ${bytesPerEntry.toFixed(0)} B/entry${top ? ` (${top})` : ""}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
const med = (xs: number[]) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const result = {
  entries: N,
  body_max: BODY_MAX,
  write_us: med(rounds.map((r) => r.writeUs)),
  index_us: med(rounds.map((r) => r.indexUs)),
  total_us: med(rounds.map((r) => r.writeUs + r.indexUs)),
  bytes_per_entry: med(rounds.map((r) => r.bytesPerEntry)),
};
console.log(`RESULT ${JSON.stringify(result)}`);
