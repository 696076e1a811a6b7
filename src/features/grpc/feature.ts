import type { Feature, FeatureContext } from "../../service/feature.ts";
import { ProtoRegistry } from "./protos.ts";
import { grpcRoutes } from "./routes.ts";

/**
 * gRPC made readable: GET /traffic/{id}/grpc splits a captured gRPC or gRPC-Web body into its messages and
 * decodes them, with field names for the methods the .proto files of --proto declare. A view over the capture
 * store (routes, no hook): loading the .proto files fails the start with the file and the reason.
 */
export function grpcFeature(ctx: FeatureContext): Feature & { protos: ProtoRegistry } {
  const protos = new ProtoRegistry();
  return {
    name: "grpc",
    protos,
    // before the API listens (the service starts every feature first)
    async start() {
      await protos.load(ctx.config.protoDirs ?? []);
      if (protos.sources.length) {
        ctx.log(`gRPC: ${protos.size} method(s) from ${protos.sources.map((s) => `${s.files} .proto file(s) in ${s.dir}`).join(", ")}`);
      }
    },
    routes: [grpcRoutes(ctx.store, protos)],
    health: () => ({ grpc_methods: protos.size }),
  };
}
