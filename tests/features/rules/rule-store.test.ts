import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Type } from "@sinclair/typebox";
import { buildApi } from "../../../src/api/app.ts";
import { ruleFamilyRoutes } from "../../../src/features/rules/rule-routes.ts";
import { RuleStore, RuleStoreError } from "../../../src/features/rules/rule-store.ts";
import { tempDir } from "../../helpers/tapwire-process.ts";

/** A small rule family standing in for any of them (Map Local, Map Remote, Mock, script rules). */
const Schema = Type.Object({
  id: Type.String({ minLength: 1 }),
  enabled: Type.Boolean({ default: true }),
  name: Type.String(),
  count: Type.Integer({ minimum: 0, default: 3 }),
  target: Type.Object({ port: Type.Integer({ minimum: 1, maximum: 65535 }) }),
  note: Type.Union([Type.String(), Type.Null()], { default: null }),
});

function newStore(opts: { defaultEnabled?: boolean; onCorrupt?: (p: string, m: string, r: string) => void } = {}, dir = tempDir("tapwire-rules-")) {
  const path = join(dir, "family.json");
  return { store: new RuleStore(path, Schema, opts), path, dir };
}

const rule = (id: string, extra: Record<string, unknown> = {}) => ({ id, name: `rule ${id}`, target: { port: 8080 }, ...extra });

function invalidMessage(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(RuleStoreError);
    expect((e as RuleStoreError).kind).toBe("invalid");
    return (e as Error).message;
  }
  throw new Error("expected an invalid-body error");
}

describe("RuleStore", () => {
  test("a new store has the master flag (default on, or as configured) and no rules; no file until a change", () => {
    const a = newStore();
    expect(a.store.snapshot()).toEqual({ enabled: true, rules: [] });
    expect(existsSync(a.path)).toBe(false);
    expect(newStore({ defaultEnabled: false }).store.enabled).toBe(false);
  });

  test("parse fills the schema's defaults and drops unknown fields", () => {
    const { store } = newStore();
    const r = store.parse({ ...rule("a"), bogus: 1 });
    expect(r).toEqual({ id: "a", enabled: true, name: "rule a", count: 3, target: { port: 8080 }, note: null });
    expect(store.parse(rule("b", { enabled: false, count: 0, note: "n" }))).toMatchObject({ enabled: false, count: 0, note: "n" });
  });

  test("parse names the offending field, nested ones with a dotted path", () => {
    const { store } = newStore();
    expect(invalidMessage(() => store.parse({ name: "x", target: { port: 1 } }))).toContain("'id'");
    expect(invalidMessage(() => store.parse(rule("a", { count: -1 })))).toContain("'count'");
    expect(invalidMessage(() => store.parse(rule("a", { count: "three" })))).toContain("'count'");
    expect(invalidMessage(() => store.parse(rule("a", { enabled: "yes" })))).toContain("'enabled'");
    expect(invalidMessage(() => store.parse(rule("a", { target: { port: 70000 } })))).toContain("'target.port'");
    expect(invalidMessage(() => store.parse(rule("a", { note: 5 })))).toContain("'note'");
    expect(invalidMessage(() => store.parse("not an object"))).toContain("'(body)'");
  });

  // Needs the lead: parse() runs Value.Default before validating, and TypeBox's Default rebuilds an array given
  // for a Record-typed field as an object ({"0": "a", "1": "b"}), which then passes the schema. A family with a
  // Record field (Map Local's response_headers, Mock's headers...) silently accepts a wrong body. Validate the
  // raw shape before defaulting (e.g. Value.Errors on the input for non-missing fields), or check arrays.
  test("parse refuses an array given for a Record field, naming it", () => {
    const WithRecord = Type.Object({ id: Type.String(), enabled: Type.Boolean({ default: true }), headers: Type.Record(Type.String(), Type.String(), { default: {} }) });
    const store = new RuleStore(join(tempDir("tapwire-rules-"), "r.json"), WithRecord);
    expect(store.parse({ id: "a", headers: { "X-A": "1" } }).headers).toEqual({ "X-A": "1" });
    expect(invalidMessage(() => store.parse({ id: "a", headers: ["X-A", "1"] }))).toContain("'headers'");
  });

  test("parse does not touch its input", () => {
    const { store } = newStore();
    const input = rule("a");
    store.parse(input);
    expect(input).toEqual(rule("a"));
  });

  test("create adds in order and persists; an existing id is a conflict and changes nothing", () => {
    const { store, path } = newStore();
    store.create(store.parse(rule("a")));
    store.create(store.parse(rule("b")));
    expect(store.list().map((r) => r.id)).toEqual(["a", "b"]);
    expect(JSON.parse(readFileSync(path, "utf8")).rules.map((r: { id: string }) => r.id)).toEqual(["a", "b"]);
    let err: unknown;
    try {
      store.create(store.parse(rule("a", { name: "other" })));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(RuleStoreError);
    expect((err as RuleStoreError).kind).toBe("conflict");
    expect(store.get("a")!.name).toBe("rule a");
    expect(store.list()).toHaveLength(2);
  });

  test("replace, delete and toggle: unknown ids are not_found; replace with another id in the body is invalid", () => {
    const { store } = newStore();
    store.create(store.parse(rule("a")));
    const kind = (fn: () => unknown) => {
      try {
        fn();
      } catch (e) {
        return (e as RuleStoreError).kind;
      }
      return "none";
    };
    expect(kind(() => store.replace("zz", store.parse(rule("zz"))))).toBe("not_found");
    expect(kind(() => store.delete("zz"))).toBe("not_found");
    expect(kind(() => store.toggle("zz"))).toBe("not_found");
    expect(kind(() => store.replace("a", store.parse(rule("b"))))).toBe("invalid");
    expect(store.list().map((r) => r.id)).toEqual(["a"]);

    store.replace("a", store.parse(rule("a", { name: "renamed" })));
    expect(store.get("a")!.name).toBe("renamed");
    expect(store.toggle("a").enabled).toBe(false);
    expect(store.get("a")!.enabled).toBe(false);
    expect(store.toggle("a").enabled).toBe(true);
    store.delete("a");
    expect(store.list()).toEqual([]);
  });

  test("replace keeps the rule's place in the list", () => {
    const { store } = newStore();
    for (const id of ["a", "b", "c"]) store.create(store.parse(rule(id)));
    store.replace("b", store.parse(rule("b", { count: 9 })));
    expect(store.list().map((r) => [r.id, r.count])).toEqual([["a", 3], ["b", 9], ["c", 3]]);
  });

  test("every change bumps version (matchers cache on it)", () => {
    const { store } = newStore();
    const seen = [store.version];
    store.create(store.parse(rule("a")));
    seen.push(store.version);
    store.toggle("a");
    seen.push(store.version);
    store.replace("a", store.parse(rule("a")));
    seen.push(store.version);
    store.setEnabled(false);
    seen.push(store.version);
    store.delete("a");
    seen.push(store.version);
    store.replaceAll([store.parse(rule("x"))]);
    seen.push(store.version);
    expect(new Set(seen).size).toBe(seen.length);
  });

  test("snapshot is a copy: changing it changes nothing in the store", () => {
    const { store } = newStore();
    store.create(store.parse(rule("a")));
    const snap = store.snapshot();
    snap.enabled = false;
    snap.rules[0]!.name = "mutated";
    snap.rules.push(store.parse(rule("b")));
    expect(store.snapshot()).toEqual({ enabled: true, rules: [store.parse(rule("a"))] });
  });

  test("replaceAll replaces every rule and refuses duplicate ids", () => {
    const { store } = newStore();
    store.create(store.parse(rule("a")));
    store.replaceAll([store.parse(rule("x")), store.parse(rule("y"))]);
    expect(store.list().map((r) => r.id)).toEqual(["x", "y"]);
    expect(invalidMessage(() => store.replaceAll([store.parse(rule("d")), store.parse(rule("d"))]))).toContain("'d'");
    expect(store.list().map((r) => r.id)).toEqual(["x", "y"]);
  });

  test("the master flag and the rules survive a reload from disk", () => {
    const { store, dir } = newStore();
    store.create(store.parse(rule("a", { note: "kept" })));
    store.create(store.parse(rule("b")));
    store.toggle("b");
    store.setEnabled(false);
    const again = newStore({}, dir).store;
    expect(again.snapshot()).toEqual(store.snapshot());
    expect(again.enabled).toBe(false);
    expect(again.get("b")!.enabled).toBe(false);
    expect(again.get("a")!.note).toBe("kept");
  });

  test("a change that cannot be written is not applied", () => {
    const { store, dir } = newStore();
    store.create(store.parse(rule("a")));
    rmSync(dir, { recursive: true, force: true });
    expect(() => store.create(store.parse(rule("b")))).toThrow();
    expect(() => store.toggle("a")).toThrow();
    expect(store.list().map((r) => [r.id, r.enabled])).toEqual([["a", true]]);
  });

  for (const [what, content] of [
    ["not JSON", "{ this is not json"],
    ["the wrong shape", JSON.stringify({ enabled: "yes", rules: {} })],
    ["a rule that fails the schema", JSON.stringify({ enabled: true, rules: [{ id: "a", name: "x", target: { port: 0 } }] })],
  ] as const) {
    test(`a state file holding ${what} is moved aside, reported, and the family starts empty`, () => {
      const dir = tempDir("tapwire-rules-");
      const path = join(dir, "family.json");
      writeFileSync(path, content);
      const reports: [string, string, string][] = [];
      const store = new RuleStore(path, Schema, { onCorrupt: (p, m, r) => reports.push([p, m, r]) });
      expect(store.snapshot()).toEqual({ enabled: true, rules: [] });
      expect(reports).toHaveLength(1);
      expect(reports[0]![0]).toBe(path);
      expect(readFileSync(reports[0]![1], "utf8")).toBe(content);
      expect(readdirSync(dir).filter((f) => f.startsWith("family.json.corrupt-"))).toHaveLength(1);
      expect(existsSync(path)).toBe(false);
      store.create(store.parse(rule("fresh")));
      expect(new RuleStore(path, Schema).list().map((r) => r.id)).toEqual(["fresh"]);
    });
  }
});

describe("ruleFamilyRoutes (through the API frame)", () => {
  const TOKEN = "test-token";
  const PORT = 4321;
  function api(store: RuleStore<typeof Schema>) {
    const app = buildApi({ token: TOKEN, port: () => PORT, version: "test", routes: [ruleFamilyRoutes({ name: "family", prefix: "/api/v1/family", store, schema: Schema, what: "test" })] });
    return async (method: string, path: string, body?: unknown, raw?: string) => {
      const headers: Record<string, string> = { authorization: `Bearer ${TOKEN}` };
      if (body !== undefined || raw !== undefined) headers["content-type"] = "application/json";
      const res = await app.handle(
        new Request(`http://127.0.0.1:${PORT}${path}`, { method, headers, body: raw ?? (body === undefined ? undefined : JSON.stringify(body)) }),
      );
      const text = await res.text();
      return { status: res.status, text, json: text ? JSON.parse(text) : null };
    };
  }

  test("GET answers the snapshot: the master flag and every rule", async () => {
    const { store } = newStore();
    const call = api(store);
    expect(await call("GET", "/api/v1/family")).toMatchObject({ status: 200, json: { enabled: true, rules: [] } });
    store.create(store.parse(rule("a")));
    expect((await call("GET", "/api/v1/family")).json).toEqual({ enabled: true, rules: [store.parse(rule("a"))] });
  });

  test("POST /rules answers the persisted rule with defaults; an existing id is 409; a bad body is 400 naming the field", async () => {
    const { store } = newStore();
    const call = api(store);
    const created = await call("POST", "/api/v1/family/rules", rule("a"));
    expect(created.status).toBe(200);
    expect(created.json).toEqual({ id: "a", enabled: true, name: "rule a", count: 3, target: { port: 8080 }, note: null });
    expect(store.get("a")).toEqual(created.json);

    const dup = await call("POST", "/api/v1/family/rules", rule("a", { name: "again" }));
    expect(dup.status).toBe(409);
    expect(dup.json.error.code).toBe("conflict");
    expect(dup.json.error.message).toContain("'a'");

    const bad = await call("POST", "/api/v1/family/rules", rule("b", { target: { port: "x" } }));
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe("bad_request");
    expect(bad.json.error.message).toContain("'target.port'");
    const missing = await call("POST", "/api/v1/family/rules", { id: "c", target: { port: 1 } });
    expect(missing.status).toBe(400);
    expect(missing.json.error.message).toContain("'name'");
    const notJson = await call("POST", "/api/v1/family/rules", undefined, "{nope");
    expect(notJson.status).toBe(400);
    expect(store.list().map((r) => r.id)).toEqual(["a"]);
  });

  test("PUT /rules/{id} replaces (200, the rule); unknown id 404; bad body 400; another id in the body 400", async () => {
    const { store } = newStore();
    const call = api(store);
    await call("POST", "/api/v1/family/rules", rule("a"));
    const put = await call("PUT", "/api/v1/family/rules/a", rule("a", { count: 7 }));
    expect(put.status).toBe(200);
    expect(put.json).toMatchObject({ id: "a", count: 7 });
    expect(store.get("a")!.count).toBe(7);
    const unknown = await call("PUT", "/api/v1/family/rules/zz", rule("zz"));
    expect(unknown.status).toBe(404);
    expect(unknown.json.error.code).toBe("not_found");
    const bad = await call("PUT", "/api/v1/family/rules/a", rule("a", { count: 1.5 }));
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toContain("'count'");
    const other = await call("PUT", "/api/v1/family/rules/a", rule("b"));
    expect(other.status).toBe(400);
    expect(other.json.error.message).toContain("id");
    expect(store.list().map((r) => [r.id, r.count])).toEqual([["a", 7]]);
  });

  test("DELETE /rules/{id} is 204 with an empty body, then 404", async () => {
    const { store } = newStore();
    const call = api(store);
    await call("POST", "/api/v1/family/rules", rule("a"));
    const del = await call("DELETE", "/api/v1/family/rules/a");
    expect(del.status).toBe(204);
    expect(del.text).toBe("");
    expect(store.list()).toEqual([]);
    expect((await call("DELETE", "/api/v1/family/rules/a")).status).toBe(404);
  });

  test("POST /rules/{id}/toggle answers the updated rule; unknown id 404", async () => {
    const { store } = newStore();
    const call = api(store);
    await call("POST", "/api/v1/family/rules", rule("a"));
    const off = await call("POST", "/api/v1/family/rules/a/toggle");
    expect(off.status).toBe(200);
    expect(off.json).toMatchObject({ id: "a", enabled: false });
    expect(store.get("a")!.enabled).toBe(false);
    expect((await call("POST", "/api/v1/family/rules/a/toggle")).json.enabled).toBe(true);
    expect((await call("POST", "/api/v1/family/rules/zz/toggle")).status).toBe(404);
  });

  test("PUT /enabled sets the master flag and answers {enabled}; a bad body is 400 naming 'enabled'", async () => {
    const { store, dir } = newStore();
    const call = api(store);
    const off = await call("PUT", "/api/v1/family/enabled", { enabled: false });
    expect(off).toMatchObject({ status: 200, json: { enabled: false } });
    expect(store.enabled).toBe(false);
    expect((await call("GET", "/api/v1/family")).json.enabled).toBe(false);
    expect(newStore({}, dir).store.enabled).toBe(false);
    const bad = await call("PUT", "/api/v1/family/enabled", { enabled: "no" });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toContain("enabled");
    expect((await call("PUT", "/api/v1/family/enabled", {})).status).toBe(400);
    expect((await call("PUT", "/api/v1/family/enabled", { enabled: true })).json).toEqual({ enabled: true });
    expect(store.enabled).toBe(true);
  });

  test("every route needs the bearer token", async () => {
    const { store } = newStore();
    const app = buildApi({ token: TOKEN, port: () => PORT, version: "test", routes: [ruleFamilyRoutes({ name: "family", prefix: "/api/v1/family", store, schema: Schema, what: "test" })] });
    const res = await app.handle(new Request(`http://127.0.0.1:${PORT}/api/v1/family/rules`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(rule("a")) }));
    expect(res.status).toBe(401);
    expect(store.list()).toEqual([]);
  });
});
