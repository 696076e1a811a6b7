import net from "node:net";

export interface ParentSeen {
  /** `CONNECT` or the method of an absolute-form request. */
  method: string;
  /** The request target as sent (`host:port` for CONNECT, the absolute URL otherwise). */
  target: string;
  /** The Proxy-Authorization header as received, or null. */
  proxyAuthorization: string | null;
  /** The header lines after the request line, as received. */
  headers: [string, string][];
  /** False when the proxy answered 407. */
  accepted: boolean;
}

export interface ParentProxyServer {
  port: number;
  url: string;
  seen: ParentSeen[];
  /** Client connections accepted so far. */
  connections: number;
  stop(): Promise<void>;
}

/**
 * A tiny forward proxy on 127.0.0.1 standing in for a corporate proxy: CONNECT (tunnels bytes once the target
 * accepted the TCP connection) and absolute-form requests (rewritten to origin-form, Proxy-Authorization removed,
 * bodies framed by Content-Length only; responses are piped back as they come). With `auth`, requests without the
 * right `Proxy-Authorization: Basic` get a 407. Records every request head it saw.
 */
export async function startParentProxy(opts: { auth?: { user: string; pass: string } } = {}): Promise<ParentProxyServer> {
  const seen: ParentSeen[] = [];
  const want = opts.auth ? "Basic " + Buffer.from(`${opts.auth.user}:${opts.auth.pass}`).toString("base64") : null;
  const sockets = new Set<net.Socket>();
  const state = { connections: 0 };

  const server = net.createServer((client) => {
    state.connections++;
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    client.on("error", () => {});
    let buf = Buffer.alloc(0);
    let origin: net.Socket | null = null;
    let originKey = "";
    /** Body bytes of the current absolute-form request still to pass on. */
    let bodyLeft = 0;
    let tunnelled = false;
    /** The CONNECT target accepted: bytes are piped both ways. */
    let piping = false;

    const send407 = (close: boolean) => {
      const body = "proxy authentication required\n";
      client.write(
        `HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="parent"\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\n${close ? "Connection: close\r\n" : ""}\r\n${body}`,
      );
      if (close) client.end();
    };

    const pump = () => {
      while (!tunnelled) {
        if (bodyLeft > 0) {
          if (buf.length === 0) return;
          const n = Math.min(bodyLeft, buf.length);
          origin?.write(buf.subarray(0, n));
          buf = buf.subarray(n);
          bodyLeft -= n;
          continue;
        }
        const end = buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        const headText = buf.subarray(0, end).toString("latin1");
        buf = buf.subarray(end + 4);
        const [requestLine, ...lines] = headText.split("\r\n");
        const [method = "", target = "", version = "HTTP/1.1"] = requestLine!.split(" ");
        const headers = lines.map((l) => {
          const i = l.indexOf(":");
          return [l.slice(0, i), l.slice(i + 1).trim()] as [string, string];
        });
        const pa = headers.find(([n]) => n.toLowerCase() === "proxy-authorization")?.[1] ?? null;
        const accepted = want === null || pa === want;
        seen.push({ method, target, proxyAuthorization: pa, headers, accepted });
        const contentLength = Number(headers.find(([n]) => n.toLowerCase() === "content-length")?.[1] ?? "0");
        if (method === "CONNECT") {
          if (!accepted) return send407(true);
          const i = target.lastIndexOf(":");
          const host = target.slice(0, i).replace(/^\[|\]$/g, "");
          const up = net.connect(Number(target.slice(i + 1)), host);
          tunnelled = true;
          up.on("connect", () => {
            client.write("HTTP/1.1 200 Connection established\r\n\r\n");
            if (buf.length) up.write(buf);
            buf = Buffer.alloc(0);
            piping = true;
            client.pipe(up);
            up.pipe(client);
          });
          up.on("error", () => {
            if (!client.destroyed) client.end("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
          });
          return;
        }
        if (!accepted) {
          // the request's body (if any) is read and dropped
          buf = buf.subarray(Math.min(contentLength, buf.length));
          send407(false);
          continue;
        }
        const u = new URL(target);
        const key = `${u.hostname}:${u.port || 80}`;
        if (!origin || originKey !== key) {
          origin?.destroy();
          originKey = key;
          origin = net.connect(Number(u.port || 80), u.hostname.replace(/^\[|\]$/g, ""));
          origin.on("data", (d) => client.write(d));
          origin.on("end", () => client.end());
          origin.on("error", () => client.destroy());
        }
        const kept = lines.filter((l) => !/^proxy-authorization:/i.test(l) && !/^proxy-connection:/i.test(l));
        origin.write(`${method} ${u.pathname}${u.search} ${version}\r\n${kept.join("\r\n")}${kept.length ? "\r\n" : ""}\r\n`);
        bodyLeft = contentLength;
      }
    };

    client.on("data", (d: Buffer) => {
      if (tunnelled) {
        if (!piping) buf = Buffer.concat([buf, d]); // until the target accepts
        return;
      }
      buf = Buffer.concat([buf, d]);
      pump();
    });
    client.on("end", () => {
      if (!tunnelled) origin?.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    seen,
    get connections() {
      return state.connections;
    },
    async stop() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** A loopback port that nothing listens on (bound, then released). */
export async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}
