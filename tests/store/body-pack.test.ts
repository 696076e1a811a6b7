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
});
