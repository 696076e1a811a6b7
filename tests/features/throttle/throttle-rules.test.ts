import { afterEach, describe, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Flow, type FlowRequest } from "../../../src/pipeline/flow.ts";
import { writeFileAtomic } from "../../../src/store/json-state.ts";
import { ComposedThrottle } from "../../../src/features/throttle/bucket.ts";
import { RULES_FILE, RulesFile } from "../../../src/features/throttle/rules-file.ts";
import { firstMatch, parseRulesText, RulesFileError } from "../../../src/features/throttle/rules.ts";
import { Throttler } from "../../../src/features/throttle/throttler.ts";
import { tempDir } from "../../helpers/tapwire-process.ts";

function rules(...rs: object[]): string {
  return JSON.stringify({ rules: rs });
}

function flowFor(url: string): Flow {
  const u = new URL(url);
  const req: FlowRequest = {
    method: "GET",
    scheme: u.protocol === "https:" ? "https" : "http",
    host: u.hostname,
    port: Number(u.port || (u.protocol === "https:" ? 443 : 80)),
    path: u.pathname + u.search,
    version: "HTTP/1.1",
    headers: [["Host", u.host]],
    body: null,
  };
  return new Flow({ addr: "127.0.0.1", port: 5000, label: Promise.resolve("test") }, req, 1024);
}

function parseError(text: string): string {
  try {
    parseRulesText(text);
  } catch (e) {
    expect(e).toBeInstanceOf(RulesFileError);
    return (e as Error).message;
  }
  throw new Error("expected the rules text to be refused");
}

describe("rules file format", () => {
  test("defaults fill everything but id and url_pattern", () => {
    const [r] = parseRulesText(rules({ id: "a", url_pattern: "example.com/*" }));
    expect(r!.rule).toEqual({
      id: "a",
      name: "",
      enabled: true,
      url_pattern: "example.com/*",
      down_bytes_per_second: 0,
      up_bytes_per_second: 0,
      down_delay_ms: 0,
      up_delay_ms: 0,
    });
    expect(parseRulesText(rules())).toEqual([]);
  });

  test("bad files are refused with the rule and field named", () => {
    expect(parseError("")).toContain("empty");
    expect(parseError("{nope")).toContain("not valid JSON");
    expect(parseError("[]")).toContain('{"rules"');
    expect(parseError("{}")).toContain("rules");
    expect(parseError(rules({ id: "a", url_pattern: "x.com", down_bytes_per_second: -1 }))).toContain("rules[0].down_bytes_per_second");
    expect(parseError(rules({ id: "a", url_pattern: "x.com", down_bytes_per_second: 1.5 }))).toContain("rules[0].down_bytes_per_second");
    expect(parseError(rules({ id: "a", url_pattern: "x.com", up_delay_ms: "100" }))).toContain("rules[0].up_delay_ms");
    expect(parseError(rules({ id: "a", url_pattern: "x.com", down_delay_ms: 600_001 }))).toContain("rules[0].down_delay_ms");
    expect(parseError(rules({ id: "a", url_pattern: "x.com" }, { url_pattern: "y.com" }))).toContain("rules[1].id");
    expect(parseError(rules({ id: "a", url_pattern: "x.com", down_bytes_per_sec: 5 }))).toContain("rules[0].down_bytes_per_sec");
    expect(parseError(rules({ id: "a", url_pattern: "x.com" }, { id: "a", url_pattern: "y.com" }))).toContain("duplicate id 'a'");
    expect(parseError(rules({ id: "a", url_pattern: "ftp://x.com/" }))).toContain("rules[0].url_pattern");
    expect(parseError(JSON.stringify({ rules: [], extra: 1 }))).toContain("extra");
  });

  test("the first enabled rule matching the current or the original URL wins", () => {
    const rs = parseRulesText(
      rules(
        { id: "off", enabled: false, url_pattern: "api.example.com/*" },
        { id: "api", url_pattern: "api.example.com/v1/*" },
        { id: "host", url_pattern: "api.example.com" },
      ),
    );
    expect(firstMatch(rs, "https://api.example.com/v1/users?x=1", "https://api.example.com/v1/users?x=1")!.rule.id).toBe("api");
    expect(firstMatch(rs, "http://api.example.com:8080/v2", "http://api.example.com:8080/v2")!.rule.id).toBe("host");
    // rewritten by Map Remote: the URL the client asked for still counts
    expect(firstMatch(rs, "http://localhost:3000/v1/users", "https://api.example.com/v1/users")!.rule.id).toBe("api");
    expect(firstMatch(rs, "https://other.example.com/", "https://other.example.com/")).toBeNull();
  });
});

describe("Throttler", () => {
  test("no rules and no global cap: flows get no throttle and no delay", () => {
    const th = new Throttler();
    const f = flowFor("http://a.test/x");
    expect(th.onRequest(f)).toBeUndefined();
    expect(th.onResponseHeaders(f)).toBeUndefined();
    expect(f.throttleUp).toBeNull();
    expect(f.throttleDown).toBeNull();
    expect(f.extra.throttle_rule).toBeUndefined();
  });

  test("global cap: every flow gets a throttle on both directions over the shared global buckets", () => {
    const th = new Throttler();
    th.setGlobal(262144);
    expect(th.global).toEqual({ enabled: true, bytes_per_second: 262144 });
    const a = flowFor("http://a.test/x");
    const b = flowFor("http://b.test/y");
    for (const f of [a, b]) {
      th.onRequest(f);
      th.onResponseHeaders(f);
    }
    expect((a.throttleDown as ComposedThrottle).buckets).toEqual([th.globalDown]);
    expect((b.throttleDown as ComposedThrottle).buckets[0]).toBe(th.globalDown);
    expect((a.throttleUp as ComposedThrottle).buckets[0]).toBe(th.globalUp);
    th.setGlobal(null);
    expect(th.global).toEqual({ enabled: false, bytes_per_second: null });
  });

  test("a rule's buckets are shared by its flows, composed with the global cap, and kept across reloads by id", () => {
    const th = new Throttler();
    th.setGlobal(1_000_000);
    th.setRules(parseRulesText(rules({ id: "slow", url_pattern: "slow.test", down_bytes_per_second: 1000 })));
    const a = flowFor("http://slow.test/1");
    const b = flowFor("http://slow.test/2");
    th.onResponseHeaders(a);
    th.onResponseHeaders(b);
    const da = (a.throttleDown as ComposedThrottle).buckets;
    const db = (b.throttleDown as ComposedThrottle).buckets;
    expect(da.length).toBe(2);
    expect(da[0]).toBe(th.globalDown);
    expect(da[1]).toBe(db[1]);
    expect(a.extra.throttle_rule).toBe("slow");
    // no up rate in the rule: the upload follows the global cap alone
    th.onRequest(a);
    expect((a.throttleUp as ComposedThrottle).buckets).toEqual([th.globalUp]);

    // same id survives a reload: the running flow follows the new rate
    th.setRules(parseRulesText(rules({ id: "slow", url_pattern: "slow.test", down_bytes_per_second: 5000 })));
    expect(da[1]!.bytesPerSecond).toBe(5000);
    // removed: the running flow's rule bucket stops limiting
    th.setRules([]);
    expect(da[1]!.limited).toBe(false);
  });

  test("delays hold the flow for the rule's time and are released at stop", async () => {
    const th = new Throttler();
    th.setRules(parseRulesText(rules({ id: "lag", url_pattern: "lag.test", up_delay_ms: 60_000, down_delay_ms: 60_000 })));
    const f = flowFor("http://lag.test/");
    const p1 = th.onRequest(f);
    const p2 = th.onResponseHeaders(f);
    expect(p1).toBeInstanceOf(Promise);
    expect(p2).toBeInstanceOf(Promise);
    expect(th.delayed).toBe(2);
    th.releaseDelays();
    await Promise.all([p1, p2]);
    expect(th.delayed).toBe(0);
    // a rule with only delays attaches no throttle
    expect(f.throttleDown).toBeNull();
  });

  test("a short delay resolves by itself after about its time", async () => {
    const th = new Throttler();
    th.setRules(parseRulesText(rules({ id: "lag", url_pattern: "lag.test", up_delay_ms: 120 })));
    const t0 = performance.now();
    await th.onRequest(flowFor("http://lag.test/"));
    expect(performance.now() - t0).toBeGreaterThanOrEqual(115);
    expect(th.delayed).toBe(0);
  });
});

describe("RulesFile", () => {
  const dirs: string[] = [];
  const open: RulesFile[] = [];
  afterEach(() => {
    for (const f of open.splice(0)) f.stop();
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  function setup() {
    const dir = tempDir("tapwire-throttle-rules-");
    dirs.push(dir);
    const logs: string[] = [];
    const applied: string[][] = [];
    const file = new RulesFile(dir, (l) => logs.push(l), (rs) => applied.push(rs.map((r) => r.rule.id)));
    open.push(file);
    return { dir, path: join(dir, RULES_FILE), logs, applied, file };
  }

  test("a missing file means no rules, without an error", () => {
    const { file, logs } = setup();
    expect(file.reload()).toEqual({ ok: true, changed: true, error: null });
    expect(file.rules).toEqual([]);
    expect(file.error).toBeNull();
    expect(file.loadedAt).not.toBeNull();
    expect(logs).toEqual([]);
  });

  test("a bad file is reported and the previous rules stay in force; fixing it recovers", () => {
    const { file, path, logs, applied } = setup();
    writeFileAtomic(path, rules({ id: "a", url_pattern: "a.test" }));
    expect(file.reload().ok).toBe(true);
    expect(applied).toEqual([["a"]]);
    writeFileAtomic(path, rules({ id: "b", url_pattern: "b.test", down_bytes_per_second: -5 }));
    const r = file.reload();
    expect(r.ok).toBe(false);
    expect(r.error).toContain("rules[0].down_bytes_per_second");
    expect(file.rules.map((x) => x.rule.id)).toEqual(["a"]);
    expect(applied).toEqual([["a"]]);
    expect(file.error).toContain("down_bytes_per_second");
    expect(logs.at(-1)).toContain(path);
    expect(logs.at(-1)).toContain("the previous 1 throttle rule(s) stay in force");
    writeFileAtomic(path, rules({ id: "b", url_pattern: "b.test" }));
    expect(file.reload().ok).toBe(true);
    expect(file.error).toBeNull();
    expect(applied).toEqual([["a"], ["b"]]);
    expect(logs.at(-1)).toContain("loaded 1 throttle rule(s) (1 enabled)");
  });

  test("an unchanged file is skipped unless forced", () => {
    const { file, path, applied } = setup();
    writeFileAtomic(path, rules({ id: "a", url_pattern: "a.test" }));
    file.reload();
    expect(file.reload(false).changed).toBe(false);
    expect(applied.length).toBe(1);
    expect(file.reload(true).changed).toBe(true);
    expect(applied.length).toBe(2);
  });

  test("the watcher picks up an atomic replace, a bad edit (keeping the rules) and a removal", async () => {
    const { file, path, applied, logs } = setup();
    file.reload();
    file.watch();
    let next = file.nextReload();
    writeFileAtomic(path, rules({ id: "w1", url_pattern: "w.test", down_bytes_per_second: 1000 }));
    expect((await next).ok).toBe(true);
    expect(file.rules.map((r) => r.rule.id)).toEqual(["w1"]);

    next = file.nextReload();
    writeFileSync(path, '{"rules": [ {"id": "w2", ');
    const bad = await next;
    expect(bad.ok).toBe(false);
    expect(bad.error).toContain("not valid JSON");
    expect(file.rules.map((r) => r.rule.id)).toEqual(["w1"]);
    expect(logs.some((l) => l.includes("not valid JSON"))).toBe(true);

    next = file.nextReload();
    rmSync(path);
    expect((await next).ok).toBe(true);
    expect(file.rules).toEqual([]);
    expect(applied).toEqual([[], ["w1"], []]);
  });
});
