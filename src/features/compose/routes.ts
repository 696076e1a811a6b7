import { Elysia, t } from "elysia";
import {
  AddFolderBodySchema,
  AddRequestBodySchema,
  CollectionInputSchema,
  CollectionSummarySchema,
  EnvironmentInputSchema,
  FolderInputSchema,
  PatchVariableBodySchema,
  RequestInputSchema,
  SendBodySchema,
  SendResultSchema,
} from "./schema.ts";
import { exportFromStore, importPostman } from "./postman.ts";
import { type SendDeps, sendComposeRequest } from "./send.ts";
import type { CollectionStore } from "./store.ts";

const tags = ["compose"];
const Id = t.Object({ id: t.String() });
const IdReq = t.Object({ id: t.String(), requestId: t.String() });
const IdFolder = t.Object({ id: t.String(), folderId: t.String() });
const IdEnv = t.Object({ id: t.String(), name: t.String() });
const IdEnvKey = t.Object({ id: t.String(), name: t.String(), key: t.String() });

/** Spec 4.9 (Compose) plus the extensions PUT/DELETE of collections, requests, folders and environments, and Postman import/export. */
export function composeRoutes(store: CollectionStore, send: SendDeps) {
  return new Elysia({ name: "compose", prefix: "/api/v1/compose" })
    .get("/collections", () => store.list(), {
      response: t.Array(CollectionSummarySchema),
      detail: { tags, summary: "Summaries of every collection (unreadable collection files are skipped and logged)" },
    })
    .get("/collections/:id", ({ params }) => store.get(params.id), {
      params: Id,
      detail: { tags, summary: "The full collection JSON (404 unknown; 500 corruptCollection if its file cannot be read)" },
    })
    .post("/collections", ({ body }) => store.create(body), {
      body: CollectionInputSchema,
      detail: { tags, summary: "Create a collection (minimal requests and variables get defaults); answers it with its server-assigned ids" },
    })
    .put("/collections/:id", ({ params, body }) => store.update(params.id, body), {
      params: Id,
      body: CollectionInputSchema,
      detail: { tags, summary: "Extension: update a collection (absent fields keep their values; ids in the body are kept)" },
    })
    .delete(
      "/collections/:id",
      ({ params, set }) => {
        store.delete(params.id);
        set.status = 204;
      },
      { params: Id, detail: { tags, summary: "Extension: delete a collection (204; also an unreadable one)" } },
    )
    .post("/collections/:id/requests", ({ params, body }) => store.addRequest(params.id, body.folder_id, body.request), {
      params: Id,
      body: AddRequestBodySchema,
      detail: { tags, summary: "Add a request, at the top or in folder_id; answers it with its server-assigned id (404 unknown collection or folder)" },
    })
    .put("/collections/:id/requests/:requestId", ({ params, body }) => store.replaceRequest(params.id, params.requestId, body), {
      params: IdReq,
      body: RequestInputSchema,
      detail: { tags, summary: "Extension: replace a request (it keeps its id and place; absent fields get the create defaults)" },
    })
    .delete(
      "/collections/:id/requests/:requestId",
      ({ params, set }) => {
        store.deleteRequest(params.id, params.requestId);
        set.status = 204;
      },
      { params: IdReq, detail: { tags, summary: "Extension: delete a request (204)" } },
    )
    .post("/collections/:id/folders", ({ params, body }) => store.addFolder(params.id, body.parent_id, body.folder), {
      params: Id,
      body: AddFolderBodySchema,
      detail: { tags, summary: "Extension: add a folder, at the top or inside parent_id (404 unknown collection or parent)" },
    })
    .put("/collections/:id/folders/:folderId", ({ params, body }) => store.updateFolder(params.id, params.folderId, body), {
      params: IdFolder,
      body: FolderInputSchema,
      detail: { tags, summary: "Extension: update a folder (name, auth, headers replaced; scripts, requests and folders only when given)" },
    })
    .delete(
      "/collections/:id/folders/:folderId",
      ({ params, set }) => {
        store.deleteFolder(params.id, params.folderId);
        set.status = 204;
      },
      { params: IdFolder, detail: { tags, summary: "Extension: delete a folder and everything in it (204)" } },
    )
    .post("/collections/:id/environments", ({ params, body }) => store.addEnvironment(params.id, body), {
      params: Id,
      body: EnvironmentInputSchema,
      detail: { tags, summary: "Add an environment (409 if the name exists); answers it" },
    })
    .put("/collections/:id/environments/:name", ({ params, body }) => store.replaceEnvironment(params.id, params.name, body), {
      params: IdEnv,
      body: EnvironmentInputSchema,
      detail: { tags, summary: "Extension: replace an environment (a rename onto an existing name is 409)" },
    })
    .delete(
      "/collections/:id/environments/:name",
      ({ params, set }) => {
        store.deleteEnvironment(params.id, params.name);
        set.status = 204;
      },
      { params: IdEnv, detail: { tags, summary: "Extension: delete an environment (204)" } },
    )
    .patch(
      "/collections/:id/environments/:name/variables/:key",
      ({ params, body }) => store.setCurrentValue(params.id, params.name, params.key, body.currentValue),
      {
        params: IdEnvKey,
        body: PatchVariableBodySchema,
        detail: { tags, summary: "Extension: set a variable's session-only currentValue (null clears it); answers the variable" },
      },
    )
    .post("/import", ({ body, query }) => importPostman(store, body, query.collection_id), {
      query: t.Object({ collection_id: t.Optional(t.String()) }),
      detail: {
        tags,
        summary:
          "Extension: import a Postman collection v2.0/v2.1 as a new collection, or a Postman environment into ?collection_id=; answers {collection, warnings}",
      },
    })
    .get("/collections/:id/export", ({ params, query }) => exportFromStore(store, params.id, query.format, query.environment), {
      params: Id,
      query: t.Object({ format: t.Optional(t.String()), environment: t.Optional(t.String()) }),
      detail: {
        tags,
        summary: "Extension: export as a Postman collection v2.1.0 (format=postman, the default) or one environment (format=postman-environment&environment=NAME)",
      },
    })
    .post("/send", ({ body }) => sendComposeRequest(send, body), {
      body: SendBodySchema,
      response: SendResultSchema,
      detail: {
        tags,
        summary:
          "Run the pre-request scripts (collection, folders, request), resolve and send a collection request through the proxy, run the test scripts; 200 with `error` set when it could not be sent (also when a pre-request script failed)",
      },
    });
}
