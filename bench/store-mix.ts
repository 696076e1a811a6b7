/**
 * The capture store benches' entry mix (bench/writer-bench.ts): 30 hosts, weighted methods and statuses, JSON and
 * HTML response bodies of 0.2-5 KB (a third gzip-encoded, ~1% holding a rare word), JSON request bodies on
 * POST/PUT/PATCH, 4-6 headers each way. Also bench/store-bench.ts's generator; from a seeded PRNG so
 * that two builds measured one after the other write the same entries.
 */
import { gzipSync } from "node:zlib";
import type { NewEntry } from "../src/store/types.ts";

export const RARE_WORD = "zanzibarquux";

/**
 * onRare: called for each entry whose response body got the rare word. bodyMax: the largest response body
 * (default 5,000 characters: bodies of 200-5,000); a smaller one gives the small entries of a proxy at its peak.
 */
export function entryMix(seed0 = 0x2545f491, onRare?: () => void, bodyMax = 5000): (i: number, now: number, n: number) => NewEntry {
  let seed = seed0;
  const rnd = (): number => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) / 0x100000000;
  };
  const pick = <T>(a: readonly T[]): T => a[Math.floor(rnd() * a.length)]!;
  const weighted = <T>(pairs: readonly [T, number][]): T => {
    const sum = pairs.reduce((s, [, w]) => s + w, 0);
    let r = rnd() * sum;
    for (const [v, w] of pairs) if ((r -= w) < 0) return v;
    return pairs[pairs.length - 1]![0];
  };
  const words = (n: number): string => {
    const out: string[] = [];
    for (let i = 0; i < n; i++) out.push(pick(WORDS));
    return out.join(" ");
  };
  const jsonBody = (size: number, rare: boolean): string => {
    const items: object[] = [];
    let len = 2;
    while (len < size) {
      const it = { id: Math.floor(rnd() * 1e6), name: words(2), description: words(6), state: pick(["active", "pending", "closed"]), score: Math.round(rnd() * 1000) / 10 };
      items.push(it);
      len += JSON.stringify(it).length + 1;
    }
    if (rare) items.splice(Math.floor(rnd() * items.length), 0, { note: `see ${RARE_WORD} for details` });
    return JSON.stringify({ items, count: items.length });
  };
  const htmlBody = (size: number, rare: boolean): string => {
    let s = "<!doctype html><html><head><title>" + words(3) + "</title></head><body>";
    while (s.length < size) s += `<p class="c${Math.floor(rnd() * 9)}">${words(12)}</p>\n`;
    if (rare) s += `<p>${RARE_WORD}</p>`;
    return s + "</body></html>";
  };
  const enc = new TextEncoder();
  return (i, now, n) => {
    const host = pick(HOSTS);
    const method = weighted(METHODS);
    const status = weighted(STATUSES);
    const depth = 1 + Math.floor(rnd() * 4);
    const segs: string[] = [];
    for (let d = 0; d < depth; d++) segs.push(rnd() < 0.25 ? String(Math.floor(rnd() * 100000)) : pick(SEGMENTS));
    const path = "/" + segs.join("/");
    const query = rnd() < 0.4 ? `?page=${Math.floor(rnd() * 20)}&q=${pick(WORDS)}` : "";
    const url = `https://${host}${path}${query}`;
    const isHtml = rnd() < 0.25;
    const hasBody = !(status === 0 || status === 204 || status === 304);
    const rare = hasBody && rnd() < 0.01;
    if (rare) onRare?.();
    const size = 200 + Math.floor(rnd() * Math.max(0, bodyMax - 200));
    const resText = !hasBody ? "" : isHtml ? htmlBody(size, rare) : jsonBody(size, rare);
    const ct = resText === "" ? "" : isHtml ? "text/html; charset=utf-8" : "application/json";
    const gzip = resText !== "" && rnd() < 0.3;
    const resBytes = resText === "" ? null : gzip ? new Uint8Array(gzipSync(resText)) : enc.encode(resText);
    const reqText = method === "POST" || method === "PUT" || method === "PATCH" ? jsonBody(100 + Math.floor(rnd() * 800), false) : "";
    const reqBytes = reqText === "" ? null : enc.encode(reqText);
    const resHeaders: [string, string][] = [["Date", new Date(now).toUTCString()], ["Server", pick(["nginx", "cloudflare", "envoy", "gws"])]];
    if (ct) resHeaders.push(["Content-Type", ct]);
    if (gzip) resHeaders.push(["Content-Encoding", "gzip"]);
    resHeaders.push(["Content-Length", String(resBytes?.length ?? 0)], ["Cache-Control", "no-cache"]);
    return {
      method,
      url,
      host,
      status_code: status,
      content_type: ct,
      duration_ms: Math.floor(rnd() * 800),
      timestamp: now - (n - i) * 100,
      client_addr: pick(["curl", "node", "Google Chrome", "Slack", "192.168.1.23", "10.0.0.7"]),
      has_response: status !== 0,
      req_headers: [
        ["Host", host], ["User-Agent", "Mozilla/5.0 (X11; Linux x86_64)"], ["Accept", "*/*"],
        ["Accept-Encoding", "gzip, br"], ...(reqBytes ? [["Content-Type", "application/json"] as [string, string]] : []),
      ],
      res_headers: resHeaders,
      req_body: reqBytes,
      req_body_size: reqBytes?.length ?? 0,
      res_body: resBytes,
      res_body_size: resBytes?.length ?? 0,
      error: status === 0 ? pick(["upstream refused", "TLS verification failed", "timeout"]) : undefined,
    };
  };
}

const HOSTS = [
  "api.github.com", "github.com", "avatars.githubusercontent.com", "www.google.com", "fonts.googleapis.com",
  "api.stripe.com", "js.stripe.com", "cdn.jsdelivr.net", "registry.npmjs.org", "api.openai.com",
  "login.microsoftonline.com", "graph.microsoft.com", "s3.amazonaws.com", "sqs.eu-west-1.amazonaws.com",
  "api.twitter.com", "pbs.twimg.com", "www.youtube.com", "i.ytimg.com", "api.segment.io", "sentry.io",
  "localhost", "127.0.0.1", "api.internal.example.com", "auth.example.com", "static.example.com",
  "hooks.slack.com", "api.slack.com", "telemetry.example.org", "update.example.net", "pypi.org",
];
const METHODS: [string, number][] = [["GET", 70], ["POST", 18], ["PUT", 5], ["DELETE", 3], ["PATCH", 3], ["OPTIONS", 1]];
const STATUSES: [number, number][] = [
  [200, 60], [201, 6], [204, 6], [301, 2], [302, 3], [304, 8], [400, 3], [401, 2], [403, 1], [404, 5],
  [429, 1], [500, 1.5], [502, 1], [503, 0.5], [0, 1],
];
const SEGMENTS = ["api", "v1", "v2", "users", "repos", "orders", "items", "search", "auth", "token", "events",
  "assets", "static", "js", "css", "img", "graphql", "health", "metrics", "settings", "projects", "files"];
const WORDS = ("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore " +
  "et dolore magna aliqua enim minim veniam quis nostrud exercitation ullamco laboris nisi aliquip commodo " +
  "consequat duis aute irure reprehenderit voluptate velit esse cillum fugiat nulla pariatur excepteur sint " +
  "occaecat cupidatat non proident sunt culpa officia deserunt mollit anim est laborum alpha beta gamma delta " +
  "user account order invoice payment status pending active disabled created updated token session").split(" ");
