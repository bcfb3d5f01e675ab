//! One method per route of the API, in the OpenAPI document's order of areas: jobs, dead letters,
//! endpoints, queues, schedules, operations.

use crate::transport::Call;
use crate::{Client, Error};
use redial_api::{
    Affected, AlertList, BatchResult, DeadGroups, DeadLetterFilter, DeadPatterns, Dismissed,
    Endpoint, EndpointList, EventPage, Health, Job, JobInput, JobPage, JobState, Operation,
    OperationList, OrderingKeys, OutageReplay, PauseInput, Queue, QueueGroups, QueueList, Ready,
    ReplayInput, ReplayPreview, Schedule, ScheduleList, Series, Session, Stats, MAX_WAIT,
};
use reqwest::Method;
use std::time::Duration;

/// Every route this client calls, as (method, path template): a test checks it against the
/// OpenAPI document's paths, so a route added to the API and not here fails it.
pub const ROUTES: &[(&str, &str)] = &[
    ("POST", "/v1/jobs"),
    ("GET", "/v1/jobs"),
    ("POST", "/v1/jobs/batch"),
    ("GET", "/v1/jobs/{id}"),
    ("POST", "/v1/jobs/{id}/replay"),
    ("POST", "/v1/jobs/{id}/dismiss"),
    ("POST", "/v1/jobs/{id}/cancel"),
    ("POST", "/v1/dead-letters/replay"),
    ("POST", "/v1/dead-letters/dismiss"),
    ("GET", "/v1/dead-letters/groups"),
    ("GET", "/v1/dead-letters/patterns"),
    ("POST", "/v1/dead-letters/export"),
    ("GET", "/v1/operations"),
    ("GET", "/v1/operations/{id}"),
    ("POST", "/v1/operations/{id}/cancel"),
    ("GET", "/v1/events"),
    ("GET", "/v1/events/stream"),
    ("GET", "/v1/session"),
    ("GET", "/v1/stats"),
    ("GET", "/v1/endpoints"),
    ("GET", "/v1/endpoints/{name}"),
    ("POST", "/v1/endpoints/{name}/pause"),
    ("POST", "/v1/endpoints/{name}/resume"),
    ("POST", "/v1/endpoints/{name}/reset-breaker"),
    ("POST", "/v1/endpoints/{name}/replay-outage"),
    ("GET", "/v1/queues"),
    ("GET", "/v1/queues/{name}/groups"),
    ("GET", "/v1/queues/{name}/ordering-keys"),
    ("POST", "/v1/queues/{name}/pause"),
    ("POST", "/v1/queues/{name}/resume"),
    ("GET", "/v1/schedules"),
    ("POST", "/v1/schedules"),
    ("GET", "/v1/schedules/{id}"),
    ("PUT", "/v1/schedules/{id}"),
    ("DELETE", "/v1/schedules/{id}"),
    ("POST", "/v1/schedules/{id}/pause"),
    ("POST", "/v1/schedules/{id}/resume"),
    ("POST", "/v1/backup"),
    ("GET", "/v1/openapi.json"),
    ("GET", "/v1/alerts"),
    ("GET", "/v1/series"),
    ("GET", "/metrics"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
];

/// Whether a job in `state` has finished: completed, dead or cancelled.
pub fn is_finished(state: JobState) -> bool {
    matches!(
        state,
        JobState::Completed | JobState::Dead | JobState::Cancelled
    )
}

/// Which jobs [`Client::jobs`] lists, and the page.
#[derive(Clone, Debug, Default)]
pub struct JobsQuery {
    pub queue: Option<String>,
    pub state: Option<String>,
    pub category: Option<String>,
    pub endpoint: Option<String>,
    /// Only dead letters whose reason has this pattern ([`Client::dead_letter_patterns`]).
    pub pattern: Option<String>,
    /// Only the job(s) with this idempotency key (exactly).
    pub idempotency_key: Option<String>,
    /// Only jobs with this tag (exactly).
    pub tag: Option<String>,
    /// Only dead letters whose reason has words starting with each of these words.
    pub reason_text: Option<String>,
    /// A page's `next_cursor`.
    pub cursor: Option<String>,
    /// At most this many (1 to 500; the server's default when none).
    pub limit: Option<u32>,
}

/// A page of a list ([`Client::endpoints`], [`Client::schedules`]).
#[derive(Clone, Debug, Default)]
pub struct PageQuery {
    /// A page's `next_cursor`.
    pub cursor: Option<String>,
    /// At most this many (1 to 500; the server's default, 100, when none).
    pub limit: Option<u32>,
}

/// Which dead letters [`Client::dead_letter_groups`] and [`Client::dead_letter_patterns`] group.
#[derive(Clone, Debug, Default)]
pub struct DeadGroupsQuery {
    pub queue: Option<String>,
    pub category: Option<String>,
    pub endpoint: Option<String>,
    /// RFC 3339 times bounding when the jobs were created (at or after, before).
    pub since: Option<String>,
    pub until: Option<String>,
    /// Only those whose reason has this pattern (the groups; the patterns take none).
    pub pattern: Option<String>,
    /// At most this many patterns (the patterns; 1 to 500, 100 when none).
    pub limit: Option<u32>,
}

/// Which events [`Client::events`] and [`Client::event_stream`] read, from where.
#[derive(Clone, Debug, Default)]
pub struct EventsQuery {
    /// After this event's id (a page's `next_cursor`); none: from the oldest kept (the stream:
    /// from now on).
    pub after: Option<String>,
    /// Only job events of these queues, comma-separated.
    pub queue: Option<String>,
    /// Only these kinds, comma-separated (`job.completed,job.dead`).
    pub kind: Option<String>,
    /// At most this many events in a page (1 to 1000; not for the stream).
    pub limit: Option<u32>,
}

impl Client {
    /// Enqueues a job; an existing id with the same request answers the existing job
    /// (`deduplicated`).
    pub async fn enqueue(&self, job: &JobInput) -> Result<Job, Error> {
        let call = Call::new(Method::POST, &["v1", "jobs"]).json(job)?;
        self.transport.json(call).await
    }

    /// Enqueues several jobs in one transaction: [`JobInput`]s, or JSON of their shape (jobs
    /// read from a file, say, which the server checks: a refusal names the job by its index).
    pub async fn enqueue_batch(
        &self,
        jobs: &[impl serde::Serialize],
    ) -> Result<BatchResult, Error> {
        let body = serde_json::json!({ "jobs": jobs });
        let call = Call::new(Method::POST, &["v1", "jobs", "batch"]).json(&body)?;
        self.transport.json(call).await
    }

    /// One job, with its attempts.
    pub async fn job(&self, id: &str) -> Result<Job, Error> {
        self.transport
            .json(Call::new(Method::GET, &["v1", "jobs", id]))
            .await
    }

    /// The job once it has finished (completed, dead or cancelled), or as it stands when `wait`
    /// ends (at most 60 s; the server refuses more): one request, answered when the job
    /// changes.
    pub async fn job_after(&self, id: &str, wait: Duration) -> Result<Job, Error> {
        let call = Call::new(Method::GET, &["v1", "jobs", id])
            .query("wait", Some(format!("{}ms", wait.as_millis())));
        // The call lasts as long as the wait, and then some.
        let timeout = wait + self.transport.timeout.max(Duration::from_secs(5));
        self.transport.json_within(call, Some(timeout)).await
    }

    /// Waits up to `timeout` for the job to finish, in waits of at most 60 s, and returns it as
    /// it stands then: finished, unless the time ran out (check `state`).
    pub async fn wait_for_job(&self, id: &str, timeout: Duration) -> Result<Job, Error> {
        let end = tokio::time::Instant::now() + timeout;
        loop {
            let left = end.saturating_duration_since(tokio::time::Instant::now());
            let job = self.job_after(id, left.min(MAX_WAIT)).await?;
            if is_finished(job.state) || left <= MAX_WAIT {
                return Ok(job);
            }
        }
    }

    /// One page of jobs.
    pub async fn jobs(&self, q: &JobsQuery) -> Result<JobPage, Error> {
        let call = Call::new(Method::GET, &["v1", "jobs"])
            .query("queue", q.queue.as_ref())
            .query("state", q.state.as_ref())
            .query("category", q.category.as_ref())
            .query("endpoint", q.endpoint.as_ref())
            .query("pattern", q.pattern.as_ref())
            .query("idempotency_key", q.idempotency_key.as_ref())
            .query("tag", q.tag.as_ref())
            .query("reason_text", q.reason_text.as_ref())
            .query("cursor", q.cursor.as_ref())
            .query("limit", q.limit);
        self.transport.json(call).await
    }

    /// Runs a dead job again, from a fresh attempt count.
    pub async fn replay(&self, id: &str) -> Result<Job, Error> {
        self.job_action(id, "replay").await
    }

    /// Dismisses a dead job: it leaves the dead letters.
    pub async fn dismiss(&self, id: &str) -> Result<Dismissed, Error> {
        let call = Call::new(Method::POST, &["v1", "jobs", id, "dismiss"]);
        self.transport.json(call).await
    }

    /// Cancels a job: at once if it waits; a running one ends when its attempt does.
    pub async fn cancel(&self, id: &str) -> Result<Job, Error> {
        self.job_action(id, "cancel").await
    }

    /// Runs a dead job again with changes ([`ReplayInput`]: its request or routing patched, its
    /// idempotency key kept or renewed). `input.dry_run` must not be set: see
    /// [`Client::replay_preview`].
    pub async fn replay_changed(&self, id: &str, input: &ReplayInput) -> Result<Job, Error> {
        let input = ReplayInput {
            dry_run: None,
            ..input.clone()
        };
        let call = Call::new(Method::POST, &["v1", "jobs", id, "replay"]).json(&input)?;
        self.transport.json(call).await
    }

    /// What [`Client::replay_changed`] would do to a dead job; changes nothing.
    pub async fn replay_preview(
        &self,
        id: &str,
        input: &ReplayInput,
    ) -> Result<ReplayPreview, Error> {
        let input = ReplayInput {
            dry_run: Some(true),
            ..input.clone()
        };
        let call = Call::new(Method::POST, &["v1", "jobs", id, "replay"]).json(&input)?;
        self.transport.json(call).await
    }

    async fn job_action(&self, id: &str, action: &str) -> Result<Job, Error> {
        let call = Call::new(Method::POST, &["v1", "jobs", id, action]);
        self.transport.json(call).await
    }

    /// Replays every dead letter the filter matches (with its patch, if any, job by job).
    /// `filter.dry_run` must not be set: see [`Client::preview_dead_letters`].
    pub async fn replay_dead_letters(&self, filter: &DeadLetterFilter) -> Result<Affected, Error> {
        let filter = DeadLetterFilter {
            dry_run: None,
            ..filter.clone()
        };
        let call = Call::new(Method::POST, &["v1", "dead-letters", "replay"]).json(&filter)?;
        self.transport.json(call).await
    }

    /// What [`Client::replay_dead_letters`] would do with the filter's patch; changes nothing.
    pub async fn preview_dead_letters(
        &self,
        filter: &DeadLetterFilter,
    ) -> Result<ReplayPreview, Error> {
        let filter = DeadLetterFilter {
            dry_run: Some(true),
            ..filter.clone()
        };
        let call = Call::new(Method::POST, &["v1", "dead-letters", "replay"]).json(&filter)?;
        self.transport.json(call).await
    }

    /// Starts replaying (`replay`) or dismissing (`dismiss`) every dead letter the filter
    /// matches, and answers at once with the operation, to follow with [`Client::operation`].
    pub async fn start_dead_letters(
        &self,
        action: &str,
        filter: &DeadLetterFilter,
    ) -> Result<Operation, Error> {
        let filter = DeadLetterFilter {
            wait: Some(false),
            dry_run: None,
            ..filter.clone()
        };
        let call = Call::new(Method::POST, &["v1", "dead-letters", action]).json(&filter)?;
        self.transport.json(call).await
    }

    /// Every dead letter the filter matches, as NDJSON (a job a line, secrets included): the
    /// response, to read as it comes.
    pub async fn export_dead_letters(
        &self,
        filter: &DeadLetterFilter,
    ) -> Result<reqwest::Response, Error> {
        let mut once = self.transport.clone();
        once.max_retries = 0;
        let call = Call::new(Method::POST, &["v1", "dead-letters", "export"]).json(filter)?;
        // However long it takes to read: no time limit on the whole.
        once.send(&call, Some(std::time::Duration::ZERO)).await
    }

    /// A bulk operation's progress.
    pub async fn operation(&self, id: &str) -> Result<Operation, Error> {
        let call = Call::new(Method::GET, &["v1", "operations", id]);
        self.transport.json(call).await
    }

    /// The server's bulk operations, newest first.
    pub async fn operations(&self) -> Result<OperationList, Error> {
        let call = Call::new(Method::GET, &["v1", "operations"]);
        self.transport.json(call).await
    }

    /// Stops a running bulk operation before its next chunk.
    pub async fn cancel_operation(&self, id: &str) -> Result<Operation, Error> {
        let call = Call::new(Method::POST, &["v1", "operations", id, "cancel"]);
        self.transport.json(call).await
    }

    /// Dismisses every dead letter the filter matches.
    pub async fn dismiss_dead_letters(&self, filter: &DeadLetterFilter) -> Result<Affected, Error> {
        let call = Call::new(Method::POST, &["v1", "dead-letters", "dismiss"]).json(filter)?;
        self.transport.json(call).await
    }

    /// Dead letters grouped by queue, category and endpoint, largest first.
    pub async fn dead_letter_groups(&self, q: &DeadGroupsQuery) -> Result<DeadGroups, Error> {
        let call = Call::new(Method::GET, &["v1", "dead-letters", "groups"])
            .query("queue", q.queue.as_ref())
            .query("category", q.category.as_ref())
            .query("endpoint", q.endpoint.as_ref())
            .query("since", q.since.as_ref())
            .query("until", q.until.as_ref())
            .query("pattern", q.pattern.as_ref());
        self.transport.json(call).await
    }

    /// Dead letters grouped by the pattern of their reason (numbers, ids and times masked),
    /// largest first. A pattern is a filter for the groups, [`Client::jobs`] and the bulk
    /// actions.
    pub async fn dead_letter_patterns(&self, q: &DeadGroupsQuery) -> Result<DeadPatterns, Error> {
        let call = Call::new(Method::GET, &["v1", "dead-letters", "patterns"])
            .query("queue", q.queue.as_ref())
            .query("category", q.category.as_ref())
            .query("endpoint", q.endpoint.as_ref())
            .query("since", q.since.as_ref())
            .query("until", q.until.as_ref())
            .query("limit", q.limit);
        self.transport.json(call).await
    }

    /// A page of the event log.
    pub async fn events(&self, q: &EventsQuery) -> Result<EventPage, Error> {
        let call = Call::new(Method::GET, &["v1", "events"])
            .query("after", q.after.as_ref())
            .query("queue", q.queue.as_ref())
            .query("kind", q.kind.as_ref())
            .query("limit", q.limit);
        self.transport.json(call).await
    }

    /// The event log as Server-Sent Events (`text/event-stream`), to read as it comes: no
    /// timeout on the whole, and not retried (reconnect with the last id seen as `after`).
    pub async fn event_stream(&self, q: &EventsQuery) -> Result<reqwest::Response, Error> {
        let mut once = self.transport.clone();
        once.max_retries = 0;
        let call = Call::new(Method::GET, &["v1", "events", "stream"])
            .query("after", q.after.as_ref())
            .query("queue", q.queue.as_ref())
            .query("kind", q.kind.as_ref());
        once.send(&call, Some(std::time::Duration::ZERO)).await
    }

    /// What the caller's token may do.
    pub async fn session(&self) -> Result<Session, Error> {
        self.get(&["v1", "session"]).await
    }

    /// Jobs counted by queue, state and category, and by endpoint.
    pub async fn stats(&self) -> Result<Stats, Error> {
        self.get(&["v1", "stats"]).await
    }

    /// A page of endpoints by name, with their protection state.
    pub async fn endpoints(&self, page: &PageQuery) -> Result<EndpointList, Error> {
        let call = Call::new(Method::GET, &["v1", "endpoints"])
            .query("cursor", page.cursor.as_ref())
            .query("limit", page.limit);
        self.transport.json(call).await
    }

    /// One endpoint's protection state.
    pub async fn endpoint(&self, name: &str) -> Result<Endpoint, Error> {
        self.get(&["v1", "endpoints", name]).await
    }

    /// Pauses an endpoint by hand (until a time, for a while, or until resumed). An endpoint
    /// not known yet is `not_found`.
    pub async fn pause_endpoint(&self, name: &str, pause: &PauseInput) -> Result<Endpoint, Error> {
        let call = Call::new(Method::POST, &["v1", "endpoints", name, "pause"]).json(pause)?;
        self.transport.json(call).await
    }

    /// Pauses an endpoint before its first job: as [`Client::pause_endpoint`], for a name not
    /// known yet too.
    pub async fn pause_endpoint_ahead(
        &self,
        name: &str,
        pause: &PauseInput,
    ) -> Result<Endpoint, Error> {
        let call = Call::new(Method::POST, &["v1", "endpoints", name, "pause"])
            .query("create", Some("true"))
            .json(pause)?;
        self.transport.json(call).await
    }

    /// Ends a pause set by hand.
    pub async fn resume_endpoint(&self, name: &str) -> Result<Endpoint, Error> {
        self.post(&["v1", "endpoints", name, "resume"]).await
    }

    /// Replays the endpoint's dead letters that died since its last outage began.
    pub async fn replay_outage(&self, name: &str) -> Result<OutageReplay, Error> {
        self.post(&["v1", "endpoints", name, "replay-outage"]).await
    }

    /// Closes an endpoint's breaker by hand.
    pub async fn reset_breaker(&self, name: &str) -> Result<Endpoint, Error> {
        self.post(&["v1", "endpoints", name, "reset-breaker"]).await
    }

    /// Every queue, with its concurrency, pause and group limits.
    pub async fn queues(&self) -> Result<QueueList, Error> {
        self.get(&["v1", "queues"]).await
    }

    /// A queue's groups with waiting or running jobs, busiest first.
    pub async fn queue_groups(&self, name: &str, limit: Option<u32>) -> Result<QueueGroups, Error> {
        let call = Call::new(Method::GET, &["v1", "queues", name, "groups"]).query("limit", limit);
        self.transport.json(call).await
    }

    /// A page of a queue's ordering keys, by key: each key's head, the jobs behind it and why it
    /// waits; only the keys whose dead head blocks them when `blocked`.
    pub async fn ordering_keys(
        &self,
        name: &str,
        blocked: bool,
        page: &PageQuery,
    ) -> Result<OrderingKeys, Error> {
        let call = Call::new(Method::GET, &["v1", "queues", name, "ordering-keys"])
            .query("blocked", blocked.then_some("true"))
            .query("cursor", page.cursor.as_ref())
            .query("limit", page.limit);
        self.transport.json(call).await
    }

    /// Pauses a queue by hand: none of its jobs is leased until it is resumed (or the pause ends).
    pub async fn pause_queue(&self, name: &str, pause: &PauseInput) -> Result<Queue, Error> {
        let call = Call::new(Method::POST, &["v1", "queues", name, "pause"]).json(pause)?;
        self.transport.json(call).await
    }

    /// Ends a queue's pause.
    pub async fn resume_queue(&self, name: &str) -> Result<Queue, Error> {
        self.post(&["v1", "queues", name, "resume"]).await
    }

    /// A page of schedules, by id.
    pub async fn schedules(&self, page: &PageQuery) -> Result<ScheduleList, Error> {
        let call = Call::new(Method::GET, &["v1", "schedules"])
            .query("cursor", page.cursor.as_ref())
            .query("limit", page.limit);
        self.transport.json(call).await
    }

    /// One schedule.
    pub async fn schedule(&self, id: &str) -> Result<Schedule, Error> {
        self.get(&["v1", "schedules", id]).await
    }

    /// Creates a schedule (`input.id` names it); an existing id is refused (`schedule_exists`).
    /// A [`ScheduleInput`], or JSON of its shape.
    pub async fn create_schedule(&self, input: &impl serde::Serialize) -> Result<Schedule, Error> {
        let call = Call::new(Method::POST, &["v1", "schedules"]).json(input)?;
        self.transport.json(call).await
    }

    /// Creates or replaces the schedule `id`: a [`ScheduleInput`] (without an id), or JSON of
    /// its shape.
    pub async fn put_schedule(
        &self,
        id: &str,
        input: &impl serde::Serialize,
    ) -> Result<Schedule, Error> {
        let call = Call::new(Method::PUT, &["v1", "schedules", id]).json(input)?;
        self.transport.json(call).await
    }

    /// Deletes a schedule (the jobs it made stay).
    pub async fn delete_schedule(&self, id: &str) -> Result<(), Error> {
        let call = Call::new(Method::DELETE, &["v1", "schedules", id]);
        self.transport.send(&call, None).await.map(drop)
    }

    /// Pauses a schedule: it makes no job until resumed.
    pub async fn pause_schedule(&self, id: &str) -> Result<Schedule, Error> {
        self.post(&["v1", "schedules", id, "pause"]).await
    }

    /// Resumes a schedule.
    pub async fn resume_schedule(&self, id: &str) -> Result<Schedule, Error> {
        self.post(&["v1", "schedules", id, "resume"]).await
    }

    /// A checked copy of the server's SQLite database, to read as it comes (it can be large): no
    /// timeout on the whole, and not retried. PostgreSQL servers refuse (`not_supported`).
    pub async fn backup(&self) -> Result<reqwest::Response, Error> {
        let mut once = self.transport.clone();
        once.max_retries = 0;
        let call = Call::new(Method::POST, &["v1", "backup"]);
        once.send(&call, Some(std::time::Duration::ZERO)).await
    }

    /// The OpenAPI document the server serves.
    pub async fn openapi(&self) -> Result<serde_json::Value, Error> {
        self.get(&["v1", "openapi.json"]).await
    }

    /// The alert rules and whether each fires.
    pub async fn alerts(&self) -> Result<AlertList, Error> {
        self.get(&["v1", "alerts"]).await
    }

    /// The last hour's attempts, completions and deaths, per minute.
    pub async fn series(&self) -> Result<Series, Error> {
        self.get(&["v1", "series"]).await
    }

    /// The Prometheus metrics, as text.
    pub async fn metrics(&self) -> Result<String, Error> {
        let call = Call::new(Method::GET, &["metrics"]);
        let resp = self.transport.send(&call, None).await?;
        resp.text().await.map_err(|e| Error::Decode {
            what: "GET /metrics".into(),
            detail: e.to_string(),
        })
    }

    /// Whether the process is up.
    pub async fn health(&self) -> Result<Health, Error> {
        self.get(&["healthz"]).await
    }

    /// Whether the server can serve (its store answers); a server that cannot answers 503,
    /// an [`Error::Api`] once the retries are spent.
    pub async fn ready(&self) -> Result<Ready, Error> {
        self.get(&["readyz"]).await
    }

    async fn get<T: serde::de::DeserializeOwned>(&self, path: &[&str]) -> Result<T, Error> {
        self.transport.json(Call::new(Method::GET, path)).await
    }

    async fn post<T: serde::de::DeserializeOwned>(&self, path: &[&str]) -> Result<T, Error> {
        self.transport.json(Call::new(Method::POST, path)).await
    }
}
