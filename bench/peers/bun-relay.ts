#!/usr/bin/env bun
/**
 * The floor for streaming through any Bun process: a bare TCP relay. It accepts a connection, opens one to the
 * target port, and moves bytes both ways with the same backpressure rule tapwire's endpoints use (a write the
 * kernel does not take in full pauses the source until `drain`). No HTTP parsing, no capture, no pipeline: what it
 * costs is only Bun's socket read (a fresh buffer per read), its write, and the third process on the machine.
 *
 *   bun bench/peers/bun-relay.ts TARGET_PORT      prints `PORT n` once it listens on 127.0.0.1
 *
 * bench/streaming-bench.ts runs it beside direct and tapwire so a ratio can be read against what Bun itself allows.
 */
import type { Socket } from "bun";

interface Side {
  peer: Socket<Side> | null;
  /** Bytes the kernel did not take yet (written on drain). */
  queue: Uint8Array[];
  /** Bytes received before the other side was connected. */
  early: Uint8Array[];
}

const target = Number(process.argv[2]);
if (!Number.isInteger(target) || target <= 0) {
  console.error("usage: bun-relay.ts TARGET_PORT");
  process.exit(2);
}

function send(dst: Socket<Side>, d: Uint8Array, src: Socket<Side>): void {
  if (dst.data.queue.length > 0) {
    dst.data.queue.push(d);
    return;
  }
  const n = dst.write(d);
  if (n === d.length) return;
  dst.data.queue.push(d.subarray(Math.max(0, n)));
  src.pause();
}

function drain(s: Socket<Side>): void {
  const q = s.data.queue;
  while (q.length > 0) {
    const d = q[0]!;
    const n = s.write(d);
    if (n < d.length) {
      q[0] = d.subarray(Math.max(0, n));
      return;
    }
    q.shift();
  }
  s.data.peer?.resume();
}

const server = Bun.listen<Side>({
  hostname: "127.0.0.1",
  port: 0,
  socket: {
    open(client) {
      client.data = { peer: null, queue: [], early: [] };
      void Bun.connect<Side>({
        hostname: "127.0.0.1",
        port: target,
        socket: {
          open(up) {
            up.data = { peer: client, queue: [], early: [] };
            client.data.peer = up;
            for (const d of client.data.early) send(up, d, client);
            client.data.early = [];
          },
          data(up, d) {
            send(client, d, up);
          },
          drain,
          close() {
            client.end();
          },
          error() {
            client.end();
          },
        },
      }).catch(() => client.end());
    },
    data(client, d) {
      const up = client.data.peer;
      if (up) send(up, d, client);
      else client.data.early.push(d);
    },
    drain,
    close(client) {
      client.data.peer?.end();
    },
    error(client) {
      client.data.peer?.end();
    },
  },
});
console.log(`PORT ${server.port}`);
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) process.exit(0);
}, 1000);
