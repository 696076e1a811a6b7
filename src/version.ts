import pkg from "../package.json" with { type: "json" };

declare const TAPWIRE_BUILD_VERSION: string | undefined;

/** The version string: baked in by build.ts (`--define`), else package.json's. */
export const VERSION: string =
  typeof TAPWIRE_BUILD_VERSION === "string" && TAPWIRE_BUILD_VERSION ? TAPWIRE_BUILD_VERSION : pkg.version;
