/**
 * Minimal repro of two Bun 1.4.5 node:http2 client behaviours that differ from Node and that tapwire worked around
 * while its origin side was on node:http2 (before i22-wire: tapwire now frames HTTP/2 itself). They show when the session reads its socket through
 * JavaScript (a socket without a native handle, as tapwire's batching Duplex), because HEADERS, DATA and
 * END_STREAM of a small response are then parsed in one go, before a promise continuation runs.
 *
 *   1. stream.endAfterHeaders, read later than the 'response' event, reflects the stream's state by now: false
 *      for a head-only (trailers-only) response once the stream has closed (shown here); through the proxy over
 *      TLS, true for a response whose body was still buffered. Node: whether the HEADERS frame ended the stream.
 *   2. finished() / for await on such a stream rejects with "Premature close" although 'close' has not been
 *      emitted and the body is still buffered (stream.closed, the HTTP/2 state, is true). Node reads the body.
 *
 * Usage: bun bench/bun-h2-quirks.ts
 */
import http2 from "node:http2";
import net from "node:net";
import { Duplex } from "node:stream";

const srv = http2.createServer();
srv.on("stream", (s: http2.ServerHttp2Stream, h) => {
  if (h[":path"] === "/head-only") return s.respond({ ":status": 204 }, { endStream: true });
  s.respond({ ":status": 200 });
  s.end("hello world");
});
await new Promise<void>((r) => srv.listen(0, "127.0.0.1", () => r()));
const port = (srv.address() as net.AddressInfo).port;

async function session(viaDuplex: boolean): Promise<http2.ClientHttp2Session> {
  const sock = net.connect(port, "127.0.0.1");
  await new Promise((r) => sock.once("connect", r));
  if (!viaDuplex) return http2.connect(`http://127.0.0.1:${port}`, { createConnection: () => sock });
  const d = new Duplex({ read: () => void sock.resume(), write: (c, _e, cb) => void sock.write(c, cb), final: (cb) => (sock.end(), cb()) });
  sock.on("data", (b) => d.push(b) || sock.pause());
  sock.on("end", () => d.push(null));
  return http2.connect(`http://127.0.0.1:${port}`, { createConnection: () => d });
}

async function probe(s: http2.ClientHttp2Session, path: string): Promise<string> {
  const req = s.request({ ":path": path }, { endStream: true });
  let atEvent = false;
  await new Promise<void>((r) => req.once("response", () => ((atEvent = req.endAfterHeaders), r())));
  const later = req.endAfterHeaders;
  let body = "";
  try {
    for await (const c of req) body += c;
  } catch (e) {
    body = `ERROR ${(e as Error).message}`;
  }
  return `${path.padEnd(10)} endAfterHeaders at 'response': ${atEvent}, in the continuation: ${later}; for await: ${JSON.stringify(body)}`;
}

for (const viaDuplex of [false, true]) {
  const s = await session(viaDuplex);
  console.log(viaDuplex ? "socket through a Duplex:" : "net.Socket:");
  for (const p of ["/body", "/head-only"]) console.log("  " + (await probe(s, p)));
  s.close();
}
srv.close();
