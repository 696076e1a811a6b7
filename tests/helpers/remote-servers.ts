/**
 * Real remote-file servers on loopback for the conformance suite and the bench, started by the project's own
 * scripts in scripts/remote-servers/: OpenSSH sshd (SFTP), vsftpd (FTP and explicit FTPS), Apache mod_dav (WebDAV)
 * and s3rver (S3, a devDependency). Ports are probed free at start. A server that cannot start makes the caller
 * fail (the error names the script's output): never a silent skip. sshd, vsftpd and Apache need root (system users).
 */
import { mkdtempSync, readFileSync, rmSync, existsSync, mkdirSync, chmodSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");
const SCRIPTS = join(ROOT, "scripts", "remote-servers");

export interface RemoteServer {
  protocol: "sftp" | "ftp" | "s3" | "webdav";
  port: number;
  /** The script's working folder (keys, certificates, logs). */
  dir: string;
  /** The local folder holding what the server serves (the remote login folder / bucket data). */
  served: string;
  user: string;
  password: string;
  stop(): Promise<void>;
}

/** A TCP port nobody listens on right now (the OS picks it). */
export function freePort(): number {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const p = s.port;
  s.stop(true);
  return p;
}

async function runScript(name: string, env: Record<string, string>): Promise<string> {
  const p = Bun.spawn(["bash", join(SCRIPTS, name)], { env: { ...process.env, ...env }, stdin: "ignore", stdout: "pipe", stderr: "pipe", timeout: 60_000 });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`${name} failed (exit ${code}): ${out}\n${err}`);
  return out;
}

async function stopTree(pid: number): Promise<void> {
  if (!pid) return;
  await Bun.spawn(["bash", join(SCRIPTS, "stop-tree.sh"), String(pid)], { stdout: "ignore", stderr: "ignore" }).exited;
}

function workDir(prefix: string): string {
  const d = mkdtempSync(join(tmpdir(), `tw-${prefix}-`));
  chmodSync(d, 0o755);
  return d;
}

export function requireRoot(): void {
  if (process.getuid?.() !== 0) throw new Error("the remote-file servers (sshd, vsftpd, apache2) are started as root: run the suite as root (CI does)");
}

/** OpenSSH sshd with internal-sftp; password login and the ed25519 key `${dir}/client_ed25519`. */
export async function startSshd(user = "twsftp"): Promise<RemoteServer & { hostKeyFile: string }> {
  requireRoot();
  const dir = workDir("sshd");
  const port = freePort();
  const password = "sftp-pass-1";
  await runScript("start-sshd.sh", { PORT: String(port), DIR: dir, USER_NAME: user, USER_PASS: password });
  const pid = Number(readFileSync(join(dir, "sshd.pid.bg"), "utf8"));
  return {
    protocol: "sftp",
    port,
    dir,
    served: join(dir, "home"),
    user,
    password,
    hostKeyFile: join(dir, "host_ed25519.pub"),
    stop: async () => {
      await stopTree(pid);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** vsftpd with plain FTP and explicit FTPS on the same port (certificate `${dir}/cert.pem`, for IP 127.0.0.1). */
export async function startVsftpd(user = "twftp"): Promise<RemoteServer & { certFile: string }> {
  requireRoot();
  const dir = workDir("vsftpd");
  const port = freePort();
  const password = "ftp-pass-1";
  const base = 30000 + Math.floor(Math.random() * 300) * 100;
  await runScript("start-vsftpd.sh", { PORT: String(port), DIR: dir, USER_NAME: user, USER_PASS: password, PASV_MIN: String(base), PASV_MAX: String(base + 99) });
  const pid = Number(readFileSync(join(dir, "vsftpd.pid"), "utf8"));
  return {
    protocol: "ftp",
    port,
    dir,
    served: join(dir, "home"),
    user,
    password,
    certFile: join(dir, "cert.pem"),
    stop: async () => {
      await stopTree(pid);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A self-signed certificate for IP 127.0.0.1 (and localhost) in `dir`: {cert, key} paths (PEM). */
export async function selfSignedCert(dir: string): Promise<{ cert: string; key: string }> {
  const cert = join(dir, "tls-cert.pem");
  const key = join(dir, "tls-key.pem");
  const p = Bun.spawn(
    ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
    { stdout: "ignore", stderr: "pipe" },
  );
  if ((await p.exited) !== 0) throw new Error(`openssl failed: ${await new Response(p.stderr).text()}`);
  chmodSync(key, 0o600);
  return { cert, key };
}

/** Apache httpd with mod_dav, Basic auth; over HTTPS with the given certificate. */
export async function startApacheDav(user = "twdav", tls?: { cert: string; key: string }): Promise<RemoteServer> {
  requireRoot();
  const dir = workDir("dav");
  const port = freePort();
  const password = "dav-pass-1";
  await runScript("start-apache-dav.sh", { PORT: String(port), DIR: dir, USER_NAME: user, USER_PASS: password, ...(tls ? { SSL_CERT: tls.cert, SSL_KEY: tls.key } : {}) });
  const pid = Number(readFileSync(join(dir, "apache.bgpid"), "utf8"));
  return {
    protocol: "webdav",
    port,
    dir,
    served: join(dir, "root"),
    user,
    password,
    stop: async () => {
      await stopTree(pid);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** s3rver (npm devDependency) with the bucket `test-bucket`; keys S3RVER/S3RVER; over HTTPS with the given certificate. */
export async function startS3rver(tls?: { cert: string; key: string }): Promise<RemoteServer & { bucket: string }> {
  const dir = workDir("s3rver");
  const port = freePort();
  const bin = join(ROOT, "node_modules", "s3rver", "bin", "s3rver.js");
  if (!existsSync(bin)) throw new Error(`s3rver is not installed (${bin}); run npm install`);
  mkdirSync(join(dir, "data"));
  const proc = Bun.spawn(["node", bin, "-d", join(dir, "data"), "-a", "127.0.0.1", "-p", String(port), "--configure-bucket", "test-bucket", "-s", ...(tls ? ["--key", tls.key, "--cert", tls.cert] : [])], {
    // without the legacy provider, s3rver's ListObjectsV2 paging answers 500 on Node 17+
    env: { ...process.env, NODE_OPTIONS: "--openssl-legacy-provider" },
    stdout: "pipe",
    stderr: "pipe",
  });
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`s3rver exited with ${proc.exitCode}: ${await new Response(proc.stderr).text()}`);
    const r = await fetch(`${tls ? "https" : "http"}://127.0.0.1:${port}/test-bucket?list-type=2&max-keys=1`, { tls: { rejectUnauthorized: false } } as RequestInit).catch(() => null);
    if (r) {
      await r.arrayBuffer();
      if (r.status === 200 || r.status === 403) break;
    }
    if (Date.now() > deadline) {
      proc.kill();
      throw new Error("s3rver did not answer within 20 s");
    }
    await Bun.sleep(50);
  }
  return {
    protocol: "s3",
    port,
    dir,
    served: join(dir, "data", "test-bucket"),
    user: "S3RVER",
    password: "S3RVER",
    bucket: "test-bucket",
    stop: async () => {
      proc.kill();
      await proc.exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
