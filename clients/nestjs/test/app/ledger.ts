// Owns what the test application did with its callbacks, in the order it did it, and waiting for
// the next thing it does (an event, not a poll).
import { Injectable } from "@nestjs/common";
import type { VerifiedCallback } from "@redial/client";
import { EventEmitter } from "node:events";

@Injectable()
export class Ledger {
  /** The callbacks handled (the handler returned), in order. */
  readonly handled: VerifiedCallback[] = [];
  /** Every run of the handler, failed ones included: webhook-ids in order. */
  readonly runs: string[] = [];
  /** The next runs that fail (the handler throws, the route answers 500). */
  failNext = 0;
  /** When set, the next run waits for it before it records. */
  hold: Promise<void> | undefined;
  private readonly changes = new EventEmitter();

  async record(callback: VerifiedCallback): Promise<void> {
    this.runs.push(callback.id);
    this.changes.emit("change");
    const hold = this.hold;
    this.hold = undefined;
    if (hold) await hold;
    if (this.failNext > 0) {
      this.failNext--;
      throw new Error(`the handler failed on purpose for ${callback.id}`);
    }
    this.handled.push(callback);
    this.changes.emit("change");
  }

  /** Resolves with `check`'s first value other than undefined, checked now and after every change. */
  until<T>(what: string, check: () => T | undefined, timeoutMs = 60_000): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const look = () => {
        const value = check();
        if (value === undefined) return;
        this.changes.off("change", look);
        clearTimeout(timer);
        resolve(value);
      };
      const timer = setTimeout(() => {
        this.changes.off("change", look);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}; runs: ${this.runs.join(", ")}`));
      }, timeoutMs);
      this.changes.on("change", look);
      look();
    });
  }
}
