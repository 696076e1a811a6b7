import { Elysia } from "elysia";
import { notFound } from "../../api/errors.ts";
import { indexHtml, uiBundle } from "./assets.ts";

/**
 * Only the page's own origin: scripts, styles, fetches (the API) and images (blob: URLs the page makes from
 * captured bodies are of its own origin). No inline script or style, no frames, no forms, no plugins.
 */
export const UI_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; connect-src 'self'; font-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const SECURITY_HEADERS = {
  "content-security-policy": UI_CSP,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cache-control": "no-store",
};

const FAVICON =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#2563eb"/>' +
  '<path d="M3 5h10M8 5v8" stroke="#fff" stroke-width="2" stroke-linecap="round"/></svg>';

const asset = (body: string, type: string) => new Response(body, { headers: { "content-type": type, ...SECURITY_HEADERS } });

/**
 * The web UI under /ui/ (extension): the page, its script and its styles, served without the bearer token (the
 * guard lets GET /ui/... through; the Host check still applies). The page reads the token from the URL fragment
 * (`/ui/#token=...`, which browsers never send to a server) and sends it on every API call.
 */
export function uiRoutes(version: string) {
  const detail = { hide: true };
  return new Elysia({ name: "ui" })
    // Elysia routes /ui and /ui/ alike: /ui is sent to /ui/ (a browser keeps the #fragment across the redirect)
    .get("/ui/", ({ request }) =>
      new URL(request.url).pathname === "/ui"
        ? new Response(null, { status: 308, headers: { location: "/ui/", ...SECURITY_HEADERS } })
        : asset(indexHtml(version), "text/html; charset=utf-8"), { detail })
    .get("/ui/index.html", () => asset(indexHtml(version), "text/html; charset=utf-8"), { detail })
    .get("/ui/app.js", async () => asset((await uiBundle()).js, "text/javascript; charset=utf-8"), { detail })
    .get("/ui/app.css", async () => asset((await uiBundle()).css, "text/css; charset=utf-8"), { detail })
    .get("/ui/favicon.svg", () => asset(FAVICON, "image/svg+xml"), { detail })
    .get("/ui/*", () => {
      throw notFound("no such UI asset");
    }, { detail });
}
