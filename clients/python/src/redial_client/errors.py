"""Typed errors: what the API refused (RedialError), what never reached it (RedialConnectionError),
a delivery that failed verification (WebhookVerificationError), and a verified delivery that is
not a callback event (CallbackParseError)."""

from __future__ import annotations

from typing import Literal, get_args

# Every code the API's error answers carry: the OpenAPI document's enum, which the server's
# ErrorCode writes (a test fails when they drift).
ErrorCode = Literal[
    "backup_in_progress",
    "bad_request",
    "batch_too_large",
    "body_too_large",
    "busy",
    "conflict",
    "cross_site",
    "empty_batch",
    "filter_required",
    "foreign_host",
    "headers_too_large",
    "internal",
    "invalid_body",
    "invalid_callback",
    "invalid_category",
    "invalid_cursor",
    "invalid_deadline",
    "invalid_endpoint",
    "invalid_event_kind",
    "invalid_field",
    "invalid_group",
    "invalid_header",
    "invalid_id",
    "invalid_idempotency_key",
    "invalid_job",
    "invalid_json",
    "invalid_limit",
    "invalid_method",
    "invalid_missed",
    "invalid_ordering_key",
    "invalid_parameter",
    "invalid_pattern",
    "invalid_pause",
    "invalid_policy",
    "invalid_range",
    "invalid_reason",
    "invalid_reason_text",
    "invalid_schedule",
    "invalid_state",
    "invalid_tags",
    "invalid_time",
    "invalid_timeout",
    "invalid_url",
    "invalid_wait",
    "job_body_too_large",
    "method_not_allowed",
    "no_route",
    "not_found",
    "not_supported",
    "read_only",
    "request_timeout",
    "reserved_queue",
    "schedule_exists",
    "storage_unavailable",
    "too_large",
    "too_many_waiters",
    "unauthorized",
    "unknown_parameter",
    "unknown_queue",
    "unsupported_media_type",
    "uri_too_long",
]
ERROR_CODES: frozenset[str] = frozenset(get_args(ErrorCode))


class RedialError(Exception):
    """The server answered with an error: its HTTP status and the body's code and message.

    `code` is machine-readable and stable, one of `ErrorCode` (e.g. "conflict",
    "unauthorized"; a newer server's code reads as it is); `message` says
    what was wrong and what to do. `retry_after` is the Retry-After seconds when given.
    """

    def __init__(
        self, status: int, code: str, message: str, retry_after: float | None = None
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after


class RedialConnectionError(Exception):
    """The request never got an answer (refused, reset, timed out), even after retries."""


class WebhookVerificationError(Exception):
    """A delivery's signature headers are missing, stale, or match none of the secrets."""


class CallbackParseError(Exception):
    """A verified delivery's body is not a callback event: answer 400 and do not act on it."""
