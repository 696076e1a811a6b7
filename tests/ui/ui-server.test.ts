/**
 * The server side of the web UI: the assets under /ui/ (no token, Host check, CSP), the event stream
 * GET /api/v1/events, edit-replay, the method of an intercept rewrite, and `tapwire start` / `tapwire open`.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Server } from "bun";
import { UI_CSP } from "../../src/features/ui/routes.ts";
import { bundleUi } from "../../ui/bundle.ts";
import { startService } from "../helpers/service.ts";
import { BUN, ROOT, startTapwire, tempDir } from "../helpers/tapwire-process.ts";
import { curl } from "../helpers/upstream.ts";

type Svc = Awaited<ReturnType<typeof startService>>;
let svc: Svc;
let upstream: Server<unknown>;
let base: string;

beforeAll(async () => {
  svc = await startService();
  upstream = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const u = new URL(req.url);
      return Response.json({ method: req.method, path: u.pathname, body: await req.text(), marker: req.headers.get("x-marker"), host: req.headers.get("host") });
    },
  });
  base = `http://127.0.0.1:${upstream.port}`;
});
afterAll(async () => {
  await svc?.stop();
  upstream?.stop(true);
});

const viaProxy = (args: string[]) => curl(["--noproxy", "", "-x", `http://127.0.0.1:${svc.proxyPort}`, ...args]);

type Ev = { event: string; data: Record<string, unknown> };

/** Server-sent events of one response, read on demand: `until` waits (with a deadline) for a condition on all seen. */
function eventReader(res: Response) {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  const evs: Ev[] = [];
  let buf = "";
  let ended = false;
  let pending: Promise<{ done: boolean; value?: string }> | null = null;
  return {
    evs,
    get ended() {
      return ended;
    },
    async until(pred: (evs: Ev[]) => boolean, ms = 10_000): Promise<Ev[]> {
      const deadline = Date.now() + ms;
      while (!pred(evs) && !ended && Date.now() < deadline) {
        pending ??= reader.read();
        const r = await Promise.race([pending, Bun.sleep(Math.max(1, deadline - Date.now())).then(() => null)]);
        if (!r) break;
        pending = null;
        if (r.done) {
          ended = true;
          break;
        }
        buf += r.value;
        let i: number;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const ev = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (ev && data) evs.push({ event: ev, data: JSON.parse(data) });
        }
      }
      return evs;
    },
    cancel: () => reader.cancel().catch(() => {}),
  };
}

describe("assets under /ui/", () => {
  test("the page, script and styles need no token and carry a strict own-origin CSP", async () => {
    for (const [path, type] of [["/ui/", "text/html"], ["/ui/index.html", "text/html"], ["/ui/app.js", "text/javascript"], ["/ui/app.css", "text/css"], ["/ui/favicon.svg", "image/svg+xml"]] as const) {
      const r = await fetch(svc.url(path));
      expect({ path, status: r.status }).toEqual({ path, status: 200 });
      expect(r.headers.get("content-type")).toStartWith(type);
      expect(r.headers.get("content-security-policy")).toBe(UI_CSP);
      expect(r.headers.get("x-content-type-options")).toBe("nosniff");
      expect(r.headers.get("referrer-policy")).toBe("no-referrer");
    }
    // own origin only: every fetch directive is 'self' (images also blob: URLs the page makes), nothing inline
    for (const d of UI_CSP.split(";").map((x) => x.trim())) {
      const [name, ...vals] = d.split(/\s+/);
      for (const v of vals) expect({ name, v, ok: ["'self'", "'none'", "blob:"].includes(v) }).toEqual({ name, v, ok: true });
    }
    expect(UI_CSP).not.toContain("unsafe");
    const html = await (await fetch(svc.url("/ui/"))).text();
    expect(html).not.toMatch(/<script>|<style>|style="/);
    expect(html).not.toMatch(/https?:\/\//); // no CDN
  });

  test("/ui redirects to /ui/; an unknown asset is a JSON 404; other methods and API routes still need the token", async () => {
    const r = await fetch(svc.url("/ui"), { redirect: "manual" });
    expect(r.status).toBe(308);
    expect(r.headers.get("location")).toBe("/ui/");
    const nf = await fetch(svc.url("/ui/nope.js"));
    expect(nf.status).toBe(404);
    expect(((await nf.json()) as { error: { code: string } }).error.code).toBe("not_found");
    expect((await fetch(svc.url("/ui/"), { method: "POST", body: "{}" })).status).toBe(401);
    expect((await fetch(svc.url("/api/v1/traffic"))).status).toBe(401);
    expect((await fetch(svc.url("/ui-other"))).status).toBe(401);
  });

  test("the Host check applies to the UI too (DNS rebinding)", async () => {
    const r = await curl(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Host: evil.example:80", svc.url("/ui/")]);
    expect(r.out).toBe("403");
    const js = await curl(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", `Host: localhost:${svc.apiPort}`, svc.url("/ui/app.js")]);
    expect(js.out).toBe("200");
  });

  test("the served script is the bundle of ui/ (what build.ts embeds in the binary)", async () => {
    const served = await (await fetch(svc.url("/ui/app.js"))).text();
    expect(served).toBe((await bundleUi()).js);
    expect(await (await fetch(svc.url("/ui/app.css"))).text()).toBe(readFileSync(join(ROOT, "ui/src/styles.css"), "utf8"));
  });
});

describe("GET /api/v1/events", () => {
  test("needs the bearer token; refuses query parameters (no token in a query string)", async () => {
    expect((await fetch(svc.url("/api/v1/events"))).status).toBe(401);
    expect((await fetch(svc.url(`/api/v1/events?token=${svc.token}`))).status).toBe(401);
    expect((await svc.call("/api/v1/events?x=1")).status).toBe(400);
  });

  test("hello at once, then a traffic event with the new entry id when curl goes through the proxy", async () => {
    const res = await svc.call("/api/v1/events");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toStartWith("text/event-stream");
    const er = eventReader(res);
    await er.until((e) => e.length >= 1);
    expect(er.evs[0]!.event).toBe("hello");
    const before = (er.evs[0]!.data.traffic as { last_id: number }).last_id;
    expect((await viaProxy([`${base}/one`])).code).toBe(0);
    await er.until((e) => e.some((x) => x.event === "traffic"));
    const t = er.evs.find((x) => x.event === "traffic")!;
    expect(t.data.last_id).toBeGreaterThan(before);
    const list = (await (await svc.call("/api/v1/traffic?limit=1")).json()) as { items: { id: number }[] };
    expect(t.data.last_id).toBe(list.items[0]!.id);
    await er.cancel();
  });

  test("a burst of requests is coalesced into few events, the last carrying the newest id", async () => {
    const er = eventReader(await svc.call("/api/v1/events"));
    await er.until((e) => e.length >= 1);
    await Promise.all(Array.from({ length: 20 }, (_, i) => viaProxy([`${base}/burst/${i}`])));
    const newest = ((await (await svc.call("/api/v1/traffic?limit=1")).json()) as { items: { id: number }[] }).items[0]!.id;
    await er.until((e) => e.some((x) => x.event === "traffic" && x.data.last_id === newest));
    const traffic = er.evs.filter((x) => x.event === "traffic");
    expect(traffic.at(-1)!.data.last_id).toBe(newest);
    expect(traffic.length).toBeLessThan(20);
    await er.cancel();
  });

  test("intercepts events follow the paused list; a rewrite can change the method (extension)", async () => {
    const er = eventReader(await svc.call("/api/v1/events"));
    await er.until((e) => e.length >= 1);
    expect((await svc.call("/api/v1/intercept-hosts/127.0.0.1", { method: "PUT" })).status).toBe(204);
    try {
    const client = viaProxy([`${base}/paused`, "-d", "x"]);
    await er.until((e) => e.some((x) => x.event === "intercepts" && x.data.paused === 1));
    expect(er.evs.some((x) => x.event === "intercepts" && x.data.paused === 1)).toBe(true);
    const [p] = (await (await svc.call("/api/v1/intercepts")).json()) as { id: string }[];
    const bad = await svc.call(`/api/v1/intercepts/${p!.id}/resume`, { method: "POST", body: JSON.stringify({ method: "BAD METHOD" }) });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toContain("'method'");
    const ok = await svc.call(`/api/v1/intercepts/${p!.id}/resume`, { method: "POST", body: JSON.stringify({ method: "put" }) });
    expect(ok.status).toBe(204);
    expect(JSON.parse((await client).out)).toMatchObject({ method: "PUT", path: "/paused", body: "x" });
    await er.until((e) => e.some((x) => x.event === "intercepts" && x.data.paused === 0));
    expect(er.evs.some((x) => x.event === "intercepts" && x.data.paused === 0)).toBe(true);
    } finally {
      await er.cancel();
      await svc.call("/api/v1/intercept-hosts/127.0.0.1", { method: "DELETE" });
    }
  });

  test("stopping the service ends open streams (stop does not hang on them)", async () => {
    const s = await startService();
    const er = eventReader(await s.call("/api/v1/events"));
    await er.until((e) => e.length >= 1);
    expect(er.evs[0]!.event).toBe("hello");
    await s.stop();
    // the stream ends (a stop that waited for it would never get here)
    await er.until(() => false, 10_000);
    expect(er.ended).toBe(true);
  });
});

describe("POST /api/v1/traffic/{id}/edit-replay (extension)", () => {
  test("sends the stored request with the changes; the stored entry is unchanged", async () => {
    await viaProxy([`${base}/orig`, "-H", "X-Marker: a", "-d", "first"]);
    const id = ((await (await svc.call("/api/v1/traffic?limit=1")).json()) as { items: { id: number }[] }).items[0]!.id;
    const r = await svc.call(`/api/v1/traffic/${id}/edit-replay`, {
      method: "POST",
      body: JSON.stringify({ method: "patch", url: `${base}/changed`, body: "c2Vjb25k", body_encoding: "base64" }),
    });
    expect(r.status).toBe(200);
    const out = (await r.json()) as { id: number; body: string; status_code: number };
    expect(JSON.parse(out.body)).toMatchObject({ method: "PATCH", path: "/changed", body: "second", marker: "a", host: `127.0.0.1:${upstream.port}` });
    expect(out.id).toBeGreaterThan(id);
    const orig = (await (await svc.call(`/api/v1/traffic/${id}`)).json()) as { method: string; url: string; req_body: string };
    expect(orig).toMatchObject({ method: "POST", url: `${base}/orig`, req_body: "first" });
    // headers replace the whole list
    const h = await svc.call(`/api/v1/traffic/${id}/edit-replay`, { method: "POST", body: JSON.stringify({ headers: [["Host", `127.0.0.1:${upstream.port}`], ["X-Marker", "b"]] }) });
    expect(JSON.parse(((await h.json()) as { body: string }).body)).toMatchObject({ marker: "b", body: "first" });
  });

  test("bad bodies are 400 naming the field; an unknown entry is 404", async () => {
    const id = ((await (await svc.call("/api/v1/traffic?limit=1")).json()) as { items: { id: number }[] }).items[0]!.id;
    const cases: [unknown, string][] = [
      [{ nope: 1 }, "nope"],
      [{ method: "GET /x" }, "method"],
      [{ url: "ftp://x/" }, "url"],
      [{ headers: [["Bad Name", "v"]] }, "headers"],
      [{ body_encoding: "base64" }, "body_encoding"],
      [{ body: "***", body_encoding: "base64" }, "body"],
      [[], "body"],
    ];
    for (const [body, field] of cases) {
      const r = await svc.call(`/api/v1/traffic/${id}/edit-replay`, { method: "POST", body: JSON.stringify(body) });
      expect({ body, status: r.status }).toEqual({ body, status: 400 });
      expect(((await r.json()) as { error: { message: string } }).error.message).toContain(field);
    }
    expect((await svc.call("/api/v1/traffic/999999/edit-replay", { method: "POST", body: "{}" })).status).toBe(404);
  });
});

describe("tapwire start and tapwire open", () => {
  test("start prints the UI address without the token; open passes the address with the token in its fragment to the opener", async () => {
    const tw = await startTapwire();
    try {
      const ui = await (async () => {
        for (let i = 0; i < 200; i++) {
          const l = tw.stderr.find((x) => x.includes("web UI"));
          if (l) return l;
          await Bun.sleep(10);
        }
        return null;
      })();
      expect(ui).toContain(`http://127.0.0.1:${tw.handshake.port}/ui/`);
      expect(tw.stderr.join("\n")).not.toContain(tw.handshake.token);

      // a fake xdg-open on the PATH records what it was given
      const bin = tempDir("tapwire-open-");
      mkdirSync(bin, { recursive: true });
      const got = join(bin, "got.txt");
      writeFileSync(join(bin, "xdg-open"), `#!/bin/sh\nprintf '%s' "$1" > '${got}'\n`);
      chmodSync(join(bin, "xdg-open"), 0o755);
      const run = (args: string[], path: string) =>
        Bun.spawnSync([BUN, join(ROOT, "src/cli/main.ts"), "open", "--data-dir", tw.dataDir, ...args], { env: { ...process.env, PATH: path }, stdout: "pipe", stderr: "pipe" });
      const want = `http://127.0.0.1:${tw.handshake.port}/ui/#token=${tw.handshake.token}`;
      const opened = run([], bin);
      expect(opened.exitCode).toBe(0);
      expect(readFileSync(got, "utf8")).toBe(want);
      expect(opened.stdout.toString()).toBe("");
      expect(opened.stderr.toString()).not.toContain(tw.handshake.token);

      const none = run([], join(bin, "empty"));
      expect(none.exitCode).toBe(0);
      expect(none.stdout.toString().trim()).toBe(want);
      expect(none.stderr.toString()).toContain("no browser opener");

      const printed = run(["--print", "--json"], bin);
      expect(JSON.parse(printed.stdout.toString())).toEqual({ url: want });
      expect(existsSync(got)).toBe(true);
    } finally {
      await tw.stop();
    }
  });

  test("open without a running tapwire fails with the usual message", () => {
    const dir = tempDir();
    const r = Bun.spawnSync([BUN, join(ROOT, "src/cli/main.ts"), "open", "--data-dir", dir], { stdout: "pipe", stderr: "pipe" });
    expect(r.exitCode).toBe(1);
    expect(r.stderr.toString()).toContain("not running");
  });
});
