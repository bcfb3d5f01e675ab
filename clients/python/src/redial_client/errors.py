"""Typed errors: what the API refused (RedialError), what never reached it (RedialConnectionError),
and a delivery that failed verification (WebhookVerificationError)."""

from __future__ import annotations


class RedialError(Exception):
    """The server answered with an error: its HTTP status and the body's code and message.

    `code` is machine-readable and stable (e.g. "conflict", "unauthorized"); `message` says
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
