// Owns receiving Redial's completion callbacks in a controller: the guard that verifies a
// delivery's Standard Webhooks signature on the raw body and reads it as a typed callback, the
// interceptor that acts on each webhook-id once, and the decorators a route uses.
import {
  BadRequestException,
  ConflictException,
  HttpCode,
  Inject,
  Injectable,
  InternalServerErrorException,
  UnauthorizedException,
  UseGuards,
  UseInterceptors,
  applyDecorators,
  createParamDecorator,
  type CallHandler,
  type CanActivate,
  type ExecutionContext,
  type NestInterceptor,
} from "@nestjs/common";
import { CallbackParseError, WebhookVerificationError, parseCallback, type VerifiedCallback } from "@redial/client";
import { from, lastValueFrom, type Observable } from "rxjs";
import { REDIAL_CALLBACK_SETTINGS, REDIAL_CALLBACK_STORE, type CallbackSettings } from "./options.js";
import type { RedialCallbackStore } from "./store.js";

/** The part of a request the guard reads: Express's and Fastify's requests both have it. */
interface CallbackRequest {
  headers: Record<string, string | string[] | undefined>;
  /** Set when the application was created with `{ rawBody: true }`. */
  rawBody?: Buffer;
}

// The verified callback of each request, from the guard to the interceptor and the parameter.
const verified = new WeakMap<object, VerifiedCallback>();

/**
 * Verifies a callback delivery against the raw body and reads it: 401 when the signature does not
 * verify (a wrong secret, a changed body, a stale or missing timestamp), 400 when a signed body is
 * not a callback event. Needs the application created with `NestFactory.create(AppModule, { rawBody: true })`.
 */
@Injectable()
export class RedialCallbackGuard implements CanActivate {
  private readonly settings: CallbackSettings;

  constructor(@Inject(REDIAL_CALLBACK_SETTINGS) settings: CallbackSettings | null) {
    if (!settings) {
      throw new Error(
        "RedialModule has no callbacks: give RedialModule.forRoot (or forRootAsync's factory) callbacks: { secrets } to receive callbacks",
      );
    }
    this.settings = settings;
  }

  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<CallbackRequest>();
    if (!Buffer.isBuffer(request.rawBody)) {
      // The signature covers the bytes as sent: a body parsed and serialized again cannot be checked.
      throw new InternalServerErrorException(
        "no raw body to verify the callback's signature: create the application with NestFactory.create(AppModule, { rawBody: true })",
      );
    }
    try {
      verified.set(
        request,
        parseCallback({
          secrets: this.settings.secrets,
          headers: request.headers,
          body: request.rawBody,
          toleranceSeconds: this.settings.toleranceSeconds,
        }),
      );
    } catch (err) {
      if (err instanceof WebhookVerificationError) throw new UnauthorizedException(err.message);
      if (err instanceof CallbackParseError) throw new BadRequestException(err.message);
      throw err;
    }
    return true;
  }
}

/**
 * Runs the handler once per webhook-id: a delivery already handled is answered 2xx without running
 * it; one being handled right now is answered 409, which Redial retries (the delivery carries an
 * idempotency key) in case the first fails. A handler that throws leaves the id unhandled, so the
 * retried delivery runs it again.
 */
@Injectable()
export class RedialCallbackInterceptor implements NestInterceptor {
  constructor(@Inject(REDIAL_CALLBACK_STORE) private readonly store: RedialCallbackStore) {}

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const { id } = verifiedCallback(context);
    const claim = await this.store.begin(id);
    if (claim === "handled") return from([undefined]);
    if (claim === "handling") {
      throw new ConflictException(`the callback ${id} is being handled: Redial sends it again later`);
    }
    return from(this.run(id, next));
  }

  private async run(id: string, next: CallHandler): Promise<unknown> {
    let value: unknown;
    try {
      value = await lastValueFrom(next.handle(), { defaultValue: undefined });
    } catch (err) {
      await this.store.abandon(id);
      throw err;
    }
    await this.store.finish(id);
    return value;
  }
}

/**
 * Makes a POST route a receiver of Redial's callbacks: verified (RedialCallbackGuard), acted on
 * once per webhook-id (RedialCallbackInterceptor), answered 204. Read the callback with `@RedialCallback()`.
 */
export function ReceiveRedialCallback(): MethodDecorator & ClassDecorator {
  return applyDecorators(UseGuards(RedialCallbackGuard), UseInterceptors(RedialCallbackInterceptor), HttpCode(204));
}

/**
 * The verified callback (`{ id, timestamp, event }`: `id` the webhook-id, `event` the typed
 * `CallbackEvent`), in a route with `@ReceiveRedialCallback()` or `@UseGuards(RedialCallbackGuard)`.
 */
export const RedialCallback = createParamDecorator((_data: unknown, context: ExecutionContext): VerifiedCallback => {
  return verifiedCallback(context);
});

function verifiedCallback(context: ExecutionContext): VerifiedCallback {
  const callback = verified.get(context.switchToHttp().getRequest<object>());
  if (!callback) {
    throw new InternalServerErrorException(
      "this route reads a Redial callback without verifying it: add @ReceiveRedialCallback() (or @UseGuards(RedialCallbackGuard))",
    );
  }
  return callback;
}
