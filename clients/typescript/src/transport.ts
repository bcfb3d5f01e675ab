// Owns one HTTP exchange with the server: auth, JSON bodies, the per-request timeout,
// retries on connection errors, 429 and 503 (honouring Retry-After), and error mapping; and opening a
// long-lived answer (the event stream) with the same auth and errors, its retries left to the caller.
import { RedialConnectionError, RedialError, RedialTimeoutError } from "./errors.js";

export interface TransportOptions {
  baseUrl: string;
  token?: string;
  timeoutMs: number;
  maxRetries: number;
}

export interface RequestSpec {
  method: "GET" | "POST" | "PUT" | "DELETE";
  path: string;
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  /** This request's own timeout (a request that waits on the server), instead of the client's. */
  timeoutMs?: number;
}

export const RETRY_STATUSES = new Set([429, 503]);
const BASE_BACKOFF_MS = 200;
const MAX_BACKOFF_MS = 5_000;

export class Transport {
  private readonly baseUrl: string;

  constructor(private readonly options: TransportOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
  }

  /** Sends the request, retrying what is safe to retry; returns the parsed JSON body of a 2xx answer. */
  async request<T>(spec: RequestSpec): Promise<T> {
    const url = this.url(spec);
    const headers: Record<string, string> = { accept: "application/json" };
    if (this.options.token) headers.authorization = `Bearer ${this.options.token}`;
    let body: string | undefined;
    if (spec.body !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(spec.body);
    }

    for (let attempt = 0; ; attempt++) {
      const retriesLeft = attempt < this.options.maxRetries;
      let response: Response;
      try {
        response = await fetch(url, {
          method: spec.method,
          headers,
          body,
          signal: AbortSignal.timeout(spec.timeoutMs ?? this.options.timeoutMs),
        });
      } catch (err) {
        if (retriesLeft) {
          await sleep(backoff(attempt));
          continue;
        }
        throw connectionError(err, spec, url, spec.timeoutMs ?? this.options.timeoutMs);
      }

      if (response.ok) {
        const text = await response.text();
        return (text ? JSON.parse(text) : undefined) as T;
      }

      const retryAfter = parseRetryAfter(response.headers.get("retry-after"));
      if (RETRY_STATUSES.has(response.status) && retriesLeft) {
        await response.body?.cancel();
        await sleep(retryAfter !== undefined ? retryAfter * 1000 : backoff(attempt));
        continue;
      }
      throw await apiError(response, retryAfter);
    }
  }

  /** The retries a request gets (connection errors, timeouts, 429, 503). */
  get maxRetries(): number {
    return this.options.maxRetries;
  }

  /**
   * Sends one GET whose answer's body is read as it comes (a stream), without retrying: resolves with a
   * 2xx answer once its head arrived within the client's timeout, and the body then lasts until `signal`
   * aborts. Another status is thrown as RedialError, no answer as RedialConnectionError or
   * RedialTimeoutError.
   */
  async open(spec: { path: string; query?: RequestSpec["query"]; headers: Record<string, string> }, signal: AbortSignal): Promise<Response> {
    const get: RequestSpec = { method: "GET", path: spec.path, query: spec.query };
    const url = this.url(get);
    const headers: Record<string, string> = { ...spec.headers };
    if (this.options.token) headers.authorization = `Bearer ${this.options.token}`;
    // The timeout bounds the wait for the head only; the body is the caller's to end.
    const connection = new AbortController();
    const stop = () => connection.abort(signal.reason);
    signal.addEventListener("abort", stop, { once: true });
    if (signal.aborted) stop();
    const timer = setTimeout(() => connection.abort(new DOMException("no answer in time", "TimeoutError")), this.options.timeoutMs);
    let response: Response;
    try {
      response = await fetch(url, { method: "GET", headers, signal: connection.signal });
    } catch (err) {
      signal.removeEventListener("abort", stop);
      throw connectionError(err, get, url, this.options.timeoutMs);
    } finally {
      clearTimeout(timer);
    }
    if (!response.ok) {
      signal.removeEventListener("abort", stop);
      throw await apiError(response, parseRetryAfter(response.headers.get("retry-after")));
    }
    return response;
  }

  private url(spec: RequestSpec): string {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(spec.query ?? {})) {
      if (value !== undefined) params.set(key, String(value));
    }
    const qs = params.toString();
    return `${this.baseUrl}${spec.path}${qs ? `?${qs}` : ""}`;
  }
}

async function apiError(response: Response, retryAfter: number | undefined): Promise<RedialError> {
  const text = await response.text().catch(() => "");
  try {
    const parsed = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
    if (parsed.error && typeof parsed.error.code === "string") {
      return new RedialError(response.status, parsed.error.code, String(parsed.error.message ?? ""), retryAfter);
    }
  } catch {
    // not the API's error shape: fall through
  }
  return new RedialError(
    response.status,
    "unexpected_response",
    `the server answered ${response.status} without an error body: check that baseUrl points at a redial server`,
    retryAfter,
  );
}

function connectionError(err: unknown, spec: RequestSpec, url: string, timeoutMs: number): Error {
  const name = (err as { name?: string } | null)?.name;
  if (name === "TimeoutError" || name === "AbortError") {
    return new RedialTimeoutError(
      `${spec.method} ${url} got no answer within ${timeoutMs} ms: raise timeoutMs or check the server`,
      { cause: err },
    );
  }
  const cause = (err as { cause?: { code?: string; message?: string } } | null)?.cause;
  const detail = cause?.code ?? cause?.message ?? (err as Error)?.message ?? String(err);
  return new RedialConnectionError(
    `could not reach the redial server at ${url} (${detail}): check that it runs and that baseUrl is right`,
    { cause: err },
  );
}

/** Seconds from a Retry-After header (delta-seconds or an HTTP date), undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null): number | undefined {
  if (value === null) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const date = Date.parse(trimmed);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, Math.ceil((date - Date.now()) / 1000));
}

/** A jittered delay before retry number `attempt` (0-based): 200 ms doubling, at most 5 s. */
export function backoff(attempt: number): number {
  const ceiling = Math.min(MAX_BACKOFF_MS, BASE_BACKOFF_MS * 2 ** attempt);
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
