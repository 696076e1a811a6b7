#!/usr/bin/env bun
/**
 * Streaming through the proxy: a 1 GiB download (GET, the upstream streams it) and a 1 GiB upload (PUT of a
 * sparse file, the upstream counts it), direct and through tapwire with capture on (its captured copy capped by
 * --body-limit, default 1 MiB), with curl as the client. Upstream, tapwire and curl each run in their own process.
 * Paired rounds: each round measures direct, a bare Bun TCP relay (bench/peers/bun-relay.ts: the floor any Bun
 * process pays to move bytes between two sockets) and tapwire back to back, for the download and then the upload,
 * and gives its own ratios (tapwire / direct, relay / direct, tapwire / relay); the figures are the medians over
 * rounds. tapwire's RSS is
 * sampled (/proc, every 20 ms) during its transfers: the growth over its RSS before the first transfer is reported
 * (its largest value over all rounds).
 *
 *   node_modules/.bin/bun bench/streaming-bench.ts [--size-mib 1024] [--rounds 3] [--body-limit BYTES]
 *
 * Last line: `RESULT {json}` (read by bench/all.ts). Every process started here runs in its own process group and
 * is stopped in a finally block.
 */
import { mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { type Child, startChild, stopAll, stopChild } from "./processes.ts";

if (Bun.argv.includes("--serve-upstream")) {
  const chunk = new Uint8Array(256 * 1024).fill(120);
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    reusePort: false,
    maxRequestBodySize: 8 * 1024 ** 3,
    idleTimeout: 0,
    async fetch(req) {
      const url = new URL(req.url);
      if (url.pathname === "/bytes") {
        const n = Number(url.searchParams.get("n") ?? "0");
        let sent = 0;
        return new Response(
          new ReadableStream({
            type: "direct",
            async pull(c) {
              while (sent < n) {
                const take = Math.min(chunk.length, n - sent);
                sent += take;
                await c.write(take === chunk.length ? chunk : chunk.subarray(0, take));
              }
              c.close();
            },
          }),
          { headers: { "content-type": "application/octet-stream", "content-length": String(n) } },
        );
      }
      if (url.pathname === "/sink") {
        let got = 0;
        if (req.body) for await (const c of req.body) got += c.byteLength;
        return new Response(String(got));
      }
      return new Response("not found", { status: 404 });
    },
  });
  console.log(`PORT ${server.port}`);
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) process.exit(0);
  }, 1000);
  await new Promise(() => {});
}

const { values: opt } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    "size-mib": { type: "string", default: "1024" },
    rounds: { type: "string", default: "3" },
    "body-limit": { type: "string" },
  },
});
const SIZE = Number(opt["size-mib"]) * 1024 * 1024;
const ROUNDS = Math.max(1, Number(opt.rounds));
const ROOT = join(import.meta.dir, "..");
const BUN = process.execPath;
const tmp = mkdtempSync(join(tmpdir(), "tapwire-streaming-"));

function rssKiB(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

async function curl(args: string[]): Promise<{ bytes: number; secs: number }> {
  const p = Bun.spawn(["curl", "-sS", "--fail", "-w", "\n%{size_download} %{size_upload} %{time_total}", ...args], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`curl ${args.join(" ")} failed (${code}): ${err}`);
  const last = out.trim().split("\n").pop()!.split(" ");
  return { bytes: Math.max(Number(last[0]), Number(last[1])), secs: Number(last[2]) };
}

/** `port` is where curl connects: the upstream itself, or the bare relay in front of it (both without a proxy). */
async function transfer(kind: "download" | "upload", port: number, proxy: string | null, uploadFile: string): Promise<number> {
  const via = proxy ? ["-x", proxy] : ["--noproxy", "*"];
  const r =
    kind === "download"
      ? await curl([...via, "-o", "/dev/null", `http://127.0.0.1:${port}/bytes?n=${SIZE}`])
      : await curl([...via, "-o", "/dev/null", "-H", "Expect:", "-T", uploadFile, `http://127.0.0.1:${port}/sink`]);
  if (r.bytes !== SIZE) throw new Error(`${kind}: ${r.bytes} bytes moved, expected ${SIZE}`);
  return SIZE / 1024 / 1024 / r.secs;
}

function median(xs: number[]): number {
  const v = [...xs].sort((a, b) => a - b);
  const m = v.length >> 1;
  return v.length % 2 ? v[m]! : (v[m - 1]! + v[m]!) / 2;
}

let upstream: Child | null = null;
let tapwire: Child | null = null;
let relay: Child | null = null;
try {
  const uploadFile = join(tmp, "upload.bin");
  writeFileSync(uploadFile, "");
  truncateSync(uploadFile, SIZE); // sparse: reading it costs the client almost nothing
  upstream = startChild("upstream", [BUN, import.meta.path, "--serve-upstream"]);
  const upPort = Number((await upstream.out.wait((l) => l.startsWith("PORT "))).slice(5));
  // The reference for what any Bun process can stream: a bare TCP relay in front of the upstream (bench/peers).
  relay = startChild("bun-relay", [BUN, join(ROOT, "bench/peers/bun-relay.ts"), String(upPort)]);
  const relayPort = Number((await relay.out.wait((l) => l.startsWith("PORT "))).slice(5));
  const dataDir = join(tmp, "data");
  const args = [BUN, join(ROOT, "src/cli/main.ts"), "start", "--data-dir", dataDir, "--port", "0"];
  if (opt["body-limit"]) args.push("--body-limit", opt["body-limit"]);
  tapwire = startChild("tapwire", args);
  await tapwire.err.wait((l) => l.includes("API http://"));
  const hs = JSON.parse(readFileSync(join(dataDir, "api-handshake.json"), "utf8")) as { proxy_port: number };
  const proxy = `http://127.0.0.1:${hs.proxy_port}`;
  const pid = tapwire.proc.pid;

  // warm-up: one small transfer
  await curl(["-x", proxy, "-o", "/dev/null", `http://127.0.0.1:${upPort}/bytes?n=1048576`]);
  const rss0 = rssKiB(pid);
  let rssMax = rss0;
  const sampler = setInterval(() => {
    rssMax = Math.max(rssMax, rssKiB(pid));
  }, 20);
  const rssGrowth: Record<string, number> = { download: 0, upload: 0 };
  /** The relay's RSS growth during its own transfer (its largest over rounds): what Bun's per-read buffers cost. */
  const relayRssGrowth: Record<string, number> = { download: 0, upload: 0 };
  const rounds: { kind: string; direct: number; relay: number; tapwire: number }[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    for (const kind of ["download", "upload"] as const) {
      const direct = await transfer(kind, upPort, null, uploadFile);
      const relayRss0 = rssKiB(relay.proc.pid);
      let relayRssMax = relayRss0;
      const relaySampler = setInterval(() => {
        relayRssMax = Math.max(relayRssMax, rssKiB(relay!.proc.pid));
      }, 20);
      const viaRelay = await transfer(kind, relayPort, null, uploadFile);
      clearInterval(relaySampler);
      relayRssGrowth[kind] = Math.max(relayRssGrowth[kind]!, (relayRssMax - relayRss0) / 1024);
      rssMax = rssKiB(pid);
      const tw = await transfer(kind, upPort, proxy, uploadFile);
      rssMax = Math.max(rssMax, rssKiB(pid));
      rssGrowth[kind] = Math.max(rssGrowth[kind]!, (rssMax - rss0) / 1024);
      rounds.push({ kind, direct, relay: viaRelay, tapwire: tw });
      console.log(
        `round ${r + 1} ${kind.padEnd(8)} direct ${direct.toFixed(0).padStart(6)} MiB/s   bare Bun relay ${viaRelay.toFixed(0).padStart(6)} MiB/s   tapwire ${tw.toFixed(0).padStart(6)} MiB/s   tapwire/direct ${(tw / direct).toFixed(2)}   relay/direct ${(viaRelay / direct).toFixed(2)}   tapwire/relay ${(tw / viaRelay).toFixed(2)}`,
      );
    }
  }
  clearInterval(sampler);
  const res: Record<string, number> = { size_mib: SIZE / 1024 / 1024, rounds: ROUNDS, cores: navigator.hardwareConcurrency };
  for (const kind of ["download", "upload"]) {
    const rs = rounds.filter((x) => x.kind === kind);
    res[`${kind}_ratio`] = median(rs.map((x) => x.tapwire / x.direct));
    res[`${kind}_direct_mibs`] = median(rs.map((x) => x.direct));
    res[`${kind}_tapwire_mibs`] = median(rs.map((x) => x.tapwire));
    res[`${kind}_relay_mibs`] = median(rs.map((x) => x.relay));
    res[`${kind}_relay_ratio`] = median(rs.map((x) => x.relay / x.direct));
    res[`${kind}_vs_relay`] = median(rs.map((x) => x.tapwire / x.relay));
    res[`${kind}_rss_growth_mib`] = rssGrowth[kind]!;
    res[`${kind}_relay_rss_growth_mib`] = relayRssGrowth[kind]!;
    console.log(
      `${kind}: median ratio ${res[`${kind}_ratio`]!.toFixed(2)} (goal >= 0.70; a bare Bun relay reaches ${res[`${kind}_relay_ratio`]!.toFixed(2)}, tapwire is ${res[`${kind}_vs_relay`]!.toFixed(2)} of it), tapwire RSS growth ${rssGrowth[kind]!.toFixed(1)} MiB over ${(rss0 / 1024).toFixed(0)} MiB (goal < 64 MiB; the bare relay's: ${relayRssGrowth[kind]!.toFixed(1)} MiB)`,
    );
  }
  console.log(`RESULT ${JSON.stringify(res)}`);
} finally {
  if (tapwire) await stopChild(tapwire);
  if (relay) await stopChild(relay);
  if (upstream) await stopChild(upstream);
  await stopAll();
  rmSync(tmp, { recursive: true, force: true });
}
