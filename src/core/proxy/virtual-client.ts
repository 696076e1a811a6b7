import type { Socket } from "bun";
import { ChunkedDecoder, LengthDecoder, parseResponseHead, responseFraming } from "../http1/parse.ts";
import { serializeRequestHead } from "../http1/serialize.ts";
import type { HeaderList } from "../http1/types.ts";
import { hostPort, type ClientInfo, type Scheme } from "../../pipeline/flow.ts";
import type { ProxyContext } from "./context.ts";
import { concatAll, concatBytes } from "./endpoint.ts";
import { clientSocketHandlers, HttpSession } from "./http-session.ts";

export interface VirtualRequest {
  method: string;
  scheme: Scheme;
  host: string;
  port: number;
  path: string;
  headers: HeaderList;
  body: Uint8Array | null;
}

export interface VirtualResponse {
  status: number;
  reason: string;
  headers: HeaderList;
  body: Uint8Array;
}

/**
 * An in-process client connection: feeds one request into an HttpSession as if it had arrived on a socket
 * (origin-form, on a connection whose target is the request's scheme/host/port), so replay and compose go
 * through exactly the same pipeline, upstream pool and capture as real traffic — without a loopback socket
 * or a TLS hop to ourselves. Responses are parsed with the same codec.
 *
 * `signal` aborts the exchange: the promise rejects with the signal's reason (an Error) and the virtual connection
 * closes, which drops the upstream connection of a request still in flight.
 */
export function sendVirtual(ctx: ProxyContext, req: VirtualRequest, client: ClientInfo, timeoutMs = 120_000, signal?: AbortSignal): Promise<VirtualResponse> {
  return new Promise<VirtualResponse>((resolve, reject) => {
    const abortReason = () => (signal?.reason instanceof Error ? signal.reason : new Error("the request was aborted"));
    if (signal?.aborted) return reject(abortReason());
    let buf: Uint8Array = new Uint8Array(0);
    let head: { status: number; reason: string; headers: HeaderList } | null = null;
    let decoder: ChunkedDecoder | LengthDecoder | null = null;
    let untilClose = false;
    const parts: Uint8Array[] = [];
    let settled = false;
    const finish = (err?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      if (err) reject(err);
      else resolve({ ...head!, body: concatAll(parts) });
      queueMicrotask(() => {
        if (session) clientSocketHandlers.close(fake);
      });
    };
    const timer = setTimeout(() => finish(new Error(`no response within ${timeoutMs / 1000} s`)), timeoutMs);
    const onAbort = () => finish(abortReason());
    signal?.addEventListener("abort", onAbort, { once: true });
    const onBytes = (d: Uint8Array) => {
      if (settled) return;
      if (!head) {
        buf = concatBytes(buf, d);
        const p = parseResponseHead(buf);
        if (!p) return;
        if (p.head.status >= 100 && p.head.status < 200) {
          buf = buf.slice(p.end);
          if (buf.length) onBytes(new Uint8Array(0));
          return;
        }
        head = { status: p.head.status, reason: p.head.reason, headers: p.head.headers };
        const f = responseFraming(req.method, p.head);
        if (f.kind === "none" || (f.kind === "length" && f.length === 0)) return finish();
        decoder = f.kind === "chunked" ? new ChunkedDecoder() : f.kind === "length" ? new LengthDecoder(f.length) : null;
        untilClose = f.kind === "close";
        const rest = buf.slice(p.end);
        buf = new Uint8Array(0);
        if (rest.length) onBytes(rest);
        return;
      }
      if (untilClose) {
        parts.push(d.slice());
        return;
      }
      const out = decoder!.push(d);
      for (const x of out.data) parts.push(x.slice());
      if (out.done) finish();
    };
    const fake = {
      data: undefined as unknown as HttpSession,
      write(d: Uint8Array | string) {
        const bytes = typeof d === "string" ? new TextEncoder().encode(d) : d;
        onBytes(bytes);
        return bytes.length;
      },
      end() {
        if (!settled) {
          if (head && untilClose) finish();
          else finish(new Error("the proxy closed the connection without a complete response"));
        }
      },
      terminate() {
        fake.end();
      },
      pause() {},
      resume() {},
      timeout() {},
      setNoDelay() {},
    } as unknown as Socket<HttpSession>;
    const session: HttpSession = new HttpSession(ctx, fake, client, { scheme: req.scheme, host: req.host, port: req.port });
    let bytes: Uint8Array;
    try {
      const headers = req.headers.filter(([n]) => !/^(content-length|transfer-encoding)$/i.test(n));
      // the session refuses an HTTP/1.1 request without Host: a replayed or composed one gets its target's
      if (!headers.some(([n]) => n.toLowerCase() === "host")) headers.unshift(["Host", hostPort(req.scheme, req.host, req.port)]);
      if (req.body && req.body.length) headers.push(["Content-Length", String(req.body.length)]);
      bytes = serializeRequestHead({ method: req.method, target: req.path, version: "HTTP/1.1", headers });
      if (req.body && req.body.length) bytes = concatBytes(bytes, req.body);
    } catch (e) {
      return finish(e as Error);
    }
    session.onClientData(bytes);
  });
}
