//! A replay with changes: a dead job sent again with its request or its routing changed, and
//! the record each such replay leaves on the job (what changed, and what the job was before).

use crate::{HttpRequest, JobId};
use redial_policy::{PolicyOverride, Timestamp};
use serde::{Deserialize, Serialize};

/// What one replay with changes did to a job. A job keeps every one, oldest first
/// ([`Store::job_changes`](crate::Store::job_changes)): the first one's `before` is the job as
/// it was enqueued.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobChange {
    pub at: Timestamp,
    /// The job's `replays` count that this replay made.
    pub replay: u32,
    /// One line per change, for people ("url https://old.example.com/v1/x -> https://new...",
    /// "header x-api-key set"); a header's value is never in it.
    pub changed: Vec<String>,
    /// The job's request and routing before this replay.
    pub before: JobBefore,
}

/// A job's request and routing, as they were before a replay changed them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobBefore {
    pub queue: String,
    pub endpoint: String,
    pub request: HttpRequest,
    pub idempotency_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyOverride>,
    /// The body's size, in bytes, when the body itself was not kept: a job keeps the body of
    /// its first change's `before` only (the request as enqueued), so that its history stays
    /// bounded however often it is replayed with changes ([`crate::rules::replay_changes`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_bytes: Option<u64>,
}

impl JobBefore {
    /// `job`'s request and routing as they stand, with its body (the store keeps the body of a
    /// job's first change only: `rules::replay_changes`).
    pub fn of(job: &crate::Job) -> JobBefore {
        JobBefore {
            queue: job.queue.clone(),
            endpoint: job.endpoint.clone(),
            request: job.request.clone(),
            idempotency_key: job.idempotency_key.clone(),
            policy: job.policy.clone(),
            body_bytes: None,
        }
    }
}

/// A dead job replayed with a changed request or routing
/// ([`Store::job_replay_changed`](crate::Store::job_replay_changed)).
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayChangedParams {
    pub id: JobId,
    pub now: Timestamp,
    /// The job's `replays` when the changes were worked out from it: the replay happens only
    /// if no other came in between ([`StoreError::Changed`](crate::StoreError::Changed)
    /// otherwise), so changes are never applied to a job they were not made for.
    pub replays: u32,
    pub queue: String,
    pub endpoint: String,
    pub request: HttpRequest,
    pub idempotency_key: Option<String>,
    pub policy: Option<PolicyOverride>,
    /// Appended to the job's changes.
    pub change: JobChange,
}
