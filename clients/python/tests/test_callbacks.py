"""Callbacks: bodies signed by the reference `standardwebhooks` library and read with
parse_callback (text and base64 responses, none at all, bad signatures, bodies that are not
callback events), and a real callback from `redial serve` for a finished job."""

from __future__ import annotations

import base64
import copy
import json
from datetime import datetime, timezone
from typing import Any, Iterator

import pytest
from standardwebhooks import Webhook

from conftest import SIGNING_SECRET, Receiver, Server, wait_for
from redial_client import (
    CallbackEvent,
    CallbackParseError,
    Redial,
    WebhookVerificationError,
    callback_response_body,
    parse_callback,
)

WRONG_SECRET = "whsec_" + base64.b64encode(b"not the secret, not at all!!!!!").decode()
ID = "callback~completed~7.0~charge-1"
AT = datetime(2026, 12, 3, 15, 0, 0, tzinfo=timezone.utc)
NOW = AT.timestamp()

COMPLETED: CallbackEvent = {
    "type": "job.completed",
    "timestamp": "2026-12-03T14:59:58.123Z",
    "data": {
        "id": "charge-1", "queue": "payments", "endpoint": "https://api.example.com",
        "group": None, "tags": ["invoice"], "idempotency_key": "charge-1",
        "state": "completed", "category": None, "reason": "200 OK",
        "attempts": 1, "unknown_attempts": 0, "deferrals": 0, "stalls": 0, "replays": 0, "runs": 2,
        "created_at": "2026-12-03T14:59:50Z", "finished_at": "2026-12-03T14:59:58.123Z",
        "response": {
            "status": 200, "headers": {"content-type": "application/json"},
            "body": '{"charged":true}', "body_encoding": "text",
            "content_type": "application/json", "truncated": False,
        },
        "error": None,
    },
}


def event(type: str = "job.completed", **data: Any) -> dict[str, Any]:
    e: dict[str, Any] = copy.deepcopy(dict(COMPLETED))
    e["type"] = type
    e["data"].update(data)
    return e


def signed(body: str, secret: str = SIGNING_SECRET) -> tuple[dict[str, str], str]:
    """The headers Redial would send with `body`, signed by the reference library."""
    signature = Webhook(secret).sign(ID, AT, body)
    return {"webhook-id": ID, "webhook-timestamp": str(int(NOW)), "webhook-signature": signature}, body


def test_completed_event_reads_typed_with_the_webhook_id() -> None:
    headers, body = signed(json.dumps(COMPLETED))
    parsed = parse_callback(SIGNING_SECRET, headers, body, now=NOW)
    assert parsed.id == ID
    assert parsed.event == COMPLETED
    webhook_id, got = parsed  # a named tuple: unpacks too
    assert (webhook_id, got) == (ID, COMPLETED)
    assert callback_response_body(got["data"]["response"]) == '{"charged":true}'  # type: ignore[arg-type]
    # bytes, header names in another case, and a rotated secret read the same
    titled = {k.title(): v for k, v in headers.items()}
    assert parse_callback([WRONG_SECRET, SIGNING_SECRET], titled, body.encode(), now=NOW).event == COMPLETED


def test_base64_response_body_decodes_to_bytes() -> None:
    raw = b"\xff\x00\xfe\x80"
    sent = event(
        "job.dead", state="dead", category="permanent", reason="400 Bad Request",
        response={"status": 400, "headers": {}, "body": base64.b64encode(raw).decode(),
                  "body_encoding": "base64", "content_type": "application/octet-stream",
                  "truncated": True},
    )
    headers, body = signed(json.dumps(sent))
    parsed = parse_callback(SIGNING_SECRET, headers, body, now=NOW)
    assert parsed.event["type"] == "job.dead"
    response = parsed.event["data"]["response"]
    assert response is not None and response["truncated"] is True
    assert callback_response_body(response) == raw


def test_no_response_carries_the_transport_error() -> None:
    sent = event("job.dead", state="dead", category="transient_exhausted", response=None, error="connect")
    parsed = parse_callback(SIGNING_SECRET, *signed(json.dumps(sent)), now=NOW)
    assert parsed.event["data"]["response"] is None
    assert parsed.event["data"]["error"] == "connect"
    assert callback_response_body({"status": 204, "headers": {}, "body": None, "body_encoding": "text",
                                   "content_type": None, "truncated": False}) is None


def test_bad_signature_is_refused_before_the_body_is_read() -> None:
    headers, body = signed(json.dumps(COMPLETED))
    with pytest.raises(WebhookVerificationError, match="no signature matches"):
        parse_callback(WRONG_SECRET, headers, body, now=NOW)
    with pytest.raises(WebhookVerificationError, match="no signature matches"):
        parse_callback(SIGNING_SECRET, headers, body.replace("charge-1", "charge-2"), now=NOW)
    with pytest.raises(WebhookVerificationError, match="stale"):
        parse_callback(SIGNING_SECRET, headers, body, now=NOW + 301)
    # not JSON, but unsigned: the signature's failure is the one reported
    with pytest.raises(WebhookVerificationError, match="missing"):
        parse_callback(SIGNING_SECRET, {}, "not json", now=NOW)


@pytest.mark.parametrize(("body", "message"), [
    ('{"order": 42}', "not a callback event"),
    ("not json", "not JSON"),
    ("[1, 2]", "not a callback event"),
    (json.dumps(event("invoice.paid")), "not a callback event"),
    (json.dumps({"type": "job.completed", "timestamp": "2026-12-03T15:00:00Z"}), "lacks"),
    (json.dumps(event(state="dead")), 'data.state is "dead"'),
    (json.dumps(event(response={"status": 200})), "body_encoding"),
])
def test_signed_body_that_is_not_a_callback_event(body: str, message: str) -> None:
    with pytest.raises(CallbackParseError, match=message):
        parse_callback(SIGNING_SECRET, *signed(body), now=NOW)


@pytest.fixture(scope="module")
def callback_server() -> Iterator[Server]:
    s = Server(config=f'[queues.callbacks]\nsigning_secrets = ["{SIGNING_SECRET}"]\n')
    yield s
    s.stop()


def test_real_callback_reads(callback_server: Server, receiver: Receiver) -> None:
    with Redial(callback_server.url) as c:
        job = c.enqueue({
            "tags": ["invoice"],
            "request": {"method": "POST", "url": receiver.origin + "/charge", "body": {"amount": 4200}},
            "callback": {"url": receiver.origin + "/done", "on": ["completed"],
                         "headers": {"authorization": "Bearer app-secret"}},
        })
        delivered = wait_for(
            lambda: next((r for r in list(receiver.requests) if r["path"] == "/done"), None), "the callback"
        )
        finished = c.get_job(job["id"])
    headers, body = delivered["headers"], delivered["body"]
    assert headers["authorization"] == "Bearer app-secret"
    assert finished["callback"] is not None and finished["callback"]["on"] == ["completed"]

    webhook_id, e = parse_callback(SIGNING_SECRET, headers, body)
    assert webhook_id == finished["callback_delivery"]
    assert e["type"] == "job.completed"
    data = e["data"]
    assert (data["id"], data["state"], data["tags"]) == (job["id"], "completed", ["invoice"])
    assert (data["attempts"], data["runs"]) == (0, 1)  # attempts counts failed ones
    assert data["response"] is not None and data["response"]["status"] == 200
    assert data["response"]["content_type"] == "application/json"
    assert callback_response_body(data["response"]) == '{"ok":true}'
    assert Webhook(SIGNING_SECRET).verify(body, headers) == e
