// Owns the health indicator for @nestjs/terminus: whether the Redial server is ready (GET /readyz),
// apart from the package's root so that only an application that has Terminus loads it.
import { Inject, Injectable } from "@nestjs/common";
import { HealthIndicatorService, type HealthIndicatorResult } from "@nestjs/terminus";
import { REDIAL_MODULE_OPTIONS, type RedialModuleOptions } from "./options.js";

export interface RedialReadyOptions {
  /** How long to wait for the answer, in milliseconds; default 3000. */
  timeoutMs?: number;
}

// The client's own default, for an application that configures no baseUrl.
const DEFAULT_BASE_URL = "http://127.0.0.1:8080";

/**
 * `up` while the Redial server answers GET /readyz with 200 (its store can write), `down` with the
 * reason otherwise: the server's own (a full disk, a read-only database), or why it did not answer.
 * Provide it beside TerminusModule: `imports: [TerminusModule], providers: [RedialHealthIndicator]`.
 */
@Injectable()
export class RedialHealthIndicator {
  private readonly readyUrl: string;
  private readonly token: string | undefined;

  constructor(
    private readonly indicators: HealthIndicatorService,
    @Inject(REDIAL_MODULE_OPTIONS) options: RedialModuleOptions,
  ) {
    const baseUrl = options.baseUrl ?? process.env.REDIAL_SERVER ?? DEFAULT_BASE_URL;
    this.readyUrl = `${baseUrl.replace(/\/+$/, "")}/readyz`;
    this.token = options.token ?? process.env.REDIAL_TOKEN;
  }

  async isReady<const Key extends string = "redial">(key?: Key, options: RedialReadyOptions = {}): Promise<HealthIndicatorResult<Key>> {
    const indicator = this.indicators.check((key ?? "redial") as Key);
    const timeoutMs = options.timeoutMs ?? 3000;
    let response: Response;
    try {
      response = await fetch(this.readyUrl, {
        headers: this.token ? { authorization: `Bearer ${this.token}` } : {},
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      return indicator.down({ reason: unreachable(err, timeoutMs) });
    }
    const text = await response.text().catch(() => "");
    if (response.status === 200) return indicator.up();
    return indicator.down({ statusCode: response.status, reason: reasonOf(text) ?? `GET /readyz answered ${response.status}` });
  }
}

function reasonOf(text: string): string | undefined {
  try {
    const body = JSON.parse(text) as { reason?: unknown; error?: { message?: unknown } };
    if (typeof body.reason === "string") return body.reason;
    if (typeof body.error?.message === "string") return body.error.message;
  } catch {
    // not JSON: the status says enough
  }
  return undefined;
}

function unreachable(err: unknown, timeoutMs: number): string {
  if (err instanceof DOMException && err.name === "TimeoutError") return `no answer from Redial within ${timeoutMs} ms`;
  const cause = err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : "";
  return `Redial could not be reached${cause}`;
}
