import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";
import { api, del, download, enc, errorText, get, post, qs } from "./api.ts";
import { BodyView, formatSize, HeadersTable, headerValue } from "./body.tsx";
import { ErrorBox, fmtTime, Tabs, useAction, useLoad } from "./common.tsx";

export interface Summary {
  id: number;
  method: string;
  url: string;
  host: string;
  status_code: number;
  content_type: string;
  duration_ms: number;
  timestamp: number;
  client_addr: string;
  has_response: boolean;
  error?: string;
  res_body_size?: number;
}

export interface Detail extends Summary {
  req_headers: [string, string][];
  res_headers: [string, string][];
  req_body: string;
  res_body: string;
  req_body_encoding: string;
  res_body_encoding: string;
  req_body_size: number;
  res_body_size: number;
  req_body_truncated: boolean;
  res_body_truncated: boolean;
  req_body_decoded_from: string;
  res_body_decoded_from: string;
  reason?: string;
  [k: string]: unknown;
}

interface Filters {
  host: string;
  method: string;
  status: string;
  path: string;
  search: string;
  has_error: string;
}

const EMPTY: Filters = { host: "", method: "", status: "", path: "", search: "", has_error: "" };
export const ROW = 24;
const PAGE = 500;
const OVERSCAN = 12;
const PREFETCH = 150;

function pathOf(url: string): string {
  try {
    const u = new URL(url);
    return u.pathname + u.search;
  } catch {
    return url;
  }
}

/** Status filter text: `404`, `4xx`, `400-499`. */
function statusParams(s: string): Record<string, string> | null {
  const t = s.trim().toLowerCase();
  if (!t) return {};
  if (/^\d{3}$/.test(t)) return { status: t };
  if (/^[1-5]xx$/.test(t)) return { status_min: `${t[0]}00`, status_max: `${t[0]}99` };
  const m = /^(\d{1,3})\s*-\s*(\d{1,3})$/.exec(t);
  if (m) return { status_min: m[1]!, status_max: m[2]! };
  return null;
}

function filterQuery(f: Filters): Record<string, string> {
  const q: Record<string, string> = { order: "asc" };
  if (f.host.trim()) q.host = f.host.trim();
  if (f.method.trim()) q.method = f.method.trim();
  if (f.path.trim()) q.path = f.path.trim();
  if (f.search.trim()) q.search = f.search.trim();
  if (f.has_error) q.has_error = f.has_error;
  Object.assign(q, statusParams(f.status) ?? {});
  return q;
}

/**
 * The traffic list: every entry matching the filters, oldest first, in a virtualised list (only the rows in view
 * are in the DOM; pages of 500 are fetched as they come into view). New entries are announced by the event stream;
 * while the list is scrolled to the end it follows them.
 */
export function TrafficView(props: { trafficTick: number }) {
  const [draft, setDraft] = useState<Filters>(EMPTY);
  const [filters, setFilters] = useState<Filters>(EMPTY);
  const [total, setTotal] = useState(0);
  const totalRef = useRef(0);
  const [version, setVersion] = useState(0);
  const pages = useRef(new Map<number, Summary[]>());
  const loading = useRef(new Set<number>());
  const [, force] = useState(0);
  const [scrollTop, setScrollTop] = useState(0);
  const [height, setHeight] = useState(600);
  const [selected, setSelected] = useState<number>(-1);
  const [selectedId, setSelectedId] = useState<number | null>(null);
  const [marked, setMarked] = useState<number[]>([]);
  const [diff, setDiff] = useState<[number, number] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const follow = useRef(true);
  const listRef = useRef<HTMLDivElement>(null);
  const filterError = statusParams(filters.status) === null ? "status: use 404, 4xx or 400-499" : null;
  const query = useMemo(() => filterQuery(filters), [filters]);

  const refreshTotal = useCallback(async (reset: boolean) => {
    try {
      const r = await get<{ total: number }>("/traffic" + qs({ ...query, limit: 0 }));
      setError(null);
      // new entries but the same count: the store is at capacity and evicted the oldest, so every offset moved
      if (!reset && r.total === totalRef.current && Object.keys(query).length === 1) {
        // keep showing the old rows until the new pages are there (no flash of empty rows)
        generation.current++;
        stale.current = pages.current;
        pages.current = new Map();
        loading.current.clear();
      } else if (reset) {
        generation.current++;
        stale.current = new Map();
        pages.current.clear();
        loading.current.clear();
      } else {
        // the last (partial) page and anything after it may have grown
        const from = Math.floor(Math.max(0, totalRef.current - 1) / PAGE);
        for (const k of [...pages.current.keys()]) if (k >= from) pages.current.delete(k);
      }
      totalRef.current = r.total;
      setTotal(r.total);
      setVersion((v) => v + 1);
    } catch (e) {
      setError(e);
    }
  }, [query]);

  useEffect(() => {
    follow.current = true;
    void refreshTotal(true);
  }, [query]);
  useEffect(() => {
    if (props.trafficTick) void refreshTotal(false);
  }, [props.trafficTick]);

  // bumped when the filters change or the list is reset: pages of an older generation are dropped
  const generation = useRef(0);
  const retries = useRef(new Map<number, number>());
  const stale = useRef(new Map<number, Summary[]>());
  const loadPage = (p: number) => {
    if (pages.current.has(p) || loading.current.has(p)) return;
    loading.current.add(p);
    const gen = generation.current;
    get<{ items: Summary[] }>("/traffic" + qs({ ...query, limit: PAGE, offset: p * PAGE }))
      .then((r) => {
        if (gen !== generation.current) return;
        loading.current.delete(p);
        // a short page read before newer entries arrived is read again (the next render asks for it)
        const tries = retries.current.get(p) ?? 0;
        if (r.items.length < PAGE && p * PAGE + r.items.length < totalRef.current && tries < 3) {
          retries.current.set(p, tries + 1);
          force((x) => x + 1);
          return;
        }
        retries.current.delete(p);
        pages.current.set(p, r.items);
        force((x) => x + 1);
      })
      .catch((e) => {
        loading.current.delete(p);
        setError(e);
      });
  };

  const rowAt = (i: number): Summary | undefined => (pages.current.get(Math.floor(i / PAGE)) ?? stale.current.get(Math.floor(i / PAGE)))?.[i % PAGE];

  useLayoutEffect(() => {
    const el = listRef.current;
    if (!el) return;
    const ro = new ResizeObserver(() => setHeight(el.clientHeight));
    ro.observe(el);
    setHeight(el.clientHeight);
    return () => ro.disconnect();
  }, []);

  // follow the end of the list while it is scrolled there
  useLayoutEffect(() => {
    const el = listRef.current;
    if (el && follow.current) {
      el.scrollTop = el.scrollHeight;
      setScrollTop(el.scrollTop);
    }
  }, [total, version]);

  const first = Math.max(0, Math.floor(scrollTop / ROW) - OVERSCAN);
  const last = Math.min(total, Math.ceil((scrollTop + height) / ROW) + OVERSCAN);
  // every render: loadPage does nothing for pages that are there or on their way
  useEffect(() => {
    // rows within PREFETCH of the view are fetched ahead, so scrolling rarely meets rows still loading
    const from = Math.max(0, first - PREFETCH);
    const to = Math.min(total, last + PREFETCH);
    for (let p = Math.floor(from / PAGE); p <= Math.floor(Math.max(from, to - 1) / PAGE); p++) if (p * PAGE < total) loadPage(p);
  });

  // the key handler reads these refs: keys pressed faster than the page re-renders still act on the latest selection
  const selRef = useRef({ index: -1, id: null as number | null });
  selRef.current = { index: selected, id: selectedId };
  const select = (i: number) => {
    if (total === 0) return;
    const idx = Math.max(0, Math.min(total - 1, i));
    setSelected(idx);
    const row = rowAt(idx);
    setSelectedId(row ? row.id : null);
    selRef.current = { index: idx, id: row ? row.id : null };
    const el = listRef.current;
    if (el) {
      if (idx * ROW < el.scrollTop) el.scrollTop = idx * ROW;
      else if ((idx + 1) * ROW > el.scrollTop + el.clientHeight) el.scrollTop = (idx + 1) * ROW - el.clientHeight;
    }
  };
  // a selection made before its page arrived gets its id once the page is there
  useEffect(() => {
    if (selected >= 0 && selectedId === null) {
      const r = rowAt(selected);
      if (r) setSelectedId(r.id);
    }
  });

  const toggleMark = (id: number) => setMarked((m) => (m.includes(id) ? m.filter((x) => x !== id) : [...m, id].slice(-2)));

  const onKey = (e: KeyboardEvent) => {
    const pageRows = Math.max(1, Math.floor(height / ROW) - 1);
    const k = e.key;
    const { index: selected, id: selectedId } = selRef.current;
    let handled = true;
    if (k === "ArrowDown" || k === "j") select(selected + 1);
    else if (k === "ArrowUp" || k === "k") select(selected < 0 ? total - 1 : selected - 1);
    else if (k === "PageDown") select(selected + pageRows);
    else if (k === "PageUp") select(selected - pageRows);
    else if (k === "Home") select(0);
    else if (k === "End") select(total - 1);
    else if (k === " " && selectedId !== null) toggleMark(selectedId);
    else if (k === "Delete" && selectedId !== null) void removeEntry(selectedId);
    else if (k === "Escape") {
      setSelected(-1);
      setSelectedId(null);
    } else handled = false;
    if (handled) e.preventDefault();
  };

  const removeEntry = async (id: number) => {
    try {
      await del(`/traffic/${id}`);
      setSelectedId(null);
      setSelected(-1);
      setMarked((m) => m.filter((x) => x !== id));
      await refreshTotal(true);
    } catch (e) {
      setError(e);
    }
  };

  const rows = [];
  for (let i = first; i < last; i++) {
    const r = rowAt(i);
    const cls = ["row", i === selected ? "selected" : "", r && marked.includes(r.id) ? "marked" : "", r && (r.error || r.status_code >= 400) ? "failed" : ""].join(" ");
    rows.push(
      r ? (
        <div key={i} class={cls} style={{ transform: `translateY(${i * ROW}px)` }} onClick={(e) => (e.shiftKey || e.ctrlKey || e.metaKey ? toggleMark(r.id) : select(i))} data-id={r.id} role="row" aria-selected={i === selected}>
          <span class="c-id">{r.id}</span>
          <span class={`c-method m-${r.method.toLowerCase()}`}>{r.method}</span>
          <span class="c-host" title={r.host}>{r.host}</span>
          <span class="c-path" title={r.url}>{pathOf(r.url)}</span>
          <span class={`c-status s${String(r.status_code)[0]}`}>{r.error ? "✕" : r.has_response ? r.status_code : "…"}</span>
          <span class="c-size">{r.res_body_size !== undefined ? formatSize(r.res_body_size) : ""}</span>
          <span class="c-dur">{r.duration_ms} ms</span>
          <span class="c-client" title={r.client_addr}>{r.client_addr}</span>
        </div>
      ) : (
        <div key={i} class="row placeholder" style={{ transform: `translateY(${i * ROW}px)` }}>
          <span class="muted">loading…</span>
        </div>
      ),
    );
  }

  const set = (k: keyof Filters) => (e: Event) => setDraft({ ...draft, [k]: (e.target as HTMLInputElement).value });
  return (
    <div class="traffic">
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          setFilters({ ...draft });
        }}
      >
        <input name="search" placeholder="Search URL and bodies" value={draft.search} onInput={set("search")} aria-label="search" />
        <input name="host" placeholder="host" value={draft.host} onInput={set("host")} aria-label="host filter" class="short" />
        <input name="path" placeholder="path" value={draft.path} onInput={set("path")} aria-label="path filter" class="short" />
        <select name="method" value={draft.method} onChange={set("method")} aria-label="method filter">
          <option value="">any method</option>
          {["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "CONNECT"].map((m) => (
            <option value={m}>{m}</option>
          ))}
        </select>
        <input name="status" placeholder="status: 404, 4xx" value={draft.status} onInput={set("status")} aria-label="status filter" class="tiny" />
        <select name="has_error" value={draft.has_error} onChange={set("has_error")} aria-label="errors filter">
          <option value="">all</option>
          <option value="true">errors (≥ 400)</option>
          <option value="false">success (&lt; 400)</option>
        </select>
        <button type="submit">Filter</button>
        <button
          type="button"
          class="link"
          onClick={() => {
            setDraft(EMPTY);
            setFilters(EMPTY);
          }}
        >
          Clear
        </button>
        <span class="spacer" />
        <span class="muted" data-testid="total">
          {total.toLocaleString()} entries
        </span>
        <button type="button" disabled={marked.length !== 2} onClick={() => setDiff([Math.min(marked[0]!, marked[1]!), Math.max(marked[0]!, marked[1]!)])} title="mark two entries with Space or Ctrl-click">
          Diff {marked.length}/2
        </button>
        <button
          type="button"
          title="the entries matching the filters as a HAR 1.2 file"
          onClick={async () => {
            const { order: _order, ...q } = query;
            try {
              await download("/traffic/export.har" + qs(q), "tapwire-traffic.har");
            } catch (e) {
              setError(e);
            }
          }}
        >
          Export HAR
        </button>
        <button
          type="button"
          class="danger"
          onClick={async () => {
            if (!confirm("Delete every captured entry?")) return;
            try {
              await del("/traffic");
              await refreshTotal(true);
            } catch (e) {
              setError(e);
            }
          }}
        >
          Clear all
        </button>
      </form>
      {filterError && <div class="error-box">{filterError}</div>}
      <ErrorBox error={error} />
      <div class="split">
        <div class="list-pane">
          <div class="row head" role="row">
            <span class="c-id">#</span>
            <span class="c-method">Method</span>
            <span class="c-host">Host</span>
            <span class="c-path">Path</span>
            <span class="c-status">Status</span>
            <span class="c-size">Size</span>
            <span class="c-dur">Duration</span>
            <span class="c-client">Client</span>
          </div>
          <div
            class="list"
            ref={listRef}
            tabIndex={0}
            role="grid"
            aria-label="traffic"
            aria-rowcount={total}
            onKeyDown={onKey}
            onScroll={(e) => {
              const el = e.currentTarget as HTMLDivElement;
              setScrollTop(el.scrollTop);
              follow.current = el.scrollTop + el.clientHeight >= el.scrollHeight - ROW;
            }}
          >
            <div class="list-inner" style={{ height: `${total * ROW}px` }}>
              {rows}
            </div>
            {total === 0 && !error && <div class="empty muted">No traffic yet. Send requests through the proxy (eval "$(tapwire env)").</div>}
          </div>
        </div>
        {selectedId !== null && (
          <DetailPane
            id={selectedId}
            onClose={() => {
              setSelectedId(null);
              setSelected(-1);
            }}
            onDelete={() => void removeEntry(selectedId)}
            onNew={(id) => {
              follow.current = true;
              void refreshTotal(false).then(() => {
                setSelectedId(id);
                // oldest first: without filters the new entry is the last row
                setSelected(Object.keys(query).length === 1 ? totalRef.current - 1 : -1);
              });
            }}
            marked={marked.includes(selectedId)}
            onMark={() => toggleMark(selectedId)}
          />
        )}
      </div>
      {diff && <DiffModal a={diff[0]} b={diff[1]} onClose={() => setDiff(null)} />}
    </div>
  );
}

function DetailPane(props: { id: number; onClose: () => void; onDelete: () => void; onNew: (id: number) => void; marked: boolean; onMark: () => void }) {
  const { data: e, error } = useLoad(() => get<Detail>(`/traffic/${props.id}`), [props.id]);
  const [tab, setTab] = useState<"request" | "response" | "timing">("response");
  const [run, actionError] = useAction();
  const [note, setNote] = useState("");
  const [curlText, setCurlText] = useState<string | null>(null);
  const [editing, setEditing] = useState(false);
  useEffect(() => setNote(""), [props.id]);
  return (
    <div class="detail" data-testid="detail" data-entry={props.id}>
      <div class="detail-head">
        <strong>
          #{props.id} {e ? `${e.method} ${e.url}` : ""}
        </strong>
        <span class="spacer" />
        <button class="link" onClick={props.onClose} aria-label="close detail">
          ✕
        </button>
      </div>
      <div class="toolbar">
        <button
          onClick={() =>
            void run(async () => {
              const text = await api<string>("GET", `/traffic/${props.id}/export/curl`);
              setCurlText(text);
              try {
                await navigator.clipboard.writeText(text);
                setNote("cURL command copied");
              } catch {
                setNote("select the command below to copy it");
              }
            })
          }
        >
          Copy as cURL
        </button>
        <button
          onClick={() =>
            void run(async () => {
              const r = await post<{ id: number | null; status_code: number }>(`/traffic/${props.id}/replay`, {});
              setNote(`replayed: ${r.status_code}${r.id ? ` (entry #${r.id})` : ""}`);
              if (r.id) props.onNew(r.id);
            })
          }
        >
          Replay
        </button>
        <button onClick={() => setEditing(true)} disabled={!e}>
          Edit &amp; replay
        </button>
        <button onClick={props.onMark}>{props.marked ? "Unmark" : "Mark for diff"}</button>
        <button class="danger" onClick={props.onDelete}>
          Delete
        </button>
        <span class="muted note">{note}</span>
      </div>
      <ErrorBox error={error || actionError} />
      {curlText !== null && (
        <div class="curl">
          <textarea readOnly value={curlText} rows={Math.min(8, curlText.split("\n").length)} onFocus={(ev) => (ev.target as HTMLTextAreaElement).select()} />
          <button class="link" onClick={() => setCurlText(null)}>
            hide
          </button>
        </div>
      )}
      {e && (
        <>
          {e.error && (
            <div class="error-box" data-testid="entry-error">
              {e.error}
            </div>
          )}
          <Tabs
            tabs={[
              ["request", "Request"],
              ["response", `Response ${e.has_response ? e.status_code : ""}`],
              ["timing", "Timing"],
            ]}
            value={tab}
            onChange={setTab}
          />
          <div class="detail-body">
            {tab === "request" && (
              <>
                <h4>
                  {e.method} {e.url}
                </h4>
                <HeadersTable headers={e.req_headers} />
                <h4>Body</h4>
                <BodyView body={e.req_body} encoding={e.req_body_encoding} contentType={headerValue(e.req_headers, "content-type")} size={e.req_body_size} truncated={e.req_body_truncated} decodedFrom={e.req_body_decoded_from} />
              </>
            )}
            {tab === "response" &&
              (e.has_response ? (
                <>
                  <h4>
                    {e.status_code} {e.reason ?? ""}
                  </h4>
                  <HeadersTable headers={e.res_headers} />
                  <h4>Body</h4>
                  <BodyView body={e.res_body} encoding={e.res_body_encoding} contentType={e.content_type || headerValue(e.res_headers, "content-type")} size={e.res_body_size} truncated={e.res_body_truncated} decodedFrom={e.res_body_decoded_from} />
                </>
              ) : (
                <div class="muted">No response{e.error ? `: ${e.error}` : ""}</div>
              ))}
            {tab === "timing" && <Timing e={e} />}
          </div>
        </>
      )}
      {editing && e && (
        <EditReplay
          e={e}
          onClose={() => setEditing(false)}
          onDone={(id, status) => {
            setEditing(false);
            setNote(`sent: ${status}${id ? ` (entry #${id})` : ""}`);
            if (id) props.onNew(id);
          }}
        />
      )}
    </div>
  );
}

function Timing({ e }: { e: Detail }) {
  const extras = Object.entries(e).filter(([k]) => !["id", "method", "url", "host", "status_code", "content_type", "duration_ms", "timestamp", "client_addr", "has_response", "req_headers", "res_headers", "req_body", "res_body"].includes(k) && !k.startsWith("req_body_") && !k.startsWith("res_body_"));
  return (
    <table class="kv">
      <tbody>
        <tr>
          <th>Started</th>
          <td>
            {new Date(e.timestamp).toISOString()} ({fmtTime(e.timestamp)})
          </td>
        </tr>
        <tr>
          <th>Duration</th>
          <td>{e.duration_ms} ms</td>
        </tr>
        <tr>
          <th>Client</th>
          <td>{e.client_addr}</td>
        </tr>
        <tr>
          <th>Request body</th>
          <td>{formatSize(e.req_body_size)}</td>
        </tr>
        <tr>
          <th>Response body</th>
          <td>{formatSize(e.res_body_size)}</td>
        </tr>
        {extras.map(([k, v]) => (
          <tr>
            <th>{k}</th>
            <td>{typeof v === "string" ? v : JSON.stringify(v)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function headersToText(h: [string, string][]): string {
  return h.map(([n, v]) => `${n}: ${v}`).join("\n");
}

export function textToHeaders(t: string): [string, string][] {
  return t
    .split("\n")
    .map((l) => l.replace(/\r$/, ""))
    .filter((l) => l.trim())
    .map((l) => {
      const i = l.indexOf(":");
      if (i <= 0) throw new Error(`header line without a name: ${l}`);
      return [l.slice(0, i).trim(), l.slice(i + 1).trim()] as [string, string];
    });
}

function EditReplay(props: { e: Detail; onClose: () => void; onDone: (id: number | null, status: number) => void }) {
  const { e } = props;
  const binary = e.req_body_encoding === "base64";
  const [method, setMethod] = useState(e.method);
  const [url, setUrl] = useState(e.url);
  const [headers, setHeaders] = useState(headersToText(e.req_headers.filter(([n]) => n.toLowerCase() !== "content-length")));
  const [body, setBody] = useState(e.req_body);
  const [run, error] = useAction();
  return (
    <div class="modal" role="dialog" aria-label="edit and replay">
      <div class="modal-box">
        <h3>Edit &amp; replay #{e.id}</h3>
        <ErrorBox error={error} />
        <div class="row">
          <input class="tiny" value={method} onInput={(ev) => setMethod((ev.target as HTMLInputElement).value)} aria-label="method" />
          <input class="grow" value={url} onInput={(ev) => setUrl((ev.target as HTMLInputElement).value)} aria-label="url" />
        </div>
        <label>Headers (Name: value per line)</label>
        <textarea rows={8} value={headers} onInput={(ev) => setHeaders((ev.target as HTMLTextAreaElement).value)} aria-label="headers" />
        <label>Body{binary ? " (base64)" : ""}</label>
        <textarea rows={8} value={body} onInput={(ev) => setBody((ev.target as HTMLTextAreaElement).value)} aria-label="body" />
        <div class="row">
          <button
            class="primary"
            onClick={() =>
              void run(async () => {
                const r = await post<{ id: number | null; status_code: number }>(`/traffic/${e.id}/edit-replay`, {
                  method,
                  url,
                  headers: textToHeaders(headers),
                  body,
                  body_encoding: binary ? "base64" : "utf8",
                });
                props.onDone(r.id, r.status_code);
              })
            }
          >
            Send
          </button>
          <button onClick={props.onClose}>Cancel</button>
        </div>
      </div>
    </div>
  );
}

interface Change {
  equal: boolean;
  added: [string, string][];
  removed: [string, string][];
  changed: { name: string; a: string; b: string }[];
}
interface BodyDiff {
  equal: boolean;
  kind: string;
  unified: string;
  json: { path: string; op: string; a?: unknown; b?: unknown }[] | null;
  note: string;
}

function DiffModal(props: { a: number; b: number; onClose: () => void }) {
  const { data: d, error } = useLoad(
    () =>
      get<{
        equal: boolean;
        method: { a: string; b: string; equal: boolean };
        url: { a: string; b: string; equal: boolean };
        status: { a: number; b: number; equal: boolean };
        req_headers: Change;
        res_headers: Change;
        req_body: BodyDiff;
        res_body: BodyDiff;
      }>(`/traffic/${props.a}/diff/${props.b}`),
    [props.a, props.b],
  );
  const pair = (name: string, x: { a: unknown; b: unknown; equal: boolean }) => (
    <tr class={x.equal ? "" : "diff-changed"}>
      <th>{name}</th>
      <td>{String(x.a)}</td>
      <td>{String(x.b)}</td>
    </tr>
  );
  const headers = (name: string, c: Change) => (
    <>
      <h4>
        {name} {c.equal ? <span class="muted">(equal)</span> : null}
      </h4>
      <ul class="diff-list">
        {c.removed.map(([n, v]) => (
          <li class="del">
            − {n}: {v}
          </li>
        ))}
        {c.added.map(([n, v]) => (
          <li class="add">
            + {n}: {v}
          </li>
        ))}
        {c.changed.map((x) => (
          <li class="chg">
            ~ {x.name}: {x.a} → {x.b}
          </li>
        ))}
      </ul>
    </>
  );
  const body = (name: string, b: BodyDiff) => (
    <>
      <h4>
        {name} {b.equal ? <span class="muted">(equal)</span> : <span class="muted">({b.kind})</span>}
      </h4>
      {b.note && <div class="muted">{b.note}</div>}
      {!b.equal && (
        <pre class="source unified">
          {b.unified.split("\n").map((l) => (
            <div class={l.startsWith("+") ? "add" : l.startsWith("-") ? "del" : ""}>{l}</div>
          ))}
        </pre>
      )}
    </>
  );
  return (
    <div class="modal" role="dialog" aria-label="diff">
      <div class="modal-box wide" data-testid="diff">
        <div class="detail-head">
          <h3>
            Diff #{props.a} ↔ #{props.b}
          </h3>
          <span class="spacer" />
          <button onClick={props.onClose}>Close</button>
        </div>
        <ErrorBox error={error} />
        {d && (
          <>
            <div>{d.equal ? "The two entries are equal." : "The entries differ."}</div>
            <table class="kv">
              <tbody>
                <tr>
                  <th />
                  <th>#{props.a}</th>
                  <th>#{props.b}</th>
                </tr>
                {pair("method", d.method)}
                {pair("url", d.url)}
                {pair("status", d.status)}
              </tbody>
            </table>
            {headers("Request headers", d.req_headers)}
            {headers("Response headers", d.res_headers)}
            {body("Request body", d.req_body)}
            {body("Response body", d.res_body)}
          </>
        )}
      </div>
    </div>
  );
}

export { errorText, enc };
