// Owns the client's error classes: API answers (RedialError), failures to reach the server
// (RedialConnectionError, RedialTimeoutError), rejected webhook deliveries (WebhookVerificationError) and
// verified deliveries that are not callback events (CallbackParseError).
import type { components } from "./api-types.js";

/** Every code the API's error answers carry: the OpenAPI document's enum, which the server's
 * `ErrorCode` writes (a test fails when they drift). */
export type ErrorCode = components["schemas"]["Error"]["error"]["code"];

/** The server answered with an error status; `code` and `message` come from its {"error": {...}} body. */
export class RedialError extends Error {
  override readonly name = "RedialError";
  constructor(
    readonly status: number,
    /** One of {@link ErrorCode}; typed open so that a newer server's code still reads. */
    readonly code: ErrorCode | (string & {}),
    message: string,
    /** Seconds the server asked to wait (Retry-After), when it said so. */
    readonly retryAfter?: number,
  ) {
    super(message);
  }
}

/** The server could not be reached (refused, reset, DNS, TLS), after the configured retries. */
export class RedialConnectionError extends Error {
  override readonly name: string = "RedialConnectionError";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** No answer within timeoutMs, after the configured retries. */
export class RedialTimeoutError extends RedialConnectionError {
  override readonly name = "RedialTimeoutError";
}

export type WebhookFailure =
  | "missing_headers"
  | "invalid_timestamp"
  | "stale_timestamp"
  | "no_matching_signature"
  | "invalid_secret";

/** A delivery failed verification: answer it with 400/401 and do not act on it. */
export class WebhookVerificationError extends Error {
  override readonly name = "WebhookVerificationError";
  constructor(
    readonly reason: WebhookFailure,
    message: string,
  ) {
    super(message);
  }
}

/** A verified delivery whose body is not a callback event: answer it with 400 and do not act on it. */
export class CallbackParseError extends Error {
  override readonly name = "CallbackParseError";
}
