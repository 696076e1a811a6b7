import { parseArgs } from "node:util";
import { existsSync } from "node:fs";
import { parseNoProxyList, parseProxyUrl, ProxyConfigError, type ProxyUrl } from "../core/proxy/parent-proxy.ts";
import { DEFAULTS, type ServiceConfig } from "../service/config.ts";
import { resolveDataDir } from "../service/datadir.ts";

/** A mistake in the command line: main.ts prints the message and `usage` (when given) on stderr and exits 2. */
export class UsageError extends Error {
  constructor(message: string, readonly usage?: string) {
    super(message);
  }
}

export const START_USAGE = `usage: tapwire start [options]

Runs the proxy and the management API in the foreground until Ctrl-C, SIGTERM or \`tapwire stop\`. The API port and
a fresh token are written to api-handshake.json in the data directory, which the other commands read.

  --data-dir DIR            data directory (default: $TAPWIRE_DATA_DIR, else the per-user data folder)
  --port N                  proxy port (default ${DEFAULTS.proxyPort}; 0 picks a free port)
  --listen-host ADDR        proxy address (default ${DEFAULTS.listenHost})
  --api-port N              management API port on 127.0.0.1 (default 0: a random free port)
  --body-limit BYTES        captured copy of each body is capped here (default ${DEFAULTS.bodyLimit}; suffixes k, m)
  --max-entries N           capture store bound, oldest evicted (default ${DEFAULTS.maxEntries})
  --max-store-size BYTES    capture database size bound, oldest evicted (default 2g; suffixes k, m, g)
  --upstream-insecure       do not verify upstream TLS certificates
  --upstream-ca FILE        also trust this PEM CA for upstream TLS (repeatable)
  --upstream-proxy URL      send upstream traffic through this HTTP proxy: http://[user:pass@]host:port
                            (plain HTTP as absolute-form requests, HTTPS through CONNECT; default: direct)
  --upstream-no-proxy LIST  hosts reached directly despite --upstream-proxy, comma-separated (repeatable):
                            host or IP, .domain (it and its subdomains), *.domain (subdomains), * (all);
                            loopback goes through the proxy unless listed
  --intercept-timeout SECS  paused flows resume by themselves after this (default ${DEFAULTS.interceptTimeoutSec})
  --connect-timeout SECS    upstream connect timeout (default ${DEFAULTS.connectTimeoutSec})
  --idle-timeout SECS       upstream silence before the flow fails with 504 (default ${DEFAULTS.idleTimeoutSec})
  --client-idle-timeout SECS  a client that takes no bytes (or sends none between requests) this long is closed
                            (default ${DEFAULTS.clientIdleTimeoutSec})
  --client-header-timeout SECS  total time for a request head or a TLS ClientHello: 408 and close
                            (default ${DEFAULTS.clientHeaderTimeoutSec})
  --max-connections N       concurrent client connections; more are refused at once (default ${DEFAULTS.maxConnections})
  --mock-port N             also start the mock listener on this port
  --script-timeout MS       time limit of one script execution (default ${DEFAULTS.scriptTimeoutMs})
  --script-memory BYTES     memory limit of one script execution (default ${DEFAULTS.scriptMemoryBytes}; suffixes k, m)
  --proto DIR               .proto files under DIR name the fields of captured gRPC messages (repeatable)
  --no-flow-runner          do not execute flows: POST /flows/{id}/run answers 503 (flows can still be read and edited)
  --no-http2                HTTP/1.1 only: no h2 in ALPN to clients inside CONNECT, none asked of origins
  --flow-timeout SECS       time limit of one flow run; then it is cancelled and the route answers 504 (default ${DEFAULTS.flowTimeoutMs / 1000})
  -h, --help                show this text

\`start\` restarts itself at launch (same pid) with MIMALLOC_ARENA_PURGE_MULT=1000: the memory allocator gives
freed memory back to the system after 10 s instead of 100 ms, which spares it a churn of pages that cost a fifth
of the CPU per proxied request (more on a busy machine); a value you set yourself is kept.

example:
  tapwire start --port 8080 --data-dir /tmp/tw`;

function int(name: string, v: string | undefined, def: number, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  if (v === undefined) return def;
  const m = /^(\d+)([kKmMgG]?)$/.exec(v.trim());
  if (!m) throw new UsageError(`--${name} takes a whole number, got '${v}'`);
  const mult = { "": 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[m[2]!.toLowerCase() as "" | "k" | "m" | "g"];
  const n = Number(m[1]) * mult;
  if (n < min || n > max) throw new UsageError(`--${name} must be between ${min} and ${max}, got ${v}`);
  return n;
}

/** A number of seconds, decimals allowed (`--flow-timeout 1.5`), checked against [min, max]. */
function seconds(name: string, v: string | undefined, def: number, min: number, max: number): number {
  if (v === undefined) return def;
  if (!/^\d+(\.\d+)?$/.test(v.trim())) throw new UsageError(`--${name} takes a number of seconds, got '${v}'`);
  const n = Number(v);
  if (n < min || n > max) throw new UsageError(`--${name} must be between ${min} and ${max} seconds, got ${v}`);
  return n;
}

/**
 * Checks `--upstream-proxy URL`: `http://[user:pass@]host[:port]` (port 80 when left out; user and password
 * percent-encoded as in any URL). Returns the parts and `url`, the normalised URL to put in
 * ServiceConfig.upstreamProxy, and `display`, the URL with the password replaced by ***.
 * Throws UsageError naming the flag; the message never contains the password.
 */
export function parseUpstreamProxy(url: string): ProxyUrl {
  try {
    return parseProxyUrl(url);
  } catch (e) {
    if (e instanceof ProxyConfigError) throw new UsageError(`--upstream-proxy: ${e.message}`);
    throw e;
  }
}

/**
 * Checks `--upstream-no-proxy LIST` (one comma-separated string, or the values of a repeated flag) and returns the
 * normalised entries for ServiceConfig.upstreamNoProxy. Throws UsageError naming the first bad entry.
 */
export function parseUpstreamNoProxy(list: string | readonly string[] | undefined): string[] {
  if (list === undefined) return [];
  try {
    return parseNoProxyList(list);
  } catch (e) {
    if (e instanceof ProxyConfigError) throw new UsageError(`--upstream-no-proxy: ${e.message}`);
    throw e;
  }
}

/** The options of `tapwire start`; `tapwire run` takes them too, for the service it embeds. */
export const START_OPTIONS = {
  "data-dir": { type: "string" },
  port: { type: "string" },
  "listen-host": { type: "string" },
  "api-port": { type: "string" },
  "body-limit": { type: "string" },
  "max-entries": { type: "string" },
  "max-store-size": { type: "string" },
  "upstream-insecure": { type: "boolean" },
  "upstream-ca": { type: "string", multiple: true },
  "upstream-proxy": { type: "string" },
  "upstream-no-proxy": { type: "string", multiple: true },
  "intercept-timeout": { type: "string" },
  "connect-timeout": { type: "string" },
  "idle-timeout": { type: "string" },
  "client-idle-timeout": { type: "string" },
  "client-header-timeout": { type: "string" },
  "max-connections": { type: "string" },
  "mock-port": { type: "string" },
  "script-timeout": { type: "string" },
  "script-memory": { type: "string" },
  proto: { type: "string", multiple: true },
  "no-flow-runner": { type: "boolean" },
  "no-http2": { type: "boolean" },
  "flow-timeout": { type: "string" },
} as const;

/** The values parseArgs gives for START_OPTIONS. */
export type StartValues = { [K in keyof typeof START_OPTIONS]?: (typeof START_OPTIONS)[K] extends { multiple: true } ? string[] : (typeof START_OPTIONS)[K] extends { type: "boolean" } ? boolean : string };

/** Turns parsed start options into a service configuration (range checks are UsageErrors). */
export function startConfig(values: StartValues, env: Record<string, string | undefined> = process.env, defaults: { proxyPort?: number } = {}): ServiceConfig {
  const upstreamCa = values["upstream-ca"] ?? [];
  for (const f of upstreamCa) if (!existsSync(f)) throw new UsageError(`--upstream-ca: no such file ${f}`);
  const protoDirs = values.proto ?? [];
  for (const d of protoDirs) if (!existsSync(d)) throw new UsageError(`--proto: no such folder ${d}`);
  return {
    dataDir: resolveDataDir(values["data-dir"], env),
    apiPort: int("api-port", values["api-port"], DEFAULTS.apiPort, 0, 65535),
    proxyPort: int("port", values.port, defaults.proxyPort ?? DEFAULTS.proxyPort, 0, 65535),
    listenHost: values["listen-host"] ?? DEFAULTS.listenHost,
    bodyLimit: int("body-limit", values["body-limit"], DEFAULTS.bodyLimit, 0),
    maxEntries: int("max-entries", values["max-entries"], DEFAULTS.maxEntries, 1),
    maxStoreBytes: int("max-store-size", values["max-store-size"], DEFAULTS.maxStoreBytes, 1024 * 1024),
    upstreamInsecure: values["upstream-insecure"] ?? false,
    upstreamCa,
    upstreamProxy: values["upstream-proxy"] === undefined ? null : parseUpstreamProxy(values["upstream-proxy"]).url,
    upstreamNoProxy: parseUpstreamNoProxy(values["upstream-no-proxy"]),
    interceptTimeoutSec: int("intercept-timeout", values["intercept-timeout"], DEFAULTS.interceptTimeoutSec, 1),
    connectTimeoutSec: int("connect-timeout", values["connect-timeout"], DEFAULTS.connectTimeoutSec, 1),
    idleTimeoutSec: int("idle-timeout", values["idle-timeout"], DEFAULTS.idleTimeoutSec, 1),
    clientIdleTimeoutSec: int("client-idle-timeout", values["client-idle-timeout"], DEFAULTS.clientIdleTimeoutSec, 1),
    clientHeaderTimeoutSec: int("client-header-timeout", values["client-header-timeout"], DEFAULTS.clientHeaderTimeoutSec, 1),
    maxConnections: int("max-connections", values["max-connections"], DEFAULTS.maxConnections, 1),
    mockPort: values["mock-port"] === undefined ? null : int("mock-port", values["mock-port"], 9100, 0, 65535),
    scriptTimeoutMs: int("script-timeout", values["script-timeout"], DEFAULTS.scriptTimeoutMs, 10, 600_000),
    scriptMemoryBytes: int("script-memory", values["script-memory"], DEFAULTS.scriptMemoryBytes, 1024 * 1024, 4 * 1024 ** 3),
    protoDirs,
    flowRunner: !values["no-flow-runner"],
    http2: !values["no-http2"],
    flowTimeoutMs: seconds("flow-timeout", values["flow-timeout"], DEFAULTS.flowTimeoutMs / 1000, 0.1, 3600) * 1000,
  };
}

/** `tapwire start`'s arguments as a configuration; UsageError on a bad or unknown flag. */
export function parseStartArgs(argv: string[], env: Record<string, string | undefined> = process.env): ServiceConfig {
  let values: StartValues;
  try {
    ({ values } = parseArgs({ args: argv, strict: true, allowPositionals: false, options: START_OPTIONS }));
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  return startConfig(values, env);
}
