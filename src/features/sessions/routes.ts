import { Elysia, t, type DocumentDecoration } from "elysia";
import { badRequest, checkQueryNames } from "../../api/errors.ts";
import { checkHar } from "../traffic/har-import.ts";
import { harResponse } from "../traffic/har-stream.ts";
import { TrafficQuery, toListQuery } from "../traffic/routes.ts";
import type { TrafficHar } from "./har-service.ts";
import type { SavedSessions } from "./saved.ts";
import {
  CreateTabBody,
  ImportResultSchema,
  PagingQuery,
  SavedEntriesSchema,
  SavedListSchema,
  SavedSummarySchema,
  SaveTabBody,
  TabEntriesSchema,
  TabListSchema,
  TabSchema,
  type Paging,
} from "./schema.ts";
import type { TabStore } from "./tabs.ts";

const tags = ["sessions"];
const TabId = t.Object({ id: t.String({ description: "tab id ('live' for the default tab)" }) });
const SavedId = t.Object({ id: t.String({ description: "saved session id (its file name without .har)" }) });
const PAGING_NAMES = Object.keys(PagingQuery.properties);

/** A HAR document as a request body (shown in the OpenAPI document; read by har-import.ts's checks). */
const HarBodyDoc = {
  required: true,
  content: {
    "application/json": {
      schema: {
        type: "object",
        required: ["log"],
        description: "a HAR 1.2 document (log.entries; tapwire's _tapwire and Chrome's _webSocketMessages are read too)",
        properties: { log: { type: "object", required: ["entries"], properties: { entries: { type: "array", items: { type: "object" } } } } },
      },
    },
  },
} as DocumentDecoration["requestBody"];

function paging(url: string, q: Record<string, unknown>): Paging {
  checkQueryNames(url, PAGING_NAMES);
  const p: Paging = {};
  for (const k of ["limit", "offset", "since_id"] as const) if (typeof q[k] === "string") p[k] = Number(q[k]);
  if (q.order === "asc" || q.order === "desc") p.order = q.order;
  return p;
}

export interface SessionDeps {
  tabs: TabStore;
  saved: SavedSessions;
  har: TrafficHar;
}

/** Spec 4.8: session tabs and saved sessions, plus the extensions (create/delete/clear/save tabs, HAR import). */
export function sessionRoutes(d: SessionDeps) {
  return (
    new Elysia({ name: "session-tabs", prefix: "/api/v1/session-tabs" })
      .get("/", async () => ({ tabs: await d.tabs.list() }), {
        response: TabListSchema,
        detail: { tags, summary: "Active session tabs: {tabs: [{id, name, kind, entry_count, created_at, filter}]}; 'live' first" },
      })
      .post("/", ({ body }) => d.tabs.create(body.name, body.filter ?? {}), {
        transform: ({ body }) => rejectUnknownFields(body, CreateTabBody),
        body: CreateTabBody,
        response: TabSchema,
        detail: {
          tags,
          summary:
            "Extension: create a tab {name, filter?}; it collects matching entries from now on (or above filter.since_id). Answers the tab (200)",
        },
      })
      // the static segment 'saved' wins over ':id' (a tab id is 'live' or 'tab-N', never 'saved')
      .get("/saved", () => ({ sessions: d.saved.list() }), {
        response: SavedListSchema,
        detail: { tags, summary: "Saved sessions (HAR files in sessions/), newest first; unreadable files are skipped and logged" },
      })
      .post(
        "/saved",
        ({ body, query, request }) => {
          checkQueryNames(request.url, ["name"]);
          if (query.name !== undefined && query.name.trim() === "") throw badRequest("invalid query parameter 'name': must not be blank");
          const { log } = checkHar(body);
          return d.saved.importHar({ ...(body as object), log }, query.name);
        },
        {
          query: t.Object({ name: t.Optional(t.String({ description: "the session's name; default log._tapwire.name, the first page's title, or 'Imported session'" })) }),
          response: SavedSummarySchema,
          detail: { tags, summary: "Extension: import a HAR file as a saved session (400 when it is not a HAR); answers its summary", requestBody: HarBodyDoc },
        },
      )
      .get("/saved/:id", ({ params, query, request }) => d.saved.entries(params.id, paging(request.url, query)), {
        params: SavedId,
        query: PagingQuery,
        response: SavedEntriesSchema,
        detail: {
          tags,
          summary:
            "Entries of a saved session {id, name, items, total, offset, limit}, paged like GET /traffic (item ids are positions in the file, from 1; original_id is the tapwire entry id). 404 unknown or unreadable",
        },
      })
      .get(
        "/saved/:id/har",
        ({ params }) =>
          new Response(Bun.file(d.saved.file(params.id)), {
            headers: { "content-type": "application/json; charset=utf-8", "content-disposition": `attachment; filename="${params.id}.har"` },
          }),
        { params: SavedId, detail: { tags, summary: "Extension: the saved session's HAR file as it is on disk (404 unknown or unreadable)" } },
      )
      .delete(
        "/saved/:id",
        ({ params, set }) => {
          d.saved.delete(params.id);
          set.status = 204;
        },
        { params: SavedId, detail: { tags, summary: "Extension: delete a saved session's file (204; 404 unknown)" } },
      )
      .get("/:id", ({ params, query, request }) => d.tabs.entries(params.id, paging(request.url, query)), {
        params: TabId,
        query: PagingQuery,
        response: TabEntriesSchema,
        detail: { tags, summary: "Entries in a tab {id, name, items, total, offset, limit}, paged like GET /traffic (same caps). 404 unknown tab" },
      })
      .delete(
        "/:id",
        ({ params, set }) => {
          d.tabs.delete(params.id);
          set.status = 204;
        },
        { params: TabId, detail: { tags, summary: "Extension: delete a tab, never its entries (204; 404 unknown; 409 for 'live')" } },
      )
      .post(
        "/:id/clear",
        ({ params, body }) => {
          checkEmptyBody(body);
          return d.tabs.clear(params.id);
        },
        { params: TabId, response: TabSchema, detail: { tags, summary: "Extension: empty a tab (it then collects only newer entries; the entries stay in /traffic). Answers the tab" } },
      )
      .post(
        "/:id/save",
        async ({ params, body }) => {
          const tab = d.tabs.record(params.id);
          return d.har.saveTab(tab, body?.name ?? tab.name, d.saved);
        },
        {
          params: TabId,
          transform: ({ body }) => rejectUnknownFields(body, SaveTabBody),
          body: t.Optional(SaveTabBody),
          response: SavedSummarySchema,
          detail: { tags, summary: "Extension: write the tab's entries as a saved session (HAR, sessions/<id>.har, atomically) {name?}; answers its summary" },
        },
      )
  );
}

/**
 * Elysia drops body fields a schema does not name before the handler sees them: this runs first (transform) and
 * refuses them, so a field the caller sent is never silently ignored. Nested objects are checked against theirs.
 */
function rejectUnknownFields(body: unknown, schema: { properties?: Record<string, unknown> }, at = ""): void {
  if (body === null || typeof body !== "object" || Array.isArray(body) || !schema.properties) return;
  for (const [k, v] of Object.entries(body)) {
    const sub = schema.properties[k] as { properties?: Record<string, unknown>; anyOf?: { properties?: Record<string, unknown> }[] } | undefined;
    if (!sub) throw badRequest(`unknown body field '${at}${k}' (known: ${Object.keys(schema.properties).join(", ")})`);
    rejectUnknownFields(v, sub.properties ? sub : (sub.anyOf?.find((x) => x.properties) ?? {}), `${at}${k}.`);
  }
}

function checkEmptyBody(body: unknown): void {
  if (body === undefined) return;
  if (body === null || typeof body !== "object" || Array.isArray(body) || Object.keys(body).length > 0) throw badRequest("invalid body: clear takes no options; send {} or no body");
}

const ExportQuery = t.Object({
  ...TrafficQuery.properties,
  limit: t.Optional(t.String({ pattern: "^[0-9]+$", description: "at most this many entries (no cap: an export streams); default all", error: "expected a non-negative integer (decimal digits only)" })),
  title: t.Optional(t.String({ description: "extension: group the entries under one HAR page with this title" })),
});
const EXPORT_NAMES = Object.keys(ExportQuery.properties).filter((k) => k !== "order");

/** HAR for all traffic: GET /traffic/export.har and POST /traffic/import (extensions of spec 4.2). */
export function trafficHarRoutes(har: TrafficHar) {
  const ttags = ["traffic"];
  return new Elysia({ name: "traffic-har", prefix: "/api/v1/traffic" })
    .get(
      "/export.har",
      ({ query, request }) => {
        const { order: _order, title, ...rest } = query as Record<string, unknown>;
        checkQueryNames(request.url, EXPORT_NAMES);
        // the names were checked above (order is refused: an export is always oldest first)
        const q = toListQuery("", rest);
        return harResponse(har.exportChunks(q, typeof title === "string" ? { pageTitle: title } : {}), "tapwire.har");
      },
      {
        query: ExportQuery,
        detail: {
          tags: ttags,
          summary:
            "Extension: a HAR 1.2 file of the entries matching the GET /traffic filters, oldest first, streamed (limit/offset apply, uncapped; order is always oldest first)",
          responses: { 200: { description: "HAR 1.2 (application/json), streamed", content: { "application/json": { schema: { type: "object" } } } } },
        },
      },
    )
    .post(
      "/import",
      ({ body, request }) => {
        checkQueryNames(request.url, []);
        return har.importHar(body);
      },
      {
        response: ImportResultSchema,
        detail: {
          tags: ttags,
          summary:
            "Extension: add a HAR's entries to the capture store, marked imported (extra field 'imported'); WebSocket messages go to the WebSocket store. 400 (nothing added) when an entry is malformed",
          requestBody: HarBodyDoc,
        },
      },
    );
}
