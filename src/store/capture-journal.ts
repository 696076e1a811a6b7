/**
 * The capture journal: where the writer Worker puts each batch of entries the moment it arrives, before the
 * batch is written into SQLite ("materialised", capture-writer.ts decides when). Appending is one write() of
 * bytes the batch already carries (about 1 µs per entry); the SQLite insert costs 20-30 µs per entry, so while
 * traffic is heavy the store only appends here and writes SQLite once the proxy is idle (or when a reader needs
 * the entries, or when the journal grows past its bound).
 *
 * - Files: `<db>.journal/<16-digit number>.twj`, segments of about SEGMENT_BYTES; a record never spans two.
 *   A segment is deleted as soon as every record in it is materialised (or skipped), so the journal holds only
 *   the backlog.
 * - Record: a 40-byte header (magic, payload length, second length, entry count, first id, last id, id ceiling;
 *   little-endian) followed by the batch exactly as posted. Magic "TWJ2": the entries in the binary form of
 *   entry-codec.ts (second length 0). Magic "TWJ1", written by tapwire 0.1 before that form existed and still read:
 *   the rows as JSON (UTF-8), then every body back to back (the second length).
 * - The main thread's write-ahead files `wal-0.twm` and `wal-1.twm` (capture-store.ts): every entry as a record
 *   of its own, in this format, written before the proxy sends the response's last byte. At the first open they
 *   are read, records not already in a segment are appended to the journal like any batch, and the files go.
 * - Durability: a record is acknowledged after write() returned, so it survives kill -9 (the kernel has it);
 *   a record cut short by a crash was never acknowledged and is cut off at the next open. Which records are
 *   already in SQLite is told by the database itself (meta.journal_upto, written in the same transaction as the
 *   rows): the journal is only ever read forward from there.
 */
import { closeSync, ftruncateSync, fstatSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, rmSync, writeSync, writevSync } from "node:fs";
import { join } from "node:path";
import { type DecodedBatch, decodeBatch, decodeJsonBatch } from "./entry-codec.ts";

export const HEADER_BYTES = 40;
const MAGIC_JSON = 0x314a5754; // "TWJ1" read as a little-endian u32
const MAGIC = 0x324a5754; // "TWJ2"
/** The magic word of a format-2 record, for writers that store it last (capture-store.ts's mapped files). */
export const RECORD_MAGIC = MAGIC;
/** A new segment is started once the current one holds this much. */
export const SEGMENT_BYTES = 64 * 1024 * 1024;
const SEGMENT_RE = /^(\d{16})\.twj$/;
/** The main thread's write-ahead files (see capture-store.ts), in this folder. */
export const WAL_FILES = ["wal-0.twm", "wal-1.twm"] as const;
/** The names the main thread prepares its next files under while the writer imports the previous ones (capture-store.ts prepareWal). */
export const WAL_NEXT = ["wal-0.twm.next", "wal-1.twm.next"] as const;

/** The 40-byte header of a record (format 2) of `payloadLen` bytes. */
export function recordHeader(payloadLen: number, count: number, firstId: number, lastId: number, ceiling: number): Buffer {
  const header = Buffer.allocUnsafe(HEADER_BYTES);
  writeRecordHeader(new DataView(header.buffer, header.byteOffset, HEADER_BYTES), 0, payloadLen, count, firstId, lastId, ceiling);
  return header;
}

/**
 * A record header's fields after its magic word, written through `dv` at `at`. The magic word comes first in the
 * header; a writer whose reader may look at the bytes meanwhile writes it last (capture-store.ts's mapped files).
 */
export function writeRecordFields(dv: DataView, at: number, payloadLen: number, count: number, firstId: number, lastId: number, ceiling: number): void {
  dv.setUint32(at + 4, payloadLen, true);
  dv.setUint32(at + 8, 0, true);
  dv.setUint32(at + 12, count, true);
  dv.setFloat64(at + 16, firstId, true);
  dv.setFloat64(at + 24, lastId, true);
  dv.setFloat64(at + 32, ceiling, true);
}

/** Writes the header of recordHeader() through `dv` at `at` (no allocation: the write-ahead queue's own buffer). */
export function writeRecordHeader(dv: DataView, at: number, payloadLen: number, count: number, firstId: number, lastId: number, ceiling: number): void {
  dv.setUint32(at, MAGIC, true);
  writeRecordFields(dv, at, payloadLen, count, firstId, lastId, ceiling);
}

export interface JournalRecord {
  /** The batch's seq on the main thread (0: found in the journal at open). */
  seq: number;
  segment: number;
  pos: number;
  /** 2: binary entries (entry-codec.ts); 1: rows JSON then bodies. */
  format: 1 | 2;
  rowsLen: number;
  bodiesLen: number;
  count: number;
  firstId: number;
  lastId: number;
  ceiling: number;
}

interface Segment {
  n: number;
  path: string;
  size: number;
  /** Records of this segment not materialised yet. */
  live: number;
}

function segmentName(n: number): string {
  return `${String(n).padStart(16, "0")}.twj`;
}

export class CaptureJournal {
  /** Records not materialised yet, oldest first. */
  readonly queue: JournalRecord[] = [];
  /** Entries and bytes in `queue`. */
  entries = 0;
  bytes = 0;
  /** Highest last id of any record seen (at open or appended). */
  maxId = 0;
  /** Highest id ceiling of any record seen. */
  maxCeiling = 0;
  private readonly segments = new Map<number, Segment>();
  private current: Segment | null = null;
  private fd: number | null = null;
  private nextSegment = 1;

  private constructor(readonly dir: string) {}

  /**
   * Opens the journal folder (created if missing, mode 0700) and reads back every complete record; a record cut
   * short by a crash is cut off. Every record found is queued: release(upto) then forgets those SQLite already
   * has (the database's journal_upto is known only after this scan, which also tells the ids to open it with).
   */
  static open(dir: string, importWal = false): CaptureJournal {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const j = CaptureJournal.scan(dir);
    if (importWal) j.importWal();
    return j;
  }

  /**
   * The main thread's write-ahead files: their records newer than anything in the segments (ids already
   * materialised are released afterwards by the caller, as for any record) become journal records; then the
   * files are removed. A record cut short (the crash hit mid-write) ends a file.
   */
  private importWal(): void {
    const found = new Map<number, { payload: Uint8Array; ceiling: number }>();
    for (const name of WAL_FILES) {
      const path = join(this.dir, name);
      let buf: Buffer;
      try {
        buf = readFileSync(path);
      } catch {
        continue;
      }
      let pos = 0;
      while (pos + HEADER_BYTES <= buf.length) {
        if (buf.readUInt32LE(pos) !== MAGIC) break;
        const len = buf.readUInt32LE(pos + 4);
        const count = buf.readUInt32LE(pos + 12);
        const id = buf.readDoubleLE(pos + 16);
        const ceiling = buf.readDoubleLE(pos + 32);
        const end = pos + HEADER_BYTES + len;
        if (end > buf.length || count !== 1 || !Number.isFinite(id) || !Number.isFinite(ceiling)) break;
        if (id > this.maxId) found.set(id, { payload: buf.subarray(pos + HEADER_BYTES, end), ceiling });
        pos = end;
      }
    }
    const ids = [...found.keys()].sort((a, b) => a - b);
    for (const id of ids) {
      const r = found.get(id)!;
      this.append(0, r.payload, 1, id, id, r.ceiling);
    }
    for (const name of WAL_FILES) rmSync(join(this.dir, name), { force: true });
  }

  private static scan(dir: string): CaptureJournal {
    const j = new CaptureJournal(dir);
    const names = readdirSync(dir)
      .map((f) => SEGMENT_RE.exec(f))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => Number(m[1]))
      .sort((a, b) => a - b);
    const header = Buffer.alloc(HEADER_BYTES);
    for (const n of names) {
      const path = join(dir, segmentName(n));
      const fd = openSync(path, "r+");
      try {
        const size = fstatSync(fd).size;
        const seg: Segment = { n, path, size: 0, live: 0 };
        let pos = 0;
        while (pos + HEADER_BYTES <= size) {
          if (readSync(fd, header, 0, HEADER_BYTES, pos) !== HEADER_BYTES) break;
          const magic = header.readUInt32LE(0);
          if (magic !== MAGIC && magic !== MAGIC_JSON) break;
          const rec: JournalRecord = {
            seq: 0,
            segment: n,
            pos,
            format: magic === MAGIC ? 2 : 1,
            rowsLen: header.readUInt32LE(4),
            bodiesLen: header.readUInt32LE(8),
            count: header.readUInt32LE(12),
            firstId: header.readDoubleLE(16),
            lastId: header.readDoubleLE(24),
            ceiling: header.readDoubleLE(32),
          };
          const end = pos + HEADER_BYTES + rec.rowsLen + rec.bodiesLen;
          if (end > size || !(rec.lastId >= rec.firstId) || !Number.isFinite(rec.ceiling)) break;
          j.queue.push(rec);
          j.entries += rec.count;
          j.bytes += end - pos;
          seg.live++;
          j.maxId = Math.max(j.maxId, rec.lastId);
          j.maxCeiling = Math.max(j.maxCeiling, rec.ceiling);
          pos = end;
        }
        // whatever follows the last complete record was never acknowledged
        if (pos < size) ftruncateSync(fd, pos);
        seg.size = pos;
        j.segments.set(n, seg);
      } finally {
        closeSync(fd);
      }
      j.nextSegment = n + 1;
    }
    return j;
  }

  /** Forgets (and deletes the segments of) every record whose ids are all <= upto. */
  release(upto: number): void {
    while (this.queue.length > 0 && this.queue[0]!.lastId <= upto) this.drop(this.queue.shift()!);
    // empty segments other than the one being appended to go (a fresh open may have left some)
    for (const seg of [...this.segments.values()]) if (seg.live === 0 && seg !== this.current) this.removeSegment(seg);
  }

  /** Appends one batch (entries encoded by entry-codec.ts) and queues it. Throws if the disk refuses it (nothing is queued then). */
  append(seq: number, payload: Uint8Array, count: number, firstId: number, lastId: number, ceiling: number): JournalRecord {
    const total = HEADER_BYTES + payload.byteLength;
    let seg = this.current;
    if (seg === null || (seg.size > 0 && seg.size + total > SEGMENT_BYTES)) seg = this.startSegment();
    const header = Buffer.allocUnsafe(HEADER_BYTES);
    header.writeUInt32LE(MAGIC, 0);
    header.writeUInt32LE(payload.byteLength, 4);
    header.writeUInt32LE(0, 8);
    header.writeUInt32LE(count, 12);
    header.writeDoubleLE(firstId, 16);
    header.writeDoubleLE(lastId, 24);
    header.writeDoubleLE(ceiling, 32);
    const pos = seg.size;
    try {
      // one writev; a short one (rare on a regular file) is finished piece by piece
      let done = writevSync(this.fd!, [header, payload], pos);
      while (done < total) {
        const [piece, at] = done < HEADER_BYTES ? [header, done] : [payload, done - HEADER_BYTES];
        done += writeSync(this.fd!, piece, at, piece.byteLength - at, pos + done);
      }
    } catch (e) {
      // a partial record must not stay in front of the next one
      try {
        ftruncateSync(this.fd!, pos);
      } catch {
        // the next open cuts it off
      }
      throw e;
    }
    seg.size += total;
    seg.live++;
    const rec: JournalRecord = { seq, segment: seg.n, pos, format: 2, rowsLen: payload.byteLength, bodiesLen: 0, count, firstId, lastId, ceiling };
    this.queue.push(rec);
    this.entries += count;
    this.bytes += total;
    this.maxId = Math.max(this.maxId, lastId);
    this.maxCeiling = Math.max(this.maxCeiling, ceiling);
    return rec;
  }

  /** Reads a queued record back into its entries (and the errors of entries that could not be read). */
  read(rec: JournalRecord): DecodedBatch {
    const seg = this.segments.get(rec.segment);
    if (!seg) throw new Error(`capture journal: segment ${rec.segment} is gone`);
    const len = rec.rowsLen + rec.bodiesLen;
    const buf = Buffer.allocUnsafeSlow(len);
    const fd = seg === this.current && this.fd !== null ? this.fd : openSync(seg.path, "r");
    try {
      let off = 0;
      while (off < len) {
        const n = readSync(fd, buf, off, len - off, rec.pos + HEADER_BYTES + off);
        if (n === 0) throw new Error(`capture journal: segment ${rec.segment} is shorter than its records`);
        off += n;
      }
    } finally {
      if (fd !== this.fd) closeSync(fd);
    }
    if (rec.format === 2) return decodeBatch(buf);
    return decodeJsonBatch(buf.toString("utf8", 0, rec.rowsLen), new Uint8Array(buf.buffer, buf.byteOffset + rec.rowsLen, rec.bodiesLen));
  }

  /** Drops every queued record (clear): their entries are never materialised. */
  dropAll(): JournalRecord[] {
    const recs = this.queue.splice(0);
    for (const r of recs) this.drop(r);
    this.release(Infinity);
    return recs;
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
    if (this.current && this.current.live === 0) this.removeSegment(this.current);
    this.current = null;
  }

  private drop(rec: JournalRecord): void {
    this.entries -= rec.count;
    this.bytes -= HEADER_BYTES + rec.rowsLen + rec.bodiesLen;
    const seg = this.segments.get(rec.segment);
    if (!seg) return;
    seg.live--;
    if (seg.live > 0) return;
    if (seg === this.current) {
      // the segment being appended to is emptied in place: the journal does not grow while it keeps up
      try {
        ftruncateSync(this.fd!, 0);
        seg.size = 0;
      } catch {
        // it stays; a later release deletes it
      }
      return;
    }
    this.removeSegment(seg);
  }

  private startSegment(): Segment {
    if (this.current) {
      const old = this.current;
      if (this.fd !== null) closeSync(this.fd);
      this.fd = null;
      this.current = null;
      if (old.live === 0) this.removeSegment(old);
    }
    const n = this.nextSegment++;
    const path = join(this.dir, segmentName(n));
    this.fd = openSync(path, "w+", 0o600);
    const seg: Segment = { n, path, size: 0, live: 0 };
    this.segments.set(n, seg);
    this.current = seg;
    return seg;
  }

  private removeSegment(seg: Segment): void {
    this.segments.delete(seg.n);
    rmSync(seg.path, { force: true });
  }
}
