/**
 * HAR for all traffic and for tabs: the export stream (GET /traffic/export.har, POST /session-tabs/{id}/save) and the
 * import into the capture store (POST /traffic/import). The HAR itself is written by features/traffic/har.ts and
 * read by features/traffic/har-import.ts; this class ties them to the capture store and the WebSocket store, for
 * the routes, the CLI and anything else.
 */
import type { CaptureStore } from "../../store/capture-store.ts";
import type { FramesOf, HarOptions } from "../traffic/har.ts";
import { checkHar, creatorOf, toNewEntry, type ImportedEntry } from "../traffic/har-import.ts";
import { harChunks, writeChunksAtomic, type ExportQuery } from "../traffic/har-stream.ts";
import type { WsFrameRecord, WsStore } from "../websocket/store.ts";
import type { SavedSessions, SavedSummary } from "./saved.ts";
import { tabQuery, type TabRecord } from "./tabs.ts";

export interface ImportResult {
  imported: number;
  first_id: number | null;
  last_id: number | null;
  websocket_connections: number;
}

/** The WebSocket URL of an upgrade's entry URL (http→ws, https→wss). */
function wsUrl(url: string): string {
  return url.startsWith("https://") ? "wss://" + url.slice(8) : url.startsWith("http://") ? "ws://" + url.slice(7) : url;
}

export class TrafficHar {
  constructor(
    private readonly store: CaptureStore,
    private readonly ws: () => WsStore | null,
    private readonly version: string,
  ) {}

  /** The frames of every WebSocket record tied to an entry, as they are now (at most the store's 100 records). */
  framesOf(): FramesOf {
    const byEntry = new Map<number, WsFrameRecord[]>();
    for (const c of this.ws()?.list() ?? []) {
      const id = c.logId;
      if (id !== null && !byEntry.has(id)) byEntry.set(id, c.items());
    }
    return (id) => byEntry.get(id) ?? null;
  }

  /** The HAR text of the matching entries, in pieces (oldest first). */
  exportChunks(q: ExportQuery, options: Partial<HarOptions> = {}, counted?: (n: number) => void): AsyncGenerator<string> {
    return harChunks(this.store, q, { version: this.version, ...options }, this.framesOf(), counted);
  }

  /** Adds a HAR's entries to the capture store (checked first: nothing is added when any entry is malformed). */
  async importHar(body: unknown): Promise<ImportResult> {
    const { log, entries } = checkHar(body);
    const creator = creatorOf(log);
    const ws = this.ws();
    const previewCap = ws?.limits.previewCap ?? 64 * 1024;
    const converted: ImportedEntry[] = entries.map((e) => toNewEntry(e, creator, previewCap));
    let first: number | null = null;
    let last: number | null = null;
    let conns = 0;
    const pendingWs: { url: string; id: number; ts: number; frames: ImportedEntry["frames"] }[] = [];
    // one synchronous run of add(): the ids are consecutive
    for (const c of converted) {
      const id = this.store.add(c.entry);
      first ??= id;
      last = id;
      if (c.frames !== null) pendingWs.push({ url: wsUrl(c.entry.url), id, ts: c.entry.timestamp, frames: c.frames });
    }
    await this.store.flush();
    if (ws) {
      for (const p of pendingWs) {
        ws.importConnection(p.url, p.id, p.ts, p.frames as WsFrameRecord[]);
        conns++;
      }
    }
    return { imported: converted.length, first_id: first, last_id: last, websocket_connections: conns };
  }

  /** Writes the tab's entries as a saved session (atomically) and returns its summary. */
  async saveTab(tab: TabRecord, name: string, saved: SavedSessions): Promise<SavedSummary> {
    const { id, path } = saved.prepare(name);
    const savedAt = Date.now();
    await writeChunksAtomic(
      path,
      this.exportChunks(tabQuery(tab), { pageTitle: name, meta: { name, saved_at: savedAt, tab: { id: tab.id, name: tab.name, filter: tab.filter } } }),
    );
    return saved.get(id);
  }
}
