#!/usr/bin/env bun
/**
 * The management API's request cost: tapwire's own HTTP/1 front door (src/api/server.ts, Bun.listen + the sans-io
 * codec) against Bun.serve serving the SAME Elysia app (what the API ran on before issue 21 finding 8), in ONE run
 * and one process, with the same load tool (`hey -z Ns -c C`, Host set to the front door's port so the Host check
 * passes on both). Routes: GET /api/v1/health and GET /api/v1/traffic?limit=50 (50 captured entries, the list the
 * UI and `tapwire traffic` ask for most). Rounds alternate the two servers (paired, adjacent runs); printed per row:
 * requests/s (best and median), p50/p99 latency, and the bench process's CPU time per request (the servers run
 * here, hey runs apart), and the median over rounds of the within-round ratio front door / Bun.serve.
 *
 *   node_modules/.bin/bun bench/api-bench.ts [--duration 4] [--connections 16] [--rounds 3] [--entries 200]
 */
import { parseArgs } from "node:util";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TapwireService } from "../src/service/service.ts";
import { DEFAULTS, type ServiceConfig } from "../src/service/config.ts";

const { values: args } = parseArgs({
  options: {
    duration: { type: "string", default: "4" },
    connections: { type: "string", default: "16" },
    rounds: { type: "string", default: "3" },
    entries: { type: "string", default: "200" },
  },
});
const DURATION = Number(args.duration);
const CONNS = Number(args.connections);
const ROUNDS = Number(args.rounds);
const ENTRIES = Number(args.entries);

if (!Bun.which("hey")) throw new Error("hey is missing (apt-get install hey)");

const dataDir = mkdtempSync(join(tmpdir(), "tapwire-api-bench-"));
const config: ServiceConfig = { ...DEFAULTS, dataDir, proxyPort: 0, upstreamInsecure: false, upstreamCa: [], mockPort: null };
const svc = new TapwireService(config, () => {});
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (r) => Response.json({ path: new URL(r.url).pathname, ok: true, pad: "x".repeat(300) }) });
let reference: ReturnType<typeof Bun.serve> | null = null;

interface Run {
  rps: number;
  p50: number;
  p99: number;
  cpuUsPerReq: number;
  errors: number;
}

async function hey(port: number, path: string): Promise<Run> {
  const url = `http://127.0.0.1:${port}${path}`;
  const cpu0 = process.cpuUsage();
  const p = Bun.spawn(["hey", "-z", `${DURATION}s`, "-c", String(CONNS), "-host", `127.0.0.1:${svc.apiPort}`, "-H", `Authorization: Bearer ${svc.token}`, url], {
    stdout: "pipe",
    stderr: "pipe",
  });
  const out = await new Response(p.stdout).text();
  await p.exited;
  const cpu = process.cpuUsage(cpu0);
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? NaN);
  const p50 = Number(/50%+ in ([\d.]+) secs/.exec(out)?.[1] ?? NaN) * 1000;
  const p99 = Number(/99%+ in ([\d.]+) secs/.exec(out)?.[1] ?? NaN) * 1000;
  const codes = [...out.matchAll(/\[(\d{3})\]\s+(\d+) responses/g)].map((m) => [Number(m[1]), Number(m[2])] as const);
  const ok = codes.filter(([c]) => c === 200).reduce((a, [, n]) => a + n, 0);
  const errors = codes.filter(([c]) => c !== 200).reduce((a, [, n]) => a + n, 0) + Number(/Error distribution:[\s\S]*/.test(out) ? 1 : 0);
  if (!(rps > 0) || ok === 0) throw new Error(`hey against ${url} failed:\n${out.slice(-2000)}`);
  return { rps, p50, p99, cpuUsPerReq: (cpu.user + cpu.system) / ok, errors };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

try {
  await svc.start();
  reference = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: svc.app.fetch });
  // entries to list: plain requests through the proxy to the local upstream
  for (let i = 0; i < ENTRIES; i += 20) {
    await Promise.all(
      Array.from({ length: Math.min(20, ENTRIES - i) }, (_, k) => fetch(`http://127.0.0.1:${upstream.port}/item/${i + k}`, { proxy: `http://127.0.0.1:${svc.proxyPort}` }).then((r) => r.text())),
    );
  }
  const deadline = Date.now() + 10_000;
  for (;;) {
    const r = await fetch(`http://127.0.0.1:${svc.apiPort}/api/v1/traffic?limit=1`, { headers: { authorization: `Bearer ${svc.token}` } });
    const total = ((await r.json()) as { total: number }).total;
    if (total >= ENTRIES) break;
    if (Date.now() > deadline) throw new Error(`only ${total} of ${ENTRIES} entries were stored`);
    await Bun.sleep(50);
  }
  const routes = ["/api/v1/health", "/api/v1/traffic?limit=50"];
  const sides = [
    { name: "Bun.serve (before)", port: reference.port as number },
    { name: "front door (after)", port: svc.apiPort },
  ];
  console.log(`API request cost: hey -z ${DURATION}s -c ${CONNS}, ${ROUNDS} paired rounds, ${ENTRIES} entries stored; bun ${Bun.version}`);
  // warm-up (JIT) on both
  for (const s of sides) for (const r of routes) await hey(s.port, r).catch(() => undefined);
  const results: Record<string, Run[]> = {};
  const ratios: Record<string, number[]> = {};
  const cpuRatios: Record<string, number[]> = {};
  for (let round = 0; round < ROUNDS; round++) {
    for (const route of routes) {
      // alternate which side goes first, so neither always gets the warmer (or the quieter) slot
      const order = round % 2 ? [...sides].reverse() : sides;
      const got: Record<string, Run> = {};
      for (const s of order) {
        got[s.name] = await hey(s.port, route);
        (results[`${route} | ${s.name}`] ??= []).push(got[s.name]!);
      }
      (ratios[route] ??= []).push(got[sides[1]!.name]!.rps / got[sides[0]!.name]!.rps);
      (cpuRatios[route] ??= []).push(got[sides[1]!.name]!.cpuUsPerReq / got[sides[0]!.name]!.cpuUsPerReq);
    }
  }
  console.log("\n| route | server | req/s best | req/s median | p50 ms | p99 ms | CPU µs/req (median) | non-200 |");
  console.log("|---|---|---|---|---|---|---|---|");
  for (const route of routes) {
    for (const s of sides) {
      const rs = results[`${route} | ${s.name}`]!;
      console.log(
        `| ${route} | ${s.name} | ${Math.max(...rs.map((r) => r.rps)).toFixed(0)} | ${median(rs.map((r) => r.rps)).toFixed(0)} | ${median(rs.map((r) => r.p50)).toFixed(2)} | ${median(rs.map((r) => r.p99)).toFixed(2)} | ${median(rs.map((r) => r.cpuUsPerReq)).toFixed(0)} | ${rs.reduce((a, r) => a + r.errors, 0)} |`,
      );
    }
  }
  console.log("");
  for (const route of routes) {
    console.log(`${route}: front door / Bun.serve, median of within-round ratios: req/s ${median(ratios[route]!).toFixed(2)}, CPU per request ${median(cpuRatios[route]!).toFixed(2)} (rounds: ${ratios[route]!.map((x) => x.toFixed(2)).join(" ")})`);
  }
} finally {
  reference?.stop(true);
  upstream.stop(true);
  await svc.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
