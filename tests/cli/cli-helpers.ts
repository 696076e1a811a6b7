/**
 * Helpers of the command-line tests: the compiled binary (built once per test process and shared by every file
 * that asks for it), running it, and a local HTTPS git server.
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateCA } from "../../src/core/tls/ca.ts";
import { LeafCertCache } from "../../src/core/tls/leaf.ts";
import { pidAlive } from "../../src/service/handshake.ts";
import { BUN, ROOT, startTapwire, tempDir, waitForLine, type RunningTapwire } from "../helpers/tapwire-process.ts";

let built: Promise<string> | null = null;

const BIN_PREFIX = "tapwire-cli-bin-";

/**
 * Path of the binary built by `build.ts --target current` into a temp folder of this process. bun test does not
 * always run exit handlers, so each build first removes the folders of test processes that have ended.
 */
export function tapwireBinary(): Promise<string> {
  built ??= (async () => {
    for (const name of readdirSync(tmpdir())) {
      if (!name.startsWith(BIN_PREFIX)) continue;
      const pid = Number(name.slice(BIN_PREFIX.length));
      if (pid === process.pid || !Number.isInteger(pid) || pidAlive(pid)) continue;
      rmSync(join(tmpdir(), name), { recursive: true, force: true });
    }
    const out = join(tmpdir(), `${BIN_PREFIX}${process.pid}`);
    mkdirSync(out, { recursive: true });
    process.on("exit", () => rmSync(out, { recursive: true, force: true }));
    const p = Bun.spawn([BUN, "run", join(ROOT, "build.ts"), "--target", "current", "--outdir", out], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
    const [code, err] = await Promise.all([p.exited, new Response(p.stderr).text()]);
    if (code !== 0) throw new Error(`build failed (${code}): ${err}`);
    const name = readdirSync(out).find((f) => f.startsWith("tapwire-") && !f.endsWith(".map"));
    if (!name) throw new Error("build wrote no binary");
    return join(out, name);
  })();
  return built;
}

export interface Ran {
  code: number;
  out: string;
  err: string;
}

/** Runs the binary with `args`; stdin is empty unless given. */
export async function tw(args: string[], opts: { env?: Record<string, string | undefined>; stdin?: string; cwd?: string } = {}): Promise<Ran> {
  const bin = await tapwireBinary();
  return run([bin, ...args], opts);
}

/** Runs any command and collects its output. */
export async function run(cmd: string[], opts: { env?: Record<string, string | undefined>; stdin?: string; cwd?: string } = {}): Promise<Ran> {
  const p = Bun.spawn(cmd, {
    stdin: opts.stdin === undefined ? "ignore" : new TextEncoder().encode(opts.stdin),
    stdout: "pipe",
    stderr: "pipe",
    cwd: opts.cwd,
    env: { ...process.env, ...(opts.env ?? {}) } as Record<string, string>,
  });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out, err };
}

/** `tapwire start` of the binary on `dataDir` (proxy on a free port), with extra start flags. */
export async function startBinary(args: string[], dataDir: string): Promise<RunningTapwire> {
  return startTapwire({ cmd: [await tapwireBinary()], args, dataDir });
}

/** Spawns the binary with piped output, for commands a test watches while they run (traffic wait). */
export async function spawnTw(args: string[]) {
  const bin = await tapwireBinary();
  const p = Bun.spawn([bin, ...args], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const errLines: string[] = [];
  return {
    proc: p,
    errLines,
    /** Resolves with the first stderr line matching `pred` (null if the process ends first). */
    waitErr: (pred: (l: string) => boolean) => waitForLine(p.stderr, errLines, pred),
    stdout: new Response(p.stdout).text(),
  };
}

export interface GitServer {
  /** https://localhost:PORT/repo.git */
  url: string;
  caFile: string;
  stop(): void;
}

/**
 * A git repository served over HTTPS by `git http-backend` (CGI) behind Bun.serve, with a certificate of its own
 * CA. The repository holds one commit with README.md ("hello from the git server").
 */
export async function startGitServer(): Promise<GitServer> {
  const root = tempDir("tapwire-git-");
  const git = async (args: string[], cwd: string) => {
    const p = Bun.spawn(["git", ...args], { cwd, stdout: "pipe", stderr: "pipe", env: { ...process.env, HOME: root, GIT_CONFIG_NOSYSTEM: "1" } });
    const [code, err] = await Promise.all([p.exited, new Response(p.stderr).text()]);
    if (code !== 0) throw new Error(`git ${args.join(" ")}: ${err}`);
  };
  const work = join(root, "work");
  mkdirSync(work);
  await git(["init", "-q", "-b", "main"], work);
  writeFileSync(join(work, "README.md"), "hello from the git server\n");
  await git(["add", "README.md"], work);
  await git(["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first"], work);
  await git(["clone", "-q", "--bare", work, join(root, "repo.git")], root);

  const ca = generateCA();
  const leaf = new LeafCertCache(ca).get("localhost");
  const caFile = join(root, "git-ca.pem");
  writeFileSync(caFile, ca.certPem);
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    tls: { cert: leaf.cert, key: leaf.key },
    async fetch(req) {
      const url = new URL(req.url);
      const env: Record<string, string> = {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: "1",
        REQUEST_METHOD: req.method,
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        CONTENT_TYPE: req.headers.get("content-type") ?? "",
        REMOTE_ADDR: "127.0.0.1",
        SERVER_PROTOCOL: "HTTP/1.1",
      };
      const enc = req.headers.get("content-encoding");
      if (enc) env.HTTP_CONTENT_ENCODING = enc;
      const proto = req.headers.get("git-protocol");
      if (proto) env.GIT_PROTOCOL = proto;
      const body = new Uint8Array(await req.arrayBuffer());
      env.CONTENT_LENGTH = String(body.length);
      const cgi = Bun.spawn(["git", "http-backend"], { env, stdin: body, stdout: "pipe", stderr: "ignore" });
      const out = new Uint8Array(await new Response(cgi.stdout).arrayBuffer());
      await cgi.exited;
      // CGI answer: header lines, an empty line, the body
      const text = new TextDecoder("latin1").decode(out);
      const m = /\r?\n\r?\n/.exec(text);
      const headEnd = m ? m.index : text.length;
      const bodyStart = m ? m.index + m[0].length : text.length;
      const headers = new Headers();
      let status = 200;
      for (const line of text.slice(0, headEnd).split(/\r?\n/)) {
        const i = line.indexOf(":");
        if (i <= 0) continue;
        const name = line.slice(0, i).trim();
        const value = line.slice(i + 1).trim();
        if (name.toLowerCase() === "status") status = Number.parseInt(value, 10);
        else headers.append(name, value);
      }
      return new Response(out.subarray(bodyStart), { status, headers });
    },
  });
  return {
    url: `https://localhost:${server.port}/repo.git`,
    caFile,
    stop() {
      server.stop(true);
      rmSync(root, { recursive: true, force: true });
    },
  };
}
