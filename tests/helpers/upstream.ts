import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import type { Server } from "bun";
import { generateCA } from "../../src/core/tls/ca.ts";
import { LeafCertCache } from "../../src/core/tls/leaf.ts";
import { tempDir } from "./tapwire-process.ts";

export interface SeenRequest {
  method: string;
  url: string;
  headers: [string, string][];
  body: Uint8Array;
  remotePort: number;
}

export interface Upstream {
  http: Server<unknown>;
  https: Server<unknown>;
  httpUrl: string;
  httpsUrl: string;
  /** PEM of the CA that signed the HTTPS upstream's certificate (for localhost and 127.0.0.1). */
  caPem: string;
  caFile: string;
  seen: SeenRequest[];
  stop(): void;
}

/**
 * Real upstream servers on loopback (HTTP and HTTPS with a test CA), recording every request.
 * Routes: /echo (JSON of what arrived), /bytes?n=N (N bytes, streamed in 64 KiB chunks; &chunked=1 without a length), /chunked (a streamed
 * body without length), /gzip (gzip-encoded JSON), /status/CODE, /sink (counts the request body), /head-test.
 */
export function startUpstream(): Upstream {
  const ca = generateCA();
  const leaves = new LeafCertCache(ca);
  const leafLocal = leaves.get("localhost");
  const dir = tempDir("tapwire-upstream-");
  const caFile = join(dir, "upstream-ca.pem");
  writeFileSync(caFile, ca.certPem);
  const seen: SeenRequest[] = [];
  const handler = async (req: Request, server: Server<unknown>): Promise<Response> => {
    const url = new URL(req.url);
    const body = new Uint8Array(await req.arrayBuffer());
    seen.push({ method: req.method, url: req.url, headers: [...req.headers.entries()], body, remotePort: server.requestIP(req)?.port ?? 0 });
    const p = url.pathname;
    if (p === "/echo" || p.startsWith("/echo/"))
      return Response.json({ method: req.method, path: url.pathname + url.search, headers: Object.fromEntries(req.headers), body: new TextDecoder().decode(body), size: body.length });
    if (p === "/bytes") {
      const n = Number(url.searchParams.get("n") ?? "0");
      const chunk = new Uint8Array(65536).fill(97);
      let sent = 0;
      return new Response(
        new ReadableStream({
          pull(c) {
            if (sent >= n) return c.close();
            const take = Math.min(chunk.length, n - sent);
            sent += take;
            c.enqueue(take === chunk.length ? chunk : chunk.subarray(0, take));
          },
        }),
        // ?chunked=1: no Content-Length (the body is framed by chunked encoding)
        { headers: url.searchParams.get("chunked") === "1" ? { "content-type": "application/octet-stream" } : { "content-type": "application/octet-stream", "content-length": String(n) } },
      );
    }
    if (p === "/chunked") {
      const parts = ["alpha-", "beta-", "gamma"];
      return new Response(
        new ReadableStream({
          pull(c) {
            const x = parts.shift();
            if (x === undefined) c.close();
            else c.enqueue(new TextEncoder().encode(x));
          },
        }),
        { headers: { "content-type": "text/plain" } },
      );
    }
    if (p === "/gzip") {
      return new Response(gzipSync(JSON.stringify({ compressed: true, word: "needle-in-gzip" })), {
        headers: { "content-type": "application/json", "content-encoding": "gzip" },
      });
    }
    if (p.startsWith("/status/")) {
      const code = Number(p.slice(8));
      return new Response(code === 204 || code === 304 ? null : `status ${code}`, { status: code, headers: { etag: '"x"' } });
    }
    if (p === "/sink") return Response.json({ received: body.length });
    if (p === "/head-test") return new Response("twelve bytes", { headers: { "content-type": "text/plain" } });
    return new Response("not found", { status: 404 });
  };
  const http = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: handler, maxRequestBodySize: 1024 ** 3 });
  const https = Bun.serve({ port: 0, hostname: "127.0.0.1", tls: { cert: leafLocal.cert, key: leafLocal.key }, fetch: handler, maxRequestBodySize: 1024 ** 3 });
  return {
    http,
    https,
    httpUrl: `http://127.0.0.1:${http.port}`,
    httpsUrl: `https://localhost:${https.port}`,
    caPem: ca.certPem,
    caFile,
    seen,
    stop() {
      http.stop(true);
      https.stop(true);
    },
  };
}

/** Runs curl and returns its exit code, stdout and stderr. */
export async function curl(args: string[]): Promise<{ code: number; out: string; err: string; bytes: Uint8Array }> {
  const p = Bun.spawn(["curl", "-sS", ...args], { stdout: "pipe", stderr: "pipe" });
  const [bytes, err, code] = await Promise.all([new Response(p.stdout).arrayBuffer(), new Response(p.stderr).text(), p.exited]);
  const b = new Uint8Array(bytes);
  return { code, out: new TextDecoder().decode(b), err, bytes: b };
}
