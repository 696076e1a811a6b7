import { describe, expect, test } from "bun:test";
import type { Collection, Environment, Folder } from "../../../src/features/compose/schema.ts";
import { prepareRequest } from "../../../src/features/compose/send.ts";
import { buildScopes, Resolver } from "../../../src/features/compose/variables.ts";

type Var = { defaultValue: string; currentValue?: string | null; enabled?: boolean };
interface Row {
  why: string;
  call?: Record<string, string>;
  data?: Record<string, unknown>;
  env?: Record<string, Var>;
  collection?: Record<string, { value: string; enabled?: boolean }>;
  expect: string;
  unresolved?: string[];
}

const env = (vars: Record<string, Var> | undefined): Environment | null =>
  vars === undefined
    ? null
    : { name: "e", variables: Object.entries(vars).map(([key, v]) => ({ key, defaultValue: v.defaultValue, currentValue: v.currentValue ?? null, enabled: v.enabled ?? true, isSecret: false })) };
const col = (vars: Row["collection"]) => ({ variables: Object.entries(vars ?? {}).map(([key, v]) => ({ key, value: v.value, enabled: v.enabled ?? true })) });

const TABLE: Row[] = [
  { why: "call variables win over everything", call: { x: "call" }, env: { x: { defaultValue: "envD", currentValue: "envC" } }, collection: { x: { value: "col" } }, expect: "call" },
  { why: "an empty call value is still defined", call: { x: "" }, env: { x: { defaultValue: "envD" } }, expect: "" },
  { why: "environment currentValue over defaultValue", env: { x: { defaultValue: "envD", currentValue: "envC" } }, collection: { x: { value: "col" } }, expect: "envC" },
  { why: "environment defaultValue when currentValue is null", env: { x: { defaultValue: "envD", currentValue: null } }, collection: { x: { value: "col" } }, expect: "envD" },
  { why: "environment over collection", env: { x: { defaultValue: "envD" } }, collection: { x: { value: "col" } }, expect: "envD" },
  { why: "a disabled environment variable is undefined: the collection's applies", env: { x: { defaultValue: "envD", currentValue: "envC", enabled: false } }, collection: { x: { value: "col" } }, expect: "col" },
  { why: "a disabled environment variable with nothing below stays literal", env: { x: { defaultValue: "envD", enabled: false } }, expect: "{{x}}", unresolved: ["x"] },
  { why: "collection variables when nothing else defines the name", collection: { x: { value: "col" } }, expect: "col" },
  { why: "a disabled collection variable is undefined", collection: { x: { value: "col", enabled: false } }, expect: "{{x}}", unresolved: ["x"] },
  { why: "no environment selected: the collection's", env: undefined, collection: { x: { value: "col" } }, expect: "col" },
  { why: "undefined everywhere stays literal and is listed", expect: "{{x}}", unresolved: ["x"] },
  { why: "a run's data row sits below the call's variables", call: { x: "call" }, data: { x: "data" }, env: { x: { defaultValue: "envD" } }, expect: "call" },
  { why: "a run's data row beats the environment's currentValue", data: { x: "data" }, env: { x: { defaultValue: "envD", currentValue: "envC" } }, collection: { x: { value: "col" } }, expect: "data" },
  { why: "a data value that is a number is its text", data: { x: 42 }, expect: "42" },
  { why: "a data value that is an object is its JSON", data: { x: { a: [1, "b"] } }, expect: '{"a":[1,"b"]}' },
  { why: "a value's own references are resolved with the same precedence", call: { x: "{{y}}-c" }, env: { y: { defaultValue: "envY" } }, expect: "envY-c" },
];

describe("variable precedence (call > data row > environment current > environment default > collection)", () => {
  for (const row of TABLE) {
    test(row.why, () => {
      const r = new Resolver(buildScopes(row.call, env(row.env), col(row.collection), row.data));
      expect(r.resolve("{{x}}")).toBe(row.expect);
      expect(r.unresolved).toEqual(row.unresolved ?? []);
    });
  }
});

describe("the resolver", () => {
  test("several references, spaces inside braces, unresolved listed once in order", () => {
    const r = new Resolver(buildScopes({ a: "1" }, null, col({ b: { value: "2" } })));
    expect(r.resolve("{{a}}/{{ b }}/{{c}}/{{d}}/{{c}}")).toBe("1/2/{{c}}/{{d}}/{{c}}");
    expect(r.unresolved).toEqual(["c", "d"]);
  });

  test("dynamic variables", () => {
    const r = new Resolver(buildScopes({}, null, col({})));
    const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
    expect(r.resolve("{{$guid}}")).toMatch(uuid);
    expect(r.resolve("{{$randomUUID}}")).toMatch(uuid);
    expect(r.resolve("{{$guid}}")).not.toBe(r.resolve("{{$guid}}"));
    const ts = Number(r.resolve("{{$timestamp}}"));
    expect(Math.abs(ts - Date.now() / 1000)).toBeLessThan(5);
    expect(Math.abs(Date.parse(r.resolve("{{$isoTimestamp}}")) - Date.now())).toBeLessThan(5000);
    const n = Number(r.resolve("{{$randomInt}}"));
    expect(Number.isInteger(n) && n >= 0 && n <= 1000).toBe(true);
    expect(r.resolve("{{$unknownDynamic}}")).toBe("{{$unknownDynamic}}");
    expect(r.unresolved).toEqual(["$unknownDynamic"]);
  });

  test("a user variable may shadow a dynamic one", () => {
    expect(new Resolver(buildScopes({ $guid: "mine" }, null, col({}))).resolve("{{$guid}}")).toBe("mine");
  });

  test("a reference cycle stops", () => {
    const r = new Resolver(buildScopes({ a: "{{b}}", b: "{{a}}" }, null, col({})));
    expect(r.resolve("{{a}}")).toContain("{{");
  });
});

function collection(over: Partial<Collection> = {}): Collection {
  return { id: "c", name: "c", requests: [], folders: [], environments: [], variables: [], defaultHeaders: [], defaultAuth: null, scripts: { prerequest: "", test: "" }, created_at: 0, updated_at: 0, ...over };
}
const req = (over: Record<string, unknown> = {}) =>
  ({ id: "r", name: "r", method: "GET", url: "https://h.test/p", headers: [], queryParams: [], body: "", contentType: "", auth: null, timeout: 30000, scripts: { prerequest: "", test: "" }, description: "", ...over }) as Collection["requests"][number];
const folder = (over: Partial<Folder> = {}): Folder => ({ id: "f", name: "f", requests: [], folders: [], auth: null, headers: [], scripts: { prerequest: "", test: "" }, ...over });
const prep = (c: Collection, folders: Folder[], r: ReturnType<typeof req>, vars: Record<string, string> = {}) => prepareRequest(c, folders, r, new Resolver(buildScopes(vars, null, c)));
const header = (h: [string, string][], name: string) => h.filter(([n]) => n.toLowerCase() === name.toLowerCase()).map(([, v]) => v);

describe("preparing a request", () => {
  test("auth: null inherits from the innermost folder with auth, then the collection's defaultAuth", () => {
    const c = collection({ defaultAuth: { type: "bearer", token: "col" } });
    const outer = folder({ id: "o", auth: { type: "bearer", token: "outer" } });
    const inner = folder({ id: "i", auth: null });
    expect(header(prep(c, [outer, inner], req()).headers, "authorization")).toEqual(["Bearer outer"]);
    expect(header(prep(c, [folder()], req()).headers, "authorization")).toEqual(["Bearer col"]);
    expect(header(prep(c, [outer], req({ auth: { type: "bearer", token: "own" } })).headers, "authorization")).toEqual(["Bearer own"]);
    expect(header(prep(collection(), [], req()).headers, "authorization")).toEqual([]);
    // extension: type none stops inheritance
    expect(header(prep(c, [outer], req({ auth: { type: "none" } })).headers, "authorization")).toEqual([]);
  });

  test("basic, apiKey in a header (default) and in the query (extension), with variables", () => {
    const c = collection({ variables: [{ key: "pw", value: "s:e", enabled: true }] });
    expect(header(prep(c, [], req({ auth: { type: "basic", username: "ü", password: "{{pw}}" } })).headers, "authorization")).toEqual([`Basic ${Buffer.from("ü:s:e").toString("base64")}`]);
    expect(header(prep(c, [], req({ auth: { type: "apiKey", key: "X-Key", value: "{{pw}}" } })).headers, "x-key")).toEqual(["s:e"]);
    const q = prep(c, [], req({ url: "https://h.test/p?a=1", auth: { type: "apiKey", key: "api key", value: "{{pw}}", in: "query" } }));
    expect(q.url).toBe("https://h.test/p?a=1&api%20key=s%3Ae");
  });

  test("headers: defaults, then folders outermost first, then the request; disabled ones skipped; names case-insensitive", () => {
    const c = collection({ defaultHeaders: [{ key: "X-A", value: "col", enabled: true }, { key: "X-Off", value: "x", enabled: false }, { key: "X-Col", value: "c", enabled: true }] });
    const f1 = folder({ headers: [{ key: "x-a", value: "f1", enabled: true }, { key: "X-F", value: "f1", enabled: true }] });
    const f2 = folder({ headers: [{ key: "X-F", value: "f2", enabled: true }] });
    const p = prep(c, [f1, f2], req({ headers: [{ key: "X-R", value: "{{v}}", enabled: true }, { key: "X-A", value: "req", enabled: false }] }), { v: "rv" });
    expect(header(p.headers, "x-a")).toEqual(["f1"]);
    expect(header(p.headers, "x-f")).toEqual(["f2"]);
    expect(header(p.headers, "x-col")).toEqual(["c"]);
    expect(header(p.headers, "x-off")).toEqual([]);
    expect(header(p.headers, "x-r")).toEqual(["rv"]);
  });

  test("query params: enabled ones appended, encoded once; contentType added unless a header sets it; no scheme means http", () => {
    const p = prep(
      collection(),
      [],
      req({
        url: "{{host}}/search",
        queryParams: [
          { key: "q", value: "{{term}}", enabled: true },
          { key: "off", value: "1", enabled: false },
          { key: "pre", value: "%41", enabled: true },
        ],
        body: '{"t":"{{term}}"}',
        contentType: "application/json",
      }),
      { host: "h.test:8080", term: "a b&c/é" },
    );
    expect(p.url).toBe("http://h.test:8080/search?q=a%20b%26c%2F%C3%A9&pre=%2541");
    expect(p.body).toBe('{"t":"a b&c/é"}');
    expect(header(p.headers, "content-type")).toEqual(["application/json"]);
    const own = prep(collection(), [], req({ contentType: "application/json", headers: [{ key: "content-type", value: "text/plain", enabled: true }] }));
    expect(header(own.headers, "content-type")).toEqual(["text/plain"]);
  });
});
