//! The rules every store follows, written once: what replaying, dismissing and cancelling may do
//! to a job in each state; how a stored row becomes a [`Job`] (what recording an attempt writes is
//! `recording.rs`'s). The stores keep only their SQL and
//! the reading of their own row type ([`JobColumns`]).

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

/// The `job_terms` index is kept by bucket of 1,024 consecutive jobs (`seq >> 10`), then by
/// term: an insert writes next to the inserts before it, where an index by term alone (keys are
/// random UUIDs) would write a page at a random place for every job, and SQLite would write each
/// to its WAL. Measured with `redial-bench --only search-cost`, an index by term alone cost
/// SQLite's batched enqueue 60% of its rate. A search probes each bucket of the jobs' range: a
/// thousand point reads at a million jobs. The SQL of both stores spells it `seq >> 10`.
pub const TERM_BUCKET_BITS: u32 = 10;

/// The `job_terms` bucket of the job of `seq` ([`TERM_BUCKET_BITS`]).
pub fn term_bucket(seq: i64) -> i64 {
    seq >> TERM_BUCKET_BITS
}

/// The hash functions of a block's bloom filter ([`term_bloom`]).
pub const BLOOM_HASHES: i64 = 7;

/// Bits of a block's bloom filter per term it holds: with [`BLOOM_HASHES`] hashes, about one
/// block in a hundred answers "maybe" for a term it does not hold.
const BLOOM_BITS_PER_TERM: usize = 10;

/// The two base hashes of `term` for a bloom filter (FNV-1a, 64 bits, split in two 31-bit
/// halves, the second odd): its `i`th bit is `(h1 + i * h2) mod bits`. Stable across versions
/// and machines: blocks written by one Redial are read by the next. Small enough that a store's
/// SQL computes `h1 + 6 * h2` in a 64-bit integer.
pub fn term_hashes(term: &str) -> (i64, i64) {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in term.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (
        (h & 0x7fff_ffff) as i64,
        (((h >> 32) & 0x7fff_ffff) | 1) as i64,
    )
}

/// The bloom filter of a block of `terms` (the terms of the jobs one insert put in a block,
/// `job_term_blocks`): [`BLOOM_BITS_PER_TERM`] bits per term (at least 64), bit `n` being bit
/// `n % 8` (lowest first) of byte `n / 8`, as PostgreSQL's `get_bit` on a `bytea` reads it.
pub fn term_bloom(terms: &[String]) -> Vec<u8> {
    let bytes = (terms.len() * BLOOM_BITS_PER_TERM).div_ceil(8).max(8);
    let bits = (bytes * 8) as i64;
    let mut out = vec![0u8; bytes];
    for t in terms {
        let (h1, h2) = term_hashes(t);
        for i in 0..BLOOM_HASHES {
            let n = (h1 + i * h2) % bits;
            out[(n / 8) as usize] |= 1 << (n % 8);
        }
    }
    out
}

/// [`term_bloom`] with a byte (0 or 1) per bit, bit `n` being byte `n`: SQLite has no function
/// that reads a bit, but `substr` of a blob reads a byte where it is.
pub fn term_bloom_bytes(terms: &[String]) -> Vec<u8> {
    let bits = term_bloom(terms);
    (0..bits.len() * 8)
        .map(|n| (bits[n / 8] >> (n % 8)) & 1)
        .collect()
}

/// Whether the bloom filter `bloom` ([`term_bloom`]) may hold `term`.
pub fn bloom_may_hold(bloom: &[u8], term: &str) -> bool {
    let bits = (bloom.len() * 8) as i64;
    if bits == 0 {
        return false;
    }
    let (h1, h2) = term_hashes(term);
    (0..BLOOM_HASHES).all(|i| {
        let n = (h1 + i * h2) % bits;
        bloom[(n / 8) as usize] & (1 << (n % 8)) != 0
    })
}

/// A job's idempotency key as a term of the `job_terms` index.
pub fn key_term(key: &str) -> String {
    format!("k:{key}")
}

/// A job's tag as a term of the `job_terms` index.
pub fn tag_term(tag: &str) -> String {
    format!("t:{tag}")
}

/// What a job puts in the `job_terms` index when it is inserted: its idempotency key and its
/// tags (each once), from which a search by key or tag is answered without a scan.
pub fn job_terms(key: Option<&str>, tags: &[String]) -> Vec<String> {
    let mut out: Vec<String> = key.map(key_term).into_iter().collect();
    for t in tags {
        let term = tag_term(t);
        if !out.contains(&term) {
            out.push(term);
        }
    }
    out
}

/// The longest word the `dead_words` index keeps, in characters: a longer one is cut there
/// (and a search's word too, so that they still meet).
pub const MAX_WORD_CHARS: usize = 40;

/// The words of a dead job's reason, as the `dead_words` index keeps them and a search by
/// reason text asks for them: lower-cased runs of letters and digits, each cut at
/// [`MAX_WORD_CHARS`], each once, in the order they first appear. "HTTP 404: Not Found" gives
/// `http`, `404`, `not`, `found`.
pub fn reason_words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for run in text.split(|c: char| !c.is_alphanumeric()) {
        if run.is_empty() {
            continue;
        }
        let word: String = run
            .chars()
            .flat_map(char::to_lowercase)
            .take(MAX_WORD_CHARS)
            .collect();
        if !out.contains(&word) {
            out.push(word);
        }
    }
    out
}

/// A search's words, the one likely to match the fewest dead letters first (words with a digit,
/// then longer words: `timeout 30012` reads the few jobs with `30012` and checks each for
/// `timeout`, not the other way round). A store reads them in this order where it cannot tell.
pub fn likely_rarest_first(words: &[String]) -> Vec<String> {
    let mut out = words.to_vec();
    out.sort_by_key(|w| {
        (
            !w.chars().any(|c| c.is_ascii_digit()),
            std::cmp::Reverse(w.chars().count()),
        )
    });
    out
}

/// The condition on `seq` for a search's `words` ([`SqlValue::Words`]): each word a range of
/// `dead_words` (every word it starts, [`word_range`]), the jobs of the first word's range (the
/// likeliest rarest, [`likely_rarest_first`]) checked for the others by seq. `bind` takes each
/// bound of the ranges in turn and answers its placeholder (`?3`, `$3`); `join` is how the store
/// joins the ranges (SQLite `CROSS JOIN`, which keeps the order given; PostgreSQL `,`, whose
/// planner orders them by its statistics).
pub fn words_condition(
    words: &[String],
    mut bind: impl FnMut(String) -> String,
    join: &str,
) -> String {
    let mut from_clause = Vec::with_capacity(words.len());
    let mut wheres = Vec::with_capacity(words.len() * 2);
    for (i, w) in words.iter().enumerate() {
        let (from, to) = word_range(w);
        let (from, to) = (bind(from), bind(to));
        from_clause.push(format!("dead_words w{i}"));
        wheres.push(format!("w{i}.word >= {from} AND w{i}.word < {to}"));
        if i > 0 {
            wheres.push(format!("w{i}.seq = w0.seq"));
        }
    }
    format!(
        " AND seq IN (SELECT w0.seq FROM {} WHERE {})",
        from_clause.join(join),
        wheres.join(" AND ")
    )
}

/// The range of `dead_words.word` a search's `word` covers, as `(from, to)` with
/// `from <= word < to` in byte order: every word that starts with it.
pub fn word_range(word: &str) -> (String, String) {
    (word.to_owned(), format!("{word}{}", char::MAX))
}
