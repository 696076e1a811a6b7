/**
 * Web UI benchmark: the traffic list with 100,000 entries in the store, in the system Chromium (headless), side by
 * side with the same page over 1,000 entries (the reference: what "small" costs on this machine in the same run).
 *
 * - first paint: from navigation start to the first traffic row on screen (the page opens at the end of the list),
 *   and the browser's first-contentful-paint;
 * - scrolling: 3 s of scrolling the list by 10 rows per animation frame, then 3 s of jumps to random places (each
 *   needs a page of 500 rows from the API); frame intervals from requestAnimationFrame, a frame counted dropped
 *   when its interval exceeds 1.5x the display's frame time, and the browser's long-animation-frame entries (> 50 ms).
 *
 *   node_modules/.bin/bun bench/ui-bench.ts [entries]
 */
import { chromium } from "playwright-core";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULTS } from "../src/service/config.ts";
import { TapwireService } from "../src/service/service.ts";
import type { NewEntry } from "../src/store/types.ts";

// Page-side globals: the callbacks given to page.evaluate run in the browser (this tsconfig has no DOM library).
// biome-ignore lint: browser objects are untyped here
declare const document: any, window: any, requestAnimationFrame: any, MutationObserver: any, PerformanceObserver: any;
type HTMLDivElement = any;
type HTMLImageElement = any;

const N = Number(process.argv[2] ?? 100_000);
const REF = 1_000;
const enc = new TextEncoder();
const HOSTS = ["api.github.com", "www.google.com", "fonts.googleapis.com", "registry.npmjs.org", "api.example.com", "cdn.jsdelivr.net"];
const METHODS = ["GET", "GET", "GET", "POST", "PUT", "DELETE"];

function entry(i: number, now: number): NewEntry {
  const host = HOSTS[i % HOSTS.length]!;
  const body = enc.encode(JSON.stringify({ i, items: [1, 2, 3], name: `entry ${i}` }));
  return {
    method: METHODS[i % METHODS.length]!,
    url: `https://${host}/v1/items/${i}?page=${i % 20}`,
    host,
    status_code: i % 17 === 0 ? 404 : 200,
    content_type: "application/json",
    duration_ms: 5 + (i % 300),
    timestamp: now - (N - i) * 10,
    client_addr: i % 3 ? "curl" : "Google Chrome",
    has_response: true,
    req_headers: [["Host", host], ["Accept", "*/*"]],
    res_headers: [["Content-Type", "application/json"], ["Content-Length", String(body.length)]],
    req_body: null,
    req_body_size: 0,
    res_body: body,
    res_body_size: body.length,
  } as NewEntry;
}

async function service(n: number): Promise<{ svc: TapwireService; dir: string; fillMs: number }> {
  const dir = mkdtempSync(join(tmpdir(), "tapwire-ui-bench-"));
  const svc = new TapwireService({ ...DEFAULTS, dataDir: dir, proxyPort: 0, upstreamInsecure: false, upstreamCa: [], mockPort: null, maxEntries: Math.max(n, DEFAULTS.maxEntries) }, () => {});
  await svc.start();
  const t0 = performance.now();
  const now = Date.now();
  // in batches, letting the writer keep up (a store far behind drops new entries rather than grow without bound)
  for (let i = 0; i < n; i++) {
    svc.store.add(entry(i, now));
    if (i % 5_000 === 4_999) await svc.store.flush();
  }
  await svc.store.flush();
  if (svc.store.count() < n) throw new Error(`store holds ${svc.store.count()} entries, wanted ${n}`);
  // the first list after a burst pays the catch-up: pay it here, not in the page's first paint
  await svc.store.list({ limit: 0 });
  return { svc, dir, fillMs: performance.now() - t0 };
}

interface Figures {
  rowMs: number;
  fcpMs: number;
  frameMs: number;
  scroll: { frames: number; dropped: number; p50: number; p95: number; max: number; loaf: number };
  jump: { frames: number; dropped: number; p50: number; p95: number; max: number; loaf: number; blankFrames: number };
  domRows: number;
}

async function measure(port: number, token: string): Promise<Figures> {
  const browser = await chromium.launch({
    executablePath: process.env.TAPWIRE_CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
  });
  try {
    const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
    await page.addInitScript(() => {
      const w = window as unknown as { __firstRow: number | null; __loaf: number[] };
      w.__firstRow = null;
      w.__loaf = [];
      new MutationObserver((_m: unknown, obs: { disconnect(): void }) => {
        if (document.querySelector(".list .row[data-id]")) {
          w.__firstRow = performance.now();
          obs.disconnect();
        }
      }).observe(document, { childList: true, subtree: true });
      try {
        new PerformanceObserver((l: { getEntries(): { duration: number }[] }) => l.getEntries().forEach((e) => w.__loaf.push(e.duration))).observe({ type: "long-animation-frame", buffered: true });
      } catch {}
    });
    await page.goto(`http://127.0.0.1:${port}/ui/#token=${token}`);
    await page.waitForFunction(() => (window as unknown as { __firstRow: number | null }).__firstRow !== null, null, { timeout: 30_000 });
    const { rowMs, fcpMs } = await page.evaluate(() => ({
      rowMs: (window as unknown as { __firstRow: number }).__firstRow,
      fcpMs: performance.getEntriesByName("first-contentful-paint")[0]?.startTime ?? NaN,
    }));
    const run = (mode: "scroll" | "jump") =>
      page.evaluate(async (mode) => {
        const w = window as unknown as { __loaf: number[] };
        const list = document.querySelector(".list") as HTMLDivElement;
        // the display's frame time, from 30 idle frames
        const idle: number[] = [];
        await new Promise<void>((done) => {
          let last = performance.now();
          const f = (t: number) => {
            idle.push(t - last);
            last = t;
            if (idle.length < 31) requestAnimationFrame(f);
            else done();
          };
          requestAnimationFrame(f);
        });
        const frame = idle.slice(1).sort((a, b) => a - b)[15]!;
        w.__loaf.length = 0;
        const gaps: number[] = [];
        let blank = 0;
        let seed = 12345;
        const rnd = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
        await new Promise<void>((done) => {
          const start = performance.now();
          let last = start;
          let down = mode === "scroll" ? -1 : 0;
          list.scrollTop = mode === "scroll" ? list.scrollHeight : 0;
          const f = (t: number) => {
            gaps.push(t - last);
            last = t;
            if (mode === "jump" && document.querySelector(".list .row.placeholder")) blank++;
            if (t - start > 3000) return done();
            if (mode === "scroll") {
              if (list.scrollTop <= 0) down = 1;
              else if (list.scrollTop + list.clientHeight >= list.scrollHeight) down = -1;
              list.scrollTop += down * 240;
            } else if (gaps.length % 6 === 0) list.scrollTop = Math.floor(rnd() * (list.scrollHeight - list.clientHeight));
            requestAnimationFrame(f);
          };
          requestAnimationFrame(f);
        });
        gaps.shift();
        const s = [...gaps].sort((a, b) => a - b);
        const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
        return { frame, frames: gaps.length, dropped: gaps.filter((g) => g > frame * 1.5).length, p50: q(0.5), p95: q(0.95), max: s[s.length - 1]!, loaf: w.__loaf.filter((d) => d > 50).length, blankFrames: blank, domRows: document.querySelectorAll(".list .row").length };
      }, mode);
    await run("scroll"); // warm-up (JIT, first pages), not counted
    const scroll = await run("scroll");
    const jump = await run("jump");
    return { rowMs, fcpMs, frameMs: scroll.frame, scroll, jump, domRows: scroll.domRows };
  } finally {
    await browser.close();
  }
}

const rows: [string, Figures, number][] = [];
for (const n of [REF, N]) {
  const { svc, dir, fillMs } = await service(n);
  try {
    rows.push([n.toLocaleString(), await measure(svc.apiPort, svc.token), fillMs]);
  } finally {
    await svc.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const f1 = (x: number) => x.toFixed(1);
console.log(`\nweb UI traffic list, headless Chromium ${"(system)"}, ${new Date().toISOString()}`);
console.log("entries   | first row  FCP      | scroll 3 s: frames dropped p50/p95/max ms  LoAF>50ms | random jumps 3 s: frames dropped p50/p95/max ms  LoAF>50ms  frames with unloaded rows | DOM rows");
for (const [n, f] of rows) {
  console.log(
    `${n.padEnd(9)} | ${f1(f.rowMs).padStart(7)} ms ${f1(f.fcpMs).padStart(6)} ms | ${String(f.scroll.frames).padStart(6)} ${String(f.scroll.dropped).padStart(7)}   ${f1(f.scroll.p50)}/${f1(f.scroll.p95)}/${f1(f.scroll.max)}  ${String(f.scroll.loaf).padStart(9)} | ${String(f.jump.frames).padStart(6)} ${String(f.jump.dropped).padStart(7)}   ${f1(f.jump.p50)}/${f1(f.jump.p95)}/${f1(f.jump.max)}  ${String(f.jump.loaf).padStart(9)}  ${String(f.jump.blankFrames).padStart(9)} | ${f.domRows}`,
  );
}
console.log(`display frame time ${f1(rows[0]![1].frameMs)} ms; a frame is dropped when its interval exceeds 1.5x that. Goal: first row < 1000 ms, no dropped frames while scrolling.`);
