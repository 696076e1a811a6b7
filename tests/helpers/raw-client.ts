import net from "node:net";

/**
 * A raw TCP client for byte-level fixtures: writes the given parts in order (each part may wait for a predicate
 * on what has arrived so far, or for a delay, before it is written), collects everything the server sends, and
 * settles when the server closes, `until` holds, or the deadline passes (never hangs a test).
 */
export type Part = string | Uint8Array | { write?: string | Uint8Array; waitFor?: (text: string) => boolean; afterMs?: number; end?: boolean };

export interface RawResult {
  text: string;
  bytes: Buffer;
  /** The server ended or closed the connection. */
  closedByServer: boolean;
  timedOut: boolean;
  /** ms from connect to settle. */
  ms: number;
  error: string | null;
}

export function rawExchange(port: number, parts: Part[] | Part, opts: { until?: (text: string) => boolean; timeoutMs?: number; host?: string } = {}): Promise<RawResult> {
  const list = Array.isArray(parts) ? parts : [parts];
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let text = "";
    let settled = false;
    let closedByServer = false;
    let error: string | null = null;
    let waiter: (() => void) | null = null;
    const t0 = performance.now();
    const sock = net.connect(port, opts.host ?? "127.0.0.1");
    sock.setNoDelay(true);
    const finish = (timedOut: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      const bytes = Buffer.concat(chunks);
      resolve({ text: bytes.toString("latin1"), bytes, closedByServer, timedOut, ms: performance.now() - t0, error });
    };
    const timer = setTimeout(() => finish(true), opts.timeoutMs ?? 10_000);
    sock.on("data", (d: Buffer) => {
      chunks.push(d);
      text += d.toString("latin1");
      if (opts.until?.(text)) return finish(false);
      waiter?.();
    });
    sock.on("end", () => {
      closedByServer = true;
      finish(false);
    });
    sock.on("close", () => {
      if (!settled) closedByServer = true;
      finish(false);
    });
    sock.on("error", (e) => {
      error = e.message;
    });
    sock.on("connect", async () => {
      for (const p of list) {
        if (settled) return;
        const step = typeof p === "string" || p instanceof Uint8Array ? { write: p } : p;
        if (step.afterMs) await new Promise((r) => setTimeout(r, step.afterMs));
        if (step.waitFor) {
          const pred = step.waitFor;
          while (!settled && !pred(text)) await new Promise<void>((r) => (waiter = r));
          waiter = null;
        }
        if (settled) return;
        if (step.write !== undefined) sock.write(typeof step.write === "string" ? Buffer.from(step.write, "latin1") : step.write);
        if (step.end) sock.end();
      }
    });
  });
}

export interface RawResponse {
  status: number;
  headers: [string, string][];
  body: string;
}

/** Complete HTTP/1.1 responses (Content-Length, chunked or bodiless) in a byte stream, in order. */
export function parseResponses(text: string): RawResponse[] {
  const out: RawResponse[] = [];
  let p = 0;
  for (;;) {
    const he = text.indexOf("\r\n\r\n", p);
    if (he < 0) break;
    const lines = text.slice(p, he).split("\r\n");
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]!);
    if (!m) break;
    const status = Number(m[1]);
    const headers = lines.slice(1).map((l) => [l.slice(0, l.indexOf(":")).trim(), l.slice(l.indexOf(":") + 1).trim()] as [string, string]);
    const h = (n: string) => headers.find(([k]) => k.toLowerCase() === n)?.[1];
    let q = he + 4;
    let body = "";
    if ((status >= 100 && status < 200) || status === 204 || status === 304) {
      // no body
    } else if (h("transfer-encoding")?.toLowerCase().includes("chunked")) {
      let complete = false;
      for (;;) {
        const le = text.indexOf("\r\n", q);
        if (le < 0) break;
        const size = parseInt(text.slice(q, le), 16);
        if (Number.isNaN(size)) break;
        if (size === 0) {
          q = le + 4;
          complete = true;
          break;
        }
        if (le + 2 + size + 2 > text.length) break;
        body += text.slice(le + 2, le + 2 + size);
        q = le + 2 + size + 2;
      }
      if (!complete) break;
    } else if (h("content-length") !== undefined) {
      const n = Number(h("content-length"));
      if (q + n > text.length) break;
      body = text.slice(q, q + n);
      q += n;
    } else {
      body = text.slice(q);
      q = text.length;
    }
    out.push({ status, headers, body });
    p = q;
  }
  return out;
}

/** Polls `fn` until it returns something truthy; throws after `ms`. */
export async function waitUntil<T>(what: string, fn: () => T | null | undefined | false | Promise<T | null | undefined | false>, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
