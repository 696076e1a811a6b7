import { Elysia } from "elysia";
import { checkQueryNames } from "../../api/errors.ts";

/** One event of GET /api/v1/events. */
export interface UiEvent {
  event: "traffic" | "intercepts";
  data: Record<string, unknown>;
}

export interface EventSources {
  /** Be told when a flow is stored as a traffic entry; returns an unsubscribe. */
  onStored(listener: (flow: unknown, id: number) => void): () => void;
  /** Be told when the list of paused flows changes; returns an unsubscribe. */
  onInterceptsChanged(listener: (count: number) => void): () => void;
}

/** How often, at most, one kind of event is sent (a burst of 10,000 entries a second is one event per 100 ms). */
export const COALESCE_MS = 100;
/** A comment line this often: a reader that went away is noticed within this long, and no proxy in between takes the stream for idle. */
export const KEEPALIVE_MS = 5_000;

const enc = new TextEncoder();

/**
 * Fans out what happens in the service to the open event streams, coalesced: `traffic` carries the newest stored
 * entry id (`last_id`; the reader asks GET /traffic?since_id=... for the rest), `intercepts` the number of paused
 * flows (the reader asks GET /intercepts). Knows nothing of HTTP beyond the bytes of the text/event-stream format.
 */
export class EventHub {
  private readonly subscribers = new Set<(chunk: Uint8Array) => void>();
  /** How to end each open stream (stop() ends them all, or the API server would wait for them). */
  private readonly closers = new Set<() => void>();
  private lastId = 0;
  private paused = 0;
  private readonly timers: Partial<Record<UiEvent["event"], ReturnType<typeof setTimeout>>> = {};
  private readonly unsubscribe: (() => void)[];

  constructor(sources: EventSources) {
    this.unsubscribe = [
      sources.onStored((_f, id) => {
        if (id > this.lastId) this.lastId = id;
        this.schedule("traffic");
      }),
      sources.onInterceptsChanged((n) => {
        this.paused = n;
        this.schedule("intercepts");
      }),
    ];
  }

  get size(): number {
    return this.subscribers.size;
  }

  private payload(event: UiEvent["event"]): Record<string, unknown> {
    return event === "traffic" ? { last_id: this.lastId } : { paused: this.paused };
  }

  private schedule(event: UiEvent["event"]): void {
    if (this.timers[event] || this.subscribers.size === 0) return;
    this.timers[event] = setTimeout(() => {
      delete this.timers[event];
      this.broadcast(event, this.payload(event));
    }, event === "intercepts" ? 0 : COALESCE_MS);
  }

  private broadcast(event: string, data: unknown): void {
    const chunk = enc.encode(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    for (const s of this.subscribers) s(chunk);
  }

  /** A text/event-stream body: a `hello` event at once, then events until the reader goes away. */
  stream(signal: AbortSignal): ReadableStream<Uint8Array> {
    let send: ((c: Uint8Array) => void) | null = null;
    let keepAlive: ReturnType<typeof setInterval> | null = null;
    let end: (() => void) | null = null;
    const close = () => {
      if (send) this.subscribers.delete(send);
      if (keepAlive) clearInterval(keepAlive);
      if (end) this.closers.delete(end);
      send = null;
      keepAlive = null;
    };
    return new ReadableStream<Uint8Array>({
      start: (controller) => {
        send = (c) => {
          try {
            // a reader that stopped reading is dropped rather than buffered without bound
            if ((controller.desiredSize ?? 0) < -1_000_000) throw new Error("reader too slow");
            controller.enqueue(c);
          } catch {
            close();
            try {
              controller.close();
            } catch {}
          }
        };
        this.subscribers.add(send);
        end = () => {
          close();
          try {
            controller.close();
          } catch {}
        };
        this.closers.add(end);
        controller.enqueue(enc.encode(`retry: 1000\nevent: hello\ndata: ${JSON.stringify({ traffic: this.payload("traffic"), intercepts: this.payload("intercepts") })}\n\n`));
        keepAlive = setInterval(() => send?.(enc.encode(": keep-alive\n\n")), KEEPALIVE_MS);
        signal.addEventListener("abort", () => end?.());
      },
      cancel: close,
    }, { highWaterMark: 0 });
  }

  stop(): void {
    for (const u of this.unsubscribe) u();
    for (const t of Object.values(this.timers)) clearTimeout(t);
    for (const end of [...this.closers]) end();
    this.subscribers.clear();
  }
}

/**
 * GET /api/v1/events (extension): server-sent events for the web UI and other watchers. It needs the bearer token
 * like every route; EventSource cannot send a header, so the UI reads the stream with fetch. See docs/api.md.
 */
export function eventsRoutes(hub: EventHub) {
  return new Elysia({ name: "events", prefix: "/api/v1/events" }).get(
    "/",
    ({ request }) => {
      checkQueryNames(request.url, []);
      return new Response(hub.stream(request.signal), {
        headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-store", "x-accel-buffering": "no" },
      });
    },
    {
      detail: {
        tags: ["events"],
        summary:
          "Server-sent events (text/event-stream): `hello` at once, `traffic` {last_id} when entries are stored, `intercepts` {paused} when the paused list changes; coalesced to one per 100 ms",
      },
    },
  );
}
