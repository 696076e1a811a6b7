import { DATA_DIR_OPTION, JSON_OPTION, dataDirHelp, parse, printJson, type Command, type Io } from "../command.ts";
import { connect } from "../service-call.ts";

export const OPEN_USAGE = `usage: tapwire open [--print] [--json] [--data-dir DIR]

Opens the web UI of the running tapwire in the default browser (xdg-open on Linux, open on macOS, start on
Windows). The address carries the API token in its #fragment (http://127.0.0.1:PORT/ui/#token=...), which the
browser never sends to a server; the page keeps it for the tab (sessionStorage) and removes it from the address
bar. When no opener is found, or with --print, the address is printed instead: it holds the token, so do not paste
it anywhere others can read.

options:
  --print         print the address instead of opening it
  --json          print {"url": ...} instead of opening it
${dataDirHelp(18)}
  -h, --help      show this text

examples:
  tapwire open
  tapwire open --print --data-dir /tmp/tw`;

const OPTIONS = { print: { type: "boolean" }, ...JSON_OPTION, ...DATA_DIR_OPTION } as const;

/** The command that opens a URL on this platform, or null when there is none on the PATH. */
export function opener(platform: string = process.platform, env: Record<string, string | undefined> = process.env): string[] | null {
  const which = (cmd: string) => Bun.which(cmd, { PATH: env.PATH ?? "" });
  if (platform === "darwin") return which("open") ? ["open"] : null;
  if (platform === "win32") return which("cmd") ? ["cmd", "/c", "start", '""'] : null;
  const x = which("xdg-open");
  return x ? [x] : null;
}

export const openCommand: Command = {
  name: "open",
  summary: "open the web UI in a browser (prints its address when there is no opener)",
  usage: OPEN_USAGE,
  options: OPTIONS,
  values: { "data-dir": "dir" },
  async run(argv: string[], io: Io): Promise<number> {
    const { values } = parse(argv, OPTIONS, OPEN_USAGE);
    const client = connect(values, io);
    const url = `${client.baseUrl}/ui/#token=${encodeURIComponent(client.handshake.token)}`;
    const printOnly = !!(values.print || values.json);
    const cmd = printOnly ? null : opener(process.platform, io.env);
    if (!cmd) {
      if (values.json) printJson(io, { url });
      else io.out(url);
      if (!printOnly) io.err("tapwire: no browser opener found (xdg-open, open, start); open the address above");
      return 0;
    }
    const p = Bun.spawn([...cmd, url], { stdin: "ignore", stdout: "ignore", stderr: "pipe", env: io.env as Record<string, string> });
    const code = await p.exited;
    if (code !== 0) {
      io.out(url);
      io.err(`tapwire: ${cmd[0]} failed (exit ${code}); open the address above`);
      return 0;
    }
    io.err(`tapwire: opened the web UI (${client.baseUrl}/ui/)`);
    return 0;
  },
};
