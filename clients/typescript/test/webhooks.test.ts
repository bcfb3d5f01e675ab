// Owns the signature tests: the Standard Webhooks test vector, rotation, staleness, and a real signed
// delivery from `redial serve` checked with verifyWebhook and with the reference library standardwebhooks.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Webhook } from "standardwebhooks";
import { Redial, WebhookVerificationError, signWebhook, verifyWebhook } from "../src/index.js";
import { startReceiver, startServer, waitFor, type Receiver, type Server } from "./helpers.js";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OTHER = "whsec_" + Buffer.from("another secret, for rotation!!").toString("base64");
const ID = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const TS = 1614265330;
const BODY = '{"test": 2432232314}';
const SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
const AT = new Date(TS * 1000);
const vectorHeaders = { "webhook-id": ID, "webhook-timestamp": String(TS), "webhook-signature": SIGNATURE };

function failure(fn: () => unknown): WebhookVerificationError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof WebhookVerificationError, `expected WebhookVerificationError, got ${String(err)}`);
    return err;
  }
  assert.fail("verification passed but should have failed");
}

describe("verifyWebhook", () => {
  test("the spec's test vector signs and verifies", () => {
    assert.equal(signWebhook(SECRET, ID, TS, BODY), SIGNATURE);
    assert.deepEqual(verifyWebhook({ secrets: SECRET, headers: vectorHeaders, body: BODY, now: AT }), { id: ID, timestamp: AT });
    assert.ok(verifyWebhook({ secrets: [SECRET], headers: vectorHeaders, body: Buffer.from(BODY), now: AT }));
    assert.ok(verifyWebhook({ secrets: SECRET, headers: new Headers(vectorHeaders), body: BODY, now: AT }));
  });

  test("any of several secrets, and any of several signatures, may match", () => {
    assert.ok(verifyWebhook({ secrets: [OTHER, SECRET], headers: vectorHeaders, body: BODY, now: AT }));
    const both = { ...vectorHeaders, "webhook-signature": `${signWebhook(OTHER, ID, TS, BODY)} ${SIGNATURE}` };
    assert.ok(verifyWebhook({ secrets: SECRET, headers: both, body: BODY, now: AT }));
    assert.ok(verifyWebhook({ secrets: OTHER, headers: both, body: BODY, now: AT }));
  });

  test("a wrong secret, a changed body or a changed id fails", () => {
    assert.equal(failure(() => verifyWebhook({ secrets: OTHER, headers: vectorHeaders, body: BODY, now: AT })).reason, "no_matching_signature");
    assert.equal(failure(() => verifyWebhook({ secrets: SECRET, headers: vectorHeaders, body: BODY + " ", now: AT })).reason, "no_matching_signature");
    const otherId = { ...vectorHeaders, "webhook-id": "msg_other" };
    assert.equal(failure(() => verifyWebhook({ secrets: SECRET, headers: otherId, body: BODY, now: AT })).reason, "no_matching_signature");
    const truncated = { ...vectorHeaders, "webhook-signature": "v1,g0hM9SsE" };
    assert.equal(failure(() => verifyWebhook({ secrets: SECRET, headers: truncated, body: BODY, now: AT })).reason, "no_matching_signature");
  });

  test("a timestamp beyond the tolerance, either way, is stale", () => {
    const late = new Date((TS + 301) * 1000);
    const early = new Date((TS - 301) * 1000);
    assert.equal(failure(() => verifyWebhook({ secrets: SECRET, headers: vectorHeaders, body: BODY, now: late })).reason, "stale_timestamp");
    assert.equal(failure(() => verifyWebhook({ secrets: SECRET, headers: vectorHeaders, body: BODY, now: early })).reason, "stale_timestamp");
    assert.ok(verifyWebhook({ secrets: SECRET, headers: vectorHeaders, body: BODY, now: new Date((TS + 300) * 1000) }));
    assert.ok(verifyWebhook({ secrets: SECRET, headers: vectorHeaders, body: BODY, now: late, toleranceSeconds: 600 }));
    // without `now`, the real clock: the 2021 vector is stale
    assert.equal(failure(() => verifyWebhook({ secrets: SECRET, headers: vectorHeaders, body: BODY })).reason, "stale_timestamp");
  });

  test("missing headers and a malformed timestamp fail", () => {
    assert.equal(failure(() => verifyWebhook({ secrets: SECRET, headers: {}, body: BODY, now: AT })).reason, "missing_headers");
    const bad = { ...vectorHeaders, "webhook-timestamp": "12abc" };
    assert.equal(failure(() => verifyWebhook({ secrets: SECRET, headers: bad, body: BODY, now: AT })).reason, "invalid_timestamp");
  });

  test("the reference library agrees on the vector", () => {
    assert.equal(new Webhook(SECRET).sign(ID, AT, BODY), SIGNATURE);
  });
});

describe("a signed delivery from redial serve", () => {
  let server: Server;
  let receiver: Receiver;

  before(async () => {
    server = await startServer({ config: `[queues.events]\nsigning_secrets = ["${SECRET}"]\n` });
    receiver = await startReceiver();
  });

  after(async () => {
    await receiver?.close();
    await server?.stop();
  });

  test("verifies with verifyWebhook and with standardwebhooks, and fails with a wrong secret", async () => {
    const redial = new Redial({ baseUrl: server.url });
    const job = await redial.enqueue({
      queue: "events",
      request: { method: "POST", url: `${receiver.origin}/webhooks`, body: { type: "invoice.paid", amount: 4200 } },
    });
    const delivery = await waitFor("the signed delivery", () => receiver.received[0]);
    const headers = delivery.headers as Record<string, string>;
    assert.equal(headers["webhook-id"], job.idempotency_key);
    assert.match(headers["webhook-signature"]!, /^v1,[A-Za-z0-9+/]+=*( v1,[A-Za-z0-9+/]+=*)*$/);

    const verified = verifyWebhook({ secrets: SECRET, headers, body: delivery.body });
    assert.equal(verified.id, job.idempotency_key);
    assert.ok(verifyWebhook({ secrets: [OTHER, SECRET], headers, body: delivery.body.toString("utf8") }));

    const payload = new Webhook(SECRET).verify(delivery.body.toString("utf8"), headers);
    assert.deepEqual(payload, { type: "invoice.paid", amount: 4200 });

    assert.equal(failure(() => verifyWebhook({ secrets: OTHER, headers, body: delivery.body })).reason, "no_matching_signature");
    assert.throws(() => new Webhook(OTHER).verify(delivery.body.toString("utf8"), headers));

    await waitFor("the job to complete", async () => (await redial.getJob(job.id)).state === "completed");
  });
});
