"""The event log against a real `redial serve` of its own (so the log holds only these tests'
events): pages filtered by kind and queue and read on by cursor; the live stream stopped and
resumed after the last id read; a connection cut by a TCP proxy and reopened by the stream itself
with Last-Event-ID; closing it; the errors it raises; the token; the async client. Every wait is on
a condition (an event read, a job finished), bounded generously."""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import AsyncIterator, Iterator

import pytest

from conftest import WAIT, Proxy, Receiver, Server, take, wait_for
from redial_client import AsyncRedial, Redial, RedialConnectionError, RedialError
from redial_client.types import Event

OK = ["ev-ok-1", "ev-ok-2", "ev-ok-3"]
REFUSED = ["ev-refused-1", "ev-refused-2"]


class Log:
    """The server, a receiver that answers 200 and one that answers 400, and a client."""

    def __init__(self) -> None:
        self.server = Server()
        self.ok = Receiver()
        self.refusing = Receiver()
        self.refusing.status = 400
        self.client = Redial(self.server.url)

    def finish(self, job_id: str, ok: bool) -> None:
        """Enqueues a job that completes, or dies at once as permanent (a 400), and waits for it."""
        receiver = self.ok if ok else self.refusing
        self.client.enqueue({"id": job_id, "request": {"method": "POST", "url": receiver.origin + "/hook"}})
        job = self.client.wait_for_job(job_id, timeout=120)
        assert job["state"] == ("completed" if ok else "dead"), job

    def events(self) -> list[Event]:
        """The whole log as GET /v1/events gives it now."""
        page = self.client.events(limit=1000)
        assert page["more"] is False
        return page["events"]

    def close(self) -> None:
        self.client.close()
        self.ok.close()
        self.refusing.close()
        self.server.stop()


@pytest.fixture(scope="module")
def log() -> Iterator[Log]:
    log = Log()
    for job_id in OK:
        log.finish(job_id, True)
    for job_id in REFUSED:
        log.finish(job_id, False)
    yield log
    log.close()


@pytest.fixture
def proxy(log: Log) -> Iterator[Proxy]:
    p = Proxy(log.server.url)
    yield p
    p.close()


def ids(events: list[Event]) -> list[str]:
    return [e["id"] for e in events]


def last_event_id(head: str) -> str | None:
    match = re.search(r"^last-event-id: *(.*?)\r$", head, re.IGNORECASE | re.MULTILINE)
    return match.group(1) if match else None


def test_events_pages_by_kind_queue_and_cursor(log: Log) -> None:
    c = log.client
    page = c.events()
    assert (page["from"], page["more"]) == (None, False)
    mine = [e for e in page["events"] if (e["job_id"] or "").startswith("ev-")]
    assert mine == page["events"][: len(mine)], "the jobs of the fixture come first"
    assert sorted(e["job_id"] for e in mine if e["type"] == "job.completed") == OK
    dead = [e for e in mine if e["type"] == "job.dead"]
    assert sorted(e["job_id"] for e in dead) == REFUSED
    assert {e["category"] for e in dead} == {"permanent"}
    assert {e["endpoint"] for e in dead} == {log.refusing.origin}
    assert {e["queue"] for e in mine} == {"default"}
    assert len(mine) == len(OK) + len(REFUSED)
    assert len(set(ids(page["events"]))) == len(page["events"]), "ids are unique"
    assert page["next_cursor"] == page["events"][-1]["id"]

    only_dead = c.events(kind="job.dead")["events"]
    assert {e["type"] for e in only_dead} == {"job.dead"}
    assert sorted(e["job_id"] for e in only_dead if (e["job_id"] or "").startswith("ev-")) == REFUSED
    both = c.events(kind=["job.completed", "job.dead"], queue=["default"])["events"]
    assert ids(both) == ids([e for e in page["events"] if e["type"] in ("job.completed", "job.dead")])
    assert c.events(queue="callbacks")["events"] == []

    # Two at a time, each page read on from the one before.
    paged: list[Event] = []
    after: str | None = None
    while True:
        next_page = c.events(kind="job.completed", limit=2, after=after)
        assert next_page["from"] == after
        assert len(next_page["events"]) <= 2
        paged += next_page["events"]
        after = next_page["next_cursor"]
        if not next_page["more"]:
            break
    assert ids(paged) == ids([e for e in page["events"] if e["type"] == "job.completed"])
    assert c.events(after=page["next_cursor"])["events"] == []

    with pytest.raises(RedialError) as err:
        c.events(kind="job.finished")
    assert (err.value.status, err.value.code) == (400, "invalid_event_kind")


def test_stream_stopped_and_resumed_after_the_last_id_gets_the_log_once(log: Log) -> None:
    c = log.client
    everything = log.events()
    assert len(everything) >= len(OK) + len(REFUSED)

    first = c.stream_events(after="0-0")
    head = take(first, 2, "the first two events")
    first.close()

    second = c.stream_events(after=head[-1]["id"])
    rest = take(second, len(everything) - len(head), "the rest of the log")
    assert head + rest == everything, "nothing missed, nothing twice, in the log's order"

    log.finish("ev-live-1", True)
    [live] = take(second, 1, "the event of a job finished while the stream is open")
    assert (live["type"], live["job_id"]) == ("job.completed", "ev-live-1")
    second.close()
    assert log.events() == everything + [live], "the page lists what the stream gave"


def test_a_broken_connection_is_reopened_with_last_event_id(log: Log, proxy: Proxy) -> None:
    everything = log.events()
    with Redial(proxy.url) as c:
        stream = c.stream_events(after="0-0")
        earlier = take(stream, len(everything), "the log so far")
        assert earlier == everything
        assert len(proxy.heads) == 1

        proxy.cut()
        log.finish("ev-cut-ok", True)
        log.finish("ev-cut-refused", False)
        after_cut = take(stream, 2, "the events of the jobs finished after the cut")
        assert [(e["job_id"], e["type"]) for e in after_cut] == [
            ("ev-cut-ok", "job.completed"), ("ev-cut-refused", "job.dead"),
        ]
        assert len(proxy.heads) >= 2, "the stream was opened again"
        assert last_event_id(proxy.heads[1]) == earlier[-1]["id"], "after the last event yielded"
        assert last_event_id(proxy.heads[0]) is None
        assert log.events() == earlier + after_cut, "the union is the log: no gap, no repeat"

        stream.close()
        wait_for(lambda: proxy.connections() == 0, "the stream's connection to close")


def test_an_error_answer_is_raised_at_once_and_a_missing_server_after_the_retries(
    log: Log, proxy: Proxy,
) -> None:
    with Redial(proxy.url, max_retries=3) as c:
        with pytest.raises(RedialError) as err:
            next(c.stream_events(kind="job.finished"))
        assert (err.value.status, err.value.code) == (400, "invalid_event_kind")
        assert len(proxy.heads) == 1, "a 400 is not retried"

    gone = Server()
    url = gone.url
    gone.stop()
    with Redial(url, max_retries=1) as c:
        with pytest.raises(RedialConnectionError):
            next(c.stream_events())


def test_the_stream_sends_the_token(token_server: Server, receiver: Receiver) -> None:
    with Redial(token_server.url, token="") as anonymous:
        with pytest.raises(RedialError) as err:
            next(anonymous.stream_events(after="0-0"))
        assert err.value.status == 401

    with Redial(token_server.url, token="secret") as c:
        stream = c.stream_events(after="0-0")
        job = c.enqueue({"request": {"method": "POST", "url": receiver.origin + "/ok"}})
        # The server is shared with other tests: read on until this job's event.
        while True:
            [event] = take(stream, 1, f"the event of job {job['id']}")
            if event["job_id"] == job["id"]:
                break
        stream.close()
        assert event["type"] == "job.completed"


def test_async_events_and_stream(log: Log, proxy: Proxy) -> None:
    async def read(stream: AsyncIterator[Event], n: int) -> list[Event]:
        return [await anext(stream) for _ in range(n)]

    async def main() -> None:
        everything = log.events()
        async with AsyncRedial(proxy.url) as c:
            page = await c.events(kind=["job.dead"], limit=1)
            assert [e["type"] for e in page["events"]] == ["job.dead"]
            assert page["more"] is True

            async with contextlib.aclosing(c.stream_events(after="0-0")) as stream:
                earlier = await asyncio.wait_for(read(stream, len(everything)), WAIT)
                assert earlier == everything
                proxy.cut()
                await asyncio.to_thread(log.finish, "ev-async", True)
                [after_cut] = await asyncio.wait_for(read(stream, 1), WAIT)
                assert after_cut["job_id"] == "ev-async"
                assert last_event_id(proxy.heads[1]) == earlier[-1]["id"]
            await asyncio.to_thread(wait_for, lambda: proxy.connections() == 0, "the stream to close")

            # Cancelling the task that waits on the stream closes its connection.
            quiet = c.stream_events(kind="endpoint.paused")
            waiting = asyncio.ensure_future(anext(quiet))
            await asyncio.to_thread(wait_for, lambda: proxy.connections() == 1, "the stream to open")
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            await asyncio.to_thread(wait_for, lambda: proxy.connections() == 0, "the stream to close")

    asyncio.run(main())
