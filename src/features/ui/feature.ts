import type { RoutePlugin } from "../../api/app.ts";
import { EventHub, eventsRoutes, type EventSources } from "./events.ts";
import { uiRoutes } from "./routes.ts";

/**
 * The web UI (extension): the page under /ui/ and the event stream GET /api/v1/events it listens to. The service
 * mounts it itself (it listens to capture and to the paused flows of breakpoints, which no single feature owns).
 */
export function webUi(opts: { version: string } & EventSources): { routes: RoutePlugin[]; hub: EventHub; stop(): void } {
  const hub = new EventHub(opts);
  return { routes: [uiRoutes(opts.version), eventsRoutes(hub)], hub, stop: () => hub.stop() };
}
