"""The async client against a real `redial serve`: the same basics as the sync one."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from conftest import WAIT, Receiver, Server
from redial_client import AsyncRedial, RedialError


def test_async_basics(server: Server, receiver: Receiver) -> None:
    async def main() -> None:
        async with AsyncRedial(server.url) as c:
            job = {"request": {"method": "POST", "url": receiver.origin + "/a", "body": "raw"}}
            first = await c.enqueue(job)
            again = await c.enqueue({**job, "id": first["id"]})
            assert (first["deduplicated"], again["deduplicated"]) == (False, True)
            with pytest.raises(RedialError) as err:
                await c.enqueue({"id": first["id"], "request": {"method": "GET", "url": receiver.origin}})
            assert (err.value.status, err.value.code) == (409, "conflict")
            batch = await c.enqueue_batch([job, job, job])
            assert batch["inserted"] == 3
            ids = {first["id"]} | {j["id"] for j in batch["jobs"]}

            loop = asyncio.get_running_loop()
            deadline = loop.time() + WAIT
            while not all([(await c.get_job(i))["state"] == "completed" for i in ids]):
                assert loop.time() < deadline, "timed out waiting for 4 completed jobs"
                await asyncio.sleep(0.05)
            done = await c.get_job(first["id"])
            assert done["attempt_log"][0]["status"] == 200
            listed = [j["id"] async for j in c.list_jobs(endpoint=receiver.origin, limit=3)]
            assert len(listed) == 4 and set(listed) == ids
            assert receiver.requests[0]["body"] == b"raw"

            paused = await c.pause_endpoint(receiver.origin, reason="async")
            assert paused["paused_by_hand"] is not None
            assert (await c.resume_endpoint(receiver.origin))["paused_by_hand"] is None
            replayed = await c.replay_dead_letters({"endpoint": receiver.origin})
            assert (replayed["affected"], replayed["state"]) == (0, "done")
            assert "endpoints" in await c.stats()
            assert await c.queues()

    asyncio.run(main())


def test_async_ordering_keys(server: Server, receiver: Receiver) -> None:
    async def main() -> None:
        async with AsyncRedial(server.url) as c:
            key = f"py-async-{uuid.uuid4()}"
            job = {"request": {"method": "POST", "url": receiver.origin + "/o"},
                   "ordering_key": key, "run_at": "2999-01-01T00:00:00Z"}
            first = await c.enqueue(job)
            await c.enqueue(job)
            assert first["ordering_key"] == key
            lines = {line["key"]: line for line in (await c.ordering_keys("default", limit=500))["keys"]}
            assert (lines[key]["head"]["id"], lines[key]["behind"]) == (first["id"], 1)
            with pytest.raises(RedialError) as err:
                await c.ordering_keys("no-such-queue", blocked=True)
            assert (err.value.status, err.value.code) == (404, "not_found")

    asyncio.run(main())


def test_async_token_error(token_server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REDIAL_TOKEN", raising=False)

    async def main() -> None:
        async with AsyncRedial(token_server.url) as c:
            with pytest.raises(RedialError) as err:
                await c.get_job(str(uuid.uuid4()))
            assert err.value.status == 401
        async with AsyncRedial(token_server.url, token="secret") as c:
            with pytest.raises(RedialError) as err:
                await c.get_job("missing")
            assert err.value.status == 404

    asyncio.run(main())


def test_async_wait_for_job(server: Server, receiver: Receiver) -> None:
    async def main() -> None:
        async with AsyncRedial(server.url) as c:
            job = {"request": {"method": "POST", "url": receiver.origin + "/w"}}
            later = await c.enqueue({**job, "run_at": "2999-01-01T00:00:00Z"})
            assert (await c.wait_for_job(later["id"], timeout=0.2))["state"] == "scheduled"
            waiting = asyncio.ensure_future(c.wait_for_job(later["id"], timeout=60))
            await c.cancel(later["id"])
            assert (await waiting)["state"] == "cancelled"
            done = await c.enqueue(job)
            assert (await c.get_job_after(done["id"], 0))["id"] == done["id"]
            assert (await c.wait_for_job(done["id"], timeout=120))["state"] == "completed"

    asyncio.run(main())
