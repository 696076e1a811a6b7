/**
 * Minimal RFC 6455 frame encoder (e.g. for the proxy to send its own close
 * frame, and for tests). It builds one frame; fragmentation is the caller's
 * business (set `fin: false` and use opcode "continuation" for the rest).
 */

export type WsOpcodeName = "continuation" | "text" | "binary" | "close" | "ping" | "pong";

export const OPCODE_NUMBERS: Readonly<Record<WsOpcodeName, number>> = {
  continuation: 0x0,
  text: 0x1,
  binary: 0x2,
  close: 0x8,
  ping: 0x9,
  pong: 0xa,
};

export interface EncodeFrameOptions {
  /** Named opcode or a raw 4-bit number (raw numbers allow building invalid frames on purpose). */
  opcode: WsOpcodeName | number;
  /** Payload; strings are UTF-8 encoded. */
  payload?: Uint8Array | string;
  /** Default true. */
  fin?: boolean;
  rsv1?: boolean;
  rsv2?: boolean;
  rsv3?: boolean;
  /**
   * Masking key (4 bytes) — client-to-server frames must be masked. `true`
   * picks a random key; omitted/false sends the payload unmasked.
   */
  mask?: Uint8Array | boolean;
}

const utf8 = new TextEncoder();

/** Encodes one frame, choosing the shortest of the 7-, 16- and 64-bit length forms. */
export function encodeFrame(opts: EncodeFrameOptions): Uint8Array {
  const payload = typeof opts.payload === "string" ? utf8.encode(opts.payload) : (opts.payload ?? new Uint8Array(0));
  const op = typeof opts.opcode === "number" ? opts.opcode & 0x0f : OPCODE_NUMBERS[opts.opcode];
  let key: Uint8Array | null = null;
  if (opts.mask instanceof Uint8Array) {
    if (opts.mask.length !== 4) throw new RangeError("masking key must be 4 bytes");
    key = opts.mask;
  } else if (opts.mask === true) {
    key = crypto.getRandomValues(new Uint8Array(4));
  }
  const len = payload.length;
  const extLen = len < 126 ? 0 : len <= 0xffff ? 2 : 8;
  const headerLen = 2 + extLen + (key ? 4 : 0);
  const out = new Uint8Array(headerLen + len);
  out[0] =
    ((opts.fin ?? true) ? 0x80 : 0) | (opts.rsv1 ? 0x40 : 0) | (opts.rsv2 ? 0x20 : 0) | (opts.rsv3 ? 0x10 : 0) | op;
  const maskBit = key ? 0x80 : 0;
  if (extLen === 0) {
    out[1] = maskBit | len;
  } else if (extLen === 2) {
    out[1] = maskBit | 126;
    out[2] = len >>> 8;
    out[3] = len & 0xff;
  } else {
    out[1] = maskBit | 127;
    const hi = Math.floor(len / 0x100000000);
    const dv = new DataView(out.buffer, out.byteOffset, out.byteLength);
    dv.setUint32(2, hi);
    dv.setUint32(6, len >>> 0);
  }
  let p = 2 + extLen;
  if (key) {
    out.set(key, p);
    p += 4;
    for (let i = 0; i < len; i++) out[p + i] = payload[i] ^ key[i & 3];
  } else {
    out.set(payload, p);
  }
  return out;
}

/**
 * Builds a close frame. With no code the payload is empty; a reason needs a
 * code. Reasons longer than 123 UTF-8 bytes are rejected (control frame limit).
 */
export function encodeCloseFrame(code?: number, reason = "", mask?: Uint8Array | boolean): Uint8Array {
  if (code === undefined) {
    if (reason) throw new RangeError("a close reason needs a close code");
    return encodeFrame({ opcode: "close", mask });
  }
  const r = utf8.encode(reason);
  if (r.length > 123) throw new RangeError("close reason exceeds 123 bytes");
  const payload = new Uint8Array(2 + r.length);
  payload[0] = (code >>> 8) & 0xff;
  payload[1] = code & 0xff;
  payload.set(r, 2);
  return encodeFrame({ opcode: "close", payload, mask });
}
