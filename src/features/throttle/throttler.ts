import type { ConnectInfo } from "../../pipeline/addon.ts";
import type { Throttle } from "../../core/proxy/endpoint.ts";
import type { Flow } from "../../pipeline/flow.ts";
import { ComposedThrottle, TokenBucket, type Clock } from "./bucket.ts";
import { firstMatch, type CompiledRule, type ThrottleRule } from "./rules.ts";

/** The rate budget of one scoped rule, shared by every flow it matches (kept across reloads by rule id). */
interface RuleBuckets {
  down: TokenBucket;
  up: TokenBucket;
}

/** What was decided for one flow: its rule (if any) and that rule's buckets. */
interface Decision {
  rule: ThrottleRule | null;
  buckets: RuleBuckets | null;
}

const NONE: Decision = { rule: null, buckets: null };

export interface GlobalThrottleState {
  enabled: boolean;
  bytes_per_second: number | null;
}

/**
 * The throttle state of a running service: the global cap (one bucket for all downloads, one for all uploads) and
 * one pair of buckets per enabled scoped rule. Decides once per flow which rule applies and hands the core a
 * Throttle that takes from every bucket concerned.
 */
export class Throttler {
  readonly globalDown: TokenBucket;
  readonly globalUp: TokenBucket;
  private rules: readonly CompiledRule[] = [];
  private buckets = new Map<string, RuleBuckets>();
  private decisions = new WeakMap<Flow, Decision>();
  private timers = new Map<ReturnType<typeof setTimeout>, () => void>();

  constructor(private readonly clock: Clock = () => performance.now()) {
    this.globalDown = new TokenBucket(clock);
    this.globalUp = new TokenBucket(clock);
  }

  get global(): GlobalThrottleState {
    const bps = this.globalDown.bytesPerSecond;
    return { enabled: bps !== null, bytes_per_second: bps };
  }

  /** Sets (a positive integer) or disables (null) the global cap; transfers already throttled follow at once. */
  setGlobal(bytesPerSecond: number | null): void {
    this.globalDown.setRate(bytesPerSecond);
    this.globalUp.setRate(bytesPerSecond);
  }

  /**
   * Installs a new rule list. A rule keeps its buckets (and running flows keep following it) when its id survives;
   * the buckets of removed or disabled rules become unlimited, which releases the flows that still hold them.
   */
  setRules(rules: readonly CompiledRule[]): void {
    const next = new Map<string, RuleBuckets>();
    for (const { rule } of rules) {
      if (!rule.enabled) continue;
      const b = this.buckets.get(rule.id) ?? { down: new TokenBucket(this.clock), up: new TokenBucket(this.clock) };
      b.down.setRate(rule.down_bytes_per_second || null);
      b.up.setRate(rule.up_bytes_per_second || null);
      next.set(rule.id, b);
    }
    for (const [id, b] of this.buckets) {
      if (next.has(id)) continue;
      b.down.setRate(null);
      b.up.setRate(null);
    }
    this.buckets = next;
    this.rules = rules;
  }

  /** The rule that applies to a flow, decided at its first throttle hook and kept for the flow's life. */
  decide(flow: Flow): Decision {
    let d = this.decisions.get(flow);
    if (d) return d;
    const m = this.rules.length ? firstMatch(this.rules, flow.url, flow.originalUrl) : null;
    d = m ? { rule: m.rule, buckets: this.buckets.get(m.rule.id) ?? null } : NONE;
    if (m) flow.extra.throttle_rule = m.rule.id;
    this.decisions.set(flow, d);
    return d;
  }

  /** A Throttle over the global bucket and the rule's bucket for one direction; null when neither limits. */
  private throttleFor(global: TokenBucket, rule: TokenBucket | null): Throttle | null {
    const ruleLimits = rule !== null && rule.limited;
    if (!global.limited && !ruleLimits) return null;
    // The global bucket is part of every throttle, so a later rate change or DELETE reaches running transfers.
    return new ComposedThrottle(ruleLimits ? [global, rule] : [global]);
  }

  /** `connect` hook: a tunnel takes from the global buckets (a later change of the cap reaches it too). */
  onConnect(info: ConnectInfo): void {
    info.throttleDown = new ComposedThrottle([this.globalDown]);
    info.throttleUp = new ComposedThrottle([this.globalUp]);
  }

  /** `request` hook: upload throttle, then the rule's up delay. */
  onRequest(flow: Flow): void | Promise<void> {
    if (this.rules.length === 0 && !this.globalUp.limited) return;
    const d = this.decide(flow);
    flow.throttleUp = this.throttleFor(this.globalUp, d.buckets?.up ?? null);
    const ms = d.rule?.up_delay_ms ?? 0;
    if (ms > 0) return this.delay(ms);
  }

  /** `responseHeaders` hook: download throttle, then the rule's down delay. */
  onResponseHeaders(flow: Flow): void | Promise<void> {
    if (this.rules.length === 0 && !this.globalDown.limited) return;
    const d = this.decide(flow);
    flow.throttleDown = this.throttleFor(this.globalDown, d.buckets?.down ?? null);
    const ms = d.rule?.down_delay_ms ?? 0;
    if (ms > 0) return this.delay(ms);
  }

  private delay(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        resolve();
      }, ms);
      this.timers.set(timer, resolve);
    });
  }

  /** Number of flows currently held by a delay. */
  get delayed(): number {
    return this.timers.size;
  }

  /** Service stop: lets every delayed flow go on at once and forgets the timers. */
  releaseDelays(): void {
    const held = [...this.timers];
    this.timers.clear();
    for (const [timer, resolve] of held) {
      clearTimeout(timer);
      resolve();
    }
  }
}
