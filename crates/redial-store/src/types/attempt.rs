//! An attempt as the job's log keeps it: what was sent back, its category and decision.

use super::*;

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
