//! The JSON shapes the API answers with. Secrets in request headers and URLs are redacted here.

use redial_engine::redact;
use redial_policy::{DeadCategory, Timestamp};
use redial_store::{Attempt, Callback, CallbackEvent, HttpRequest, Job, JobChange, JobState};
use serde::Serialize;

#[derive(Debug, Serialize)]
pub struct JobView<'a> {
    pub id: &'a str,
    pub queue: &'a str,
    pub endpoint: &'a str,
    pub state: JobState,
    /// The dead-letter category, for dead jobs.
    pub category: Option<DeadCategory>,
    /// Failed attempts (transient and unknown) since creation or the last replay.
    pub attempts: u32,
    pub unknown_attempts: u32,
    pub deferrals: u32,
    pub stalls: u32,
    pub replays: u32,
    /// Every attempt made, across replays.
    pub runs: u32,
    pub priority: i32,
    pub run_at: Timestamp,
    pub deadline: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub finished_at: Option<Timestamp>,
    pub idempotency_key: Option<&'a str>,
    pub tags: &'a [String],
    /// Who the job is for; null when it has no group.
    pub group: Option<&'a str>,
    /// Its ordering key: the queue's jobs with this key start one at a time, in enqueue order;
    /// null when it has none.
    pub ordering_key: Option<&'a str>,
    pub last_reason: Option<&'a str>,
    pub cancel_requested: bool,
    pub request: RequestView<'a>,
    /// Where the job tells when it finishes; null when it has no callback.
    pub callback: Option<CallbackView<'a>>,
    /// The id of the delivery its finish made (a job of the callback queue), when its callback
    /// is for the state it finished in.
    pub callback_delivery: Option<String>,
    /// For a delivery: the id of the job it tells about.
    pub callback_for: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deduplicated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt_log: Option<&'a [Attempt]>,
    /// What replays with changes did, oldest first (shown with the attempt log, when any).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changes: Option<Vec<ChangeView<'a>>>,
    /// The request as enqueued, when a replay changed it (shown with the attempt log).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original_request: Option<RequestView<'a>>,
}

/// One replay with changes, as a job's view shows it (secrets redacted).
#[derive(Debug, Serialize)]
pub struct ChangeView<'a> {
    pub at: Timestamp,
    /// The replay it made (the job's `replays` count then).
    pub replay: u32,
    pub changed: &'a [String],
    /// The job's request and routing before it.
    pub before: crate::replay::SideView<'a>,
}

/// A job's changes as its view shows them.
pub fn changes(list: &[JobChange]) -> Vec<ChangeView<'_>> {
    list.iter()
        .map(|c| ChangeView {
            at: c.at,
            replay: c.replay,
            changed: &c.changed,
            before: crate::replay::before_side(&c.before),
        })
        .collect()
}

#[derive(Debug, Serialize)]
pub struct RequestView<'a> {
    pub method: &'a str,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body_bytes: usize,
    pub timeout_ms: Option<u64>,
    /// The credentials profile it is sent with, if it names one.
    pub credentials: Option<&'a str>,
}

#[derive(Debug, Serialize)]
pub struct CallbackView<'a> {
    pub url: String,
    pub on: &'a [CallbackEvent],
    pub headers: Vec<(String, String)>,
    /// The queue its deliveries run in.
    pub queue: &'a str,
}

/// A request as the API shows it: secrets in its URL and headers redacted, its body's size only.
pub fn request(r: &HttpRequest) -> RequestView<'_> {
    RequestView {
        method: &r.method,
        url: redact::url(&r.url),
        headers: redact::headers(&r.headers, usize::MAX),
        body_bytes: r.body.as_ref().map_or(0, String::len),
        timeout_ms: r.timeout_ms,
        credentials: r.credentials.as_deref(),
    }
}

pub fn job(j: &Job) -> JobView<'_> {
    JobView {
        id: &j.id.0,
        queue: &j.queue,
        endpoint: &j.endpoint,
        state: j.state,
        category: j.category,
        attempts: j.attempts,
        unknown_attempts: j.unknown_attempts,
        deferrals: j.deferrals,
        stalls: j.stalls,
        replays: j.replays,
        runs: j.runs,
        priority: j.priority,
        run_at: j.run_at,
        deadline: j.deadline,
        created_at: j.created_at,
        updated_at: j.updated_at,
        finished_at: j.finished_at,
        idempotency_key: j.idempotency_key.as_deref(),
        tags: &j.tags,
        group: j.group.as_deref(),
        ordering_key: j.ordering.as_ref().map(|o| o.key.as_str()),
        last_reason: j.last_reason.as_deref(),
        cancel_requested: j.cancel_requested,
        request: request(&j.request),
        callback: j.callback.as_ref().map(|c| CallbackView {
            url: redact::url(&c.url),
            on: &c.on,
            headers: redact::headers(&c.headers, usize::MAX),
            queue: &c.queue,
        }),
        callback_delivery: j.callback.as_ref().and_then(|c| {
            let event = CallbackEvent::of(j.state).filter(|e| c.on.contains(e))?;
            Some(Callback::delivery_id(j, event, j.replays).0)
        }),
        callback_for: Callback::delivered_for(&j.id).map(|(id, _)| id.0),
        deduplicated: None,
        attempt_log: None,
        changes: None,
        original_request: None,
    }
}

/// An event of the event log, as `GET /v1/events` and its stream show it.
#[derive(Serialize)]
pub struct EventView<'a> {
    /// Its cursor: `after` (or the stream's `Last-Event-ID`) to read on from it.
    pub id: String,
    #[serde(rename = "type")]
    pub kind: redial_store::EventKind,
    pub at: Timestamp,
    pub queue: Option<&'a str>,
    pub job_id: Option<&'a str>,
    pub endpoint: Option<&'a str>,
    pub category: Option<&'a str>,
    pub reason: Option<&'a str>,
    pub until: Option<Timestamp>,
}

pub fn event(e: &redial_store::Event) -> EventView<'_> {
    EventView {
        id: e.cursor.to_string(),
        kind: e.kind,
        at: e.at,
        queue: e.queue.as_deref(),
        job_id: e.job_id.as_deref(),
        endpoint: e.endpoint.as_deref(),
        category: e.category.as_deref(),
        reason: e.reason.as_deref(),
        until: e.until,
    }
}
