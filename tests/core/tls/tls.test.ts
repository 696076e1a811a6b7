import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { X509Certificate, createHash, createPrivateKey, generateKeyPairSync } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import https from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import tls from "node:tls";
import { CA_CERT_FILE, CA_KEY_FILE, generateCA, loadOrCreateCA, type CA } from "../../../src/core/tls/ca.ts";
import { peekClientHello } from "../../../src/core/tls/client-hello.ts";
import { children, readOid, readTlv, type Tlv } from "../../../src/core/tls/der.ts";
import { LeafCertCache, normalizeCertHost } from "../../../src/core/tls/leaf.ts";

const DAY = 24 * 60 * 60 * 1000;
let root: string;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "tapwire-tls-test-"));
});
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

function freshDir(name: string): string {
  const d = join(root, name);
  mkdirSync(d, { recursive: true });
  return d;
}

/** First PEM certificate in a chain. */
function firstCert(chainPem: string): X509Certificate {
  const m = chainPem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----\n/);
  if (!m) throw new Error("no certificate in PEM");
  return new X509Certificate(m[0]);
}

/** Map extension OID -> { critical, value (extnValue contents) } read straight from the DER. */
function extensionsOf(der: Uint8Array): Map<string, { critical: boolean; value: Uint8Array }> {
  const cert = readTlv(der, 0);
  const tbs = children(der, cert)[0];
  const extsWrapper = children(der, tbs).find((t: Tlv) => t.tag === 0xa3);
  const out = new Map<string, { critical: boolean; value: Uint8Array }>();
  if (!extsWrapper) return out;
  const exts = children(der, extsWrapper)[0];
  for (const e of children(der, exts)) {
    const parts = children(der, e);
    const critical = parts.length === 3 && der[parts[1].contentStart] === 0xff;
    const v = parts[parts.length - 1];
    out.set(readOid(der, parts[0]), { critical, value: der.slice(v.contentStart, v.end) });
  }
  return out;
}

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");

describe("CA", () => {
  test("first start creates ca.pem (0644) and ca-key.pem (0600), nothing else", async () => {
    const dir = freshDir("create");
    const ca = await loadOrCreateCA(dir);
    expect(ca.created).toBe(true);
    expect(readdirSync(dir).sort()).toEqual([CA_CERT_FILE, CA_KEY_FILE].sort());
    expect(statSync(join(dir, CA_KEY_FILE)).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, CA_CERT_FILE)).mode & 0o777).toBe(0o644);
    expect(readFileSync(join(dir, CA_CERT_FILE), "utf8")).toBe(ca.certPem);
    // The key on disk is the CA's key.
    const diskKey = createPrivateKey(readFileSync(join(dir, CA_KEY_FILE), "utf8"));
    expect(new X509Certificate(ca.certPem).checkPrivateKey(diskKey)).toBe(true);
  });

  test("certificate: subject, CA flag, validity, extensions, self-signature", async () => {
    const before = Date.now();
    const ca = await loadOrCreateCA(freshDir("fields"));
    const x = new X509Certificate(ca.certPem);
    const subject = x.subject.split("\n");
    expect(subject).toContain("CN=tapwire CA");
    expect(subject).toContain("O=tapwire");
    expect(subject.find((l) => l.startsWith("OU="))).toMatch(/^OU=tapwire MITM proxy \(local\\?, generated \d{4}-\d\d-\d\d/);
    expect(x.issuer).toBe(x.subject);
    expect(x.ca).toBe(true);
    expect(x.verify(x.publicKey)).toBe(true);
    expect(Buffer.from(x.raw).equals(Buffer.from(ca.certDer))).toBe(true);

    const from = new Date(x.validFrom).getTime();
    const to = new Date(x.validTo).getTime();
    // notBefore one day back (second precision), notAfter ten calendar years ahead.
    expect(Math.abs(from - (before - DAY))).toBeLessThan(5_000);
    const tenYears = new Date(before);
    tenYears.setUTCFullYear(tenYears.getUTCFullYear() + 10);
    expect(Math.abs(to - tenYears.getTime())).toBeLessThan(5_000);
    expect(ca.notAfter.getTime()).toBe(to);

    // Serial: 16 bytes, positive.
    expect(x.serialNumber).toMatch(/^[0-7][0-9A-F]{31}$/i);

    const ext = extensionsOf(ca.certDer);
    const bc = ext.get("2.5.29.19");
    expect(bc?.critical).toBe(true);
    expect(hex(bc!.value)).toBe("30060101ff020100"); // cA TRUE, pathLen 0
    const ku = ext.get("2.5.29.15");
    expect(ku?.critical).toBe(true);
    expect(hex(ku!.value)).toBe("03020106"); // keyCertSign | cRLSign
    const ski = ext.get("2.5.29.14");
    expect(ski).toBeDefined();
    const spki = x.publicKey.export({ type: "spki", format: "der" });
    const pubBits = spki.subarray(spki.length - 65); // uncompressed P-256 point
    expect(hex(ski!.value)).toBe("0414" + createHash("sha1").update(pubBits).digest("hex"));
    expect(hex(ca.keyId)).toBe(createHash("sha1").update(pubBits).digest("hex"));
  });

  test("second start loads the same CA", async () => {
    const dir = freshDir("reload");
    const a = await loadOrCreateCA(dir);
    const b = await loadOrCreateCA(dir);
    expect(b.created).toBe(false);
    expect(b.certPem).toBe(a.certPem);
    expect(b.key.export({ type: "pkcs8", format: "pem" })).toBe(a.key.export({ type: "pkcs8", format: "pem" }));
    expect(hex(b.keyId)).toBe(hex(a.keyId));
    expect(hex(b.subjectName)).toBe(hex(a.subjectName));
  });

  test("corrupt key file -> error naming ca-key.pem, files untouched", async () => {
    const dir = freshDir("corrupt-key");
    await loadOrCreateCA(dir);
    const certBefore = readFileSync(join(dir, CA_CERT_FILE), "utf8");
    writeFileSync(join(dir, CA_KEY_FILE), "-----BEGIN PRIVATE KEY-----\nnot base64 at all!!\n-----END PRIVATE KEY-----\n");
    const keyBefore = readFileSync(join(dir, CA_KEY_FILE), "utf8");
    await expect(loadOrCreateCA(dir)).rejects.toThrow(/CA private key .*ca-key\.pem is not a valid/);
    expect(readFileSync(join(dir, CA_CERT_FILE), "utf8")).toBe(certBefore);
    expect(readFileSync(join(dir, CA_KEY_FILE), "utf8")).toBe(keyBefore);
  });

  test("corrupt certificate file -> error naming ca.pem", async () => {
    const dir = freshDir("corrupt-cert");
    await loadOrCreateCA(dir);
    writeFileSync(join(dir, CA_CERT_FILE), "garbage\n");
    await expect(loadOrCreateCA(dir)).rejects.toThrow(/CA certificate .*ca\.pem is not a valid PEM certificate/);
  });

  test("key that does not match the certificate -> error naming both files", async () => {
    const dir = freshDir("mismatch");
    await loadOrCreateCA(dir);
    const otherKey = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey;
    writeFileSync(join(dir, CA_KEY_FILE), otherKey.export({ type: "pkcs8", format: "pem" }));
    await expect(loadOrCreateCA(dir)).rejects.toThrow(/ca-key\.pem does not match CA certificate .*ca\.pem/);
  });

  test("only one of the two files present -> error, nothing regenerated", async () => {
    const a = freshDir("only-cert");
    await loadOrCreateCA(a);
    rmSync(join(a, CA_KEY_FILE));
    await expect(loadOrCreateCA(a)).rejects.toThrow(/ca-key\.pem is missing/);
    expect(readdirSync(a)).toEqual([CA_CERT_FILE]);

    const b = freshDir("only-key");
    await loadOrCreateCA(b);
    rmSync(join(b, CA_CERT_FILE));
    await expect(loadOrCreateCA(b)).rejects.toThrow(/ca\.pem is missing/);
    expect(readdirSync(b)).toEqual([CA_KEY_FILE]);
  });

  test("key path that is not a regular file -> error naming it", async () => {
    const dir = freshDir("key-is-dir");
    await loadOrCreateCA(dir);
    rmSync(join(dir, CA_KEY_FILE));
    mkdirSync(join(dir, CA_KEY_FILE));
    await expect(loadOrCreateCA(dir)).rejects.toThrow(/ca-key\.pem is not a regular file/);
  });

  test("a non-CA certificate in ca.pem is rejected", async () => {
    const dir = freshDir("not-ca");
    const ca = await loadOrCreateCA(dir);
    const leaf = new LeafCertCache(ca).get("example.test");
    writeFileSync(join(dir, CA_CERT_FILE), firstCert(leaf.cert).toString());
    writeFileSync(join(dir, CA_KEY_FILE), leaf.key);
    await expect(loadOrCreateCA(dir)).rejects.toThrow(/ca\.pem is not a CA certificate/);
  });

  test("an expired CA is reported, not used", async () => {
    const dir = freshDir("expired");
    await loadOrCreateCA(dir);
    await expect(loadOrCreateCA(dir, { now: new Date(Date.now() + 11 * 366 * DAY) })).rejects.toThrow(/ca\.pem expired on/);
  });

  test("creates a missing data directory", async () => {
    const dir = join(root, "nested", "deeper", "data");
    const ca = await loadOrCreateCA(dir);
    expect(ca.created).toBe(true);
    expect(statSync(join(dir, CA_KEY_FILE)).isFile()).toBe(true);
  });

  test("RSA-2048 CA option also issues verifiable leaves", () => {
    const ca = generateCA({ keyType: "rsa" });
    const x = new X509Certificate(ca.certPem);
    expect(x.publicKey.asymmetricKeyType).toBe("rsa");
    expect(x.verify(x.publicKey)).toBe(true);
    const leaf = firstCert(new LeafCertCache(ca).get("rsa.example").cert);
    expect(leaf.checkIssued(x)).toBe(true);
    expect(leaf.verify(x.publicKey)).toBe(true);
  });

});

describe("leaf certificates", () => {
  let ca: CA;
  let otherCa: CA;
  let leaves: LeafCertCache;
  beforeAll(async () => {
    ca = await loadOrCreateCA(freshDir("leaf-ca"));
    otherCa = generateCA();
    leaves = new LeafCertCache(ca);
  });

  test("fields: SAN, CN, issuer, validity, extensions, chain = leaf + CA", () => {
    const caX = new X509Certificate(ca.certPem);
    const cases: Array<[string, string]> = [
      ["localhost", "DNS:localhost"],
      ["127.0.0.1", "IP Address:127.0.0.1"],
      ["::1", "IP Address:0:0:0:0:0:0:0:1"],
    ];
    for (const [host, san] of cases) {
      const now = Date.now();
      const { cert, key } = leaves.get(host);
      const blocks = cert.match(/-----BEGIN CERTIFICATE-----/g) ?? [];
      expect(blocks.length).toBe(2);
      expect(cert.endsWith(ca.certPem)).toBe(true);
      const x = firstCert(cert);
      expect(x.subjectAltName).toBe(san);
      expect(x.subject).toBe(`CN=${host}`);
      expect(x.issuer).toBe(caX.subject);
      expect(x.ca).toBe(false);
      expect(x.checkIssued(caX)).toBe(true);
      expect(x.verify(caX.publicKey)).toBe(true);
      expect(x.checkPrivateKey(createPrivateKey(key))).toBe(true);
      expect(x.publicKey.asymmetricKeyDetails?.namedCurve).toBe("prime256v1");
      if (host === "localhost") expect(x.checkHost("localhost")).toBe("localhost");
      else expect(x.checkIP(host)).toBe(host);
      const from = new Date(x.validFrom).getTime();
      const to = new Date(x.validTo).getTime();
      expect(Math.abs(from - (now - DAY))).toBeLessThan(5_000);
      expect(Math.abs(to - (now + 397 * DAY))).toBeLessThan(5_000);
      expect(to - from).toBeLessThanOrEqual(398 * DAY);

      const ext = extensionsOf(new Uint8Array(x.raw));
      expect(ext.get("2.5.29.19")).toEqual({ critical: true, value: Uint8Array.of(0x30, 0x00) }); // CA:FALSE
      expect(hex(ext.get("2.5.29.15")!.value)).toBe("03020780"); // digitalSignature
      expect(ext.get("2.5.29.15")!.critical).toBe(true);
      expect(hex(ext.get("2.5.29.37")!.value)).toBe("300a06082b06010505070301"); // serverAuth
      expect(hex(ext.get("2.5.29.35")!.value)).toBe("30168014" + hex(ca.keyId)); // AKI keyIdentifier = CA SKI
    }
  });

  test("all leaves share one key; serials differ", () => {
    const a = leaves.get("a.example");
    const b = leaves.get("b.example");
    expect(a.key).toBe(b.key);
    expect(a.key).toBe(leaves.keyPem);
    expect(firstCert(a.cert).serialNumber).not.toBe(firstCert(b.cert).serialNumber);
  });

  test("notAfter is capped at the CA's notAfter", () => {
    // A CA generated almost ten years ago expires in ~100 days.
    const old = generateCA({ now: new Date(Date.now() - (10 * 365 + 2) * DAY + 100 * DAY) });
    const leaf = firstCert(new LeafCertCache(old).get("capped.example").cert);
    expect(new Date(leaf.validTo).getTime()).toBe(old.notAfter.getTime());
    expect(old.notAfter.getTime() - Date.now()).toBeLessThan(120 * DAY);
  });

  test("host normalisation: case, trailing dot, brackets, IPv6 spellings, IDN", () => {
    expect(leaves.get("LocalHost.")).toBe(leaves.get("localhost"));
    expect(leaves.get("[::1]")).toBe(leaves.get("::1"));
    expect(leaves.get("0:0:0:0:0:0:0:1")).toBe(leaves.get("::1"));
    expect(normalizeCertHost("2001:DB8:0:0:1:0:0:1")).toMatchObject({ kind: "ip", name: "2001:db8::1:0:0:1" });
    expect(normalizeCertHost("::ffff:192.0.2.1")).toMatchObject({ kind: "ip", name: "::ffff:c000:201" });
    expect(normalizeCertHost("fe80::1%eth0")).toMatchObject({ kind: "ip", name: "fe80::1" });
    expect(normalizeCertHost("Bücher.example")).toEqual({ kind: "dns", name: "xn--bcher-kva.example" });
    expect(firstCert(leaves.get("Bücher.example").cert).subjectAltName).toBe("DNS:xn--bcher-kva.example");
    for (const bad of ["", " ", "a b.example", "exa/mple", "-lead.example", "a..b", "x".repeat(64) + ".example"]) {
      expect(() => leaves.get(bad)).toThrow(/invalid host name/);
    }
  });

  test("hosts longer than 64 chars go in a critical SAN with an empty subject", () => {
    const long = `${"a".repeat(60)}.${"b".repeat(60)}.example`;
    const x = firstCert(leaves.get(long).cert);
    expect(x.subject ?? "").toBe(""); // Bun reports an empty subject as undefined
    expect(x.subjectAltName).toBe(`DNS:${long}`);
    expect(extensionsOf(new Uint8Array(x.raw)).get("2.5.29.17")!.critical).toBe(true);
    expect(x.checkHost(long)).toBe(long);
  });

  test("LRU eviction past max", () => {
    const c = new LeafCertCache(ca, { max: 2 });
    const a1 = c.get("a.test");
    const b1 = c.get("b.test");
    expect(c.get("a.test")).toBe(a1); // hit, now most recent
    c.get("c.test"); // evicts b (least recently used)
    expect(c.size).toBe(2);
    expect(c.has("a.test")).toBe(true);
    expect(c.has("b.test")).toBe(false);
    expect(c.has("c.test")).toBe(true);
    const b2 = c.get("b.test"); // re-minted, evicts a
    expect(b2).not.toBe(b1);
    expect(firstCert(b2.cert).serialNumber).not.toBe(firstCert(b1.cert).serialNumber);
    expect(c.has("a.test")).toBe(false);
    expect(() => new LeafCertCache(ca, { max: 0 })).toThrow(/positive integer/);
  });

  test("a cached leaf near expiry is re-minted", () => {
    let now = Date.now();
    const c = new LeafCertCache(ca, { now: () => new Date(now) });
    const first = c.get("renew.test");
    now += 300 * DAY;
    expect(c.get("renew.test")).toBe(first);
    now += 97 * DAY; // within a day of notAfter
    const second = c.get("renew.test");
    expect(second).not.toBe(first);
    expect(new Date(firstCert(second.cert).validTo).getTime()).toBeGreaterThan(now + 390 * DAY);
  });

  test("minting is fast (shared key, signing only)", () => {
    const c = new LeafCertCache(ca, { max: 10_000 });
    c.get("warmup.test");
    const n = 300;
    const t0 = performance.now();
    for (let i = 0; i < n; i++) c.get(`host-${i}.speed.test`);
    const perHost = (performance.now() - t0) / n;
    console.log(`leaf mint: ${perHost.toFixed(3)} ms/host (EC P-256 CA)`);
    expect(perHost).toBeLessThan(5);
  });

  async function serveWith(host: string, listen: string) {
    const { cert, key } = leaves.get(host);
    return Bun.serve({ port: 0, hostname: listen, tls: { cert, key }, fetch: () => new Response(`hello ${host}`) });
  }

  function httpsGet(url: string, opts: https.RequestOptions): Promise<{ status?: number; body: string }> {
    return new Promise((resolve, reject) => {
      const req = https.get(url, { ...opts, agent: false }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode, body }));
        res.on("error", reject);
      });
      req.on("error", reject);
    });
  }

  const endpoints: Array<[host: string, listen: string, urlHost: string]> = [
    ["localhost", "127.0.0.1", "localhost"],
    ["127.0.0.1", "127.0.0.1", "127.0.0.1"],
    ["::1", "::1", "[::1]"],
  ];
  for (const [host, listen, urlHost] of endpoints) {
    test(`real TLS server with the ${host} leaf: fetch and node:https verify it`, async () => {
      const server = await serveWith(host, listen);
      try {
        const url = `https://${urlHost}:${server.port}/`;
        const res = await fetch(url, { tls: { ca: ca.certPem, rejectUnauthorized: true } });
        expect(res.status).toBe(200);
        expect(await res.text()).toBe(`hello ${host}`);

        const viaNode = await httpsGet(url, { ca: ca.certPem, rejectUnauthorized: true });
        expect(viaNode).toEqual({ status: 200, body: `hello ${host}` });

        // A client trusting a different CA must refuse the chain.
        await expect(fetch(url, { tls: { ca: otherCa.certPem, rejectUnauthorized: true } })).rejects.toThrow();
        await expect(httpsGet(url, { ca: otherCa.certPem, rejectUnauthorized: true })).rejects.toThrow(
          /self.signed|unable to (get|verify)|certificate/i,
        );
      } finally {
        server.stop(true);
      }
    });
  }

  test("a leaf for another name fails hostname verification", async () => {
    const server = await serveWith("other.example", "127.0.0.1");
    try {
      const url = `https://127.0.0.1:${server.port}/`;
      await expect(fetch(url, { tls: { ca: ca.certPem, rejectUnauthorized: true } })).rejects.toThrow();
      await expect(httpsGet(url, { ca: ca.certPem, rejectUnauthorized: true })).rejects.toThrow(/IP|altnames|match/i);
      // Same server is fine when the client asks for the right name.
      const ok = await httpsGet(url, { ca: ca.certPem, servername: "other.example", rejectUnauthorized: true });
      expect(ok.status).toBe(200);
    } finally {
      server.stop(true);
    }
  });
});

describe("peekClientHello", () => {
  /** Capture the first TLS record(s) a real client sends. */
  async function captureHello(opts: tls.ConnectionOptions): Promise<Uint8Array> {
    let received = new Uint8Array(0);
    let resolveHello!: (b: Uint8Array) => void;
    const got = new Promise<Uint8Array>((r) => (resolveHello = r));
    const server = Bun.listen({
      hostname: "127.0.0.1",
      port: 0,
      socket: {
        data(_sock, d) {
          const next = new Uint8Array(received.length + d.length);
          next.set(received);
          next.set(d, received.length);
          received = next;
          // Complete when the handshake records cover the 4-byte header's length
          // (computed here independently of the parser under test).
          let p = 0;
          let hs = 0;
          let need = -1;
          while (p + 5 <= received.length && received[p] === 0x16) {
            const len = (received[p + 3] << 8) | received[p + 4];
            if (p + 5 + len > received.length) return;
            if (need < 0) need = 4 + ((received[p + 6] << 16) | (received[p + 7] << 8) | received[p + 8]);
            hs += len;
            p += 5 + len;
            if (hs >= need) {
              resolveHello(received.slice(0, p));
              return;
            }
          }
        },
      },
    });
    const client = tls.connect({ host: "127.0.0.1", port: server.port, ...opts });
    client.on("error", () => {}); // the server never answers; the client is torn down below
    try {
      return await got;
    } finally {
      client.destroy();
      server.stop(true);
    }
  }

  let hello: Uint8Array;
  beforeAll(async () => {
    hello = await captureHello({ servername: "example.test", ALPNProtocols: ["h2", "http/1.1"] });
  });

  test("real ClientHello: sni and alpn", () => {
    expect(hello[0]).toBe(0x16);
    expect(peekClientHello(hello)).toEqual({ tls: true, complete: true, sni: "example.test", alpn: ["h2", "http/1.1"] });
    // Bytes after the hello (e.g. early data) do not matter.
    const extra = new Uint8Array(hello.length + 7);
    extra.set(hello);
    extra.set([0x17, 0x03, 0x03, 0x00, 0x02, 0xaa, 0xbb], hello.length);
    expect(peekClientHello(extra)).toEqual({ tls: true, complete: true, sni: "example.test", alpn: ["h2", "http/1.1"] });
  });

  test("every proper prefix is incomplete, but still possibly TLS", () => {
    for (let i = 0; i < hello.length; i++) {
      const r = peekClientHello(hello.subarray(0, i));
      if (r.complete || !r.tls) throw new Error(`prefix ${i}/${hello.length}: ${JSON.stringify(r)}`);
    }
  });

  /** Re-frame the handshake message into records of at most `size` bytes. */
  function reframe(rec: Uint8Array, size: number): Uint8Array {
    const body = rec.subarray(5, 5 + ((rec[3] << 8) | rec[4]));
    const parts: number[] = [];
    for (let o = 0; o < body.length; o += size) {
      const chunk = body.subarray(o, Math.min(o + size, body.length));
      parts.push(0x16, rec[1], rec[2], chunk.length >> 8, chunk.length & 0xff, ...chunk);
    }
    return Uint8Array.from(parts);
  }

  test("a ClientHello spread over several records", () => {
    expect(5 + ((hello[3] << 8) | hello[4])).toBe(hello.length); // the captured hello is one record
    for (const size of [1, 3, 100, 256]) {
      const multi = reframe(hello, size);
      expect(peekClientHello(multi)).toEqual({ tls: true, complete: true, sni: "example.test", alpn: ["h2", "http/1.1"] });
      for (let i = 0; i < multi.length; i += size === 1 ? 7 : 1) {
        const r = peekClientHello(multi.subarray(0, i));
        if (r.complete || !r.tls) throw new Error(`size ${size} prefix ${i}: ${JSON.stringify(r)}`);
      }
    }
  });

  test("hello without SNI (IP target) and without ALPN", async () => {
    const bare = await captureHello({});
    const r = peekClientHello(bare);
    expect(r.tls).toBe(true);
    expect(r.complete).toBe(true);
    expect(r.sni).toBeUndefined();
    expect(r.alpn).toBeUndefined();
    expect(r.error).toBeUndefined();
  });

  test("plain HTTP and other non-TLS bytes give tls=false", () => {
    const enc = new TextEncoder();
    for (const s of ["GET / HTTP/1.1\r\nHost: x\r\n\r\n", "CONNECT example.test:443 HTTP/1.1\r\n\r\n", "G", "PRI * HTTP/2.0\r\n"]) {
      expect(peekClientHello(enc.encode(s))).toEqual({ tls: false, complete: true });
    }
    expect(peekClientHello(Uint8Array.of(0x16, 0x02))).toEqual({ tls: false, complete: true }); // bad major
    expect(peekClientHello(Uint8Array.of(0x16, 0x03, 0x09))).toEqual({ tls: false, complete: true }); // bad minor
    expect(peekClientHello(Uint8Array.of(0x80, 0x2e, 0x01))).toMatchObject({ tls: false }); // SSLv2 framing
    expect(peekClientHello(new Uint8Array(0))).toEqual({ tls: true, complete: false });
  });

  test("TLS-looking but malformed streams are complete with an error", () => {
    const serverHello = hello.slice();
    serverHello[5] = 0x02;
    expect(peekClientHello(serverHello)).toMatchObject({ tls: true, complete: true, error: expect.stringContaining("not ClientHello") });
    expect(peekClientHello(Uint8Array.of(0x16, 0x03, 0x01, 0x00, 0x00))).toMatchObject({ tls: true, complete: true, error: expect.any(String) });
    expect(peekClientHello(Uint8Array.of(0x16, 0x03, 0x01, 0x48, 0x01, 0x01))).toMatchObject({ complete: true, error: expect.any(String) });
    const huge = Uint8Array.of(0x16, 0x03, 0x01, 0x00, 0x04, 0x01, 0xff, 0xff, 0xff);
    expect(peekClientHello(huge)).toMatchObject({ complete: true, error: expect.stringContaining("too large") });
    // A body whose internal lengths overrun the message.
    const bad = hello.slice();
    bad[5 + 4 + 34] = 0xff; // session id length 255
    expect(peekClientHello(bad)).toMatchObject({ tls: true, complete: true, error: expect.any(String) });
    // An alert record in the middle of a fragmented hello.
    const multi = reframe(hello, 100);
    multi[105] = 0x15;
    expect(peekClientHello(multi)).toMatchObject({ complete: true, error: expect.stringContaining("non-handshake") });
  });

  test("random garbage and mutated hellos never throw", () => {
    let seed = 0x2545f491;
    const rnd = () => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const check = (b: Uint8Array) => {
      const r = peekClientHello(b);
      if (typeof r.tls !== "boolean" || typeof r.complete !== "boolean") throw new Error("bad result shape");
      if (r.sni !== undefined && typeof r.sni !== "string") throw new Error("bad sni");
    };
    for (let i = 0; i < 3000; i++) {
      const b = new Uint8Array(Math.floor(rnd() * 600));
      for (let j = 0; j < b.length; j++) b[j] = Math.floor(rnd() * 256);
      if (i % 2 === 0 && b.length >= 3) b.set([0x16, 0x03, Math.floor(rnd() * 5)]);
      check(b);
    }
    for (let i = 0; i < 3000; i++) {
      const b = (i % 3 === 0 ? reframe(hello, 1 + Math.floor(rnd() * 300)) : hello).slice();
      const flips = 1 + Math.floor(rnd() * 8);
      for (let k = 0; k < flips; k++) b[Math.floor(rnd() * b.length)] = Math.floor(rnd() * 256);
      check(b.subarray(0, Math.floor(rnd() * (b.length + 1))));
      check(b);
    }
  });
});
