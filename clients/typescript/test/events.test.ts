// Owns the event log's tests against a real `redial serve`: pages filtered by kind and queue and read on
// by cursor; the live stream stopped and resumed after the last id read; a connection cut by a TCP
// proxy and reopened by the stream itself with Last-Event-ID; ending it; and the errors it throws.
// Every wait is on a condition (an event read, a job finished), bounded generously.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Redial, RedialConnectionError, RedialError, type Event } from "../src/index.js";
import { startProxy, startReceiver, startServer, take, waitFor, type Proxy, type Receiver, type Server } from "./helpers.js";

delete process.env.REDIAL_TOKEN;
delete process.env.REDIAL_SERVER;

const OK = ["ev-ok-1", "ev-ok-2", "ev-ok-3"];
const REFUSED = ["ev-refused-1", "ev-refused-2"];

const ids = (events: Event[]) => events.map((e) => e.id);
const sorted = (values: (string | null)[]) => [...values].sort();

async function errorOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(() => undefined, (e: unknown) => e);
}

describe("the event log against a real server", () => {
  let server: Server;
  let receiver: Receiver;
  let redial: Redial;
  const proxies: Proxy[] = [];

  /** Enqueues a job that completes (`ok`) or dies at once as permanent (a 400), and waits for its end. */
  async function finish(id: string, ok: boolean): Promise<void> {
    await redial.enqueue({ id, request: { method: "POST", url: `${receiver.origin}/${ok ? "ok" : "refuse"}` } });
    const job = await redial.waitForJob(id, { timeoutMs: 120_000 });
    assert.equal(job.state, ok ? "completed" : "dead", `job ${id}`);
  }

  /** The whole log as GET /v1/events gives it now. */
  async function log(): Promise<Event[]> {
    const page = await redial.events({ limit: 1000 });
    assert.equal(page.more, false);
    return page.events;
  }

  before(async () => {
    server = await startServer();
    receiver = await startReceiver((path) => (path === "/refuse" ? 400 : 200));
    redial = new Redial({ baseUrl: server.url });
    for (const id of OK) await finish(id, true);
    for (const id of REFUSED) await finish(id, false);
  });

  after(async () => {
    await Promise.all(proxies.map((p) => p.close()));
    await receiver?.close();
    await server?.stop();
  });

  test("events reads the log from the oldest event, by kind and queue, and page after page", async () => {
    const page = await redial.events();
    assert.equal(page.from, null);
    assert.equal(page.more, false);
    const mine = page.events.filter((e) => e.job_id?.startsWith("ev-"));
    assert.deepEqual(mine, page.events.slice(0, mine.length), "the jobs of before() come first");
    assert.deepEqual(sorted(mine.filter((e) => e.type === "job.completed").map((e) => e.job_id)), OK);
    const dead = mine.filter((e) => e.type === "job.dead");
    assert.deepEqual(sorted(dead.map((e) => e.job_id)), REFUSED);
    for (const e of dead) assert.equal(e.category, "permanent");
    for (const e of mine) {
      assert.equal(e.queue, "default");
      assert.equal(e.endpoint, receiver.origin);
      assert.ok(!Number.isNaN(Date.parse(e.at)), e.at);
    }
    assert.equal(mine.length, OK.length + REFUSED.length);
    assert.equal(new Set(ids(page.events)).size, page.events.length, "ids are unique");
    assert.equal(page.next_cursor, page.events.at(-1)!.id);

    const onlyDead = await redial.events({ kind: "job.dead" });
    assert.ok(onlyDead.events.every((e) => e.type === "job.dead"));
    assert.deepEqual(sorted(onlyDead.events.filter((e) => e.job_id?.startsWith("ev-")).map((e) => e.job_id)), REFUSED);
    const both = await redial.events({ kind: ["job.completed", "job.dead"], queue: ["default"] });
    assert.deepEqual(ids(both.events), ids(page.events.filter((e) => e.type === "job.completed" || e.type === "job.dead")));
    assert.deepEqual((await redial.events({ queue: "callbacks" })).events, []);

    // Two at a time, each page read on from the one before.
    const paged: Event[] = [];
    let after: string | undefined;
    for (;;) {
      const next = await redial.events({ kind: "job.completed", limit: 2, after });
      assert.equal(next.from, after ?? null);
      assert.ok(next.events.length <= 2);
      paged.push(...next.events);
      after = next.next_cursor;
      if (!next.more) break;
    }
    assert.deepEqual(ids(paged), ids(page.events.filter((e) => e.type === "job.completed")));
    assert.deepEqual((await redial.events({ after: page.next_cursor })).events, []);

    const err = await errorOf(redial.events({ kind: "job.finished" }));
    assert.ok(err instanceof RedialError && err.status === 400 && err.code === "invalid_event_kind", String(err));
  });

  test("streamEvents from 0-0, stopped and resumed after the last id read, gets the log once and in order, then what follows", async () => {
    const all = await log();
    assert.ok(all.length >= 5, `the log holds the jobs of before(): ${all.length}`);

    const first = redial.streamEvents({ after: "0-0" });
    const head = await take(first, 2, "the first two events");
    await first.return();

    const second = redial.streamEvents({ after: head.at(-1)!.id });
    const rest = await take(second, all.length - head.length, "the rest of the log");
    assert.deepEqual([...head, ...rest], all, "nothing missed, nothing twice, in the log's order, as the page has them");

    await finish("ev-live-1", true);
    const [live] = await take(second, 1, "the event of a job finished while the stream is open");
    assert.equal(live!.type, "job.completed");
    assert.equal(live!.job_id, "ev-live-1");
    await second.return();
    assert.deepEqual(await log(), [...all, live], "the page lists what the stream gave");
  });

  test("a connection that breaks is reopened by the stream with Last-Event-ID: nothing missed, nothing twice", async () => {
    const proxy = await startProxy(server.url);
    proxies.push(proxy);
    const client = new Redial({ baseUrl: proxy.url });
    const all = await log();

    const stream = client.streamEvents({ after: "0-0" });
    const earlier = await take(stream, all.length, "the log so far");
    assert.deepEqual(earlier, all);
    assert.equal(proxy.heads.length, 1);

    proxy.cut();
    await finish("ev-cut-ok", true);
    await finish("ev-cut-refused", false);
    const afterCut = await take(stream, 2, "the events of the jobs finished after the cut");
    assert.deepEqual(
      afterCut.map((e) => [e.job_id, e.type]),
      [
        ["ev-cut-ok", "job.completed"],
        ["ev-cut-refused", "job.dead"],
      ],
    );
    assert.ok(proxy.heads.length >= 2, "the stream was opened again");
    assert.equal(lastEventId(proxy.heads[1]!), earlier.at(-1)!.id, "it resumed after the last event it had yielded");
    assert.equal(lastEventId(proxy.heads[0]!), undefined);
    assert.deepEqual(await log(), [...earlier, ...afterCut], "the union is the log: no gap, no repeat");

    await stream.return();
    await waitFor("the stream's connection to close", () => proxy.connections() === 0);
  });

  test("aborting the signal ends the iteration without an error and closes the connection", async () => {
    const proxy = await startProxy(server.url);
    proxies.push(proxy);
    const client = new Redial({ baseUrl: proxy.url });
    const controller = new AbortController();
    const stream = client.streamEvents({ kind: ["endpoint.paused"] }, { signal: controller.signal });
    const next = stream.next();
    await waitFor("the stream to be open", () => proxy.connections() === 1);
    controller.abort();
    assert.deepEqual(await next, { done: true, value: undefined });
    await waitFor("the stream's connection to close", () => proxy.connections() === 0);
    assert.equal(proxy.heads.length, 1, "an aborted stream is not reopened");
  });

  test("an error answer is thrown at once, and a server that is not there after the retries", async () => {
    const proxy = await startProxy(server.url);
    proxies.push(proxy);
    const bad = new Redial({ baseUrl: proxy.url, maxRetries: 3 }).streamEvents({ kind: "job.finished" });
    const err = await errorOf(bad.next());
    assert.ok(err instanceof RedialError && err.status === 400 && err.code === "invalid_event_kind", String(err));
    assert.equal(proxy.heads.length, 1, "a 400 is not retried");

    const gone = await startServer();
    const url = gone.url;
    await gone.stop();
    const nowhere = new Redial({ baseUrl: url, maxRetries: 1 }).streamEvents();
    const refused = await errorOf(nowhere.next());
    assert.ok(refused instanceof RedialConnectionError, `expected RedialConnectionError, got ${String(refused)}`);
  });
});

describe("the event stream against a server with a token", () => {
  let server: Server;
  let receiver: Receiver;

  before(async () => {
    server = await startServer({ token: "secret" });
    receiver = await startReceiver();
  });

  after(async () => {
    await receiver?.close();
    await server?.stop();
  });

  test("without the token it is a 401 RedialError; with it, the stream sends the Authorization header", async () => {
    const anonymous = new Redial({ baseUrl: server.url }).streamEvents({ after: "0-0" });
    const err = await errorOf(anonymous.next());
    assert.ok(err instanceof RedialError && err.status === 401, String(err));

    const redial = new Redial({ baseUrl: server.url, token: "secret" });
    const stream = redial.streamEvents({ after: "0-0" });
    const job = await redial.enqueue({ request: { method: "POST", url: `${receiver.origin}/ok` } });
    const [event] = await take(stream, 1, "the job's event");
    await stream.return();
    assert.equal(event!.job_id, job.id);
    assert.equal(event!.type, "job.completed");
  });
});

/** The Last-Event-ID a request head carries, if any. */
function lastEventId(head: string): string | undefined {
  return /^last-event-id: *(.*?)\r$/im.exec(head)?.[1];
}
