//! The seam between the engine and the work: a [`Handler`] runs one attempt of a job and reports
//! what happened as a value.

use async_trait::async_trait;
use redial_policy::Outcome;
use redial_store::Job;

/// What one attempt produced: the outcome the policy classifies, and what to keep for people.
#[derive(Clone, Debug, PartialEq)]
pub struct AttemptOutput {
    pub outcome: Outcome,
    /// Response headers, as received; the engine redacts and bounds them before storing.
    pub response_headers: Vec<(String, String)>,
    /// The start of the response body, already bounded by the handler: its text, or its bytes
    /// in base64 when they are not UTF-8 (`response_body_base64`).
    pub response_body: Option<String>,
    /// Whether `response_body` is base64.
    pub response_body_base64: bool,
    /// Whether the body was cut at the bound.
    pub response_body_truncated: bool,
    /// A transport error's own message, or a handler's explanation.
    pub error_detail: Option<String>,
}

impl AttemptOutput {
    /// An output with nothing to keep besides the outcome.
    pub fn from_outcome(outcome: Outcome) -> Self {
        AttemptOutput {
            outcome,
            response_headers: Vec::new(),
            response_body: None,
            response_body_base64: false,
            response_body_truncated: false,
            error_detail: None,
        }
    }
}

/// Runs attempts. The HTTP executor is the built-in handler; programs embedding the engine bring
/// their own, returning typed outcomes (`Outcome::Handler`). A handler never returns `Err`: a
/// failed attempt is an outcome.
#[async_trait]
pub trait Handler: Send + Sync + std::fmt::Debug {
    async fn run(&self, job: &Job) -> AttemptOutput;

    /// Whether what this handler sends for `job` carries an idempotency key the receiver can
    /// deduplicate on, so that an attempt whose outcome is unknown is safe to repeat. By
    /// default, whether the job has a key.
    fn carries_idempotency_key(&self, job: &Job) -> bool {
        job.idempotency_key.is_some()
    }
}
