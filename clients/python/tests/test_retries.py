"""Retries and connection errors, against a stub HTTP server standing in for redial (a real
socket, no mocks): 429/503 retried honouring Retry-After, other 4xx never, bounded by max_retries."""

from __future__ import annotations

import asyncio
import socket

import pytest

from conftest import Receiver
from redial_client import AsyncRedial, Redial, RedialConnectionError, RedialError


def test_503_then_429_are_retried(receiver: Receiver) -> None:
    receiver.script = [(503, {"Retry-After": "0"}), (429, {"Retry-After": "0"})]
    with Redial(receiver.origin, max_retries=3) as c:
        assert c.stats() == {"ok": True}
    assert receiver.count() == 3


def test_retries_are_bounded(receiver: Receiver) -> None:
    receiver.status = 503
    with Redial(receiver.origin, max_retries=2) as c:
        with pytest.raises(RedialError) as err:
            c.stats()
    assert err.value.status == 503 and err.value.retry_after is None
    assert receiver.count() == 3


def test_other_4xx_is_never_retried(receiver: Receiver) -> None:
    receiver.status = 400
    with Redial(receiver.origin) as c:
        with pytest.raises(RedialError) as err:
            c.enqueue({"request": {"method": "GET", "url": "http://example.com"}})
    assert (err.value.status, err.value.code) == (400, "stub")
    assert receiver.count() == 1


def test_retried_enqueue_keeps_its_generated_id(receiver: Receiver) -> None:
    receiver.script = [(503, {"Retry-After": "0"})]
    with Redial(receiver.origin) as c:
        c.enqueue({"request": {"method": "GET", "url": "http://example.com"}})
    bodies = [r["body"] for r in receiver.requests]
    assert len(bodies) == 2 and bodies[0] == bodies[1] and b'"id":' in bodies[0]
    assert all(r["headers"]["content-type"] == "application/json" for r in receiver.requests)


def test_event_stream_retries_a_503_and_refuses_what_is_not_an_event_stream(receiver: Receiver) -> None:
    receiver.script = [(503, {"Retry-After": "0"})]
    with Redial(receiver.origin, max_retries=1) as c:
        with pytest.raises(RedialError) as err:
            next(c.stream_events(after="0-0"))
    assert err.value.code == "invalid_response" and "not text/event-stream" in err.value.message
    assert [r["path"] for r in receiver.requests] == ["/v1/events/stream?after=0-0"] * 2
    assert all(r["headers"]["accept"] == "text/event-stream" for r in receiver.requests)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connection_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with Redial(url, max_retries=1) as c:
        with pytest.raises(RedialConnectionError):
            c.stats()

    async def main() -> None:
        async with AsyncRedial(url, max_retries=1) as c:
            with pytest.raises(RedialConnectionError):
                await c.stats()

    asyncio.run(main())


def test_async_retries(receiver: Receiver) -> None:
    receiver.script = [(429, {"Retry-After": "0"})]

    async def main() -> None:
        async with AsyncRedial(receiver.origin) as c:
            assert await c.stats() == {"ok": True}

    asyncio.run(main())
    assert receiver.count() == 2
