/**
 * `tapwire env` end to end with the compiled binary: after `eval "$(tapwire env)"`, real clients (curl, Node.js
 * node:https, Bun fetch, Python urllib and requests, git) reach a local HTTPS server whose certificate comes from
 * a CA only tapwire trusts (--upstream-ca), through tapwire, with TLS verified against tapwire's CA, and are captured.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { rootCertificates } from "node:tls";
import type { RunningTapwire } from "../helpers/tapwire-process.ts";
import { BUN } from "../helpers/tapwire-process.ts";
import { tempDirs } from "../helpers/temp-dirs.ts";
import { startUpstream, type Upstream } from "../helpers/upstream.ts";
import { run, startBinary, startGitServer, tapwireBinary, tw, type GitServer } from "./cli-helpers.ts";

const temp = tempDirs("tapwire-cli-env-");
let up: Upstream;
let gitServer: GitServer;
let t: RunningTapwire;
let bin: string;

beforeAll(async () => {
  bin = await tapwireBinary();
  up = startUpstream();
  gitServer = await startGitServer();
  t = await startBinary(["--upstream-ca", up.caFile, "--upstream-ca", gitServer.caFile], temp());
});

afterAll(async () => {
  await t?.stop();
  up?.stop();
  gitServer?.stop();
});

/** Runs `script` in bash after `eval "$(tapwire env)"`, with a clean HOME (no user git or curl configuration). */
function inEnv(script: string, extraEnv: Record<string, string> = {}) {
  const home = temp();
  return run(["bash", "-c", `set -e; eval "$("${bin}" env --data-dir "${t.dataDir}")"; ${script}`], {
    env: { HOME: home, GIT_CONFIG_NOSYSTEM: "1", GIT_TERMINAL_PROMPT: "0", ...extraEnv },
  });
}

async function entriesFor(marker: string): Promise<any[]> {
  const r: any = await (await t.api(`/api/v1/traffic?search=${marker}&limit=50`)).json();
  return r.items;
}

describe("eval \"$(tapwire env)\"", () => {
  test("curl goes through tapwire with verified TLS (no -k) and is captured", async () => {
    const r = await inEnv(`curl -sS --fail "${up.httpsUrl}/echo?client=curl-env"`);
    expect(r.err).toBe("");
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out).path).toBe("/echo?client=curl-env");
    const items = await entriesFor("curl-env");
    expect(items.map((e) => [e.url, e.status_code, e.client_addr])).toEqual([[`${up.httpsUrl}/echo?client=curl-env`, 200, "curl"]]);
  });

  test("without it, curl does not trust the upstream's CA (the test can fail)", async () => {
    const r = await run(["curl", "-sS", `${up.httpsUrl}/echo?client=curl-direct`], { env: { HTTPS_PROXY: "", https_proxy: "", CURL_CA_BUNDLE: "" } });
    expect(r.code).not.toBe(0);
    expect(await entriesFor("curl-direct")).toEqual([]);
  });

  test("Node.js node:https request", async () => {
    const js = `require("https").get(${JSON.stringify(`${up.httpsUrl}/echo?client=node-env`)}, (r) => { let b = ""; r.on("data", (d) => (b += d)); r.on("end", () => console.log(r.statusCode, JSON.parse(b).path)); }).on("error", (e) => { console.error(e.message); process.exit(3); });`;
    const r = await inEnv(`node -e '${js}'`);
    expect(r.err).toBe("");
    expect(r.out.trim()).toBe("200 /echo?client=node-env");
    expect((await entriesFor("node-env")).map((e) => [e.status_code, e.client_addr])).toEqual([[200, "node"]]);
  });

  test("Node.js plain http goes through too (loopback is not exempted: NO_PROXY is empty)", async () => {
    const js = `require("http").get(${JSON.stringify(`${up.httpUrl}/echo?client=node-http-env`)}, (r) => { r.resume(); r.on("end", () => console.log(r.statusCode)); });`;
    const r = await inEnv(`node -e '${js}'`);
    expect(r.out.trim()).toBe("200");
    expect((await entriesFor("node-http-env")).map((e) => e.url)).toEqual([`${up.httpUrl}/echo?client=node-http-env`]);
  });

  test("Bun fetch", async () => {
    const js = `const r = await fetch(${JSON.stringify(`${up.httpsUrl}/echo?client=bun-env`)}); console.log(r.status, (await r.json()).path);`;
    const r = await inEnv(`"${BUN}" -e '${js}'`);
    expect(r.err).toBe("");
    expect(r.out.trim()).toBe("200 /echo?client=bun-env");
    expect((await entriesFor("bun-env")).map((e) => e.status_code)).toEqual([200]);
  });

  test("Python urllib", async () => {
    const py = `import json, urllib.request; r = urllib.request.urlopen("${up.httpsUrl}/echo?client=py-urllib"); print(r.status, json.load(r)["path"])`;
    const r = await inEnv(`python3 -c '${py}'`);
    expect(r.err).toBe("");
    expect(r.out.trim()).toBe("200 /echo?client=py-urllib");
    expect((await entriesFor("py-urllib")).map((e) => e.status_code)).toEqual([200]);
  });

  test("Python requests (when installed)", async () => {
    const has = await run(["python3", "-c", "import requests"]);
    if (has.code !== 0) {
      console.warn("python3 has no requests module: skipped");
      return;
    }
    const py = `import requests; r = requests.get("${up.httpsUrl}/echo?client=py-requests"); print(r.status_code, r.json()["path"])`;
    const r = await inEnv(`python3 -c '${py}'`);
    expect(r.err).toBe("");
    expect(r.out.trim()).toBe("200 /echo?client=py-requests");
    expect((await entriesFor("py-requests")).map((e) => e.status_code)).toEqual([200]);
  });

  test("git clone over https (git http-backend)", async () => {
    const dest = join(temp(), "clone");
    const r = await inEnv(`git clone -q "${gitServer.url}" "${dest}"`);
    expect(r.err).toBe("");
    expect(r.code).toBe(0);
    expect(readFileSync(join(dest, "README.md"), "utf8")).toBe("hello from the git server\n");
    const items: any[] = (await (await t.api(`/api/v1/traffic?path=/repo.git/&limit=50`)).json() as any).items;
    const urls = items.map((e) => e.url.replace(/^https:\/\/localhost:\d+/, ""));
    expect(urls).toContain("/repo.git/info/refs?service=git-upload-pack");
    expect(urls).toContain("/repo.git/git-upload-pack");
    expect(items.every((e) => e.status_code === 200 && e.client_addr.startsWith("git"))).toBe(true);
  });

  test("tapwire's own API calls in that shell bypass the proxy (they are not captured)", async () => {
    const before = ((await (await t.api("/api/v1/traffic?limit=0")).json()) as any).total;
    const r = await inEnv(`"${bin}" traffic list --limit 1 --data-dir "${t.dataDir}" --json`);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out).total).toBe(before);
    expect(((await (await t.api("/api/v1/traffic?limit=0")).json()) as any).total).toBe(before);
  });
});

describe("tapwire env output", () => {
  test("the variables, the combined bundle and ca.pem", async () => {
    const r = await tw(["env", "--data-dir", t.dataDir, "--json"]);
    expect(r.code).toBe(0);
    const vars = JSON.parse(r.out);
    const proxy = `http://127.0.0.1:${t.handshake.proxy_port}`;
    const bundle = join(t.dataDir, "ca-bundle.pem");
    expect(vars).toMatchObject({
      HTTP_PROXY: proxy,
      HTTPS_PROXY: proxy,
      http_proxy: proxy,
      https_proxy: proxy,
      NO_PROXY: "",
      no_proxy: "",
      SSL_CERT_FILE: bundle,
      NODE_EXTRA_CA_CERTS: join(t.dataDir, "ca.pem"),
      REQUESTS_CA_BUNDLE: bundle,
      CURL_CA_BUNDLE: bundle,
      GIT_SSL_CAINFO: bundle,
      AWS_CA_BUNDLE: bundle,
      NODE_USE_ENV_PROXY: "1",
    });
    expect(vars.NODE_OPTIONS).toBe(`--require "${join(t.dataDir, "node-proxy.cjs")}"`);
    const text = readFileSync(bundle, "utf8");
    const ca = readFileSync(join(t.dataDir, "ca.pem"), "utf8").trim();
    expect(text).toContain(ca);
    expect(text.match(/BEGIN CERTIFICATE/g)!.length).toBe(rootCertificates.length + 1);
    expect(existsSync(join(t.dataDir, "node-proxy.cjs"))).toBe(true);
  });

  test("NODE_OPTIONS keeps what was there, once", async () => {
    const r = await tw(["env", "--data-dir", t.dataDir, "--json"], { env: { NODE_OPTIONS: "--max-old-space-size=100" } });
    const preload = `--require "${join(t.dataDir, "node-proxy.cjs")}"`;
    expect(JSON.parse(r.out).NODE_OPTIONS).toBe(`${preload} --max-old-space-size=100`);
    const again = await tw(["env", "--data-dir", t.dataDir, "--json"], { env: { NODE_OPTIONS: `${preload} --max-old-space-size=100` } });
    expect(JSON.parse(again.out).NODE_OPTIONS).toBe(`${preload} --max-old-space-size=100`);
    const unset = await tw(["env", "--data-dir", t.dataDir, "--unset"], { env: { NODE_OPTIONS: `${preload} --max-old-space-size=100` } });
    expect(unset.out).toContain("unset HTTPS_PROXY\n");
    expect(unset.out).toContain("export NODE_OPTIONS='--max-old-space-size=100'\n");
  });

  test("--unset undoes the eval", async () => {
    const r = await run(["bash", "-c", `eval "$("${bin}" env --data-dir "${t.dataDir}")"; eval "$("${bin}" env --data-dir "${t.dataDir}" --unset)"; env | grep -c -E '^(HTTPS?_PROXY|https?_proxy|SSL_CERT_FILE|NODE_OPTIONS|NODE_EXTRA_CA_CERTS)=' || true`]);
    expect(r.out.trim()).toBe("0");
  });

  test("--shell fish, powershell, dotenv and github", async () => {
    const port = t.handshake.proxy_port;
    const fish = await tw(["env", "--data-dir", t.dataDir, "--shell", "fish"]);
    expect(fish.out).toContain(`set -gx HTTPS_PROXY 'http://127.0.0.1:${port}'\n`);
    expect(fish.out).toContain(`set -gx NO_PROXY ''\n`);
    const ps = await tw(["env", "--data-dir", t.dataDir, "--shell", "powershell"]);
    expect(ps.out).toContain(`$env:HTTPS_PROXY = 'http://127.0.0.1:${port}'\n`);
    const dotenv = await tw(["env", "--data-dir", t.dataDir, "--shell", "dotenv"]);
    expect(dotenv.out).toContain(`HTTPS_PROXY=http://127.0.0.1:${port}\n`);
    expect(dotenv.out).toContain(`NODE_OPTIONS='--require "${join(t.dataDir, "node-proxy.cjs")}"'\n`);

    const ghFile = join(temp(), "github_env");
    await Bun.write(ghFile, "EXISTING=1\n");
    const gh = await tw(["env", "--data-dir", t.dataDir, "--shell", "github"], { env: { GITHUB_ENV: ghFile } });
    expect(gh.code).toBe(0);
    expect(gh.out).toContain(`HTTPS_PROXY=http://127.0.0.1:${port}\nhttp_proxy=`);
    expect(gh.out).toContain(`NODE_OPTIONS=--require "${join(t.dataDir, "node-proxy.cjs")}"\n`);
    expect(readFileSync(ghFile, "utf8")).toBe("EXISTING=1\n" + gh.out);
  });

  test("not running: exit 1 with the reason; a bad --shell: exit 2", async () => {
    const r = await tw(["env", "--data-dir", temp()]);
    expect(r.code).toBe(1);
    expect(r.err).toContain("not running");
    const bad = await tw(["env", "--data-dir", t.dataDir, "--shell", "tcsh"]);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain("--shell must be one of");
  });
});
