/**
 * HPACK (RFC 7541) for tapwire's own HTTP/2 codec: sans-io, no streams, no per-field objects.
 *
 * Field lists are flat string arrays `[name0, value0, name1, value1, ...]`. Strings are latin1: each octet on the
 * wire is one UTF-16 code unit 0-255, and back. A value holding a code unit above 255 (not made from wire bytes) is
 * encoded as UTF-8.
 *
 * Decoding reads straight from the block: raw strings with `Buffer#latin1Slice` (measured in Bun 1.4.5 for 5-60
 * byte strings: ~30-55 ns, against 120-290 ns for `String.fromCharCode.apply` on a subarray and 60-500 ns for a
 * per-byte loop; `TextDecoder("latin1")` is windows-1252 per WHATWG, so wrong for 0x80-0x9f), Huffman strings
 * with a state machine over bytes (one table lookup per input byte, up to two symbols out) into one reused scratch buffer.
 *
 * The encoder writes into one growing scratch buffer; `encode()` returns a fresh copy, `encodeView()` a view of the
 * scratch that is valid until the next encode call.
 */

/** A COMPRESSION_ERROR: the connection must be closed (GOAWAY COMPRESSION_ERROR). */
export class HpackError extends Error {
  override name = "HpackError";
}

/** The decoded list passed maxListSize (RFC 9113 6.5.2: name + value + 32 per field). The block was still decoded
 *  to the end, so the decoder's dynamic table is in sync and the decoder can be used for the next block. */
export class HeaderListTooLarge extends Error {
  override name = "HeaderListTooLarge";
  constructor(readonly size: number, readonly limit: number) {
    super(`header list of ${size} bytes passed the limit of ${limit}`);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Static table (RFC 7541 Appendix A)

export const STATIC_TABLE: readonly (readonly [string, string])[] = [
  [":authority", ""], [":method", "GET"], [":method", "POST"], [":path", "/"], [":path", "/index.html"],
  [":scheme", "http"], [":scheme", "https"], [":status", "200"], [":status", "204"], [":status", "206"],
  [":status", "304"], [":status", "400"], [":status", "404"], [":status", "500"], ["accept-charset", ""],
  ["accept-encoding", "gzip, deflate"], ["accept-language", ""], ["accept-ranges", ""], ["accept", ""],
  ["access-control-allow-origin", ""], ["age", ""], ["allow", ""], ["authorization", ""], ["cache-control", ""],
  ["content-disposition", ""], ["content-encoding", ""], ["content-language", ""], ["content-length", ""],
  ["content-location", ""], ["content-range", ""], ["content-type", ""], ["cookie", ""], ["date", ""], ["etag", ""],
  ["expect", ""], ["expires", ""], ["from", ""], ["host", ""], ["if-match", ""], ["if-modified-since", ""],
  ["if-none-match", ""], ["if-range", ""], ["if-unmodified-since", ""], ["last-modified", ""], ["link", ""],
  ["location", ""], ["max-forwards", ""], ["proxy-authenticate", ""], ["proxy-authorization", ""], ["range", ""],
  ["referer", ""], ["refresh", ""], ["retry-after", ""], ["server", ""], ["set-cookie", ""],
  ["strict-transport-security", ""], ["transfer-encoding", ""], ["user-agent", ""], ["vary", ""], ["via", ""],
  ["www-authenticate", ""],
];
const STATIC_LEN = 61;
const S_NAMES: string[] = [""];
const S_VALUES: string[] = [""];
for (const [n, v] of STATIC_TABLE) {
  S_NAMES.push(n);
  S_VALUES.push(v);
}

/** What the encoder knows of a name before looking at its dynamic table: its first static index (0: none), the
 *  static entries with a value (exact matches), and its policy (NEVER_INDEX, NO_INDEX, COOKIE). One lookup. */
interface NameInfo { index: number; values: Map<string, number> | null; policy: number }
const P_NEVER_INDEX = 1; // "never indexed" literal (RFC 7541 7.1.3): credentials
const P_NO_INDEX = 2; // a value that differs in nearly every message: literal without indexing, not to churn the table
const P_COOKIE = 4; // never indexed when the value is short (guessable), else indexed
const P_SECOND_SIGHT = 8; // indexed only when the same value was sent before (recently): unique paths stay out
const NAME_INFO = new Map<string, NameInfo>();
for (let i = 1; i <= STATIC_LEN; i++) {
  const name = S_NAMES[i];
  let e = NAME_INFO.get(name);
  if (!e) NAME_INFO.set(name, (e = { index: i, values: null, policy: 0 }));
  if (S_VALUES[i] !== "") (e.values ??= new Map()).set(S_VALUES[i], i);
}
function setPolicy(names: string[], policy: number): void {
  for (const name of names) {
    const e = NAME_INFO.get(name);
    if (e) e.policy = policy;
    else NAME_INFO.set(name, { index: 0, values: null, policy });
  }
}
setPolicy(["authorization", "proxy-authorization", "set-cookie"], P_NEVER_INDEX);
setPolicy(["cookie"], P_COOKIE);
setPolicy(["content-length", "date", "etag", "last-modified", "if-modified-since", "if-none-match", "age", "expires",
  "x-request-id", "content-range", "range", "location"], P_NO_INDEX);
setPolicy([":path"], P_SECOND_SIGHT);
/** How many not-yet-indexed values of P_SECOND_SIGHT fields the encoder remembers (then it forgets them all). */
const SECOND_SIGHT_MEMORY = 64;
const utf8 = new TextEncoder();

/**
 * RFC 7541 7.1.3: an intermediary must not forward a field it received as a "never indexed" literal in a
 * representation that indexes it. The flat field lists carry no per-field flag, so the decoders teach the encoders
 * by name, process-wide: a name received never-indexed is never indexed by any encoder from then on (pseudo-headers
 * included). This errs on the safe side: other values of that name lose indexing too. A `cookie` under 20 octets is
 * not learned (our own policy already sends those never-indexed, as nghttp2 does). At most LEARNED_MAX
 * names outside the static table are learned (a peer sending random names cannot grow the map further).
 */
const LEARNED_MAX = 256;

/** A cookie value under 20 octets (as sent: UTF-8 when a code unit is above 255). */
function shortCookie(value: string): boolean {
  if (value.length >= 20) return false;
  for (let i = 0; i < value.length; i++) if (value.charCodeAt(i) > 255) return utf8.encode(value).length < 20;
  return true;
}
const learnedNames: string[] = [];
function learnNeverIndexed(name: string, valueLength: number): void {
  const info = NAME_INFO.get(name);
  if (info !== undefined) {
    if (info.policy === P_NEVER_INDEX || (info.policy === P_COOKIE && valueLength < 20)) return;
    info.policy = P_NEVER_INDEX;
  } else {
    if (learnedNames.length >= LEARNED_MAX) return;
    NAME_INFO.set(name, { index: 0, values: null, policy: P_NEVER_INDEX });
  }
  learnedNames.push(name);
}
/** Names learned from never-indexed literals (see learnNeverIndexed), for inspection and tests. */
export function learnedNeverIndexedNames(): readonly string[] {
  return learnedNames;
}

// ---------------------------------------------------------------------------------------------------------------
// Huffman code (RFC 7541 Appendix B). The code is canonical: codes are assigned in order of length, then symbol, so
// the code lengths alone define it. The table is built at load and checked (the last code, EOS, must be 30 ones).

// prettier-ignore
const HUFFMAN_LENGTHS = [
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
  6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
  13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
  15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
  20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
  22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
  26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
  20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
  30,
];

/** Huffman code of each symbol 0-256 (right-aligned) and its length in bits. */
export const HUFFMAN_CODES = new Uint32Array(257);
export const HUFFMAN_BITS = new Uint8Array(HUFFMAN_LENGTHS);
{
  if (HUFFMAN_LENGTHS.length !== 257) throw new Error("hpack: Huffman table must have 257 lengths");
  const order = [...Array(257).keys()].sort((a, b) => HUFFMAN_LENGTHS[a] - HUFFMAN_LENGTHS[b] || a - b);
  let code = 0;
  let len = HUFFMAN_LENGTHS[order[0]];
  for (let k = 0; k < 257; k++) {
    const s = order[k];
    const l = HUFFMAN_LENGTHS[s];
    if (k > 0) code = (code + 1) * 2 ** (l - len);
    len = l;
    HUFFMAN_CODES[s] = code;
  }
  if (HUFFMAN_CODES[256] !== 0x3fffffff) throw new Error("hpack: Huffman table is not complete");
}

/**
 * State machine over nibbles (the byte table below is built from it). States are the 256 internal nodes of the code tree (0 = root). Entry
 * [state * 16 + nibble] = next state | symbol << 8 | flags << 16.
 */
const HF_EMIT = 1 << 16;
const HF_FAIL = 2 << 16;
const HF_ACCEPT = 4 << 16;
const HUFFMAN_DECODE = new Uint32Array(256 * 16);
{
  // Tree: internal nodes 0..255; child[node * 2 + bit] = internal node id, or -(symbol + 1) for a leaf.
  const child = new Int32Array(512).fill(0x7fffffff);
  const onesDepth = new Int8Array(256).fill(-1); // depth when the path from the root is all ones, else -1
  onesDepth[0] = 0;
  let nodes = 1;
  for (let s = 0; s < 257; s++) {
    const len = HUFFMAN_BITS[s];
    const code = HUFFMAN_CODES[s];
    let node = 0;
    for (let i = len - 1; i >= 0; i--) {
      const bit = Math.floor(code / 2 ** i) & 1;
      const slot = node * 2 + bit;
      if (i === 0) {
        child[slot] = -(s + 1);
      } else {
        if (child[slot] === 0x7fffffff) {
          child[slot] = nodes;
          onesDepth[nodes] = bit === 1 && onesDepth[node] >= 0 ? onesDepth[node] + 1 : -1;
          nodes++;
        }
        node = child[slot];
      }
    }
  }
  if (nodes !== 256) throw new Error("hpack: Huffman tree is not complete");
  for (let state = 0; state < 256; state++) {
    for (let nib = 0; nib < 16; nib++) {
      let node = state;
      let entry = 0;
      for (let i = 3; i >= 0; i--) {
        const c = child[node * 2 + ((nib >> i) & 1)];
        if (c < 0) {
          const sym = -c - 1;
          if (sym === 256) entry |= HF_FAIL;
          else entry |= HF_EMIT | (sym << 8);
          node = 0;
        } else node = c;
      }
      if (onesDepth[node] >= 0 && onesDepth[node] <= 7) entry |= HF_ACCEPT;
      HUFFMAN_DECODE[state * 16 + nib] = entry | node;
    }
  }
}

/**
 * The decoder's table: two nibble steps composed, one lookup per input byte. A byte completes at most two symbols
 * (a code is at least 5 bits: the end of one plus one whole). Entry [state * 256 + byte] = next state | first
 * symbol << 8 | second symbol << 16 | flags. 256 KiB; measured against the nibble table on typical header values
 * (5-100 octets, Huffman-coded, decoded to strings): ~150-160 vs ~190-240 ns per string.
 */
const HB_EMIT1 = 1 << 24;
const HB_EMIT2 = 1 << 25;
const HB_FAIL = 1 << 26;
const HB_ACCEPT = 1 << 27;
const HUFFMAN_DECODE_BYTES = new Uint32Array(256 * 256); // 0: not computed yet (a real entry is never 0: going
// back to the root means a symbol was completed). Entries are computed on first use: building all 65,536 at load
// took ~12 ms of startup in Bun 1.4.5 (module load 19 -> 31-34 ms); a connection's strings touch a few hundred.

function huffmanByteEntry(state: number, byte: number): number {
  const e1 = HUFFMAN_DECODE[(state << 4) | (byte >> 4)];
  const e2 = HUFFMAN_DECODE[((e1 & 0xff) << 4) | (byte & 15)];
  let entry = e2 & 0xff;
  if ((e1 | e2) & HF_FAIL) entry |= HB_FAIL;
  if (e1 & HF_EMIT) {
    entry |= HB_EMIT1 | (((e1 >> 8) & 0xff) << 8);
    if (e2 & HF_EMIT) entry |= HB_EMIT2 | (((e2 >> 8) & 0xff) << 16);
  } else if (e2 & HF_EMIT) entry |= HB_EMIT1 | (((e2 >> 8) & 0xff) << 8);
  if (e2 & HF_ACCEPT) entry |= HB_ACCEPT;
  HUFFMAN_DECODE_BYTES[(state << 8) | byte] = entry;
  return entry;
}

// ---------------------------------------------------------------------------------------------------------------
// Dynamic table: a ring of names, values and entry sizes (octets). Index 0 is the newest entry.

class DynamicTable {
  names: string[];
  values: string[];
  sizes: number[];
  seqs: number[];
  mask: number;
  head = 0; // slot of the next insert
  count = 0;
  size = 0;
  inserted = 0; // entries ever inserted (sequence number of the next one)
  evicted: ((name: string, value: string, seq: number) => void) | null = null;

  constructor(public maxSize: number) {
    const cap = 16; // grows (powers of 2) when full: most connections never hold more than a few dozen entries
    this.mask = cap - 1;
    this.names = new Array(cap).fill("");
    this.values = new Array(cap).fill("");
    this.sizes = new Array(cap).fill(0);
    this.seqs = new Array(cap).fill(0);
  }

  /** slot of the entry at dynamic index i (0-based: HPACK index 62 + i) */
  slot(i: number): number {
    return (this.head - 1 - i) & this.mask;
  }

  evictTo(limit: number): void {
    while (this.size > limit && this.count > 0) {
      const s = (this.head - this.count) & this.mask;
      this.size -= this.sizes[s];
      this.count--;
      if (this.evicted) this.evicted(this.names[s], this.values[s], this.seqs[s]);
      this.names[s] = "";
      this.values[s] = "";
    }
  }

  setMaxSize(n: number): void {
    this.maxSize = n;
    this.evictTo(n);
  }

  private grow(): void {
    const cap = (this.mask + 1) * 2;
    const names = new Array(cap).fill("");
    const values = new Array(cap).fill("");
    const sizes = new Array(cap).fill(0);
    const seqs = new Array(cap).fill(0);
    for (let i = this.count - 1, j = 0; i >= 0; i--, j++) {
      const s = this.slot(i);
      names[j] = this.names[s];
      values[j] = this.values[s];
      sizes[j] = this.sizes[s];
      seqs[j] = this.seqs[s];
    }
    this.names = names;
    this.values = values;
    this.sizes = sizes;
    this.seqs = seqs;
    this.mask = cap - 1;
    this.head = this.count;
  }

  /** Adds an entry of `size` octets (RFC 7541 4.4: one larger than the table empties it and is not added). */
  add(name: string, value: string, size: number): boolean {
    if (size > this.maxSize) {
      this.evictTo(0);
      return false;
    }
    this.evictTo(this.maxSize - size);
    if (this.count > this.mask) this.grow();
    const s = this.head;
    this.names[s] = name;
    this.values[s] = value;
    this.sizes[s] = size;
    this.seqs[s] = this.inserted++;
    this.head = (s + 1) & this.mask;
    this.count++;
    this.size += size;
    return true;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Decoder

const latin1Slice = (Buffer.prototype as unknown as { latin1Slice(this: Uint8Array, s: number, e: number): string }).latin1Slice;
const MAX_INT = 0x7fffffff;

let pos = 0; // position after the last primitive read (module-level: no result objects)

function decodeInt(b: Uint8Array, p: number, mask: number): number {
  let v = b[p++] & mask;
  if (v === mask) {
    let m = 1;
    let c: number;
    do {
      if (p >= b.length) throw new HpackError("truncated integer");
      c = b[p++];
      v += (c & 127) * m;
      m *= 128;
      if (m > 2 ** 35) throw new HpackError("integer too long");
    } while (c & 128);
    if (v > MAX_INT) throw new HpackError("integer overflow");
  }
  pos = p;
  return v;
}

/** RFC 7541 5.1 integer with an N-bit prefix (1-8) at bytes[offset] (the prefix's high bits are ignored): the value
 *  and the offset after it. Throws HpackError when truncated or above 2^31-1. */
export function decodeInteger(bytes: Uint8Array, offset: number, prefixBits: number): { value: number; end: number } {
  if (offset >= bytes.length) throw new HpackError("truncated integer");
  const value = decodeInt(bytes, offset, (1 << prefixBits) - 1);
  return { value, end: pos };
}

/** RFC 7541 5.1 integer with an N-bit prefix; `first` holds the bits above the prefix. */
export function encodeInteger(value: number, prefixBits: number, first = 0): Uint8Array {
  const max = (1 << prefixBits) - 1;
  const out = [first | Math.min(value, max)];
  if (value >= max) {
    value -= max;
    while (value >= 128) {
      out.push((value % 128) + 128);
      value = Math.floor(value / 128);
    }
    out.push(value);
  }
  return Uint8Array.from(out);
}

let huffOut: Buffer = Buffer.allocUnsafe(256);

function huffmanDecode(b: Uint8Array, p: number, end: number): string {
  const need = Math.ceil(((end - p) * 8) / 5);
  if (huffOut.length < need) huffOut = Buffer.allocUnsafe(Math.max(need, huffOut.length * 2));
  const out = huffOut;
  const T = HUFFMAN_DECODE_BYTES;
  let n = 0;
  let state = 0;
  let e = HB_ACCEPT;
  for (; p < end; p++) {
    e = T[(state << 8) | b[p]];
    if (e === 0) e = huffmanByteEntry(state, b[p]);
    if (e & (HB_EMIT1 | HB_FAIL)) {
      if (e & HB_FAIL) throw new HpackError("EOS in a Huffman string");
      out[n++] = e >> 8;
      if (e & HB_EMIT2) out[n++] = e >> 16;
    }
    state = e & 0xff;
  }
  if (!(e & HB_ACCEPT)) throw new HpackError("bad Huffman padding");
  return n === 0 ? "" : latin1Slice.call(out, 0, n);
}

function decodeString(b: Uint8Array, p: number): string {
  if (p >= b.length) throw new HpackError("truncated field");
  const huffman = b[p] & 0x80;
  const len = decodeInt(b, p, 127);
  p = pos;
  const end = p + len;
  if (end > b.length) throw new HpackError("truncated string");
  pos = end;
  if (huffman) return huffmanDecode(b, p, end);
  return len === 0 ? "" : latin1Slice.call(b, p, end);
}

export class HpackDecoder {
  private table: DynamicTable;

  /** @param maxTableSize our SETTINGS_HEADER_TABLE_SIZE (default 4096): the largest size update the peer may send */
  constructor(readonly maxTableSize = 4096) {
    this.table = new DynamicTable(maxTableSize);
  }

  /** The dynamic table's current size limit (set by the peer's size updates) and used size, in octets. */
  get tableMaxSize(): number {
    return this.table.maxSize;
  }
  get tableSize(): number {
    return this.table.size;
  }
  /** The dynamic table, newest first, as [name, value] pairs (for tests and debugging). */
  tableEntries(): [string, string][] {
    const t = this.table;
    const r: [string, string][] = [];
    for (let i = 0; i < t.count; i++) r.push([t.names[t.slot(i)], t.values[t.slot(i)]]);
    return r;
  }

  /** Decodes one complete header block into `out` (appends flat name/value pairs). Throws HpackError (a
   *  COMPRESSION_ERROR: the decoder must not be used again) or HeaderListTooLarge (the whole block was decoded, the
   *  table is in sync, nothing was appended to `out`). Dynamic table size updates above maxTableSize, or after the
   *  first field of the block, are an HpackError. */
  decode(block: Uint8Array, maxListSize: number, out: string[]): void {
    const t = this.table;
    const end = block.length;
    const start = out.length;
    let p = 0;
    let listSize = 0;
    let fields = false;
    while (p < end) {
      const b = block[p];
      let name: string;
      let value: string;
      if (b & 0x80) {
        // 6.1 indexed field
        const idx = decodeInt(block, p, 0x7f);
        p = pos;
        if (idx === 0) throw new HpackError("index 0");
        if (idx <= STATIC_LEN) {
          name = S_NAMES[idx];
          value = S_VALUES[idx];
        } else {
          if (idx - STATIC_LEN > t.count) throw new HpackError(`index ${idx} out of range`);
          const s = t.slot(idx - STATIC_LEN - 1);
          name = t.names[s];
          value = t.values[s];
        }
      } else if ((b & 0xe0) === 0x20) {
        // 6.3 dynamic table size update
        if (fields) throw new HpackError("table size update after a field");
        const n = decodeInt(block, p, 0x1f);
        p = pos;
        if (n > this.maxTableSize) throw new HpackError(`table size update ${n} above ${this.maxTableSize}`);
        t.setMaxSize(n);
        continue;
      } else {
        // 6.2.1 incremental indexing (01, 6-bit index); 6.2.2 without indexing (0000) and 6.2.3 never indexed (0001)
        const indexing = b & 0x40;
        const idx = decodeInt(block, p, indexing ? 0x3f : 0x0f);
        p = pos;
        if (idx === 0) {
          name = decodeString(block, p);
          p = pos;
        } else if (idx <= STATIC_LEN) {
          name = S_NAMES[idx];
        } else {
          if (idx - STATIC_LEN > t.count) throw new HpackError(`name index ${idx} out of range`);
          name = t.names[t.slot(idx - STATIC_LEN - 1)];
        }
        value = decodeString(block, p);
        p = pos;
        if (indexing) t.add(name, value, name.length + value.length + 32);
        else if (b & 0x10) learnNeverIndexed(name, value.length);
      }
      fields = true;
      listSize += name.length + value.length + 32;
      if (listSize <= maxListSize) out.push(name, value);
    }
    if (listSize > maxListSize) {
      out.length = start;
      throw new HeaderListTooLarge(listSize, maxListSize);
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Encoder

/** Largest entry (name + value + 32 octets) the encoder adds to the dynamic table. */
const MAX_INDEXED_ENTRY = 512;
/** Our dynamic table size as encoder: at most this, whatever larger size the peer allows. */
const ENCODER_TABLE_CAP = 4096;

interface DynName { seq: number; values: Map<string, number> }

export class HpackEncoder {
  private buf = new Uint8Array(1024);
  private p = 0;
  private table = new DynamicTable(ENCODER_TABLE_CAP);
  /** name -> newest entry seq with that name, and value -> seq */
  private byName = new Map<string, DynName>();
  /** values of P_SECOND_SIGHT fields sent once as literals without indexing */
  private seen = new Set<string>();
  private pendingMin = -1;
  private pendingFinal = -1;
  /** Huffman-encode strings when that is shorter (default true). */
  huffman = true;

  constructor() {
    this.table.evicted = (name, value, seq) => {
      const d = this.byName.get(name);
      if (!d) return;
      if (d.values.get(value) === seq) d.values.delete(value);
      if (d.seq === seq) {
        if (d.values.size === 0) this.byName.delete(name);
        else {
          let newest = -1;
          for (const s of d.values.values()) if (s > newest) newest = s;
          d.seq = newest;
        }
      }
    };
  }

  /** The peer's SETTINGS_HEADER_TABLE_SIZE (default 4096); a size update is emitted at the next block when the size
   *  we use (at most 4096) changes; when it shrank and grew again since the last block, the smallest size first. */
  setPeerMaxTableSize(n: number): void {
    const size = Math.min(n, ENCODER_TABLE_CAP);
    const current = this.pendingFinal >= 0 ? this.pendingFinal : this.table.maxSize;
    if (size === current) return;
    this.pendingMin = this.pendingMin < 0 ? size : Math.min(this.pendingMin, size);
    this.pendingFinal = size;
  }

  /** The dynamic table, newest first, as [name, value] pairs (for tests and debugging). */
  tableEntries(): [string, string][] {
    const t = this.table;
    const r: [string, string][] = [];
    for (let i = 0; i < t.count; i++) r.push([t.names[t.slot(i)], t.values[t.slot(i)]]);
    return r;
  }
  get tableSize(): number {
    return this.table.size;
  }

  /** Encodes fields[from..to) (flat pairs; to defaults to fields.length) and returns the block as a fresh Uint8Array. */
  encode(fields: readonly string[], from = 0, to = fields.length): Uint8Array {
    const n = this.write(fields, from, to); // first: it may replace this.buf
    return this.buf.slice(0, n); // (slice of a short block costs no more than subarray in Bun 1.4.5)
  }

  /** Like encode(), but returns a view of the encoder's scratch buffer: valid only until the next encode call. */
  encodeView(fields: readonly string[], from = 0, to = fields.length): Uint8Array {
    const n = this.write(fields, from, to); // first: it may replace this.buf
    return this.buf.subarray(0, n);
  }

  /** Encodes into the scratch buffer; returns the block's length. */
  private write(fields: readonly string[], from: number, to: number): number {
    this.p = 0;
    if (this.pendingFinal >= 0) {
      if (this.pendingMin < this.pendingFinal) this.sizeUpdate(this.pendingMin);
      this.sizeUpdate(this.pendingFinal);
      this.pendingMin = this.pendingFinal = -1;
    }
    const t = this.table;
    for (let i = from; i < to; i += 2) {
      const name = fields[i];
      const value = fields[i + 1];
      this.ensure(16 + 3 * (name.length + value.length));
      const st = NAME_INFO.get(name);
      let policy = 0;
      let nameIdx = 0;
      if (st !== undefined) {
        if (st.values !== null) {
          const idx = st.values.get(value);
          if (idx !== undefined) {
            this.int(idx, 0x7f, 0x80);
            continue;
          }
        }
        policy = st.policy;
        nameIdx = st.index;
      }
      const dyn = this.byName.get(name);
      if (dyn !== undefined) {
        const seq = dyn.values.get(value);
        if (seq !== undefined) {
          this.int(STATIC_LEN + t.inserted - seq, 0x7f, 0x80);
          continue;
        }
        if (nameIdx === 0) nameIdx = STATIC_LEN + t.inserted - dyn.seq;
      }
      if (policy !== 0 && (policy === P_NEVER_INDEX || (policy === P_COOKIE && shortCookie(value)))) {
        this.int(nameIdx, 0x0f, 0x10);
        if (nameIdx === 0) this.str(name);
        this.str(value);
        continue;
      }
      if (policy === P_SECOND_SIGHT) {
        const seen = this.seen;
        if (seen.has(value)) {
          seen.delete(value);
          policy = 0;
        } else {
          if (seen.size >= SECOND_SIGHT_MEMORY) seen.clear();
          seen.add(value);
          policy = P_NO_INDEX;
        }
      }
      let size = name.length + value.length + 32;
      if (size <= MAX_INDEXED_ENTRY && size <= t.maxSize && policy !== P_NO_INDEX) {
        this.int(nameIdx, 0x3f, 0x40);
        if (nameIdx === 0) this.str(name);
        const vlen = this.str(value);
        size += vlen - value.length; // octets, when the value went out as UTF-8
        if (size > t.maxSize) {
          t.add(name, value, size); // empties the table, as the decoder will
          this.byName.clear();
          continue;
        }
        t.add(name, value, size);
        const seq = t.inserted - 1;
        // the insert may have evicted every entry of this name (then `dyn` left the map with no values)
        if (dyn !== undefined && dyn.values.size > 0) {
          dyn.seq = seq;
          dyn.values.set(value, seq);
        } else this.byName.set(name, { seq, values: new Map([[value, seq]]) });
        continue;
      }
      this.int(nameIdx, 0x0f, 0x00);
      if (nameIdx === 0) this.str(name);
      this.str(value);
    }
    return this.p;
  }

  private sizeUpdate(n: number): void {
    this.ensure(8);
    this.int(n, 0x1f, 0x20);
    this.table.setMaxSize(n);
    if (this.table.count === 0) this.byName.clear();
  }

  private ensure(n: number): void {
    if (this.p + n <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < this.p + n) cap *= 2;
    const b = new Uint8Array(cap);
    b.set(this.buf.subarray(0, this.p));
    this.buf = b;
  }

  private int(v: number, mask: number, first: number): void {
    const b = this.buf;
    let p = this.p;
    if (v < mask) {
      b[p++] = first | v;
    } else {
      b[p++] = first | mask;
      v -= mask;
      while (v >= 128) {
        b[p++] = (v & 127) | 128;
        v >>>= 7;
      }
      b[p++] = v;
    }
    this.p = p;
  }

  /** Writes a string literal (Huffman when shorter); returns its length in octets before Huffman. */
  private str(s: string): number {
    const n = s.length;
    let bits = 0;
    for (let i = 0; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c > 255) return this.strUtf8(s);
      bits += HUFFMAN_BITS[c];
    }
    const hlen = (bits + 7) >>> 3;
    if (this.huffman && hlen < n) {
      this.int(hlen, 0x7f, 0x80);
      this.huffmanWrite(s, n);
    } else {
      this.int(n, 0x7f, 0);
      const b = this.buf;
      let p = this.p;
      for (let i = 0; i < n; i++) b[p++] = s.charCodeAt(i);
      this.p = p;
    }
    return n;
  }

  private strUtf8(s: string): number {
    const bytes = utf8.encode(s);
    const n = bytes.length;
    let bits = 0;
    for (let i = 0; i < n; i++) bits += HUFFMAN_BITS[bytes[i]];
    const hlen = (bits + 7) >>> 3;
    this.ensure(8 + n);
    if (this.huffman && hlen < n) {
      this.int(hlen, 0x7f, 0x80);
      this.huffmanWriteBytes(bytes);
    } else {
      this.int(n, 0x7f, 0);
      this.buf.set(bytes, this.p);
      this.p += n;
    }
    return n;
  }

  private huffmanWrite(s: string, n: number): void {
    const b = this.buf;
    let p = this.p;
    // acc holds `pending` (< 8) bits before a code is added; codes are up to 30 bits, so up to 37 bits: a double.
    let acc = 0;
    let pending = 0;
    for (let i = 0; i < n; i++) {
      const c = s.charCodeAt(i);
      const len = HUFFMAN_BITS[c];
      pending += len;
      if (pending <= 31) {
        acc = ((acc << len) | HUFFMAN_CODES[c]) >>> 0;
        while (pending >= 8) {
          pending -= 8;
          b[p++] = acc >>> pending;
        }
        acc &= (1 << pending) - 1;
      } else {
        acc = acc * 2 ** len + HUFFMAN_CODES[c];
        while (pending >= 8) {
          pending -= 8;
          const d = 2 ** pending;
          const byte = Math.floor(acc / d);
          b[p++] = byte;
          acc -= byte * d;
        }
      }
    }
    if (pending > 0) b[p++] = (acc << (8 - pending)) | (0xff >>> pending);
    this.p = p;
  }

  private huffmanWriteBytes(bytes: Uint8Array): void {
    let s = "";
    for (let i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]);
    this.huffmanWrite(s, s.length);
  }
}
