"""The Server-Sent Events parser's cases: one check and one line per case. The chunks are fed one
by one, as a connection delivers them, so a line end or a UTF-8 character split between two chunks
is a case of its own. The parser is pure; the stream against a real server is in test_events.py."""

from __future__ import annotations

import pytest

from redial_client._sse import SseParser

M = "message"

CASES: list[tuple[str, list[bytes], list[tuple[str, str, str]]]] = [
    # line ends
    ("LF", [b"id: 1\nevent: job.dead\ndata: {}\n\n"], [("1", "job.dead", "{}")]),
    ("CRLF", [b"id: 1\r\nevent: job.dead\r\ndata: {}\r\n\r\n"], [("1", "job.dead", "{}")]),
    ("CR", [b"id: 1\revent: job.dead\rdata: {}\r\r"], [("1", "job.dead", "{}")]),
    ("CRLF split", [b"data: a\r", b"\n", b"\r", b"\ndata: b\r\n\r\n"], [("", M, "a"), ("", M, "b")]),
    ("CR then CR", [b"data: a\r", b"\r"], [("", M, "a")]),
    ("CR, empty chunk, LF", [b"data: a\r", b"", b"\n\r\n"], [("", M, "a")]),
    ("mixed", [b"data: a\n\r\n\rdata: b\n\n"], [("", M, "a"), ("", M, "b")]),
    # fields
    ("split anywhere", [b"da", b'ta: {"a"', b":1}\n", b"\n"], [("", M, '{"a":1}')]),
    ("multi-line data", [b"data: one\ndata: two\ndata:\ndata\n\n"], [("", M, "one\ntwo\n\n")]),
    ("comments", [b": keepalive\n\n", b":\n", b"data: x\n: between\n\n"], [("", M, "x")]),
    ("one space dropped", [b"data:x\n\n", b"data:  y\n\n"], [("", M, "x"), ("", M, " y")]),
    ("no colon", [b"event\ndata: x\n\n"], [("", M, "x")]),
    ("unknown fields", [b"foo: bar\nDATA: no\ndata: x\n\n"], [("", M, "x")]),
    ("colon in value", [b"data: a: b\n\n"], [("", M, "a: b")]),
    ("UTF-8 split", [b"data: \xc3", b"\xa9t\xc3\xa9\n\n"], [("", M, "\u00e9t\u00e9")]),
    # dispatch
    ("event without data", [b"event: job.dead\n\ndata: x\n\n"], [("", M, "x")]),
    ("id without data", [b"id: 7\n\ndata: x\n\n"], [("7", M, "x")]),
    ("cut event", [b"data: x\n"], []),
    ("cut line", [b"data: x"], []),
    ("blank lines", [b"\n\n\n"], []),
    # the last event id
    ("id carries over", [b"id: 0-1\ndata: a\n\ndata: b\n\n"], [("0-1", M, "a"), ("0-1", M, "b")]),
    ("NUL id ignored", [b"id: 0-1\ndata: a\n\nid: 0-\x002\ndata: b\n\n"], [("0-1", M, "a"), ("0-1", M, "b")]),
    ("empty id clears", [b"id: 0-1\ndata: a\n\nid\ndata: b\n\n"], [("0-1", M, "a"), ("", M, "b")]),
    # BOM
    ("BOM dropped", [b"\xef\xbb\xbfdata: x\n\n"], [("", M, "x")]),
    ("BOM split", [b"\xef\xbb", b"\xbfdata: x\n\n"], [("", M, "x")]),
    ("one BOM only", [b"\xef\xbb\xbf", b"\xef\xbb\xbfdata: x\n\n"], []),
]


@pytest.mark.parametrize("chunks,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_parse(chunks: list[bytes], expected: list[tuple[str, str, str]]) -> None:
    parser = SseParser()
    got = [tuple(m) for chunk in chunks for m in parser.feed(chunk)]
    assert got == expected


@pytest.mark.parametrize("line,retry", [(b"retry: 1500", 1.5), (b"retry: 15s", None), (b"retry: \xd9\xa3", None)])
def test_retry(line: bytes, retry: float | None) -> None:
    parser = SseParser()
    parser.feed(line + b"\n\n")
    assert parser.retry == retry
