import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname } from "node:path";
import { buildApi, type ApiApp, type RoutePlugin } from "../api/app.ts";
import { ApiServer } from "../api/server.ts";
import type { CaptureAddon } from "../features/capture/addon.ts";
import { CaptureControl } from "../features/capture/control.ts";
import { ClientLabeler } from "../core/proxy/client-label.ts";
import type { ProxyContext } from "../core/proxy/context.ts";
import { ProxyServer } from "../core/proxy/server.ts";
import { UpstreamPool } from "../core/proxy/upstream.ts";
import { H2UpstreamPool } from "../core/proxy/h2-upstream.ts";
import { ParentProxy } from "../core/proxy/parent-proxy.ts";
import { loadOrCreateCASync, type CA } from "../core/tls/ca.ts";
import { LeafCertCache } from "../core/tls/leaf.ts";
import { healthRoutes } from "../features/health/routes.ts";
import { FEATURES } from "../features/index.ts";
import { orderedAddons } from "../pipeline/order.ts";
import { Pipeline } from "../pipeline/pipeline.ts";
import { CaptureStore } from "../store/capture-store.ts";
import { replayEntry } from "../features/traffic/replay.ts";
import { trafficRoutes } from "../features/traffic/routes.ts";
import { webUi } from "../features/ui/feature.ts";
import type { InterceptService } from "../features/breakpoints/intercepts.ts";
import { VERSION } from "../version.ts";
import { adminRoutes } from "./admin-routes.ts";
import { DEFAULTS, type ServiceConfig } from "./config.ts";
import { ensureDataDir, prepareCaptureDb } from "./datadir.ts";
import type { Feature, FeatureContext } from "./feature.ts";
import { acquireInstanceLock, removeHandshake, writeHandshake } from "./handshake.ts";

export type { Log } from "./feature.ts";
type Log = (line: string) => void;

/**
 * The composition root: owns the data directory, the capture store, the proxy, the API server and the
 * handshake file, and starts/stops them in order.
 */
export class TapwireService {
  readonly version = VERSION;
  readonly token = randomBytes(32).toString("hex");
  readonly capture = new CaptureControl(true);
  startedAt = 0;
  store!: CaptureStore;
  ca!: CA;
  proxyCtx!: ProxyContext;
  /** Every feature, in pipeline order (src/features/index.ts). */
  features: Feature[] = [];
  private proxy: ProxyServer | null = null;
  private api: ApiServer | null = null;
  /** The Elysia app behind the API (tests enumerate its routes). */
  app!: ApiApp;
  private releaseLock: (() => void) | null = null;
  private web: ReturnType<typeof webUi> | null = null;
  private stopping: Promise<void> | null = null;
  /** Resolves when the service has stopped (by signal, API or stop()). */
  readonly stopped: Promise<void>;
  private resolveStopped!: () => void;

  constructor(readonly config: ServiceConfig, private readonly log: Log = (l) => process.stderr.write(l + "\n")) {
    this.stopped = new Promise((r) => (this.resolveStopped = r));
  }

  get apiPort(): number {
    return this.api?.port ?? 0;
  }

  get proxyPort(): number | null {
    return this.proxy?.port || null;
  }

  async start(): Promise<void> {
    const { dataDir } = this.config;
    ensureDataDir(dataDir);
    this.releaseLock = acquireInstanceLock(dataDir);
    try {
      this.startedAt = Date.now();
      const db = prepareCaptureDb(dataDir);
      if (db.moved.length) this.log(`tapwire: moved ${db.moved.join(", ")} from ${dataDir} to ${dirname(db.path)}`);
      this.store = await CaptureStore.open(db.path, { maxEntries: this.config.maxEntries, maxStoreBytes: this.config.maxStoreBytes, deferReader: true });
      if (this.store.recoveredFrom) {
        const sv = this.store.salvage;
        const counts = sv ? `; ${sv.saved} entries were read back from it, ${sv.lost} could not be read and were left behind` : "";
        this.log(`tapwire: capture database was corrupt; moved aside to ${this.store.recoveredFrom}${counts}`);
      }
      if (this.store.wasEmpty) this.log(`tapwire: capture database ${db.path} was an empty file (0 bytes): the capture starts empty`);
      this.startProxy();
      for (const f of this.features) await f.start?.();
      this.app = buildApi({ token: this.token, port: () => this.apiPort, version: this.version, routes: this.routes() });
      this.api = new ApiServer({ hostname: "127.0.0.1", port: this.config.apiPort, handler: this.app.fetch, log: this.log });
      this.api.listen();
      writeHandshake(dataDir, {
        port: this.apiPort,
        token: this.token,
        pid: process.pid,
        version: this.version,
        started_at: this.startedAt,
        proxy_port: this.proxyPort,
      });
      // the store's query Worker boots now that start-up is done (queries run on this thread until it is ready)
      this.store.startReaderWorker();
    } catch (e) {
      await this.teardown();
      throw e;
    }
    this.log(`tapwire ${this.version}: proxy ${this.config.listenHost}:${this.proxyPort} · API http://127.0.0.1:${this.apiPort}/api/v1 · data ${dataDir}`);
  }

  /** The feature with this name (tests and the composition root reach into features this way). */
  feature<T extends Feature = Feature>(name: string): T {
    const f = this.features.find((x) => x.name === name);
    if (!f) throw new Error(`no feature '${name}'`);
    return f as T;
  }

  private get captureAddon(): CaptureAddon {
    return this.feature("capture").addon as CaptureAddon;
  }

  private startProxy(): void {
    const { dataDir } = this.config;
    const onCorrupt = (path: string, movedTo: string, reason: string) => this.log(`tapwire: ${path} was unreadable (${reason}); moved aside to ${movedTo}`);
    this.ca = loadOrCreateCASync(dataDir);
    if (this.ca.created) this.log(`tapwire: generated a new CA: ${this.ca.certPath} (trust it in your clients to intercept HTTPS)`);
    const fctx: FeatureContext = {
      dataDir,
      config: this.config,
      log: this.log,
      onCorrupt,
      store: this.store,
      capture: this.capture,
      proxy: () => this.proxyCtx,
      onStored: (l) => this.captureAddon.onStored(l),
      apiToken: this.token,
      isIgnoredClient: (label) => this.feature<Feature & { ignoredClients: { has(l: string): boolean } }>("capture").ignoredClients.has(label),
      feature: (name) => this.feature(name),
    };
    this.features = FEATURES.map((make) => make(fctx));
    const extraCa = this.config.upstreamCa.map((f) => readFileSync(f, "utf8"));
    // node:tls (with node:net, ~10 ms to load) only with --upstream-ca: the system roots plus the given ones
    const upstreamCa = extraCa.length ? [...(require("node:tls") as typeof import("node:tls")).rootCertificates, ...extraCa] : undefined;
    const pool = new UpstreamPool({
      rejectUnauthorized: !this.config.upstreamInsecure,
      ca: upstreamCa,
      connectTimeoutMs: this.config.connectTimeoutSec * 1000,
      idleTimeoutSec: this.config.idleTimeoutSec,
      maxIdlePerKey: 64,
      parent: this.parentProxy(),
    });
    // HTTP/2 to origins that pick it; not through a parent proxy (the HTTP/2 pool connects directly)
    const h2pool = pool.opts.parent || this.config.http2 === false ? null : new H2UpstreamPool({ rejectUnauthorized: !this.config.upstreamInsecure, ca: upstreamCa, connectTimeoutMs: this.config.connectTimeoutSec * 1000 });
    const labeler = new ClientLabeler();
    const wsFeatures = this.features.filter((f) => f.webSocketOpened);
    this.proxyCtx = {
      pipeline: new Pipeline(orderedAddons(this.features)),
      pool,
      h2pool,
      http2: this.config.http2 !== false,
      leafCerts: new LeafCertCache(this.ca),
      bodyLimit: this.config.bodyLimit,
      maxBufferedBody: Math.max(64 * 1024 * 1024, this.config.bodyLimit),
      label: (addr, port, alive) => labeler.resolve(addr, port, this.proxy?.port ?? 0, alive),
      sessions: new Set(),
      clientIdleSec: this.config.clientIdleTimeoutSec ?? DEFAULTS.clientIdleTimeoutSec,
      clientHeaderSec: this.config.clientHeaderTimeoutSec ?? DEFAULTS.clientHeaderTimeoutSec,
      maxConnections: this.config.maxConnections ?? DEFAULTS.maxConnections,
      durable: (now) => this.store.durable(now),
      webSocketOpened: wsFeatures.length ? (flow) => {
        for (const f of wsFeatures) {
          const tap = f.webSocketOpened!(flow);
          if (tap) return tap;
        }
        return null;
      } : undefined,
    };
    this.proxy = new ProxyServer(this.proxyCtx);
    this.proxy.listen(this.config.listenHost, this.config.proxyPort);
  }

  /** The parent proxy of --upstream-proxy (an invalid one stops the start with its reason), logged without credentials. */
  private parentProxy(): ParentProxy | null {
    const url = this.config.upstreamProxy ?? null;
    if (url === null) return null;
    let parent: ParentProxy;
    try {
      parent = ParentProxy.from(url, this.config.upstreamNoProxy ?? []);
    } catch (e) {
      const msg = (e as Error).message;
      throw new Error(`${msg.startsWith("no-proxy entry") ? "--upstream-no-proxy" : "--upstream-proxy"}: ${msg}`);
    }
    this.log(`tapwire: ${parent.describe()}`);
    return parent;
  }

  private routes(): RoutePlugin[] {
    return [
      healthRoutes({
        version: this.version,
        startedAt: this.startedAt,
        apiPort: () => this.apiPort,
        proxyPort: () => this.proxyPort,
        extra: () => Object.assign({}, ...this.features.map((f) => f.health?.() ?? {})),
        capture: this.capture,
        store: this.store,
      }),
      trafficRoutes({ store: this.store, replay: (e) => replayEntry(this.proxyCtx, this.captureAddon, e) }),
      ...this.features.flatMap((f) => f.routes ?? []),
      ...(this.web = webUi({
        version: this.version,
        onStored: (l) => this.captureAddon.onStored(l),
        onInterceptsChanged: (l) => this.feature<Feature & { intercepts: InterceptService }>("breakpoints").intercepts.onChange(l),
      })).routes,
      adminRoutes(() => void this.stop()),
    ];
  }

  /** Close listeners, flush state, remove the handshake. Idempotent. */
  stop(): Promise<void> {
    this.stopping ??= this.teardown().then(() => this.resolveStopped());
    return this.stopping;
  }

  private async teardown(): Promise<void> {
    this.web?.stop();
    for (const f of [...this.features].reverse()) {
      try {
        await f.stop?.();
      } catch (e) {
        this.log(`tapwire: stopping ${f.name} failed: ${(e as Error).message}`);
      }
    }
    this.proxy?.stop();
    this.proxy = null;
    if (this.api) {
      await this.api.stop();
      this.api = null;
    }
    try {
      await this.store?.close();
    } catch (e) {
      this.log(`tapwire: closing the capture store failed: ${(e as Error).message}`);
    }
    removeHandshake(this.config.dataDir);
    this.releaseLock?.();
    this.releaseLock = null;
  }
}
