import { Elysia, t } from "elysia";
import { badRequest } from "../../api/errors.ts";
import { checkHostEntry, type PersistedList } from "./lists.ts";

const HostList = t.Array(t.String(), { description: "host names; `*.example.com` matches every subdomain" });
const LabelList = t.Array(t.String(), { description: "client labels: process names or remote IPs" });

function validHost(raw: string): string {
  try {
    return checkHostEntry(raw);
  } catch (e) {
    throw badRequest((e as Error).message);
  }
}

function validLabel(raw: string): string {
  const v = raw.trim();
  if (!v) throw badRequest("label must not be empty");
  // a process name or an IP: never control characters, path separators or a path climb (labels are persisted)
  if (/[\u0000-\u001f\u007f]/.test(v)) throw badRequest(`label ${JSON.stringify(v)} holds a control character`);
  if (/[\/\\]/.test(v) || v.includes("..")) throw badRequest(`label ${JSON.stringify(v)} is not a process name or an IP address (no '/', '\\' or '..')`);
  if (v.length > 255) throw badRequest("label is longer than 255 characters");
  return v;
}

/**
 * A list-of-strings route family (spec 4.6): GET the list, PUT/DELETE one item (both idempotent, 204),
 * DELETE all (204). Path segments arrive URL-decoded.
 */
export function stringListRoutes(opts: { name: string; prefix: string; list: PersistedList; check: (raw: string) => string; schema: ReturnType<typeof t.Array>; what: string; itemParam: string }) {
  const { list, check } = opts;
  const tags = [opts.name];
  return new Elysia({ name: opts.name, prefix: opts.prefix })
    .get("/", () => list.list(), { response: opts.schema, detail: { tags, summary: `List ${opts.what}` } })
    .put(
      "/:item",
      ({ params, set }) => {
        list.add(check(decodeSegment(params.item)));
        set.status = 204;
      },
      { params: t.Object({ item: t.String() }), detail: { tags, summary: `Add one of the ${opts.what} (idempotent; 204)` } },
    )
    .delete(
      "/:item",
      ({ params, set }) => {
        const item = decodeSegment(params.item);
        // an entry stored before the check got stricter can still be removed; any other bad value is a 400
        if (!list.remove(item)) list.remove(check(item));
        set.status = 204;
      },
      { params: t.Object({ item: t.String() }), detail: { tags, summary: `Remove one of the ${opts.what} (204 also when it was absent)` } },
    )
    .delete(
      "/",
      ({ set }) => {
        list.clear();
        set.status = 204;
      },
      { detail: { tags, summary: `Clear the ${opts.what} (204)` } },
    );
}

/** Elysia decodes path parameters already; decode again only what is still percent-encoded (double-encoded labels). */
function decodeSegment(s: string): string {
  if (!/%[0-9a-fA-F]{2}/.test(s)) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

export function ignoredHostsRoutes(list: PersistedList) {
  return stringListRoutes({ name: "ignored-hosts", prefix: "/api/v1/ignored-hosts", list, check: validHost, schema: HostList, what: "ignored hosts", itemParam: "host" });
}

export function ignoredClientsRoutes(list: PersistedList) {
  return stringListRoutes({ name: "ignored-clients", prefix: "/api/v1/ignored-clients", list, check: validLabel, schema: LabelList, what: "ignored clients", itemParam: "label" });
}
