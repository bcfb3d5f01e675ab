//! Records and parameter types shared by every store: here the job and its states; by area in
//! attempt, callback, change, event, params, schedules, schema.

use redial_policy::{DeadCategory, PolicyOverride, Timestamp};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

mod attempt;
mod callback;
mod change;
mod event;
mod params;
mod schedules;
mod schema;

pub use attempt::{Attempt, AttemptCategory, AttemptDecision};
pub(crate) use callback::Finish;
pub use callback::{Callback, CallbackEvent, CALLBACK_TAG, REDACTED};
pub use change::{JobBefore, JobChange, ReplayChangedParams};
pub use event::{
    completed_events, Completion, Event, EventCursor, EventFrom, EventKind, EventListParams,
    EventPage, NewEvent, EVENT_SCAN,
};
pub use params::{
    Admit, AdmittedLease, Candidate, CandidateParams, CleanupParams, Control, ControlKind,
    DeadCount, DeadGroup, DeadPattern, DeadReason, EndpointBacklog, EndpointCount, EndpointRecord,
    ExpireParams, GroupCount, GroupCounts, HeartbeatParams, JobFilter, JobListParams, JobPage,
    KeyLine, LeaseAdmittedParams, LeaseIdsParams, LeaseParams, OrderingKeysParams, QueueCount,
    QueueSince, RecordAttemptParams, Recorded, ReleaseParams, RescueParams, RescueReport,
    RetriesNowParams, SharedHold, Stats, Transition, Verdict,
};
pub use schedules::{ScheduleAdvance, ScheduleRecord};
pub use schema::{PendingMigration, SchemaStatus};

/// A job's id: given by the client or generated. Unique across queues.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(pub String);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for JobId {
    fn from(s: &str) -> Self {
        JobId(s.to_owned())
    }
}

/// The states of the job state machine (ARCHITECTURE.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting for its `run_at` (a delayed job, or a retry after a failure).
    Scheduled,
    /// Runnable now.
    Ready,
    /// Leased by a worker; an attempt is in flight.
    Running,
    /// Waiting for a server-given instant (a 429 and friends); kept apart from scheduled.
    Deferred,
    Completed,
    /// In the dead letters, with a category.
    Dead,
    Cancelled,
}

impl JobState {
    pub const ALL: [JobState; 7] = [
        JobState::Scheduled,
        JobState::Ready,
        JobState::Running,
        JobState::Deferred,
        JobState::Completed,
        JobState::Dead,
        JobState::Cancelled,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            JobState::Scheduled => "scheduled",
            JobState::Ready => "ready",
            JobState::Running => "running",
            JobState::Deferred => "deferred",
            JobState::Completed => "completed",
            JobState::Dead => "dead",
            JobState::Cancelled => "cancelled",
        }
    }

    /// Completed, dead and cancelled jobs are finished: nothing runs them again but a replay.
    pub const fn is_finished(self) -> bool {
        matches!(
            self,
            JobState::Completed | JobState::Dead | JobState::Cancelled
        )
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JobState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| {
                format!("unknown state {s:?}: use one of scheduled, ready, running, deferred, completed, dead, cancelled")
            })
    }
}

/// Parses a dead-letter category name (`transient_exhausted`).
pub fn parse_dead_category(s: &str) -> Result<DeadCategory, String> {
    DeadCategory::ALL
        .into_iter()
        .find(|c| c.as_str() == s)
        .ok_or_else(|| {
            format!("unknown category {s:?}: use one of permanent, transient_exhausted, unknown_exhausted, deferral_exhausted, deadline_exceeded, budget_exhausted")
        })
}

/// The HTTP request a job sends, the same on every attempt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpRequest {
    pub method: String,
    pub url: String,
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The whole attempt's time limit, in milliseconds; the engine's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The credentials profile to send it with (`[credentials.NAME]` in the configuration)
    /// instead of its endpoint's: a name, never a secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
}

impl HttpRequest {
    /// Whether two requests are the same job's: equal but for the trace context headers
    /// (`traceparent`, `tracestate`), which a caller's retried enqueue carries anew.
    pub fn same_as(&self, other: &HttpRequest) -> bool {
        let trace =
            |n: &str| n.eq_ignore_ascii_case("traceparent") || n.eq_ignore_ascii_case("tracestate");
        let headers = |r: &HttpRequest| -> Vec<(String, String)> {
            r.headers
                .iter()
                .filter(|(n, _)| !trace(n))
                .cloned()
                .collect()
        };
        self.method == other.method
            && self.url == other.url
            && self.body == other.body
            && self.timeout_ms == other.timeout_ms
            && self.credentials == other.credentials
            && headers(self) == headers(other)
    }
}

/// A job to insert.
#[derive(Clone, Debug, PartialEq)]
pub struct NewJob {
    pub id: JobId,
    pub queue: String,
    /// The endpoint the job belongs to: the URL's origin unless the job names one.
    pub endpoint: String,
    pub request: HttpRequest,
    pub idempotency_key: Option<String>,
    pub priority: i32,
    pub run_at: Timestamp,
    pub deadline: Option<Timestamp>,
    pub tags: Vec<String>,
    /// The job's own policy override, laid over the queue's.
    pub policy: Option<PolicyOverride>,
    pub created_at: Timestamp,
    /// Who the job is for (a tenant, a customer): a queue leases round-robin across the groups
    /// with due work, and groups may have limits of their own. None: the queue's ungrouped jobs,
    /// which take their turn as one group.
    pub group: Option<String>,
    /// What to tell when the job finishes ([`Callback`]).
    pub callback: Option<Callback>,
    /// Its ordering key: the queue's jobs with the same key start one at a time, in the order
    /// they were enqueued ([`OrderingKey`]).
    pub ordering: Option<OrderingKey>,
}

/// A job's ordering key and what its death does to the key. The jobs of one queue with the same
/// key form a line: only its head may start, the others wait in enqueue order (by `seq`; a
/// replayed job keeps its place). The head is the first job of the line, or a running one (a
/// replayed earlier job waits for it to end). A job is in its key's line while it waits or runs,
/// and while it is dead when [`OnDead::Block`]: a head that is retried, deferred or held stays
/// the head; one that completes, is cancelled, or dies with [`OnDead::Skip`] leaves the line
/// and the next job becomes the head. Stores keep the line in the database (triggers), so no
/// path that moves a job can forget it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderingKey {
    pub key: String,
    /// What the job's death does to its key (the queue's `ordering_on_dead` when enqueued).
    pub on_dead: OnDead,
}

impl OrderingKey {
    /// The number that stands for the line of `key` in `queue` in the stores' indexes (an integer
    /// compares in one step where the queue and key compare byte by byte): FNV-1a over the
    /// queue, a NUL and the key. Two lines that share a number (about one chance in 10^7 with
    /// a million keys) are kept as one: their jobs start one at a time, in enqueue order
    /// together, which keeps each key's order. Stored: it never changes.
    pub fn line(queue: &str, key: &str) -> i64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in queue.bytes().chain([0]).chain(key.bytes()) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h as i64
    }

    /// A key: 1 to 256 characters of [`plain_text`], not all of them spaces.
    pub fn valid(key: &str) -> bool {
        plain_name(key, 256)
    }
}

/// What a dead head does to its ordering key's line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnDead {
    /// The key waits until the dead job is replayed or dismissed (the default).
    #[default]
    Block,
    /// The next job of the key goes on; a replay puts the dead job back in its place.
    Skip,
}

impl OnDead {
    pub const fn as_str(self) -> &'static str {
        match self {
            OnDead::Block => "block",
            OnDead::Skip => "skip",
        }
    }
}

impl FromStr for OnDead {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "block" => Ok(OnDead::Block),
            "skip" => Ok(OnDead::Skip),
            other => Err(format!("unknown ordering_on_dead {other:?}: block or skip")),
        }
    }
}

/// The one rule for names people act on (endpoints, groups, ordering keys, tags): 1 to `max`
/// characters of [`plain_text`], not all of them spaces. What an enqueue accepts, every control
/// and search accepts too.
pub fn plain_name(text: &str, max: usize) -> bool {
    !text.trim().is_empty() && text.chars().count() <= max && plain_text(text)
}

/// Whether `text` is one line of plain text, fit for a name or a reason that people read in a
/// terminal or a page: no control character (newlines, escapes, NUL, C1), no bidirectional
/// embedding, override or isolate (U+202A-U+202E, U+2066-U+2069, and the marks U+200E, U+200F,
/// U+061C: they reorder what is shown after them), no line or paragraph separator (U+2028,
/// U+2029).
pub fn plain_text(text: &str) -> bool {
    !text.chars().any(|c| {
        c.is_control()
            || matches!(
                c,
                '\u{202a}'..='\u{202e}'
                    | '\u{2066}'..='\u{2069}'
                    | '\u{200e}'
                    | '\u{200f}'
                    | '\u{061c}'
                    | '\u{2028}'
                    | '\u{2029}'
            )
    })
}

impl NewJob {
    /// A group's name: 1 to 128 characters of [`plain_text`], not all of them spaces (it shows
    /// in logs, views and terminals, and "" marks the ungrouped jobs' turn in a lease's
    /// round-robin).
    pub fn valid_group(g: &str) -> bool {
        plain_name(g, 128)
    }

    /// The state a new job starts in: scheduled when it runs later than it was created.
    pub fn initial_state(&self) -> JobState {
        if self.run_at > self.created_at {
            JobState::Scheduled
        } else {
            JobState::Ready
        }
    }

    /// The job as a store keeps it right after inserting it under `seq`.
    pub fn into_stored(self, seq: i64) -> Job {
        Job {
            seq,
            state: self.initial_state(),
            id: self.id,
            queue: self.queue,
            endpoint: self.endpoint,
            category: None,
            request: self.request,
            idempotency_key: self.idempotency_key,
            priority: self.priority,
            run_at: self.run_at,
            deadline: self.deadline,
            tags: self.tags,
            group: self.group,
            callback: self.callback,
            ordering: self.ordering,
            policy: self.policy,
            created_at: self.created_at,
            updated_at: self.created_at,
            finished_at: None,
            attempts: 0,
            unknown_attempts: 0,
            deferrals: 0,
            stalls: 0,
            replays: 0,
            runs: 0,
            last_delay_ms: None,
            last_reason: None,
            lease_owner: None,
            lease_until: None,
            cancel_requested: false,
        }
    }
}

impl NewJob {
    /// The job as a store keeps it right after inserting it under `seq` already leased to
    /// `owner` until `until` (a callback delivery its recorder sends at once).
    pub fn into_leased(self, seq: i64, owner: &str, until: Timestamp) -> Job {
        Job {
            state: JobState::Running,
            lease_owner: Some(owner.to_owned()),
            lease_until: Some(until),
            ..self.into_stored(seq)
        }
    }
}

/// A stored job.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    pub id: JobId,
    pub queue: String,
    pub endpoint: String,
    pub state: JobState,
    /// Set when the job is dead.
    pub category: Option<DeadCategory>,
    pub request: HttpRequest,
    pub idempotency_key: Option<String>,
    pub priority: i32,
    /// When it runs next (for scheduled, ready and deferred jobs).
    pub run_at: Timestamp,
    pub deadline: Option<Timestamp>,
    pub tags: Vec<String>,
    /// Its group ([`NewJob::group`]).
    pub group: Option<String>,
    /// What to tell when it finishes ([`Callback`]).
    pub callback: Option<Callback>,
    /// Its ordering key ([`OrderingKey`]).
    pub ordering: Option<OrderingKey>,
    pub policy: Option<PolicyOverride>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub finished_at: Option<Timestamp>,
    /// Failed attempts (transient and unknown) since creation or the last replay.
    pub attempts: u32,
    pub unknown_attempts: u32,
    pub deferrals: u32,
    /// Times its lease expired mid-attempt (the process died or hung).
    pub stalls: u32,
    pub replays: u32,
    /// Every attempt made, whatever its outcome, across replays: the attempt log's length.
    pub runs: u32,
    pub last_delay_ms: Option<u64>,
    /// The reason of the last decision, one line.
    pub last_reason: Option<String>,
    pub lease_owner: Option<String>,
    pub lease_until: Option<Timestamp>,
    pub cancel_requested: bool,
    /// Ordering key for cursors; increases with insertion.
    pub seq: i64,
}

/// The result of inserting one job.
#[derive(Clone, Debug, PartialEq)]
pub enum InsertOutcome {
    Inserted(Job),
    /// A job with this id and the same request exists: nothing was written.
    Duplicate(Job),
    /// A job with this id exists with a different request: nothing was written.
    Conflict(Job),
}

impl InsertOutcome {
    pub fn job(&self) -> &Job {
        match self {
            InsertOutcome::Inserted(j)
            | InsertOutcome::Duplicate(j)
            | InsertOutcome::Conflict(j) => j,
        }
    }
}
