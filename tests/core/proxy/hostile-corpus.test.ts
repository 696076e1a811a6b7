// Issue 21: the hostile-input corpus. Byte-level fixtures played over raw sockets against a running service; each
// asserts the status the proxy answers, that nothing of it reached the upstream (every fixture carries a marker,
// in its target and in any request an upstream could be tricked into seeing), and that the next client is served.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { startService } from "../../helpers/service.ts";
import { startFaultUpstream, type FaultUpstream } from "../../helpers/fault-upstream.ts";
import { parseResponses, rawExchange } from "../../helpers/raw-client.ts";

setDefaultTimeout(30_000);
let fault: FaultUpstream;
let svc: Awaited<ReturnType<typeof startService>>;
let H: string;
beforeAll(async () => {
  fault = await startFaultUpstream();
  H = `127.0.0.1:${fault.port}`;
  svc = await startService({ clientHeaderTimeoutSec: 2 });
});
afterAll(async () => {
  await svc?.stop();
  await fault?.stop();
});

/** A fixture: the bytes (built once the upstream's address is known) and the status the proxy must answer. */
interface Fixture {
  name: string;
  bytes: (m: string) => string;
  status: number;
}

const smuggled = (m: string) => `GET http://${H}/ok?smuggled-${m} HTTP/1.1\r\nHost: ${H}\r\n\r\n`;
const line = (m: string, method = "POST") => `${method} http://${H}/ok?${m} HTTP/1.1\r\nHost: ${H}\r\n`;

const FIXTURES: Fixture[] = [
  // request smuggling: ambiguous framing is refused, never guessed
  { name: "cl-te", status: 400, bytes: (m) => `${line(m)}Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${smuggled(m)}` },
  { name: "te-cl", status: 400, bytes: (m) => `${line(m)}Transfer-Encoding: chunked\r\nContent-Length: 6\r\n\r\n0\r\n\r\n${smuggled(m)}` },
  { name: "duplicate-cl", status: 400, bytes: (m) => `${line(m)}Content-Length: 5\r\nContent-Length: 50\r\n\r\nhello${smuggled(m)}` },
  { name: "cl-list", status: 400, bytes: (m) => `${line(m)}Content-Length: 5, 50\r\n\r\nhello${smuggled(m)}` },
  { name: "signed-cl-plus", status: 400, bytes: (m) => `${line(m)}Content-Length: +5\r\n\r\nhello${smuggled(m)}` },
  { name: "signed-cl-minus", status: 400, bytes: (m) => `${line(m)}Content-Length: -5\r\n\r\nhello${smuggled(m)}` },
  { name: "cl-hex", status: 400, bytes: (m) => `${line(m)}Content-Length: 0x5\r\n\r\nhello${smuggled(m)}` },
  { name: "te-xchunked", status: 400, bytes: (m) => `${line(m)}Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n${smuggled(m)}` },
  { name: "te-space-before-colon", status: 400, bytes: (m) => `${line(m)}Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n${smuggled(m)}` },
  { name: "te-chunked-identity", status: 400, bytes: (m) => `${line(m)}Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n${smuggled(m)}` },
  { name: "te-twice", status: 400, bytes: (m) => `${line(m)}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${smuggled(m)}` },
  { name: "te-http10", status: 400, bytes: (m) => `POST http://${H}/ok?${m} HTTP/1.0\r\nHost: ${H}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${smuggled(m)}` },
  { name: "te-obs-fold", status: 400, bytes: (m) => `${line(m)}Transfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n${smuggled(m)}` },
  { name: "obs-fold-header", status: 400, bytes: (m) => `${line(m, "GET")}X-A: a\r\n  folded\r\n\r\n` },
  { name: "bare-lf-in-head", status: 400, bytes: (m) => `GET http://${H}/ok?${m} HTTP/1.1\nHost: ${H}\n\n` },
  { name: "bare-cr-in-value", status: 400, bytes: (m) => `${line(m, "GET")}X-A: a\rb\r\n\r\n` },
  { name: "nul-in-value", status: 400, bytes: (m) => `${line(m, "GET")}X-A: a\u0000b\r\n\r\n` },
  { name: "huge-chunk-size", status: 400, bytes: (m) => `${line(m)}Transfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\nhello\r\n0\r\n\r\n` },
  { name: "chunk-size-garbage", status: 400, bytes: (m) => `${line(m)}Transfer-Encoding: chunked\r\n\r\n5x\r\nhello\r\n0\r\n\r\n${smuggled(m)}` },
  { name: "chunk-bare-lf", status: 400, bytes: (m) => `${line(m)}Transfer-Encoding: chunked\r\n\r\n5\nhello\n0\n\n${smuggled(m)}` },
  { name: "oversized-head", status: 431, bytes: (m) => `${line(m, "GET")}X-Big: ${"a".repeat(70 * 1024)}\r\n\r\n` },
  { name: "oversized-request-line", status: 431, bytes: (m) => `GET http://${H}/ok?${m}&${"a".repeat(70 * 1024)} HTTP/1.1\r\nHost: ${H}\r\n\r\n` },
  { name: "space-in-target", status: 400, bytes: (m) => `GET http://${H}/ok?${m} x HTTP/1.1\r\nHost: ${H}\r\n\r\n` },
  { name: "bad-version", status: 505, bytes: (m) => `GET http://${H}/ok?${m} HTTP/2.0\r\nHost: ${H}\r\n\r\n` },
  { name: "two-hosts", status: 400, bytes: (m) => `${line(m, "GET")}Host: evil.example\r\n\r\n` },
  // issue 21 findings as fixtures
  { name: "http11-no-host", status: 400, bytes: (m) => `GET http://${H}/ok?${m} HTTP/1.1\r\n\r\n` },
  { name: "origin-form-to-proxy", status: 400, bytes: (m) => `GET /ok?${m} HTTP/1.1\r\nHost: ${H}\r\n\r\n` },
  { name: "partial-head-then-silence", status: 408, bytes: (m) => `GET http://${H}/ok?${m} HTTP/1.1\r\nHost: ${H}\r\nX-Slow: aaa` },
  { name: "only-GET-space", status: 408, bytes: () => `GET ` },
  { name: "connect-inside-plain-connect", status: 400, bytes: (m) => `CONNECT ${H} HTTP/1.1\r\nHost: ${H}\r\n\r\nCONNECT ${H} HTTP/1.1\r\nHost: ${H}\r\nX-M: ${m}\r\n\r\n` },
];

async function stillServing(): Promise<void> {
  const r = await rawExchange(svc.proxyPort!, `GET http://${H}/ok?alive HTTP/1.1\r\nHost: ${H}\r\nConnection: close\r\n\r\n`, { timeoutMs: 10_000 });
  expect(parseResponses(r.text).map((x) => x.status)).toEqual([200]);
}

describe("hostile-input corpus", () => {
  for (const f of FIXTURES) {
    test(`${f.name}: ${f.status}, nothing reaches the upstream, the next client is served`, async () => {
      const marker = `corpus-${f.name}`;
      const r = await rawExchange(svc.proxyPort!, f.bytes(marker), { timeoutMs: 10_000 });
      expect(r.timedOut).toBe(false);
      // a CONNECT fixture gets its 200 (no body, no length) first
      const ok = "HTTP/1.1 200 Connection Established\r\n\r\n";
      const text = f.name.startsWith("connect") && r.text.startsWith(ok) ? r.text.slice(ok.length) : r.text;
      expect(parseResponses(text).map((x) => x.status)).toEqual([f.status]);
      expect(r.closedByServer).toBe(true);
      expect(fault.seen.filter((s) => s.head.includes(marker))).toEqual([]);
      await stillServing();
    });
  }
});
