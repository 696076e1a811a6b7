/**
 * Capture store benchmark: fills a file-backed store with 100,000 realistic entries, then measures
 * list() latency (p50/p95 over 200 runs) for the queries the UI and pollers make, and add() throughput.
 *
 *   node_modules/.bin/bun bench/store-bench.ts [entries]
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { decodeBodyBytes } from "../src/store/body-decode.ts";
import { CaptureStore } from "../src/store/capture-store.ts";
import type { ListQuery, NewEntry } from "../src/store/types.ts";

const N = Number(process.argv[2] ?? 100_000);
const RUNS = 200;
const RARE_WORD = "zanzibarquux"; // put into ~1% of response bodies

// deterministic PRNG so runs are comparable
let seed = 0x2545f491;
function rnd(): number {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) / 0x100000000;
}
const pick = <T>(a: readonly T[]): T => a[Math.floor(rnd() * a.length)]!;
function weighted<T>(pairs: readonly [T, number][]): T {
  const sum = pairs.reduce((s, [, w]) => s + w, 0);
  let r = rnd() * sum;
  for (const [v, w] of pairs) if ((r -= w) < 0) return v;
  return pairs[pairs.length - 1]![0];
}

const HOSTS = [
  "api.github.com", "github.com", "avatars.githubusercontent.com", "www.google.com", "fonts.googleapis.com",
  "api.stripe.com", "js.stripe.com", "cdn.jsdelivr.net", "registry.npmjs.org", "api.openai.com",
  "login.microsoftonline.com", "graph.microsoft.com", "s3.amazonaws.com", "sqs.eu-west-1.amazonaws.com",
  "api.twitter.com", "pbs.twimg.com", "www.youtube.com", "i.ytimg.com", "api.segment.io", "sentry.io",
  "localhost", "127.0.0.1", "api.internal.example.com", "auth.example.com", "static.example.com",
  "hooks.slack.com", "api.slack.com", "telemetry.example.org", "update.example.net", "pypi.org",
];
const METHODS: [string, number][] = [["GET", 70], ["POST", 18], ["PUT", 5], ["DELETE", 3], ["PATCH", 3], ["OPTIONS", 1]];
const STATUSES: [number, number][] = [
  [200, 60], [201, 6], [204, 6], [301, 2], [302, 3], [304, 8], [400, 3], [401, 2], [403, 1], [404, 5],
  [429, 1], [500, 1.5], [502, 1], [503, 0.5], [0, 1],
];
const SEGMENTS = ["api", "v1", "v2", "users", "repos", "orders", "items", "search", "auth", "token", "events",
  "assets", "static", "js", "css", "img", "graphql", "health", "metrics", "settings", "projects", "files"];
const WORDS = ("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore " +
  "et dolore magna aliqua enim minim veniam quis nostrud exercitation ullamco laboris nisi aliquip commodo " +
  "consequat duis aute irure reprehenderit voluptate velit esse cillum fugiat nulla pariatur excepteur sint " +
  "occaecat cupidatat non proident sunt culpa officia deserunt mollit anim est laborum alpha beta gamma delta " +
  "user account order invoice payment status pending active disabled created updated token session").split(" ");

function words(n: number): string {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(pick(WORDS));
  return out.join(" ");
}

function jsonBody(size: number, rare: boolean): string {
  const items: object[] = [];
  let len = 2;
  while (len < size) {
    const it = { id: Math.floor(rnd() * 1e6), name: words(2), description: words(6), state: pick(["active", "pending", "closed"]), score: Math.round(rnd() * 1000) / 10 };
    items.push(it);
    len += JSON.stringify(it).length + 1;
  }
  if (rare) items.splice(Math.floor(rnd() * items.length), 0, { note: `see ${RARE_WORD} for details` });
  return JSON.stringify({ items, count: items.length });
}

function htmlBody(size: number, rare: boolean): string {
  let s = "<!doctype html><html><head><title>" + words(3) + "</title></head><body>";
  while (s.length < size) s += `<p class="c${Math.floor(rnd() * 9)}">${words(12)}</p>\n`;
  if (rare) s += `<p>${RARE_WORD}</p>`;
  return s + "</body></html>";
}

const enc = new TextEncoder();
let rareCount = 0;

function makeEntry(i: number, now: number): NewEntry {
  const host = pick(HOSTS);
  const method = weighted(METHODS);
  const status = weighted(STATUSES);
  const depth = 1 + Math.floor(rnd() * 4);
  const segs: string[] = [];
  for (let d = 0; d < depth; d++) segs.push(rnd() < 0.25 ? String(Math.floor(rnd() * 100000)) : pick(SEGMENTS));
  const path = "/" + segs.join("/");
  const query = rnd() < 0.4 ? `?page=${Math.floor(rnd() * 20)}&q=${pick(WORDS)}` : "";
  const url = `https://${host}${path}${query}`;
  const isHtml = rnd() < 0.25;
  const hasBody = !(status === 0 || status === 204 || status === 304);
  const rare = hasBody && rnd() < 0.01;
  if (rare) rareCount++;
  const size = 200 + Math.floor(rnd() * 4800);
  const resText = !hasBody ? "" : isHtml ? htmlBody(size, rare) : jsonBody(size, rare);
  const ct = resText === "" ? "" : isHtml ? "text/html; charset=utf-8" : "application/json";
  const gzip = resText !== "" && rnd() < 0.3;
  const resBytes = resText === "" ? null : gzip ? new Uint8Array(gzipSync(resText)) : enc.encode(resText);
  const reqText = method === "POST" || method === "PUT" || method === "PATCH" ? jsonBody(100 + Math.floor(rnd() * 800), false) : "";
  const reqBytes = reqText === "" ? null : enc.encode(reqText);
  const resHeaders: [string, string][] = [["Date", new Date(now).toUTCString()], ["Server", pick(["nginx", "cloudflare", "envoy", "gws"])]];
  if (ct) resHeaders.push(["Content-Type", ct]);
  if (gzip) resHeaders.push(["Content-Encoding", "gzip"]);
  resHeaders.push(["Content-Length", String(resBytes?.length ?? 0)], ["Cache-Control", "no-cache"]);
  return {
    method,
    url,
    host,
    status_code: status,
    content_type: ct,
    duration_ms: Math.floor(rnd() * 800),
    timestamp: now - (N - i) * 100,
    client_addr: pick(["curl", "node", "Google Chrome", "Slack", "192.168.1.23", "10.0.0.7"]),
    has_response: status !== 0,
    req_headers: [
      ["Host", host], ["User-Agent", "Mozilla/5.0 (X11; Linux x86_64)"], ["Accept", "*/*"],
      ["Accept-Encoding", "gzip, br"], ...(reqBytes ? [["Content-Type", "application/json"] as [string, string]] : []),
    ],
    res_headers: resHeaders,
    req_body: reqBytes,
    req_body_size: reqBytes?.length ?? 0,
    res_body: resBytes,
    res_body_size: resBytes?.length ?? 0,
    error: status === 0 ? pick(["upstream refused", "TLS verification failed", "timeout"]) : undefined,
  };
}

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

interface Row { name: string; p50: number; p95: number; max: number; items: string; total: string; runs: number }
const rows: Row[] = [];

function measure(name: string, store: CaptureStore, makeQuery: (run: number) => ListQuery, runs = RUNS): void {
  const times: number[] = [];
  let items = 0, total = 0;
  store.list(makeQuery(0)); // warm the statement cache
  for (let r = 0; r < runs; r++) {
    const q = makeQuery(r);
    const t0 = Bun.nanoseconds();
    const res = store.list(q);
    times.push((Bun.nanoseconds() - t0) / 1e6);
    items += res.items.length;
    total += res.total;
  }
  times.sort((a, b) => a - b);
  rows.push({ name, p50: pct(times, 50), p95: pct(times, 95), max: times[times.length - 1]!, items: (items / runs).toFixed(0), total: (total / runs).toFixed(0), runs });
}

const dir = mkdtempSync(join(tmpdir(), "tapwire-store-bench-"));
try {
  const dbPath = join(dir, "capture.db");
  const now = Date.now();
  const tg = Bun.nanoseconds();
  const entries: NewEntry[] = [];
  for (let i = 0; i < N; i++) entries.push(makeEntry(i, now));
  console.log(`generated ${N} entries in ${((Bun.nanoseconds() - tg) / 1e9).toFixed(1)} s`);

  const store = new CaptureStore(dbPath, { maxEntries: N });
  const t0 = Bun.nanoseconds();
  for (const e of entries) store.add(e);
  store.flush();
  const fillMs = (Bun.nanoseconds() - t0) / 1e6;

  // add() alone (the hot path, no flush): time a burst smaller than maxPending
  const burst = entries.slice(0, 400);
  const t1 = Bun.nanoseconds();
  for (const e of burst) store.add(e);
  const addOnlyUs = (Bun.nanoseconds() - t1) / 1e3 / burst.length;
  store.flush();

  const lastId = store.list({ limit: 1 }).items[0]!.id;
  const hostFragments = ["api", "github", "example", "amazonaws", "stripe", "google", "slack", "localhost"];
  const statusRanges: [number, number][] = [[200, 299], [400, 499], [300, 399], [500, 599]];

  measure("first page, no filter", store, () => ({}));
  measure("filtered: host+method+status range", store, (r) => ({
    host: hostFragments[r % hostFragments.length],
    method: r % 3 === 0 ? "post" : "GET",
    status_min: statusRanges[r % statusRanges.length]![0],
    status_max: statusRanges[r % statusRanges.length]![1],
  }));
  measure("path filter (/users)", store, (r) => ({ path: r % 2 ? "/users" : "/orders/" }));
  measure("since_id poll (20 new)", store, (r) => ({ since_id: lastId - 20 - (r % 5) }));
  measure("since_id poll (2,000 behind)", store, () => ({ since_id: lastId - 2000 }));
  measure(`body search (${RARE_WORD}, ~1%)`, store, () => ({ search: RARE_WORD }));
  measure("body search + host filter", store, (r) => ({ search: RARE_WORD, host: hostFragments[r % hostFragments.length] }));
  measure("search, common word (invoice, ~75%)", store, () => ({ search: "invoice" }), 20);
  measure("search, 2 chars (full scan)", store, (r) => ({ search: r % 2 ? "zq" : "qx" }), 20);
  measure("has_error=true, page 3", store, () => ({ has_error: true, offset: 100 }));
  measure("since (last 10% of time range)", store, () => ({ since: now - N * 10 }));

  const getTimes: number[] = [];
  for (let r = 0; r < RUNS; r++) {
    const id = lastId - Math.floor((r * 7919) % N);
    const t = Bun.nanoseconds();
    store.get(id);
    getTimes.push((Bun.nanoseconds() - t) / 1e6);
  }
  getTimes.sort((a, b) => a - b);
  rows.push({ name: "get(id) detail", p50: pct(getTimes, 50), p95: pct(getTimes, 95), max: getTimes[getTimes.length - 1]!, items: "1", total: "-", runs: RUNS });

  // at capacity: every flush also evicts the oldest entries (steady state of a long-running proxy)
  const extra = entries.slice(0, 10_000);
  const t2 = Bun.nanoseconds();
  for (const e of extra) store.add(e);
  store.flush();
  const evictMs = (Bun.nanoseconds() - t2) / 1e6;

  // small batches, as the 50 ms timer sees them under moderate traffic
  const batchTimes: number[] = [];
  for (let b = 0; b < 100; b++) {
    for (const e of entries.slice(b * 20, b * 20 + 20)) store.add(e);
    const tb = Bun.nanoseconds();
    store.flush();
    batchTimes.push((Bun.nanoseconds() - tb) / 1e6);
  }
  batchTimes.sort((a, b) => a - b);

  // decoding share of the flush cost
  const t3 = Bun.nanoseconds();
  for (const e of extra) {
    decodeBodyBytes(e.req_body, e.req_headers, false);
    decodeBodyBytes(e.res_body, e.res_headers, false);
  }
  const decodeUs = (Bun.nanoseconds() - t3) / 1e3 / extra.length;

  const count = store.count();
  store.close();
  const size = statSync(dbPath).size;

  const w = Math.max(...rows.map((r) => r.name.length));
  console.log();
  console.log(`entries: ${count} (rare word in ${rareCount} entries), db file ${(size / 1048576).toFixed(0)} MB, ${RUNS} runs per query unless noted`);
  console.log(`fill: ${N} add() + flush in ${(fillMs / 1000).toFixed(2)} s = ${Math.round(N / (fillMs / 1000)).toLocaleString("en")} entries/s (decode + insert + FTS index)`);
  console.log(`at capacity (each flush evicts): ${extra.length} more in ${(evictMs / 1000).toFixed(2)} s = ${Math.round(extra.length / (evictMs / 1000)).toLocaleString("en")} entries/s`);
  console.log(`add() alone (no flush): ${addOnlyUs.toFixed(2)} µs/entry; body decoding alone: ${decodeUs.toFixed(0)} µs/entry`);
  console.log(`flush of a 20-entry batch (event loop blocked): p50 ${pct(batchTimes, 50).toFixed(1)} ms, p95 ${pct(batchTimes, 95).toFixed(1)} ms`);
  console.log();
  console.log(`${"query".padEnd(w)} | runs | p50 ms  | p95 ms  | max ms  | items | total`);
  console.log(`${"-".repeat(w)}-|------|---------|---------|---------|-------|------`);
  for (const r of rows) {
    console.log(`${r.name.padEnd(w)} | ${String(r.runs).padStart(4)} | ${r.p50.toFixed(2).padStart(7)} | ${r.p95.toFixed(2).padStart(7)} | ${r.max.toFixed(2).padStart(7)} | ${r.items.padStart(5)} | ${r.total}`);
  }
  const filtered = rows.find((r) => r.name.startsWith("filtered"))!;
  const search = rows.find((r) => r.name.startsWith("body search ("))!;
  console.log();
  console.log(`goal filtered page p50 < 10 ms: ${filtered.p50.toFixed(2)} ms ${filtered.p50 < 10 ? "OK" : "MISSED"}`);
  console.log(`goal body search p50 < 50 ms: ${search.p50.toFixed(2)} ms ${search.p50 < 50 ? "OK" : "MISSED"}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
