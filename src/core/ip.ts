/**
 * IP address literals: the checks tapwire needs on the hot path and at start-up without node:net, whose module
 * costs ~8 ms of every start in Bun (its sockets and servers are set up when it is loaded; tapwire uses Bun's).
 * Same answers as node:net's isIPv4 and isIPv6 (tests/core/ip.test.ts compares them).
 */

const V4_PART = /^(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]\d|\d)$/;
const HEX_GROUP = /^[0-9a-fA-F]{1,4}$/;
const ZONE = /^[0-9a-zA-Z\-.:]+$/;

/** Dotted-decimal IPv4: four parts 0-255, no leading zeros. */
export function isIPv4(s: string): boolean {
  const parts = s.split(".");
  if (parts.length !== 4) return false;
  for (const p of parts) if (!V4_PART.test(p)) return false;
  return true;
}

/** Textual IPv6 (RFC 4291: "::" once, a dotted IPv4 tail), with an optional "%zone". */
export function isIPv6(s: string): boolean {
  const pct = s.indexOf("%");
  if (pct !== -1 && !ZONE.test(s.slice(pct + 1))) return false;
  return parseIPv6(pct === -1 ? s : s.slice(0, pct)) !== undefined;
}

/** The 16 bytes of a textual IPv6 address without a zone; undefined when it is not one. */
export function parseIPv6(s: string): Uint8Array | undefined {
  const out = new Uint8Array(16);
  let text = s;
  const lastColon = text.lastIndexOf(":");
  if (lastColon === -1) return undefined;
  const tail = text.slice(lastColon + 1);
  let v4: number[] | undefined;
  if (tail.includes(".")) {
    if (!isIPv4(tail)) return undefined;
    v4 = tail.split(".").map(Number);
    text = text.slice(0, lastColon + 1) + "0:0";
  }
  const halves = text.split("::");
  if (halves.length > 2) return undefined;
  const groups = (part: string) => (part === "" ? [] : part.split(":"));
  const head = groups(halves[0]!);
  const rest = halves.length === 2 ? groups(halves[1]!) : [];
  if (halves.length === 1 ? head.length !== 8 : head.length + rest.length > 7) return undefined;
  const all = [...head, ...new Array<string>(8 - head.length - rest.length).fill("0"), ...rest];
  for (let i = 0; i < 8; i++) {
    if (!HEX_GROUP.test(all[i]!)) return undefined;
    const v = parseInt(all[i]!, 16);
    out[i * 2] = v >> 8;
    out[i * 2 + 1] = v & 0xff;
  }
  if (v4) out.set(v4, 12);
  return out;
}
