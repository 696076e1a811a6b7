import { existsSync, readFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { checkConnection, parseConnectionsFile, PROTOCOLS, type ConnectionConfig } from "../../features/remote-fs/config.ts";
import { resolveDataDir } from "../../service/datadir.ts";
import { writeFileAtomic } from "../../store/json-state.ts";
import type { ApiClient } from "../client.ts";
import {
  CliFailure,
  dataDirHelp,
  DATA_DIR_OPTION,
  delay,
  formatDuration,
  intFlag,
  JSON_OPTION,
  parse,
  printJson,
  str,
  table,
  UsageError,
  type Command,
  type Io,
  type Options,
  type Subcommand,
  type Values,
  runSubcommand,
} from "../command.ts";
import { apiErrorMessage, callJson, connect } from "../service-call.ts";

const CONN_FILE = "remote-connections.json";

const LS_USAGE = `usage: tapwire remote ls CONN [PATH] [--json] [--data-dir DIR]

Lists a remote folder (default: the connection's home folder): a table on a terminal (folders first); otherwise
one line per entry with tab-separated fields type (d or -), size, modified (ISO 8601 or empty), path.

options:
  --json             POST /api/v1/remote-fs/connections/CONN/list's answer
${dataDirHelp(21)}
  -h, --help         show this text

example:
  tapwire remote ls backup /var/www`;

const GET_USAGE = `usage: tapwire remote get CONN REMOTE_PATH [LOCAL_PATH] [--detach] [--json] [--data-dir DIR]

Downloads a remote file (default LOCAL_PATH: its name in the current folder). The file appears at LOCAL_PATH only
once complete. Waits for the transfer, with a progress bar (bytes, rate, ETA) on a terminal; Ctrl-C cancels it.

options:
  --detach           print the transferId and return at once (follow it with 'tapwire remote transfers')
  --json             print the finished transfer as JSON
${dataDirHelp(21)}
  -h, --help         show this text

example:
  tapwire remote get backup /var/backups/db.sql.gz ./db.sql.gz`;

const PUT_USAGE = `usage: tapwire remote put CONN LOCAL_PATH [REMOTE_PATH] [--detach] [--json] [--data-dir DIR]

Uploads a local file (default REMOTE_PATH: its name in the connection's home folder), replacing a remote file of
that name once complete. Waits with a progress bar on a terminal; Ctrl-C cancels it.

options:
  --detach           print the transferId and return at once
  --json             print the finished transfer as JSON
${dataDirHelp(21)}
  -h, --help         show this text

example:
  tapwire remote put s3-assets ./logo.png images/logo.png`;

const MV_USAGE = `usage: tapwire remote mv CONN FROM TO [--data-dir DIR]

Renames or moves a remote file or folder. Fails when TO exists (it never overwrites).

options:
${dataDirHelp(21)}
  -h, --help         show this text

example:
  tapwire remote mv backup old.tar.gz archive/old.tar.gz`;

const RM_USAGE = `usage: tapwire remote rm CONN PATH... [-r] [--data-dir DIR]

Deletes remote files; with -r also folders, with everything in them (on S3: every object under the prefix).

options:
  -r, --recursive    PATHs may be folders
${dataDirHelp(21)}
  -h, --help         show this text

example:
  tapwire remote rm backup tmp/a.log tmp/b.log`;

const MKDIR_USAGE = `usage: tapwire remote mkdir CONN PATH... [--data-dir DIR]

Creates remote folders, with any missing parents. Fails when a folder exists already.

options:
${dataDirHelp(21)}
  -h, --help         show this text

example:
  tapwire remote mkdir webdav-docs reports/2026/q4`;

const TRANSFERS_USAGE = `usage: tapwire remote transfers [--json] [--data-dir DIR]

Lists the transfers of the running tapwire: id, state, kind, connection, bytes done / total, remote path.

options:
  --json             the transfers as JSON (GET /api/v1/remote-fs/transfers)
${dataDirHelp(21)}
  -h, --help         show this text

example:
  tapwire remote transfers --json`;

const RELOAD_USAGE = `usage: tapwire remote reload [--data-dir DIR]

Makes the running tapwire re-read ${CONN_FILE} now (it also does so by itself when the file changes); exits 1
naming the problem when the file is invalid (the previous connections stay in force).

options:
${dataDirHelp(21)}
  -h, --help         show this text

example:
  tapwire remote reload`;

const ADD_USAGE = `usage: tapwire remote add [--id ID] [--protocol P] [--host H] [--port N] [--label L] [--home PATH]
                          [--username U] [auth references] [options] [--data-dir DIR]

Adds a connection to ${CONN_FILE} in the data directory (written atomically, mode 0600) and asks a running tapwire
to reload it. Only references to secrets are stored: the name of an environment variable or of a file, never a
password or key itself. On a terminal, missing required values are asked for; otherwise they must be given.

  --id ID                  connection id (letters, digits, . _ -)
  --protocol P             ${PROTOCOLS.join(", ")}
  --host H, --port N       server address (default port by protocol)
  --label L                display name (default: the id)
  --home PATH              homePath: where relative paths start (s3: a key prefix)
  --username U             login name (not for s3)
auth references (auth):
  --password-env VAR       the password is in tapwire's environment variable VAR
  --password-file FILE     the password is the content of FILE (absolute path)
  --key-file FILE          sftp: private key file (absolute path); --passphrase-env VAR for its passphrase
  --ssh-agent              sftp: use the agent at $SSH_AUTH_SOCK
  --access-key-env VAR     s3: access key id in VAR, with --secret-key-env VAR (neither: the AWS default chain)
options:
  --fingerprint FP         sftp: pinned host key, SHA256:... as 'ssh-keygen -lf' prints it
  --known-hosts FILE       sftp: known_hosts file to check the host key against (default ~/.ssh/known_hosts)
  --secure MODE            ftps: explicit (default) or implicit
  --ca-file FILE           ftps, s3, webdav: CA certificate(s) to trust (PEM)
  --bucket B, --region R   s3
  --endpoint URL           s3: the service address (default AWS)
  --path-style             s3: path-style addressing (s3rver, MinIO)
  --url URL                webdav: the server's base URL
${dataDirHelp(27)}
  -h, --help               show this text

examples:
  tapwire remote add --id backup --protocol sftp --host backup.example.com --username deploy \\
      --key-file /home/me/.ssh/id_ed25519 --fingerprint SHA256:uN8X1yNv...
  tapwire remote add --id assets --protocol s3 --bucket my-assets --region eu-west-1 \\
      --access-key-env AWS_ACCESS_KEY_ID --secret-key-env AWS_SECRET_ACCESS_KEY`;

export const REMOTE_USAGE = `usage: tapwire remote <command> ...

Remote files over the connections of ${CONN_FILE} (SFTP, FTP/FTPS, S3, WebDAV), through the running tapwire.
Paths are absolute, or relative to the connection's home folder.

commands:
  ls CONN [PATH]                 list a folder
  get CONN REMOTE [LOCAL]        download a file (progress bar on a terminal)
  put CONN LOCAL [REMOTE]        upload a file
  mv CONN FROM TO                rename or move
  rm CONN PATH... [-r]           delete files (-r: folders too)
  mkdir CONN PATH...             create folders (with parents)
  transfers                      list transfers
  add [flags]                    add a connection to ${CONN_FILE} (references to secrets only)
  reload                         re-read ${CONN_FILE} now

Run 'tapwire remote <command> --help' for a command's options.

options:
  -h, --help   show this text

examples:
  tapwire remote ls backup /
  tapwire remote get backup /var/backups/db.sql.gz`;

const conn = (v: string) => encodeURIComponent(v);

function human(n: number): string {
  if (n < 1024) return `${Math.round(n)} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

async function ls(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parse(argv, { ...DATA_DIR_OPTION, ...JSON_OPTION }, LS_USAGE, [1, 2]);
  const client = connect(values, io);
  const r = await callJson<{ path: string; entries: { name: string; path: string; isDir: boolean; size: number; modifiedMs?: number; permissions?: string; owner?: string }[] }>(
    client,
    "POST",
    `/remote-fs/connections/${conn(positionals[0]!)}/list`,
    { path: positionals[1] ?? "." },
  );
  if (values.json) printJson(io, r);
  else if (io.isTTY) {
    io.out(r.path);
    const rows = r.entries.map((e) => [e.permissions ?? (e.isDir ? "d" : "-"), e.isDir ? "" : human(e.size), e.modifiedMs ? new Date(e.modifiedMs).toISOString().slice(0, 16).replace("T", " ") : "", e.name + (e.isDir ? "/" : "")]);
    for (const l of table(["mode", "size", "modified (UTC)", "name"], rows, io.columns)) io.out(l);
  } else {
    for (const e of r.entries) io.out([e.isDir ? "d" : "-", e.size, e.modifiedMs ? new Date(e.modifiedMs).toISOString() : "", e.path].join("\t"));
  }
  return 0;
}

interface TransferView {
  transferId: string;
  state: string;
  kind: string;
  connectionId: string;
  remotePath: string;
  localPath: string;
  bytesDone: number;
  totalBytes: number | null;
  error: { code: string; message: string } | null;
  startedAt: number | null;
}

/** One line of progress: bar, bytes, rate and ETA. */
export function progressLine(t: TransferView, rate: number, width: number): string {
  const total = t.totalBytes ?? 0;
  const frac = total > 0 ? Math.min(1, t.bytesDone / total) : t.state === "done" ? 1 : 0;
  const eta = rate > 0 && total > t.bytesDone ? formatDuration(((total - t.bytesDone) / rate) * 1000) : "-";
  const text = ` ${(frac * 100).toFixed(0).padStart(3)}% ${human(t.bytesDone)}/${human(total)} ${human(rate)}/s ETA ${eta} ${t.state}`;
  const barWidth = Math.max(10, Math.min(40, width - text.length - 3));
  const filled = Math.round(frac * barWidth);
  return `[${"#".repeat(filled)}${"-".repeat(barWidth - filled)}]${text}`;
}

/** Polls the transfer until it ends; a progress bar on stderr when stdout is a terminal; Ctrl-C cancels it. */
async function follow(client: ApiClient, id: string, io: Io, values: Values): Promise<number> {
  let interrupted = false;
  const onInt = () => {
    interrupted = true;
  };
  process.on("SIGINT", onInt);
  let last = { t: performance.now(), bytes: 0 };
  let rate = 0;
  let t: TransferView;
  try {
    for (;;) {
      if (interrupted) {
        await client.request("POST", `/remote-fs/transfers/${id}/cancel`);
        interrupted = false;
      }
      t = await callJson<TransferView>(client, "GET", `/remote-fs/transfers/${id}`);
      const now = performance.now();
      if (now - last.t >= 500) {
        rate = ((t.bytesDone - last.bytes) * 1000) / (now - last.t) * 0.7 + rate * 0.3;
        last = { t: now, bytes: t.bytesDone };
      }
      if (io.isTTY) process.stderr.write(`\r${progressLine(t, rate, io.columns)}\x1b[K`);
      if (["done", "error", "cancelled"].includes(t.state)) break;
      await delay(200);
    }
  } finally {
    process.off("SIGINT", onInt);
  }
  if (io.isTTY) process.stderr.write("\n");
  if (values.json) printJson(io, t);
  if (t.state === "done") {
    const secs = t.startedAt ? (Date.now() - t.startedAt) / 1000 : 0;
    if (!values.json) io.out(`${t.kind === "download" ? "downloaded" : "uploaded"} ${t.remotePath} ${t.kind === "download" ? "->" : "<-"} ${t.localPath} (${human(t.bytesDone)}${secs > 0 ? `, ${human(t.bytesDone / secs)}/s` : ""})`);
    return 0;
  }
  throw new CliFailure(t.state === "cancelled" ? `transfer ${id} cancelled` : `transfer ${id} failed: ${t.error?.message ?? "unknown error"} (${t.error?.code ?? "?"})`);
}

async function transferCmd(kind: "download" | "upload", argv: string[], io: Io): Promise<number> {
  const usage = kind === "download" ? GET_USAGE : PUT_USAGE;
  const { values, positionals } = parse(argv, { ...DATA_DIR_OPTION, ...JSON_OPTION, detach: { type: "boolean" } }, usage, [2, 3]);
  const [id, a, b] = positionals as [string, string, string | undefined];
  const client = connect(values, io);
  const body =
    kind === "download"
      ? { remote_path: a, local_path: resolve(b ?? basename(a)) }
      : { local_path: resolve(a), remote_path: b ?? basename(a) };
  const r = await callJson<{ transferId: string }>(client, "POST", `/remote-fs/connections/${conn(id)}/${kind}`, body);
  if (values.detach) {
    if (values.json) printJson(io, r);
    else io.out(r.transferId);
    return 0;
  }
  return follow(client, r.transferId, io, values);
}

async function mv(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parse(argv, DATA_DIR_OPTION, MV_USAGE, [3, 3]);
  await callJson(connect(values, io), "POST", `/remote-fs/connections/${conn(positionals[0]!)}/rename`, { from: positionals[1], to: positionals[2] });
  return 0;
}

async function rm(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parse(argv, { ...DATA_DIR_OPTION, recursive: { type: "boolean", short: "r" } }, RM_USAGE, [2, 10_000]);
  const [id, ...paths] = positionals as [string, ...string[]];
  const client = connect(values, io);
  if (!values.recursive) {
    // without -r a folder is refused here, as rm does, before anything is deleted
    for (const p of paths) {
      const parent = p.replace(/\/+$/, "").replace(/\/[^/]*$/, "") || (p.startsWith("/") ? "/" : ".");
      const a = await client.request("POST", `/remote-fs/connections/${conn(id)}/list`, { path: parent });
      const name = p.replace(/\/+$/, "").split("/").pop();
      const hit = (a.json as { entries?: { name: string; isDir: boolean }[] } | undefined)?.entries?.find((e) => e.name === name);
      if (hit?.isDir) throw new CliFailure(`${p} is a folder: use -r to delete it with everything in it`);
    }
  }
  await callJson(client, "POST", `/remote-fs/connections/${conn(id)}/delete`, { paths: paths.map((path) => ({ path, is_dir: values.recursive === true })) });
  return 0;
}

async function mkdir(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parse(argv, DATA_DIR_OPTION, MKDIR_USAGE, [2, 10_000]);
  const [id, ...paths] = positionals as [string, ...string[]];
  const client = connect(values, io);
  for (const path of paths) await callJson(client, "POST", `/remote-fs/connections/${conn(id)}/mkdir`, { path });
  return 0;
}

async function transfers(argv: string[], io: Io): Promise<number> {
  const { values } = parse(argv, { ...DATA_DIR_OPTION, ...JSON_OPTION }, TRANSFERS_USAGE);
  const r = await callJson<{ transfers: TransferView[] }>(connect(values, io), "GET", "/remote-fs/transfers");
  if (values.json) printJson(io, r);
  else {
    const rows = r.transfers.map((t) => [t.transferId, t.state, t.kind, t.connectionId, `${human(t.bytesDone)}/${t.totalBytes === null ? "?" : human(t.totalBytes)}`, t.remotePath]);
    for (const l of io.isTTY ? table(["id", "state", "kind", "connection", "bytes", "remote path"], rows, io.columns) : rows.map((r) => r.join("\t"))) io.out(l);
  }
  return 0;
}

async function reload(argv: string[], io: Io): Promise<number> {
  const { values } = parse(argv, DATA_DIR_OPTION, RELOAD_USAGE);
  const a = await connect(values, io).request("POST", "/remote-fs/reload");
  if (a.status !== 200) throw new CliFailure(`remote reload failed: ${apiErrorMessage(a)}`);
  const n = (a.json as { connections: unknown[] }).connections.length;
  io.out(`reloaded ${n} remote connection(s)`);
  return 0;
}

const ADD_OPTIONS: Options = {
  ...DATA_DIR_OPTION,
  id: { type: "string" },
  protocol: { type: "string" },
  host: { type: "string" },
  port: { type: "string" },
  label: { type: "string" },
  home: { type: "string" },
  username: { type: "string" },
  "password-env": { type: "string" },
  "password-file": { type: "string" },
  "key-file": { type: "string" },
  "passphrase-env": { type: "string" },
  "ssh-agent": { type: "boolean" },
  "access-key-env": { type: "string" },
  "secret-key-env": { type: "string" },
  fingerprint: { type: "string" },
  "known-hosts": { type: "string" },
  secure: { type: "string" },
  "ca-file": { type: "string" },
  bucket: { type: "string" },
  region: { type: "string" },
  endpoint: { type: "string" },
  "path-style": { type: "boolean" },
  url: { type: "string" },
};

/** The connection entry the flags describe (only the fields given), asking for missing required ones on a terminal. */
async function addEntry(values: Values, io: Io, ask: ((q: string) => Promise<string>) | null): Promise<Record<string, unknown>> {
  const need = async (flag: string, question: string): Promise<string | undefined> => {
    const v = str(values, flag);
    if (v !== undefined || !ask) return v;
    const a = (await ask(`${question}: `)).trim();
    return a === "" ? undefined : a;
  };
  const id = await need("id", "connection id");
  const protocol = await need("protocol", `protocol (${PROTOCOLS.join(", ")})`);
  const isS3 = protocol === "s3";
  const host = isS3 || protocol === "webdav" ? str(values, "host") : await need("host", "host");
  const username = isS3 ? str(values, "username") : await need("username", "username");
  const auth: Record<string, unknown> = {};
  const set = (o: Record<string, unknown>, k: string, flag: string) => {
    const v = values[flag];
    if (v !== undefined) o[k] = typeof v === "string" && /file|hosts/.test(flag) ? resolve(v) : v;
  };
  set(auth, "password_env", "password-env");
  set(auth, "password_file", "password-file");
  set(auth, "key_file", "key-file");
  set(auth, "passphrase_env", "passphrase-env");
  set(auth, "ssh_agent", "ssh-agent");
  set(auth, "access_key_env", "access-key-env");
  set(auth, "secret_key_env", "secret-key-env");
  if (Object.keys(auth).length === 0 && ask && !isS3) {
    const v = (await ask("environment variable holding the password (empty for none): ")).trim();
    if (v) auth.password_env = v;
  }
  const options: Record<string, unknown> = {};
  set(options, "host_fingerprint", "fingerprint");
  set(options, "known_hosts", "known-hosts");
  set(options, "secure", "secure");
  set(options, "ca_file", "ca-file");
  set(options, "region", "region");
  set(options, "endpoint", "endpoint");
  set(options, "force_path_style", "path-style");
  set(options, "url", "url");
  if (isS3) {
    const bucket = await need("bucket", "bucket");
    if (bucket !== undefined) options.bucket = bucket;
  } else if (values.bucket !== undefined) options.bucket = values.bucket;
  if (protocol === "sftp" && options.host_fingerprint === undefined && options.known_hosts === undefined && ask) {
    const fp = (await ask("host key fingerprint SHA256:... (empty: check ~/.ssh/known_hosts): ")).trim();
    if (fp) options.host_fingerprint = fp;
  }
  const entry: Record<string, unknown> = { id, protocol };
  if (host !== undefined) entry.host = host;
  const port = intFlag(values, "port", ADD_USAGE, 1, 65535);
  if (port !== undefined) entry.port = port;
  entry.label = str(values, "label") ?? id;
  entry.homePath = str(values, "home") ?? "";
  if (username !== undefined) entry.username = username;
  entry.auth = auth;
  entry.options = options;
  return entry;
}

async function add(argv: string[], io: Io): Promise<number> {
  const { values } = parse(argv, ADD_OPTIONS, ADD_USAGE);
  const interactive = io.isTTY && process.stdin.isTTY === true;
  // node:readline only for a prompt (loaded here: its module costs start-up of every command)
  const rl = interactive ? (await import("node:readline/promises")).createInterface({ input: process.stdin, output: process.stderr }) : null;
  let entry: Record<string, unknown>;
  try {
    entry = await addEntry(values, io, rl ? (q) => rl.question(q) : null);
  } finally {
    rl?.close();
  }
  let checked: ConnectionConfig;
  try {
    checked = checkConnection(entry, "the new connection");
  } catch (e) {
    throw new UsageError((e as Error).message, ADD_USAGE);
  }
  const dataDir = resolveDataDir(str(values, "data-dir"), io.env);
  const file = join(dataDir, CONN_FILE);
  let doc: { connections: unknown[] } = { connections: [] };
  if (existsSync(file)) {
    const text = readFileSync(file, "utf8");
    try {
      parseConnectionsFile(text);
    } catch (e) {
      throw new CliFailure(`${file} is invalid, fix it first: ${(e as Error).message}`);
    }
    doc = JSON.parse(text);
  }
  if (doc.connections.some((c) => (c as { id?: string }).id === checked.id)) throw new CliFailure(`${file} already has a connection '${checked.id}'`);
  doc.connections.push(entry);
  if (!existsSync(dataDir)) throw new CliFailure(`data directory ${dataDir} does not exist`);
  writeFileAtomic(file, JSON.stringify(doc, null, 2) + "\n", 0o600);
  io.out(`added connection '${checked.id}' (${checked.protocol}) to ${file}`);
  // a running tapwire picks the file up by itself; reload now so the connection is usable at once
  try {
    const a = await connect(values, io).request("POST", "/remote-fs/reload");
    if (a.status !== 200) io.err(`tapwire: the running tapwire did not accept the file: ${apiErrorMessage(a)}`);
  } catch {
    // not running: it reads the file when it starts
  }
  return 0;
}

const SUBCOMMANDS: (Subcommand & { run(argv: string[], io: Io): Promise<number> })[] = [
  { name: "ls", summary: "list a folder", usage: LS_USAGE, options: { ...DATA_DIR_OPTION, ...JSON_OPTION }, run: ls },
  { name: "get", summary: "download a file", usage: GET_USAGE, options: { ...DATA_DIR_OPTION, ...JSON_OPTION, detach: { type: "boolean" } }, run: (a, io) => transferCmd("download", a, io) },
  { name: "put", summary: "upload a file", usage: PUT_USAGE, options: { ...DATA_DIR_OPTION, ...JSON_OPTION, detach: { type: "boolean" } }, run: (a, io) => transferCmd("upload", a, io) },
  { name: "mv", summary: "rename or move", usage: MV_USAGE, options: DATA_DIR_OPTION, run: mv },
  { name: "rm", summary: "delete", usage: RM_USAGE, options: { ...DATA_DIR_OPTION, recursive: { type: "boolean", short: "r" } }, run: rm },
  { name: "mkdir", summary: "create folders", usage: MKDIR_USAGE, options: DATA_DIR_OPTION, run: mkdir },
  { name: "transfers", summary: "list transfers", usage: TRANSFERS_USAGE, options: { ...DATA_DIR_OPTION, ...JSON_OPTION }, run: transfers },
  { name: "add", summary: "add a connection", usage: ADD_USAGE, options: ADD_OPTIONS, run: add },
  { name: "reload", summary: "re-read the connections file", usage: RELOAD_USAGE, options: DATA_DIR_OPTION, run: reload },
];

export const remoteCommand: Command = {
  name: "remote",
  summary: "remote files (SFTP, FTP/FTPS, S3, WebDAV): ls, get, put, mv, rm, mkdir, add, reload",
  usage: REMOTE_USAGE,
  options: {} as Options,
  subcommands: SUBCOMMANDS,
  values: { "data-dir": "dir" },
  run: (argv: string[], io: Io) => runSubcommand("remote", REMOTE_USAGE, SUBCOMMANDS, argv, io),
};
