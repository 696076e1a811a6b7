// Sandbox prelude, part 1 of 7: built-ins captured at start-up and small helpers.
// The prelude's parts are concatenated into one function body (sandbox/index.ts) evaluated once per worker inside
// QuickJS; `chai` and `host` are that function's parameters. Nothing here can reach the host except through `host`.

// Captured before any user script runs: a script that replaces JSON.parse or Object.keys on its globalThis does not
// change what the prelude calls.
const jsonParse = JSON.parse;
const jsonStringify = JSON.stringify;
const objectKeys = Object.keys;
const objectFreeze = Object.freeze;
const defineProperty = Object.defineProperty;
const isArray = Array.isArray;
const hasOwnProperty = Object.prototype.hasOwnProperty;
const PromiseCtor = Promise;
const promiseThen = Promise.prototype.then;
const promiseResolveStatic = Promise.resolve;
const promiseResolve = (v) => promiseResolveStatic.call(PromiseCtor, v);
const dateNow = Date.now;
const ErrorCtor = Error;

const hasOwn = (obj, key) => hasOwnProperty.call(obj, key);
/** obj[key] = value as an own data property, even for "__proto__". */
const setOwn = (obj, key, value) => defineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true });
const isObject = (v) => v !== null && typeof v === "object";
const isFunction = (v) => typeof v === "function";

/** Limits of what a run may log: lines past MAX_CONSOLE_LINES are dropped, long lines cut. */
const MAX_CONSOLE_LINES = 1000;
const MAX_CONSOLE_CHARS = 10000;

/** Standard reason phrases, for a response that came without one and for a status code a script sets. */
const REASONS = {
  100: "Continue", 101: "Switching Protocols", 102: "Processing", 103: "Early Hints",
  200: "OK", 201: "Created", 202: "Accepted", 203: "Non-Authoritative Information", 204: "No Content",
  205: "Reset Content", 206: "Partial Content", 207: "Multi-Status",
  300: "Multiple Choices", 301: "Moved Permanently", 302: "Found", 303: "See Other", 304: "Not Modified",
  307: "Temporary Redirect", 308: "Permanent Redirect",
  400: "Bad Request", 401: "Unauthorized", 402: "Payment Required", 403: "Forbidden", 404: "Not Found",
  405: "Method Not Allowed", 406: "Not Acceptable", 407: "Proxy Authentication Required", 408: "Request Timeout",
  409: "Conflict", 410: "Gone", 411: "Length Required", 412: "Precondition Failed", 413: "Payload Too Large",
  414: "URI Too Long", 415: "Unsupported Media Type", 416: "Range Not Satisfiable", 417: "Expectation Failed",
  418: "I'm a Teapot", 422: "Unprocessable Entity", 423: "Locked", 425: "Too Early", 426: "Upgrade Required",
  428: "Precondition Required", 429: "Too Many Requests", 431: "Request Header Fields Too Large",
  451: "Unavailable For Legal Reasons",
  500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable",
  504: "Gateway Timeout", 505: "HTTP Version Not Supported", 507: "Insufficient Storage",
  511: "Network Authentication Required",
};
const reasonFor = (code) => REASONS[code] || "";

/** One console argument as text: strings as they are, objects as JSON (chai's inspect when JSON cannot show them). */
function formatValue(v) {
  if (typeof v === "string") return v;
  if (v === undefined) return "undefined";
  if (typeof v === "function") return v.name ? `[Function: ${v.name}]` : "[Function (anonymous)]";
  if (typeof v === "bigint") return `${v}n`;
  if (!isObject(v)) return String(v);
  if (v instanceof ErrorCtor) return `${v.name}: ${v.message}`;
  if (v instanceof Map) return `Map(${v.size}) { ${[...v].map(([k, x]) => `${formatNested(k)} => ${formatNested(x)}`).join(", ")} }`;
  if (v instanceof Set) return `Set(${v.size}) { ${[...v].map(formatNested).join(", ")} }`;
  if (v instanceof RegExp || v instanceof Date) return chai.util.inspect(v);
  try {
    const s = jsonStringify(v);
    if (typeof s === "string") return s;
  } catch (_) {
    // circular or holding a BigInt: fall through to inspect
  }
  return chai.util.inspect(v);
}

/** A value inside a Map or Set: strings quoted. */
function formatNested(v) {
  return typeof v === "string" ? jsonStringify(v) : formatValue(v);
}

function formatArgs(args) {
  let out = "";
  for (let i = 0; i < args.length; i++) out += (i ? " " : "") + formatValue(args[i]);
  return out.length > MAX_CONSOLE_CHARS ? out.slice(0, MAX_CONSOLE_CHARS) + "… (truncated)" : out;
}

/** Only frames of the user's script (its file is "script.js"), so a stack shows no prelude or chai internals. */
function scriptFrames(stack) {
  if (typeof stack !== "string") return null;
  const kept = stack.split("\n").filter((l) => l.indexOf("script.js:") >= 0);
  return kept.length ? kept.join("\n") : null;
}

function lineOf(stack) {
  const m = typeof stack === "string" ? /script\.js:(\d+)/.exec(stack) : null;
  return m ? Number(m[1]) : null;
}

/** "Name: message" for an Error, the value as text for anything else thrown. */
function describeThrown(e) {
  if (isObject(e) && typeof e.message === "string") return `${e.name || "Error"}: ${e.message}`;
  return `Uncaught ${formatValue(e)}`;
}

/** What a failed pm.test reports: chai's message as is for an assertion, "Name: message" for anything else. */
function testFailure(e) {
  if (isObject(e) && e.name === "AssertionError" && typeof e.message === "string") return e.message;
  return describeThrown(e);
}

const isOutOfMemory = (e) => isObject(e) && e.name === "InternalError" && e.message === "out of memory";

// ---- base64 (QuickJS has no atob/btoa) ----
const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

function btoa(input) {
  const s = String(input);
  let out = "";
  for (let i = 0; i < s.length; i += 3) {
    const a = s.charCodeAt(i), b = s.charCodeAt(i + 1), c = s.charCodeAt(i + 2);
    if (a > 255 || b > 255 || c > 255) throw new ErrorCtor("btoa: the string has characters outside of Latin1");
    const n = (a << 16) | ((b || 0) << 8) | (c || 0);
    out += B64[(n >> 18) & 63] + B64[(n >> 12) & 63] + (i + 1 < s.length ? B64[(n >> 6) & 63] : "=") + (i + 2 < s.length ? B64[n & 63] : "=");
  }
  return out;
}

function atob(input) {
  const s = String(input).replace(/[\t\n\f\r ]/g, "").replace(/={1,2}$/, "");
  if (s.length % 4 === 1 || /[^A-Za-z0-9+/]/.test(s)) throw new ErrorCtor("atob: the string is not correctly encoded");
  let out = "";
  let bits = 0, acc = 0;
  for (let i = 0; i < s.length; i++) {
    acc = (acc << 6) | B64.indexOf(s[i]);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += String.fromCharCode((acc >> bits) & 255);
    }
  }
  return out;
}

/** UTF-8 length of a string, without encoding it. */
function utf8Length(s) {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

// ---- property paths as lodash writes them: "data.items[0].id", "a['b.c']" ----
function parsePath(path) {
  const parts = [];
  const re = /\[\s*(['"])(.*?)\1\s*\]|\[\s*(\d+)\s*\]|([^.[\]]+)/g;
  let m;
  while ((m = re.exec(String(path)))) parts.push(m[2] !== undefined ? m[2] : m[3] !== undefined ? m[3] : m[4]);
  return parts;
}

/** { found, value } of a path in a value, following own properties only (as lodash's has/get). */
function lookupPath(value, path) {
  let cur = value;
  for (const key of parsePath(path)) {
    if (!isObject(cur) || !hasOwn(cur, key)) return { found: false, value: undefined };
    cur = cur[key];
  }
  return { found: true, value: cur };
}

function randomUuid() {
  const hex = "0123456789abcdef";
  let s = "";
  for (let i = 0; i < 36; i++) {
    if (i === 8 || i === 13 || i === 18 || i === 23) s += "-";
    else if (i === 14) s += "4";
    else if (i === 19) s += hex[(Math.random() * 4) | 8];
    else s += hex[(Math.random() * 16) | 0];
  }
  return s;
}
