// Owns the test application's callback route: Redial's deliveries, verified and read typed by
// @redial/nestjs, handed to the ledger once per webhook-id.
import { Controller, Post } from "@nestjs/common";
import type { VerifiedCallback } from "@redial/client";
import { ReceiveRedialCallback, RedialCallback } from "@redial/nestjs";
import { Ledger } from "./ledger";

@Controller("redial")
export class CallbacksController {
  constructor(private readonly ledger: Ledger) {}

  @Post("callbacks")
  @ReceiveRedialCallback()
  async receive(@RedialCallback() callback: VerifiedCallback): Promise<void> {
    const { event } = callback;
    // The types a handler acts on; the compiler knows there is no other.
    switch (event.type) {
      case "job.completed":
      case "job.dead":
      case "job.cancelled":
        await this.ledger.record(callback);
        return;
      default: {
        const never: never = event.type;
        throw new Error(`unexpected ${String(never)}`);
      }
    }
  }
}
