/**
 * A small real API on loopback for the flow tests (and the example in docs/flows.md):
 *   POST /login {username, password} -> 200 {token, user: {id, name}} (alice/secret), else 401 {error}
 *   GET  /me     Authorization: Bearer <token> -> 200 {id, name, roles}, else 401
 *   GET  /items?page=N -> {page, items: [...], next: N+1 | null} (3 pages)
 *   GET  /echo   JSON of the request (method, path, headers, body)
 *   GET  /hang   never answers (its connection is noted as open until the client goes away)
 */
export interface LoginApi {
  url: string;
  /** requests seen, in order: "METHOD /path?query" */
  seen: string[];
  /** Authorization headers seen by /me */
  authSeen: string[];
  /** /hang requests whose connection is still open */
  hanging(): number;
  hangArrived: Promise<void>;
  stop(): void;
}

export function startLoginApi(): LoginApi {
  const tokens = new Map<string, { id: number; name: string }>();
  const seen: string[] = [];
  const authSeen: string[] = [];
  let open = 0;
  let arrived!: () => void;
  const hangArrived = new Promise<void>((r) => (arrived = r));
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const u = new URL(req.url);
      seen.push(`${req.method} ${u.pathname}${u.search}`);
      const body = await req.text();
      if (u.pathname === "/login" && req.method === "POST") {
        let creds: { username?: string; password?: string } = {};
        try {
          creds = JSON.parse(body);
        } catch {}
        if (creds.username === "alice" && creds.password === "secret") {
          const token = `tok-${crypto.randomUUID()}`;
          tokens.set(token, { id: 7, name: "Alice" });
          return Response.json({ token, user: { id: 7, name: "Alice" } });
        }
        return Response.json({ error: "bad credentials" }, { status: 401 });
      }
      if (u.pathname === "/me") {
        const auth = req.headers.get("authorization") ?? "";
        authSeen.push(auth);
        const user = tokens.get(auth.replace(/^Bearer /, ""));
        if (!user) return Response.json({ error: "unauthorized" }, { status: 401 });
        return Response.json({ ...user, roles: ["admin", "dev"] }, { headers: { "x-request-id": "req-42" } });
      }
      if (u.pathname === "/items") {
        const page = Number(u.searchParams.get("page") ?? "1");
        return Response.json({ page, items: [`item-${page}a`, `item-${page}b`], next: page < 3 ? page + 1 : null });
      }
      if (u.pathname === "/echo") return Response.json({ method: req.method, path: u.pathname + u.search, headers: Object.fromEntries(req.headers), body });
      if (u.pathname === "/hang") {
        open++;
        arrived();
        return new Promise<Response>((_, reject) => {
          req.signal.addEventListener("abort", () => {
            open--;
            reject(new Error("client went away"));
          });
        });
      }
      return new Response("not found", { status: 404 });
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}`,
    seen,
    authSeen,
    hanging: () => open,
    hangArrived,
    stop: () => server.stop(true),
  };
}
