"""The sync client against a real `redial serve`: enqueue, dedup, conflicts, batches, jobs that
ran, listing across pages, ordering keys, dead-letter replay, tokens, endpoint and queue pauses."""

from __future__ import annotations

import uuid

import pytest

from conftest import Receiver, Server, wait_for
from redial_client import Redial, RedialError


def job_for(receiver: Receiver, **extra: object) -> dict:
    return {"request": {"method": "POST", "url": receiver.origin + "/hook", "body": {"n": 1}}, **extra}


def test_enqueue_and_same_id_deduplicates(server: Server, receiver: Receiver) -> None:
    with Redial(server.url) as c:
        job_id = f"dedup-{uuid.uuid4()}"
        first = c.enqueue(job_for(receiver, id=job_id))
        again = c.enqueue(job_for(receiver, id=job_id))
        assert first["id"] == job_id and first["deduplicated"] is False
        assert again["id"] == job_id and again["deduplicated"] is True


def test_enqueue_without_id_generates_one(server: Server, receiver: Receiver) -> None:
    with Redial(server.url) as c:
        job = job_for(receiver)
        created = c.enqueue(job)
        assert uuid.UUID(created["id"]).version == 4
        assert "id" not in job  # the caller's dict is left alone


def test_conflicting_request_is_a_409(server: Server, receiver: Receiver) -> None:
    with Redial(server.url) as c:
        job_id = f"conflict-{uuid.uuid4()}"
        c.enqueue(job_for(receiver, id=job_id))
        changed = job_for(receiver, id=job_id)
        changed["request"]["body"] = {"n": 2}
        with pytest.raises(RedialError) as err:
            c.enqueue(changed)
        assert err.value.status == 409
        assert err.value.code == "conflict"
        assert err.value.message


def test_a_job_keeps_its_group_and_a_bad_group_is_a_422(server: Server, receiver: Receiver) -> None:
    with Redial(server.url) as c:
        created = c.enqueue(job_for(receiver, group="tenant-42"))
        assert created["group"] == "tenant-42"
        assert c.get_job(created["id"])["group"] == "tenant-42"
        assert c.enqueue(job_for(receiver))["group"] is None
        with pytest.raises(RedialError) as err:
            c.enqueue(job_for(receiver, group=""))
        assert (err.value.status, err.value.code) == (422, "invalid_group")


def test_ordering_keys_list_each_key_with_its_first_job_ahead(server: Server, receiver: Receiver) -> None:
    with Redial(server.url) as c:
        # Far in the future: the jobs stay waiting, so each key keeps its line while it is read.
        later = "2999-01-01T00:00:00Z"
        a, b = f"py-{uuid.uuid4()}/a", f"py-{uuid.uuid4()}/b"
        first = c.enqueue(job_for(receiver, ordering_key=a, run_at=later))
        assert first["ordering_key"] == a
        assert c.get_job(first["id"])["ordering_key"] == a
        c.enqueue_batch([job_for(receiver, ordering_key=a, run_at=later) for _ in range(2)])
        only = c.enqueue(job_for(receiver, ordering_key=b, run_at=later))
        assert c.enqueue(job_for(receiver, run_at=later))["ordering_key"] is None

        listed = c.ordering_keys("default", limit=500)
        assert (listed["queue"], listed["ordering_on_dead"], listed["next_cursor"]) == ("default", "block", None)
        lines = {line["key"]: line for line in listed["keys"]}
        assert (lines[a]["head"]["id"], lines[a]["behind"], lines[a]["blocked"]) == (first["id"], 2, False)
        assert lines[a]["why"]
        assert (lines[b]["head"]["id"], lines[b]["behind"]) == (only["id"], 0)
        assert all(line["key"] not in (a, b) for line in c.ordering_keys("default", blocked=True)["keys"])
        default = next(q for q in c.queues() if q["name"] == "default")
        assert default["ordering_on_dead"] == "block"

        # A key a page: each page's next_cursor leads to the next key, and the last has none.
        page = c.ordering_keys("default", limit=1)
        assert page["next_cursor"]
        paged = [line["key"] for line in page["keys"]]
        while page["next_cursor"]:
            page = c.ordering_keys("default", cursor=page["next_cursor"], limit=1)
            paged += [line["key"] for line in page["keys"]]
        # In the listing's own order (the lines' numbers), every key once.
        assert paged == [line["key"] for line in listed["keys"]]

        with pytest.raises(RedialError) as err:
            c.ordering_keys("no-such-queue")
        assert (err.value.status, err.value.code) == (404, "not_found")
        with pytest.raises(RedialError) as err:
            c.enqueue(job_for(receiver, ordering_key="a\nb"))
        assert (err.value.status, err.value.code) == (422, "invalid_ordering_key")


def test_unknown_job_is_a_404(server: Server) -> None:
    with Redial(server.url) as c:
        with pytest.raises(RedialError) as err:
            c.get_job("no-such-job")
        assert (err.value.status, err.value.code) == (404, "not_found")


def test_batch(server: Server, receiver: Receiver) -> None:
    with Redial(server.url) as c:
        existing = c.enqueue(job_for(receiver))
        result = c.enqueue_batch([job_for(receiver), job_for(receiver), job_for(receiver, id=existing["id"])])
        assert (result["inserted"], result["deduplicated"]) == (2, 1)
        assert [j["deduplicated"] for j in result["jobs"]] == [False, False, True]
        assert result["jobs"][2]["id"] == existing["id"]


def test_get_job_after_it_ran(server: Server, receiver: Receiver) -> None:
    with Redial(server.url) as c:
        created = c.enqueue(job_for(receiver))
        job = wait_for(lambda: (j := c.get_job(created["id"]))["state"] == "completed" and j, "completed")
        assert job["runs"] == 1
        assert len(job["attempt_log"]) == 1
        attempt = job["attempt_log"][0]
        assert (attempt["number"], attempt["status"], attempt["category"], attempt["decision"]) == (
            1, 200, "success", "complete")
        assert receiver.count() == 1
        assert receiver.requests[0]["body"] == b'{"n":1}'


def test_list_jobs_iterates_every_page(server: Server, receiver: Receiver) -> None:
    with Redial(server.url) as c:
        name = f"list-{uuid.uuid4()}"
        ids = {c.enqueue(job_for(receiver, endpoint=name))["id"] for _ in range(7)}
        listed = [j["id"] for j in c.list_jobs(endpoint=name, limit=2)]
        assert len(listed) == 7 and set(listed) == ids
        assert list(c.list_jobs(endpoint=f"none-{uuid.uuid4()}")) == []
        with pytest.raises(TypeError):
            list(c.list_jobs(colour="red"))


def test_list_jobs_by_idempotency_key_and_tag(server: Server, receiver: Receiver) -> None:
    with Redial(server.url) as c:
        tag = f"order:{uuid.uuid4()}"
        key = f"charge-{uuid.uuid4()}"
        first = c.enqueue({**job_for(receiver), "idempotency_key": key, "tags": [tag]})
        second = c.enqueue({**job_for(receiver), "tags": [tag]})
        assert [j["id"] for j in c.list_jobs(idempotency_key=key)] == [first["id"]]
        assert sorted(j["id"] for j in c.list_jobs(tag=tag)) == sorted([first["id"], second["id"]])
        derived = second["idempotency_key"]
        assert [j["id"] for j in c.list_jobs(idempotency_key=derived)] == [second["id"]]


def test_dead_letters_replay_by_filter(server: Server, receiver: Receiver) -> None:
    with Redial(server.url) as c:
        receiver.status = 400  # permanent: dead at once
        ids = [c.enqueue(job_for(receiver))["id"] for _ in range(3)]
        wait_for(lambda: all(c.get_job(i)["state"] == "dead" for i in ids), "3 dead jobs")
        assert {c.get_job(i)["category"] for i in ids} == {"permanent"}
        dead = list(c.list_jobs(endpoint=receiver.origin, state="dead"))
        assert len(dead) == 3
        # One cause, one pattern: a filter for the listing, the groups and the replay.
        patterns = c.dead_letter_patterns(endpoint=receiver.origin)
        assert (patterns["total"], patterns["count"]) == (3, 1)
        pattern = patterns["patterns"][0]["pattern"]
        assert pattern.startswith("400 bad request"), pattern
        assert len(list(c.list_jobs(endpoint=receiver.origin, pattern=pattern))) == 3
        assert c.dead_letter_groups(endpoint=receiver.origin, pattern=pattern)["total"] == 3
        receiver.status = 200
        replayed = c.replay_dead_letters(
            {"endpoint": receiver.origin, "category": "permanent", "pattern": pattern}
        )
        assert (replayed["affected"], replayed["state"]) == (3, "done")
        assert c.operation(replayed["operation"])["done"] == 3
        wait_for(lambda: all(c.get_job(i)["state"] == "completed" for i in ids), "3 replayed jobs completed")
        assert all(c.get_job(i)["replays"] == 1 for i in ids)
        assert receiver.count() == 6
        with pytest.raises(ValueError):
            c.replay_dead_letters({})


def test_replay_with_changes(server: Server, receiver: Receiver) -> None:
    with Redial(server.url) as c:
        receiver.status = 404
        job = c.enqueue(job_for(receiver))
        wait_for(lambda: c.get_job(job["id"])["state"] == "dead", "a dead job")
        patch = {"headers": {"set": {"X-Api-Version": "2"}}}
        preview = c.preview_dead_letters({"endpoint": receiver.origin, "patch": patch})
        assert (preview["matched"], preview["affected"], preview["skipped"]) == (1, 1, 0)
        assert "header x-api-version set" in preview["preview"][0]["changed"]
        one = c.preview_replay(job["id"], patch, key="renew")
        assert "idempotency key renewed" in one["preview"][0]["changed"]
        assert c.get_job(job["id"])["state"] == "dead"
        receiver.status = 200
        c.replay(job["id"], patch)
        done = wait_for(lambda: c.get_job(job["id"])["state"] == "completed", "completed")
        shown = c.get_job(job["id"])
        assert shown["idempotency_key"] == job["idempotency_key"]
        assert shown["changes"][0]["changed"] == ["header x-api-version set"]
        assert done


def test_dismiss_and_cancel(server: Server, receiver: Receiver) -> None:
    with Redial(server.url) as c:
        later = c.enqueue(job_for(receiver, run_at="2999-01-01T00:00:00Z"))
        assert c.cancel(later["id"])["state"] == "cancelled"
        receiver.status = 400
        dead = c.enqueue(job_for(receiver))
        wait_for(lambda: c.get_job(dead["id"])["state"] == "dead", "a dead job")
        assert c.dismiss(dead["id"]) == {"id": dead["id"], "dismissed": True}


def test_token_required(token_server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REDIAL_TOKEN", raising=False)
    with Redial(token_server.url) as c:
        with pytest.raises(RedialError) as err:
            c.stats()
        assert err.value.status == 401
        assert err.value.code == "unauthorized"
    with Redial(token_server.url, token="wrong") as c:
        with pytest.raises(RedialError) as err:
            c.stats()
        assert err.value.status == 401
    with Redial(token_server.url, token="secret") as c:
        assert "queues" in c.stats()
    monkeypatch.setenv("REDIAL_TOKEN", "secret")
    monkeypatch.setenv("REDIAL_SERVER", token_server.url)
    with Redial() as c:
        # the callbacks queue is always there, for completion callbacks' deliveries
        assert sorted(q["name"] for q in c.queues()) == ["callbacks", "default"]


def test_pause_and_resume_an_endpoint(server: Server, receiver: Receiver) -> None:
    with Redial(server.url) as c:
        # no job named it yet: refused unless the pause asks to create it
        with pytest.raises(RedialError) as err:
            c.pause_endpoint(receiver.origin, reason="provider maintenance")
        assert (err.value.status, err.value.code) == (404, "not_found")
        paused = c.pause_endpoint(
            receiver.origin, reason="provider maintenance", for_="30m", create=True
        )
        assert paused["name"] == receiver.origin
        assert paused["paused_by_hand"] is not None
        assert paused["paused_by_hand"]["reason"] == "provider maintenance"
        job = c.enqueue(job_for(receiver))
        assert c.endpoint(receiver.origin)["paused_by_hand"] is not None
        assert c.get_job(job["id"])["state"] in ("ready", "scheduled")
        assert receiver.count() == 0
        resumed = c.resume_endpoint(receiver.origin)
        assert resumed["paused_by_hand"] is None
        wait_for(lambda: c.get_job(job["id"])["state"] == "completed", "the held job to run")
        assert receiver.origin in [e["name"] for e in c.endpoints()]
        assert c.reset_breaker(receiver.origin)["breaker"] == "closed"
        with pytest.raises(ValueError):
            c.pause_endpoint(receiver.origin, for_="1m", until="2999-01-01T00:00:00Z")


def test_pause_and_resume_a_queue(server: Server) -> None:
    with Redial(server.url) as c:
        try:
            assert c.pause_queue("default", reason="deploy")["paused_by_hand"]["reason"] == "deploy"
            default = next(q for q in c.queues() if q["name"] == "default")
            assert default["paused_by_hand"] is not None
        finally:
            assert c.resume_queue("default")["paused_by_hand"] is None


def test_schedules_round_trip(server: Server) -> None:
    with Redial(server.url) as c:
        sid = f"py-{uuid.uuid4().hex[:8]}"
        created = c.create_schedule(
            {
                "id": sid,
                "cron": "0 9 * * 1-5",
                "timezone": "Europe/Berlin",
                "job": {"request": {"method": "POST", "url": "https://api.example.com/report"}},
            }
        )
        assert created["id"] == sid and created["source"] == "api" and created["next_at"]
        with pytest.raises(RedialError) as err:
            c.create_schedule({"id": sid, "every": "1h", "job": {"request": {"method": "GET", "url": "https://api.example.com/"}}})
        assert err.value.status == 409 and err.value.code == "schedule_exists"
        replaced = c.put_schedule(
            sid, {"every": "1h", "missed": "skip", "job": {"request": {"method": "GET", "url": "https://api.example.com/"}}}
        )
        assert replaced["missed"] == {"policy": "skip"}
        assert any(s["id"] == sid for s in c.schedules())
        assert c.pause_schedule(sid)["paused"] is True
        assert c.resume_schedule(sid)["paused"] is False
        c.delete_schedule(sid)
        with pytest.raises(RedialError) as err:
            c.schedule(sid)
        assert err.value.status == 404


def test_wait_for_job(server: Server, receiver: Receiver) -> None:
    with Redial(server.url) as c:
        later = c.enqueue(job_for(receiver, run_at="2999-01-01T00:00:00Z"))
        assert c.wait_for_job(later["id"], timeout=0.2)["state"] == "scheduled"
        assert c.get_job_after(later["id"], 0.1)["state"] == "scheduled"
        c.cancel(later["id"])
        assert c.wait_for_job(later["id"], timeout=60)["state"] == "cancelled"
        done = c.enqueue(job_for(receiver))
        finished = c.wait_for_job(done["id"], timeout=120)
        assert finished["state"] == "completed"
        assert len(finished["attempt_log"]) == 1
        receiver.status = 400
        dead = c.enqueue(job_for(receiver))
        assert c.wait_for_job(dead["id"], timeout=120)["state"] == "dead"
        receiver.status = 200
        with pytest.raises(RedialError) as err:
            c.get_job_after("no-such-job", 1)
        assert err.value.code == "not_found"
