import { normalizeHost, type PersistedList } from "../ignore/lists.ts";

/**
 * Matches a request host against the intercept-host list (exact names and `*.example.com`, which matches every
 * subdomain of example.com but not example.com itself) and says which entry matched. Rebuilt when the list changes.
 */
export class InterceptHosts {
  private exact = new Set<string>();
  private suffixes = new Set<string>();
  private version = -1;

  constructor(readonly list: PersistedList) {}

  /** The list entry matching `host`, or null. */
  match(host: string): string | null {
    if (this.list.size === 0) return null;
    if (this.version !== this.list.version) {
      this.version = this.list.version;
      this.exact = new Set();
      this.suffixes = new Set();
      for (const h of this.list.list()) {
        if (h.startsWith("*.")) this.suffixes.add(h.slice(2));
        else this.exact.add(h);
      }
    }
    const h = normalizeHost(host);
    if (this.exact.has(h)) return h;
    for (let i = h.indexOf("."); i >= 0 && this.suffixes.size > 0; i = h.indexOf(".", i + 1)) {
      const rest = h.slice(i + 1);
      if (this.suffixes.has(rest)) return `*.${rest}`;
    }
    return null;
  }
}
