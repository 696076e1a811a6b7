#!/usr/bin/env bun
// first: run directly, `start` restarts itself with its allocator setting before the other modules are evaluated
import "./allocator.ts";
import { VERSION } from "../version.ts";
import { NotRunningError } from "./client.ts";
import { CliFailure, DATA_DIR_OPTION, HelpRequested, UsageError, processIo, type Command, type Io } from "./command.ts";
import { apiCommand } from "./commands/api.ts";
import { caCommand } from "./commands/ca.ts";
import { completionCommand } from "./commands/completion.ts";
import { composeCommand } from "./commands/compose.ts";
import { envCommand } from "./commands/env.ts";
import { flowCommand } from "./commands/flow.ts";
import { remoteCommand } from "./commands/remote.ts";
import { harCommand } from "./commands/har.ts";
import { runCommand } from "./commands/run.ts";
import { openCommand } from "./commands/open.ts";
import { startCommand } from "./commands/start.ts";
import { statusCommand } from "./commands/status.ts";
import { stopCommand } from "./commands/stop.ts";
import { throttleCommand } from "./commands/throttle.ts";
import { trafficCommand } from "./commands/traffic.ts";
import { versionCommand } from "./commands/version.ts";

/**
 * `tapwire mcp` (src/cli/mcp.ts): its module, with the MCP SDK, is loaded only when the command runs, so that the
 * other commands do not pay for it at start-up.
 */
const mcpEntry: Command = {
  name: "mcp",
  summary: "serve the Model Context Protocol over stdio, for AI assistants",
  usage: "usage: tapwire mcp [--data-dir DIR]",
  loadUsage: async () => (await import("./mcp.ts")).MCP_USAGE,
  options: DATA_DIR_OPTION,
  values: { "data-dir": "dir" },
  run: async (argv: string[]) => (await import("./mcp.ts")).mcpCommand(argv),
};

/** Every command, in the order the usage lists them. */
export const COMMANDS: Command[] = [
  startCommand,
  statusCommand,
  stopCommand,
  openCommand,
  envCommand,
  runCommand,
  trafficCommand,
  harCommand,
  apiCommand,
  caCommand,
  throttleCommand,
  flowCommand,
  composeCommand,
  remoteCommand,
  mcpEntry,
  completionCommand(() => COMMANDS),
  versionCommand,
];

export function usage(): string {
  const visible = COMMANDS.filter((c) => !c.hidden);
  const width = Math.max(...visible.map((c) => c.name.length), 4) + 2;
  return `tapwire ${VERSION}: a headless traffic-inspecting MITM proxy with a local management API

usage: tapwire <command> [options]

commands:
${visible.map((c) => `  ${c.name.padEnd(width)} ${c.summary}`).join("\n")}
  ${"help".padEnd(width)} show this text, or a command's: tapwire help traffic wait

Every command answers --help. Commands that talk to the running tapwire find it through api-handshake.json in its
data directory: --data-dir DIR, else $TAPWIRE_DATA_DIR, else the per-user data folder. Exit codes: 0 done,
1 failed (not running, an API error, a timeout), 2 a usage error.

examples:
  tapwire start --port 8080                       # in one terminal
  eval "$(tapwire env)"; curl https://example.com/ # in another: curl goes through tapwire
  tapwire traffic list
  tapwire run --har traffic.har -- npm test       # record one command's traffic`;
}

/** `tapwire help [command [subcommand]]`. */
async function help(words: string[], io: Io): Promise<number> {
  if (words.length === 0) {
    io.out(usage());
    return 0;
  }
  const c = COMMANDS.find((x) => x.name === words[0]);
  if (!c) throw new UsageError(`unknown command '${words[0]}'`, usage());
  if (words[1] !== undefined) {
    const s = c.subcommands?.find((x) => x.name === words[1]);
    if (!s) throw new UsageError(`unknown ${c.name} command '${words[1]}'`, c.usage);
    io.out(s.usage);
    return 0;
  }
  io.out(c.loadUsage ? await c.loadUsage() : c.usage);
  return 0;
}

export async function main(argv: string[], io: Io = processIo): Promise<number> {
  const [name, ...rest] = argv;
  let cmd: Command | undefined;
  try {
    switch (name) {
      case undefined:
        throw new UsageError("missing command", usage());
      case "help":
      case "--help":
      case "-h":
        return await help(rest, io);
      case "--version":
      case "-v":
        io.out(VERSION);
        return 0;
    }
    cmd = COMMANDS.find((c) => c.name === name);
    if (!cmd) throw new UsageError(`unknown command '${name}'`, usage());
    return await cmd.run(rest, io);
  } catch (e) {
    if (e instanceof HelpRequested) {
      io.out(e.usage);
      return 0;
    }
    if (e instanceof UsageError) {
      io.err(`tapwire: ${e.message}\n\n${e.usage ?? cmd?.usage ?? usage()}`);
      return 2;
    }
    if (e instanceof CliFailure) {
      io.err(`tapwire: ${e.message}`);
      return e.code;
    }
    if (e instanceof NotRunningError) {
      io.err(`tapwire: ${e.message}`);
      return 1;
    }
    io.err(`tapwire: ${(e as Error).message ?? String(e)}`);
    return 1;
  }
}

/** Runs the command line and exits with its code (entry.ts, or this file run directly). */
export function runCli(argv: string[]): void {
  const flushed = (s: NodeJS.WriteStream) => new Promise<void>((r) => s.write("", () => r()));
  main(argv).then(async (code) => {
    // let piped output drain before exiting (a large --json answer can still be queued)
    await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
    process.exit(code);
  });
}

if (import.meta.main) runCli(process.argv.slice(2));
