import { useState } from "preact/hooks";
import { del, enc, get, post, put } from "./api.ts";
import { ErrorBox, Json, Section, StringListEditor, Tabs, useAction, useLoad } from "./common.tsx";

type FieldType = "text" | "textarea" | "code" | "number" | "nullnum" | "nulltext" | "bool" | "select" | "headerObj" | "headerPairs";
interface Field {
  name: string;
  type: FieldType;
  label?: string;
  options?: string[];
  placeholder?: string;
}
type Rule = Record<string, unknown> & { id: string; enabled: boolean };

interface Family {
  title: string;
  /** GET snapshot; also the base of /rules, /enabled */
  base: string;
  fields: Field[];
  defaults: () => Rule;
  summary: (r: Rule) => string;
  /** scripts use their own paths */
  scripts?: boolean;
}

const pairsToText = (v: unknown) => (Array.isArray(v) ? (v as [string, string][]).map(([n, x]) => `${n}: ${x}`).join("\n") : "");
const objToText = (v: unknown) => (v && typeof v === "object" ? Object.entries(v as Record<string, string>).map(([n, x]) => `${n}: ${x}`).join("\n") : "");
function textToPairs(t: string): [string, string][] {
  return t
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => {
      const i = l.indexOf(":");
      if (i <= 0) throw new Error(`header line without a name: ${l}`);
      return [l.slice(0, i).trim(), l.slice(i + 1).trim()];
    });
}

const newId = (prefix: string) => `${prefix}_${Date.now()}`;

export const MAP_LOCAL: Family = {
  title: "Map Local",
  base: "/map-local",
  fields: [
    { name: "id", type: "text" },
    { name: "url_pattern", type: "text", placeholder: "https://api.example.com/v1/**" },
    { name: "method", type: "text" },
    { name: "match_all_methods", type: "bool" },
    { name: "enabled", type: "bool" },
    { name: "source", type: "select", options: ["inline_body", "local_file"] },
    { name: "file_path", type: "nulltext", placeholder: "/absolute/path" },
    { name: "inline_body", type: "textarea" },
    { name: "inline_format", type: "nulltext", placeholder: "application/json" },
    { name: "status_code", type: "number" },
    { name: "response_headers", type: "headerObj" },
    { name: "delay_ms", type: "number" },
  ],
  defaults: () => ({ id: newId("ml"), url_pattern: "", method: "GET", match_all_methods: true, enabled: true, source: "inline_body", file_path: null, inline_body: "", inline_format: "application/json", status_code: 200, response_headers: {}, delay_ms: 0 }),
  summary: (r) => `${r.match_all_methods ? "*" : r.method} ${r.url_pattern} → ${r.status_code} ${r.source === "local_file" ? r.file_path : "inline"}`,
};

export const MAP_REMOTE: Family = {
  title: "Map Remote",
  base: "/map-remote",
  fields: [
    { name: "id", type: "text" },
    { name: "enabled", type: "bool" },
    { name: "source_scheme", type: "select", options: ["https", "http"] },
    { name: "source_host", type: "text" },
    { name: "source_port", type: "nullnum" },
    { name: "source_path", type: "text", placeholder: "/v1/*" },
    { name: "method", type: "text" },
    { name: "match_all_methods", type: "bool" },
    { name: "dest_scheme", type: "select", options: ["https", "http"] },
    { name: "dest_host", type: "text" },
    { name: "dest_port", type: "nullnum" },
    { name: "dest_path", type: "text", placeholder: "/v2/$1" },
    { name: "preserve_original_host_header", type: "bool" },
  ],
  defaults: () => ({ id: newId("mr"), enabled: true, source_scheme: "https", source_host: "", source_port: null, source_path: "/*", method: "GET", match_all_methods: true, dest_scheme: "https", dest_host: "", dest_port: null, dest_path: "/$1", preserve_original_host_header: false }),
  summary: (r) => `${r.source_scheme}://${r.source_host}${r.source_port ? ":" + r.source_port : ""}${r.source_path} → ${r.dest_scheme}://${r.dest_host}${r.dest_port ? ":" + r.dest_port : ""}${r.dest_path}`,
};

export const MOCK: Family = {
  title: "Mock",
  base: "/mock",
  fields: [
    { name: "id", type: "text" },
    { name: "name", type: "text" },
    { name: "enabled", type: "bool" },
    { name: "method", type: "text", placeholder: "empty = any" },
    { name: "url_pattern", type: "text", placeholder: "/api/users/*" },
    { name: "status_code", type: "number" },
    { name: "status_text", type: "nulltext" },
    { name: "headers", type: "headerPairs" },
    { name: "body", type: "textarea" },
    { name: "body_is_base64", type: "bool" },
    { name: "latency_ms", type: "nullnum" },
  ],
  defaults: () => ({ id: newId("mock"), name: "", enabled: true, method: "GET", url_pattern: "/", status_code: 200, status_text: null, headers: [["Content-Type", "application/json"]], body: "", body_is_base64: false, latency_ms: null }),
  summary: (r) => `${r.name ? r.name + ": " : ""}${r.method || "*"} ${r.url_pattern} → ${r.status_code}`,
};

export const SCRIPTS: Family = {
  title: "Scripts",
  base: "/script-rules",
  scripts: true,
  fields: [
    { name: "id", type: "text" },
    { name: "name", type: "text" },
    { name: "method", type: "text", placeholder: "empty = any" },
    { name: "url_pattern", type: "text", placeholder: "https://api.example.com/**" },
    { name: "apply_to_request", type: "bool" },
    { name: "request_script", type: "code" },
    { name: "apply_to_response", type: "bool" },
    { name: "response_script", type: "code" },
    { name: "enabled", type: "bool" },
  ],
  defaults: () => ({ id: newId("ui"), name: "", method: "", url_pattern: "", request_script: "", response_script: "", apply_to_request: false, apply_to_response: true, enabled: true }),
  summary: (r) => `${r.name ? r.name + ": " : ""}${r.method || "*"} ${r.url_pattern} ${[r.apply_to_request && "request", r.apply_to_response && "response"].filter(Boolean).join(" + ")}`,
};

export function RulesView() {
  const [tab, setTab] = useState<"map-local" | "map-remote" | "mock" | "scripts" | "ignore" | "throttle">("map-local");
  return (
    <div class="rules">
      <Tabs
        tabs={[
          ["map-local", "Map Local"],
          ["map-remote", "Map Remote"],
          ["mock", "Mock"],
          ["scripts", "Scripts"],
          ["ignore", "Ignored"],
          ["throttle", "Throttle"],
        ]}
        value={tab}
        onChange={setTab}
        class="sub"
      />
      {tab === "map-local" && <RuleFamily key="ml" f={MAP_LOCAL} />}
      {tab === "map-remote" && <RuleFamily key="mr" f={MAP_REMOTE} />}
      {tab === "mock" && (
        <>
          <MockListener />
          <RuleFamily key="mock" f={MOCK} />
        </>
      )}
      {tab === "scripts" && (
        <>
          <RuleFamily key="sc" f={SCRIPTS} />
          <ScriptTest />
        </>
      )}
      {tab === "ignore" && <Ignored />}
      {tab === "throttle" && <Throttle />}
    </div>
  );
}

function RuleFamily({ f }: { f: Family }) {
  const snap = useLoad(() => get<Record<string, unknown>>(f.base));
  const [editing, setEditing] = useState<{ rule: Rule; isNew: boolean } | null>(null);
  const [run, error] = useAction();
  const master = f.scripts ? (snap.data?.scripting_enabled as boolean | undefined) : (snap.data?.enabled as boolean | undefined);
  const rules = (snap.data?.rules as Rule[] | undefined) ?? [];
  const rulePath = (id: string) => (f.scripts ? `${f.base}/${enc(id)}` : `${f.base}/rules/${enc(id)}`);
  return (
    <Section
      title={`${f.title} rules`}
      actions={
        <>
          <label class="switch">
            <input
              type="checkbox"
              checked={!!master}
              aria-label={`${f.title} enabled`}
              onChange={(e) => void run(async () => (await put(f.scripts ? `${f.base}/toggle` : `${f.base}/enabled`, { enabled: (e.target as HTMLInputElement).checked }), snap.reload()))}
            />{" "}
            enabled
          </label>
          <button onClick={() => setEditing({ rule: f.defaults(), isNew: true })} data-testid={`new-${f.base.slice(1)}`}>
            New rule
          </button>
        </>
      }
    >
      <ErrorBox error={snap.error || error} />
      <table class="grid">
        <tbody>
          {rules.map((r) => (
            <tr key={r.id} data-rule={r.id}>
              <td>
                <input type="checkbox" checked={r.enabled} aria-label={`toggle ${r.id}`} onChange={() => void run(async () => (await post(`${rulePath(r.id)}/toggle`), snap.reload()))} />
              </td>
              <td>
                <code>{r.id}</code>
              </td>
              <td class="grow">{f.summary(r)}</td>
              <td>
                <button class="link" onClick={() => setEditing({ rule: structuredClone(r), isNew: false })}>
                  edit
                </button>
                <button class="link danger" onClick={() => void run(async () => (await del(rulePath(r.id)), snap.reload()))}>
                  delete
                </button>
              </td>
            </tr>
          ))}
          {rules.length === 0 && !snap.loading && (
            <tr>
              <td class="muted">no rules</td>
            </tr>
          )}
        </tbody>
      </table>
      {editing && (
        <RuleForm
          f={f}
          rule={editing.rule}
          isNew={editing.isNew}
          onCancel={() => setEditing(null)}
          onSave={async (r) => {
            if (editing.isNew) await post(f.scripts ? f.base : `${f.base}/rules`, r);
            else await put(rulePath(editing.rule.id), r);
            setEditing(null);
            snap.reload();
          }}
        />
      )}
    </Section>
  );
}

function RuleForm(props: { f: Family; rule: Rule; isNew: boolean; onCancel: () => void; onSave: (r: Rule) => Promise<void> }) {
  const [vals, setVals] = useState<Record<string, unknown>>(() => {
    const v: Record<string, unknown> = {};
    for (const fd of props.f.fields) {
      const x = props.rule[fd.name];
      v[fd.name] = fd.type === "headerObj" ? objToText(x) : fd.type === "headerPairs" ? pairsToText(x) : fd.type === "nullnum" || fd.type === "nulltext" ? (x ?? "") : x;
    }
    return v;
  });
  const [run, error] = useAction();
  const set = (n: string, v: unknown) => setVals((s) => ({ ...s, [n]: v }));
  const build = (): Rule => {
    const out: Record<string, unknown> = {};
    for (const fd of props.f.fields) {
      const v = vals[fd.name];
      if (fd.type === "number") {
        if (!/^\d+$/.test(String(v))) throw new Error(`${fd.name}: a whole number`);
        out[fd.name] = Number(v);
      } else if (fd.type === "nullnum") {
        if (v !== "" && !/^\d+$/.test(String(v))) throw new Error(`${fd.name}: a whole number or empty`);
        out[fd.name] = v === "" ? null : Number(v);
      } else if (fd.type === "nulltext") out[fd.name] = v === "" ? null : v;
      else if (fd.type === "headerObj") out[fd.name] = Object.fromEntries(textToPairs(String(v ?? "")));
      else if (fd.type === "headerPairs") out[fd.name] = textToPairs(String(v ?? ""));
      else out[fd.name] = v;
    }
    return out as Rule;
  };
  return (
    <div class="modal" role="dialog" aria-label={`${props.f.title} rule`}>
      <form
        class="modal-box form rule-form"
        data-testid="rule-form"
        onSubmit={(e) => {
          e.preventDefault();
          void run(() => props.onSave(build()));
        }}
      >
        <h3>
          {props.isNew ? "New" : "Edit"} {props.f.title} rule
        </h3>
        <ErrorBox error={error} />
        <div class="fields">
          {props.f.fields.map((fd) => {
            const v = vals[fd.name];
            const onText = (e: Event) => set(fd.name, (e.target as HTMLInputElement).value);
            const id = `f-${fd.name}`;
            return (
              <div class={`field ${fd.type}`}>
                <label for={id}>{fd.label ?? fd.name}</label>
                {fd.type === "bool" ? (
                  <input id={id} name={fd.name} type="checkbox" checked={!!v} onChange={(e) => set(fd.name, (e.target as HTMLInputElement).checked)} />
                ) : fd.type === "select" ? (
                  <select id={id} name={fd.name} value={String(v)} onChange={onText}>
                    {fd.options!.map((o) => (
                      <option value={o}>{o}</option>
                    ))}
                  </select>
                ) : fd.type === "textarea" || fd.type === "code" || fd.type === "headerObj" || fd.type === "headerPairs" ? (
                  <textarea id={id} name={fd.name} class={fd.type === "code" ? "code" : ""} rows={fd.type === "code" ? 8 : 4} spellcheck={false} value={String(v ?? "")} onInput={onText} placeholder={fd.type.startsWith("header") ? "Name: value" : fd.placeholder} />
                ) : (
                  <input id={id} name={fd.name} value={String(v ?? "")} onInput={onText} placeholder={fd.placeholder} readOnly={fd.name === "id" && !props.isNew} />
                )}
              </div>
            );
          })}
        </div>
        <div class="row">
          <button type="submit" class="primary">
            Save
          </button>
          <button type="button" onClick={props.onCancel}>
            Cancel
          </button>
        </div>
      </form>
    </div>
  );
}

function MockListener() {
  const status = useLoad(() => get<{ running: boolean; port: number }>("/mock/status"));
  const [port, setPort] = useState("9100");
  const [run, error] = useAction();
  return (
    <Section title="Mock listener">
      <ErrorBox error={status.error || error} />
      <div class="row" data-testid="mock-listener">
        <span data-testid="mock-status">{status.data ? (status.data.running ? `running on 127.0.0.1:${status.data.port}` : "stopped") : ""}</span>
        {status.data && !status.data.running && (
          <>
            <input class="tiny" aria-label="mock port" value={port} onInput={(e) => setPort((e.target as HTMLInputElement).value)} />
            <button onClick={() => void run(async () => (await post("/mock/start", { port: Number(port) }), status.reload()))}>Start</button>
          </>
        )}
        {status.data?.running && <button onClick={() => void run(async () => (await post("/mock/stop"), status.reload()))}>Stop</button>}
      </div>
    </Section>
  );
}

interface ScriptOutput {
  console: { level: string; message: string }[];
  tests: { name: string; passed: boolean; error: string | null }[];
  errors: { message: string; line?: number | null }[];
  request?: unknown;
  response?: unknown;
  duration_ms?: number;
}

function ScriptTest() {
  const [script, setScript] = useState('pm.test("status is 200", () => pm.response.to.have.status(200));\nconsole.log(pm.response.json());');
  const [status, setStatus] = useState("200");
  const [body, setBody] = useState('{"ok": true}');
  const [url, setUrl] = useState("https://api.example.com/");
  const [out, setOut] = useState<ScriptOutput | null>(null);
  const [run, error] = useAction();
  return (
    <Section title="Run a script in test mode">
      <ErrorBox error={error} />
      <div class="form" data-testid="script-test">
        <textarea class="code" rows={8} spellcheck={false} aria-label="test script" value={script} onInput={(e) => setScript((e.target as HTMLTextAreaElement).value)} />
        <div class="row">
          <input class="grow" aria-label="request url" value={url} onInput={(e) => setUrl((e.target as HTMLInputElement).value)} />
          <input class="tiny" aria-label="response status" value={status} onInput={(e) => setStatus((e.target as HTMLInputElement).value)} />
        </div>
        <textarea rows={3} aria-label="response body" value={body} onInput={(e) => setBody((e.target as HTMLTextAreaElement).value)} />
        <button
          class="primary"
          onClick={() =>
            void run(async () =>
              setOut(
                await post<ScriptOutput>("/scripts/execute", {
                  input: { script, phase: "test", request: { method: "GET", url, headers: {}, body: "" }, response: { status: Number(status) || 200, headers: { "Content-Type": "application/json" }, body } },
                }),
              ),
            )
          }
        >
          Run in test mode
        </button>
        {out && (
          <div class="script-out" data-testid="script-output">
            <h4>Tests</h4>
            <ul class="plain-list">
              {out.tests.map((t) => (
                <li class={t.passed ? "pass" : "fail"}>
                  {t.passed ? "✓" : "✗"} {t.name} {t.error && <span class="muted">{t.error}</span>}
                </li>
              ))}
              {out.tests.length === 0 && <li class="muted">none</li>}
            </ul>
            <h4>Console</h4>
            <pre class="source">{out.console.map((c) => `[${c.level}] ${c.message}`).join("\n") || "(empty)"}</pre>
            {out.errors.length > 0 && (
              <>
                <h4>Errors</h4>
                <ul class="plain-list">
                  {out.errors.map((e) => (
                    <li class="fail">
                      {e.message}
                      {e.line ? ` (line ${e.line})` : ""}
                    </li>
                  ))}
                </ul>
              </>
            )}
          </div>
        )}
      </div>
    </Section>
  );
}

function Ignored() {
  const hosts = useLoad(() => get<string[]>("/ignored-hosts"));
  const clients = useLoad(() => get<string[]>("/ignored-clients"));
  return (
    <div class="two-cols">
      <StringListEditor name="ignored-hosts" title="Ignored hosts" placeholder="*.example.com" items={hosts.data} error={hosts.error} onAdd={async (h) => (await put(`/ignored-hosts/${enc(h)}`), hosts.reload())} onRemove={async (h) => (await del(`/ignored-hosts/${enc(h)}`), hosts.reload())} />
      <StringListEditor name="ignored-clients" title="Ignored clients" placeholder="process name or IP" items={clients.data} error={clients.error} onAdd={async (h) => (await put(`/ignored-clients/${enc(h)}`), clients.reload())} onRemove={async (h) => (await del(`/ignored-clients/${enc(h)}`), clients.reload())} />
    </div>
  );
}

function Throttle() {
  const global = useLoad(() => get<{ enabled: boolean; bytes_per_second: number | null }>("/throttle"));
  const rules = useLoad(() => get<{ rules: unknown[]; file: string; loaded_at: number | null; error: string | null }>("/throttle-rules"));
  const [bps, setBps] = useState("");
  const [run, error] = useAction();
  return (
    <>
      <Section title="Global throttle">
        <ErrorBox error={global.error || error} />
        <div class="row">
          <span data-testid="throttle-state">{global.data ? (global.data.enabled ? `${global.data.bytes_per_second!.toLocaleString()} bytes/s` : "off") : ""}</span>
          <input class="short" aria-label="bytes per second" placeholder="bytes per second" value={bps} onInput={(e) => setBps((e.target as HTMLInputElement).value)} />
          <button onClick={() => void run(async () => (await put("/throttle", { bytes_per_second: Number(bps) }), global.reload()))}>Set</button>
          <button onClick={() => void run(async () => (await del("/throttle"), global.reload()))}>Turn off</button>
        </div>
      </Section>
      <Section title="Scoped throttle rules" actions={<button onClick={() => void run(async () => (await post("/throttle-rules/reload"), rules.reload()))}>Reload file</button>}>
        <ErrorBox error={rules.error} />
        {rules.data && (
          <>
            <div class="muted">
              {rules.data.file} · {rules.data.loaded_at ? `loaded ${new Date(rules.data.loaded_at).toLocaleString()}` : "not loaded"}
            </div>
            {rules.data.error && <div class="error-box">{rules.data.error}</div>}
            <Json value={rules.data.rules} />
          </>
        )}
      </Section>
    </>
  );
}
