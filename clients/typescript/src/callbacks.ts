// Owns reading a completion callback in its receiver: the signature is checked first (verifyWebhook),
// then the body is checked to be a callback event before it is handed out typed.
import { CallbackParseError } from "./errors.js";
import type { Job } from "./types.js";
import { verifyWebhook, type VerifiedWebhook, type VerifyWebhookOptions } from "./webhooks.js";

/** The final response of a finished job's last attempt. */
export interface CallbackResponse {
  status: number;
  /** The response's headers, without those Redial redacts as secrets. */
  headers: Record<string, string>;
  /** The kept body: text, or base64 when it was not UTF-8 (see body_encoding); callbackResponseBody decodes it. */
  body: string | null;
  body_encoding: "text" | "base64";
  content_type: string | null;
  /** True when Redial kept only the body's first bytes. */
  truncated: boolean;
}

/** The finished job a callback tells of. Instants are RFC 3339 strings, as in Job. */
export interface CallbackJob {
  id: string;
  queue: string;
  endpoint: string;
  group: string | null;
  tags: string[];
  idempotency_key: string | null;
  state: "completed" | "dead" | "cancelled";
  /** The dead-letter category, when dead. */
  category: Job["category"];
  reason: string | null;
  /** The counts as in Job: attempts are the failed ones since creation or the last replay, runs every attempt made. */
  attempts: number;
  unknown_attempts: number;
  deferrals: number;
  stalls: number;
  replays: number;
  runs: number;
  created_at: string;
  finished_at: string | null;
  /** Null when the last attempt got no response, or the job never ran. */
  response: CallbackResponse | null;
  /** The last attempt's transport error kind, when it got no response. */
  error: string | null;
}

/** The JSON body of a callback delivery. */
export interface CallbackEvent {
  type: "job.completed" | "job.dead" | "job.cancelled";
  /** When the job finished (RFC 3339). */
  timestamp: string;
  data: CallbackJob;
}

export interface VerifiedCallback extends VerifiedWebhook {
  event: CallbackEvent;
}

const TYPES = ["job.completed", "job.dead", "job.cancelled"];

/**
 * Verifies a callback delivery like verifyWebhook, then reads its body as a CallbackEvent.
 * `id` (webhook-id) is the same on every attempt of one event: deduplicate on it.
 * Throws WebhookVerificationError when the signature does not verify, and CallbackParseError
 * when a verified body is not a callback event (a job's own delivery sent to the callback URL, say).
 */
export function parseCallback(options: VerifyWebhookOptions): VerifiedCallback {
  const verified = verifyWebhook(options);
  const text = typeof options.body === "string" ? options.body : Buffer.from(options.body).toString("utf8");
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new CallbackParseError("the body is not JSON: give this URL only as a job's callback url");
  }
  return { ...verified, event: callbackEvent(value) };
}

/** The response body as sent: a string for text, bytes when Redial kept it as base64, null when none was kept. */
export function callbackResponseBody(response: CallbackResponse): string | Uint8Array | null {
  if (response.body === null) return null;
  if (response.body_encoding === "base64") return new Uint8Array(Buffer.from(response.body, "base64"));
  return response.body;
}

// Checks the fields a handler acts on; other fields pass as the server wrote them, so a newer
// server's additions still read.
function callbackEvent(value: unknown): CallbackEvent {
  if (!isObject(value) || typeof value.type !== "string" || !TYPES.includes(value.type)) {
    throw new CallbackParseError(
      "the body is not a callback event (type job.completed, job.dead or job.cancelled): give this URL only as a job's callback url",
    );
  }
  const data = value.data;
  if (typeof value.timestamp !== "string" || !isObject(data) || typeof data.id !== "string" || typeof data.queue !== "string") {
    throw new CallbackParseError(`the ${value.type} event lacks timestamp, data.id or data.queue`);
  }
  if (data.state !== value.type.slice("job.".length)) {
    throw new CallbackParseError(`the ${value.type} event's data.state is ${JSON.stringify(data.state)}`);
  }
  const response = data.response;
  if (
    response !== null &&
    !(isObject(response) && typeof response.status === "number" && (response.body_encoding === "text" || response.body_encoding === "base64"))
  ) {
    throw new CallbackParseError(`the ${value.type} event's data.response has no status or body_encoding`);
  }
  return value as unknown as CallbackEvent;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
