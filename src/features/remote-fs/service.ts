import { posix } from "node:path";
import type { RemoteEntry } from "./backend.ts";
import type { ConnectionView, RemoteConnections } from "./connections.ts";
import { remoteError } from "./errors.ts";
import type { TransferQueue, TransferView } from "./transfers.ts";

/**
 * The remote-files operations (spec 4.13) over the configured connections and the transfer queue: what the routes,
 * the CLI (through the API) and any other front end call.
 */
export class RemoteFs {
  constructor(readonly connections: RemoteConnections, readonly transfers: TransferQueue) {}

  listConnections(): { connections: ConnectionView[] } {
    return { connections: this.connections.list() };
  }

  async list(id: string, path: string): Promise<{ path: string; entries: RemoteEntry[] }> {
    const c = this.connections.get(id);
    const abs = await c.resolve(path);
    const entries = await c.run((b) => b.list(abs));
    entries.sort((a, b) => (a.isDir === b.isDir ? (a.name < b.name ? -1 : a.name > b.name ? 1 : 0) : a.isDir ? -1 : 1));
    return { path: abs, entries };
  }

  async mkdir(id: string, path: string): Promise<{ ok: true }> {
    const c = this.connections.get(id);
    const abs = await c.resolve(path);
    if (abs === "/") throw remoteError("alreadyExists", "mkdir /: it exists already");
    await c.run((b) => b.mkdir(abs));
    return { ok: true };
  }

  async rename(id: string, from: string, to: string): Promise<{ ok: true }> {
    const c = this.connections.get(id);
    const a = await c.resolve(from);
    const b = await c.resolve(to);
    if (a === "/") throw remoteError("permissionDenied", "rename: cannot move /");
    if (a === b) throw remoteError("alreadyExists", `rename: ${b} exists already (it is the source)`);
    if (b.startsWith(a + "/")) throw remoteError("protocol", `rename: cannot move ${a} into itself (${b})`);
    await c.run((x) => x.rename(a, b));
    return { ok: true };
  }

  /** Deletes each path in order; stops at the first failure (those before it stay deleted). */
  async delete(id: string, paths: { path: string; is_dir?: boolean }[]): Promise<{ ok: true }> {
    const c = this.connections.get(id);
    for (const p of paths) {
      const abs = await c.resolve(p.path);
      if (abs === "/" || posix.normalize(abs) === "/") throw remoteError("permissionDenied", "delete: refusing to delete the root folder");
      await c.run((b) => b.remove(abs, p.is_dir ?? false));
    }
    return { ok: true };
  }

  download(id: string, remotePath: string, localPath: string): { transferId: string } {
    return this.transfers.enqueue("download", id, remotePath, localPath);
  }

  upload(id: string, localPath: string, remotePath: string): { transferId: string } {
    return this.transfers.enqueue("upload", id, remotePath, localPath);
  }

  listTransfers(): { transfers: TransferView[] } {
    return { transfers: this.transfers.list() };
  }
}
