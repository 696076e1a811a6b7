import { useEffect, useRef, useState } from "preact/hooks";
import { del, download, enc, get, post, postFile, qs } from "./api.ts";
import { BodyView, formatSize, HeadersTable, headerValue } from "./body.tsx";
import { ErrorBox, Json, Section, useAction, useLoad } from "./common.tsx";

interface SessionTab {
  id: string;
  name: string;
  kind: "live" | "filter";
  entry_count: number;
  created_at: number;
  filter: Record<string, unknown>;
}
interface SavedSession {
  id: string;
  name: string;
  entry_count: number;
  saved_at: number;
  size_bytes: number;
}
interface EntryRow {
  id: number;
  method: string;
  url: string;
  status_code: number;
  res_body_size?: number;
  original_id?: number;
}
interface EntryPage {
  id: string;
  name: string;
  items: EntryRow[];
  total: number;
  offset: number;
  limit: number;
}

const PAGE_SIZE = 50;
const inputValue = (e: Event) => (e.target as HTMLInputElement).value;

/** Sessions (spec 4.8): live tabs and saved sessions (HAR files), their entries, save / export / import. */
export function SessionsView(props: { trafficTick?: number }) {
  const tabs = useLoad(() => get<{ tabs: SessionTab[] }>("/session-tabs"));
  const saved = useLoad(() => get<{ sessions: SavedSession[] }>("/session-tabs/saved"));
  const [open, setOpen] = useState<{ kind: "tab" | "saved"; id: string } | null>(null);
  const [offset, setOffset] = useState(0);
  const [tick, setTick] = useState(0);
  const base = open ? (open.kind === "tab" ? "/session-tabs/" : "/session-tabs/saved/") + enc(open.id) : "";
  const entries = useLoad(() => (open ? get<EntryPage>(base + qs({ limit: PAGE_SIZE, offset, order: "asc" })) : Promise.resolve(null)), [base, offset, tick]);
  const [run, error] = useAction();
  const [form, setForm] = useState({ name: "", host: "", method: "", status: "", search: "" });
  const [saveName, setSaveName] = useState("");
  const reloadAll = () => (tabs.reload(), saved.reload(), setTick((x) => x + 1));
  const select = (kind: "tab" | "saved", id: string) => (setOpen({ kind, id }), setOffset(0), setSaveName(""));
  // new traffic: the tabs' counts and the open tab's entries are read again, at most once a second
  const pending = useRef<ReturnType<typeof setTimeout> | null>(null);
  useEffect(() => {
    if (!props.trafficTick || pending.current) return;
    pending.current = setTimeout(() => {
      pending.current = null;
      tabs.reload();
      if (openRef.current?.kind === "tab") setTick((x) => x + 1);
    }, 1000);
  }, [props.trafficTick]);
  useEffect(() => () => clearTimeout(pending.current ?? undefined), []);
  const openRef = useRef(open);
  openRef.current = open;
  const tab = open?.kind === "tab" ? tabs.data?.tabs.find((t) => t.id === open.id) : undefined;
  const session = open?.kind === "saved" ? saved.data?.sessions.find((s) => s.id === open.id) : undefined;

  const create = () =>
    run(async () => {
      const filter: Record<string, unknown> = {};
      if (form.host.trim()) filter.host = form.host.trim();
      if (form.method.trim()) filter.method = form.method.trim();
      if (form.search.trim()) filter.search = form.search.trim();
      if (form.status.trim()) {
        const n = Number(form.status.trim());
        if (!Number.isInteger(n)) throw new Error("status: a status code such as 404");
        filter.status = n;
      }
      const t = await post<SessionTab>("/session-tabs", { name: form.name.trim(), filter });
      setForm({ name: "", host: "", method: "", status: "", search: "" });
      tabs.reload();
      select("tab", t.id);
    });

  const importHar = (e: Event) => {
    const input = e.target as HTMLInputElement;
    const file = input.files?.[0];
    if (!file) return;
    void run(async () => {
      const s = await postFile<SavedSession>("/session-tabs/saved" + qs({ name: file.name.replace(/\.har$/i, "") }), file);
      saved.reload();
      select("saved", s.id);
    }).finally(() => (input.value = ""));
  };

  return (
    <div class="split sessions">
      <div class="list-pane narrow">
        <Section title="Session tabs" actions={<button onClick={reloadAll}>Refresh</button>}>
          <ErrorBox error={tabs.error} />
          <ul class="plain-list" data-list="tabs">
            {(tabs.data?.tabs ?? []).map((t) => (
              <li key={t.id} class={open?.kind === "tab" && open.id === t.id ? "selected" : ""}>
                <button class="link item" onClick={() => select("tab", t.id)} data-tab-id={t.id}>
                  {t.name}
                </button>{" "}
                <span class="muted">{t.entry_count} entries</span>
              </li>
            ))}
          </ul>
          <form
            class="form"
            aria-label="new session tab"
            onSubmit={(e) => {
              e.preventDefault();
              void create();
            }}
          >
            <div class="row">
              <input class="grow" required placeholder="new tab name" aria-label="tab name" value={form.name} onInput={(e) => setForm({ ...form, name: inputValue(e) })} />
              <button type="submit">Create tab</button>
            </div>
            <div class="row">
              <input class="short" placeholder="host contains" aria-label="tab host filter" value={form.host} onInput={(e) => setForm({ ...form, host: inputValue(e) })} />
              <input class="tiny" placeholder="method" aria-label="tab method filter" value={form.method} onInput={(e) => setForm({ ...form, method: inputValue(e) })} />
              <input class="tiny" placeholder="status" aria-label="tab status filter" value={form.status} onInput={(e) => setForm({ ...form, status: inputValue(e) })} />
              <input class="short" placeholder="search" aria-label="tab search filter" value={form.search} onInput={(e) => setForm({ ...form, search: inputValue(e) })} />
            </div>
          </form>
        </Section>
        <Section
          title="Saved sessions"
          actions={
            <label class="button">
              Import HAR…
              <input type="file" accept=".har,application/json" class="visually-hidden" aria-label="import a HAR file" onChange={importHar} />
            </label>
          }
        >
          <ErrorBox error={saved.error} />
          <ul class="plain-list" data-list="saved">
            {(saved.data?.sessions ?? []).map((s) => (
              <li key={s.id} class={open?.kind === "saved" && open.id === s.id ? "selected" : ""}>
                <button class="link item" onClick={() => select("saved", s.id)} data-session-id={s.id}>
                  {s.name}
                </button>{" "}
                <span class="muted">
                  {s.entry_count} entries · {formatSize(s.size_bytes)} · {new Date(s.saved_at).toLocaleString()}
                </span>
              </li>
            ))}
            {saved.data?.sessions.length === 0 && <li class="muted">No saved sessions: save a tab, or import a HAR file.</li>}
          </ul>
        </Section>
        <ErrorBox error={error} />
      </div>
      <div class="detail">
        {open && (
          <Section
            title={(tab?.name ?? session?.name ?? open.id) + (entries.data ? ` · ${entries.data.total} entries` : "")}
            actions={
              open.kind === "tab" ? (
                <>
                  <input class="short" placeholder="session name" aria-label="session name" value={saveName} onInput={(e) => setSaveName(inputValue(e))} />
                  <button
                    class="primary"
                    onClick={() =>
                      void run(async () => {
                        const s = await post<SavedSession>(`/session-tabs/${enc(open.id)}/save`, saveName.trim() ? { name: saveName.trim() } : {});
                        saved.reload();
                        select("saved", s.id);
                      })
                    }
                  >
                    Save as session
                  </button>
                  <button onClick={() => void run(async () => (await post(`/session-tabs/${enc(open.id)}/clear`), reloadAll()))}>Clear</button>
                  {tab?.kind !== "live" && (
                    <button class="danger" onClick={() => void run(async () => (await del(`/session-tabs/${enc(open.id)}`), setOpen(null), tabs.reload()))}>
                      Delete tab
                    </button>
                  )}
                </>
              ) : (
                <>
                  <button class="primary" onClick={() => void run(() => download(`/session-tabs/saved/${enc(open.id)}/har`, `${open.id}.har`))}>
                    Export HAR
                  </button>
                  <button class="danger" onClick={() => void run(async () => (await del(`/session-tabs/saved/${enc(open.id)}`), setOpen(null), saved.reload()))}>
                    Delete
                  </button>
                </>
              )
            }
          >
            {tab && Object.keys(tab.filter ?? {}).length > 0 && (
              <div class="muted">
                filter:{" "}
                {Object.entries(tab.filter)
                  .map(([k, v]) => `${k}=${String(v)}`)
                  .join(" · ")}
              </div>
            )}
            <ErrorBox error={entries.error} />
            <EntryTable page={entries.data ?? null} />
            {entries.data && entries.data.total > PAGE_SIZE && (
              <div class="row">
                <button disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - PAGE_SIZE))}>
                  ‹ Previous
                </button>
                <span class="muted">
                  {entries.data.offset + 1}–{entries.data.offset + entries.data.items.length} of {entries.data.total}
                </span>
                <button disabled={offset + PAGE_SIZE >= entries.data.total} onClick={() => setOffset(offset + PAGE_SIZE)}>
                  Next ›
                </button>
              </div>
            )}
          </Section>
        )}
        {!open && <div class="empty muted">Pick a tab or a saved session.</div>}
      </div>
    </div>
  );
}

function EntryTable({ page }: { page: EntryPage | null }) {
  if (!page) return null;
  if (page.items.length === 0) return <div class="muted">No entries.</div>;
  return (
    <table class="grid entries">
      <thead>
        <tr>
          <th>#</th>
          <th>Method</th>
          <th>URL</th>
          <th>Status</th>
          <th>Size</th>
        </tr>
      </thead>
      <tbody>
        {page.items.map((e) => (
          <tr key={e.id}>
            <td class="muted">{e.id}</td>
            <td>{e.method}</td>
            <td class="url">{e.url}</td>
            <td class={"s" + String(e.status_code || 0)[0]}>{e.status_code || "—"}</td>
            <td>{e.res_body_size !== undefined ? formatSize(e.res_body_size) : ""}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

interface CollectionSummary {
  id: string;
  name: string;
  request_count: number;
}
interface ComposeRequest {
  id: string;
  name: string;
  method: string;
  url: string;
}
interface Folder {
  id: string;
  name: string;
  requests?: ComposeRequest[];
  folders?: Folder[];
}
interface TestResult {
  name: string;
  passed: boolean;
  error: string | null;
}
interface ConsoleLine {
  level: string;
  message: string;
}
interface SendResult {
  status: number | null;
  status_text: string | null;
  headers: [string, string][];
  body: string;
  body_encoding: string;
  size_bytes: number;
  duration_ms: number;
  traffic_id: number | null;
  resolved_url: string;
  unresolved: string[];
  tests: TestResult[];
  console: ConsoleLine[];
  errors: { source?: string; event?: string; message: string }[];
  error: string | null;
}

/** Requests of a collection with the folder path they are in, depth first. */
function allRequests(c: { requests?: ComposeRequest[]; folders?: Folder[] }, path = ""): { r: ComposeRequest; path: string }[] {
  return [...(c.requests ?? []).map((r) => ({ r, path })), ...(c.folders ?? []).flatMap((f) => allRequests(f, path ? `${path} / ${f.name}` : f.name))];
}

function Tests({ tests }: { tests: TestResult[] }) {
  if (tests.length === 0) return null;
  return (
    <ul class="plain-list tests">
      {tests.map((t) => (
        <li class={t.passed ? "pass" : "fail"}>
          {t.passed ? "✓ passed" : "✗ failed"}: {t.name}
          {t.error && <span class="muted"> — {t.error}</span>}
        </li>
      ))}
    </ul>
  );
}

function Console({ lines }: { lines: ConsoleLine[] }) {
  if (lines.length === 0) return null;
  return <pre class="source console">{lines.map((l) => `[${l.level}] ${l.message}`).join("\n")}</pre>;
}

/** Compose (spec 4.9): collections, their requests, an environment; send one and see the response. */
export function ComposeView() {
  const cols = useLoad(() => get<CollectionSummary[]>("/compose/collections"));
  const [sel, setSel] = useState<string | null>(null);
  const col = useLoad(() => (sel ? get<{ name: string; requests?: ComposeRequest[]; folders?: Folder[]; environments?: { name: string }[] }>(`/compose/collections/${enc(sel)}`) : Promise.resolve(null)), [sel]);
  const [env, setEnv] = useState("");
  const [req, setReq] = useState<string | null>(null);
  const [res, setRes] = useState<SendResult | null>(null);
  const [sending, setSending] = useState(false);
  const [run, error] = useAction();
  const send = () =>
    run(async () => {
      setSending(true);
      try {
        setRes(await post<SendResult>("/compose/send", { collection_id: sel, request_id: req, ...(env ? { environment: env } : {}), variables: {} }));
      } finally {
        setSending(false);
      }
    });
  const requests = col.data ? allRequests(col.data) : [];
  return (
    <div class="split compose">
      <div class="list-pane narrow">
        <Section title="Collections" actions={<button onClick={cols.reload}>Refresh</button>}>
          <ErrorBox error={cols.error} />
          <ul class="plain-list">
            {(cols.data ?? []).map((c) => (
              <li class={c.id === sel ? "selected" : ""}>
                <button class="link item" onClick={() => (setSel(c.id), setReq(null), setEnv(""), setRes(null))}>
                  {c.name}
                </button>{" "}
                <span class="muted">{c.request_count} requests</span>
              </li>
            ))}
            {cols.data?.length === 0 && <li class="muted">No collections (create them with the API or import a Postman collection).</li>}
          </ul>
        </Section>
        {col.data && (
          <Section title={`Requests of ${col.data.name}`}>
            <ul class="plain-list" data-list="requests">
              {requests.map(({ r, path }) => (
                <li class={r.id === req ? "selected" : ""}>
                  <button class="link item" onClick={() => (setReq(r.id), setRes(null))} data-request-id={r.id}>
                    <strong>{r.method}</strong> {r.name}
                  </button>
                  <div class="muted">
                    {path && `${path} · `}
                    {r.url}
                  </div>
                </li>
              ))}
              {requests.length === 0 && <li class="muted">No requests in this collection.</li>}
            </ul>
          </Section>
        )}
      </div>
      <div class="detail">
        <ErrorBox error={col.error || error} />
        {col.data && (
          <div class="toolbar">
            <label for="compose-env">Environment</label>
            <select id="compose-env" value={env} onChange={(e) => setEnv((e.target as HTMLSelectElement).value)}>
              <option value="">(none)</option>
              {(col.data.environments ?? []).map((e) => (
                <option value={e.name}>{e.name}</option>
              ))}
            </select>
            <button class="primary" disabled={!req || sending} onClick={() => void send()}>
              {sending ? "Sending…" : "Send"}
            </button>
            {!req && <span class="muted">pick a request</span>}
          </div>
        )}
        {res && (
          <Section title={res.status === null ? "No response" : `Response ${res.status} ${res.status_text ?? ""}`}>
            <div class="muted compose-meta">
              {res.resolved_url} · {res.duration_ms} ms · {formatSize(res.size_bytes)}
              {res.traffic_id !== null && ` · traffic #${res.traffic_id}`}
            </div>
            {res.error && (
              <div class="error-box" role="alert">
                {res.error}
              </div>
            )}
            {res.unresolved.length > 0 && <div class="notice">Unresolved variables: {res.unresolved.map((u) => `{{${u}}}`).join(", ")}</div>}
            {res.tests.length > 0 && <h4>Tests</h4>}
            <Tests tests={res.tests} />
            {res.errors.length > 0 && (
              <>
                <h4>Script errors</h4>
                <ul class="plain-list">
                  {res.errors.map((e) => (
                    <li class="fail">
                      {e.source ? `${e.source} (${e.event}): ` : ""}
                      {e.message}
                    </li>
                  ))}
                </ul>
              </>
            )}
            {res.console.length > 0 && <h4>Console</h4>}
            <Console lines={res.console} />
            {res.headers.length > 0 && (
              <>
                <h4>Headers</h4>
                <HeadersTable headers={res.headers} />
              </>
            )}
            {res.status !== null && (
              <>
                <h4>Body</h4>
                <BodyView body={res.body} encoding={res.body_encoding} contentType={headerValue(res.headers, "content-type")} size={res.size_bytes} />
              </>
            )}
          </Section>
        )}
      </div>
    </div>
  );
}

interface FlowSummary {
  id: string;
  name: string;
  nodeCount: number;
  edgeCount: number;
  updatedAt: number;
}
interface FlowDoc {
  id: string;
  name: string;
  description?: string;
  variables?: Record<string, unknown>;
  nodes: { id: string; type: string; data?: { name?: string; label?: string } }[];
  edges: { id: string; source: string; target: string; sourceHandle?: string | null }[];
  subflowIds?: string[];
}
interface RunStep {
  nodeId: string;
  type: string;
  name: string;
  status: string;
  durationMs: number;
  branch?: string;
  response?: { status: number; statusText: string } | null;
  assertions?: TestResult[];
  console?: ConsoleLine[];
  error?: string | null;
}
interface RunReport {
  flowId: string;
  runId: string;
  status: string;
  durationMs: number;
  steps: RunStep[];
  outputs?: Record<string, unknown>;
  error?: string | null;
}

/** `key=value` lines to an object; a value that parses as JSON (number, true, null, "quoted") is taken as such. */
export function parseOverrides(text: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [i, raw] of text.split("\n").entries()) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const eq = line.indexOf("=");
    if (eq <= 0) throw new Error(`line ${i + 1}: use name=value`);
    const v = line.slice(eq + 1).trim();
    let value: unknown = v;
    if (/^(-?\d+(\.\d+)?|true|false|null|".*")$/.test(v)) value = JSON.parse(v);
    out[line.slice(0, eq).trim()] = value;
  }
  return out;
}

const statusClass = (s: string) => (s === "passed" ? "pass" : "fail");

/** Flows (spec 4.14): the stored flows; open one, run it (with environment overrides) and see its report. */
export function FlowsView() {
  const flows = useLoad(() => get<{ flows: FlowSummary[] }>("/flows"));
  const [sel, setSel] = useState<string | null>(null);
  const flow = useLoad(() => (sel ? get<FlowDoc>(`/flows/${enc(sel)}`) : Promise.resolve(null)), [sel]);
  const [overrides, setOverrides] = useState("");
  const [report, setReport] = useState<RunReport | null>(null);
  const [running, setRunning] = useState(false);
  const [run, error] = useAction();
  const start = () =>
    run(async () => {
      const environment = parseOverrides(overrides);
      setRunning(true);
      setReport(null);
      try {
        setReport(await post<RunReport>(`/flows/${enc(sel!)}/run`, Object.keys(environment).length ? { environment } : {}));
      } finally {
        setRunning(false);
      }
    });
  return (
    <div class="split flows">
      <div class="list-pane narrow">
        <Section title="Flows" actions={<button onClick={flows.reload}>Refresh</button>}>
          <ErrorBox error={flows.error} />
          <ul class="plain-list">
            {(flows.data?.flows ?? []).map((f) => (
              <li class={f.id === sel ? "selected" : ""}>
                <button class="link item" onClick={() => (setSel(f.id), setReport(null))} data-flow-id={f.id}>
                  {f.name}
                </button>
                <div class="muted">
                  {f.nodeCount} nodes · {f.edgeCount} edges · updated {new Date(f.updatedAt).toLocaleString()}
                </div>
              </li>
            ))}
            {flows.data?.flows.length === 0 && <li class="muted">No flows (write them in the data folder's flows/ or POST /api/v1/flows).</li>}
          </ul>
        </Section>
      </div>
      <div class="detail">
        <ErrorBox error={flow.error || error} />
        {flow.data && (
          <Section title={flow.data.name}>
            {flow.data.description && <p>{flow.data.description}</p>}
            <table class="grid nodes">
              <thead>
                <tr>
                  <th>Node</th>
                  <th>Type</th>
                  <th>Next</th>
                </tr>
              </thead>
              <tbody>
                {flow.data.nodes.map((n) => (
                  <tr>
                    <td>{n.data?.name ?? n.data?.label ?? n.id}</td>
                    <td class="muted">{n.type}</td>
                    <td class="muted">
                      {flow.data!.edges
                        .filter((e) => e.source === n.id)
                        .map((e) => (e.sourceHandle ? `${e.sourceHandle}: ${e.target}` : e.target))
                        .join(", ")}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
            {flow.data.variables && Object.keys(flow.data.variables).length > 0 && (
              <div class="muted">
                variables: {Object.entries(flow.data.variables).map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`).join(" · ")}
              </div>
            )}
            <h4>
              <label for="flow-env">Environment overrides (name=value per line)</label>
            </h4>
            <textarea id="flow-env" class="code" rows={3} value={overrides} placeholder="baseUrl=http://127.0.0.1:8000" onInput={(e) => setOverrides((e.target as HTMLTextAreaElement).value)} />
            <div class="row">
              <button class="primary" disabled={running} onClick={() => void start()}>
                {running ? "Running…" : "Run"}
              </button>
            </div>
          </Section>
        )}
        {report && (
          <Section title="Run report">
            <div class="row report-head">
              <strong class={statusClass(report.status)} data-testid="run-status">
                {report.status}
              </strong>
              <span class="muted">
                {report.steps.length} steps · {report.durationMs} ms · run {report.runId}
              </span>
            </div>
            {report.error && (
              <div class="error-box" role="alert">
                {report.error}
              </div>
            )}
            <table class="grid steps">
              <thead>
                <tr>
                  <th>Step</th>
                  <th>Type</th>
                  <th>Status</th>
                  <th>Time</th>
                  <th>Details</th>
                </tr>
              </thead>
              <tbody>
                {report.steps.map((s) => (
                  <tr>
                    <td>{s.name}</td>
                    <td class="muted">{s.type}</td>
                    <td class={statusClass(s.status)}>{s.status}</td>
                    <td>{s.durationMs} ms</td>
                    <td>
                      {s.response && (
                        <div>
                          HTTP {s.response.status} {s.response.statusText}
                        </div>
                      )}
                      {s.branch && <div class="muted">branch {s.branch}</div>}
                      <Tests tests={s.assertions ?? []} />
                      {s.error && <div class="fail">{s.error}</div>}
                      <Console lines={s.console ?? []} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
            {report.outputs && Object.keys(report.outputs).length > 0 && (
              <>
                <h4>Outputs</h4>
                <Json value={report.outputs} />
              </>
            )}
          </Section>
        )}
      </div>
    </div>
  );
}

interface RemoteConn {
  id: string;
  protocol: string;
  host: string;
  label: string;
  homePath: string;
  encrypted: boolean;
  state: string;
  last_error: { code: string; message: string } | null;
}
interface RemoteEntry {
  name: string;
  path: string;
  isDir: boolean;
  size: number;
  modifiedMs?: number;
}
interface Transfer {
  transferId: string;
  connectionId: string;
  kind: "download" | "upload";
  state: string;
  remotePath: string;
  localPath: string;
  bytesDone: number;
  totalBytes: number | null;
  error: { code: string; message: string } | null;
  startedAt: number | null;
  finishedAt: number | null;
}

const ACTIVE = new Set(["queued", "running"]);
const isAbsolute = (p: string) => p.startsWith("/") || /^[A-Za-z]:[\\/]/.test(p) || p.startsWith("\\\\");
const joinRemote = (dir: string, name: string) => (dir.endsWith("/") ? dir : dir + "/") + name;
const joinLocal = (dir: string, name: string) => (/[\\/]$/.test(dir) ? dir : dir + (dir.includes("\\") && !dir.includes("/") ? "\\" : "/")) + name;
const baseName = (p: string) => p.split(/[\\/]/).pop() ?? p;
const parentOf = (p: string) => {
  const t = p.replace(/\/+$/, "");
  const i = t.lastIndexOf("/");
  return i <= 0 ? "/" : t.slice(0, i);
};

/** Remote files (spec 4.13): connections, a folder browser, downloads and uploads, transfers followed live. */
export function RemoteView() {
  const conns = useLoad(() => get<{ connections: RemoteConn[] }>("/remote-fs/connections"));
  const [conn, setConn] = useState<{ id: string; path: string } | null>(null);
  const [listTick, setListTick] = useState(0);
  const listing = useLoad(() => (conn ? post<{ path: string; entries: RemoteEntry[] }>(`/remote-fs/connections/${enc(conn.id)}/list`, { path: conn.path }) : Promise.resolve(null)), [conn?.id, conn?.path, listTick]);
  const [tTick, setTTick] = useState(0);
  const transfers = useLoad(() => get<{ transfers: Transfer[] }>("/remote-fs/transfers"), [tTick]);
  const [localDir, setLocalDir] = useState("");
  const [localFile, setLocalFile] = useState("");
  const [run, error] = useAction();
  const list = transfers.data?.transfers ?? [];
  const active = list.some((t) => ACTIVE.has(t.state));
  // follow progress: poll every 500 ms while a transfer is queued or running; then refresh the folder and connections once
  useEffect(() => {
    if (!active) return;
    const t = setTimeout(() => setTTick((x) => x + 1), 500);
    return () => clearTimeout(t);
  }, [active, transfers.data]);
  // a transfer that has just finished (seen running or not) refreshes the folder shown and the connections' states
  const finished = useRef<Set<string> | null>(null);
  useEffect(() => {
    if (!transfers.data) return;
    const ids = new Set(list.filter((t) => !ACTIVE.has(t.state) && t.state !== "paused").map((t) => t.transferId));
    const known = finished.current;
    finished.current = ids;
    if (known && [...ids].some((id) => !known.has(id))) (setListTick((x) => x + 1), conns.reload());
  }, [transfers.data]);
  // the connection's state changes when it is first used
  useEffect(() => {
    if (conn) conns.reload();
  }, [listing.data, listing.error]);
  const transfer = (what: "download" | "upload", body: Record<string, string>) =>
    run(async () => {
      const local = body.local_path!;
      if (!isAbsolute(local)) throw new Error(`the local path must be absolute (a path on the machine tapwire runs on): ${local || "(empty)"}`);
      await post(`/remote-fs/connections/${enc(conn!.id)}/${what}`, body);
      setTTick((x) => x + 1);
    });
  const act = (t: Transfer, what: "cancel" | "pause" | "resume") => run(async () => (await post(`/remote-fs/transfers/${enc(t.transferId)}/${what}`), setTTick((x) => x + 1)));
  return (
    <div class="remote">
      <ErrorBox error={error} />
      <div class="split">
        <div class="list-pane narrow">
          <Section title="Connections" actions={<button onClick={conns.reload}>Refresh</button>}>
            <ErrorBox error={conns.error} />
            <ul class="plain-list">
              {(conns.data?.connections ?? []).map((c) => (
                <li class={conn?.id === c.id ? "selected" : ""}>
                  <button class="link item" onClick={() => setConn({ id: c.id, path: c.homePath || "/" })} data-conn-id={c.id}>
                    {c.label || c.id}
                  </button>
                  <div class="muted">
                    {c.protocol}://{c.host} · {c.encrypted ? "encrypted" : "not encrypted"} · <span class={c.state === "error" ? "fail" : c.state === "connected" ? "pass" : ""}>{c.state}</span>
                  </div>
                  {c.last_error && <div class="fail">{c.last_error.message}</div>}
                </li>
              ))}
              {conns.data?.connections.length === 0 && <li class="muted">No connections: add them to remote-connections.json in the data folder.</li>}
            </ul>
          </Section>
        </div>
        <div class="detail">
          {!conn && <div class="empty muted">Pick a connection to browse it.</div>}
          {conn && (
            <Section
              title={listing.data?.path ?? conn.path}
              actions={
                <>
                  <button disabled={conn.path === "/"} onClick={() => setConn({ ...conn, path: parentOf(listing.data?.path ?? conn.path) })}>
                    Up
                  </button>
                  <button onClick={() => setListTick((x) => x + 1)}>Refresh</button>
                </>
              }
            >
              <div class="row">
                <label for="remote-local-dir">Download to (local folder)</label>
                <input id="remote-local-dir" class="grow" placeholder="/home/me/Downloads" value={localDir} onInput={(e) => setLocalDir(inputValue(e))} />
              </div>
              <form
                class="row"
                onSubmit={(e) => {
                  e.preventDefault();
                  void transfer("upload", { local_path: localFile.trim(), remote_path: joinRemote(listing.data?.path ?? conn.path, baseName(localFile.trim())) });
                }}
              >
                <label for="remote-local-file">Upload (local file)</label>
                <input id="remote-local-file" class="grow" placeholder="/home/me/report.pdf" value={localFile} onInput={(e) => setLocalFile(inputValue(e))} />
                <button type="submit">Upload here</button>
              </form>
              <ErrorBox error={listing.error} />
              <table class="grid files">
                <thead>
                  <tr>
                    <th>Name</th>
                    <th>Size</th>
                    <th>Modified</th>
                    <th />
                  </tr>
                </thead>
                <tbody>
                  {(listing.data?.entries ?? []).map((e) => (
                    <tr>
                      <td>
                        {e.isDir ? (
                          <button class="link item" onClick={() => setConn({ ...conn, path: e.path })} data-dir={e.name}>
                            {e.name}/
                          </button>
                        ) : (
                          e.name
                        )}
                      </td>
                      <td>{e.isDir ? "" : formatSize(e.size)}</td>
                      <td class="muted">{e.modifiedMs ? new Date(e.modifiedMs).toLocaleString() : ""}</td>
                      <td>
                        {!e.isDir && (
                          <button class="link" aria-label={`download ${e.name}`} onClick={() => void transfer("download", { remote_path: e.path, local_path: localDir.trim() ? joinLocal(localDir.trim(), e.name) : "" })}>
                            download
                          </button>
                        )}
                      </td>
                    </tr>
                  ))}
                  {listing.data?.entries.length === 0 && (
                    <tr>
                      <td colSpan={4} class="muted">
                        empty folder
                      </td>
                    </tr>
                  )}
                </tbody>
              </table>
            </Section>
          )}
        </div>
      </div>
      <Section title={`Transfers${active ? " (running)" : ""}`} actions={<button onClick={() => setTTick((x) => x + 1)}>Refresh</button>}>
        <ErrorBox error={transfers.error} />
        <table class="grid transfers">
          <thead>
            <tr>
              <th>Kind</th>
              <th>State</th>
              <th>Remote</th>
              <th>Local</th>
              <th>Progress</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {[...list].reverse().map((t) => (
              <tr data-transfer-id={t.transferId} data-state={t.state}>
                <td>{t.kind}</td>
                <td class={t.state === "done" ? "pass" : t.state === "error" ? "fail" : ""}>
                  {t.state}
                  {t.error && <div class="fail">{t.error.message}</div>}
                </td>
                <td>
                  {t.remotePath} <span class="muted">on {t.connectionId}</span>
                </td>
                <td>{t.localPath}</td>
                <td>
                  <progress max={t.totalBytes ?? undefined} value={t.bytesDone} aria-label={`progress of ${baseName(t.remotePath)}`} /> {formatSize(t.bytesDone)}
                  {t.totalBytes !== null && ` of ${formatSize(t.totalBytes)}`}
                </td>
                <td>
                  {(ACTIVE.has(t.state) || t.state === "paused") && (
                    <button class="link danger" onClick={() => void act(t, "cancel")}>
                      cancel
                    </button>
                  )}
                  {ACTIVE.has(t.state) && (
                    <button class="link" onClick={() => void act(t, "pause")}>
                      pause
                    </button>
                  )}
                  {t.state === "paused" && (
                    <button class="link" onClick={() => void act(t, "resume")}>
                      resume
                    </button>
                  )}
                </td>
              </tr>
            ))}
            {list.length === 0 && (
              <tr>
                <td colSpan={6} class="muted">
                  No transfers yet.
                </td>
              </tr>
            )}
          </tbody>
        </table>
      </Section>
    </div>
  );
}
