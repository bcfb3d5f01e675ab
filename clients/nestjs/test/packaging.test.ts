// Owns the package as its users get it: `npm pack`, unpacked into three consumer projects that
// type-check and run against a real `redial serve`: a NestJS 10-style CommonJS project (module
// commonjs, node10 resolution: "types", "main" and typesVersions), a NestJS 11/12 CommonJS project
// (nodenext, the "require" exports) and an ES module one (the "import" exports). In each, the client
// injected by its class is the one the project imports, which holds only if each build of this
// package loads the matching build of @redial/client.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import { packageDir, startServer, type Server } from "./helpers";

const run = promisify(execFile);
const tsc = path.join(packageDir, "node_modules", "typescript", "bin", "tsc");

const PROGRAM = `import "reflect-metadata";
import { Module } from "@nestjs/common";
import { NestFactory } from "@nestjs/core";
import { TerminusModule } from "@nestjs/terminus";
import { Redial } from "@redial/client";
import { REDIAL_CLIENT, RedialModule, ReceiveRedialCallback } from "@redial/nestjs";
import { RedialHealthIndicator } from "@redial/nestjs/terminus";

@Module({
  imports: [RedialModule.forRoot({ baseUrl: process.env.REDIAL_SERVER }), TerminusModule],
  providers: [RedialHealthIndicator],
})
class AppModule {}

async function main(): Promise<void> {
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
  const client = app.get(Redial);
  const health = await app.get(RedialHealthIndicator).isReady();
  const stats = await client.stats();
  console.log(JSON.stringify({
    sameClient: client === app.get(REDIAL_CLIENT),
    instanceOfImported: client instanceof Redial,
    health,
    stats: typeof stats,
    decorator: typeof ReceiveRedialCallback,
  }));
  await app.close();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
`;

interface Consumer {
  name: string;
  type: "commonjs" | "module";
  compiler: Record<string, unknown>;
}

const NEST_DEFAULTS = { emitDecoratorMetadata: true, experimentalDecorators: true, esModuleInterop: true, strict: true, skipLibCheck: true };

const consumers: Consumer[] = [
  {
    // NestJS 10's starter: CommonJS, resolution that ignores "exports" (TypeScript 6 calls it deprecated).
    name: "nest10-commonjs",
    type: "commonjs",
    compiler: { ...NEST_DEFAULTS, module: "commonjs", moduleResolution: "node10", ignoreDeprecations: "6.0", target: "ES2021" },
  },
  {
    // NestJS 11's and 12's CommonJS starter: nodenext in a package without "type": "module".
    name: "nest12-cjs",
    type: "commonjs",
    compiler: { ...NEST_DEFAULTS, module: "nodenext", moduleResolution: "nodenext", target: "ES2023", isolatedModules: true },
  },
  {
    // NestJS 12's ES module starter.
    name: "nest12-esm",
    type: "module",
    compiler: { ...NEST_DEFAULTS, module: "nodenext", moduleResolution: "nodenext", target: "ES2023", isolatedModules: true },
  },
];

describe("the packed package in CommonJS and ES module NestJS projects", () => {
  let server: Server;
  let packDir: string;
  let tarball: string;
  // Inside this package, so that the consumers find its node_modules (NestJS, the client) above them.
  const root = path.join(packageDir, "dist", "consumers");

  before(async () => {
    packDir = await mkdtemp(path.join(tmpdir(), "redial-nestjs-pack-"));
    const { stdout } = await run("npm", ["pack", "--silent", "--pack-destination", packDir], { cwd: packageDir });
    tarball = path.join(packDir, stdout.trim().split("\n").pop()!);
    await rm(root, { recursive: true, force: true });
    server = await startServer();
  });

  after(async () => {
    await server?.stop();
    if (packDir) await rm(packDir, { recursive: true, force: true });
  });

  test("the tarball holds both builds, their types and the README, and no sources or tests", async () => {
    const { stdout } = await run("tar", ["tzf", tarball]);
    const files = stdout.trim().split("\n").map((f) => f.replace(/^package\//, ""));
    for (const file of ["package.json", "README.md", "dist/cjs/index.js", "dist/cjs/index.d.ts", "dist/cjs/package.json", "dist/cjs/terminus.d.ts", "dist/esm/index.js", "dist/esm/index.d.ts", "dist/esm/package.json", "dist/esm/terminus.js"]) {
      assert.ok(files.includes(file), `${file} in ${files.join(", ")}`);
    }
    assert.deepEqual(files.filter((f) => f.startsWith("src/") || f.startsWith("test/") || f.startsWith("dist/test") || f.startsWith("dist/consumers")), []);
  });

  for (const consumer of consumers) {
    test(`${consumer.name}: type-checks and runs against a real server`, async () => {
      const project = path.join(root, consumer.name);
      const installed = path.join(project, "node_modules", "@redial", "nestjs");
      await mkdir(installed, { recursive: true });
      await mkdir(path.join(project, "src"), { recursive: true });
      await run("tar", ["xzf", tarball, "-C", installed, "--strip-components=1"]);
      await writeFile(path.join(project, "package.json"), JSON.stringify({ name: `consumer-${consumer.name}`, private: true, type: consumer.type }));
      await writeFile(
        path.join(project, "tsconfig.json"),
        JSON.stringify({ compilerOptions: { ...consumer.compiler, outDir: "dist", rootDir: "src", types: ["node"] }, include: ["src"] }),
      );
      await writeFile(path.join(project, "src", "main.ts"), PROGRAM);
      await run(process.execPath, [tsc, "-p", project], { cwd: project }).catch((err: { stdout?: string }) => {
        assert.fail(`${consumer.name} does not type-check against the package:\n${err.stdout ?? String(err)}`);
      });
      const { stdout } = await run(process.execPath, [path.join(project, "dist", "main.js")], {
        cwd: project,
        env: { ...process.env, REDIAL_SERVER: server.url },
      });
      assert.deepEqual(JSON.parse(stdout.trim()), {
        sameClient: true,
        instanceOfImported: true,
        health: { redial: { status: "up" } },
        stats: "object",
        decorator: "function",
      });
    });
  }

  test("require() gets the CommonJS build and import the ES module one, with the same surface", async () => {
    const cwd = path.join(root, "nest12-esm");
    for (const entry of ["@redial/nestjs", "@redial/nestjs/terminus"]) {
      const required = await run(process.execPath, ["-e", `require("reflect-metadata"); console.log(Object.keys(require("${entry}")).sort().join(","))`], { cwd });
      const imported = await run(
        process.execPath,
        ["--input-type=module", "-e", `await import("reflect-metadata"); const m = await import("${entry}"); console.log(Object.keys(m).sort().join(","))`],
        { cwd },
      );
      assert.equal(required.stdout, imported.stdout, entry);
    }
  });
});
