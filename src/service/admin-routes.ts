import { Elysia } from "elysia";

/** Extension route: clean shutdown over the API (same effect as SIGTERM). */
export function adminRoutes(requestShutdown: () => void) {
  return new Elysia({ name: "admin", prefix: "/api/v1" }).post(
    "/shutdown",
    ({ set }) => {
      // Let this response leave first; the service then closes listeners, flushes state and removes the handshake.
      setImmediate(requestShutdown);
      set.status = 204;
    },
    { detail: { tags: ["service"], summary: "Stop the service cleanly (extension; 204)" } },
  );
}
