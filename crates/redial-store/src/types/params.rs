//! The parameters and answers of the store's methods: listing, leasing (candidates, verdicts,
//! admission), recording, maintenance, counts, endpoints and controls.

use super::attempt::Attempt;
use super::{Job, JobId, JobState, NewJob};
use redial_policy::endpoint::HandPause;
use redial_policy::{DeadCategory, Timestamp};
use serde::{Deserialize, Serialize};

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
    /// Finished (completed, dead or cancelled) at or after: what died during an outage.
    pub finished_since: Option<Timestamp>,
    /// The job's last reason is one of these (exactly); an empty list matches nothing. What a
    /// reason pattern resolves to: [`reasons_with_pattern`](crate::reasons_with_pattern).
    pub reasons: Option<Vec<String>>,
    /// The job's idempotency key is this one (exactly), answered from the `job_terms` index.
    pub idempotency_key: Option<String>,
    /// The job carries this tag (exactly), answered from the `job_terms` index.
    pub tag: Option<String>,
    /// Dead jobs whose reason has a word starting with each of these ([`reason_words`] of
    /// what was asked; all must match), answered from the `dead_words` index.
    ///
    /// These three read the indexes as they stood at the last [`Store::index_for_search`]
    /// (SQLite writes a job's terms there, not when inserting it): callers bring them up to
    /// date first.
    pub reason_words: Vec<String>,
    /// Rows after this `seq` only, and up to this one (a bulk action's chunk).
    pub after_seq: Option<i64>,
    pub upto_seq: Option<i64>,
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
    /// The callback delivery the job owes if the attempt leaves it as leased expects
    /// ([`RecordAttemptParams::as_leased`]): inserted with the update, in the same transaction.
    /// When the job is found otherwise (a cancel waiting), the store makes the delivery from
    /// the job as stored instead ([`RecordAttemptParams::delivery`]).
    pub callback: Option<NewJob>,
    /// When set, the delivery in `callback` goes in already leased to `owner` until this
    /// instant (running, no run counted yet), and the answer carries it
    /// ([`Recorded::delivery`]): the recorder sends it at once, without a lease of its own. Only
    /// with `seq` given, as the engine records. A delivery the careful path makes instead (the
    /// job was found otherwise) goes in ready, as every other one does.
    pub callback_leased_until: Option<Timestamp>,
    /// The job has an ordering key (as leased, read with `seq`): a store may record a job
    /// without one by a statement that leaves the lines alone. Wrong for a keyed job, the store
    /// finds it out and records it the careful way.
    pub ordered: bool,
}

/// What recording an attempt did.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    /// The state the job was left in (read the job for the rest: the hot path does not pay for
    /// reading it back).
    pub state: JobState,
    /// The callback delivery inserted leased to the recorder
    /// ([`RecordAttemptParams::callback_leased_until`]), as stored; `None` when none was asked
    /// for, or when it went in otherwise (the careful path's own delivery, or one already there).
    pub delivery: Option<Job>,
}

impl Recorded {
    /// A recording that leased no delivery.
    pub fn left(state: JobState) -> Recorded {
        Recorded {
            state,
            delivery: None,
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

/// Dead letters that died with one reason, word for word: what [`Store::dead_letter_reasons`]
/// reads, and what reason patterns are made of.
///
/// [`Store::dead_letter_reasons`]: crate::Store::dead_letter_reasons
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeadReason {
    pub reason: String,
    pub count: u64,
    /// When the first and the last of them went dead.
    pub first: Timestamp,
    pub last: Timestamp,
}

/// Dead letters whose reasons share a pattern ([`redial_policy::reason_pattern`]): one cause,
/// whatever the numbers, ids and times in its text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeadPattern {
    pub pattern: String,
    pub count: u64,
    /// When the first and the last of them went dead.
    pub first: Timestamp,
    pub last: Timestamp,
    /// The reason of the last of them to go dead, word for word.
    pub example: String,
    /// How many different reasons it stands for.
    pub reasons: u64,
}

/// Which lines of a queue's ordering keys to read ([`crate::Store::ordering_keys`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderingKeysParams {
    pub queue: String,
    /// Only the keys whose head is dead (with `ordering_on_dead = "block"`: they wait for it to
    /// be replayed or dismissed).
    pub blocked: bool,
    /// The page starts after this key's line (the last key of the page before).
    pub after: Option<String>,
    pub limit: u32,
}

/// One ordering key's line: its head and how many jobs wait behind it.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyLine {
    pub key: String,
    /// The job that goes first: running, waiting its turn, or dead (the key is blocked).
    pub head: crate::Job,
    /// Jobs of the key waiting behind the head.
    pub behind: u64,
}

impl KeyLine {
    /// Whether the key waits for its dead head to be replayed or dismissed.
    pub fn blocked(&self) -> bool {
        self.head.state == crate::JobState::Dead
    }

    /// Why the key's next job waits, in one line, at `now`.
    pub fn why(&self, now: Timestamp) -> String {
        use crate::JobState::*;
        let h = &self.head;
        let last = h
            .last_reason
            .as_deref()
            .map(|r| format!(" (last: {r})"))
            .unwrap_or_default();
        match h.state {
            Running => format!("its head {} is running", h.id),
            Dead => format!(
                "blocked: its head {} is dead ({}){last}; replay or dismiss it",
                h.id,
                h.category.map_or("dead", |c| c.as_str())
            ),
            Deferred => format!("its head {} is deferred until {}{last}", h.id, h.run_at),
            Scheduled if h.run_at > now && h.attempts > 0 => {
                format!("its head {} retries at {}{last}", h.id, h.run_at)
            }
            Scheduled if h.run_at > now => {
                format!("its head {} is scheduled for {}", h.id, h.run_at)
            }
            _ if h.attempts > 0 => format!(
                "its head {} is due again and waits for a slot or its endpoint{last}",
                h.id
            ),
            _ => format!(
                "its head {} is due and waits for a slot or its endpoint",
                h.id
            ),
        }
    }
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
                    e.waiting += n;
                } else {
                    e.running += n;
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

/// The retries of an endpoint whose outage just ended: those scheduled after a failure since
/// `since` (the outage's start) and still waiting their backoff are due `now`.
#[derive(Clone, Debug, PartialEq)]
pub struct RetriesNowParams {
    pub endpoint: String,
    pub since: Timestamp,
    pub now: Timestamp,
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
