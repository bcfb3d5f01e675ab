//! The storage seam: the [`Store`] trait, the job and attempt records, and the parameter types of
//! every store method.
//!
//! Owns what a store must do, not how: SQLite and PostgreSQL implement it in their own crates, and
//! the behaviour suite in [`testkit`] (feature `testkit`) defines the behaviour once for all of them.
//! Knows nothing of HTTP, the engine's scheduling or the API: it keeps jobs, leases and attempts
//! consistent under concurrent workers and crashes.

mod pages;
pub mod pick;
mod recording;
mod rules;
mod search;
mod types;

#[cfg(feature = "testkit")]
pub mod testkit;

pub use pages::JobPages;
pub use recording::{RecordPlan, Recording};
pub use rules::{
    cancel, control, corrupt_json, dead_patterns, instant, may_dismiss, may_replay, millis,
    read_changes, reasons_with_pattern, replay_changes, Cancel, Condition, JobColumns, RawJob,
    ReplayColumns, SqlValue, CANCELLED, MAX_CHANGES_KEPT,
};
pub use search::{
    bloom_may_hold, job_terms, key_term, likely_rarest_first, reason_words, tag_term, term_bloom,
    term_bloom_bytes, term_bucket, term_hashes, word_range, words_condition, BLOOM_HASHES,
    MAX_WORD_CHARS, TERM_BUCKET_BITS,
};
pub use types::{
    completed_events, parse_dead_category, plain_name, plain_text, Admit, AdmittedLease, Attempt,
    AttemptCategory, AttemptDecision, Callback, CallbackEvent, Candidate, CandidateParams,
    CleanupParams, Completion, Control, ControlKind, DeadCount, DeadGroup, DeadPattern, DeadReason,
    EndpointBacklog, EndpointCount, EndpointRecord, Event, EventCursor, EventFrom, EventKind,
    EventListParams, EventPage, ExpireParams, GroupCount, GroupCounts, HeartbeatParams,
    HttpRequest, InsertOutcome, Job, JobBefore, JobChange, JobFilter, JobId, JobListParams,
    JobPage, JobState, KeyLine, LeaseAdmittedParams, LeaseIdsParams, LeaseParams, NewEvent, NewJob,
    OnDead, OrderingKey, OrderingKeysParams, PendingMigration, QueueCount, QueueSince,
    RecordAttemptParams, Recorded, ReleaseParams, ReplayChangedParams, RescueParams, RescueReport,
    RetriesNowParams, ScheduleAdvance, ScheduleRecord, SchemaStatus, SharedHold, Stats, Transition,
    Verdict, CALLBACK_TAG, EVENT_SCAN, REDACTED,
};

use async_trait::async_trait;
use redial_policy::Timestamp;

/// What can go wrong in a store. Failed attempts are not errors: they are records.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("job {0} not found")]
    NotFound(JobId),
    /// The job is not in a state that allows the action (replaying a job that is not dead...).
    #[error("job {id} is {state}: cannot {action} it")]
    InvalidState {
        id: JobId,
        state: JobState,
        action: &'static str,
    },
    /// The worker no longer holds the job's lease (it expired and the job was rescued, or it was
    /// cancelled); its result must not be applied.
    #[error("lease on job {0} was lost")]
    LeaseLost(JobId),
    /// A job is not acceptable (checked where every enqueue passes, not only the API's): the
    /// message says what to fix.
    #[error("invalid job: {0}")]
    InvalidJob(String),
    /// The job changed since the caller read it (another replay came in between): what the
    /// caller worked out from it no longer applies.
    #[error("job {0} was replayed since it was read: read it again")]
    Changed(JobId),
    /// The database failed; the message is for logs, not for API clients.
    #[error("storage failure: {0}")]
    Backend(String),
    /// The database cannot serve now: a full disk, a read-only or damaged file, an I/O error, a
    /// lost connection. The same request may succeed later; the message is for logs.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// This store cannot do what was asked (a PostgreSQL database is backed up with its own
    /// tools, not through Redial); the message says what to do instead.
    #[error("{0}")]
    Unsupported(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Durable storage of jobs and their attempts. Every method is one transaction: it happens
/// completely or not at all, and once it returns `Ok` its effect survives a crash.
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Inserts a job, or finds the one with the same id: a duplicate when it carries the same
    /// queue, request and idempotency key, a conflict when it does not (then nothing is written).
    async fn job_insert(&self, job: NewJob) -> StoreResult<InsertOutcome>;

    /// Inserts many jobs atomically. If any is a conflict, nothing is written and the outcomes say
    /// which; otherwise every job is inserted or recognised as a duplicate.
    async fn job_insert_batch(&self, jobs: Vec<NewJob>) -> StoreResult<Vec<InsertOutcome>>;

    /// A job and its attempts, oldest first.
    async fn job_get(&self, id: &JobId) -> StoreResult<Option<(Job, Vec<Attempt>)>>;

    /// Jobs matching the filter, oldest first, from after the cursor.
    async fn job_list(&self, params: JobListParams) -> StoreResult<JobPage>;

    /// Leases up to `limit` runnable jobs of a queue (ready, or scheduled or deferred whose time has
    /// come), highest priority first, then earliest `run_at`. A job is never leased to two owners
    /// at once.
    ///
    /// Every candidate is admitted: this is [`Store::job_lease_admitted`] without endpoint limits
    /// (for tests, benchmarks and programs that run without them), one leasing path for all.
    async fn job_lease_available(&self, params: LeaseParams) -> StoreResult<Vec<Job>> {
        let lease = self
            .job_lease_admitted(
                LeaseAdmittedParams {
                    queue: params.queue,
                    now: params.now,
                    owner: params.owner,
                    lease_until: params.lease_until,
                    max: params.limit as usize,
                },
                Box::new(AdmitAll),
            )
            .await?;
        Ok(lease.taken)
    }

    /// Runnable jobs of a queue (ready, or scheduled or deferred whose time has come), in lease
    /// order, leaving out endpoints that are held and retries of endpoints whose retry budget is
    /// spent. Reads only: [`Store::job_lease_ids`] then takes the chosen ones.
    async fn job_candidates(&self, params: CandidateParams) -> StoreResult<Vec<Candidate>>;

    /// Leases the given jobs if they are still runnable; returns those it leased. A job another
    /// worker leased in between is simply not returned.
    async fn job_lease_ids(&self, params: LeaseIdsParams) -> StoreResult<Vec<Job>>;

    /// Leases up to `params.max` runnable jobs of a queue to run, in lease order, asking `admit`
    /// about each candidate: a held endpoint's jobs (or retries) are left out for the rest of the
    /// call, and jobs admitted to fail are leased too. Candidates admitted but not leased are
    /// handed back to `admit`. Past held endpoints' jobs a request should read a bounded number
    /// of rows, and carry on from where the last one stopped ([`ScanPos`]; the testkit's
    /// `lease_scan_suite!` checks it).
    async fn job_lease_admitted(
        &self,
        params: LeaseAdmittedParams,
        admit: Box<dyn Admit>,
    ) -> StoreResult<AdmittedLease>;

    /// Extends the leases `owner` still holds on `ids`; returns how many it still holds.
    async fn job_heartbeat(&self, params: HeartbeatParams) -> StoreResult<u64>;

    /// Records one attempt and applies its decision, if `owner` still holds the lease. A job whose
    /// cancellation was requested while it ran ends cancelled unless the attempt completed it or
    /// made it dead. Returns the state the job was left in, and the callback delivery it
    /// inserted leased to the recorder when asked to ([`RecordAttemptParams::callback_leased_until`]).
    async fn job_record_attempt(&self, params: RecordAttemptParams) -> StoreResult<Recorded>;

    /// Gives back leases without counting anything (graceful shutdown): the jobs are ready again.
    async fn job_release(&self, params: ReleaseParams) -> StoreResult<u64>;

    /// Jobs whose lease expired go back to ready, counted as a stall; those over `max_stalls` go dead
    /// (`unknown_exhausted`: nobody knows whether their last request took effect).
    async fn job_rescue_expired(&self, params: RescueParams) -> StoreResult<RescueReport>;

    /// Marks scheduled and deferred jobs whose time has come as ready, so that states read true.
    async fn job_promote_due(&self, now: Timestamp) -> StoreResult<u64>;

    /// The earliest `run_at` later than `after` among the queue's waiting jobs (ready,
    /// scheduled, deferred): when the queue next has new work, whatever is held now.
    async fn job_next_run_at(
        &self,
        queue: &str,
        after: Timestamp,
    ) -> StoreResult<Option<Timestamp>>;

    /// Waiting jobs whose deadline has passed go dead (`deadline_exceeded`); the reason names
    /// what held them, from `reasons` (per endpoint) when given. Returns how many.
    async fn job_expire_deadlines(&self, params: ExpireParams) -> StoreResult<u64>;

    /// Per endpoint: waiting jobs that are due now (held, when the endpoint's limits hold them)
    /// and those scheduled later. A store that counts as jobs change may count a scheduled job
    /// whose time just came as later until maintenance promotes it.
    async fn endpoint_backlog(&self, now: Timestamp) -> StoreResult<Vec<EndpointBacklog>>;

    /// An endpoint's outage ended: its retries scheduled after failures since `since` are due
    /// now rather than after their backoff (a delayed first attempt, or a retry scheduled before
    /// the outage, keeps its time). Returns how many; the other nodes are told.
    async fn endpoint_retries_now(&self, params: RetriesNowParams) -> StoreResult<u64>;

    /// One endpoint's waiting jobs: due now, and scheduled later (as [`Store::endpoint_backlog`]
    /// counts them), without counting the others'.
    async fn endpoint_backlog_of(&self, name: &str, now: Timestamp)
        -> StoreResult<EndpointBacklog>;

    /// One endpoint's waiting jobs with a deadline, in the order they are expected to start (the
    /// due ones first, by priority then time, then the later ones by their time; across queues),
    /// each with how many of the endpoint's waiting jobs go before it: at most `limit`, those
    /// that go first. Reads every waiting job of the endpoint when some of them have a deadline;
    /// none when none has.
    async fn endpoint_deadlines(
        &self,
        name: &str,
        now: Timestamp,
        limit: u32,
    ) -> StoreResult<Vec<redial_policy::endpoint::WaitingDeadline>>;

    /// As [`Store::endpoint_deadlines`], for the waiting jobs of one group of a queue (those
    /// waiting behind their ordering key's head left out: each store reads one group through
    /// the group's own index).
    async fn group_deadlines(
        &self,
        queue: &str,
        group: &str,
        now: Timestamp,
        limit: u32,
    ) -> StoreResult<Vec<redial_policy::endpoint::WaitingDeadline>>;

    /// Whether some node saved a state for this endpoint (it was seen, here or elsewhere).
    async fn endpoint_saved(&self, name: &str) -> StoreResult<bool>;

    /// Forgets endpoints: their saved state, their shared holds and their controls (an endpoint
    /// that comes back starts afresh). The other nodes are told.
    async fn endpoint_forget(&self, names: Vec<String>) -> StoreResult<()>;

    /// Every endpoint's saved protection state (opaque JSON the engine owns).
    async fn endpoint_load(&self) -> StoreResult<Vec<EndpointRecord>>;

    /// Saves endpoints' protection states, replacing earlier ones.
    async fn endpoint_save(&self, records: Vec<EndpointRecord>) -> StoreResult<()>;

    /// Puts a dead job back to ready with fresh counters and the same idempotency key; its history
    /// stays and `replays` counts up.
    async fn job_replay(&self, id: &JobId, now: Timestamp) -> StoreResult<Job>;

    /// [`Store::job_replay`] with the job's request and routing changed as `params` say (its
    /// queue, endpoint, request, idempotency key and policy are set, all of them), if it is still
    /// dead and no replay came in between; the change is appended to the job's changes, with
    /// the job as it was before.
    async fn job_replay_changed(&self, params: ReplayChangedParams) -> StoreResult<Job>;

    /// The changes replays made to a job ([`JobChange`]), oldest first; none for a job never
    /// replayed with changes (or one that does not exist).
    async fn job_changes(&self, id: &JobId) -> StoreResult<Vec<JobChange>>;

    /// Deletes a dead job and its attempts.
    async fn job_dismiss(&self, id: &JobId) -> StoreResult<()>;

    /// Cancels a job that has not finished. A running job is marked and ends cancelled when its
    /// attempt returns (unless that attempt completed it).
    async fn job_cancel(&self, id: &JobId, now: Timestamp) -> StoreResult<Job>;

    /// Replays every dead job matching the filter; returns how many.
    async fn dead_letter_replay(&self, filter: JobFilter, now: Timestamp) -> StoreResult<u64>;

    /// Dismisses every dead job matching the filter; returns how many.
    async fn dead_letter_dismiss(&self, filter: JobFilter) -> StoreResult<u64>;

    /// Where the next chunk of a bulk action ends: the `seq` of the `limit`-th dead letter the
    /// filter matches (its state is ignored), in `seq` order, after its `after_seq` (or of the
    /// last one, when fewer follow); none when none follows. Reads the dead letters only.
    async fn dead_letter_chunk_end(
        &self,
        filter: JobFilter,
        limit: u32,
    ) -> StoreResult<Option<i64>>;

    /// Appends endpoint events to the event log (job events are written with the change that
    /// makes them, by the store itself).
    async fn event_append(&self, events: Vec<NewEvent>) -> StoreResult<()>;

    /// Events of the log in cursor order from `params.from`, filtered (see [`EventListParams`]).
    async fn event_list(&self, params: EventListParams) -> StoreResult<EventPage>;

    /// Deletes events older than `before`, at most `limit` of them, oldest first, never the
    /// newest (so that the next event's cursor follows every one handed out); returns how many.
    async fn event_cleanup(&self, before: Timestamp, limit: u32) -> StoreResult<u64>;

    /// Counts per queue x state x dead-letter category, and per endpoint x state.
    async fn stats(&self) -> StoreResult<Stats>;

    /// Jobs that went dead at or after `since` (and are still dead letters), per queue and
    /// category: what alerts on new dead letters count.
    async fn dead_letters_since(&self, since: Timestamp) -> StoreResult<Vec<DeadCount>>;

    /// The dead letters the filter matches (its state is ignored), grouped by queue, category
    /// and endpoint, largest group first. Reads the dead letters only, by their own index.
    async fn dead_letter_groups(&self, filter: JobFilter) -> StoreResult<Vec<DeadGroup>>;

    /// The dead letters the filter matches (its state is ignored), grouped by their reason word
    /// for word, in no particular order; dead letters without a reason are left out. Reads the
    /// dead letters only, by their own index; its cost follows their number.
    async fn dead_letter_reasons(&self, filter: JobFilter) -> StoreResult<Vec<DeadReason>>;

    /// Brings the search indexes up to date, `limit` at a time: the `dead_words` index (a
    /// search of dead letters by reason text) with the jobs that died since (a trigger notes them
    /// as they die, so that no path forgets one), and where a store writes its `job_terms` after
    /// the insert (SQLite: the jobs inserted since). Returns the most it took of either: a caller
    /// that wants everything calls it again while that is `limit`. Dying and inserting cost
    /// (almost) nothing for search: the words and terms are written here, by maintenance and
    /// before a search.
    async fn index_for_search(&self, limit: u32) -> StoreResult<u32>;

    /// The groups of `queue` with waiting or running jobs, most waiting first (then by name),
    /// `limit` at most, and how many there are. Reads every grouped job of the queue that is
    /// waiting or running: an on-demand view, not for a hot path.
    async fn group_counts(&self, queue: &str, limit: u32) -> StoreResult<GroupCounts>;

    /// The lines of `params.queue`'s ordering keys ([`OrderingKey`]), a page in the order of
    /// their lines' numbers ([`OrderingKey::line`]: the same in every store) after the line of
    /// `params.after`: each key's head and how many jobs wait behind it; only the keys whose
    /// head is dead (blocked) when `params.blocked`. Reads one head per key and counts each
    /// line.
    async fn ordering_keys(&self, params: OrderingKeysParams) -> StoreResult<Vec<KeyLine>>;

    /// Deletes finished jobs past their retention; returns how many.
    async fn job_cleanup(&self, params: CleanupParams) -> StoreResult<u64>;

    /// Checks the counts a store keeps as jobs change against the jobs themselves, for tests and
    /// diagnostics (`Err` says where they differ). A store that keeps none has nothing to check.
    async fn counts_check(&self) -> StoreResult<()> {
        Ok(())
    }

    /// Whether the store can serve requests, writes included; for readiness checks. Fails with
    /// [`StoreError::Unavailable`] while it cannot (a full disk, a read-only database, a failed
    /// integrity check).
    async fn ping(&self) -> StoreResult<()>;

    /// Publishes holds that every node must honour (an endpoint's pause, its open breaker). A
    /// stored hold is only ever lengthened: the later instant wins, with its reason.
    async fn endpoint_holds_share(&self, holds: Vec<SharedHold>) -> StoreResult<()>;

    /// The shared holds still in force at `now`.
    async fn endpoint_holds_load(&self, now: Timestamp) -> StoreResult<Vec<SharedHold>>;

    /// Ends an endpoint's shared pause (`pause`) or open breaker (`breaker`) now, whatever
    /// their end: for a resume or a breaker reset by hand.
    async fn endpoint_holds_clear(&self, name: &str, pause: bool, breaker: bool)
        -> StoreResult<()>;

    /// Every control set by hand, by kind and name.
    async fn controls_load(&self) -> StoreResult<Vec<Control>>;

    /// The control of this kind and name, if one was saved.
    async fn control_get(&self, kind: ControlKind, name: &str) -> StoreResult<Option<Control>>;

    /// Saves a control, replacing the one of the same kind and name; the other nodes are told.
    async fn control_save(&self, control: Control) -> StoreResult<()>;

    /// Saves a schedule: a new one, or a new definition and next occurrence for the one of the
    /// same id (its pause, creation time and last occurrence are kept).
    async fn schedule_save(&self, schedule: ScheduleRecord) -> StoreResult<()>;

    /// The schedule of this id.
    async fn schedule_get(&self, id: &str) -> StoreResult<Option<ScheduleRecord>>;

    /// Every schedule, by id.
    async fn schedule_list(&self) -> StoreResult<Vec<ScheduleRecord>>;

    /// At most `limit` schedules by id (byte order), those after `after` when given: a page.
    async fn schedule_page(
        &self,
        after: Option<String>,
        limit: u32,
    ) -> StoreResult<Vec<ScheduleRecord>>;

    /// Deletes a schedule (not the jobs it enqueued); whether there was one.
    async fn schedule_delete(&self, id: &str) -> StoreResult<bool>;

    /// Pauses a schedule (its next occurrence stays; `next_at` is not used) or resumes it from
    /// `next_at`; whether there was one.
    async fn schedule_set_paused(
        &self,
        id: &str,
        paused: bool,
        next_at: Option<Timestamp>,
        now: Timestamp,
    ) -> StoreResult<bool>;

    /// Up to `limit` schedules not paused whose next occurrence is at or before `now`, the
    /// earliest first (then by id). Reads an index, not every schedule.
    async fn schedules_due(&self, now: Timestamp, limit: usize)
        -> StoreResult<Vec<ScheduleRecord>>;

    /// Moves a schedule on from the occurrence it was due at, if its `next_at` is still that
    /// (another node did not move it first) and its `updated_at` is still the one read (it was
    /// not saved, paused or resumed since); whether it moved. The occurrences' jobs are
    /// inserted before, under ids derived from the schedule and the occurrence, so a check that
    /// loses this race, or dies before it, inserted only duplicates.
    async fn schedule_advance(&self, advance: ScheduleAdvance) -> StoreResult<bool>;

    /// Says that the node `worker` is alive, for as long as this store is (called at start and
    /// at every maintenance tick). A shared store lets the others see when that node's session
    /// ends, so that its leases are rescued then rather than when they expire; a store that one
    /// process owns has nothing to tell.
    /// Writes a consistent copy of the whole database, taken while jobs go on, to a file of its
    /// own, makes it durable and checks it; the answer holds the copy (removed when dropped:
    /// open it first to keep reading it). A store that is not one file answers
    /// [`StoreError::Unsupported`], saying which tools back it up.
    async fn backup(&self) -> StoreResult<BackupFile> {
        Err(StoreError::Unsupported(
            "this store is not one file: back it up with its database's own tools".into(),
        ))
    }

    async fn node_announce(&self, worker: &str) -> StoreResult<()> {
        let _ = worker;
        Ok(())
    }

    /// The worker ids of the nodes that share this store and have not been seen to end, in
    /// byte order: their number and this node's place among them divide the endpoints' limits (see
    /// `redial_policy::endpoint::Share`). A store that one process owns has none to list.
    async fn nodes_live(&self) -> StoreResult<Vec<String>> {
        Ok(Vec::new())
    }

    /// Whether this node should run maintenance now (rescue, promotion, deadlines, cleanup).
    /// A store that one process owns always says yes; a shared one elects one node at a time
    /// and moves the role when that node goes away.
    async fn try_lead(&self) -> StoreResult<bool> {
        Ok(true)
    }

    /// Whether several nodes may share this store (their endpoint holds then need sharing).
    fn is_shared(&self) -> bool {
        false
    }

    /// Wake-ups from other nodes: work enqueued there, holds they shared. `None` when nothing
    /// but this process writes to the store.
    fn subscribe(&self) -> Option<tokio::sync::broadcast::Receiver<Wake>> {
        None
    }
}

/// A place in a queue's lease order (priority descending, then run_at, then seq): where a
/// lease request's read of the runnable jobs stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanPos {
    pub priority: i64,
    pub run_at: i64,
    pub seq: i64,
}

impl ScanPos {
    /// Whether this place comes after `other` in lease order.
    pub fn after(&self, other: &ScanPos) -> bool {
        self.priority < other.priority
            || (self.priority == other.priority
                && (self.run_at, self.seq) > (other.run_at, other.seq))
    }

    /// Where a deep read starts once a request's read from the head of the queue stopped at
    /// `last`: where the previous deep read stopped (`resume`), if that is further on.
    pub fn onwards(resume: Option<ScanPos>, last: ScanPos) -> ScanPos {
        match resume {
            Some(r) if r.after(&last) => r,
            _ => last,
        }
    }
}

/// What another node's write means for this one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wake {
    /// New runnable work in this queue.
    Queue(String),
    /// Some endpoint's shared holds changed.
    Endpoints,
    /// Anything may have changed (the notification channel was re-established).
    All,
}

/// Admits every candidate.
struct AdmitAll;

impl Admit for AdmitAll {
    fn admit(&mut self, _: &Candidate) -> Verdict {
        Verdict::Take
    }

    fn not_leased(&mut self, _: &Candidate) {}
}

/// A checked copy of a store's database ([`Store::backup`]). The file is removed when this is
/// dropped; a reader that opened it first keeps reading it.
#[derive(Debug)]
pub struct BackupFile {
    pub path: std::path::PathBuf,
    /// The copy's size.
    pub bytes: u64,
    /// The jobs it holds.
    pub jobs: u64,
    /// How long making and checking it took.
    pub took: std::time::Duration,
}

impl Drop for BackupFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
