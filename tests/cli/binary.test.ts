import { describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { BUN, ROOT, startTapwire, tempDir } from "../helpers/tapwire-process.ts";

describe("single-binary build", () => {
  test("build.ts --target current produces a binary that runs with no node_modules beside it", async () => {
    const out = tempDir("tapwire-build-");
    const build = Bun.spawn([BUN, "run", join(ROOT, "build.ts"), "--target", "current", "--outdir", out], {
      cwd: ROOT,
      stdout: "pipe",
      stderr: "pipe",
    });
    const code = await build.exited;
    expect({ code, err: await new Response(build.stderr).text() }).toEqual({ code: 0, err: "" });
    const name = readdirSync(out).find((f) => f.startsWith("tapwire-") && !f.endsWith(".map"))!;
    expect(name).toMatch(/^tapwire-(linux|darwin|windows)-(x64|arm64)(\.exe)?$/);

    // a folder with nothing but the binary
    const bare = tempDir("tapwire-bare-");
    copyFileSync(join(out, name), join(bare, name));
    Bun.spawnSync(["chmod", "+x", join(bare, name)]);
    expect(existsSync(join(bare, "node_modules"))).toBe(false);

    const v = Bun.spawnSync([join(bare, name), "version"], { cwd: bare });
    expect(v.exitCode).toBe(0);
    const version = v.stdout.toString().trim();
    expect(version).toMatch(/^\d+\.\d+\.\d+/);

    const t = await startTapwire({ cmd: [join(bare, name)], cwd: bare, dataDir: join(bare, "data") });
    try {
      expect(t.handshake.version).toBe(version);
      const h: any = await (await fetch(`http://127.0.0.1:${t.handshake.port}/api/v1/health`)).json();
      expect(h.status).toBe("ok");
      expect(h.version).toBe(version);
    } finally {
      expect(await t.stop("SIGTERM")).toBe(0);
    }
    expect(existsSync(join(bare, "data", "api-handshake.json"))).toBe(false);
  });
});
