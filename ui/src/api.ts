/** The page's client of the management API: the token from the URL fragment, kept in sessionStorage. */

const KEY = "tapwire.token";

/**
 * Takes `#token=...` from the address (then removes it from the address bar and history), else the token kept by an
 * earlier load of this tab. Returns null when there is none.
 */
export function takeToken(): string | null {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) {
    const token = decodeURIComponent(m[1]!);
    sessionStorage.setItem(KEY, token);
    history.replaceState(null, "", location.pathname + location.search);
    return token;
  }
  return sessionStorage.getItem(KEY);
}

export function forgetToken(): void {
  sessionStorage.removeItem(KEY);
}

let token = "";
let onUnauthorized: () => void = () => {};

export function setToken(t: string, unauthorized: () => void): void {
  token = t;
  onUnauthorized = unauthorized;
}

export function authHeader(): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

/** An API error: `{error: {code, message}}` with its status. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
  /** The route is not in this build of tapwire (a feature built on another branch). */
  get missingRoute(): boolean {
    return this.status === 404 && this.code === "not_found" && this.message === "no such route";
  }
}

export const API = "/api/v1";

/** Calls the API; JSON in and out (text for text/plain answers); throws ApiError for a status >= 400. */
export async function api<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = authHeader();
  const init: RequestInit = { method, headers };
  if (body !== undefined) {
    headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await fetch(API + path, init);
  const type = res.headers.get("content-type") ?? "";
  const text = await res.text();
  if (res.status === 401) onUnauthorized();
  if (res.status >= 400) {
    let code = "http_" + res.status;
    let message = text.slice(0, 300) || res.statusText;
    try {
      const j = JSON.parse(text) as { error?: { code?: string; message?: string } };
      if (j.error) {
        code = j.error.code ?? code;
        message = j.error.message ?? message;
      }
    } catch {}
    throw new ApiError(res.status, code, message);
  }
  if (!text) return undefined as T;
  return (type.includes("json") ? JSON.parse(text) : text) as T;
}

export const get = <T,>(p: string) => api<T>("GET", p);
export const post = <T,>(p: string, b?: unknown) => api<T>("POST", p, b ?? {});
export const put = <T,>(p: string, b?: unknown) => api<T>("PUT", p, b);
export const del = <T,>(p: string) => api<T>("DELETE", p);

export const enc = encodeURIComponent;

/** A query string of the non-empty values. */
export function qs(params: Record<string, string | number | boolean | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  const s = q.toString();
  return s ? "?" + s : "";
}

export function errorText(e: unknown): string {
  if (e instanceof ApiError) return e.missingRoute ? "not available in this build" : `${e.message} (HTTP ${e.status})`;
  return e instanceof Error ? e.message : String(e);
}

export type EventHandler = (event: string, data: Record<string, unknown>) => void;

/**
 * Reads GET /api/v1/events with fetch (EventSource cannot send the Authorization header) and calls `on` per event;
 * reconnects after a second when the stream ends. Returns a stop function.
 */
export function listen(on: EventHandler, onState: (live: boolean) => void): () => void {
  let stopped = false;
  let ctrl: AbortController | null = null;
  const run = async () => {
    while (!stopped) {
      ctrl = new AbortController();
      try {
        const res = await fetch(API + "/events", { headers: authHeader(), signal: ctrl.signal });
        if (res.status === 401) onUnauthorized();
        if (!res.ok || !res.body) throw new Error("events: HTTP " + res.status);
        onState(true);
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let i: number;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            let event = "message";
            let data = "";
            for (const line of block.split("\n")) {
              if (line.startsWith("event:")) event = line.slice(6).trim();
              else if (line.startsWith("data:")) data += line.slice(5).trim();
            }
            if (data) {
              try {
                on(event, JSON.parse(data));
              } catch {}
            }
          }
        }
      } catch {}
      onState(false);
      if (!stopped) await new Promise((r) => setTimeout(r, 1000));
    }
  };
  void run();
  return () => {
    stopped = true;
    ctrl?.abort();
  };
}

/**
 * Fetches `path` with the Authorization header and offers the answer as a file download through a `blob:` URL (the
 * token never goes into a URL). Throws ApiError for a status >= 400.
 */
export async function download(path: string, fileName: string): Promise<number> {
  const res = await fetch(API + path, { headers: authHeader() });
  if (res.status === 401) onUnauthorized();
  if (res.status >= 400) throw toApiError(res, await res.text());
  const blob = await res.blob();
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = fileName;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
  return blob.size;
}

/** POSTs a file's bytes as they are (a HAR document to import), JSON answer. */
export async function postFile<T>(path: string, file: Blob, type = "application/json"): Promise<T> {
  const res = await fetch(API + path, { method: "POST", headers: { ...authHeader(), "content-type": type }, body: file });
  if (res.status === 401) onUnauthorized();
  const text = await res.text();
  if (res.status >= 400) throw toApiError(res, text);
  return (text ? JSON.parse(text) : undefined) as T;
}

function toApiError(res: Response, text: string): ApiError {
  let code = "http_" + res.status;
  let message = text.slice(0, 300) || res.statusText;
  try {
    const j = JSON.parse(text) as { error?: { code?: string; message?: string } };
    if (j.error) ({ code = code, message = message } = j.error);
  } catch {}
  return new ApiError(res.status, code, message);
}
