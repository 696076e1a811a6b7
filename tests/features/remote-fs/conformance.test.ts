/**
 * The remote-files conformance suite (the rclone idea): one list of checks, written once, run against every backend
 * on real servers over loopback through the management API: OpenSSH sshd (password with a pinned fingerprint, and an
 * ed25519 key with a known_hosts file), vsftpd (plain FTP and explicit FTPS), s3rver and Apache mod_dav.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { sshFingerprint } from "../../../src/features/remote-fs/backends/sftp.ts";
import { freePort, startApacheDav, startS3rver, startSshd, startVsftpd, type RemoteServer } from "../../helpers/remote-servers.ts";
import { startService } from "../../helpers/service.ts";
import { tempDir } from "../../helpers/tapwire-process.ts";

type Service = Awaited<ReturnType<typeof startService>>;

const servers: RemoteServer[] = [];
let svc: Service;
let work: string;
const files: Record<string, { path: string; sha: string; size: number }> = {};

const TARGETS = ["sftp-password", "sftp-key", "ftp", "ftps", "s3", "webdav"] as const;
type Target = (typeof TARGETS)[number];

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const r = await svc.call(`/api/v1/remote-fs${path}`, { method, body: body === undefined ? undefined : JSON.stringify(body), headers: { "content-type": "application/json" } });
  const text = await r.text();
  return { status: r.status, json: text ? JSON.parse(text) : null };
}
const post = (path: string, body?: unknown) => call("POST", path, body);

function sha(path: string): string {
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

/** Polls GET /transfers until the transfer is in one of `states` (deadline 60 s). */
async function waitTransfer(id: string, states: string[], pred: (t: any) => boolean = () => true): Promise<any> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const { json } = await call("GET", `/transfers/${id}`);
    if (states.includes(json.state) && pred(json)) return json;
    if (["done", "error", "cancelled"].includes(json.state) && !states.includes(json.state)) throw new Error(`transfer ended ${json.state}: ${JSON.stringify(json.error)}`);
    if (Date.now() > deadline) throw new Error(`transfer ${id} still ${json.state} (${json.bytesDone} bytes)`);
    await Bun.sleep(10);
  }
}

async function transfer(conn: string, kind: "upload" | "download", remote: string, local: string): Promise<any> {
  const r = await post(`/connections/${conn}/${kind}`, { remote_path: remote, local_path: local });
  expect(r.status).toBe(202);
  expect(r.json.transferId).toMatch(/^tr_rest_/);
  return waitTransfer(r.json.transferId, ["done"]);
}

beforeAll(async () => {
  work = tempDir("tw-remote-conf-");
  const [sshd, ftpd, dav, s3] = await Promise.all([startSshd(), startVsftpd(), startApacheDav(), startS3rver()]);
  servers.push(sshd, ftpd, dav, s3);
  const hostKey = readFileSync(sshd.hostKeyFile, "utf8").trim().split(/\s+/);
  const fingerprint = sshFingerprint(Buffer.from(hostKey[1]!, "base64"));
  writeFileSync(join(work, "known_hosts"), `# test\n[127.0.0.1]:${sshd.port} ${hostKey[0]} ${hostKey[1]}\n`);
  writeFileSync(join(work, "ftp-pass"), `${ftpd.password}\n`);
  process.env.TW_CONF_SFTP_PASS = sshd.password;
  process.env.TW_CONF_DAV_PASS = dav.password;
  process.env.TW_CONF_S3_KEY = s3.user;
  process.env.TW_CONF_S3_SECRET = s3.password;
  process.env.TW_CONF_WRONG = "not-the-password";
  const closed = freePort();
  const otherKey = sshFingerprint(randomBytes(51));
  const conns = [
    { id: "sftp-password", protocol: "sftp", host: "127.0.0.1", port: sshd.port, label: "sshd (password)", homePath: "", username: sshd.user, auth: { password_env: "TW_CONF_SFTP_PASS" }, options: { host_fingerprint: fingerprint } },
    { id: "sftp-key", protocol: "sftp", host: "127.0.0.1", port: sshd.port, label: "sshd (key)", homePath: "", username: sshd.user, auth: { key_file: join(sshd.dir, "client_ed25519") }, options: { known_hosts: join(work, "known_hosts") } },
    { id: "ftp", protocol: "ftp", host: "127.0.0.1", port: ftpd.port, label: "vsftpd", homePath: "", username: ftpd.user, auth: { password_file: join(work, "ftp-pass") }, options: {} },
    { id: "ftps", protocol: "ftps", host: "127.0.0.1", port: ftpd.port, label: "vsftpd (TLS)", homePath: "", username: ftpd.user, auth: { password_file: join(work, "ftp-pass") }, options: { secure: "explicit", ca_file: ftpd.certFile } },
    { id: "s3", protocol: "s3", host: "127.0.0.1", port: s3.port, label: "s3rver", homePath: "", auth: { access_key_env: "TW_CONF_S3_KEY", secret_key_env: "TW_CONF_S3_SECRET" }, options: { bucket: "test-bucket", endpoint: `http://127.0.0.1:${s3.port}`, force_path_style: true, region: "us-east-1" } },
    { id: "webdav", protocol: "webdav", host: "127.0.0.1", port: dav.port, label: "apache", homePath: "", username: dav.user, auth: { password_env: "TW_CONF_DAV_PASS" }, options: { url: `http://127.0.0.1:${dav.port}/` } },
    // error cases
    { id: "sftp-wrong-pass", protocol: "sftp", host: "127.0.0.1", port: sshd.port, label: "", homePath: "", username: sshd.user, auth: { password_env: "TW_CONF_WRONG" }, options: { host_fingerprint: fingerprint } },
    { id: "sftp-wrong-key", protocol: "sftp", host: "127.0.0.1", port: sshd.port, label: "", homePath: "", username: sshd.user, auth: { password_env: "TW_CONF_SFTP_PASS" }, options: { host_fingerprint: otherKey } },
    { id: "sftp-unknown-host", protocol: "sftp", host: "127.0.0.1", port: sshd.port, label: "", homePath: "", username: sshd.user, auth: { password_env: "TW_CONF_SFTP_PASS" }, options: { known_hosts: join(work, "ftp-pass") } },
    { id: "ftp-wrong-pass", protocol: "ftp", host: "127.0.0.1", port: ftpd.port, label: "", homePath: "", username: ftpd.user, auth: { password_env: "TW_CONF_WRONG" }, options: {} },
    { id: "ftps-untrusted", protocol: "ftps", host: "127.0.0.1", port: ftpd.port, label: "", homePath: "", username: ftpd.user, auth: { password_file: join(work, "ftp-pass") }, options: { secure: "explicit" } },
    { id: "s3-wrong-key", protocol: "s3", host: "127.0.0.1", port: s3.port, label: "", homePath: "", auth: { access_key_env: "TW_CONF_WRONG", secret_key_env: "TW_CONF_S3_SECRET" }, options: { bucket: "test-bucket", endpoint: `http://127.0.0.1:${s3.port}`, force_path_style: true } },
    { id: "webdav-wrong-pass", protocol: "webdav", host: "127.0.0.1", label: "", homePath: "", username: dav.user, auth: { password_env: "TW_CONF_WRONG" }, options: { url: `http://127.0.0.1:${dav.port}/` } },
    { id: "sftp-closed", protocol: "sftp", host: "127.0.0.1", port: closed, label: "", homePath: "", username: "x", auth: { password_env: "TW_CONF_WRONG" }, options: { host_fingerprint: fingerprint } },
    { id: "ftp-closed", protocol: "ftp", host: "127.0.0.1", port: closed, label: "", homePath: "", username: "x", auth: { password_env: "TW_CONF_WRONG" }, options: {} },
    { id: "s3-closed", protocol: "s3", host: "127.0.0.1", label: "", homePath: "", auth: { access_key_env: "TW_CONF_S3_KEY", secret_key_env: "TW_CONF_S3_SECRET" }, options: { bucket: "test-bucket", endpoint: `http://127.0.0.1:${closed}`, force_path_style: true } },
    { id: "webdav-closed", protocol: "webdav", host: "127.0.0.1", label: "", homePath: "", username: "x", auth: { password_env: "TW_CONF_WRONG" }, options: { url: `http://127.0.0.1:${closed}/` } },
  ];
  const dataDir = tempDir("tw-remote-data-");
  writeFileSync(join(dataDir, "remote-connections.json"), JSON.stringify({ connections: conns }, null, 2), { mode: 0o600 });
  svc = await startService({ dataDir });
  // local files to upload
  const local = join(work, "local");
  mkdirSync(local);
  const make = (key: string, name: string, bytes: Uint8Array) => {
    const p = join(local, name);
    writeFileSync(p, bytes);
    files[key] = { path: p, sha: createHash("sha256").update(bytes).digest("hex"), size: bytes.length };
  };
  make("empty", "empty.bin", new Uint8Array(0));
  make("one", "one.bin", new Uint8Array([0x5a]));
  make("ten", "ten-mb.bin", randomBytes(10 * 1024 * 1024));
  make("intl", "spa ce – ünï 日本.txt", new TextEncoder().encode("non-ASCII name, and a space\n"));
  make("big", "big.bin", randomBytes(48 * 1024 * 1024));
}, 120_000);

afterAll(async () => {
  await svc?.stop();
  await Promise.all(servers.map((s) => s.stop().catch(() => {})));
});

test("GET /connections lists every connection without secrets", async () => {
  const { status, json } = await call("GET", "/connections");
  expect(status).toBe(200);
  const byId = Object.fromEntries(json.connections.map((c: any) => [c.id, c]));
  expect(byId["sftp-password"]).toMatchObject({ protocol: "sftp", host: "127.0.0.1", label: "sshd (password)", homePath: "", encrypted: true, state: "idle", last_error: null });
  expect(byId.ftp.encrypted).toBe(false);
  expect(byId.ftps.encrypted).toBe(true);
  expect(byId.s3.encrypted).toBe(false); // http:// endpoint
  expect(byId.webdav.encrypted).toBe(false);
  expect(JSON.stringify(json)).not.toContain("TW_CONF");
  expect(JSON.stringify(json)).not.toContain("auth");
});

for (const target of TARGETS) {
  describe(`conformance: ${target}`, () => {
    const base = `conf-${target}`;
    const down = () => {
      const d = join(work, `down-${target}`);
      mkdirSync(d, { recursive: true });
      return d;
    };

    test("nested mkdir, list, and mkdir of an existing folder is 409 alreadyExists", async () => {
      expect((await post(`/connections/${target}/mkdir`, { path: `${base}/a/b/c` })).json).toEqual({ ok: true });
      const l = await post(`/connections/${target}/list`, { path: `${base}/a/b` });
      expect(l.status).toBe(200);
      expect(l.json.path).toEndWith(`/${base}/a/b`);
      expect(l.json.entries).toHaveLength(1);
      expect(l.json.entries[0]).toMatchObject({ name: "c", isDir: true, size: 0 });
      expect(l.json.entries[0].path).toBe(`${l.json.path}/c`);
      const again = await post(`/connections/${target}/mkdir`, { path: `${base}/a/b/c` });
      expect(again.status).toBe(409);
      expect(again.json.error.code).toBe("alreadyExists");
    });

    test("upload and download 0 B, 1 B, 10 MB and a non-ASCII name with a space, byte for byte", async () => {
      for (const key of ["empty", "one", "ten", "intl"]) {
        const f = files[key]!;
        const name = f.path.split("/").pop()!;
        const up = await transfer(target, "upload", `${base}/${name}`, f.path);
        expect(up).toMatchObject({ kind: "upload", state: "done", bytesDone: f.size, totalBytes: f.size, error: null, connectionId: target });
        expect(up.remotePath).toEndWith(`/${base}/${name}`);
      }
      const l = await post(`/connections/${target}/list`, { path: base });
      const sizes = Object.fromEntries(l.json.entries.map((e: any) => [e.name, e.size]));
      expect(sizes).toEqual({ a: 0, "empty.bin": 0, "one.bin": 1, "ten-mb.bin": 10 * 1024 * 1024, [files.intl!.path.split("/").pop()!]: files.intl!.size });
      // no temporary upload names left behind
      expect(l.json.entries.filter((e: any) => e.name.includes(".part"))).toEqual([]);
      for (const key of ["empty", "one", "ten", "intl"]) {
        const f = files[key]!;
        const name = f.path.split("/").pop()!;
        const local = join(down(), name);
        const d = await transfer(target, "download", `${base}/${name}`, local);
        expect(d).toMatchObject({ kind: "download", state: "done", bytesDone: f.size, totalBytes: f.size });
        expect(sha(local)).toBe(f.sha);
      }
      expect(readdirSync(down()).filter((n) => n.endsWith(".part"))).toEqual([]);
    });

    test("rename: a file moves; onto an existing target 409; a missing source 404", async () => {
      expect((await post(`/connections/${target}/rename`, { from: `${base}/one.bin`, to: `${base}/a/moved.bin` })).json).toEqual({ ok: true });
      const l = await post(`/connections/${target}/list`, { path: `${base}/a` });
      expect(l.json.entries.map((e: any) => e.name).sort()).toEqual(["b", "moved.bin"]);
      const exists = await post(`/connections/${target}/rename`, { from: `${base}/empty.bin`, to: `${base}/ten-mb.bin` });
      expect(exists.status).toBe(409);
      expect(exists.json.error.code).toBe("alreadyExists");
      const missing = await post(`/connections/${target}/rename`, { from: `${base}/nope.bin`, to: `${base}/nope2.bin` });
      expect(missing.status).toBe(404);
      expect(missing.json.error.code).toBe("notFound");
    });

    test("missing paths are 404 notFound (list, download, delete)", async () => {
      const l = await post(`/connections/${target}/list`, { path: `${base}/no-such-folder` });
      expect(l.status).toBe(404);
      expect(l.json.error.code).toBe("notFound");
      const del = await post(`/connections/${target}/delete`, { paths: [{ path: `${base}/no-such-file` }] });
      expect(del.status).toBe(404);
      expect(del.json.error.code).toBe("notFound");
      const local = join(down(), "never.bin");
      const r = await post(`/connections/${target}/download`, { remote_path: `${base}/no-such-file`, local_path: local });
      expect(r.status).toBe(202);
      const t = await waitTransfer(r.json.transferId, ["error"]);
      expect(t.error.code).toBe("notFound");
      expect(existsSync(local)).toBe(false);
    });

    test("pause and resume a download: it continues and the bytes match", async () => {
      await transfer(target, "upload", `${base}/big.bin`, files.big!.path);
      const local = join(down(), "big-resumed.bin");
      const r = await post(`/connections/${target}/download`, { remote_path: `${base}/big.bin`, local_path: local });
      const id = r.json.transferId;
      await waitTransfer(id, ["running", "done"], (t) => t.bytesDone > 0 || t.state === "done");
      const p = await post(`/transfers/${id}/pause`);
      expect(p.status).toBe(200);
      if (p.json.state === "paused") {
        expect(existsSync(local)).toBe(false);
        const resumed = await post(`/transfers/${id}/resume`);
        expect(["queued", "running", "done"]).toContain(resumed.json.state);
      } else expect(p.status).toBe(409); // finished before the pause landed: nothing to check
      const t = await waitTransfer(id, ["done"]);
      expect(t.bytesDone).toBe(files.big!.size);
      expect(sha(local)).toBe(files.big!.sha);
    });

    test("cancel a running download: no file at local_path, no temp file; cancelling again is 409 cancelled", async () => {
      const local = join(down(), "big-cancelled.bin");
      const r = await post(`/connections/${target}/download`, { remote_path: `${base}/big.bin`, local_path: local });
      const id = r.json.transferId;
      await waitTransfer(id, ["running", "done"], (t) => t.bytesDone > 0 || t.state === "done");
      const c = await post(`/transfers/${id}/cancel`);
      if (c.status === 409) return; // it finished first on a fast run: the upload cancel below still checks
      expect(c.status).toBe(200);
      expect(c.json.state).toBe("cancelled");
      expect(existsSync(local)).toBe(false);
      expect(readdirSync(down()).filter((n) => n.includes(id))).toEqual([]);
      const again = await post(`/transfers/${id}/cancel`);
      expect(again.status).toBe(409);
      expect(again.json.error.code).toBe("cancelled");
    });

    test("cancel a running upload: nothing appears under the target name", async () => {
      const r = await post(`/connections/${target}/upload`, { local_path: files.big!.path, remote_path: `${base}/big-cancelled.bin` });
      const id = r.json.transferId;
      await waitTransfer(id, ["running", "done"], (t) => t.bytesDone > 0 || t.state === "done");
      const c = await post(`/transfers/${id}/cancel`);
      const l = await post(`/connections/${target}/list`, { path: base });
      const names = l.json.entries.map((e: any) => e.name);
      expect(names.filter((n: string) => n.includes(".part"))).toEqual([]);
      if (c.status === 200) {
        expect(c.json.state).toBe("cancelled");
        expect(names).not.toContain("big-cancelled.bin");
      } else expect(c.json.error.code).toBe("conflict");
    });

    test("delete a file, then a non-empty folder with everything in it", async () => {
      expect((await post(`/connections/${target}/delete`, { paths: [{ path: `${base}/empty.bin`, is_dir: false }] })).json).toEqual({ ok: true });
      expect((await post(`/connections/${target}/delete`, { paths: [{ path: `${base}/a`, is_dir: true }] })).json).toEqual({ ok: true });
      const l = await post(`/connections/${target}/list`, { path: base });
      const names = l.json.entries.map((e: any) => e.name);
      expect(names).not.toContain("empty.bin");
      expect(names).not.toContain("a");
      expect(names).toContain("ten-mb.bin");
      expect((await post(`/connections/${target}/list`, { path: `${base}/a/b` })).status).toBe(404);
      expect((await post(`/connections/${target}/delete`, { paths: [{ path: base, is_dir: true }] })).json).toEqual({ ok: true });
    });
  });
}

describe("errors every backend can provoke", () => {
  const cases: [string, number, string][] = [
    ["sftp-wrong-pass", 403, "auth"],
    ["ftp-wrong-pass", 403, "auth"],
    ["s3-wrong-key", 403, "auth"],
    ["webdav-wrong-pass", 403, "auth"],
    ["sftp-closed", 502, "hostUnreachable"],
    ["ftp-closed", 502, "hostUnreachable"],
    ["s3-closed", 502, "hostUnreachable"],
    ["webdav-closed", 502, "hostUnreachable"],
    ["sftp-wrong-key", 502, "hostKeyRejected"],
    ["sftp-unknown-host", 502, "hostKeyRejected"],
    ["ftps-untrusted", 502, "hostKeyRejected"],
  ];
  for (const [id, status, code] of cases) {
    test(`${id}: ${status} ${code}`, async () => {
      const r = await post(`/connections/${id}/list`, { path: "/" });
      expect(r.json.error?.code).toBe(code);
      expect(r.status).toBe(status);
      const c = (await call("GET", "/connections")).json.connections.find((x: any) => x.id === id);
      expect(c.state).toBe("error");
      expect(c.last_error.code).toBe(code);
      expect(r.json.error.message).not.toContain("not-the-password");
    });
  }

  test("unknown connection 404; relative local_path 400; unknown body field 400; unknown transfer 404", async () => {
    const u = await post("/connections/nope/list", { path: "/" });
    expect(u.status).toBe(404);
    expect(u.json.error.code).toBe("notFound");
    const rel = await post("/connections/ftp/download", { remote_path: "x", local_path: "relative/x.bin" });
    expect(rel.status).toBe(400);
    const relUp = await post("/connections/ftp/upload", { remote_path: "x", local_path: "x.bin" });
    expect(relUp.status).toBe(400);
    const extra = await post("/connections/ftp/list", { path: "/", recursive: true });
    expect(extra.status).toBe(400);
    expect(extra.json.error.message).toContain("recursive");
    expect((await post("/transfers/tr_rest_nope/cancel")).status).toBe(404);
  });
});
