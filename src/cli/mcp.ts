#!/usr/bin/env bun
/**
 * `tapwire mcp`: a Model Context Protocol server over stdio, so that an AI assistant (Claude Desktop, Claude Code,
 * Cursor, ...) can inspect and steer a running tapwire. It is a thin client of the service's management API
 * (src/cli/client.ts): every tool is one or two API calls, its result the API's JSON as text, an API error an MCP
 * tool error carrying the API's message. The bearer token stays inside ApiClient.
 *
 * stdout carries the protocol only: every other word goes to stderr.
 */
import { parseArgs } from "node:util";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { VERSION } from "../version.ts";
import { ApiClient, NotRunningError, type ApiAnswer } from "./client.ts";

export const MCP_USAGE = `usage: tapwire mcp [--data-dir DIR]

Serve the Model Context Protocol (MCP) over stdin/stdout for the tapwire running on DIR, so that an AI assistant
can list, search, export, replay and diff captured traffic, manage mock and map-local rules, set breakpoints and
resume paused flows, and try scripts. Start tapwire first ('tapwire start'); the MCP server finds it through
api-handshake.json in the data directory (a restarted tapwire is found again at the next tool call).
Only protocol messages go to stdout; diagnostics go to stderr.

  --data-dir DIR   data directory of the running tapwire (default: $TAPWIRE_DATA_DIR, else the per-user data folder)
  -h, --help       show this text

example (an MCP client's configuration, e.g. claude_desktop_config.json or .mcp.json):
  {"mcpServers": {"tapwire": {"command": "tapwire", "args": ["mcp", "--data-dir", "/tmp/tw"]}}}

example (by hand):
  tapwire start --data-dir /tmp/tw &
  tapwire mcp --data-dir /tmp/tw`;

const INSTRUCTIONS = [
  "tapwire is a local HTTP/HTTPS debugging proxy (a man-in-the-middle proxy like Charles or mitmproxy). Programs configured to use it " +
    "(e.g. HTTP_PROXY=http://127.0.0.1:<proxy_port>, or curl -x) have every request and response captured as a numbered traffic entry. " +
    "These tools read that capture and steer the proxy:",
  "- get_status: is tapwire running, which port the proxy listens on, how many entries are captured.",
  "- list_traffic / get_traffic_entry: find requests (filters by host, path, method, status, text) and read one in full.",
  "- export_curl, replay_request, diff_traffic_entries: reproduce, resend and compare captured requests.",
  "- create_map_local_rule: answer matching proxied requests with a canned response (the real server is never contacted).",
  "- create_mock_rule / start_mock_server: a separate fake HTTP server on 127.0.0.1 answering with canned responses.",
  "- set_breakpoint, list_intercepts, resume_intercept: pause matching flows, look at them, let them go (optionally edited).",
  "- run_script: try a Postman-style (pm.*) JavaScript snippet against a sample request/response.",
  "Entry ids are increasing integers; list_traffic shows the newest first.",
].join("\n");

type Client = { request(method: string, path: string, body?: unknown): Promise<ApiAnswer> };

/** A tool's answer: text, flagged as an error when the call failed. */
function text(t: string, isError = false): CallToolResult {
  return isError ? { content: [{ type: "text", text: t }], isError: true } : { content: [{ type: "text", text: t }] };
}

/** The API's error message (`{error: {code, message}}`), or what the answer says otherwise. */
function apiError(a: ApiAnswer, what: string): CallToolResult {
  const err = (a.json as { error?: { code?: string; message?: string } } | undefined)?.error;
  const msg = err?.message ?? (a.text.trim() || "no message");
  return text(`tapwire API error (${what}: HTTP ${a.status}${err?.code ? ` ${err.code}` : ""}): ${msg}`, true);
}

/** The answer as a tool result: JSON pretty-printed, plain text as it is, 204 as {"ok": true}. */
function answer(a: ApiAnswer, what: string): CallToolResult {
  if (a.status >= 400) return apiError(a, what);
  if (a.status === 204 || a.text === "") return text(JSON.stringify({ ok: true }));
  if (a.json !== undefined) return text(JSON.stringify(a.json, null, 2));
  return text(a.text);
}

/** Drops undefined fields (so that the API's defaults apply). */
function defined<T extends Record<string, unknown>>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** Cuts long bodies of an entry for the assistant's context, saying so in an extra field. */
function clipBodies(entry: Record<string, unknown>, max: number): Record<string, unknown> {
  const out = { ...entry };
  for (const side of ["req_body", "res_body"]) {
    const b = out[side];
    if (typeof b === "string" && b.length > max) {
      out[side] = b.slice(0, max);
      out[`${side}_clipped_for_display`] = `${b.length - max} more characters not shown (raise max_body_chars to see them)`;
    }
  }
  return out;
}

const seg = (v: string | number) => encodeURIComponent(String(v));

const entryId = z.number().int().nonnegative();
const headerPairs = z.array(z.tuple([z.string(), z.string()]));

/** Builds the MCP server with every tool; `client()` gives an API client (or throws when tapwire is not running). */
export function buildMcpServer(client: () => Client): McpServer {
  const server = new McpServer({ name: "tapwire", version: VERSION }, { instructions: INSTRUCTIONS });

  /** One API call as a tool result; a service that cannot be found or reached is a tool error too. */
  const call = async (method: string, path: string, body: unknown, what: string, shape?: (json: unknown) => unknown): Promise<CallToolResult> => {
    let a: ApiAnswer;
    try {
      a = await client().request(method, path, body);
    } catch (e) {
      return text(`tapwire: ${(e as Error).message}`, true);
    }
    if (shape && a.status < 400 && a.json !== undefined) return text(JSON.stringify(shape(a.json), null, 2));
    return answer(a, what);
  };

  server.registerTool(
    "get_status",
    {
      title: "tapwire status",
      description:
        "Is tapwire running, and where? Returns its health record: version, proxy_port (point HTTP clients at http://127.0.0.1:<proxy_port> " +
        "as their HTTP/HTTPS proxy), api_port, capturing (whether traffic is being recorded), entry_count, uptime_secs, paused_flows, and " +
        "mock_port while the mock server runs. Call this first when unsure whether the proxy is up.",
      inputSchema: {},
      annotations: { readOnlyHint: true },
    },
    async () => call("GET", "/health", undefined, "health"),
  );

  server.registerTool(
    "list_traffic",
    {
      title: "List or search captured traffic",
      description:
        "Lists captured HTTP(S) requests (traffic entries), newest first, with optional filters that combine with AND. Use it to find " +
        "a request by host, path, method, status or text inside URLs and bodies, or to see what an application sent. Returns " +
        "{items: [summary], total, offset, limit}; each summary has id, method, url, host, path, status_code, content_type, duration_ms, " +
        "timestamp (ms since epoch), client_addr (the process that sent it) and error when the request failed. Use get_traffic_entry " +
        "with an id for headers and bodies.",
      inputSchema: {
        limit: z.number().int().min(0).max(500).optional().describe("how many entries (default 50, at most 500)"),
        offset: z.number().int().min(0).optional().describe("skip this many (for paging)"),
        host: z.string().optional().describe("substring of the host name, case-insensitive (e.g. 'api.example.com' or 'example')"),
        method: z.string().optional().describe("exact HTTP method, e.g. GET or POST"),
        status: z.number().int().optional().describe("exact status code"),
        status_min: z.number().int().optional().describe("lowest status code (inclusive)"),
        status_max: z.number().int().optional().describe("highest status code (inclusive)"),
        path: z.string().optional().describe("substring of the URL path (not the query)"),
        search: z.string().optional().describe("text to find in the URL or the request/response bodies, case-insensitive"),
        has_error: z.boolean().optional().describe("true: only failed requests (status >= 400, proxy errors are 502); false: only status < 400"),
        since_id: z.number().int().min(0).optional().describe("only entries with a larger id (oldest first then): poll for new traffic"),
        since: z.number().int().min(0).optional().describe("only entries at or after this time (ms since epoch)"),
        order: z.enum(["asc", "desc"]).optional().describe("by id: desc (default, newest first) or asc"),
      },
      annotations: { readOnlyHint: true },
    },
    async (args) => {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(args)) if (v !== undefined) q.set(k, String(v));
      const qs = q.toString();
      return call("GET", `/traffic${qs ? "?" + qs : ""}`, undefined, "list traffic");
    },
  );

  server.registerTool(
    "get_traffic_entry",
    {
      title: "Show one captured request and response",
      description:
        "The full record of one traffic entry: method, url, status_code, request and response headers (req_headers/res_headers as " +
        "[name, value] pairs in wire order), bodies (req_body/res_body, decoded from gzip/br/...; *_body_encoding says utf8 or base64), " +
        "sizes, timing, and error/reason when it failed or a rule changed it. Long bodies are cut at max_body_chars for readability.",
      inputSchema: {
        id: entryId.describe("the entry id (from list_traffic)"),
        max_body_chars: z.number().int().min(0).optional().describe("cut each body after this many characters (default 20000)"),
      },
      annotations: { readOnlyHint: true },
    },
    async ({ id, max_body_chars }) => call("GET", `/traffic/${seg(id)}`, undefined, `entry ${id}`, (j) => clipBodies(j as Record<string, unknown>, max_body_chars ?? 20_000)),
  );

  server.registerTool(
    "export_curl",
    {
      title: "Export a captured request as a curl command",
      description:
        "Returns a bash command line (curl) that reproduces the captured request: method, URL, headers and body. Use it to hand the " +
        "request to a person or to re-run it outside tapwire.",
      inputSchema: { id: entryId.describe("the entry id") },
      annotations: { readOnlyHint: true },
    },
    async ({ id }) => call("GET", `/traffic/${seg(id)}/export/curl`, undefined, `export entry ${id}`),
  );

  server.registerTool(
    "replay_request",
    {
      title: "Send a captured request again",
      description:
        "Sends the captured request again, as captured, through the proxy (its rules apply and it is captured as a new entry). " +
        "Returns {id (the new entry), status_code, reason, headers, body, body_encoding, duration_ms, replay_of}. An upstream " +
        "failure still answers, with status_code 502. Not read-only: the server receives the request again.",
      inputSchema: { id: entryId.describe("the entry id to replay") },
    },
    async ({ id }) => call("POST", `/traffic/${seg(id)}/replay`, {}, `replay entry ${id}`),
  );

  server.registerTool(
    "diff_traffic_entries",
    {
      title: "Compare two captured requests",
      description:
        "A structured comparison of two traffic entries: differences in method, URL, query parameters, request and response " +
        "headers, status and bodies (JSON bodies compared field by field). Use it to see why one call worked and another did not.",
      inputSchema: { id1: entryId.describe("the first entry id"), id2: entryId.describe("the second entry id") },
      annotations: { readOnlyHint: true },
    },
    async ({ id1, id2 }) => call("GET", `/traffic/${seg(id1)}/diff/${seg(id2)}`, undefined, `diff ${id1} ${id2}`),
  );

  server.registerTool(
    "create_mock_rule",
    {
      title: "Create a mock server rule",
      description:
        "Adds a canned response to tapwire's mock server: a separate small HTTP server on 127.0.0.1 (not the proxy) that answers every " +
        "request with the first enabled rule whose method and path pattern match (404 when none does). Point a client at " +
        "http://127.0.0.1:<mock_port>/... to use it; get_status shows mock_port while it runs, start_mock_server starts it. To fake " +
        "responses for requests that go THROUGH the proxy to a real host, use create_map_local_rule instead. Returns the stored rule.",
      inputSchema: {
        id: z.string().min(1).optional().describe("unique rule id (default: mcp_<milliseconds>); reuse it to delete the rule"),
        url_pattern: z.string().min(1).describe("a PATH pattern, not a URL: '/api/users', '/api/*' (one segment or any rest at the end), '/files/**' (any depth)"),
        method: z.string().optional().describe("HTTP method to match; empty or omitted = any method"),
        status_code: z.number().int().min(200).max(999).optional().describe("status code of the answer (default 200)"),
        status_text: z.string().optional().describe("reason phrase (default: the standard one)"),
        headers: headerPairs.optional().describe("response headers as [name, value] pairs, e.g. [[\"Content-Type\", \"application/json\"]]"),
        body: z.string().optional().describe("response body (text, or base64 with body_is_base64)"),
        body_is_base64: z.boolean().optional().describe("the body is base64 of binary bytes"),
        latency_ms: z.number().int().min(0).max(600_000).optional().describe("wait this long before answering"),
        name: z.string().optional().describe("a display name"),
        enabled: z.boolean().optional().describe("default true"),
      },
    },
    async (a) => call("POST", "/mock/rules", defined({ ...a, id: a.id ?? `mcp_${Date.now()}` }), "create mock rule"),
  );

  server.registerTool(
    "delete_mock_rule",
    {
      title: "Delete a mock server rule",
      description: "Removes the mock server rule with this id. Returns {ok: true}; an unknown id is an error.",
      inputSchema: { id: z.string().min(1).describe("the rule id") },
      annotations: { destructiveHint: true, idempotentHint: true },
    },
    async ({ id }) => call("DELETE", `/mock/rules/${seg(id)}`, undefined, `delete mock rule ${id}`),
  );

  server.registerTool(
    "start_mock_server",
    {
      title: "Start the mock server",
      description:
        "Starts the mock server (the listener that answers with mock rules) on 127.0.0.1. Returns {running: true, port}. It is an " +
        "error if it already runs (get_status shows mock_port) or the port is taken.",
      inputSchema: { port: z.number().int().min(0).max(65535).optional().describe("port to listen on (default 9100; 0 = any free port)") },
    },
    async ({ port }) => call("POST", "/mock/start", port === undefined ? {} : { port }, "start mock server"),
  );

  server.registerTool(
    "create_map_local_rule",
    {
      title: "Serve a canned response for proxied requests (Map Local)",
      description:
        "Makes the proxy answer requests whose URL matches url_pattern with the given response (inline text, base64 bytes, or a local " +
        "file) instead of contacting the real server. Use it to fake or patch an API response for an application that goes through " +
        "tapwire. Rules are tried in order; the first enabled match wins. Returns the stored rule.",
      inputSchema: {
        id: z.string().min(1).optional().describe("unique rule id (default: mcp_<milliseconds>); reuse it to delete the rule"),
        url_pattern: z
          .string()
          .min(1)
          .describe("URL glob: '[scheme://]host[:port][/path][?query]', e.g. 'api.example.com/v1/users/*' or 'https://*.example.com/**'; * stays within a path segment, ** crosses segments"),
        method: z.string().optional().describe("HTTP method to match (required unless match_all_methods is true)"),
        match_all_methods: z.boolean().optional().describe("match any method (default false)"),
        status_code: z.number().int().min(200).max(599).optional().describe("status code served (default 200)"),
        inline_body: z.string().optional().describe("body served: text, or base64 when inline_format is a binary type"),
        inline_format: z.string().optional().describe("Content-Type of the body: a MIME type or json, html, xml, text, css, js, csv, yaml, binary"),
        source: z.enum(["inline_body", "local_file"]).optional().describe("inline_body (default) or local_file (serve file_path)"),
        file_path: z.string().optional().describe("absolute path of a file to serve when source is local_file (read on every request)"),
        response_headers: z.record(z.string(), z.string()).optional().describe("extra response headers, name to value"),
        delay_ms: z.number().int().min(0).max(600_000).optional().describe("wait this long before answering"),
        enabled: z.boolean().optional().describe("default true"),
      },
    },
    async (a) => call("POST", "/map-local/rules", defined({ ...a, id: a.id ?? `mcp_${Date.now()}` }), "create map-local rule"),
  );

  server.registerTool(
    "delete_map_local_rule",
    {
      title: "Delete a Map Local rule",
      description: "Removes the Map Local rule with this id; matching requests go to the real server again. Returns {ok: true}; an unknown id is an error.",
      inputSchema: { id: z.string().min(1).describe("the rule id") },
      annotations: { destructiveHint: true, idempotentHint: true },
    },
    async ({ id }) => call("DELETE", `/map-local/rules/${seg(id)}`, undefined, `delete map-local rule ${id}`),
  );

  const breakpoints = async (what: string, change: () => Promise<ApiAnswer>): Promise<CallToolResult> => {
    try {
      const a = await change();
      if (a.status >= 400) return apiError(a, what);
      const list = await client().request("GET", "/breakpoints");
      return text(JSON.stringify({ ok: true, breakpoints: list.json }, null, 2));
    } catch (e) {
      return text(`tapwire: ${(e as Error).message}`, true);
    }
  };

  server.registerTool(
    "set_breakpoint",
    {
      title: "Pause matching requests (breakpoint)",
      description:
        "Pauses every proxied flow whose URL matches the pattern: before the request goes to the server and/or before the response " +
        "reaches the client. Paused flows wait (up to the intercept timeout, 5 minutes by default) until resume_intercept; see them " +
        "with list_intercepts. Setting a pattern that exists replaces it. Returns the list of breakpoints.",
      inputSchema: {
        pattern: z.string().min(1).describe("URL glob: '[scheme://]host[:port][/path][?query]', e.g. 'api.example.com/v1/*'"),
        intercept_request: z.boolean().optional().describe("pause before the request is sent (default true)"),
        intercept_response: z.boolean().optional().describe("pause before the response is delivered (default true)"),
      },
    },
    async (a) => breakpoints("set breakpoint", () => client().request("PUT", "/breakpoints", defined(a))),
  );

  server.registerTool(
    "delete_breakpoint",
    {
      title: "Remove a breakpoint",
      description: "Removes the breakpoint with exactly this pattern (flows already paused stay paused until resumed). Returns the remaining breakpoints.",
      inputSchema: { pattern: z.string().min(1).describe("the pattern as it was set") },
      annotations: { destructiveHint: true },
    },
    async ({ pattern }) => breakpoints("delete breakpoint", () => client().request("POST", "/breakpoints/delete", { pattern })),
  );

  server.registerTool(
    "list_intercepts",
    {
      title: "List paused flows",
      description:
        "The flows paused by breakpoints right now, oldest first: id (for resume_intercept), phase (request: not sent yet; response: " +
        "the server answered, the client waits), method, url, headers, a preview of the body, status_code at the response phase, " +
        "the breakpoint that paused it, and resumes_at (when it goes on by itself).",
      inputSchema: {},
      annotations: { readOnlyHint: true },
    },
    async () => call("GET", "/intercepts", undefined, "list intercepts"),
  );

  server.registerTool(
    "resume_intercept",
    {
      title: "Resume a paused flow (optionally edited)",
      description:
        "Lets a paused flow go on. Without other arguments it continues unchanged. abort: true answers the client with a 502 instead. " +
        "At the request phase url, headers and body can replace the request's; at the response phase status_code, headers and body " +
        "replace the response's (headers replace the whole list). Returns {ok: true}; a flow that is gone (resumed, timed out, client " +
        "left) is an error, and an invalid edit is an error that leaves the flow paused.",
      inputSchema: {
        id: z.string().min(1).describe("the paused flow's id (from list_intercepts)"),
        abort: z.boolean().optional().describe("fail the flow with a 502 instead of resuming"),
        url: z.string().optional().describe("request phase: a new absolute http(s) URL"),
        status_code: z.number().int().min(200).max(599).optional().describe("response phase: a new status code"),
        headers: headerPairs.optional().describe("replacement header list, [name, value] pairs"),
        body: z.string().optional().describe("replacement body (Content-Length is recomputed)"),
        body_encoding: z.enum(["utf8", "base64"]).optional().describe("how body is given (default utf8)"),
      },
    },
    async ({ id, ...rewrite }) => call("POST", `/intercepts/${seg(id)}/resume`, defined(rewrite), `resume ${id}`),
  );

  server.registerTool(
    "run_script",
    {
      title: "Run a script in test mode",
      description:
        "Runs a Postman-style JavaScript snippet (the pm API: pm.request, pm.response, pm.test, pm.expect, pm.variables, " +
        "pm.environment, console.log) once against a sample request/response, without touching live traffic. Use it to develop or " +
        "check a script before attaching it to traffic. Returns {console, tests, request, response, variables, environment, " +
        "collectionVariables, globals, errors, duration_ms}: what the script logged, its pm.test results, the request/response as it " +
        "left them, and what it threw (a failing script is still a successful call: look at errors and tests).",
      inputSchema: {
        script: z.string().describe("the JavaScript source"),
        phase: z.enum(["request", "response", "test"]).describe("request: a pre-request script; response or test: runs with a response (required then)"),
        request: z
          .object({
            method: z.string().optional(),
            url: z.string().optional(),
            headers: z.record(z.string(), z.string()).optional(),
            body: z.string().optional(),
          })
          .optional()
          .describe("sample request (defaults: GET http://localhost/, no headers, empty body)"),
        response: z
          .object({
            status: z.number().int().min(100).max(999).optional(),
            headers: z.record(z.string(), z.string()).optional(),
            body: z.string().optional(),
          })
          .optional()
          .describe("sample response, needed for the response and test phases (status defaults to 200)"),
        variables: z.record(z.string(), z.unknown()).optional().describe("initial pm.variables"),
        environment: z.record(z.string(), z.unknown()).optional().describe("initial pm.environment"),
        collectionVariables: z.record(z.string(), z.unknown()).optional().describe("initial pm.collectionVariables"),
        globals: z.record(z.string(), z.unknown()).optional().describe("initial pm.globals"),
      },
    },
    async (input) => call("POST", "/scripts/execute", { input: defined(input) }, "run script"),
  );

  return server;
}

/** `tapwire mcp [--data-dir DIR]`: serves until stdin closes. Returns the exit code (0, or 2 on a usage error). */
export async function mcpCommand(argv: string[]): Promise<number> {
  let values: { "data-dir"?: string; help?: boolean };
  try {
    ({ values } = parseArgs({ args: argv, strict: true, allowPositionals: false, options: { "data-dir": { type: "string" }, help: { type: "boolean", short: "h" } } }));
  } catch (e) {
    if (argv.includes("--help") || argv.includes("-h")) {
      process.stdout.write(MCP_USAGE + "\n");
      return 0;
    }
    process.stderr.write(`tapwire: ${(e as Error).message.replace(/\. To specify a positional argument.*$/s, "")}\n\n${MCP_USAGE}\n`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(MCP_USAGE + "\n");
    return 0;
  }
  const flag = values["data-dir"];
  // The handshake is read again when tapwire was restarted (new port and token) or was not running yet.
  let cached: ApiClient | null = null;
  const client = (): Client => ({
    async request(method, path, body) {
      cached ??= ApiClient.fromDataDir(flag);
      try {
        return await cached.request(method, path, body);
      } catch (e) {
        if (!(e instanceof NotRunningError)) throw e;
        // unreachable: tapwire may have been restarted (new port and token); read the handshake again, try once more
        cached = null;
        cached = ApiClient.fromDataDir(flag);
        return await cached.request(method, path, body);
      }
    },
  });
  try {
    cached = ApiClient.fromDataDir(flag);
    process.stderr.write(`tapwire mcp: serving MCP on stdio for tapwire pid ${cached.handshake.pid} (data directory ${cached.dataDir})\n`);
  } catch (e) {
    process.stderr.write(`tapwire mcp: ${(e as Error).message}; serving anyway, tools will answer with this error until tapwire runs\n`);
  }
  const server = buildMcpServer(client);
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => {
    transport.onclose = () => resolve();
    process.stdin.once("end", () => resolve());
    process.stdin.once("close", () => resolve());
  });
  await server.connect(transport);
  await closed;
  await server.close().catch(() => {});
  return 0;
}

if (import.meta.main) {
  mcpCommand(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e) => {
      process.stderr.write(`tapwire mcp: ${(e as Error).message}\n`);
      process.exit(1);
    },
  );
}
