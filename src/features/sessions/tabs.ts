/**
 * Session tabs (spec 4.8): named live views over the capture store. A tab is a filter and a starting point (it
 * holds entries with ids above `start_after_id` that match its filter); it holds no entries of its own, so a tab
 * costs nothing per captured flow, deleting a tab never deletes an entry, and clearing one moves its starting point
 * to the newest entry. The default tab `live` holds everything captured since the service started.
 *
 * Created tabs are kept in `session-tabs.json` in the data directory (written atomically, mode 0600), so they
 * survive a restart; `live` starts afresh at every start.
 */
import { join } from "node:path";
import { badRequest, conflict, notFound } from "../../api/errors.ts";
import type { CaptureStore } from "../../store/capture-store.ts";
import { JsonState } from "../../store/json-state.ts";
import type { ListQuery, ListResult } from "../../store/types.ts";
import type { Paging, TabFilter } from "./schema.ts";

export const LIVE_TAB = "live";

export interface TabRecord {
  id: string;
  name: string;
  kind: "live" | "filter";
  created_at: number;
  filter: TabFilter;
  start_after_id: number;
}

export interface TabView extends TabRecord {
  entry_count: number;
}

interface TabsFile {
  next: number;
  tabs: TabRecord[];
}

const FILTER_KEYS = ["host", "method", "status", "status_min", "status_max", "path", "search", "has_error", "client", "since"] as const;

function validTabsFile(v: unknown): string | null {
  const f = v as TabsFile;
  if (!f || typeof f !== "object" || typeof f.next !== "number" || !Array.isArray(f.tabs)) return "expected {next, tabs}";
  for (const t of f.tabs) {
    if (!t || typeof t.id !== "string" || typeof t.name !== "string" || typeof t.start_after_id !== "number" || typeof t.filter !== "object") return "a tab is malformed";
  }
  return null;
}

/** The store query of a tab (its filter and starting point), without paging. */
export function tabQuery(tab: TabRecord): ListQuery {
  const q: ListQuery = {};
  for (const k of FILTER_KEYS) if (tab.filter[k] !== undefined) (q as Record<string, unknown>)[k] = tab.filter[k];
  q.since_id = tab.start_after_id;
  return q;
}

export class TabStore {
  private readonly state: JsonState<TabsFile>;
  private readonly live: TabRecord;

  constructor(dataDir: string, private readonly store: CaptureStore, onCorrupt?: (path: string, movedTo: string, reason: string) => void) {
    this.state = new JsonState<TabsFile>(join(dataDir, "session-tabs.json"), { initial: () => ({ next: 1, tabs: [] }), validate: validTabsFile, onCorrupt });
    this.live = { id: LIVE_TAB, name: "Live", kind: "live", created_at: Date.now(), filter: {}, start_after_id: 0 };
  }

  /** Called once the store is open: `live` starts after the newest entry there is. */
  async start(): Promise<void> {
    this.live.start_after_id = await this.newestId();
    this.live.created_at = Date.now();
  }

  private async newestId(): Promise<number> {
    return (await this.store.list({ limit: 1, order: "desc" })).items[0]?.id ?? 0;
  }

  private records(): TabRecord[] {
    return [this.live, ...this.state.get().tabs];
  }

  record(id: string): TabRecord {
    const t = this.records().find((x) => x.id === id);
    if (!t) throw notFound(`no session tab '${id}'`);
    return t;
  }

  async view(t: TabRecord): Promise<TabView> {
    const total = (await this.store.list({ ...tabQuery(t), limit: 0 })).total;
    return { id: t.id, name: t.name, kind: t.kind, entry_count: total, created_at: t.created_at, filter: t.filter, start_after_id: t.start_after_id };
  }

  async list(): Promise<TabView[]> {
    const out: TabView[] = [];
    for (const t of this.records()) out.push(await this.view(t));
    return out;
  }

  async create(name: string, filter: TabFilter = {}): Promise<TabView> {
    if (name.trim() === "") throw badRequest("invalid body field 'name': must not be blank");
    const { since_id, ...rest } = filter;
    const start = since_id ?? (await this.newestId());
    let created: TabRecord | null = null;
    this.state.update((f) => {
      created = { id: `tab-${f.next}`, name, kind: "filter", created_at: Date.now(), filter: since_id !== undefined ? { ...rest, since_id } : rest, start_after_id: start };
      return { next: f.next + 1, tabs: [...f.tabs, created] };
    });
    return this.view(created!);
  }

  delete(id: string): void {
    if (id === LIVE_TAB) throw conflict("the live tab cannot be deleted (clear it instead)");
    this.record(id);
    this.state.update((f) => ({ ...f, tabs: f.tabs.filter((t) => t.id !== id) }));
  }

  /** Empties the tab: from now on it holds only entries captured after this call. Entries stay in the store. */
  async clear(id: string): Promise<TabView> {
    const t = this.record(id);
    const newest = await this.newestId();
    if (id === LIVE_TAB) {
      this.live.start_after_id = Math.max(this.live.start_after_id, newest);
      return this.view(this.live);
    }
    let updated: TabRecord = t;
    this.state.update((f) => ({
      ...f,
      tabs: f.tabs.map((x) => (x.id === id ? (updated = { ...x, start_after_id: Math.max(x.start_after_id, newest) }) : x)),
    }));
    return this.view(updated);
  }

  /** One page of the tab's entries, paged like GET /traffic. */
  async entries(id: string, p: Paging): Promise<{ id: string; name: string } & ListResult> {
    const t = this.record(id);
    const q: ListQuery = tabQuery(t);
    if (p.since_id !== undefined) q.since_id = Math.max(t.start_after_id, p.since_id);
    q.order = p.order ?? (p.since_id !== undefined ? "asc" : "desc");
    if (p.limit !== undefined) q.limit = p.limit;
    if (p.offset !== undefined) q.offset = p.offset;
    const r = await this.store.list(q);
    return { id: t.id, name: t.name, ...r };
  }
}
