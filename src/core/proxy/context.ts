import type { LeafCertCache } from "../tls/leaf.ts";
import type { Pipeline } from "../../pipeline/pipeline.ts";
import type { Flow } from "../../pipeline/flow.ts";
import type { UpstreamPool } from "./upstream.ts";
import type { H2UpstreamPool } from "./h2-upstream.ts";
import type { H2GuardLimits } from "../http2/guard.ts";

/** Observes a WebSocket connection relayed after a 101 (frames are parsed beside the byte-for-byte relay). */
export interface WebSocketTap {
  /** Bytes from the client (dir "out"). */
  clientBytes(data: Uint8Array): void;
  /** Bytes from the server (dir "in"). */
  serverBytes(data: Uint8Array): void;
  closed(): void;
}

/** What every client session shares: the pipeline, the upstream pool, certificates and limits. */
export interface ProxyContext {
  pipeline: Pipeline;
  pool: UpstreamPool;
  leafCerts: LeafCertCache;
  /** Cap of the captured copy of each body. */
  bodyLimit: number;
  /** Largest body the proxy will hold whole for an addon that asked for buffering. */
  maxBufferedBody: number;
  /** Client label for a new connection. */
  label(remoteAddr: string, remotePort: number, alive?: () => boolean): Promise<string>;
  /** Called after a 101 to a WebSocket upgrade; returns a tap or null. */
  webSocketOpened?(flow: Flow): WebSocketTap | null;
  /** Open client sessions, so stop() can close them. */
  sessions: Set<{ destroy(): void }>;
  /** Idle timeout for client connections between requests, and for a client that accepts no bytes, seconds. */
  clientIdleSec: number;
  /** Total time for a request head (or a ClientHello after CONNECT), seconds; 0 = none. */
  clientHeaderSec?: number;
  /** Concurrent client connections accepted; 0 = no cap. */
  maxConnections?: number;
  /**
   * Durability barrier of the capture: settles once every flow recorded so far is on disk (undefined when it
   * already is). `now` writes at once. The proxy sends a response's last byte only after it.
   */
  durable?(now?: boolean): Promise<void> | undefined;
  /** HTTP/2 to https origins that pick it in ALPN (absent: HTTP/1.1 only, e.g. through a parent proxy). */
  h2pool?: H2UpstreamPool | null;
  /** Offer h2 in ALPN to clients inside an intercepted CONNECT (default true). */
  http2?: boolean;
  /** Limits of the HTTP/2 frame guard on client connections (defaults: DEFAULT_H2_LIMITS). */
  h2Limits?: Partial<H2GuardLimits>;
}
