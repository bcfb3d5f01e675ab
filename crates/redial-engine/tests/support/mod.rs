//! What the engine's test files share: the engine they start ([`TestEngine::builder`], in
//! `harness.rs`), and a way to run it on a manual clock without sleeping.
//!
//! A test that moves the clock must know when the engine has done everything it can at the
//! current instant before it moves the clock on, or asserts that something did not happen.
//! Sleeping for "long enough" is a guess that a loaded machine proves wrong. [`Watched`] is the
//! real store with every call passed through, keeping account of the engine's leases and writes;
//! [`settle`] waits on that account until a lease taken at this instant, after the last write
//! that could let a job go, found nothing, and no leased job is still out.

use async_trait::async_trait;
use redial_engine::Engine;
use redial_policy::Timestamp;
use redial_store::*;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{oneshot, watch};

mod harness;
pub mod virtual_time;
#[allow(unused_imports)] // used by the files whose receivers keep the manual clock's time
pub use harness::receiver_on;
pub use harness::{EngineBuilder, TestEngine, T0};

/// The longest [`settle`] waits. Not a timing assertion: it only keeps a broken test from
/// hanging.
const SETTLE_BOUND: Duration = Duration::from_secs(120);

/// A store that passes every call through to `inner` and keeps account of what the engine is
/// doing with it. It changes nothing, every answer is the inner store's, except for a failure a
/// test asks for ([`Watched::fail_next_record`]).
#[derive(Debug)]
pub struct Watched {
    inner: Arc<dyn Store>,
    /// Set: the next attempt record fails (as a broken disk would) without reaching `inner`.
    fail_next_record: AtomicBool,
    /// Records failed on purpose so far.
    records_failed: AtomicUsize,
    account: Mutex<Account>,
    /// Bumped on every change to the account, for [`settle`] to wait on.
    ticks: watch::Sender<u64>,
    /// Set: the queue's next lease, once the inner store answered, says so on the first and
    /// waits for the second before it returns ([`Watched::hold_next_lease`]).
    hold_lease: Mutex<Option<HeldLease>>,
    /// Calls of `dead_letter_chunk_end` so far, and the one to hold (its number, where to say it
    /// got there, when it may go on: [`Watched::hold_chunk_end`]).
    chunk_ends: AtomicUsize,
    hold_chunk: Mutex<Option<HeldChunk>>,
}

/// The call to hold, where to say it got there, and when it may go on.
type HeldChunk = (usize, oneshot::Sender<()>, oneshot::Receiver<()>);

/// The queue whose next lease is held, where to say it got there, and when it may go on.
type HeldLease = (String, oneshot::Sender<()>, oneshot::Receiver<()>);

#[derive(Debug, Default)]
struct Account {
    /// Orders lease calls and writes: a lease's tick is taken when it begins, a write's when it
    /// ends, so a lease whose tick is later than a write's saw what that write did.
    tick: u64,
    /// When the last write that could let a job go ended: jobs inserted, an attempt recorded (a
    /// retry due at once), a lease given back, an expired lease rescued.
    last_write: u64,
    /// Lease calls under way.
    leasing: usize,
    /// Per queue, lease calls begun so far and under way.
    leases: std::collections::HashMap<String, (u64, usize)>,
    /// Per queue, jobs its lease calls took so far.
    taken: std::collections::HashMap<String, u64>,
    /// Jobs leased and not yet recorded or given back: attempts under way.
    out: HashSet<JobId>,
    /// Per queue, the last lease that took nothing: its tick and the instant it leased at.
    last_empty: std::collections::HashMap<String, (u64, Timestamp)>,
}

impl Watched {
    pub fn new(inner: Arc<dyn Store>) -> Arc<Watched> {
        Arc::new(Watched {
            inner,
            fail_next_record: AtomicBool::new(false),
            records_failed: AtomicUsize::new(0),
            account: Mutex::default(),
            ticks: watch::Sender::new(0),
            hold_lease: Mutex::default(),
            chunk_ends: AtomicUsize::new(0),
            hold_chunk: Mutex::default(),
        })
    }

    /// Holds the queue's next lease call after the inner store answered it: the receiver hears
    /// when it got there, and it returns when the sender is used (or dropped).
    #[allow(dead_code)] // used by some of the test files that share this module
    pub fn hold_next_lease(&self, queue: &str) -> (oneshot::Receiver<()>, oneshot::Sender<()>) {
        let (reached_tx, reached_rx) = oneshot::channel();
        let (go_tx, go_rx) = oneshot::channel();
        *self.hold_lease.lock().expect("hold") = Some((queue.to_owned(), reached_tx, go_rx));
        (reached_rx, go_tx)
    }

    /// Holds the `nth` call (from 1) of `dead_letter_chunk_end` before it reaches the inner
    /// store: the receiver hears when it got there, and it goes on when the sender is used.
    #[allow(dead_code)] // used by some of the test files that share this module
    pub fn hold_chunk_end(&self, nth: usize) -> (oneshot::Receiver<()>, oneshot::Sender<()>) {
        let (reached_tx, reached_rx) = oneshot::channel();
        let (go_tx, go_rx) = oneshot::channel();
        *self.hold_chunk.lock().expect("hold") = Some((nth, reached_tx, go_rx));
        (reached_rx, go_tx)
    }

    /// Makes the next `job_record_attempt` fail with a backend error, without recording.
    #[allow(dead_code)] // used by some of the test files that share this module
    pub fn fail_next_record(&self) {
        self.fail_next_record.store(true, Ordering::SeqCst);
    }

    /// How many records [`Watched::fail_next_record`] made fail.
    #[allow(dead_code)]
    pub fn records_failed(&self) -> usize {
        self.records_failed.load(Ordering::SeqCst)
    }

    /// The queue's lease calls begun so far, and how many are under way.
    #[allow(dead_code)]
    pub fn leases(&self, queue: &str) -> (u64, usize) {
        let a = self.account.lock().unwrap_or_else(|p| p.into_inner());
        a.leases.get(queue).copied().unwrap_or_default()
    }

    /// How many jobs the queue's lease calls took so far.
    #[allow(dead_code)]
    pub fn leased_jobs(&self, queue: &str) -> u64 {
        let a = self.account.lock().unwrap_or_else(|p| p.into_inner());
        a.taken.get(queue).copied().unwrap_or_default()
    }

    /// Waits until `pred` holds of the queue's [`Watched::leases`], for at most `bound`: whether
    /// it did.
    #[allow(dead_code)]
    pub async fn wait_leases(
        &self,
        queue: &str,
        bound: Duration,
        pred: impl Fn((u64, usize)) -> bool,
    ) -> bool {
        let mut ticks = self.ticks.subscribe();
        let give_up = tokio::time::Instant::now() + bound;
        loop {
            ticks.borrow_and_update();
            if pred(self.leases(queue)) {
                return true;
            }
            if tokio::time::timeout_at(give_up, ticks.changed())
                .await
                .is_err()
            {
                return false;
            }
        }
    }

    fn update<T>(&self, f: impl FnOnce(&mut Account) -> T) -> T {
        let out = {
            let mut a = self.account.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut a)
        };
        self.ticks.send_modify(|t| *t += 1);
        out
    }

    fn wrote(&self) {
        self.update(|a| {
            a.tick += 1;
            a.last_write = a.tick;
        });
    }

    /// Whether the engine has done all it can at `now`, its queues not in `paused` (which
    /// lease nothing) having each looked and found nothing since the last write.
    fn settled_at(&self, now: Timestamp, queues: &[String]) -> bool {
        let a = self.account.lock().unwrap_or_else(|p| p.into_inner());
        a.leasing == 0
            && a.out.is_empty()
            // Every queue the engine runs and that is not paused (the callback queue's too)
            // found nothing at `now` after the last write. Each of them, not only those that
            // leased already: on a loaded machine a queue's first lease can come after the
            // first look, and virtual time must not move on before it.
            && queues.iter().all(|q| {
                a.last_empty
                    .get(q)
                    .is_some_and(|&(tick, at)| at == now && tick > a.last_write)
            })
    }

    /// Whether nothing is under way: no lease call, no attempt.
    fn idle(&self) -> bool {
        let a = self.account.lock().unwrap_or_else(|p| p.into_inner());
        a.leasing == 0 && a.out.is_empty()
    }

    fn describe(&self) -> String {
        format!(
            "{:?}",
            self.account.lock().unwrap_or_else(|p| p.into_inner())
        )
    }
}

/// Waits until the engine has done everything it can at `now` (the manual clock's instant):
/// every attempt it could start has been made and recorded, and a lease at `now`, begun after
/// the last of them, found nothing more to take. Wakes the engine whenever nothing is under way,
/// since the lease that would settle it may otherwise wait for the engine's next poll.
pub async fn settle(engine: &Engine, store: &Watched, now: Timestamp) {
    let mut ticks = store.ticks.subscribe();
    let give_up = tokio::time::Instant::now() + SETTLE_BOUND;
    loop {
        ticks.borrow_and_update();
        let leasing: Vec<String> = engine
            .queue_views()
            .into_iter()
            .filter(|q| q.paused_by_hand.is_none())
            .map(|q| q.name)
            .collect();
        if store.settled_at(now, &leasing) {
            return;
        }
        if store.idle() {
            engine.wake_all();
        }
        // A wake-up can land while a lease is just ending and be used up by it; looking again
        // after a short while wakes the engine again if it is still idle.
        let _ = tokio::time::timeout(Duration::from_millis(20), ticks.changed()).await;
        assert!(
            tokio::time::Instant::now() < give_up,
            "the engine never settled at {now}: {}",
            store.describe()
        );
    }
}

#[async_trait]
impl Store for Watched {
    async fn event_append(&self, events: Vec<NewEvent>) -> StoreResult<()> {
        let out = self.inner.event_append(events).await;
        self.wrote();
        out
    }

    async fn event_list(&self, params: EventListParams) -> StoreResult<EventPage> {
        self.inner.event_list(params).await
    }

    async fn event_cleanup(&self, before: Timestamp, limit: u32) -> StoreResult<u64> {
        let out = self.inner.event_cleanup(before, limit).await;
        self.wrote();
        out
    }

    async fn job_insert(&self, job: NewJob) -> StoreResult<InsertOutcome> {
        let out = self.inner.job_insert(job).await;
        self.wrote();
        out
    }

    async fn job_insert_batch(&self, jobs: Vec<NewJob>) -> StoreResult<Vec<InsertOutcome>> {
        let out = self.inner.job_insert_batch(jobs).await;
        self.wrote();
        out
    }

    async fn job_get(&self, id: &JobId) -> StoreResult<Option<(Job, Vec<Attempt>)>> {
        self.inner.job_get(id).await
    }

    async fn job_list(&self, params: JobListParams) -> StoreResult<JobPage> {
        self.inner.job_list(params).await
    }

    async fn job_lease_available(&self, params: LeaseParams) -> StoreResult<Vec<Job>> {
        self.inner.job_lease_available(params).await
    }

    async fn job_candidates(&self, params: CandidateParams) -> StoreResult<Vec<Candidate>> {
        self.inner.job_candidates(params).await
    }

    async fn job_lease_ids(&self, params: LeaseIdsParams) -> StoreResult<Vec<Job>> {
        self.inner.job_lease_ids(params).await
    }

    async fn job_lease_admitted(
        &self,
        params: LeaseAdmittedParams,
        admit: Box<dyn Admit>,
    ) -> StoreResult<AdmittedLease> {
        let now = params.now;
        let queue = params.queue.clone();
        let began = self.update(|a| {
            a.leasing += 1;
            let q = a.leases.entry(queue.clone()).or_default();
            q.0 += 1;
            q.1 += 1;
            a.tick += 1;
            a.tick
        });
        let out = self.inner.job_lease_admitted(params, admit).await;
        let hold = {
            let mut hold = self.hold_lease.lock().expect("hold");
            match hold.take() {
                Some(h) if h.0 == queue => Some(h),
                other => {
                    *hold = other;
                    None
                }
            }
        };
        if let Some((_, reached, go)) = hold {
            let _ = reached.send(());
            let _ = go.await;
        }
        self.update(|a| {
            a.leasing -= 1;
            if let Some(q) = a.leases.get_mut(&queue) {
                q.1 -= 1;
            }
            match &out {
                Ok(lease) if lease.taken.is_empty() && lease.failed.is_empty() => {
                    a.last_empty.insert(queue.clone(), (began, now));
                }
                Ok(lease) => {
                    *a.taken.entry(queue.clone()).or_default() +=
                        (lease.taken.len() + lease.failed.len()) as u64;
                    let ids = lease.taken.iter().chain(&lease.failed);
                    a.out.extend(ids.map(|j| j.id.clone()));
                }
                Err(_) => {}
            }
        });
        out
    }

    async fn job_heartbeat(&self, params: HeartbeatParams) -> StoreResult<u64> {
        self.inner.job_heartbeat(params).await
    }

    async fn job_record_attempt(&self, params: RecordAttemptParams) -> StoreResult<Recorded> {
        let id = params.id.clone();
        let out = if self.fail_next_record.swap(false, Ordering::SeqCst) {
            self.records_failed.fetch_add(1, Ordering::SeqCst);
            Err(StoreError::Backend("injected: the disk went away".into()))
        } else {
            self.inner.job_record_attempt(params).await
        };
        self.update(|a| {
            a.out.remove(&id);
            // A callback delivery that went in leased to the recorder is out now, as a lease's.
            if let Ok(Recorded {
                delivery: Some(d), ..
            }) = &out
            {
                a.out.insert(d.id.clone());
            }
            a.tick += 1;
            a.last_write = a.tick;
        });
        out
    }

    async fn job_release(&self, params: ReleaseParams) -> StoreResult<u64> {
        let ids = params.ids.clone();
        let out = self.inner.job_release(params).await;
        self.update(|a| {
            for id in &ids {
                a.out.remove(id);
            }
            a.tick += 1;
            a.last_write = a.tick;
        });
        out
    }

    async fn job_rescue_expired(&self, params: RescueParams) -> StoreResult<RescueReport> {
        let out = self.inner.job_rescue_expired(params).await;
        if out.as_ref().is_ok_and(|r| r.requeued > 0) {
            self.wrote();
        }
        out
    }

    async fn job_promote_due(&self, now: Timestamp) -> StoreResult<u64> {
        self.inner.job_promote_due(now).await
    }

    async fn job_next_run_at(
        &self,
        queue: &str,
        after: Timestamp,
    ) -> StoreResult<Option<Timestamp>> {
        self.inner.job_next_run_at(queue, after).await
    }

    async fn job_expire_deadlines(&self, params: ExpireParams) -> StoreResult<u64> {
        self.inner.job_expire_deadlines(params).await
    }

    async fn endpoint_backlog_of(
        &self,
        name: &str,
        now: Timestamp,
    ) -> StoreResult<EndpointBacklog> {
        self.inner.endpoint_backlog_of(name, now).await
    }

    async fn endpoint_deadlines(
        &self,
        name: &str,
        now: Timestamp,
        limit: u32,
    ) -> StoreResult<Vec<redial_policy::endpoint::WaitingDeadline>> {
        self.inner.endpoint_deadlines(name, now, limit).await
    }

    async fn group_deadlines(
        &self,
        queue: &str,
        group: &str,
        now: Timestamp,
        limit: u32,
    ) -> StoreResult<Vec<redial_policy::endpoint::WaitingDeadline>> {
        self.inner.group_deadlines(queue, group, now, limit).await
    }

    async fn endpoint_saved(&self, name: &str) -> StoreResult<bool> {
        self.inner.endpoint_saved(name).await
    }

    async fn endpoint_forget(&self, names: Vec<String>) -> StoreResult<()> {
        self.inner.endpoint_forget(names).await
    }

    async fn control_get(&self, kind: ControlKind, name: &str) -> StoreResult<Option<Control>> {
        self.inner.control_get(kind, name).await
    }

    async fn endpoint_retries_now(&self, params: RetriesNowParams) -> StoreResult<u64> {
        self.inner.endpoint_retries_now(params).await
    }

    async fn endpoint_backlog(&self, now: Timestamp) -> StoreResult<Vec<EndpointBacklog>> {
        self.inner.endpoint_backlog(now).await
    }

    async fn endpoint_load(&self) -> StoreResult<Vec<EndpointRecord>> {
        self.inner.endpoint_load().await
    }

    async fn endpoint_save(&self, records: Vec<EndpointRecord>) -> StoreResult<()> {
        self.inner.endpoint_save(records).await
    }

    async fn job_replay(&self, id: &JobId, now: Timestamp) -> StoreResult<Job> {
        let out = self.inner.job_replay(id, now).await;
        self.wrote();
        out
    }

    async fn job_dismiss(&self, id: &JobId) -> StoreResult<()> {
        self.inner.job_dismiss(id).await
    }

    async fn job_cancel(&self, id: &JobId, now: Timestamp) -> StoreResult<Job> {
        self.inner.job_cancel(id, now).await
    }

    async fn dead_letter_replay(&self, filter: JobFilter, now: Timestamp) -> StoreResult<u64> {
        let out = self.inner.dead_letter_replay(filter, now).await;
        self.wrote();
        out
    }

    async fn dead_letter_dismiss(&self, filter: JobFilter) -> StoreResult<u64> {
        self.inner.dead_letter_dismiss(filter).await
    }

    async fn stats(&self) -> StoreResult<Stats> {
        self.inner.stats().await
    }

    async fn dead_letters_since(&self, since: Timestamp) -> StoreResult<Vec<DeadCount>> {
        self.inner.dead_letters_since(since).await
    }

    async fn dead_letter_groups(&self, filter: JobFilter) -> StoreResult<Vec<DeadGroup>> {
        self.inner.dead_letter_groups(filter).await
    }

    async fn job_replay_changed(&self, params: ReplayChangedParams) -> StoreResult<Job> {
        self.inner.job_replay_changed(params).await
    }

    async fn job_changes(&self, id: &JobId) -> StoreResult<Vec<JobChange>> {
        self.inner.job_changes(id).await
    }

    async fn dead_letter_chunk_end(
        &self,
        filter: JobFilter,
        limit: u32,
    ) -> StoreResult<Option<i64>> {
        let n = self.chunk_ends.fetch_add(1, Ordering::SeqCst) + 1;
        let held = {
            let mut hold = self.hold_chunk.lock().expect("hold");
            match hold.take() {
                Some((nth, reached, go)) if nth == n => Some((reached, go)),
                other => {
                    *hold = other;
                    None
                }
            }
        };
        if let Some((reached, go)) = held {
            let _ = reached.send(());
            let _ = go.await;
        }
        self.inner.dead_letter_chunk_end(filter, limit).await
    }

    async fn dead_letter_reasons(&self, filter: JobFilter) -> StoreResult<Vec<DeadReason>> {
        self.inner.dead_letter_reasons(filter).await
    }

    async fn index_for_search(&self, limit: u32) -> StoreResult<u32> {
        let out = self.inner.index_for_search(limit).await;
        self.wrote();
        out
    }

    async fn group_counts(&self, queue: &str, limit: u32) -> StoreResult<GroupCounts> {
        self.inner.group_counts(queue, limit).await
    }

    async fn ordering_keys(&self, params: OrderingKeysParams) -> StoreResult<Vec<KeyLine>> {
        self.inner.ordering_keys(params).await
    }

    async fn job_cleanup(&self, params: CleanupParams) -> StoreResult<u64> {
        self.inner.job_cleanup(params).await
    }

    async fn ping(&self) -> StoreResult<()> {
        self.inner.ping().await
    }

    async fn endpoint_holds_share(&self, holds: Vec<SharedHold>) -> StoreResult<()> {
        self.inner.endpoint_holds_share(holds).await
    }

    async fn endpoint_holds_load(&self, now: Timestamp) -> StoreResult<Vec<SharedHold>> {
        self.inner.endpoint_holds_load(now).await
    }

    async fn endpoint_holds_clear(
        &self,
        name: &str,
        pause: bool,
        breaker: bool,
    ) -> StoreResult<()> {
        self.inner.endpoint_holds_clear(name, pause, breaker).await
    }

    async fn controls_load(&self) -> StoreResult<Vec<Control>> {
        self.inner.controls_load().await
    }

    async fn control_save(&self, control: Control) -> StoreResult<()> {
        self.inner.control_save(control).await
    }

    async fn schedule_save(&self, schedule: ScheduleRecord) -> StoreResult<()> {
        self.inner.schedule_save(schedule).await
    }

    async fn schedule_get(&self, id: &str) -> StoreResult<Option<ScheduleRecord>> {
        self.inner.schedule_get(id).await
    }

    async fn schedule_list(&self) -> StoreResult<Vec<ScheduleRecord>> {
        self.inner.schedule_list().await
    }

    async fn schedule_page(
        &self,
        after: Option<String>,
        limit: u32,
    ) -> StoreResult<Vec<ScheduleRecord>> {
        self.inner.schedule_page(after, limit).await
    }

    async fn schedule_delete(&self, id: &str) -> StoreResult<bool> {
        self.inner.schedule_delete(id).await
    }

    async fn schedule_set_paused(
        &self,
        id: &str,
        paused: bool,
        next_at: Option<Timestamp>,
        now: Timestamp,
    ) -> StoreResult<bool> {
        self.inner
            .schedule_set_paused(id, paused, next_at, now)
            .await
    }

    async fn schedules_due(
        &self,
        now: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<ScheduleRecord>> {
        self.inner.schedules_due(now, limit).await
    }

    async fn schedule_advance(&self, advance: ScheduleAdvance) -> StoreResult<bool> {
        let out = self.inner.schedule_advance(advance).await;
        self.wrote();
        out
    }

    async fn try_lead(&self) -> StoreResult<bool> {
        self.inner.try_lead().await
    }

    fn is_shared(&self) -> bool {
        self.inner.is_shared()
    }

    fn subscribe(&self) -> Option<tokio::sync::broadcast::Receiver<Wake>> {
        self.inner.subscribe()
    }
}
