// Owns the callback route against a real `redial serve`: the test application (compiled to CommonJS
// as NestJS compiles, started with @nestjs/testing) enqueues through its service, and its controller
// is handed each callback verified and typed; a tampered delivery is refused with 401; a delivery
// sent again, by a test or by Redial after a failure, is acted on once; one that comes while the
// same webhook-id is being handled is answered 409; a route without the raw body says so.
import "reflect-metadata";
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Redial, callbackResponseBody, signWebhook, type Job } from "@redial/client";
import { Deliveries, type Delivery } from "./app/deliveries";
import { Ledger } from "./app/ledger";
import { OrdersService } from "./app/orders.service";
import { startApp, type App } from "./app";
import { startReceiver, startServer, type Receiver, type Server } from "./helpers";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OLD_SECRET = "whsec_" + Buffer.from("the secret before the rotation").toString("base64");
const OTHER_SECRET = "whsec_" + Buffer.from("a secret nobody configured").toString("base64");

/** Posts a delivery to the callback route as Redial would: its headers and its raw body. */
async function post(app: App, delivery: Delivery): Promise<{ status: number; body: string }> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
    if (delivery.headers[name] !== undefined) headers[name] = delivery.headers[name]!;
  }
  const response = await fetch(`${app.url}/redial/callbacks`, { method: "POST", headers, body: new Uint8Array(delivery.body) });
  return { status: response.status, body: await response.text() };
}

/** The delivery signed again with `secret`, under `id`, at `at` (unix seconds). */
function signed(body: Buffer, id: string, secret = SECRET, at = Math.floor(Date.now() / 1000)): Delivery {
  return {
    headers: { "webhook-id": id, "webhook-timestamp": String(at), "webhook-signature": signWebhook(secret, id, at, body) },
    body,
  };
}

function count<T>(items: T[], keep: (item: T) => boolean): number {
  return items.filter(keep).length;
}

describe("callbacks from a real redial serve, in a NestJS application", () => {
  let server: Server;
  let payments: Receiver;
  let app: App;
  let redial: Redial;
  let orders: OrdersService;
  let ledger: Ledger;
  let deliveries: Deliveries;

  before(async () => {
    // Redial signs with SECRET; the application also holds the one before it, as during a rotation.
    // A failed delivery is retried after a short backoff, so that the retry test waits little.
    server = await startServer({
      config: `[queues.callbacks]
signing_secrets = ["${SECRET}"]
policy = { transient = { base = "50ms", cap = "200ms" } }
`,
    });
    payments = await startReceiver((request) =>
      request.path === "/charges" ? { status: 201, body: '{"id":"ch_1"}' } : { status: 404, body: '{"error":"no such route"}' },
    );
    app = await startApp({
      REDIAL_SERVER: server.url,
      REDIAL_CALLBACK_SECRETS: `${OLD_SECRET},${SECRET}`,
      PAYMENTS_URL: payments.origin,
    });
    process.env.APP_URL = app.url;
    redial = new Redial({ baseUrl: server.url });
    orders = app.nest.get(OrdersService);
    ledger = app.nest.get(Ledger);
    deliveries = app.nest.get(Deliveries);
  });

  after(async () => {
    await app?.close();
    await payments?.close();
    await server?.stop();
  });

  /** Waits until the job and the delivery of its callback have both finished; returns the delivery. */
  async function settled(job: Job): Promise<Job> {
    const finished = await redial.waitForJob(job.id, { timeoutMs: 60_000 });
    assert.ok(finished.callback_delivery, `${job.id} finished (${finished.state}) with a delivery`);
    const delivery = await redial.waitForJob(finished.callback_delivery, { timeoutMs: 60_000 });
    assert.equal(delivery.state, "completed", `the delivery of ${job.id}: ${delivery.last_reason}`);
    return delivery;
  }

  test("a service enqueues; the controller is handed the completed job's callback, typed, once", async () => {
    const job = await orders.charge("1001");
    const callback = await ledger.until("charge-1001's callback", () => ledger.handled.find((c) => c.event.data.id === job.id));
    const delivery = await settled(job);

    assert.equal(callback.id, delivery.id, "the webhook-id is the delivery's id");
    assert.equal(callback.event.type, "job.completed");
    assert.equal(callback.event.data.state, "completed");
    assert.equal(callback.event.data.response?.status, 201);
    assert.equal(callbackResponseBody(callback.event.data.response!), '{"id":"ch_1"}');
    assert.deepEqual(
      payments.received.filter((r) => r.path === "/charges").map((r) => JSON.parse(r.body)),
      [{ orderId: "1001", amount: 4200 }],
    );
    assert.deepEqual(ledger.runs, [callback.id], "the handler ran once");
    assert.equal(delivery.runs, 1, "the delivery was answered the first time");
  });

  test("a tampered delivery is refused with 401 and not handled", async () => {
    const original = deliveries.kept[0]!;
    const runs = ledger.runs.length;
    const changed = Buffer.from(original.body.toString("utf8").replace("charge-1001", "charge-1009"));
    assert.notDeepEqual(changed, original.body);
    const id = original.headers["webhook-id"]!;
    const tenMinutesAgo = Math.floor(Date.now() / 1000) - 600;
    const refused: Array<[string, Delivery]> = [
      ["a changed body", { headers: original.headers, body: changed }],
      ["a secret Redial does not use", signed(original.body, id, OTHER_SECRET)],
      ["a timestamp ten minutes old", signed(original.body, id, SECRET, tenMinutesAgo)],
      ["no signature", { headers: {}, body: original.body }],
    ];
    for (const [what, delivery] of refused) {
      const answer = await post(app, delivery);
      assert.equal(answer.status, 401, `${what}: ${answer.body}`);
    }
    assert.equal(ledger.runs.length, runs, "the handler never ran");
  });

  test("a delivery sent again is answered 2xx without acting twice", async () => {
    const original = deliveries.kept[0]!;
    const runs = ledger.runs.length;
    // As it came, and signed again at a later time (as Redial's next attempt would be).
    const again = await post(app, original);
    assert.equal(again.status, 204, again.body);
    const later = await post(app, signed(original.body, original.headers["webhook-id"]!, SECRET, Math.floor(Date.now() / 1000) + 60));
    assert.equal(later.status, 204, later.body);
    assert.equal(ledger.runs.length, runs, "the handler did not run again");
  });

  test("a handler that fails gets the delivery again from Redial, and acts once", async () => {
    ledger.failNext = 1;
    const job = await orders.charge("1003");
    const delivery = await settled(job);
    assert.deepEqual(
      ledger.runs.filter((id) => id === delivery.id),
      [delivery.id, delivery.id],
      "run twice: failed, then handled",
    );
    assert.equal(count(ledger.handled, (c) => c.id === delivery.id), 1, "handled once");
    assert.equal(delivery.runs, 2, "Redial sent the delivery twice");
    assert.equal(delivery.attempt_log?.[0]?.status, 500, "the failed run answered 500");
  });

  test("a delivery that comes while its webhook-id is being handled is answered 409", async () => {
    const id = "callback~test~in-progress";
    const delivery = signed(deliveries.kept[0]!.body, id);
    let release!: () => void;
    ledger.hold = new Promise<void>((resolve) => (release = resolve));
    const first = post(app, delivery);
    await ledger.until("the first run to start", () => (ledger.runs.includes(id) ? true : undefined));
    const during = await post(app, delivery);
    assert.equal(during.status, 409, during.body);
    release();
    assert.equal((await first).status, 204);
    const afterwards = await post(app, delivery);
    assert.equal(afterwards.status, 204);
    assert.equal(count(ledger.runs, (r) => r === id), 1, "run once");
    assert.equal(count(ledger.handled, (c) => c.id === id), 1, "handled once");
  });

  test("a dead job and a cancelled one come as job.dead and job.cancelled", async () => {
    const dead = await orders.charge("1004", { path: "/missing" });
    const waiting = await orders.charge("1005", { runAt: new Date(Date.now() + 3_600_000) });
    await orders.cancel("1005");
    await Promise.all([settled(dead), settled(waiting)]);
    const of = (id: string) => ledger.handled.filter((c) => c.event.data.id === id).map((c) => c.event);
    const [died] = of(dead.id);
    assert.equal(of(dead.id).length, 1);
    assert.equal(died?.type, "job.dead");
    assert.equal(died?.data.category, "permanent");
    assert.equal(died?.data.response?.status, 404);
    const [cancelled] = of(waiting.id);
    assert.equal(of(waiting.id).length, 1);
    assert.equal(cancelled?.type, "job.cancelled");
    assert.equal(cancelled?.data.runs, 0, "it never ran");
    assert.equal(cancelled?.data.response, null);
  });

  test("a signed body that is not a callback event is refused with 400", async () => {
    const runs = ledger.runs.length;
    const answer = await post(app, signed(Buffer.from('{"order": 42}'), "callback~test~not-an-event"));
    assert.equal(answer.status, 400, answer.body);
    assert.match(answer.body, /not a callback event/);
    assert.equal(ledger.runs.length, runs);
  });

  test("an application created without rawBody: true answers 500 and says how to fix it", async () => {
    const plain = await startApp({}, { rawBody: false });
    try {
      const answer = await post(plain, deliveries.kept[0]!);
      assert.equal(answer.status, 500);
      assert.match(answer.body, /NestFactory\.create\(AppModule, \{ rawBody: true \}\)/);
      assert.equal(plain.nest.get(Ledger).runs.length, 0);
    } finally {
      await plain.close();
    }
  });
});
