import { describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BUN, ROOT, startTapwire, tempDir } from "../helpers/tapwire-process.ts";
import { parseResponses, rawExchange } from "../helpers/raw-client.ts";

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

    // remote connections: each backend's module is loaded on first use (src/features/remote-fs/backends/index.ts),
    // which the binary must carry too. A WebDAV server on loopback answers one folder; the other protocols meet a
    // closed port (their libraries load and report the host unreachable)
    const dav = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: (req) =>
        req.method === "PROPFIND"
          ? new Response(
              `<?xml version="1.0"?><d:multistatus xmlns:d="DAV:"><d:response><d:href>/dav/</d:href><d:propstat><d:prop><d:resourcetype><d:collection/></d:resourcetype></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response><d:response><d:href>/dav/notes.txt</d:href><d:propstat><d:prop><d:resourcetype/><d:getcontentlength>5</d:getcontentlength><d:getlastmodified>Sun, 29 Nov 2026 10:00:00 GMT</d:getlastmodified></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response></d:multistatus>`,
              { status: 207, headers: { "content-type": "application/xml; charset=utf-8" } },
            )
          : new Response("no", { status: 405 }),
    });
    const closed = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    const closedPort = closed.port;
    closed.stop(true);
    mkdirSync(join(bare, "data"), { mode: 0o700 });
    const conns = [
      { id: "dav", protocol: "webdav", label: "dav", homePath: "", username: "me", auth: { password_env: "TAPWIRE_TEST_DAV" }, options: { url: `http://127.0.0.1:${dav.port}/dav/` } },
      { id: "sftp", protocol: "sftp", host: "127.0.0.1", port: closedPort, label: "sftp", homePath: "", username: "me", auth: { password_env: "TAPWIRE_TEST_DAV" }, options: { host_fingerprint: "SHA256:uN8X1yNvP6Nj3Ot0Cq0sQJ3rP0m2cMZk0T7vEJ8f1aQ" } },
      { id: "ftp", protocol: "ftp", host: "127.0.0.1", port: closedPort, label: "ftp", homePath: "", username: "me", auth: { password_env: "TAPWIRE_TEST_DAV" } },
      { id: "s3", protocol: "s3", label: "s3", homePath: "", auth: { access_key_env: "TAPWIRE_TEST_DAV", secret_key_env: "TAPWIRE_TEST_DAV" }, options: { bucket: "b", endpoint: `http://127.0.0.1:${closedPort}`, force_path_style: true } },
    ];
    writeFileSync(join(bare, "data", "remote-connections.json"), JSON.stringify({ connections: conns }));

    // protobufjs too is loaded only when a --proto folder is given (src/features/grpc/protos.ts)
    mkdirSync(join(bare, "protos"));
    writeFileSync(join(bare, "protos", "greeter.proto"), 'syntax = "proto3";\npackage demo.v1;\nmessage Req { string name = 1; }\nservice Greeter { rpc SayHello (Req) returns (Req); rpc Fail (Req) returns (Req); }\n');

    const t = await startTapwire({ cmd: [join(bare, name)], cwd: bare, dataDir: join(bare, "data"), env: { TAPWIRE_TEST_DAV: "secret" }, args: ["--proto", join(bare, "protos")] });
    try {
      expect(t.handshake.version).toBe(version);
      expect(t.stderr.some((l) => l.includes("gRPC: 2 method(s) from 1 .proto file(s)"))).toBe(true);
      if (process.platform === "linux") {
        // the binary restarts itself in place with its allocator setting (src/cli/allocator.ts), unless one is set
        expect(t.handshake.pid).toBe(t.proc.pid);
        expect(readFileSync(`/proc/${t.proc.pid}/environ`, "latin1").split("\0")).toContain(`MIMALLOC_ARENA_PURGE_MULT=${process.env.MIMALLOC_ARENA_PURGE_MULT ?? "1000"}`);
      }
      const h: any = await (await fetch(`http://127.0.0.1:${t.handshake.port}/api/v1/health`)).json();
      expect(h.status).toBe("ok");
      expect(h.version).toBe(version);
      // the binary's API front door sees the request target as sent (issue 21 finding 8): a foreign authority is 403
      const port = t.handshake.port;
      const abs = await rawExchange(port, `GET http://evil.example/api/v1/traffic HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${t.handshake.token}\r\nConnection: close\r\n\r\n`, { timeoutMs: 5000 });
      expect(parseResponses(abs.text)[0]?.status).toBe(403);
      expect(abs.text).toContain('"forbidden_host"');
      const noHost = await rawExchange(port, "GET /api/v1/health HTTP/1.0\r\n\r\n", { timeoutMs: 5000 });
      expect(parseResponses(noHost.text)[0]?.status).toBe(400);

      // scripts run in the binary as under bun test: QuickJS's wasm and the worker are embedded
      const execute = async (script: string) => {
        const r = await t.api("/api/v1/scripts/execute", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ input: { script, phase: "test", variables: { who: "binary" }, request: { method: "GET", url: "https://example.test/", headers: {}, body: "" }, response: { status: 201, headers: { "Content-Type": "application/json" }, body: '{"ok":true}' } } }),
        });
        expect(r.status).toBe(200);
        return (await r.json()) as { tests: unknown[]; errors: { message: string }[]; variables: Record<string, unknown>; console: { message: string }[] };
      };
      const ok = await execute(`pm.test("created", () => pm.response.to.have.status(201)); pm.expect(pm.response.json().ok).to.be.true; pm.variables.set("seen", pm.variables.replaceIn("{{who}}")); console.log("hi")`);
      expect(ok).toMatchObject({ tests: [{ name: "created", passed: true, error: null }], errors: [], variables: { who: "binary", seen: "binary" }, console: [{ message: "hi" }] });
      const looping = await execute("while (true) {}");
      expect(looping.errors[0]!.message).toContain("timed out");
      const failing = await execute(`pm.test("wrong", () => pm.expect(1).to.equal(2))`);
      expect(failing.tests).toEqual([{ name: "wrong", passed: false, error: "expected 1 to equal 2" }]);

      const remoteList = async (id: string) => {
        const r = await t.api(`/api/v1/remote-fs/connections/${id}/list`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ path: "/" }) });
        return { status: r.status, body: (await r.json()) as { entries?: { name: string; size: number }[]; error?: { code: string; message: string } } };
      };
      const listed = await remoteList("dav");
      expect(listed.status).toBe(200);
      expect(listed.body.entries?.map((e) => [e.name, e.size])).toEqual([["notes.txt", 5]]);
      for (const id of ["sftp", "ftp", "s3"]) {
        const r = await remoteList(id);
        expect({ id, code: r.body.error?.code }).toEqual({ id, code: "hostUnreachable" });
      }

      // the capture store's reader worker is embedded too: list and search answer, and it never fell back
      const list = await t.api("/api/v1/traffic?search=example&limit=5");
      expect(list.status).toBe(200);
      expect(((await list.json()) as { total: number }).total).toBeGreaterThanOrEqual(0);
    } finally {
      void dav.stop(true);
      expect(await t.stop("SIGTERM")).toBe(0);
    }
    expect(t.stderr.filter((l) => l.includes("reader worker"))).toEqual([]);
    expect(existsSync(join(bare, "data", "api-handshake.json"))).toBe(false);
  });
});
