import { JsonState } from "../../store/json-state.ts";

/** A persisted list of strings (ignored hosts, ignored clients, intercept hosts), kept in insertion order. */
export class PersistedList {
  private readonly state: JsonState<string[]>;
  private set: Set<string>;
  /** Bumped on every change, so derived matchers know when to rebuild. */
  version = 0;

  constructor(path: string, private readonly normalize: (s: string) => string, onCorrupt?: (path: string, movedTo: string, reason: string) => void) {
    this.state = new JsonState<string[]>(path, {
      initial: () => [],
      validate: (v) => (Array.isArray(v) && v.every((x) => typeof x === "string") ? null : "expected an array of strings"),
      onCorrupt,
    });
    this.set = new Set(this.state.get());
  }

  list(): string[] {
    return [...this.state.get()];
  }

  has(value: string): boolean {
    return this.set.has(value);
  }

  get size(): number {
    return this.set.size;
  }

  /** Adds (idempotent). */
  add(raw: string): void {
    const v = this.normalize(raw);
    if (this.set.has(v)) return;
    this.state.set([...this.state.get(), v]);
    this.set = new Set(this.state.get());
    this.version++;
  }

  /** Removes; false when it was not there. */
  remove(raw: string): boolean {
    const v = this.normalize(raw);
    if (!this.set.has(v)) return false;
    this.state.set(this.state.get().filter((x) => x !== v));
    this.set = new Set(this.state.get());
    this.version++;
    return true;
  }

  clear(): void {
    this.state.set([]);
    this.set = new Set();
    this.version++;
  }
}

/** Host names are matched case-insensitively, without a trailing dot or brackets. */
export function normalizeHost(raw: string): string {
  let h = raw.trim().toLowerCase();
  if (h.startsWith("[") && h.endsWith("]")) h = h.slice(1, -1);
  if (h.endsWith(".")) h = h.slice(0, -1);
  return h;
}

/** Validates a host entry: a name, an IP, or `*.suffix`; throws a message naming the problem. */
export function checkHostEntry(raw: string): string {
  const h = normalizeHost(raw);
  if (!h) throw new Error("host must not be empty");
  if (/[\/\s?#@]/.test(h)) throw new Error(`'${raw}' is not a host name (no scheme, path or spaces; a port is not part of it)`);
  if (h.includes("*") && !/^\*\.[^*]+$/.test(h)) throw new Error(`'${raw}': a wildcard is only allowed as a leading '*.' (e.g. *.example.com)`);
  return h;
}

/**
 * Matches hosts against a list of exact names and `*.example.com` entries (which match any subdomain of
 * example.com, not example.com itself). Rebuilt when the list changes; lookups are O(labels).
 */
export class HostSet {
  private exact = new Set<string>();
  private suffixes = new Set<string>();
  private version = -1;

  constructor(private readonly list: PersistedList) {}

  private refresh(): void {
    if (this.version === this.list.version) return;
    this.version = this.list.version;
    this.exact = new Set();
    this.suffixes = new Set();
    for (const h of this.list.list()) {
      if (h.startsWith("*.")) this.suffixes.add(h.slice(2));
      else this.exact.add(h);
    }
  }

  matches(host: string): boolean {
    if (this.list.size === 0) return false;
    this.refresh();
    const h = normalizeHost(host);
    if (this.exact.has(h)) return true;
    if (this.suffixes.size === 0) return false;
    for (let i = h.indexOf("."); i >= 0; i = h.indexOf(".", i + 1)) {
      if (this.suffixes.has(h.slice(i + 1))) return true;
    }
    return false;
  }
}
