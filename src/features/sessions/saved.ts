/**
 * Saved sessions (spec 2.10, 4.8): HAR 1.2 files in `sessions/` in the data directory, one `<id>.har` per session
 * (folder 0700, files 0600, written atomically). Any HAR file put there by hand is listed too (its id is its file
 * name); files that do not parse as HAR are skipped in the list and logged (once per version of the file), and
 * answer 404 by id.
 *
 * The session's name and save time are in the HAR's `log._tapwire` ({name, saved_at, tab?}); a file without them is
 * named after its first page title or its id, and dated by its modification time.
 *
 * A file's entry summaries are read when it is first asked for and kept while the file is unchanged (same size and
 * modification time), so paging through a session reads the file once.
 */
import { mkdirSync, readdirSync, readFileSync, statSync, unlinkSync, type Stats } from "node:fs";
import { join } from "node:path";
import { notFound } from "../../api/errors.ts";
import { LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX } from "../../store/capture-store.ts";
import { writeFileAtomic } from "../../store/json-state.ts";
import type { EntrySummary } from "../../store/types.ts";
import { checkHar } from "../traffic/har-import.ts";
import type { Paging } from "./schema.ts";

export interface SavedSummary {
  id: string;
  name: string;
  entry_count: number;
  saved_at: number;
  size_bytes: number;
}

interface Parsed {
  mtimeMs: number;
  size: number;
  name: string;
  savedAt: number;
  items: EntrySummary[];
}

const ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v);

/** The summary form (as GET /traffic's items) of a HAR entry; `id` is its position in the file, from 1. */
export function summaryOf(e: Obj, index: number): EntrySummary {
  const req = e.request as Obj;
  const res = isObj(e.response) ? e.response : {};
  const content = isObj(res.content) ? res.content : {};
  const tw = isObj(e._tapwire) ? e._tapwire : {};
  const url = String(req.url);
  let host = "";
  try {
    host = new URL(url).hostname.replace(/^\[(.*)\]$/, "$1");
  } catch {}
  const headers = Array.isArray(res.headers) ? (res.headers as Obj[]) : [];
  const ct = headers.find((h) => String(h.name).toLowerCase() === "content-type")?.value;
  const status = typeof res.status === "number" ? res.status : 0;
  const s: EntrySummary & { original_id?: number } = {
    id: index + 1,
    method: String(req.method),
    url,
    host,
    status_code: status,
    content_type: typeof tw.content_type === "string" ? tw.content_type : typeof ct === "string" ? ct : typeof content.mimeType === "string" ? content.mimeType : "",
    duration_ms: typeof tw.duration_ms === "number" ? tw.duration_ms : Math.max(0, Math.round(typeof e.time === "number" ? e.time : 0)),
    timestamp: Date.parse(String(e.startedDateTime)),
    client_addr: typeof tw.client_addr === "string" ? tw.client_addr : "",
    has_response: typeof tw.has_response === "boolean" ? tw.has_response : status > 0,
  };
  const error = typeof tw.error === "string" ? tw.error : typeof e._error === "string" ? e._error : undefined;
  if (error) s.error = error;
  if (typeof tw.id === "number") s.original_id = tw.id;
  return s;
}

function slug(name: string): string {
  return (
    name
      .toLowerCase()
      .normalize("NFKD")
      .replace(/[^a-z0-9]+/g, "-")
      .replace(/^-+|-+$/g, "")
      .slice(0, 40) || "session"
  );
}

export class SavedSessions {
  private readonly cache = new Map<string, Parsed>();
  /** Files already reported as unreadable, with the version (mtime:size) that was. */
  private readonly reported = new Map<string, string>();

  constructor(readonly dir: string, private readonly log: (line: string) => void) {}

  private ensureDir(): void {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
  }

  /** A new id for a session called `name` (its slug and a random suffix). */
  newId(name: string): string {
    for (;;) {
      const id = `${slug(name)}-${crypto.randomUUID().slice(0, 8)}`;
      try {
        statSync(this.pathOf(id));
      } catch {
        return id;
      }
    }
  }

  pathOf(id: string): string {
    return join(this.dir, `${id}.har`);
  }

  /** The parsed file, or null when it is missing or unreadable (logged). */
  private read(id: string): { parsed: Parsed; stat: Stats } | null {
    if (!ID_RE.test(id)) return null;
    const path = this.pathOf(id);
    let stat: Stats;
    try {
      stat = statSync(path);
    } catch {
      this.cache.delete(id);
      return null;
    }
    if (!stat.isFile()) return null;
    const hit = this.cache.get(id);
    if (hit && hit.mtimeMs === stat.mtimeMs && hit.size === stat.size) return { parsed: hit, stat };
    try {
      const doc = JSON.parse(readFileSync(path, "utf8"));
      const { log, entries } = checkHar(doc);
      const meta = isObj(log._tapwire) ? log._tapwire : {};
      const pages = Array.isArray(log.pages) ? (log.pages as Obj[]) : [];
      const name = typeof meta.name === "string" ? meta.name : typeof pages[0]?.title === "string" && pages[0].title ? (pages[0].title as string) : id;
      const savedAt = typeof meta.saved_at === "number" ? meta.saved_at : Math.round(stat.mtimeMs);
      const parsed: Parsed = { mtimeMs: stat.mtimeMs, size: stat.size, name, savedAt, items: entries.map(summaryOf) };
      this.cache.set(id, parsed);
      this.reported.delete(id);
      return { parsed, stat };
    } catch (e) {
      this.cache.delete(id);
      const version = `${stat.mtimeMs}:${stat.size}`;
      if (this.reported.get(id) !== version) {
        this.reported.set(id, version);
        this.log(`tapwire: saved session ${path} is not a readable HAR file (${(e as Error).message}); skipped`);
      }
      return null;
    }
  }

  summary(id: string): SavedSummary | null {
    const r = this.read(id);
    if (!r) return null;
    return { id, name: r.parsed.name, entry_count: r.parsed.items.length, saved_at: r.parsed.savedAt, size_bytes: r.stat.size };
  }

  /** Every readable session, newest first. */
  list(): SavedSummary[] {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch {
      return [];
    }
    const out: SavedSummary[] = [];
    for (const f of names) {
      if (!f.endsWith(".har") || f.startsWith(".")) continue;
      const s = this.summary(f.slice(0, -4));
      if (s) out.push(s);
    }
    return out.sort((a, b) => b.saved_at - a.saved_at || a.id.localeCompare(b.id));
  }

  get(id: string): SavedSummary {
    const s = this.summary(id);
    if (!s) throw notFound(`no saved session '${id}'`);
    return s;
  }

  /** One page of a session's entries, paged like GET /traffic (ids are positions in the file, from 1). */
  entries(id: string, p: Paging): { id: string; name: string; items: EntrySummary[]; total: number; offset: number; limit: number } {
    const r = this.read(id);
    if (!r) throw notFound(`no saved session '${id}'`);
    let items = r.parsed.items;
    if (p.since_id !== undefined) items = items.filter((e) => e.id > p.since_id!);
    const order = p.order ?? (p.since_id !== undefined ? "asc" : "desc");
    const limit = Math.min(LIST_LIMIT_MAX, p.limit ?? LIST_LIMIT_DEFAULT);
    const offset = p.offset ?? 0;
    const total = items.length;
    let page: EntrySummary[];
    if (order === "asc") page = items.slice(offset, offset + limit);
    else page = items.slice(Math.max(0, total - offset - limit), Math.max(0, total - offset)).reverse();
    return { id, name: r.parsed.name, items: page, total, offset, limit };
  }

  /** The path of a readable session's file (404 otherwise). */
  file(id: string): string {
    this.get(id);
    return this.pathOf(id);
  }

  delete(id: string): void {
    if (!ID_RE.test(id)) throw notFound(`no saved session '${id}'`);
    try {
      unlinkSync(this.pathOf(id));
    } catch {
      throw notFound(`no saved session '${id}'`);
    }
    this.cache.delete(id);
  }

  /** Saves a HAR document (already checked) as a new session; its log gets `_tapwire` {name, saved_at}. */
  importHar(doc: { log: Obj }, name: string | undefined): SavedSummary {
    this.ensureDir();
    const log = doc.log;
    const meta = isObj(log._tapwire) ? log._tapwire : {};
    const pages = Array.isArray(log.pages) ? (log.pages as Obj[]) : [];
    const resolved = name ?? (typeof meta.name === "string" ? meta.name : typeof pages[0]?.title === "string" && pages[0].title ? (pages[0].title as string) : "Imported session");
    const id = this.newId(resolved);
    const out = { ...doc, log: { ...log, _tapwire: { ...meta, name: resolved, saved_at: Date.now(), imported: true } } };
    writeFileAtomic(this.pathOf(id), JSON.stringify(out));
    return this.get(id);
  }

  /** Where a new session is written (the folder is created). */
  prepare(name: string): { id: string; path: string } {
    this.ensureDir();
    const id = this.newId(name);
    return { id, path: this.pathOf(id) };
  }
}
