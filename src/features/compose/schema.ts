import { type Static, type TSchema, Type } from "@sinclair/typebox";

/**
 * Compose collections (spec 2.11, 4.9). The spec gives the request, auth and environment shapes; the layout of the
 * full collection and of a folder is ours (docs/api.md, "Compose"). Two forms of each thing: the stored/answered
 * form (every field present) and the input form of create bodies (requests may be minimal: name, method, url;
 * environment variables may carry only key and defaultValue), which the store completes with defaults.
 */

const Nullable = <T extends TSchema>(s: T) => Type.Union([s, Type.Null()]);

/** A header or query parameter row: `{key, value, enabled}`. */
export const KeyValueSchema = Type.Object({
  key: Type.String(),
  value: Type.String(),
  enabled: Type.Boolean(),
});
export type KeyValue = Static<typeof KeyValueSchema>;

/** Input form: `enabled` defaults to true. */
export const KeyValueInputSchema = Type.Object({
  key: Type.String(),
  value: Type.String(),
  enabled: Type.Optional(Type.Boolean()),
});

/** Auth object (spec 2.11), by type. `in` on apiKey and the `none` type are extensions. */
export const AuthSchema = Type.Union([
  Type.Object({ type: Type.Literal("bearer"), token: Type.String() }),
  Type.Object({ type: Type.Literal("basic"), username: Type.String(), password: Type.String() }),
  Type.Object({
    type: Type.Literal("apiKey"),
    key: Type.String({ minLength: 1 }),
    value: Type.String(),
    in: Type.Optional(Type.Union([Type.Literal("header"), Type.Literal("query")], { description: "extension: where the key goes (default header)" })),
  }),
  Type.Object({ type: Type.Literal("none") }, { description: "extension: explicitly no auth (stops inheritance)" }),
]);
export type Auth = Static<typeof AuthSchema>;

/** Pre-request and test scripts (run at send: docs/api.md, "Scripts at send"). */
export const ScriptsSchema = Type.Object({ prerequest: Type.String(), test: Type.String() });
export type Scripts = Static<typeof ScriptsSchema>;
const ScriptsInputSchema = Type.Object({ prerequest: Type.Optional(Type.String()), test: Type.Optional(Type.String()) });

/** A collection request (spec 2.11) plus the extensions `scripts` and `description`. */
export const RequestSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  method: Type.String({ minLength: 1 }),
  url: Type.String(),
  headers: Type.Array(KeyValueSchema),
  queryParams: Type.Array(KeyValueSchema),
  body: Type.String(),
  contentType: Type.String(),
  auth: Nullable(AuthSchema),
  timeout: Type.Integer({ minimum: 1 }),
  scripts: ScriptsSchema,
  description: Type.String(),
});
export type ComposeRequest = Static<typeof RequestSchema>;

export const RequestInputSchema = Type.Object({
  id: Type.Optional(Type.String({ description: "ignored on create (server-assigned); kept on PUT of a collection or folder" })),
  name: Type.String(),
  method: Type.String({ minLength: 1 }),
  url: Type.String(),
  headers: Type.Optional(Type.Array(KeyValueInputSchema)),
  queryParams: Type.Optional(Type.Array(KeyValueInputSchema)),
  body: Type.Optional(Type.String()),
  contentType: Type.Optional(Type.String()),
  auth: Type.Optional(Nullable(AuthSchema)),
  timeout: Type.Optional(Type.Integer({ minimum: 1, description: "ms, default 30000" })),
  scripts: Type.Optional(ScriptsInputSchema),
  description: Type.Optional(Type.String()),
});
export type ComposeRequestInput = Static<typeof RequestInputSchema>;

/** An environment variable (spec 2.11). `currentValue` is session-only (never written to disk). */
export const VariableSchema = Type.Object({
  key: Type.String({ minLength: 1 }),
  defaultValue: Type.String(),
  currentValue: Nullable(Type.String()),
  enabled: Type.Boolean(),
  isSecret: Type.Boolean(),
});
export type Variable = Static<typeof VariableSchema>;

export const VariableInputSchema = Type.Object({
  key: Type.String({ minLength: 1 }),
  defaultValue: Type.String(),
  currentValue: Type.Optional(Nullable(Type.String())),
  enabled: Type.Optional(Type.Boolean()),
  isSecret: Type.Optional(Type.Boolean()),
});

export const EnvironmentSchema = Type.Object({ name: Type.String({ minLength: 1 }), variables: Type.Array(VariableSchema) });
export type Environment = Static<typeof EnvironmentSchema>;
export const EnvironmentInputSchema = Type.Object({ name: Type.String({ minLength: 1 }), variables: Type.Optional(Type.Array(VariableInputSchema)) });
export type EnvironmentInput = Static<typeof EnvironmentInputSchema>;

/** A folder (our layout): requests and folders nest; auth null inherits from the enclosing folder or collection. */
export interface Folder {
  id: string;
  name: string;
  requests: ComposeRequest[];
  folders: Folder[];
  auth: Auth | null;
  headers: KeyValue[];
  /** Extension: the folder's pre-request and test scripts (run between the collection's and the request's). */
  scripts: Scripts;
}
/** A folder as a file holds it: files written before folders had scripts lack `scripts` (the store fills it in). */
export const FolderSchema = Type.Recursive(
  (Self) =>
    Type.Object({
      id: Type.String(),
      name: Type.String(),
      requests: Type.Array(RequestSchema),
      folders: Type.Array(Self),
      auth: Nullable(AuthSchema),
      headers: Type.Array(KeyValueSchema),
      scripts: Type.Optional(ScriptsSchema),
    }),
  { $id: "ComposeFolder" },
);

export interface FolderInput {
  id?: string;
  name: string;
  requests?: ComposeRequestInput[];
  folders?: FolderInput[];
  auth?: Auth | null;
  headers?: { key: string; value: string; enabled?: boolean }[];
  scripts?: { prerequest?: string; test?: string };
}
export const FolderInputSchema = Type.Recursive(
  (Self) =>
    Type.Object({
      id: Type.Optional(Type.String()),
      name: Type.String(),
      requests: Type.Optional(Type.Array(RequestInputSchema)),
      folders: Type.Optional(Type.Array(Self)),
      auth: Type.Optional(Nullable(AuthSchema)),
      headers: Type.Optional(Type.Array(KeyValueInputSchema)),
      scripts: Type.Optional(ScriptsInputSchema),
    }),
  { $id: "ComposeFolderInput" },
);

/** The full collection (our layout, docs/api.md). Timestamps are ms since the epoch. */
export interface Collection {
  id: string;
  name: string;
  requests: ComposeRequest[];
  folders: Folder[];
  environments: Environment[];
  variables: KeyValue[];
  defaultHeaders: KeyValue[];
  defaultAuth: Auth | null;
  scripts: Scripts;
  created_at: number;
  updated_at: number;
}

/** The collection file as stored: environment variables may lack currentValue (it is never written). */
export const CollectionFileSchema = Type.Object({
  id: Type.String({ minLength: 1 }),
  name: Type.String(),
  requests: Type.Array(RequestSchema),
  folders: Type.Array(FolderSchema),
  environments: Type.Array(
    Type.Object({
      name: Type.String({ minLength: 1 }),
      variables: Type.Array(Type.Object({ key: Type.String({ minLength: 1 }), defaultValue: Type.String(), currentValue: Type.Optional(Type.Unknown()), enabled: Type.Boolean(), isSecret: Type.Boolean() })),
    }),
  ),
  variables: Type.Array(KeyValueSchema),
  defaultHeaders: Type.Array(KeyValueSchema),
  defaultAuth: Nullable(AuthSchema),
  scripts: ScriptsSchema,
  created_at: Type.Integer(),
  updated_at: Type.Integer(),
});

/** Body of POST /compose/collections (and of PUT, where absent fields keep their values). */
export const CollectionInputSchema = Type.Object({
  name: Type.String(),
  requests: Type.Optional(Type.Array(RequestInputSchema)),
  folders: Type.Optional(Type.Array(FolderInputSchema)),
  environments: Type.Optional(Type.Array(EnvironmentInputSchema)),
  variables: Type.Optional(Type.Array(KeyValueInputSchema, { description: "extension: collection variables" })),
  defaultHeaders: Type.Optional(Type.Array(KeyValueInputSchema)),
  defaultAuth: Type.Optional(Nullable(AuthSchema)),
  scripts: Type.Optional(ScriptsInputSchema),
});
export type CollectionInput = Static<typeof CollectionInputSchema>;

export const CollectionSummarySchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  request_count: Type.Integer(),
  folder_count: Type.Integer(),
  environment_count: Type.Integer(),
  created_at: Type.Integer(),
});
export type CollectionSummary = Static<typeof CollectionSummarySchema>;

/** POST /compose/collections/{id}/requests. */
export const AddRequestBodySchema = Type.Object({
  folder_id: Type.Optional(Nullable(Type.String())),
  request: RequestInputSchema,
});

/** Extension: POST /compose/collections/{id}/folders. */
export const AddFolderBodySchema = Type.Object({
  parent_id: Type.Optional(Nullable(Type.String())),
  folder: FolderInputSchema,
});

/** Extension: PATCH of one environment variable's session value. */
export const PatchVariableBodySchema = Type.Object({ currentValue: Nullable(Type.String()) });

/** POST /compose/send. */
export const SendBodySchema = Type.Object({
  collection_id: Type.String(),
  request_id: Type.String(),
  environment: Type.Optional(Nullable(Type.String({ description: "environment name; absent, null or empty: none" }))),
  variables: Type.Optional(Type.Record(Type.String(), Type.String())),
  data: Type.Optional(
    Type.Record(Type.String(), Type.Unknown(), { description: "extension: a collection run's data row (pm.iterationData; between the call's variables and the environment)" }),
  ),
  iteration: Type.Optional(
    Type.Object(
      { index: Type.Integer({ minimum: 0 }), count: Type.Integer({ minimum: 1 }) },
      { description: "extension: pm.info.iteration (0-based) and pm.info.iterationCount of a collection run" },
    ),
  ),
});
export type SendBody = Static<typeof SendBodySchema>;

/** A console line of a script (the layout of POST /scripts/execute's `console`). */
export const ConsoleLineSchema = Type.Object({ level: Type.Union([Type.Literal("log"), Type.Literal("info"), Type.Literal("warn"), Type.Literal("error")]), message: Type.String(), ts: Type.Integer() });
/** A pm.test result (the layout of POST /scripts/execute's `tests`). */
export const TestResultSchema = Type.Object({ name: Type.String(), passed: Type.Boolean(), error: Nullable(Type.String()) });
/** A script that threw, timed out or ran out of memory: /scripts/execute's error plus which script and event. */
export const ScriptErrorSchema = Type.Object({
  source: Type.String({ description: "collection 'NAME', folder 'NAME' or request 'NAME'" }),
  event: Type.Union([Type.Literal("prerequest"), Type.Literal("test")]),
  message: Type.String(),
  stack: Nullable(Type.String()),
  line: Nullable(Type.Integer()),
});

export const SendResultSchema = Type.Object({
  status: Nullable(Type.Integer()),
  status_text: Nullable(Type.String()),
  headers: Type.Array(Type.Tuple([Type.String(), Type.String()])),
  body: Type.String(),
  body_encoding: Type.Union([Type.Literal("utf8"), Type.Literal("base64")]),
  size_bytes: Type.Integer(),
  duration_ms: Type.Number(),
  traffic_id: Nullable(Type.Integer()),
  resolved_url: Type.String(),
  unresolved: Type.Array(Type.String()),
  tests: Type.Array(TestResultSchema),
  console: Type.Array(ConsoleLineSchema),
  errors: Type.Array(ScriptErrorSchema),
  error: Nullable(Type.String()),
});
export type SendResult = Static<typeof SendResultSchema>;
