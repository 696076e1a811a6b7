/** `tapwire run` end to end with the compiled binary: against a running tapwire, and with an embedded one. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RunningTapwire } from "../helpers/tapwire-process.ts";
import { tempDirs } from "../helpers/temp-dirs.ts";
import { curl, startUpstream, type Upstream } from "../helpers/upstream.ts";
import { startBinary, tw } from "./cli-helpers.ts";

const temp = tempDirs("tapwire-cli-run-");
let up: Upstream;
let t: RunningTapwire;

beforeAll(async () => {
  up = startUpstream();
  t = await startBinary(["--upstream-ca", up.caFile], temp());
});

afterAll(async () => {
  await t?.stop();
  up?.stop();
});

const harOf = (file: string) => JSON.parse(readFileSync(file, "utf8"));

describe("with the running tapwire", () => {
  test("--har holds the command's requests (and nothing captured before), and the exit code is the command's", async () => {
    // traffic before the run must not be in the HAR
    await curl(["-x", `http://127.0.0.1:${t.handshake.proxy_port}`, `${up.httpUrl}/echo?before-run`]);
    const har = join(temp(), "out.har");
    const r = await tw(["run", "--data-dir", t.dataDir, "--har", har, "--", "curl", "-sS", "--fail", "--http1.1", `${up.httpsUrl}/echo?run=1`, "-H", "X-Test: yes", "--data", "hello"]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out).body).toBe("hello");
    expect(r.err).toContain("1 entry captured; wrote");
    const log = harOf(har).log;
    expect(log.version).toBe("1.2");
    expect(log.creator.name).toBe("tapwire");
    expect(log.pages).toHaveLength(1);
    expect(log.pages[0].title).toContain("curl -sS --fail");
    expect(log.entries).toHaveLength(1);
    const e = log.entries[0];
    expect(e.pageref).toBe(log.pages[0].id);
    expect(e.request.method).toBe("POST");
    expect(e.request.url).toBe(`${up.httpsUrl}/echo?run=1`);
    expect(e.request.queryString).toEqual([{ name: "run", value: "1" }]);
    expect(e.request.headers).toContainEqual({ name: "X-Test", value: "yes" });
    expect(e.request.postData.text).toBe("hello");
    expect(e.response.status).toBe(200);
    expect(JSON.parse(e.response.content.text).path).toBe("/echo?run=1");
    expect(e._tapwire.client_addr).toBe("curl");
    expect(new Date(e.startedDateTime).getTime()).toBeGreaterThan(Date.now() - 60_000);
  });

  test("a failing command's exit code comes back (curl --fail on 404 is 22), and the HAR is still written", async () => {
    const har = join(temp(), "fail.har");
    const r = await tw(["run", "--data-dir", t.dataDir, "--har", har, "--tab", "failing", "curl", "-sS", "--fail", `${up.httpsUrl}/status/404`]);
    expect(r.code).toBe(22);
    const log = harOf(har).log;
    expect(log.pages[0].title).toBe("failing");
    expect(log.creator.comment).toBe("failing");
    expect(log.entries.map((e: any) => e.response.status)).toEqual([404]);
  });

  test("--fail-on-http-error: exit 1 on a 5xx, 0 without the flag; --jsonl writes one entry per line", async () => {
    const jsonl = join(temp(), "calls.jsonl");
    const cmd = ["curl", "-sS", "-o", "/dev/null", `${up.httpsUrl}/status/503`];
    const plain = await tw(["run", "--data-dir", t.dataDir, "--", ...cmd]);
    expect(plain.code).toBe(0);
    const r = await tw(["run", "--data-dir", t.dataDir, "--fail-on-http-error", "--jsonl", jsonl, "--", ...cmd]);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`GET ${up.httpsUrl}/status/503 -> 503`);
    const lines = readFileSync(jsonl, "utf8").trim().split("\n").map((l) => JSON.parse(l));
    expect(lines.map((e) => [e.url, e.status_code])).toEqual([[`${up.httpsUrl}/status/503`, 503]]);
    expect(lines[0].res_headers.length).toBeGreaterThan(0);
    // a 2xx run passes with the flag
    const ok = await tw(["run", "--data-dir", t.dataDir, "--fail-on-http-error", "--", "curl", "-sS", "-o", "/dev/null", `${up.httpsUrl}/echo`]);
    expect(ok.code).toBe(0);
  });

  test("a failed connection counts for --fail-on-http-error", async () => {
    const closed = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("x") });
    const port = closed.port;
    closed.stop(true);
    const r = await tw(["run", "--data-dir", t.dataDir, "--fail-on-http-error", "--", "curl", "-sS", "-o", "/dev/null", `http://127.0.0.1:${port}/gone`]);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`/gone -> 502`);
  });

  test("the command gets TAPWIRE_DATA_DIR", async () => {
    const r = await tw(["run", "--data-dir", t.dataDir, "--", "sh", "-c", 'echo "$TAPWIRE_DATA_DIR"']);
    expect(r.code).toBe(0);
    expect(r.out.trim()).toBe(t.dataDir);
  });
});

describe("with an embedded tapwire", () => {
  test("on a data directory where none runs: started for the run, stopped after (exit code and HAR as usual)", async () => {
    const dataDir = temp();
    const har = join(temp(), "embedded.har");
    const r = await tw(["run", "--data-dir", dataDir, "--upstream-ca", up.caFile, "--har", har, "--", "curl", "-sS", "--fail", `${up.httpsUrl}/echo?embedded`]);
    expect(r.code).toBe(0);
    expect(r.err).toContain("proxy 127.0.0.1:");
    expect(harOf(har).log.entries.map((e: any) => [e.request.url, e.response.status])).toEqual([[`${up.httpsUrl}/echo?embedded`, 200]]);
    expect(existsSync(join(dataDir, "api-handshake.json"))).toBe(false);
    expect(existsSync(join(dataDir, "ca.pem"))).toBe(true);
    const status = await tw(["status", "--data-dir", dataDir]);
    expect(status.code).toBe(1);
  });

  test("--isolated uses a temporary data directory even when one runs, and removes it", async () => {
    const before = readdirSync(tmpdir()).filter((n) => n.startsWith("tapwire-run-"));
    const har = join(temp(), "isolated.har");
    const r = await tw(["run", "--data-dir", t.dataDir, "--isolated", "--quiet", "--upstream-ca", up.caFile, "--har", har, "--", "sh", "-c", `curl -sS -o /dev/null "${up.httpsUrl}/echo?isolated"; echo "$TAPWIRE_DATA_DIR"`]);
    expect(r.code).toBe(0);
    expect(r.err).toBe("");
    const dir = r.out.trim();
    expect(dir).not.toBe(t.dataDir);
    expect(existsSync(dir)).toBe(false);
    expect(readdirSync(tmpdir()).filter((n) => n.startsWith("tapwire-run-"))).toEqual(before);
    expect(harOf(har).log.entries.map((e: any) => e.response.status)).toEqual([200]);
    // the running tapwire saw none of it
    const items: any = await (await t.api("/api/v1/traffic?search=isolated")).json();
    expect(items.total).toBe(0);
  });

  test("a command that cannot be started: 127; no command: usage, 2; a signal: 128+N", async () => {
    const missing = await tw(["run", "--data-dir", t.dataDir, "--", "no-such-command-xyz"]);
    expect(missing.code).toBe(127);
    expect(missing.err).toContain("cannot run no-such-command-xyz");
    const none = await tw(["run", "--data-dir", t.dataDir]);
    expect(none.code).toBe(2);
    expect(none.err).toContain("usage: tapwire run");
    const killed = await tw(["run", "--data-dir", t.dataDir, "--", "sh", "-c", "kill -TERM $$"]);
    expect(killed.code).toBe(143);
  });
});
