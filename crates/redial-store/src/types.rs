//! Records and parameter types shared by every store.

use redial_policy::endpoint::HandPause;
use redial_policy::{Action, Category, DeadCategory, PolicyOverride, Timestamp};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

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
        !g.trim().is_empty() && g.chars().count() <= 128 && plain_text(g)
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
    /// A bounded excerpt of the response body.
    pub response_body: Option<String>,
    /// Which worker (node and process) made the attempt.
    pub worker: String,
}

/// Which jobs a listing or a bulk action covers. Every field set must match.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobFilter {
    pub queue: Option<String>,
    pub state: Option<JobState>,
    pub category: Option<DeadCategory>,
    pub endpoint: Option<String>,
    /// Created at or after.
    pub since: Option<Timestamp>,
    /// Created before.
    pub until: Option<Timestamp>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct JobListParams {
    pub filter: JobFilter,
    /// The `seq` of the last job of the previous page.
    pub after: Option<i64>,
    pub limit: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct JobPage {
    pub jobs: Vec<Job>,
    /// Present when more jobs may follow: pass it as `after`.
    pub next: Option<i64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct LeaseParams {
    pub queue: String,
    pub limit: u32,
    pub owner: String,
    pub now: Timestamp,
    pub lease_until: Timestamp,
}

#[derive(Clone, Debug, PartialEq)]
pub struct HeartbeatParams {
    pub owner: String,
    pub ids: Vec<JobId>,
    pub lease_until: Timestamp,
}

/// What an attempt decided for the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    Complete,
    Retry { at: Timestamp },
    Defer { until: Timestamp },
    Dead { category: DeadCategory },
}

#[derive(Clone, Debug, PartialEq)]
pub struct RecordAttemptParams {
    pub id: JobId,
    /// The job's `seq`, when known: the job is then found by the table's own key (and must
    /// still have this id).
    pub seq: Option<i64>,
    /// The job's queue and endpoint as leased, read with `seq` (a store that counts jobs by them
    /// needs them to record without reading the job first).
    pub queue: String,
    pub endpoint: String,
    pub owner: String,
    pub now: Timestamp,
    pub attempt: Attempt,
    pub transition: Transition,
    /// The job's counters after the decision.
    pub attempts: u32,
    pub unknown_attempts: u32,
    pub deferrals: u32,
    pub last_delay_ms: Option<u64>,
}

/// What recording an attempt writes to the job, worked out from the job as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordPlan {
    pub state: JobState,
    pub category: Option<DeadCategory>,
    pub run_at: Timestamp,
    pub finished_at: Option<Timestamp>,
    pub reason: String,
    /// The attempt's number in the job's log.
    pub number: u32,
}

impl RecordAttemptParams {
    /// What the transition writes to a job still as leased (no cancel waiting): its state, dead
    /// category, new `run_at` (`None` keeps the job's) and `finished_at`. The stores' one-statement
    /// paths apply it; [`RecordAttemptParams::plan`] covers every case from the stored job.
    pub fn as_leased(
        &self,
    ) -> (
        JobState,
        Option<DeadCategory>,
        Option<Timestamp>,
        Option<Timestamp>,
    ) {
        match self.transition {
            Transition::Complete => (JobState::Completed, None, None, Some(self.now)),
            Transition::Retry { at } => (JobState::Scheduled, None, Some(at), None),
            Transition::Defer { until } => (JobState::Deferred, None, Some(until), None),
            Transition::Dead { category } => (JobState::Dead, Some(category), None, Some(self.now)),
        }
    }

    /// The job's next state: the transition's, except that a job whose cancellation was
    /// requested while it ran ends cancelled unless the attempt completed it or made it dead.
    pub fn plan(&self, job: &Job) -> RecordPlan {
        let now = self.now;
        let (mut state, mut category, mut run_at, mut finished_at) = match self.transition {
            Transition::Complete => (JobState::Completed, None, job.run_at, Some(now)),
            Transition::Retry { at } => (JobState::Scheduled, None, at, None),
            Transition::Defer { until } => (JobState::Deferred, None, until, None),
            Transition::Dead { category } => {
                (JobState::Dead, Some(category), job.run_at, Some(now))
            }
        };
        let mut reason = self.attempt.reason.clone();
        if job.cancel_requested && !state.is_finished() {
            (state, category, run_at, finished_at) =
                (JobState::Cancelled, None, job.run_at, Some(now));
            reason.push_str("; cancelled while running");
        }
        RecordPlan {
            state,
            category,
            run_at,
            finished_at,
            reason,
            number: job.runs + 1,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ReleaseParams {
    pub owner: String,
    pub ids: Vec<JobId>,
    pub now: Timestamp,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RescueParams {
    pub now: Timestamp,
    /// A job whose lease expires more than this many times goes dead.
    pub max_stalls: u32,
    /// Stores shared by several nodes: how long a node's presence lock must stay free, with no
    /// sign of life from the node meanwhile, before its leases are ended early. A free lock
    /// alone is a sign to look, not a death: a node whose connection blinked (a database restart,
    /// `pg_terminate_backend`) is still sending its jobs and takes its lock back at its next
    /// tick; ending its leases then would send them twice.
    pub presence_grace: std::time::Duration,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RescueReport {
    /// Back to ready, to run again.
    pub requeued: u64,
    /// Over the stall ceiling: dead.
    pub dead: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CleanupParams {
    /// Completed and cancelled jobs finished before this are deleted.
    pub completed_before: Timestamp,
    /// Dead jobs finished before this are deleted.
    pub dead_before: Timestamp,
    /// Beyond this many completed and cancelled jobs, the oldest are deleted whatever their age.
    pub completed_keep: Option<u64>,
    /// At most this many deleted per call, so that a cleanup never holds the database for long.
    pub limit: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Stats {
    pub by_queue: Vec<QueueCount>,
    pub by_endpoint: Vec<EndpointCount>,
    /// Per queue with deferred jobs: when the longest-deferred of them was deferred.
    pub oldest_deferred: Vec<QueueSince>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QueueSince {
    pub queue: String,
    pub since: Timestamp,
}

/// Dead letters of one queue and category that died in a given span of time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeadCount {
    pub queue: String,
    pub category: DeadCategory,
    pub count: u64,
}

/// Dead letters that share a queue, a category and an endpoint: what a bulk action by filter
/// acts on together, for triage.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeadGroup {
    pub queue: String,
    pub category: DeadCategory,
    pub endpoint: String,
    pub count: u64,
    /// When the first and the last of them went dead.
    pub first: Timestamp,
    pub last: Timestamp,
    /// The reason line of one of them, for people.
    pub reason: Option<String>,
}

/// One group's jobs in a queue: those waiting (ready, scheduled, deferred) and those running.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GroupCount {
    pub group: String,
    pub waiting: u64,
    pub running: u64,
}

/// A queue's groups with waiting or running jobs, most waiting first, and how many there are.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GroupCounts {
    pub groups: Vec<GroupCount>,
    /// Groups with waiting or running jobs, all of them (`groups` holds the first `limit`).
    pub total: u64,
}

impl GroupCounts {
    /// From counts per group of waiting and of running jobs (as a store reads them, one query
    /// each): every group in either, the first `limit` as [`GroupCounts::from_counts`] orders.
    pub fn from_parts(
        waiting: Vec<(String, u64)>,
        running: Vec<(String, u64)>,
        limit: u32,
    ) -> Self {
        let mut by_group: std::collections::BTreeMap<String, GroupCount> = Default::default();
        for (counts, is_waiting) in [(waiting, true), (running, false)] {
            for (group, n) in counts {
                let e = by_group.entry(group.clone()).or_insert(GroupCount {
                    group,
                    waiting: 0,
                    running: 0,
                });
                if is_waiting {
                    e.waiting = n;
                } else {
                    e.running = n;
                }
            }
        }
        GroupCounts::from_counts(by_group.into_values().collect(), limit)
    }

    /// The first `limit` of `groups`, most waiting first, then most running, then by name.
    pub fn from_counts(mut groups: Vec<GroupCount>, limit: u32) -> GroupCounts {
        groups.sort_by(|a, b| {
            b.waiting
                .cmp(&a.waiting)
                .then(b.running.cmp(&a.running))
                .then(a.group.cmp(&b.group))
        });
        let total = groups.len() as u64;
        groups.truncate(limit as usize);
        GroupCounts { groups, total }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QueueCount {
    pub queue: String,
    pub state: JobState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<DeadCategory>,
    pub count: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EndpointCount {
    pub endpoint: String,
    pub state: JobState,
    pub count: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CandidateParams {
    pub queue: String,
    pub now: Timestamp,
    /// Endpoints none of whose jobs may go now.
    pub exclude: Vec<String>,
    /// Endpoints whose retries (jobs with failed attempts) may not go now.
    pub exclude_retries: Vec<String>,
    /// Endpoints whose first attempts (jobs with no failed attempt) may not go now.
    pub exclude_firsts: Vec<String>,
    pub limit: u32,
}

/// A runnable job, as much as admission needs to know.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    pub seq: i64,
    pub id: JobId,
    pub endpoint: String,
    /// It has failed before: it counts against the endpoint's retry budget.
    pub is_retry: bool,
    pub run_at: Timestamp,
    /// Its group, if it has one.
    pub group: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct LeaseIdsParams {
    /// The jobs, by `seq` (as candidates give it): found by the table's own key.
    pub seqs: Vec<i64>,
    pub owner: String,
    pub now: Timestamp,
    pub lease_until: Timestamp,
}

/// What admission says of a candidate while leasing ([`Store::job_lease_admitted`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Lease it to run.
    Take,
    /// Its endpoint holds: none of that endpoint's jobs go in this lease.
    HoldEndpoint,
    /// Its endpoint holds retries: none of that endpoint's retries go in this lease.
    HoldRetries,
    /// Its endpoint holds first attempts: none of that endpoint's first attempts go in this
    /// lease; its retries may.
    HoldFirsts,
    /// Lease it to end it without a request (a retry whose endpoint's budget is spent, under a
    /// policy that fails such retries fast).
    Fail,
    /// Its group holds (a limit of its own): none of that group's jobs go in this lease.
    HoldGroup,
}

/// Admission, asked about each candidate in lease order. A backend may ask it on its own
/// thread, inside its transaction: answer quickly, without blocking.
pub trait Admit: Send {
    fn admit(&mut self, candidate: &Candidate) -> Verdict;
    /// A candidate admitted (`Take` or `Fail`) that was not leased after all (another worker
    /// took it first, or the lease failed): undo what admitting it did.
    fn not_leased(&mut self, candidate: &Candidate);
    /// How many turns `group` takes for each turn of a group of weight 1 when a lease goes
    /// round-robin across a queue's groups (at least 1).
    fn weight(&self, _group: &str) -> u32 {
        1
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct LeaseAdmittedParams {
    pub queue: String,
    pub now: Timestamp,
    pub owner: String,
    pub lease_until: Timestamp,
    /// At most this many jobs to run (`Take`); jobs to fail do not count.
    pub max: usize,
}

/// What [`Store::job_lease_admitted`] leased, each list in lease order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AdmittedLease {
    /// Jobs admitted to run.
    pub taken: Vec<Job>,
    /// Jobs admitted to fail (`Verdict::Fail`).
    pub failed: Vec<Job>,
    /// The lease stopped looking before it had looked at everything it may take from: every
    /// group (a bound on its cost), or, on PostgreSQL, the head of the queue before where it
    /// began to read (the lease floor, `redial-store-postgres`'s `lease.rs`). Due jobs may be
    /// waiting there: lease again at once.
    pub more: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ExpireParams {
    pub now: Timestamp,
    /// Endpoint -> what holds it, for the dead jobs' reasons.
    pub reasons: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EndpointBacklog {
    pub endpoint: String,
    /// Waiting jobs whose time has come.
    pub due: u64,
    /// Waiting jobs scheduled later.
    pub later: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct EndpointRecord {
    pub name: String,
    /// The engine's serialised endpoint state.
    pub state: String,
    pub updated_at: Timestamp,
}

/// A hold one node shares with the others: an endpoint paused, or its breaker open, until an
/// instant; or a pace learned from bare 429s, kept until an instant unless refused again.
#[derive(Clone, Debug, PartialEq)]
pub struct SharedHold {
    pub endpoint: String,
    pub paused_until: Option<Timestamp>,
    pub pause_reason: Option<String>,
    pub breaker_until: Option<Timestamp>,
    pub breaker_reason: Option<String>,
    /// The send instant of the latest request the endpoint refused with a bare 429, plus the
    /// time a learned pace is kept without a refusal. Only lengthens, as the others.
    pub paced_until: Option<Timestamp>,
}

/// What people set by hand on a queue or an endpoint, which every node honours: a pause, and
/// (endpoints) when it was last resumed or had its breaker reset by hand.
#[derive(Clone, Debug, PartialEq)]
pub struct Control {
    pub kind: ControlKind,
    pub name: String,
    pub pause: Option<HandPause>,
    /// Ends the pause the endpoint's answers set (a server-given wait), once on each node.
    pub resumed_at: Option<Timestamp>,
    /// Closes the endpoint's breaker, once on each node.
    pub breaker_reset_at: Option<Timestamp>,
}

impl Control {
    /// A control with nothing set yet.
    pub fn new(kind: ControlKind, name: &str) -> Control {
        Control {
            kind,
            name: name.to_owned(),
            pause: None,
            resumed_at: None,
            breaker_reset_at: None,
        }
    }
}

/// What a [`Control`] applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ControlKind {
    Queue,
    Endpoint,
}

impl ControlKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ControlKind::Queue => "queue",
            ControlKind::Endpoint => "endpoint",
        }
    }

    pub fn parse(s: &str) -> Option<ControlKind> {
        match s {
            "queue" => Some(ControlKind::Queue),
            "endpoint" => Some(ControlKind::Endpoint),
            _ => None,
        }
    }
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

/// A recurring schedule as kept: its definition is a document the engine writes and reads (the
/// store does not look inside); the store keeps when it next falls and whether it is paused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleRecord {
    /// Unique; occurrences' job ids are derived from it.
    pub id: String,
    /// The definition, as JSON.
    pub definition: String,
    pub paused: bool,
    /// When the next occurrence falls; `None` when none will.
    pub next_at: Option<Timestamp>,
    /// The latest occurrence enqueued, and when.
    pub last_occurrence: Option<Timestamp>,
    pub last_fired_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// [`Store::schedule_advance`](crate::Store::schedule_advance): moves a schedule on from the
/// occurrence `due`, if no other node did first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleAdvance {
    pub id: String,
    /// The `next_at` the caller read; nothing changes unless it is still the stored one.
    pub due: Timestamp,
    /// The `updated_at` the caller read: a schedule saved, paused or resumed since is not moved
    /// on by what was read before.
    pub read_at: Timestamp,
    pub next_at: Option<Timestamp>,
    /// The latest occurrence enqueued by this check, if any.
    pub last_occurrence: Option<Timestamp>,
    pub now: Timestamp,
}

/// Where a database's schema stands against the schema this Redial knows: its version, the
/// latest, and what each pending migration would do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaStatus {
    /// 0 for a database that holds no Redial schema yet.
    pub version: usize,
    pub latest: usize,
    pub pending: Vec<PendingMigration>,
}

impl SchemaStatus {
    /// The status of a database at `version`, against `migrations` (each one's SQL).
    pub fn of(version: usize, migrations: &[&str]) -> SchemaStatus {
        SchemaStatus {
            version,
            latest: migrations.len(),
            pending: migrations
                .iter()
                .enumerate()
                .skip(version)
                .map(|(i, sql)| PendingMigration {
                    version: i + 1,
                    statements: statements(sql),
                })
                .collect(),
        }
    }

    /// Whether the database holds a schema newer than this Redial knows.
    pub fn is_newer(&self) -> bool {
        self.version > self.latest
    }
}

/// One migration still to apply: its version and the first line of each statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingMigration {
    pub version: usize,
    pub statements: Vec<String>,
}

/// The first line of each statement in `sql` (lines that begin with a statement's keyword),
/// cut to 120 characters: enough to see what a migration changes.
fn statements(sql: &str) -> Vec<String> {
    const KEYWORDS: [&str; 9] = [
        "CREATE ", "ALTER ", "DROP ", "INSERT ", "UPDATE ", "DELETE ", "ANALYZE", "DO ", "PRAGMA ",
    ];
    sql.lines()
        .map(str::trim)
        .filter(|l| KEYWORDS.iter().any(|k| l.starts_with(k)))
        .map(|l| {
            let l = l.trim_end_matches(['(', ';']).trim_end();
            if l.chars().count() > 120 {
                let mut cut: String = l.chars().take(119).collect();
                cut.push('…');
                cut
            } else {
                l.to_owned()
            }
        })
        .collect()
}
