import { join } from "node:path";
import type { Feature, FeatureContext } from "../../service/feature.ts";
import { RemoteConnections } from "./connections.ts";
import { remoteFsRoutes } from "./routes.ts";
import { RemoteFs } from "./service.ts";
import { TransferQueue } from "./transfers.ts";

export const CONNECTIONS_FILE = "remote-connections.json";

/**
 * Remote files (spec 2.16-2.18, 4.13): SFTP, FTP/FTPS, S3 and WebDAV connections defined in
 * remote-connections.json in the data directory (re-read when it changes), folder operations and a transfer queue.
 * No pipeline addon.
 */
export function remoteFsFeature(ctx: FeatureContext): Feature & { remote: RemoteFs } {
  const connections = new RemoteConnections(join(ctx.dataDir, CONNECTIONS_FILE), process.env, ctx.log);
  connections.reloadQuietly();
  const remote = new RemoteFs(connections, new TransferQueue(connections));
  return {
    name: "remote-fs",
    remote,
    routes: [remoteFsRoutes(remote)],
    start() {
      connections.watch();
    },
    async stop() {
      await remote.transfers.stop();
      await connections.close();
    },
    health() {
      return connections.loadError ? { remote_connections_error: connections.loadError } : {};
    },
  };
}
