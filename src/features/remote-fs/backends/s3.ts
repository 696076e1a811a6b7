import { Readable } from "node:stream";
import { Agent as HttpsAgent } from "node:https";
import { posix } from "node:path";
import {
  CopyObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type ListObjectsV2CommandOutput,
} from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { checkAborted, joinPath, type RemoteBackend, type RemoteEntry } from "../backend.ts";
import { readCaFile, secretFromEnv, type ConnectionConfig } from "../config.ts";
import { asRemoteError, remoteError, RemoteError } from "../errors.ts";

/** The SDK's service and network errors as wire codes. */
function translate(e: unknown, what: string): RemoteError {
  if (e instanceof RemoteError) return e;
  const err = e as { name?: string; message?: string; $metadata?: { httpStatusCode?: number }; Code?: string };
  const name = err?.name ?? "";
  const status = err?.$metadata?.httpStatusCode;
  const msg = `${what}: ${name && name !== "Error" ? `${name}: ` : ""}${err?.message ?? String(e)}`;
  if (name === "AbortError") return remoteError("cancelled", `${what}: cancelled`);
  if (["InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "CredentialsProviderError", "AuthorizationHeaderMalformed"].includes(name)) {
    return remoteError("auth", msg);
  }
  if (name === "AccessDenied" || name === "AllAccessDisabled") return remoteError("permissionDenied", msg);
  if (["NoSuchKey", "NoSuchBucket", "NotFound", "NoSuchUpload"].includes(name)) return remoteError("notFound", msg);
  if (name === "NotImplemented" || status === 501) return remoteError("unsupported", msg);
  if (status === 401) return remoteError("auth", msg);
  if (status === 403) return remoteError("permissionDenied", msg);
  if (status === 404) return remoteError("notFound", msg);
  if (status === 409 || status === 412) return remoteError("alreadyExists", msg);
  if (status !== undefined && status >= 400 && status < 500) return remoteError("protocol", msg);
  return asRemoteError(e, what);
}

/**
 * S3 (and S3-compatible stores) over the AWS SDK v3. Paths are keys with a leading `/`; a folder is a key prefix
 * (shown in listings from the delimiter's common prefixes) and `mkdir` writes the usual empty `name/` marker.
 */
export class S3Backend implements RemoteBackend {
  /** A PutObject or a multipart upload only appears once complete: no temporary name is needed. */
  readonly atomicWrite = false;
  private client: S3Client | null = null;
  private readonly bucket: string;

  constructor(private readonly conn: ConnectionConfig, private readonly env: Record<string, string | undefined>) {
    this.bucket = conn.options.bucket!;
  }

  get connected(): boolean {
    return this.client !== null;
  }

  async connect(): Promise<void> {
    if (this.client) return;
    const c = this.conn;
    let credentials;
    if (c.auth.access_key_env) {
      credentials = {
        accessKeyId: secretFromEnv(c.auth.access_key_env, this.env, `connection '${c.id}' access key`),
        secretAccessKey: secretFromEnv(c.auth.secret_key_env!, this.env, `connection '${c.id}' secret key`),
      };
    }
    const ca = readCaFile(c);
    let endpoint = c.options.endpoint;
    if (!endpoint && c.host && !c.host.endsWith("amazonaws.com")) endpoint = `https://${c.host}${c.port ? `:${c.port}` : ""}`;
    this.client = new S3Client({
      region: c.options.region ?? "us-east-1",
      endpoint,
      forcePathStyle: c.options.force_path_style ?? false,
      credentials,
      // streamed PutObject bodies are corrupted on some S3-compatible stores with the default checksums
      requestChecksumCalculation: "WHEN_REQUIRED",
      responseChecksumValidation: "WHEN_REQUIRED",
      maxAttempts: 2,
      ...(ca ? { requestHandler: { httpsAgent: new HttpsAgent({ ca, keepAlive: true }) } } : {}),
    });
    // reach the bucket now, so a wrong key, a missing bucket or a closed port shows on first use
    try {
      await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, MaxKeys: 1 }));
    } catch (e) {
      this.client.destroy();
      this.client = null;
      throw translate(e, `s3 ${c.host} bucket ${this.bucket}`);
    }
  }

  private get s3(): S3Client {
    if (!this.client) throw remoteError("hostUnreachable", "s3: not connected");
    return this.client;
  }

  async home(): Promise<string> {
    return "/";
  }

  private key(path: string): string {
    return path.replace(/^\/+/, "");
  }

  private async *pages(prefix: string, delimiter?: string): AsyncGenerator<ListObjectsV2CommandOutput> {
    let token: string | undefined;
    do {
      const page = await this.s3.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, Delimiter: delimiter, ContinuationToken: token }));
      yield page;
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  async list(path: string): Promise<RemoteEntry[]> {
    try {
      const prefix = path === "/" ? "" : `${this.key(path)}/`;
      const out: RemoteEntry[] = [];
      const seen = new Set<string>();
      let any = path === "/";
      for await (const page of this.pages(prefix, "/")) {
        for (const p of page.CommonPrefixes ?? []) {
          any = true;
          const name = p.Prefix!.slice(prefix.length).replace(/\/$/, "");
          if (!name || seen.has(name)) continue;
          seen.add(name);
          out.push({ name, path: joinPath(path, name), isDir: true, size: 0 });
        }
        for (const o of page.Contents ?? []) {
          any = true;
          const name = o.Key!.slice(prefix.length);
          if (!name) continue; // the folder's own marker
          out.push({ name, path: joinPath(path, name), isDir: false, size: Number(o.Size ?? 0), modifiedMs: o.LastModified?.getTime(), owner: o.Owner?.DisplayName });
        }
      }
      if (!any) {
        if (await this.objectExists(this.key(path))) throw remoteError("protocol", `list ${path}: it is a file, not a folder`);
        throw remoteError("notFound", `list ${path}: no such folder`);
      }
      return out;
    } catch (e) {
      throw translate(e, `list ${path}`);
    }
  }

  private async objectExists(key: string): Promise<{ size: number; modifiedMs?: number } | null> {
    try {
      const h = await this.s3.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return { size: Number(h.ContentLength ?? 0), modifiedMs: h.LastModified?.getTime() };
    } catch (e) {
      const t = translate(e, `stat /${key}`);
      if (t.remoteCode === "notFound") return null;
      throw t;
    }
  }

  private async prefixExists(prefix: string): Promise<boolean> {
    const page = await this.s3.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, MaxKeys: 1 }));
    return (page.KeyCount ?? page.Contents?.length ?? 0) > 0;
  }

  async stat(path: string): Promise<RemoteEntry | null> {
    const name = posix.basename(path) || "/";
    if (path === "/") return { name, path, isDir: true, size: 0 };
    try {
      const o = await this.objectExists(this.key(path));
      if (o) return { name, path, isDir: false, size: o.size, modifiedMs: o.modifiedMs };
      if (await this.prefixExists(`${this.key(path)}/`)) return { name, path, isDir: true, size: 0 };
      return null;
    } catch (e) {
      throw translate(e, `stat ${path}`);
    }
  }

  async mkdir(path: string): Promise<void> {
    if (path === "/" || (await this.stat(path))) throw remoteError("alreadyExists", `mkdir ${path}: it exists already`);
    try {
      // a marker for each missing level (a prefix exists as soon as something lies under it, but some stores,
      // s3rver among them, only report one level of common prefixes)
      const missing: string[] = [];
      for (let p = path; p !== "/" && !(await this.stat(p)); p = posix.dirname(p)) missing.unshift(p);
      for (const p of missing) await this.s3.send(new PutObjectCommand({ Bucket: this.bucket, Key: `${this.key(p)}/`, Body: new Uint8Array(0), ContentLength: 0 }));
    } catch (e) {
      throw translate(e, `mkdir ${path}`);
    }
  }

  /** Every key under a folder path (its marker included), following the listing to its end. */
  private async keysUnder(path: string): Promise<string[]> {
    const keys: string[] = [];
    for await (const page of this.pages(`${this.key(path)}/`)) for (const o of page.Contents ?? []) keys.push(o.Key!);
    return keys;
  }

  private async copy(fromKey: string, toKey: string): Promise<void> {
    await this.s3.send(new CopyObjectCommand({ Bucket: this.bucket, Key: toKey, CopySource: `${this.bucket}/${fromKey.split("/").map(encodeURIComponent).join("/")}` }));
  }

  private async deleteKeys(keys: string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += 1000) {
      const r = await this.s3.send(new DeleteObjectsCommand({ Bucket: this.bucket, Delete: { Objects: keys.slice(i, i + 1000).map((Key) => ({ Key })), Quiet: true } }));
      if (r.Errors?.length) throw remoteError("io", `delete: ${r.Errors[0]!.Key}: ${r.Errors[0]!.Code} ${r.Errors[0]!.Message}`);
    }
  }

  async rename(from: string, to: string): Promise<void> {
    const st = await this.stat(from);
    if (!st) throw remoteError("notFound", `rename: ${from} does not exist`);
    if (await this.stat(to)) throw remoteError("alreadyExists", `rename: ${to} exists already`);
    await this.move(from, to, st.isDir);
  }

  private async move(from: string, to: string, isDir: boolean): Promise<void> {
    try {
      if (!isDir) {
        await this.copy(this.key(from), this.key(to));
        await this.deleteKeys([this.key(from)]);
        return;
      }
      // S3 has no rename: copy every object under the prefix, then delete the originals
      const keys = await this.keysUnder(from);
      const fromPrefix = `${this.key(from)}/`;
      const toPrefix = `${this.key(to)}/`;
      for (const k of keys) await this.copy(k, toPrefix + k.slice(fromPrefix.length));
      await this.deleteKeys(keys);
    } catch (e) {
      throw translate(e, `rename ${from}`);
    }
  }

  async replace(from: string, to: string): Promise<void> {
    await this.move(from, to, false);
  }

  async remove(path: string, isDir: boolean): Promise<void> {
    try {
      const key = this.key(path);
      const obj = path !== "/" && (await this.objectExists(key));
      const keys = isDir || !obj ? await this.keysUnder(path) : [];
      if (!obj && keys.length === 0) throw remoteError("notFound", `delete: ${path} does not exist`);
      // is_dir: the prefix and everything under it; otherwise the object (or, when there is no such object, the folder)
      await this.deleteKeys(obj && !isDir ? [key] : obj ? [key, ...keys] : keys);
    } catch (e) {
      throw translate(e, `delete ${path}`);
    }
  }

  async read(path: string, offset: number, signal: AbortSignal): Promise<Readable> {
    checkAborted(signal);
    try {
      const r = await this.s3.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.key(path), Range: offset > 0 ? `bytes=${offset}-` : undefined }), { abortSignal: signal });
      const body = r.Body as Readable;
      const onAbort = () => body.destroy(remoteError("cancelled", "transfer cancelled"));
      signal.addEventListener("abort", onAbort, { once: true });
      body.once("close", () => signal.removeEventListener("abort", onAbort));
      return body;
    } catch (e) {
      if ((e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 416) return Readable.from([]);
      throw signal.aborted ? remoteError("cancelled", "transfer cancelled") : translate(e, `download ${path}`);
    }
  }

  async write(path: string, source: Readable, size: number, signal: AbortSignal): Promise<void> {
    checkAborted(signal);
    try {
      if (size < 8 * 1024 * 1024) {
        // one PutObject with a known length
        await this.s3.send(new PutObjectCommand({ Bucket: this.bucket, Key: this.key(path), Body: source, ContentLength: size }), { abortSignal: signal });
        return;
      }
      // multipart, 5 MiB parts (the S3 minimum), 3 at a time: about 15 MiB buffered whatever the file's size
      const up = new Upload({ client: this.s3, params: { Bucket: this.bucket, Key: this.key(path), Body: source }, partSize: 5 * 1024 * 1024, queueSize: 2, leavePartsOnError: false });
      const onAbort = () => void up.abort().catch(() => {});
      signal.addEventListener("abort", onAbort, { once: true });
      try {
        await up.done();
      } finally {
        signal.removeEventListener("abort", onAbort);
      }
    } catch (e) {
      throw signal.aborted ? remoteError("cancelled", "transfer cancelled") : translate(e, `upload ${path}`);
    }
  }

  async close(): Promise<void> {
    this.client?.destroy();
    this.client = null;
  }
}
