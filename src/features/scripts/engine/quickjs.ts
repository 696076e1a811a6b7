/**
 * Loads QuickJS (quickjs-emscripten-core with the release-sync wasm-file variant). The .wasm is imported as a file,
 * so `bun build --compile` embeds it in the binary and the path points into the binary's own file system; its bytes
 * are handed to Emscripten directly (the variant's own loader would look next to its .mjs, which a binary lacks).
 *
 * The WebAssembly memory is created here, with a maximum: that is the memory limit that actually holds. QuickJS's
 * own limit (runtime.setMemoryLimit) only refuses a single allocation larger than the limit in this build (it
 * counts ~8 bytes per allocation: "malloc_usable_size unavailable"), so strings, arrays or typed arrays allocated
 * piece by piece would otherwise grow the instance to the 2 GiB WebAssembly maximum. With the cap, memory.grow fails
 * past it, malloc returns NULL and QuickJS throws its "out of memory".
 */
import variant from "@jitl/quickjs-wasmfile-release-sync";
import wasmPath from "@jitl/quickjs-wasmfile-release-sync/wasm" with { type: "file" };
import { newQuickJSWASMModuleFromVariant, newVariant, type QuickJSWASMModule } from "quickjs-emscripten-core";

const PAGE = 64 * 1024;
/** The variant's initial memory (its INITIAL_MEMORY): C stack, static data, then the heap. */
const WASM_BASE_BYTES = 16 * 1024 * 1024;
/** Measured: once chai and the prelude are loaded, about this much of the initial memory is still free. */
const BASE_FREE_BYTES = 8 * 1024 * 1024;

/** The WebAssembly memory maximum that lets a script's heap grow by about memoryBytes. */
export function wasmMaximumFor(memoryBytes: number): number {
  return WASM_BASE_BYTES + Math.max(0, memoryBytes - BASE_FREE_BYTES);
}

export interface LoadedQuickJS {
  module: QuickJSWASMModule;
  memory: WebAssembly.Memory;
}

/** maxBytes: the instance's memory can never grow past this (rounded up to whole 64 KiB pages). */
export async function loadQuickJS(maxBytes: number): Promise<LoadedQuickJS> {
  const wasmBinary = await Bun.file(wasmPath).arrayBuffer();
  const initial = WASM_BASE_BYTES / PAGE;
  const memory = new WebAssembly.Memory({ initial, maximum: Math.max(initial, Math.ceil(maxBytes / PAGE)) });
  const module = await newQuickJSWASMModuleFromVariant(newVariant(variant, { wasmBinary, wasmMemory: memory }));
  return { module, memory };
}
