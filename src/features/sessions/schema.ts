import { t } from "elysia";
import { EntrySummary } from "../traffic/routes.ts";

const UInt = (description: string) => t.Optional(t.Integer({ minimum: 0, description }));

/** A tab's filter: the filters of GET /traffic (as JSON values), plus client. All optional; they combine with AND. */
export const TabFilterSchema = t.Object(
  {
    host: t.Optional(t.String({ description: "substring of the host, case-insensitive" })),
    method: t.Optional(t.String({ description: "exact method, case-insensitive" })),
    status: UInt("exact status code"),
    status_min: UInt("lowest status code"),
    status_max: UInt("highest status code"),
    path: t.Optional(t.String({ description: "substring of the URL path" })),
    search: t.Optional(t.String({ description: "substring of the URL or a decoded body, case-insensitive" })),
    has_error: t.Optional(t.Boolean({ description: "true: status >= 400 only; false: status < 400 only" })),
    client: t.Optional(t.String({ description: "exact client label (process name or remote IP)" })),
    since_id: UInt("collect entries with an id above this one (already captured ones included); default: from the moment the tab is created"),
    since: UInt("only entries that started at or after this time (ms since epoch)"),
  },
  { additionalProperties: false },
);

export type TabFilter = typeof TabFilterSchema.static;

export const TabSchema = t.Object({
  id: t.String({ description: "'live' for the default tab" }),
  name: t.String(),
  kind: t.Union([t.Literal("live"), t.Literal("filter")], { description: "live: the default tab (everything captured since start); filter: a tab created over the API" }),
  entry_count: t.Integer({ description: "entries the tab holds now" }),
  created_at: t.Integer({ description: "ms since epoch" }),
  filter: TabFilterSchema,
  start_after_id: t.Integer({ description: "extension: the tab holds entries with ids above this one (moved by clear)" }),
});

export const TabListSchema = t.Object({ tabs: t.Array(TabSchema) });

export const CreateTabBody = t.Object(
  {
    name: t.String({ minLength: 1, maxLength: 200, description: "shown in lists and used as the saved session's name by default" }),
    filter: t.Optional(TabFilterSchema),
  },
  { additionalProperties: false },
);

export const SaveTabBody = t.Object(
  { name: t.Optional(t.String({ minLength: 1, maxLength: 200, description: "the saved session's name; default the tab's name" })) },
  { additionalProperties: false },
);

const Items = {
  items: t.Array(EntrySummary),
  total: t.Integer(),
  offset: t.Integer(),
  limit: t.Integer(),
};

export const TabEntriesSchema = t.Object({ id: t.String(), name: t.String(), ...Items });

export const SavedSummarySchema = t.Object({
  id: t.String({ description: "the file name without .har" }),
  name: t.String(),
  entry_count: t.Integer(),
  saved_at: t.Integer({ description: "ms since epoch" }),
  size_bytes: t.Integer(),
});

export const SavedListSchema = t.Object({ sessions: t.Array(SavedSummarySchema) });

export const SavedEntriesSchema = t.Object({ id: t.String(), name: t.String(), ...Items });

export const ImportResultSchema = t.Object({
  imported: t.Integer({ description: "entries added to the capture store" }),
  first_id: t.Union([t.Integer(), t.Null()], { description: "the first new entry id (ids are consecutive); null when the HAR had no entries" }),
  last_id: t.Union([t.Integer(), t.Null()]),
  websocket_connections: t.Integer({ description: "WebSocket records added (entries with _webSocketMessages)" }),
});

/** Paging parameters of the tab and saved-session entry lists (as GET /traffic's). */
export const PagingQuery = t.Object({
  limit: t.Optional(t.String({ pattern: "^[0-9]+$", description: "page size; default 50, capped at 500", error: "expected a non-negative integer (decimal digits only)" })),
  offset: t.Optional(t.String({ pattern: "^[0-9]+$", description: "default 0", error: "expected a non-negative integer (decimal digits only)" })),
  since_id: t.Optional(t.String({ pattern: "^[0-9]+$", description: "only entries with id > since_id; switches the default order to oldest first", error: "expected a non-negative integer (decimal digits only)" })),
  order: t.Optional(t.Union([t.Literal("asc"), t.Literal("desc")], { description: "id order; default desc, asc with since_id", error: "expected asc or desc" })),
});

export interface Paging {
  limit?: number;
  offset?: number;
  since_id?: number;
  order?: "asc" | "desc";
}
