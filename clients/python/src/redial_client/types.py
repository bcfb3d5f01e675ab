"""The API's shapes as TypedDicts, following openapi.json (components/schemas) at info.version 0.1.0."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Required, TypedDict, Union

JobState = Literal[
    "scheduled", "ready", "running", "deferred", "completed", "dead", "cancelled"
]
DeadCategory = Literal[
    "permanent",
    "transient_exhausted",
    "unknown_exhausted",
    "deferral_exhausted",
    "deadline_exceeded",
    "budget_exhausted",
]
Headers = Union[dict[str, str], list[tuple[str, str]], list[list[str]]]


class RequestInput(TypedDict):
    """The HTTP request a job sends. A string body is sent as is, any other JSON value as JSON."""

    method: str
    url: str
    headers: NotRequired[Headers]
    body: NotRequired[Any]
    timeout: NotRequired[str]


CallbackOn = Literal["completed", "dead", "cancelled"]


class CallbackInput(TypedDict):
    """Where Redial POSTs a callback event when the job finishes in one of `on`
    (completed and dead when absent). The queue's callback applies when a job has none."""

    url: str
    on: NotRequired[list[CallbackOn]]
    headers: NotRequired[Headers]


class CallbackView(TypedDict):
    """A job's callback as the API shows it: secrets in the URL and header values redacted."""

    url: str
    on: list[CallbackOn]
    headers: list[list[str]]
    queue: str


class JobInput(TypedDict):
    """What POST /v1/jobs takes. Instants are RFC 3339 strings."""

    request: RequestInput
    id: NotRequired[str]
    queue: NotRequired[str]
    idempotency_key: NotRequired[str]
    run_at: NotRequired[str]
    deadline: NotRequired[str]
    priority: NotRequired[int]
    tags: NotRequired[list[str]]
    group: NotRequired[str]
    ordering_key: NotRequired[str]
    endpoint: NotRequired[str]
    policy: NotRequired[dict[str, Any] | None]
    callback: NotRequired[CallbackInput]


class RequestView(TypedDict):
    """The request a job sends, with secrets redacted and only the body's size."""

    method: str
    url: str
    headers: list[list[str]]
    body_bytes: int
    timeout_ms: int | None


class Attempt(TypedDict):
    number: int
    started_at: str
    duration_ms: int
    status: int | None
    error: str | None
    error_detail: NotRequired[str]
    category: str
    decision: str
    dead_category: DeadCategory | None
    delay_ms: int | None
    server_wait_ms: int | None
    server_wait_source: str | None
    reason: str
    held: NotRequired[str]
    response_headers: list[list[str]]
    response_body: str | None
    worker: str
    response_body_base64: NotRequired[bool]
    response_body_truncated: NotRequired[bool]


class Job(TypedDict):
    id: str
    queue: str
    endpoint: str
    state: JobState
    category: DeadCategory | None
    attempts: int
    unknown_attempts: int
    deferrals: int
    stalls: int
    replays: int
    runs: int
    priority: int
    run_at: str
    deadline: str | None
    created_at: str
    updated_at: str
    finished_at: str | None
    idempotency_key: str | None
    tags: list[str]
    group: str | None
    ordering_key: str | None
    last_reason: str | None
    cancel_requested: bool
    request: RequestView
    callback: CallbackView | None
    callback_delivery: str | None
    callback_for: str | None
    deduplicated: NotRequired[bool]
    attempt_log: NotRequired[list[Attempt]]


class JobPage(TypedDict):
    jobs: list[Job]
    next_cursor: str | None


class BatchResult(TypedDict):
    inserted: int
    deduplicated: int
    jobs: list[Job]


class Dismissed(TypedDict):
    id: str
    dismissed: bool


class Affected(TypedDict):
    affected: int
    operation: NotRequired[str]
    state: NotRequired[str]
    matched: NotRequired[int]
    skipped: NotRequired[int]


class Operation(TypedDict):
    """A bulk replay or dismiss, run a chunk at a time on the server that took it."""

    id: str
    kind: str
    state: str
    total: int
    done: int
    chunks: int
    started_at: str
    finished_at: str | None
    error: str | None


class DeadLetterFilter(TypedDict, total=False):
    """Which dead letters; every field given must match. {"all": True} for every one."""

    queue: str
    category: DeadCategory
    endpoint: str
    since: str
    until: str
    pattern: str
    all: bool
    patch: dict[str, Any]
    key: str


class QueueStateCount(TypedDict):
    queue: str
    state: JobState
    category: NotRequired[DeadCategory]
    count: int


class EndpointStateCount(TypedDict):
    endpoint: str
    state: JobState
    count: int


class Stats(TypedDict):
    queues: list[QueueStateCount]
    endpoints: list[EndpointStateCount]


class HandPause(TypedDict):
    since: str
    until: str | None
    reason: str


class BreakerChange(TypedDict):
    at: str
    to: str
    reason: str


class Endpoint(TypedDict):
    name: str
    holding: str | None
    paused_by_hand: HandPause | None
    paused_until: str | None
    pause_reason: str | None
    rate: str | None
    burst: int
    nodes: int
    learned_limit: int | None
    learned_remaining: int | None
    learned_reset_at: str | None
    learned_pace: float | None
    concurrency_limit: int | None
    in_flight: int
    slow_start_since: str | None
    budget_allowed: int
    budget_used: int
    budget_remaining: int
    breaker: Literal["closed", "open", "half_open"]
    breaker_until: str | None
    breaker_window_failures: int
    breaker_window_retry_failures: int
    breaker_window_calls: int
    breaker_history: list[BreakerChange]
    held: int
    waiting_later: int


# What a dead job does to its ordering key: block it until the job is replayed or dismissed, or
# let the key's next job go on.
OrderingOnDead = Literal["block", "skip"]


class Queue(TypedDict):
    name: str
    concurrency: int
    paused_by_hand: HandPause | None
    ordering_on_dead: OrderingOnDead


class OrderingKeyLine(TypedDict):
    """One ordering key's line: `head` is the job that goes first (running, waiting, or dead
    when `blocked`), `behind` how many of the key's jobs wait after it, `why` why the next waits."""

    key: str
    blocked: bool
    behind: int
    why: str
    head: Job


class OrderingKeys(TypedDict):
    """A page of a queue's ordering keys that have a line (in an order of its own); read on with
    cursor=next_cursor (None on the last page)."""

    queue: str
    ordering_on_dead: OrderingOnDead
    keys: list[OrderingKeyLine]
    next_cursor: str | None


class DeadGroup(TypedDict):
    queue: str
    category: DeadCategory
    endpoint: str
    count: int
    first: str
    last: str
    reason: NotRequired[str | None]


class DeadGroups(TypedDict):
    groups: list[DeadGroup]
    total: int


class JobSide(TypedDict):
    """A job's request and routing (secrets redacted)."""

    queue: str
    endpoint: str
    idempotency_key: str | None
    request: dict[str, Any]


class ReplayPreviewItem(TypedDict):
    id: str
    changed: list[str]
    before: JobSide
    after: JobSide


class ReplayPreview(TypedDict):
    """What a replay with changes would do; nothing was changed."""

    dry_run: bool
    matched: int
    affected: int
    skipped: int
    preview: list[ReplayPreviewItem]


class DeadPattern(TypedDict):
    """Dead letters whose reasons share a pattern: one cause, whatever its numbers and ids."""

    pattern: str
    count: int
    first: str
    last: str
    example: str
    reasons: int


class DeadPatterns(TypedDict):
    patterns: list[DeadPattern]
    count: int
    total: int


class Alert(TypedDict):
    name: str
    rule: str
    firing: bool
    since: str | None
    value: float | None
    threshold: float | None
    evaluated_at: str | None
    summary: str


class JobFilter(TypedDict, total=False):
    """Query parameters of GET /v1/jobs (the cursor is handled by the iterator)."""

    queue: str
    state: JobState
    category: DeadCategory
    endpoint: str
    pattern: str
    limit: int


class ScheduleInput(TypedDict, total=False):
    """A schedule as POST /v1/schedules takes it: cron (with timezone) or every, and the job."""

    id: str
    cron: str
    timezone: str
    every: str
    missed: Literal["skip", "run_once", "run_all"]
    missed_max: int
    job: Required[dict[str, Any]]


class Schedule(TypedDict):
    id: str
    rule: dict[str, Any]
    missed: dict[str, Any]
    job: dict[str, Any]
    source: Literal["api", "config"]
    paused: bool
    next_at: str | None
    last_occurrence: str | None
    last_fired_at: str | None
    created_at: str
    updated_at: str


EventKind = Literal[
    "job.completed",
    "job.dead",
    "job.cancelled",
    "job.replayed",
    "endpoint.paused",
    "endpoint.resumed",
    "endpoint.breaker_opened",
    "endpoint.breaker_closed",
    "endpoint.quarantined",
    "endpoint.recovered",
]


class Event(TypedDict):
    """One entry of the event log. `id` is its cursor: pass it as after= to read on. Job events
    have `queue` and `job_id`; `category` is a dead job's, `reason` the job's last reason (for
    job.replayed, the one it had died with), the pause's or the breaker's; `until` ends a pause or
    an open breaker, as known when it began."""

    id: str
    type: EventKind
    at: str
    queue: str | None
    job_id: str | None
    endpoint: str | None
    category: str | None
    reason: str | None
    until: str | None


# A page of the event log: read on with after=next_cursor (also when events is empty: the log may
# grow); more is whether more events may follow at once; "from" (a keyword, hence this form) is the
# after the page was read from.
EventPage = TypedDict(
    "EventPage", {"events": list[Event], "next_cursor": str, "more": bool, "from": str | None}
)


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
