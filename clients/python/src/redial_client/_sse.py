"""Reading a Server-Sent Events body into messages, as the HTML standard's event stream
interpretation does: UTF-8 decoded across chunks, lines ending in CRLF, LF or CR (a CRLF may be
split between two chunks), comment lines starting with a colon, a data field on several lines, and
the last event id kept from one message to the next. Pure: the clients feed it the bytes of one
connection; it knows nothing of HTTP or reconnecting (_stream)."""

from __future__ import annotations

import codecs
import re
from typing import NamedTuple

_LINE_END = re.compile(r"\r\n|\r|\n")


class SseMessage(NamedTuple):
    """One dispatched message."""

    id: str  # the last event id the stream set, at this message: what a reconnect sends
    event: str  # the event field, "message" when none was given
    data: str  # the data lines joined with "\n"


class SseParser:
    """Turns the bytes of one event stream, chunk by chunk, into messages."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""  # a line begun in an earlier chunk
        self._skip_lf = False  # the previous chunk ended in CR: a leading LF belongs to it
        self._started = False
        self._data: list[str] = []
        self._event = ""
        self._last_id = ""
        self.retry: float | None = None  # seconds, when the stream sent a retry field

    def feed(self, chunk: bytes) -> list[SseMessage]:
        """Reads a chunk; returns the messages it completed."""
        text = self._decoder.decode(chunk)
        if not self._started and text:
            self._started = True
            if text.startswith("\ufeff"):
                text = text[1:]
        if not text:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if text.startswith("\n"):
                text = text[1:]
        out: list[SseMessage] = []
        start = 0
        for end in _LINE_END.finditer(text):
            line = self._partial + text[start:end.start()]
            self._partial = ""
            start = end.end()
            if end.group() == "\r" and start == len(text):
                self._skip_lf = True
            message = self._line(line)
            if message is not None:
                out.append(message)
        self._partial += text[start:]
        return out

    def _line(self, line: str) -> SseMessage | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        # A field other than these four is ignored.
        if field == "event":
            self._event = value
        elif field == "data":
            self._data.append(value)
        elif field == "id":
            if "\0" not in value:
                self._last_id = value
        elif field == "retry":
            if value.isascii() and value.isdigit():
                self.retry = int(value) / 1000
        return None

    def _dispatch(self) -> SseMessage | None:
        data, event = self._data, self._event
        self._data, self._event = [], ""
        if not data:
            return None
        return SseMessage(self._last_id, event or "message", "\n".join(data))
