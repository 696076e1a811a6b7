/**
 * What bench/h2-bench.ts and bench/h2-callgrind.ts share: the HTTP/2 origin they measure against (a node:http2
 * server answering every stream with a 1 KiB body, run as its own process) and the client's TLS connection to it,
 * direct, through a proxy's CONNECT, or to a relay.
 */
import net from "node:net";
import tls from "node:tls";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { generateCA } from "../src/core/tls/ca.ts";
import { LeafCertCache } from "../src/core/tls/leaf.ts";

/**
 * Writes into `dir` a CA, the origin's certificate for `localhost` (cert.pem, key.pem) and the origin's script
 * (origin.ts: prints `{"port": N}` once listening). Returns the CA and the file holding its certificate.
 */
export function writeH2Origin(dir: string, caFileName = "ca.pem"): { ca: ReturnType<typeof generateCA>; caFile: string; script: string } {
  const ca = generateCA();
  const leaf = new LeafCertCache(ca).get("localhost");
  const caFile = join(dir, caFileName);
  writeFileSync(caFile, ca.certPem);
  writeFileSync(join(dir, "cert.pem"), leaf.cert);
  writeFileSync(join(dir, "key.pem"), leaf.key);
  const script = join(dir, "origin.ts");
  writeFileSync(
    script,
    `import http2 from "node:http2";
import { readFileSync } from "node:fs";
const body = Buffer.alloc(1024, 120);
const srv = http2.createSecureServer({ cert: readFileSync(${JSON.stringify(join(dir, "cert.pem"))}), key: readFileSync(${JSON.stringify(join(dir, "key.pem"))}), settings: { maxConcurrentStreams: 1000 } });
srv.on("stream", (s) => { s.on("error", () => {}); s.respond({ ":status": 200, "content-type": "text/plain", "content-length": "1024" }); s.end(body); });
srv.listen(0, "127.0.0.1", () => console.log(JSON.stringify({ port: srv.address().port })));
`,
  );
  return { ca, caFile, script };
}

/** How the client reaches the origin: directly, through a proxy's CONNECT, or by TLS to a relay (no CONNECT). */
export type Via = { kind: "direct" } | { kind: "connect"; port: number } | { kind: "relay"; port: number };

/** A TLS socket to the origin: direct, through a proxy's CONNECT, or to a relay; ALPN h2. */
export async function connectTls(originPort: number, caPem: string, via: Via): Promise<tls.TLSSocket> {
  let socket: net.Socket | undefined;
  if (via.kind === "connect") {
    const raw = net.connect(via.port, "127.0.0.1");
    await new Promise<void>((res, rej) => raw.once("connect", res).once("error", rej));
    raw.write(`CONNECT localhost:${originPort} HTTP/1.1\r\nHost: localhost:${originPort}\r\n\r\n`);
    await new Promise<void>((res, rej) => {
      let got = "";
      const onData = (d: Buffer) => {
        got += d.toString("latin1");
        if (!got.includes("\r\n\r\n")) return;
        raw.off("data", onData);
        if (/^HTTP\/1\.[01] 200/.test(got)) res();
        else rej(new Error(`CONNECT refused: ${got.split("\r\n")[0]}`));
      };
      raw.on("data", onData);
      raw.once("error", rej);
    });
    socket = raw;
  }
  const port = via.kind === "relay" ? via.port : originPort;
  const t = tls.connect({ ...(socket ? { socket } : { host: "127.0.0.1", port }), servername: "localhost", ca: caPem, ALPNProtocols: ["h2"] } as tls.ConnectionOptions);
  await new Promise<void>((res, rej) => t.once("secureConnect", res).once("error", rej));
  if (t.alpnProtocol !== "h2") throw new Error(`ALPN picked ${t.alpnProtocol}, not h2`);
  return t;
}
