import { afterEach, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { startTapwire, type RunningTapwire } from "../helpers/tapwire-process.ts";

/** The environment a running process was started with (Linux: /proc/PID/environ). */
function environOf(pid: number): Record<string, string> {
  const out: Record<string, string> = {};
  for (const kv of readFileSync(`/proc/${pid}/environ`, "latin1").split("\0")) {
    const i = kv.indexOf("=");
    if (i > 0) out[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return out;
}

const running: RunningTapwire[] = [];
afterEach(async () => {
  for (const t of running.splice(0)) await t.stop();
});

describe.if(process.platform === "linux")("tapwire start: the allocator setting (src/cli/allocator.ts)", () => {
  test("start restarts itself in place (same pid) with MIMALLOC_ARENA_PURGE_MULT=1000, and its other variables kept", async () => {
    // (not inherited from whoever runs the tests)
    const before = process.env.MIMALLOC_ARENA_PURGE_MULT;
    delete process.env.MIMALLOC_ARENA_PURGE_MULT;
    let t: RunningTapwire;
    try {
      t = await startTapwire({ env: { TAPWIRE_TEST_MARK: "kept" } });
    } finally {
      if (before !== undefined) process.env.MIMALLOC_ARENA_PURGE_MULT = before;
    }
    running.push(t);
    // execve: the pid the caller spawned is the service's (signals, `tapwire stop` and kill -9 reach it)
    expect(t.handshake.pid).toBe(t.proc.pid);
    const env = environOf(t.proc.pid);
    expect(env.MIMALLOC_ARENA_PURGE_MULT).toBe("1000");
    expect(env.TAPWIRE_TEST_MARK).toBe("kept");
    // the restarted process is the same program with the same arguments
    const cmdline = readFileSync(`/proc/${t.proc.pid}/cmdline`, "latin1").split("\0").filter(Boolean);
    expect(cmdline.slice(-5)).toEqual(["start", "--data-dir", t.dataDir, "--port", "0"]);
    // and it serves
    expect((await t.api("/api/v1/health")).status).toBe(200);
  });

  test("a value the user set is left as it is (no restart)", async () => {
    const t = await startTapwire({ env: { MIMALLOC_ARENA_PURGE_MULT: "10" } });
    running.push(t);
    expect(t.handshake.pid).toBe(t.proc.pid);
    expect(environOf(t.proc.pid).MIMALLOC_ARENA_PURGE_MULT).toBe("10");
    expect((await t.api("/api/v1/health")).status).toBe(200);
  });
});
