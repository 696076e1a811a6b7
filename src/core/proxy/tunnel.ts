import type { ConnectInfo } from "../../pipeline/addon.ts";
import type { ProxyContext } from "./context.ts";
import { Endpoint, type Throttle } from "./endpoint.ts";
import { classifyConnectError } from "./upstream.ts";

/** The answer to a CONNECT that was accepted (intercepted or tunnelled). */
export const CONNECT_OK = new TextEncoder().encode("HTTP/1.1 200 Connection Established\r\n\r\n");

/**
 * A byte-for-byte CONNECT tunnel (ignored hosts): no TLS interception, nothing captured.
 * The 200 goes to the client only once the destination accepted the connection; a failure gets a 502.
 */
export class Tunnel {
  private server: Endpoint | null = null;
  private pending: Uint8Array[] = [];
  private done = false;

  constructor(
    private readonly client: Endpoint,
    host: string,
    port: number,
    initial: Uint8Array,
    connectTimeoutMs: number,
    throttles: { down?: Throttle | null; up?: Throttle | null } = {},
  ) {
    if (initial.length) this.pending.push(initial.slice());
    const timer = setTimeout(() => this.fail(`connect to ${host}:${port} timed out`), connectTimeoutMs);
    const self = this;
    Bun.connect({
      hostname: host,
      port,
      socket: {
        open(s) {
          clearTimeout(timer);
          if (self.done) return void s.terminate();
          const ep = new Endpoint(s);
          self.server = ep;
          ep.throttle = throttles.up ?? null;
          self.client.throttle = throttles.down ?? null;
          ep.onDrain = () => self.client.resume();
          self.client.onDrain = () => ep.resume();
          self.client.write(CONNECT_OK);
          for (const p of self.pending) if (!ep.write(p)) self.client.pause();
          self.pending = [];
        },
        data(_s, d) {
          if (!self.client.write(d)) self.server?.pause();
        },
        drain() {
          self.server?.handleDrain();
        },
        end() {
          self.client.end();
        },
        close() {
          self.finish();
        },
        error() {
          self.finish();
        },
      },
    }).catch((e) => {
      clearTimeout(timer);
      this.fail(classifyConnectError(e, host, port).message);
    });
  }

  private fail(why: string): void {
    if (this.done) return;
    this.done = true;
    const body = new TextEncoder().encode(`tapwire: ${why}\n`);
    this.client.write(
      new TextEncoder().encode(`HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`),
    );
    this.client.write(body);
    this.client.end();
  }

  clientBytes(d: Uint8Array): void {
    if (this.done) return;
    if (!this.server) {
      this.pending.push(d.slice());
      return;
    }
    if (!this.server.write(d)) this.client.pause();
  }

  clientEnded(): void {
    this.server?.end();
  }

  clientClosed(): void {
    this.done = true;
    this.server?.destroy();
  }

  private finish(): void {
    if (this.done) return;
    this.done = true;
    this.client.end();
  }
}

export function openTunnel(ctx: ProxyContext, client: Endpoint, info: ConnectInfo, initial: Uint8Array): Tunnel {
  return new Tunnel(client, info.host, info.port, initial, ctx.pool.opts.connectTimeoutMs, { down: info.throttleDown, up: info.throttleUp });
}
