// Owns the callback tests: bodies signed by the reference library standardwebhooks and read with
// parseCallback (text and base64 responses, none at all, bad signatures, bodies that are not callback
// events), and a real callback from `redial serve` for a finished job.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Webhook } from "standardwebhooks";
import {
  CallbackParseError,
  Redial,
  WebhookVerificationError,
  callbackResponseBody,
  parseCallback,
  type CallbackEvent,
} from "../src/index.js";
import { startReceiver, startServer, waitFor, type Receiver, type Server } from "./helpers.js";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OTHER = "whsec_" + Buffer.from("another secret, for rotation!!").toString("base64");
const ID = "callback~completed~7.0~charge-1";
const AT = new Date("2026-12-03T15:00:00Z");

function event(overrides: Partial<CallbackEvent["data"]> = {}, type: CallbackEvent["type"] = "job.completed"): CallbackEvent {
  return {
    type,
    timestamp: "2026-12-03T14:59:58.123Z",
    data: {
      id: "charge-1",
      queue: "payments",
      endpoint: "https://api.example.com",
      group: null,
      tags: ["invoice"],
      idempotency_key: "charge-1",
      state: "completed",
      category: null,
      reason: "200 OK",
      attempts: 1,
      unknown_attempts: 0,
      deferrals: 0,
      stalls: 0,
      replays: 0,
      runs: 2,
      created_at: "2026-12-03T14:59:50Z",
      finished_at: "2026-12-03T14:59:58.123Z",
      response: {
        status: 200,
        headers: { "content-type": "application/json" },
        body: '{"charged":true}',
        body_encoding: "text",
        content_type: "application/json",
        truncated: false,
      },
      error: null,
      ...overrides,
    },
  };
}

/** A delivery as Redial would send it: the body and its headers, signed by the reference library. */
function signed(body: string, secret = SECRET): { headers: Record<string, string>; body: string } {
  const signature = new Webhook(secret).sign(ID, AT, body);
  return { body, headers: { "webhook-id": ID, "webhook-timestamp": String(AT.getTime() / 1000), "webhook-signature": signature } };
}

function parseError(fn: () => unknown): CallbackParseError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof CallbackParseError, `expected CallbackParseError, got ${String(err)}`);
    return err;
  }
  assert.fail("the body was read as a callback but should not have been");
}

describe("parseCallback", () => {
  test("a completed job's event reads typed, with the webhook-id to deduplicate on", () => {
    const sent = event();
    const delivery = signed(JSON.stringify(sent));
    const parsed = parseCallback({ secrets: SECRET, ...delivery, now: AT });
    assert.equal(parsed.id, ID);
    assert.deepEqual(parsed.timestamp, AT);
    assert.deepEqual(parsed.event, sent);
    assert.equal(callbackResponseBody(parsed.event.data.response!), '{"charged":true}');
    // the raw body as bytes, a fetch Headers, and a rotated secret read the same
    const again = parseCallback({ secrets: [OTHER, SECRET], headers: new Headers(delivery.headers), body: Buffer.from(delivery.body), now: AT });
    assert.deepEqual(again.event, sent);
  });

  test("a response body kept as base64 decodes to its bytes", () => {
    const bytes = new Uint8Array([0xff, 0x00, 0xfe, 0x80]);
    const sent = event(
      {
        state: "dead",
        category: "permanent",
        reason: "400 Bad Request",
        response: {
          status: 400,
          headers: {},
          body: Buffer.from(bytes).toString("base64"),
          body_encoding: "base64",
          content_type: "application/octet-stream",
          truncated: true,
        },
      },
      "job.dead",
    );
    const parsed = parseCallback({ secrets: SECRET, ...signed(JSON.stringify(sent)), now: AT });
    assert.equal(parsed.event.type, "job.dead");
    assert.equal(parsed.event.data.response!.truncated, true);
    const body = callbackResponseBody(parsed.event.data.response!);
    assert.ok(body instanceof Uint8Array && !Buffer.isBuffer(body), "a plain Uint8Array");
    assert.deepEqual(body, bytes);
  });

  test("a job that got no response carries the transport error, and a body kept as none is null", () => {
    const sent = event({ state: "dead", category: "transient_exhausted", response: null, error: "connect" }, "job.dead");
    const parsed = parseCallback({ secrets: SECRET, ...signed(JSON.stringify(sent)), now: AT });
    assert.equal(parsed.event.data.response, null);
    assert.equal(parsed.event.data.error, "connect");
    const noBody = { status: 204, headers: {}, body: null, body_encoding: "text" as const, content_type: null, truncated: false };
    assert.equal(callbackResponseBody(noBody), null);
  });

  test("a bad signature throws WebhookVerificationError before the body is read", () => {
    const delivery = signed(JSON.stringify(event()));
    const wrongSecret = () => parseCallback({ secrets: OTHER, ...delivery, now: AT });
    assert.throws(wrongSecret, (err: unknown) => err instanceof WebhookVerificationError && err.reason === "no_matching_signature");
    const changed = () => parseCallback({ secrets: SECRET, headers: delivery.headers, body: delivery.body.replace("charge-1", "charge-2"), now: AT });
    assert.throws(changed, (err: unknown) => err instanceof WebhookVerificationError && err.reason === "no_matching_signature");
    // not JSON, but unsigned: the signature's failure is the one reported
    const unsigned = () => parseCallback({ secrets: SECRET, headers: {}, body: "not json", now: AT });
    assert.throws(unsigned, (err: unknown) => err instanceof WebhookVerificationError && err.reason === "missing_headers");
  });

  test("a signed body that is not a callback event throws CallbackParseError", () => {
    const read = (body: string) => () => parseCallback({ secrets: SECRET, ...signed(body), now: AT });
    assert.match(parseError(read('{"order": 42}')).message, /not a callback event/);
    assert.match(parseError(read("not json")).message, /not JSON/);
    assert.match(parseError(read("[1, 2]")).message, /not a callback event/);
    assert.match(parseError(read(JSON.stringify({ ...event(), type: "invoice.paid" }))).message, /not a callback event/);
    assert.match(parseError(read(JSON.stringify({ type: "job.completed", timestamp: AT.toISOString() }))).message, /lacks/);
    assert.match(parseError(read(JSON.stringify(event({ state: "dead" })))).message, /data\.state is "dead"/);
    const noEncoding = event({ response: { status: 200 } as unknown as CallbackEvent["data"]["response"] });
    assert.match(parseError(read(JSON.stringify(noEncoding))).message, /body_encoding/);
  });
});

describe("a callback from redial serve", () => {
  let server: Server;
  let receiver: Receiver;

  before(async () => {
    server = await startServer({ config: `[queues.callbacks]\nsigning_secrets = ["${SECRET}"]\n` });
    receiver = await startReceiver();
  });

  after(async () => {
    await receiver?.close();
    await server?.stop();
  });

  test("reads with parseCallback: the job, its final response, and the delivery's id as webhook-id", async () => {
    const redial = new Redial({ baseUrl: server.url });
    const job = await redial.enqueue({
      tags: ["invoice"],
      request: { method: "POST", url: `${receiver.origin}/charge`, body: { amount: 4200 } },
      callback: { url: `${receiver.origin}/done`, on: ["completed"], headers: { authorization: "Bearer app-secret" } },
    });
    const delivery = await waitFor("the callback", () => receiver.received.find((r) => r.path === "/done"));
    const headers = delivery.headers as Record<string, string>;
    assert.equal(headers.authorization, "Bearer app-secret");

    const { id, event } = parseCallback({ secrets: SECRET, headers, body: delivery.body });
    assert.equal(id, (await redial.getJob(job.id)).callback_delivery);
    assert.equal(event.type, "job.completed");
    assert.equal(event.data.id, job.id);
    assert.equal(event.data.state, "completed");
    assert.deepEqual(event.data.tags, ["invoice"]);
    assert.equal(event.data.attempts, 0, "no failed attempt");
    assert.equal(event.data.runs, 1);
    assert.equal(event.data.response?.status, 200);
    assert.equal(event.data.response?.content_type, "text/plain");
    assert.equal(callbackResponseBody(event.data.response!), "ok");
    assert.deepEqual(new Webhook(SECRET).verify(delivery.body.toString("utf8"), headers), event);
  });
});
