import { type Static, Type } from "@sinclair/typebox";

const Scheme = (description: string) => Type.Union([Type.Literal("http"), Type.Literal("https")], { description });
const Port = (description: string) => Type.Union([Type.Integer({ minimum: 1, maximum: 65535 }), Type.Null()], { default: null, description });

/**
 * A Map Remote rule (spec 2.13). Defaults: enabled true, match_all_methods false, preserve_original_host_header
 * false, ports null (the scheme's default), method "" (required in substance only when match_all_methods is false).
 */
export const MapRemoteRuleSchema = Type.Object({
  id: Type.String({ minLength: 1, description: "caller-supplied" }),
  enabled: Type.Boolean({ default: true }),
  source_scheme: Scheme("scheme to match (http or https)"),
  source_host: Type.String({ minLength: 1, description: "host to match, no port; case-insensitive" }),
  source_port: Port("port to match; null = the source scheme's default (80/443)"),
  source_path: Type.String({ minLength: 1, description: "path glob (query excluded); each * captures (.*) as $1, $2, ..." }),
  method: Type.String({ default: "", description: "compared case-insensitively; ignored when match_all_methods is true" }),
  match_all_methods: Type.Boolean({ default: false }),
  dest_scheme: Scheme("scheme of the rewritten request (http or https)"),
  dest_host: Type.String({ minLength: 1, description: "rewrite target host, no port" }),
  dest_port: Port("rewrite target port; null = the destination scheme's default"),
  dest_path: Type.String({ description: "rewritten path; $1, $2, ... (or ${N}) substitute captures; the request's query is kept" }),
  preserve_original_host_header: Type.Boolean({ default: false, description: "keep the original Host header instead of the destination's" }),
});

export type MapRemoteRule = Static<typeof MapRemoteRuleSchema>;
