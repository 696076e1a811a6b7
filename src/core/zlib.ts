/**
 * node:zlib, loaded on first use. Evaluating Bun's node:zlib module costs 11-12 ms in each thread that loads
 * it (the main thread and the capture store's Workers all do at start-up when it is imported at the top), and
 * most runs decode no gzip, deflate or brotli body until traffic arrives.
 */
import type * as Zlib from "node:zlib";

let loaded: typeof Zlib | null = null;

export function zlib(): typeof Zlib {
  return (loaded ??= require("node:zlib") as typeof Zlib);
}
