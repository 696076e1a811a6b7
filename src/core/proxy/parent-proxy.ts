/**
 * Upstream proxy chaining: tapwire sends its upstream traffic through a parent HTTP proxy (a corporate proxy in
 * front of a CI runner, say) instead of connecting to origins itself.
 *
 *   - plain-HTTP requests go to the parent as absolute-form requests (`GET http://host/path HTTP/1.1`), with
 *     `Proxy-Authorization` when the proxy URL carries credentials;
 *   - HTTPS (intercepted) and byte-for-byte tunnels (ignored hosts), and plain-HTTP WebSocket upgrades, go through
 *     a `CONNECT host:port` to the parent; TLS to the origin then runs inside that tunnel;
 *   - hosts on the no-proxy list are reached directly. Loopback is not special: list it to bypass it.
 *
 * The credentials live in one private field of ParentProxy and go only into the bytes sent to the parent: never in
 * a message, a log line, a flow or an error (labels name the proxy as host:port).
 */
import { parseResponseHead } from "../http1/parse.ts";
import { hostPort } from "../../pipeline/flow.ts";

/** A proxy URL or no-proxy entry that cannot be used; the message never contains the password. */
export class ProxyConfigError extends Error {}

export interface ProxyUrl {
  /** Host name or IP literal (IPv6 without brackets), lower case. */
  host: string;
  port: number;
  /** Percent-decoded; "" when absent. */
  username: string;
  password: string;
  /** The URL normalised (`http://[user[:pass]@]host:port`), credentials included: for the service config only. */
  url: string;
  /** The URL for people: `http://host:port`, with `user:***@` when credentials were given. */
  display: string;
}

const enc = new TextEncoder();

/** `host:port`, IPv6 in brackets. */
function authority(host: string, port: number): string {
  return (host.includes(":") ? `[${host}]` : host) + ":" + port;
}

/** Replaces the password of a URL-ish text with *** so that an error message can quote it. */
function redact(text: string): string {
  return text.replace(/^([a-z][a-z0-9+.-]*:\/\/[^/@:]*):[^/@]*@/i, "$1:***@");
}

/** Parses `http://[user:pass@]host[:port][/]`. Throws ProxyConfigError with a message fit for a user. */
export function parseProxyUrl(text: string): ProxyUrl {
  const raw = text.trim();
  const shown = redact(raw);
  if (raw === "") throw new ProxyConfigError("the proxy URL is empty (expected http://[user:pass@]host:port)");
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(raw)?.[1]?.toLowerCase();
  if (scheme === undefined) throw new ProxyConfigError(`'${shown}' is not a URL; expected http://[user:pass@]host:port`);
  if (scheme !== "http") {
    throw new ProxyConfigError(
      scheme === "https"
        ? `'${shown}': proxies reached over TLS (https://) are not supported; give the proxy's plain http:// address (CONNECT tunnels still carry HTTPS end to end)`
        : `'${shown}': only http:// proxies are supported (got ${scheme}://)`,
    );
  }
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new ProxyConfigError(`'${shown}' is not a valid URL; expected http://[user:pass@]host:port`);
  }
  if ((u.pathname !== "" && u.pathname !== "/") || u.search !== "" || u.hash !== "") {
    throw new ProxyConfigError(`'${shown}': a proxy URL has no path, query or fragment (expected http://[user:pass@]host:port)`);
  }
  let host = u.hostname.toLowerCase();
  if (host.startsWith("[") && host.endsWith("]")) host = host.slice(1, -1);
  if (host === "") throw new ProxyConfigError(`'${shown}': no host`);
  const port = u.port === "" ? 80 : Number(u.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new ProxyConfigError(`'${shown}': port must be 1-65535`);
  let username: string;
  let password: string;
  try {
    username = decodeURIComponent(u.username);
    password = decodeURIComponent(u.password);
  } catch {
    throw new ProxyConfigError(`'${shown}': the user name or password has a malformed %-escape`);
  }
  if (/[\r\n\0]/.test(username + password)) throw new ProxyConfigError(`'${shown}': the user name or password contains a control character`);
  if (username.includes(":")) throw new ProxyConfigError(`'${shown}': the user name cannot contain ':' (percent-encode it as %3A)`);
  const hp = authority(host, port);
  const cred = username || password ? `${u.username}${u.password ? ":" + u.password : ""}@` : "";
  return {
    host,
    port,
    username,
    password,
    url: `http://${cred}${hp}`,
    display: `http://${username || password ? `${u.username}:***@` : ""}${hp}`,
  };
}

/** One no-proxy entry, compiled. */
interface NoProxyEntry {
  /** "all": `*`; "exact": the host; "domain": `.name` (name and subdomains); "sub": `*.name` (subdomains only). */
  kind: "all" | "exact" | "domain" | "sub";
  name: string;
}

const NAME = /^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$/;
const IPV6 = /^[0-9a-f:.]+(%[a-z0-9]+)?$/;

function normalizeHost(h: string): string {
  let x = h.trim().toLowerCase();
  if (x.startsWith("[") && x.endsWith("]")) x = x.slice(1, -1);
  if (x.endsWith(".")) x = x.slice(0, -1);
  return x;
}

/**
 * Normalises a no-proxy list given as one comma-separated string or as several (repeated flags): entries are
 * trimmed and lower-cased, empty ones dropped, duplicates removed. Accepted entries:
 *   `*`              every host (the parent is never used)
 *   `host`, IP       exactly that host (IPv6 with or without brackets)
 *   `.corp.example`  corp.example and every name under it
 *   `*.corp.example` every name under corp.example, not corp.example itself
 * Throws ProxyConfigError naming the first bad entry.
 */
export function parseNoProxyList(list: string | readonly string[]): string[] {
  const parts = (typeof list === "string" ? [list] : list).flatMap((s) => s.split(","));
  const out: string[] = [];
  for (const p of parts) {
    const t = p.trim();
    if (t === "") continue;
    const e = compileEntry(t);
    const norm = e.kind === "all" ? "*" : e.kind === "domain" ? "." + e.name : e.kind === "sub" ? "*." + e.name : e.name;
    if (!out.includes(norm)) out.push(norm);
  }
  return out;
}

function compileEntry(text: string): NoProxyEntry {
  const t = text.trim().toLowerCase();
  if (t === "*") return { kind: "all", name: "" };
  let kind: NoProxyEntry["kind"] = "exact";
  let rest = t;
  if (t.startsWith("*.")) {
    kind = "sub";
    rest = t.slice(2);
  } else if (t.startsWith(".")) {
    kind = "domain";
    rest = t.slice(1);
  }
  const name = normalizeHost(rest);
  const isV6 = name.includes(":") && IPV6.test(name);
  if (kind === "exact" && isV6) return { kind, name };
  if (!NAME.test(name)) {
    const why = /^[a-z][a-z0-9+.-]*:\/\//.test(t)
      ? "give a host name, not a URL"
      : /:\d+$/.test(t)
        ? "ports are not supported: give the host alone"
        : t.includes("/")
          ? "address ranges and paths are not supported"
          : t.includes("*")
            ? "'*' is only allowed alone or as a leading '*.'"
            : "not a host name";
    throw new ProxyConfigError(`no-proxy entry '${text.trim()}': ${why} (expected a host, an IP, .domain, *.domain or *)`);
  }
  return { kind, name };
}

/** A compiled no-proxy list: does this host bypass the parent proxy? */
export function noProxyMatcher(list: readonly string[]): (host: string) => boolean {
  const entries = list.map(compileEntry);
  if (entries.length === 0) return () => false;
  if (entries.some((e) => e.kind === "all")) return () => true;
  return (host: string) => {
    const h = normalizeHost(host);
    for (const e of entries) {
      if (e.kind === "exact") {
        if (h === e.name) return true;
      } else if (h.endsWith("." + e.name) || (e.kind === "domain" && h === e.name)) {
        return true;
      }
    }
    return false;
  };
}

/**
 * How requests go to the parent on a connection that carries absolute-form requests (plain HTTP): the request
 * line's target gets the origin's `http://authority` in front, and the Proxy-Authorization line follows it.
 */
export class ProxyForm {
  private readonly prefix: Uint8Array;
  private readonly origin: string;

  constructor(
    private readonly parent: ParentProxy,
    host: string,
    port: number,
    private readonly authLine: Uint8Array | null,
  ) {
    this.origin = "http://" + hostPort("http", host, port);
    this.prefix = enc.encode(this.origin);
  }

  /** The parent as `host:port`, for messages. */
  get label(): string {
    return this.parent.label;
  }

  /** The message for the parent's 407 to a request on this connection. */
  refusal(reason: string): string {
    return this.parent.refusal(`a request to ${this.origin}`, 407, reason);
  }

  /**
   * The head with an absolute-form target (`GET /p HTTP/1.1` -> `GET http://host/p HTTP/1.1`; `OPTIONS *` ->
   * `OPTIONS http://host`) and Proxy-Authorization after the request line.
   */
  apply(head: Uint8Array): Uint8Array {
    const sp = head.indexOf(0x20);
    const eol = head.indexOf(0x0a);
    if (sp < 0 || eol < sp) return head;
    // "*" alone (OPTIONS *) becomes the bare authority
    const skip = head[sp + 1] === 0x2a && head[sp + 2] === 0x20 ? 1 : 0;
    const auth = this.authLine;
    const out = new Uint8Array(head.length + this.prefix.length - skip + (auth ? auth.length : 0));
    let o = 0;
    out.set(head.subarray(0, sp + 1), o);
    o += sp + 1;
    out.set(this.prefix, o);
    o += this.prefix.length;
    out.set(head.subarray(sp + 1 + skip, eol + 1), o);
    o += eol + 1 - (sp + 1 + skip);
    if (auth) {
      out.set(auth, o);
      o += auth.length;
    }
    out.set(head.subarray(eol + 1), o);
    return out;
  }
}

/** The outcome of reading a parent's answer to CONNECT. */
export type ConnectAnswer = { ok: true; rest: Uint8Array } | { ok: false; message: string };

/** The parent proxy tapwire chains to, with its no-proxy list. */
export class ParentProxy {
  readonly host: string;
  readonly port: number;
  /** `host:port` of the parent, for messages and logs (never the credentials). */
  readonly label: string;
  readonly hasCredentials: boolean;
  /** The no-proxy list as normalised. */
  readonly noProxy: readonly string[];
  /** `Proxy-Authorization: Basic ...\r\n`, or null. */
  readonly #authLine: Uint8Array | null;
  readonly #bypass: (host: string) => boolean;
  #lastHost = "";
  #lastRoutes = false;

  constructor(url: ProxyUrl, noProxy: readonly string[] = []) {
    this.host = url.host;
    this.port = url.port;
    this.label = authority(url.host, url.port);
    this.hasCredentials = url.username !== "" || url.password !== "";
    this.#authLine = this.hasCredentials ? enc.encode(`Proxy-Authorization: Basic ${Buffer.from(`${url.username}:${url.password}`, "utf8").toString("base64")}\r\n`) : null;
    this.noProxy = parseNoProxyList(noProxy);
    this.#bypass = noProxyMatcher(this.noProxy);
  }

  /** From the service config's strings; throws ProxyConfigError. */
  static from(url: string, noProxy: readonly string[] = []): ParentProxy {
    return new ParentProxy(parseProxyUrl(url), noProxy);
  }

  /** True when connections to `host` go through the parent (it is not on the no-proxy list). */
  routes(host: string): boolean {
    if (host === this.#lastHost) return this.#lastRoutes;
    const r = !this.#bypass(host);
    this.#lastHost = host;
    this.#lastRoutes = r;
    return r;
  }

  /** The CONNECT request for host:port, with Proxy-Authorization when credentials were given. */
  connectRequest(host: string, port: number): Uint8Array {
    const a = authority(host, port);
    const head = enc.encode(`CONNECT ${a} HTTP/1.1\r\nHost: ${a}\r\n`);
    const auth = this.#authLine;
    const out = new Uint8Array(head.length + (auth ? auth.length : 0) + 2);
    out.set(head, 0);
    if (auth) out.set(auth, head.length);
    out[out.length - 2] = 0x0d;
    out[out.length - 1] = 0x0a;
    return out;
  }

  /** How to send plain-HTTP requests for this origin on a connection to the parent. */
  proxyForm(host: string, port: number): ProxyForm {
    return new ProxyForm(this, host, port, this.#authLine);
  }

  /** Reads the parent's answer to a CONNECT, fed with the bytes as they arrive. */
  connectReader(host: string, port: number): (data: Uint8Array) => ConnectAnswer | null {
    let buf = new Uint8Array(0);
    const target = authority(host, port);
    return (d) => {
      if (buf.length === 0) buf = d.slice();
      else {
        const b = new Uint8Array(buf.length + d.length);
        b.set(buf, 0);
        b.set(d, buf.length);
        buf = b;
      }
      let parsed;
      try {
        parsed = parseResponseHead(buf);
      } catch (e) {
        return { ok: false, message: `upstream proxy ${this.label} sent a malformed answer to CONNECT ${target}: ${(e as Error).message}` };
      }
      if (!parsed) return null;
      const { status, reason } = parsed.head;
      if (status >= 200 && status < 300) return { ok: true, rest: buf.subarray(parsed.end) };
      return { ok: false, message: this.refusal(`CONNECT ${target}`, status, reason) };
    };
  }

  /** The message for a parent that refused a request (407 says what to do about credentials). */
  refusal(what: string, status: number, reason: string): string {
    let msg = `upstream proxy ${this.label} refused ${what}: ${status}${reason ? " " + reason : ""}`;
    if (status === 407) {
      msg += this.hasCredentials
        ? " (it did not accept the credentials in --upstream-proxy)"
        : " (it wants credentials: give them as --upstream-proxy http://user:pass@host:port)";
    }
    return msg;
  }

  /** For logs: the parent and what bypasses it; never the credentials. */
  describe(): string {
    const creds = this.hasCredentials ? " with credentials" : "";
    const except = this.noProxy.length ? `; direct for ${this.noProxy.join(", ")}` : "";
    return `upstream proxy http://${this.label}${creds}${except}`;
  }

  toJSON(): unknown {
    return { host: this.host, port: this.port, credentials: this.hasCredentials, no_proxy: this.noProxy };
  }
}
