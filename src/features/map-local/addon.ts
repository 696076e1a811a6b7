import { stat } from "node:fs/promises";
import { statusReason } from "../../core/http1/serialize.ts";
import type { HeaderList } from "../../core/http1/types.ts";
import type { Addon, HookResult } from "../../pipeline/addon.ts";
import type { Flow, FlowResponse } from "../../pipeline/flow.ts";
import { contentTypeOf, isTextual, type MapLocalRule } from "./schema.ts";
import type { MapLocalStore } from "./store.ts";

const enc = new TextEncoder();

/** The Content-Type a rule's inline_format stands for; null when none (or when a hand-edited file holds junk). */
function formatType(rule: MapLocalRule): string | null {
  try {
    return contentTypeOf(rule.inline_format);
  } catch {
    return null;
  }
}

/** inline_body as bytes: UTF-8 text for textual (or no) formats, base64 for binary ones. */
export function inlineBytes(rule: MapLocalRule): Uint8Array {
  if (rule.inline_body === null) return new Uint8Array(0);
  if (isTextual(formatType(rule))) return enc.encode(rule.inline_body);
  return new Uint8Array(Buffer.from(rule.inline_body.replace(/\s+/g, ""), "base64"));
}

/** Status line and headers of a rule's answer: Content-Type from inline_format (or the file's extension),
 * unless response_headers names one itself; then response_headers in their given order. */
function responseFor(rule: MapLocalRule, body: Uint8Array, fallbackType: string | null): FlowResponse {
  const headers: HeaderList = [];
  const explicitType = Object.keys(rule.response_headers).some((n) => n.toLowerCase() === "content-type");
  const type = formatType(rule) ?? fallbackType;
  if (type && !explicitType) headers.push(["Content-Type", type]);
  for (const [n, v] of Object.entries(rule.response_headers)) headers.push([n, v]);
  return { status: rule.status_code, reason: statusReason(rule.status_code), version: "HTTP/1.1", headers, body };
}

/** The 502 a client gets when a local_file rule's file cannot be served; the flow records why. */
function fileFailure(flow: Flow, rule: MapLocalRule, why: string): void {
  const message = `map-local rule '${rule.id}': cannot serve file '${rule.file_path}': ${why}`;
  flow.error = message;
  flow.extra.map_local_file = rule.file_path;
  flow.extra.map_local_error = why;
  flow.response = {
    status: 502,
    reason: "Bad Gateway",
    version: "HTTP/1.1",
    headers: [["Content-Type", "text/plain; charset=utf-8"]],
    body: enc.encode(`tapwire: ${message}\n`),
  };
}

/**
 * Map Local (spec 4.10): a request matching an enabled rule (master flag on) is answered from the rule — inline
 * text/base64 or a local file read on every request — instead of going upstream. Answers in requestHeaders, so the
 * request body is never read from the client and later request-phase addons are skipped.
 */
export class MapLocalAddon implements Addon {
  readonly name = "map-local";

  /** @param maxFileBytes the largest file served (the core holds an addon's answer whole). */
  constructor(private readonly store: MapLocalStore, private readonly maxFileBytes: () => number) {}

  requestHeaders(flow: Flow): HookResult {
    if (!this.store.enabled || this.store.list().length === 0) return;
    const rule = this.store.match(flow.request.method, flow.url);
    if (!rule) return;
    flow.extra.map_local_rule = rule.id;
    if (rule.delay_ms <= 0 && rule.source !== "local_file") {
      flow.response = responseFor(rule, inlineBytes(rule), null);
      return;
    }
    return this.answerLater(flow, rule);
  }

  private async answerLater(flow: Flow, rule: MapLocalRule): Promise<void> {
    if (rule.delay_ms > 0) {
      const gone = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => {
          flow.onClientGone = null;
          resolve(false);
        }, rule.delay_ms);
        flow.onClientGone = () => {
          clearTimeout(timer);
          flow.onClientGone = null;
          resolve(true);
        };
      });
      if (gone) return; // the client left during the delay: nothing to answer (the core recorded the failure)
    }
    if (rule.source !== "local_file") {
      flow.response = responseFor(rule, inlineBytes(rule), null);
      return;
    }
    const path = rule.file_path ?? "";
    let size: number;
    try {
      const st = await stat(path);
      if (!st.isFile()) return fileFailure(flow, rule, "not a regular file");
      size = st.size;
    } catch (e) {
      return fileFailure(flow, rule, (e as Error).message);
    }
    const limit = this.maxFileBytes();
    if (size > limit) return fileFailure(flow, rule, `the file is ${size} bytes, more than the ${limit} bytes tapwire serves from a file`);
    let body: Uint8Array;
    try {
      body = await Bun.file(path).bytes();
    } catch (e) {
      return fileFailure(flow, rule, (e as Error).message);
    }
    const guessed = Bun.file(path).type;
    flow.response = responseFor(rule, body, guessed || "application/octet-stream");
  }
}
