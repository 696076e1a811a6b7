/**
 * remote-connections.json (checks, reload on change and on request) and the `tapwire remote` commands, against
 * s3rver (the one remote server that needs no root), through a running service.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseConnectionsFile } from "../../../src/features/remote-fs/config.ts";
import { progressLine } from "../../../src/cli/commands/remote.ts";
import { startS3rver, type RemoteServer } from "../../helpers/remote-servers.ts";
import { startService } from "../../helpers/service.ts";
import { BUN, ROOT, tempDir } from "../../helpers/tapwire-process.ts";

const ok = (c: Record<string, unknown>) => JSON.stringify({ connections: [c] });
const sftp = { id: "a", protocol: "sftp", host: "h", username: "u", auth: { password_env: "P" }, options: { host_fingerprint: `SHA256:${"A".repeat(43)}` } };

describe("remote-connections.json checks", () => {
  test("a valid entry per protocol parses, with defaults", () => {
    const list = parseConnectionsFile(
      JSON.stringify({
        connections: [
          sftp,
          { id: "f", protocol: "ftps", host: "h", username: "u", auth: { password_file: "/run/secrets/ftp" }, options: { secure: "implicit", ca_file: "/etc/ca.pem" } },
          { id: "s", protocol: "s3", homePath: "backups/", auth: {}, options: { bucket: "b", region: "eu-west-1" } },
          { id: "w", protocol: "webdav", username: "u", auth: { password_env: "W" }, options: { url: "https://dav.example.com/remote.php/dav/" } },
        ],
      }),
    );
    expect(list.map((c) => [c.id, c.host, c.label])).toEqual([["a", "h", "a"], ["f", "h", "f"], ["s", "s3.eu-west-1.amazonaws.com", "s"], ["w", "dav.example.com", "w"]]);
  });

  test("secrets, unknown fields and malformed references are refused with the field named", () => {
    const bad: [Record<string, unknown>, string][] = [
      [{ ...sftp, password: "x" }, "'password' looks like a secret"],
      [{ ...sftp, auth: { password: "x" } }, "auth.password is not known"],
      [{ ...sftp, options: { host_fingerprint: "MD5:aa" } }, "host_fingerprint"],
      [{ ...sftp, auth: { key_file: "id_ed25519" } }, "auth.key_file must be an absolute path"],
      [{ ...sftp, protocol: "gopher" }, "'protocol' must be one of"],
      [{ ...sftp, options: { bucket: "b" } }, "unknown option 'bucket' for sftp"],
      [{ id: "s", protocol: "s3", auth: { access_key_env: "A" }, options: { bucket: "b" } }, "go together"],
      [{ id: "s", protocol: "s3", auth: {}, options: {} }, "options.bucket is required"],
    ];
    for (const [entry, message] of bad) expect(() => parseConnectionsFile(ok(entry))).toThrow(message);
    expect(() => parseConnectionsFile(JSON.stringify({ connections: [sftp, sftp] }))).toThrow("duplicate id 'a'");
    expect(() => parseConnectionsFile("{")).toThrow("not valid JSON");
  });

  test("the progress line shows bytes, rate and ETA", () => {
    const line = progressLine({ transferId: "t", state: "running", kind: "download", connectionId: "c", remotePath: "/x", localPath: "/y", bytesDone: 50 * 1048576, totalBytes: 100 * 1048576, error: null, startedAt: 0 }, 10 * 1048576, 100);
    expect(line).toMatch(/^\[#{10,}-{10,}\]  50% 50 MiB\/100 MiB 10 MiB\/s ETA 5s running$/);
  });
});

describe("reload and the tapwire remote commands (s3rver)", () => {
  let s3: RemoteServer;
  let svc: Awaited<ReturnType<typeof startService>>;
  let dataDir: string;
  const env = () => ({ ...process.env, TAPWIRE_DATA_DIR: dataDir, TW_CLI_S3_KEY: "S3RVER", TW_CLI_S3_SECRET: "S3RVER" });
  const tw = async (...args: string[]) => {
    const p = Bun.spawn([BUN, join(ROOT, "src/cli/main.ts"), ...args], { env: env(), stdout: "pipe", stderr: "pipe", stdin: "ignore" });
    const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
    return { out, err, code };
  };

  beforeAll(async () => {
    s3 = await startS3rver();
    dataDir = tempDir("tw-remote-cli-");
    process.env.TW_CLI_S3_KEY = "S3RVER";
    process.env.TW_CLI_S3_SECRET = "S3RVER";
    svc = await startService({ dataDir });
  }, 60_000);
  afterAll(async () => {
    await svc?.stop();
    await s3?.stop();
  });

  test("add writes a 0600 file holding only references; the service sees it; ls, put, get, mv, rm work", async () => {
    const add = await tw("remote", "add", "--id", "bucket", "--protocol", "s3", "--bucket", "test-bucket", "--endpoint", `http://127.0.0.1:${s3.port}`, "--path-style", "--access-key-env", "TW_CLI_S3_KEY", "--secret-key-env", "TW_CLI_S3_SECRET");
    expect(add).toMatchObject({ code: 0, err: "" });
    const file = join(dataDir, "remote-connections.json");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(file, "utf8")).connections[0]).toMatchObject({ id: "bucket", protocol: "s3", auth: { access_key_env: "TW_CLI_S3_KEY", secret_key_env: "TW_CLI_S3_SECRET" } });
    expect(readFileSync(file, "utf8")).not.toContain("S3RVER");
    const again = await tw("remote", "add", "--id", "bucket", "--protocol", "s3", "--bucket", "x");
    expect(again.code).toBe(1);
    expect(again.err).toContain("already has a connection 'bucket'");

    const work = tempDir("tw-remote-cli-files-");
    const src = join(work, "payload.bin");
    const bytes = randomBytes(3 * 1024 * 1024 + 7);
    writeFileSync(src, bytes);
    const put = await tw("remote", "put", "bucket", src, "dir/payload.bin");
    expect(put.err).toBe("");
    expect(put.code).toBe(0);
    expect(put.out).toContain("uploaded /dir/payload.bin <- " + src);
    const ls = await tw("remote", "ls", "bucket", "/dir");
    expect(ls.out.trim().split("\t")).toEqual(["-", String(bytes.length), expect.stringMatching(/^\d{4}-/), "/dir/payload.bin"]);
    const dest = join(work, "back.bin");
    const get = await tw("remote", "get", "bucket", "/dir/payload.bin", dest, "--json");
    expect(get.code).toBe(0);
    expect(JSON.parse(get.out)).toMatchObject({ state: "done", bytesDone: bytes.length, localPath: dest });
    expect(Buffer.compare(readFileSync(dest), bytes)).toBe(0);
    expect((await tw("remote", "mv", "bucket", "/dir/payload.bin", "/dir/renamed.bin")).code).toBe(0);
    const rmDir = await tw("remote", "rm", "bucket", "/dir");
    expect(rmDir.code).toBe(1);
    expect(rmDir.err).toContain("use -r");
    expect((await tw("remote", "rm", "-r", "bucket", "/dir")).code).toBe(0);
    const missing = await tw("remote", "get", "bucket", "/dir/renamed.bin", join(work, "never.bin"));
    expect(missing.code).toBe(1);
    expect(missing.err).toContain("notFound");
    expect(existsSync(join(work, "never.bin"))).toBe(false);
    const rel = await svc.call("/api/v1/remote-fs/connections/bucket/download", { method: "POST", body: JSON.stringify({ remote_path: "/x", local_path: "x" }) });
    expect(rel.status).toBe(400);
  });

  test("the file is re-read when it changes; an invalid file is reported and the old connections stay", async () => {
    const file = join(dataDir, "remote-connections.json");
    const doc = JSON.parse(readFileSync(file, "utf8"));
    doc.connections.push({ id: "second", protocol: "webdav", username: "u", auth: {}, options: { url: "http://127.0.0.1:1/" } });
    writeFileSync(file, JSON.stringify(doc));
    const deadline = Date.now() + 10_000;
    let ids: string[] = [];
    while (Date.now() < deadline) {
      ids = ((await (await svc.call("/api/v1/remote-fs/connections")).json()) as any).connections.map((c: any) => c.id);
      if (ids.includes("second")) break;
      await Bun.sleep(50);
    }
    expect(ids).toEqual(["bucket", "second"]);
    writeFileSync(file, JSON.stringify({ connections: [{ id: "x", protocol: "sftp", password: "hunter2" }] }));
    const r = await svc.call("/api/v1/remote-fs/reload", { method: "POST" });
    expect(r.status).toBe(400);
    const body: any = await r.json();
    expect(body.error.message).toContain("looks like a secret");
    expect(body.error.message).not.toContain("hunter2");
    const cli = await tw("remote", "reload");
    expect(cli.code).toBe(1);
    expect(cli.err).toContain("looks like a secret");
    const still = ((await (await svc.call("/api/v1/remote-fs/connections")).json()) as any).connections.map((c: any) => c.id);
    expect(still).toEqual(["bucket", "second"]);
  });
});
