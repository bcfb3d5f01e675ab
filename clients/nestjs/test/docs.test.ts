// Owns running the code of docs/from-bullmq.md as it is written: its TypeScript compiled as NestJS
// compiles it (CommonJS); its redial.toml checked by `redial config check` and run by a real
// `redial serve`, with the Redial half of the example against it; its shell block run against that
// server; and the BullMQ half against a throwaway Redis (skipped, saying so, without
// redis-server). A stand-in for Stripe declines one card, fails once with a 503 and answers one
// 429, and both halves must do what the page says they do.
import "reflect-metadata";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import type { INestApplication, INestApplicationContext, Type } from "@nestjs/common";
import { Test } from "@nestjs/testing";
import { Redial, type Job as RedialJob } from "@redial/client";
import { Queue, QueueEvents, type Job as BullJob } from "bullmq";
import {
  configCheck,
  haveRedis,
  packageDir,
  redialBin,
  startReceiver,
  startRedis,
  startServer,
  waitFor,
  type Answer,
  type Receiver,
  type Received,
  type Redis,
  type Server,
  unsignedCallbackAnswer,
} from "./helpers";
import { codeBlocks, commands, compileBlocks, type Block } from "./markdown";

const run = promisify(execFile);
const PAGE = path.resolve(packageDir, "../../docs/from-bullmq.md");
const STRIPE = "https://api.stripe.com";
const STRIPE_API_KEY = "sk_test_doc";
// Every file the page shows, each loaded below: a block added to the page is added here with what it does.
const FILES = [
  "orders.ts",
  "bullmq/charges.module.ts",
  "bullmq/charges.service.ts",
  "bullmq/charges.processor.ts",
  "redial/charges.module.ts",
  "redial/charges.service.ts",
  "redial/charges.controller.ts",
  "redial/main.ts",
];

interface Order {
  id: string;
  customer: string;
  paymentMethod: string;
  amount: number;
  currency: string;
}

interface Orders {
  paid: Map<string, string>;
  failed: Map<string, string>;
}

function order(id: string): Order {
  return { id, customer: "cus_doc", paymentMethod: "pm_card_visa", amount: 4200, currency: "eur" };
}

/**
 * A stand-in for Stripe's POST /v1/payment_intents: each order's first answers as `plan` says (1002
 * declined, 1003 a 503, 1004 a 429 for one second), then a PaymentIntent.
 */
async function stripe(): Promise<Receiver> {
  const plan: Record<string, Answer[]> = {
    "1002": [{ status: 402, body: '{"error":{"code":"card_declined","type":"card_error"}}' }],
    "1003": [{ status: 503, body: '{"error":{"type":"api_error"}}' }],
    "1004": [{ status: 429, headers: { "retry-after": "1" }, body: '{"error":{"type":"rate_limit_error"}}' }],
  };
  return startReceiver((request) => {
    const id = orderOf(request);
    return plan[id]?.shift() ?? { status: 200, body: JSON.stringify({ id: `pi_${id}`, object: "payment_intent", status: "succeeded" }) };
  });
}

function orderOf(request: Received): string {
  return new URLSearchParams(request.body).get("metadata[order_id]") ?? "";
}

/** How many requests each order made. */
function requestsPerOrder(receiver: Receiver): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const request of receiver.received) counts[orderOf(request)] = (counts[orderOf(request)] ?? 0) + 1;
  return counts;
}

function load<T = Type>(dir: string, file: string, name: string): T {
  const module = require(path.join(dir, "dist", file.replace(/\.ts$/, ".js"))) as Record<string, unknown>;
  assert.ok(module[name], `${file} exports ${name}`);
  return module[name] as T;
}

describe("docs/from-bullmq.md, run as written", () => {
  let blocks: Block[];
  let dir: string;

  before(async () => {
    blocks = await codeBlocks(PAGE);
  });

  test("its blocks are TypeScript files, TOML and shell, and the TypeScript compiles as NestJS compiles it", async () => {
    assert.deepEqual([...new Set(blocks.map((b) => b.lang))].sort(), ["sh", "toml", "ts"], "a block of another kind would not be run");
    const compiled = await compileBlocks(blocks, "from-bullmq");
    dir = compiled.dir;
    assert.deepEqual(compiled.files, FILES);
  });

  test("its TOML passes redial config check", async () => {
    const tomls = blocks.filter((b) => b.lang === "toml");
    assert.equal(tomls.length, 1);
    const file = path.join(dir, "redial.toml");
    await writeFile(file, tomls[0]!.text);
    const checked = configCheck(file, { STRIPE_API_KEY });
    assert.equal(checked.code, 0, checked.out);
  });

  describe("the Redial half, against a real redial serve started with the page's redial.toml", () => {
    let server: Server;
    let payments: Receiver;
    let app: INestApplication;
    let redial: Redial;
    let charges: { charge(order: Order, options?: { delayMs?: number; urgent?: boolean }): Promise<RedialJob> };
    let orders: Orders;

    before(async () => {
      payments = await stripe();
      const toml = blocks.find((b) => b.lang === "toml")!.text;
      const secret = /signing_secrets = \["(whsec_[^"]+)"\]/.exec(toml)?.[1];
      assert.ok(secret, "the callbacks' secret in redial.toml");
      // Stripe is the stand-in: the endpoint's name is its origin.
      server = await startServer({ config: toml.replaceAll(STRIPE, payments.origin), env: { STRIPE_API_KEY } });
      Object.assign(process.env, { REDIAL_SERVER: server.url, REDIAL_CALLBACK_SECRET: secret, STRIPE_API: payments.origin });
      delete process.env.REDIAL_TOKEN;
      const ChargesModule = load(dir, "redial/charges.module.ts", "ChargesModule");
      const moduleRef = await Test.createTestingModule({ imports: [ChargesModule] }).compile();
      app = moduleRef.createNestApplication({ rawBody: true, logger: false });
      await app.listen(0, "127.0.0.1");
      process.env.APP_URL = (await app.getUrl()).replace("[::1]", "127.0.0.1");
      redial = new Redial({ baseUrl: server.url });
      charges = app.get(load(dir, "redial/charges.service.ts", "ChargesService"));
      orders = app.get(load(dir, "orders.ts", "OrdersService"));
    });

    after(async () => {
      await app?.close();
      await server?.stop();
      await payments?.close();
    });

    /** Waits for the job and the delivery of its callback to finish; returns the job. */
    async function settled(id: string): Promise<RedialJob> {
      const job = await redial.waitForJob(id, { timeoutMs: 60_000 });
      assert.ok(job.callback_delivery, `${id} (${job.state}) made a callback delivery`);
      const delivery = await redial.waitForJob(job.callback_delivery, { timeoutMs: 60_000 });
      assert.equal(delivery.state, "completed", `${id}'s callback: ${delivery.last_reason}`);
      return job;
    }

    test("a charge completes, a declined card is dead at once, a 503 is retried, a 429 waits without spending an attempt", async () => {
      for (const id of ["1001", "1002", "1003", "1004"]) await charges.charge(order(id));
      const again = await charges.charge(order("1001"));
      assert.equal(again.deduplicated, true, "the same id and request are stored once");

      const [ok, declined, flaky, busy] = await Promise.all(["1001", "1002", "1003", "1004"].map((id) => settled(`charge-${id}`)));
      assert.deepEqual([ok!.state, ok!.runs], ["completed", 1]);
      assert.deepEqual([declined!.state, declined!.category, declined!.runs], ["dead", "permanent", 1]);
      assert.deepEqual([flaky!.state, flaky!.attempts, flaky!.runs], ["completed", 1, 2], "one failed attempt, then success");
      assert.deepEqual([busy!.state, busy!.attempts, busy!.deferrals, busy!.runs], ["completed", 0, 1, 2], "deferred, no attempt spent");
      // The reason the page quotes is the one Redial gives.
      assert.equal(declined!.last_reason, "402 client error; permanent, not retried");
      assert.ok((await readFile(PAGE, "utf8")).includes(`(\`${declined!.last_reason}\`)`), "the page quotes the reason");

      assert.deepEqual(Object.fromEntries(orders.paid), { "1001": "pi_1001", "1003": "pi_1003", "1004": "pi_1004" });
      assert.deepEqual(Object.fromEntries(orders.failed), { "1002": "402 client error; permanent, not retried" });
      assert.deepEqual(requestsPerOrder(payments), { "1001": 1, "1002": 1, "1003": 2, "1004": 2 });
      for (const request of payments.received) {
        assert.equal(request.path, "/v1/payment_intents");
        assert.equal(request.headers.authorization, `Bearer ${STRIPE_API_KEY}`, "from redial.toml's credentials");
        assert.equal(request.headers["content-type"], "application/x-www-form-urlencoded");
      }
      const keys = payments.received.filter((r) => orderOf(r) === "1003").map((r) => r.headers["idempotency-key"]);
      assert.ok(keys[0], "an Idempotency-Key is sent");
      assert.equal(keys[1], keys[0], "the same Idempotency-Key on the retry");
    });

    test("a delayed, urgent charge waits with its priority", async () => {
      const later = await charges.charge(order("1005"), { delayMs: 3_600_000, urgent: true });
      assert.equal(later.state, "scheduled");
      assert.equal(later.priority, 10);
      assert.ok(Date.parse(later.run_at) > Date.now() + 3_500_000);
      await redial.cancel(later.id);
    });

    test("the shell block: the dead letter listed and shown, then replayed, and the order paid", async () => {
      const sh = blocks.filter((b) => b.lang === "sh");
      assert.equal(sh.length, 1);
      const outputs: string[] = [];
      for (const line of commands(sh[0]!)) {
        assert.match(line, /^redial /);
        const [, ...args] = line.split(/\s+/);
        const { stdout } = await run(redialBin, args, { env: { ...process.env, REDIAL_SERVER: server.url } }).catch((err: { stderr?: string }) => {
          assert.fail(`${line}: ${err.stderr ?? String(err)}`);
        });
        outputs.push(stdout);
      }
      assert.match(outputs[0]!, /charge-1002.*permanent/);
      assert.match(outputs[1]!, /402/);
      await settled("charge-1002");
      assert.equal(orders.paid.get("1002"), "pi_1002", "the replayed charge's callback marked it paid");
      assert.deepEqual(requestsPerOrder(payments)["1002"], 2);
    });

    test("main.ts starts the application with the raw body kept: an unsigned callback is refused with 401", async () => {
      const answer = await unsignedCallbackAnswer(path.join(dir, "dist", "redial", "main.js"), dir, "/redial/charges");
      // Without the raw body the route would answer 500, saying so.
      assert.equal(answer.status, 401, answer.body);
    });
  });

  describe("the BullMQ half, against a throwaway Redis", { skip: haveRedis() ? false : "redis-server is not installed: the BullMQ half only compiled" }, () => {
    let redis: Redis;
    let payments: Receiver;
    let context: INestApplicationContext;
    let events: QueueEvents;
    let queue: Queue;
    let dead: Queue;
    let charges: { charge(order: Order, options?: { delayMs?: number; urgent?: boolean }): Promise<BullJob<Order>> };
    let orders: Orders;

    before(async () => {
      redis = await startRedis();
      payments = await stripe();
      Object.assign(process.env, { REDIS_PORT: String(redis.port), STRIPE_API: payments.origin, STRIPE_API_KEY });
      const ChargesModule = load(dir, "bullmq/charges.module.ts", "ChargesModule");
      const moduleRef = await Test.createTestingModule({ imports: [ChargesModule] }).compile();
      context = await moduleRef.init();
      charges = context.get(load(dir, "bullmq/charges.service.ts", "ChargesService"));
      orders = context.get(load(dir, "orders.ts", "OrdersService"));
      const connection = { host: "127.0.0.1", port: redis.port };
      events = new QueueEvents("charges", { connection });
      queue = new Queue("charges", { connection });
      dead = new Queue("charges-dead", { connection });
      await events.waitUntilReady();
    });

    after(async () => {
      await events?.close();
      await queue?.close();
      await dead?.close();
      await context?.close();
      await payments?.close();
      await redis?.stop();
    });

    test("a charge completes, a declined card fails at once into charges-dead, a 503 is retried, a 429 waits without spending an attempt", async () => {
      const jobs: Record<string, BullJob<Order>> = {};
      for (const id of ["1001", "1002", "1003", "1004"]) jobs[id] = await charges.charge(order(id));
      const again = await charges.charge(order("1001"));
      assert.equal(again.id, "charge-1001");

      const outcomes = await Promise.all(
        Object.values(jobs).map((job) => job.waitUntilFinished(events, 60_000).then((value: unknown) => ["completed", value], (err: Error) => ["failed", err.message])),
      );
      assert.deepEqual(outcomes, [
        ["completed", "pi_1001"],
        ["failed", '402: {"error":{"code":"card_declined","type":"card_error"}}'],
        ["completed", "pi_1003"],
        ["completed", "pi_1004"],
      ]);
      const state = async (id: string) => {
        const job = (await queue.getJob(`charge-${id}`)) as BullJob<Order>;
        return { made: job.attemptsMade, started: job.attemptsStarted };
      };
      assert.deepEqual(await state("1003"), { made: 2, started: 2 }, "a failed attempt, then success");
      assert.deepEqual(await state("1004"), { made: 1, started: 2 }, "the rate-limited start spent no attempt");
      // The failed listener runs after the job has failed.
      const deadJob = await waitFor("charge-1002 in charges-dead", () => dead.getJob("charge-1002"));
      assert.deepEqual(deadJob.data.order, order("1002"));
      await waitFor("order 1002 marked failed", () => orders.failed.get("1002"));

      assert.deepEqual(Object.fromEntries(orders.paid), { "1001": "pi_1001", "1003": "pi_1003", "1004": "pi_1004" });
      assert.match(orders.failed.get("1002")!, /^402: /);
      assert.deepEqual(requestsPerOrder(payments), { "1001": 1, "1002": 1, "1003": 2, "1004": 2 });
      for (const request of payments.received) {
        assert.equal(request.headers.authorization, `Bearer ${STRIPE_API_KEY}`);
        assert.equal(request.headers["idempotency-key"], `charge-${orderOf(request)}`);
      }
    });

    test("a delayed, urgent charge waits with its priority", async () => {
      const later = await charges.charge(order("1005"), { delayMs: 3_600_000, urgent: true });
      assert.equal(await later.getState(), "delayed");
      assert.equal(later.opts.priority, 1);
      await later.remove();
    });
  });
});
