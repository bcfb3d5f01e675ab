// Marks dist/cjs as CommonJS: the package is "type": "module", so without this Node would read the
// CommonJS build's .js files as ES modules. The require() half of the dual package.
import { writeFileSync } from "node:fs";
writeFileSync(new URL("../dist/cjs/package.json", import.meta.url), '{ "type": "commonjs" }\n');
