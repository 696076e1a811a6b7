import { readFileSync } from "node:fs";
import { dataDirHelp, DATA_DIR_OPTION, UsageError, parse, str, type Command, type Io } from "../command.ts";
import { connect } from "../service-call.ts";

export const API_USAGE = `usage: tapwire api [METHOD] PATH [-d JSON | -d @FILE | -d @-] [-H 'Name: value']... [-i] [--data-dir DIR]

Calls the running tapwire's management API with its token and prints the answer's body: indented JSON on a
terminal, the body as received otherwise. PATH is relative to /api/v1 (/traffic?limit=5) or absolute
(/api/v1/health); METHOD defaults to GET, or to POST when -d is given. Exits 1 when the status is 400 or more,
after printing the error body on stderr. The routes are in docs/api.md and at /api/v1/docs.

options:
  -d, --data DATA     the request body: JSON text, @FILE to read a file, or @- to read stdin; sent with
                      Content-Type: application/json unless -H gives another
  -H, --header H      an extra request header, 'Name: value' (repeatable)
  -i, --include       print the status and the response headers before the body
${dataDirHelp(22)}
  -h, --help          show this text

examples:
  tapwire api /traffic?limit=5
  tapwire api POST /map-local/rules -d @rule.json
  tapwire api PUT /ignored-hosts/example.com
  echo '{"enabled": false}' | tapwire api PUT /map-local/enabled -d @-`;

const OPTIONS = {
  data: { type: "string", short: "d" },
  header: { type: "string", short: "H", multiple: true },
  include: { type: "boolean", short: "i" },
  ...DATA_DIR_OPTION,
} as const;

async function bodyOf(data: string, io: Io): Promise<string> {
  if (data === "@-") return new TextDecoder().decode(await io.readStdin());
  if (data.startsWith("@")) {
    try {
      return readFileSync(data.slice(1), "utf8");
    } catch (e) {
      throw new UsageError(`-d ${data}: ${(e as Error).message}`, API_USAGE);
    }
  }
  return data;
}

export const apiCommand: Command = {
  name: "api",
  summary: "call the management API with the token (tapwire api GET /traffic)",
  usage: API_USAGE,
  options: OPTIONS,
  values: { data: "file", "data-dir": "dir" },
  words: ["GET", "POST", "PUT", "DELETE", "PATCH"],
  async run(argv: string[], io: Io): Promise<number> {
    const { values, positionals } = parse(argv, OPTIONS, API_USAGE, [1, 2]);
    const data = str(values, "data");
    let [method, path] = positionals.length === 2 ? positionals : [data === undefined ? "GET" : "POST", positionals[0]!];
    if (!/^[A-Za-z]+$/.test(method!)) throw new UsageError(`'${method}' is not an HTTP method`, API_USAGE);
    if (!path!.startsWith("/")) path = "/" + path;
    const headers: Record<string, string> = {};
    for (const h of (values.header as string[] | undefined) ?? []) {
      const i = h.indexOf(":");
      if (i <= 0) throw new UsageError(`-H takes 'Name: value', got '${h}'`, API_USAGE);
      headers[h.slice(0, i).trim().toLowerCase()] = h.slice(i + 1).trim();
    }
    const body = data === undefined ? undefined : await bodyOf(data, io);
    const client = connect(values, io);
    const a = await client.request(method!.toUpperCase(), path!, body, headers);
    if (values.include) {
      io.out(`HTTP ${a.status}`);
      a.headers.forEach((v, k) => io.out(`${k}: ${v}`));
      io.out("");
    }
    const pretty = io.isTTY && a.json !== undefined ? JSON.stringify(a.json, null, 2) + "\n" : a.text;
    if (a.status >= 400) {
      if (a.text) io.err(pretty.replace(/\n$/, ""));
      io.err(`tapwire: ${method!.toUpperCase()} ${path} answered ${a.status}`);
      return 1;
    }
    if (pretty) io.write(pretty.endsWith("\n") || !io.isTTY ? pretty : pretty + "\n");
    return 0;
  },
};
