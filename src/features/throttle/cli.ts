import { parseArgs } from "node:util";
import { resolveDataDir } from "../../service/datadir.ts";
import { readHandshake } from "../../service/handshake.ts";

export const THROTTLE_USAGE = `usage: tapwire throttle reload [--data-dir DIR]

  reload    ask the running tapwire to re-read throttle-rules.json from its data directory now
            (it also does so by itself when the file changes); exits 1 naming the problem when the
            file is invalid (the previous rules stay in force) or when tapwire is not running

  --data-dir DIR   data directory of the running tapwire (default: $TAPWIRE_DATA_DIR, else the per-user data folder)
  -h, --help       show this text

example:
  tapwire throttle reload --data-dir /tmp/tw`;

export interface CliIo {
  out: (line: string) => void;
  err: (line: string) => void;
}

const STD_IO: CliIo = {
  out: (l) => process.stdout.write(l + "\n"),
  err: (l) => process.stderr.write(l + "\n"),
};

/**
 * `tapwire throttle reload`: finds the running service through api-handshake.json in the data directory and calls
 * POST /api/v1/throttle-rules/reload with its token. Returns the exit code: 0 reloaded, 1 invalid file or service
 * not reachable.
 */
export async function reloadThrottleRulesCommand(dataDir: string, io: CliIo = STD_IO): Promise<number> {
  const hs = readHandshake(dataDir);
  if (!hs || typeof hs.port !== "number" || typeof hs.token !== "string") {
    io.err(`tapwire: tapwire is not running on data directory ${dataDir} (no readable api-handshake.json)`);
    return 1;
  }
  let res: Response;
  try {
    res = await fetch(`http://127.0.0.1:${hs.port}/api/v1/throttle-rules/reload`, {
      method: "POST",
      headers: { authorization: `Bearer ${hs.token}` },
    });
  } catch (e) {
    io.err(`tapwire: cannot reach tapwire (pid ${hs.pid}) on 127.0.0.1:${hs.port}: ${(e as Error).message}`);
    return 1;
  }
  let body: any = null;
  try {
    body = await res.json();
  } catch {}
  if (res.status === 200 && body && Array.isArray(body.rules)) {
    const on = body.rules.filter((r: { enabled?: boolean }) => r.enabled).length;
    io.out(`reloaded ${body.rules.length} throttle rule(s) (${on} enabled) from ${body.file}`);
    return 0;
  }
  const message = body?.error?.message ?? `unexpected answer ${res.status}`;
  io.err(`tapwire: throttle reload failed: ${message}`);
  return 1;
}

/** Entry point for `tapwire throttle <subcommand> [options]` (argv after "throttle"). Usage errors exit 2. */
export async function throttleCommand(argv: string[], io: CliIo = STD_IO, env: Record<string, string | undefined> = process.env): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, strict: true, allowPositionals: true, options: { "data-dir": { type: "string" }, help: { type: "boolean", short: "h" } } });
  } catch (e) {
    io.err(`tapwire: ${(e as Error).message}\n\n${THROTTLE_USAGE}`);
    return 2;
  }
  const [sub, ...extra] = parsed.positionals;
  if (parsed.values.help) {
    io.out(THROTTLE_USAGE);
    return 0;
  }
  if (sub !== "reload" || extra.length > 0) {
    io.err(`tapwire: ${sub === undefined ? "missing subcommand" : `unknown throttle command '${[sub, ...extra].join(" ")}'`}\n\n${THROTTLE_USAGE}`);
    return 2;
  }
  return reloadThrottleRulesCommand(resolveDataDir(parsed.values["data-dir"], env), io);
}
