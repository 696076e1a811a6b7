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
 * A search with many candidates shares their check with a helper: a second instance of this file, started by the
 * reader once it has answered its first list (role "helper": one small read connection, no memory map), takes
 * chunks of the candidates on the other core (search-share.ts: the protocol, and why the result stays exact).
 *
 * Built as an extra entrypoint of the compiled binary (build.ts). Never throws out of a handler: errors are
 * answered (with SQLite's code, so that the store can tell corruption).
 */
import { Database } from "bun:sqlite";
import { setPriority } from "node:os";
import { tuneConnection } from "./capture-db.ts";
import type { ReaderReply, ReaderRequest } from "./capture-protocol.ts";
import { CaptureQuery } from "./capture-query.ts";
import { type HelperPost, helpVerify, type VerifyMessage } from "./search-share.ts";

declare const self: Worker;

let path = "";
let db: Database | null = null;
let exportDb: Database | null = null;
let query: CaptureQuery | null = null;

/** The search helper (role "helper"), started once the first page is answered; null before, or when it could not start. */
let helper: Worker | null = null;
let helperFailed = false;

/** Starts the helper unless it runs (or could not start); false when there is none. */
function startHelper(): boolean {
  if (!helper) {
    if (helperFailed || !path) return false;
    try {
      const w = new Worker(new URL("./capture-reader.ts", import.meta.url));
      // it never keeps this Worker alive
      w.unref();
      const gone = () => {
        if (helper === w) helper = null;
        helperFailed = true;
      };
      w.addEventListener("error", (ev) => {
        console.error(`capture reader: the search helper failed (${ev.message}); searches check their candidates on one thread`);
        gone();
      });
      w.addEventListener("close", gone);
      w.postMessage({ t: "helper", path } satisfies HelperRequest);
      helper = w;
    } catch (e) {
      helperFailed = true;
      console.error(`capture reader: no search helper (${e instanceof Error ? e.message : String(e)}); searches check their candidates on one thread`);
      return false;
    }
  }
  return true;
}

/** Posts a search's candidates to the helper, starting it first; false when there is none. */
const postToHelper: HelperPost = (m) => {
  if (!startHelper()) return false;
  helper!.postMessage(m);
  return true;
};

/**
 * Ends the helper once it has closed its connection (or after HELPER_CLOSE_MS). Terminated with its connection
 * open, the helper's thread closed it whenever its teardown ran: as the database's last connection that close
 * checkpoints with the file locked, and a writer opening the file meanwhile (the next start) met SQLITE_BUSY.
 */
function stopHelper(): Promise<void> {
  const w = helper;
  helper = null;
  if (!w) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      w.removeEventListener("message", onMessage);
      w.removeEventListener("close", done);
      w.terminate();
      resolve();
    };
    const onMessage = (ev: MessageEvent<{ t?: string }>) => {
      if (ev.data?.t === "helper-closed") done();
    };
    const timer = setTimeout(done, HELPER_CLOSE_MS);
    w.addEventListener("message", onMessage);
    w.addEventListener("close", done);
    w.ref();
    w.postMessage({ t: "helper-close" } satisfies HelperRequest);
  });
}

/** How long stopHelper waits for the helper to close its connection (it may be checking a chunk of a search). */
const HELPER_CLOSE_MS = 5000;

/** The helper's messages (role "helper"): its connection, then jobs. */
type HelperRequest = { t: "helper"; path: string } | { t: "helper-reopen" } | { t: "helper-close" } | VerifyMessage;

function helperConnect(): void {
  const d = new Database(path, { readonly: true, strict: true });
  d.run("PRAGMA busy_timeout = 5000");
  // candidates' bodies pages are read once each: a small cache, no map (the process's RSS)
  d.run("PRAGMA cache_size = -2048");
  d.run("PRAGMA mmap_size = 0");
  db = d;
}

function handleHelper(m: HelperRequest): void {
  try {
    if (m.t === "helper") {
      path = m.path;
      // spare CPU only: on Linux this lowers this thread alone, so that a search never takes a core from the
      // proxy's thread or the writer (the reader checks whatever chunks the helper has not taken)
      try {
        // elsewhere the nice value is the whole process's: the proxy's too
        if (process.platform === "linux") setPriority(0, 10);
      } catch {
        // not allowed here: it runs at the normal priority
      }
      helperConnect();
    } else if (m.t === "helper-reopen") {
      db?.close();
      db = null;
      helperConnect();
    } else if (m.t === "helper-close") {
      db?.close();
      db = null;
      self.onmessage = null;
      // (to the reader that started this helper: not a ReaderReply)
      self.postMessage({ t: "helper-closed" });
    } else if (db) {
      helpVerify(db, m);
    }
  } catch (e) {
    console.error(`capture reader: search helper: ${e instanceof Error ? e.message : String(e)}`);
  }
}

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
      query.helper = postToHelper;
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
      query.helper = postToHelper;
      disconnect();
      connect();
      helper?.postMessage({ t: "helper-reopen" } satisfies HelperRequest);
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
      case "close": {
        self.onmessage = null;
        const seq = m.seq;
        // the helper's connection closes first, then these (the writer's, closing last, checkpoints)
        void stopHelper().then(() => {
          disconnect();
          send({ t: "reply", seq });
        });
        return;
      }
    }
    send({ t: "reply", seq: m.seq, value });
    // the helper starts once the first page is answered (not before: start-up), so that it is ready for the first
    // search (a user lists before searching)
    if (m.t === "list" && !helper) startHelper();
  } catch (e) {
    send({ t: "reply", seq: m.seq, error: e instanceof Error ? e.message : String(e), code: (e as { code?: string }).code });
  }
}

self.onmessage = (ev: MessageEvent<ReaderRequest | HelperRequest>) => {
  const m = ev.data;
  if (m.t === "helper" || m.t === "helper-reopen" || m.t === "helper-close" || m.t === "verify") handleHelper(m);
  else handle(m);
};
