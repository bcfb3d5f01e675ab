//! The worker runtime: one leasing loop per queue, a heartbeat loop, a maintenance loop, and the
//! attempt path (run the handler, decide, record).

use crate::alerts::{AlertConfig, AlertStatus, Alerts};
use crate::clock::Clock;
use crate::endpoints::{Admitted, EndpointSettings, Registry};
use crate::handler::{AttemptOutput, Handler};
use crate::metrics::{Metrics, Snapshot};
use crate::otel::{AttrValue, JobContext, SpanData, SpanKind, Tracer};
use crate::redact;
use crate::shutdown::Shutdown;
use futures_util::FutureExt;
use redial_policy::endpoint::{
    Admission, EndpointConfig, EndpointView, Hold, Observed, ResultClass,
};
use redial_policy::{
    decide, quota, status_phrase, Action, Category, DeadCategory, Decision, HandlerOutcome, Human,
    JobCounters, Outcome, Policy, SplitMix64, Timestamp, TransportError,
};
use redial_store::{
    Admit, Attempt, Candidate, CleanupParams, ExpireParams, HeartbeatParams, Job, JobId,
    LeaseAdmittedParams, RecordAttemptParams, ReleaseParams, RescueParams, Store, StoreError,
    Transition, Verdict, Wake,
};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
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
    /// Limits for endpoints not named in `endpoints`.
    pub endpoint_defaults: EndpointConfig,
    /// Per endpoint (a URL origin, or the name a job gives): its limits, and a policy override
    /// laid over the queue's policy and under the job's own.
    pub endpoints: BTreeMap<String, EndpointSettings>,
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
    /// Endpoints beyond this many (besides those configured) share the metric label `other`.
    pub metrics_max_endpoints: usize,
    /// Alert rules on dead letters and deferred work, and where to tell about them.
    pub alerts: AlertConfig,
    /// Where spans go; `None` (the default) turns tracing off entirely.
    pub tracer: Option<Arc<Tracer>>,
    /// Count the per-attempt metrics (on; off only to measure what they cost).
    pub count_metrics: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        let mut queues = BTreeMap::new();
        queues.insert("default".to_owned(), QueueConfig::default());
        EngineConfig {
            worker_id: format!(
                "{}-{}-{}",
                host_name(),
                std::process::id(),
                random_u64() % 1_000_000
            ),
            queues,
            endpoint_defaults: EndpointConfig::default(),
            endpoints: BTreeMap::new(),
            lease: Duration::from_secs(30),
            heartbeat: Duration::from_secs(10),
            max_stalls: 3,
            poll_interval: Duration::from_secs(1),
            maintenance_interval: Duration::from_secs(1),
            retention: Retention::default(),
            cleanup_interval: Duration::from_secs(60),
            default_timeout: Duration::from_secs(30),
            metrics_max_endpoints: 100,
            alerts: AlertConfig::default(),
            tracer: None,
            count_metrics: true,
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
    /// Jobs leased ahead that a shutdown gave back before they started (counted under the
    /// in-flight lock, so a shutdown's report counts each once).
    given_back_unstarted: std::sync::atomic::AtomicUsize,
    jitter: Mutex<SplitMix64>,
    /// Every endpoint's protection state and attempts in flight.
    endpoints: Arc<Registry>,
    /// Stops leasing: the first step of a graceful stop.
    shutdown: Shutdown,
    /// Stops heartbeats and maintenance: the last step, once no attempt is in flight, so that
    /// leases stay fresh through the grace period.
    stopped: Shutdown,
    /// Notified when a hold here or another node's shared hold may have changed (shared stores).
    holds_changed: Notify,
    metrics: Arc<Metrics>,
    alerts: Alerts,
    /// The store's counts as last read for the gauges, and when.
    stats_cache: tokio::sync::Mutex<Option<(std::time::Instant, redial_store::Stats)>>,
}

/// How old the store's counts behind the gauges may be: reading them scans the jobs.
const STATS_MAX_AGE: Duration = Duration::from_secs(5);

/// How often a node sharing its store publishes its new holds and reads the others' (besides
/// doing so at once when it learns of a change).
const SHARE_INTERVAL: Duration = Duration::from_millis(250);

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
        let alerts = Alerts::new(config.alerts.clone());
        let metrics = Arc::new(Metrics::new(
            config.metrics_max_endpoints,
            config.endpoints.keys().cloned(),
        ));
        let endpoints = Arc::new(Registry::new(
            config.endpoint_defaults.clone(),
            config.endpoints.clone(),
            metrics.clone(),
            clock.clone(),
        ));
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
                given_back_unstarted: std::sync::atomic::AtomicUsize::new(0),
                jitter: Mutex::new(SplitMix64::new(random_u64())),
                endpoints,
                shutdown: Shutdown::new(),
                stopped: Shutdown::new(),
                holds_changed: Notify::new(),
                metrics,
                stats_cache: tokio::sync::Mutex::new(None),
                alerts,
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

    /// Every endpoint's limits in force and state, as people see them: those seen or configured,
    /// and those named in `also`.
    pub fn endpoint_views(&self, also: &[String]) -> BTreeMap<String, EndpointView> {
        self.inner.endpoints.views(self.inner.clock.now(), also)
    }

    /// The engine's metrics (counters and histograms; gauges come with [`Engine::render_metrics`]).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    /// The Prometheus exposition: counters and histograms as they stand, gauges from the
    /// store's counts (at most a few seconds old) and the endpoints' states.
    pub async fn render_metrics(&self, extra: Snapshot) -> Result<String, StoreError> {
        let inner = &self.inner;
        let now = inner.clock.now();
        let stats = cached_stats(inner).await?;
        let mut snap = extra;
        let mut per_state: BTreeMap<(String, &'static str), u64> = BTreeMap::new();
        for q in inner.config.queues.keys() {
            for st in redial_store::JobState::ALL {
                per_state.insert((q.clone(), st.as_str()), 0);
            }
        }
        for c in &stats.by_queue {
            *per_state
                .entry((c.queue.clone(), c.state.as_str()))
                .or_default() += c.count;
            if let (redial_store::JobState::Dead, Some(cat)) = (c.state, c.category) {
                snap.set(
                    "redial_dead_letter_depth",
                    &[("queue", &c.queue), ("category", cat.as_str())],
                    c.count as f64,
                );
            }
        }
        for ((queue, state), n) in &per_state {
            snap.set(
                "redial_jobs",
                &[("queue", queue), ("state", state)],
                *n as f64,
            );
        }
        for q in inner.config.queues.keys() {
            let age = stats
                .oldest_deferred
                .iter()
                .find(|o| &o.queue == q)
                .map_or(0.0, |o| now.saturating_since(o.since).as_secs_f64());
            snap.set("redial_oldest_deferred_age_seconds", &[("queue", q)], age);
        }
        let mut folded: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        for (name, view) in inner.endpoints.views(now, &[]) {
            let label = inner.metrics.endpoint_label(&name);
            let paused = if view.paused_until.is_some_and(|t| t > now) {
                1.0
            } else {
                0.0
            };
            let breaker = match view.breaker {
                "open" => 2.0,
                "half_open" => 1.0,
                _ => 0.0,
            };
            let e = folded.entry(label).or_default();
            *e = (e.0.max(paused), e.1.max(breaker));
        }
        for (label, (paused, breaker)) in &folded {
            snap.set("redial_endpoint_paused", &[("endpoint", label)], *paused);
            snap.set(
                "redial_endpoint_breaker_state",
                &[("endpoint", label)],
                *breaker,
            );
        }
        for a in inner.alerts.statuses() {
            let firing = if a.firing { 1.0 } else { 0.0 };
            snap.set("redial_alert_firing", &[("alert", &a.name)], firing);
        }
        Ok(inner.metrics.render(&snap))
    }

    /// Every alert rule's state as last evaluated.
    pub fn alerts(&self) -> Vec<AlertStatus> {
        self.inner.alerts.statuses()
    }

    /// Restores the endpoints' saved state and starts the loops. Stop them with
    /// [`RunningEngine::shutdown`].
    pub async fn start(&self) -> Result<RunningEngine, StoreError> {
        self.inner
            .endpoints
            .load(self.inner.store.endpoint_load().await?);
        // Before any lease: the other nodes rescue this one's jobs the moment it goes away.
        self.inner
            .store
            .node_announce(&self.inner.config.worker_id)
            .await?;
        let mut queue_loops = Vec::new();
        for (queue, qc) in &self.inner.config.queues {
            queue_loops.push(tokio::spawn(queue_loop(
                self.inner.clone(),
                queue.clone(),
                qc.concurrency.max(1),
            )));
        }
        let mut background = vec![
            tokio::spawn(heartbeat_loop(self.inner.clone())),
            tokio::spawn(maintenance_loop(self.inner.clone())),
        ];
        if let Some(wakes) = self.inner.store.subscribe() {
            background.push(tokio::spawn(wake_loop(self.inner.clone(), wakes)));
        }
        if self.inner.store.is_shared() {
            background.push(tokio::spawn(share_loop(self.inner.clone())));
        }
        background.push(tokio::spawn(alert_loop(self.inner.clone())));
        Ok(RunningEngine {
            engine: self.clone(),
            queue_loops,
            background,
        })
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
        let at_start = {
            let in_flight = inner.lock_in_flight();
            in_flight.len() + inner.given_back_unstarted.load(Ordering::Relaxed)
        };
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
        save_endpoints(inner).await;
        // Spans of the last attempts go out before the process ends.
        if let Some(t) = &inner.config.tracer {
            if !t.flush(Duration::from_secs(5)).await {
                tracing::warn!("some spans were not exported before the stop");
            }
        }
        let released = left.len() + inner.given_back_unstarted.load(Ordering::Relaxed);
        ShutdownReport {
            finished: at_start.saturating_sub(released),
            released,
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
    fn policy_for(&self, job: &Job) -> Cow<'_, Policy> {
        let queue_policy = self.config.queues.get(&job.queue).map(|q| &q.policy);
        let layers = [
            self.endpoints.policy_override(&job.endpoint),
            job.policy.as_ref(),
        ];
        // Most jobs have no override: borrow the queue's policy instead of copying it per attempt.
        let mut policy = match queue_policy {
            Some(p) => Cow::Borrowed(p),
            None => Cow::Owned(Policy::default()),
        };
        for layer in layers.into_iter().flatten() {
            match policy.merged(layer) {
                Ok(p) => policy = Cow::Owned(p),
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

/// A leased job's place in its queue: a lease slot from the lease on, then a run slot (one of the
/// queue's concurrency) while its handler runs. When the attempt's outcome is known and its
/// endpoint has learned from it, the lease slot is traded for a place in the queue's recording
/// line, so the next attempt starts while the result is being written.
struct Slot {
    attempt: tokio::sync::OwnedSemaphorePermit,
    running: Arc<Semaphore>,
    /// The run slot, once taken; it frees when the endpoint has learned from the result, so a
    /// job waiting for it sees a pause that result brought.
    run: Option<OwnedSemaphorePermit>,
    recording: Arc<Semaphore>,
}

impl Slot {
    /// Waits for a place in the recording line, then frees the attempt slot.
    async fn start_recording(self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let place = self.recording.acquire_owned().await.ok();
        drop(self.attempt);
        place
    }
}

/// Leases a queue may have in flight at once: a second starts, with the slots that freed since,
/// while the first waits for its commit, so slots do not wait a whole commit to be filled again.
const FILLS_IN_FLIGHT: usize = 2;

/// Jobs a queue may lease beyond its concurrency, to start the moment a run slot frees instead
/// of a lease round trip later. Half the concurrency (none for a queue of one).
fn lease_ahead(concurrency: usize) -> usize {
    concurrency / 2
}

/// How long a job leased ahead may wait for a run slot and still start on the admission it was
/// leased with. Past this its endpoint is asked again: admissions spaced by a rate limit must not
/// turn into a burst because slow attempts held every run slot.
const FRESH_ADMISSION: Duration = Duration::from_millis(100);

async fn queue_loop(inner: Arc<Inner>, queue: String, concurrency: usize) {
    let permits = Arc::new(Semaphore::new(concurrency + lease_ahead(concurrency)));
    let running = Arc::new(Semaphore::new(concurrency));
    let recording = Arc::new(Semaphore::new(concurrency));
    let waker = inner.wakers.get(&queue).cloned().unwrap_or_default();
    let mut fills: tokio::task::JoinSet<Result<bool, StoreError>> = tokio::task::JoinSet::new();
    // Set when a lease found nothing more to take: no new lease until a wake-up or this time.
    let mut idle_until: Option<tokio::time::Instant> = None;
    loop {
        if inner.shutdown.is_triggered() {
            break;
        }
        let free = permits.available_permits();
        if idle_until.is_none() && free > 0 && fills.len() < FILLS_IN_FLIGHT {
            if let Ok(slots) = permits
                .clone()
                .try_acquire_many_owned(u32::try_from(free).unwrap_or(u32::MAX))
            {
                let lines = Lines {
                    running: running.clone(),
                    recording: recording.clone(),
                };
                fills.spawn(fill(inner.clone(), queue.clone(), slots, lines));
            }
        }
        let wake_at =
            idle_until.unwrap_or_else(|| tokio::time::Instant::now() + inner.config.poll_interval);
        tokio::select! {
            Some(done) = fills.join_next(), if !fills.is_empty() => match done {
                // It took all the slots it had: more may be runnable at once.
                Ok(Ok(true)) => {}
                Ok(Ok(false)) if fills.is_empty() => {
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
                    let wait = [next_job, inner.endpoints.next_change(now)]
                        .into_iter()
                        .flatten()
                        .min()
                        .map_or(inner.config.poll_interval, |t| {
                            t.saturating_since(now)
                                .clamp(Duration::from_millis(1), inner.config.poll_interval)
                        });
                    idle_until = Some(tokio::time::Instant::now() + wait);
                }
                Ok(Ok(false)) => {}
                Ok(Err(e)) => {
                    tracing::error!(queue = %queue, error = %e, "leasing failed; retrying");
                    idle_until = Some(tokio::time::Instant::now() + inner.config.poll_interval);
                }
                Err(e) => {
                    tracing::error!(queue = %queue, error = %e, "a lease task failed; retrying");
                    idle_until = Some(tokio::time::Instant::now() + inner.config.poll_interval);
                }
            },
            _ = waker.notified() => idle_until = None,
            _ = tokio::time::sleep_until(wake_at) => idle_until = None,
            _ = inner.shutdown.wait() => break,
        }
    }
    // Leases in flight finish first: their jobs are registered in flight before the loop ends,
    // so the shutdown sees them.
    while fills.join_next().await.is_some() {}
}

/// A queue's run slots and recording line, which its leased jobs take in turn.
struct Lines {
    running: Arc<Semaphore>,
    recording: Arc<Semaphore>,
}

/// Leases runnable jobs of `queue` for `slots`, asking each job's endpoint whether it may go. An
/// endpoint that holds is left out for the rest of the lease, so a held endpoint never keeps
/// another endpoint's jobs waiting. Slots not used are given back. Returns whether it leased as
/// many as it had slots (so more may be waiting), rather than all that could go.
async fn fill(
    inner: Arc<Inner>,
    queue: String,
    mut slots: tokio::sync::OwnedSemaphorePermit,
    lines: Lines,
) -> Result<bool, StoreError> {
    let free = slots.num_permits();
    if free == 0 {
        return Ok(true);
    }
    let now = inner.clock.now();
    let holds = Arc::new(Mutex::new(HashMap::new()));
    let admitted = Arc::new(Mutex::new(HashMap::new()));
    let admit = Box::new(EndpointAdmit {
        inner: inner.clone(),
        now,
        holds: holds.clone(),
        admitted: admitted.clone(),
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
        .await?;
    let mut admitted = std::mem::take(&mut *admitted.lock().unwrap_or_else(|p| p.into_inner()));
    let took_all = leased.taken.len() >= free;
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
    Ok(took_all)
}

fn count_budget_rejection(inner: &Inner, endpoint: &str) {
    let label = inner.metrics.endpoint_label(endpoint);
    inner.metrics.inc(
        "redial_retry_budget_rejections_total",
        &[("endpoint", &label)],
    );
}

/// Admission by the endpoints' limits, as the store asks it while leasing.
struct EndpointAdmit {
    inner: Arc<Inner>,
    now: Timestamp,
    /// What holds each retry admitted to fail, by seq.
    holds: Arc<Mutex<HashMap<i64, Hold>>>,
    /// The admissions of the jobs admitted to run, by seq.
    admitted: Arc<Mutex<HashMap<i64, Admitted>>>,
}

impl Admit for EndpointAdmit {
    fn admit(&mut self, c: &Candidate) -> Verdict {
        let inner = &self.inner;
        match inner.endpoints.admit(&c.endpoint, c.is_retry, self.now) {
            Ok(admission) => {
                self.admitted
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(c.seq, admission);
                Verdict::Take
            }
            Err(Admission::Go(_)) => unreachable!("an admission to go is returned as Ok"),
            Err(Admission::Hold(_)) => Verdict::HoldEndpoint,
            Err(Admission::HoldRetries(_)) => {
                count_budget_rejection(inner, &c.endpoint);
                Verdict::HoldRetries
            }
            Err(Admission::HoldFirsts(_)) => Verdict::HoldFirsts,
            Err(Admission::FailRetry(hold)) => {
                count_budget_rejection(inner, &c.endpoint);
                self.holds
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(c.seq, hold);
                Verdict::Fail
            }
        }
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

fn spawn_attempt(
    inner: &Arc<Inner>,
    job: Job,
    attempt: tokio::sync::OwnedSemaphorePermit,
    admission: Admitted,
    lines: &Lines,
) {
    let mut in_flight = inner.lock_in_flight();
    let id = job.id.clone();
    let slot = Slot {
        attempt,
        running: lines.running.clone(),
        run: None,
        recording: lines.recording.clone(),
    };
    let task = tokio::spawn(run_attempt(inner.clone(), job, slot, admission));
    in_flight.insert(id, task.abort_handle());
}

/// Retries whose endpoint's budget is spent, under a policy that fails them fast: they end dead
/// as `budget_exhausted` without a request, and the record says so.
async fn fail_retries(
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
            number: job.runs + 1,
            started_at: now,
            duration_ms: 0,
            status: None,
            error: Some("not-sent".into()),
            error_detail: None,
            category: "held".into(),
            decision: "dead".into(),
            dead_category: Some(DeadCategory::BudgetExhausted),
            delay_ms: None,
            server_wait_ms: None,
            server_wait_source: None,
            reason,
            held: Some(hold.reason.clone()),
            response_headers: Vec::new(),
            response_body: None,
            worker: inner.config.worker_id.clone(),
        };
        let params = RecordAttemptParams {
            id: job.id.clone(),
            seq: Some(job.seq),
            owner: inner.config.worker_id.clone(),
            now,
            attempt,
            transition: Transition::Dead {
                category: DeadCategory::BudgetExhausted,
            },
            attempts: job.attempts,
            unknown_attempts: job.unknown_attempts,
            deferrals: job.deferrals,
            last_delay_ms: job.last_delay_ms,
        };
        if let Err(e) = inner.store.job_record_attempt(params).await {
            // This job and the rest go back to the queue rather than wait to be rescued.
            let ids = std::iter::once(job.id).chain(jobs.map(|j| j.id)).collect();
            release(inner, ids).await;
            return Err(e);
        }
        inner.metrics.inc(
            "redial_dead_letters_total",
            &[("category", DeadCategory::BudgetExhausted.as_str())],
        );
    }
    Ok(())
}

/// Gives leases back to the store, uncounted: the jobs run again later.
async fn release(inner: &Inner, ids: Vec<JobId>) {
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
async fn wait_to_start(
    inner: &Inner,
    job: &Job,
    slot: &Slot,
    admission: Admitted,
) -> Option<(OwnedSemaphorePermit, Admitted)> {
    if let Ok(run) = slot.running.clone().try_acquire_owned() {
        return Some((run, admission));
    }
    let since = std::time::Instant::now();
    let run = tokio::select! {
        run = slot.running.clone().acquire_owned() => run.ok(),
        _ = inner.shutdown.wait() => None,
    };
    let Some(run) = run else {
        drop(admission);
        give_back(inner, job, true).await;
        return None;
    };
    let now = inner.clock.now();
    if since.elapsed() > FRESH_ADMISSION {
        drop(admission);
        match inner.endpoints.admit(&job.endpoint, job.attempts > 0, now) {
            Ok(fresh) => return Some((run, fresh)),
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
async fn give_back(inner: &Inner, job: &Job, at_shutdown: bool) {
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

/// One attempt: wait for a run slot, run, decide, record. Holds its lease slot until the outcome
/// is decided, then a place in the recording line until the result is durable.
async fn run_attempt(inner: Arc<Inner>, job: Job, mut slot: Slot, admission: Admitted) {
    let Some((run, admission)) = wait_to_start(&inner, &job, &slot, admission).await else {
        return;
    };
    slot.run = Some(run);
    let held = inner.endpoints.held_by(&job.endpoint, job.run_at);
    let started_at = inner.clock.now();
    let started = std::time::Instant::now();
    let limit = job
        .request
        .timeout_ms
        .map_or(inner.config.default_timeout, Duration::from_millis);
    let handler = inner.handler_for(&job.queue);
    // With tracing on, the request carries this attempt's context (`traceparent`).
    let traced = inner.config.tracer.as_ref().map(|t| {
        let ctx = JobContext::of(&job.id.0, traceparent_of(&job));
        let sampled = t.sampled(&ctx);
        let span_id = t.span_id();
        let mut sent = job.clone();
        sent.request
            .headers
            .retain(|(n, _)| !n.eq_ignore_ascii_case("traceparent"));
        sent.request
            .headers
            .push(("traceparent".to_owned(), ctx.traceparent(span_id, sampled)));
        (ctx, span_id, sent)
    });
    let sent = traced.as_ref().map_or(&job, |(_, _, j)| j);
    // The HTTP executor enforces the limit itself; this bound (with a second's slack) holds
    // custom handlers to it too. A handler that panics has an unknown outcome: it may have acted.
    let run = std::panic::AssertUnwindSafe(handler.run(sent)).catch_unwind();
    let output = match tokio::time::timeout(limit + Duration::from_secs(1), run).await {
        Ok(Ok(out)) => out,
        Ok(Err(panic)) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_owned());
            tracing::error!(job = %job.id, panic = %what, "the handler panicked");
            AttemptOutput::from_outcome(Outcome::Handler(HandlerOutcome::Unknown {
                reason: format!("the handler panicked: {what}"),
            }))
        }
        Err(_) => AttemptOutput {
            error_detail: Some(format!(
                "the handler did not return within {}ms",
                limit.as_millis()
            )),
            ..AttemptOutput::from_outcome(Outcome::Transport(TransportError::Timeout))
        },
    };
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let ran = Ran {
        output,
        started_at,
        duration_ms,
        held,
        span: traced.map(|(ctx, span_id, _)| (ctx, span_id)),
        carried_key: handler.carries_idempotency_key(&job),
    };
    record(&inner, &job, ran, slot, admission).await;
    inner.lock_in_flight().remove(&job.id);
    inner.attempt_done.notify_waiters();
}

/// What an attempt's result teaches its endpoint.
fn observe(output: &AttemptOutput, d: &Decision, now: Timestamp) -> Observed {
    let category = d.classification.category;
    let class = match category {
        Category::Success => ResultClass::Success,
        Category::Transient | Category::Unknown => ResultClass::Failure,
        Category::Defer | Category::Permanent => ResultClass::Neutral,
    };
    let mut o = Observed {
        class,
        overload: false,
        server_wait: None,
        quota: Default::default(),
        others_in_flight: 0,
    };
    match &output.outcome {
        Outcome::Response(r) => {
            o.overload = matches!(r.status, 429 | 503 | 529);
            o.server_wait = d
                .classification
                .server_wait
                .filter(|_| matches!(category, Category::Defer | Category::Transient))
                .map(|w| {
                    let why = format!(
                        "{} {}; {} {}",
                        r.status,
                        status_phrase(r.status),
                        w.source,
                        Human(w.requested)
                    );
                    (w.delay, why)
                });
            o.quota = quota(r.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())), now);
        }
        Outcome::Transport(e) => {
            o.overload = matches!(
                e,
                TransportError::Timeout
                    | TransportError::ReadTimeout
                    | TransportError::ConnectTimeout
            );
        }
        Outcome::Handler(_) => {}
    }
    o
}

/// What an attempt did, for its record.
struct Ran {
    output: AttemptOutput,
    started_at: Timestamp,
    duration_ms: u64,
    /// What held the job before this attempt, if anything.
    held: Option<String>,
    /// The job's trace context and this attempt's span id, when tracing is on.
    span: Option<(JobContext, [u8; 8])>,
    /// Whether the request carried an idempotency key (then an unknown outcome is safe to repeat).
    carried_key: bool,
}

async fn record(inner: &Inner, job: &Job, ran: Ran, mut slot: Slot, admission: Admitted) {
    let Ran {
        output,
        started_at,
        duration_ms,
        held,
        span,
        carried_key,
    } = ran;
    let now = inner.clock.now();
    let policy = inner.policy_for(job);
    let counters = JobCounters {
        failures: job.attempts,
        unknown_failures: job.unknown_attempts,
        deferrals: job.deferrals,
        enqueued_at: job.created_at,
        deadline: job.deadline,
        has_idempotency_key: carried_key,
        method: redial_policy::Method::from_name(&job.request.method),
        last_delay: job.last_delay_ms.map(Duration::from_millis),
    };
    let decision = {
        let mut jitter = inner.jitter.lock().unwrap_or_else(|p| p.into_inner());
        decide(&output.outcome, &counters, &policy, now, &mut *jitter)
    };
    let after = counters.after(&decision);
    // The endpoint learns first, so that a pause applies to the next lease at once, and to a
    // job leased ahead that takes the run slot freed here.
    admission.finish(now, observe(&output, &decision, now));
    drop(slot.run.take());
    // The next attempt may start while this result is written. A finished attempt frees a
    // slot and may lift an endpoint's hold, for any queue.
    if inner.store.is_shared() {
        inner.holds_changed.notify_one();
    }
    count_attempt(inner, job, &output, &decision, duration_ms, now);
    let _recording = slot.start_recording().await;
    for n in inner.wakers.values() {
        n.notify_one();
    }
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
        reason: match &held {
            Some(h) => format!("{}; held before this attempt by {h}", decision.reason),
            None => decision.reason.clone(),
        },
        held,
        response_headers: redact::headers(&output.response_headers, 32),
        response_body: output.response_body,
        worker: inner.config.worker_id.clone(),
    };
    // Spans only for sampled jobs (the request carried the decision either way).
    let span = span.filter(|(ctx, _)| inner.config.tracer.as_ref().is_some_and(|t| t.sampled(ctx)));
    // The URL's facts cost a parse: only when a log line or a span will carry them.
    let described = span.is_some() || tracing::enabled!(tracing::Level::INFO);
    let parsed = described
        .then(|| url::Url::parse(&job.request.url).ok())
        .flatten();
    let url = if described {
        redact::url(&job.request.url)
    } else {
        String::new()
    };
    let server_address = parsed
        .as_ref()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_default();
    let error_type: Option<Cow<'_, str>> = match &output.outcome {
        Outcome::Response(r) if r.status >= 400 => Some(r.status.to_string().into()),
        Outcome::Transport(e) => Some(e.as_str().into()),
        Outcome::Handler(_) if attempt.error.is_some() => Some("handler".into()),
        _ => None,
    };
    let server_wait_source = attempt.server_wait_source.as_deref();
    // One event per decision, with the attempt span's fields (names as in the span).
    tracing::info!(
        job = %job.id,
        queue = %job.queue,
        endpoint = %job.endpoint,
        attempt = attempt.number,
        attempt_max = policy.max_attempts,
        deferrals = after.deferrals,
        decision = decision.action.as_str(),
        category = decision.category_str(),
        delay_ms = attempt.delay_ms,
        server_wait_ms = attempt.server_wait_ms,
        server_wait_source,
        held = attempt.held.as_deref(),
        idempotency_key = job.idempotency_key.as_deref(),
        "http.request.method" = %job.request.method,
        "server.address" = %server_address,
        "url.full" = %url,
        "http.response.status_code" = attempt.status,
        "error.type" = error_type.as_deref(),
        duration_ms,
        reason = %decision.reason,
        "attempt decided"
    );
    if let (Some(tracer), Some((ctx, span_id))) = (&inner.config.tracer, span) {
        let mut attrs: Vec<(&'static str, AttrValue)> = vec![
            (
                "http.request.method",
                AttrValue::Str(job.request.method.clone()),
            ),
            ("server.address", AttrValue::Str(server_address.clone())),
            ("url.full", AttrValue::Str(url.clone())),
            ("redial.attempt", AttrValue::Int(i64::from(attempt.number))),
            (
                "redial.attempt.max",
                AttrValue::Int(i64::from(policy.max_attempts)),
            ),
            (
                "redial.deferrals",
                AttrValue::Int(i64::from(after.deferrals)),
            ),
            (
                "redial.category",
                AttrValue::Str(decision.classification.category.as_str().to_owned()),
            ),
            (
                "redial.decision",
                AttrValue::Str(decision.action.as_str().to_owned()),
            ),
            ("redial.reason", AttrValue::Str(decision.reason.clone())),
        ];
        if let Some(port) = parsed.as_ref().and_then(|u| u.port_or_known_default()) {
            attrs.push(("server.port", AttrValue::Int(i64::from(port))));
        }
        if let Some(status) = attempt.status {
            attrs.push((
                "http.response.status_code",
                AttrValue::Int(i64::from(status)),
            ));
        }
        if let Some(e) = &error_type {
            attrs.push(("error.type", AttrValue::Str(e.to_string())));
        }
        if let Some(d) = attempt.delay_ms {
            attrs.push((
                "redial.delay_ms",
                AttrValue::Int(i64::try_from(d).unwrap_or(i64::MAX)),
            ));
        }
        if let Some(w) = attempt.server_wait_ms {
            attrs.push((
                "redial.server_wait_ms",
                AttrValue::Int(i64::try_from(w).unwrap_or(i64::MAX)),
            ));
        }
        if let Some(src) = server_wait_source {
            attrs.push(("redial.server_wait_source", AttrValue::Str(src.to_owned())));
        }
        if let Some(h) = &attempt.held {
            attrs.push(("redial.held_by", AttrValue::Str(h.clone())));
        }
        attrs.extend(job_attrs(job));
        if let Some(c) = attempt.dead_category {
            attrs.push((
                "redial.dead_category",
                AttrValue::Str(c.as_str().to_owned()),
            ));
        }
        tracer.record(SpanData {
            trace_id: ctx.trace_id,
            span_id,
            parent_span_id: Some(ctx.job_span_id),
            name: format!("{} {}", job.request.method, server_address),
            kind: SpanKind::Client,
            start: started_at,
            end: started_at.saturating_add(Duration::from_millis(duration_ms)),
            attributes: attrs,
            error: error_type
                .as_ref()
                .map(|e| format!("{e}: {}", decision.reason)),
        });
        if let Some(state) = final_state(decision.action) {
            let mut attrs = vec![
                ("redial.state", AttrValue::Str(state.to_owned())),
                ("redial.attempts", AttrValue::Int(i64::from(attempt.number))),
                (
                    "redial.deferrals",
                    AttrValue::Int(i64::from(after.deferrals)),
                ),
            ];
            if let Action::Dead(c) = decision.action {
                attrs.push((
                    "redial.dead_category",
                    AttrValue::Str(c.as_str().to_owned()),
                ));
            }
            attrs.extend(job_attrs(job));
            tracer.record(SpanData {
                trace_id: ctx.trace_id,
                span_id: ctx.job_span_id,
                parent_span_id: ctx.parent_span_id,
                name: format!("redial job {}", job.queue),
                kind: SpanKind::Internal,
                start: job.created_at,
                end: now,
                attributes: attrs,
                error: matches!(decision.action, Action::Dead(_)).then(|| decision.reason.clone()),
            });
        }
    }
    let params = RecordAttemptParams {
        id: job.id.clone(),
        seq: Some(job.seq),
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

/// The attempt's counters and histograms.
fn count_attempt(
    inner: &Inner,
    job: &Job,
    output: &AttemptOutput,
    decision: &redial_policy::Decision,
    duration_ms: u64,
    now: Timestamp,
) {
    if !inner.config.count_metrics {
        return;
    }
    let m = &inner.metrics;
    let endpoint = m.endpoint_label(&job.endpoint);
    let status;
    let outcome = match &output.outcome {
        Outcome::Response(r) => {
            status = r.status.to_string();
            status.as_str()
        }
        Outcome::Transport(e) => e.as_str(),
        Outcome::Handler(_) => "handler",
    };
    m.inc(
        "redial_attempts_total",
        &[
            ("queue", &job.queue),
            ("endpoint", &endpoint),
            ("outcome", outcome),
            ("category", decision.classification.category.as_str()),
        ],
    );
    m.inc(
        "redial_decisions_total",
        &[
            ("queue", &job.queue),
            ("decision", decision.action.as_str()),
        ],
    );
    m.observe(
        "redial_attempt_duration_seconds",
        &[("queue", &job.queue), ("endpoint", &endpoint)],
        duration_ms as f64 / 1000.0,
    );
    match decision.action {
        Action::Defer { .. } => {
            let reason = decision
                .classification
                .server_wait
                .map_or("backoff", |w| w.source);
            m.inc(
                "redial_deferrals_total",
                &[
                    ("queue", &job.queue),
                    ("endpoint", &endpoint),
                    ("reason", reason),
                ],
            );
        }
        Action::Dead(category) => {
            m.inc(
                "redial_dead_letters_total",
                &[("category", category.as_str())],
            );
        }
        Action::Complete | Action::Retry { .. } => {}
    }
    if let Some(state) = final_state(decision.action) {
        m.observe(
            "redial_job_latency_seconds",
            &[("queue", &job.queue), ("state", state)],
            now.saturating_since(job.created_at).as_secs_f64(),
        );
    }
}

/// The state a decision ends the job in, if it ends it.
fn final_state(action: Action) -> Option<&'static str> {
    match action {
        Action::Complete => Some("completed"),
        Action::Dead(_) => Some("dead"),
        Action::Retry { .. } | Action::Defer { .. } => None,
    }
}

/// The span attributes that say which job: on the job's span and on each attempt's.
fn job_attrs(job: &Job) -> impl Iterator<Item = (&'static str, AttrValue)> + '_ {
    [
        ("redial.job.id", Some(job.id.0.as_str())),
        ("redial.queue", Some(job.queue.as_str())),
        ("redial.endpoint", Some(job.endpoint.as_str())),
        ("redial.idempotency_key", job.idempotency_key.as_deref()),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k, AttrValue::Str(v?.to_owned()))))
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

/// Wakes queue loops for work that other nodes enqueued or released, and the share loop for
/// holds they published.
async fn wake_loop(inner: Arc<Inner>, mut wakes: tokio::sync::broadcast::Receiver<Wake>) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        let wake = tokio::select! {
            w = wakes.recv() => w,
            _ = inner.stopped.wait() => return,
        };
        match wake {
            Ok(Wake::Queue(q)) => {
                if let Some(n) = inner.wakers.get(&q) {
                    n.notify_one();
                }
            }
            Ok(Wake::Endpoints) => inner.holds_changed.notify_one(),
            // Missed some: look everywhere.
            Ok(Wake::All) | Err(RecvError::Lagged(_)) => {
                for n in inner.wakers.values() {
                    n.notify_one();
                }
                inner.holds_changed.notify_one();
            }
            Err(RecvError::Closed) => return,
        }
    }
}

/// Keeps this node's endpoint holds and the other nodes' in step through the store: publishes
/// a pause or an open breaker learned here, and takes in those learned elsewhere.
async fn share_loop(inner: Arc<Inner>) {
    loop {
        let now = inner.clock.now();
        let mine = inner.endpoints.holds_to_share(now);
        if !mine.is_empty() {
            if let Err(e) = inner.store.endpoint_holds_share(mine).await {
                tracing::error!(error = %e, "sharing endpoint holds failed; will retry");
                inner.endpoints.reshare();
            }
        }
        match inner.store.endpoint_holds_load(now).await {
            Ok(holds) => {
                if inner.endpoints.absorb(holds, now) {
                    tracing::info!("took in endpoint holds shared by another node");
                    for n in inner.wakers.values() {
                        n.notify_one();
                    }
                }
            }
            Err(e) => tracing::error!(error = %e, "reading shared endpoint holds failed"),
        }
        tokio::select! {
            _ = tokio::time::sleep(SHARE_INTERVAL) => {}
            _ = inner.holds_changed.notified() => {}
            _ = inner.stopped.wait() => return,
        }
    }
}

/// The store's counts, read at most every `STATS_MAX_AGE` (reading them scans the jobs); shared
/// by the metrics' gauges and the alert rules.
async fn cached_stats(inner: &Inner) -> Result<redial_store::Stats, StoreError> {
    let mut cache = inner.stats_cache.lock().await;
    match cache.as_ref() {
        Some((at, stats)) if at.elapsed() < STATS_MAX_AGE => Ok(stats.clone()),
        _ => {
            let stats = inner.store.stats().await?;
            *cache = Some((std::time::Instant::now(), stats.clone()));
            Ok(stats)
        }
    }
}

/// Evaluates the alert rules; the maintenance leader tells the webhook about changes.
async fn alert_loop(inner: Arc<Inner>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(inner.alerts.interval()) => {}
            _ = inner.stopped.wait() => return,
        }
        let now = inner.clock.now();
        let stats = if inner.alerts.needs_stats() {
            match cached_stats(&inner).await {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::error!(error = %e, "reading counts for alerts failed");
                    continue;
                }
            }
        } else {
            None
        };
        match inner
            .alerts
            .evaluate(inner.store.as_ref(), stats.as_ref(), now)
            .await
        {
            Ok(changes) if !changes.is_empty() => {
                for c in &changes {
                    let s = &c.status;
                    if s.firing {
                        tracing::warn!(alert = %s.name, value = s.value, threshold = s.threshold, summary = %s.summary, "alert firing");
                    } else {
                        tracing::info!(alert = %s.name, summary = %s.summary, "alert resolved");
                    }
                }
                if inner.store.try_lead().await.unwrap_or(false) {
                    inner.alerts.notify(&changes).await;
                }
            }
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "evaluating alerts failed"),
        }
    }
}

async fn maintenance_loop(inner: Arc<Inner>) {
    let mut last_cleanup: Option<std::time::Instant> = None;
    loop {
        // Endpoint state is this node's own: every node saves it.
        save_endpoints(&inner).await;
        // Still alive (again, if the connection that said so had ended).
        if let Err(e) = inner.store.node_announce(&inner.config.worker_id).await {
            tracing::error!(error = %e, "cannot tell the other nodes this one is alive");
        }
        // The rest is for one node at a time (always this one on a store nobody shares).
        let leading = match inner.store.try_lead().await {
            Ok(leading) => leading,
            Err(e) => {
                tracing::error!(error = %e, "cannot tell whether this node runs maintenance");
                false
            }
        };
        if leading {
            maintain(&inner, &mut last_cleanup).await;
        }
        tokio::select! {
            _ = tokio::time::sleep(inner.config.maintenance_interval) => {}
            _ = inner.stopped.wait() => return,
        }
    }
}

/// Rescue, promotion, deadlines and retention.
async fn maintain(inner: &Inner, last_cleanup: &mut Option<std::time::Instant>) {
    {
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
                inner.metrics.add(
                    "redial_dead_letters_total",
                    &[("category", DeadCategory::UnknownExhausted.as_str())],
                    r.dead,
                );
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
        let expire = ExpireParams {
            now,
            reasons: inner.endpoints.holds(now),
        };
        match inner.store.job_expire_deadlines(expire).await {
            Ok(n) if n > 0 => {
                inner.metrics.add(
                    "redial_dead_letters_total",
                    &[("category", DeadCategory::DeadlineExceeded.as_str())],
                    n,
                );
                tracing::warn!(dead = n, "jobs passed their deadline while waiting")
            }
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "expiring deadlines failed"),
        }
        if last_cleanup.is_none_or(|t| t.elapsed() >= inner.config.cleanup_interval) {
            *last_cleanup = Some(std::time::Instant::now());
            cleanup(inner, now).await;
        }
    }
}

/// Saves the endpoint states that changed, so that pauses, breakers and budgets survive a restart.
async fn save_endpoints(inner: &Inner) {
    let records = inner.endpoints.take_dirty(inner.clock.now());
    if records.is_empty() {
        return;
    }
    if let Err(e) = inner.store.endpoint_save(records.clone()).await {
        tracing::error!(error = %e, "saving endpoint state failed; will retry");
        inner.endpoints.mark_dirty(&records);
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

/// This machine's name, for worker ids that tell nodes apart.
fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// The job's `traceparent` request header (the caller's trace, given at enqueue), if any.
fn traceparent_of(job: &Job) -> Option<&str> {
    job.request
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("traceparent"))
        .map(|(_, v)| v.as_str())
}
