// Public surface of the sans-io HTTP/1.x codec.
export * from "./types.ts";
export * from "./parse.ts";
export * from "./serialize.ts";
export * from "./headers.ts";
export { MAX_CHUNK_SIZE_LINE, MAX_TRAILER_BYTES } from "./decoders.ts";
