# The one source of both clients: client.py (`Redial`) is generated from this file by
# `python3 clients/python/unasync.py`, which explains its rules; tests/test_unasync.py checks it.
"""The asynchronous client, `AsyncRedial`: sends the calls built in _core over httpx.AsyncClient,
with retries."""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator, Iterable, Mapping, cast

import httpx

from . import _core, _stream
from ._sse import SseParser
from .types import (
    Affected, BatchResult, DeadGroups, DeadLetterFilter, DeadPatterns, Dismissed, Endpoint, Event,
    EventKind, EventPage, Job, JobInput, Operation, OrderingKeys, Queue, ReplayPreview, Schedule,
    ScheduleInput, Stats,
)


class AsyncRedial:
    """A client for one Redial server (use `async with` or `await aclose()`).

    base_url defaults to $REDIAL_SERVER, then http://127.0.0.1:8080; token to $REDIAL_TOKEN.
    Connection errors, 429 and 503 are retried up to max_retries times (honouring Retry-After);
    no other error is.
    """

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        timeout: float = 10.0,
        max_retries: int = 3,
    ) -> None:
        self.base_url = _core.resolve_base_url(base_url)
        self.max_retries = max(0, max_retries)
        self._timeout = timeout
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=_core.default_headers(_core.resolve_token(token)),
            timeout=timeout,
        )

    async def __aenter__(self) -> "AsyncRedial":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: _core.Call) -> Any:
        content, headers = _core.encode_body(call)
        retry = 0
        while True:
            try:
                r = await self._http.request(
                    call.method,
                    call.path,
                    params=call.params,
                    content=content,
                    headers=headers,
                    timeout=httpx.USE_CLIENT_DEFAULT if call.timeout is None else call.timeout,
                )
            except httpx.TransportError as e:
                if retry >= self.max_retries:
                    raise _core.connection_error(self.base_url, e) from e
                await asyncio.sleep(_core.backoff(retry))
                retry += 1
                continue
            delay = _core.retry_delay(r.status_code, r.headers, retry)
            if delay is not None and retry < self.max_retries:
                await asyncio.sleep(delay)
                retry += 1
                continue
            return _core.result(r.status_code, r.headers, r.content)

    # jobs
    async def enqueue(self, job: JobInput | Mapping[str, Any]) -> Job:
        return cast(Job, await self._send(_core.enqueue(job)))

    async def enqueue_batch(self, jobs: list[JobInput] | list[Mapping[str, Any]]) -> BatchResult:
        return cast(BatchResult, await self._send(_core.enqueue_batch(list(jobs))))

    async def get_job(self, id: str) -> Job:
        return cast(Job, await self._send(_core.get_job(id)))

    async def get_job_after(self, id: str, wait: float) -> Job:
        """The job once it has finished (completed, dead or cancelled), or as it stands when
        `wait` seconds end (at most 60): one request, answered when the job changes."""
        return cast(Job, await self._send(_core.get_job_after(id, wait, self._timeout)))

    async def wait_for_job(self, id: str, timeout: float = 60.0) -> Job:
        """Waits up to `timeout` seconds for the job to finish, in waits of at most 60 s, and
        returns it as it stands then: finished, unless the time ran out (check its state)."""
        end = time.monotonic() + timeout
        while True:
            left = max(0.0, end - time.monotonic())
            job = await self.get_job_after(id, min(left, _core.MAX_WAIT))
            if job["state"] in _core.FINISHED or left <= _core.MAX_WAIT:
                return job

    async def list_jobs(self, **filters: Any) -> AsyncIterator[Job]:
        """Every job matching queue=, state=, category=, endpoint=, pattern=,
        idempotency_key= (exactly), tag= (exactly) and reason_text= (dead letters whose reason has
        words starting with each word given), across pages of limit= jobs."""
        cursor: str | None = None
        while True:
            page = await self._send(_core.list_jobs_page(filters, cursor))
            for job in page["jobs"]:
                yield job
            cursor = page.get("next_cursor")
            if not cursor:
                return

    async def replay(
        self, id: str, patch: Mapping[str, Any] | None = None, key: str | None = None
    ) -> Job:
        """Replays a dead job: as it was, or with its request or routing patched (url or
        url_prefix, headers, body, timeout, policy, queue, endpoint) and its idempotency key kept
        ("keep", the default) or renewed ("renew")."""
        return cast(Job, await self._send(_core.replay(id, patch, key, False)))

    async def preview_replay(
        self, id: str, patch: Mapping[str, Any] | None = None, key: str | None = None
    ) -> ReplayPreview:
        """What replay(id, patch, key) would do; changes nothing."""
        return cast(ReplayPreview, await self._send(_core.replay(id, patch, key, True)))

    async def preview_dead_letters(self, filter: DeadLetterFilter) -> ReplayPreview:
        """What replay_dead_letters(filter) would do with the filter's patch; changes nothing."""
        return cast(ReplayPreview, await self._send(_core.dead_letters("replay", filter, True)))

    async def dismiss(self, id: str) -> Dismissed:
        return cast(Dismissed, await self._send(_core.job_action(id, "dismiss")))

    async def cancel(self, id: str) -> Job:
        return cast(Job, await self._send(_core.job_action(id, "cancel")))

    # dead letters
    async def replay_dead_letters(self, filter: DeadLetterFilter | Mapping[str, Any]) -> Affected:
        return cast(Affected, await self._send(_core.dead_letters("replay", filter)))

    async def dismiss_dead_letters(self, filter: DeadLetterFilter | Mapping[str, Any]) -> Affected:
        return cast(Affected, await self._send(_core.dead_letters("dismiss", filter)))

    async def operation(self, id: str) -> Operation:
        """A bulk replay's or dismiss's progress: done of total, its state."""
        return cast(Operation, await self._send(_core.operation(id)))

    async def cancel_operation(self, id: str) -> Operation:
        """Stops a running bulk operation before its next chunk."""
        return cast(Operation, await self._send(_core.operation(id, cancel=True)))

    async def dead_letter_groups(self, **filters: Any) -> DeadGroups:
        return cast(DeadGroups, await self._send(_core.dead_letter_groups(filters)))

    async def dead_letter_patterns(self, **filters: Any) -> DeadPatterns:
        """Dead letters grouped by the pattern of their reason (numbers, ids and times masked),
        largest first; filters: queue, category, endpoint, since, until, limit. A pattern is a
        filter for dead_letter_groups, list_jobs and the bulk replay and dismiss."""
        return cast(DeadPatterns, await self._send(_core.dead_letter_patterns(filters)))

    # observation
    async def stats(self) -> Stats:
        return cast(Stats, await self._send(_core.get("/v1/stats")))

    async def endpoints(self) -> list[Endpoint]:
        """Every endpoint, by name (the server gives them a page at a time)."""
        return cast(list[Endpoint], await self._all("/v1/endpoints", "endpoints"))

    async def _all(self, path: str, key: str) -> list[Any]:
        out: list[Any] = []
        cursor: str | None = None
        while True:
            page = await self._send(_core.page(path, cursor))
            out.extend(page[key])
            cursor = page.get("next_cursor")
            if not cursor:
                return out

    async def endpoint(self, name: str) -> Endpoint:
        return cast(Endpoint, await self._send(_core.endpoint(name)))

    # the event log
    async def events(
        self,
        after: str | None = None,
        queue: str | Iterable[str] | None = None,
        kind: EventKind | Iterable[EventKind] | str | None = None,
        limit: int | None = None,
    ) -> EventPage:
        """A page of the event log (jobs completed, dead, cancelled, replayed; endpoints paused,
        resumed, breakers opened, closed) in the log's order: after= an event's id or a page's
        next_cursor (from the oldest event kept without it), only job events of queue=, only the
        kinds in kind= (a list or comma-separated), at most limit= (1 to 1000, default 100)."""
        return cast(EventPage, await self._send(_core.events(after, queue, kind, limit)))

    async def stream_events(
        self,
        after: str | None = None,
        queue: str | Iterable[str] | None = None,
        kind: EventKind | Iterable[EventKind] | str | None = None,
    ) -> AsyncIterator[Event]:
        """The event log live (Server-Sent Events): from after= (an event's id), or from now on
        without it. A connection that drops is reopened by itself, after a short pause, with
        Last-Event-ID set to the last event yielded, so nothing is missed or repeated (while the
        log keeps the events). Only the first connection gives up, after max_retries; an error
        answer other than 429 and 503 is raised.
        An async generator: closing it (`contextlib.aclosing` closes it when the loop is left), or
        cancelling the task that reads it, closes the connection."""
        # unasync: "An async generator: closing it (`contextlib.aclosing` closes it when the loop
        #   is left), or cancelling the task that reads it," -> "A generator: closing it (leaving
        #   the loop, or close())"
        follow = _stream.Follow(_stream.params(after, queue, kind), self.max_retries, self.base_url)
        while True:
            try:
                async with self._http.stream(
                    "GET", _stream.PATH, params=follow.params, headers=follow.headers(),
                    timeout=follow.timeout(self._timeout),
                ) as r:
                    if not 200 <= r.status_code < 300:
                        follow.refused(r.status_code, r.headers, await r.aread())
                    elif not follow.opened(r.status_code, r.headers):
                        return
                    else:
                        parser = SseParser()
                        async for chunk in r.aiter_bytes():
                            for message in parser.feed(chunk):
                                yield follow.take(message)
                        follow.ended(parser.retry)
            except httpx.TransportError as e:
                follow.broke(e)
            await asyncio.sleep(follow.pause())

    # schedules
    async def schedules(self) -> list[Schedule]:
        """Every schedule, by id (the server gives them a page at a time)."""
        return cast(list[Schedule], await self._all("/v1/schedules", "schedules"))

    async def schedule(self, schedule_id: str) -> Schedule:
        return cast(Schedule, await self._send(_core.schedule_call("GET", schedule_id)))

    async def create_schedule(self, schedule: ScheduleInput | Mapping[str, Any]) -> Schedule:
        """Creates a schedule; an id already there is a 409 (schedule_exists)."""
        return cast(Schedule, await self._send(_core.schedule_create(schedule)))

    async def put_schedule(self, schedule_id: str, schedule: ScheduleInput | Mapping[str, Any]) -> Schedule:
        """Creates the schedule of this id, or replaces it (keeping its pause)."""
        return cast(Schedule, await self._send(_core.schedule_put(schedule_id, schedule)))

    async def delete_schedule(self, schedule_id: str) -> None:
        """Deletes a schedule; the jobs it enqueued stay."""
        await self._send(_core.schedule_call("DELETE", schedule_id))

    async def pause_schedule(self, schedule_id: str) -> Schedule:
        return cast(Schedule, await self._send(_core.schedule_call("POST", schedule_id, "pause")))

    async def resume_schedule(self, schedule_id: str) -> Schedule:
        return cast(Schedule, await self._send(_core.schedule_call("POST", schedule_id, "resume")))

    async def queues(self) -> list[Queue]:
        page = await self._send(_core.get("/v1/queues"))
        return cast(list[Queue], page["queues"])

    async def ordering_keys(
        self,
        queue: str,
        *,
        blocked: bool = False,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> OrderingKeys:
        """A page of the queue's ordering keys with a line (in an order of its own, stable from
        page to page): each key's head (the job that goes first), how many of its jobs wait
        behind it and why the next one waits. blocked=True lists only the keys whose head is dead
        (they wait for it to be replayed or dismissed); read on with cursor=page["next_cursor"];
        limit= 1 to 500 (default 100). An unknown queue is a 404 (not_found)."""
        return cast(OrderingKeys, await self._send(_core.ordering_keys(queue, blocked, cursor, limit)))

    # control
    async def pause_endpoint(
        self,
        name: str,
        reason: str | None = None,
        for_: str | None = None,
        until: str | None = None,
        create: bool = False,
    ) -> Endpoint:
        """Holds an endpoint's jobs; an endpoint not known yet is a 404 unless `create`."""
        return cast(
            Endpoint, await self._send(_core.pause("endpoints", name, reason, for_, until, create))
        )

    async def replay_outage(self, name: str) -> dict[str, Any]:
        """Replays the endpoint's dead letters that died since its last outage began:
        {"affected", "operation", "state", "since"}."""
        return cast(
            dict[str, Any], await self._send(_core.post_action("endpoints", name, "replay-outage"))
        )

    async def resume_endpoint(self, name: str) -> Endpoint:
        return cast(Endpoint, await self._send(_core.post_action("endpoints", name, "resume")))

    async def reset_breaker(self, name: str) -> Endpoint:
        return cast(Endpoint, await self._send(_core.post_action("endpoints", name, "reset-breaker")))

    async def pause_queue(
        self, name: str, reason: str | None = None, for_: str | None = None, until: str | None = None
    ) -> Queue:
        return cast(Queue, await self._send(_core.pause("queues", name, reason, for_, until)))

    async def resume_queue(self, name: str) -> Queue:
        return cast(Queue, await self._send(_core.post_action("queues", name, "resume")))
