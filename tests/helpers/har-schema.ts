/**
 * HAR 1.2 validation for tests: the JSON schemas of the `har-schema` package (draft-06) compiled with ajv 8 (with
 * ajv's draft-06 meta-schema added; strict mode off because har-schema uses the non-standard keywords `optional`
 * and `min`). The formats it names (date-time, ipv4, ipv6, uri) are given implementations here, so `serverIPAddress`'s
 * oneOf really tells an IPv4 from an IPv6 address.
 */
import Ajv from "ajv";
import draft06 from "ajv/dist/refs/json-schema-draft-06.json";
import { createRequire } from "node:module";
import { isIPv4, isIPv6 } from "node:net";

// har-schema ships no type declarations: load it as the CommonJS module it is
const schemas: Record<string, object> = createRequire(import.meta.url)("har-schema");

const ajv = new Ajv({ strict: false, allErrors: true });
ajv.addMetaSchema(draft06);
ajv.addFormat("date-time", (s: string) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/.test(s) && !Number.isNaN(Date.parse(s)));
ajv.addFormat("ipv4", (s: string) => isIPv4(s));
ajv.addFormat("ipv6", (s: string) => isIPv6(s));
ajv.addFormat("uri", (s: string) => URL.canParse(s));
for (const [name, schema] of Object.entries(schemas)) {
  if (name === "default" || name === "har") continue;
  ajv.addSchema(schema);
}
const validate = ajv.compile(schemas.har!);

/** Null when `doc` is a valid HAR 1.2 document, else ajv's errors as text. */
export function harErrors(doc: unknown): string | null {
  return validate(doc) ? null : ajv.errorsText(validate.errors, { separator: "\n" });
}
