// Owns the Server-Sent Events parser's cases: one check(chunks, expected) helper and one line per case.
// The chunks are fed one by one, as a connection delivers them, so a line end split between two chunks
// is a case of its own. The parser is pure; the stream against a real server is in events.test.ts.
import assert from "node:assert/strict";
import { test } from "node:test";
import { SseParser, type SseMessage } from "../src/sse.js";

/** [id, event, data] for each message dispatched. */
type Expected = [string, string, string][];

function check(chunks: string[], expected: Expected, retryMs?: number): void {
  const parser = new SseParser();
  const got: SseMessage[] = chunks.flatMap((c) => parser.push(c));
  assert.deepEqual(
    got.map((m) => [m.id, m.event, m.data]),
    expected,
    JSON.stringify(chunks),
  );
  assert.equal(parser.retryMs, retryMs);
}

test("line ends: LF, CRLF, CR, and a CRLF split between chunks", () => {
  check(["id: 1\nevent: job.dead\ndata: {}\n\n"], [["1", "job.dead", "{}"]]);
  check(["id: 1\r\nevent: job.dead\r\ndata: {}\r\n\r\n"], [["1", "job.dead", "{}"]]);
  check(["id: 1\revent: job.dead\rdata: {}\r\r"], [["1", "job.dead", "{}"]]);
  check(["data: a\r", "\n", "\r", "\ndata: b\r\n\r\n"], [["", "message", "a"], ["", "message", "b"]]);
  check(["data: a\r", "\r"], [["", "message", "a"]]);
  check(["data: a\r", "", "\n\r\n"], [["", "message", "a"]]);
  check(["data: a\n\r\n\rdata: b\n\n"], [["", "message", "a"], ["", "message", "b"]]);
});

test("fields: split anywhere, multi-line data, comments, no space or no colon, unknown fields", () => {
  check(["da", "ta: {\"a\"", ":1}\n", "\n"], [["", "message", '{"a":1}']]);
  check(["data: one\ndata: two\ndata:\ndata\n\n"], [["", "message", "one\ntwo\n\n"]]);
  check([": keepalive\n\n", ":\n", "data: x\n: between\n\n"], [["", "message", "x"]]);
  check(["data:x\n\n", "data:  y\n\n"], [["", "message", "x"], ["", "message", " y"]]);
  check(["event\ndata: x\n\n"], [["", "message", "x"]]);
  check(["foo: bar\nDATA: no\ndata: x\n\n"], [["", "message", "x"]]);
  check(["data: a: b\n\n"], [["", "message", "a: b"]]);
});

test("dispatch: a blank line ends an event; without data nothing is dispatched; a cut event is not", () => {
  check(["event: job.dead\n\ndata: x\n\n"], [["", "message", "x"]]);
  check(["id: 7\n\ndata: x\n\n"], [["7", "message", "x"]]);
  check(["data: x\n"], []);
  check(["data: x"], []);
  check(["\n\n\n"], []);
});

test("the last event id carries over, a NUL id is ignored, an empty id clears it", () => {
  check(["id: 0-1\ndata: a\n\ndata: b\n\n"], [["0-1", "message", "a"], ["0-1", "message", "b"]]);
  check(["id: 0-1\ndata: a\n\nid: 0-\u00002\ndata: b\n\n"], [["0-1", "message", "a"], ["0-1", "message", "b"]]);
  check(["id: 0-1\ndata: a\n\nid\ndata: b\n\n"], [["0-1", "message", "a"], ["", "message", "b"]]);
});

test("a leading BOM is dropped once; retry takes digits only", () => {
  check(["\ufeffdata: x\n\n"], [["", "message", "x"]]);
  check(["\ufeff", "\ufeffdata: x\n\n"], []);
  check(["retry: 1500\n\n"], [], 1500);
  check(["retry: 15s\n\n"], [], undefined);
});
