//! The JSON shapes the API answers with. Secrets in request headers and URLs are redacted here.

use redial_engine::redact;
use redial_policy::{DeadCategory, Timestamp};
use redial_store::{Attempt, Job, JobState};
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
    pub last_reason: Option<&'a str>,
    pub cancel_requested: bool,
    pub request: RequestView<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deduplicated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt_log: Option<&'a [Attempt]>,
}

#[derive(Debug, Serialize)]
pub struct RequestView<'a> {
    pub method: &'a str,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body_bytes: usize,
    pub timeout_ms: Option<u64>,
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
        last_reason: j.last_reason.as_deref(),
        cancel_requested: j.cancel_requested,
        request: RequestView {
            method: &j.request.method,
            url: redact::url(&j.request.url),
            headers: redact::headers(&j.request.headers, usize::MAX),
            body_bytes: j.request.body.as_ref().map_or(0, String::len),
            timeout_ms: j.request.timeout_ms,
        },
        deduplicated: None,
        attempt_log: None,
    }
}
