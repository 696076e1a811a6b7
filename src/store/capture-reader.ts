/**
 * The capture store's reader Worker: runs list(), search and export pages (capture-query.ts) on read-only
 * connections of its own, so that a query that takes long (a search decompressing thousands of bodies, a count
 * over a million entries, an export) never stalls the proxy's event loop. The main thread has waited for the
 * writer to make every entry it added readable before it asks (WAL: each query is a read transaction of its own,
 * it sees every committed entry and never waits for the writer).
 *
 * Two connections: one for list and search (bounded page cache and memory map, capture-db.ts tuneConnection), one
 * for exports (a small page cache and no memory map: a long export must not fill the process with the file).
 *
 * Built as an extra entrypoint of the compiled binary (build.ts). Never throws out of a handler: errors are
 * answered (with SQLite's code, so that the store can tell corruption).
 */
import { Database } from "bun:sqlite";
import { tuneConnection } from "./capture-db.ts";
import type { ReaderReply, ReaderRequest } from "./capture-protocol.ts";
import { CaptureQuery } from "./capture-query.ts";

declare const self: Worker;

let path = "";
let db: Database | null = null;
let exportDb: Database | null = null;
let query: CaptureQuery | null = null;

function send(m: ReaderReply): void {
  self.postMessage(m);
}

function connect(): void {
  const d = new Database(path, { readonly: true, strict: true });
  tuneConnection(d, "reader");
  const e = new Database(path, { readonly: true, strict: true });
  e.run("PRAGMA busy_timeout = 5000");
  e.run("PRAGMA cache_size = -2048");
  e.run("PRAGMA mmap_size = 0");
  db = d;
  exportDb = e;
}

function disconnect(): void {
  db?.close();
  exportDb?.close();
  db = exportDb = null;
}

function handle(m: ReaderRequest): void {
  if (m.t === "open") {
    try {
      path = m.path;
      query = new CaptureQuery(m.hasFts);
      connect();
      send({ t: "opened", ok: true });
    } catch (e) {
      send({ t: "opened", ok: false, error: e instanceof Error ? e.message : String(e) });
    }
    return;
  }
  if (m.t === "reopen") {
    try {
      query = new CaptureQuery(m.hasFts);
      disconnect();
      connect();
    } catch (e) {
      console.error(`capture reader: reopening the database failed: ${e instanceof Error ? e.message : String(e)}`);
    }
    return;
  }
  try {
    if (!db || !exportDb || !query) throw new Error("capture reader is not open");
    let value: unknown;
    switch (m.t) {
      case "list":
        value = query.list(db, m.q);
        break;
      case "search-ids":
        value = query.searchIdsUpto(exportDb, m.q, m.upto);
        break;
      case "details-page":
        value = query.detailsPage(exportDb, m.q, m.upto, m.n, m.skip);
        break;
      case "details-ids":
        value = query.detailsByIds(exportDb, m.ids);
        break;
      case "close":
        disconnect();
        send({ t: "reply", seq: m.seq });
        self.onmessage = null;
        return;
    }
    send({ t: "reply", seq: m.seq, value });
  } catch (e) {
    send({ t: "reply", seq: m.seq, error: e instanceof Error ? e.message : String(e), code: (e as { code?: string }).code });
  }
}

self.onmessage = (ev: MessageEvent<ReaderRequest>) => handle(ev.data);
