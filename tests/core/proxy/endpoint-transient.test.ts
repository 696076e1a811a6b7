/**
 * Endpoint.writeTransient (src/core/proxy/endpoint.ts): the HTTP/2 codec hands its frames over as a view of a buffer
 * it overwrites after the call; whatever the socket does not take at once must be kept as a copy, or the bytes sent
 * at the next drain are the next frames' instead of these.
 */
import { describe, expect, test } from "bun:test";
import type { Socket } from "bun";
import { Endpoint } from "../../../src/core/proxy/endpoint.ts";

/** A socket that takes at most `room` bytes per write until told to drain (Bun sockets do not buffer). */
function slowSocket(room: number) {
  const sent: number[] = [];
  const s = {
    room,
    write(d: Uint8Array): number {
      const n = Math.min(d.length, s.room);
      for (let i = 0; i < n; i++) sent.push(d[i]!);
      s.room -= n;
      return n;
    },
    end() {},
    terminate() {},
    pause() {},
    resume() {},
    timeout() {},
    data: undefined as unknown,
  };
  return { socket: s as unknown as Socket<unknown>, sent, give(n: number) { s.room += n; } };
}

describe("Endpoint.writeTransient", () => {
  test("the part the socket did not take, and what is queued behind it, keep their bytes after the caller reuses its buffer", () => {
    const { socket, sent, give } = slowSocket(3);
    const ep = new Endpoint(socket);
    const buf = new Uint8Array(8);
    buf.set([1, 2, 3, 4, 5, 6, 7, 8]);
    ep.writeTransient(buf); // 3 bytes go, 5 wait
    buf.fill(0); // the codec writes its next frames into the same buffer
    buf.set([9, 10, 11, 12]);
    ep.writeTransient(buf.subarray(0, 4)); // queued behind the first
    buf.fill(0xff);
    give(100);
    ep.handleDrain();
    expect(sent).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
  });

  test("bytes the socket takes whole are not copied or queued", () => {
    const { socket, sent } = slowSocket(100);
    const ep = new Endpoint(socket);
    const buf = new Uint8Array([1, 2, 3]);
    expect(ep.writeTransient(buf)).toBe(true);
    buf.fill(0);
    expect(sent).toEqual([1, 2, 3]);
  });
});
