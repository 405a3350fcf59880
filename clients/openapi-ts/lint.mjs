// Usage: node lint.mjs <URL or file of an OpenAPI document>
// Lints the document with Redocly's OpenAPI core (the library behind
// `redocly lint`, which openapi-typescript also loads it with): the
// document's structure against the OpenAPI 3.1 specification, every $ref,
// and one unique operationId on every operation. Exits 1 on any error.
import { createConfig, lint } from "@redocly/openapi-core";

const ref = process.argv[2];
if (!ref) {
  console.error("usage: node lint.mjs <openapi document>");
  process.exit(2);
}
const config = await createConfig({
  rules: {
    struct: "error",
    "no-unresolved-refs": "error",
    "operation-operationId": "error",
    "operation-operationId-unique": "error",
    "operation-operationId-url-safe": "error",
    "operation-parameters-unique": "error",
    "path-parameters-defined": "error",
    "path-declaration-must-exist": "error",
    "no-identical-paths": "error",
    "no-enum-type-mismatch": "error",
    "no-invalid-schema-examples": "error",
    "no-invalid-media-type-examples": "error",
  },
});
const problems = await lint({ ref, config });
for (const p of problems) {
  console.error(`${p.severity} ${p.ruleId}: ${p.message} at ${p.location?.[0]?.pointer ?? "?"}`);
}
const errors = problems.filter((p) => p.severity === "error").length;
if (errors > 0) {
  console.error(`FAIL: ${errors} errors in ${ref}`);
  process.exit(1);
}
console.log(`ok: ${ref} lints clean`);
