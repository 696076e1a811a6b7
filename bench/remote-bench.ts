#!/usr/bin/env bun
/**
 * Remote-file throughput: per protocol, in ONE run, a file of --size-mb (default 200) MB is uploaded and downloaded
 * through tapwire (POST .../upload|download, polled until done) and with a reference client on the same server:
 *
 *   SFTP    OpenSSH `sftp` (batch mode, the same ed25519 key)          against OpenSSH sshd
 *   FTP     `curl` (ftp://)                                            against vsftpd
 *   FTPS    `curl --ssl-reqd` (explicit TLS, same CA)                  against vsftpd
 *   S3      the AWS SDK alone in this process (lib-storage Upload, GetObject streamed to a file) against s3rver
 *   WebDAV  `curl -T` / `curl -o` (Basic auth)                         against Apache mod_dav
 *
 * Rows are interleaved (reference up, tapwire up, reference down, tapwire down) so both see the same machine load.
 * tapwire runs as its own process (`tapwire start`); its peak RSS per protocol is read from /proc/PID/status
 * (VmHWM, reset through /proc/PID/clear_refs before each protocol) and printed beside its RSS at start. Goal: at
 * least 70% of the reference's throughput; RSS growth under 64 MB whatever the file size (try --size-mb 1024).
 * Downloads are checked byte for byte (sha256) against the source file.
 *
 *   bun bench/remote-bench.ts [--size-mb 200] [--only sftp,ftp,ftps,s3,webdav] [--repeat 1]
 *
 * Needs root (the servers run as system users), openssh-client, curl, vsftpd, apache2 (scripts/remote-servers).
 */
import { createHash } from "node:crypto";
import { createReadStream, createWriteStream, mkdirSync, readFileSync, rmSync, statSync, writeFileSync, openSync, writeSync, closeSync } from "node:fs";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { parseArgs } from "node:util";
import { GetObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { sshFingerprint } from "../src/features/remote-fs/backends/sftp.ts";
import { startApacheDav, startS3rver, startSshd, startVsftpd, type RemoteServer } from "../tests/helpers/remote-servers.ts";
import { startTapwire, tempDir, type RunningTapwire } from "../tests/helpers/tapwire-process.ts";

const { values: opt } = parseArgs({
  args: Bun.argv.slice(2),
  strict: true,
  options: {
    "size-mb": { type: "string", default: "200" },
    only: { type: "string", default: "sftp,ftp,ftps,s3,webdav" },
    repeat: { type: "string", default: "1" },
    help: { type: "boolean", short: "h", default: false },
  },
});
if (opt.help) {
  console.log("usage: bun bench/remote-bench.ts [--size-mb 200] [--only sftp,ftp,ftps,s3,webdav] [--repeat 1]");
  process.exit(0);
}
const SIZE = Number(opt["size-mb"]) * 1_000_000;
const ONLY = new Set(opt.only!.split(","));
const REPEAT = Number(opt.repeat);

const MB = 1_000_000;
const work = tempDir("tw-remote-bench-");
const src = join(work, "payload.bin");
const servers: RemoteServer[] = [];
let tw: RunningTapwire | null = null;

function makeFile(path: string, size: number): string {
  // pseudo-random bytes (incompressible), written in 4 MiB blocks
  const fd = openSync(path, "w");
  const hash = createHash("sha256");
  let seed = createHash("sha256").update("tapwire-bench").digest();
  for (let done = 0; done < size; ) {
    const n = Math.min(4 * 1024 * 1024, size - done);
    const block = Buffer.allocUnsafe(n);
    for (let o = 0; o < n; o += 32) {
      seed = createHash("sha256").update(seed).digest();
      seed.copy(block, o, 0, Math.min(32, n - o));
    }
    writeSync(fd, block);
    hash.update(block);
    done += n;
  }
  closeSync(fd);
  return hash.digest("hex");
}

async function fileSha(path: string): Promise<string> {
  const h = createHash("sha256");
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) h.update(chunk as Buffer);
  return h.digest("hex");
}

async function sh(cmd: string[], env: Record<string, string> = {}): Promise<void> {
  const p = Bun.spawn(cmd, { stdout: "pipe", stderr: "pipe", env: { ...process.env, ...env } });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`${cmd.join(" ")} exited ${code}: ${out}${err}`);
}

async function timed(fn: () => Promise<void>): Promise<number> {
  const t = performance.now();
  await fn();
  return (performance.now() - t) / 1000;
}

function procStatus(pid: number, key: string): number {
  const m = new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) * 1024 : NaN;
}

async function api(path: string, body?: unknown): Promise<any> {
  const r = await tw!.api(`/api/v1/remote-fs${path}`, { method: body === undefined ? "GET" : "POST", body: body === undefined ? undefined : JSON.stringify(body) });
  const j = await r.json();
  if (r.status >= 400) throw new Error(`${path}: ${r.status} ${JSON.stringify(j)}`);
  return j;
}

async function viaTapwire(conn: string, kind: "upload" | "download", remote: string, local: string): Promise<void> {
  const { transferId } = await api(`/connections/${conn}/${kind}`, { remote_path: remote, local_path: local });
  for (;;) {
    const t = await api(`/transfers/${transferId}`);
    if (t.state === "done") return;
    if (t.state === "error" || t.state === "cancelled") throw new Error(`${conn} ${kind}: ${JSON.stringify(t.error)}`);
    await Bun.sleep(20);
  }
}

interface Row {
  protocol: string;
  dir: string;
  ref: number;
  tw: number;
  peak: number;
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error("run as root (sshd, vsftpd and apache2 run as system users)");
  console.error(`writing a ${SIZE / MB} MB file ...`);
  const srcSha = makeFile(src, SIZE);

  const sshd = ONLY.has("sftp") ? await startSshd("twbsftp") : null;
  const ftpd = ONLY.has("ftp") || ONLY.has("ftps") ? await startVsftpd("twbftp") : null;
  const dav = ONLY.has("webdav") ? await startApacheDav("twbdav") : null;
  const s3 = ONLY.has("s3") ? await startS3rver() : null;
  for (const s of [sshd, ftpd, dav, s3]) if (s) servers.push(s);

  const conns: unknown[] = [];
  const env: Record<string, string> = {};
  if (sshd) {
    const [type, blob] = readFileSync(sshd.hostKeyFile, "utf8").trim().split(/\s+/);
    writeFileSync(join(work, "known_hosts"), `[127.0.0.1]:${sshd.port} ${type} ${blob}\n`);
    conns.push({ id: "sftp", protocol: "sftp", host: "127.0.0.1", port: sshd.port, username: sshd.user, auth: { key_file: join(sshd.dir, "client_ed25519") }, options: { host_fingerprint: sshFingerprint(Buffer.from(blob!, "base64")) } });
  }
  if (ftpd) {
    env.TWB_FTP_PASS = ftpd.password;
    conns.push({ id: "ftp", protocol: "ftp", host: "127.0.0.1", port: ftpd.port, username: ftpd.user, auth: { password_env: "TWB_FTP_PASS" }, options: {} });
    conns.push({ id: "ftps", protocol: "ftps", host: "127.0.0.1", port: ftpd.port, username: ftpd.user, auth: { password_env: "TWB_FTP_PASS" }, options: { secure: "explicit", ca_file: (ftpd as RemoteServer & { certFile: string }).certFile } });
  }
  if (s3) {
    env.TWB_S3_KEY = s3.user;
    env.TWB_S3_SECRET = s3.password;
    conns.push({ id: "s3", protocol: "s3", host: "127.0.0.1", auth: { access_key_env: "TWB_S3_KEY", secret_key_env: "TWB_S3_SECRET" }, options: { bucket: "test-bucket", endpoint: `http://127.0.0.1:${s3.port}`, force_path_style: true } });
  }
  if (dav) {
    env.TWB_DAV_PASS = dav.password;
    conns.push({ id: "webdav", protocol: "webdav", host: "127.0.0.1", username: dav.user, auth: { password_env: "TWB_DAV_PASS" }, options: { url: `http://127.0.0.1:${dav.port}/` } });
  }
  const dataDir = join(work, "data");
  mkdirSync(dataDir, { mode: 0o700 });
  writeFileSync(join(dataDir, "remote-connections.json"), JSON.stringify({ connections: conns }), { mode: 0o600 });
  tw = await startTapwire({ dataDir, env });
  const pid = tw.handshake.pid;
  // warm up: open every connection (loads each protocol's library), then take the baseline
  for (const c of conns as { id: string }[]) await api(`/connections/${c.id}/list`, { path: "." });
  const rssStart = procStatus(pid, "VmRSS");

  const s3client = s3
    ? new S3Client({ region: "us-east-1", endpoint: `http://127.0.0.1:${s3.port}`, forcePathStyle: true, credentials: { accessKeyId: s3.user, secretAccessKey: s3.password }, requestChecksumCalculation: "WHEN_REQUIRED", responseChecksumValidation: "WHEN_REQUIRED" })
    : null;

  type Ref = { up: (remote: string) => Promise<void>; down: (remote: string, local: string) => Promise<void> };
  const refs: Record<string, Ref> = {};
  if (sshd) {
    const sftpCmd = (batch: string) => {
      writeFileSync(join(work, "batch"), batch);
      return sh(["sftp", "-q", "-b", join(work, "batch"), "-i", join(sshd.dir, "client_ed25519"), "-P", String(sshd.port), "-o", `UserKnownHostsFile=${join(work, "known_hosts")}`, "-o", "StrictHostKeyChecking=yes", `${sshd.user}@127.0.0.1`]);
    };
    refs.sftp = { up: (r) => sftpCmd(`put ${src} ${r}\n`), down: (r, l) => sftpCmd(`get ${r} ${l}\n`) };
  }
  if (ftpd) {
    const auth = `${ftpd.user}:${ftpd.password}`;
    const base = `ftp://127.0.0.1:${ftpd.port}`;
    const ca = (ftpd as RemoteServer & { certFile: string }).certFile;
    refs.ftp = { up: (r) => sh(["curl", "-sS", "-u", auth, "-T", src, `${base}/${r}`]), down: (r, l) => sh(["curl", "-sS", "-u", auth, "-o", l, `${base}/${r}`]) };
    refs.ftps = {
      up: (r) => sh(["curl", "-sS", "--ssl-reqd", "--cacert", ca, "-u", auth, "-T", src, `${base}/${r}`]),
      down: (r, l) => sh(["curl", "-sS", "--ssl-reqd", "--cacert", ca, "-u", auth, "-o", l, `${base}/${r}`]),
    };
  }
  if (s3client) {
    refs.s3 = {
      up: async (r) => {
        await new Upload({ client: s3client, params: { Bucket: "test-bucket", Key: r, Body: createReadStream(src) } }).done();
      },
      down: async (r, l) => {
        const o = await s3client.send(new GetObjectCommand({ Bucket: "test-bucket", Key: r }));
        await pipeline(o.Body as NodeJS.ReadableStream, createWriteStream(l));
      },
    };
  }
  if (dav) {
    const auth = `${dav.user}:${dav.password}`;
    const base = `http://127.0.0.1:${dav.port}`;
    refs.webdav = { up: (r) => sh(["curl", "-sS", "-f", "-u", auth, "-T", src, `${base}/${r}`]), down: (r, l) => sh(["curl", "-sS", "-f", "-u", auth, "-o", l, `${base}/${r}`]) };
  }

  const rows: Row[] = [];
  for (const proto of ["sftp", "ftp", "ftps", "s3", "webdav"]) {
    const ref = refs[proto];
    if (!ref || !ONLY.has(proto)) continue;
    const best = { refUp: 0, twUp: 0, refDown: 0, twDown: 0, peakUp: 0, peakDown: 0 };
    /** Runs one tapwire transfer with tapwire's VmHWM reset before it; returns its seconds and peak RSS. */
    const withPeak = async (fn: () => Promise<void>): Promise<[number, number]> => {
      writeFileSync(`/proc/${pid}/clear_refs`, "5");
      const s = await timed(fn);
      return [s, procStatus(pid, "VmHWM")];
    };
    for (let i = 0; i < REPEAT; i++) {
      console.error(`${proto}: round ${i + 1}`);
      const up = async (which: "ref" | "tw") => {
        const name = `bench-${which}.bin`;
        if (which === "ref") return SIZE / MB / (await timed(() => ref.up(name)));
        const [s, peak] = await withPeak(() => viaTapwire(proto, "upload", name, src));
        best.peakUp = Math.max(best.peakUp, peak);
        return SIZE / MB / s;
      };
      best.refUp = Math.max(best.refUp, await up("ref"));
      best.twUp = Math.max(best.twUp, await up("tw"));
      const down = async (which: "ref" | "tw") => {
        const local = join(work, `down-${proto}-${which}.bin`);
        rmSync(local, { force: true });
        let s: number;
        if (which === "ref") s = await timed(() => ref.down("bench-ref.bin", local));
        else {
          let peak: number;
          [s, peak] = await withPeak(() => viaTapwire(proto, "download", "bench-tw.bin", local));
          best.peakDown = Math.max(best.peakDown, peak);
        }
        if (statSync(local).size !== SIZE || (await fileSha(local)) !== srcSha) throw new Error(`${proto} ${which} download differs from the source`);
        rmSync(local);
        return SIZE / MB / s;
      };
      best.refDown = Math.max(best.refDown, await down("ref"));
      best.twDown = Math.max(best.twDown, await down("tw"));
    }
    rows.push({ protocol: proto, dir: "upload", ref: best.refUp, tw: best.twUp, peak: best.peakUp });
    rows.push({ protocol: proto, dir: "download", ref: best.refDown, tw: best.twDown, peak: best.peakDown });
  }

  const refName: Record<string, string> = { sftp: "OpenSSH sftp", ftp: "curl", ftps: "curl (TLS)", s3: "AWS SDK", webdav: "curl" };
  console.log(`\nremote-bench: ${SIZE / MB} MB file, best of ${REPEAT}; MB/s = 10^6 bytes/s; tapwire RSS after warm-up ${(rssStart / 2 ** 20).toFixed(0)} MiB`);
  console.log("protocol  direction  reference      ref MB/s  tapwire MB/s  ratio   tapwire peak RSS (growth)");
  for (const r of rows) {
    const peak = r.peak;
    console.log(
      `${r.protocol.padEnd(9)} ${r.dir.padEnd(10)} ${refName[r.protocol]!.padEnd(14)} ${r.ref.toFixed(1).padStart(8)}  ${r.tw.toFixed(1).padStart(12)}  ${((r.tw / r.ref) * 100).toFixed(0).padStart(4)}%   ${(peak / 2 ** 20).toFixed(0)} MiB (+${((peak - rssStart) / 2 ** 20).toFixed(0)} MiB)`,
    );
  }
}

try {
  await main();
} finally {
  await (tw as RunningTapwire | null)?.stop().catch(() => {});
  await Promise.all(servers.map((s) => s.stop().catch(() => {})));
  rmSync(work, { recursive: true, force: true });
}
