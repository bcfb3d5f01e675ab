// Owns InMemoryRedialCallbackStore's rules, on a clock the test moves: an id is new, then being
// handled, then handled; a failed handler gives it back; handled ids are forgotten after
// rememberMs, and beyond maxIds the oldest first.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { InMemoryRedialCallbackStore, type CallbackClaim } from "@redial/nestjs";

type Step = ["begin", string, CallbackClaim] | ["finish", string] | ["abandon", string] | ["wait", number];

/** Runs the steps on a fresh store whose clock starts at 0; each begin must find what it says. */
async function check(steps: Step[], options: { rememberMs?: number; maxIds?: number } = {}): Promise<void> {
  let now = 0;
  const store = new InMemoryRedialCallbackStore({ ...options, now: () => now });
  for (const [i, step] of steps.entries()) {
    if (step[0] === "begin") assert.equal(await store.begin(step[1]), step[2], `step ${i}: begin ${step[1]}`);
    else if (step[0] === "finish") await store.finish(step[1]);
    else if (step[0] === "abandon") await store.abandon(step[1]);
    else now += step[1];
  }
}

describe("InMemoryRedialCallbackStore", () => {
  test("new, then being handled, then handled", () =>
    check([["begin", "a", "new"], ["begin", "a", "handling"], ["finish", "a"], ["begin", "a", "handled"], ["begin", "b", "new"]]));
  test("a failed handler gives the id back", () =>
    check([["begin", "a", "new"], ["abandon", "a"], ["begin", "a", "new"], ["finish", "a"], ["begin", "a", "handled"]]));
  test("remembered for rememberMs", () =>
    check([["begin", "a", "new"], ["finish", "a"], ["wait", 999], ["begin", "a", "handled"], ["wait", 1], ["begin", "a", "new"]], { rememberMs: 1000 }));
  test("forgets from the oldest beyond maxIds", () =>
    check(
      [
        ...(["a", "b", "c"].flatMap((id): Step[] => [["begin", id, "new"], ["finish", id], ["wait", 1]])),
        ["begin", "a", "new"],
        ["begin", "b", "handled"],
        ["begin", "c", "handled"],
      ],
      { maxIds: 2 },
    ));
  test("an id handled again moves to the newest", () =>
    check(
      [["begin", "a", "new"], ["finish", "a"], ["wait", 600], ["finish", "a"], ["wait", 600], ["begin", "a", "handled"]],
      { rememberMs: 1000 },
    ));
});
