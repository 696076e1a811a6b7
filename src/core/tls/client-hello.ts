/**
 * Pure, non-throwing parser for the start of a TLS stream: decides whether the
 * bytes are TLS at all and, once the whole ClientHello has arrived (possibly
 * split across TCP reads and across several TLS records), extracts the SNI
 * host name and the ALPN protocol list.
 */

export interface ClientHelloInfo {
  /**
   * false: the bytes are not TLS (first byte is not a handshake record, or the
   * record version is implausible) - treat them as plain text (HTTP).
   * While `complete` is false this only means "not ruled out yet".
   */
  tls: boolean;
  /**
   * false: read more bytes and call again (always re-pass the whole buffer
   * from the start of the stream). true: the verdict is final.
   */
  complete: boolean;
  /** server_name extension, host_name entry (as sent; ASCII). */
  sni?: string;
  /** application_layer_protocol_negotiation protocol names, in client order. */
  alpn?: string[];
  /**
   * Set when the stream starts like TLS but the ClientHello is malformed or
   * unreasonably large; `complete` is true and sni/alpn are absent.
   */
  error?: string;
}

const RECORD_HANDSHAKE = 0x16;
const HANDSHAKE_CLIENT_HELLO = 0x01;
const RECORD_HEADER = 5;
/** TLSPlaintext.length limit (2^14). */
const MAX_RECORD = 16384;
/** Upper bound for a ClientHello we are willing to buffer (real ones are < 2 KiB; PQ key shares ~1.8 KiB). */
export const MAX_CLIENT_HELLO = 64 * 1024;

const EXT_SERVER_NAME = 0x0000;
const EXT_ALPN = 0x0010;

export function peekClientHello(buf: Uint8Array): ClientHelloInfo {
  const n = buf.length;
  if (n === 0) return { tls: true, complete: false };
  if (buf[0] !== RECORD_HANDSHAKE) return { tls: false, complete: true };
  // Record version: 3.x with x in 0..4 (SSL 3.0 .. TLS 1.3's legacy values; TLS 1.3 uses 0x0301/0x0303).
  if (n >= 2 && buf[1] !== 0x03) return { tls: false, complete: true };
  if (n >= 3 && buf[2] > 0x04) return { tls: false, complete: true };
  if (n < RECORD_HEADER) return { tls: true, complete: false };

  // Reassemble the handshake message from consecutive handshake records.
  const chunks: Uint8Array[] = [];
  let have = 0;
  let need = -1; // total handshake message bytes (4-byte header + body), once known
  let p = 0;
  while (need < 0 || have < need) {
    if (p + RECORD_HEADER > n) return { tls: true, complete: false };
    if (buf[p] !== RECORD_HANDSHAKE) return fail("non-handshake record inside ClientHello");
    if (buf[p + 1] !== 0x03 || buf[p + 2] > 0x04) return fail("bad record version");
    const len = (buf[p + 3] << 8) | buf[p + 4];
    if (len === 0 || len > MAX_RECORD) return fail(`bad record length ${len}`);
    const start = p + RECORD_HEADER;
    const avail = Math.min(len, n - start);
    chunks.push(buf.subarray(start, start + avail));
    have += avail;
    if (need < 0 && have >= 4) {
      const hs = flatten(chunks, have);
      if (hs[0] !== HANDSHAKE_CLIENT_HELLO) return fail(`first handshake message is type ${hs[0]}, not ClientHello`);
      const bodyLen = (hs[1] << 16) | (hs[2] << 8) | hs[3];
      if (bodyLen + 4 > MAX_CLIENT_HELLO) return fail(`ClientHello too large (${bodyLen} bytes)`);
      need = bodyLen + 4;
    }
    if (avail < len) {
      // This record is cut short by the end of the buffer.
      if (need >= 0 && have >= need) break;
      return { tls: true, complete: false };
    }
    p = start + len;
  }
  const msg = flatten(chunks, have).subarray(4, need);
  return parseClientHelloBody(msg);
}

function fail(error: string): ClientHelloInfo {
  return { tls: true, complete: true, error };
}

function flatten(chunks: Uint8Array[], total: number): Uint8Array {
  if (chunks.length === 1) return chunks[0];
  const out = new Uint8Array(total);
  let o = 0;
  for (const c of chunks) {
    out.set(c, o);
    o += c.length;
  }
  return out;
}

function parseClientHelloBody(b: Uint8Array): ClientHelloInfo {
  const end = b.length;
  let p = 0;
  // legacy_version (2) + random (32)
  p += 34;
  if (p + 1 > end) return fail("truncated ClientHello (random)");
  const sidLen = b[p];
  if (sidLen > 32) return fail("bad session id length");
  p += 1 + sidLen;
  if (p + 2 > end) return fail("truncated ClientHello (session id)");
  const csLen = (b[p] << 8) | b[p + 1];
  if (csLen < 2 || csLen % 2 !== 0) return fail("bad cipher suites length");
  p += 2 + csLen;
  if (p + 1 > end) return fail("truncated ClientHello (cipher suites)");
  const compLen = b[p];
  if (compLen < 1) return fail("bad compression methods length");
  p += 1 + compLen;
  if (p > end) return fail("truncated ClientHello (compression methods)");
  const out: ClientHelloInfo = { tls: true, complete: true };
  if (p === end) return out; // no extensions (pre-TLS-1.0-style hello)
  if (p + 2 > end) return fail("truncated ClientHello (extensions length)");
  const extEnd = p + 2 + ((b[p] << 8) | b[p + 1]);
  p += 2;
  if (extEnd > end) return fail("truncated ClientHello (extensions)");
  while (p < extEnd) {
    if (p + 4 > extEnd) return fail("truncated extension header");
    const type = (b[p] << 8) | b[p + 1];
    const len = (b[p + 2] << 8) | b[p + 3];
    const start = p + 4;
    const stop = start + len;
    if (stop > extEnd) return fail("truncated extension");
    if (type === EXT_SERVER_NAME) {
      const r = parseServerName(b, start, stop);
      if (typeof r === "object") return fail(r.error);
      if (r !== undefined) out.sni = r;
    } else if (type === EXT_ALPN) {
      const r = parseAlpn(b, start, stop);
      if (!Array.isArray(r)) return fail(r.error);
      out.alpn = r;
    }
    p = stop;
  }
  return out;
}

function parseServerName(b: Uint8Array, start: number, stop: number): string | undefined | { error: string } {
  if (start === stop) return undefined; // empty extension (as echoed by servers)
  if (start + 2 > stop) return { error: "truncated server_name list" };
  const listEnd = start + 2 + ((b[start] << 8) | b[start + 1]);
  if (listEnd > stop) return { error: "truncated server_name list" };
  let p = start + 2;
  while (p < listEnd) {
    if (p + 3 > listEnd) return { error: "truncated server_name entry" };
    const nameType = b[p];
    const len = (b[p + 1] << 8) | b[p + 2];
    const s = p + 3;
    if (s + len > listEnd) return { error: "truncated server_name entry" };
    if (nameType === 0) {
      if (len === 0) return { error: "empty host_name" };
      let name = "";
      for (let i = s; i < s + len; i++) {
        const c = b[i];
        if (c < 0x21 || c > 0x7e) return { error: "host_name contains non-printable or non-ASCII bytes" };
        name += String.fromCharCode(c);
      }
      return name;
    }
    p = s + len;
  }
  return undefined;
}

function parseAlpn(b: Uint8Array, start: number, stop: number): string[] | { error: string } {
  if (start + 2 > stop) return { error: "truncated ALPN list" };
  const listEnd = start + 2 + ((b[start] << 8) | b[start + 1]);
  if (listEnd > stop) return { error: "truncated ALPN list" };
  const protos: string[] = [];
  let p = start + 2;
  while (p < listEnd) {
    const len = b[p];
    if (len === 0 || p + 1 + len > listEnd) return { error: "bad ALPN protocol entry" };
    let s = "";
    for (let i = p + 1; i <= p + len; i++) s += String.fromCharCode(b[i]);
    protos.push(s);
    p += 1 + len;
  }
  return protos;
}
