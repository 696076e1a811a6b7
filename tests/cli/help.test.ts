/** Usage, --help, unknown commands and flags, version and completion scripts, with the compiled binary. */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../helpers/tapwire-process.ts";
import { tempDirs } from "../helpers/temp-dirs.ts";
import { run, tw } from "./cli-helpers.ts";

const temp = tempDirs("tapwire-cli-help-");

/** Every command and subcommand, as typed. */
const COMMANDS = [
  ["start"],
  ["status"],
  ["stop"],
  ["open"],
  ["env"],
  ["run"],
  ["traffic"],
  ["traffic", "list"],
  ["traffic", "show"],
  ["traffic", "export"],
  ["traffic", "wait"],
  ["traffic", "clear"],
  ["api"],
  ["ca"],
  ["ca", "path"],
  ["ca", "show"],
  ["ca", "export"],
  ["throttle"],
  ["throttle", "reload"],
  ["flow"],
  ["flow", "run"],
  ["flow", "list"],
  ["compose"],
  ["compose", "run"],
  ["har"],
  ["har", "export"],
  ["har", "import"],
  ["remote"],
  ...["ls", "get", "put", "mv", "rm", "mkdir", "transfers", "add", "reload"].map((c) => ["remote", c]),
  ["mcp"],
  ["completion"],
  ["version"],
];

describe("--help", () => {
  test("the top-level usage lists every command; exit 0 (help, --help, -h)", async () => {
    for (const args of [["help"], ["--help"], ["-h"]]) {
      const r = await tw(args);
      expect(r.code).toBe(0);
      for (const c of ["start", "status", "stop", "open", "env", "run", "traffic", "api", "ca", "throttle", "har", "flow", "compose", "remote", "mcp", "completion", "version"]) expect(r.out).toMatch(new RegExp(`^  ${c} `, "m"));
    }
  });

  test("every command and subcommand answers --help and -h with usage, options and an example; exit 0", async () => {
    for (const words of COMMANDS) {
      for (const flag of ["--help", "-h"]) {
        const r = await tw([...words, flag]);
        expect({ words, flag, code: r.code, err: r.err }).toEqual({ words, flag, code: 0, err: "" });
        expect(r.out).toStartWith(`usage: tapwire ${words.join(" ")}`);
        expect(r.out).toMatch(/^examples?\b.*:$/m);
        expect(r.out).toContain("-h, --help");
      }
    }
  });

  test("tapwire help COMMAND [SUBCOMMAND] prints the same text", async () => {
    expect((await tw(["help", "traffic", "wait"])).out).toBe((await tw(["traffic", "wait", "--help"])).out);
    expect((await tw(["help", "env"])).out).toBe((await tw(["env", "-h"])).out);
    expect((await tw(["help", "mcp"])).out).toBe((await tw(["mcp", "--help"])).out);
    expect((await tw(["help", "nope"])).code).toBe(2);
  });

  test("start --help exits 0 without starting anything", async () => {
    const dir = temp();
    const r = await tw(["start", "--help", "--data-dir", dir]);
    expect(r.code).toBe(0);
    expect(r.out).toContain("--upstream-ca FILE");
    expect((await run(["ls", dir])).out).toBe("");
  });

  test("env's help says NO_PROXY is empty so loopback is proxied too", async () => {
    const r = await tw(["env", "--help"]);
    expect(r.out).toContain("NO_PROXY, no_proxy");
    expect(r.out).toContain("requests to localhost and 127.0.0.1 go through tapwire too");
  });
});

describe("docs", () => {
  test("docs/cli.md has a section with the usage line of every command and subcommand", async () => {
    const doc = readFileSync(join(ROOT, "docs/cli.md"), "utf8");
    for (const words of COMMANDS) {
      if (words.length === 1) expect(doc).toContain(`\n## tapwire ${words[0]}\n`);
      const usageLine = (await tw([...words, "--help"])).out.split("\n")[0]!;
      expect(doc).toContain(`\`\`\`text\n${usageLine}\n`);
    }
  });

  test("the README has the command list and the CI recipe", () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    expect(readme).toContain("## Command line");
    expect(readme).toContain("## Use it in CI");
    expect(readme).toContain("tapwire run --har tapwire.har");
    expect(readme).toContain("tapwire traffic wait");
    expect(readme).toContain("actions/upload-artifact");
  });
});

describe("usage errors exit 2 with the usage on stderr", () => {
  test("unknown command, no command", async () => {
    const r = await tw(["frobnicate"]);
    expect(r.code).toBe(2);
    expect(r.out).toBe("");
    expect(r.err).toContain("unknown command 'frobnicate'");
    expect(r.err).toContain("usage: tapwire <command>");
    const none = await tw([]);
    expect(none.code).toBe(2);
    expect(none.err).toContain("usage: tapwire <command>");
  });

  test("an unknown flag on every command and subcommand", async () => {
    for (const words of COMMANDS) {
      const extra = words[0] === "traffic" && (words[1] === "show" || words[1] === "export") ? ["1"] : words[0] === "completion" ? ["bash"] : [];
      const r = await tw([...words, ...extra, "--no-such-flag"]);
      expect({ words, code: r.code }).toEqual({ words, code: 2 });
      expect(r.err).toContain("--no-such-flag");
      expect(r.err).toContain("usage: tapwire");
    }
  });

  test("unknown subcommands, missing or bad values", async () => {
    for (const args of [
      ["traffic"],
      ["traffic", "frob"],
      ["ca", "frob"],
      ["throttle", "frob"],
      ["completion"],
      ["completion", "tcsh"],
      ["traffic", "show"],
      ["traffic", "show", "abc"],
      ["traffic", "list", "--limit", "many"],
      ["traffic", "wait", "--timeout", "soon"],
      ["traffic", "wait", "--status", "2x"],
      ["start", "--port", "banana"],
      ["status", "--wait", "forever"],
      ["env", "--shell"],
    ]) {
      const r = await tw(args);
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
      expect(r.err).toContain("usage: tapwire");
    }
  });
});

describe("version", () => {
  test("version, --version, -v, version --json", async () => {
    const v = (await tw(["version"])).out.trim();
    expect(v).toMatch(/^\d+\.\d+\.\d+/);
    expect((await tw(["--version"])).out.trim()).toBe(v);
    expect((await tw(["-v"])).out.trim()).toBe(v);
    expect(JSON.parse((await tw(["version", "--json"])).out)).toEqual({ version: v });
  });
});

describe("completion", () => {
  /** Completions bash offers for `words` (the last one is being completed). */
  async function bashComplete(script: string, words: string[]): Promise<string[]> {
    const file = join(temp(), "tapwire.bash");
    await Bun.write(file, script);
    const arr = words.map((w) => `'${w}'`).join(" ");
    const r = await run([
      "bash",
      "-c",
      `source '${file}'; COMP_WORDS=(${arr}); COMP_CWORD=${words.length - 1}; COMPREPLY=(); _tapwire tapwire "\${COMP_WORDS[COMP_CWORD]}" "\${COMP_WORDS[COMP_CWORD-1]}"; printf '%s\\n' "\${COMPREPLY[@]}"`,
    ]);
    expect(r.err).toBe("");
    return r.out.split("\n").filter(Boolean);
  }

  test("bash: valid, and completes commands, subcommands, flags and flag values", async () => {
    const r = await tw(["completion", "bash"]);
    expect(r.code).toBe(0);
    expect(r.out).toContain("complete -o default -F _tapwire tapwire");
    const file = join(temp(), "syntax.bash");
    await Bun.write(file, r.out);
    expect((await run(["bash", "-n", file])).code).toBe(0);
    expect(await bashComplete(r.out, ["tapwire", "tr"])).toEqual(["traffic"]);
    expect(await bashComplete(r.out, ["tapwire", "traffic", ""])).toEqual(["list", "show", "export", "wait", "clear", "--help"]);
    expect(await bashComplete(r.out, ["tapwire", "traffic", "wait", "--ti"])).toEqual(["--timeout"]);
    expect(await bashComplete(r.out, ["tapwire", "env", "--shell", ""])).toEqual(["sh", "fish", "powershell", "dotenv", "github"]);
    expect(await bashComplete(r.out, ["tapwire", "traffic", "export", "3", "--format", "j"])).toEqual(["json"]);
    expect(await bashComplete(r.out, ["tapwire", "completion", ""])).toEqual(["bash", "zsh", "fish"]);
  });

  test("zsh and fish scripts (checked by the shells when installed)", async () => {
    const zsh = await tw(["completion", "zsh"]);
    expect(zsh.code).toBe(0);
    expect(zsh.out).toStartWith("#compdef tapwire");
    expect(zsh.out).toContain("bashcompinit");
    const fish = await tw(["completion", "fish"]);
    expect(fish.code).toBe(0);
    expect(fish.out).toContain("complete -c tapwire -n '__fish_use_subcommand' -a traffic");
    expect(fish.out).toContain("-l shell -x -a 'sh fish powershell dotenv github'");
    for (const [shell, text, check] of [
      ["zsh", zsh.out, ["-n"]],
      ["fish", fish.out, ["--no-execute"]],
    ] as const) {
      if (!Bun.which(shell)) {
        console.warn(`${shell} is not installed: its completion script was not run`);
        continue;
      }
      const file = join(temp(), `tapwire.${shell}`);
      await Bun.write(file, text);
      const r = await run([shell, ...check, file]);
      expect({ shell, code: r.code, err: r.err }).toEqual({ shell, code: 0, err: "" });
    }
    if (Bun.which("fish")) {
      const file = join(temp(), "complete.fish");
      await Bun.write(file, fish.out);
      const r = await run(["fish", "-c", `source '${file}'; complete -C 'tapwire traffic export 1 --format '`]);
      expect(r.out.split("\n").filter(Boolean).sort()).toEqual(["curl", "har", "json", "raw"]);
    }
  });
});
