// Owns taking a page's code out of its markdown: its fenced blocks in order, the TypeScript ones
// written as the files their first line names, compiled as a NestJS application compiles (the
// CommonJS starter's tsconfig), in a folder of this package so that they find its node_modules and
// import @redial/nestjs as an application that installed it does.
import { execFile } from "node:child_process";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { packageDir } from "./helpers";

const run = promisify(execFile);

export interface Block {
  lang: string;
  text: string;
  /** The line of its opening fence, for messages. */
  line: number;
}

/** Every fenced block of the page, in order. */
export async function codeBlocks(file: string): Promise<Block[]> {
  const markdown = await readFile(file, "utf8");
  const blocks: Block[] = [];
  const fence = /^```(\S*)\n([\s\S]*?)^```$/gm;
  for (let match = fence.exec(markdown); match; match = fence.exec(markdown)) {
    blocks.push({ lang: match[1]!, text: match[2]!, line: markdown.slice(0, match.index).split("\n").length });
  }
  return blocks;
}

/** The file a TypeScript block is (its first line, `// path.ts`). */
export function fileOf(block: Block): string {
  const name = /^\/\/ (\S+\.ts)\n/.exec(block.text)?.[1];
  if (!name) throw new Error(`the ts block at line ${block.line} does not start with "// <file>.ts"`);
  return name;
}

/**
 * Writes the TypeScript blocks under `<dir>/src` and compiles them to `<dir>/dist` with the NestJS
 * CommonJS starter's compiler options; returns the files written. `dir` is made inside this package
 * (dist/...), without a package.json of its own, so that `@redial/nestjs` resolves to this package.
 */
export async function compileBlocks(blocks: Block[], name: string): Promise<{ dir: string; files: string[] }> {
  const dir = path.join(packageDir, "dist", "pages", name);
  await rm(dir, { recursive: true, force: true });
  const files: string[] = [];
  for (const block of blocks.filter((b) => b.lang === "ts")) {
    const file = fileOf(block);
    if (files.includes(file)) throw new Error(`two ts blocks are ${file}`);
    files.push(file);
    await mkdir(path.dirname(path.join(dir, "src", file)), { recursive: true });
    await writeFile(path.join(dir, "src", file), block.text);
  }
  await writeFile(
    path.join(dir, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        module: "nodenext",
        moduleResolution: "nodenext",
        resolvePackageJsonExports: true,
        esModuleInterop: true,
        isolatedModules: true,
        declaration: true,
        removeComments: true,
        emitDecoratorMetadata: true,
        experimentalDecorators: true,
        allowSyntheticDefaultImports: true,
        target: "ES2023",
        types: ["node"],
        sourceMap: true,
        outDir: "./dist",
        rootDir: "./src",
        skipLibCheck: true,
        strict: true,
        strictPropertyInitialization: false,
      },
      include: ["src"],
    }),
  );
  const tsc = path.join(packageDir, "node_modules", "typescript", "bin", "tsc");
  await run(process.execPath, [tsc, "-p", dir]).catch((err: { stdout?: string }) => {
    throw new Error(`the ${name} code does not compile:\n${err.stdout ?? String(err)}`);
  });
  return { dir, files };
}

/** A `sh` block's commands: one a line, comments and blank lines left out. */
export function commands(block: Block): string[] {
  return block.text
    .split("\n")
    .map((line) => line.replace(/\s+#.*$/, "").trim())
    .filter((line) => line !== "" && !line.startsWith("#"));
}
