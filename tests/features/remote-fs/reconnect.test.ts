/**
 * A connection opens on first use and reconnects after a drop: the server-side session processes of sshd and vsftpd
 * are killed under an open connection, and the next operation still works.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { sshFingerprint } from "../../../src/features/remote-fs/backends/sftp.ts";
import { startSshd, startVsftpd, type RemoteServer } from "../../helpers/remote-servers.ts";
import { startService } from "../../helpers/service.ts";
import { tempDir } from "../../helpers/tapwire-process.ts";

let svc: Awaited<ReturnType<typeof startService>>;
const servers: (RemoteServer & { pidFile?: string })[] = [];
let sshdPid = 0;
let ftpPid = 0;

/** PIDs of every descendant of `pid` (the per-session processes of a daemon). */
function descendants(pid: number): number[] {
  const out = Bun.spawnSync(["ps", "-eo", "pid=,ppid="]).stdout.toString();
  const kids = new Map<number, number[]>();
  for (const line of out.trim().split("\n")) {
    const [p, pp] = line.trim().split(/\s+/).map(Number) as [number, number];
    kids.set(pp, [...(kids.get(pp) ?? []), p]);
  }
  const all: number[] = [];
  const walk = (p: number) => {
    for (const k of kids.get(p) ?? []) {
      all.push(k);
      walk(k);
    }
  };
  walk(pid);
  return all;
}

async function list(id: string): Promise<{ status: number; json: any }> {
  const r = await svc.call(`/api/v1/remote-fs/connections/${id}/list`, { method: "POST", body: JSON.stringify({ path: "." }) });
  return { status: r.status, json: await r.json() };
}

beforeAll(async () => {
  const [sshd, ftpd] = await Promise.all([startSshd("twrsftp"), startVsftpd("twrftp")]);
  servers.push(sshd, ftpd);
  sshdPid = Number(readFileSync(join(sshd.dir, "sshd.pid.bg"), "utf8"));
  ftpPid = Number(readFileSync(join(ftpd.dir, "vsftpd.pid"), "utf8"));
  const [, blob] = readFileSync(sshd.hostKeyFile, "utf8").trim().split(/\s+/);
  process.env.TW_RECONNECT_SFTP = sshd.password;
  process.env.TW_RECONNECT_FTP = ftpd.password;
  const dataDir = tempDir("tw-remote-reconnect-");
  writeFileSync(
    join(dataDir, "remote-connections.json"),
    JSON.stringify({
      connections: [
        { id: "s", protocol: "sftp", host: "127.0.0.1", port: sshd.port, username: sshd.user, auth: { password_env: "TW_RECONNECT_SFTP" }, options: { host_fingerprint: sshFingerprint(Buffer.from(blob!, "base64")) } },
        { id: "f", protocol: "ftp", host: "127.0.0.1", port: ftpd.port, username: ftpd.user, auth: { password_env: "TW_RECONNECT_FTP" }, options: {} },
      ],
    }),
  );
  svc = await startService({ dataDir });
}, 60_000);

afterAll(async () => {
  await svc?.stop();
  await Promise.all(servers.map((s) => s.stop()));
});

for (const [id, daemon] of [["s", () => sshdPid], ["f", () => ftpPid]] as const) {
  test(`${id === "s" ? "sftp" : "ftp"}: the session is killed on the server; the next operation reconnects`, async () => {
    expect((await list(id)).status).toBe(200);
    const conns = (await (await svc.call("/api/v1/remote-fs/connections")).json()) as any;
    expect(conns.connections.find((c: any) => c.id === id).state).toBe("connected");
    const sessions = descendants(daemon());
    expect(sessions.length).toBeGreaterThan(0);
    for (const p of sessions) process.kill(p, "SIGKILL");
    // the next operation may race the close notification: it must succeed either way (reconnect and retry)
    const after = await list(id);
    expect(after.json.error ?? null).toBeNull();
    expect(after.status).toBe(200);
    expect((await list(id)).status).toBe(200);
  });
}
