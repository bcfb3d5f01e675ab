// Owns following the event log live (GET /v1/events/stream): opening the stream, reading its events,
// and reopening it after a drop with Last-Event-ID set to the last event handed out, so that the caller
// misses nothing and gets nothing twice. Does not own parsing the stream's text (sse.ts) or an HTTP
// exchange (transport.ts).
import { RedialConnectionError, RedialError } from "./errors.js";
import { SseParser } from "./sse.js";
import { RETRY_STATUSES, backoff, type Transport } from "./transport.js";
import type { Event, EventQuery, EventStreamQuery } from "./types.js";

/** How long an open stream may stay silent before it is taken for dead and reopened: the server
 * writes a comment every 15 s on a quiet stream, so three missed ones mean the connection is gone. */
const IDLE_MS = 45_000;

export interface StreamOptions {
  /** Aborting it ends the iteration (without an error) and closes the connection. */
  signal?: AbortSignal;
}

/** The query string of GET /v1/events and /v1/events/stream: lists joined with commas. */
export function eventParams(query: EventQuery): Record<string, string | number | undefined> {
  return {
    after: query.after,
    queue: joined(query.queue),
    kind: joined(query.kind),
    limit: query.limit,
  };
}

function joined(value: string | readonly string[] | undefined): string | undefined {
  if (value === undefined) return undefined;
  return typeof value === "string" ? value : value.join(",");
}

/**
 * The events of the log as they come, for as long as the caller iterates. A stream that ends or
 * breaks is reopened after a short jittered pause (200 ms doubling while reopening fails, at most
 * 5 s), after the last event yielded; only the first opening gives up, after the client's maxRetries,
 * so that a wrong baseUrl fails rather than waits. An error answer other than 429 and 503 is thrown.
 */
export async function* streamEvents(
  transport: Transport,
  query: EventStreamQuery,
  options: StreamOptions,
): AsyncGenerator<Event, void, undefined> {
  const { signal } = options;
  const params = eventParams(query);
  /** The id of the last event yielded: a reopened stream starts after it. */
  let last: string | undefined;
  /** Openings in a row that yielded no event: the pause before the next one grows with it. */
  let fruitless = 0;
  let everOpen = false;
  /** The pause the server asked for with a retry field, in milliseconds. */
  let retryMs: number | undefined;

  while (!signal?.aborted) {
    let retryAfterMs: number | undefined;
    const connection = new AbortController();
    const stop = () => connection.abort();
    signal?.addEventListener("abort", stop, { once: true });
    try {
      const headers: Record<string, string> = { accept: "text/event-stream" };
      if (last !== undefined) headers["last-event-id"] = last;
      let response: Response | undefined;
      try {
        response = await transport.open({ path: "/v1/events/stream", query: params, headers }, connection.signal);
      } catch (err) {
        if (signal?.aborted) return;
        const retryable =
          err instanceof RedialConnectionError || (err instanceof RedialError && RETRY_STATUSES.has(err.status));
        if (!retryable || (!everOpen && fruitless >= transport.maxRetries)) throw err;
        if (err instanceof RedialError && err.retryAfter !== undefined) retryAfterMs = err.retryAfter * 1000;
      }
      // 204: the server asks not to reconnect (the standard's rule; redial does not send it).
      if (response?.status === 204) return;
      if (response && !/^text\/event-stream\b/i.test(response.headers.get("content-type") ?? "")) {
        throw new RedialError(
          response.status,
          "unexpected_response",
          `the event stream answered ${response.headers.get("content-type") ?? "no content type"}, not text/event-stream: check that baseUrl points at a redial server`,
        );
      }
      if (response) {
        everOpen = true;
        // Each connection is a text stream of its own; what carries over is `last`.
        const parser = new SseParser();
        try {
          for await (const text of textOf(response, connection)) {
            for (const message of parser.push(text)) {
              const event = parse(message.data);
              last = message.id || event.id;
              fruitless = 0;
              yield event;
            }
          }
        } catch (err) {
          if (signal?.aborted) return;
          if (err instanceof RedialError) throw err;
          // Otherwise the connection broke: reopened below, like one that ended.
        }
        retryMs = parser.retryMs ?? retryMs;
      }
    } finally {
      signal?.removeEventListener("abort", stop);
      connection.abort();
    }
    if (signal?.aborted) return;
    await pause(retryAfterMs ?? retryMs ?? backoff(fruitless), signal);
    fruitless++;
  }
}

/** The body as text, chunk by chunk; aborts the connection when it stays silent for IDLE_MS. */
async function* textOf(response: Response, connection: AbortController): AsyncGenerator<string, void, undefined> {
  if (!response.body) return;
  const reader = response.body.getReader();
  const decoder = new TextDecoder("utf-8");
  let idle = setTimeout(() => connection.abort(), IDLE_MS);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      clearTimeout(idle);
      idle = setTimeout(() => connection.abort(), IDLE_MS);
      const text = decoder.decode(value, { stream: true });
      if (text) yield text;
    }
  } finally {
    clearTimeout(idle);
    await reader.cancel().catch(() => undefined);
  }
}

function parse(data: string): Event {
  try {
    return JSON.parse(data) as Event;
  } catch (err) {
    throw new RedialError(
      200,
      "unexpected_response",
      `an event's data is not JSON (${(err as Error).message}): check that baseUrl points at a redial server`,
    );
  }
}

/** Waits `ms`, or less when `signal` aborts. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
