import { join } from "node:path";
import { conflict } from "../../api/errors.ts";
import type { Feature, FeatureContext } from "../../service/feature.ts";
import { MockListener, PortInUseError } from "./listener.ts";
import { MockMatcher } from "./matcher.ts";
import { DEFAULT_MOCK_PORT, mockRoutes, type MockControl } from "./routes.ts";
import { MockRuleSchema, MockRuleStore } from "./schema.ts";

export interface MockFeature extends Feature {
  readonly store: MockRuleStore;
  readonly matcher: MockMatcher;
  readonly listener: MockListener;
  readonly control: MockControl;
}

/**
 * The Mock Server (spec 2.14, 4.12): a standalone HTTP/1.1 listener on 127.0.0.1 (default port 9100) answering
 * with canned responses from the Mock rule family (state in mock.json), started and stopped through the API or at
 * launch with --mock-port. Its requests are recorded in traffic while capture is on. It has no pipeline addon:
 * proxied traffic never reaches it.
 */
export function mockFeature(ctx: FeatureContext): MockFeature {
  const store = new MockRuleStore(join(ctx.dataDir, "mock.json"), MockRuleSchema, { onCorrupt: ctx.onCorrupt });
  const matcher = new MockMatcher(store, (rule, why) => ctx.log(`tapwire: mock rule '${rule.id}' ${why}`));
  const listener = new MockListener({
    matcher,
    masterEnabled: () => store.enabled,
    capturing: () => ctx.capture.capturing,
    record: (e) => {
      if (!ctx.isIgnoredClient(e.client_addr)) ctx.store.add(e);
    },
    bodyLimit: ctx.config.bodyLimit,
    log: ctx.log,
  });

  const status = () => ({ running: listener.running, port: listener.running || listener.port !== 0 ? listener.port : DEFAULT_MOCK_PORT });
  const control: MockControl = {
    status,
    start(port) {
      if (listener.running) throw conflict(`the mock listener is already running on port ${listener.port}`);
      try {
        listener.start(port);
      } catch (e) {
        if (e instanceof PortInUseError) throw conflict(`cannot start the mock listener: port ${port} is in use`);
        throw e;
      }
      ctx.log(`tapwire: mock listener on http://127.0.0.1:${listener.port}`);
      return status();
    },
    stop() {
      listener.stop();
    },
  };

  return {
    name: "mock",
    store,
    matcher,
    listener,
    control,
    routes: mockRoutes({ store, matcher, control }),
    start() {
      if (ctx.config.mockPort === null) return;
      try {
        control.start(ctx.config.mockPort);
      } catch (e) {
        throw new Error(`--mock-port ${ctx.config.mockPort}: ${(e as Error).message}`);
      }
    },
    stop() {
      listener.stop();
    },
    health() {
      return listener.running ? { mock_port: listener.port } : {};
    },
  };
}
