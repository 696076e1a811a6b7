import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { EntryDetail, HeaderList } from "../../../src/store/types.ts";
import { toCurl } from "../../../src/features/traffic/export-curl.ts";
import { toRaw } from "../../../src/features/traffic/export-raw.ts";

// ---------------------------------------------------------------------------
// fixtures

function entry(over: Partial<EntryDetail>): EntryDetail {
  return {
    id: 1,
    method: "GET",
    url: "http://127.0.0.1:1/",
    host: "127.0.0.1",
    status_code: 200,
    content_type: "text/plain",
    duration_ms: 3,
    timestamp: 1_700_000_000_000,
    client_addr: "curl",
    has_response: true,
    req_headers: [],
    req_body: "",
    res_headers: [["Content-Type", "text/plain"]],
    res_body: "ok",
    req_body_encoding: "utf8",
    res_body_encoding: "utf8",
    req_body_size: 0,
    res_body_size: 2,
    req_body_truncated: false,
    res_body_truncated: false,
    req_body_decoded_from: "",
    res_body_decoded_from: "",
    ...over,
  } as EntryDetail;
}

const ALL_BYTES = new Uint8Array(512).map((_, i) => (i < 256 ? i : 255 - (i - 256)));

// ---------------------------------------------------------------------------
// recording upstream + shell runner

interface Seen {
  method: string;
  target: string;
  headers: Map<string, string>;
  body: Uint8Array;
}

let upstream: ReturnType<typeof Bun.serve>;
let origin = "";
let seen: Seen[] = [];
let home = "";

beforeAll(() => {
  upstream = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const u = new URL(req.url);
      const headers = new Map<string, string>();
      // Bun exposes header bytes as latin1; read them back as UTF-8
      req.headers.forEach((v, k) => headers.set(k, Buffer.from(v, "latin1").toString("utf8")));
      seen.push({ method: req.method, target: u.pathname + u.search, headers, body: new Uint8Array(await req.arrayBuffer()) });
      return new Response("recorded\n");
    },
  });
  origin = `http://127.0.0.1:${upstream.port}`;
  home = mkdtempSync(join(tmpdir(), "tapwire-export-"));
});

afterAll(() => {
  upstream.stop(true);
  rmSync(home, { recursive: true, force: true });
});

const shellEnv = () => ({ PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home, HISTFILE: "/dev/null", LANG: "C.UTF-8" });

/** Run as `bash -c cmd`. */
async function runBashC(cmd: string) {
  const p = Bun.spawn(["bash", "-c", cmd], { env: shellEnv(), stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const [code, stdout, stderr] = await Promise.all([p.exited, new Response(p.stdout).text(), new Response(p.stderr).text()]);
  return { code, stdout, stderr };
}

/** Feed the command to an interactive bash on stdin, as a paste would (history expansion on). */
async function runPasted(cmd: string) {
  const p = Bun.spawn(["bash", "--norc", "--noprofile", "-i"], {
    env: shellEnv(),
    stdin: new TextEncoder().encode(cmd + "\nexit $?\n"),
    stdout: "pipe",
    stderr: "pipe",
  });
  const [code, stdout, stderr] = await Promise.all([p.exited, new Response(p.stdout).text(), new Response(p.stderr).text()]);
  return { code, stdout, stderr };
}

function combine(headers: HeaderList): Map<string, string> {
  const m = new Map<string, string>();
  for (const [n, v] of headers) {
    const k = n.toLowerCase();
    m.set(k, m.has(k) ? `${m.get(k)}, ${v}` : v);
  }
  return m;
}

interface Expect {
  /** Captured header names (lower case) the command must not send as captured. */
  dropped: string[];
  /** Headers curl adds itself, with the value the upstream must see (null: present, any value). */
  added: Record<string, string | ((v: string) => boolean)>;
  body: Uint8Array;
  target?: string;
}

async function replay(e: EntryDetail, exp: Expect, run: (cmd: string) => Promise<{ code: number; stderr: string }>) {
  seen = [];
  const cmd = toCurl(e);
  const r = await run(cmd);
  expect({ code: r.code, stderr: r.code === 0 ? "" : r.stderr }).toEqual({ code: 0, stderr: "" });
  expect(seen.length).toBe(1);
  const s = seen[0];
  expect(s.method).toBe(e.method);
  const u = new URL(e.url);
  expect(s.target).toBe(exp.target ?? u.pathname + u.search);
  const want = combine(e.req_headers.filter(([n]) => !exp.dropped.includes(n.toLowerCase())));
  for (const [k, v] of Object.entries(exp.added)) {
    const got = s.headers.get(k);
    expect(got).toBeDefined();
    if (typeof v === "string") expect(got).toBe(v);
    else expect(v(got!)).toBe(true);
  }
  const got = new Map([...s.headers].filter(([k]) => !(k in exp.added)));
  expect(Object.fromEntries(got)).toEqual(Object.fromEntries(want));
  expect(Buffer.from(s.body).toString("hex")).toBe(Buffer.from(exp.body).toString("hex"));
  return cmd;
}

const enc = (s: string) => new TextEncoder().encode(s);
const lenOf = (b: Uint8Array) => String(b.length);

// Each case: fixture (URL relative to the upstream), what the upstream must see, and checks on the command text.
interface Case {
  name: string;
  make: () => EntryDetail;
  exp: () => Expect;
  cmdCheck?: (cmd: string) => void;
}

const NASTY_TEXT = `it's "quoted" $HOME \`uname -a\` $(id) !! !-1 \\ back\\slash %s %% ünïcødé 🎉 日本\nsecond line\n\nend`;
const JSON_BODY = JSON.stringify({ name: "O'Brien", cmd: "$(rm -rf /)", list: [1, "two", { three: true }], tick: "`x`" });

const cases: Case[] = [
  {
    name: "POST text body with quotes, $, backticks, !, newlines, unicode and nasty headers",
    make: () =>
      entry({
        method: "POST",
        url: `${origin}/submit?x=1`,
        req_headers: [
          ["Host", `127.0.0.1:${upstream.port}`],
          ["User-Agent", "Mozilla/5.0 (X11; Linux) 'quoted' \"double\""],
          ["Accept", "*/*"],
          ["Content-Type", "text/plain; charset=utf-8"],
          ["Content-Length", lenOf(enc(NASTY_TEXT))],
          ["X-Colon", "a: b: c://d"],
          ["X-Dollar", "$HOME ${PATH} $(whoami)"],
          ["X-Backtick", "`id` and 'single' and \"double\""],
          ["X-Bang", "!! !$ !event"],
          ["X-Unicode", "ünï 🎉"],
          ["X-Dup", "one"],
          ["X-Dup", "two"],
          ["X-Empty", ""],
        ],
        req_body: NASTY_TEXT,
        req_body_size: enc(NASTY_TEXT).length,
      }),
    exp: () => ({ dropped: ["host", "content-length"], added: { host: `127.0.0.1:${upstream.port}`, "content-length": lenOf(enc(NASTY_TEXT)) }, body: enc(NASTY_TEXT) }),
    cmdCheck: (cmd) => {
      expect(cmd.startsWith("curl --http1.1 '")).toBe(true);
      expect(cmd).not.toContain("-X ");
      expect(cmd).toContain("-H 'X-Empty;'");
    },
  },
  {
    name: "binary body (base64) with NUL and 0xff bytes, starting with '-'",
    make: () => {
      const bytes = new Uint8Array([0x2d, 0x2d, ...ALL_BYTES, 0x25, 0x5c, 0x27, 0x00, 0xff]);
      return entry({
        method: "POST",
        url: `${origin}/upload`,
        req_headers: [
          ["Host", `127.0.0.1:${upstream.port}`],
          ["Content-Type", "application/octet-stream"],
          ["Content-Length", lenOf(bytes)],
          ["User-Agent", "uploader/1"],
          ["Accept", "application/json"],
        ],
        req_body: Buffer.from(bytes).toString("base64"),
        req_body_encoding: "base64",
        req_body_size: bytes.length,
      });
    },
    exp: () => {
      const bytes = new Uint8Array([0x2d, 0x2d, ...ALL_BYTES, 0x25, 0x5c, 0x27, 0x00, 0xff]);
      return { dropped: ["host", "content-length"], added: { host: `127.0.0.1:${upstream.port}`, "content-length": lenOf(bytes) }, body: bytes };
    },
    cmdCheck: (cmd) => {
      expect(cmd.startsWith("printf '")).toBe(true);
      expect(cmd).toContain("--data-binary @-");
      // no raw control bytes in the command text
      expect(/[\x00-\x09\x0b-\x1f\x7f]/.test(cmd)).toBe(false);
    },
  },
  {
    name: "text body with CR LF, tab and a leading '@' goes through printf",
    make: () => {
      const body = "@/etc/passwd\r\n\tindented\r\n--boundary--\r\n";
      return entry({
        method: "POST",
        url: `${origin}/form`,
        req_headers: [
          ["Host", `127.0.0.1:${upstream.port}`],
          ["Content-Type", "multipart/form-data; boundary=boundary"],
          ["User-Agent", "x"],
          ["Accept", "*/*"],
        ],
        req_body: body,
        req_body_size: body.length,
      });
    },
    exp: () => {
      const body = enc("@/etc/passwd\r\n\tindented\r\n--boundary--\r\n");
      return { dropped: ["host"], added: { host: `127.0.0.1:${upstream.port}`, "content-length": lenOf(body) }, body };
    },
    cmdCheck: (cmd) => {
      expect(cmd.startsWith("printf '")).toBe(true);
      expect(cmd).not.toContain("\t");
      expect(cmd).not.toContain("\r");
    },
  },
  {
    name: "PUT with a JSON body",
    make: () =>
      entry({
        method: "PUT",
        url: `${origin}/api/items/42`,
        req_headers: [
          ["Host", `127.0.0.1:${upstream.port}`],
          ["Content-Type", "application/json"],
          ["Content-Length", lenOf(enc(JSON_BODY))],
          ["Authorization", "Bearer abc.def'ghi"],
          ["User-Agent", "client/2"],
          ["Accept", "application/json"],
        ],
        req_body: JSON_BODY,
        req_body_size: enc(JSON_BODY).length,
      }),
    exp: () => ({ dropped: ["host", "content-length"], added: { host: `127.0.0.1:${upstream.port}`, "content-length": lenOf(enc(JSON_BODY)) }, body: enc(JSON_BODY) }),
    cmdCheck: (cmd) => expect(cmd).toContain("-X PUT"),
  },
  {
    name: "HEAD",
    make: () =>
      entry({
        method: "HEAD",
        url: `${origin}/file.bin`,
        req_headers: [
          ["Host", `127.0.0.1:${upstream.port}`],
          ["User-Agent", "h"],
          ["Accept", "*/*"],
        ],
        res_body: "",
      }),
    exp: () => ({ dropped: ["host"], added: { host: `127.0.0.1:${upstream.port}` }, body: new Uint8Array() }),
    cmdCheck: (cmd) => {
      expect(cmd).toContain("--head");
      expect(cmd).not.toContain("-X");
    },
  },
  {
    name: "GET with a query string holding & and encoded spaces, brackets",
    make: () =>
      entry({
        method: "GET",
        url: `${origin}/search?q=hello%20world&and=a%26b&plus=a+b&arr[]=1&arr[]=2&empty=&u=%C3%BC`,
        req_headers: [
          ["Host", `127.0.0.1:${upstream.port}`],
          ["User-Agent", "g"],
          ["Accept", "text/html"],
          ["Cookie", "session=abc; theme='dark'"],
        ],
      }),
    exp: () => ({ dropped: ["host"], added: { host: `127.0.0.1:${upstream.port}` }, body: new Uint8Array() }),
    cmdCheck: (cmd) => {
      expect(cmd).not.toContain("-X");
      expect(cmd).toContain("--globoff");
      expect(cmd).not.toContain("--data-binary");
    },
  },
  {
    name: "Accept-Encoding gzip: --compressed, header left to curl",
    make: () =>
      entry({
        method: "GET",
        url: `${origin}/gz`,
        req_headers: [
          ["Host", `127.0.0.1:${upstream.port}`],
          ["Accept-Encoding", "gzip, br;q=0.9"],
          ["User-Agent", "g"],
          ["Accept", "*/*"],
        ],
      }),
    exp: () => ({
      dropped: ["host", "accept-encoding"],
      added: { host: `127.0.0.1:${upstream.port}`, "accept-encoding": (v) => /\bgzip\b/.test(v) },
      body: new Uint8Array(),
    }),
    cmdCheck: (cmd) => {
      expect(cmd).toContain("--compressed");
      expect(cmd.toLowerCase()).not.toContain("accept-encoding");
    },
  },
  {
    name: "Accept-Encoding identity is kept as a header",
    make: () =>
      entry({
        url: `${origin}/id`,
        req_headers: [
          ["Accept-Encoding", "identity"],
          ["User-Agent", "g"],
          ["Accept", "*/*"],
        ],
      }),
    exp: () => ({ dropped: [], added: { host: `127.0.0.1:${upstream.port}` }, body: new Uint8Array() }),
    cmdCheck: (cmd) => expect(cmd).not.toContain("--compressed"),
  },
  {
    name: "a Host header differing from the URL is kept",
    make: () =>
      entry({
        url: `${origin}/vhost`,
        req_headers: [
          ["Host", "example.test"],
          ["User-Agent", "g"],
        ],
      }),
    exp: () => ({ dropped: [], added: {}, body: new Uint8Array() }),
    cmdCheck: (cmd) => {
      expect(cmd).toContain("-H 'Host: example.test'");
      expect(cmd).toContain("-H 'Accept:'");
    },
  },
  {
    name: "body decoded from gzip is sent decoded without Content-Encoding",
    make: () =>
      entry({
        method: "POST",
        url: `${origin}/decoded`,
        req_headers: [
          ["Host", `127.0.0.1:${upstream.port}`],
          ["Content-Type", "application/json"],
          ["Content-Encoding", "gzip"],
          ["Content-Length", "37"],
          ["User-Agent", "g"],
          ["Accept", "*/*"],
        ],
        req_body: '{"decoded":true}',
        req_body_size: 37,
        req_body_decoded_from: "gzip",
      }),
    exp: () => ({
      dropped: ["host", "content-length", "content-encoding"],
      added: { host: `127.0.0.1:${upstream.port}`, "content-length": "16" },
      body: enc('{"decoded":true}'),
    }),
  },
  {
    name: "truncated body: still runs, trailing note",
    make: () =>
      entry({
        method: "POST",
        url: `${origin}/big`,
        req_headers: [
          ["Content-Type", "text/plain"],
          ["User-Agent", "g"],
          ["Accept", "*/*"],
        ],
        req_body: "abcde",
        req_body_size: 100,
        req_body_truncated: true,
      }),
    exp: () => ({ dropped: [], added: { host: `127.0.0.1:${upstream.port}`, "content-length": "5" }, body: enc("abcde") }),
    cmdCheck: (cmd) => expect(cmd.split("\n").at(-1)).toBe("# note: body truncated at 5 of 100 bytes"),
  },
  {
    name: "DELETE without body, no User-Agent/Accept captured",
    make: () => entry({ method: "DELETE", url: `${origin}/items/7`, req_headers: [["X-Req", "1"]] }),
    exp: () => ({ dropped: [], added: { host: `127.0.0.1:${upstream.port}` }, body: new Uint8Array() }),
    cmdCheck: (cmd) => expect(cmd).toContain("-X DELETE"),
  },
  {
    name: "POST with an explicit empty body",
    make: () =>
      entry({
        method: "POST",
        url: `${origin}/empty`,
        req_headers: [
          ["Content-Length", "0"],
          ["User-Agent", "g"],
          ["Accept", "*/*"],
        ],
      }),
    exp: () => ({ dropped: ["content-length"], added: { host: `127.0.0.1:${upstream.port}`, "content-length": "0" }, body: new Uint8Array() }),
    cmdCheck: (cmd) => expect(cmd).toContain("--data-binary ''"),
  },
  {
    name: "POST without body",
    make: () => entry({ method: "POST", url: `${origin}/nobody`, req_headers: [["User-Agent", "g"]] }),
    exp: () => ({ dropped: [], added: { host: `127.0.0.1:${upstream.port}` }, body: new Uint8Array() }),
    cmdCheck: (cmd) => {
      expect(cmd).toContain("-X POST");
      expect(cmd).not.toContain("--data");
    },
  },
  {
    name: "OPTIONS with a body, chunked upload: the body arrives, framed by curl (Transfer-Encoding is hop-by-hop)",
    make: () =>
      entry({
        method: "OPTIONS",
        url: `${origin}/optbody`,
        req_headers: [
          ["Transfer-Encoding", "chunked"],
          ["Content-Type", "text/plain"],
          ["User-Agent", "g"],
          ["Accept", "*/*"],
        ],
        req_body: "query in body",
        req_body_size: 13,
      }),
    exp: () => ({ dropped: ["transfer-encoding"], added: { host: `127.0.0.1:${upstream.port}`, "content-length": "13" }, body: enc("query in body") }),
    cmdCheck: (cmd) => {
      expect(cmd).toContain("-X OPTIONS");
      expect(cmd).not.toContain("Transfer-Encoding");
    },
  },
  {
    name: "chunked POST with an empty body still sends an empty body (Content-Length: 0)",
    make: () =>
      entry({
        method: "POST",
        url: `${origin}/chunked-empty`,
        req_headers: [
          ["Transfer-Encoding", "chunked"],
          ["Content-Type", "text/plain"],
          ["User-Agent", "g"],
          ["Accept", "*/*"],
        ],
      }),
    exp: () => ({ dropped: ["transfer-encoding"], added: { host: `127.0.0.1:${upstream.port}`, "content-length": "0" }, body: new Uint8Array() }),
    cmdCheck: (cmd) => expect(cmd).toContain("--data-binary ''"),
  },
  {
    name: "PATCH with a header holding a tab and a quote",
    make: () =>
      entry({
        method: "PATCH",
        url: `${origin}/p`,
        req_headers: [
          ["X-Tab", "a\tb 'c' !d"],
          ["Content-Type", "application/merge-patch+json"],
          ["User-Agent", "g"],
          ["Accept", "*/*"],
        ],
        req_body: '{"a":null}',
        req_body_size: 10,
      }),
    exp: () => ({ dropped: [], added: { host: `127.0.0.1:${upstream.port}`, "content-length": "10" }, body: enc('{"a":null}') }),
    cmdCheck: (cmd) => expect(cmd).not.toContain("\t"),
  },
  {
    name: "hop-by-hop fields of the client's hop and its proxy credential are not exported",
    make: () =>
      entry({
        method: "POST",
        url: `${origin}/hop?x=1`,
        req_headers: [
          ["Host", `127.0.0.1:${upstream.port}`],
          ["Proxy-Authorization", "Basic cHJveHl1c2VyOnMzY3JldA=="],
          ["User-Agent", "g"],
          ["Accept", "*/*"],
          ["Proxy-Connection", "Keep-Alive"],
          ["Connection", "keep-alive, X-Hop"],
          ["Keep-Alive", "timeout=5"],
          ["X-Hop", "for the proxy"],
          ["TE", "trailers"],
          ["Trailer", "X-Checksum"],
          ["X-End", "for the upstream"],
          ["Content-Type", "text/plain"],
          ["Content-Length", "7"],
        ],
        req_body: "payload",
        req_body_size: 7,
      }),
    exp: () => ({
      dropped: ["host", "proxy-authorization", "proxy-connection", "connection", "keep-alive", "x-hop", "te", "trailer", "content-length"],
      added: { host: `127.0.0.1:${upstream.port}`, "content-length": "7" },
      body: enc("payload"),
    }),
    cmdCheck: (cmd) => {
      expect(cmd).not.toContain("cHJveHl1c2VyOnMzY3JldA==");
      expect(cmd).not.toMatch(/Proxy-|Connection|Keep-Alive|X-Hop|TE:|Trailer/);
      expect(cmd).toContain("-H 'X-End: for the upstream'");
    },
  },
  {
    name: "a WebSocket handshake is sent as a plain GET (curl would hang after a 101), with a note saying so",
    make: () =>
      entry({
        method: "GET",
        url: `${origin}/ws`,
        req_headers: [
          ["Host", `127.0.0.1:${upstream.port}`],
          ["Connection", "Upgrade"],
          ["Upgrade", "websocket"],
          ["Sec-WebSocket-Version", "13"],
          ["Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="],
          ["User-Agent", "g"],
          ["Accept", "*/*"],
        ],
      }),
    exp: () => ({ dropped: ["host", "connection", "upgrade"], added: { host: `127.0.0.1:${upstream.port}` }, body: new Uint8Array() }),
    cmdCheck: (cmd) => {
      expect(cmd).not.toMatch(/Upgrade:|Connection:/);
      expect(cmd.split("\n").at(-1)).toStartWith("# note: protocol upgrade (websocket) not requested");
    },
  },
];

describe("toCurl reproduces the request (bash -c)", () => {
  for (const c of cases) {
    test(c.name, async () => {
      const cmd = await replay(c.make(), c.exp(), runBashC);
      c.cmdCheck?.(cmd);
    });
  }
});

describe("toCurl reproduces the request (pasted into interactive bash)", () => {
  for (const c of cases) {
    test(c.name, async () => {
      await replay(c.make(), c.exp(), runPasted);
    });
  }
});

test("toCurl: body too large for one argument goes through printf (200 KiB, with Expect suppressed)", async () => {
  const line = "line with 'quote' $x `y` !z ü\n";
  const body = line.repeat(Math.ceil((200 * 1024) / line.length));
  const e = entry({
    method: "POST",
    url: `${origin}/large`,
    req_headers: [
      ["Content-Type", "text/plain"],
      ["User-Agent", "g"],
      ["Accept", "*/*"],
    ],
    req_body: body,
    req_body_size: enc(body).length,
  });
  const cmd = await replay(
    e,
    { dropped: [], added: { host: `127.0.0.1:${upstream.port}`, "content-length": lenOf(enc(body)) }, body: enc(body) },
    runPasted,
  );
  expect(cmd.startsWith("printf '")).toBe(true);
  expect(cmd).toContain("-H 'Expect:'");
});

test("toCurl: multi-line layout with backslash continuations", () => {
  const e = entry({
    method: "PUT",
    url: "http://example.test/a?b=c",
    req_headers: [
      ["Host", "example.test"],
      ["User-Agent", "u"],
      ["Accept", "*/*"],
      ["Content-Type", "text/plain"],
      ["Content-Length", "6"],
    ],
    req_body: "it's\n!",
    req_body_size: 6,
  });
  expect(toCurl(e)).toBe(
    [
      "curl --http1.1 -X PUT 'http://example.test/a?b=c' \\",
      "  -H 'User-Agent: u' \\",
      "  -H 'Accept: */*' \\",
      "  -H 'Content-Type: text/plain' \\",
      "  --data-binary 'it'\\''s",
      "!'",
    ].join("\n"),
  );
});

// ---------------------------------------------------------------------------
// wire-exact check with a raw TCP recorder: header order and casing, dot segments

/** Run the exported command against a raw TCP listener and return the request head lines and body exactly as sent. */
async function captureWire(make: (port: number) => EntryDetail): Promise<{ lines: string[]; body: string; cmd: string }> {
  let raw = "";
  let resolveDone: () => void = () => {};
  const done = new Promise<void>((r) => (resolveDone = r));
  const listener = Bun.listen({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      data(sock, chunk) {
        raw += Buffer.from(chunk).toString("latin1");
        const end = raw.indexOf("\r\n\r\n");
        if (end < 0) return;
        const m = /\r\ncontent-length: *(\d+)/i.exec(raw.slice(0, end));
        const need = end + 4 + (m ? Number(m[1]) : 0);
        if (raw.length >= need) {
          sock.write("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
          sock.end();
          resolveDone();
        }
      },
    },
  });
  try {
    const cmd = toCurl(make(listener.port));
    const r = await runBashC(cmd);
    expect(r.code).toBe(0);
    await done;
    const end = raw.indexOf("\r\n\r\n");
    return { lines: raw.slice(0, end).split("\r\n"), body: raw.slice(end + 4), cmd };
  } finally {
    listener.stop(true);
  }
}

test("toCurl: header casing, order and duplicates reach the wire unchanged; dot segments kept", async () => {
  const { lines, body } = await captureWire((port) =>
    entry({
      method: "POST",
      url: `http://127.0.0.1:${port}/a/./b/../c?x=[1]`,
      req_headers: [
        ["user-agent", "lower/1"],
        ["X-MiXeD-CaSe", "v1"],
        ["accept", "*/*"],
        ["x-mixed-case", "v2"],
        ["Content-Type", "text/plain"],
        ["content-length", "3"],
      ],
      req_body: "a'b",
      req_body_size: 3,
    }),
  );
  expect(lines[0]).toBe("POST /a/./b/../c?x=[1] HTTP/1.1");
  expect(body).toBe("a'b");
  const sent = lines.slice(1).filter((l) => !/^(host|content-length):/i.test(l));
  expect(sent).toEqual(["user-agent: lower/1", "X-MiXeD-CaSe: v1", "accept: */*", "x-mixed-case: v2", "Content-Type: text/plain"]);
  expect(lines.filter((l) => /^host:/i.test(l)).length).toBe(1);
  expect(lines.filter((l) => /^content-length:/i.test(l))).toEqual(["Content-Length: 3"]);
});

test("toCurl: GET with a body keeps GET and sends the body", async () => {
  const { lines, body, cmd } = await captureWire((port) =>
    entry({
      method: "GET",
      url: `http://127.0.0.1:${port}/search`,
      req_headers: [
        ["Content-Type", "application/json"],
        ["User-Agent", "g"],
        ["Accept", "*/*"],
      ],
      req_body: '{"q":"x"}',
      req_body_size: 9,
    }),
  );
  expect(cmd).toContain("-X GET");
  expect(lines[0]).toBe("GET /search HTTP/1.1");
  expect(lines.slice(1).filter((l) => !/^host:/i.test(l)).sort()).toEqual(
    ["Accept: */*", "Content-Length: 9", "Content-Type: application/json", "User-Agent: g"].sort(),
  );
  expect(body).toBe('{"q":"x"}');
});

// ---------------------------------------------------------------------------
// raw export

describe("toRaw", () => {
  test("text request and response", () => {
    const e = entry({
      method: "POST",
      url: "https://api.example.test:8443/v1/items?sort=asc&q=a%20b#frag",
      req_headers: [
        ["Host", "api.example.test:8443"],
        ["Content-Type", "application/json"],
        ["X-Colon", "a: b"],
      ],
      req_body: '{"a":1}\n',
      req_body_size: 8,
      status_code: 201,
      res_headers: [
        ["Content-Type", "text/plain"],
        ["Set-Cookie", "a=1"],
        ["Set-Cookie", "b=2"],
      ],
      res_body: "created",
      res_body_size: 7,
    });
    expect(toRaw(e)).toBe(
      "POST /v1/items?sort=asc&q=a%20b HTTP/1.1\r\n" +
        "Host: api.example.test:8443\r\n" +
        "Content-Type: application/json\r\n" +
        "X-Colon: a: b\r\n" +
        "\r\n" +
        '{"a":1}\n' +
        "\r\n" +
        "HTTP/1.1 201 Created\r\n" +
        "Content-Type: text/plain\r\n" +
        "Set-Cookie: a=1\r\n" +
        "Set-Cookie: b=2\r\n" +
        "\r\n" +
        "created",
    );
  });

  test("no bodies: one blank line between request and response", () => {
    const e = entry({
      method: "GET",
      url: "http://example.test",
      req_headers: [["Host", "example.test"]],
      status_code: 304,
      res_headers: [["ETag", '"x"']],
      res_body: "",
      res_body_size: 0,
    });
    expect(toRaw(e)).toBe('GET / HTTP/1.1\r\nHost: example.test\r\n\r\nHTTP/1.1 304 Not Modified\r\nETag: "x"\r\n\r\n');
  });

  test("request body without final newline gets a line break before the separator", () => {
    const e = entry({ method: "PUT", url: "http://h/x", req_headers: [], req_body: "abc", req_body_size: 3, status_code: 204, res_headers: [], res_body: "" });
    expect(toRaw(e)).toBe("PUT /x HTTP/1.1\r\n\r\nabc\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n");
  });

  test("binary bodies as base64 in 76-column lines after a note line", () => {
    const bytes = new Uint8Array(100).map((_, i) => (i * 37) & 0xff);
    const b64 = Buffer.from(bytes).toString("base64");
    const e = entry({
      method: "POST",
      url: "http://h/bin",
      req_headers: [["Content-Type", "application/octet-stream"]],
      req_body: b64,
      req_body_encoding: "base64",
      req_body_size: 100,
      res_headers: [["Content-Type", "image/png"]],
      res_body: Buffer.from([0x89, 0x50, 0x4e, 0x47]).toString("base64"),
      res_body_encoding: "base64",
      res_body_size: 4,
    });
    expect(toRaw(e)).toBe(
      "POST /bin HTTP/1.1\r\n" +
        "Content-Type: application/octet-stream\r\n" +
        "\r\n" +
        "(binary body: 100 bytes, shown as base64)\r\n" +
        b64.slice(0, 76) +
        "\r\n" +
        b64.slice(76) +
        "\r\n" +
        "\r\n" +
        "HTTP/1.1 200 OK\r\n" +
        "Content-Type: image/png\r\n" +
        "\r\n" +
        "(binary body: 4 bytes, shown as base64)\r\n" +
        "iVBORw==",
    );
  });

  test("decoded and truncated bodies are noted before the body", () => {
    const e = entry({
      method: "GET",
      url: "http://h/gz",
      req_headers: [["Accept-Encoding", "gzip"]],
      res_headers: [["Content-Encoding", "gzip"]],
      res_body: "hello",
      res_body_size: 9000,
      res_body_truncated: true,
      res_body_decoded_from: "gzip",
    });
    expect(toRaw(e)).toBe(
      "GET /gz HTTP/1.1\r\nAccept-Encoding: gzip\r\n\r\n" +
        "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n" +
        "(body decoded from gzip; shown decoded)\r\n" +
        "(body truncated: 5 of 9000 bytes captured)\r\n" +
        "hello",
    );
  });

  test("a transcript: hop-by-hop fields are kept, the proxy credential's value is not", () => {
    const raw = toRaw(
      entry({
        method: "POST",
        url: "http://h.test/p",
        req_headers: [
          ["Host", "h.test"],
          ["Proxy-Authorization", "Basic cHJveHl1c2VyOnMzY3JldA=="],
          ["Proxy-Connection", "Keep-Alive"],
          ["Transfer-Encoding", "chunked"],
        ],
        req_body: "abc",
        req_body_size: 3,
        res_headers: [["Proxy-Authenticate", "Basic realm=x"], ["Connection", "close"]],
      }),
    );
    expect(raw).not.toContain("cHJveHl1c2VyOnMzY3JldA==");
    expect(raw).toStartWith(
      "POST /p HTTP/1.1\r\nHost: h.test\r\nProxy-Authorization: (redacted: a credential for the proxy)\r\nProxy-Connection: Keep-Alive\r\nTransfer-Encoding: chunked\r\n\r\nabc\r\n\r\n",
    );
    expect(raw).toContain("Proxy-Authenticate: Basic realm=x\r\nConnection: close\r\n");
  });

  test("no response: one line with the error", () => {
    const e = entry({
      method: "GET",
      url: "http://down.test/x?y=1",
      req_headers: [["Host", "down.test"]],
      has_response: false,
      status_code: 0,
      res_headers: [],
      res_body: "",
      error: "upstream refused\nconnection",
    });
    expect(toRaw(e)).toBe("GET /x?y=1 HTTP/1.1\r\nHost: down.test\r\n\r\n(no response: upstream refused connection)\r\n");
    expect(toRaw(entry({ url: "http://h/", has_response: false, status_code: 0 }))).toBe("GET / HTTP/1.1\r\n\r\n(no response)\r\n");
  });

  test("reason phrase: stored one wins, unknown code has none, CONNECT uses authority-form", () => {
    expect(toRaw(entry({ url: "http://h/", status_code: 299, res_headers: [], res_body: "" })).split("\r\n")[2]).toBe("HTTP/1.1 299 ");
    expect(toRaw(entry({ url: "http://h/", status_code: 200, status_text: "Fine", res_headers: [], res_body: "" })).split("\r\n")[2]).toBe(
      "HTTP/1.1 200 Fine",
    );
    expect(toRaw(entry({ url: "http://h/", status_code: 418, res_headers: [], res_body: "" })).split("\r\n")[2]).toBe("HTTP/1.1 418 I'm a teapot");
    expect(toRaw(entry({ method: "CONNECT", url: "https://secure.test:443", req_headers: [] })).split("\r\n")[0]).toBe("CONNECT secure.test:443 HTTP/1.1");
  });
});
