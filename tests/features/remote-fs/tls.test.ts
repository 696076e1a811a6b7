/**
 * Certificates are verified for HTTPS WebDAV (Apache mod_ssl) and HTTPS S3 endpoints (s3rver with a certificate):
 * with the connection's ca_file the connection works and is `encrypted`; without it the certificate is rejected
 * (502 hostKeyRejected), never silently trusted. (FTPS: conformance.test.ts, ftps-untrusted.)
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { selfSignedCert, startApacheDav, startS3rver, type RemoteServer } from "../../helpers/remote-servers.ts";
import { startService } from "../../helpers/service.ts";
import { tempDir } from "../../helpers/tapwire-process.ts";

let svc: Awaited<ReturnType<typeof startService>>;
const servers: RemoteServer[] = [];
let work: string;

const post = async (path: string, body: unknown) => {
  const r = await svc.call(`/api/v1/remote-fs${path}`, { method: "POST", body: JSON.stringify(body) });
  return { status: r.status, json: (await r.json()) as any };
};

beforeAll(async () => {
  work = tempDir("tw-remote-tls-");
  const tls = await selfSignedCert(work);
  const [dav, s3] = await Promise.all([startApacheDav("twtlsdav", tls), startS3rver(tls)]);
  servers.push(dav, s3);
  process.env.TW_TLS_DAV = dav.password;
  process.env.TW_TLS_S3 = "S3RVER";
  const dataDir = tempDir("tw-remote-tls-data-");
  const davConn = { protocol: "webdav", username: dav.user, auth: { password_env: "TW_TLS_DAV" } };
  const s3Conn = { protocol: "s3", auth: { access_key_env: "TW_TLS_S3", secret_key_env: "TW_TLS_S3" } };
  const s3Opts = { bucket: "test-bucket", endpoint: `https://127.0.0.1:${s3.port}`, force_path_style: true };
  writeFileSync(
    join(dataDir, "remote-connections.json"),
    JSON.stringify({
      connections: [
        { id: "dav", ...davConn, options: { url: `https://127.0.0.1:${dav.port}/`, ca_file: tls.cert } },
        { id: "dav-untrusted", ...davConn, options: { url: `https://127.0.0.1:${dav.port}/` } },
        { id: "s3", ...s3Conn, options: { ...s3Opts, ca_file: tls.cert } },
        { id: "s3-untrusted", ...s3Conn, options: s3Opts },
      ],
    }),
  );
  svc = await startService({ dataDir });
}, 60_000);

afterAll(async () => {
  await svc?.stop();
  await Promise.all(servers.map((s) => s.stop()));
});

for (const id of ["dav", "s3"]) {
  test(`${id} over HTTPS: trusted through ca_file (list, upload, download), rejected without it`, async () => {
    const conns = (await (await svc.call("/api/v1/remote-fs/connections")).json()) as any;
    expect(conns.connections.find((c: any) => c.id === id).encrypted).toBe(true);
    expect(await post(`/connections/${id}/mkdir`, { path: "/tls-dir" })).toEqual({ status: 200, json: { ok: true } });
    const bytes = randomBytes(1024 * 1024 + 3);
    const local = join(work, `${id}-up.bin`);
    writeFileSync(local, bytes);
    const waitDone = async (transferId: string) => {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const t = (await (await svc.call(`/api/v1/remote-fs/transfers/${transferId}`)).json()) as any;
        if (t.state === "done") return;
        if (t.state === "error" || Date.now() > deadline) throw new Error(JSON.stringify(t));
        await Bun.sleep(10);
      }
    };
    await waitDone((await post(`/connections/${id}/upload`, { local_path: local, remote_path: "/tls-dir/f.bin" })).json.transferId);
    const back = join(work, `${id}-down.bin`);
    await waitDone((await post(`/connections/${id}/download`, { remote_path: "/tls-dir/f.bin", local_path: back })).json.transferId);
    expect(Buffer.compare(readFileSync(back), bytes)).toBe(0);
    const l = await post(`/connections/${id}/list`, { path: "/tls-dir" });
    expect(l.json.entries.map((e: any) => [e.name, e.size])).toEqual([["f.bin", bytes.length]]);

    const untrusted = await post(`/connections/${id}-untrusted/list`, { path: "/" });
    expect(untrusted.json.error.code).toBe("hostKeyRejected");
    expect(untrusted.status).toBe(502);
  });
}
