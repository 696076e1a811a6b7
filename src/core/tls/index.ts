export { CA_CERT_FILE, CA_KEY_FILE, caFromPem, generateCA, loadOrCreateCA, loadOrCreateCASync } from "./ca.ts";
export type { CA, CAOptions } from "./ca.ts";
export { LeafCertCache, mintLeafCert, normalizeCertHost } from "./leaf.ts";
export type { CertHost, LeafCert, LeafCertCacheOptions } from "./leaf.ts";
export { MAX_CLIENT_HELLO, peekClientHello } from "./client-hello.ts";
export type { ClientHelloInfo } from "./client-hello.ts";
