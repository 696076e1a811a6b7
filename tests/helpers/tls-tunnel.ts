/** A client's TLS connection to an origin through tapwire's CONNECT (what an HTTPS client behind the proxy does). */
import net from "node:net";
import tls from "node:tls";

/** Opens CONNECT localhost:`port` on the proxy, then TLS to the origin (SNI localhost, trusting `caPem`) offering `alpn`. */
export async function tlsTunnel(proxyPort: number, port: number, caPem: string, alpn: string[] = ["h2"]): Promise<tls.TLSSocket> {
  const raw = net.connect(proxyPort, "127.0.0.1");
  await new Promise<void>((res, rej) => raw.once("connect", res).once("error", rej));
  raw.write(`CONNECT localhost:${port} HTTP/1.1\r\nHost: localhost:${port}\r\n\r\n`);
  await new Promise<void>((res, rej) => {
    let got = "";
    const onData = (d: Buffer) => {
      got += d.toString("latin1");
      if (!got.includes("\r\n\r\n")) return;
      raw.off("data", onData);
      if (got.startsWith("HTTP/1.1 200")) res();
      else rej(new Error(got));
    };
    raw.on("data", onData);
    raw.once("error", rej);
  });
  const t = tls.connect({ socket: raw, servername: "localhost", ca: caPem, ALPNProtocols: alpn } as tls.ConnectionOptions);
  await new Promise<void>((res, rej) => t.once("secureConnect", res).once("error", rej));
  return t;
}
