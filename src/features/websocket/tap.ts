import type { WebSocketTap } from "../../core/proxy/context.ts";
import type { PerMessageDeflateParams } from "../../core/ws/deflate.ts";
import { WsFrameParser, type WsMessage } from "../../core/ws/frame-parser.ts";
import { toFrameRecord, type WsConnection } from "./store.ts";

/**
 * Observes one relayed WebSocket connection: one frame parser per direction, each message stored on the connection
 * record while `recording()` says so. It never throws into the relay (the core calls it inline, before writing the
 * bytes on) and never holds the chunks it is given.
 */
export class WsRecorder implements WebSocketTap {
  private out: WsFrameParser | null;
  private in: WsFrameParser | null;

  constructor(
    private readonly conn: WsConnection,
    deflate: PerMessageDeflateParams | null,
    previewCap: number,
    private readonly recording: () => boolean,
    private readonly now: () => number = Date.now,
  ) {
    this.out = this.parser("out", deflate, previewCap);
    this.in = this.parser("in", deflate, previewCap);
  }

  private parser(dir: "in" | "out", deflate: PerMessageDeflateParams | null, previewCap: number): WsFrameParser {
    return new WsFrameParser({
      dir,
      deflate,
      previewCap,
      onMessage: (m) => this.message(dir, m),
      onError: (e) => this.failed(dir, e.message),
    });
  }

  clientBytes(data: Uint8Array): void {
    if (this.out) this.push("out", this.out, data);
  }

  serverBytes(data: Uint8Array): void {
    if (this.in) this.push("in", this.in, data);
  }

  closed(): void {
    this.conn.markClosed(this.now());
    this.out = null;
    this.in = null;
  }

  private push(dir: "in" | "out", p: WsFrameParser, data: Uint8Array): void {
    if (this.conn.evicted) {
      // nobody can read this record any more: stop parsing (and free the parsers' buffers)
      this.out = null;
      this.in = null;
      return;
    }
    try {
      p.push(data);
    } catch (e) {
      // a bug in the observer must never reach the relay
      this.failed(dir, `observer failure: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  private message(dir: "in" | "out", m: WsMessage): void {
    const ts = this.now();
    this.conn.framesSeen++;
    if (m.opcode === "close") this.conn.markClosed(ts);
    if (this.recording()) this.conn.add(toFrameRecord(dir, m, ts));
  }

  private failed(dir: "in" | "out", message: string): void {
    this.conn.error ??= message;
    if (dir === "out") this.out = null;
    else this.in = null;
  }
}
