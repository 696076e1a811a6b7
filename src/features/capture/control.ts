/**
 * Capture on/off (spec 4.3). When off, traffic still flows through the proxy but nothing is stored.
 * The capture addon reads `capturing` for every finished flow.
 */
export class CaptureControl {
  constructor(public capturing = true) {}
  start(): void {
    this.capturing = true;
  }
  stop(): void {
    this.capturing = false;
  }
}

/** What the API needs from the capture store to count entries. */
export interface EntryCounter {
  count(): number;
  /** Entries the store could not keep up with and dropped since start (its write queue is bounded). */
  readonly droppedCount: number;
}
