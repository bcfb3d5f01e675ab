// Owns the Nest module: the Redial client for injection (by its class, by REDIAL_CLIENT or with
// @InjectRedial()), the callback settings and the store of handled webhook-ids.
import { Inject, Module } from "@nestjs/common";
import { Redial } from "@redial/client";
import {
  REDIAL_CALLBACK_SETTINGS,
  REDIAL_CALLBACK_STORE,
  REDIAL_CLIENT,
  REDIAL_MODULE_OPTIONS,
  RedialConfigurableModule,
  callbackSettings,
  type RedialModuleOptions,
} from "./options.js";
import { InMemoryRedialCallbackStore } from "./store.js";

/**
 * `RedialModule.forRoot({ baseUrl, token, callbacks })`, or `RedialModule.forRootAsync({ imports,
 * inject, useFactory })` to read them from ConfigService. Global unless `isGlobal: false`.
 */
@Module({
  providers: [
    {
      provide: REDIAL_CLIENT,
      useFactory: (options: RedialModuleOptions) => new Redial(options),
      inject: [REDIAL_MODULE_OPTIONS],
    },
    { provide: Redial, useExisting: REDIAL_CLIENT },
    { provide: REDIAL_CALLBACK_SETTINGS, useFactory: callbackSettings, inject: [REDIAL_MODULE_OPTIONS] },
    {
      provide: REDIAL_CALLBACK_STORE,
      useFactory: (options: RedialModuleOptions) => options.callbacks?.store ?? new InMemoryRedialCallbackStore(),
      inject: [REDIAL_MODULE_OPTIONS],
    },
  ],
  exports: [REDIAL_CLIENT, Redial, REDIAL_CALLBACK_SETTINGS, REDIAL_CALLBACK_STORE, REDIAL_MODULE_OPTIONS],
})
export class RedialModule extends RedialConfigurableModule {}

/** Injects the Redial client: `constructor(@InjectRedial() private readonly redial: Redial)`. */
export function InjectRedial(): PropertyDecorator & ParameterDecorator {
  return Inject(REDIAL_CLIENT);
}
