// Owns the client's tests against a real `redial serve`: enqueue, dedup, conflicts, batches,
// attempts, paging, ordering keys, dead letters, endpoint and queue pauses, tokens, and connection failures.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { Redial, RedialConnectionError, RedialError, type Job } from "../src/index.js";
import { startReceiver, startServer, waitFor, type Receiver, type Server } from "./helpers.js";

delete process.env.REDIAL_TOKEN;
delete process.env.REDIAL_SERVER;

describe("Redial against a real server", () => {
  let server: Server;
  let redial: Redial;
  const receivers: Receiver[] = [];

  async function receiver(statusFor?: (path: string) => number): Promise<Receiver> {
    const r = await startReceiver(statusFor);
    receivers.push(r);
    return r;
  }

  async function waitForState(id: string, state: Job["state"]): Promise<Job> {
    return waitFor(`job ${id} to be ${state}`, async () => {
      const job = await redial.getJob(id);
      return job.state === state ? job : undefined;
    });
  }

  before(async () => {
    server = await startServer();
    redial = new Redial({ baseUrl: server.url });
  });

  after(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    await server?.stop();
  });

  test("enqueue stores a job, and the same id and request again is deduplicated", async () => {
    const r = await receiver();
    const input = { id: "dedup-1", request: { method: "POST", url: `${r.origin}/hook`, body: { n: 1 } } };
    const first = await redial.enqueue(input);
    assert.equal(first.id, "dedup-1");
    assert.equal(first.deduplicated, false);
    const second = await redial.enqueue(input);
    assert.equal(second.id, "dedup-1");
    assert.equal(second.deduplicated, true);
  });

  test("a job keeps its group, and an empty group is a 422 invalid_group", async () => {
    const r = await receiver();
    const job = await redial.enqueue({ group: "tenant-42", request: { method: "POST", url: `${r.origin}/g` } });
    assert.equal(job.group, "tenant-42");
    assert.equal((await redial.getJob(job.id)).group, "tenant-42");
    const err = await redial
      .enqueue({ group: "", request: { method: "POST", url: `${r.origin}/g` } })
      .then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof RedialError, `expected RedialError, got ${String(err)}`);
    assert.equal(err.status, 422);
    assert.equal(err.code, "invalid_group");
  });

  test("orderingKeys lists each key with its first job ahead, and a bad key is a 422 invalid_ordering_key", async () => {
    const r = await receiver();
    // Far in the future: the jobs stay waiting, so each key keeps its line while it is read.
    const later = "2999-01-01T00:00:00Z";
    const request = { method: "POST", url: `${r.origin}/o` };
    const [a, b] = [`ts-${randomUUID()}/a`, `ts-${randomUUID()}/b`];
    const first = await redial.enqueue({ ordering_key: a, run_at: later, request });
    assert.equal(first.ordering_key, a);
    assert.equal((await redial.getJob(first.id)).ordering_key, a);
    await redial.enqueueBatch([1, 2].map(() => ({ ordering_key: a, run_at: later, request })));
    const only = await redial.enqueue({ ordering_key: b, run_at: later, request });
    assert.equal((await redial.enqueue({ run_at: later, request })).ordering_key, null);

    const listed = await redial.orderingKeys("default", { limit: 500 });
    assert.equal(listed.queue, "default");
    assert.equal(listed.ordering_on_dead, "block");
    assert.equal(listed.next_cursor, null);
    const lines = new Map(listed.keys.map((line) => [line.key, line]));
    assert.deepEqual(
      [lines.get(a)?.head.id, lines.get(a)?.behind, lines.get(a)?.blocked],
      [first.id, 2, false],
    );
    assert.ok(lines.get(a)?.why);
    assert.deepEqual([lines.get(b)?.head.id, lines.get(b)?.behind], [only.id, 0]);
    const blocked = await redial.orderingKeys("default", { blocked: true });
    assert.ok(!blocked.keys.some((line) => line.key === a || line.key === b));
    const queue = (await redial.queues()).queues.find((q) => q.name === "default");
    assert.equal(queue?.ordering_on_dead, "block");

    // A key a page: each page's next_cursor leads to the next key, and the last has none.
    let page = await redial.orderingKeys("default", { limit: 1 });
    assert.ok(page.next_cursor, "a first page of one key out of several has a next cursor");
    const paged = page.keys.map((line) => line.key);
    while (page.next_cursor) {
      page = await redial.orderingKeys("default", { cursor: page.next_cursor, limit: 1 });
      paged.push(...page.keys.map((line) => line.key));
    }
    // In the listing's own order (the lines' numbers), every key once.
    assert.deepEqual(paged, [...lines.keys()]);

    const unknown = await redial.orderingKeys("no-such-queue").then(() => undefined, (e: unknown) => e);
    assert.ok(unknown instanceof RedialError, `expected RedialError, got ${String(unknown)}`);
    assert.equal(unknown.status, 404);
    assert.equal(unknown.code, "not_found");
    const invalid = await redial.enqueue({ ordering_key: "a\nb", request }).then(() => undefined, (e: unknown) => e);
    assert.ok(invalid instanceof RedialError, `expected RedialError, got ${String(invalid)}`);
    assert.equal(invalid.status, 422);
    assert.equal(invalid.code, "invalid_ordering_key");
  });

  test("enqueue without an id generates a UUID on the client", async () => {
    const r = await receiver();
    const job = await redial.enqueue({ request: { method: "GET", url: `${r.origin}/ping` } });
    assert.match(job.id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  test("the same id with a different request is a 409 RedialError with its code", async () => {
    const r = await receiver();
    await redial.enqueue({ id: "conflict-1", request: { method: "POST", url: `${r.origin}/a`, body: "one" } });
    const err = await redial
      .enqueue({ id: "conflict-1", request: { method: "POST", url: `${r.origin}/a`, body: "two" } })
      .then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof RedialError, `expected RedialError, got ${String(err)}`);
    assert.equal(err.status, 409);
    assert.equal(err.code, "conflict");
    assert.ok(err.message.length > 0);
  });

  test("enqueueBatch stores every job, and resending it deduplicates every one", async () => {
    const r = await receiver();
    const jobs = [1, 2, 3].map((n) => ({ id: `batch-${n}`, request: { method: "POST", url: `${r.origin}/b`, body: { n } } }));
    const first = await redial.enqueueBatch(jobs);
    assert.equal(first.inserted, 3);
    assert.equal(first.deduplicated, 0);
    assert.deepEqual(first.jobs.map((j) => j.id), ["batch-1", "batch-2", "batch-3"]);
    const again = await redial.enqueueBatch(jobs);
    assert.equal(again.inserted, 0);
    assert.equal(again.deduplicated, 3);
  });

  test("enqueueBatch gives ids to jobs without one", async () => {
    const r = await receiver();
    const result = await redial.enqueueBatch([
      { request: { method: "GET", url: `${r.origin}/x` } },
      { request: { method: "GET", url: `${r.origin}/y` } },
    ]);
    assert.equal(result.inserted, 2);
    assert.notEqual(result.jobs[0]!.id, result.jobs[1]!.id);
  });

  test("getJob shows the attempt log once the job ran against a receiver", async () => {
    const r = await receiver();
    const job = await redial.enqueue({
      request: { method: "POST", url: `${r.origin}/run`, headers: { "x-test": "yes" }, body: { hello: "world" } },
    });
    const done = await waitForState(job.id, "completed");
    assert.equal(done.runs, 1);
    assert.ok(done.attempt_log, "getJob returns attempt_log");
    assert.equal(done.attempt_log!.length, 1);
    assert.equal(r.received.length, 1);
    const got = r.received[0]!;
    assert.equal(got.method, "POST");
    assert.equal(got.path, "/run");
    assert.equal(got.headers["x-test"], "yes");
    assert.deepEqual(JSON.parse(got.body.toString("utf8")), { hello: "world" });
  });

  test("getJob of an unknown id is a 404 RedialError", async () => {
    const err = await redial.getJob("no-such-job").then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof RedialError);
    assert.equal(err.status, 404);
  });

  test("listJobs iterates every matching job across several pages", async () => {
    const r = await receiver();
    const ids = Array.from({ length: 7 }, (_, i) => `page-${i}`);
    const created = await redial.enqueueBatch(ids.map((id) => ({ id, request: { method: "GET", url: `${r.origin}/p` } })));
    const endpoint = created.jobs[0]!.endpoint;
    const firstPage = await redial.listJobsPage({ endpoint, limit: 3 });
    assert.equal(firstPage.jobs.length, 3);
    assert.ok(firstPage.next_cursor, "a first page of 3 out of 7 has a next cursor");
    const seen: string[] = [];
    for await (const job of redial.listJobs({ endpoint, limit: 3 })) seen.push(job.id);
    assert.deepEqual([...seen].sort(), [...ids].sort());
  });

  test("listJobs finds jobs by idempotency key and by tag, exactly", async () => {
    const r = await receiver();
    const tag = `order:${randomUUID()}`;
    const key = `charge-${randomUUID()}`;
    const first = await redial.enqueue({ idempotency_key: key, tags: [tag], request: { method: "GET", url: `${r.origin}/k` } });
    const second = await redial.enqueue({ tags: [tag], request: { method: "GET", url: `${r.origin}/k` } });
    assert.deepEqual((await redial.listJobsPage({ idempotency_key: key })).jobs.map((j) => j.id), [first.id]);
    const tagged = (await redial.listJobsPage({ tag })).jobs.map((j) => j.id);
    assert.deepEqual([...tagged].sort(), [first.id, second.id].sort());
    const derived = second.idempotency_key!;
    assert.deepEqual((await redial.listJobsPage({ idempotency_key: derived })).jobs.map((j) => j.id), [second.id]);
  });

  test("replayDeadLetters by filter replays the dead job, which then completes", async () => {
    let status = 400;
    const r = await receiver(() => status);
    const job = await redial.enqueue({ request: { method: "POST", url: `${r.origin}/fail`, body: "x" } });
    const dead = await waitForState(job.id, "dead");
    assert.equal(dead.category, "permanent");
    const groups = await redial.deadLetterGroups();
    assert.ok(groups, "dead letter groups answer");
    // Its reason's pattern, as a filter for the listing, the groups and the replay.
    const patterns = await redial.deadLetterPatterns({ endpoint: dead.endpoint });
    assert.equal(patterns.total, 1);
    const pattern = patterns.patterns[0]!.pattern;
    assert.ok(pattern.startsWith("400 bad request"), pattern);
    const page = await redial.listJobsPage({ endpoint: dead.endpoint, pattern });
    assert.deepEqual(page.jobs.map((j) => j.id), [job.id]);
    assert.equal((await redial.deadLetterGroups({ endpoint: dead.endpoint, pattern })).total, 1);
    assert.equal((await redial.deadLetterGroups({ endpoint: dead.endpoint, pattern: "no such pattern" })).total, 0);

    status = 200;
    const replayed = await redial.replayDeadLetters({ endpoint: dead.endpoint, pattern });
    assert.equal(replayed.affected, 1);
    const done = await waitForState(job.id, "completed");
    assert.equal(done.replays, 1);
    const none = await redial.replayDeadLetters({ endpoint: dead.endpoint });
    assert.equal(none.affected, 0);
  });

  test("replay with changes: previewed, then sent to the new URL with the same key", async () => {
    const r = await receiver((path) => (path.startsWith("/v2/") ? 200 : 404));
    const job = await redial.enqueue({ request: { method: "POST", url: `${r.origin}/v1/hook`, body: "x" } });
    await waitForState(job.id, "dead");
    const changes = { patch: { url_prefix: { from: `${r.origin}/v1/`, to: `${r.origin}/v2/` }, headers: { set: { "X-Api-Version": "2" } } } };
    const preview = await redial.previewDeadLetters({ endpoint: job.endpoint, ...changes });
    assert.equal(preview.affected, 1);
    assert.ok(preview.preview[0]!.changed.includes("header x-api-version set"), preview.preview[0]!.changed.join("; "));
    const one = await redial.previewReplay(job.id, { patch: { url: `${r.origin}/v2/hook` }, key: "renew" });
    assert.ok(one.preview[0]!.changed.includes("idempotency key renewed"));
    assert.equal((await redial.getJob(job.id)).state, "dead", "a preview changes nothing");
    const replayed = await redial.replay(job.id, changes);
    assert.equal(replayed.request.url, `${r.origin}/v2/hook`);
    const done = await waitForState(job.id, "completed");
    assert.equal(done.idempotency_key, job.idempotency_key);
    const shown = await redial.getJob(job.id);
    assert.equal(shown.original_request?.url, `${r.origin}/v1/hook`);
    assert.equal(shown.changes?.length, 1);
  });

  test("dismissDeadLetters and cancel act on jobs", async () => {
    const r = await receiver(() => 422);
    const job = await redial.enqueue({ request: { method: "POST", url: `${r.origin}/fail`, body: "x" } });
    const dead = await waitForState(job.id, "dead");
    const dismissed = await redial.dismissDeadLetters({ endpoint: dead.endpoint });
    assert.equal(dismissed.affected, 1);

    const later = await redial.enqueue({
      request: { method: "GET", url: `${r.origin}/later` },
      run_at: new Date(Date.now() + 3_600_000).toISOString(),
    });
    assert.equal(later.state, "scheduled");
    const cancelled = await redial.cancel(later.id);
    assert.equal(cancelled.state, "cancelled");
  });

  test("pauseEndpoint holds deliveries until resumeEndpoint", async () => {
    const r = await receiver();
    const name = r.origin;
    // No job named it yet: refused unless the pause asks to create it.
    const err = await redial.pauseEndpoint(name, { reason: "early" }).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof RedialError, `expected RedialError, got ${String(err)}`);
    assert.equal(err.status, 404);
    assert.equal(err.code, "not_found");
    const paused = await redial.pauseEndpoint(name, { reason: "provider maintenance", for: "30m" }, { create: true });
    assert.equal(paused.name, name);
    assert.ok(paused.paused_by_hand, "the endpoint is paused by hand");
    assert.equal(paused.paused_by_hand.reason, "provider maintenance");
    assert.ok(paused.paused_by_hand.until, "a pause for 30m has an end");
    assert.equal((await redial.endpoint(name)).name, name);
    assert.ok((await redial.endpoints()).endpoints.some((e) => e.name === name));

    const job = await redial.enqueue({ request: { method: "GET", url: `${r.origin}/held` } });
    assert.notEqual((await redial.getJob(job.id)).state, "completed");
    assert.equal(r.received.length, 0, "nothing is delivered while the endpoint is paused");
    const resumed = await redial.resumeEndpoint(name);
    assert.equal(resumed.paused_by_hand, null);
    await waitForState(job.id, "completed");
    assert.equal(r.received.length, 1);

    const reset = await redial.resetBreaker(name);
    assert.equal(reset.breaker, "closed");
  });

  test("pauseQueue and resumeQueue toggle the default queue; stats and queues answer", async () => {
    const paused = await redial.pauseQueue("default", { reason: "deploy" });
    assert.equal(paused.name, "default");
    const resumed = await redial.resumeQueue("default");
    assert.equal(resumed.name, "default");
    assert.ok((await redial.queues()).queues.some((q) => q.name === "default"));
    assert.ok(await redial.stats());
  });

  test("schedules are created, listed, replaced, paused, resumed and deleted", async () => {
    const created = await redial.createSchedule({
      id: "ts-report",
      cron: "0 9 * * 1-5",
      timezone: "Europe/Berlin",
      job: { request: { method: "POST", url: "https://api.example.com/report" } },
    });
    assert.equal(created.id, "ts-report");
    assert.equal(created.source, "api");
    assert.ok(created.next_at);
    const dup = await redial
      .createSchedule({ id: "ts-report", every: "1h", job: { request: { method: "GET", url: "https://api.example.com/" } } })
      .then(() => undefined, (e: unknown) => e);
    assert.ok(dup instanceof RedialError && dup.status === 409 && dup.code === "schedule_exists", String(dup));
    const replaced = await redial.putSchedule("ts-report", {
      every: "1h",
      missed: "skip",
      job: { request: { method: "GET", url: "https://api.example.com/ping" } },
    });
    assert.deepEqual(replaced.missed, { policy: "skip" });
    assert.ok((await redial.listSchedules()).schedules.some((s) => s.id === "ts-report"));
    assert.equal((await redial.pauseSchedule("ts-report")).paused, true);
    assert.equal((await redial.resumeSchedule("ts-report")).paused, false);
    await redial.deleteSchedule("ts-report");
    const gone = await redial.schedule("ts-report").then(() => undefined, (e: unknown) => e);
    assert.ok(gone instanceof RedialError && gone.status === 404, String(gone));
  });

  test("waitForJob answers once the job finishes, and with the job as it stands when time runs out", async () => {
    const r = await receiver((path) => (path === "/refuse" ? 400 : 200));
    await redial.pauseQueue("default");
    const held = await redial.enqueue({ request: { method: "POST", url: `${r.origin}/ok` } });
    const notYet = await redial.waitForJob(held.id, { timeoutMs: 200 });
    assert.equal(notYet.state, "ready");
    const waiting = redial.waitForJob(held.id, { timeoutMs: 60_000 });
    await redial.resumeQueue("default");
    const done = await waiting;
    assert.equal(done.state, "completed");
    assert.equal(done.attempt_log?.length, 1);
    const refused = await redial.enqueue({ request: { method: "POST", url: `${r.origin}/refuse` } });
    const dead = await redial.waitForJob(refused.id, { timeoutMs: 120_000 });
    assert.equal(dead.state, "dead");
    const err = await redial.getJobAfter("no-such-job", 1_000).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof RedialError && err.code === "not_found", String(err));
  });

  test("a server that is not there is a RedialConnectionError after the retries", async () => {
    const gone = await startServer();
    const url = gone.url;
    await gone.stop();
    const client = new Redial({ baseUrl: url, maxRetries: 1 });
    const err = await client.stats().then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof RedialConnectionError, `expected RedialConnectionError, got ${String(err)}`);
    assert.ok(!(err instanceof RedialError));
  });
});

describe("Redial against a server with a token", () => {
  let server: Server;

  before(async () => {
    server = await startServer({ token: "secret" });
  });

  after(async () => {
    await server?.stop();
  });

  test("without the token a call is a 401 RedialError; with it, it works", async () => {
    const anonymous = new Redial({ baseUrl: server.url });
    const err = await anonymous.stats().then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof RedialError, `expected RedialError, got ${String(err)}`);
    assert.equal(err.status, 401);
    assert.ok(err.code.length > 0);

    const wrong = new Redial({ baseUrl: server.url, token: "wrong" });
    const wrongErr = await wrong.stats().then(() => undefined, (e: unknown) => e);
    assert.ok(wrongErr instanceof RedialError);
    assert.equal(wrongErr.status, 401);

    const authed = new Redial({ baseUrl: server.url, token: "secret" });
    assert.ok(await authed.stats());
  });

  test("the token defaults to REDIAL_TOKEN and the URL to REDIAL_SERVER", async () => {
    process.env.REDIAL_TOKEN = "secret";
    process.env.REDIAL_SERVER = server.url;
    try {
      assert.ok(await new Redial().stats());
    } finally {
      delete process.env.REDIAL_TOKEN;
      delete process.env.REDIAL_SERVER;
    }
  });
});
