//! The worker runtime: one leasing loop per queue, a heartbeat loop, a maintenance loop, and the
//! attempt path (run the handler, decide, record).
//!
//! Over 600 lines: the engine's handle, the embedding API: each method a few lines over `Inner`,
//! kept in one place so that the API reads whole.

use crate::alerts::{AlertStatus, Alerts};
use crate::clock::Clock;
use crate::endpoints::Registry;
use crate::handler::Handler;
use crate::metrics::Metrics;
use crate::shutdown::Shutdown;
use redial_policy::endpoint::EndpointView;
use redial_policy::{Policy, SplitMix64, Timestamp};
use redial_store::{
    Callback, InsertOutcome, Job, JobFilter, JobId, JobState, NewJob, ReleaseParams,
    ReplayChangedParams, Store, StoreError,
};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::{AbortHandle, JoinHandle};

mod attempt;
mod checked;
mod config;
mod controls;
mod facts;
mod forecasts;
mod gauges;
mod lease;
mod loops;
mod operations;
mod recording;
mod schedules;
mod waiting;

pub use checked::{Checked, IntoChecked, JobProblem};
pub use config::{CallbackTarget, EngineConfig, GroupLimits, Groups, QueueConfig, Retention};
pub use controls::{GroupView, QueueGroups, QueueView};
use lease::{queue_loop, QueueSlots};
use loops::{
    alert_loop, heartbeat_loop, maintenance_loop, save_endpoints, share_loop, take_in_nodes,
    wake_loop,
};
pub use operations::{BulkKind, CancelError, OperationState, OperationView, CHUNK};
pub use schedules::{
    check_schedule_id, derived_idempotency_key, JobTemplate, MissedRule, ScheduleCheck,
    ScheduleDefinition, ScheduleError, ScheduleRule, ScheduleView, MAX_TEMPLATE_TAGS,
};
pub use waiting::WaitError;

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
    /// One per queue: enqueues, replays, controls and finishes that made a delivery wake the
    /// queue's leasing loop (an attempt's end tells `slots`' `freed` instead).
    wakers: HashMap<String, Arc<Notify>>,
    /// One per queue: the places its jobs take (`lease.rs`).
    slots: HashMap<String, QueueSlots>,
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
    /// Per queue whose groups have limits: each group's state and attempts in flight (the same
    /// machinery as endpoints', rate and concurrency only).
    groups: HashMap<String, Arc<Registry>>,
    /// Stops leasing: the first step of a graceful stop.
    shutdown: Shutdown,
    /// Stops heartbeats and maintenance: the last step, once no attempt is in flight, so that
    /// leases stay fresh through the grace period.
    stopped: Shutdown,
    /// Notified when another node's shared hold or a control may have changed (shared stores):
    /// the share loop reads them all again.
    holds_changed: Notify,
    /// Notified when an attempt finished here (shared stores): the share loop publishes a hold
    /// it taught, without reading anything.
    holds_to_publish: Notify,
    /// Notified when a schedule is saved or resumed: the scheduler looks again at once.
    schedules_changed: Notify,
    /// Schedules this node cannot run (unreadable, or their queue not configured here), and
    /// when that was last logged: once a minute each, not at every check.
    schedules_skipped: Mutex<HashMap<String, std::time::Instant>>,
    metrics: Arc<Metrics>,
    alerts: Alerts,
    /// The last hour, minute by minute, for the dashboard's charts.
    series: crate::series::Series,
    /// Changes to the controls made here, one at a time (each reads the row, changes it, writes
    /// it back).
    control_changes: tokio::sync::Mutex<()>,
    /// Bumped by each change made here: a share loop that read the controls before it drops what
    /// it read, so that a stale list never undoes a change for a moment.
    controls_version: std::sync::atomic::AtomicU64,
    /// Queues paused by hand, from the shared controls.
    queue_pauses: Mutex<HashMap<String, redial_policy::endpoint::HandPause>>,
    /// Jobs this node finished, told to those waiting for them (`waiting.rs`).
    finishes: waiting::Finishes,
    /// Set while a wake-up of the callback queue is on its way ([`Inner::finished`]).
    delivery_wake: Arc<std::sync::atomic::AtomicBool>,
    /// Bumped when this node may have written to the event log (a finish, a replay, endpoint
    /// events), while anyone watches: event streams read on at once rather than at their next
    /// look.
    events: tokio::sync::watch::Sender<u64>,
    /// Whether this node led maintenance at its last tick: the leader tells the event log of
    /// the endpoints' changes.
    leading: std::sync::atomic::AtomicBool,
    /// The store's counts as last read for the gauges, and when.
    stats_cache: tokio::sync::Mutex<Option<(std::time::Instant, redial_store::Stats)>>,
    /// Bulk actions on dead letters run here (`operations.rs`).
    operations: operations::Operations,
}

/// How old the store's counts behind the gauges may be: reading them scans the jobs.
const STATS_MAX_AGE: Duration = Duration::from_secs(5);

/// How long the callback queue's wake-up waits for more finishes to gather their deliveries
/// into one lease.
const DELIVERY_GATHER: Duration = Duration::from_millis(5);

/// How often a node sharing its store publishes its new holds and reads the others' (besides
/// doing so at once when it learns of a change).
const SHARE_INTERVAL: Duration = Duration::from_millis(250);

impl Engine {
    /// An engine whose queues all use `handler` unless [`Engine::with_handler`] says otherwise.
    ///
    /// Over 100 lines on purpose: it builds each part of the engine from its configuration, in the
    /// order the parts depend on each other.
    pub fn new(
        store: Arc<dyn Store>,
        config: EngineConfig,
        clock: Arc<dyn Clock>,
        handler: Arc<dyn Handler>,
    ) -> Engine {
        let config = config.with_own_queues();
        let wakers = config
            .queues
            .keys()
            .map(|q| (q.clone(), Arc::new(Notify::new())))
            .collect();
        let slots = config
            .queues
            .iter()
            .map(|(q, c)| (q.clone(), QueueSlots::new(c.concurrency)))
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
        let alone = !store.is_shared();
        let groups = config
            .queues
            .iter()
            .filter(|(_, q)| q.groups.limited())
            .map(|(name, q)| {
                let named = q
                    .groups
                    .named
                    .iter()
                    .map(|(g, l)| {
                        let limits = l.as_endpoint_config();
                        (
                            g.clone(),
                            crate::endpoints::EndpointSettings {
                                policy: None,
                                limits,
                            },
                        )
                    })
                    .collect();
                let registry = Registry::new(
                    q.groups.each.as_endpoint_config(),
                    named,
                    metrics.clone(),
                    clock.clone(),
                );
                (name.clone(), Arc::new(registry))
            })
            .collect();
        Engine {
            inner: Arc::new(Inner {
                store,
                config,
                clock,
                default_handler: handler,
                handlers: HashMap::new(),
                wakers,
                slots,
                in_flight: Mutex::new(HashMap::new()),
                attempt_done: Notify::new(),
                given_back_unstarted: std::sync::atomic::AtomicUsize::new(0),
                jitter: Mutex::new(SplitMix64::new(random_u64())),
                endpoints,
                groups,
                shutdown: Shutdown::new(),
                stopped: Shutdown::new(),
                holds_changed: Notify::new(),
                holds_to_publish: Notify::new(),
                schedules_changed: Notify::new(),
                schedules_skipped: Mutex::new(HashMap::new()),
                metrics,
                stats_cache: tokio::sync::Mutex::new(None),
                operations: Default::default(),
                finishes: waiting::Finishes::default(),
                delivery_wake: Arc::default(),
                events: tokio::sync::watch::channel(0).0,
                // Alone on its store, this node always leads; sharing one, it knows after its
                // first maintenance tick.
                leading: std::sync::atomic::AtomicBool::new(alone),
                queue_pauses: Mutex::new(HashMap::new()),
                control_changes: tokio::sync::Mutex::new(()),
                controls_version: std::sync::atomic::AtomicU64::new(0),
                series: crate::series::Series::default(),
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

    /// Changes each time this node may have written to the event log; an event stream reads
    /// the log on when it does (and now and then anyway: other nodes write too).
    pub fn event_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.events.subscribe()
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    pub fn has_queue(&self, queue: &str) -> bool {
        self.inner.config.has_queue(queue)
    }

    /// Tells a queue's loop to look for work now (after an enqueue or a replay).
    pub fn wake(&self, queue: &str) {
        self.inner.wake(queue);
    }

    pub fn wake_all(&self) {
        self.inner.wake_all();
    }

    /// The callback a job of `queue` carries ([`EngineConfig::callback`]).
    pub fn callback(
        &self,
        queue: &str,
        given: Option<CallbackTarget>,
    ) -> Result<Option<Callback>, String> {
        self.inner.config.callback(queue, given)
    }

    /// Stores a job and wakes its queue when it is new: what every enqueue does (an API route, an
    /// embedding program), so no caller has to remember the wake-up.
    /// A job with an ordering key takes its queue's `ordering_on_dead`.
    /// A plain `NewJob` is checked here ([`EngineConfig::check`]); a [`Checked`] one (the API's
    /// intake made it) is taken as it is.
    pub async fn enqueue(&self, job: impl IntoChecked) -> Result<InsertOutcome, StoreError> {
        let job = job.into_checked(&self.inner.config)?.into_job();
        let outcome = self.inner.store.job_insert(job).await?;
        if let InsertOutcome::Inserted(j) = &outcome {
            self.wake(&j.queue);
        }
        Ok(outcome)
    }

    /// Stores a batch (all or nothing) and wakes the queues it added jobs to.
    pub async fn enqueue_batch<J: IntoChecked>(
        &self,
        jobs: Vec<J>,
    ) -> Result<Vec<InsertOutcome>, StoreError> {
        let jobs = jobs
            .into_iter()
            .map(|j| j.into_checked(&self.inner.config).map(Checked::into_job))
            .collect::<Result<Vec<NewJob>, StoreError>>()?;
        let outcomes = self.inner.store.job_insert_batch(jobs).await?;
        let mut queues: Vec<&str> = outcomes
            .iter()
            .filter(|o| matches!(o, InsertOutcome::Inserted(_)))
            .map(|o| o.job().queue.as_str())
            .collect();
        queues.sort_unstable();
        queues.dedup();
        for q in queues {
            self.wake(q);
        }
        Ok(outcomes)
    }

    /// Replays a dead job now and wakes its queue.
    pub async fn replay(&self, id: &JobId) -> Result<Job, StoreError> {
        let job = self
            .inner
            .store
            .job_replay(id, self.inner.clock.now())
            .await?;
        self.wake(&job.queue);
        self.inner.events_changed();
        Ok(job)
    }

    /// Replays a dead job with its request or routing changed ([`Store::job_replay_changed`])
    /// and wakes its (new) queue.
    pub async fn replay_changed(&self, params: ReplayChangedParams) -> Result<Job, StoreError> {
        let job = self.inner.store.job_replay_changed(params).await?;
        self.wake(&job.queue);
        self.inner.events_changed();
        Ok(job)
    }

    /// Replays the dead jobs the filter matches now; wakes every queue if any was.
    pub async fn replay_dead_letters(&self, filter: JobFilter) -> Result<u64, StoreError> {
        let n = self
            .inner
            .store
            .dead_letter_replay(filter, self.inner.clock.now())
            .await?;
        if n > 0 {
            self.wake_all();
            self.inner.events_changed();
        }
        Ok(n)
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

    /// The earliest instant after now at which some endpoint's hold changes (a pause ends, a
    /// rate or a learned pace lets the next request go): where a driver of virtual time moves
    /// the clock next.
    pub fn next_endpoint_change(&self) -> Option<Timestamp> {
        self.inner.endpoints.next_change(self.inner.clock.now())
    }

    /// The engine's metrics (counters and histograms; gauges come with [`Engine::render_metrics`]).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    /// This process's last hour, minute by minute: attempts by category, jobs finished, attempt
    /// latency.
    pub fn series(&self) -> Vec<crate::series::Point> {
        self.inner.series.points(self.inner.clock.now())
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
        let controls = self.inner.store.controls_load().await?;
        self.inner.apply_controls(controls, self.inner.clock.now());
        // Before any lease: the other nodes rescue this one's jobs the moment it goes away.
        self.inner
            .store
            .node_announce(&self.inner.config.worker_id)
            .await?;
        // Before any lease too: this node's part of every endpoint's limits.
        take_in_nodes(&self.inner).await;
        let mut queue_loops = Vec::new();
        for queue in self.inner.config.queues.keys() {
            queue_loops.push(tokio::spawn(queue_loop(self.inner.clone(), queue.clone())));
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
        if self.inner.config.schedules {
            background.push(tokio::spawn(schedules::schedule_loop(
                self.inner.clone(),
                self.clone(),
            )));
        }
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
    /// Wakes every queue's leasing loop (a slot freed, a hold may have lifted, work arrived).
    fn wake_all(&self) {
        for n in self.wakers.values() {
            n.notify_one();
        }
    }

    /// After an attempt: a place freed and a hold may have lifted, so every queue whose last
    /// lease left work behind looks again (`QueueSlots::freed`). One whose last lease found
    /// all it could take does not: told by every attempt of every queue, an idle queue read
    /// the store once per attempt (the callback queue's cost 6% of HTTP dispatch without
    /// callbacks), and a busy callback queue, leasing at each of its deliveries' ends, held its
    /// free lease slots away from the deliveries that would start at once.
    fn wake_after_attempt(&self) {
        for q in self.slots.values() {
            q.freed.notify_one();
        }
    }

    /// Wakes the callback queue a moment after a finish made a delivery, once for all the
    /// finishes of that moment: one lease then takes them together, where a wake-up per finish
    /// leased deliveries one by one (a store round trip each).
    fn wake_for_deliveries(&self) {
        if self.delivery_wake.swap(true, Ordering::SeqCst) {
            return;
        }
        let Some(waker) = self.wakers.get(&self.config.callback_queue).cloned() else {
            return;
        };
        let armed = self.delivery_wake.clone();
        tokio::spawn(async move {
            tokio::time::sleep(DELIVERY_GATHER).await;
            armed.store(false, Ordering::SeqCst);
            waker.notify_one();
        });
    }

    fn wake(&self, queue: &str) {
        if let Some(n) = self.wakers.get(queue) {
            n.notify_one();
        }
    }

    /// `job`, as leased, was left in `state`: when that finished it, those waiting for it are
    /// told, and the callback queue looks for the delivery it may have made, unless that one
    /// was `started` at once.
    fn finished(&self, job: &Job, state: JobState, started: bool) {
        // The end of a keyed job's run may have made the next job of its key the head: new work
        // the queue's last lease could not see (it may have left nothing else behind).
        if job.ordering.is_some() {
            self.wake(&job.queue);
        }
        if state.is_finished() {
            self.events_changed();
            self.finishes.tell(&job.id);
            if job.callback.is_some() && !started {
                self.wake_for_deliveries();
            }
        }
    }

    /// Tells the event streams watching, if any, that the log may have grown.
    fn events_changed(&self) {
        if self.events.receiver_count() > 0 {
            self.events.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Appends the endpoints' changes since the last look to the event log (the maintenance
    /// leader only; the other nodes take them as told).
    async fn announce_endpoints(&self) {
        let tell = self.leading.load(std::sync::atomic::Ordering::Relaxed);
        let events = self.endpoints.announce(self.clock.now(), tell);
        if events.is_empty() {
            return;
        }
        let notices: Vec<_> = events
            .iter()
            .filter_map(crate::notifications::Notice::of_event)
            .collect();
        match self.store.event_append(events).await {
            Ok(()) => self.events_changed(),
            Err(e) => {
                tracing::error!(error = %e, "could not write endpoint events to the event log")
            }
        }
        self.notify(&notices).await;
    }

    /// Enqueues the notifications of `notices` for the targets that want them. Each is a job of
    /// the notification queue whose id the notice and target make: told twice, stored once.
    pub(super) async fn notify(&self, notices: &[crate::notifications::Notice]) {
        let targets = &self.config.notifications;
        if targets.is_empty() || notices.is_empty() {
            return;
        }
        let queue = &self.config.notification_queue;
        let jobs = crate::notifications::jobs(targets, notices, queue);
        if jobs.is_empty() {
            return;
        }
        let n = jobs.len();
        match self.store.job_insert_batch(jobs).await {
            Ok(_) => self.wake(queue),
            Err(e) => {
                tracing::error!(error = %e, notifications = n, "could not enqueue notifications")
            }
        }
    }

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
pub(super) fn host_name() -> String {
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
