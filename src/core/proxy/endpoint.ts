import type { Socket } from "bun";

/** High-water mark: above this many queued bytes a writer should pause its source. */
export const HIGH_WATER = 1024 * 1024;

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

  constructor(public socket: Socket<any>) {}

  write(data: Uint8Array): boolean {
    if (this.closed || this.ending) return false;
    if (data.length === 0) return this.queued < HIGH_WATER;
    if (this.queued > 0) {
      this.queue.push(data);
      this.queued += data.length;
      return this.queued < HIGH_WATER;
    }
    const n = this.socket.write(data);
    if (n === data.length) return true;
    if (n < 0) return false;
    // Bun hands us a fresh buffer per read, but the caller may reuse `data`: keep our own copy of the tail.
    const rest = data.slice(n);
    this.queue.push(rest);
    this.queued += rest.length;
    return this.queued < HIGH_WATER;
  }

  /** Socket drain handler. */
  handleDrain(): void {
    while (this.queue.length > 0) {
      const d = this.queue[0]!;
      const n = this.socket.write(d);
      if (n < 0) return;
      this.queued -= n;
      if (n < d.length) {
        this.queue[0] = d.subarray(n);
        return;
      }
      this.queue.shift();
    }
    if (this.ending) {
      this.socket.end();
      return;
    }
    this.onDrain?.();
  }

  /** Half-close after everything queued has been written. */
  end(): void {
    if (this.closed || this.ending) return;
    this.ending = true;
    if (this.queued === 0) this.socket.end();
  }

  /** Close now, dropping anything queued. */
  destroy(): void {
    if (this.closed) return;
    this.closed = true;
    this.queue = [];
    this.queued = 0;
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
  }

  get isPaused(): boolean {
    return this.paused;
  }
}

export function concatBytes(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  if (b.length === 0) return a;
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

export function concatAll(parts: Uint8Array[], total?: number): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  const n = total ?? parts.reduce((s, p) => s + p.length, 0);
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}
