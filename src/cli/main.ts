#!/usr/bin/env bun
import { AlreadyRunningError } from "../service/handshake.ts";
import { TapwireService } from "../service/service.ts";
import { VERSION } from "../version.ts";
import { parseStartArgs, START_USAGE, UsageError } from "./args.ts";
import { throttleCommand, THROTTLE_USAGE } from "../features/throttle/cli.ts";

const USAGE = `tapwire ${VERSION}: a headless traffic-inspecting MITM proxy with a local management API

usage: tapwire <command> [options]

commands:
  start      run the proxy and the management API in the foreground
  throttle   throttle reload: make the running service re-read throttle-rules.json
  version    print the version
  help       show this text

${START_USAGE}

${THROTTLE_USAGE}`;

async function start(argv: string[]): Promise<number> {
  const config = parseStartArgs(argv);
  const service = new TapwireService(config);
  // Handlers go in before anything starts: a signal that arrives during start-up stops the service
  // as soon as it is up (stop() waits for nothing that start() has not made).
  let started = false;
  let stopRequested = false;
  const onSignal = (sig: string) => {
    process.stderr.write(`tapwire: ${sig}, stopping\n`);
    stopRequested = true;
    if (started) void service.stop();
  };
  process.on("SIGINT", () => onSignal("SIGINT"));
  process.on("SIGTERM", () => onSignal("SIGTERM"));
  try {
    await service.start();
  } catch (e) {
    if (e instanceof AlreadyRunningError) {
      process.stderr.write(`tapwire: ${e.message}\n`);
      return 3;
    }
    throw e;
  }
  started = true;
  if (stopRequested) void service.stop();
  await service.stopped;
  return 0;
}

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  try {
    switch (cmd) {
      case "start":
        return await start(rest);
      case "throttle":
        return await throttleCommand(rest);
      case "version":
      case "--version":
      case "-v":
        process.stdout.write(VERSION + "\n");
        return 0;
      case undefined:
      case "help":
      case "--help":
      case "-h":
        process.stdout.write(USAGE + "\n");
        return cmd === undefined ? 2 : 0;
      default:
        process.stderr.write(`tapwire: unknown command '${cmd}'\n\n${USAGE}\n`);
        return 2;
    }
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`tapwire: ${e.message}\n\n${START_USAGE}\n`);
      return 2;
    }
    process.stderr.write(`tapwire: ${(e as Error).message}\n`);
    return 1;
  }
}

if (import.meta.main) {
  main(process.argv.slice(2)).then((code) => process.exit(code));
}
