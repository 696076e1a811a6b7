import { pidAlive } from "../../service/handshake.ts";
import { CliFailure, dataDirHelp, DATA_DIR_OPTION, delay, parse, parseDuration, str, type Command, type Io } from "../command.ts";
import { apiErrorMessage, connect } from "../service-call.ts";

export const STOP_USAGE = `usage: tapwire stop [--timeout DURATION] [--data-dir DIR]

Stops the running tapwire cleanly, through the API (POST /api/v1/shutdown: it closes its listeners, stores the
captured entries still pending and removes api-handshake.json, as on SIGTERM), and waits until its process has
exited. Exits 1 when it is not running, or when it has not exited within the timeout.

options:
  --timeout DURATION  how long to wait for the process to exit (default 30s)
${dataDirHelp(22)}
  -h, --help          show this text

example:
  tapwire stop --data-dir /tmp/tw`;

const OPTIONS = { timeout: { type: "string" }, ...DATA_DIR_OPTION } as const;

export const stopCommand: Command = {
  name: "stop",
  summary: "stop the running service cleanly and wait until it has exited",
  usage: STOP_USAGE,
  options: OPTIONS,
  values: { "data-dir": "dir" },
  async run(argv: string[], io: Io): Promise<number> {
    const { values } = parse(argv, OPTIONS, STOP_USAGE);
    const timeoutMs = parseDuration(str(values, "timeout") ?? "30s", "--timeout", STOP_USAGE);
    const client = connect(values, io);
    const pid = client.handshake.pid;
    const a = await client.request("POST", "/shutdown");
    if (a.status !== 204 && a.status !== 200) throw new CliFailure(`shutdown refused: ${apiErrorMessage(a)}`);
    const deadline = Date.now() + timeoutMs;
    while (pidAlive(pid)) {
      if (Date.now() >= deadline) throw new CliFailure(`tapwire (pid ${pid}) has not exited within ${str(values, "timeout") ?? "30s"}`);
      await delay(25);
    }
    io.err(`tapwire: stopped (pid ${pid})`);
    return 0;
  },
};
