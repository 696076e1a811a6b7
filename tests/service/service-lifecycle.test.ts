import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, renameSync, rmdirSync, statSync, writeFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { BUN, ROOT, startTapwire, tempDir, waitForLine, type RunningTapwire } from "../helpers/tapwire-process.ts";
import { curl, startUpstream } from "../helpers/upstream.ts";

/** A pid that is certainly dead: a child that already exited. */
async function deadPid(): Promise<number> {
  const p = Bun.spawn(["true"]);
  await p.exited;
  return p.pid;
}

describe("tapwire start: handshake file and lifecycle", () => {
  test("handshake has mode 0600, the five spec fields with the right types, and the data dir is 0700", async () => {
    const t = await startTapwire();
    try {
      const path = join(t.dataDir, "api-handshake.json");
      expect(statSync(path).mode & 0o777).toBe(0o600);
      expect(statSync(t.dataDir).mode & 0o777).toBe(0o700);
      const h = t.handshake;
      expect(Number.isInteger(h.port) && h.port > 0).toBe(true);
      expect(h.token).toMatch(/^[0-9a-f]{64}$/); // 256 bits
      expect(h.pid).toBe(t.proc.pid);
      expect(typeof h.version).toBe("string");
      expect(h.version.length).toBeGreaterThan(0);
      expect(Number.isInteger(h.started_at)).toBe(true);
      expect(Math.abs(Date.now() - h.started_at)).toBeLessThan(60_000);
      expect("proxy_port" in h).toBe(true);
      const health: any = await (await fetch(`http://127.0.0.1:${h.port}/api/v1/health`)).json();
      expect(health.api_port).toBe(h.port);
      expect(health.version).toBe(h.version);
      // the banner names the API address, data directory and version
      const banner = t.stderr.find((l) => l.includes("API http://127.0.0.1:"))!;
      expect(banner).toContain(String(h.port));
      expect(banner).toContain(t.dataDir);
      expect(banner).toContain(h.version);
    } finally {
      await t.stop();
    }
  });

  for (const sig of ["SIGTERM", "SIGINT"] as const) {
    test(`${sig} stops cleanly and removes the handshake file`, async () => {
      const t = await startTapwire();
      const code = await t.stop(sig);
      expect(code).toBe(0);
      expect(existsSync(join(t.dataDir, "api-handshake.json"))).toBe(false);
      expect(existsSync(join(t.dataDir, "instance.lock"))).toBe(false);
    });
  }

  test("POST /api/v1/shutdown stops the service and removes the handshake", async () => {
    const t = await startTapwire();
    const res = await t.api("/api/v1/shutdown", { method: "POST" });
    expect(res.status).toBe(204);
    expect(await t.proc.exited).toBe(0);
    expect(existsSync(join(t.dataDir, "api-handshake.json"))).toBe(false);
  });

  test("the token changes at every launch", async () => {
    const dir = tempDir();
    const a = await startTapwire({ dataDir: dir });
    await a.stop();
    const b = await startTapwire({ dataDir: dir });
    await b.stop();
    expect(a.handshake.token).not.toBe(b.handshake.token);
  });

  test("the old token is refused after a restart", async () => {
    const dir = tempDir();
    const a = await startTapwire({ dataDir: dir });
    await a.stop();
    const b = await startTapwire({ dataDir: dir });
    try {
      const res = await fetch(`http://127.0.0.1:${b.handshake.port}/api/v1/capture/status`, {
        headers: { authorization: `Bearer ${a.handshake.token}` },
      });
      expect(res.status).toBe(401);
    } finally {
      await b.stop();
    }
  });

  test("a second start on the same data directory exits non-zero with a clear message", async () => {
    const t = await startTapwire();
    try {
      const p = Bun.spawn([BUN, join(ROOT, "src/cli/main.ts"), "start", "--data-dir", t.dataDir, "--port", "0"], {
        stdout: "pipe",
        stderr: "pipe",
      });
      const code = await p.exited;
      const err = await new Response(p.stderr).text();
      expect(code).not.toBe(0);
      expect(err).toContain("already running");
      expect(err).toContain(String(t.proc.pid));
      // the first instance is untouched
      const h = JSON.parse(readFileSync(join(t.dataDir, "api-handshake.json"), "utf8"));
      expect(h.pid).toBe(t.proc.pid);
      expect((await t.api("/api/v1/capture/status")).status).toBe(200);
    } finally {
      await t.stop();
    }
  });

  test("a stale handshake and lock left by a dead process (kill -9) are replaced", async () => {
    const dir = tempDir();
    const pid = await deadPid();
    writeFileSync(join(dir, "instance.lock"), String(pid));
    writeFileSync(
      join(dir, "api-handshake.json"),
      JSON.stringify({ port: 1, token: "old", pid, version: "0", started_at: 1, proxy_port: null }),
    );
    const t = await startTapwire({ dataDir: dir });
    try {
      expect(t.handshake.pid).toBe(t.proc.pid);
      expect(t.handshake.token).not.toBe("old");
    } finally {
      await t.stop();
    }
  });

  test("kill -9 leaves a stale state that the next start replaces", async () => {
    const t = await startTapwire();
    t.proc.kill("SIGKILL");
    await t.proc.exited;
    expect(existsSync(join(t.dataDir, "api-handshake.json"))).toBe(true);
    const u = await startTapwire({ dataDir: t.dataDir });
    try {
      expect(u.handshake.pid).toBe(u.proc.pid);
    } finally {
      await u.stop();
    }
  });

  test("TAPWIRE_DATA_DIR is honoured and the folder is created with mode 0700", async () => {
    const parent = tempDir();
    const dir = join(parent, "nested", "tapwire");
    const proc = Bun.spawn([BUN, join(ROOT, "src/cli/main.ts"), "start", "--port", "0"], {
      stdout: "pipe",
      stderr: "pipe",
      env: { ...process.env, TAPWIRE_DATA_DIR: dir },
    });
    const lines: string[] = [];
    expect(await waitForLine(proc.stderr, lines, (l) => l.includes("API http://"))).not.toBeNull();
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(existsSync(join(dir, "api-handshake.json"))).toBe(true);
    proc.kill("SIGTERM");
    expect(await proc.exited).toBe(0);
  });

  test("bad flags exit 2 with the usage text", async () => {
    const p = Bun.spawn([BUN, join(ROOT, "src/cli/main.ts"), "start", "--port", "banana"], { stdout: "pipe", stderr: "pipe" });
    expect(await p.exited).toBe(2);
    expect(await new Response(p.stderr).text()).toContain("--port takes a whole number");
  });
});

describe("capture database location", () => {
  async function listed(t: RunningTapwire): Promise<{ id: number; url: string }[]> {
    const r: any = await (await t.api("/api/v1/traffic?limit=500")).json();
    return r.items.map((e: any) => ({ id: e.id, url: e.url }));
  }

  // kill -9 leaves the -wal file (with the latest commits) beside the database, so it is moved too
  for (const sig of ["SIGTERM", "SIGKILL"] as const) {
    test(`it lives in <data>/capture (0700); an old-layout capture.db is moved there with its entries (${sig})`, async () => {
      const up = startUpstream();
      const dir = tempDir();
      try {
        const a = await startTapwire({ dataDir: dir });
        const proxy = `http://127.0.0.1:${a.handshake.proxy_port}`;
        try {
          for (const name of ["one", "two", "three"]) {
            const r = await curl(["-x", proxy, "-o", "/dev/null", "-w", "%{http_code}", `${up.httpUrl}/echo/${name}`]);
            expect(r.out).toBe("200");
          }
        } catch (e) {
          await a.stop();
          throw e;
        }
        const before = await listed(a);
        expect(before.map((e) => e.url)).toEqual(["three", "two", "one"].map((n) => `${up.httpUrl}/echo/${n}`));
        // the new layout: nothing of the database at the top of the data directory
        expect(existsSync(join(dir, "capture", "capture.db"))).toBe(true);
        expect(statSync(join(dir, "capture")).mode & 0o777).toBe(0o700);
        expect(readdirSync(dir).filter((f) => f.startsWith("capture.db"))).toEqual([]);
        await a.stop(sig);

        // what an older tapwire left: the database and its companion files (-wal, -shm, ...) at the top of the data
        // directory, no capture folder
        const present = readdirSync(join(dir, "capture")).filter((f) => f.startsWith("capture.db"));
        expect(present).toContain("capture.db");
        if (sig === "SIGKILL") expect(present).toContain("capture.db-wal");
        for (const f of present) renameSync(join(dir, "capture", f), join(dir, f));
        rmdirSync(join(dir, "capture"));

        const b = await startTapwire({ dataDir: dir });
        try {
          expect(await listed(b)).toEqual(before);
          expect(b.stderr.some((l) => l.includes("moved capture.db") && l.includes(join(dir, "capture")))).toBe(true);
          expect(readdirSync(dir).filter((f) => f.startsWith("capture.db"))).toEqual([]);
          expect(existsSync(join(dir, "capture", "capture.db"))).toBe(true);
          expect(statSync(join(dir, "capture")).mode & 0o777).toBe(0o700);
          // new entries go on after the old ids
          await curl(["-x", `http://127.0.0.1:${b.handshake.proxy_port}`, "-o", "/dev/null", `${up.httpUrl}/echo/four`]);
          const after = await listed(b);
          expect(after.length).toBe(4);
          expect(after[0].url).toBe(`${up.httpUrl}/echo/four`);
          expect(after[0].id).toBeGreaterThan(before[0].id);
        } finally {
          await b.stop();
        }

        // a later start finds the new layout and moves nothing
        const c = await startTapwire({ dataDir: dir });
        try {
          expect((await listed(c)).length).toBe(4);
          expect(c.stderr.some((l) => l.includes("moved capture.db"))).toBe(false);
        } finally {
          await c.stop();
        }
      } finally {
        up.stop();
      }
    });
  }
});

describe("data directory default", () => {
  test("follows XDG on Linux, Application Support on macOS, APPDATA on Windows", async () => {
    const { defaultDataDir } = await import("../../src/service/datadir.ts");
    expect(defaultDataDir("linux", { HOME: "/home/u" })).toBe("/home/u/.local/share/tapwire");
    expect(defaultDataDir("linux", { HOME: "/home/u", XDG_DATA_HOME: "/x" })).toBe("/x/tapwire");
    expect(defaultDataDir("darwin", { HOME: "/Users/u" })).toBe("/Users/u/Library/Application Support/tapwire");
    expect(defaultDataDir("win32", { HOME: "C:\\Users\\u", APPDATA: "C:\\Users\\u\\AppData\\Roaming" })).toContain("tapwire");
  });
});
