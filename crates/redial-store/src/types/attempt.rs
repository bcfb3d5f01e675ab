//! An attempt as the job's log keeps it: what was sent back, its category and decision.

use redial_policy::{Action, Category, DeadCategory, Timestamp};
use serde::{Deserialize, Serialize};

/// One recorded attempt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// 1 for the first attempt of the job, counting across replays.
    pub number: u32,
    pub started_at: Timestamp,
    pub duration_ms: u64,
    /// The HTTP status, when a response arrived.
    pub status: Option<u16>,
    /// The transport error kind (`read-timeout`) or a handler's failure, when no response arrived.
    pub error: Option<String>,
    /// What the error said, for people: the resolver's or the socket's message, a handler's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_detail: Option<String>,
    /// The outcome's category (success, defer, transient, permanent, unknown), or `held`.
    pub category: AttemptCategory,
    /// complete, retry, defer or dead.
    pub decision: AttemptDecision,
    pub dead_category: Option<DeadCategory>,
    pub delay_ms: Option<u64>,
    pub server_wait_ms: Option<u64>,
    pub server_wait_source: Option<String>,
    pub reason: String,
    /// What held the job before this attempt (an endpoint pause, an open breaker...), if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
    /// A bounded excerpt of the response headers, secrets redacted.
    #[serde(default)]
    pub response_headers: Vec<(String, String)>,
    /// A bounded excerpt of the response body: its text, or its bytes in base64 when they are
    /// not UTF-8 ([`Attempt::response_body_base64`]).
    pub response_body: Option<String>,
    /// Whether `response_body` is base64 (the body was not UTF-8 text).
    #[serde(default, skip_serializing_if = "is_false")]
    pub response_body_base64: bool,
    /// Whether the body was cut at the bound (the rest was not read).
    #[serde(default, skip_serializing_if = "is_false")]
    pub response_body_truncated: bool,
    /// Which worker (node and process) made the attempt.
    pub worker: String,
}

/// How an attempt's outcome was classified; `held` for an attempt not sent (its endpoint held
/// it: a retry budget spent, under a policy that fails such retries fast).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptCategory {
    Success,
    Defer,
    Transient,
    Permanent,
    Unknown,
    Held,
}

impl Attempt {
    /// Attempt `number` of a job, started at `started_at` by `worker`, with its category,
    /// decision and reason, and nothing observed yet (no status, error, delay, headers or body,
    /// no time taken): the caller sets what it saw.
    pub fn new(
        number: u32,
        started_at: Timestamp,
        category: AttemptCategory,
        decision: AttemptDecision,
        reason: String,
        worker: String,
    ) -> Attempt {
        Attempt {
            number,
            started_at,
            duration_ms: 0,
            status: None,
            error: None,
            error_detail: None,
            category,
            decision,
            dead_category: None,
            delay_ms: None,
            server_wait_ms: None,
            server_wait_source: None,
            reason,
            held: None,
            response_headers: Vec::new(),
            response_body: None,
            response_body_base64: false,
            response_body_truncated: false,
            worker,
        }
    }

    /// A job's attempts in the order they were made: a store keeps the one that ended the job
    /// apart from the others (in the job's row), and reads them back through here.
    pub fn in_order(mut attempts: Vec<Attempt>) -> Vec<Attempt> {
        attempts.sort_by_key(|a| a.number);
        attempts
    }

    /// The attempt as the stores keep it: JSON without the fields that are empty (absent, they
    /// read back as `None` and `[]`). A no-op job's attempt takes about half the bytes it took
    /// with every field spelt out, in the row, the WAL and the checkpoints (BENCHMARKS.md).
    pub fn to_stored(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(&Stored::of(self))
    }
}

/// [`Attempt`] as stored: the same fields, in the same order, the empty ones left out.
#[derive(Serialize)]
struct Stored<'a> {
    number: u32,
    started_at: Timestamp,
    duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error_detail: Option<&'a str>,
    category: AttemptCategory,
    decision: AttemptDecision,
    #[serde(skip_serializing_if = "Option::is_none")]
    dead_category: Option<DeadCategory>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delay_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    server_wait_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    server_wait_source: Option<&'a str>,
    reason: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    held: Option<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    response_headers: &'a [(String, String)],
    #[serde(skip_serializing_if = "Option::is_none")]
    response_body: Option<&'a str>,
    #[serde(skip_serializing_if = "is_false")]
    response_body_base64: bool,
    #[serde(skip_serializing_if = "is_false")]
    response_body_truncated: bool,
    worker: &'a str,
}

impl<'a> Stored<'a> {
    fn of(a: &'a Attempt) -> Stored<'a> {
        // Every field, by name: a field added to `Attempt` and not here fails to compile.
        let Attempt {
            number,
            started_at,
            duration_ms,
            status,
            error,
            error_detail,
            category,
            decision,
            dead_category,
            delay_ms,
            server_wait_ms,
            server_wait_source,
            reason,
            held,
            response_headers,
            response_body,
            response_body_base64,
            response_body_truncated,
            worker,
        } = a;
        Stored {
            number: *number,
            started_at: *started_at,
            duration_ms: *duration_ms,
            status: *status,
            error: error.as_deref(),
            error_detail: error_detail.as_deref(),
            category: *category,
            decision: *decision,
            dead_category: *dead_category,
            delay_ms: *delay_ms,
            server_wait_ms: *server_wait_ms,
            server_wait_source: server_wait_source.as_deref(),
            reason,
            held: held.as_deref(),
            response_headers,
            response_body: response_body.as_deref(),
            response_body_base64: *response_body_base64,
            response_body_truncated: *response_body_truncated,
            worker,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bare() -> Attempt {
        Attempt {
            number: 1,
            started_at: Timestamp::from_unix_millis(1_795_996_800_000),
            duration_ms: 0,
            status: None,
            error: None,
            error_detail: None,
            category: AttemptCategory::Success,
            decision: AttemptDecision::Complete,
            dead_category: None,
            delay_ms: None,
            server_wait_ms: None,
            server_wait_source: None,
            reason: "handler succeeded".into(),
            held: None,
            response_headers: vec![],
            response_body: None,
            response_body_base64: false,
            response_body_truncated: false,
            worker: "w".into(),
        }
    }

    #[test]
    fn the_stored_form_reads_back_as_the_attempt() {
        let full = Attempt {
            number: 3,
            duration_ms: 12,
            status: Some(503),
            error: Some("read-timeout".into()),
            error_detail: Some("the peer went quiet".into()),
            category: AttemptCategory::Transient,
            decision: AttemptDecision::Dead,
            dead_category: Some(DeadCategory::TransientExhausted),
            delay_ms: Some(100),
            server_wait_ms: Some(2000),
            server_wait_source: Some("Retry-After".into()),
            held: Some("endpoint pause".into()),
            response_headers: vec![("retry-after".into(), "2".into())],
            response_body: Some("slow down".into()),
            response_body_base64: true,
            response_body_truncated: true,
            ..bare()
        };
        for a in [bare(), full] {
            let stored = a.to_stored().expect("serialises");
            let back: Attempt = serde_json::from_str(&stored).expect("reads back");
            assert_eq!(back, a, "{stored}");
        }
        assert_eq!(
            bare().to_stored().expect("serialises"),
            "{\"number\":1,\"started_at\":\"2026-11-30T00:00:00Z\",\"duration_ms\":0,\
             \"category\":\"success\",\"decision\":\"complete\",\
             \"reason\":\"handler succeeded\",\"worker\":\"w\"}"
        );
    }
}

impl AttemptCategory {
    pub const fn as_str(self) -> &'static str {
        match self {
            AttemptCategory::Held => "held",
            AttemptCategory::Success => Category::Success.as_str(),
            AttemptCategory::Defer => Category::Defer.as_str(),
            AttemptCategory::Transient => Category::Transient.as_str(),
            AttemptCategory::Permanent => Category::Permanent.as_str(),
            AttemptCategory::Unknown => Category::Unknown.as_str(),
        }
    }
}

impl From<Category> for AttemptCategory {
    fn from(c: Category) -> Self {
        match c {
            Category::Success => AttemptCategory::Success,
            Category::Defer => AttemptCategory::Defer,
            Category::Transient => AttemptCategory::Transient,
            Category::Permanent => AttemptCategory::Permanent,
            Category::Unknown => AttemptCategory::Unknown,
        }
    }
}

impl PartialEq<&str> for AttemptCategory {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::fmt::Display for AttemptCategory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What was decided after an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptDecision {
    Complete,
    Retry,
    Defer,
    Dead,
}

impl AttemptDecision {
    pub const fn as_str(self) -> &'static str {
        match self {
            AttemptDecision::Complete => "complete",
            AttemptDecision::Retry => "retry",
            AttemptDecision::Defer => "defer",
            AttemptDecision::Dead => "dead",
        }
    }
}

impl From<&Action> for AttemptDecision {
    fn from(a: &Action) -> Self {
        match a {
            Action::Complete => AttemptDecision::Complete,
            Action::Retry { .. } => AttemptDecision::Retry,
            Action::Defer { .. } => AttemptDecision::Defer,
            Action::Dead(_) => AttemptDecision::Dead,
        }
    }
}

impl PartialEq<&str> for AttemptDecision {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::fmt::Display for AttemptDecision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}
