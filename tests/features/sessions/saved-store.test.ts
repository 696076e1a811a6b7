/** SavedSessions on its own: unreadable files are logged once per version of the file, and listed again once fixed. */
import { expect, test } from "bun:test";
import { utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SavedSessions } from "../../../src/features/sessions/saved.ts";
import { tempDir } from "../../helpers/tapwire-process.ts";

test("an unparsable file is skipped and logged once; a fixed file is listed", () => {
  const dir = tempDir("tapwire-saved-");
  const lines: string[] = [];
  const saved = new SavedSessions(dir, (l) => lines.push(l));
  const file = join(dir, "x.har");
  writeFileSync(file, "{ nope");
  expect(saved.list()).toEqual([]);
  expect(saved.list()).toEqual([]);
  expect(lines.length).toBe(1);
  expect(lines[0]).toContain(`${file} is not a readable HAR file`);
  writeFileSync(file, JSON.stringify({ log: { version: "1.2", entries: [] } }));
  utimesSync(file, new Date(), new Date(Date.now() + 5000));
  expect(saved.list().map((s) => [s.id, s.name, s.entry_count])).toEqual([["x", "x", 0]]);
  expect(lines.length).toBe(1);
});
