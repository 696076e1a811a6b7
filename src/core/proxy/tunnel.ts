import type { Socket } from "bun";
import type { ConnectInfo } from "../../pipeline/addon.ts";
import type { ProxyContext } from "./context.ts";
import { Endpoint, type Throttle } from "./endpoint.ts";
import { classifyConnectError } from "./upstream.ts";
import type { ParentProxy } from "./parent-proxy.ts";

/** The answer to a CONNECT that was accepted (intercepted or tunnelled). */
export const CONNECT_OK = new TextEncoder().encode("HTTP/1.1 200 Connection Established\r\n\r\n");
const EMPTY = new Uint8Array(0);

/**
 * A byte-for-byte CONNECT tunnel (ignored hosts): no TLS interception, nothing captured.
 * The 200 goes to the client only once the destination accepted the connection; a failure gets a 502.
 * With a parent proxy that routes the host, the tunnel is a CONNECT through the parent (its refusal is the 502's cause).
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
    parent: ParentProxy | null = null,
  ) {
    if (initial.length) this.pending.push(initial.slice());
    const via = parent !== null && parent.routes(host) ? parent : null;
    const through = via ? ` through upstream proxy ${via.label}` : "";
    /** The socket to the parent while it has not answered the CONNECT (closed when the wait times out). */
    let toParent: Socket<undefined> | null = null;
    const timer = setTimeout(() => {
      this.fail(`connect to ${host}:${port}${through} timed out`);
      toParent?.terminate();
    }, connectTimeoutMs);
    const self = this;
    /** The destination (or the parent, once it accepted the CONNECT) carries bytes: start relaying. */
    const established = (s: Socket<undefined>, early: Uint8Array) => {
      clearTimeout(timer);
      if (self.done) return void s.terminate();
      const ep = new Endpoint(s);
      self.server = ep;
      ep.throttle = throttles.up ?? null;
      self.client.throttle = throttles.down ?? null;
      ep.onDrain = () => self.client.resume();
      self.client.onDrain = () => ep.resume();
      self.client.write(CONNECT_OK);
      if (early.length) self.client.write(early);
      for (const p of self.pending) if (!ep.write(p)) self.client.pause();
      self.pending = [];
    };
    const reader = via ? via.connectReader(host, port) : null;
    /** Waiting for the parent's answer to our CONNECT. */
    let asking = via !== null;
    Bun.connect({
      hostname: via ? via.host : host,
      port: via ? via.port : port,
      socket: {
        open(s) {
          if (!via) return established(s, EMPTY);
          if (self.done) return void s.terminate();
          toParent = s;
          s.write(via.connectRequest(host, port));
        },
        data(s, d) {
          if (asking) {
            const answer = reader!(d);
            if (answer === null) return;
            asking = false;
            toParent = null;
            if (!answer.ok) {
              clearTimeout(timer);
              self.fail(answer.message);
              return void s.terminate();
            }
            return established(s, answer.rest);
          }
          if (!self.client.write(d)) self.server?.pause();
          self.client.release(d); // nothing else refers to the read: its memory goes once written
        },
        drain() {
          self.server?.handleDrain();
        },
        end() {
          if (asking) return self.fail(`upstream proxy ${via!.label} closed the connection before answering CONNECT ${host}:${port}`);
          self.client.end();
        },
        close() {
          if (asking) return self.fail(`upstream proxy ${via!.label} closed the connection before answering CONNECT ${host}:${port}`);
          self.finish();
        },
        error(_s, err) {
          if (asking) return self.fail(`cannot reach upstream proxy ${via!.label}: ${classifyConnectError(err, via!.host, via!.port).message}`);
          self.finish();
        },
      },
    }).catch((e) => {
      clearTimeout(timer);
      this.fail(via ? `cannot reach upstream proxy ${via.label}: ${classifyConnectError(e, via.host, via.port).message}` : classifyConnectError(e, host, port).message);
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
    this.server.release(d);
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
  return new Tunnel(client, info.host, info.port, initial, ctx.pool.opts.connectTimeoutMs, { down: info.throttleDown, up: info.throttleUp }, ctx.pool.opts.parent ?? null);
}
