import { VERSION } from "../../version.ts";
import { JSON_OPTION, parse, printJson, type Command, type Io } from "../command.ts";

export const VERSION_USAGE = `usage: tapwire version [--json]

Prints tapwire's version (also: tapwire --version).

options:
  --json       {"version": "..."}
  -h, --help   show this text

example:
  tapwire version`;

export const versionCommand: Command = {
  name: "version",
  summary: "print the version",
  usage: VERSION_USAGE,
  options: JSON_OPTION,
  async run(argv: string[], io: Io): Promise<number> {
    const { values } = parse(argv, JSON_OPTION, VERSION_USAGE);
    if (values.json) printJson(io, { version: VERSION });
    else io.out(VERSION);
    return 0;
  },
};
