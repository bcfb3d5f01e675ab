// Owns the package as its users get it: `npm pack`, then a CommonJS project (what NestJS compiles to by
// default) and an ES module project install the tarball, type-check their TypeScript against it
// (`require` and `import` each find their own types), and run against a real `redial serve`: enqueue,
// read back, a typed error, and a real signed delivery verified from the raw body in a node:http
// handler, as an Express raw-body route or a NestJS controller with `rawBody` receives it; the callback
// types check and parseCallback is in both builds; the job's event is read from a page and from the
// live stream.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
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
const tsc = path.join(pkg, "node_modules", "typescript", "bin", "tsc");
const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/** The consumer's program, the same for both flavours but for how it imports the client. */
function program(importLine: string, flavour: string): string {
  return `${importLine}
import http from "node:http";

async function main(): Promise<void> {
  const secret = process.env.REDIAL_TEST_SECRET ?? "";
  const verified: string[] = [];
  // A raw-body route: the bytes as they came, verified before anything parses them.
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      try {
        const { id } = verifyWebhook({ secrets: secret, headers: req.headers, body });
        const order: number = JSON.parse(body.toString("utf8")).order;
        verified.push(id + " " + order);
        res.writeHead(200).end();
      } catch (err) {
        res.writeHead(err instanceof WebhookVerificationError ? 401 : 500).end();
      }
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", () => resolve()));
  const { port } = receiver.address() as { port: number };
  const redial = new Redial({ baseUrl: process.env.REDIAL_SERVER });
  const job = await redial.enqueue({
    queue: "events",
    request: { method: "POST", url: "http://127.0.0.1:" + port + "/hook", body: { order: 42 } },
  });
  // Waits for the delivery and the job's end, within a generous bound.
  const deadline = Date.now() + 60_000;
  let state = job.state;
  while ((verified.length === 0 || state !== "completed") && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    state = (await redial.getJob(job.id)).state;
  }
  let code: ErrorCode | string = "";
  try {
    await redial.getJob("no-such-job");
  } catch (err) {
    if (err instanceof RedialError) code = err.code;
  }
  receiver.close();
  // The job's event, from a page and from the stream (an async generator in both builds).
  const page: EventPage = await redial.events({ kind: ["job.completed"] });
  const events = page.events.filter((e) => e.job_id === job.id).map((e) => e.type + " " + e.job_id);
  for await (const event of redial.streamEvents({ after: "0-0", kind: "job.completed" })) {
    const e: Event = event;
    if (e.job_id !== job.id) continue;
    events.push(e.type + " " + e.job_id);
    break;
  }
  // The callback types check, and parseCallback is there at run time.
  const describe = (e: CallbackEvent): string => e.type + " " + e.data.id;
  const callbacks = typeof parseCallback + " " + describe({ type: "job.dead", data: { id: "x" } } as CallbackEvent);
  console.log(JSON.stringify({ flavour: "${flavour}", verified, key: job.idempotency_key, id: job.id, state, code, callbacks, events }));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
`;
}

interface Flavour {
  name: string;
  type: "commonjs" | "module";
  /** The compiler options a project of this kind uses. */
  compiler: Record<string, unknown>;
  file: string;
  importLine: string;
}

const flavours: Flavour[] = [
  {
    // A NestJS project's defaults: CommonJS output, the "node" resolution that reads "types" and "main".
    name: "cjs",
    type: "commonjs",
    compiler: { module: "commonjs", moduleResolution: "node", target: "ES2021", esModuleInterop: true },
    file: "main.ts",
    importLine: 'import { Redial, RedialError, verifyWebhook, WebhookVerificationError, parseCallback, type CallbackEvent, type ErrorCode, type Event, type EventPage } from "@redial/client";',
  },
  {
    name: "esm",
    type: "module",
    compiler: { module: "nodenext", moduleResolution: "nodenext", target: "ES2022" },
    file: "main.ts",
    importLine: 'import { Redial, RedialError, verifyWebhook, WebhookVerificationError, parseCallback, type CallbackEvent, type ErrorCode, type Event, type EventPage } from "@redial/client";',
  },
];

describe("the package from a CommonJS project and from an ES module one", () => {
  let server: Server;
  let dir: string;
  let tarball: string;

  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "redial-ts-pack-"));
    const { stdout } = await run("npm", ["pack", "--silent", "--pack-destination", dir], { cwd: pkg });
    tarball = path.join(dir, stdout.trim().split("\n").pop()!);
    server = await startServer({ config: `[queues.events]\nsigning_secrets = ["${SECRET}"]\n` });
  });

  after(async () => {
    await server?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  for (const flavour of flavours) {
    test(`${flavour.name}: installs, type-checks, and runs against a real server`, async () => {
      const project = path.join(dir, flavour.name);
      await mkdir(path.join(project, "src"), { recursive: true });
      await writeFile(
        path.join(project, "package.json"),
        JSON.stringify({ name: `consumer-${flavour.name}`, private: true, type: flavour.type }),
      );
      await writeFile(
        path.join(project, "tsconfig.json"),
        JSON.stringify({
          compilerOptions: {
            ...flavour.compiler,
            strict: true,
            outDir: "dist",
            rootDir: "src",
            skipLibCheck: false,
            // The consumer has no @types/node of its own: it borrows the client's.
            typeRoots: [path.join(pkg, "node_modules", "@types")],
            types: ["node"],
          },
          include: ["src"],
        }),
      );
      await writeFile(path.join(project, "src", flavour.file), program(flavour.importLine, flavour.name));
      // The tarball has no dependencies: nothing is fetched.
      await run("npm", ["install", "--offline", "--no-audit", "--no-fund", "--silent", tarball], { cwd: project });
      await run(process.execPath, [tsc, "-p", project], { cwd: project }).catch((err: { stdout?: string }) => {
        assert.fail(`the ${flavour.name} project does not type-check against the package:\n${err.stdout ?? String(err)}`);
      });
      const { stdout } = await run(process.execPath, [path.join(project, "dist", "main.js")], {
        cwd: project,
        env: { ...process.env, REDIAL_SERVER: server.url, REDIAL_TEST_SECRET: SECRET },
      });
      const out = JSON.parse(stdout.trim()) as {
        flavour: string;
        verified: string[];
        key: string;
        id: string;
        state: string;
        code: string;
        callbacks: string;
        events: string[];
      };
      assert.equal(out.flavour, flavour.name);
      assert.equal(out.state, "completed");
      assert.deepEqual(out.verified, [`${out.key} 42`], "one delivery, verified from its raw body");
      assert.equal(out.code, "not_found");
      assert.equal(out.callbacks, "function job.dead x");
      assert.deepEqual(out.events, [`job.completed ${out.id}`, `job.completed ${out.id}`], "the job's event, paged and streamed");
    });
  }

  test("require() gets the CommonJS build and import the ES module one, with the same surface", async () => {
    const required = await run(process.execPath, ["-e", 'console.log(Object.keys(require("@redial/client")).sort().join(","))'], {
      cwd: path.join(dir, "cjs"),
    });
    const imported = await run(
      process.execPath,
      ["--input-type=module", "-e", 'const m = await import("@redial/client"); console.log(Object.keys(m).sort().join(","))'],
      { cwd: path.join(dir, "esm") },
    );
    assert.equal(required.stdout, imported.stdout);
    assert.match(required.stdout, /verifyWebhook/);
    assert.match(required.stdout, /parseCallback/);
    assert.match(required.stdout, /CallbackParseError/);
  });
});
