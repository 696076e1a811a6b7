/** NewEntry.har: the HAR block of the binary record comes back as extra fields; imported bodies stay as given. */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { CaptureStore } from "../../src/store/capture-store.ts";
import type { NewEntry } from "../../src/store/types.ts";

let store: CaptureStore;
beforeAll(async () => {
  store = await CaptureStore.open(":memory:");
});
afterAll(async () => {
  await store.close();
});

const base = (over: Partial<NewEntry>): NewEntry => ({
  method: "GET", url: "http://a.test/", host: "a.test", status_code: 200, content_type: "text/plain", duration_ms: 9, timestamp: 1_700_000_000_000,
  client_addr: "curl", has_response: true, req_headers: [["Host", "a.test"]], res_headers: [["Content-Type", "text/plain"]],
  req_body: null, req_body_size: 0, res_body: new TextEncoder().encode("hi"), res_body_size: 2, ...over,
});

test("phases, server address, connection and versions become extras, after the entry's own", async () => {
  const id = store.add(base({
    extra: { map_local_rule: "r1" },
    reason: "OK",
    har: { blocked: 0.5, connect: 1.25, ssl: 0.75, send: 0.01, wait: 5, receive: 2, connection_id: 7, server_ip: "10.1.2.3", http_version: "HTTP/1.0", response_http_version: "HTTP/1.1" },
  }));
  const d = await store.get(id);
  expect(d).toMatchObject({
    map_local_rule: "r1",
    reason: "OK",
    http_version: "HTTP/1.0",
    response_http_version: "HTTP/1.1",
    timings: { blocked: 0.5, connect: 1.25, ssl: 0.75, send: 0.01, wait: 5, receive: 2 },
    server_ip: "10.1.2.3",
    connection_id: 7,
  });
});

test("a flow that never went upstream: no timings, no connection; no block at all: no extras", async () => {
  const a = store.add(base({ har: { blocked: -1, connect: -1, ssl: -1, send: -1, wait: -1, receive: -1, connection_id: 0, server_ip: null, http_version: "HTTP/1.0", response_http_version: null } }));
  const da = (await store.get(a))!;
  expect(da.http_version).toBe("HTTP/1.0");
  expect(da.timings).toBeUndefined();
  expect(da.connection_id).toBeUndefined();
  const b = store.add(base({}));
  const db = (await store.get(b))!;
  expect(Object.keys(db).filter((k) => ["timings", "server_ip", "connection_id", "http_version"].includes(k))).toEqual([]);
});

test("a HAR block with a value that is not a number is refused with its entry; the others are written", async () => {
  const bad = store.add(base({ har: { blocked: "x" as unknown as number, connect: -1, ssl: -1, send: 0, wait: 0, receive: 0, connection_id: 0, server_ip: null, http_version: null, response_http_version: null } }));
  const good = store.add(base({ url: "http://a.test/good" }));
  await expect(store.flush()).rejects.toThrow("har");
  expect(await store.get(bad)).toBeNull();
  expect((await store.get(good))!.url).toBe("http://a.test/good");
});

test("stored_bodies: imported bodies kept as given (no decoding), with their flags", async () => {
  const id = store.add(base({
    res_headers: [["Content-Type", "application/json"], ["Content-Encoding", "gzip"]],
    res_body: new TextEncoder().encode('{"a":1}'),
    res_body_size: 5,
    stored_bodies: { req_encoding: "utf8", res_encoding: "utf8", req_decoded_from: "", res_decoded_from: "gzip", req_truncated: false, res_truncated: true },
  }));
  const d = (await store.get(id))!;
  expect(d).toMatchObject({ res_body: '{"a":1}', res_body_encoding: "utf8", res_body_decoded_from: "gzip", res_body_truncated: true, res_body_size: 5 });
  expect(d.__tapwire_stored_bodies).toBeUndefined();
});
