"""What the sync and async clients share: configuration defaults, building each API call
(method, path, query, body), the retry decision, and mapping answers to results or typed errors.
Neither client builds a request or reads an error on its own."""

from __future__ import annotations

import json
import os
import random
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping
from urllib.parse import quote

from .errors import RedialConnectionError, RedialError

DEFAULT_BASE_URL = "http://127.0.0.1:8080"
USER_AGENT = "redial-client-python/0.1.0"
RETRY_STATUSES = frozenset({429, 503})
MAX_RETRY_AFTER = 60.0  # seconds; a longer Retry-After is waited this long at most
BACKOFF_BASE = 0.25  # seconds, doubled per retry when the server gives no Retry-After
BACKOFF_CAP = 5.0


@dataclass(frozen=True)
class Call:
    """One API call, before it is sent."""

    method: str
    path: str
    params: dict[str, str] = field(default_factory=dict)
    body: Any = None
    has_body: bool = False
    # This call's own timeout in seconds (a call that waits on the server), else the client's.
    timeout: float | None = None


def resolve_base_url(base_url: str | None) -> str:
    url = base_url or os.environ.get("REDIAL_SERVER") or DEFAULT_BASE_URL
    return url.rstrip("/")


def resolve_token(token: str | None) -> str | None:
    if token is not None:
        return token or None
    return os.environ.get("REDIAL_TOKEN") or None


def default_headers(token: str | None) -> dict[str, str]:
    headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def encode_body(call: Call) -> tuple[bytes | None, dict[str, str]]:
    """The bytes to send and their headers: every body is JSON, with its content type."""
    if not call.has_body:
        return None, {}
    data = json.dumps(call.body, separators=(",", ":")).encode()
    return data, {"Content-Type": "application/json"}


def segment(value: str) -> str:
    """A path segment, percent-encoded (endpoint names are URLs: https%3A%2F%2F...)."""
    if not value:
        raise ValueError("give a non-empty id or name")
    return quote(value, safe="")


def with_id(job: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the job with an id, generated (uuid4) when absent, so a retried enqueue
    after a lost answer deduplicates instead of creating a second job."""
    if "request" not in job:
        raise ValueError("give the job a 'request' with at least 'method' and 'url'")
    out = dict(job)
    if not out.get("id"):
        out["id"] = str(uuid.uuid4())
    return out


def _clean(params: Mapping[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in params.items() if v is not None}


# --- the calls, one builder per API operation ---------------------------------------------

def enqueue(job: Mapping[str, Any]) -> Call:
    return Call("POST", "/v1/jobs", body=with_id(job), has_body=True)


def enqueue_batch(jobs: list[Mapping[str, Any]]) -> Call:
    return Call("POST", "/v1/jobs/batch", body={"jobs": [with_id(j) for j in jobs]}, has_body=True)


def get_job(job_id: str) -> Call:
    return Call("GET", f"/v1/jobs/{segment(job_id)}")


MAX_WAIT = 60.0  # seconds: the longest one waiting request may wait (the server's bound)
FINISHED = frozenset({"completed", "dead", "cancelled"})


def get_job_after(job_id: str, wait: float, client_timeout: float) -> Call:
    """The job once it has finished, or as it stands when `wait` seconds end (at most 60):
    the call lasts as long as the wait, and then some."""
    wait = max(0.0, min(wait, MAX_WAIT))
    return Call(
        "GET",
        f"/v1/jobs/{segment(job_id)}",
        params={"wait": f"{round(wait * 1000)}ms"},
        timeout=wait + max(client_timeout, 5.0),
    )


def list_jobs_page(filters: Mapping[str, Any], cursor: str | None) -> Call:
    known = {
        "queue", "state", "category", "endpoint", "pattern",
        "idempotency_key", "tag", "reason_text", "limit",
    }
    unknown = set(filters) - known
    if unknown:
        raise TypeError(
            f"unknown job filter {sorted(unknown)}: use queue, state, category, endpoint, pattern, "
            "idempotency_key, tag, reason_text or limit"
        )
    return Call("GET", "/v1/jobs", params=_clean({**filters, "cursor": cursor}))


def job_action(job_id: str, action: str) -> Call:
    return Call("POST", f"/v1/jobs/{segment(job_id)}/{action}")


def replay(
    job_id: str, patch: Mapping[str, Any] | None, key: str | None, dry_run: bool
) -> Call:
    if patch is None and key is None and not dry_run:
        return job_action(job_id, "replay")
    body: dict[str, Any] = {"dry_run": dry_run}
    if patch is not None:
        body["patch"] = dict(patch)
    if key is not None:
        body["key"] = key
    return Call("POST", f"/v1/jobs/{segment(job_id)}/replay", body=body, has_body=True)


def dead_letters(action: str, filter: Mapping[str, Any], dry_run: bool = False) -> Call:
    if not filter:
        raise ValueError(
            "give a dead-letter filter (queue, category, endpoint, since, until, pattern)"
            " or {'all': True}"
        )
    body = dict(filter)
    if action == "replay":
        body["dry_run"] = dry_run
    return Call("POST", f"/v1/dead-letters/{action}", body=body, has_body=True)


def operation(op_id: str, cancel: bool = False) -> Call:
    if cancel:
        return Call("POST", f"/v1/operations/{segment(op_id)}/cancel")
    return Call("GET", f"/v1/operations/{segment(op_id)}")


def dead_letter_groups(filters: Mapping[str, Any]) -> Call:
    return Call("GET", "/v1/dead-letters/groups", params=_clean(filters))


def dead_letter_patterns(filters: Mapping[str, Any]) -> Call:
    return Call("GET", "/v1/dead-letters/patterns", params=_clean(filters))


def get(path: str) -> Call:
    return Call("GET", path)


def page(path: str, cursor: str | None) -> Call:
    """One page of a list that pages by cursor (endpoints, schedules), 500 at a time."""
    params = {"limit": "500"}
    if cursor:
        params["cursor"] = cursor
    return Call("GET", path, params=params)


def endpoint(name: str) -> Call:
    return Call("GET", f"/v1/endpoints/{segment(name)}")


def pause(
    kind: str, name: str, reason: str | None, for_: str | None, until: str | None, create: bool = False
) -> Call:
    if for_ is not None and until is not None:
        raise ValueError("give either for_ (a duration such as '30m') or until (an instant), not both")
    body = _clean({"reason": reason, "for": for_, "until": until})
    params = {"create": "true"} if create else {}
    return Call("POST", f"/v1/{kind}/{segment(name)}/pause", params=params, body=body, has_body=True)


def ordering_keys(queue: str, blocked: bool, cursor: str | None, limit: int | None) -> Call:
    """A page of a queue's ordering keys; `blocked` only sent when true (false is the default)."""
    params = _clean({"blocked": "true" if blocked else None, "cursor": cursor or None, "limit": limit})
    return Call("GET", f"/v1/queues/{segment(queue)}/ordering-keys", params=params)


def post_action(kind: str, name: str, action: str) -> Call:
    return Call("POST", f"/v1/{kind}/{segment(name)}/{action}")


def schedule_create(schedule: Mapping[str, Any]) -> Call:
    return Call("POST", "/v1/schedules", body=dict(schedule), has_body=True)


def schedule_put(schedule_id: str, schedule: Mapping[str, Any]) -> Call:
    return Call("PUT", f"/v1/schedules/{segment(schedule_id)}", body=dict(schedule), has_body=True)


def schedule_call(method: str, schedule_id: str, action: str | None = None) -> Call:
    path = f"/v1/schedules/{segment(schedule_id)}"
    return Call(method, f"{path}/{action}" if action else path)


def _listed(value: str | Iterable[str] | None) -> str | None:
    """A list parameter as the API takes it: comma-separated."""
    if value is None or isinstance(value, str):
        return value
    return ",".join(value)


def event_params(
    after: str | None, queue: str | Iterable[str] | None, kind: str | Iterable[str] | None,
    limit: int | None,
) -> dict[str, str]:
    return _clean({"after": after, "queue": _listed(queue), "kind": _listed(kind), "limit": limit})


def events(
    after: str | None, queue: str | Iterable[str] | None, kind: str | Iterable[str] | None,
    limit: int | None,
) -> Call:
    return Call("GET", "/v1/events", params=event_params(after, queue, kind, limit))


def connection_error(base_url: str, cause: Exception) -> RedialConnectionError:
    return RedialConnectionError(
        f"could not reach redial at {base_url} ({cause!r}): check that the server runs "
        "and that base_url (or REDIAL_SERVER) points at it"
    )


# --- answers --------------------------------------------------------------------------------

def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None  # an HTTP date: fall back to backoff
    return max(0.0, seconds)


def backoff(retry: int) -> float:
    """Delay before retry number `retry` (0-based) when the server gave no Retry-After."""
    return random.uniform(0.5, 1.0) * min(BACKOFF_CAP, BACKOFF_BASE * 2.0**retry)


def retry_delay(status: int, headers: Mapping[str, str], retry: int) -> float | None:
    """Seconds to wait before retrying this answer, or None when it must not be retried."""
    if status not in RETRY_STATUSES:
        return None
    after = parse_retry_after(headers)
    return backoff(retry) if after is None else min(after, MAX_RETRY_AFTER)


def error_from(status: int, headers: Mapping[str, str], content: bytes) -> RedialError:
    code, message = "http_error", f"the server answered {status}"
    try:
        err = json.loads(content)["error"]
        code, message = str(err["code"]), str(err["message"])
    except (ValueError, KeyError, TypeError):
        text = content.decode(errors="replace").strip()
        if text:
            message = f"{message}: {text[:500]}"
    return RedialError(status, code, message, parse_retry_after(headers))


def result(status: int, headers: Mapping[str, str], content: bytes) -> Any:
    """The decoded body of a 2xx answer, or raise the typed error of any other."""
    if not 200 <= status < 300:
        raise error_from(status, headers, content)
    if not content:
        return None
    try:
        return json.loads(content)
    except ValueError as e:
        raise RedialError(status, "invalid_response", f"the server's answer is not JSON: {e}") from e
