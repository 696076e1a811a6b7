import { describe, expect, test } from "bun:test";
import { burstFor, ComposedThrottle, MIN_BURST, TokenBucket } from "../../../src/features/throttle/bucket.ts";

/** A clock the test moves by hand. */
function fakeClock(start = 1000) {
  const c = { t: start, now: () => c.t };
  return c;
}

const SLICE = 16 * 1024;

/**
 * Drives throttles the way the core's Endpoint.pump does (16 KiB slices, a timer of max(1, min(1000, waitMs))
 * when take gives nothing), for several transfers at once on one simulated clock; timers fire `lateMs` late.
 * Returns each transfer's finishing time relative to the start.
 */
function simulate(clock: { t: number }, transfers: { throttle: ComposedThrottle; bytes: number }[], lateMs = 0, writes = { count: 0 }): number[] {
  const start = clock.t;
  const left = transfers.map((x) => x.bytes);
  const wakeAt = transfers.map(() => start);
  const done: number[] = transfers.map(() => NaN);
  for (let guard = 0; guard < 1e6; guard++) {
    // the transfer whose timer fires first (ties: lowest index, like timers armed earlier)
    let i = -1;
    for (let k = 0; k < transfers.length; k++) if (left[k]! > 0 && (i < 0 || wakeAt[k]! < wakeAt[i]!)) i = k;
    if (i < 0) return done.map((d) => d - start);
    clock.t = Math.max(clock.t, wakeAt[i]!);
    const th = transfers[i]!.throttle;
    for (;;) {
      const want = Math.min(left[i]!, SLICE);
      const n = th.take(want);
      if (n > want || n < 0) throw new Error(`take(${want}) returned ${n}`);
      if (n > 0) {
        writes.count++;
        left[i] = left[i]! - n;
        if (left[i] === 0) {
          done[i] = clock.t;
          break;
        }
        continue;
      }
      wakeAt[i] = clock.t + Math.max(1, Math.min(1000, th.waitMs(want))) + lateMs;
      break;
    }
  }
  throw new Error("simulation did not finish");
}

describe("burst size", () => {
  test("1/20 s of the rate, at least 16 KiB, at most one second's worth", () => {
    expect(burstFor(262144)).toBe(MIN_BURST);
    expect(burstFor(10 * 1024 * 1024)).toBe((10 * 1024 * 1024) / 20);
    expect(burstFor(1000)).toBe(1000);
    expect(burstFor(1)).toBe(1);
  });
});

describe("TokenBucket", () => {
  test("starts with one burst, refills at the rate, never holds more than a burst", () => {
    const c = fakeClock();
    const b = new TokenBucket(c.now);
    b.setRate(262144);
    expect(b.available()).toBe(MIN_BURST);
    b.consume(MIN_BURST);
    expect(b.available()).toBe(0);
    c.t += 10; // 10 ms at 256 KiB/s = 2621.44 bytes
    expect(b.available()).toBe(2621);
    c.t += 60_000;
    expect(b.available()).toBe(MIN_BURST);
  });

  test("unlimited: every amount is available and nothing is owed", () => {
    const b = new TokenBucket(fakeClock().now);
    expect(b.limited).toBe(false);
    expect(b.available()).toBe(Infinity);
    expect(b.ready(b.reserve(1e9))).toBe(true);
    b.setRate(100);
    expect(b.bytesPerSecond).toBe(100);
    b.setRate(null);
    expect(b.bytesPerSecond).toBeNull();
    expect(b.available()).toBe(Infinity);
  });

  test("reservations queue up behind each other and are re-timed when the rate changes", () => {
    const c = fakeClock();
    const b = new TokenBucket(c.now);
    b.setRate(1000); // burst 1000
    b.consume(1000);
    const m1 = b.reserve(500);
    const m2 = b.reserve(500);
    expect(b.waitFor(m1)).toBe(500);
    expect(b.waitFor(m2)).toBe(1000);
    c.t += 500;
    expect(b.ready(m1)).toBe(true);
    expect(b.ready(m2)).toBe(false);
    b.setRate(2000); // 500 bytes still owed now take 250 ms
    expect(b.waitFor(m2)).toBe(250);
    b.setRate(null);
    expect(b.ready(m2)).toBe(true);
  });
});

describe("ComposedThrottle", () => {
  test("never hands out more than asked, and takes from every bucket", () => {
    const c = fakeClock();
    const a = new TokenBucket(c.now);
    const b = new TokenBucket(c.now);
    a.setRate(1_000_000); // burst 50_000
    b.setRate(262144); // burst 16384
    const th = new ComposedThrottle([a, b]);
    expect(th.take(100)).toBe(100);
    expect(th.take(100_000)).toBe(MIN_BURST - 100); // b is the tighter one
    expect(a.available()).toBe(50_000 - MIN_BURST);
    expect(th.take(1)).toBe(0);
  });

  test("waits for the slowest bucket, then hands out what it reserved", () => {
    const c = fakeClock();
    const fast = new TokenBucket(c.now);
    const slow = new TokenBucket(c.now);
    fast.setRate(10_000_000);
    slow.setRate(20_000); // burst 16384, step 8192
    const th = new ComposedThrottle([fast, slow]);
    expect(th.take(SLICE)).toBe(MIN_BURST);
    expect(th.take(SLICE)).toBe(0);
    const w = th.waitMs(SLICE);
    expect(w).toBe(Math.ceil((8192 * 1000) / 20_000));
    c.t += w - 1;
    expect(th.take(SLICE)).toBe(0);
    c.t += 1;
    expect(th.take(SLICE)).toBe(8192);
  });

  test("a bucket switched off mid-wait releases the flow at once", () => {
    const c = fakeClock();
    const g = new TokenBucket(c.now);
    g.setRate(1000);
    const th = new ComposedThrottle([g]);
    expect(th.take(SLICE)).toBe(1000);
    expect(th.waitMs(SLICE)).toBe(500);
    g.setRate(null);
    expect(th.take(SLICE)).toBe(500); // the reservation, now free
    expect(th.take(SLICE)).toBe(SLICE);
    expect(th.waitMs(SLICE)).toBe(0);
  });

  test("2 MiB at 256 KiB/s through the core's pump takes 8 s less the first burst", () => {
    const c = fakeClock();
    const g = new TokenBucket(c.now);
    g.setRate(262144);
    const writes = { count: 0 };
    const [t] = simulate(c, [{ throttle: new ComposedThrottle([g]), bytes: 2 * 1024 * 1024 }], 0, writes);
    const ideal = ((2 * 1024 * 1024 - MIN_BURST) / 262144) * 1000;
    expect(t!).toBeGreaterThanOrEqual(ideal - 1);
    expect(t!).toBeLessThan(ideal + 40);
    // released in half-burst steps (8 KiB here), not in dribbles
    expect(writes.count).toBeLessThanOrEqual((2 * 1024 * 1024) / 8192 + 2);
  });

  test("tokens earned in a few microseconds are not handed out (no dribbling writes)", () => {
    const c = fakeClock();
    const g = new TokenBucket(c.now);
    g.setRate(1024 * 1024); // burst 52428.8, step 26215
    const th = new ComposedThrottle([g]);
    expect(th.take(1e6)).toBe(52428);
    c.t += 0.01; // ~10 bytes earned
    expect(th.take(SLICE)).toBe(0);
    expect(th.take(5)).toBe(5); // a small write that is covered is let through
    const w = th.waitMs(SLICE);
    expect(w).toBe(16); // (16384 - ~6.3 bytes on hand) at 1 MiB/s = 15.6 ms
    c.t += w;
    expect(th.take(SLICE)).toBe(SLICE);
  });

  test("late timers (up to a third of the wait) do not slow the long-run rate", () => {
    const c = fakeClock();
    const g = new TokenBucket(c.now);
    g.setRate(262144);
    const [t] = simulate(c, [{ throttle: new ComposedThrottle([g]), bytes: 2 * 1024 * 1024 }], 10);
    expect(t!).toBeLessThan(8000 * 1.02);
    expect(t!).toBeGreaterThan(8000 * 0.98);
  });

  test("flows sharing a bucket get fair shares and together keep to the rate", () => {
    const c = fakeClock();
    const shared = new TokenBucket(c.now);
    shared.setRate(524288);
    const flows = [0, 1, 2, 3].map(() => ({ throttle: new ComposedThrottle([shared]), bytes: 1024 * 1024 }));
    const times = simulate(c, flows, 1);
    const total = ((4 * 1024 * 1024) / 524288) * 1000; // 8 s for all of them together
    for (const t of times) {
      // fair: every flow finishes near the end (a starved schedule would finish the first at ~2 s)
      expect(t).toBeGreaterThan(total * 0.9);
      expect(t).toBeLessThan(total * 1.05);
    }
  });

  test("global and rule buckets compose: the rule flow runs at the tighter rate, others share the global", () => {
    const c = fakeClock();
    const global = new TokenBucket(c.now);
    const rule = new TokenBucket(c.now);
    global.setRate(1024 * 1024);
    rule.setRate(131072);
    const times = simulate(c, [
      { throttle: new ComposedThrottle([global, rule]), bytes: 512 * 1024 },
      { throttle: new ComposedThrottle([global]), bytes: 1024 * 1024 },
    ]);
    expect(times[0]!).toBeGreaterThan(4000 * 0.95); // 512 KiB at 128 KiB/s
    expect(times[0]!).toBeLessThan(4000 * 1.05);
    // the other flow gets the rest of the global rate: 1 MiB + the rule flow's 512 KiB within ~1.5 s
    expect(times[1]!).toBeLessThan(1600);
  });
});
