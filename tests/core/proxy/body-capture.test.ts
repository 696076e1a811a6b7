/**
 * BodyCapture (src/pipeline/flow.ts), the capped body copy capture stores: a socket read kept whole by addRead is
 * held with the offset of its body (no view made) and comes back as exactly the body, alone or with later chunks.
 */
import { describe, expect, test } from "bun:test";
import { BodyCapture } from "../../../src/pipeline/flow.ts";

const enc = new TextEncoder();
const text = (b: Uint8Array | null) => (b === null ? null : new TextDecoder().decode(b));

describe("BodyCapture", () => {
  test("addRead keeps the read and the body's offset; bytes() is the body, bytesFrom()+bytesFromAt the same", () => {
    const c = new BodyCapture(1024);
    const read = enc.encode("HEAD\r\n\r\nbody!");
    c.addRead(read, 8);
    expect([c.size, c.kept, c.firstAt]).toEqual([5, 5, 8]);
    expect(text(c.bytes())).toBe("body!");
    expect(c.bytesFrom()).toBe(read);
    expect(c.bytesFromAt).toBe(8);
  });

  test("a read kept at an offset, then more chunks: bytes() joins the body parts only", () => {
    const c = new BodyCapture(1024);
    c.addRead(enc.encode("HEAD\r\n\r\nab"), 8);
    c.add(enc.encode("cd"));
    c.addRead(enc.encode("xxef"), 2);
    expect(text(c.bytes())).toBe("abcdef");
    expect(text(c.bytesFrom())).toBe("abcdef");
    expect(c.bytesFromAt).toBe(0);
    expect([c.size, c.kept]).toEqual([6, 6]);
  });

  test("over the limit: a copy of what fits; reset() forgets the offset", () => {
    const c = new BodyCapture(3);
    c.addRead(enc.encode("HH12345"), 2);
    expect(text(c.bytes())).toBe("123");
    expect([c.size, c.kept, c.firstAt]).toEqual([5, 3, 0]);
    c.reset();
    expect([c.size, c.firstAt, c.bytes(), c.bytesFromAt]).toEqual([0, 0, null, 0]);
    c.addRead(enc.encode("HHab"), 2);
    c.reset();
    c.add(enc.encode("zz"));
    expect(text(c.bytes())).toBe("zz");
    expect(c.bytesFromAt).toBe(0);
  });

  test("no body at all: null", () => {
    const c = new BodyCapture(10);
    expect(c.bytes()).toBeNull();
    expect(c.bytesFrom()).toBeNull();
  });
});
