/**
 * Iteration data files of the runners (`--data FILE`), as newman reads them: a JSON array of objects, or CSV whose
 * first row names the columns (RFC 4180: fields may be quoted with ", a quote inside doubled, quoted fields may hold
 * commas and line breaks; a UTF-8 byte order mark and a last empty line are ignored). CSV values are strings.
 */
import { readFileSync } from "node:fs";

export type DataRow = Record<string, unknown>;

export class DataFileError extends Error {}

export function readDataFile(path: string): DataRow[] {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw new DataFileError(`cannot read data file ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  const isJson = /\.json$/i.test(path) || /^\s*[[{]/.test(text);
  return isJson ? parseJsonData(text, path) : parseCsvData(text, path);
}

export function parseJsonData(text: string, path = "data"): DataRow[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new DataFileError(`data file ${path} is not valid JSON: ${(e as Error).message}`);
  }
  if (!Array.isArray(doc)) throw new DataFileError(`data file ${path}: expected a JSON array of objects`);
  doc.forEach((row, i) => {
    if (row === null || typeof row !== "object" || Array.isArray(row)) throw new DataFileError(`data file ${path}: row ${i} is not an object`);
  });
  return doc as DataRow[];
}

/** The rows of a CSV text, each an object keyed by the header row's names. */
export function parseCsvData(text: string, path = "data"): DataRow[] {
  const records = parseCsv(text, path);
  if (!records.length) return [];
  const header = records[0]!.map((h) => h.trim());
  if (header.some((h) => h === "")) throw new DataFileError(`data file ${path}: the header row has an empty column name`);
  return records.slice(1).map((fields, i) => {
    if (fields.length !== header.length) throw new DataFileError(`data file ${path}: line ${i + 2} has ${fields.length} field(s), the header ${header.length}`);
    return Object.fromEntries(header.map((h, j) => [h, fields[j]!]));
  });
}

function parseCsv(text: string, path: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = "";
  let i = 0;
  let quoted = false;
  let atFieldStart = true;
  while (i < text.length) {
    const ch = text[i]!;
    if (quoted) {
      if (ch === '"') {
        if (text[i + 1] === '"') {
          field += '"';
          i += 2;
          continue;
        }
        quoted = false;
        i++;
        continue;
      }
      field += ch;
      i++;
      continue;
    }
    if (ch === '"' && atFieldStart) {
      quoted = true;
      atFieldStart = false;
      i++;
      continue;
    }
    if (ch === ",") {
      row.push(field);
      field = "";
      atFieldStart = true;
      i++;
      continue;
    }
    if (ch === "\r" || ch === "\n") {
      row.push(field);
      rows.push(row);
      row = [];
      field = "";
      atFieldStart = true;
      i += ch === "\r" && text[i + 1] === "\n" ? 2 : 1;
      continue;
    }
    field += ch;
    atFieldStart = false;
    i++;
  }
  if (quoted) throw new DataFileError(`data file ${path}: a quoted field is not closed`);
  if (field !== "" || row.length) {
    row.push(field);
    rows.push(row);
  }
  // blank lines are no rows
  return rows.filter((r) => !(r.length === 1 && r[0] === ""));
}
