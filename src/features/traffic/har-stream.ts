/**
 * A HAR of many captured entries, written one entry at a time: what GET /traffic/export.har streams and what a
 * saved session is written with. Entries come from the store a page at a time (CaptureStore.details: ids
 * ascending, on a read connection of its own), are turned into JSON by har.ts's harEntry and handed on in chunks of
 * about 64 KiB, pulled by the reader: nothing holds more than a page, so a 100,000-entry export runs in bounded
 * memory (bench/har-export-bench.ts).
 *
 * The export covers the entries that exist when it starts (ids up to the highest one then): traffic captured while
 * it runs is left for the next export, so an export under load ends.
 */
import { open, rename, unlink, type FileHandle } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import type { CaptureStore } from "../../store/capture-store.ts";
import type { ListQuery } from "../../store/types.ts";
import { harEntry, harPage, PAGE_ID, type FramesOf, type HarOptions } from "./har.ts";

/** Chunks handed to the response or file are joined up to about this many bytes. */
const CHUNK = 64 * 1024;
/** Characters of HAR handed on between two garbage collections (see below). */
const GC_EVERY = 16 * 1024 * 1024;

/** The entries of a query for an export: the /traffic filters, and limit/offset (not capped here). */
export interface ExportQuery extends Omit<ListQuery, "order"> {
  /** Entries to skip among the matching ones (oldest first). */
  offset?: number;
  /** At most this many entries; no limit when absent. */
  limit?: number;
}

/** Yields the HAR text of the matching entries, oldest first, in pieces. `counted` learns the entry count at the end. */
export async function* harChunks(
  store: CaptureStore,
  q: ExportQuery,
  options: HarOptions,
  framesOf?: FramesOf,
  counted?: (entries: number, firstTs: number | null) => void,
): AsyncGenerator<string> {
  const top = await store.list({ limit: 1, order: "desc" });
  const upto = top.items[0]?.id ?? 0;
  const creator: Record<string, string> = { name: options.creatorName ?? "tapwire", version: options.version };
  if (options.pageTitle !== undefined) creator.comment = options.pageTitle;
  let head = `{"log":{"version":"1.2","creator":${JSON.stringify(creator)}`;
  if (options.comment !== undefined) head += `,"comment":${JSON.stringify(options.comment)}`;
  if (options.meta !== undefined) head += `,"_tapwire":${JSON.stringify(options.meta)}`;
  head += `,"entries":[`;
  let buf = head;
  let n = 0;
  let firstTs: number | null = null;
  let sinceGc = 0;
  const filters: ListQuery = { ...q };
  delete filters.limit;
  delete filters.offset;
  const pageref = options.pageTitle !== undefined ? PAGE_ID : undefined;
  for await (const e of store.details(filters, { upto, offset: q.offset, limit: q.limit })) {
    firstTs ??= e.timestamp;
    buf += (n > 0 ? "," : "") + JSON.stringify(harEntry(e, pageref, framesOf?.(e.id) ?? null));
    n++;
    if (buf.length >= CHUNK) {
      sinceGc += buf.length;
      yield buf;
      buf = "";
      // Each chunk leaves garbage, mostly byte buffers outside the JS heap (the encoded chunk, the response's
      // copies) that barely count towards the collector's own trigger: a full collection every GC_EVERY keeps a
      // long export's footprint flat (bench/har-export-bench.ts, 100,000 entries: peak RSS growth 80 MB without it,
      // 26-40 MB with it; the export time stayed within the run-to-run noise of a loaded machine)
      if (sinceGc >= GC_EVERY) {
        sinceGc = 0;
        Bun.gc(true);
      }
    }
  }
  buf += "]";
  if (options.pageTitle !== undefined) buf += `,"pages":[${JSON.stringify(harPage(options.pageTitle, firstTs ?? Date.now()))}]`;
  buf += "}}\n";
  counted?.(n, firstTs);
  yield buf;
}

/** A streamed response of the chunks, pulled as the client reads (backpressure: nothing is read ahead). */
export function harResponse(chunks: AsyncGenerator<string>, filename: string): Response {
  const enc = new TextEncoder();
  const stream = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          const r = await chunks.next();
          if (r.done) controller.close();
          else controller.enqueue(enc.encode(r.value));
        } catch (e) {
          controller.error(e);
        }
      },
      async cancel() {
        await chunks.return(undefined);
      },
    },
    { highWaterMark: 0 },
  );
  return new Response(stream, {
    headers: {
      "content-type": "application/json; charset=utf-8",
      "content-disposition": `attachment; filename="${filename.replace(/["\\\r\n]/g, "_")}"`,
    },
  });
}

/**
 * Writes the chunks to `path` atomically (temp file beside it, fsync, rename; mode 0600) and returns the bytes
 * written. The temp file is removed when writing fails.
 */
export async function writeChunksAtomic(path: string, chunks: AsyncIterable<string>): Promise<number> {
  const tmp = join(dirname(path), `.${basename(path)}.${process.pid}.${Date.now()}.tmp`);
  let fh: FileHandle | null = await open(tmp, "wx", 0o600);
  let bytes = 0;
  try {
    for await (const c of chunks) {
      const b = Buffer.from(c, "utf8");
      bytes += b.length;
      await fh.write(b);
    }
    await fh.sync();
    await fh.close();
    fh = null;
    await rename(tmp, path);
  } catch (e) {
    await fh?.close().catch(() => {});
    await unlink(tmp).catch(() => {});
    throw e;
  }
  try {
    const d = await open(dirname(path), "r");
    try {
      await d.sync();
    } finally {
      await d.close();
    }
  } catch {
    // fsync of a folder is best-effort
  }
  return bytes;
}
