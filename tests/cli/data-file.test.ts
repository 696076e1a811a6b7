import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { DataFileError, parseCsvData, parseJsonData, readDataFile } from "../../src/cli/data-file.ts";
import { tempDirs } from "../helpers/temp-dirs.ts";

const temp = tempDirs("tapwire-data-file-");

describe("iteration data files", () => {
  test("CSV: header row, quoted fields with commas, doubled quotes and line breaks, CRLF, blank lines", () => {
    expect(parseCsvData('name,note\r\nada,"says ""hi"", twice"\r\n\r\nbob,"two\nlines"\nc,\n')).toEqual([
      { name: "ada", note: 'says "hi", twice' },
      { name: "bob", note: "two\nlines" },
      { name: "c", note: "" },
    ]);
    expect(parseCsvData("a,b")).toEqual([]);
  });

  test("CSV mistakes name the line", () => {
    expect(() => parseCsvData("a,b\n1,2,3\n", "d.csv")).toThrow("data file d.csv: line 2 has 3 field(s), the header 2");
    expect(() => parseCsvData('a\n"open\n', "d.csv")).toThrow("a quoted field is not closed");
    expect(() => parseCsvData("a,,b\n1,2,3\n", "d.csv")).toThrow("empty column name");
  });

  test("JSON: an array of objects, values kept as they are", () => {
    expect(parseJsonData('[{"n": 1, "o": {"x": true}}, {}]')).toEqual([{ n: 1, o: { x: true } }, {}]);
    expect(() => parseJsonData('{"a": 1}', "d.json")).toThrow("expected a JSON array of objects");
    expect(() => parseJsonData("[1]", "d.json")).toThrow("row 0 is not an object");
    expect(() => parseJsonData("[", "d.json")).toThrow(DataFileError);
  });

  test("files: JSON told by extension or content, CSV otherwise; a byte order mark is skipped", () => {
    const dir = temp();
    writeFileSync(join(dir, "rows.txt"), '\uFEFF[{"a":"1"}]');
    writeFileSync(join(dir, "rows.csv"), "\uFEFFa\n1\n");
    expect(readDataFile(join(dir, "rows.txt"))).toEqual([{ a: "1" }]);
    expect(readDataFile(join(dir, "rows.csv"))).toEqual([{ a: "1" }]);
    expect(() => readDataFile(join(dir, "missing.csv"))).toThrow("cannot read data file");
  });
});
