import type { ComponentChildren } from "preact";
import { useCallback, useEffect, useState } from "preact/hooks";
import { ApiError, errorText } from "./api.ts";

/** Loads something from the API; `reload` fetches again. A missing route shows "not available in this build". */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[] = []): { data: T | undefined; error: unknown; reload: () => void; loading: boolean } {
  const [state, setState] = useState<{ data: T | undefined; error: unknown; loading: boolean }>({ data: undefined, error: null, loading: true });
  const [n, setN] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => live && setState({ data, error: null, loading: false }),
      (error) => live && setState({ data: undefined, error, loading: false }),
    );
    return () => {
      live = false;
    };
  }, [...deps, n]);
  const reload = useCallback(() => setN((x) => x + 1), []);
  return { ...state, reload };
}

export function ErrorBox({ error }: { error: unknown }) {
  if (!error) return null;
  const missing = error instanceof ApiError && error.missingRoute;
  return (
    <div class={missing ? "notice" : "error-box"} role="alert">
      {missing ? "Not available in this build of tapwire." : errorText(error)}
    </div>
  );
}

export function Tabs<T extends string>(props: { tabs: [T, string][]; value: T; onChange: (t: T) => void; class?: string }) {
  return (
    <div class={"tabs " + (props.class ?? "")} role="tablist">
      {props.tabs.map(([id, label]) => (
        <button role="tab" aria-selected={props.value === id} class={props.value === id ? "tab on" : "tab"} onClick={() => props.onChange(id)} data-tab={id}>
          {label}
        </button>
      ))}
    </div>
  );
}

/** Runs an action, showing its error; returns its result or undefined. */
export function useAction(): [(fn: () => Promise<unknown>) => Promise<unknown>, unknown, () => void] {
  const [error, setError] = useState<unknown>(null);
  const run = useCallback(async (fn: () => Promise<unknown>) => {
    setError(null);
    try {
      return await fn();
    } catch (e) {
      setError(e);
      return undefined;
    }
  }, []);
  return [run, error, () => setError(null)];
}

export function Section(props: { title: string; children: ComponentChildren; actions?: ComponentChildren }) {
  return (
    <section class="section">
      <header class="section-head">
        <h3>{props.title}</h3>
        <div class="actions">{props.actions}</div>
      </header>
      {props.children}
    </section>
  );
}

/** An editable list of strings (ignored hosts, ignored clients, intercept hosts). */
export function StringListEditor(props: { title: string; items: string[] | undefined; error: unknown; placeholder: string; onAdd: (v: string) => Promise<unknown>; onRemove: (v: string) => Promise<unknown>; name: string }) {
  const [value, setValue] = useState("");
  const [run, err] = useAction();
  return (
    <Section title={props.title}>
      <ErrorBox error={props.error || err} />
      <form
        class="row"
        data-list={props.name}
        onSubmit={(e) => {
          e.preventDefault();
          const v = value.trim();
          if (v) void run(() => props.onAdd(v)).then(() => setValue(""));
        }}
      >
        <input value={value} onInput={(e) => setValue((e.target as HTMLInputElement).value)} placeholder={props.placeholder} aria-label={`add to ${props.title}`} />
        <button type="submit">Add</button>
      </form>
      <ul class="plain-list">
        {(props.items ?? []).map((h) => (
          <li key={h}>
            <code>{h}</code>
            <button class="link danger" onClick={() => void run(() => props.onRemove(h))} aria-label={`remove ${h}`}>
              remove
            </button>
          </li>
        ))}
        {props.items && props.items.length === 0 && <li class="muted">none</li>}
      </ul>
    </Section>
  );
}

export function Json({ value }: { value: unknown }) {
  return <pre class="source">{JSON.stringify(value, null, 2)}</pre>;
}

export function fmtTime(ms: number | null | undefined): string {
  if (!ms) return "";
  const d = new Date(ms);
  return d.toLocaleTimeString(undefined, { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
}
