import { Elysia, t } from "elysia";
import { badRequest, checkQueryNames } from "../../api/errors.ts";
import { ConnectionSchema, DeleteBody, DownloadBody, EntrySchema, Ok, PathBody, RenameBody, TransferSchema, UploadBody } from "./schema.ts";
import type { RemoteFs } from "./service.ts";

const tags = ["remote-fs"];
const Id = t.Object({ id: t.String() });
const errors = "errors: {error: {code, message}} with the section-7 wire codes (auth/permissionDenied 403, notFound 404, alreadyExists/cancelled 409, hostUnreachable/hostKeyRejected 502, unsupported/protocol 400, io 500)";

type Schema = { type?: string; properties?: Record<string, Schema>; items?: Schema };

/** The first field of `value` that `schema` does not declare (objects and arrays of objects, recursively). */
function unknownField(value: unknown, schema: Schema, where: string): string | null {
  if (schema.type === "object" && schema.properties && value && typeof value === "object" && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) {
      const sub = schema.properties[k];
      if (!sub) return `${where}${k}`;
      const deeper = unknownField(v, sub, `${where}${k}.`);
      if (deeper) return deeper;
    }
  }
  if (schema.type === "array" && schema.items && Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const deeper = unknownField(value[i], schema.items, `${where.replace(/\.$/, "")}[${i}].`);
      if (deeper) return deeper;
    }
  }
  return null;
}

/**
 * A transform hook (it runs before validation) refusing body fields the schema does not declare: Elysia's
 * normalisation would otherwise drop them without a word.
 */
function strict(schema: Schema) {
  return ({ body }: { body: unknown }) => {
    const f = unknownField(body, schema, "");
    if (f) throw badRequest(`invalid body: unknown field '${f}'`);
  };
}

/** Spec 4.13 (Remote files) plus the extensions: transfer cancel/pause/resume, GET one transfer, reload. */
export function remoteFsRoutes(fs: RemoteFs) {
  return new Elysia({ name: "remote-fs", prefix: "/api/v1/remote-fs" })
    .onBeforeHandle(({ request }) => checkQueryNames(request.url, []))
    .get("/connections", () => fs.listConnections(), {
      response: t.Object({ connections: t.Array(ConnectionSchema) }),
      detail: { tags, summary: "Connections defined in remote-connections.json (no connect route; credentials never pass through the API)" },
    })
    .post("/reload", () => ({ connections: fs.connections.reloadOrThrow() }), {
      response: t.Object({ connections: t.Array(ConnectionSchema) }),
      detail: { tags, summary: "Extension: re-read remote-connections.json now (400 naming the problem when invalid; the previous connections stay)" },
    })
    .post("/connections/:id/list", ({ params, body }) => fs.list(params.id, body.path), {
      params: Id,
      body: PathBody,
      transform: strict(PathBody),
      response: t.Object({ path: t.String(), entries: t.Array(EntrySchema) }),
      detail: { tags, summary: `List a folder (folders first, then by name; S3 prefixes are folders; paged listings are followed to the end). ${errors}` },
    })
    .post("/connections/:id/mkdir", ({ params, body }) => fs.mkdir(params.id, body.path), {
      params: Id,
      body: PathBody,
      transform: strict(PathBody),
      response: Ok,
      detail: { tags, summary: "Create a folder and any missing parents; 409 alreadyExists when the folder exists" },
    })
    .post("/connections/:id/rename", ({ params, body }) => fs.rename(params.id, body.from, body.to), {
      params: Id,
      body: RenameBody,
      transform: strict(RenameBody),
      response: Ok,
      detail: { tags, summary: "Rename or move; answers {ok: true} (our choice); 404 notFound when `from` is missing, 409 alreadyExists when `to` exists" },
    })
    .post("/connections/:id/delete", ({ params, body }) => fs.delete(params.id, body.paths), {
      params: Id,
      body: DeleteBody,
      transform: strict(DeleteBody),
      response: Ok,
      detail: { tags, summary: "Delete files and folders (a folder with everything in it) in order; answers {ok: true} (our choice); stops at the first failure" },
    })
    .post(
      "/connections/:id/download",
      ({ params, body, set }) => {
        const r = fs.download(params.id, body.remote_path, body.local_path);
        set.status = 202;
        return r;
      },
      {
        params: Id,
        body: DownloadBody,
        transform: strict(DownloadBody),
        detail: { tags, summary: "Enqueue a download: 202 {transferId}; poll GET /remote-fs/transfers. local_path must be absolute (400); the file appears there only once complete" },
      },
    )
    .post(
      "/connections/:id/upload",
      ({ params, body, set }) => {
        const r = fs.upload(params.id, body.local_path, body.remote_path);
        set.status = 202;
        return r;
      },
      {
        params: Id,
        body: UploadBody,
        transform: strict(UploadBody),
        detail: { tags, summary: "Enqueue an upload: 202 {transferId}; local_path must be an absolute path of a file (400; 404 notFound if missing)" },
      },
    )
    .get("/transfers", () => fs.listTransfers(), {
      response: t.Object({ transfers: t.Array(TransferSchema) }),
      detail: { tags, summary: "Every transfer, oldest first (the last 500 finished ones are kept)" },
    })
    .get("/transfers/:id", ({ params }) => fs.transfers.get(params.id), {
      params: Id,
      response: TransferSchema,
      detail: { tags, summary: "Extension: one transfer (404 notFound)" },
    })
    .post("/transfers/:id/cancel", ({ params }) => fs.transfers.cancel(params.id), {
      params: Id,
      response: TransferSchema,
      detail: { tags, summary: "Extension: cancel a queued, running or paused transfer (answers it once stopped and cleaned up); 409 cancelled if already cancelled, 409 conflict if done or failed" },
    })
    .post("/transfers/:id/pause", ({ params }) => fs.transfers.pause(params.id), {
      params: Id,
      response: TransferSchema,
      detail: { tags, summary: "Extension: pause a queued or running transfer (a download keeps its bytes and resumes from them; an upload restarts); 409 conflict when finished" },
    })
    .post("/transfers/:id/resume", ({ params }) => fs.transfers.resume(params.id), {
      params: Id,
      response: TransferSchema,
      detail: { tags, summary: "Extension: queue a paused transfer again; 409 conflict when it is not paused" },
    });
}
