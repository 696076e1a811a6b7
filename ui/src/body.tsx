import { useEffect, useMemo, useState } from "preact/hooks";

/** Bytes of a body as the API gives it (utf8 text or base64). */
export function bodyBytes(body: string, encoding: string): Uint8Array {
  if (encoding === "base64") {
    const bin = atob(body);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  return new TextEncoder().encode(body);
}

export function hexDump(bytes: Uint8Array, max = 64 * 1024): string {
  const lines: string[] = [];
  const n = Math.min(bytes.length, max);
  for (let off = 0; off < n; off += 16) {
    const row = bytes.subarray(off, Math.min(off + 16, n));
    const hex = [...row].map((b) => b.toString(16).padStart(2, "0")).join(" ");
    const ascii = [...row].map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(`${off.toString(16).padStart(8, "0")}  ${hex.padEnd(47)}  ${ascii}`);
  }
  if (bytes.length > max) lines.push(`… ${bytes.length - max} more bytes`);
  return lines.join("\n");
}

export function headerValue(headers: [string, string][], name: string): string {
  const h = headers.find(([n]) => n.toLowerCase() === name);
  return h ? h[1] : "";
}

export function formatSize(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

type Mode = "pretty" | "raw" | "hex";

function kindOf(type: string, text: string | null): "json" | "image" | "markup" | "text" | "binary" {
  const t = type.toLowerCase();
  if (t.startsWith("image/")) return "image";
  if (text === null) return "binary";
  if (t.includes("json") || /^\s*[[{]/.test(text)) {
    try {
      JSON.parse(text);
      return "json";
    } catch {}
  }
  if (t.includes("html") || t.includes("xml")) return "markup";
  return "text";
}

/** A captured body: JSON as a tree, images shown, HTML/XML as source, text as text, anything else as hex. */
export function BodyView(props: { body: string; encoding: string; contentType: string; size?: number; truncated?: boolean; decodedFrom?: string }) {
  const { body, encoding, contentType } = props;
  const text = encoding === "base64" ? null : body;
  const kind = kindOf(contentType, text);
  const [mode, setMode] = useState<Mode>("pretty");
  useEffect(() => setMode("pretty"), [body]);
  const bytes = useMemo(() => (mode === "hex" || kind === "binary" || kind === "image" ? bodyBytes(body, encoding) : null), [body, encoding, mode, kind]);
  if (!body) return <div class="muted body-empty">No body{props.size ? ` (${formatSize(props.size)} not captured)` : ""}</div>;
  const notes = [
    props.size !== undefined ? formatSize(props.size) : "",
    props.truncated ? "truncated" : "",
    props.decodedFrom ? `decoded from ${props.decodedFrom}` : "",
    kind,
  ].filter(Boolean);
  return (
    <div class="body-view">
      <div class="body-bar">
        {(["pretty", "raw", "hex"] as Mode[]).map((m) => (
          <button class={mode === m ? "seg on" : "seg"} onClick={() => setMode(m)} data-mode={m}>
            {m}
          </button>
        ))}
        <span class="muted">{notes.join(" · ")}</span>
      </div>
      {mode === "hex" || (mode === "pretty" && kind === "binary") ? (
        <pre class="hex">{hexDump(bytes ?? bodyBytes(body, encoding))}</pre>
      ) : mode === "raw" ? (
        <pre class="source">{text ?? body}</pre>
      ) : kind === "json" ? (
        <div class="json-tree" data-testid="json-tree">
          <JsonNode value={JSON.parse(text!)} name={null} depth={0} />
        </div>
      ) : kind === "image" ? (
        <ImageBody bytes={bytes!} type={contentType} />
      ) : kind === "markup" ? (
        <pre class="source markup">{text}</pre>
      ) : (
        <pre class="source">{text}</pre>
      )}
    </div>
  );
}

function ImageBody({ bytes, type }: { bytes: Uint8Array; type: string }) {
  const url = useMemo(() => URL.createObjectURL(new Blob([bytes as BlobPart], { type: type.split(";")[0] })), [bytes, type]);
  useEffect(() => () => URL.revokeObjectURL(url), [url]);
  const [dims, setDims] = useState("");
  return (
    <div class="image-body">
      <img src={url} alt="response image" data-testid="body-image" onLoad={(e) => setDims(`${(e.target as HTMLImageElement).naturalWidth} × ${(e.target as HTMLImageElement).naturalHeight}`)} />
      <div class="muted">{dims}</div>
    </div>
  );
}

function JsonNode({ value, name, depth }: { value: unknown; name: string | null; depth: number }) {
  const [open, setOpen] = useState(depth < 2);
  const label = name === null ? null : <span class="json-key">{name}: </span>;
  if (value === null || typeof value !== "object") {
    const cls = value === null ? "json-null" : typeof value === "string" ? "json-string" : typeof value === "number" ? "json-number" : "json-bool";
    return (
      <div class="json-leaf">
        {label}
        <span class={cls}>{typeof value === "string" ? JSON.stringify(value) : String(value)}</span>
      </div>
    );
  }
  const entries: [string, unknown][] = Array.isArray(value) ? value.map((v, i) => [String(i), v]) : Object.entries(value);
  const brackets = Array.isArray(value) ? ["[", "]"] : ["{", "}"];
  return (
    <div class="json-node">
      <span class="json-toggle" onClick={() => setOpen(!open)} role="button" aria-expanded={open}>
        {open ? "▾" : "▸"} {label}
        {brackets[0]}
        {!open && <span class="muted"> {entries.length} {Array.isArray(value) ? "items" : "keys"} </span>}
        {!open && brackets[1]}
      </span>
      {open && (
        <div class="json-children">
          {entries.slice(0, 2000).map(([k, v]) => (
            <JsonNode key={k} value={v} name={k} depth={depth + 1} />
          ))}
          {entries.length > 2000 && <div class="muted">… {entries.length - 2000} more</div>}
        </div>
      )}
      {open && <div>{brackets[1]}</div>}
    </div>
  );
}

export function HeadersTable({ headers }: { headers: [string, string][] }) {
  if (!headers.length) return <div class="muted">No headers</div>;
  return (
    <table class="kv">
      <tbody>
        {headers.map(([n, v], i) => (
          <tr key={i}>
            <th>{n}</th>
            <td>{v}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
