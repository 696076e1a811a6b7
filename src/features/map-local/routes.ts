import { t } from "elysia";
import { badRequest } from "../../api/errors.ts";
import { normalizeUrl } from "../rules/matcher.ts";
import { ruleFamilyRoutes } from "../rules/rule-routes.ts";
import { MapLocalRuleSchema } from "./schema.ts";
import type { MapLocalStore } from "./store.ts";

const MatchQuery = t.Object({
  url: t.Optional(t.String({ description: "absolute http(s) URL to test" })),
  method: t.Optional(t.String({ description: "request method; GET when omitted" })),
});

/** Checks the preview's query: an absolute http(s)/ws(s) URL is required; the method defaults to GET. */
export function previewInput(query: { url?: string; method?: string }): { url: string; method: string } {
  const url = query.url?.trim() ?? "";
  if (url === "") throw badRequest("query parameter 'url' is required (an absolute http(s) URL)");
  try {
    normalizeUrl(url);
  } catch {
    throw badRequest(`query parameter 'url': '${url}' is not an absolute http(s) URL`);
  }
  const method = query.method?.trim() || "GET";
  return { url, method };
}

/** Spec 4.10: the shared rule-family routes plus GET /match (which rule would serve a request). */
export function mapLocalRoutes(store: MapLocalStore) {
  return ruleFamilyRoutes({ name: "map-local", prefix: "/api/v1/map-local", store, schema: MapLocalRuleSchema, what: "Map Local" }).get(
    "/match",
    ({ query }) => {
      const { url, method } = previewInput(query);
      const rule = store.match(method, url);
      return { matched: rule !== null, rule };
    },
    {
      query: MatchQuery,
      response: t.Object({ matched: t.Boolean(), rule: t.Union([MapLocalRuleSchema, t.Null()]) }),
      detail: {
        tags: ["map-local"],
        summary: "Preview: the first enabled rule matching method and url (the master flag is not consulted); {matched, rule}",
      },
    },
  );
}
