"""Signature verification: the Standard Webhooks test vector, and a real signed delivery from
`redial serve` checked with verify_webhook and with the reference `standardwebhooks` library."""

from __future__ import annotations

import base64
import json

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError as ReferenceError

from conftest import SIGNING_SECRET, Receiver, Server, wait_for
from redial_client import Redial, WebhookVerificationError, sign, verify_webhook

VECTOR_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
VECTOR_TS = 1614265330
VECTOR_BODY = '{"test": 2432232314}'
VECTOR_SIG = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
WRONG_SECRET = "whsec_" + base64.b64encode(b"not the secret, not at all!!!!!").decode()


def vector_headers(signature: str = VECTOR_SIG) -> dict[str, str]:
    return {"webhook-id": VECTOR_ID, "webhook-timestamp": str(VECTOR_TS), "webhook-signature": signature}


def test_spec_vector() -> None:
    assert sign(SIGNING_SECRET, VECTOR_ID, VECTOR_TS, VECTOR_BODY) == VECTOR_SIG
    assert verify_webhook(SIGNING_SECRET, vector_headers(), VECTOR_BODY, now=VECTOR_TS) == VECTOR_ID
    headers = {k.title(): v for k, v in vector_headers().items()}  # header names in any case
    assert verify_webhook([SIGNING_SECRET], headers, VECTOR_BODY.encode(), now=VECTOR_TS + 299) == VECTOR_ID


def test_rotation_any_secret_and_any_signature() -> None:
    both = f"v1,{base64.b64encode(b'x' * 32).decode()} {VECTOR_SIG}"
    assert verify_webhook([WRONG_SECRET, SIGNING_SECRET], vector_headers(both), VECTOR_BODY, now=VECTOR_TS)


def test_failures_are_typed() -> None:
    with pytest.raises(WebhookVerificationError, match="stale"):
        verify_webhook(SIGNING_SECRET, vector_headers(), VECTOR_BODY, now=VECTOR_TS + 301)
    with pytest.raises(WebhookVerificationError, match="stale"):
        verify_webhook(SIGNING_SECRET, vector_headers(), VECTOR_BODY, now=VECTOR_TS - 301)
    with pytest.raises(WebhookVerificationError, match="no signature matches"):
        verify_webhook(WRONG_SECRET, vector_headers(), VECTOR_BODY, now=VECTOR_TS)
    with pytest.raises(WebhookVerificationError, match="no signature matches"):
        verify_webhook(SIGNING_SECRET, vector_headers(), VECTOR_BODY + " ", now=VECTOR_TS)
    with pytest.raises(WebhookVerificationError, match="missing webhook-signature"):
        verify_webhook(SIGNING_SECRET, {"webhook-id": "a", "webhook-timestamp": "1"}, "", now=1)


def test_real_delivery_verifies(signing_server: Server, receiver: Receiver) -> None:
    with Redial(signing_server.url) as c:
        job = c.enqueue({
            "queue": "events",
            "request": {"method": "POST", "url": receiver.origin + "/events",
                        "body": {"event": "invoice.paid", "amount": 4200}},
        })
        wait_for(lambda: c.get_job(job["id"])["state"] == "completed", "the signed delivery")
    assert receiver.count() == 1
    delivered = receiver.requests[0]
    headers, body = delivered["headers"], delivered["body"]
    assert json.loads(body) == {"event": "invoice.paid", "amount": 4200}
    assert headers["webhook-id"] == job["idempotency_key"]

    assert verify_webhook(SIGNING_SECRET, headers, body) == job["idempotency_key"]
    assert Webhook(SIGNING_SECRET).verify(body, headers) == {"event": "invoice.paid", "amount": 4200}

    with pytest.raises(WebhookVerificationError):
        verify_webhook(WRONG_SECRET, headers, body)
    with pytest.raises(ReferenceError):
        Webhook(WRONG_SECRET).verify(body, headers)


def test_unsigned_queue_sends_no_signature(server: Server, receiver: Receiver) -> None:
    with Redial(server.url) as c:
        job = c.enqueue({"request": {"method": "POST", "url": receiver.origin, "body": {}}})
        wait_for(lambda: c.get_job(job["id"])["state"] == "completed", "the delivery")
    with pytest.raises(WebhookVerificationError, match="missing"):
        verify_webhook(SIGNING_SECRET, receiver.requests[0]["headers"], receiver.requests[0]["body"])
