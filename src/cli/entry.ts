#!/usr/bin/env bun
/**
 * tapwire's entry point (package.json's bin and start, and the compiled binary: build.ts). It restarts
 * `tapwire start` with its allocator setting (allocator.ts) before anything else is loaded, then loads the command
 * line (main.ts) through a specifier the bundler leaves to run time: in the binary main.ts is an entrypoint of its
 * own, so the restart costs one bare runtime start-up rather than a second load of the whole program.
 */
import { restartForStart } from "./allocator.ts";

const argv = process.argv.slice(2);
restartForStart(argv);
const mainUrl = new URL("./main.ts", import.meta.url).href;
const { runCli } = (await import(mainUrl)) as typeof import("./main.ts");
runCli(argv);
