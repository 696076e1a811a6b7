import { t } from "elysia";
import { badRequest } from "../../api/errors.ts";
import { normalizeUrl } from "../rules/matcher.ts";
import { ruleFamilyRoutes } from "../rules/rule-routes.ts";
import { MapRemoteRuleSchema } from "./schema.ts";
import { destUrl, type MapRemoteStore } from "./store.ts";

const MatchQuery = t.Object({
  url: t.Optional(t.String({ description: "absolute http(s) URL to test" })),
  method: t.Optional(t.String({ description: "request method; GET when omitted" })),
});

/** Checks the preview's query: an absolute http(s)/ws(s) URL is required; the method defaults to GET. */
function previewInput(query: { url?: string; method?: string }): { url: string; method: string } {
  const url = query.url?.trim() ?? "";
  if (url === "") throw badRequest("query parameter 'url' is required (an absolute http(s) URL)");
  try {
    normalizeUrl(url);
  } catch {
    throw badRequest(`query parameter 'url': '${url}' is not an absolute http(s) URL`);
  }
  return { url, method: query.method?.trim() || "GET" };
}

/** Spec 4.11: the shared rule-family routes plus GET /match (which rule would rewrite a request, and to what). */
export function mapRemoteRoutes(store: MapRemoteStore) {
  return ruleFamilyRoutes({ name: "map-remote", prefix: "/api/v1/map-remote", store, schema: MapRemoteRuleSchema, what: "Map Remote" }).get(
    "/match",
    ({ query }) => {
      const { url, method } = previewInput(query);
      const n = normalizeUrl(url);
      const scheme = n.scheme === "https" || n.scheme === "wss" ? "https" : "http";
      const m = store.match({ method, scheme, host: n.host, port: n.port ?? (scheme === "https" ? 443 : 80), path: n.path, query: n.query });
      return m ? { matched: true, rule: m.rule, url: destUrl(m.dest) } : { matched: false, rule: null, url: null };
    },
    {
      query: MatchQuery,
      response: t.Object({ matched: t.Boolean(), rule: t.Union([MapRemoteRuleSchema, t.Null()]), url: t.Union([t.String(), t.Null()]) }),
      detail: {
        tags: ["map-remote"],
        summary: "Preview: the first enabled rule matching method and url (the master flag is not consulted), and the rewritten URL; {matched, rule, url}",
      },
    },
  );
}
