/**
 * Per-host leaf certificates signed by the local CA.
 *
 * All leaves share ONE EC P-256 key pair generated when the cache is built, so
 * minting a leaf is building a TBSCertificate and one CA signature (well under
 * a millisecond with an EC CA). Leaves are kept in an LRU cache.
 */
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import { isIPv4, isIPv6, parseIPv6 } from "../ip.ts";
import type { CA } from "./ca.ts";
import { implicitPrim, namedBits, oid, seq } from "./der.ts";
import {
  KU,
  OID,
  basicConstraintsValue,
  buildCertificate,
  derToPem,
  encodeName,
  extension,
  randomSerial,
  spkiOf,
} from "./x509.ts";

const DAY_MS = 24 * 60 * 60 * 1000;
/** Leaf lifetime cap: notAfter - now. With notBefore = now - 1 day the span is 398 days (the CA/B and Apple limit). */
export const LEAF_MAX_DAYS_AHEAD = 397;
/** Re-mint a cached leaf once it is this close to expiry. */
const RENEW_BEFORE_MS = DAY_MS;
/** ub-common-name (RFC 5280): longer hosts go in the SAN only. */
const CN_MAX = 64;

export type CertHost =
  | { kind: "dns"; /** lower-case ASCII (punycode), no trailing dot */ name: string }
  | { kind: "ip"; /** RFC 5952 / dotted-quad text */ name: string; bytes: Uint8Array };

/**
 * Normalise a host for certificate issuance: IPv4/IPv6 literals (brackets and
 * zone ids allowed) become iPAddress entries, everything else must be a valid
 * DNS name (IDNs are converted to punycode, a trailing dot is dropped, a
 * leading "*." wildcard label is allowed). Throws on anything else.
 */
export function normalizeCertHost(host: string): CertHost {
  let h = host.trim();
  if (h.startsWith("[") && h.endsWith("]")) h = h.slice(1, -1);
  const zone = h.indexOf("%");
  const noZone = zone >= 0 ? h.slice(0, zone) : h;
  if (isIPv4(noZone)) {
    const bytes = Uint8Array.from(noZone.split(".").map(Number));
    return { kind: "ip", name: bytes.join("."), bytes };
  }
  if (isIPv6(noZone)) {
    const bytes = parseIPv6(noZone);
    if (bytes) return { kind: "ip", name: formatIPv6(bytes), bytes };
  }
  let name = h.toLowerCase();
  if (name.endsWith(".")) name = name.slice(0, -1);
  if (/[^\x00-\x7f]/.test(name)) {
    // node:url only here, for the rare non-ASCII name (its module costs ~3 ms of start-up)
    const ascii = (require("node:url") as typeof import("node:url")).domainToASCII(name);
    if (!ascii) throw new Error(`invalid host name for certificate: ${JSON.stringify(host)}`);
    name = ascii;
  }
  if (!isValidDnsName(name)) throw new Error(`invalid host name for certificate: ${JSON.stringify(host)}`);
  return { kind: "dns", name };
}

function isValidDnsName(name: string): boolean {
  if (name.length === 0 || name.length > 253) return false;
  const labels = name.split(".");
  for (let i = 0; i < labels.length; i++) {
    const l = labels[i];
    if (i === 0 && l === "*" && labels.length > 1) continue;
    if (l.length === 0 || l.length > 63) return false;
    if (!/^[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?$/.test(l)) return false;
  }
  return true;
}

/** RFC 5952 text form: lower-case hex, longest run (>= 2) of zero groups compressed. */
function formatIPv6(b: Uint8Array): string {
  const g: number[] = [];
  for (let i = 0; i < 8; i++) g.push((b[i * 2] << 8) | b[i * 2 + 1]);
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = g.map((x) => x.toString(16));
  if (bestLen < 2) return hex.join(":");
  return hex.slice(0, bestStart).join(":") + "::" + hex.slice(bestStart + bestLen).join(":");
}

/**
 * Mint one leaf certificate (DER) for `host`, carrying public key `leafSpki`
 * (DER SubjectPublicKeyInfo), signed by `ca`.
 */
export function mintLeafCert(ca: CA, host: string | CertHost, leafSpki: Uint8Array, now: Date = new Date()): Uint8Array {
  const h = typeof host === "string" ? normalizeCertHost(host) : host;
  const notBefore = new Date(Math.max(now.getTime() - DAY_MS, ca.notBefore.getTime()));
  const notAfter = new Date(Math.min(now.getTime() + LEAF_MAX_DAYS_AHEAD * DAY_MS, ca.notAfter.getTime()));
  if (notAfter.getTime() <= now.getTime()) {
    throw new Error(`CA certificate${ca.certPath ? ` ${ca.certPath}` : ""} has expired (${ca.notAfter.toISOString()}); cannot issue leaves`);
  }
  const useCN = h.name.length <= CN_MAX;
  const san =
    h.kind === "ip" ? implicitPrim(7, h.bytes) : implicitPrim(2, new TextEncoder().encode(h.name));
  return buildCertificate(
    {
      serial: randomSerial(),
      issuer: ca.subjectName,
      subject: useCN ? encodeName([[OID.commonName, h.name]]) : encodeName([]),
      notBefore,
      notAfter,
      spki: leafSpki,
      extensions: [
        extension(OID.basicConstraints, true, basicConstraintsValue(false)),
        extension(OID.keyUsage, true, namedBits([KU.digitalSignature])),
        extension(OID.extKeyUsage, false, seq(oid(OID.serverAuth))),
        // With an empty subject the SAN must be critical (RFC 5280 4.2.1.6).
        extension(OID.subjectAltName, !useCN, seq(san)),
        extension(OID.authorityKeyIdentifier, false, seq(implicitPrim(0, ca.keyId))),
      ],
    },
    ca.key,
    ca.signatureAlgorithm,
  );
}

export interface LeafCert {
  /** PEM chain: the leaf, then the CA certificate. */
  readonly cert: string;
  /** PEM (PKCS#8) private key of the leaf; the same for every host of one cache. */
  readonly key: string;
}

export interface LeafCertCacheOptions {
  /** Maximum cached leaves (LRU). Default 1000. */
  max?: number;
  /** Clock override (tests). */
  now?: () => Date;
}

interface Entry {
  leaf: LeafCert;
  notAfter: number;
}

export class LeafCertCache {
  readonly max: number;
  /** PEM of the shared leaf private key. */
  readonly keyPem: string;
  readonly #ca: CA;
  readonly #spki: Uint8Array;
  readonly #now: () => Date;
  readonly #entries = new Map<string, Entry>();

  constructor(ca: CA, opts: LeafCertCacheOptions = {}) {
    const max = opts.max ?? 1000;
    if (!Number.isInteger(max) || max < 1) throw new Error(`LeafCertCache max must be a positive integer, got ${max}`);
    this.max = max;
    this.#ca = ca;
    this.#now = opts.now ?? (() => new Date());
    const { privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
    this.#spki = spkiOf(privateKey);
    this.keyPem = exportPkcs8(privateKey);
  }

  /** Number of cached leaves. */
  get size(): number {
    return this.#entries.size;
  }

  /** Whether a leaf for `host` is cached (does not touch LRU order). Throws on invalid hosts. */
  has(host: string): boolean {
    return this.#entries.has(cacheKey(normalizeCertHost(host)));
  }

  /**
   * Certificate chain and key for `host` (DNS name or IP literal), minted on
   * first use. Throws on an invalid host or an expired CA.
   */
  get(host: string): LeafCert {
    const h = normalizeCertHost(host);
    const k = cacheKey(h);
    const now = this.#now();
    const hit = this.#entries.get(k);
    this.#entries.delete(k);
    if (hit && hit.notAfter - now.getTime() > RENEW_BEFORE_MS) {
      this.#entries.set(k, hit);
      return hit.leaf;
    }
    const der = mintLeafCert(this.#ca, h, this.#spki, now);
    const notAfter = Math.min(now.getTime() + LEAF_MAX_DAYS_AHEAD * DAY_MS, this.#ca.notAfter.getTime());
    const leaf: LeafCert = Object.freeze({ cert: derToPem(der, "CERTIFICATE") + this.#ca.certPem, key: this.keyPem });
    this.#entries.set(k, { leaf, notAfter });
    while (this.#entries.size > this.max) {
      const oldest = this.#entries.keys().next().value;
      if (oldest === undefined) break;
      this.#entries.delete(oldest);
    }
    return leaf;
  }

  clear(): void {
    this.#entries.clear();
  }
}

function cacheKey(h: CertHost): string {
  return h.kind === "ip" ? `ip:${h.name}` : `dns:${h.name}`;
}

function exportPkcs8(key: KeyObject): string {
  return key.export({ type: "pkcs8", format: "pem" }).toString();
}
