// Issue 21, finding 9: the capture database's files are owner-only; a damaged database is moved aside and what can
// still be read is salvaged into the new one (with counts); an empty (0-byte) file is reported.
import { Database } from "bun:sqlite";
import { afterAll, expect, test } from "bun:test";
import { chmodSync, closeSync, existsSync, openSync, readdirSync, statSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { CaptureStore } from "../../src/store/capture-store.ts";
import type { NewEntry } from "../../src/store/types.ts";
import { tempDirs } from "../helpers/temp-dirs.ts";
import { startService } from "../helpers/service.ts";

const tmp = tempDirs("tapwire-salvage-");
const stores: CaptureStore[] = [];
afterAll(async () => {
  for (const s of stores) await s.close();
});

const entry = (i: number): NewEntry => ({
  method: "GET", url: `https://salvage.example/${i}`, host: "salvage.example", status_code: 200, content_type: "text/plain",
  duration_ms: 1, timestamp: 1_700_000_000_000 + i, client_addr: "curl", has_response: true,
  req_headers: [["Host", "salvage.example"]], res_headers: [["Content-Type", "text/plain"]],
  req_body: null, req_body_size: 0, res_body: new TextEncoder().encode(`body ${i} ${"x".repeat(200)}`), res_body_size: 206,
});

const mode = (p: string) => statSync(p).mode & 0o777;

test("capture.db, -wal and -shm are 0600 (a 0644 file left by an older version is narrowed)", async () => {
  const dir = tmp();
  const path = join(dir, "capture.db");
  writeFileSync(path, "");
  chmodSync(path, 0o644);
  const s = await CaptureStore.open(path);
  stores.push(s);
  s.add(entry(1));
  await s.flush();
  for (const f of ["capture.db", "capture.db-wal", "capture.db-shm"]) {
    expect(existsSync(join(dir, f))).toBe(true);
    expect({ f, mode: mode(join(dir, f)).toString(8) }).toEqual({ f, mode: "600" });
  }
  // and through the service, in its data directory
  const svc = await startService();
  try {
    const cap = join(svc.config.dataDir, "capture");
    for (const f of readdirSync(cap).filter((n) => n.startsWith("capture.db") && statSync(join(cap, n)).isFile())) expect({ f, mode: mode(join(cap, f)).toString(8) }).toEqual({ f, mode: "600" });
  } finally {
    await svc.stop();
  }
});

test("a damaged page: the file is moved aside, every readable entry is salvaged, the counts are given", async () => {
  const dir = tmp();
  const path = join(dir, "capture.db");
  const N = 3000;
  const a = await CaptureStore.open(path);
  for (let i = 1; i <= N; i++) a.add(entry(i));
  await a.flush();
  await a.close();
  // damage a leaf page of the entries table in the middle of the file (its rows are lost, the others are not)
  const look = new Database(path, { readonly: true });
  const leaves = (look.query("SELECT pageno FROM dbstat WHERE name = 'entries' AND pagetype = 'leaf' ORDER BY pageno").all() as { pageno: number }[]).map((r) => r.pageno);
  const pageSize = (look.query("PRAGMA page_size").get() as { page_size: number }).page_size;
  look.close();
  expect(leaves.length).toBeGreaterThan(4);
  const fd = openSync(path, "r+");
  writeSync(fd, Buffer.alloc(pageSize, 0xff), 0, pageSize, pageSize * (leaves[Math.floor(leaves.length / 2)]! - 1));
  closeSync(fd);

  const s = await CaptureStore.open(path);
  stores.push(s);
  // an open reads the header, the schema and each table's first and last pages only (no scan that grows with the
  // store, issue 20); the rest is read in the background after open, or at once when a reader meets damage
  await s.checkIntegrity();
  expect(s.recoveredFrom).not.toBeNull();
  expect(existsSync(s.recoveredFrom!)).toBe(true);
  expect(s.salvage).not.toBeNull();
  const { saved, lost } = s.salvage!;
  expect(saved).toBeGreaterThan(N * 0.8);
  expect(saved + lost).toBeLessThanOrEqual(N);
  expect(lost).toBeGreaterThan(0);
  expect(s.count()).toBe(saved);
  const list = await s.list({ limit: 5 });
  expect(list.total).toBe(saved);
  // the host filter reads the hosts table the writer keeps: salvaged entries are in it
  expect((await s.list({ host: "salvage", limit: 1 })).total).toBe(saved);
  const one = await s.get(list.items[0]!.id);
  expect(one!.res_body).toStartWith("body ");
  // searchable like any entry, and new ids go above the old ones
  expect((await s.list({ search: "salvage.example/2999" })).total).toBeLessThanOrEqual(1);
  expect(s.add(entry(N + 1))).toBeGreaterThan(N);
});

test("a capture.db truncated to 0 bytes is reported, not silently started empty", async () => {
  const dir = tmp();
  const path = join(dir, "capture.db");
  const a = await CaptureStore.open(path);
  a.add(entry(1));
  await a.flush();
  await a.close();
  writeFileSync(path, "");
  const s = await CaptureStore.open(path);
  stores.push(s);
  expect(s.wasEmpty).toBe(true);
  expect(s.count()).toBe(0);
  const fresh = await CaptureStore.open(join(tmp(), "capture.db"));
  stores.push(fresh);
  expect(fresh.wasEmpty).toBe(false);
});

test("damage met while running (after open's bounded check): a read finds it, the file is moved aside and salvaged, the read answers from the new file", async () => {
  const dir = tmp();
  const path = join(dir, "capture.db");
  const N = 3000;
  const a = await CaptureStore.open(path);
  for (let i = 1; i <= N; i++) a.add(entry(i));
  await a.flush();
  await a.close();
  const s = await CaptureStore.open(path);
  stores.push(s);
  // the background probe has read every table: nothing wrong yet
  expect(await s.checkIntegrity()).toBe(false);
  expect(s.recoveredFrom).toBeNull();
  // now a leaf page of the bodies table goes bad under the running store
  const look = new Database(path, { readonly: true });
  const leaves = (look.query("SELECT pageno FROM dbstat WHERE name = 'bodies' AND pagetype = 'leaf' ORDER BY pageno").all() as { pageno: number }[]).map((r) => r.pageno);
  const pageSize = (look.query("PRAGMA page_size").get() as { page_size: number }).page_size;
  look.close();
  expect(leaves.length).toBeGreaterThan(4);
  const fd = openSync(path, "r+");
  writeSync(fd, Buffer.alloc(pageSize, 0xff), 0, pageSize, pageSize * (leaves[Math.floor(leaves.length / 2)]! - 1));
  closeSync(fd);
  // an export reads every body: it meets the damage, the writer moves the file aside, the export goes on
  let exported = 0;
  for await (const d of s.details({})) {
    expect(d.res_body).toStartWith("body ");
    exported++;
  }
  expect(s.recoveredFrom).not.toBeNull();
  expect(existsSync(s.recoveredFrom!)).toBe(true);
  const { saved, lost } = s.salvage!;
  expect(lost).toBeGreaterThan(0);
  expect(saved + lost).toBeLessThanOrEqual(N);
  expect(exported).toBeGreaterThanOrEqual(saved - 200); // the pages exported before the damage was met
  expect((await s.list({ limit: 1 })).total).toBe(saved);
  expect(s.count()).toBe(saved);
  // the store keeps working on the new file: new entries, above the old ids, readable and searchable
  const id = s.add(entry(N + 1));
  expect(id).toBeGreaterThan(N);
  await s.flush();
  expect((await s.get(id))!.url).toBe(`https://salvage.example/${N + 1}`);
  expect((await s.list({ search: `salvage.example/${N + 1}` })).total).toBe(1);
});
