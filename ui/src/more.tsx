import { useState } from "preact/hooks";
import { enc, get, post } from "./api.ts";
import { BodyView, HeadersTable, headerValue } from "./body.tsx";
import { ErrorBox, Json, Section, Tabs, useAction, useLoad } from "./common.tsx";

/** Sessions (spec 4.8): live tabs and saved sessions, each with its entries. */
export function SessionsView() {
  const tabs = useLoad(() => get<unknown>("/session-tabs"));
  const saved = useLoad(() => get<unknown>("/session-tabs/saved"));
  const [open, setOpen] = useState<{ path: string; title: string } | null>(null);
  const entries = useLoad(() => (open ? get<unknown>(open.path) : Promise.resolve(null)), [open?.path]);
  const list = (v: unknown): Record<string, unknown>[] => (Array.isArray(v) ? v : v && typeof v === "object" ? ((Object.values(v).find(Array.isArray) as Record<string, unknown>[]) ?? []) : []);
  const row = (s: Record<string, unknown>, base: string) => (
    <li onClick={() => setOpen({ path: `${base}/${enc(String(s.id))}`, title: String(s.name ?? s.id) })}>
      <strong>{String(s.name ?? s.title ?? s.id)}</strong> <span class="muted">{s.entry_count !== undefined ? `${s.entry_count} entries` : ""}</span>
    </li>
  );
  return (
    <div class="split">
      <div class="list-pane narrow">
        <Section title="Session tabs">
          <ErrorBox error={tabs.error} />
          <ul class="plain-list">{list(tabs.data).map((s) => row(s, "/session-tabs"))}</ul>
        </Section>
        <Section title="Saved sessions">
          <ErrorBox error={saved.error} />
          <ul class="plain-list">{list(saved.data).map((s) => row(s, "/session-tabs/saved"))}</ul>
        </Section>
      </div>
      <div class="detail">
        {open && (
          <Section title={open.title}>
            <ErrorBox error={entries.error} />
            <Json value={entries.data} />
          </Section>
        )}
      </div>
    </div>
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

function allRequests(c: { requests?: ComposeRequest[]; folders?: Folder[] }): ComposeRequest[] {
  return [...(c.requests ?? []), ...(c.folders ?? []).flatMap(allRequests)];
}

/** Compose (spec 4.9): collections, their requests, send one and see the response. */
export function ComposeView() {
  const cols = useLoad(() => get<CollectionSummary[]>("/compose/collections"));
  const [sel, setSel] = useState<string | null>(null);
  const col = useLoad(() => (sel ? get<{ requests?: ComposeRequest[]; folders?: Folder[]; environments?: { name: string }[] }>(`/compose/collections/${enc(sel)}`) : Promise.resolve(null)), [sel]);
  const [env, setEnv] = useState("");
  const [res, setRes] = useState<{ status?: number | null; status_code?: number; headers?: unknown; body?: string; body_encoding?: string; duration_ms?: number; error?: string | null } | null>(null);
  const [run, error] = useAction();
  return (
    <div class="split">
      <div class="list-pane narrow">
        <Section title="Collections">
          <ErrorBox error={cols.error} />
          <ul class="plain-list">
            {(cols.data ?? []).map((c) => (
              <li class={c.id === sel ? "selected" : ""} onClick={() => setSel(c.id)}>
                <strong>{c.name}</strong> <span class="muted">{c.request_count} requests</span>
              </li>
            ))}
            {cols.data?.length === 0 && <li class="muted">No collections (create them with the API or import a Postman collection).</li>}
          </ul>
        </Section>
      </div>
      <div class="detail">
        {col.data && (
          <Section title="Requests">
            <div class="row">
              <label>Environment</label>
              <select value={env} onChange={(e) => setEnv((e.target as HTMLSelectElement).value)}>
                <option value="">(none)</option>
                {(col.data.environments ?? []).map((e) => (
                  <option value={e.name}>{e.name}</option>
                ))}
              </select>
            </div>
            <ul class="plain-list">
              {allRequests(col.data).map((r) => (
                <li>
                  <strong>{r.method}</strong> {r.name} <span class="muted">{r.url}</span>
                  <button class="link" onClick={() => void run(async () => setRes(await post("/compose/send", { collection_id: sel, request_id: r.id, ...(env ? { environment: env } : {}), variables: {} })))}>
                    send
                  </button>
                </li>
              ))}
            </ul>
          </Section>
        )}
        <ErrorBox error={col.error || error} />
        {res && (
          <Section title={`Response ${res.status_code ?? res.status ?? ""} · ${res.duration_ms ?? "?"} ms`}>
            {res.error && <div class="error-box">{res.error}</div>}
            {Array.isArray(res.headers) && <HeadersTable headers={res.headers as [string, string][]} />}
            <BodyView body={res.body ?? ""} encoding={res.body_encoding ?? "utf8"} contentType={Array.isArray(res.headers) ? headerValue(res.headers as [string, string][], "content-type") : ""} />
          </Section>
        )}
      </div>
    </div>
  );
}

/** Flows (spec 4.14): the stored flows; run one and see its report. */
export function FlowsView() {
  const flows = useLoad(() => get<{ flows: { id: string; name: string; nodeCount: number; edgeCount: number; updatedAt: number }[] }>("/flows"));
  const [report, setReport] = useState<unknown>(null);
  const [run, error] = useAction();
  return (
    <div>
      <Section title="Flows">
        <ErrorBox error={flows.error || error} />
        <table class="grid">
          <tbody>
            {(flows.data?.flows ?? []).map((f) => (
              <tr>
                <td>
                  <strong>{f.name}</strong>
                </td>
                <td class="muted">
                  {f.nodeCount} nodes · {f.edgeCount} edges · updated {new Date(f.updatedAt).toLocaleString()}
                </td>
                <td>
                  <button onClick={() => void run(async () => setReport(await post(`/flows/${enc(f.id)}/run`)))}>Run</button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </Section>
      {report !== null && (
        <Section title="Run report">
          <Json value={report} />
        </Section>
      )}
    </div>
  );
}

interface RemoteEntry {
  name: string;
  path: string;
  isDir: boolean;
  size: number;
  modifiedMs?: number;
}

/** Remote files (spec 4.13): connections, a directory browser, transfers. */
export function RemoteView() {
  const conns = useLoad(() => get<{ connections: { id: string; protocol: string; host: string; label: string; homePath: string }[] }>("/remote-fs/connections"));
  const [tab, setTab] = useState<"browse" | "transfers">("browse");
  const [conn, setConn] = useState<{ id: string; path: string } | null>(null);
  const listing = useLoad(() => (conn ? post<{ path: string; entries: RemoteEntry[] }>(`/remote-fs/connections/${enc(conn.id)}/list`, { path: conn.path }) : Promise.resolve(null)), [conn?.id, conn?.path]);
  const [tick, setTick] = useState(0);
  const transfers = useLoad(() => get<{ transfers: { transferId: string; kind: string; state: string; remotePath: string; localPath: string; bytesDone: number }[] }>("/remote-fs/transfers"), [tick, tab]);
  const [local, setLocal] = useState("");
  const [run, error] = useAction();
  const parent = (p: string) => p.replace(/\/[^/]+\/?$/, "") || "/";
  return (
    <div>
      <Tabs
        tabs={[
          ["browse", "Browse"],
          ["transfers", "Transfers"],
        ]}
        value={tab}
        onChange={setTab}
        class="sub"
      />
      <ErrorBox error={conns.error || error} />
      {tab === "browse" && (
        <div class="split">
          <div class="list-pane narrow">
            <ul class="plain-list">
              {(conns.data?.connections ?? []).map((c) => (
                <li class={conn?.id === c.id ? "selected" : ""} onClick={() => setConn({ id: c.id, path: c.homePath || "/" })}>
                  <strong>{c.label}</strong> <span class="muted">{c.protocol}://{c.host}</span>
                </li>
              ))}
            </ul>
          </div>
          <div class="detail">
            {conn && (
              <Section title={conn.path} actions={<button onClick={() => setConn({ ...conn, path: parent(conn.path) })}>Up</button>}>
                <ErrorBox error={listing.error} />
                <div class="row">
                  <input class="grow" placeholder="local path for downloads and uploads" value={local} onInput={(e) => setLocal((e.target as HTMLInputElement).value)} />
                  <button onClick={() => void run(async () => (await post(`/remote-fs/connections/${enc(conn.id)}/upload`, { local_path: local, remote_path: conn.path.replace(/\/$/, "") + "/" + local.split("/").pop() }), setTick((x) => x + 1)))}>Upload here</button>
                </div>
                <table class="grid">
                  <tbody>
                    {(listing.data?.entries ?? []).map((e) => (
                      <tr>
                        <td>{e.isDir ? <a href="#" onClick={(ev) => (ev.preventDefault(), setConn({ ...conn, path: e.path }))}>{e.name}/</a> : e.name}</td>
                        <td>{e.isDir ? "" : e.size}</td>
                        <td>{!e.isDir && <button class="link" onClick={() => void run(async () => (await post(`/remote-fs/connections/${enc(conn.id)}/download`, { remote_path: e.path, local_path: local || e.name }), setTick((x) => x + 1)))}>download</button>}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </Section>
            )}
          </div>
        </div>
      )}
      {tab === "transfers" && (
        <Section title="Transfers" actions={<button onClick={() => setTick((x) => x + 1)}>Refresh</button>}>
          <ErrorBox error={transfers.error} />
          <table class="grid">
            <tbody>
              {(transfers.data?.transfers ?? []).map((t) => (
                <tr>
                  <td>{t.kind}</td>
                  <td>{t.state}</td>
                  <td>{t.remotePath}</td>
                  <td>{t.localPath}</td>
                  <td>{t.bytesDone}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </Section>
      )}
    </div>
  );
}
