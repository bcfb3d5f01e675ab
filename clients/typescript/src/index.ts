// Owns the package's public surface: the client, its errors, webhook verification, callbacks and the API types.
export { Redial, type RedialOptions } from "./client.js";
export type { StreamOptions } from "./events.js";
export {
  RedialError,
  RedialConnectionError,
  RedialTimeoutError,
  WebhookVerificationError,
  CallbackParseError,
  type ErrorCode,
  type WebhookFailure,
} from "./errors.js";
export { verifyWebhook, signWebhook, type VerifyWebhookOptions, type VerifiedWebhook, type WebhookHeaders } from "./webhooks.js";
export {
  parseCallback,
  callbackResponseBody,
  type CallbackEvent,
  type CallbackJob,
  type CallbackResponse,
  type VerifiedCallback,
} from "./callbacks.js";
export type * from "./types.js";
export type { components, operations, paths } from "./api-types.js";
