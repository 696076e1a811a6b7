import type { WsMessage, WsMessageOpcode } from "../../core/ws/frame-parser.ts";

/** Spec section 8: the WebSocket store's limits. */
export interface WsLimits {
  /** Connection records kept; opening one more evicts the oldest (lowest connId). */
  maxConnections: number;
  /** Frames kept per connection; storing one more evicts that connection's oldest frame. */
  maxFrames: number;
  /** Preview bytes kept per connection (see `frameCost`); going over evicts that connection's oldest frames. */
  maxBytes: number;
  /** Payload bytes of one frame kept for its preview; past it the frame is `truncated`. */
  previewCap: number;
}

export const WS_LIMITS: Readonly<WsLimits> = {
  maxConnections: 100,
  maxFrames: 500,
  maxBytes: 2 * 1024 * 1024,
  previewCap: 64 * 1024,
};

/** One stored frame (spec 2.21) plus the parser's extensions. */
export interface WsFrameRecord {
  dir: "in" | "out";
  opcode: WsMessageOpcode;
  text: string;
  sizeBytes: number;
  truncated: boolean;
  ts: number;
  closeCode?: number;
  closeReason?: string;
  compressed?: boolean;
  wireSizeBytes?: number;
  /** Extension: inflating stopped at the budget, sizeBytes is a lower bound. */
  sizeAtLeast?: boolean;
}

/** The connection record as the API returns it (spec 2.20 plus extensions). */
export interface WsConnectionView {
  connId: number;
  logId: number | null;
  url: string;
  openedTs: number;
  closed: boolean;
  closedTs: number | null;
  frameCount: number;
  framesSeen: number;
  compressed: boolean;
  error: string | null;
  /** Extension: present (true) on a record read from a HAR file rather than observed. */
  imported?: boolean;
}

/** What a stored frame counts against the per-connection byte limit: the payload bytes its preview covers. */
export function frameCost(f: { sizeBytes: number }, previewCap: number): number {
  return Math.min(f.sizeBytes, previewCap);
}

/** One observed WebSocket connection and its most recent frames. */
export class WsConnection {
  closed = false;
  closedTs: number | null = null;
  /** Every frame observed on the connection, stored or not (evicted, or seen while capture was off). */
  framesSeen = 0;
  /** The first parse failure (after it, that direction is no longer recorded); null while parsing is fine. */
  error: string | null = null;
  /** Set once the store dropped this record; its tap then stops observing. */
  evicted = false;
  /** A record read from a HAR file (WsStore.importConnection) rather than observed. */
  imported = false;
  private frames: WsFrameRecord[] = [];
  private head = 0;
  /** Sum of `frameCost` over the stored frames. */
  bytes = 0;
  private entryId: number | null = null;

  constructor(
    readonly connId: number,
    readonly url: string,
    readonly openedTs: number,
    /** Where the handshake's traffic entry id appears once capture stored it (read lazily: recording may finish later). */
    private logIdSource: (() => number | null) | null,
    readonly compressed: boolean,
    private readonly limits: WsLimits,
  ) {}

  get logId(): number | null {
    if (this.entryId === null && this.logIdSource) {
      this.entryId = this.logIdSource();
      if (this.entryId !== null) this.logIdSource = null;
    }
    return this.entryId;
  }

  get frameCount(): number {
    return this.frames.length - this.head;
  }

  /** Frames currently stored, oldest first. */
  items(): WsFrameRecord[] {
    return this.frames.slice(this.head);
  }

  markClosed(ts: number): void {
    if (this.closed) return;
    this.closed = true;
    this.closedTs = ts;
  }

  add(f: WsFrameRecord): void {
    this.frames.push(f);
    this.bytes += frameCost(f, this.limits.previewCap);
    while (this.frameCount > this.limits.maxFrames || (this.bytes > this.limits.maxBytes && this.frameCount > 1)) {
      const old = this.frames[this.head]!;
      this.frames[this.head] = undefined as unknown as WsFrameRecord;
      this.head++;
      this.bytes -= frameCost(old, this.limits.previewCap);
    }
    // compact the evicted prefix now and then, so the array does not grow without bound
    if (this.head > 64 && this.head * 2 > this.frames.length) {
      this.frames = this.frames.slice(this.head);
      this.head = 0;
    }
  }

  /** Drops every stored frame (eviction of the whole record). */
  clear(): void {
    this.frames = [];
    this.head = 0;
    this.bytes = 0;
  }

  view(): WsConnectionView {
    return {
      connId: this.connId,
      logId: this.logId,
      url: this.url,
      openedTs: this.openedTs,
      closed: this.closed,
      closedTs: this.closedTs,
      frameCount: this.frameCount,
      framesSeen: this.framesSeen,
      compressed: this.compressed,
      error: this.error,
      ...(this.imported ? { imported: true } : {}),
    };
  }
}

/** Connection records in opening order, bounded by `limits.maxConnections`. */
export class WsStore {
  private readonly conns = new Map<number, WsConnection>();
  private nextId = 1;

  constructor(readonly limits: WsLimits = WS_LIMITS) {}

  open(url: string, logIdSource: (() => number | null) | null, compressed: boolean, ts = Date.now()): WsConnection {
    const c = new WsConnection(this.nextId++, url, ts, logIdSource, compressed, this.limits);
    this.conns.set(c.connId, c);
    while (this.conns.size > this.limits.maxConnections) {
      // Map iteration follows insertion order: the first key is the oldest connection
      const oldest = this.conns.keys().next().value!;
      const old = this.conns.get(oldest)!;
      this.conns.delete(oldest);
      old.evicted = true;
      old.clear();
    }
    return c;
  }

  /**
   * A closed connection read from a HAR file: its frames in the order given (the usual limits apply), its logId the
   * imported handshake entry, closed at its last frame (or when it opened).
   */
  importConnection(url: string, logId: number, openedTs: number, frames: readonly WsFrameRecord[]): WsConnection {
    const c = this.open(url, () => logId, false, openedTs);
    c.imported = true;
    for (const f of frames) {
      c.framesSeen++;
      c.add(f);
    }
    c.markClosed(frames.length ? Math.max(openedTs, frames[frames.length - 1]!.ts) : openedTs);
    return c;
  }

  get(connId: number): WsConnection | undefined {
    return this.conns.get(connId);
  }

  /** Newest first. */
  list(): WsConnection[] {
    return [...this.conns.values()].reverse();
  }

  get size(): number {
    return this.conns.size;
  }

  clear(): void {
    for (const c of this.conns.values()) {
      c.evicted = true;
      c.clear();
    }
    this.conns.clear();
  }
}

/** A parser message as a stored frame, stamped now. */
export function toFrameRecord(dir: "in" | "out", m: WsMessage, ts: number): WsFrameRecord {
  const f: WsFrameRecord = { dir, opcode: m.opcode, text: m.text, sizeBytes: m.sizeBytes, truncated: m.truncated, ts };
  if (m.closeCode !== undefined) f.closeCode = m.closeCode;
  if (m.closeReason !== undefined) f.closeReason = m.closeReason;
  if (m.compressed) {
    f.compressed = true;
    f.wireSizeBytes = m.wireSizeBytes;
    if (m.sizeAtLeast) f.sizeAtLeast = true;
  }
  return f;
}
