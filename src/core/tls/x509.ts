/**
 * X.509 v3 certificate construction and the small amount of parsing needed to
 * chain leaves to a CA (subject Name bytes, validity, key identifier).
 *
 * The TBSCertificate is built with ./der.ts, signed with node:crypto, and
 * wrapped as Certificate ::= SEQUENCE { tbs, signatureAlgorithm, signature }.
 */
import { createHash, createPublicKey, randomBytes, sign, type KeyObject } from "node:crypto";
import {
  DerError,
  TAG,
  bitString,
  bool,
  children,
  explicit,
  intBytes,
  intNum,
  nul,
  octetString,
  oid,
  readOid,
  readTime,
  readTlv,
  seq,
  set,
  time,
  utf8String,
} from "./der.ts";

export const OID = {
  commonName: "2.5.4.3",
  organizationName: "2.5.4.10",
  organizationalUnitName: "2.5.4.11",
  subjectKeyIdentifier: "2.5.29.14",
  keyUsage: "2.5.29.15",
  subjectAltName: "2.5.29.17",
  basicConstraints: "2.5.29.19",
  authorityKeyIdentifier: "2.5.29.35",
  extKeyUsage: "2.5.29.37",
  serverAuth: "1.3.6.1.5.5.7.3.1",
  ecdsaWithSHA256: "1.2.840.10045.4.3.2",
  ecdsaWithSHA384: "1.2.840.10045.4.3.3",
  ecdsaWithSHA512: "1.2.840.10045.4.3.4",
  sha256WithRSAEncryption: "1.2.840.113549.1.1.11",
} as const;

/** KeyUsage bit positions (RFC 5280 4.2.1.3). */
export const KU = {
  digitalSignature: 0,
  keyEncipherment: 2,
  keyCertSign: 5,
  cRLSign: 6,
} as const;

export interface SignatureAlgorithm {
  /** DER AlgorithmIdentifier. */
  algId: Uint8Array;
  /** Digest name for node:crypto `sign`. */
  hash: string;
}

/** Signature algorithm matching a private key: ECDSA (P-256/384/521) or RSA PKCS#1 v1.5 with SHA-256. */
export function signatureAlgorithmFor(key: KeyObject): SignatureAlgorithm {
  if (key.asymmetricKeyType === "ec") {
    const curve = key.asymmetricKeyDetails?.namedCurve;
    // ECDSA AlgorithmIdentifiers have absent parameters (RFC 5758 3.2).
    if (curve === "prime256v1" || curve === "P-256") return { algId: seq(oid(OID.ecdsaWithSHA256)), hash: "sha256" };
    if (curve === "secp384r1" || curve === "P-384") return { algId: seq(oid(OID.ecdsaWithSHA384)), hash: "sha384" };
    if (curve === "secp521r1" || curve === "P-521") return { algId: seq(oid(OID.ecdsaWithSHA512)), hash: "sha512" };
    throw new Error(`unsupported EC curve ${curve ?? "(unknown)"} for certificate signing`);
  }
  if (key.asymmetricKeyType === "rsa") {
    return { algId: seq(oid(OID.sha256WithRSAEncryption), nul()), hash: "sha256" };
  }
  throw new Error(`unsupported key type ${key.asymmetricKeyType ?? "(unknown)"} for certificate signing`);
}

export type NameAttr = readonly [oid: string, value: string];

/** Name ::= SEQUENCE OF RDN, one attribute per RDN, UTF8String values. */
export function encodeName(attrs: readonly NameAttr[]): Uint8Array {
  return seq(...attrs.map(([o, v]) => set(seq(oid(o), utf8String(v)))));
}

/** Extension ::= SEQUENCE { extnID, critical BOOLEAN DEFAULT FALSE, extnValue OCTET STRING } */
export function extension(extOid: string, critical: boolean, valueDer: Uint8Array): Uint8Array {
  return critical ? seq(oid(extOid), bool(true), octetString(valueDer)) : seq(oid(extOid), octetString(valueDer));
}

/** basicConstraints value. cA FALSE is the DEFAULT, so it is omitted (empty SEQUENCE). */
export function basicConstraintsValue(ca: boolean, pathLen?: number): Uint8Array {
  if (!ca) return seq();
  return pathLen === undefined ? seq(bool(true)) : seq(bool(true), intNum(pathLen));
}

/** 16 random bytes, positive, no leading zero byte (so the INTEGER is exactly 16 bytes). */
export function randomSerial(): Uint8Array {
  const b = randomBytes(16);
  b[0] = (b[0] & 0x7f) | 0x40;
  return new Uint8Array(b);
}

/** RFC 5280 4.2.1.2 method (1): SHA-1 of the subjectPublicKey BIT STRING value. */
export function keyIdentifier(spkiDer: Uint8Array): Uint8Array {
  const top = readTlv(spkiDer, 0);
  const parts = children(spkiDer, top);
  const bits = parts[1];
  if (top.tag !== TAG.SEQUENCE || parts.length !== 2 || bits.tag !== TAG.BIT_STRING || bits.end - bits.contentStart < 1) {
    throw new DerError("malformed SubjectPublicKeyInfo");
  }
  return new Uint8Array(createHash("sha1").update(spkiDer.subarray(bits.contentStart + 1, bits.end)).digest());
}

export function spkiOf(key: KeyObject): Uint8Array {
  return new Uint8Array(createPublicKey(key).export({ type: "spki", format: "der" }));
}

export interface TbsFields {
  serial: Uint8Array;
  /** DER Name of the issuer (must be byte-identical to the issuer cert's subject). */
  issuer: Uint8Array;
  /** DER Name of the subject. */
  subject: Uint8Array;
  notBefore: Date;
  notAfter: Date;
  /** DER SubjectPublicKeyInfo. */
  spki: Uint8Array;
  /** DER Extension TLVs. */
  extensions: readonly Uint8Array[];
}

/** Build, sign and wrap a v3 certificate. Returns the Certificate DER. */
export function buildCertificate(f: TbsFields, signingKey: KeyObject, alg: SignatureAlgorithm = signatureAlgorithmFor(signingKey)): Uint8Array {
  const tbs = seq(
    explicit(0, intNum(2)), // v3
    intBytes(f.serial),
    alg.algId,
    f.issuer,
    seq(time(f.notBefore), time(f.notAfter)),
    f.subject,
    f.spki,
    explicit(3, seq(...f.extensions)),
  );
  const sig = sign(alg.hash, tbs, signingKey); // ECDSA: DER Ecdsa-Sig-Value, RSA: PKCS#1 v1.5
  return seq(tbs, alg.algId, bitString(new Uint8Array(sig)));
}

export interface ParsedCert {
  /** Raw DER Name of the subject. */
  subject: Uint8Array;
  notBefore: Date;
  notAfter: Date;
  /** Raw DER SubjectPublicKeyInfo. */
  spki: Uint8Array;
  /** subjectKeyIdentifier extension value, if present. */
  subjectKeyId?: Uint8Array;
}

/** Parse the parts of a certificate that leaf issuance needs. Throws DerError when malformed. */
export function parseCertificate(der: Uint8Array): ParsedCert {
  const cert = readTlv(der, 0);
  if (cert.tag !== TAG.SEQUENCE || cert.end !== der.length) throw new DerError("not a DER Certificate");
  const [tbs] = children(der, cert);
  if (!tbs || tbs.tag !== TAG.SEQUENCE) throw new DerError("missing TBSCertificate");
  const f = children(der, tbs);
  let i = 0;
  if (f[i]?.tag === 0xa0) i++; // version
  const serial = f[i++];
  const sigAlg = f[i++];
  const issuer = f[i++];
  const validity = f[i++];
  const subject = f[i++];
  const spki = f[i++];
  if (!serial || serial.tag !== TAG.INTEGER || !sigAlg || !issuer || !validity || validity.tag !== TAG.SEQUENCE) {
    throw new DerError("malformed TBSCertificate");
  }
  if (!subject || subject.tag !== TAG.SEQUENCE || !spki || spki.tag !== TAG.SEQUENCE) throw new DerError("malformed TBSCertificate");
  const v = children(der, validity);
  if (v.length !== 2) throw new DerError("malformed Validity");
  const out: ParsedCert = {
    subject: der.slice(subject.start, subject.end),
    notBefore: readTime(der, v[0]),
    notAfter: readTime(der, v[1]),
    spki: der.slice(spki.start, spki.end),
  };
  for (; i < f.length; i++) {
    if (f[i].tag !== 0xa3) continue;
    const [exts] = children(der, f[i]);
    if (!exts) break;
    for (const ext of children(der, exts)) {
      const parts = children(der, ext);
      if (parts.length < 2 || readOid(der, parts[0]) !== OID.subjectKeyIdentifier) continue;
      const value = parts[parts.length - 1];
      const inner = readTlv(der, value.contentStart, value.end);
      if (inner.tag === TAG.OCTET_STRING) out.subjectKeyId = der.slice(inner.contentStart, inner.end);
    }
  }
  return out;
}

export function derToPem(der: Uint8Array, label: string): string {
  const b64 = Buffer.from(der).toString("base64");
  const lines = b64.match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join("\n")}\n-----END ${label}-----\n`;
}
