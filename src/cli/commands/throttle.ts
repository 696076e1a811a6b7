import { throttleCommand as throttleMain, THROTTLE_USAGE } from "../../features/throttle/cli.ts";
import { bypassProxyForLoopback } from "../client.ts";
import { DATA_DIR_OPTION, type Command, type Io } from "../command.ts";

export const throttleCommand: Command = {
  name: "throttle",
  summary: "throttle reload: make the running service re-read throttle-rules.json",
  usage: THROTTLE_USAGE,
  options: DATA_DIR_OPTION,
  values: { "data-dir": "dir" },
  words: ["reload"],
  run: (argv: string[], io: Io) => {
    // it calls the API with fetch of its own: keep that off the proxy of a shell set up by `tapwire env`
    bypassProxyForLoopback(io.env);
    return throttleMain(argv, { out: io.out, err: io.err }, io.env);
  },
};
