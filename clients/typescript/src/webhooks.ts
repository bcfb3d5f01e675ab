// Owns Standard Webhooks verification for receivers of Redial's signed deliveries (and signing, for tests).
import { createHmac, timingSafeEqual } from "node:crypto";
import { WebhookVerificationError } from "./errors.js";

/** Node's IncomingHttpHeaders, a fetch Headers, or a plain object (names in any case). */
export type WebhookHeaders =
  | Headers
  | Record<string, string | string[] | undefined>;

export interface VerifyWebhookOptions {
  /** One or more secrets (whsec_...); any one matching is enough, so secrets can be rotated. */
  secrets: string[] | string;
  headers: WebhookHeaders;
  /** The raw body exactly as received: do not parse and re-serialize it. */
  body: string | Buffer | Uint8Array;
  /** How far webhook-timestamp may be from now, in seconds; default 300. */
  toleranceSeconds?: number;
  /** The current time, for tests. */
  now?: Date;
}

export interface VerifiedWebhook {
  /** webhook-id: the job's idempotency key, the same on every attempt; use it to deduplicate. */
  id: string;
  timestamp: Date;
}

const PREFIX = "whsec_";

/** Checks a delivery's webhook-signature; throws WebhookVerificationError unless a secret signed it recently. */
export function verifyWebhook(options: VerifyWebhookOptions): VerifiedWebhook {
  const id = header(options.headers, "webhook-id");
  const timestampText = header(options.headers, "webhook-timestamp");
  const signatures = header(options.headers, "webhook-signature");
  if (!id || !timestampText || !signatures) {
    throw new WebhookVerificationError(
      "missing_headers",
      "the request lacks webhook-id, webhook-timestamp or webhook-signature: refuse it",
    );
  }
  if (!/^\d+$/.test(timestampText)) {
    throw new WebhookVerificationError("invalid_timestamp", "webhook-timestamp is not unix seconds: refuse the request");
  }
  const timestamp = Number(timestampText);
  const now = Math.floor((options.now ?? new Date()).getTime() / 1000);
  const tolerance = options.toleranceSeconds ?? 300;
  if (Math.abs(now - timestamp) > tolerance) {
    throw new WebhookVerificationError(
      "stale_timestamp",
      `webhook-timestamp is more than ${tolerance} s from now: refuse the request, or check the receiver's clock`,
    );
  }

  const secrets = (Array.isArray(options.secrets) ? options.secrets : [options.secrets]).map(secretKey);
  const given = signatures
    .split(" ")
    .filter((s) => s.startsWith("v1,"))
    .map((s) => Buffer.from(s.slice(3), "base64"));
  for (const key of secrets) {
    const expected = hmac(key, id, timestampText, options.body);
    for (const candidate of given) {
      if (candidate.length === expected.length && timingSafeEqual(candidate, expected)) {
        return { id, timestamp: new Date(timestamp * 1000) };
      }
    }
  }
  throw new WebhookVerificationError(
    "no_matching_signature",
    "no webhook-signature matches the given secrets: refuse the request, or check the secrets configured for the queue",
  );
}

/** The webhook-signature value for one secret, as Redial computes it ("v1,<base64>"). */
export function signWebhook(secret: string, id: string, timestamp: number, body: string | Buffer | Uint8Array): string {
  return `v1,${hmac(secretKey(secret), id, String(timestamp), body).toString("base64")}`;
}

function hmac(key: Buffer, id: string, timestamp: string, body: string | Buffer | Uint8Array): Buffer {
  return createHmac("sha256", key).update(`${id}.${timestamp}.`).update(body).digest();
}

function secretKey(secret: string): Buffer {
  const encoded = secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret;
  const key = Buffer.from(encoded, "base64");
  if (key.length === 0) {
    throw new WebhookVerificationError("invalid_secret", "a secret is empty or not base64: pass whsec_<base64> secrets");
  }
  return key;
}

function header(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof (headers as Headers).get === "function") {
    return (headers as Headers).get(name) ?? undefined;
  }
  for (const [key, value] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    if (key.toLowerCase() === name) return Array.isArray(value) ? value.join(" ") : value;
  }
  return undefined;
}
