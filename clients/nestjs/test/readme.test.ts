// Owns running the README's code as it is written: its two-minute start compiled as NestJS compiles
// it (CommonJS) and run against a real `redial serve` started with the README's redial.toml (a welcome
// email sent, one refused, each told by callback; the health check up; main.ts keeping the raw body),
// and its Redis store of webhook-ids against a throwaway Redis (skipped, saying so, without
// redis-server). The README's one shell block, ./run-tests, is what runs this.
import "reflect-metadata";
import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import type { INestApplication, Type } from "@nestjs/common";
import { Test } from "@nestjs/testing";
import { Redial, type Job } from "@redial/client";
import type { RedialCallbackStore } from "@redial/nestjs";
import { Redis as RedisClient } from "ioredis";
import { configCheck, haveRedis, packageDir, startReceiver, startRedis, startServer, unsignedCallbackAnswer, type Receiver, type Redis, type Server } from "./helpers";
import { codeBlocks, commands, compileBlocks, type Block } from "./markdown";

const PAGE = path.join(packageDir, "README.md");
const FILES = ["app.module.ts", "welcome.service.ts", "redial.controller.ts", "health.controller.ts", "main.ts", "redis-callback-store.ts"];

function load<T = Type>(dir: string, file: string, name: string): T {
  const module = require(path.join(dir, "dist", file.replace(/\.ts$/, ".js"))) as Record<string, unknown>;
  assert.ok(module[name], `${file} exports ${name}`);
  return module[name] as T;
}

describe("README.md, run as written", () => {
  let blocks: Block[];
  let dir: string;

  before(async () => {
    blocks = await codeBlocks(PAGE);
  });

  test("its TypeScript compiles as NestJS compiles it, its TOML passes redial config check", async () => {
    assert.deepEqual([...new Set(blocks.map((b) => b.lang))].sort(), ["sh", "toml", "ts"]);
    assert.deepEqual(blocks.filter((b) => b.lang === "sh").flatMap(commands), ["./run-tests"]);
    const compiled = await compileBlocks(blocks, "readme");
    dir = compiled.dir;
    assert.deepEqual(compiled.files, FILES);
    const tomls = blocks.filter((b) => b.lang === "toml");
    assert.equal(tomls.length, 1);
    await writeFile(path.join(dir, "redial.toml"), tomls[0]!.text);
    const checked = configCheck(path.join(dir, "redial.toml"));
    assert.equal(checked.code, 0, checked.out);
  });

  describe("the two-minute start, against a real redial serve", () => {
    let server: Server;
    let mail: Receiver;
    let app: INestApplication;
    let url: string;
    let redial: Redial;

    before(async () => {
      mail = await startReceiver((request) =>
        JSON.parse(request.body).to.includes("@") ? { status: 202 } : { status: 400, body: '{"error":"invalid address"}' },
      );
      server = await startServer({ config: blocks.find((b) => b.lang === "toml")!.text });
      const secret = /whsec_[^"]+/.exec(blocks.find((b) => b.lang === "toml")!.text)![0];
      Object.assign(process.env, { REDIAL_SERVER: server.url, REDIAL_CALLBACK_SECRET: secret, MAIL_API: mail.origin });
      delete process.env.REDIAL_TOKEN;
      const moduleRef = await Test.createTestingModule({ imports: [load(dir, "app.module.ts", "AppModule")] }).compile();
      app = moduleRef.createNestApplication({ rawBody: true, logger: false });
      await app.listen(0, "127.0.0.1");
      url = (await app.getUrl()).replace("[::1]", "127.0.0.1");
      process.env.APP_URL = url;
      redial = new Redial({ baseUrl: server.url });
    });

    after(async () => {
      await app?.close();
      await server?.stop();
      await mail?.close();
    });

    test("a welcome email sent and one refused, each told by callback", async () => {
      const welcome = app.get(load(dir, "welcome.service.ts", "WelcomeService")) as {
        send(userId: string, email: string): Promise<Job>;
        outcomes: Map<string, string>;
      };
      const jobs = [await welcome.send("1", "ada@example.com"), await welcome.send("2", "not an address")];
      for (const job of jobs) {
        const finished = await redial.waitForJob(job.id, { timeoutMs: 60_000 });
        const delivery = await redial.waitForJob(finished.callback_delivery!, { timeoutMs: 60_000 });
        assert.equal(delivery.state, "completed", `${job.id}'s callback: ${delivery.last_reason}`);
      }
      assert.deepEqual(Object.fromEntries(welcome.outcomes), { "1": "job.completed", "2": "job.dead" });
      assert.deepEqual(
        mail.received.map((r) => [r.path, JSON.parse(r.body)]),
        [
          ["/send", { to: "ada@example.com", template: "welcome" }],
          ["/send", { to: "not an address", template: "welcome" }],
        ],
      );
    });

    test("the health check reports Redial up", async () => {
      const response = await fetch(`${url}/health`);
      assert.equal(response.status, 200);
      assert.deepEqual(((await response.json()) as { info: unknown }).info, { redial: { status: "up" } });
    });

    test("main.ts keeps the raw body: an unsigned callback is refused with 401", async () => {
      const answer = await unsignedCallbackAnswer(path.join(dir, "dist", "main.js"), dir, "/redial/callbacks");
      assert.equal(answer.status, 401, answer.body);
    });
  });

  describe("the Redis store of webhook-ids", { skip: haveRedis() ? false : "redis-server is not installed: the store only compiled" }, () => {
    let redis: Redis;
    let client: RedisClient;

    before(async () => {
      redis = await startRedis();
      client = new RedisClient({ host: "127.0.0.1", port: redis.port });
    });

    after(async () => {
      client?.disconnect();
      await redis?.stop();
    });

    test("new, then being handled, then handled; a failed handler gives the id back", async () => {
      const RedisCallbackStore = load<new (redis: RedisClient) => RedialCallbackStore>(dir, "redis-callback-store.ts", "RedisCallbackStore");
      const store = new RedisCallbackStore(client);
      const other = new RedisCallbackStore(client); // another instance of the application
      assert.equal(await store.begin("a"), "new");
      assert.equal(await other.begin("a"), "handling");
      await store.finish("a");
      assert.equal(await other.begin("a"), "handled");
      assert.equal(await store.begin("b"), "new");
      await store.abandon("b");
      assert.equal(await other.begin("b"), "new");
      assert.ok((await client.pttl("redial:callback:a")) > 0, "a handled id expires");
    });
  });
});
