import { writeFileSync } from "node:fs";
import { buildHar } from "../../features/traffic/har.ts";
import type { EntryDetail, EntrySummary, ListResult } from "../../store/types.ts";
import { VERSION } from "../../version.ts";
import type { ApiClient } from "../client.ts";
import {
  dataDirHelp,
  DATA_DIR_OPTION,
  JSON_OPTION,
  UsageError,
  delay,
  formatDuration,
  intFlag,
  oneOf,
  parse,
  parseDuration,
  printJson,
  str,
  table,
  type Command,
  type Io,
  type Options,
  type Subcommand,
  type Values,
  runSubcommand,
} from "../command.ts";
import { callJson, callText, connect, queryString } from "../service-call.ts";

export const FILTER_HELP = `filters (those of GET /api/v1/traffic; they combine with AND):
  --host TEXT        substring of the host name, case-insensitive
  --method M         exact method, case-insensitive
  --status S         exact status code, or a class such as 5xx
  --status-min N     lowest status code
  --status-max N     highest status code
  --path TEXT        substring of the URL path (without the query string)
  --search TEXT      substring of the URL or of the decoded request and response bodies, case-insensitive
  --has-error        status 400 or more only (failed upstream connections are recorded as 502)
  --since-id ID      entries with an id greater than ID (the order is then oldest first)
  --since MS         entries that started at or after MS (milliseconds since the epoch)`;

const LIST_USAGE = `usage: tapwire traffic list [filters] [--limit N] [--offset N] [--order asc|desc] [--json] [--data-dir DIR]

Lists captured entries, newest first (oldest first with --since-id): a table on a terminal; otherwise one line per
entry with tab-separated fields id, start time (ISO 8601), method, status, duration in ms, client, URL, error;
with --json, GET /api/v1/traffic's answer ({items, total, offset, limit}).

${FILTER_HELP}

options:
  --limit N          at most N entries (default 50, at most 500)
  --offset N         skip the first N
  --order asc|desc   by id
  --json             JSON
${dataDirHelp(21)}
  -h, --help         show this text

examples:
  tapwire traffic list --host api.example.com --status 5xx
  tapwire traffic list --search token --json | jq '.items[].url'`;

const SHOW_USAGE = `usage: tapwire traffic show ID [--json] [--data-dir DIR]

Prints one captured entry: its summary line, the request and response heads, and their bodies (text as it is,
binary bodies as a note; decoded from their Content-Encoding). --json prints GET /api/v1/traffic/ID's answer.

options:
  --json             JSON
${dataDirHelp(21)}
  -h, --help         show this text

example:
  tapwire traffic show 42`;

const EXPORT_USAGE = `usage: tapwire traffic export ID [--format curl|raw|json|har] [--out FILE] [--data-dir DIR]

Exports one captured entry:
  curl   a bash command that sends the request again (the default)
  raw    the request and the response as HTTP/1.1 text
  json   the entry as GET /api/v1/traffic/ID gives it
  har    a HAR 1.2 log holding this one entry

options:
  --format F         curl, raw, json or har
  --out FILE         write to FILE instead of stdout
${dataDirHelp(21)}
  -h, --help         show this text

examples:
  tapwire traffic export 42 > replay.sh
  tapwire traffic export 42 --format har --out entry.har`;

const WAIT_USAGE = `usage: tapwire traffic wait [--host H] [--path GLOB] [--method M] [--status S] [--count N] [--timeout D] [--new | --since-id ID] [--json] [--data-dir DIR]

Waits until matching traffic has been captured, then prints the first N matching entries and exits 0; exits 1
when the timeout passes first, printing what it found. Traffic captured before it started counts too, unless
it is given --new or --since-id. It polls GET /api/v1/traffic (with since_id) ten times a second. This is the
step a CI job needs between "start the app" and "assert on its traffic".

options:
  --host H           substring of the host name, case-insensitive
  --path GLOB        the URL path: * matches within a segment, ** across segments (/api/**, /v1/*/items);
                     a GLOB with ? in it is matched against the path and the query string
  --method M         exact method
  --status S         exact status code, or a class such as 2xx
  --count N          wait for N matching entries (default 1)
  --timeout D        give up after D (default 30s; 500ms, 2m...)
  --new              count only entries captured after the command started
  --since-id ID      count only entries with an id greater than ID
  --json             print the entries found as a JSON array of summaries
${dataDirHelp(21)}
  -h, --help         show this text

examples:
  tapwire traffic wait --host api.example.com --path '/v1/orders/**' --status 201 --timeout 30s
  tapwire traffic wait --new --host localhost --count 3 --timeout 1m`;

const CLEAR_USAGE = `usage: tapwire traffic clear [--data-dir DIR]

Deletes every captured entry (DELETE /api/v1/traffic). Entry ids are not reused afterwards.

options:
${dataDirHelp(21)}
  -h, --help         show this text

example:
  tapwire traffic clear`;

export const TRAFFIC_USAGE = `usage: tapwire traffic <list|show|export|wait|clear> [options]

The traffic the running tapwire has captured.

  list     list entries, filtered as GET /api/v1/traffic (a table; --json for JSON)
  show     one entry with its headers and bodies
  export   one entry as a curl command, raw HTTP, JSON or HAR
  wait     wait until matching traffic has been captured (exit 1 on timeout)
  clear    delete every entry

Run \`tapwire traffic <command> --help\` for its options.

options:
  -h, --help   show this text

examples:
  tapwire traffic list --host example.com
  tapwire traffic wait --host api.example.com --status 200 --timeout 30s`;

export const FILTER_OPTIONS = {
  host: { type: "string" },
  method: { type: "string" },
  status: { type: "string" },
  "status-min": { type: "string" },
  "status-max": { type: "string" },
  path: { type: "string" },
  search: { type: "string" },
  "has-error": { type: "boolean" },
  "since-id": { type: "string" },
  since: { type: "string" },
} as const;
const LIST_OPTIONS = { ...FILTER_OPTIONS, limit: { type: "string" }, offset: { type: "string" }, order: { type: "string" }, ...JSON_OPTION, ...DATA_DIR_OPTION } as const;
const SHOW_OPTIONS = { ...JSON_OPTION, ...DATA_DIR_OPTION } as const;
const EXPORT_OPTIONS = { format: { type: "string" }, out: { type: "string" }, ...DATA_DIR_OPTION } as const;
const WAIT_OPTIONS = {
  host: { type: "string" },
  path: { type: "string" },
  method: { type: "string" },
  status: { type: "string" },
  count: { type: "string" },
  timeout: { type: "string" },
  new: { type: "boolean" },
  "since-id": { type: "string" },
  ...JSON_OPTION,
  ...DATA_DIR_OPTION,
} as const;
const CLEAR_OPTIONS = { ...DATA_DIR_OPTION } as const;

const EXPORT_FORMATS = ["curl", "raw", "json", "har"] as const;

/** `--status 404` → {status: 404}; `--status 5xx` → {status_min: 500, status_max: 599}. */
function statusQuery(v: string | undefined, usage: string): { status?: number; status_min?: number; status_max?: number } {
  if (v === undefined) return {};
  if (/^\d{3}$/.test(v)) return { status: Number(v) };
  const m = /^([1-5])xx$/i.exec(v);
  if (m) return { status_min: Number(m[1]) * 100, status_max: Number(m[1]) * 100 + 99 };
  throw new UsageError(`--status takes a status code (404) or a class (4xx); got '${v}'`, usage);
}

export function filterQuery(values: Values, usage: string): Record<string, string | number | boolean | undefined> {
  const q: Record<string, string | number | boolean | undefined> = {
    host: str(values, "host"),
    method: str(values, "method"),
    ...statusQuery(str(values, "status"), usage),
    path: str(values, "path"),
    search: str(values, "search"),
    has_error: values["has-error"] ? true : undefined,
    since_id: intFlag(values, "since-id", usage),
    since: intFlag(values, "since", usage),
  };
  const min = intFlag(values, "status-min", usage, 0, 999);
  const max = intFlag(values, "status-max", usage, 0, 999);
  if (min !== undefined) q.status_min = min;
  if (max !== undefined) q.status_max = max;
  return q;
}

function entryId(v: string | undefined, usage: string): number {
  if (v === undefined || !/^\d+$/.test(v)) throw new UsageError(v === undefined ? "missing entry ID" : `an entry ID is a whole number, got '${v}'`, usage);
  return Number(v);
}

function clock(ms: number): string {
  const d = new Date(ms);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, "0")).join(":");
}

/** Entries as a table (terminal), tab-separated lines (pipe) or JSON. */
export function printEntries(io: Io, items: EntrySummary[], json: boolean): void {
  if (json) return printJson(io, items);
  if (items.length === 0) return;
  if (!io.isTTY) {
    for (const e of items)
      io.out([e.id, new Date(e.timestamp).toISOString(), e.method, e.status_code, e.duration_ms, e.client_addr, e.url, e.error ?? ""].join("\t"));
    return;
  }
  const rows = items.map((e) => [
    String(e.id),
    clock(e.timestamp),
    e.method,
    e.status_code ? String(e.status_code) : "-",
    formatDuration(e.duration_ms),
    e.client_addr,
    e.url + (e.error ? `  (${e.error})` : ""),
  ]);
  for (const l of table(["ID", "TIME", "METHOD", "STATUS", "TOOK", "CLIENT", "URL"], rows, io.columns)) io.out(l);
}

/** `*` within a path segment, `**` across segments; everything else literal. */
export function pathGlob(glob: string): RegExp {
  let re = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === "*") {
      if (glob[i + 1] === "*") {
        re += ".*";
        i++;
      } else re += "[^/]*";
    } else re += c.replace(/[.+?^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${re}$`);
}

/** The path (and, when `withQuery`, the query) of an entry's URL. */
function urlPath(url: string, withQuery: boolean): string {
  try {
    const u = new URL(url);
    return u.pathname + (withQuery ? u.search : "");
  } catch {
    return url;
  }
}

async function list(argv: string[], io: Io): Promise<number> {
  const { values } = parse(argv, LIST_OPTIONS, LIST_USAGE);
  const q = {
    ...filterQuery(values, LIST_USAGE),
    limit: intFlag(values, "limit", LIST_USAGE),
    offset: intFlag(values, "offset", LIST_USAGE),
    order: oneOf(str(values, "order"), ["asc", "desc"] as const, "--order", LIST_USAGE),
  };
  const client = connect(values, io);
  const r = await callJson<ListResult>(client, "GET", `/traffic${queryString(q)}`);
  if (values.json) {
    printJson(io, r);
    return 0;
  }
  printEntries(io, r.items, false);
  if (io.isTTY) {
    const shown = r.items.length;
    io.err(shown === 0 ? `no entries (${r.total} match)` : `${shown} of ${r.total} matching entries, from ${r.offset + 1}${r.total > r.offset + shown ? "; --offset and --limit for more" : ""}`);
  }
  return 0;
}

function showEntry(io: Io, e: EntryDetail): void {
  const status = e.status_code ? `${e.status_code}${typeof e.reason === "string" && e.reason ? ` ${e.reason}` : ""}` : "no response";
  io.out(`#${e.id}  ${e.method} ${e.url}`);
  io.out(`${status} · ${e.content_type || "no content type"} · ${formatDuration(e.duration_ms)} · ${e.client_addr} · ${new Date(e.timestamp).toISOString()}`);
  if (e.error) io.out(`error: ${e.error}`);
  if (typeof e.original_url === "string") io.out(`original URL: ${e.original_url}`);
  io.out("");
  io.out(`> ${e.method} ${urlPath(e.url, true) || "/"} HTTP/1.1`);
  for (const [n, v] of e.req_headers) io.out(`> ${n}: ${v}`);
  body(io, e.req_body, e.req_body_encoding, e.req_body_size, e.req_body_truncated, e.req_body_decoded_from);
  if (!e.has_response && !e.status_code) return;
  io.out("");
  io.out(`< HTTP/1.1 ${status}`);
  for (const [n, v] of e.res_headers) io.out(`< ${n}: ${v}`);
  body(io, e.res_body, e.res_body_encoding, e.res_body_size, e.res_body_truncated, e.res_body_decoded_from);
}

function body(io: Io, text: string, encoding: string, wireSize: number, truncated: boolean, decodedFrom: string): void {
  if (!text && !wireSize) return;
  io.out("");
  const notes: string[] = [];
  if (decodedFrom) notes.push(`decoded from ${decodedFrom}`);
  if (truncated) notes.push(`truncated: ${wireSize} bytes on the wire`);
  if (encoding === "base64") {
    io.out(`[binary body, ${Buffer.from(text, "base64").length} bytes${notes.length ? `; ${notes.join("; ")}` : ""}: see --json or export --format raw]`);
    return;
  }
  io.out(text.endsWith("\n") ? text.slice(0, -1) : text);
  if (notes.length) io.out(`[${notes.join("; ")}]`);
}

async function show(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parse(argv, SHOW_OPTIONS, SHOW_USAGE, [1, 1]);
  const id = entryId(positionals[0], SHOW_USAGE);
  const e = await callJson<EntryDetail>(connect(values, io), "GET", `/traffic/${id}`);
  if (values.json) printJson(io, e);
  else showEntry(io, e);
  return 0;
}

async function exportEntry(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parse(argv, EXPORT_OPTIONS, EXPORT_USAGE, [1, 1]);
  const id = entryId(positionals[0], EXPORT_USAGE);
  const format = oneOf(str(values, "format"), EXPORT_FORMATS, "--format", EXPORT_USAGE) ?? "curl";
  const client = connect(values, io);
  let text: string;
  if (format === "curl" || format === "raw") text = await callText(client, "GET", `/traffic/${id}/export/${format}`);
  else {
    const e = await callJson<EntryDetail>(client, "GET", `/traffic/${id}`);
    text = JSON.stringify(format === "json" ? e : buildHar([e], { version: VERSION }), null, 2) + "\n";
  }
  const out = str(values, "out");
  if (out) {
    writeFileSync(out, text);
    io.err(`tapwire: wrote ${out}`);
  } else io.write(text.endsWith("\n") ? text : text + "\n");
  return 0;
}

/** The id of the newest entry (0 when there is none). */
export async function newestId(client: ApiClient): Promise<number> {
  const r = await callJson<ListResult>(client, "GET", "/traffic?limit=1&order=desc");
  return r.items[0]?.id ?? 0;
}

async function wait(argv: string[], io: Io): Promise<number> {
  const { values } = parse(argv, WAIT_OPTIONS, WAIT_USAGE);
  const timeoutText = str(values, "timeout") ?? "30s";
  const timeoutMs = parseDuration(timeoutText, "--timeout", WAIT_USAGE);
  const count = intFlag(values, "count", WAIT_USAGE, 1) ?? 1;
  const glob = str(values, "path");
  const pathRe = glob === undefined ? null : pathGlob(glob);
  const withQuery = glob?.includes("?") ?? false;
  const base = { host: str(values, "host"), method: str(values, "method"), ...statusQuery(str(values, "status"), WAIT_USAGE), limit: 500 };
  if (values.new && values["since-id"] !== undefined) throw new UsageError("--new and --since-id do not go together", WAIT_USAGE);
  const client = connect(values, io);
  const started = Date.now();
  let since = values.new ? await newestId(client) : (intFlag(values, "since-id", WAIT_USAGE) ?? 0);
  const what = [
    base.host !== undefined ? `host ~ ${base.host}` : "",
    glob !== undefined ? `path ${glob}` : "",
    base.method !== undefined ? `method ${base.method}` : "",
    str(values, "status") !== undefined ? `status ${str(values, "status")}` : "",
  ].filter(Boolean);
  io.err(`tapwire: waiting up to ${timeoutText} for ${count} entr${count === 1 ? "y" : "ies"}${what.length ? ` with ${what.join(", ")}` : ""}${since ? ` after #${since}` : ""}`);
  const found: EntrySummary[] = [];
  const deadline = started + timeoutMs;
  for (;;) {
    // page through everything new since the last poll
    for (;;) {
      const r = await callJson<ListResult>(client, "GET", `/traffic${queryString({ ...base, since_id: since, order: "asc" })}`);
      for (const e of r.items) {
        since = Math.max(since, e.id);
        if (!pathRe || pathRe.test(urlPath(e.url, withQuery))) found.push(e);
      }
      if (r.items.length < base.limit) break;
    }
    if (found.length >= count) {
      printEntries(io, found.slice(0, count), !!values.json);
      return 0;
    }
    const left = deadline - Date.now();
    if (left <= 0) break;
    await delay(Math.min(100, left));
  }
  printEntries(io, found, !!values.json);
  io.err(`tapwire: timed out after ${timeoutText}: ${found.length} of ${count} matching entr${count === 1 ? "y" : "ies"} captured`);
  return 1;
}

async function clear(argv: string[], io: Io): Promise<number> {
  const { values } = parse(argv, CLEAR_OPTIONS, CLEAR_USAGE);
  await callText(connect(values, io), "DELETE", "/traffic");
  io.err("tapwire: cleared the captured traffic");
  return 0;
}

const dirHint = { "data-dir": "dir" } as const;
const SUBCOMMANDS: (Subcommand & { run: (argv: string[], io: Io) => Promise<number> })[] = [
  { name: "list", summary: "list captured entries", usage: LIST_USAGE, options: LIST_OPTIONS, values: { ...dirHint, order: ["asc", "desc"] }, run: list },
  { name: "show", summary: "one entry with its headers and bodies", usage: SHOW_USAGE, options: SHOW_OPTIONS, values: dirHint, run: show },
  { name: "export", summary: "one entry as curl, raw, json or har", usage: EXPORT_USAGE, options: EXPORT_OPTIONS, values: { ...dirHint, format: EXPORT_FORMATS, out: "file" }, run: exportEntry },
  { name: "wait", summary: "wait until matching traffic has been captured", usage: WAIT_USAGE, options: WAIT_OPTIONS, values: dirHint, run: wait },
  { name: "clear", summary: "delete every entry", usage: CLEAR_USAGE, options: CLEAR_OPTIONS, values: dirHint, run: clear },
];

export const trafficCommand: Command = {
  name: "traffic",
  summary: "list, show, export, wait for and clear captured traffic",
  usage: TRAFFIC_USAGE,
  options: {} as Options,
  subcommands: SUBCOMMANDS,
  run: (argv: string[], io: Io) => runSubcommand("traffic", TRAFFIC_USAGE, SUBCOMMANDS, argv, io),
};
