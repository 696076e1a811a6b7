import { useEffect, useState } from "preact/hooks";
import { del, enc, get, post, put } from "./api.ts";
import { BodyView, headerValue } from "./body.tsx";
import { ErrorBox, Section, StringListEditor, fmtTime, useAction, useLoad } from "./common.tsx";
import { headersToText, textToHeaders } from "./traffic.tsx";

interface Breakpoint {
  pattern: string;
  intercept_request: boolean;
  intercept_response: boolean;
}

export interface Paused {
  id: string;
  phase: "request" | "response";
  method: string;
  url: string;
  host: string;
  paused_at: number;
  resumes_at: number;
  breakpoint?: string;
  intercept_host?: string;
  status_code?: number;
  headers: [string, string][];
  body: string;
  body_encoding: string;
  body_size: number;
  body_truncated: boolean;
}

/** Breakpoints, intercept hosts, and the paused flows (refreshed by the `intercepts` events). */
export function InterceptsView(props: { tick: number }) {
  const paused = useLoad(() => get<Paused[]>("/intercepts"), [props.tick]);
  const [sel, setSel] = useState<string | null>(null);
  const current = paused.data?.find((p) => p.id === sel) ?? null;
  useEffect(() => {
    if (paused.data && paused.data.length && !current) setSel(paused.data[0]!.id);
  }, [paused.data]);
  return (
    <div class="intercepts">
      <div class="col">
        <Section title={`Paused flows (${paused.data?.length ?? 0})`}>
          <ErrorBox error={paused.error} />
          <ul class="plain-list paused-list">
            {(paused.data ?? []).map((p) => (
              <li key={p.id} class={p.id === sel ? "selected" : ""} onClick={() => setSel(p.id)} data-paused={p.id}>
                <span class="badge">{p.phase}</span> <strong>{p.method}</strong> {p.url}
                <div class="muted">
                  by {p.breakpoint ? `breakpoint ${p.breakpoint}` : `intercept host ${p.intercept_host}`} · paused {fmtTime(p.paused_at)} · resumes by itself {fmtTime(p.resumes_at)}
                </div>
              </li>
            ))}
            {paused.data?.length === 0 && <li class="muted">Nothing is paused. Add a breakpoint or an intercept host; matching requests stop here.</li>}
          </ul>
        </Section>
        {current && <PausedEditor key={current.id} p={current} onDone={() => paused.reload()} />}
      </div>
      <div class="col narrow">
        <BreakpointsEditor />
        <InterceptHosts />
      </div>
    </div>
  );
}

function PausedEditor({ p, onDone }: { p: Paused; onDone: () => void }) {
  const binary = p.body_encoding === "base64";
  const [method, setMethod] = useState(p.method);
  const [url, setUrl] = useState(p.url);
  const [status, setStatus] = useState(String(p.status_code ?? ""));
  const [headers, setHeaders] = useState(headersToText(p.headers));
  const [body, setBody] = useState(p.body);
  const [run, error] = useAction();
  const resume = (abort: boolean) =>
    run(async () => {
      const rw: Record<string, unknown> = {};
      if (abort) rw.abort = true;
      else {
        const h = textToHeaders(headers);
        if (headersToText(h) !== headersToText(p.headers)) rw.headers = h;
        if (!p.body_truncated && body !== p.body) {
          rw.body = body;
          rw.body_encoding = binary ? "base64" : "utf8";
        }
        if (p.phase === "request") {
          if (method !== p.method) rw.method = method;
          if (url !== p.url) rw.url = url;
        } else if (status !== String(p.status_code)) rw.status_code = Number(status);
      }
      await post(`/intercepts/${enc(p.id)}/resume`, rw);
      onDone();
    });
  return (
    <Section title={`Edit paused ${p.phase} #${p.id}`}>
      <ErrorBox error={error} />
      <div class="form" data-testid="paused-editor">
        {p.phase === "request" ? (
          <div class="row">
            <input class="tiny" aria-label="method" value={method} onInput={(e) => setMethod((e.target as HTMLInputElement).value)} />
            <input class="grow" aria-label="url" value={url} onInput={(e) => setUrl((e.target as HTMLInputElement).value)} />
          </div>
        ) : (
          <div class="row">
            <label>Status</label>
            <input class="tiny" aria-label="status" value={status} onInput={(e) => setStatus((e.target as HTMLInputElement).value)} />
            <span class="muted">
              {p.method} {p.url}
            </span>
          </div>
        )}
        <label>Headers</label>
        <textarea rows={7} aria-label="headers" value={headers} onInput={(e) => setHeaders((e.target as HTMLTextAreaElement).value)} />
        <label>Body{binary ? " (base64)" : ""}{p.body_truncated ? " — preview only (truncated), not editable" : ""}</label>
        <textarea rows={7} aria-label="body" value={body} readOnly={p.body_truncated} onInput={(e) => setBody((e.target as HTMLTextAreaElement).value)} />
        {p.body && <BodyView body={p.body} encoding={p.body_encoding} contentType={headerValue(p.headers, "content-type")} size={p.body_size} truncated={p.body_truncated} />}
        <div class="row">
          <button class="primary" onClick={() => void resume(false)}>
            Resume
          </button>
          <button class="danger" onClick={() => void resume(true)}>
            Abort
          </button>
        </div>
      </div>
    </Section>
  );
}

function BreakpointsEditor() {
  const list = useLoad(() => get<Breakpoint[]>("/breakpoints"));
  const [pattern, setPattern] = useState("");
  const [req, setReq] = useState(true);
  const [res, setRes] = useState(false);
  const [run, error] = useAction();
  return (
    <Section title="Breakpoints">
      <ErrorBox error={list.error || error} />
      <form
        class="form"
        data-testid="breakpoint-form"
        onSubmit={(e) => {
          e.preventDefault();
          void run(async () => {
            await put("/breakpoints", { pattern, intercept_request: req, intercept_response: res });
            setPattern("");
            list.reload();
          });
        }}
      >
        <input aria-label="breakpoint pattern" placeholder="https://api.example.com/v1/*" value={pattern} onInput={(e) => setPattern((e.target as HTMLInputElement).value)} />
        <div class="row">
          <label>
            <input type="checkbox" checked={req} onChange={(e) => setReq((e.target as HTMLInputElement).checked)} /> request
          </label>
          <label>
            <input type="checkbox" checked={res} onChange={(e) => setRes((e.target as HTMLInputElement).checked)} /> response
          </label>
          <button type="submit">Add breakpoint</button>
        </div>
      </form>
      <ul class="plain-list">
        {(list.data ?? []).map((b) => (
          <li key={b.pattern}>
            <code>{b.pattern}</code> <span class="muted">{[b.intercept_request && "request", b.intercept_response && "response"].filter(Boolean).join(" + ")}</span>
            <button class="link danger" onClick={() => void run(async () => (await post("/breakpoints/delete", { pattern: b.pattern }), list.reload()))}>
              remove
            </button>
          </li>
        ))}
        {list.data?.length === 0 && <li class="muted">none</li>}
      </ul>
    </Section>
  );
}

function InterceptHosts() {
  const list = useLoad(() => get<string[]>("/intercept-hosts"));
  return (
    <StringListEditor
      name="intercept-hosts"
      title="Intercept hosts"
      placeholder="api.example.com or *.example.com"
      items={list.data}
      error={list.error}
      onAdd={async (h) => (await put(`/intercept-hosts/${enc(h)}`), list.reload())}
      onRemove={async (h) => (await del(`/intercept-hosts/${enc(h)}`), list.reload())}
    />
  );
}
