/** Everything `tapwire start` can be told (CLI flags and environment), with defaults. */
export interface ServiceConfig {
  dataDir: string;
  /** Management API port on 127.0.0.1; 0 = a random free port (the default). */
  apiPort: number;
  /** Proxy listener port; 0 = a free port. Default 8080. */
  proxyPort: number;
  /** Proxy listener address. Default 127.0.0.1. */
  listenHost: string;
  /** Cap of the captured copy of each body, in bytes. Default 1 MiB. */
  bodyLimit: number;
  /** Capture store bound; oldest entries are evicted. Default 100,000. */
  maxEntries: number;
  /** Size bound of the capture database in bytes; oldest entries are evicted. Default 2 GiB. Optional until set. */
  maxStoreBytes?: number;
  /** Skip upstream TLS verification. */
  upstreamInsecure: boolean;
  /** Extra CA certificates (PEM files) trusted for upstream TLS, on top of the system roots. */
  upstreamCa: string[];
  /** Seconds before a paused flow resumes by itself. Default 300. */
  interceptTimeoutSec: number;
  /** Upstream connect timeout, seconds. Default 10. */
  connectTimeoutSec: number;
  /** Upstream idle timeout (no bytes while waiting), seconds. Default 60. */
  idleTimeoutSec: number;
  /** A client that accepts none of the bytes waiting for it, or sends nothing between requests, for this long is closed, seconds. Default 120. */
  clientIdleTimeoutSec?: number;
  /** Total time a client has to send a request head (and, after CONNECT, its TLS ClientHello), seconds. Default 30. */
  clientHeaderTimeoutSec?: number;
  /** Concurrent client connections to the proxy; above it new ones are refused at once. Default 10,000. */
  maxConnections?: number;
  /** Start the mock listener at launch on this port (null = not started). */
  mockPort: number | null;
  /** Time limit of one script execution, ms. Default 1,000. */
  scriptTimeoutMs: number;
  /** Memory limit of one script execution's runtime, bytes. Default 64 MiB. */
  scriptMemoryBytes: number;
  /**
   * Parent HTTP proxy for upstream traffic (`--upstream-proxy http://[user:pass@]host:port`), or null to connect
   * directly (the default). Validate with parseUpstreamProxy (src/cli/args.ts). Holds the
   * credentials: never log or answer it (ParentProxy.describe() is the printable form).
   * Optional until the CLI sets it (missing = null).
   */
  upstreamProxy: string | null;
  /**
   * Hosts reached directly although upstreamProxy is set (`--upstream-no-proxy LIST`): `host`, IP, `.domain`
   * (the domain and its subdomains), `*.domain` (subdomains only), `*` (all). Loopback is not bypassed unless
   * listed. Optional until the CLI sets it (missing = []).
   */
  upstreamNoProxy: string[];
  /** Folders of .proto files (`--proto DIR`, repeatable) naming the fields of captured gRPC messages. Optional (missing = []). */
  protoDirs?: string[];
  /** Whether POST /flows/{id}/run can execute flows (`--no-flow-runner` turns it off: 503). Missing = true. */
  flowRunner?: boolean;
  /** Time limit of one flow run, ms (`--flow-timeout SECS`): the route answers 504 and cancels the run. Default 120 s. */
  flowTimeoutMs?: number;
  /** HTTP/2 with clients (ALPN inside CONNECT) and origins (`--no-http2` turns it off: HTTP/1.1 only). Missing = true. */
  http2?: boolean;
}

export const DEFAULTS = {
  apiPort: 0,
  proxyPort: 8080,
  listenHost: "127.0.0.1",
  bodyLimit: 1024 * 1024,
  maxEntries: 100_000,
  maxStoreBytes: 2 * 1024 ** 3,
  interceptTimeoutSec: 300,
  connectTimeoutSec: 10,
  idleTimeoutSec: 60,
  clientIdleTimeoutSec: 120,
  clientHeaderTimeoutSec: 30,
  maxConnections: 10_000,
  scriptTimeoutMs: 1000,
  scriptMemoryBytes: 64 * 1024 * 1024,
  upstreamProxy: null as string | null,
  upstreamNoProxy: [] as string[],
  flowRunner: true,
  flowTimeoutMs: 120_000,
} as const;
