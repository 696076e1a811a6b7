/**
 * Many deadlines of one length (the upstream idle timeout of every HTTP/2 stream waiting for its response head)
 * behind one timer. A deadline added later never expires earlier, so they form a list in expiry order: adding
 * appends, cancelling unlinks (both O(1), one small object per deadline), and the single timer is armed for the
 * oldest one. A cancelled oldest deadline does not re-arm the timer: when it fires, it re-arms for whatever is
 * oldest then. Per request this replaces a timer of its own (setTimeout + clearTimeout + the listeners clearing it).
 */
export interface Deadline {
  readonly at: number;
  fire: (() => void) | null;
  prev: Deadline | null;
  next: Deadline | null;
}

export class DeadlineList {
  private head: Deadline | null = null;
  private tail: Deadline | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  /** Deadlines pending now (for tests). */
  size = 0;

  constructor(
    readonly ms: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** `fire` is called once `ms` have passed, unless cancel() came first. */
  add(fire: () => void): Deadline {
    const d: Deadline = { at: this.now() + this.ms, fire, prev: this.tail, next: null };
    if (this.tail) this.tail.next = d;
    else this.head = d;
    this.tail = d;
    this.size++;
    if (this.timer === null) this.arm(d.at);
    return d;
  }

  /** Drops a deadline that has not fired (a no-op for one that fired or was cancelled). */
  cancel(d: Deadline): void {
    if (d.fire === null) return;
    d.fire = null;
    if (d.prev) d.prev.next = d.next;
    else this.head = d.next;
    if (d.next) d.next.prev = d.prev;
    else this.tail = d.prev;
    d.prev = d.next = null;
    this.size--;
    if (this.head === null && this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
  }

  private arm(at: number): void {
    this.timer = setTimeout(() => this.run(), Math.max(1, Math.ceil(at - this.now())));
    (this.timer as { unref?: () => void }).unref?.();
  }

  private run(): void {
    this.timer = null;
    const now = this.now();
    while (this.head !== null && this.head.at <= now) {
      const d = this.head;
      const fire = d.fire!;
      this.cancel(d);
      fire();
    }
    if (this.head !== null && this.timer === null) this.arm(this.head.at);
  }
}
