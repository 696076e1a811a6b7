import type { Socket, TCPSocketListener } from "bun";
import type { ProxyContext } from "./context.ts";
import { clientSocketHandlers, HttpSession } from "./http-session.ts";
import { normalizeIp } from "./client-label.ts";
import type { ClientInfo } from "../../pipeline/flow.ts";

const TOO_MANY_BODY = "tapwire: too many client connections (--max-connections)\n";
const TOO_MANY = new TextEncoder().encode(
  `HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${TOO_MANY_BODY.length}\r\nConnection: close\r\n\r\n${TOO_MANY_BODY}`,
);

/**
 * The proxy's front door: a Bun.listen TCP listener (Bun.serve cannot take over CONNECT sockets or keep
 * absolute-form URLs). Each accepted socket becomes an HttpSession.
 */
export class ProxyServer {
  private listener: TCPSocketListener<HttpSession> | null = null;

  constructor(private readonly ctx: ProxyContext) {}

  listen(hostname: string, port: number): number {
    const ctx = this.ctx;
    this.listener = Bun.listen<HttpSession>({
      hostname,
      port,
      // a client's FIN after its request must not cost it the response
      allowHalfOpen: true,
      socket: {
        ...clientSocketHandlers,
        open(s: Socket<HttpSession>) {
          const max = ctx.maxConnections ?? 0;
          if (max > 0 && ctx.sessions.size >= max) {
            // --max-connections: refused at once, never queued
            s.data = undefined as unknown as HttpSession;
            s.end(TOO_MANY);
            return;
          }
          s.setNoDelay(true);
          const addr = normalizeIp(s.remoteAddress);
          const remotePort = (s as unknown as { remotePort: number }).remotePort;
          const client: ClientInfo = { addr, port: remotePort, label: ctx.label(addr, remotePort, () => s.readyState > 0) };
          client.label.then(
            (l) => (client.resolvedLabel = l),
            () => (client.resolvedLabel = addr),
          );
          new HttpSession(ctx, s, client, null);
        },
      },
    });
    return this.listener.port;
  }

  get port(): number {
    return this.listener?.port ?? 0;
  }

  stop(): void {
    this.listener?.stop(true);
    this.listener = null;
    for (const s of [...this.ctx.sessions]) s.destroy();
    this.ctx.sessions.clear();
    this.ctx.pool.closeAll();
    this.ctx.h2pool?.close();
  }
}
