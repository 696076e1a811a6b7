/**
 * The JavaScript evaluated inside QuickJS, once per worker: chai 4 (pm.expect) and the prelude that implements pm.
 *
 * The prelude's parts (*.sandbox.js, imported as text so `bun build --compile` inlines them) are concatenated into
 * one function `(function (chai, host) { ... })`: they share that function's scope, in the order below, and the
 * function answers the entry points the worker drives (see runner.ts): { start, tick, deliver }.
 *   chai: the chai object chai.js put on globalThis (the prelude removes that global).
 *   host: { send(requestJson) -> op id, body("request" | "response") -> text }, functions of the worker.
 */
import chaiSource from "chai/chai.js" with { type: "text" };
import assertions from "./assertions.sandbox.js" with { type: "text" };
import base from "./base.sandbox.js" with { type: "text" };
import http from "./http.sandbox.js" with { type: "text" };
import lists from "./lists.sandbox.js" with { type: "text" };
import run from "./run.sandbox.js" with { type: "text" };
import url from "./url.sandbox.js" with { type: "text" };
import variables from "./variables.sandbox.js" with { type: "text" };

/** chai 4.5's browser bundle: a classic script that sets globalThis.chai. */
export const CHAI_SOURCE: string = chaiSource;

/** File name QuickJS reports for prelude frames (scripts are "script.js"). */
export const PRELUDE_FILENAME = "tapwire-prelude.js";

export const PRELUDE_SOURCE: string = [
  "(function (chai, host) {",
  '"use strict";',
  base,
  lists,
  url,
  variables,
  http,
  assertions,
  run,
  "return { start, tick, deliver };",
  "})",
].join("\n");
