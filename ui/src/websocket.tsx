import { useEffect, useState } from "preact/hooks";
import { get } from "./api.ts";
import { bodyBytes, formatSize, hexDump } from "./body.tsx";
import { ErrorBox, fmtTime, useLoad } from "./common.tsx";

interface Conn {
  connId: number;
  logId: number | null;
  url: string;
  openedTs: number;
  closed: boolean;
  closedTs: number | null;
  frameCount: number;
}
interface Frame {
  dir: "in" | "out";
  opcode: string;
  text: string;
  sizeBytes: number;
  truncated: boolean;
  ts: number;
  closeCode?: number;
  closeReason?: string;
}

/** Polls while shown (frames have no event of their own). */
function usePoll(ms: number): number {
  const [n, setN] = useState(0);
  useEffect(() => {
    const t = setInterval(() => setN((x) => x + 1), ms);
    return () => clearInterval(t);
  }, [ms]);
  return n;
}

export function WebSocketView() {
  const tick = usePoll(1000);
  const conns = useLoad(() => get<{ items: Conn[]; total: number }>("/websocket/connections"), [tick]);
  const [sel, setSel] = useState<number | null>(null);
  return (
    <div class="split ws">
      <div class="list-pane narrow">
        <ErrorBox error={conns.error} />
        <ul class="plain-list">
          {(conns.data?.items ?? []).map((c) => (
            <li key={c.connId} class={c.connId === sel ? "selected" : ""} onClick={() => setSel(c.connId)} data-conn={c.connId}>
              <strong>{c.url}</strong>
              <div class="muted">
                #{c.connId} · {c.frameCount} frames · {c.closed ? `closed ${fmtTime(c.closedTs)}` : "open"} · opened {fmtTime(c.openedTs)}
              </div>
            </li>
          ))}
          {conns.data?.items.length === 0 && <li class="muted">No WebSocket connections captured yet.</li>}
        </ul>
      </div>
      {sel !== null && <Frames key={sel} id={sel} tick={tick} />}
    </div>
  );
}

function framePreview(f: Frame, hex: boolean): string {
  if (f.opcode === "close") return `close ${f.closeCode ?? ""} ${f.closeReason ?? ""}`.trim();
  if (f.opcode === "ping" || f.opcode === "pong") return "";
  const bytes = bodyBytes(f.text, f.opcode === "binary" ? "base64" : "utf8");
  if (hex) return hexDump(bytes, 4096);
  if (f.opcode === "binary") return new TextDecoder("utf-8", { fatal: false }).decode(bytes).replace(/[\u0000-\u0008\u000e-\u001f\ufffd]/g, "·");
  return f.text;
}

function Frames({ id, tick }: { id: number; tick: number }) {
  const frames = useLoad(() => get<{ connId: number; url: string; items: Frame[]; total: number }>(`/websocket/connections/${id}/frames`), [id, tick]);
  const [hex, setHex] = useState(false);
  return (
    <div class="detail frames" data-testid="frames">
      <div class="detail-head">
        <strong>{frames.data?.url}</strong>
        <span class="spacer" />
        <span class="muted">{frames.data?.total ?? 0} frames</span>
        <button class={hex ? "seg" : "seg on"} onClick={() => setHex(false)}>
          text
        </button>
        <button class={hex ? "seg on" : "seg"} onClick={() => setHex(true)} data-testid="hex-toggle">
          hex
        </button>
      </div>
      <ErrorBox error={frames.error} />
      <table class="grid frames-table">
        <thead>
          <tr>
            <th>Dir</th>
            <th>Opcode</th>
            <th>Preview</th>
            <th>Size</th>
            <th>Time</th>
          </tr>
        </thead>
        <tbody>
          {(frames.data?.items ?? []).map((f, i) => (
            <tr key={i} class={`dir-${f.dir}`} data-frame={i}>
              <td title={f.dir === "out" ? "client to server" : "server to client"}>{f.dir === "out" ? "↑ out" : "↓ in"}</td>
              <td>{f.opcode}</td>
              <td>
                <pre class="frame-preview">{framePreview(f, hex)}</pre>
                {f.truncated && <span class="muted">(preview truncated)</span>}
              </td>
              <td>{formatSize(f.sizeBytes)}</td>
              <td>{fmtTime(f.ts)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
