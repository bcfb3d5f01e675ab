"""redial_client: the official Python client of Redial's HTTP API (sync and async) and the
verification helper for receivers of its signed deliveries. This module only re-exports."""

from .async_client import AsyncRedial
from .client import Redial
from .errors import (
    ERROR_CODES,
    ErrorCode,
    RedialConnectionError,
    RedialError,
    WebhookVerificationError,
)
from .webhooks import sign, verify_webhook

__version__ = "0.1.0"

__all__ = [
    "ERROR_CODES",
    "AsyncRedial",
    "ErrorCode",
    "Redial",
    "RedialConnectionError",
    "RedialError",
    "WebhookVerificationError",
    "sign",
    "verify_webhook",
    "__version__",
]
