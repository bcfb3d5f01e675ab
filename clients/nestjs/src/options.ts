// Owns what the module is configured with (RedialModule.forRoot and forRootAsync), the injection
// tokens, and checking the callback settings once, when the application starts.
import { ConfigurableModuleBuilder } from "@nestjs/common";
import { signWebhook, type RedialOptions } from "@redial/client";
import type { RedialCallbackStore } from "./store.js";

/** What RedialModule.forRoot takes, or forRootAsync's factory returns. */
export interface RedialModuleOptions extends RedialOptions {
  /** Receiving completion callbacks; needed only by routes with @ReceiveRedialCallback(). */
  callbacks?: RedialCallbackOptions;
}

export interface RedialCallbackOptions {
  /**
   * The secrets Redial signs callback deliveries with (`[queues.callbacks] signing_secrets`,
   * whsec_...): one, or several while rotating (any one matching is enough).
   */
  secrets: string | string[];
  /** How far webhook-timestamp may be from now, in seconds; default 300. */
  toleranceSeconds?: number;
  /**
   * Remembers the webhook-ids handled, so that a delivery that comes again (Redial retries one
   * whose answer it did not get) is answered without running the handler. Default: an
   * InMemoryRedialCallbackStore, which remembers for this process only; give a shared, durable
   * store when the application runs on several instances.
   */
  store?: RedialCallbackStore;
}

/** The callback settings, checked when the application starts. */
export interface CallbackSettings {
  secrets: string[];
  toleranceSeconds: number | undefined;
}

/** The Redial client (a `Redial` of @redial/client); `@InjectRedial()` or the `Redial` class inject it too. */
export const REDIAL_CLIENT = Symbol.for("@redial/nestjs:client");
/** The RedialCallbackStore the callback routes remember webhook-ids in. */
export const REDIAL_CALLBACK_STORE = Symbol.for("@redial/nestjs:callback-store");
/** The checked callback settings (CallbackSettings), or null when the module has no `callbacks`. */
export const REDIAL_CALLBACK_SETTINGS = Symbol.for("@redial/nestjs:callback-settings");

export const { ConfigurableModuleClass: RedialConfigurableModule, MODULE_OPTIONS_TOKEN: REDIAL_MODULE_OPTIONS } = new ConfigurableModuleBuilder<RedialModuleOptions>({ moduleName: "Redial" })
  .setClassMethodName("forRoot")
  // Global by default, as BullModule.forRoot is: the client and the callback settings are then
  // injectable in every module, and so are the guard and interceptor the callback routes use.
  .setExtras({ isGlobal: true }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
  .build();

/** Checks the callback settings once; a secret that cannot be used stops the start, saying why. */
export function callbackSettings(options: RedialModuleOptions): CallbackSettings | null {
  const callbacks = options.callbacks;
  if (!callbacks) return null;
  const secrets = Array.isArray(callbacks.secrets) ? callbacks.secrets : [callbacks.secrets];
  if (secrets.length === 0 || secrets.some((s) => typeof s !== "string" || s.trim() === "")) {
    throw new Error(
      "RedialModule: callbacks.secrets is empty: give the secrets of [queues.callbacks] signing_secrets (whsec_...)",
    );
  }
  for (const secret of secrets) {
    try {
      signWebhook(secret, "check", 0, "");
    } catch {
      throw new Error("RedialModule: a callbacks secret is empty or not base64: give whsec_<base64> secrets, as in redial.toml");
    }
  }
  return { secrets, toleranceSeconds: callbacks.toleranceSeconds };
}
