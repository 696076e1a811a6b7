// src/core/ip.ts answers as node:net does (it replaces node:net's isIPv4/isIPv6 to keep that module out of start-up)
import { expect, test } from "bun:test";
import * as net from "node:net";
import { isIPv4, isIPv6, parseIPv6 } from "../../src/core/ip.ts";

const CASES = [
  "", "0.0.0.0", "255.255.255.255", "256.1.1.1", "1.2.3", "1.2.3.4.5", "01.2.3.4", "1.2.3.04", "1..3.4", " 1.2.3.4", "1.2.3.4 ",
  "::", "::1", "1::", "1::1", ":::", "1:::1", "::1::", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7", "1:2:3:4:5:6::7:8",
  "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8", ":1:2:3:4:5:6:7", "1:2:3:4:5:6:7:", "12345::", "fFfF::", "g::1", "::ffff:1.2.3.4",
  "::1.2.3.4", "1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:6:7:1.2.3.4", "1::1.2.3.4", "::ffff:1.2.3", "::ffff:256.1.1.1", "1.2.3.4::",
  "fe80::1%eth0", "fe80::1%", "fe80::1%en0.1", "fe80::1%a:b", "fe80::1%a b", "fe80::1%%", "1.2.3.4%eth0", "[::1]", "::1]",
  "2001:db8::8a2e:370:7334", "2001:0db8:0000:0000:0000:ff00:0042:8329", "2001:db8:::1", "::%1",
];

test("isIPv4 and isIPv6 agree with node:net on edge cases and on random strings", () => {
  for (const c of CASES) expect({ c, v4: isIPv4(c), v6: isIPv6(c) }).toEqual({ c, v4: net.isIPv4(c), v6: net.isIPv6(c) });
  // random strings over the characters that matter, seeded (repeatable)
  let seed = 12345;
  const rnd = (n: number) => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed % n;
  };
  const alphabet = "0123456789abcdefABg:.%:::..";
  let v6 = 0;
  for (let i = 0; i < 50_000; i++) {
    let s = "";
    const len = rnd(24);
    for (let j = 0; j < len; j++) s += alphabet[rnd(alphabet.length)];
    if (net.isIPv6(s)) v6++;
    expect({ s, v4: isIPv4(s), v6: isIPv6(s) }).toEqual({ s, v4: net.isIPv4(s), v6: net.isIPv6(s) });
  }
  expect(v6).toBeGreaterThan(50); // the random set holds addresses too, not only rejects
  let v4 = 0;
  for (let i = 0; i < 20_000; i++) {
    let s = "";
    const len = 7 + rnd(10);
    for (let j = 0; j < len; j++) s += "0123456789...25"[rnd(15)];
    if (net.isIPv4(s)) v4++;
    expect({ s, v4: isIPv4(s) }).toEqual({ s, v4: net.isIPv4(s) });
  }
  expect(v4).toBeGreaterThan(20);
});

test("parseIPv6 gives the 16 bytes", () => {
  expect([...parseIPv6("::ffff:1.2.3.4")!]).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 1, 2, 3, 4]);
  expect([...parseIPv6("2001:db8::1")!]).toEqual([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
  expect(parseIPv6("1:2")).toBeUndefined();
});
