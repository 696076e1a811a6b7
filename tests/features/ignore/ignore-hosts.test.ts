import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { checkHostEntry } from "../../../src/features/ignore/lists.ts";
import { startService } from "../../helpers/service.ts";
import { tempDir } from "../../helpers/tapwire-process.ts";

type Svc = Awaited<ReturnType<typeof startService>>;
let svc: Svc;

beforeAll(async () => {
  // a list written before entries were checked this strictly
  const dataDir = tempDir();
  writeFileSync(join(dataDir, "ignored-hosts.json"), JSON.stringify(["legacy.example.test:8080", "kept.example.test"]));
  svc = await startService({ dataDir });
});
afterAll(async () => {
  await svc.stop();
});

const list = async (prefix: string) => (await (await svc.call(prefix)).json()) as string[];

const NOT_HOSTS = [
  "host:80",
  "example.com:443",
  "127.0.0.1:8080",
  "[::1]:80",
  "*.example.com:443",
  "host:",
  "http://example.com",
  "example.com/path",
  "user@example.com",
  "a..b",
  ".example.com",
  "[example.com]",
  "a,b",
  "ex*ample.com",
];

describe("host entries (ignored hosts and intercept hosts)", () => {
  for (const prefix of ["/api/v1/ignored-hosts", "/api/v1/intercept-hosts"]) {
    test(`${prefix}: a port, scheme, path or other non-host is 400 naming the value, and nothing is stored`, async () => {
      const before = await list(prefix);
      for (const bad of NOT_HOSTS) {
        const r = await svc.call(`${prefix}/${encodeURIComponent(bad)}`, { method: "PUT" });
        expect({ bad, status: r.status }).toEqual({ bad, status: 400 });
        const j: any = await r.json();
        expect(j.error.code).toBe("bad_request");
        expect({ bad, named: j.error.message.includes(JSON.stringify(bad)) }).toEqual({ bad, named: true });
        // DELETE of a value that cannot be an entry is refused the same way
        expect({ bad, del: (await svc.call(`${prefix}/${encodeURIComponent(bad)}`, { method: "DELETE" })).status }).toEqual({ bad, del: 400 });
      }
      expect(await list(prefix)).toEqual(before);
      const port = await (await svc.call(`${prefix}/host:80`, { method: "PUT" })).json();
      expect((port as any).error.message).toContain("port");
    });

    test(`${prefix}: names, IPv4 and IPv6 (bare or bracketed) and *.suffix are accepted, normalised`, async () => {
      for (const good of ["Example.COM.", "127.0.0.1", "::1", "[2001:db8::1]", "*.Example.org", "my_host", "xn--bcher-kva.example"]) {
        const r = await svc.call(`${prefix}/${encodeURIComponent(good)}`, { method: "PUT" });
        expect({ good, status: r.status }).toEqual({ good, status: 204 });
      }
      const got = await list(prefix);
      for (const v of ["example.com", "127.0.0.1", "::1", "2001:db8::1", "*.example.org", "my_host", "xn--bcher-kva.example"]) expect(got).toContain(v);
      for (const v of ["example.com", "127.0.0.1", "::1", "2001:db8::1", "*.example.org", "my_host", "xn--bcher-kva.example"]) {
        expect((await svc.call(`${prefix}/${encodeURIComponent(v)}`, { method: "DELETE" })).status).toBe(204);
      }
    });
  }

  test("an entry stored before the stricter check can still be deleted", async () => {
    expect(await list("/api/v1/ignored-hosts")).toEqual(["legacy.example.test:8080", "kept.example.test"]);
    expect((await svc.call("/api/v1/ignored-hosts/legacy.example.test:8080", { method: "DELETE" })).status).toBe(204);
    expect(await list("/api/v1/ignored-hosts")).toEqual(["kept.example.test"]);
  });

  test("checkHostEntry: the message says what is wrong", () => {
    const why = (raw: string) => {
      try {
        checkHostEntry(raw);
        return "accepted";
      } catch (e) {
        return (e as Error).message;
      }
    };
    expect(why("host:80")).toContain("a port is not part of it");
    expect(why("[::1]:443")).toContain("a port is not part of it");
    expect(why("https://x.test")).toContain("no scheme");
    expect(why("x.test/a")).toContain("no path");
    expect(why("a b")).toContain('" " is not allowed');
    expect(why("")).toContain("empty");
    expect(why("fe80::1")).toBe("accepted");
  });
});
