//! The worker runtime: one leasing loop per queue, a heartbeat loop, a maintenance loop, and the
//! attempt path (run the handler, decide, record).

use crate::clock::Clock;
use crate::handler::{AttemptOutput, Handler};
use crate::redact;
use crate::shutdown::Shutdown;
use redial_policy::{
    decide, Action, JobCounters, Outcome, Policy, PolicyOverride, SplitMix64, Timestamp,
    TransportError,
};
use redial_store::{
    Attempt, CleanupParams, HeartbeatParams, Job, JobId, LeaseParams, RecordAttemptParams,
    ReleaseParams, RescueParams, Store, StoreError, Transition,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, Semaphore};
use tokio::task::{AbortHandle, JoinHandle};

/// One queue: how many attempts run at once, and the policy its jobs follow.
#[derive(Clone, Debug)]
pub struct QueueConfig {
    pub concurrency: usize,
    pub policy: Policy,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            concurrency: 32,
            policy: Policy::default(),
        }
    }
}

/// How long finished jobs are kept.
#[derive(Clone, Debug)]
pub struct Retention {
    /// Completed and cancelled jobs.
    pub completed: Duration,
    /// At most this many completed and cancelled jobs are kept (the newest), whatever their age.
    pub completed_max: Option<u64>,
    pub dead: Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            completed: Duration::from_secs(24 * 3600),
            completed_max: None,
            dead: Duration::from_secs(30 * 24 * 3600),
        }
    }
}

#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// This process's name on leases and attempt records; unique per process.
    pub worker_id: String,
    pub queues: BTreeMap<String, QueueConfig>,
    /// Policy overrides per endpoint (a URL origin, or the name a job gives), laid over the
    /// queue's policy and under the job's own.
    pub endpoints: BTreeMap<String, PolicyOverride>,
    /// How long a lease lasts without a heartbeat. A process killed mid-attempt leaves its jobs
    /// to be rescued after this.
    pub lease: Duration,
    pub heartbeat: Duration,
    /// Lease expiries a job may suffer before it goes dead (`unknown_exhausted`).
    pub max_stalls: u32,
    /// The longest an idle queue sleeps before looking again; wake-ups normally come sooner.
    pub poll_interval: Duration,
    /// How often expired leases are rescued and due jobs promoted.
    pub maintenance_interval: Duration,
    pub retention: Retention,
    pub cleanup_interval: Duration,
    /// The time limit of an attempt whose job sets none; custom handlers are held to it too.
    pub default_timeout: Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        let mut queues = BTreeMap::new();
        queues.insert("default".to_owned(), QueueConfig::default());
        EngineConfig {
            worker_id: format!("{}-{}", std::process::id(), random_u64() % 1_000_000),
            queues,
            endpoints: BTreeMap::new(),
            lease: Duration::from_secs(30),
            heartbeat: Duration::from_secs(10),
            max_stalls: 3,
            poll_interval: Duration::from_secs(1),
            maintenance_interval: Duration::from_secs(1),
            retention: Retention::default(),
            cleanup_interval: Duration::from_secs(60),
            default_timeout: Duration::from_secs(30),
        }
    }
}

/// The engine: cheap to clone, clones share everything.
#[derive(Clone, Debug)]
pub struct Engine {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn Store>,
    config: EngineConfig,
    clock: Arc<dyn Clock>,
    default_handler: Arc<dyn Handler>,
    handlers: HashMap<String, Arc<dyn Handler>>,
    /// One per queue: enqueues and finished attempts wake the queue's leasing loop.
    wakers: HashMap<String, Arc<Notify>>,
    /// Attempts in flight, so that heartbeats know what to extend and shutdown what to give back.
    in_flight: Mutex<HashMap<JobId, AbortHandle>>,
    /// Notified each time an attempt finishes; shutdown waits on it.
    attempt_done: Notify,
    jitter: Mutex<SplitMix64>,
    /// Stops leasing: the first step of a graceful stop.
    shutdown: Shutdown,
    /// Stops heartbeats and maintenance: the last step, once no attempt is in flight, so that
    /// leases stay fresh through the grace period.
    stopped: Shutdown,
}

impl Engine {
    /// An engine whose queues all use `handler` unless [`Engine::with_handler`] says otherwise.
    pub fn new(
        store: Arc<dyn Store>,
        config: EngineConfig,
        clock: Arc<dyn Clock>,
        handler: Arc<dyn Handler>,
    ) -> Engine {
        let wakers = config
            .queues
            .keys()
            .map(|q| (q.clone(), Arc::new(Notify::new())))
            .collect();
        Engine {
            inner: Arc::new(Inner {
                store,
                config,
                clock,
                default_handler: handler,
                handlers: HashMap::new(),
                wakers,
                in_flight: Mutex::new(HashMap::new()),
                attempt_done: Notify::new(),
                jitter: Mutex::new(SplitMix64::new(random_u64())),
                shutdown: Shutdown::new(),
                stopped: Shutdown::new(),
            }),
        }
    }

    /// Uses `handler` for `queue`'s jobs. Call before [`Engine::start`].
    ///
    /// # Panics
    /// If the engine was already started or cloned: handlers are fixed once it runs.
    pub fn with_handler(mut self, queue: &str, handler: Arc<dyn Handler>) -> Engine {
        let inner = Arc::get_mut(&mut self.inner)
            .expect("with_handler is called before the engine is started or cloned");
        inner.handlers.insert(queue.to_owned(), handler);
        self
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    pub fn has_queue(&self, queue: &str) -> bool {
        self.inner.config.queues.contains_key(queue)
    }

    /// Tells a queue's loop to look for work now (after an enqueue or a replay).
    pub fn wake(&self, queue: &str) {
        if let Some(n) = self.inner.wakers.get(queue) {
            n.notify_one();
        }
    }

    pub fn wake_all(&self) {
        for n in self.inner.wakers.values() {
            n.notify_one();
        }
    }

    /// How many attempts are in flight in this process.
    pub fn in_flight(&self) -> usize {
        self.inner.lock_in_flight().len()
    }

    /// Starts the loops. Stop them with [`RunningEngine::shutdown`].
    pub fn start(&self) -> RunningEngine {
        let mut queue_loops = Vec::new();
        for (queue, qc) in &self.inner.config.queues {
            queue_loops.push(tokio::spawn(queue_loop(
                self.inner.clone(),
                queue.clone(),
                qc.concurrency.max(1),
            )));
        }
        let background = vec![
            tokio::spawn(heartbeat_loop(self.inner.clone())),
            tokio::spawn(maintenance_loop(self.inner.clone())),
        ];
        RunningEngine {
            engine: self.clone(),
            queue_loops,
            background,
        }
    }
}

/// What a graceful shutdown did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Attempts that were in flight when the shutdown began and finished within the grace period.
    pub finished: usize,
    /// Attempts still running at the end of the grace period: aborted, their leases given back.
    pub released: usize,
}

/// A started engine. Dropping it without [`RunningEngine::shutdown`] leaves the loops running
/// until the runtime stops.
#[derive(Debug)]
pub struct RunningEngine {
    engine: Engine,
    queue_loops: Vec<JoinHandle<()>>,
    /// Heartbeat and maintenance: they run until the in-flight attempts are settled.
    background: Vec<JoinHandle<()>>,
}

impl RunningEngine {
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Stops leasing, lets in-flight attempts finish within `grace`, then aborts the rest and
    /// gives their leases back (they run again, uncounted). Safe to call while another shutdown
    /// signal is already triggered.
    pub async fn shutdown(self, grace: Duration) -> ShutdownReport {
        let inner = &self.engine.inner;
        inner.shutdown.trigger();
        // Once the queue loops have returned, every job they leased is registered in flight, so
        // none can slip between the snapshot below and the release.
        for t in self.queue_loops {
            let _ = t.await;
        }
        let at_start = inner.lock_in_flight().len();
        let deadline = tokio::time::Instant::now() + grace;
        loop {
            let done = inner.attempt_done.notified();
            if inner.lock_in_flight().is_empty() {
                break;
            }
            tokio::select! {
                _ = done => {}
                _ = tokio::time::sleep_until(deadline) => break,
            }
        }
        let left: Vec<(JobId, AbortHandle)> = inner.lock_in_flight().drain().collect();
        for (_, handle) in &left {
            handle.abort();
        }
        if !left.is_empty() {
            let ids: Vec<JobId> = left.iter().map(|(id, _)| id.clone()).collect();
            let params = ReleaseParams {
                owner: inner.config.worker_id.clone(),
                ids,
                now: inner.clock.now(),
            };
            if let Err(e) = inner.store.job_release(params).await {
                tracing::error!(error = %e, "could not give back leases at shutdown; they expire and are rescued");
            }
        }
        inner.stopped.trigger();
        for t in self.background {
            let _ = t.await;
        }
        ShutdownReport {
            finished: at_start.saturating_sub(left.len()),
            released: left.len(),
        }
    }
}

impl Inner {
    fn lock_in_flight(&self) -> std::sync::MutexGuard<'_, HashMap<JobId, AbortHandle>> {
        // The map holds plain handles; a panic elsewhere cannot leave it half-updated.
        self.in_flight.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn handler_for(&self, queue: &str) -> Arc<dyn Handler> {
        self.handlers
            .get(queue)
            .unwrap_or(&self.default_handler)
            .clone()
    }

    /// The queue's policy, with the endpoint's and then the job's overrides laid over it. An
    /// override that does not validate is skipped with a warning (the API validates job
    /// overrides at enqueue, so this means a bad endpoint entry).
    fn policy_for(&self, job: &Job) -> Policy {
        let mut policy = self
            .config
            .queues
            .get(&job.queue)
            .map(|q| q.policy.clone())
            .unwrap_or_default();
        let layers = [
            self.config.endpoints.get(&job.endpoint),
            job.policy.as_ref(),
        ];
        for layer in layers.into_iter().flatten() {
            match policy.merged(layer) {
                Ok(p) => policy = p,
                Err(e) => {
                    tracing::warn!(job = %job.id, error = %e, "ignoring an invalid policy override")
                }
            }
        }
        policy
    }

    fn lease_until(&self, now: Timestamp) -> Timestamp {
        now.saturating_add(self.config.lease)
    }
}

async fn queue_loop(inner: Arc<Inner>, queue: String, concurrency: usize) {
    let permits = Arc::new(Semaphore::new(concurrency));
    let waker = inner.wakers.get(&queue).cloned().unwrap_or_default();
    loop {
        if inner.shutdown.is_triggered() {
            return;
        }
        let free = permits.available_permits();
        if free > 0 {
            let now = inner.clock.now();
            let params = LeaseParams {
                queue: queue.clone(),
                limit: u32::try_from(free).unwrap_or(u32::MAX),
                owner: inner.config.worker_id.clone(),
                now,
                lease_until: inner.lease_until(now),
            };
            match inner.store.job_lease_available(params).await {
                Ok(jobs) => {
                    let full = jobs.len() >= free;
                    for job in jobs {
                        let Ok(permit) = permits.clone().try_acquire_owned() else {
                            // Cannot happen: we leased at most `free` jobs and only this loop
                            // takes permits. Give the job back rather than overrun the limit.
                            release_one(&inner, job.id).await;
                            continue;
                        };
                        let mut in_flight = inner.lock_in_flight();
                        let id = job.id.clone();
                        let task =
                            tokio::spawn(run_attempt(inner.clone(), job, permit, waker.clone()));
                        in_flight.insert(id, task.abort_handle());
                    }
                    if full {
                        continue;
                    }
                }
                Err(e) => tracing::error!(queue = %queue, error = %e, "leasing failed; retrying"),
            }
        }
        let wait = if permits.available_permits() == 0 {
            inner.config.poll_interval
        } else {
            match inner.store.job_next_run_at(&queue).await {
                Ok(Some(t)) => t
                    .saturating_since(inner.clock.now())
                    .clamp(Duration::from_millis(1), inner.config.poll_interval),
                Ok(None) => inner.config.poll_interval,
                Err(e) => {
                    tracing::error!(queue = %queue, error = %e, "reading the next run time failed");
                    inner.config.poll_interval
                }
            }
        };
        tokio::select! {
            _ = waker.notified() => {}
            _ = tokio::time::sleep(wait) => {}
            _ = inner.shutdown.wait() => return,
        }
    }
}

async fn release_one(inner: &Inner, id: JobId) {
    let params = ReleaseParams {
        owner: inner.config.worker_id.clone(),
        ids: vec![id],
        now: inner.clock.now(),
    };
    if let Err(e) = inner.store.job_release(params).await {
        tracing::error!(error = %e, "could not give back a lease");
    }
}

/// One attempt: run, decide, record. Holds a concurrency permit until it ends.
async fn run_attempt(
    inner: Arc<Inner>,
    job: Job,
    _permit: tokio::sync::OwnedSemaphorePermit,
    waker: Arc<Notify>,
) {
    let started_at = inner.clock.now();
    let started = std::time::Instant::now();
    let limit = job
        .request
        .timeout_ms
        .map_or(inner.config.default_timeout, Duration::from_millis);
    let handler = inner.handler_for(&job.queue);
    // The HTTP executor enforces the limit itself; this bound (with a second's slack) holds
    // custom handlers to it too.
    let output = match tokio::time::timeout(limit + Duration::from_secs(1), handler.run(&job)).await
    {
        Ok(out) => out,
        Err(_) => AttemptOutput {
            error_detail: Some(format!(
                "the handler did not return within {}ms",
                limit.as_millis()
            )),
            ..AttemptOutput::from_outcome(Outcome::Transport(TransportError::Timeout))
        },
    };
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    record(&inner, &job, output, started_at, duration_ms).await;
    inner.lock_in_flight().remove(&job.id);
    inner.attempt_done.notify_waiters();
    waker.notify_one();
}

async fn record(
    inner: &Inner,
    job: &Job,
    output: AttemptOutput,
    started_at: Timestamp,
    duration_ms: u64,
) {
    let now = inner.clock.now();
    let policy = inner.policy_for(job);
    let counters = JobCounters {
        failures: job.attempts,
        unknown_failures: job.unknown_attempts,
        deferrals: job.deferrals,
        enqueued_at: job.created_at,
        deadline: job.deadline,
        has_idempotency_key: job.idempotency_key.is_some(),
        last_delay: job.last_delay_ms.map(Duration::from_millis),
    };
    let decision = {
        let mut jitter = inner.jitter.lock().unwrap_or_else(|p| p.into_inner());
        decide(&output.outcome, &counters, &policy, now, &mut *jitter)
    };
    let after = counters.after(&decision);
    let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let (status, error, handler_reason) = match &output.outcome {
        Outcome::Response(r) => (Some(r.status), None, None),
        Outcome::Transport(e) => (None, Some(e.as_str().to_owned()), None),
        Outcome::Handler(h) => {
            use redial_policy::HandlerOutcome as H;
            match h {
                H::Success => (None, None, None),
                H::Transient { reason } | H::Permanent { reason } | H::Unknown { reason } => {
                    (None, Some("handler".to_owned()), Some(reason.clone()))
                }
                H::DeferUntil { reason, .. } => (None, None, Some(reason.clone())),
            }
        }
    };
    let transition = match decision.action {
        Action::Complete => Transition::Complete,
        Action::Retry { at, .. } => Transition::Retry { at },
        Action::Defer { until, .. } => Transition::Defer { until },
        Action::Dead(category) => Transition::Dead { category },
    };
    let attempt = Attempt {
        number: job.runs + 1,
        started_at,
        duration_ms,
        status,
        error,
        error_detail: output.error_detail.or(handler_reason),
        category: decision.classification.category.as_str().to_owned(),
        decision: decision.action.as_str().to_owned(),
        dead_category: match decision.action {
            Action::Dead(c) => Some(c),
            _ => None,
        },
        delay_ms: decision.action.delay().map(millis),
        server_wait_ms: decision
            .classification
            .server_wait
            .map(|w| millis(w.requested)),
        server_wait_source: decision
            .classification
            .server_wait
            .map(|w| w.source.to_owned()),
        reason: decision.reason.clone(),
        response_headers: redact::headers(&output.response_headers, 32),
        response_body: output.response_body,
        worker: inner.config.worker_id.clone(),
    };
    tracing::info!(
        job = %job.id,
        queue = %job.queue,
        endpoint = %job.endpoint,
        attempt = attempt.number,
        decision = decision.action.as_str(),
        category = decision.category_str(),
        delay_ms = attempt.delay_ms,
        reason = %decision.reason,
        "attempt decided"
    );
    let params = RecordAttemptParams {
        id: job.id.clone(),
        owner: inner.config.worker_id.clone(),
        now,
        attempt,
        transition,
        attempts: after.failures,
        unknown_attempts: after.unknown_failures,
        deferrals: after.deferrals,
        last_delay_ms: after.last_delay.map(millis),
    };
    match inner.store.job_record_attempt(params).await {
        Ok(_) => {}
        Err(StoreError::LeaseLost(id)) => {
            tracing::warn!(job = %id, "the lease was lost before the attempt was recorded; the job runs again");
        }
        Err(e) => {
            tracing::error!(job = %job.id, error = %e, "recording the attempt failed; the lease will expire and the job runs again");
        }
    }
}

async fn heartbeat_loop(inner: Arc<Inner>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(inner.config.heartbeat) => {}
            _ = inner.stopped.wait() => return,
        }
        let ids: Vec<JobId> = inner.lock_in_flight().keys().cloned().collect();
        if ids.is_empty() {
            continue;
        }
        let params = HeartbeatParams {
            owner: inner.config.worker_id.clone(),
            ids,
            lease_until: inner.lease_until(inner.clock.now()),
        };
        if let Err(e) = inner.store.job_heartbeat(params).await {
            tracing::error!(error = %e, "heartbeat failed");
        }
    }
}

async fn maintenance_loop(inner: Arc<Inner>) {
    let mut last_cleanup: Option<std::time::Instant> = None;
    loop {
        let now = inner.clock.now();
        match inner
            .store
            .job_rescue_expired(RescueParams {
                now,
                max_stalls: inner.config.max_stalls,
            })
            .await
        {
            Ok(r) if r.requeued > 0 || r.dead > 0 => {
                tracing::warn!(
                    requeued = r.requeued,
                    dead = r.dead,
                    "rescued jobs whose lease expired"
                );
                for n in inner.wakers.values() {
                    n.notify_one();
                }
            }
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "lease rescue failed"),
        }
        if let Err(e) = inner.store.job_promote_due(now).await {
            tracing::error!(error = %e, "promoting due jobs failed");
        }
        if last_cleanup.is_none_or(|t| t.elapsed() >= inner.config.cleanup_interval) {
            last_cleanup = Some(std::time::Instant::now());
            cleanup(&inner, now).await;
        }
        tokio::select! {
            _ = tokio::time::sleep(inner.config.maintenance_interval) => {}
            _ = inner.stopped.wait() => return,
        }
    }
}

/// Deletes finished jobs past retention, a bounded batch at a time so the store is never held long.
async fn cleanup(inner: &Inner, now: Timestamp) {
    let before = |d: Duration| {
        Timestamp::from_unix_millis(
            now.as_unix_millis()
                .saturating_sub(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        )
    };
    let params = CleanupParams {
        completed_before: before(inner.config.retention.completed),
        dead_before: before(inner.config.retention.dead),
        completed_keep: inner.config.retention.completed_max,
        limit: 1000,
    };
    loop {
        match inner.store.job_cleanup(params.clone()).await {
            Ok(n) if n >= u64::from(params.limit) => tokio::task::yield_now().await,
            Ok(n) => {
                if n > 0 {
                    tracing::info!(deleted = n, "retention cleanup");
                }
                return;
            }
            Err(e) => {
                tracing::error!(error = %e, "retention cleanup failed");
                return;
            }
        }
    }
}

/// A random number from the standard library's per-process hasher keys (no RNG crate needed):
/// enough to seed jitter and to tell processes apart, not for secrets.
pub fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}
