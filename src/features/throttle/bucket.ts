import type { Throttle } from "../../core/proxy/endpoint.ts";

/** Milliseconds on a monotonic clock (performance.now in the service; a fake clock in tests). */
export type Clock = () => number;

/** Smallest burst of a bucket whose rate allows it: one throttle slice of the core (16 KiB). */
export const MIN_BURST = 16 * 1024;

/** Largest rate tapwire accepts (bytes per second). */
export const MAX_RATE = Number.MAX_SAFE_INTEGER;

/**
 * How many bytes a bucket may hold: 1/20 s worth of its rate, at least 16 KiB, but never more than one second
 * worth (so a very slow rate is not defeated by its first burst). A small burst keeps a transfer's duration close
 * to size / rate from its first byte on.
 */
export function burstFor(rate: number): number {
  return Math.max(rate / 20, Math.min(MIN_BURST, rate));
}

/**
 * A token bucket kept as a ledger: `issued` counts every token that ever flowed in (at `rate` bytes per second,
 * never more than `burst` ahead of `spent`), `spent` every byte taken or reserved; the tokens on hand are
 * issued - spent and may go negative: a flow that finds the bucket empty *reserves* its next bytes at the end of
 * the queue and is told when the ledger will have paid for them. Reservations are served in the order they were
 * made, so flows sharing a bucket (the global cap, one scoped rule) get fair, round-robin shares of the rate
 * instead of the first one starving the others, and a rate change re-times every waiting reservation at once.
 *
 * A bucket without a rate is unlimited: every take and every reservation succeeds at once, so flows that hold a
 * bucket whose throttle was switched off run at full speed immediately.
 */
export class TokenBucket {
  private rate = 0;
  private burst = 0;
  private issued = 0;
  private spent = 0;
  private last = 0;

  constructor(private readonly now: Clock = () => performance.now()) {}

  /** The rate in bytes per second, or null when unlimited. */
  get bytesPerSecond(): number | null {
    return this.rate > 0 ? this.rate : null;
  }

  get limited(): boolean {
    return this.rate > 0;
  }

  /** How much a waiting flow reserves at once: half a burst (leaves headroom for late timers; see waitFor). */
  get step(): number {
    return this.rate > 0 ? Math.max(1, Math.ceil(this.burst / 2)) : Infinity;
  }

  /**
   * Sets the rate (bytes per second); null or 0 makes the bucket unlimited. A newly limited bucket starts full
   * (one burst); a bucket that stays limited keeps its ledger, so queued reservations just move faster or slower.
   */
  setRate(rate: number | null): void {
    if (!rate || rate <= 0) {
      this.rate = 0;
      return;
    }
    if (this.rate > 0) {
      this.refill();
      this.rate = rate;
      this.burst = burstFor(rate);
      this.issued = Math.min(this.issued, this.spent + this.burst);
      return;
    }
    this.rate = rate;
    this.burst = burstFor(rate);
    this.last = this.now();
    this.issued = this.spent + this.burst;
  }

  private refill(): void {
    const t = this.now();
    const dt = t - this.last;
    this.last = t;
    if (dt > 0) this.issued = Math.min(this.spent + this.burst, this.issued + (dt * this.rate) / 1000);
  }

  /** Whole bytes that may be written now without waiting (Infinity when unlimited; <= 0 while others wait). */
  available(): number {
    if (this.rate <= 0) return Infinity;
    this.refill();
    return Math.floor(this.issued - this.spent);
  }

  /** Takes n bytes now (the caller checked `available`). */
  consume(n: number): void {
    if (this.rate > 0) this.spent += n;
  }

  /** Reserves n bytes at the end of the queue; returns the mark that `ready` and `waitFor` take. */
  reserve(n: number): number {
    if (this.rate <= 0) return -Infinity;
    this.spent += n;
    return this.spent;
  }

  /** Whether a reservation has been paid for (always, once the bucket is unlimited). */
  ready(mark: number): boolean {
    if (this.rate <= 0) return true;
    this.refill();
    return this.issued >= mark;
  }

  /** Milliseconds until a reservation is paid for, at the current rate. */
  waitFor(mark: number): number {
    if (this.rate <= 0) return 0;
    this.refill();
    const owed = mark - this.issued;
    return owed <= 0 ? 0 : Math.ceil((owed * 1000) / this.rate);
  }
}

/**
 * The core's Throttle for one direction of one flow: every byte is taken from every bucket concerned (the global
 * cap and the flow's scoped rule), so the slowest one sets the pace. When the buckets cannot give anything now,
 * `waitMs` reserves the next bytes in all of them and `take` hands them out once every reservation is paid for.
 */
export class ComposedThrottle implements Throttle {
  /** Bytes reserved and not yet handed out, and each bucket's mark for them (null: no reservation). */
  private reserved = 0;
  private marks: number[] | null = null;

  constructor(readonly buckets: readonly TokenBucket[]) {}

  take(n: number): number {
    if (n <= 0) return 0;
    // A reservation made by waitMs is handed out once every bucket has paid for it.
    if (this.marks) {
      for (let i = 0; i < this.buckets.length; i++) if (!this.buckets[i]!.ready(this.marks[i]!)) return 0;
      const k = Math.min(n, this.reserved);
      this.reserved -= k;
      if (this.reserved === 0) this.marks = null;
      return k;
    }
    // Nothing is handed out in dribbles: tokens trickle in continuously, and taking whatever a few microseconds
    // earned would turn the core's pump into a loop of tiny writes (tiny TCP segments, tiny TLS records).
    const want = this.grain(n);
    let allow = n;
    for (const b of this.buckets) {
      const a = b.available();
      if (a < want) return 0;
      if (a < allow) allow = a;
    }
    for (const b of this.buckets) b.consume(allow);
    return allow;
  }

  /** The least worth handing out or waiting for: n, or the smallest step of the buckets that limit. */
  private grain(n: number): number {
    let want = n;
    for (const b of this.buckets) want = Math.min(want, b.step);
    return want;
  }

  waitMs(n: number): number {
    if (!this.marks) {
      if (n <= 0 || !this.buckets.some((b) => b.limited)) return 0; // nothing limits any more: take succeeds
      const want = this.grain(n);
      this.marks = this.buckets.map((b) => b.reserve(want));
      this.reserved = want;
    }
    let wait = 0;
    for (let i = 0; i < this.buckets.length; i++) {
      const w = this.buckets[i]!.waitFor(this.marks[i]!);
      if (w > wait) wait = w;
    }
    return wait;
  }
}
