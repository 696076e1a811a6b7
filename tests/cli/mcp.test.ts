import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { startService } from "../helpers/service.ts";
import { BUN, ROOT, tempDir } from "../helpers/tapwire-process.ts";
import { curl, startUpstream, type Upstream } from "../helpers/upstream.ts";

type Svc = Awaited<ReturnType<typeof startService>>;
type ToolResult = { content: { type: string; text?: string }[]; isError?: boolean };

const MCP_TS = join(ROOT, "src/cli/mcp.ts");

let up: Upstream;
let svc: Svc;
let proxy: string;
let client: Client;
let transport: StdioClientTransport;
const stderr: string[] = [];

/** Connects an MCP client to `cmd` (spawned over stdio), keeping what the server writes on stderr. */
async function connect(cmd: string[], sink: string[]): Promise<{ client: Client; transport: StdioClientTransport }> {
  const t = new StdioClientTransport({ command: cmd[0]!, args: cmd.slice(1), cwd: ROOT, stderr: "pipe", env: { ...process.env } as Record<string, string> });
  t.stderr?.on("data", (d: Buffer) => sink.push(d.toString()));
  const c = new Client({ name: "tapwire-test", version: "1.0.0" });
  await c.connect(t);
  return { client: c, transport: t };
}

async function callTool(name: string, args: Record<string, unknown> = {}): Promise<ToolResult> {
  return (await client.callTool({ name, arguments: args })) as ToolResult;
}

/** The text of a successful tool result. */
async function ok(name: string, args: Record<string, unknown> = {}): Promise<string> {
  const r = await callTool(name, args);
  if (r.isError) throw new Error(`${name} failed: ${r.content[0]?.text}`);
  expect(r.content[0]?.type).toBe("text");
  return r.content[0]!.text!;
}

async function okJson(name: string, args: Record<string, unknown> = {}): Promise<any> {
  return JSON.parse(await ok(name, args));
}

/** Polls `fn` until it returns something truthy; fails after `ms`. */
async function waitFor<T>(what: string, fn: () => Promise<T | null | undefined | false>, ms = 5_000): Promise<T> {
  const end = performance.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(20);
  }
}

beforeAll(async () => {
  up = startUpstream();
  svc = await startService();
  proxy = `http://127.0.0.1:${svc.proxyPort}`;
  ({ client, transport } = await connect([BUN, MCP_TS, "--data-dir", svc.config.dataDir], stderr));
});
afterAll(async () => {
  await client?.close();
  await svc.stop();
  up.stop();
});

describe("tapwire mcp over stdio", () => {
  test("lists every tool, each described for an assistant and with an input schema", async () => {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name).sort();
    expect(names).toEqual(
      [
        "create_map_local_rule",
        "create_mock_rule",
        "delete_breakpoint",
        "delete_map_local_rule",
        "delete_mock_rule",
        "diff_traffic_entries",
        "export_curl",
        "get_status",
        "get_traffic_entry",
        "list_intercepts",
        "list_traffic",
        "replay_request",
        "resume_intercept",
        "run_script",
        "set_breakpoint",
        "start_mock_server",
      ].sort(),
    );
    for (const t of tools) {
      expect(t.description!.length).toBeGreaterThan(60);
      expect(t.inputSchema.type).toBe("object");
    }
    const list = tools.find((t) => t.name === "list_traffic")!;
    expect(Object.keys(list.inputSchema.properties!)).toEqual(
      expect.arrayContaining(["limit", "offset", "host", "method", "status", "status_min", "status_max", "path", "search", "has_error", "since_id", "since", "order"]),
    );
    expect((await client.getServerVersion())?.name).toBe("tapwire");
    expect(client.getInstructions()).toContain("proxy");
  });

  test("get_status answers the service's health", async () => {
    const h = await okJson("get_status");
    expect(h).toMatchObject({ status: "ok", proxy_port: svc.proxyPort, api_port: svc.apiPort });
  });

  test("list_traffic finds a request sent through the proxy; get_traffic_entry and export_curl show it", async () => {
    const r = await curl(["-x", proxy, "-H", "X-Mcp-Test: yes", `${up.httpUrl}/echo?from=mcp-test`]);
    expect(r.code).toBe(0);
    const list = await okJson("list_traffic", { path: "/echo", search: "from=mcp-test", limit: 5 });
    expect(list.total).toBe(1);
    const item = list.items[0];
    expect(item).toMatchObject({ method: "GET", url: `${up.httpUrl}/echo?from=mcp-test`, status_code: 200 });
    // filters are passed on: a status that no entry has finds nothing
    expect((await okJson("list_traffic", { status: 418 })).total).toBe(0);

    const entry = await okJson("get_traffic_entry", { id: item.id });
    expect(entry.req_headers).toContainEqual(["X-Mcp-Test", "yes"]);
    expect(JSON.parse(entry.res_body).path).toBe("/echo?from=mcp-test");
    const clipped = await okJson("get_traffic_entry", { id: item.id, max_body_chars: 10 });
    expect(clipped.res_body).toHaveLength(10);
    expect(clipped.res_body_clipped_for_display).toContain("more characters");

    const cmd = await ok("export_curl", { id: item.id });
    expect(cmd).toContain("curl");
    expect(cmd).toContain(`${up.httpUrl}/echo?from=mcp-test`);
    expect(cmd).toContain("X-Mcp-Test: yes");
  });

  test("replay_request sends it again and diff_traffic_entries compares the two", async () => {
    await curl(["-x", proxy, `${up.httpUrl}/echo?replay=1`]);
    const [first] = (await okJson("list_traffic", { search: "replay=1" })).items;
    const replay = await okJson("replay_request", { id: first.id });
    expect(replay).toMatchObject({ status_code: 200, replay_of: first.id });
    expect(replay.id).toBeGreaterThan(first.id);
    const diff = await okJson("diff_traffic_entries", { id1: first.id, id2: replay.id });
    expect(typeof diff).toBe("object");
  });

  test("API errors are MCP tool errors carrying the API's message", async () => {
    const r = await callTool("get_traffic_entry", { id: 987654 });
    expect(r.isError).toBe(true);
    expect(r.content[0]!.text).toContain("HTTP 404");
    expect(r.content[0]!.text).toContain("not_found");
    const bad = await callTool("create_map_local_rule", { id: "bad", url_pattern: "ftp://nope/*", match_all_methods: true });
    expect(bad.isError).toBe(true);
    expect(bad.content[0]!.text).toContain("HTTP 400");
  });

  test("create_mock_rule / delete_mock_rule change the rules the API lists, and start_mock_server serves them", async () => {
    const rule = await okJson("create_mock_rule", { id: "mcp-mock", url_pattern: "/hello/*", method: "GET", status_code: 201, headers: [["Content-Type", "text/plain"]], body: "hi from mock" });
    expect(rule).toMatchObject({ id: "mcp-mock", url_pattern: "/hello/*", status_code: 201, enabled: true });
    const listed = (await (await svc.call("/api/v1/mock")).json()) as { rules: { id: string }[] };
    expect(listed.rules.map((r) => r.id)).toContain("mcp-mock");

    const started = await okJson("start_mock_server", { port: 0 });
    expect(started.running).toBe(true);
    const res = await fetch(`http://127.0.0.1:${started.port}/hello/world`);
    expect(res.status).toBe(201);
    expect(await res.text()).toBe("hi from mock");
    await svc.call("/api/v1/mock/stop", { method: "POST" });

    expect(await okJson("delete_mock_rule", { id: "mcp-mock" })).toEqual({ ok: true });
    const after = (await (await svc.call("/api/v1/mock")).json()) as { rules: { id: string }[] };
    expect(after.rules.map((r) => r.id)).not.toContain("mcp-mock");
    const again = await callTool("delete_mock_rule", { id: "mcp-mock" });
    expect(again.isError).toBe(true);
  });

  test("create_map_local_rule answers proxied requests; delete_map_local_rule stops it", async () => {
    const rule = await okJson("create_map_local_rule", { url_pattern: `127.0.0.1:${up.http.port}/mapped/*`, match_all_methods: true, inline_body: '{"mapped":true}', inline_format: "json" });
    expect(rule.id).toStartWith("mcp_");
    const r = await curl(["-x", proxy, `${up.httpUrl}/mapped/x`]);
    expect(JSON.parse(r.out)).toEqual({ mapped: true });
    await okJson("delete_map_local_rule", { id: rule.id });
    const real = await curl(["-x", proxy, "-w", "%{http_code}", "-o", "/dev/null", `${up.httpUrl}/mapped/x`]);
    expect(real.out).toBe("404"); // the upstream's own answer
  });

  test("set_breakpoint pauses a flow, list_intercepts shows it, resume_intercept lets it go edited; delete_breakpoint removes it", async () => {
    const set = await okJson("set_breakpoint", { pattern: `127.0.0.1:${up.http.port}/echo/paused`, intercept_response: false });
    expect(set.breakpoints).toContainEqual({ pattern: `127.0.0.1:${up.http.port}/echo/paused`, intercept_request: true, intercept_response: false });
    const pending = curl(["-x", proxy, `${up.httpUrl}/echo/paused`]);
    const paused = await waitFor("the paused flow", async () => {
      const list = await okJson("list_intercepts");
      return list.find((p: { url: string }) => p.url.endsWith("/echo/paused"));
    });
    expect(paused.phase).toBe("request");
    expect(await okJson("resume_intercept", { id: paused.id, url: `${up.httpUrl}/echo/rewritten` })).toEqual({ ok: true });
    const r = await pending;
    expect(JSON.parse(r.out).path).toBe("/echo/rewritten");
    const gone = await callTool("resume_intercept", { id: paused.id });
    expect(gone.isError).toBe(true);
    const del = await okJson("delete_breakpoint", { pattern: `127.0.0.1:${up.http.port}/echo/paused` });
    expect(del.breakpoints).toEqual([]);
  });

  test("run_script runs a script in test mode through POST /scripts/execute", async () => {
    const out = await okJson("run_script", {
      script: `console.log("status", pm.response.code); pm.test("is 200", () => pm.expect(pm.response.code).to.equal(200)); pm.variables.set("seen", "yes");`,
      phase: "test",
      request: { method: "GET", url: "https://api.example.com/x" },
      response: { status: 200, body: "{}" },
    });
    expect(out.tests).toEqual([{ name: "is 200", passed: true, error: null }]);
    expect(out.console[0].message).toContain("status 200");
    expect(out.variables).toMatchObject({ seen: "yes" });
    const bad = await callTool("run_script", { script: "1", phase: "later" });
    expect(bad.isError).toBe(true);
  });

  test("nothing but protocol on stdout (the client parsed every line), and the token is never shown", async () => {
    expect(stderr.join("")).toContain("tapwire mcp: serving MCP on stdio");
    expect(stderr.join("")).not.toContain(svc.token);
    const everything = JSON.stringify(await client.listTools()) + (await ok("get_status"));
    expect(everything).not.toContain(svc.token);
  });
});

describe("tapwire mcp: usage and a missing service", () => {
  test("--help prints the usage with an example on stdout and exits 0; a bad flag exits 2", async () => {
    const p = Bun.spawn([BUN, MCP_TS, "--help"], { stdout: "pipe", stderr: "pipe" });
    const [out, code] = await Promise.all([new Response(p.stdout).text(), p.exited]);
    expect(code).toBe(0);
    expect(out).toContain("usage: tapwire mcp [--data-dir DIR]");
    expect(out).toContain('"mcpServers"');
    const bad = Bun.spawn([BUN, MCP_TS, "--nope"], { stdout: "pipe", stderr: "pipe" });
    const [badOut, badErr, badCode] = await Promise.all([new Response(bad.stdout).text(), new Response(bad.stderr).text(), bad.exited]);
    expect(badCode).toBe(2);
    expect(badOut).toBe("");
    expect(badErr).toContain("--nope");
  });

  test("with no tapwire on the data directory, tools answer an error saying so", async () => {
    const sink: string[] = [];
    const dir = tempDir();
    const c = await connect([BUN, MCP_TS, "--data-dir", dir], sink);
    try {
      const r = (await c.client.callTool({ name: "list_traffic", arguments: {} })) as ToolResult;
      expect(r.isError).toBe(true);
      expect(r.content[0]!.text).toContain("tapwire is not running on data directory");
      expect(r.content[0]!.text).toContain(dir);
    } finally {
      await c.client.close();
    }
  });
});

// Through `tapwire mcp` once src/cli/main.ts dispatches it.
const wired = /["']mcp["']/.test(readFileSync(join(ROOT, "src/cli/main.ts"), "utf8"));
describe.skipIf(!wired)("tapwire mcp through the CLI entry", () => {
  test("bun src/cli/main.ts mcp serves the same tools", async () => {
    const sink: string[] = [];
    const c = await connect([BUN, join(ROOT, "src/cli/main.ts"), "mcp", "--data-dir", svc.config.dataDir], sink);
    try {
      const { tools } = await c.client.listTools();
      expect(tools.map((t) => t.name)).toContain("list_traffic");
      const r = (await c.client.callTool({ name: "get_status", arguments: {} })) as ToolResult;
      expect(JSON.parse(r.content[0]!.text!).proxy_port).toBe(svc.proxyPort);
    } finally {
      await c.client.close();
    }
  });

  test(
    "the compiled executable (build.ts --target current) serves MCP over stdio",
    async () => {
      const out = tempDir("tapwire-mcp-build-");
      const build = Bun.spawn([BUN, "run", join(ROOT, "build.ts"), "--target", "current", "--outdir", out], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
      expect({ code: await build.exited, err: await new Response(build.stderr).text() }).toEqual({ code: 0, err: "" });
      const name = readdirSync(out).find((f) => f.startsWith("tapwire-") && !f.endsWith(".map"))!;
      const sink: string[] = [];
      const c = await connect([join(out, name), "mcp", "--data-dir", svc.config.dataDir], sink);
      try {
        expect((await c.client.listTools()).tools).toHaveLength(16);
        await curl(["-x", proxy, `${up.httpUrl}/echo?compiled=1`]);
        const r = (await c.client.callTool({ name: "list_traffic", arguments: { search: "compiled=1" } })) as ToolResult;
        expect(JSON.parse(r.content[0]!.text!).items[0].url).toBe(`${up.httpUrl}/echo?compiled=1`);
        expect(sink.join("")).toContain("tapwire mcp: serving MCP on stdio");
      } finally {
        await c.client.close();
        rmSync(out, { recursive: true, force: true });
      }
    },
    180_000,
  );
});
