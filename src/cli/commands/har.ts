import { closeSync, constants, fsyncSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import type { ApiClient } from "../client.ts";
import {
  CliFailure,
  dataDirHelp,
  DATA_DIR_OPTION,
  intFlag,
  JSON_OPTION,
  parse,
  printJson,
  str,
  type Command,
  type Io,
  type Options,
  type Subcommand,
  runSubcommand,
} from "../command.ts";
import { apiErrorMessage, callJson, connect, queryString } from "../service-call.ts";
import { FILTER_HELP, FILTER_OPTIONS, filterQuery } from "./traffic.ts";

const EXPORT_USAGE = `usage: tapwire har export [filters] [--client LABEL] [--limit N] [--offset N] [--title TEXT] [-o FILE] [--data-dir DIR]

Writes the captured entries that match the filters as one HAR 1.2 file (GET /api/v1/traffic/export.har), oldest
first, streamed: any number of entries, in little memory. Bodies are decoded (base64 for binary ones); WebSocket
upgrades carry their frames (_webSocketMessages); tapwire's own fields are under _tapwire, so \`tapwire har
import\` brings every field back. The file is written beside FILE and renamed into place (mode 0600: it holds
traffic); without -o the HAR goes to stdout.

${FILTER_HELP}
  --client LABEL     entries of this client only (process name or remote IP, exactly)

options:
  --limit N          at most N entries (default: all)
  --offset N         skip the first N matching entries
  --title TEXT       group the entries under one HAR page with this title
  -o, --out FILE     write to FILE (- for stdout)
${dataDirHelp(21)}
  -h, --help         show this text

examples:
  tapwire har export -o all.har
  tapwire har export --host api.example.com --status 5xx --title "failing calls" -o failures.har`;

const IMPORT_USAGE = `usage: tapwire har import FILE [--session [NAME]] [--json] [--data-dir DIR]

Reads a HAR file (from tapwire, Chrome or Firefox DevTools, Playwright's recordHar, Charles, Insomnia...) into the
running tapwire (POST /api/v1/traffic/import): every entry becomes a captured entry marked imported, so list,
show, export, diff and replay work on it; WebSocket messages (_webSocketMessages) go to the WebSocket store.
Nothing is imported when an entry is malformed (the error names it). FILE - reads stdin.

With --session, the file is kept as a saved session instead (POST /api/v1/session-tabs/saved), named NAME (default:
its own name or first page title); the traffic list is not touched.

options:
  --session [NAME]   import as a saved session
  --json             print the API's answer as JSON
${dataDirHelp(21)}
  -h, --help         show this text

examples:
  tapwire har import recording.har
  tapwire har import - < playwright.har
  tapwire har import checkout.har --session "checkout baseline"`;

export const HAR_USAGE = `usage: tapwire har <export|import> [options]

HAR 1.2 files of the running tapwire's traffic.

  export   the captured entries (filtered like tapwire traffic list) as one HAR file
  import   a HAR file's entries into the traffic list (or as a saved session)

Run \`tapwire har <command> --help\` for its options.

options:
  -h, --help   show this text

examples:
  tapwire har export --host example.com -o example.har
  tapwire har import recording.har`;

const EXPORT_OPTIONS = {
  ...FILTER_OPTIONS,
  client: { type: "string" },
  limit: { type: "string" },
  offset: { type: "string" },
  title: { type: "string" },
  out: { type: "string", short: "o" },
  ...DATA_DIR_OPTION,
} as const satisfies Options;

const IMPORT_OPTIONS = { session: { type: "string" }, ...JSON_OPTION, ...DATA_DIR_OPTION } as const satisfies Options;

/** Streams a response body to `path` atomically (temp file beside it, fsync, rename; mode 0600). Returns the bytes written. */
async function streamToFile(res: Response, path: string): Promise<number> {
  const tmp = join(dirname(path), `.${basename(path)}.${process.pid}.${Date.now()}.tmp`);
  const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
  let bytes = 0;
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      let off = 0;
      while (off < chunk.length) off += writeSync(fd, chunk, off, chunk.length - off);
      bytes += chunk.length;
    }
    fsyncSync(fd);
  } catch (e) {
    closeSync(fd);
    try {
      unlinkSync(tmp);
    } catch {}
    throw new CliFailure(`writing ${path} failed: ${(e as Error).message}`);
  }
  closeSync(fd);
  renameSync(tmp, path);
  return bytes;
}

/** GET /traffic/export.har with `query`, to `out` (a file, or stdout when absent or "-"); returns the bytes written. */
export async function exportHar(client: ApiClient, query: Record<string, string | number | boolean | undefined>, out: string | undefined, io: Io): Promise<number> {
  const path = `/traffic/export.har${queryString(query)}`;
  const res = await client.stream("GET", path);
  if (res.status >= 400) {
    const text = await res.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {}
    throw new CliFailure(`GET ${path}: ${apiErrorMessage({ status: res.status, headers: res.headers, text, json })}`);
  }
  if (out && out !== "-") return streamToFile(res, out);
  let bytes = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    io.write(chunk);
    bytes += chunk.length;
  }
  return bytes;
}

async function exportCommand(argv: string[], io: Io): Promise<number> {
  const { values } = parse(argv, EXPORT_OPTIONS, EXPORT_USAGE);
  const query = {
    ...filterQuery(values, EXPORT_USAGE),
    client: str(values, "client"),
    limit: intFlag(values, "limit", EXPORT_USAGE),
    offset: intFlag(values, "offset", EXPORT_USAGE),
    title: str(values, "title"),
  };
  const out = str(values, "out");
  const client = connect(values, io);
  const bytes = await exportHar(client, query, out, io);
  if (out && out !== "-") io.err(`tapwire: wrote ${out} (${bytes} bytes)`);
  return 0;
}

interface ImportAnswer {
  imported: number;
  first_id: number | null;
  last_id: number | null;
  websocket_connections: number;
}

async function importCommand(argv: string[], io: Io): Promise<number> {
  // --session takes an optional NAME: a bare --session (last, or before another flag) means "its own name"
  const args = [...argv];
  const at = args.indexOf("--session");
  if (at >= 0 && (at === args.length - 1 || args[at + 1]!.startsWith("-"))) args.splice(at + 1, 0, "");
  const { values, positionals } = parse(args, IMPORT_OPTIONS, IMPORT_USAGE, [1, 1]);
  const file = positionals[0]!;
  let text: string;
  try {
    text = file === "-" ? new TextDecoder().decode(await io.readStdin()) : readFileSync(file, "utf8");
  } catch (e) {
    throw new CliFailure(`cannot read ${file}: ${(e as Error).message}`);
  }
  try {
    JSON.parse(text);
  } catch (e) {
    throw new CliFailure(`${file} is not JSON: ${(e as Error).message}`);
  }
  const client = connect(values, io);
  const session = str(values, "session");
  if (session !== undefined) {
    const r = await callJson<{ id: string; name: string; entry_count: number }>(client, "POST", `/session-tabs/saved${queryString({ name: session || undefined })}`, text);
    if (values.json) printJson(io, r);
    else io.out(`saved session ${r.id} "${r.name}": ${r.entry_count} entr${r.entry_count === 1 ? "y" : "ies"}`);
    return 0;
  }
  const r = await callJson<ImportAnswer>(client, "POST", "/traffic/import", text);
  if (values.json) printJson(io, r);
  else {
    const range = r.first_id === null ? "" : r.first_id === r.last_id ? ` (id ${r.first_id})` : ` (ids ${r.first_id}-${r.last_id})`;
    const ws = r.websocket_connections ? `, ${r.websocket_connections} WebSocket connection${r.websocket_connections === 1 ? "" : "s"}` : "";
    io.out(`imported ${r.imported} entr${r.imported === 1 ? "y" : "ies"}${range}${ws}`);
  }
  return 0;
}

const dirHint = { "data-dir": "dir" } as const;
const SUBCOMMANDS: (Subcommand & { run: (argv: string[], io: Io) => Promise<number> })[] = [
  { name: "export", summary: "captured entries as one HAR file", usage: EXPORT_USAGE, options: EXPORT_OPTIONS, values: { ...dirHint, out: "file" }, run: exportCommand },
  { name: "import", summary: "a HAR file into the traffic list (or as a saved session)", usage: IMPORT_USAGE, options: IMPORT_OPTIONS, values: dirHint, run: importCommand },
];

export const harCommand: Command = {
  name: "har",
  summary: "export captured traffic as HAR, import HAR files",
  usage: HAR_USAGE,
  options: {} as Options,
  subcommands: SUBCOMMANDS,
  run: (argv: string[], io: Io) => runSubcommand("har", HAR_USAGE, SUBCOMMANDS, argv, io),
};
