import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startTapwire, tempDir, type RunningTapwire } from "../../helpers/tapwire-process.ts";
import { curl, startUpstream, type Upstream } from "../../helpers/upstream.ts";

const MB = 1024 * 1024;
let up: Upstream;
let tw: RunningTapwire;
let proxy: string;

function kb(pid: number, field: "VmRSS" | "VmHWM"): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(m![1]);
}
/** Resets the peak-RSS counter of a process (Linux: write 5 to clear_refs). */
function resetPeak(pid: number): void {
  writeFileSync(`/proc/${pid}/clear_refs`, "5");
}

beforeAll(async () => {
  up = startUpstream();
  tw = await startTapwire({ args: ["--upstream-ca", up.caFile] });
  proxy = `http://127.0.0.1:${tw.handshake.proxy_port}`;
  // warm up: JIT, pools, store
  for (let i = 0; i < 20; i++) await curl(["-x", proxy, "-o", "/dev/null", `${up.httpUrl}/bytes?n=${MB}`]);
});
afterAll(async () => {
  await tw.stop();
  up.stop();
});

describe.skipIf(process.platform !== "linux")("streaming keeps proxy memory bounded", () => {
  test("50 MB download through a slow client: correct bytes, proxy RSS growth under 64 MB", async () => {
    const pid = tw.proc.pid;
    const base = kb(pid, "VmRSS");
    resetPeak(pid);
    const r = await curl(["-x", proxy, "--limit-rate", "20M", "-o", "/dev/null", "-w", "%{size_download}", `${up.httpUrl}/bytes?n=${50 * MB}`]);
    expect(r.out).toBe(String(50 * MB));
    const growthMb = (kb(pid, "VmHWM") - base) / 1024;
    console.log(`download: proxy RSS base ${(base / 1024).toFixed(1)} MB, peak growth ${growthMb.toFixed(1)} MB`);
    expect(growthMb).toBeLessThan(64);
    const list: any = await (await tw.api("/api/v1/traffic?limit=1")).json();
    const e: any = await (await tw.api(`/api/v1/traffic/${list.items[0].id}`)).json();
    expect(e.res_body_size).toBe(50 * MB);
    expect(e.res_body_truncated).toBe(true);
  });

  test("50 MB upload: the upstream receives every byte, proxy RSS growth under 64 MB", async () => {
    const pid = tw.proc.pid;
    const file = join(tempDir(), "upload.bin");
    writeFileSync(file, new Uint8Array(50 * MB).fill(98));
    const base = kb(pid, "VmRSS");
    resetPeak(pid);
    const r = await curl(["-x", proxy, "-H", "Content-Type: application/octet-stream", "--data-binary", `@${file}`, `${up.httpUrl}/sink`]);
    expect(JSON.parse(r.out).received).toBe(50 * MB);
    const growthMb = (kb(pid, "VmHWM") - base) / 1024;
    console.log(`upload: proxy RSS base ${(base / 1024).toFixed(1)} MB, peak growth ${growthMb.toFixed(1)} MB`);
    expect(growthMb).toBeLessThan(64);
  });
});
