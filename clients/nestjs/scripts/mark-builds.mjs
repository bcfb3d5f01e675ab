// Marks each build with the module kind its .js files are: the package is CommonJS (what NestJS
// applications compile to by default), so dist/esm needs a package.json saying "module" for Node to
// read its files as ES modules. The cjs marker states the default, so that neither depends on where
// the folder is copied.
import { writeFileSync } from "node:fs";
writeFileSync(new URL("../dist/esm/package.json", import.meta.url), '{ "type": "module" }\n');
writeFileSync(new URL("../dist/cjs/package.json", import.meta.url), '{ "type": "commonjs" }\n');
