/**
 * The proxy's local root CA: generated once into the data directory, loaded on
 * every later start.
 *
 * Files (in `dataDir`):
 *   ca.pem      the CA certificate, PEM, mode 0644 (users install this as trusted)
 *   ca-key.pem  the CA private key, PKCS#8 PEM, mode 0600
 * Both are written atomically (temp file created 0600/0644 + fsync + rename).
 *
 * Anything wrong with existing files (unreadable, corrupt, key not matching the
 * certificate, expired, only one of the two present) is an Error naming the
 * file; the CA is never silently regenerated, because clients trust it.
 */
import {
  X509Certificate,
  createPrivateKey,
  generateKeyPairSync,
  randomBytes,
  type KeyObject,
} from "node:crypto";
import { closeSync, fchmodSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { namedBits, octetString } from "./der.ts";
import {
  KU,
  OID,
  basicConstraintsValue,
  buildCertificate,
  derToPem,
  encodeName,
  extension,
  keyIdentifier,
  parseCertificate,
  randomSerial,
  signatureAlgorithmFor,
  spkiOf,
  type SignatureAlgorithm,
} from "./x509.ts";

export const CA_CERT_FILE = "ca.pem";
export const CA_KEY_FILE = "ca-key.pem";

export interface CA {
  /** The CA certificate, PEM (single block, trailing newline). */
  readonly certPem: string;
  /** The CA certificate, DER. */
  readonly certDer: Uint8Array;
  /** The CA private key. */
  readonly key: KeyObject;
  /** DER Name of the CA subject; leaves use it verbatim as their issuer. */
  readonly subjectName: Uint8Array;
  /** The CA's subjectKeyIdentifier; leaves carry it as authorityKeyIdentifier. */
  readonly keyId: Uint8Array;
  readonly notBefore: Date;
  readonly notAfter: Date;
  /** Signature algorithm used for everything this CA signs. */
  readonly signatureAlgorithm: SignatureAlgorithm;
  /** Where the files live (undefined for an in-memory CA). */
  readonly certPath?: string;
  readonly keyPath?: string;
  /** True when this call generated the CA (first start). */
  readonly created: boolean;
}

export interface CAOptions {
  /**
   * Key type for a newly generated CA. Default "ec" (P-256, ecdsa-with-SHA256).
   * Ignored when loading existing files (any EC P-256/384/521 or RSA CA loads).
   */
  keyType?: "ec" | "rsa";
  /** Clock override (tests). */
  now?: Date;
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** Generate a fresh CA in memory (nothing is written). */
export function generateCA(opts: CAOptions = {}): CA {
  const now = opts.now ?? new Date();
  const { privateKey } =
    opts.keyType === "rsa"
      ? generateKeyPairSync("rsa", { modulusLength: 2048 })
      : generateKeyPairSync("ec", { namedCurve: "P-256" });
  const spki = spkiOf(privateKey);
  const stamp = now.toISOString().replace(/\.\d+Z$/, "Z");
  const name = encodeName([
    [OID.commonName, "tapwire CA"],
    [OID.organizationName, "tapwire"],
    [OID.organizationalUnitName, `tapwire MITM proxy (local, generated ${stamp})`],
  ]);
  const notBefore = new Date(now.getTime() - DAY_MS);
  const notAfter = new Date(now.getTime());
  notAfter.setUTCFullYear(notAfter.getUTCFullYear() + 10);
  const der = buildCertificate(
    {
      serial: randomSerial(),
      issuer: name,
      subject: name,
      notBefore,
      notAfter,
      spki,
      extensions: [
        extension(OID.basicConstraints, true, basicConstraintsValue(true, 0)),
        extension(OID.keyUsage, true, namedBits([KU.keyCertSign, KU.cRLSign])),
        extension(OID.subjectKeyIdentifier, false, octetString(keyIdentifier(spki))),
      ],
    },
    privateKey,
  );
  return caFromParts(derToPem(der, "CERTIFICATE"), privateKey, { created: true });
}

function caFromParts(
  certPem: string,
  key: KeyObject,
  where: { created: boolean; certPath?: string; keyPath?: string },
): CA {
  const certLabel = where.certPath ?? "CA certificate";
  const keyLabel = where.keyPath ?? "CA private key";
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(certPem);
  } catch (e) {
    throw new Error(`CA certificate ${certLabel} is not a valid PEM certificate: ${errMsg(e)}`);
  }
  if (!x509.ca) throw new Error(`CA certificate ${certLabel} is not a CA certificate (basicConstraints CA:TRUE missing)`);
  let signatureAlgorithm: SignatureAlgorithm;
  try {
    signatureAlgorithm = signatureAlgorithmFor(key);
  } catch (e) {
    throw new Error(`CA private key ${keyLabel}: ${errMsg(e)}`);
  }
  if (!x509.checkPrivateKey(key)) {
    throw new Error(`CA private key ${keyLabel} does not match CA certificate ${certLabel}`);
  }
  const certDer = new Uint8Array(x509.raw);
  let parsed;
  try {
    parsed = parseCertificate(certDer);
  } catch (e) {
    throw new Error(`CA certificate ${certLabel} could not be parsed: ${errMsg(e)}`);
  }
  return {
    certPem: derToPem(certDer, "CERTIFICATE"),
    certDer,
    key,
    subjectName: parsed.subject,
    keyId: parsed.subjectKeyId ?? keyIdentifier(parsed.spki),
    notBefore: parsed.notBefore,
    notAfter: parsed.notAfter,
    signatureAlgorithm,
    certPath: where.certPath,
    keyPath: where.keyPath,
    created: where.created,
  };
}

/** Build a CA from PEM texts (e.g. user-supplied). Throws naming `labels` on any problem. */
export function caFromPem(
  certPem: string,
  keyPem: string,
  labels: { certPath?: string; keyPath?: string } = {},
): CA {
  let key: KeyObject;
  try {
    key = createPrivateKey(keyPem);
  } catch (e) {
    const where = labels.keyPath ? ` ${labels.keyPath}` : "";
    throw new Error(`CA private key${where} is not a valid unencrypted PEM private key: ${errMsg(e)}`);
  }
  return caFromParts(certPem, key, { created: false, ...labels });
}

/**
 * Load the CA from `dataDir`, generating and writing it on first start.
 * Throws (never regenerates) if existing files are unusable.
 */
export function loadOrCreateCASync(dataDir: string, opts: CAOptions = {}): CA {
  const certPath = join(dataDir, CA_CERT_FILE);
  const keyPath = join(dataDir, CA_KEY_FILE);
  const haveCert = exists(certPath, "CA certificate");
  const haveKey = exists(keyPath, "CA private key");

  if (haveCert && haveKey) {
    const certPem = readText(certPath, "CA certificate");
    const keyPem = readText(keyPath, "CA private key");
    const ca = caFromPem(certPem, keyPem, { certPath, keyPath });
    const now = opts.now ?? new Date();
    if (ca.notAfter.getTime() <= now.getTime()) {
      throw new Error(
        `CA certificate ${certPath} expired on ${ca.notAfter.toISOString()}; delete ${certPath} and ${keyPath} to generate a new CA (clients must then trust the new one)`,
      );
    }
    return ca;
  }
  if (haveCert) {
    throw new Error(
      `CA certificate ${certPath} exists but its private key ${keyPath} is missing; restore the key, or delete ${certPath} to generate a new CA`,
    );
  }
  if (haveKey) {
    throw new Error(
      `CA private key ${keyPath} exists but the CA certificate ${certPath} is missing; restore the certificate, or delete ${keyPath} to generate a new CA`,
    );
  }

  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const ca = generateCA(opts);
  const keyPem = ca.key.export({ type: "pkcs8", format: "pem" }).toString();
  // Both temp files are complete and fsynced before either rename, so a crash
  // leaves at worst the key without the certificate (reported on next start).
  const keyTmp = writeTemp(keyPath, keyPem, 0o600);
  let certTmp: string;
  try {
    certTmp = writeTemp(certPath, ca.certPem, 0o644);
  } catch (e) {
    tryUnlink(keyTmp);
    throw e;
  }
  try {
    renameSync(keyTmp, keyPath);
    renameSync(certTmp, certPath);
  } catch (e) {
    tryUnlink(keyTmp);
    tryUnlink(certTmp);
    throw new Error(`cannot write CA files in ${dataDir}: ${errMsg(e)}`);
  }
  fsyncDir(dataDir);
  return { ...ca, certPath, keyPath, created: true };
}

/** Async form of {@link loadOrCreateCASync} (the work is synchronous and fast: ~1 ms for EC). */
export async function loadOrCreateCA(dataDir: string, opts: CAOptions = {}): Promise<CA> {
  return loadOrCreateCASync(dataDir, opts);
}

// ---------------------------------------------------------------------------

function errMsg(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function exists(path: string, what: string): boolean {
  let st;
  try {
    st = statSync(path, { throwIfNoEntry: false });
  } catch (e) {
    throw new Error(`cannot access ${what} ${path}: ${errMsg(e)}`);
  }
  if (!st) return false;
  if (!st.isFile()) throw new Error(`${what} ${path} is not a regular file`);
  return true;
}

function readText(path: string, what: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (e) {
    throw new Error(`cannot read ${what} ${path}: ${errMsg(e)}`);
  }
}

function writeTemp(finalPath: string, data: string, mode: number): string {
  const tmp = `${finalPath}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
  const fd = openSync(tmp, "wx", mode);
  try {
    fchmodSync(fd, mode); // the open() mode is filtered by umask; make it exact
    writeFileSync(fd, data);
    fsyncSync(fd);
  } catch (e) {
    closeSync(fd);
    tryUnlink(tmp);
    throw new Error(`cannot write ${tmp}: ${errMsg(e)}`);
  }
  closeSync(fd);
  return tmp;
}

function tryUnlink(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone
  }
}

function fsyncDir(dir: string): void {
  // Makes the renames durable on POSIX; not supported on every platform.
  try {
    const fd = openSync(dir, "r");
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    // best effort
  }
}
