/**
 * Protocol Buffers wire format decoded without a schema, the way `protoc --decode_raw` reads a message: each field
 * with its number, wire type and value; a length-delimited field shown as a nested message when its bytes parse
 * as one (and are not plain text), else as a string when they are UTF-8 text, else as bytes. Sans-io: bytes in,
 * plain objects out.
 */

export type RawField =
  /** wire type 0; value: the unsigned 64-bit value in decimal (may exceed 2^53) */
  | { field: number; wire: "varint"; value: string; sint?: string }
  /** wire type 1: value as hex (as protoc prints it) and read as a double */
  | { field: number; wire: "fixed64"; value: string; double: number }
  /** wire type 5: value as hex and read as a float */
  | { field: number; wire: "fixed32"; value: string; float: number }
  /** wire type 2 */
  | { field: number; wire: "len"; message: RawField[] }
  | { field: number; wire: "len"; string: string }
  | { field: number; wire: "len"; bytes: string /* base64 */ }
  /** wire types 3/4 (deprecated groups) */
  | { field: number; wire: "group"; message: RawField[] };

export class ProtobufDecodeError extends Error {}

/** Nesting is followed at most this deep (deeper length-delimited fields are shown as bytes). */
const MAX_DEPTH = 32;
/** At most this many fields are decoded per message level before giving up on it. */
const MAX_FIELDS = 100_000;

const utf8 = new TextDecoder("utf-8", { fatal: true });

class Reader {
  pos: number;
  constructor(
    readonly b: Uint8Array,
    start = 0,
    readonly end = b.length,
  ) {
    this.pos = start;
  }

  varint(): bigint {
    let result = 0n;
    let shift = 0n;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new ProtobufDecodeError("truncated varint");
      const byte = this.b[this.pos++]!;
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) {
        if (i === 9 && byte > 1) throw new ProtobufDecodeError("varint longer than 64 bits");
        return result;
      }
      shift += 7n;
    }
    throw new ProtobufDecodeError("varint longer than 10 bytes");
  }

  /** A small varint (tag or length) as a number. */
  small(): number {
    const v = this.varint();
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new ProtobufDecodeError("length or tag out of range");
    return Number(v);
  }

  take(n: number): Uint8Array {
    if (n > this.end - this.pos) throw new ProtobufDecodeError(`truncated field: needs ${n} bytes, ${this.end - this.pos} left`);
    const out = this.b.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
}

const hex = (bytes: Uint8Array) => {
  let s = "";
  for (let i = bytes.length - 1; i >= 0; i--) s += bytes[i]!.toString(16).padStart(2, "0");
  return `0x${s}`;
};

/** Text that reads as text: valid UTF-8 without control characters other than tab, CR and LF. */
function asText(bytes: Uint8Array): string | null {
  let s: string;
  try {
    s = utf8.decode(bytes);
  } catch {
    return null;
  }
  // eslint-disable-next-line no-control-regex
  return /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]/.test(s) ? null : s;
}

/**
 * Decodes a whole message. Throws ProtobufDecodeError when the bytes are not a protobuf message (truncated field,
 * invalid wire type, field number 0, unmatched group end).
 */
export function decodeRaw(bytes: Uint8Array): RawField[] {
  const r = new Reader(bytes);
  const out = readFields(r, 0, null);
  return out;
}

/** Like decodeRaw, but answers null instead of throwing. */
export function tryDecodeRaw(bytes: Uint8Array): RawField[] | null {
  try {
    return decodeRaw(bytes);
  } catch (e) {
    if (e instanceof ProtobufDecodeError) return null;
    throw e;
  }
}

function readFields(r: Reader, depth: number, group: number | null): RawField[] {
  const fields: RawField[] = [];
  while (r.pos < r.end) {
    if (fields.length >= MAX_FIELDS) throw new ProtobufDecodeError(`more than ${MAX_FIELDS} fields`);
    const tag = r.small();
    const field = Math.floor(tag / 8);
    const wire = tag & 7;
    if (field === 0) throw new ProtobufDecodeError("field number 0");
    if (field > 536_870_911) throw new ProtobufDecodeError("field number out of range");
    switch (wire) {
      case 0: {
        const v = r.varint();
        const f: RawField = { field, wire: "varint", value: v.toString() };
        // zigzag reading, shown when it differs in a useful way (odd values are negative sint)
        if (v & 1n) f.sint = (-((v + 1n) >> 1n)).toString();
        fields.push(f);
        break;
      }
      case 1: {
        const b = r.take(8);
        fields.push({ field, wire: "fixed64", value: hex(b), double: new DataView(b.buffer, b.byteOffset, 8).getFloat64(0, true) });
        break;
      }
      case 5: {
        const b = r.take(4);
        fields.push({ field, wire: "fixed32", value: hex(b), float: Math.fround(new DataView(b.buffer, b.byteOffset, 4).getFloat32(0, true)) });
        break;
      }
      case 2: {
        const len = r.small();
        const b = r.take(len);
        fields.push(lengthDelimited(field, b, depth));
        break;
      }
      case 3: {
        if (depth >= MAX_DEPTH) throw new ProtobufDecodeError("groups nested too deep");
        fields.push({ field, wire: "group", message: readFields(r, depth + 1, field) });
        break;
      }
      case 4:
        if (group !== field) throw new ProtobufDecodeError(`unmatched end of group ${field}`);
        return fields;
      default:
        throw new ProtobufDecodeError(`invalid wire type ${wire}`);
    }
  }
  if (group !== null) throw new ProtobufDecodeError(`group ${group} not closed`);
  return fields;
}

function lengthDelimited(field: number, b: Uint8Array, depth: number): RawField {
  const text = asText(b);
  if (text !== null) return { field, wire: "len", string: text };
  if (depth < MAX_DEPTH && b.length > 0) {
    try {
      return { field, wire: "len", message: readFields(new Reader(b), depth + 1, null) };
    } catch (e) {
      if (!(e instanceof ProtobufDecodeError)) throw e;
    }
  }
  return { field, wire: "len", bytes: Buffer.from(b.buffer, b.byteOffset, b.length).toString("base64") };
}

/** The text form `protoc --decode_raw` prints (`1: 150`, `2 { ... }`, strings quoted and C-escaped). */
export function formatRaw(fields: RawField[], indent = ""): string {
  let s = "";
  for (const f of fields) {
    if (f.wire === "varint") s += `${indent}${f.field}: ${f.value}\n`;
    else if (f.wire === "fixed64" || f.wire === "fixed32") s += `${indent}${f.field}: ${f.value}\n`;
    else if ("message" in f) s += `${indent}${f.field} {\n${formatRaw(f.message, indent + "  ")}${indent}}\n`;
    else if ("string" in f) s += `${indent}${f.field}: "${cEscape(new TextEncoder().encode(f.string))}"\n`;
    else s += `${indent}${f.field}: "${cEscape(Buffer.from(f.bytes, "base64"))}"\n`;
  }
  return s;
}

function cEscape(b: Uint8Array): string {
  let s = "";
  for (const c of b) {
    if (c === 0x0a) s += "\\n";
    else if (c === 0x0d) s += "\\r";
    else if (c === 0x09) s += "\\t";
    else if (c === 0x22) s += '\\"';
    else if (c === 0x27) s += "\\'";
    else if (c === 0x5c) s += "\\\\";
    else if (c >= 0x20 && c < 0x7f) s += String.fromCharCode(c);
    else s += `\\${c.toString(8).padStart(3, "0")}`;
  }
  return s;
}
