// Owns the package's public surface; the Terminus health indicator is @redial/nestjs/terminus, so
// that an application without @nestjs/terminus loads this.
export { RedialModule, InjectRedial } from "./module.js";
export {
  REDIAL_CLIENT,
  REDIAL_CALLBACK_STORE,
  REDIAL_CALLBACK_SETTINGS,
  REDIAL_MODULE_OPTIONS,
  type RedialModuleOptions,
  type RedialCallbackOptions,
  type CallbackSettings,
} from "./options.js";
export { RedialCallbackGuard, RedialCallbackInterceptor, ReceiveRedialCallback, RedialCallback } from "./callbacks.js";
export {
  InMemoryRedialCallbackStore,
  type InMemoryRedialCallbackStoreOptions,
  type RedialCallbackStore,
  type CallbackClaim,
} from "./store.js";
