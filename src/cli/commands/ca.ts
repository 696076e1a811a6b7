import { X509Certificate } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CA_CERT_FILE, CA_KEY_FILE, loadOrCreateCASync } from "../../core/tls/ca.ts";
import { ensureClientFiles } from "../../service/client-env.ts";
import { ensureDataDir, resolveDataDir } from "../../service/datadir.ts";
import { CliFailure, JSON_OPTION, UsageError, oneOf, parse, printJson, str, type Command, type Io, type Subcommand } from "../command.ts";

const DATA_DIR_HELP_CA = "  --data-dir DIR   data directory (default: $TAPWIRE_DATA_DIR, else the per-user data folder)";

const PATH_USAGE = `usage: tapwire ca path [--bundle] [--data-dir DIR]

Prints the path of tapwire's CA certificate (ca.pem in the data directory), the file to trust in clients and
browsers. When there is none yet it is generated, as \`tapwire start\` would, so it can be trusted before the first
start. Needs no running tapwire.

options:
  --bundle         print the path of ca-bundle.pem instead: the system's trusted roots plus tapwire's CA, brought
                   up to date first (the file SSL_CERT_FILE and the like name, see tapwire env)
${DATA_DIR_HELP_CA}
  -h, --help       show this text

example:
  sudo cp "$(tapwire ca path)" /usr/local/share/ca-certificates/tapwire.crt && sudo update-ca-certificates`;

const SHOW_USAGE = `usage: tapwire ca show [--json] [--data-dir DIR]

Prints the CA certificate's subject, validity, SHA-256 fingerprint and path (made first when there is none).

options:
  --json           the same as one JSON object
${DATA_DIR_HELP_CA}
  -h, --help       show this text

example:
  tapwire ca show --json`;

const EXPORT_USAGE = `usage: tapwire ca export [--format pem|der] [--out FILE] [--data-dir DIR]

Writes the CA certificate (made first when there is none) to stdout or to a file. DER is binary: it needs --out
when stdout is a terminal.

options:
  --format F       pem (default) or der
  --out FILE       write the file (mode 0644) instead of printing
${DATA_DIR_HELP_CA}
  -h, --help       show this text

example:
  tapwire ca export --format der --out tapwire-ca.cer`;

export const CA_USAGE = `usage: tapwire ca <path|show|export> [options]

The CA that signs the certificates tapwire presents for intercepted HTTPS (ca.pem in the data directory).
Clients must trust it: \`tapwire env\` and \`tapwire run\` point them at it.

  path     print the certificate's path (--bundle: the combined bundle's)
  show     subject, validity, fingerprint (--json)
  export   the certificate as PEM or DER, to stdout or --out FILE

Run \`tapwire ca <command> --help\` for its options.

options:
  -h, --help   show this text

examples:
  tapwire ca path
  tapwire ca export --format der --out tapwire-ca.cer`;

const PATH_OPTIONS = { bundle: { type: "boolean" }, "data-dir": { type: "string" } } as const;
const SHOW_OPTIONS = { ...JSON_OPTION, "data-dir": { type: "string" } } as const;
const EXPORT_OPTIONS = { format: { type: "string" }, out: { type: "string" }, "data-dir": { type: "string" } } as const;

const SUBCOMMANDS: Subcommand[] = [
  { name: "path", summary: "print the certificate's path", usage: PATH_USAGE, options: PATH_OPTIONS, values: { "data-dir": "dir" } },
  { name: "show", summary: "subject, validity, fingerprint", usage: SHOW_USAGE, options: SHOW_OPTIONS, values: { "data-dir": "dir" } },
  { name: "export", summary: "the certificate as PEM or DER", usage: EXPORT_USAGE, options: EXPORT_OPTIONS, values: { format: ["pem", "der"], out: "file", "data-dir": "dir" } },
];

/** The CA certificate's path in `dataDir`, generated (with its key) first when neither file exists. */
function caPath(dataDir: string, io: Io): string {
  const cert = join(dataDir, CA_CERT_FILE);
  if (!existsSync(cert)) {
    if (existsSync(join(dataDir, CA_KEY_FILE))) throw new CliFailure(`${join(dataDir, CA_KEY_FILE)} exists but ${cert} does not; restore it, or delete the key to generate a new CA`);
    ensureDataDir(dataDir);
    loadOrCreateCASync(dataDir);
    io.err(`tapwire: generated a new CA: ${cert}`);
  }
  return cert;
}

export const caCommand: Command = {
  name: "ca",
  summary: "the CA certificate: path, details, export",
  usage: CA_USAGE,
  options: {},
  subcommands: SUBCOMMANDS,
  async run(argv: string[], io: Io): Promise<number> {
    const [sub, ...rest] = argv;
    if (sub === undefined || sub === "--help" || sub === "-h" || sub === "help") {
      if (sub === undefined) throw new UsageError("missing subcommand", CA_USAGE);
      io.out(CA_USAGE);
      return 0;
    }
    if (sub === "path") {
      const { values } = parse(rest, PATH_OPTIONS, PATH_USAGE);
      const dataDir = resolveDataDir(str(values, "data-dir"), io.env);
      const cert = caPath(dataDir, io);
      io.out(values.bundle ? ensureClientFiles(dataDir).bundle : cert);
      return 0;
    }
    if (sub === "show") {
      const { values } = parse(rest, SHOW_OPTIONS, SHOW_USAGE);
      const path = caPath(resolveDataDir(str(values, "data-dir"), io.env), io);
      const c = new X509Certificate(readFileSync(path));
      const info = {
        path,
        subject: c.subject.replaceAll("\n", ", "),
        issuer: c.issuer.replaceAll("\n", ", "),
        serial: c.serialNumber,
        not_before: new Date(c.validFrom).toISOString(),
        not_after: new Date(c.validTo).toISOString(),
        sha256_fingerprint: c.fingerprint256,
        sha1_fingerprint: c.fingerprint,
      };
      if (values.json) printJson(io, info);
      else {
        io.out(`path         ${info.path}`);
        io.out(`subject      ${info.subject}`);
        io.out(`valid        ${info.not_before} to ${info.not_after}`);
        io.out(`serial       ${info.serial}`);
        io.out(`SHA-256      ${info.sha256_fingerprint}`);
        io.out(`SHA-1        ${info.sha1_fingerprint}`);
      }
      return 0;
    }
    if (sub === "export") {
      const { values } = parse(rest, EXPORT_OPTIONS, EXPORT_USAGE);
      const format = oneOf(str(values, "format"), ["pem", "der"] as const, "--format", EXPORT_USAGE) ?? "pem";
      const out = str(values, "out");
      const pem = readFileSync(caPath(resolveDataDir(str(values, "data-dir"), io.env), io), "utf8");
      const data: string | Uint8Array = format === "pem" ? pem : new Uint8Array(new X509Certificate(pem).raw);
      if (out) {
        writeFileSync(out, data, { mode: 0o644 });
        io.err(`tapwire: wrote ${out}`);
      } else if (format === "der" && io.isTTY) {
        throw new UsageError("DER is binary: give --out FILE (or pipe the output)", EXPORT_USAGE);
      } else io.write(data);
      return 0;
    }
    throw new UsageError(`unknown ca command '${sub}'`, CA_USAGE);
  },
};
