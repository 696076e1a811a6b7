/**
 * Joining writes (src/core/proxy/endpoint.ts): corked parts that lie back to back in one buffer (a response head
 * and the body bytes that came in the same read) leave as one view of it; anything else is copied in order.
 */
import { describe, expect, test } from "bun:test";
import { concatAll, concatBytes } from "../../../src/core/proxy/endpoint.ts";

const text = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("latin1");

describe("concatAll", () => {
  const read = new Uint8Array(Buffer.from("xxHTTP/1.1 200 OK\r\n\r\nbody-bytes-trailing", "latin1"));

  test("adjacent views of one buffer are joined without a copy", () => {
    const head = read.subarray(2, 21);
    const body = read.subarray(21, 31);
    const joined = concatAll([head, body]);
    expect(text(joined)).toBe("HTTP/1.1 200 OK\r\n\r\nbody-bytes");
    expect(joined.buffer).toBe(read.buffer);
    expect(joined.byteOffset).toBe(2);
    expect(concatAll([read.subarray(0, 2), read.subarray(2, 2), read.subarray(2, 6)]).buffer).toBe(read.buffer);
  });

  test("views with a gap, out of order, or of different buffers are copied in order", () => {
    const gap = concatAll([read.subarray(2, 6), read.subarray(7, 10)]);
    expect(text(gap)).toBe("HTTP1.1");
    expect(gap.buffer).not.toBe(read.buffer);
    const swapped = concatAll([read.subarray(6, 10), read.subarray(2, 6)]);
    expect(text(swapped)).toBe("/1.1HTTP");
    const other = new Uint8Array(Buffer.from("!!", "latin1"));
    expect(text(concatAll([read.subarray(2, 6), other]))).toBe("HTTP!!");
  });

  test("no parts join to an empty array; a single part is returned as it is; concatBytes skips empty sides", () => {
    expect(concatAll([]).length).toBe(0);
    const one = read.subarray(3, 5);
    expect(concatAll([one])).toBe(one);
    expect(concatBytes(new Uint8Array(0), one)).toBe(one);
    expect(text(concatBytes(one, read.subarray(0, 1)))).toBe("TTx");
  });
});
