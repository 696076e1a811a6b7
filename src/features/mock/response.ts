import { serializeResponseHead, statusReason } from "../../core/http1/serialize.ts";
import { concatBytes } from "../../core/proxy/endpoint.ts";
import type { HeaderList } from "../../core/http1/types.ts";
import { decodeBase64Strict, type MockRule } from "./schema.ts";

const utf8 = new TextEncoder();

/** Rule headers the listener manages itself: framing and connection persistence. */
const MANAGED = new Set(["content-length", "transfer-encoding", "connection"]);

/** How the connection continues after a response; each gives a different head. */
export const Persist = {
  /** HTTP/1.1 keep-alive: no Connection header. */
  Keep: 0,
  /** HTTP/1.0 client that asked for keep-alive: `Connection: keep-alive`. */
  Keep10: 1,
  /** The connection closes after this response: `Connection: close`. */
  Close: 2,
} as const;
export type Persist = (typeof Persist)[keyof typeof Persist];

const CONNECTION_VALUE = [null, "keep-alive", "close"] as const;

/**
 * The codec sends a string whose characters are all <= U+00FF as latin1 and any other as UTF-8, so "Très" and
 * "Très 🐢" would reach the wire in different encodings. The mock always sends UTF-8 (like its bodies): a
 * non-ASCII string is turned into its UTF-8 bytes, one character per byte, which the codec then sends unchanged.
 */
function utf8Octets(s: string): string {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7f) return Buffer.from(s, "utf8").toString("latin1");
  return s;
}

/**
 * A canned response, ready for the wire. The bytes of each (persistence, HEAD or not) variant are built once,
 * on first use, and reused for every request: answering is one socket write of a shared buffer.
 */
export class CannedResponse {
  readonly status: number;
  readonly reason: string;
  /** The response headers without the managed ones (Content-Length, Transfer-Encoding, Connection). */
  readonly headers: HeaderList;
  /** Sent after the head, except to HEAD requests and for 204 / 304. */
  readonly body: Uint8Array;
  /** 204 and 304 carry neither a body nor a Content-Length. */
  readonly bodyless: boolean;
  /** The rule asked for `Connection: close`. */
  readonly forcesClose: boolean;
  readonly contentType: string;
  private readonly variants: (Uint8Array | undefined)[] = [];

  constructor(status: number, reason: string, headers: HeaderList, body: Uint8Array) {
    this.status = status;
    this.reason = reason;
    this.bodyless = status === 204 || status === 304;
    this.body = this.bodyless ? new Uint8Array(0) : body;
    const kept: HeaderList = [];
    let forcesClose = false;
    let contentType = "";
    for (const [name, value] of headers) {
      const lower = name.toLowerCase();
      if (lower === "connection" && value.split(",").some((v) => v.trim().toLowerCase() === "close")) forcesClose = true;
      if (MANAGED.has(lower)) continue;
      if (lower === "content-type" && contentType === "") contentType = value;
      kept.push([name, value]);
    }
    this.headers = kept;
    this.forcesClose = forcesClose;
    this.contentType = contentType;
    // Serialise once now, so a rule that cannot be put on the wire fails when it is compiled, not per request.
    this.bytes(Persist.Keep, false);
  }

  /** The header fields as sent for this persistence. */
  wireHeaders(persist: Persist): HeaderList {
    const h = this.headers.slice();
    if (!this.bodyless) h.push(["Content-Length", String(this.body.length)]);
    const conn = CONNECTION_VALUE[persist];
    if (conn !== null) h.push(["Connection", conn]);
    return h;
  }

  /** The whole response (head, and the body unless `headOnly`). */
  bytes(persist: Persist, headOnly: boolean): Uint8Array {
    const k = persist * 2 + (headOnly ? 1 : 0);
    let b = this.variants[k];
    if (b === undefined) {
      const headers = this.wireHeaders(persist).map(([n, v]): [string, string] => [n, utf8Octets(v)]);
      const head = serializeResponseHead({ version: "HTTP/1.1", status: this.status, reason: utf8Octets(this.reason), headers });
      b = headOnly ? head : concatBytes(head, this.body);
      this.variants[k] = b;
    }
    return b;
  }
}

/** The canned response of a rule. Throws when the rule cannot be put on the wire (a hand-edited state file). */
export function compileRuleResponse(rule: MockRule): CannedResponse {
  let body: Uint8Array;
  if (rule.body_is_base64) {
    const decoded = decodeBase64Strict(rule.body);
    if (decoded === null) throw new Error("body_is_base64 is true but the body is not valid base64");
    body = decoded;
  } else {
    body = utf8.encode(rule.body);
  }
  const reason = rule.status_text ?? statusReason(rule.status_code);
  return new CannedResponse(rule.status_code, reason, rule.headers, body);
}

/** The 404 answer when no rule matched or the master flag is off: JSON naming the method and path. */
export function fallbackResponse(method: string, path: string, masterEnabled: boolean): CannedResponse {
  const message = masterEnabled ? `no mock rule matched ${method} ${path}` : `no mock rule matched ${method} ${path}: mock rules are disabled (master flag off)`;
  const body = JSON.stringify({ error: { code: "no_mock_rule", message }, method, path, mock_enabled: masterEnabled });
  return new CannedResponse(404, "Not Found", [["Content-Type", "application/json"]], utf8.encode(body));
}

/** A protocol error answer (400, 431, 501, 505...); the connection closes after it. */
export function errorResponse(status: number, message: string): Uint8Array {
  const body = JSON.stringify({ error: { code: "bad_request", message } });
  return new CannedResponse(status, statusReason(status), [["Content-Type", "application/json"]], utf8.encode(body)).bytes(Persist.Close, false);
}
