/** HTTP/2 frames built byte by byte, for fixtures and for playing attacks over raw sockets. */
export const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

export function frame(type: number, flags: number, stream: number, payload: Uint8Array = new Uint8Array(0)): Buffer {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(stream & 0x7fffffff, 5);
  return Buffer.concat([h, Buffer.from(payload)]);
}

function hpackInt(v: number, prefix: number, first: number): number[] {
  const max = (1 << prefix) - 1;
  if (v < max) return [first | v];
  const out = [first | max];
  v -= max;
  while (v >= 128) {
    out.push((v % 128) + 128);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return out;
}

const hstr = (s: string) => {
  const b = Buffer.from(s);
  return [...hpackInt(b.length, 7, 0), ...b];
};

/** An HPACK block of literal fields without indexing (no Huffman): valid for any decoder. */
export function hpack(fields: [string, string][]): Buffer {
  const out: number[] = [];
  for (const [k, v] of fields) out.push(0x00, ...hstr(k), ...hstr(v));
  return Buffer.from(out);
}

export const requestFields = (path: string, authority = "example.test"): [string, string][] => [
  [":method", "GET"],
  [":scheme", "https"],
  [":authority", authority],
  [":path", path],
];

export const settingsFrame = (pairs: [number, number][] = [], ack = false) => {
  const b = Buffer.alloc(pairs.length * 6);
  pairs.forEach(([id, v], i) => {
    b.writeUInt16BE(id, i * 6);
    b.writeUInt32BE(v, i * 6 + 2);
  });
  return frame(4, ack ? 1 : 0, 0, b);
};
export const headersFrame = (stream: number, block: Buffer, endStream = true, endHeaders = true) => frame(1, (endStream ? 1 : 0) | (endHeaders ? 4 : 0), stream, block);
export const continuationFrame = (stream: number, block: Buffer, endHeaders = false) => frame(9, endHeaders ? 4 : 0, stream, block);
export const dataFrame = (stream: number, data: Uint8Array, endStream = false) => frame(0, endStream ? 1 : 0, stream, data);
export const rstFrame = (stream: number, code = 8) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(code);
  return frame(3, 0, stream, b);
};
export const pingFrame = (ack = false) => frame(6, ack ? 1 : 0, 0, Buffer.alloc(8));

export interface ParsedFrame {
  type: number;
  flags: number;
  stream: number;
  payload: Buffer;
}

/** Whole frames in buf (a trailing partial frame is left out). */
export function parseFrames(buf: Buffer): ParsedFrame[] {
  const out: ParsedFrame[] = [];
  let p = 0;
  while (buf.length - p >= 9) {
    const len = buf.readUIntBE(p, 3);
    if (buf.length - p - 9 < len) break;
    out.push({ type: buf[p + 3]!, flags: buf[p + 4]!, stream: buf.readUInt32BE(p + 5) & 0x7fffffff, payload: buf.subarray(p + 9, p + 9 + len) });
    p += 9 + len;
  }
  return out;
}
