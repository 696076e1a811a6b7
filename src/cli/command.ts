/**
 * The small frame every command of the CLI uses: the command record (name, usage, options, run), argument parsing
 * with node:util parseArgs (strict: an unknown flag is a usage error), the process I/O, and the errors main.ts turns
 * into exit codes:
 *
 *   0  done            1  failed (not running, API error, timeout...)            2  usage error
 *
 * `--help`/`-h` is accepted by every command and subcommand: it prints the usage on stdout and exits 0.
 */
import { readFileSync } from "node:fs";
import { parseArgs, type ParseArgsConfig } from "node:util";
import { UsageError } from "./args.ts";

export { UsageError };

/** Thrown by `parse` when --help/-h was given: main.ts prints `usage` on stdout and exits 0. */
export class HelpRequested extends Error {
  constructor(readonly usage: string) {
    super("help requested");
  }
}

/** A failure already explained in its message; main.ts prints `tapwire: <message>` and exits with `code`. */
export class CliFailure extends Error {
  constructor(message: string, readonly code = 1) {
    super(message);
  }
}

export interface Io {
  /** Writes a line (a newline is added) on stdout. */
  out(line: string): void;
  /** Writes a line on stderr. */
  err(line: string): void;
  /** Writes text or bytes on stdout as they are. */
  write(data: string | Uint8Array): void;
  /** stdout is a terminal (readable output) rather than a pipe or file (output for programs). */
  readonly isTTY: boolean;
  /** The terminal's width, when stdout is one. */
  readonly columns: number;
  readonly env: Record<string, string | undefined>;
  /** Reads stdin to its end. */
  readStdin(): Promise<Uint8Array>;
}

export const processIo: Io = {
  out: (l) => void process.stdout.write(l + "\n"),
  err: (l) => void process.stderr.write(l + "\n"),
  write: (d) => void process.stdout.write(d),
  get isTTY() {
    return process.stdout.isTTY === true;
  },
  get columns() {
    return process.stdout.columns || 100;
  },
  env: process.env,
  async readStdin() {
    // fd 0 read whole: works for pipes, files and here-strings alike
    return new Uint8Array(readFileSync(0));
  },
};

export type Options = NonNullable<ParseArgsConfig["options"]>;
export type Values = Record<string, string | boolean | string[] | undefined>;

/** What completion knows of a flag's value: a fixed list, or a file/folder name. */
export type ValueHint = readonly string[] | "file" | "dir";

export interface Subcommand {
  name: string;
  summary: string;
  usage: string;
  options: Options;
  /** Value hints for completion, by long flag name. */
  values?: Record<string, ValueHint>;
}

export interface Command extends Subcommand {
  /** Hidden commands work but are not listed (none yet). */
  hidden?: boolean;
  /** For a command whose module is loaded only when it runs: its full usage (`usage` is then a short form). */
  loadUsage?: () => Promise<string>;
  subcommands?: Subcommand[];
  /** Positional words completion offers after the command (e.g. `completion bash`). */
  words?: readonly string[];
  /** Runs with the words after the command name; returns the exit code. */
  run(argv: string[], io: Io): Promise<number>;
}

/** A subcommand that runs (traffic list, flow run, ...). */
export interface RunnableSubcommand extends Subcommand {
  run(argv: string[], io: Io): Promise<number>;
}

/**
 * The run() of a command made of subcommands: `--help`/`-h`/`help` prints the group's usage, a missing or unknown
 * subcommand is a usage error naming it, anything else runs the subcommand with the remaining words.
 */
export function runSubcommand(group: string, usage: string, subcommands: readonly RunnableSubcommand[], argv: string[], io: Io): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === "--help" || sub === "-h" || sub === "help") {
    io.out(usage);
    return Promise.resolve(0);
  }
  if (sub === undefined) throw new UsageError("missing subcommand", usage);
  const s = subcommands.find((x) => x.name === sub);
  if (!s) throw new UsageError(`unknown ${group} command '${sub}'`, usage);
  return s.run(rest, io);
}

export const HELP_OPTION = { help: { type: "boolean", short: "h" } } as const;
export const DATA_DIR_OPTION = { "data-dir": { type: "string" } } as const;
export const JSON_OPTION = { json: { type: "boolean" } } as const;

/** The --data-dir line of a usage text, its description starting at column `column` (counted from 0). */
export function dataDirHelp(column = 19): string {
  return `  ${"--data-dir DIR".padEnd(column - 2)}data directory of the running tapwire (default: $TAPWIRE_DATA_DIR, else the per-user data folder)`;
}

/**
 * Parses `argv` against `options` (plus --help): unknown flags, missing values and a positional count outside
 * `positionals` ([min, max], default none) are UsageErrors carrying `usage`.
 */
export function parse(argv: string[], options: Options, usage: string, positionals: [number, number] = [0, 0]): { values: Values; positionals: string[] } {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: { ...options, ...HELP_OPTION }, strict: true, allowPositionals: positionals[1] > 0 });
  } catch (e) {
    // --help wins over other mistakes on the same line
    if (argv.includes("--help") || argv.includes("-h")) throw new HelpRequested(usage);
    throw new UsageError(cleanParseError((e as Error).message), usage);
  }
  if (parsed.values.help) throw new HelpRequested(usage);
  const n = parsed.positionals.length;
  if (n < positionals[0]) throw new UsageError(n === 0 ? "missing argument" : `expected at least ${positionals[0]} arguments, got ${n}`, usage);
  if (n > positionals[1]) throw new UsageError(`unexpected argument '${parsed.positionals[positionals[1]]}'`, usage);
  return { values: parsed.values as Values, positionals: parsed.positionals };
}

/** node:util's messages end with advice meant for programmers ("To specify a positional argument starting with..."). */
function cleanParseError(message: string): string {
  return message.replace(/\. To specify a positional argument.*$/s, "").replace(/^Unknown option/, "unknown option");
}

/** A string flag's value, or undefined. */
export function str(values: Values, name: string): string | undefined {
  const v = values[name];
  return typeof v === "string" ? v : undefined;
}

/** A whole number given to a flag, checked against [min, max]. */
export function intFlag(values: Values, name: string, usage: string, min = 0, max = Number.MAX_SAFE_INTEGER): number | undefined {
  const v = str(values, name);
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v.trim())) throw new UsageError(`--${name} takes a whole number, got '${v}'`, usage);
  const n = Number(v);
  if (n < min || n > max) throw new UsageError(`--${name} must be between ${min} and ${max}, got ${v}`, usage);
  return n;
}

/** `choice` must be one of `allowed`. */
export function oneOf<T extends string>(value: string | undefined, allowed: readonly T[], flag: string, usage: string): T | undefined {
  if (value === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(value)) throw new UsageError(`${flag} must be one of ${allowed.join(", ")}; got '${value}'`, usage);
  return value as T;
}

/** "30s", "500ms", "2m", "1h" or a plain number of seconds, in milliseconds. */
export function parseDuration(text: string, flag: string, usage: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (!m) throw new UsageError(`${flag} takes a duration such as 30s, 500ms or 2m; got '${text}'`, usage);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(m[2] ?? "s") as "ms" | "s" | "m" | "h"];
  return Math.round(Number(m[1]) * unit);
}

/** A duration for people: 850ms, 12.5s, 3m20s. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${+(ms / 1000).toFixed(1)}s`;
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)}m${s % 60 ? `${s % 60}s` : ""}`;
  return `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m`;
}

/** Pretty JSON (two-space indent) with a final newline. */
export function printJson(io: Io, value: unknown): void {
  io.out(JSON.stringify(value, null, 2));
}

/** Columns padded to their widest cell; the last column is not padded and may be cut to fit `width`. */
export function table(header: string[], rows: string[][], width = Infinity): string[] {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? "").length)));
  return all.map((r) => {
    const cells = r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!)));
    const line = cells.join("  ");
    return line.length > width && width > 20 ? line.slice(0, width - 1) + "…" : line;
  });
}

/** A promise that resolves after `ms` (for polling loops of the product, never for test synchronisation). */
export function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
