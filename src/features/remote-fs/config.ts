import { existsSync, readFileSync } from "node:fs";
import { isAbsolute } from "node:path";
import { remoteError } from "./errors.ts";

export const PROTOCOLS = ["sftp", "ftp", "ftps", "s3", "webdav"] as const;
export type Protocol = (typeof PROTOCOLS)[number];

/** `auth` of a connection: only references to secrets, never a secret itself. */
export interface AuthRef {
  password_env?: string;
  password_file?: string;
  key_file?: string;
  passphrase_env?: string;
  ssh_agent?: boolean;
  access_key_env?: string;
  secret_key_env?: string;
}

export interface ConnectionOptions {
  host_fingerprint?: string;
  known_hosts?: string;
  secure?: "explicit" | "implicit";
  ca_file?: string;
  bucket?: string;
  region?: string;
  endpoint?: string;
  force_path_style?: boolean;
  url?: string;
}

/** One entry of remote-connections.json (docs/remote-files.md). */
export interface ConnectionConfig {
  id: string;
  protocol: Protocol;
  host: string;
  port?: number;
  label: string;
  homePath: string;
  username?: string;
  auth: AuthRef;
  options: ConnectionOptions;
}

const TOP = ["id", "protocol", "host", "port", "label", "homePath", "username", "auth", "options"];
const AUTH_KEYS: Record<Protocol, string[]> = {
  sftp: ["password_env", "password_file", "key_file", "passphrase_env", "ssh_agent"],
  ftp: ["password_env", "password_file"],
  ftps: ["password_env", "password_file"],
  s3: ["access_key_env", "secret_key_env"],
  webdav: ["password_env", "password_file"],
};
const OPTION_KEYS: Record<Protocol, string[]> = {
  sftp: ["host_fingerprint", "known_hosts"],
  ftp: ["secure", "ca_file"],
  ftps: ["secure", "ca_file"],
  s3: ["bucket", "region", "endpoint", "force_path_style", "ca_file"],
  webdav: ["url", "ca_file"],
};
/** Keys whose names say they hold a secret: refused, so a password never sits in the file by mistake. */
const SECRET_NAMES = /^(password|passphrase|secret|secret_key|access_key|secretAccessKey|accessKeyId|token|private_key)$/i;

/**
 * Parses and checks remote-connections.json's content. Returns the connections or throws an Error whose message
 * names the entry and field at fault (the service keeps the previous connections when a reload fails).
 */
export function parseConnectionsFile(text: string): ConnectionConfig[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new Error(`not valid JSON: ${(e as Error).message}`);
  }
  if (!doc || typeof doc !== "object" || Array.isArray(doc)) throw new Error("expected an object {connections: [...]}");
  const extra = Object.keys(doc).filter((k) => k !== "connections");
  if (extra.length) throw new Error(`unknown top-level field '${extra[0]}' (only 'connections')`);
  const list = (doc as { connections?: unknown }).connections;
  if (!Array.isArray(list)) throw new Error("'connections' must be an array");
  const seen = new Set<string>();
  return list.map((raw, i) => {
    const c = checkConnection(raw, `connections[${i}]`);
    if (seen.has(c.id)) throw new Error(`connections[${i}]: duplicate id '${c.id}'`);
    seen.add(c.id);
    return c;
  });
}

function str(o: Record<string, unknown>, key: string, where: string, required: boolean): string | undefined {
  const v = o[key];
  if (v === undefined || v === null) {
    if (required) throw new Error(`${where}: '${key}' is required`);
    return undefined;
  }
  if (typeof v !== "string") throw new Error(`${where}: '${key}' must be a string`);
  if (required && v.trim() === "") throw new Error(`${where}: '${key}' must not be empty`);
  return v;
}

export function checkConnection(raw: unknown, where: string): ConnectionConfig {
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) throw new Error(`${where}: expected an object`);
  const o = raw as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (SECRET_NAMES.test(k)) throw new Error(`${where}: '${k}' looks like a secret; connections hold only references (auth.password_env, auth.password_file, ...)`);
    if (!TOP.includes(k)) throw new Error(`${where}: unknown field '${k}' (known: ${TOP.join(", ")})`);
  }
  const id = str(o, "id", where, true)!;
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(id)) throw new Error(`${where}: 'id' must be 1-64 letters, digits, '.', '_' or '-'`);
  const at = `connection '${id}'`;
  const protocol = str(o, "protocol", at, true) as Protocol;
  if (!PROTOCOLS.includes(protocol)) throw new Error(`${at}: 'protocol' must be one of ${PROTOCOLS.join(", ")}`);
  const options = (o.options ?? {}) as Record<string, unknown>;
  if (typeof options !== "object" || Array.isArray(options)) throw new Error(`${at}: 'options' must be an object`);
  for (const k of Object.keys(options)) {
    if (SECRET_NAMES.test(k)) throw new Error(`${at}: options.${k} looks like a secret; use auth references`);
    if (!OPTION_KEYS[protocol].includes(k)) throw new Error(`${at}: unknown option '${k}' for ${protocol} (known: ${OPTION_KEYS[protocol].join(", ")})`);
  }
  const auth = (o.auth ?? {}) as Record<string, unknown>;
  if (typeof auth !== "object" || Array.isArray(auth)) throw new Error(`${at}: 'auth' must be an object`);
  for (const k of Object.keys(auth)) {
    if (!AUTH_KEYS[protocol].includes(k)) {
      throw new Error(`${at}: auth.${k} is not known for ${protocol} (known: ${AUTH_KEYS[protocol].join(", ")}; auth holds only references to secrets)`);
    }
    if (k === "ssh_agent" ? typeof auth[k] !== "boolean" : typeof auth[k] !== "string" || auth[k] === "") throw new Error(`${at}: auth.${k} must be ${k === "ssh_agent" ? "a boolean" : "a non-empty string"}`);
  }
  for (const k of ["password_file", "key_file"]) {
    if (typeof auth[k] === "string" && !isAbsolute(auth[k] as string)) throw new Error(`${at}: auth.${k} must be an absolute path`);
  }
  if (auth.passphrase_env !== undefined && auth.key_file === undefined) throw new Error(`${at}: auth.passphrase_env needs auth.key_file`);
  if ((auth.access_key_env === undefined) !== (auth.secret_key_env === undefined)) throw new Error(`${at}: auth.access_key_env and auth.secret_key_env go together (or neither, for the AWS default chain)`);
  for (const k of ["host_fingerprint", "known_hosts", "ca_file", "bucket", "region", "endpoint", "url"]) {
    if (options[k] !== undefined && (typeof options[k] !== "string" || options[k] === "")) throw new Error(`${at}: options.${k} must be a non-empty string`);
  }
  for (const k of ["known_hosts", "ca_file"]) {
    if (typeof options[k] === "string" && !isAbsolute(options[k] as string)) throw new Error(`${at}: options.${k} must be an absolute path`);
  }
  if (options.force_path_style !== undefined && typeof options.force_path_style !== "boolean") throw new Error(`${at}: options.force_path_style must be a boolean`);
  if (options.secure !== undefined && options.secure !== "explicit" && options.secure !== "implicit") throw new Error(`${at}: options.secure must be "explicit" or "implicit"`);
  if (typeof options.host_fingerprint === "string" && !/^SHA256:[A-Za-z0-9+/]{43}=?$/.test(options.host_fingerprint)) {
    throw new Error(`${at}: options.host_fingerprint must look like ssh-keygen -lf prints it: SHA256:<43 base64 characters>`);
  }
  if (protocol === "s3" && !options.bucket) throw new Error(`${at}: options.bucket is required for s3`);
  if (protocol === "webdav" && options.url !== undefined) {
    try {
      const u = new URL(options.url as string);
      if (u.protocol !== "http:" && u.protocol !== "https:") throw new Error("scheme");
    } catch {
      throw new Error(`${at}: options.url must be an http:// or https:// URL`);
    }
  }
  if (typeof options.endpoint === "string") {
    try {
      new URL(options.endpoint);
    } catch {
      throw new Error(`${at}: options.endpoint must be a URL such as https://s3.example.com`);
    }
  }
  let host = str(o, "host", at, false) ?? "";
  if (!host && protocol === "webdav" && options.url) host = new URL(options.url as string).hostname;
  if (!host && protocol === "s3") host = options.endpoint ? new URL(options.endpoint as string).hostname : `s3.${options.region ?? "us-east-1"}.amazonaws.com`;
  if (!host) throw new Error(`${at}: 'host' is required`);
  let port: number | undefined;
  if (o.port !== undefined && o.port !== null) {
    if (typeof o.port !== "number" || !Number.isInteger(o.port) || o.port < 1 || o.port > 65535) throw new Error(`${at}: 'port' must be an integer 1-65535`);
    port = o.port;
  }
  const homePath = str(o, "homePath", at, false) ?? "";
  const username = str(o, "username", at, false);
  if (protocol !== "s3" && !username) throw new Error(`${at}: 'username' is required for ${protocol}`);
  return {
    id,
    protocol,
    host,
    port,
    label: str(o, "label", at, false) ?? id,
    homePath,
    username,
    auth: auth as AuthRef,
    options: options as ConnectionOptions,
  };
}

/** Reads the secret an env-variable reference points to; a missing variable is an `auth` failure naming it. */
export function secretFromEnv(name: string, env: Record<string, string | undefined>, what: string): string {
  const v = env[name];
  if (v === undefined || v === "") throw remoteError("auth", `${what}: environment variable ${name} is not set in tapwire's environment`);
  return v;
}

/** Reads a secret file (one trailing newline dropped). */
export function secretFromFile(path: string, what: string): string {
  try {
    return readFileSync(path, "utf8").replace(/\r?\n$/, "");
  } catch (e) {
    throw remoteError("auth", `${what}: cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
}

/** The password a connection refers to (password_env or password_file), or undefined if it names none. */
export function resolvePassword(c: ConnectionConfig, env: Record<string, string | undefined>): string | undefined {
  if (c.auth.password_env) return secretFromEnv(c.auth.password_env, env, `connection '${c.id}' password`);
  if (c.auth.password_file) return secretFromFile(c.auth.password_file, `connection '${c.id}' password file`);
  return undefined;
}

/** Reads a CA file named by options.ca_file. */
export function readCaFile(c: ConnectionConfig): string | undefined {
  const f = c.options.ca_file;
  if (!f) return undefined;
  if (!existsSync(f)) throw remoteError("io", `connection '${c.id}': options.ca_file ${f} does not exist`);
  return readFileSync(f, "utf8");
}

export const DEFAULT_PORTS: Record<Protocol, number> = { sftp: 22, ftp: 21, ftps: 21, s3: 443, webdav: 443 };

/** Whether traffic of this connection is encrypted (spec 2.16 `encrypted`). */
export function isEncrypted(c: ConnectionConfig): boolean {
  if (c.protocol === "sftp" || c.protocol === "ftps" || (c.protocol === "ftp" && c.options.secure !== undefined)) return true;
  if (c.protocol === "s3") return c.options.endpoint ? c.options.endpoint.startsWith("https:") : true;
  if (c.protocol === "webdav") return webdavUrl(c).startsWith("https:");
  return false;
}

export function webdavUrl(c: ConnectionConfig): string {
  if (c.options.url) return c.options.url;
  const port = c.port ?? 443;
  return `${port === 80 ? "http" : "https"}://${c.host}${port === 443 || port === 80 ? "" : `:${port}`}/`;
}
