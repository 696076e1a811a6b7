import type { RoutePlugin } from "../api/app.ts";
import type { CaptureControl } from "../features/capture/control.ts";
import type { ProxyContext, WebSocketTap } from "../core/proxy/context.ts";
import type { Addon } from "../pipeline/addon.ts";
import type { Flow } from "../pipeline/flow.ts";
import type { CaptureStore } from "../store/capture-store.ts";
import type { ServiceConfig } from "./config.ts";

export type Log = (line: string) => void;

/** What every feature module is given when the service builds it. */
export interface FeatureContext {
  dataDir: string;
  config: ServiceConfig;
  log: Log;
  /** Reports a state file that was unreadable and moved aside (JsonState's onCorrupt). */
  onCorrupt: (path: string, movedTo: string, reason: string) => void;
  store: CaptureStore;
  capture: CaptureControl;
  /** The running proxy's shared context (pipeline, pool, ...), for features that send requests themselves. */
  proxy: () => ProxyContext;
  /** Whether a client label is on the ignored-clients list (its traffic is not recorded). */
  isIgnoredClient: (label: string) => boolean;
  /** Be told when a flow was stored as a traffic entry; returns an unsubscribe. */
  onStored: (listener: (flow: Flow, id: number) => void) => () => void;
  /** Another feature by name, once every feature is built (call it from start() or later, not from the factory). */
  feature: <T extends Feature = Feature>(name: string) => T;
  /** The management API's bearer token: never stored in a captured entry (a request through the proxy to the API). */
  apiToken?: string;
}

/**
 * One feature of tapwire (capture, ignore lists, breakpoints, map local, ...): its pipeline addon, its API route
 * group(s), and anything it runs on its own (a listener, a file watcher). Features are listed, in pipeline order,
 * in src/features/index.ts.
 */
export interface Feature {
  readonly name: string;
  /** Runs in the feature's place in the pipeline order. */
  addon?: Addon;
  /** Runs after every other addon (capture's recording step). */
  lastAddon?: Addon;
  routes?: RoutePlugin[];
  /** Called once the proxy listens. */
  start?(): void | Promise<void>;
  /** Called before the proxy closes; must release listeners, timers and watchers. */
  stop?(): void | Promise<void>;
  /** Called after a 101 to a WebSocket upgrade; may return a tap that observes the relayed bytes. */
  webSocketOpened?(flow: Flow): WebSocketTap | null;
  /** Extra fields for GET /health. */
  health?(): Record<string, unknown>;
}

export type FeatureFactory = (ctx: FeatureContext) => Feature;
