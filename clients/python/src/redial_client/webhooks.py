"""Verifying Redial's signed deliveries (Standard Webhooks) in a receiver: timestamp tolerance,
HMAC-SHA256 over "<id>.<timestamp>.<body>", any of several secrets during a rotation."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from typing import Iterable, Mapping

from .errors import WebhookVerificationError

SECRET_PREFIX = "whsec_"


def _secret_bytes(secret: str | bytes) -> bytes:
    if isinstance(secret, bytes):
        return secret
    raw = secret[len(SECRET_PREFIX):] if secret.startswith(SECRET_PREFIX) else secret
    try:
        return base64.b64decode(raw, validate=True)
    except ValueError as e:
        raise ValueError("give a secret as whsec_ followed by base64, as in redial.toml") from e


def sign(secret: str | bytes, msg_id: str, timestamp: int, body: bytes | str) -> str:
    """The `v1,<base64>` signature Redial sends for this id, timestamp and body."""
    payload = body.encode() if isinstance(body, str) else body
    signed = f"{msg_id}.{timestamp}.".encode() + payload
    digest = hmac.new(_secret_bytes(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def _header(headers: Mapping[str, str], name: str) -> str:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    raise WebhookVerificationError(f"missing {name} header: is the queue configured with signing_secrets?")


def verify_webhook(
    secrets: str | bytes | Iterable[str | bytes],
    headers: Mapping[str, str],
    body: bytes | str,
    tolerance: int = 300,
    now: float | None = None,
) -> str:
    """Check a delivery's webhook-id, webhook-timestamp and webhook-signature headers against
    the raw body, and return the webhook-id (the job's idempotency key, to drop repeats).

    Raise WebhookVerificationError when a header is missing, the timestamp is more than
    `tolerance` seconds from `now` (default: this clock), or no signature matches any secret.
    """
    if isinstance(secrets, (str, bytes)):
        secrets = [secrets]
    keys = [_secret_bytes(s) for s in secrets]
    if not keys:
        raise ValueError("give at least one signing secret")
    msg_id = _header(headers, "webhook-id")
    ts_text = _header(headers, "webhook-timestamp")
    signatures = _header(headers, "webhook-signature")
    try:
        timestamp = int(ts_text)
    except ValueError:
        raise WebhookVerificationError("invalid webhook-timestamp: expected unix seconds") from None
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        raise WebhookVerificationError(
            "stale webhook-timestamp: check this host's clock, or drop the replayed request"
        )
    given = [s.split(",", 1)[1] for s in signatures.split() if s.startswith("v1,")]
    for key in keys:
        expected = sign(key, msg_id, timestamp, body).split(",", 1)[1]
        for candidate in given:
            if hmac.compare_digest(expected.encode(), candidate.encode()):
                return msg_id
    raise WebhookVerificationError("no signature matches: check the signing secret")
