// Owns src/api-types.ts: generates it from the server's OpenAPI document with
// openapi-typescript, or (with --check) fails when the committed file is stale.
import { readFile, writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import path from "node:path";
import openapiTS, { astToString } from "openapi-typescript";

const here = path.dirname(fileURLToPath(import.meta.url));
const specPath = path.resolve(here, "../../../crates/redial-server/src/openapi.json");
const outPath = path.resolve(here, "../src/api-types.ts");
const check = process.argv.includes("--check");

const header =
  "// Owns the API's types: generated from crates/redial-server/src/openapi.json by\n" +
  "// scripts/generate-types.mjs (openapi-typescript). Do not edit; run `npm run generate-types`.\n\n";

const spec = JSON.parse(await readFile(specPath, "utf8"));
const ast = await openapiTS(spec, { alphabetize: false, defaultNonNullable: false });
const generated = header + astToString(ast);

if (check) {
  let committed = "";
  try {
    committed = await readFile(outPath, "utf8");
  } catch {
    // missing counts as stale
  }
  if (committed !== generated) {
    console.error(
      `src/api-types.ts is stale against ${path.relative(process.cwd(), specPath)}: run \`npm run generate-types\` and commit the result`,
    );
    process.exit(1);
  }
  console.log("src/api-types.ts is up to date with the OpenAPI document");
} else {
  await writeFile(outPath, generated);
  console.log(`wrote ${path.relative(process.cwd(), outPath)}`);
}
