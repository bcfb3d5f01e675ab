// Owns the test application's outbound work: charging an order is a Redial job whose callback comes
// back to this application.
import { Injectable } from "@nestjs/common";
import { ConfigService } from "@nestjs/config";
import { Redial, type Job, type JobInput } from "@redial/client";
import { InjectRedial } from "@redial/nestjs";

@Injectable()
export class OrdersService {
  constructor(
    @InjectRedial() private readonly redial: Redial,
    private readonly config: ConfigService,
  ) {}

  /** Enqueues the charge; `path` is where the payments API is called (its answer is the test's). */
  charge(orderId: string, options: { path?: string; runAt?: Date } = {}): Promise<Job> {
    const job: JobInput = {
      id: `charge-${orderId}`,
      request: {
        method: "POST",
        url: `${this.config.getOrThrow<string>("PAYMENTS_URL")}${options.path ?? "/charges"}`,
        body: { orderId, amount: 4200 },
      },
      callback: {
        url: `${this.config.getOrThrow<string>("APP_URL")}/redial/callbacks`,
        on: ["completed", "dead", "cancelled"],
      },
    };
    if (options.runAt) job.run_at = options.runAt.toISOString();
    return this.redial.enqueue(job);
  }

  cancel(orderId: string): Promise<Job> {
    return this.redial.cancel(`charge-${orderId}`);
  }
}
