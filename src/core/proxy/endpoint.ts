import type { Socket } from "bun";

/** High-water mark: above this many queued bytes a writer should pause its source. */
export const HIGH_WATER = 1024 * 1024;
/** Behind a throttle the source is paused much earlier, so the limit is felt at once. */
const THROTTLED_HIGH_WATER = 64 * 1024;
/** Largest slice released through a throttle at once. */
const THROTTLE_SLICE = 16 * 1024;
/** Socket reads at least this large are given back to the allocator once written (see Endpoint.release). */
const RELEASE_MIN = 16 * 1024;

/** A rate limit on one direction of a connection (see src/throttle). */
export interface Throttle {
  /** Take up to n bytes' worth of allowance now; returns how many may be written (0..n). */
  take(n: number): number;
  /** Milliseconds until n bytes (or some useful part of them) may be taken. */
  waitMs(n: number): number;
}

/**
 * A thin wrapper around one Bun socket that never drops bytes: what the kernel does not take now is queued and
 * written on `drain`. `write` returns false when the caller should pause its source until `onDrain` fires.
 */
export class Endpoint {
  private queue: Uint8Array[] = [];
  queued = 0;
  private ending = false;
  closed = false;
  private paused = false;
  /** Called once the queue is empty again after a write returned false. */
  onDrain: (() => void) | null = null;
  /** Rate limit for what is written here; bytes wait in `tq` and leave as the throttle allows. */
  throttle: Throttle | null = null;
  private tq: Uint8Array[] = [];
  private tqBytes = 0;
  private pumpTimer: ReturnType<typeof setTimeout> | null = null;
  private throttleFull = false;
  private corked: Uint8Array[] | null = null;
  /** Called when a paused endpoint is resumed (the upstream silence clock restarts then). */
  onResume: (() => void) | null = null;
  /**
   * Stall limit, ms: when bytes wait for the peer and it accepts none of them for this long, `onStall` is called
   * (0 = no limit). Only bytes the kernel refused count: bytes a throttle holds back are tapwire's own doing.
   */
  stallMs = 0;
  onStall: (() => void) | null = null;
  private lastProgress = 0;
  private stallTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(public socket: Socket<any>) {}

  /** Bytes are queued for the peer: watch that it keeps accepting them. */
  private watchStall(): void {
    if (this.stallMs <= 0 || this.stallTimer) return;
    this.stallTimer = setTimeout(() => this.checkStall(), this.stallMs);
  }

  /** Nothing waits for the peer any more (or the socket is gone): no timer keeps this endpoint alive. */
  private stopStallWatch(): void {
    if (this.stallTimer) clearTimeout(this.stallTimer);
    this.stallTimer = null;
  }

  /** The socket closed (by the peer or the OS): drop what was queued for it and every timer. */
  markClosed(): void {
    this.closed = true;
    this.queue = [];
    this.queued = 0;
    this.tq = [];
    this.tqBytes = 0;
    if (this.pumpTimer) clearTimeout(this.pumpTimer);
    this.pumpTimer = null;
    this.stopStallWatch();
  }

  private checkStall(): void {
    this.stallTimer = null;
    if (this.closed || this.queued === 0 || this.stallMs <= 0) return;
    const left = this.lastProgress + this.stallMs - performance.now();
    if (left > 0) {
      this.stallTimer = setTimeout(() => this.checkStall(), left);
      return;
    }
    this.onStall?.();
  }

  /** Collect writes until uncork(), then send them as one write (one syscall, one TLS record). */
  cork(): void {
    this.corked ??= [];
  }

  /** Drop what was corked (nothing of it reached the peer). Returns true if there was a cork. */
  discardCork(): boolean {
    if (this.corked === null) return false;
    this.corked = null;
    return true;
  }

  uncork(): boolean {
    const parts = this.corked;
    this.corked = null;
    if (!parts || parts.length === 0) return this.queued < HIGH_WATER;
    return this.write(concatAll(parts));
  }

  write(data: Uint8Array): boolean {
    if (this.closed || this.ending) return false;
    if (this.corked) {
      this.corked.push(data);
      return true;
    }
    if (this.throttle || this.tqBytes > 0) {
      if (data.length === 0) return this.tqBytes + this.queued < THROTTLED_HIGH_WATER;
      // a copy (not `data.slice()`, a view on a Buffer): the caller may release its buffer once written
      const copy = new Uint8Array(data.length);
      copy.set(data);
      this.tq.push(copy);
      this.tqBytes += data.length;
      this.pump();
      const ok = this.tqBytes + this.queued < THROTTLED_HIGH_WATER;
      if (!ok) this.throttleFull = true;
      return ok;
    }
    return this.rawWrite(data);
  }

  /**
   * write() of bytes the caller overwrites after this call (the HTTP/2 codec's gather buffer): written at once when
   * the socket takes them, and whatever has to wait (queued, corked, throttled, or the part the socket did not
   * take) is a copy.
   */
  writeTransient(data: Uint8Array): boolean {
    if (this.closed || this.ending) return false;
    // write() copies throttled bytes itself
    if (this.corked || this.queued > 0) return this.write(data.slice());
    if (this.throttle || this.tqBytes > 0) return this.write(data);
    return this.rawWrite(data, true);
  }

  /** Releases throttled bytes as the allowance permits; re-arms itself with a timer. */
  private pump(): void {
    if (this.pumpTimer || this.closed) return;
    while (this.tq.length > 0) {
      const d = this.tq[0]!;
      const want = Math.min(d.length, THROTTLE_SLICE);
      const n = this.throttle ? this.throttle.take(want) : want;
      if (n <= 0) {
        const wait = Math.max(1, Math.min(1000, this.throttle!.waitMs(want)));
        this.pumpTimer = setTimeout(() => {
          this.pumpTimer = null;
          this.pump();
        }, wait);
        return;
      }
      this.rawWrite(n === d.length ? d : d.subarray(0, n));
      if (n === d.length) this.tq.shift();
      else this.tq[0] = d.subarray(n);
      this.tqBytes -= n;
    }
    if (this.ending && this.queued === 0) {
      this.socket.end();
      return;
    }
    if (this.throttleFull && this.tqBytes + this.queued < THROTTLED_HIGH_WATER) {
      this.throttleFull = false;
      this.onDrain?.();
    }
  }

  private rawWrite(data: Uint8Array, transient = false): boolean {
    if (data.length === 0) return this.queued < HIGH_WATER;
    if (this.queued > 0) {
      this.queue.push(data);
      this.queued += data.length;
      return this.queued < HIGH_WATER;
    }
    const n = this.socket.write(data);
    if (n === data.length) return true;
    if (n < 0) return false;
    // No copy: every buffer written here is either a fresh one (Bun hands out a new buffer per read; heads and
    // chunk frames are serialised into new ones) or a constant never written to, so a view of the tail is safe;
    // except transient bytes (writeTransient), which are overwritten after the call.
    const rest = transient ? data.slice(n) : data.subarray(n);
    this.queue.push(rest);
    this.queued += rest.length;
    this.lastProgress = performance.now();
    this.watchStall();
    return this.queued < HIGH_WATER;
  }

  /**
   * `d` is a whole socket read (a buffer Bun handed out, not a view into one) whose bytes were just written here
   * and that nothing else refers to: its memory goes back to the allocator (the ArrayBuffer is detached) as soon
   * as the kernel has taken them, now or after what is queued before it. Without this a read's buffer lives until
   * JavaScriptCore's collector finds it dead, and a stream piles up dead reads in proportion to the live heap
   * (docs/performance.md, "RSS while streaming"). Anything that is not a whole read of RELEASE_MIN bytes or more
   * is left alone; so is everything while writes are corked (the cork holds views).
   */
  release(d: Uint8Array): void {
    if (d.byteOffset !== 0 || d.byteLength < RELEASE_MIN || d.byteLength !== d.buffer.byteLength || this.corked !== null) return;
    if (this.queued === 0) return detach(d.buffer);
    // views of it may wait in the queue: a zero-length marker after them detaches it once they are written
    if (!this.closed) this.queue.push(d.subarray(0, 0));
  }

  /** Socket drain handler. */
  handleDrain(): void {
    while (this.queue.length > 0) {
      const d = this.queue[0]!;
      if (d.length === 0) {
        // a release marker (see release): everything queued before it is written
        this.queue.shift();
        detach(d.buffer);
        continue;
      }
      const n = this.socket.write(d);
      if (n < 0) return;
      if (n > 0) this.lastProgress = performance.now();
      this.queued -= n;
      if (n < d.length) {
        this.queue[0] = d.subarray(n);
        return;
      }
      this.queue.shift();
    }
    this.stopStallWatch();
    if (this.ending) {
      if (this.tqBytes === 0) this.socket.end();
      return;
    }
    if (this.tqBytes > 0) return; // the throttle pump calls onDrain when it has room
    this.onDrain?.();
  }

  /** Half-close after everything queued has been written. */
  end(): void {
    if (this.closed || this.ending) return;
    if (this.corked) this.uncork();
    this.ending = true;
    if (this.queued === 0 && this.tqBytes === 0) this.socket.end();
  }

  /** Close now, dropping anything queued. */
  destroy(): void {
    if (this.closed) return;
    this.markClosed();
    try {
      this.socket.terminate();
    } catch {}
  }

  pause(): void {
    if (this.paused || this.closed) return;
    this.paused = true;
    this.socket.pause();
  }

  resume(): void {
    if (!this.paused || this.closed) return;
    this.paused = false;
    this.socket.resume();
    this.onResume?.();
  }

  get isPaused(): boolean {
    return this.paused;
  }
}

/** Detach an ArrayBuffer, freeing its memory now (a no-op for one that cannot be detached). */
function detach(b: ArrayBufferLike): void {
  try {
    (b as ArrayBuffer & { transfer(n: number): ArrayBuffer }).transfer(0);
  } catch {}
}

export function concatBytes(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  if (b.length === 0) return a;
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

/**
 * The parts joined. Parts that lie back to back in one buffer (a response head and the body that came in the same
 * read, say) are joined as one view of it, without copying.
 */
export function concatAll(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  if (parts.length === 0) return new Uint8Array(0);
  const first = parts[0]!;
  const buffer = first.buffer;
  let n = first.length;
  let next = first.byteOffset + n;
  let adjacent = true;
  for (let i = 1; i < parts.length; i++) {
    const p = parts[i]!;
    n += p.length;
    if (adjacent && (p.byteOffset !== next || p.buffer !== buffer)) adjacent = false;
    next += p.length;
  }
  if (adjacent) return new Uint8Array(buffer, first.byteOffset, n);
  // every byte is written below: no zero-filling
  const out = Buffer.allocUnsafe(n);
  let o = 0;
  for (let i = 0; i < parts.length; i++) {
    out.set(parts[i]!, o);
    o += parts[i]!.length;
  }
  return out;
}
