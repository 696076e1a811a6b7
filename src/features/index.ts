import { captureFeature } from "./capture/feature.ts";
import { ignoreHostsFeature } from "./ignore/feature.ts";
import { breakpointsFeature } from "./breakpoints/feature.ts";
import { scriptsFeature } from "./scripts/feature.ts";
import { mapLocalFeature } from "./map-local/feature.ts";
import { mapRemoteFeature } from "./map-remote/feature.ts";
import { throttleFeature } from "./throttle/feature.ts";
import { websocketFeature } from "./websocket/feature.ts";
import { mockFeature } from "./mock/feature.ts";
import { composeFeature } from "./compose/feature.ts";
import { grpcFeature } from "./grpc/feature.ts";
import { flowsFeature } from "./flows/feature.ts";
import { remoteFsFeature } from "./remote-fs/feature.ts";
import { sessionsFeature } from "./sessions/feature.ts";
import type { FeatureFactory } from "../service/feature.ts";

/**
 * Every feature, in the one fixed order in which their addons see each flow. Request-phase hooks stop at the
 * first addon that answers a flow by itself (sets flow.response); response-phase hooks run on all of them, and
 * capture's recording step (its lastAddon) runs after everything else, so entries show what addons did.
 *
 *   capture        decides whether the flow is recorded (capture on, client not ignored)
 *   ignore-hosts   tunnels CONNECTs to ignored hosts; keeps plain-HTTP flows to them out of capture
 *   breakpoints    pauses flows at the request phase (breakpoints, intercept hosts) and the response phase
 *   scripts        runs request scripts just before the request goes upstream (map-remote sees what they changed;
 *                  a request map-local answers is not run) and response scripts before the client receives the
 *                  response (map-local's answers included)
 *   map-local      answers from an inline body or a local file (later request hooks are skipped)
 *   map-remote     rewrites the destination just before the request goes upstream
 *   throttle       attaches bandwidth limits and delays (also to tunnels, via its connect hook)
 *   websocket      records frames of relayed WebSocket connections (a tap, not a hook)
 *   mock           the standalone mock listener (routes and a listener, no hook)
 *   compose        collections and POST /compose/send, which sends through the proxy like any client (routes, no hook)
 *   grpc           GET /traffic/{id}/grpc: captured gRPC messages decoded, named by --proto (routes, no hook)
 *   remote-fs      SFTP/FTP/S3/WebDAV connections, folder operations and transfers (routes, no hook)
 *   sessions       session tabs, saved sessions (HAR files), HAR import/export of traffic (routes, no hook)
 *   flows          stored flows and their runner, which sends through the proxy like compose (routes, no hook); last,
 *                  so that it is stopped first and its runs are cancelled while the proxy still runs
 *   capture-record (last) writes the finished flow to the capture store
 */
export const FEATURES: readonly FeatureFactory[] = [
  captureFeature,
  ignoreHostsFeature,
  breakpointsFeature,
  scriptsFeature,
  mapLocalFeature,
  mapRemoteFeature,
  throttleFeature,
  websocketFeature,
  mockFeature,
  composeFeature,
  grpcFeature,
  remoteFsFeature,
  sessionsFeature,
  flowsFeature,
];
