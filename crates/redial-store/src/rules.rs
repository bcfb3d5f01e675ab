//! The rules every store follows, written once: what replaying, dismissing and cancelling may do
//! to a job in each state; how a stored row becomes a [`Job`] (what recording an attempt writes is
//! `recording.rs`'s). The stores keep only their SQL and
//! the reading of their own row type ([`JobColumns`]).

use crate::search::{key_term, likely_rarest_first, tag_term};
use crate::{
    parse_dead_category, Control, ControlKind, DeadPattern, DeadReason, HttpRequest, Job,
    JobChange, JobFilter, JobId, JobListParams, JobPage, JobState, OnDead, OrderingKey,
    ReplayChangedParams, StoreError, StoreResult,
};
use redial_policy::{PolicyOverride, Timestamp};

/// The columns of a job row, in the order [`RawJob::read`] reads them. A macro, so that stores
/// can build their statements with `concat!` at compile time.
#[macro_export]
macro_rules! job_columns {
    () => {
        "seq, id, queue, endpoint, state, category, request, idempotency_key, priority, \
         run_at, deadline, tags, policy, created_at, updated_at, finished_at, attempts, \
         unknown_attempts, deferrals, stalls, replays, runs, last_delay_ms, last_reason, \
         lease_owner, lease_until, cancel_requested, grp, callback, okey, ord_skip"
    };
}

/// Reads one column of a row by position, in a store's own types.
pub trait JobColumns {
    type Error;
    fn text(&self, i: usize) -> Result<String, Self::Error>;
    fn opt_text(&self, i: usize) -> Result<Option<String>, Self::Error>;
    fn int(&self, i: usize) -> Result<i64, Self::Error>;
    fn opt_int(&self, i: usize) -> Result<Option<i64>, Self::Error>;
    /// A 32-bit column (priority, counters).
    fn int32(&self, i: usize) -> Result<i32, Self::Error>;
    fn flag(&self, i: usize) -> Result<bool, Self::Error>;
}

/// A job row as read, before its text columns are decoded: reading is the store's (on SQLite,
/// on its one storage thread), decoding anyone's (JSON parsing off that thread).
#[derive(Debug)]
pub struct RawJob {
    /// Every plain column; the decoded ones (state, category, request, tags, policy) hold
    /// placeholders until [`RawJob::decode`].
    pub job: Job,
    state: String,
    category: Option<String>,
    request: String,
    tags: String,
    policy: Option<String>,
    callback: Option<String>,
}

impl RawJob {
    /// Reads the columns of [`job_columns!`], in that order.
    pub fn read<R: JobColumns>(r: &R) -> Result<RawJob, R::Error> {
        let count = |i: usize| -> Result<u32, R::Error> { Ok(r.int32(i)?.max(0) as u32) };
        let ts = |v: Option<i64>| v.map(Timestamp::from_unix_millis);
        Ok(RawJob {
            state: r.text(4)?,
            category: r.opt_text(5)?,
            request: r.text(6)?,
            tags: r.text(11)?,
            policy: r.opt_text(12)?,
            callback: r.opt_text(28)?,
            job: Job {
                seq: r.int(0)?,
                id: JobId(r.text(1)?),
                queue: r.text(2)?,
                endpoint: r.text(3)?,
                state: JobState::Ready,
                category: None,
                request: HttpRequest {
                    method: String::new(),
                    url: String::new(),
                    headers: Vec::new(),
                    body: None,
                    timeout_ms: None,
                    credentials: None,
                },
                idempotency_key: r.opt_text(7)?,
                priority: r.int32(8)?,
                run_at: Timestamp::from_unix_millis(r.int(9)?),
                deadline: ts(r.opt_int(10)?),
                tags: Vec::new(),
                group: r.opt_text(27)?,
                callback: None,
                ordering: match r.opt_text(29)? {
                    Some(key) => Some(OrderingKey {
                        key,
                        on_dead: if r.flag(30)? {
                            OnDead::Skip
                        } else {
                            OnDead::Block
                        },
                    }),
                    None => None,
                },
                policy: None,
                created_at: Timestamp::from_unix_millis(r.int(13)?),
                updated_at: Timestamp::from_unix_millis(r.int(14)?),
                finished_at: ts(r.opt_int(15)?),
                attempts: count(16)?,
                unknown_attempts: count(17)?,
                deferrals: count(18)?,
                stalls: count(19)?,
                replays: count(20)?,
                runs: count(21)?,
                last_delay_ms: r.opt_int(22)?.map(|v| v.max(0) as u64),
                last_reason: r.opt_text(23)?,
                lease_owner: r.opt_text(24)?,
                lease_until: ts(r.opt_int(25)?),
                cancel_requested: r.flag(26)?,
            },
        })
    }

    /// The state the row will decode to (after an update the row was read before).
    /// The state as stored, read.
    pub fn stored_state(&self) -> StoreResult<JobState> {
        self.state.parse().map_err(StoreError::Backend)
    }

    pub fn set_state(&mut self, state: JobState) {
        self.state = state.as_str().to_owned();
    }

    pub fn decode(self) -> StoreResult<Job> {
        let json = |e: serde_json::Error| {
            StoreError::Backend(format!("corrupt JSON in the database: {e}"))
        };
        let mut job = self.job;
        job.state = self.state.parse().map_err(|e: String| {
            StoreError::Backend(format!("corrupt state in the database: {e}"))
        })?;
        job.category = self
            .category
            .as_deref()
            .map(parse_dead_category)
            .transpose()
            .map_err(|e| StoreError::Backend(format!("corrupt category in the database: {e}")))?;
        job.request = serde_json::from_str(&self.request).map_err(json)?;
        job.tags = serde_json::from_str(&self.tags).map_err(json)?;
        job.policy = self
            .policy
            .as_deref()
            .map(serde_json::from_str::<PolicyOverride>)
            .transpose()
            .map_err(json)?;
        job.callback = self
            .callback
            .as_deref()
            .map(serde_json::from_str::<crate::Callback>)
            .transpose()
            .map_err(json)?;
        Ok(job)
    }
}

/// A replay takes a dead job only.
pub fn may_replay(job: &Job) -> StoreResult<()> {
    only_dead(job, "replay")
}

/// The text columns a replay with changes writes, as stored (JSON).
#[derive(Debug)]
pub struct ReplayColumns {
    pub request: String,
    pub policy: Option<String>,
    /// The job's changes with this one appended.
    pub changes: String,
}

/// The most changes a job keeps ([`replay_changes`]): its first, and the newest ones.
pub const MAX_CHANGES_KEPT: usize = 20;

/// A replay with changes takes a dead job only, and only the one its changes were worked out
/// from (no replay since). Returns what it writes, given the job's changes as stored. The
/// history stays bounded: only the first change keeps its `before` body (the request as
/// enqueued; later ones keep its size), and past [`MAX_CHANGES_KEPT`] the oldest after the
/// first go, with a line saying which.
pub fn replay_changes(
    job: &Job,
    p: &ReplayChangedParams,
    stored: Option<&str>,
) -> StoreResult<ReplayColumns> {
    only_dead(job, "replay")?;
    if job.replays != p.replays {
        return Err(StoreError::Changed(job.id.clone()));
    }
    let mut changes = read_changes(stored)?;
    let mut change = p.change.clone();
    if !changes.is_empty() {
        // Only the request as enqueued (the first change's before) keeps its body.
        if let Some(body) = change.before.request.body.take() {
            change.before.body_bytes = Some(body.len() as u64);
        }
    }
    changes.push(change);
    if changes.len() > MAX_CHANGES_KEPT {
        // The first change (the request as enqueued) and the newest stay; those between go,
        // said in the oldest one kept after the first.
        let gone = changes.len() - MAX_CHANGES_KEPT;
        let last_gone = changes[gone].replay;
        changes.drain(1..=gone);
        let first_gone = changes[0].replay + 1;
        let note = format!(
            "the changes of replays {first_gone} to {last_gone} are not kept (a job keeps its first change and its last {})",
            MAX_CHANGES_KEPT - 1
        );
        let next = &mut changes[1].changed;
        next.retain(|line| !line.starts_with("the changes of replays "));
        next.insert(0, note);
    }
    Ok(ReplayColumns {
        request: serde_json::to_string(&p.request).map_err(corrupt_json)?,
        policy: p
            .policy
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(corrupt_json)?,
        changes: serde_json::to_string(&changes).map_err(corrupt_json)?,
    })
}

/// A job's changes as stored (JSON, or none).
pub fn read_changes(stored: Option<&str>) -> StoreResult<Vec<JobChange>> {
    match stored {
        Some(s) => serde_json::from_str(s).map_err(corrupt_json),
        None => Ok(Vec::new()),
    }
}

/// A dismissal takes a dead job only (and deletes it).
pub fn may_dismiss(job: &Job) -> StoreResult<()> {
    only_dead(job, "dismiss")
}

fn only_dead(job: &Job, action: &'static str) -> StoreResult<()> {
    if job.state == JobState::Dead {
        Ok(())
    } else {
        Err(StoreError::InvalidState {
            id: job.id.clone(),
            state: job.state,
            action,
        })
    }
}

/// What cancelling does to a job, by its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cancel {
    /// Not running: cancelled now (state `cancelled`, finished, reason [`CANCELLED`]).
    Now,
    /// Running: marked, and the attempt's result ends it cancelled (see [`RecordAttemptParams::plan`]).
    WhenTheAttemptEnds,
}

/// The reason a job cancelled before it ran keeps.
pub const CANCELLED: &str = "cancelled";

pub fn cancel(job: &Job) -> StoreResult<Cancel> {
    match job.state {
        JobState::Scheduled | JobState::Ready | JobState::Deferred => Ok(Cancel::Now),
        JobState::Running => Ok(Cancel::WhenTheAttemptEnds),
        state @ (JobState::Completed | JobState::Dead | JobState::Cancelled) => {
            Err(StoreError::InvalidState {
                id: job.id.clone(),
                state,
                action: "cancel",
            })
        }
    }
}

/// A value a store binds to one of its placeholders.
#[derive(Clone, Debug, PartialEq)]
pub enum SqlValue {
    Text(String),
    Int(i64),
    /// The column is one of these: each store spells the test its own way (`IN` a JSON array's
    /// values, `= ANY` an array), with one placeholder whatever the length.
    TextList(Vec<String>),
    /// The job has this term in `job_terms` ([`job_terms`]), looked up in each bucket
    /// ([`TERM_BUCKET_BITS`]) from the first job's to the last's; the clause is empty.
    Term(String),
    /// The dead job's reason has a word starting with each of these (`dead_words`); the clause
    /// is empty. Each store spells the ranges of [`word_range`].
    Words(Vec<String>),
}

/// One condition of a `WHERE`: the SQL before its placeholder (`queue =`) and the value bound;
/// for a [`SqlValue::TextList`], the column alone.
#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    pub clause: &'static str,
    pub value: SqlValue,
}

impl JobFilter {
    /// The filter's conditions but the state, which stores spell each their own way (SQLite as a
    /// literal, so that it can use the partial index of that state).
    pub fn conditions(&self) -> Vec<Condition> {
        let c = |clause, value| Condition { clause, value };
        let mut out = Vec::new();
        if let Some(q) = &self.queue {
            out.push(c("queue =", SqlValue::Text(q.clone())));
        }
        if let Some(cat) = self.category {
            out.push(c("category =", SqlValue::Text(cat.as_str().to_owned())));
        }
        if let Some(e) = &self.endpoint {
            out.push(c("endpoint =", SqlValue::Text(e.clone())));
        }
        if let Some(t) = self.since {
            out.push(c("created_at >=", SqlValue::Int(t.as_unix_millis())));
        }
        if let Some(t) = self.until {
            out.push(c("created_at <", SqlValue::Int(t.as_unix_millis())));
        }
        if let Some(t) = self.finished_since {
            out.push(c("finished_at >=", SqlValue::Int(t.as_unix_millis())));
        }
        if let Some(r) = &self.reasons {
            out.push(c("last_reason", SqlValue::TextList(r.clone())));
        }
        if let Some(k) = &self.idempotency_key {
            out.push(c("", SqlValue::Term(key_term(k))));
            // The index may still name a job under a key it renewed since.
            out.push(c("idempotency_key =", SqlValue::Text(k.clone())));
        }
        if let Some(t) = &self.tag {
            out.push(c("", SqlValue::Term(tag_term(t))));
        }
        if !self.reason_words.is_empty() {
            out.push(c(
                "",
                SqlValue::Words(likely_rarest_first(&self.reason_words)),
            ));
        }
        if let Some(s) = self.after_seq {
            out.push(c("seq >", SqlValue::Int(s)));
        }
        if let Some(s) = self.upto_seq {
            out.push(c("seq <=", SqlValue::Int(s)));
        }
        out
    }
}

impl JobListParams {
    /// The filter's conditions (but the state), then "after the cursor".
    pub fn conditions(&self) -> Vec<Condition> {
        let mut out = self.filter.conditions();
        if let Some(after) = self.after {
            out.push(Condition {
                clause: "seq >",
                value: SqlValue::Int(after),
            });
        }
        out
    }

    /// Rows to read, in `seq` order: one more than the page, which tells whether another follows.
    pub fn rows_to_read(&self) -> i64 {
        i64::from(self.limit) + 1
    }
}

impl JobPage {
    /// The page from the rows read (up to [`JobListParams::rows_to_read`]).
    pub fn from_rows(mut jobs: Vec<Job>, limit: u32) -> JobPage {
        let next = if jobs.len() > limit as usize {
            jobs.truncate(limit as usize);
            jobs.last().map(|j| j.seq)
        } else {
            None
        };
        JobPage { jobs, next }
    }
}

/// A timestamp column's value.
pub fn millis(t: Timestamp) -> i64 {
    t.as_unix_millis()
}

/// A nullable timestamp column, read.
pub fn instant(v: Option<i64>) -> Option<Timestamp> {
    v.map(Timestamp::from_unix_millis)
}

/// A JSON column that does not decode.
pub fn corrupt_json(e: serde_json::Error) -> StoreError {
    StoreError::Backend(format!("corrupt JSON in the database: {e}"))
}

/// A control row, read: a kind this version does not know is corrupt data.
pub fn control(
    kind: &str,
    name: String,
    paused_since: Option<i64>,
    paused_until: Option<i64>,
    pause_reason: Option<String>,
    resumed_at: Option<i64>,
    breaker_reset_at: Option<i64>,
) -> StoreResult<Control> {
    let kind = ControlKind::parse(kind).ok_or_else(|| {
        StoreError::Backend(format!("unknown control kind {kind:?} in the database"))
    })?;
    Ok(Control {
        kind,
        name,
        pause: paused_since.map(|since| redial_policy::endpoint::HandPause {
            since: Timestamp::from_unix_millis(since),
            until: instant(paused_until),
            reason: pause_reason.unwrap_or_default(),
        }),
        resumed_at: instant(resumed_at),
        breaker_reset_at: instant(breaker_reset_at),
    })
}

/// The patterns of these reasons ([`redial_policy::reason_pattern`]), largest first (then by
/// pattern), each with its count, its first and last death and the reason of its last.
pub fn dead_patterns(reasons: &[DeadReason]) -> Vec<DeadPattern> {
    let mut by: std::collections::HashMap<String, DeadPattern> = Default::default();
    for r in reasons {
        let pattern = redial_policy::reason_pattern(&r.reason);
        match by.get_mut(&pattern) {
            Some(p) => {
                p.count += r.count;
                p.reasons += 1;
                p.first = p.first.min(r.first);
                if (r.last, &r.reason) > (p.last, &p.example) {
                    p.last = r.last;
                    p.example = r.reason.clone();
                }
            }
            None => {
                by.insert(
                    pattern.clone(),
                    DeadPattern {
                        pattern,
                        count: r.count,
                        first: r.first,
                        last: r.last,
                        example: r.reason.clone(),
                        reasons: 1,
                    },
                );
            }
        }
    }
    let mut out: Vec<DeadPattern> = by.into_values().collect();
    out.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| a.pattern.cmp(&b.pattern))
    });
    out
}

/// The reasons, word for word, whose pattern is `pattern`: what a filter by pattern becomes
/// ([`JobFilter::reasons`]). Sorted, so that the same dead letters make the same filter.
pub fn reasons_with_pattern(reasons: &[DeadReason], pattern: &str) -> Vec<String> {
    let mut out: Vec<String> = reasons
        .iter()
        .filter(|r| redial_policy::reason_pattern(&r.reason) == pattern)
        .map(|r| r.reason.clone())
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}
