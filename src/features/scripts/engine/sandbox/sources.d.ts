/**
 * Files evaluated inside QuickJS are imported as text (`with { type: "text" }`): Bun inlines them into the bundle,
 * so they are part of the compiled binary. These declarations type those imports.
 */

/** A fragment of the sandbox prelude (src/features/scripts/engine/sandbox/*.sandbox.js). */
declare module "*.sandbox.js" {
  const source: string;
  export default source;
}

/** chai 4's browser bundle, evaluated once per worker. */
declare module "chai/chai.js" {
  const source: string;
  export default source;
}

/** The QuickJS release-sync variant's WebAssembly file, imported `with { type: "file" }`: a path, embedded when compiled. */
declare module "@jitl/quickjs-wasmfile-release-sync/wasm" {
  const path: string;
  export default path;
}
