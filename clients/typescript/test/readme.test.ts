// Owns running the README's two-minute start as it is written: the server started with the section's
// redial.toml and flags, its program saved under the name its first line gives, its shell commands run
// in a fresh project (`npm install` offline: the packages it names are linked from this package's
// node_modules, and the client itself as the Install section's "depend on the folder" does), and what
// the program prints compared with what the section says it prints.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import { startServer, type Server } from "./helpers.js";

const run = promisify(execFile);
const here = path.dirname(fileURLToPath(import.meta.url));
// dist/test -> clients/typescript
const pkg = path.resolve(here, "../..");
const SECTION = "## Two-minute start";

interface Block {
  lang: string;
  text: string;
}

/** The fenced blocks of the README's section under `heading`, in order. */
async function sectionBlocks(heading: string): Promise<Block[]> {
  const readme = await readFile(path.join(pkg, "README.md"), "utf8");
  const start = readme.indexOf(`\n${heading}\n`);
  assert.ok(start >= 0, `the README has no "${heading}" section`);
  const end = readme.indexOf("\n## ", start + 1);
  const section = readme.slice(start, end < 0 ? undefined : end);
  const blocks: Block[] = [];
  const fence = /^```(\S*)\n([\s\S]*?)^```$/gm;
  for (let match = fence.exec(section); match; match = fence.exec(section)) {
    blocks.push({ lang: match[1]!, text: match[2]! });
  }
  return blocks;
}

/** A shell block's commands: its lines without comments, each split at `&&`, as words. */
function commands(block: Block): string[][] {
  return block.text
    .split("\n")
    .map((line) => line.replace(/\s#.*$/, "").trim())
    .filter((line) => line !== "")
    .flatMap((line) => line.split("&&").map((command) => command.trim().split(/\s+/)));
}

/** Links `name` from this package's node_modules (or this package itself) into `project`'s. */
async function link(project: string, name: string, from: string): Promise<void> {
  assert.ok((await stat(from).catch(() => undefined))?.isDirectory(), `${name} is not in ${from}`);
  const to = path.join(project, "node_modules", name);
  await mkdir(path.dirname(to), { recursive: true });
  await symlink(from, to, "dir");
}

describe("README.md's two-minute start, run as written", () => {
  let blocks: Block[];
  let server: Server;
  let project: string;

  before(async () => {
    blocks = await sectionBlocks(SECTION);
    const of = (lang: string) => blocks.filter((b) => b.lang === lang);
    assert.deepEqual(
      blocks.map((b) => b.lang),
      ["toml", "sh", "ts", "sh", "text"],
      "the section's blocks: redial.toml, the server, the program, its commands, its output",
    );
    const serve = commands(of("sh")[0]!);
    assert.equal(serve.length, 1, "one command starts the server");
    const words = serve[0]!;
    assert.equal(path.basename(words[0]!), "redial");
    assert.equal(words[1], "serve");
    server = await startServer({ config: of("toml")[0]!.text, flags: words.slice(2) });
    project = await mkdtemp(path.join(tmpdir(), "redial-ts-readme-"));
    await writeFile(path.join(project, "package.json"), JSON.stringify({ name: "two-minute-start", private: true }));
    await link(project, "@redial/client", pkg);
  });

  after(async () => {
    await server?.stop();
    if (project) await rm(project, { recursive: true, force: true });
  });

  test("its commands compile the program, which prints what the README says", async () => {
    const program = blocks.find((b) => b.lang === "ts")!.text;
    const file = /^\/\/ (\S+\.mts)\n/.exec(program)?.[1];
    assert.ok(file, 'the program starts with "// <file>.mts"');
    await writeFile(path.join(project, file), program);
    const env: NodeJS.ProcessEnv = { ...process.env, REDIAL_SERVER: server.url };
    delete env.REDIAL_TOKEN;
    let printed: string | undefined;
    for (const [command, ...args] of commands(blocks.filter((b) => b.lang === "sh")[1]!)) {
      const shown = [command, ...args].join(" ");
      if (command === "npm" && args[0] === "install") {
        for (const name of args.slice(1).filter((a) => !a.startsWith("-"))) {
          await link(project, name, path.join(pkg, "node_modules", name));
        }
      } else if (command === "npx" && args[0] === "tsc") {
        const tsc = path.join(project, "node_modules", "typescript", "bin", "tsc");
        await run(process.execPath, [tsc, ...args.slice(1)], { cwd: project }).catch((err: { stdout?: string }) => {
          assert.fail(`${shown} failed:\n${err.stdout ?? String(err)}`);
        });
      } else if (command === "node") {
        const { stdout } = await run(process.execPath, args, { cwd: project, env, timeout: 120_000 }).catch(
          (err: { stdout?: string; stderr?: string }) => assert.fail(`${shown} failed:\n${err.stdout ?? ""}${err.stderr ?? String(err)}`),
        );
        printed = stdout;
      } else {
        assert.fail(`the test does not know how to run "${shown}"`);
      }
    }
    assert.equal(printed, blocks.find((b) => b.lang === "text")!.text);
  });
});
