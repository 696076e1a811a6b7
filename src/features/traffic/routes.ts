import { Elysia, t, type DocumentDecoration, type Static } from "elysia";
import { Value } from "@sinclair/typebox/value";
import { badRequest, checkQueryNames, notFound, UintString } from "../../api/errors.ts";
import type { ListQuery } from "../../store/types.ts";
import { diffEntries } from "./diff.ts";
import { toCurl } from "./export-curl.ts";
import { toRaw } from "./export-raw.ts";
import type { ReplayResult } from "./replay.ts";
import type { CaptureStore } from "../../store/capture-store.ts";
import type { EntryDetail } from "../../store/types.ts";

const Pair = t.Tuple([t.String(), t.String()]);
const Int = (description: string) => t.Optional(UintString(description));

export const TrafficQuery = t.Object({
  limit: Int("page size; default 50, capped at 500; 0 returns no items but the total"),
  offset: Int("default 0"),
  host: t.Optional(t.String({ description: "substring of the host, case-insensitive" })),
  method: t.Optional(t.String({ description: "exact method, case-insensitive" })),
  status: Int("exact status code (sets both status_min and status_max)"),
  status_min: Int("lowest status code"),
  status_max: Int("highest status code"),
  path: t.Optional(t.String({ description: "substring of the URL path (without the query string)" })),
  search: t.Optional(t.String({ description: "substring search across the URL and the decoded request and response bodies, case-insensitive" })),
  has_error: t.Optional(t.BooleanString({ description: "true: status >= 400 only; false: status < 400 only", error: "expected true or false" })),
  since_id: Int("only entries with id > since_id; switches the default order to oldest first"),
  since: Int("only entries with timestamp >= since (ms since epoch)"),
  client: t.Optional(t.String({ description: "extension: exact client label (client_addr: process name or remote IP)" })),
  order: t.Optional(t.Union([t.Literal("asc"), t.Literal("desc")], { description: "extension: id order; default desc (newest first), asc when since_id is given", error: "expected asc or desc" })),
});

const QUERY_NAMES = Object.keys(TrafficQuery.properties);
const NUMERIC = ["limit", "offset", "status", "status_min", "status_max", "since_id", "since"] as const;

/**
 * The store's query from GET /traffic's validated query: every parameter the caller sent is applied (numbers as
 * numbers: the store drops a filter that is not a finite number), an unknown or repeated one is a 400.
 */
export function toListQuery(url: string, query: Record<string, unknown>): ListQuery {
  checkQueryNames(url, QUERY_NAMES);
  const q: ListQuery = {};
  for (const name of NUMERIC) {
    const raw = query[name];
    if (raw === undefined) continue;
    if (typeof raw !== "string" || !/^[0-9]{1,15}$/.test(raw)) throw badRequest(`invalid query parameter '${name}': expected a non-negative integer (at most 15 digits), got ${JSON.stringify(raw)}`);
    q[name] = Number(raw);
  }
  for (const name of ["host", "method", "path", "search", "client"] as const) if (typeof query[name] === "string") q[name] = query[name];
  if (typeof query.has_error === "boolean") q.has_error = query.has_error;
  else if (query.has_error !== undefined) q.has_error = query.has_error === "true";
  if (query.order === "asc" || query.order === "desc") q.order = query.order;
  return q;
}

const summaryFields = {
  id: t.Integer(),
  method: t.String(),
  url: t.String(),
  host: t.String(),
  status_code: t.Integer(),
  content_type: t.String(),
  duration_ms: t.Integer(),
  timestamp: t.Integer(),
  client_addr: t.String(),
  has_response: t.Boolean(),
  error: t.Optional(t.String()),
  res_body_size: t.Optional(t.Integer({ description: "extension: true size of the response body on the wire" })),
};

export const EntrySummary = t.Object(summaryFields, { additionalProperties: true });

const TrafficList = t.Object({ items: t.Array(EntrySummary), total: t.Integer(), offset: t.Integer(), limit: t.Integer() });

/** Detail form; extra fields recorded by addons (map_local_rule, original_url, reason, ...) pass through. */
const EntryDetailSchema = t.Object(
  {
    ...summaryFields,
    req_headers: t.Array(Pair),
    req_body: t.String(),
    res_headers: t.Array(Pair),
    res_body: t.String(),
    req_body_encoding: t.Union([t.Literal("utf8"), t.Literal("base64")]),
    res_body_encoding: t.Union([t.Literal("utf8"), t.Literal("base64")]),
    req_body_size: t.Integer(),
    res_body_size: t.Integer(),
    req_body_truncated: t.Boolean(),
    res_body_truncated: t.Boolean(),
    req_body_decoded_from: t.String(),
    res_body_decoded_from: t.String(),
  },
  { additionalProperties: true },
);

const ReplaySchema = t.Object({
  id: t.Union([t.Integer(), t.Null()], { description: "the new entry's id (null when capture is off)" }),
  status_code: t.Integer(),
  reason: t.String(),
  headers: t.Array(Pair),
  body: t.String(),
  body_encoding: t.Union([t.Literal("utf8"), t.Literal("base64")]),
  duration_ms: t.Integer(),
  replay_of: t.Integer(),
});

const IdParam = t.Object({ id: UintString("traffic entry id") });

/** Extension: the changes of POST /traffic/{id}/edit-replay; every field is optional, unknown fields are a 400. */
export const ReplayEdits = t.Object(
  {
    method: t.Optional(t.String({ pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$", description: "the method to send" })),
    url: t.Optional(t.String({ pattern: "^https?://[^\\s]+$", description: "absolute http(s) URL to send to" })),
    headers: t.Optional(t.Array(t.Tuple([t.String({ pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$" }), t.String({ pattern: "^[^\\r\\n\\u0000]*$" })]), { description: "replaces the whole header list" })),
    body: t.Optional(t.String({ description: "replaces the body; Content-Length is recomputed" })),
    body_encoding: t.Optional(t.Union([t.Literal("utf8"), t.Literal("base64")], { description: "how `body` is given (default utf8)" })),
  },
  { additionalProperties: false },
);

/** The entry as edit-replay sends it: the stored request with the caller's changes (the body checked first). */
export function applyReplayEdits(e: EntryDetail, body: unknown): EntryDetail {
  if (body === undefined) return e;
  if (body === null || typeof body !== "object" || Array.isArray(body)) throw badRequest("invalid body: expected an object of changes {method?, url?, headers?, body?, body_encoding?}");
  const err = Value.Errors(ReplayEdits, body).First();
  if (err) {
    const field = err.path.replace(/^\//, "").replace(/\//g, ".");
    throw badRequest(field ? `invalid body field '${field}': ${err.message}` : `invalid body: ${err.message}`);
  }
  const b = body as Static<typeof ReplayEdits>;
  if (b.body_encoding !== undefined && b.body === undefined) throw badRequest("invalid body field 'body_encoding': given without 'body'");
  if (b.body_encoding === "base64" && (!/^[A-Za-z0-9+/]*={0,2}$/.test(b.body!) || b.body!.length % 4 !== 0)) throw badRequest("invalid body field 'body': not valid base64");
  if (b.url !== undefined && !URL.canParse(b.url)) throw badRequest("invalid body field 'url': not a URL");
  const out: EntryDetail = { ...e };
  if (b.method !== undefined) out.method = b.method.toUpperCase();
  if (b.url !== undefined) {
    out.url = b.url;
    // the Host header follows the new authority unless the caller gives the header list
    if (b.headers === undefined) out.req_headers = e.req_headers.map(([n, v]) => [n, n.toLowerCase() === "host" ? new URL(b.url!).host : v] as [string, string]);
  }
  if (b.headers !== undefined) out.req_headers = b.headers.map(([n, v]) => [n, v] as [string, string]);
  if (b.body !== undefined) {
    out.req_body = b.body;
    out.req_body_encoding = b.body_encoding ?? "utf8";
    out.req_body_decoded_from = "";
  }
  return out;
}

/** The id of a path: digits only (the pattern is checked before the handler runs). */
const idOf = (raw: string): number => Number(raw);

/**
 * The replay body is an empty JSON object (spec 4.2), or nothing. Anything else is a 400: replay takes no options,
 * and a field the caller sent is never silently ignored. (A body that is not JSON was refused by the API frame.)
 */
export function checkReplayBody(body: unknown): void {
  if (body === undefined) return;
  if (body === null || typeof body !== "object" || Array.isArray(body)) throw badRequest("invalid body: replay takes an empty JSON object {} (or no body)");
  const fields = Object.keys(body);
  if (fields.length > 0) throw badRequest(`invalid body field '${fields[0]}': replay takes no options; send {} or no body`);
}

export interface TrafficDeps {
  store: CaptureStore;
  replay(entry: EntryDetail): Promise<ReplayResult>;
}

/** Spec 4.2: captured traffic. */
export function trafficRoutes(d: TrafficDeps) {
  const tags = ["traffic"];
  const entry = async (id: number): Promise<EntryDetail> => {
    const e = await d.store.get(id);
    if (!e) throw notFound(`no traffic entry ${id}`);
    return e;
  };
  const text = (body: string) => new Response(body, { headers: { "content-type": "text/plain; charset=utf-8" } });
  return new Elysia({ name: "traffic", prefix: "/api/v1/traffic" })
    .get("/", ({ query, request }) => d.store.list(toListQuery(request.url, query)), {
      query: TrafficQuery,
      response: TrafficList,
      detail: { tags, summary: "List captured entries (newest first; oldest first with since_id)" },
    })
    .delete(
      "/",
      async ({ set }) => {
        await d.store.clear();
        set.status = 204;
      },
      { detail: { tags, summary: "Drop every entry (204)" } },
    )
    .get("/:id", ({ params }) => entry(idOf(params.id)), { params: IdParam, response: EntryDetailSchema, detail: { tags, summary: "One entry with headers and bodies" } })
    .delete(
      "/:id",
      async ({ params, set }) => {
        if (!(await d.store.delete(idOf(params.id)))) throw notFound(`no traffic entry ${idOf(params.id)}`);
        set.status = 204;
      },
      { params: IdParam, detail: { tags, summary: "Delete one entry (204; 404 if missing)" } },
    )
    .get("/:id/export/curl", async ({ params }) => text(toCurl(await entry(idOf(params.id)))), {
      params: IdParam,
      detail: { tags, summary: "A bash cURL command that reproduces the request (text/plain)" },
    })
    .get("/:id/export/raw", async ({ params }) => text(toRaw(await entry(idOf(params.id)))), {
      params: IdParam,
      detail: { tags, summary: "The raw HTTP request and response (text/plain)" },
    })
    .post(
      "/:id/replay",
      async ({ params, body }) => {
        checkReplayBody(body);
        return await d.replay(await entry(idOf(params.id)));
      },
      {
        params: IdParam,
        response: ReplaySchema,
        detail: {
          tags,
          summary: "Re-send the request through the proxy pipeline; captured as a new entry. Body: {} or none (400 otherwise)",
          requestBody: {
            required: false,
            content: { "application/json": { schema: { type: "object", additionalProperties: false, properties: {} } } },
          } as DocumentDecoration["requestBody"],
        },
      },
    )
    .post(
      "/:id/edit-replay",
      async ({ params, body }) => await d.replay(applyReplayEdits(await entry(idOf(params.id)), body)),
      {
        params: IdParam,
        response: ReplaySchema,
        detail: {
          tags,
          summary: "Extension: replay with changes (method, url, headers, body); answers like replay. The stored entry is not changed",
          requestBody: { required: false, content: { "application/json": { schema: ReplayEdits } } } as DocumentDecoration["requestBody"],
        },
      },
    )
    .get("/:id/diff/:id2", async ({ params }) => diffEntries(await entry(idOf(params.id)), await entry(idOf(params.id2))), {
      params: t.Object({ id: UintString("traffic entry id (a)"), id2: UintString("traffic entry id (b)") }),
      detail: { tags, summary: "Structured diff of two entries (layout in docs/api.md)" },
    });
}
