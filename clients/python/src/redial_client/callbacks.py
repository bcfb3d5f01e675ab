"""Reading a completion callback in its receiver: the signature is checked first
(verify_webhook), then the body is checked to be a callback event before it is handed out."""

from __future__ import annotations

import base64
import json
from typing import Any, Iterable, Mapping, NamedTuple, cast

from .errors import CallbackParseError
from .types import CallbackEvent, CallbackResponse
from .webhooks import verify_webhook

_TYPES = ("job.completed", "job.dead", "job.cancelled")


class VerifiedCallback(NamedTuple):
    """A verified callback: `id` is the webhook-id, the same on every attempt of one event
    (deduplicate on it), and `event` the body."""

    id: str
    event: CallbackEvent


def parse_callback(
    secrets: str | bytes | Iterable[str | bytes],
    headers: Mapping[str, str],
    body: bytes | str,
    tolerance: int = 300,
    now: float | None = None,
) -> VerifiedCallback:
    """Verify a callback delivery as verify_webhook does, then read its body as a CallbackEvent.

    Raise WebhookVerificationError when the signature does not verify, and CallbackParseError
    when a verified body is not a callback event (a job's own delivery sent to the callback
    URL, say).
    """
    webhook_id = verify_webhook(secrets, headers, body, tolerance=tolerance, now=now)
    try:
        value = json.loads(body)
    except ValueError:
        raise CallbackParseError(
            "the body is not JSON: give this URL only as a job's callback url"
        ) from None
    return VerifiedCallback(webhook_id, _callback_event(value))


def callback_response_body(response: CallbackResponse) -> str | bytes | None:
    """The response body as sent: str for text, bytes when Redial kept it as base64, None when
    none was kept."""
    body = response["body"]
    if body is None:
        return None
    if response["body_encoding"] == "base64":
        return base64.b64decode(body)
    return body


# Checks the fields a handler acts on; other fields pass as the server wrote them, so a newer
# server's additions still read.
def _callback_event(value: Any) -> CallbackEvent:
    if not isinstance(value, dict) or value.get("type") not in _TYPES:
        raise CallbackParseError(
            "the body is not a callback event (type job.completed, job.dead or job.cancelled): "
            "give this URL only as a job's callback url"
        )
    kind = value["type"]
    data = value.get("data")
    if (
        not isinstance(value.get("timestamp"), str)
        or not isinstance(data, dict)
        or not isinstance(data.get("id"), str)
        or not isinstance(data.get("queue"), str)
    ):
        raise CallbackParseError(f"the {kind} event lacks timestamp, data.id or data.queue")
    if data.get("state") != kind.removeprefix("job."):
        raise CallbackParseError(f"the {kind} event's data.state is {json.dumps(data.get('state'))}")
    response = data.get("response", ...)
    if response is not None and not (
        isinstance(response, dict)
        and isinstance(response.get("status"), int)
        and response.get("body_encoding") in ("text", "base64")
    ):
        raise CallbackParseError(f"the {kind} event's data.response has no status or body_encoding")
    return cast(CallbackEvent, value)
