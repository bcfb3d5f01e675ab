//! The lease pipeline: each queue's loop leases runnable jobs its endpoints admit, and starts
//! their attempts; what cannot start is given back.
//!
//! Slots. A queue's concurrency bounds attempts running at once (run slots). Leasing takes lease
//! slots, of which there are half as many again (`lease_ahead`: none for a queue of one), so up to
//! half the concurrency is leased ahead and starts the moment a run slot frees instead of a lease
//! round trip later (measured: +15% no-op and +10% HTTP jobs/s at concurrency 100). A job that had
//! to wait checks its endpoint before it starts: a pause or open breaker that came down meanwhile
//! sends it back unstarted, and after 100 ms of waiting (`FRESH_ADMISSION`) it is admitted afresh,
//! so admissions spaced by a rate limit cannot pile up behind slow attempts and go out as a burst.
//! A run slot frees only after the endpoint has learned from the attempt's result, so the job that
//! takes it sees a pause that result brought. The lease slot frees once the outcome is decided;
//! writing the result then takes a place in a recording line the size of the concurrency, so the
//! next attempt does not wait for the previous one's commit. A queue may have two leases in flight:
//! each reserves the lease slots free when it starts, and the second takes the slots that freed
//! while the first waited for its commit. A queue loop ends only after its leases in flight, so the
//! shutdown sees every job they took.
//!
//! Wake-ups. A wake-up is never lost, and an empty lease does not repeat itself. A queue's loop
//! goes idle (until its next poll or the next run time it knows of) only on the word of a lease
//! that started after the last wake-up, poll, and lease that took all it had slots for. One of
//! those that comes while leases are out and can start none of its own (they hold every free slot,
//! or two are out) makes the loop lease again when they end, since they may have read before the
//! work it is for (`tests/engine/`: `a_wake_up_during_a_lease_is_not_lost`). Without one, a lease
//! that found nothing starts no other while another is still out
//! (`tests/engine/`: `an_empty_lease_starts_no_other_while_one_is_out`). An attempt's end, of any
//! queue, is a lesser word (`QueueSlots::freed`): a place freed or a hold lifted matters only to
//! a queue whose last lease left work behind (it took all it had slots for, or a hold kept some
//! back), and only such a queue leases again for it; other work comes with a wake-up or at a
//! time the loop knows.
//!
//! Callback deliveries. A finish whose delivery finds a lease slot free in its queue and its
//! endpoint's admission takes both before it is recorded (`Inner::reserve_delivery`); the
//! delivery then goes in leased to this worker and starts at once, as a leased job does.
//!
//! Over 600 lines: a queue's loop, its fill, admission during a lease and the start of attempts:
//! the lease pipeline, in the order it runs.

use super::attempt::run_attempt;
use super::Inner;
use crate::endpoints::Admitted;
use redial_policy::endpoint::{Admission, Hold};
use redial_policy::{DeadCategory, Timestamp};
use redial_store::{
    Admit, Attempt, AttemptCategory, AttemptDecision, Candidate, Job, JobId, LeaseAdmittedParams,
    NewJob, RecordAttemptParams, ReleaseParams, StoreError, Transition, Verdict,
};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// A leased job's places in its queue, each named for what it bounds:
/// - `lease`: one of the queue's lease slots (its concurrency plus the jobs it may lease ahead),
///   held from the lease until the attempt's outcome is known and its endpoint has learned from it;
/// - `run`: one of the queue's run slots (its concurrency), held while the handler runs;
/// - a place in the queue's recording line (`record_places`, as many as its concurrency), taken
///   in exchange for the lease slot, so the next attempt starts while this result is written.
pub(super) struct Slot {
    lease: OwnedSemaphorePermit,
    run_slots: Arc<Semaphore>,
    /// The run slot, once taken; it frees when the endpoint has learned from the result, so a
    /// job waiting for it sees a pause that result brought.
    pub(super) run: Option<OwnedSemaphorePermit>,
    record_places: Arc<Semaphore>,
}

impl Slot {
    /// Waits for a place in the recording line, then frees the lease slot.
    pub(super) async fn enter_recording_line(self) -> Option<OwnedSemaphorePermit> {
        let place = self.record_places.acquire_owned().await.ok();
        drop(self.lease);
        place
    }
}

/// Leases a queue may have in flight at once: a second starts, with the slots that freed since,
/// while the first waits for its commit, so slots do not wait a whole commit to be filled again.
pub(super) const FILLS_IN_FLIGHT: usize = 2;

/// Jobs a queue may lease beyond its concurrency, to start the moment a run slot frees instead
/// of a lease round trip later. Half the concurrency (none for a queue of one).
pub(super) fn lease_ahead(concurrency: usize) -> usize {
    concurrency / 2
}

/// How long a job leased ahead may wait for a run slot and still start on the admission it was
/// leased with. Past this its endpoint is asked again: admissions spaced by a rate limit must not
/// turn into a burst because slow attempts held every run slot.
pub(super) const FRESH_ADMISSION: Duration = Duration::from_millis(100);

/// A queue's places, each bounded by its concurrency (see [`Slot`]): its lease slots (the
/// concurrency and the jobs it may lease ahead), run slots and recording line. Its loop leases
/// with them, and so does a finish whose callback delivery starts at once in this queue
/// ([`Inner::reserve_delivery`]).
#[derive(Debug)]
pub(super) struct QueueSlots {
    lease: Arc<Semaphore>,
    lines: Lines,
    /// Told after every attempt, of any queue: a place freed, and a hold may have lifted
    /// ([`Inner::wake_after_attempt`]). The loop leases again for it only when its last lease
    /// left work behind.
    pub(super) freed: Arc<Notify>,
}

impl QueueSlots {
    pub(super) fn new(concurrency: usize) -> QueueSlots {
        let concurrency = concurrency.max(1);
        QueueSlots {
            lease: Arc::new(Semaphore::new(concurrency + lease_ahead(concurrency))),
            lines: Lines {
                run_slots: Arc::new(Semaphore::new(concurrency)),
                record_places: Arc::new(Semaphore::new(concurrency)),
            },
            freed: Arc::new(Notify::new()),
        }
    }
}

/// A callback delivery's places, taken before the finish that makes it is recorded: its
/// queue's lease slot and its endpoint's admission. Once the delivery is in, leased to this
/// worker, it starts with them at once ([`Reserved::start`]); dropped, they are given back.
pub(super) struct Reserved {
    slot: OwnedSemaphorePermit,
    admission: Admitted,
    lines: Lines,
    /// The delivery's lease, as it goes in.
    pub(super) until: Timestamp,
}

impl Reserved {
    /// Starts `delivery`, inserted leased to this worker, as a leased job starts.
    pub(super) fn start(self, inner: &Arc<Inner>, delivery: Job) {
        spawn_attempt(inner, delivery, self.slot, self.admission, &self.lines);
    }
}

impl Inner {
    /// The places for `delivery` to start the moment the finish that makes it is written: none
    /// while shutting down, when its queue is not run here or is paused, has no lease slot
    /// free, or its endpoint holds. Then it goes in ready and waits for its queue's loop, as
    /// any job does; a free slot means the loop has nothing waiting ahead of it.
    pub(super) fn reserve_delivery(&self, delivery: &NewJob, now: Timestamp) -> Option<Reserved> {
        if self.shutdown.is_triggered() || self.queue_paused(&delivery.queue, now).is_some() {
            return None;
        }
        let slots = self.slots.get(&delivery.queue)?;
        let slot = slots.lease.clone().try_acquire_owned().ok()?;
        let admission = self.endpoints.admit(&delivery.endpoint, false, now).ok()?;
        Some(Reserved {
            slot,
            admission,
            lines: slots.lines.clone(),
            until: self.lease_until(now),
        })
    }
}

/// Over 100 lines on purpose: a queue's loop (wait, fill, sleep until what can wake it); its slots
/// and the hold it waits on live across the iterations.
pub(super) async fn queue_loop(inner: Arc<Inner>, queue: String) {
    let Some(QueueSlots {
        lease: lease_slots,
        lines,
        freed,
    }) = inner.slots.get(&queue)
    else {
        return;
    };
    let (lease_slots, lines, freed) = (lease_slots.clone(), lines.clone(), freed.clone());
    let waker = inner.wakers.get(&queue).cloned().unwrap_or_default();
    let mut fills: tokio::task::JoinSet<Result<Filled, StoreError>> = tokio::task::JoinSet::new();
    // Set when a lease found nothing more to take: no new lease until a wake-up or this time.
    let mut idle_until: Option<tokio::time::Instant> = None;
    // Whether a new lease may find something the leases out will not: set by a wake-up, a
    // poll, and a lease that took all it had slots for; cleared when a lease starts (it reads
    // after all of them). While it is clear, a lease that found nothing more starts no other
    // (the ones still out will say whether there is more), and the last one out sends the queue
    // idle; while it is set, that lease's word does not (it may have read before the work a
    // wake-up was for, or skipped rows another lease had locked and left).
    let mut more = true;
    // Whether the last lease left work behind: it took all it had slots for, or an endpoint or
    // a group held some. Only then can a place freed or a hold lifted by an attempt (`freed`)
    // let more go; otherwise work comes with a wake-up, or at a time the loop knows.
    let mut left = true;
    loop {
        if inner.shutdown.is_triggered() {
            break;
        }
        let free = lease_slots.available_permits();
        // A queue paused by hand leases nothing; a resume wakes it, an end is seen at the next
        // poll.
        let paused = inner.queue_paused(&queue, inner.clock.now()).is_some();
        if !paused && idle_until.is_none() && more && free > 0 && fills.len() < FILLS_IN_FLIGHT {
            if let Ok(slots) = lease_slots
                .clone()
                .try_acquire_many_owned(u32::try_from(free).unwrap_or(u32::MAX))
            {
                fills.spawn(fill(inner.clone(), queue.clone(), slots, lines.clone()));
                more = false;
            }
        }
        let wake_at =
            idle_until.unwrap_or_else(|| tokio::time::Instant::now() + inner.config.poll_interval);
        tokio::select! {
            Some(done) = fills.join_next(), if !fills.is_empty() => match done {
                // It took all the slots it had: more may be runnable at once.
                Ok(Ok(Filled { took_all: true, .. })) => {
                    left = true;
                    more = true;
                }
                Ok(Ok(Filled { took_all: false, held_until, held })) if fills.is_empty() && !more => {
                    left = held;
                    // Everything due is leased or held: sleep until new work is due or a hold
                    // ends, or a wake-up.
                    let now = inner.clock.now();
                    let next_job = match inner.store.job_next_run_at(&queue, now).await {
                        Ok(t) => t,
                        Err(e) => {
                            tracing::error!(queue = %queue, error = %e, "reading the next run time failed");
                            None
                        }
                    };
                    // A group held by its own rate lets go at its next slot, as an endpoint does.
                    let next_group = inner.groups.get(&queue).and_then(|g| g.next_change(now));
                    // A hold the lease met that ends soon (a rate's or a pace's next place), even
                    // one that ended while the lease was out: then the queue leases again at once.
                    let wait = [next_job, inner.endpoints.next_change(now), next_group, held_until]
                        .into_iter()
                        .flatten()
                        .min()
                        .map_or(inner.config.poll_interval, |t| {
                            t.saturating_since(now)
                                .clamp(Duration::from_millis(1), inner.config.poll_interval)
                        });
                    idle_until = Some(tokio::time::Instant::now() + wait);
                }
                Ok(Ok(Filled { took_all: false, held, .. })) => left = held,
                Ok(Err(e)) => {
                    left = true;
                    tracing::error!(queue = %queue, error = %e, "leasing failed; retrying");
                    idle_until = Some(tokio::time::Instant::now() + inner.config.poll_interval);
                }
                Err(e) => {
                    left = true;
                    tracing::error!(queue = %queue, error = %e, "a lease task failed; retrying");
                    idle_until = Some(tokio::time::Instant::now() + inner.config.poll_interval);
                }
            },
            _ = waker.notified() => {
                idle_until = None;
                more = true;
            }
            _ = freed.notified() => {
                if left {
                    idle_until = None;
                    more = true;
                }
            }
            _ = tokio::time::sleep_until(wake_at) => {
                idle_until = None;
                more = true;
            }
            _ = inner.shutdown.wait() => break,
        }
    }
    // Leases in flight finish first: their jobs are registered in flight before the loop ends,
    // so the shutdown sees them.
    while fills.join_next().await.is_some() {}
}

/// A queue's run slots and recording line, which its leased jobs take in turn.
#[derive(Clone, Debug)]
pub(super) struct Lines {
    run_slots: Arc<Semaphore>,
    record_places: Arc<Semaphore>,
}

/// What a lease did, for the queue's loop.
pub(super) struct Filled {
    /// It leased as many as it had slots (so more may be waiting), rather than all that could go.
    took_all: bool,
    /// The earliest end of a hold with a known end that left an endpoint's jobs out of it.
    held_until: Option<Timestamp>,
    /// An endpoint or a group held some of its candidates.
    held: bool,
}

/// Leases runnable jobs of `queue` for `slots`, asking each job's endpoint whether it may go. An
/// endpoint that holds is left out for the rest of the lease, so a held endpoint never keeps
/// another endpoint's jobs waiting. Slots not used are given back.
pub(super) async fn fill(
    inner: Arc<Inner>,
    queue: String,
    mut slots: OwnedSemaphorePermit,
    lines: Lines,
) -> Result<Filled, StoreError> {
    let free = slots.num_permits();
    if free == 0 {
        return Ok(Filled {
            took_all: true,
            held_until: None,
            held: false,
        });
    }
    let now = inner.clock.now();
    let holds = Arc::new(Mutex::new(HashMap::new()));
    let held_until = Arc::new(Mutex::new(None));
    let held = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let admitted = Arc::new(Mutex::new(HashMap::new()));
    let rejections = Arc::new(Mutex::new(Vec::new()));
    let admit = Box::new(EndpointAdmit {
        inner: inner.clone(),
        group_limits: inner.groups.get(&queue).cloned(),
        queue: queue.clone(),
        now,
        holds: holds.clone(),
        held_until: held_until.clone(),
        held: held.clone(),
        admitted: admitted.clone(),
        budget_rejections: rejections.clone(),
    });
    // On an error nothing was leased (one transaction), and the admissions asked for are
    // released as `admitted` drops.
    let leased = inner
        .store
        .job_lease_admitted(
            LeaseAdmittedParams {
                queue,
                now,
                owner: inner.config.worker_id.clone(),
                lease_until: inner.lease_until(now),
                max: free,
            },
            admit,
        )
        .await;
    for endpoint in std::mem::take(&mut *rejections.lock().unwrap_or_else(|p| p.into_inner())) {
        count_budget_rejection(&inner, &endpoint);
    }
    let leased = leased?;
    let mut admitted = std::mem::take(&mut *admitted.lock().unwrap_or_else(|p| p.into_inner()));
    // A lease that stopped looking across groups before it had seen them all may have left due
    // jobs further on: lease again at once, as when it took all it could.
    let took_all = leased.taken.len() >= free || leased.more;
    // The jobs leased to run start before anything else can fail.
    for job in leased.taken {
        match (slots.split(1), admitted.remove(&job.seq)) {
            (Some(slot), Some(admission)) => spawn_attempt(&inner, job, slot, admission, &lines),
            // Cannot happen: at most `free` jobs are taken, each admitted. Give the job back
            // rather than overrun a limit; its admission, if any, is released as it drops.
            _ => release(&inner, vec![job.id]).await,
        }
    }
    drop(admitted);
    if !leased.failed.is_empty() {
        let holds = std::mem::take(&mut *holds.lock().unwrap_or_else(|p| p.into_inner()));
        fail_retries(&inner, leased.failed, holds, now).await?;
    }
    let held_until = *held_until.lock().unwrap_or_else(|p| p.into_inner());
    Ok(Filled {
        took_all,
        held_until,
        held: held.load(Ordering::Relaxed),
    })
}

pub(super) fn count_budget_rejection(inner: &Inner, endpoint: &str) {
    let label = inner.metrics.endpoint_label(endpoint);
    inner
        .metrics
        .inc(&crate::metrics::BUDGET_REJECTIONS, &[("endpoint", &label)]);
}

/// Admission by the endpoints' limits, as the store asks it while leasing.
pub(super) struct EndpointAdmit {
    inner: Arc<Inner>,
    /// The queue's groups' states, when some group has a limit.
    group_limits: Option<Arc<crate::endpoints::Registry>>,
    queue: String,
    now: Timestamp,
    /// What holds each retry admitted to fail, by seq.
    holds: Arc<Mutex<HashMap<i64, Hold>>>,
    /// The earliest end of the endpoints' holds with a known end met in this lease.
    held_until: Arc<Mutex<Option<Timestamp>>>,
    /// Set when a group or an endpoint held a candidate back.
    held: Arc<std::sync::atomic::AtomicBool>,
    /// The admissions of the jobs admitted to run, by seq.
    admitted: Arc<Mutex<HashMap<i64, Admitted>>>,
    /// Endpoints whose retry budget held a retry back, counted in the metrics once the lease
    /// is done: SQLite asks admission inside its write transaction, which must not wait on the
    /// metrics' lock.
    budget_rejections: Arc<Mutex<Vec<String>>>,
}

impl EndpointAdmit {
    /// What admission says of `c`: the group's limits, then its endpoint's.
    fn verdict(&mut self, c: &Candidate) -> Verdict {
        let inner = &self.inner;
        // The group's limits first: a group that holds is passed over for this lease. Should
        // the endpoint then hold, the group's admission drops here, given back.
        let group = match (&self.group_limits, &c.group) {
            (Some(limits), Some(g)) => match limits.admit(g, false, self.now) {
                Ok(a) => Some(a),
                Err(_) => return Verdict::HoldGroup,
            },
            _ => None,
        };
        match inner.endpoints.admit(&c.endpoint, c.is_retry, self.now) {
            Ok(admission) => {
                self.admitted
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(c.seq, admission.with_group(group));
                Verdict::Take
            }
            Err(Admission::Go(_)) => unreachable!("an admission to go is returned as Ok"),
            Err(Admission::Hold(hold)) => {
                if let Some(until) = hold.until {
                    let mut earliest = self.held_until.lock().unwrap_or_else(|p| p.into_inner());
                    *earliest = Some(earliest.map_or(until, |e| e.min(until)));
                }
                Verdict::HoldEndpoint
            }
            Err(Admission::HoldRetries(_)) => {
                self.rejected(&c.endpoint);
                Verdict::HoldRetries
            }
            Err(Admission::HoldFirsts(_)) => Verdict::HoldFirsts,
            Err(Admission::FailRetry(hold)) => {
                self.rejected(&c.endpoint);
                self.holds
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(c.seq, hold);
                Verdict::Fail
            }
        }
    }

    fn rejected(&self, endpoint: &str) {
        self.budget_rejections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(endpoint.to_owned());
    }
}

impl Admit for EndpointAdmit {
    fn admit(&mut self, c: &Candidate) -> Verdict {
        let verdict = self.verdict(c);
        if !matches!(verdict, Verdict::Take) {
            self.held.store(true, Ordering::Relaxed);
        }
        verdict
    }

    fn weight(&self, group: &str) -> u32 {
        self.inner
            .config
            .queues
            .get(&self.queue)
            .map_or(1, |q| q.groups.limits(group).weight)
    }

    fn not_leased(&mut self, c: &Candidate) {
        self.holds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&c.seq);
        // Dropped, the admission is released.
        let admission = self
            .admitted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&c.seq);
        drop(admission);
    }
}

pub(super) fn spawn_attempt(
    inner: &Arc<Inner>,
    job: Job,
    lease: OwnedSemaphorePermit,
    admission: Admitted,
    lines: &Lines,
) {
    let mut in_flight = inner.lock_in_flight();
    let id = job.id.clone();
    let slot = Slot {
        lease,
        run_slots: lines.run_slots.clone(),
        run: None,
        record_places: lines.record_places.clone(),
    };
    // Boxed: the attempt's future is large, and the task would otherwise copy it in and out.
    let task = tokio::spawn(Box::pin(run_attempt(inner.clone(), job, slot, admission)));
    in_flight.insert(id, task.abort_handle());
}

/// Retries whose endpoint's budget is spent, under a policy that fails them fast: they end dead
/// as `budget_exhausted` without a request, and the record says so.
pub(super) async fn fail_retries(
    inner: &Arc<Inner>,
    jobs: Vec<Job>,
    mut holds: HashMap<i64, Hold>,
    now: Timestamp,
) -> Result<(), StoreError> {
    let mut jobs = jobs.into_iter();
    while let Some(job) = jobs.next() {
        let Some(hold) = holds.remove(&job.seq) else {
            release(inner, vec![job.id]).await;
            continue;
        };
        let endpoint = &job.endpoint;
        let reason = format!(
            "{}; not sent: {endpoint} fails retries fast when its budget is spent",
            hold.reason
        );
        let attempt = Attempt {
            error: Some("not-sent".into()),
            dead_category: Some(DeadCategory::BudgetExhausted),
            held: Some(hold.reason.clone()),
            ..Attempt::new(
                job.runs + 1,
                now,
                AttemptCategory::Held,
                AttemptDecision::Dead,
                reason,
                inner.config.worker_id.clone(),
            )
        };
        let dead = Transition::Dead {
            category: DeadCategory::BudgetExhausted,
        };
        let params =
            RecordAttemptParams::of(&job, inner.config.worker_id.clone(), now, attempt, dead)
                .with_delivery(&job);
        match inner.store.job_record_attempt(params).await {
            Ok(recorded) => inner.finished(&job, recorded.state, false),
            Err(e) => {
                // This job and the rest go back to the queue rather than wait to be rescued.
                let ids = std::iter::once(job.id).chain(jobs.map(|j| j.id)).collect();
                release(inner, ids).await;
                return Err(e);
            }
        }
        inner.metrics.inc(
            &crate::metrics::DEAD_LETTERS,
            &[("category", DeadCategory::BudgetExhausted.as_str())],
        );
    }
    Ok(())
}

/// Gives leases back to the store, uncounted: the jobs run again later.
pub(super) async fn release(inner: &Inner, ids: Vec<JobId>) {
    let params = ReleaseParams {
        owner: inner.config.worker_id.clone(),
        ids,
        now: inner.clock.now(),
    };
    if let Err(e) = inner.store.job_release(params).await {
        tracing::error!(error = %e, "could not give back a lease");
    }
}

/// Waits for a run slot. A job that had to wait starts only if its endpoint still lets it: no
/// pause or open breaker came down meanwhile, and after a long wait a fresh admission. Otherwise,
/// or when a shutdown begins first, the job is given back unstarted (no attempt counted), its
/// admission released, and `None` returned.
pub(super) async fn wait_to_start(
    inner: &Inner,
    job: &Job,
    slot: &Slot,
    admission: Admitted,
) -> Option<(OwnedSemaphorePermit, Admitted)> {
    if let Ok(run) = slot.run_slots.clone().try_acquire_owned() {
        return Some((run, admission));
    }
    let since = std::time::Instant::now();
    let run = tokio::select! {
        run = slot.run_slots.clone().acquire_owned() => run.ok(),
        _ = inner.shutdown.wait() => None,
    };
    let Some(run) = run else {
        drop(admission);
        give_back(inner, job, true).await;
        return None;
    };
    let now = inner.clock.now();
    if since.elapsed() > FRESH_ADMISSION {
        // Both asked again, the group first (as when leasing): admissions spaced by a group's
        // rate must not turn into a burst either.
        drop(admission);
        let group = match (inner.groups.get(&job.queue), &job.group) {
            (Some(limits), Some(g)) => match limits.admit(g, false, now) {
                Ok(a) => Some(a),
                Err(_) => {
                    give_back(inner, job, false).await;
                    return None;
                }
            },
            _ => None,
        };
        match inner.endpoints.admit(&job.endpoint, job.attempts > 0, now) {
            Ok(fresh) => return Some((run, fresh.with_group(group))),
            Err(_) => {
                give_back(inner, job, false).await;
                return None;
            }
        }
    } else if inner.endpoints.stopped_by(&job.endpoint, now).is_some() {
        drop(admission);
        give_back(inner, job, false).await;
        return None;
    }
    Some((run, admission))
}

/// Gives a leased job that did not start back to the store (it runs again later, uncounted).
/// Its admission was released by its owner. `at_shutdown`: counted in the shutdown's report.
pub(super) async fn give_back(inner: &Inner, job: &Job, at_shutdown: bool) {
    if at_shutdown {
        // Under the in-flight lock, as the shutdown reads it (see `given_back_unstarted`).
        let mut in_flight = inner.lock_in_flight();
        if in_flight.remove(&job.id).is_some() {
            inner.given_back_unstarted.fetch_add(1, Ordering::Relaxed);
        }
    }
    release(inner, vec![job.id.clone()]).await;
    inner.lock_in_flight().remove(&job.id);
    inner.attempt_done.notify_waiters();
    if let Some(n) = inner.wakers.get(&job.queue) {
        n.notify_one();
    }
}
