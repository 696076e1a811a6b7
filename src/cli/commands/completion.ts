import { UsageError, parse, type Command, type Io, type Options, type Subcommand, type ValueHint } from "../command.ts";

const SHELLS = ["bash", "zsh", "fish"] as const;

export const COMPLETION_USAGE = `usage: tapwire completion bash|zsh|fish

Prints a shell completion script for tapwire's commands, subcommands, flags and flag values.

  bash   source <(tapwire completion bash)             (or save it as ~/.local/share/bash-completion/completions/tapwire)
  zsh    source <(tapwire completion zsh)              (in ~/.zshrc, after compinit)
  fish   tapwire completion fish | source              (or save it as ~/.config/fish/completions/tapwire.fish)

options:
  -h, --help   show this text

example:
  echo 'source <(tapwire completion bash)' >> ~/.bashrc`;

interface Flag {
  long: string;
  short?: string;
  takesValue: boolean;
  hint?: ValueHint;
}

function flagsOf(c: Subcommand): Flag[] {
  const flags: Flag[] = Object.entries(c.options as Options).map(([long, o]) => ({
    long,
    short: o.short,
    takesValue: o.type === "string",
    hint: c.values?.[long],
  }));
  flags.push({ long: "help", short: "h", takesValue: false });
  return flags;
}

/** Every (key, command-or-subcommand) pair: "env", "traffic list", ... */
function units(commands: Command[]): { key: string; unit: Subcommand; words: readonly string[] }[] {
  const out: { key: string; unit: Subcommand; words: readonly string[] }[] = [];
  for (const c of commands) {
    if (c.subcommands?.length) for (const s of c.subcommands) out.push({ key: `${c.name} ${s.name}`, unit: s, words: [] });
    else out.push({ key: c.name, unit: c, words: c.words ?? [] });
  }
  return out;
}

const shWords = (ws: readonly string[]) => ws.join(" ");

export function bashScript(commands: Command[]): string {
  const visible = commands.filter((c) => !c.hidden);
  const withSubs = visible.filter((c) => c.subcommands?.length);
  const us = units(visible);
  const valueCases: string[] = [];
  const flagCases: string[] = [];
  const wordCases: string[] = [];
  for (const { key, unit, words } of us) {
    const flags = flagsOf(unit);
    for (const f of flags.filter((x) => x.takesValue)) {
      const pats = [`"${key} --${f.long}"`, ...(f.short ? [`"${key} -${f.short}"`] : [])].join("|");
      if (Array.isArray(f.hint)) valueCases.push(`    ${pats}) COMPREPLY=($(compgen -W "${shWords(f.hint as readonly string[])}" -- "$cur")); return ;;`);
      else if (f.hint === "dir") valueCases.push(`    ${pats}) COMPREPLY=($(compgen -d -- "$cur")); return ;;`);
      else valueCases.push(`    ${pats}) COMPREPLY=($(compgen -f -- "$cur")); return ;;`);
    }
    const names = flags.flatMap((f) => [`--${f.long}`, ...(f.short ? [`-${f.short}`] : [])]);
    flagCases.push(`    "${key}") COMPREPLY=($(compgen -W "${names.join(" ")}" -- "$cur")) ;;`);
    if (words.length) wordCases.push(`    "${key}") COMPREPLY=($(compgen -W "${shWords(words)}" -- "$cur")) ;;`);
  }
  const subCases = withSubs.map((c) => `    ${c.name}) if [ -z "$sub" ]; then COMPREPLY=($(compgen -W "${c.subcommands!.map((s) => s.name).join(" ")} --help" -- "$cur")); return; fi; key="$cmd $sub" ;;`);
  return `# tapwire completion for bash. Load it with: source <(tapwire completion bash)
_tapwire() {
  # $2: the word being completed, $3: the one before it (bash and zsh's bashcompinit both pass them)
  local cur="$2" prev="$3" cmd="" sub="" key w n=0
  for w in "\${COMP_WORDS[@]}"; do
    # words 1 .. COMP_CWORD-1 (counted from 0: written this way, zsh's 1-based arrays agree)
    if [ "$n" -ge 1 ] && [ "$n" -lt "$COMP_CWORD" ]; then
      # after "tapwire run ... --" the words are another command's: complete file names
      if [ "$cmd" = run ] && [ "$w" = "--" ]; then COMPREPLY=(); return; fi
      case "$w" in
        -*) ;;
        *) if [ -z "$cmd" ]; then cmd="$w"; elif [ -z "$sub" ]; then sub="$w"; fi ;;
      esac
    fi
    n=$((n + 1))
  done
  if [ -z "$cmd" ]; then
    COMPREPLY=($(compgen -W "${visible.map((c) => c.name).join(" ")} help --help --version" -- "$cur"))
    return
  fi
  key="$cmd"
  case "$cmd" in
${subCases.join("\n")}
    help) COMPREPLY=($(compgen -W "${visible.map((c) => c.name).join(" ")}" -- "$cur")); return ;;
  esac
  case "$key $prev" in
${valueCases.join("\n")}
  esac
  if [[ "$cur" == -* ]]; then
    case "$key" in
${flagCases.join("\n")}
    esac
    return
  fi
  case "$key" in
${wordCases.join("\n")}
  esac
}
complete -o default -F _tapwire tapwire
`;
}

export function zshScript(commands: Command[]): string {
  return `#compdef tapwire
# tapwire completion for zsh (through zsh's bash completion support). Load it with: source <(tapwire completion zsh)
(( $+functions[compdef] )) || { autoload -U +X compinit && compinit }
autoload -U +X bashcompinit && bashcompinit
${bashScript(commands).split("\n").slice(1).join("\n")}`;
}

function fishQuote(s: string): string {
  return `'${s.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;
}

export function fishScript(commands: Command[]): string {
  const visible = commands.filter((c) => !c.hidden);
  const names = visible.map((c) => c.name).join(" ");
  const lines = [
    "# tapwire completion for fish. Load it with: tapwire completion fish | source",
    "complete -c tapwire -f",
    ...visible.map((c) => `complete -c tapwire -n '__fish_use_subcommand' -a ${c.name} -d ${fishQuote(c.summary)}`),
    `complete -c tapwire -n '__fish_seen_subcommand_from help' -a ${fishQuote(names)}`,
  ];
  const flagLine = (cond: string, f: Flag): string => {
    let l = `complete -c tapwire -n ${fishQuote(cond)} -l ${f.long}`;
    if (f.short) l += ` -s ${f.short}`;
    if (f.takesValue) {
      if (Array.isArray(f.hint)) l += ` -x -a ${fishQuote((f.hint as readonly string[]).join(" "))}`;
      else if (f.hint === "dir") l += ` -x -a '(__fish_complete_directories)'`;
      else if (f.hint === "file") l += " -r -F";
      else l += " -x";
    }
    return l;
  };
  for (const c of visible) {
    if (c.subcommands?.length) {
      const subs = c.subcommands.map((s) => s.name).join(" ");
      for (const s of c.subcommands)
        lines.push(`complete -c tapwire -n ${fishQuote(`__fish_seen_subcommand_from ${c.name}; and not __fish_seen_subcommand_from ${subs}`)} -a ${s.name} -d ${fishQuote(s.summary)}`);
      for (const s of c.subcommands) for (const f of flagsOf(s)) lines.push(flagLine(`__fish_seen_subcommand_from ${c.name}; and __fish_seen_subcommand_from ${s.name}`, f));
    } else {
      if (c.words?.length) lines.push(`complete -c tapwire -n ${fishQuote(`__fish_seen_subcommand_from ${c.name}`)} -a ${fishQuote(c.words.join(" "))}`);
      for (const f of flagsOf(c)) lines.push(flagLine(`__fish_seen_subcommand_from ${c.name}`, f));
    }
  }
  return lines.join("\n") + "\n";
}

/** `tapwire completion`; `commands` gives the command table (main.ts's, this command included). */
export function completionCommand(commands: () => Command[]): Command {
  return {
    name: "completion",
    summary: "print a shell completion script (bash, zsh, fish)",
    usage: COMPLETION_USAGE,
    options: {},
    words: SHELLS,
    async run(argv: string[], io: Io): Promise<number> {
      const { positionals } = parse(argv, {}, COMPLETION_USAGE, [1, 1]);
      const shell = positionals[0]!;
      if (shell === "bash") io.write(bashScript(commands()));
      else if (shell === "zsh") io.write(zshScript(commands()));
      else if (shell === "fish") io.write(fishScript(commands()));
      else throw new UsageError(`unknown shell '${shell}' (bash, zsh or fish)`, COMPLETION_USAGE);
      return 0;
    },
  };
}
