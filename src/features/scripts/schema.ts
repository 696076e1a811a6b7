import { type Static, Type } from "@sinclair/typebox";

/** A script rule (spec 2.15, ScriptRuleEntry). Every field is required on create. */
export const ScriptRuleSchema = Type.Object({
  id: Type.String({ minLength: 1, description: "caller-supplied unique id (a local client tool uses mcp_ + a millisecond timestamp)" }),
  name: Type.String({ description: "display name" }),
  method: Type.String({ description: "HTTP method compared case-insensitively; empty = any method" }),
  url_pattern: Type.String({ minLength: 1, description: "URL glob with * and **; default ports stripped, so either form matches" }),
  request_script: Type.String({ description: "JavaScript run before the request goes upstream; empty = no request hook" }),
  response_script: Type.String({ description: "JavaScript run before the client receives the response; empty = no response hook" }),
  apply_to_request: Type.Boolean({ description: "run request_script for matching requests" }),
  apply_to_response: Type.Boolean({ description: "run response_script for matching responses" }),
  enabled: Type.Boolean({ description: "per-rule toggle (the master switch is scripting_enabled)" }),
});

export type ScriptRule = Static<typeof ScriptRuleSchema>;

/** GET /script-rules: the master switch and every rule, in order. */
export const ScriptRuleListSchema = Type.Object({
  scripting_enabled: Type.Boolean(),
  rules: Type.Array(ScriptRuleSchema),
});

/** The body of POST /scripts/execute (spec 4.15). */
export const ExecuteBodySchema = Type.Object({
  input: Type.Object({
    script: Type.String({ description: "JavaScript source" }),
    phase: Type.String({ description: "request, response or test" }),
    variables: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: "pm.variables (local scope)" })),
    request: Type.Optional(
      Type.Object({
        method: Type.Optional(Type.String()),
        url: Type.Optional(Type.String()),
        headers: Type.Optional(Type.Record(Type.String(), Type.String())),
        body: Type.Optional(Type.String()),
      }),
    ),
    response: Type.Optional(
      Type.Union([
        Type.Object({
          status: Type.Optional(Type.Integer({ minimum: 100, maximum: 999 })),
          headers: Type.Optional(Type.Record(Type.String(), Type.String())),
          body: Type.Optional(Type.String()),
        }),
        Type.Null(),
      ]),
    ),
    environment: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: "extension: pm.environment" })),
    collectionVariables: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: "extension: pm.collectionVariables" })),
    globals: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: "extension: pm.globals" })),
  }),
});
export type ExecuteBody = Static<typeof ExecuteBodySchema>;
