"""The shapes types.py re-exports that the OpenAPI document does not describe, written by hand:
the callback event Redial POSTs to a job's callback URL (the TypeScript client writes it by hand
too, in callbacks.ts). Everything of the HTTP API itself is generated into types.py from
openapi.json by clients/python/generate_types.py; this module is only for what lies outside it.
types.py re-exports every name in __all__ (the generator reads it)."""


from typing import Literal, TypedDict

# types.py imports this module at its end, after the names imported here are defined.
from .types import DeadCategory

__all__ = ["CallbackEvent", "CallbackJob", "CallbackResponse"]


class CallbackResponse(TypedDict):
    """The final response in a callback event. `body` is text, or base64 when the body was not
    UTF-8 (`body_encoding`); `callback_response_body` decodes it. Secret headers are left out."""

    status: int
    headers: dict[str, str]
    body: str | None
    body_encoding: Literal["text", "base64"]
    content_type: str | None
    truncated: bool


class CallbackJob(TypedDict):
    """The finished job a callback event tells of. `attempts` counts failed attempts, as in Job;
    `error` is the last attempt's transport error kind when it got no response."""

    id: str
    queue: str
    endpoint: str
    group: str | None
    tags: list[str]
    idempotency_key: str | None
    state: Literal["completed", "dead", "cancelled"]
    category: DeadCategory | None
    reason: str | None
    attempts: int
    unknown_attempts: int
    deferrals: int
    stalls: int
    replays: int
    runs: int
    created_at: str
    finished_at: str | None
    response: CallbackResponse | None
    error: str | None


class CallbackEvent(TypedDict):
    """The JSON body Redial POSTs to a job's callback URL; `timestamp` is when the job finished."""

    type: Literal["job.completed", "job.dead", "job.cancelled"]
    timestamp: str
    data: CallbackJob
