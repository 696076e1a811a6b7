import { appendFileSync } from "node:fs";
import { CLIENT_ENV_NAMES, clientEnv, ensureClientFiles, withoutNodePreload } from "../../service/client-env.ts";
import { CliFailure, UsageError, dataDirHelp, DATA_DIR_OPTION, JSON_OPTION, oneOf, parse, printJson, str, type Command, type Io } from "../command.ts";
import { connect } from "../service-call.ts";

const SHELLS = ["sh", "bash", "zsh", "fish", "powershell", "pwsh", "dotenv", "github"] as const;
type Shell = (typeof SHELLS)[number];

export const ENV_USAGE = `usage: tapwire env [--shell sh|fish|powershell|dotenv|github] [--unset] [--json] [--data-dir DIR]

Prints the environment variables that make common clients send their requests through the running tapwire and
trust its CA. Evaluate them in your shell:

  eval "$(tapwire env)"                                  sh, bash, zsh
  tapwire env --shell fish | source                      fish
  tapwire env --shell powershell | Invoke-Expression     PowerShell

Afterwards curl, git, Python (urllib, requests), Bun, Node.js (node:http and node:https; also fetch from 22.21 and
24.5 on), Go, Ruby, the AWS CLI and most other clients go through the proxy, with TLS verified against tapwire's CA.

variables:
  HTTP_PROXY, HTTPS_PROXY, http_proxy, https_proxy
                 http://127.0.0.1:<proxy port> (from api-handshake.json)
  NO_PROXY, no_proxy
                 empty, so requests to localhost and 127.0.0.1 go through tapwire too; set NO_PROXY after the eval
                 to exempt hosts (export NO_PROXY=localhost,127.0.0.1)
  SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, GIT_SSL_CAINFO, AWS_CA_BUNDLE
                 <data dir>/ca-bundle.pem: the system's trusted roots followed by tapwire's CA (these variables
                 replace a client's trust store); this command rewrites it, atomically, when it is out of date
  NODE_EXTRA_CA_CERTS
                 <data dir>/ca.pem (Node.js adds it to its own roots)
  NODE_USE_ENV_PROXY
                 1: Node.js 22.21+ and 24.5+ then honour the proxy variables themselves
  NODE_OPTIONS   --require "<data dir>/node-proxy.cjs" before the current value: on older Node.js it routes
                 node:http and node:https through the proxy (their fetch ignores proxies)

options:
  --shell S        sh (the default; also bash, zsh), fish, powershell, dotenv (NAME=value lines), or github:
                   NAME=value lines in $GITHUB_ENV format, also appended to the file $GITHUB_ENV names when it is
                   set, so that the later steps of a GitHub Actions job use the proxy
  --unset          print the commands that remove the variables again (sh, fish, powershell)
  --json           the variables as one JSON object
${dataDirHelp(19)}
  -h, --help       show this text

examples:
  eval "$(tapwire env)"; curl https://example.com/       # curl's request is now in tapwire traffic list
  eval "$(tapwire env --unset)"                          # back to direct connections`;

const OPTIONS = { shell: { type: "string" }, unset: { type: "boolean" }, ...JSON_OPTION, ...DATA_DIR_OPTION } as const;

/** Single quotes for sh: 'it'\''s'. */
function shQuote(v: string): string {
  return `'${v.replaceAll("'", `'\\''`)}'`;
}

/** Single quotes for fish (backslash and quote escaped). */
function fishQuote(v: string): string {
  return `'${v.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;
}

/** Single quotes for PowerShell (a quote is doubled). */
function psQuote(v: string): string {
  return `'${v.replaceAll("'", "''")}'`;
}

/** dotenv: bare when plain, else single-quoted (literal in the common parsers). */
function dotenvValue(v: string): string {
  return /^[A-Za-z0-9_./:@%+,-]*$/.test(v) ? v : `'${v.replaceAll("'", "\\'")}'`;
}

export function formatSet(shell: Shell, vars: [string, string][]): string[] {
  switch (shell) {
    case "fish":
      return vars.map(([k, v]) => `set -gx ${k} ${fishQuote(v)}`);
    case "powershell":
    case "pwsh":
      return vars.map(([k, v]) => `$env:${k} = ${psQuote(v)}`);
    case "dotenv":
      return vars.map(([k, v]) => `${k}=${dotenvValue(v)}`);
    case "github":
      return vars.map(([k, v]) => `${k}=${v}`);
    default:
      return vars.map(([k, v]) => `export ${k}=${shQuote(v)}`);
  }
}

function formatUnset(shell: Shell, names: string[], nodeOptionsLeft: string): string[] {
  const lines: string[] = [];
  for (const k of names) {
    if (k === "NODE_OPTIONS" && nodeOptionsLeft) {
      lines.push(...formatSet(shell, [[k, nodeOptionsLeft]]));
      continue;
    }
    if (shell === "fish") lines.push(`set -e ${k}`);
    else if (shell === "powershell" || shell === "pwsh") lines.push(`Remove-Item Env:${k} -ErrorAction SilentlyContinue`);
    else lines.push(`unset ${k}`);
  }
  return lines;
}

export const envCommand: Command = {
  name: "env",
  summary: "print the variables that make clients use the proxy and trust its CA",
  usage: ENV_USAGE,
  options: OPTIONS,
  values: { shell: ["sh", "fish", "powershell", "dotenv", "github"], "data-dir": "dir" },
  async run(argv: string[], io: Io): Promise<number> {
    const { values } = parse(argv, OPTIONS, ENV_USAGE);
    const shell = oneOf(str(values, "shell"), SHELLS, "--shell", ENV_USAGE) ?? "sh";
    if (values.unset && (shell === "dotenv" || shell === "github")) throw new UsageError(`--unset has no ${shell} form`, ENV_USAGE);
    const client = connect(values, io);
    const port = client.proxyPort;
    if (!port) throw new CliFailure(`the proxy of tapwire (pid ${client.handshake.pid}) is not listening`);
    let files;
    try {
      files = ensureClientFiles(client.dataDir);
    } catch (e) {
      throw new CliFailure((e as Error).message);
    }
    const current = io.env.NODE_OPTIONS ?? "";
    if (values.unset) {
      for (const l of formatUnset(shell, [...CLIENT_ENV_NAMES], withoutNodePreload(current, files.nodePreload))) io.out(l);
      return 0;
    }
    const vars = clientEnv({ proxyPort: port, files, nodeOptions: current });
    if (values.json) {
      printJson(io, Object.fromEntries(vars));
      return 0;
    }
    const lines = formatSet(shell, vars);
    for (const l of lines) io.out(l);
    if (shell === "github" && io.env.GITHUB_ENV) appendFileSync(io.env.GITHUB_ENV, lines.join("\n") + "\n");
    return 0;
  },
};
