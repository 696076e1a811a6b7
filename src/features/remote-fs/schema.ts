import { t } from "elysia";

const strict = { additionalProperties: false } as const;
const Path = (description: string) => t.String({ minLength: 1, description });

export const PathBody = t.Object({ path: Path("remote path: absolute, or relative to the connection's homePath (else its login folder)") }, strict);
export const RenameBody = t.Object({ from: Path("existing remote path"), to: Path("new remote path; must not exist (409 alreadyExists)") }, strict);
export const DeleteBody = t.Object(
  {
    paths: t.Array(
      t.Object(
        {
          path: Path("remote path"),
          is_dir: t.Optional(t.Boolean({ default: false, description: "delete a folder (on S3: every object under the prefix); a folder is deleted with its contents either way on the other protocols" })),
        },
        strict,
      ),
      { minItems: 1 },
    ),
  },
  strict,
);
export const DownloadBody = t.Object(
  { remote_path: Path("remote file"), local_path: Path("absolute local path the file is renamed to once complete (400 if relative)") },
  strict,
);
export const UploadBody = t.Object({ local_path: Path("absolute path of a local file"), remote_path: Path("remote file to create or replace") }, strict);

const ErrorObj = t.Object({ code: t.String(), message: t.String() });

export const ConnectionSchema = t.Object({
  id: t.String(),
  protocol: t.String({ description: "sftp, ftp, ftps, s3 or webdav" }),
  host: t.String(),
  label: t.String(),
  homePath: t.String(),
  encrypted: t.Boolean({ description: "true for sftp, ftps and https endpoints" }),
  state: t.String({ description: "extension: idle, connecting, connected or error" }),
  last_error: t.Union([ErrorObj, t.Null()], { description: "extension: the last connection-level failure" }),
});

export const EntrySchema = t.Object({
  name: t.String(),
  path: t.String(),
  isDir: t.Boolean(),
  size: t.Integer(),
  modifiedMs: t.Optional(t.Integer()),
  permissions: t.Optional(t.String()),
  owner: t.Optional(t.String()),
  symlinkTarget: t.Optional(t.String()),
});

export const TransferSchema = t.Object({
  transferId: t.String({ description: "tr_rest_ prefix" }),
  connectionId: t.String(),
  kind: t.String({ description: "download or upload" }),
  state: t.String({ description: "queued, running, paused, done, error or cancelled" }),
  remotePath: t.String(),
  localPath: t.String(),
  bytesDone: t.Integer(),
  totalBytes: t.Union([t.Integer(), t.Null()], { description: "extension: the file's size once known" }),
  error: t.Union([ErrorObj, t.Null()], { description: "extension: why it failed (state error)" }),
  startedAt: t.Union([t.Integer(), t.Null()], { description: "extension: ms since the epoch" }),
  finishedAt: t.Union([t.Integer(), t.Null()], { description: "extension: ms since the epoch" }),
});

export const Ok = t.Object({ ok: t.Literal(true) });
