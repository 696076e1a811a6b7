import { isIPv6 } from "../../core/ip.ts";
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

/**
 * Validates a host entry: a host name, an IPv4 or IPv6 address (bare or in brackets), or `*.suffix`; returns it
 * normalised, or throws a message naming the value and the problem. A port, scheme, path or user part is refused
 * (entries match every port, and `host:80` would never match anything).
 */
export function checkHostEntry(raw: string): string {
  const h = normalizeHost(raw);
  const named = JSON.stringify(raw);
  if (!h) throw new Error("host must not be empty");
  if (isIPv6(h)) return h;
  if (/[[\]]/.test(raw)) {
    if (/\]:/.test(raw)) throw new Error(`${named} is not a host name: a port is not part of it (entries match every port)`);
    throw new Error(`${named} is not a host name: brackets hold only an IPv6 address`);
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//.test(h)) throw new Error(`${named} is not a host name: no scheme (give only the host, e.g. example.com)`);
  if (/[\/?#]/.test(h)) throw new Error(`${named} is not a host name: no path or query (give only the host, e.g. example.com)`);
  if (h.includes("@")) throw new Error(`${named} is not a host name: no user part (give only the host, e.g. example.com)`);
  if (h.includes(":")) throw new Error(`${named} is not a host name: a port is not part of it (entries match every port; an IPv6 address goes bare or in brackets)`);
  if (h.includes("*") && !/^\*\.[^*]+$/.test(h)) throw new Error(`${named}: a wildcard is only allowed as a leading '*.' (e.g. *.example.com)`);
  // letters, digits, '-', '_' and non-ASCII (internationalised names) in dot-separated labels
  const name = h.startsWith("*.") ? h.slice(2) : h;
  const bad = /[\x00-\x2c\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\x7f]/.exec(name);
  if (bad) throw new Error(`${named} is not a host name: ${JSON.stringify(bad[0])} is not allowed in one`);
  if (name.split(".").some((label) => label === "")) throw new Error(`${named} is not a host name: it has an empty label`);
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
