#!/usr/bin/env bun
/**
 * Upstream for bench/proxy-bench.ts, run in its own process so it shares no event loop with the load generator
 * or the proxy under test. Serves GET /1k.txt (1024 bytes, keep-alive) on 127.0.0.1 over HTTP and HTTPS (a free
 * port each), and also over HTTPS on port 443 when it can bind it (root, port free): URLs without a port make
 * clients send a plain host name as TLS SNI (hey puts "host:port" in SNI otherwise).
 *   bun bench/bench-upstream.ts CERT_PEM_FILE KEY_PEM_FILE
 * Prints one JSON line {"http":PORT,"https":PORT,"https443":true|false} on stdout once listening; exits when its
 * parent goes away.
 */
import { readFileSync } from "node:fs";

const [certFile, keyFile] = Bun.argv.slice(2);
if (!certFile || !keyFile) {
  console.error("usage: bench-upstream.ts CERT_PEM_FILE KEY_PEM_FILE");
  process.exit(2);
}
const BODY = "x".repeat(1023) + "\n";
const routes = { "/1k.txt": new Response(BODY, { headers: { "content-type": "text/plain" } }) };
const fetch = () => new Response("not found", { status: 404 });
const tls = { cert: readFileSync(certFile, "utf8"), key: readFileSync(keyFile, "utf8") };
const http = Bun.serve({ hostname: "127.0.0.1", port: 0, routes, fetch, reusePort: false });
const https = Bun.serve({ hostname: "127.0.0.1", port: 0, routes, fetch, tls, reusePort: false });
let https443 = false;
try {
  Bun.serve({ hostname: "127.0.0.1", port: 443, routes, fetch, tls, reusePort: false });
  https443 = true;
} catch {
  // not root, or taken: the bench falls back to the free port
}
console.log(JSON.stringify({ http: http.port, https: https.port, https443 }));

// Orphan guard: if the bench dies without cleaning up (SIGKILL), do not linger.
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) process.exit(0);
}, 1000);
