import { AlreadyRunningError } from "../../service/handshake.ts";
import { TapwireService } from "../../service/service.ts";
import { START_OPTIONS, START_USAGE, startConfig, type StartValues } from "../args.ts";
import { parse, type Command, type Io } from "../command.ts";

export const startCommand: Command = {
  name: "start",
  summary: "run the proxy and the management API in the foreground",
  usage: START_USAGE,
  options: START_OPTIONS,
  values: { "data-dir": "dir", "upstream-ca": "file" },
  async run(argv: string[], io: Io): Promise<number> {
    const { values } = parse(argv, START_OPTIONS, START_USAGE);
    const config = startConfig(values as StartValues, io.env);
    const service = new TapwireService(config);
    // Handlers go in before anything starts: a signal that arrives during start-up stops the service
    // as soon as it is up (stop() waits for nothing that start() has not made).
    let started = false;
    let stopRequested = false;
    const onSignal = (sig: string) => {
      io.err(`tapwire: ${sig}, stopping`);
      stopRequested = true;
      if (started) void service.stop();
    };
    process.on("SIGINT", () => onSignal("SIGINT"));
    process.on("SIGTERM", () => onSignal("SIGTERM"));
    try {
      await service.start();
    } catch (e) {
      if (e instanceof AlreadyRunningError) {
        io.err(`tapwire: ${e.message}`);
        return 3;
      }
      throw e;
    }
    started = true;
    // the address without the token (stderr may go to a log); `tapwire open` adds it
    io.err(`tapwire: web UI http://127.0.0.1:${service.apiPort}/ui/ (open it with 'tapwire open', which adds the token)`);
    if (stopRequested) void service.stop();
    await service.stopped;
    return 0;
  },
};
