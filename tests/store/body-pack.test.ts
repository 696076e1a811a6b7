import { describe, expect, test } from "bun:test";
import { bodyFinder, packBody, Z_NONE, Z_ZSTD } from "../../src/store/body-pack.ts";

const enc = new TextEncoder();

/** A body as the store keeps it: compressed when it pays (long enough), else as it is. */
function stored(text: string, asBytes = false): [string | Uint8Array, number] {
  const p = packBody(asBytes ? enc.encode(text) : text);
  return [p.value, p.z];
}

const filler = (n: number) => Array.from({ length: n }, (_, i) => `{"id":${i},"name":"row ${i}"}`).join(",");

describe("bodyFinder: either body of an entry, compared as SQLite's LIKE does", () => {
  test("compressed and plain bodies, in the request, the response or neither", () => {
    const long = stored(`[${filler(40)},{"note":"see Zanzibar here"}]`);
    expect(long[1]).toBe(Z_ZSTD);
    const plainBytes = stored("short Zanzibar body", true);
    expect(plainBytes[1]).toBe(Z_NONE);
    const none = stored(`[${filler(40)}]`);
    const find = bodyFinder("zanzibar");
    expect(find(long[0], long[1], null, null)).toBe(true);
    expect(find(null, null, long[0], long[1])).toBe(true);
    expect(find(none[0], none[1], long[0], long[1])).toBe(true);
    expect(find(long[0], long[1], none[0], none[1])).toBe(true);
    expect(find(none[0], none[1], none[0], none[1])).toBe(false);
    expect(find(plainBytes[0], plainBytes[1])).toBe(true);
    expect(find("a text body with ZANZIBAR", Z_NONE)).toBe(true);
    expect(find(null, null, null, null)).toBe(false);
  });

  test("ASCII letters fold, other characters do not; a plain stored body is never changed in place", () => {
    const body = enc.encode("Grüße aus ZÜRICH und Zanzibar");
    const copy = Uint8Array.from(body);
    expect(bodyFinder("zürich")(body, Z_NONE)).toBe(false); // Ü is no ASCII letter: compared exactly
    expect(bodyFinder("ZÜRICH")(body, Z_NONE)).toBe(true);
    expect(bodyFinder("zÜrich")(body, Z_NONE)).toBe(true);
    expect(bodyFinder("GRÜSSE")(body, Z_NONE)).toBe(false);
    expect(body).toEqual(copy);
    // a needle without letters is decided by the exact check
    expect(bodyFinder("42;")(enc.encode("a=42;b"), Z_NONE, null, null)).toBe(true);
    expect(bodyFinder("43;")(enc.encode("a=42;b"), Z_NONE, enc.encode("c=41;"), Z_NONE)).toBe(false);
    // the case-folded pass looks at the second body too
    const [v, z] = stored(`[${filler(40)},"KeLvIn"]`);
    expect(bodyFinder("kelvin")(enc.encode("nothing here"), Z_NONE, v, z)).toBe(true);
    expect(bodyFinder("kelvin")(v, z, enc.encode("nothing here"), Z_NONE)).toBe(true);
  });

  test("the body that held the string more often is read first; the answers stay the same in either order", () => {
    const find = bodyFinder("zanzibar");
    const hit = stored(`[${filler(40)},{"note":"see zanzibar here"}]`);
    const none = stored(`[${filler(40)}]`);
    const folded = stored(`[${filler(40)},"ZANZIBAR"]`);
    // bytes that are no zstd frame: reading this body throws, so a call that returns shows it was not read
    const unreadable = new Uint8Array([0x28, 0xb5, 0x2f, 0xfd, 1, 2, 3]);
    // the request first while nothing has been found
    expect(() => find(unreadable, Z_ZSTD, hit[0], hit[1])).toThrow();
    // responses hold it twice: from then on the response is read first
    expect(find(none[0], none[1], hit[0], hit[1])).toBe(true);
    expect(find(none[0], none[1], hit[0], hit[1])).toBe(true);
    expect(find(unreadable, Z_ZSTD, hit[0], hit[1])).toBe(true);
    // every answer as before: the request alone, folded in either body, neither
    expect(find(hit[0], hit[1], none[0], none[1])).toBe(true);
    expect(find(hit[0], hit[1], null, null)).toBe(true);
    expect(find(none[0], none[1], folded[0], folded[1])).toBe(true);
    expect(find(folded[0], folded[1], none[0], none[1])).toBe(true);
    expect(find(none[0], none[1], none[0], none[1])).toBe(false);
    expect(find(null, null, null, null)).toBe(false);
    // requests hold it more often now (4 against 3): the request is read first again
    expect(find(hit[0], hit[1], none[0], none[1])).toBe(true);
    expect(() => find(hit[0], hit[1], unreadable, Z_ZSTD)).not.toThrow();
    expect(() => find(none[0], none[1], unreadable, Z_ZSTD)).toThrow();
  });
});
