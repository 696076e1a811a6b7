import type { Duplex } from "node:stream";

/**
 * Batches the writes Bun's HTTP/2 session makes to `duplex` (the socket as the session sees it): the frames written
 * in one event-loop iteration leave through `out` as one write (far fewer TLS records and syscalls with many
 * streams). The session calls write(buffer) from native code about once per stream; it is taken here directly,
 * without the Writable machinery (write, writeOrBuffer, _write, the callback and its nextTick) each time. The session
 * looks only at the answer: false while `out` is full, then the duplex's 'drain' once `drained()` is called.
 * `flush()` sends what is batched at once (before an end); nothing is taken or sent once `closed()`.
 */
export function batchSessionWrites(duplex: Duplex, out: (chunk: Uint8Array) => boolean, closed: () => boolean): { flush: () => void; drained: () => void } {
  let pending: Uint8Array[] = [];
  let scheduled = false;
  let blocked = false;
  const flush = () => {
    scheduled = false;
    const parts = pending;
    pending = [];
    if (parts.length === 0 || closed()) return;
    if (!out(parts.length === 1 ? parts[0]! : Buffer.concat(parts))) blocked = true;
  };
  (duplex as unknown as { write: (chunk: Uint8Array, enc?: unknown, cb?: unknown) => boolean }).write = (chunk, enc, cb) => {
    if (chunk.length > 0 && !closed()) {
      pending.push(chunk);
      if (!scheduled) {
        scheduled = true;
        // once per event-loop iteration, not per microtask checkpoint: Bun's session calls into JavaScript once per
        // frame it parses, and microtasks run after each such call, so a per-microtask flush sent ~10-17 writes per
        // read (docs/http2.md, third pass)
        setImmediate(flush);
      }
    }
    const done = typeof enc === "function" ? enc : cb;
    if (typeof done === "function") process.nextTick(done as () => void);
    return !blocked;
  };
  const drained = () => {
    if (!blocked) return;
    blocked = false;
    duplex.emit("drain");
  };
  return { flush, drained };
}
