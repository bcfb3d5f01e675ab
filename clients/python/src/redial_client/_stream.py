"""Following the event log live (GET /v1/events/stream), the part the sync and async clients
share: the request of each connection, what an answer or a failure means (read on, reconnect after
a pause, or raise), and the state carried from one connection to the next, above all the id of the
last event handed out, which a reconnect sends as Last-Event-ID so that the caller misses nothing
and gets nothing twice. Each client only sends the requests and sleeps."""

from __future__ import annotations

import json
from typing import Iterable, Mapping, cast

import httpx

from . import _core
from ._sse import SseMessage
from .errors import RedialError
from .types import Event

PATH = "/v1/events/stream"
# How long an open stream may stay silent before it is taken for dead and reopened: the server
# writes a comment every 15 s on a quiet stream, so three missed ones mean the connection is gone.
IDLE = 45.0


class Follow:
    """One caller's stream across its connections."""

    def __init__(self, params: dict[str, str], max_retries: int, base_url: str) -> None:
        self.params = params
        self._max_retries = max_retries
        self._base_url = base_url
        self._last: str | None = None  # the id of the last event handed out
        self._fruitless = 0  # openings in a row that handed out nothing: the pause grows with it
        self._ever_open = False  # until a stream opened, failures give up as any call does
        self._retry: float | None = None  # the pause the server asked for (a retry field)
        self._retry_after: float | None = None  # the pause a 429 or 503 asked for, once

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream"}
        if self._last is not None:
            headers["Last-Event-ID"] = self._last
        return headers

    def timeout(self, client_timeout: float) -> httpx.Timeout:
        """The client's timeout to connect; a read may wait IDLE, the stream's silence at most."""
        return httpx.Timeout(client_timeout, read=IDLE)

    def refused(self, status: int, headers: Mapping[str, str], content: bytes) -> None:
        """An error answer: raised, unless it is a 429 or 503 to reconnect after."""
        delay = _core.retry_delay(status, headers, self._fruitless)
        if delay is None or self._gives_up():
            raise _core.error_from(status, headers, content)
        self._retry_after = delay

    def broke(self, cause: httpx.TransportError) -> None:
        """No answer, or the connection broke while reading: reconnect, unless the first opening
        has used the client's retries (a wrong base_url fails rather than waits)."""
        if self._gives_up():
            raise _core.connection_error(self._base_url, cause) from cause

    def opened(self, status: int, headers: Mapping[str, str]) -> bool:
        """A 2xx answer: True to read it; False when the server asks not to reconnect (204, the
        standard's rule; redial does not send it). An answer that is no event stream is raised."""
        if status == 204:
            return False
        content_type = headers.get("content-type", "")
        if content_type.split(";")[0].strip().lower() != "text/event-stream":
            raise RedialError(
                status, "invalid_response",
                f"the event stream answered {content_type or 'no content type'}, not "
                "text/event-stream: check that base_url points at a redial server",
            )
        self._ever_open = True
        return True

    def take(self, message: SseMessage) -> Event:
        """The event a message carries; from now on a reconnect starts after it."""
        try:
            event = cast(Event, json.loads(message.data))
        except ValueError as e:
            raise RedialError(200, "invalid_response", f"an event's data is not JSON: {e}") from e
        self._last = message.id or str(event.get("id", "")) or self._last
        self._fruitless = 0
        return event

    def ended(self, retry: float | None) -> None:
        """A connection ended; `retry` is what its parser read from a retry field, if anything."""
        if retry is not None:
            self._retry = retry

    def pause(self) -> float:
        """Seconds to wait before the next connection."""
        if self._retry_after is not None:
            delay, self._retry_after = self._retry_after, None
        elif self._retry is not None:
            delay = self._retry
        else:
            delay = _core.backoff(self._fruitless)
        self._fruitless += 1
        return delay

    def _gives_up(self) -> bool:
        return not self._ever_open and self._fruitless >= self._max_retries


def params(
    after: str | None, queue: str | Iterable[str] | None, kind: str | Iterable[str] | None,
) -> dict[str, str]:
    """The stream's query: as a page's, without a limit."""
    return _core.event_params(after, queue, kind, None)

