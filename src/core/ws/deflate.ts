/**
 * permessage-deflate (RFC 7692) negotiation result, read from the server's
 * `Sec-WebSocket-Extensions` response header.
 */
export interface PerMessageDeflateParams {
  /** The server resets its compressor after every message (affects "in" frames). */
  serverNoContextTakeover: boolean;
  /** The client resets its compressor after every message (affects "out" frames). */
  clientNoContextTakeover: boolean;
  /** LZ77 window bits the server compresses with (8..15, default 15). */
  serverMaxWindowBits: number;
  /** LZ77 window bits the client compresses with (8..15, default 15). */
  clientMaxWindowBits: number;
}

const DEFAULT_WINDOW_BITS = 15;

/** Splits on `sep` outside double-quoted strings. */
function splitOutsideQuotes(s: string, sep: string): string[] {
  const out: string[] = [];
  let cur = "";
  let quoted = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (quoted && c === "\\" && i + 1 < s.length) {
      cur += c + s[i + 1];
      i++;
      continue;
    }
    if (c === '"') quoted = !quoted;
    if (c === sep && !quoted) {
      out.push(cur);
      cur = "";
    } else {
      cur += c;
    }
  }
  out.push(cur);
  return out;
}

function unquote(v: string): string {
  const t = v.trim();
  if (t.length >= 2 && t.startsWith('"') && t.endsWith('"')) return t.slice(1, -1).replace(/\\(.)/g, "$1");
  return t;
}

function windowBits(v: string | undefined): number {
  if (v === undefined) return DEFAULT_WINDOW_BITS;
  const s = unquote(v);
  if (!/^\d{1,2}$/.test(s)) return DEFAULT_WINDOW_BITS;
  const n = Number(s);
  return n >= 8 && n <= 15 ? n : DEFAULT_WINDOW_BITS;
}

/**
 * Parses the server's `Sec-WebSocket-Extensions` response header and returns
 * the accepted permessage-deflate parameters, or null when the server did not
 * accept permessage-deflate (header absent, empty, or naming other extensions
 * only). Several header lines joined with ", " are fine; the first
 * permessage-deflate offer wins.
 *
 * The observer is deliberately lenient: a malformed or out-of-range
 * `*_max_window_bits` value falls back to 15 and unknown parameters are
 * ignored, because the endpoints, not the proxy, decide whether to accept the
 * response; if they go on talking, the frames still have to be decoded. The
 * window-bits values never change how we inflate (we always keep a full 32 KB
 * window, which decodes any smaller window too); they are reported for
 * completeness.
 */
export function parseExtensions(secWebSocketExtensionsResponseHeader: string | undefined): PerMessageDeflateParams | null {
  if (!secWebSocketExtensionsResponseHeader) return null;
  for (const ext of splitOutsideQuotes(secWebSocketExtensionsResponseHeader, ",")) {
    const parts = splitOutsideQuotes(ext, ";");
    if (parts[0].trim().toLowerCase() !== "permessage-deflate") continue;
    const params: PerMessageDeflateParams = {
      serverNoContextTakeover: false,
      clientNoContextTakeover: false,
      serverMaxWindowBits: DEFAULT_WINDOW_BITS,
      clientMaxWindowBits: DEFAULT_WINDOW_BITS,
    };
    for (const raw of parts.slice(1)) {
      const eq = raw.indexOf("=");
      const name = (eq < 0 ? raw : raw.slice(0, eq)).trim().toLowerCase();
      const value = eq < 0 ? undefined : raw.slice(eq + 1);
      switch (name) {
        case "server_no_context_takeover":
          params.serverNoContextTakeover = true;
          break;
        case "client_no_context_takeover":
          params.clientNoContextTakeover = true;
          break;
        case "server_max_window_bits":
          params.serverMaxWindowBits = windowBits(value);
          break;
        case "client_max_window_bits":
          params.clientMaxWindowBits = windowBits(value);
          break;
      }
    }
    return params;
  }
  return null;
}

/**
 * Whether the sender of frames travelling in `dir` resets its compressor per
 * message: "out" frames are client to server (client_* parameters), "in"
 * frames are server to client (server_* parameters).
 */
export function senderNoContextTakeover(params: PerMessageDeflateParams, dir: "in" | "out"): boolean {
  return dir === "out" ? params.clientNoContextTakeover : params.serverNoContextTakeover;
}

/** The sender's window bits for frames travelling in `dir`. */
export function senderWindowBits(params: PerMessageDeflateParams, dir: "in" | "out"): number {
  return dir === "out" ? params.clientMaxWindowBits : params.serverMaxWindowBits;
}
