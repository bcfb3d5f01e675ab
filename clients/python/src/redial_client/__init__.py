"""redial_client: the official Python client of Redial's HTTP API (sync and async), the
verification helper for receivers of its signed deliveries, and the reader of its completion
callbacks. This module only re-exports."""

from .async_client import AsyncRedial
from .callbacks import VerifiedCallback, callback_response_body, parse_callback
from .client import Redial
from .errors import (
    ERROR_CODES,
    CallbackParseError,
    ErrorCode,
    RedialConnectionError,
    RedialError,
    WebhookVerificationError,
)
from .types import CallbackEvent, CallbackJob, CallbackResponse
from .webhooks import sign, verify_webhook

__version__ = "0.1.0"

__all__ = [
    "ERROR_CODES",
    "AsyncRedial",
    "CallbackEvent",
    "CallbackJob",
    "CallbackParseError",
    "CallbackResponse",
    "ErrorCode",
    "Redial",
    "RedialConnectionError",
    "RedialError",
    "VerifiedCallback",
    "WebhookVerificationError",
    "callback_response_body",
    "parse_callback",
    "sign",
    "verify_webhook",
    "__version__",
]
