// Owns the transport's retry and timeout tests. The server's answers here (429, 503, silence) cannot be
// provoked from a real redial on demand, so a node:http stub plays them; everything else runs against redial.
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import { Redial, RedialError, RedialTimeoutError, RedialConnectionError } from "../src/index.js";
import { parseRetryAfter } from "../src/transport.js";

type Answer = { status: number; headers?: Record<string, string>; body?: unknown } | "hang";
let answers: Answer[] = [];
let seen: { method: string; url: string; headers: http.IncomingHttpHeaders; body: string }[] = [];
let stub: http.Server;
let baseUrl: string;

before(async () => {
  stub = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      const answer = answers.shift() ?? { status: 200, body: {} };
      if (answer === "hang") return; // never answers: the client's timeout must fire
      res.writeHead(answer.status, { "content-type": "application/json", ...answer.headers });
      res.end(JSON.stringify(answer.body ?? {}));
    });
  });
  await new Promise<void>((resolve) => stub.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(stub.address() as AddressInfo).port}`;
});

after(async () => {
  stub.closeAllConnections();
  await new Promise((resolve) => stub.close(resolve));
});

function reset(next: Answer[]): void {
  answers = next;
  seen = [];
}

const busy = (status: number, retryAfter?: string): Answer => ({
  status,
  headers: retryAfter === undefined ? {} : { "retry-after": retryAfter },
  body: { error: { code: status === 429 ? "rate_limited" : "storage_unavailable", message: "try later" } },
});

test("429 and 503 are retried, honouring Retry-After, and the same id is sent every time", async () => {
  reset([busy(429, "0"), busy(503, "0"), { status: 201, body: { id: "x" } }]);
  const redial = new Redial({ baseUrl, maxRetries: 3 });
  await redial.enqueue({ request: { method: "GET", url: "http://example.com/" } });
  assert.equal(seen.length, 3);
  const ids = seen.map((s) => JSON.parse(s.body).id as string);
  assert.ok(ids[0]);
  assert.deepEqual(ids, [ids[0], ids[0], ids[0]]);
  assert.equal(seen[0]!.headers["content-type"], "application/json");
});

test("retries stop at maxRetries and the last error is thrown with its Retry-After", async () => {
  reset([busy(503, "0"), busy(503, "0"), busy(503, "0")]);
  const err = await new Redial({ baseUrl, maxRetries: 2 }).stats().then(() => undefined, (e: unknown) => e);
  assert.ok(err instanceof RedialError);
  assert.equal(err.status, 503);
  assert.equal(err.code, "storage_unavailable");
  assert.equal(err.retryAfter, 0);
  assert.equal(seen.length, 3);
});

test("503 without Retry-After is retried after a small backoff", async () => {
  reset([busy(503), { status: 200, body: { ok: true } }]);
  assert.deepEqual(await new Redial({ baseUrl, maxRetries: 1 }).stats(), { ok: true });
  assert.equal(seen.length, 2);
});

test("other 4xx answers are never retried", async () => {
  for (const status of [400, 401, 404, 409, 422]) {
    reset([{ status, body: { error: { code: `code_${status}`, message: "no" } } }]);
    const err = await new Redial({ baseUrl, maxRetries: 5 }).stats().then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof RedialError);
    assert.equal(err.status, status);
    assert.equal(err.code, `code_${status}`);
    assert.equal(seen.length, 1, `a ${status} is sent once`);
  }
});

test("a server that does not answer in time is a RedialTimeoutError, a kind of RedialConnectionError", async () => {
  reset(["hang", "hang"]);
  const err = await new Redial({ baseUrl, timeoutMs: 200, maxRetries: 1 }).stats().then(() => undefined, (e: unknown) => e);
  assert.ok(err instanceof RedialTimeoutError, `expected RedialTimeoutError, got ${String(err)}`);
  assert.ok(err instanceof RedialConnectionError);
  assert.equal(seen.length, 2);
});

test("the bearer token is sent, and paths are percent-encoded", async () => {
  reset([{ status: 200, body: {} }]);
  await new Redial({ baseUrl, token: "t0k" }).endpoint("https://api.example.com");
  assert.equal(seen[0]!.headers.authorization, "Bearer t0k");
  assert.equal(seen[0]!.url, "/v1/endpoints/https%3A%2F%2Fapi.example.com");
});

test("the event stream retries a 503 as it says, and refuses an answer that is not an event stream", async () => {
  reset([busy(503, "0"), { status: 200, body: { events: [] } }]);
  const stream = new Redial({ baseUrl, maxRetries: 1 }).streamEvents({ after: "0-0" });
  const err = await stream.next().then(() => undefined, (e: unknown) => e);
  assert.ok(err instanceof RedialError && err.code === "unexpected_response", String(err));
  assert.match(err.message, /not text\/event-stream/);
  assert.equal(seen.length, 2);
  assert.ok(seen.every((s) => s.url === "/v1/events/stream?after=0-0" && s.headers.accept === "text/event-stream"));
});

test("parseRetryAfter reads seconds and HTTP dates", () => {
  assert.equal(parseRetryAfter("7"), 7);
  assert.equal(parseRetryAfter(null), undefined);
  assert.equal(parseRetryAfter("soon"), undefined);
  assert.equal(parseRetryAfter(new Date(Date.now() - 5000).toUTCString()), 0);
});
