//! The engine's configuration: queues, retention, limits, and what the defaults are.

use crate::alerts::AlertConfig;
use crate::endpoints::EndpointSettings;
use crate::otel::Tracer;
use redial_policy::endpoint::{EndpointConfig, Rate};
use redial_policy::Policy;
use redial_store::Callback;
use redial_store::CallbackEvent;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::{host_name, random_u64};

/// One queue: how many attempts run at once, the policy its jobs follow, and what each group
/// of its jobs (a tenant) may use.
#[derive(Clone, Debug)]
pub struct QueueConfig {
    pub concurrency: usize,
    pub policy: Policy,
    pub groups: Groups,
    /// The callback of the queue's jobs that name none.
    pub callback: Option<CallbackTarget>,
    /// What a dead job does to its ordering key's line: hold it until the job is replayed or
    /// dismissed (`Block`, the default), or let the next job go (`Skip`). Given to each keyed
    /// job as it is enqueued.
    pub ordering_on_dead: redial_store::OnDead,
}

/// Where a finished job's callback goes and for which events, as a job or a queue gives it
/// (the delivery's queue and endpoint are the engine's to fix: [`crate::Engine::callback`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CallbackTarget {
    /// An http or https URL.
    pub url: String,
    pub on: Vec<CallbackEvent>,
    pub headers: Vec<(String, String)>,
}

impl QueueConfig {
    /// A queue of at most `concurrency` attempts at once under `policy`, with what
    /// [`Default`] gives the rest: no groups, no callback, a dead keyed job holds its line.
    pub fn new(concurrency: usize, policy: Policy) -> Self {
        QueueConfig {
            concurrency,
            policy,
            ..QueueConfig::default()
        }
    }
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            concurrency: 32,
            policy: Policy::default(),
            groups: Groups::default(),
            callback: None,
            ordering_on_dead: redial_store::OnDead::Block,
        }
    }
}

/// What one group of a queue's jobs may use, and its share of the queue's turns.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct GroupLimits {
    /// Attempts of the group in flight at most (across the cluster). None: no limit of its own.
    pub concurrency: Option<u32>,
    /// Attempts of the group started per interval at most (across the cluster).
    pub rate: Option<Rate>,
    /// Turns the group takes in the queue's round-robin for each turn of a group of weight 1.
    pub weight: u32,
}

impl Default for GroupLimits {
    fn default() -> Self {
        GroupLimits {
            concurrency: None,
            rate: None,
            weight: 1,
        }
    }
}

impl GroupLimits {
    /// Whether the group has a limit to keep (weights alone need no state).
    pub fn limited(&self) -> bool {
        self.concurrency.is_some() || self.rate.is_some()
    }

    /// The limits as endpoint protection keeps them: only rate and concurrency; no breaker,
    /// retry budget, probing, ramp or learning (a group sends nothing itself).
    pub(crate) fn as_endpoint_config(&self) -> EndpointConfig {
        let mut c = EndpointConfig {
            rate: self.rate,
            concurrency: self.concurrency,
            adaptive_concurrency: false,
            learn_from_headers: false,
            probe_first: false,
            ramp_for: Duration::ZERO,
            ..EndpointConfig::default()
        };
        c.retry_budget.enabled = false;
        c.breaker.enabled = false;
        c
    }
}

/// The groups of a queue: the limits every group has, and those of groups named in the
/// configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Groups {
    pub each: GroupLimits,
    pub named: BTreeMap<String, GroupLimits>,
}

impl Groups {
    pub fn limits(&self, group: &str) -> &GroupLimits {
        self.named.get(group).unwrap_or(&self.each)
    }

    /// Whether some group has a limit to keep.
    pub fn limited(&self) -> bool {
        self.each.limited() || self.named.values().any(GroupLimits::limited)
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
    /// The event log (`GET /v1/events`): events older than this are deleted.
    pub events: Duration,
    /// An endpoint unseen this long (no job of it admitted or answered, no control set), that
    /// is not configured and holds nothing (no pause, breaker closed, no job waiting), is
    /// forgotten: its saved state and controls are deleted.
    pub endpoints: Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            completed: Duration::from_secs(24 * 3600),
            completed_max: None,
            dead: Duration::from_secs(30 * 24 * 3600),
            events: Duration::from_secs(24 * 3600),
            endpoints: Duration::from_secs(7 * 24 * 3600),
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
    /// Run the scheduler's loop (on; off for tests that call `Engine::schedules_check`
    /// themselves, on a manual clock).
    pub schedules: bool,
    /// How often a request waiting for a job to finish reads it again when nothing told it of a
    /// change (a finish made by another node, a deadline ended by maintenance); 2 s.
    pub wait_recheck: Duration,
    /// The queue callback deliveries run in ("callbacks"); added to `queues` with the defaults
    /// when they do not name it. Its jobs never have callbacks.
    pub callback_queue: String,
    /// Webhook targets told of endpoint and alert events (`notifications.rs`), through jobs of
    /// `notification_queue` ("notifications", added to `queues` with the defaults when some
    /// target is configured and the queues do not name it).
    pub notifications: Vec<crate::notifications::NotificationTarget>,
    pub notification_queue: String,
}

impl EngineConfig {
    /// This configuration with Redial's own queues added when it does not name them: callback
    /// deliveries run in a queue of their own, and notifications too when some target wants
    /// them. The engine runs with it; `redial config check` checks jobs against it.
    pub fn with_own_queues(mut self) -> Self {
        self.queues.entry(self.callback_queue.clone()).or_default();
        if !self.notifications.is_empty() {
            self.queues
                .entry(self.notification_queue.clone())
                .or_default();
        }
        self
    }

    pub fn has_queue(&self, queue: &str) -> bool {
        self.queues.contains_key(queue)
    }

    /// The callback a job of `queue` carries: the one it gives, else its queue's, delivered in
    /// the callback queue to the URL's origin. A job of the callback queue has none (a delivery
    /// never makes another): one it gives is refused, its queue's ignored.
    pub fn callback(
        &self,
        queue: &str,
        given: Option<CallbackTarget>,
    ) -> Result<Option<Callback>, String> {
        let callbacks = &self.callback_queue;
        if queue == callbacks {
            return match given {
                Some(_) => Err(format!(
                    "jobs of the queue {callbacks:?} deliver callbacks and never have one of their own"
                )),
                None => Ok(None),
            };
        }
        let Some(target) = given.or_else(|| self.queues.get(queue)?.callback.clone()) else {
            return Ok(None);
        };
        let url = url::Url::parse(&target.url)
            .map_err(|e| format!("callback url {:?} is not a valid URL: {e}", target.url))?;
        Ok(Some(Callback {
            endpoint: url.origin().ascii_serialization(),
            url: target.url,
            on: target.on,
            headers: target.headers,
            queue: callbacks.clone(),
        }))
    }

    /// Gives a keyed job its queue's `ordering_on_dead` (a queue not configured keeps what the
    /// job says).
    pub fn order(&self, job: &mut redial_store::NewJob) {
        if let (Some(o), Some(q)) = (job.ordering.as_mut(), self.queues.get(&job.queue)) {
            o.on_dead = q.ordering_on_dead;
        }
    }

    /// How long a node sharing the store may be out of touch (its presence lock free, no sign of
    /// life) before its leases are ended early: three maintenance ticks, at least 3 s. A node
    /// whose connection blinked announces itself again at its next tick, well within it.
    pub fn presence_grace(&self) -> Duration {
        (self.maintenance_interval * 3).max(Duration::from_secs(3))
    }
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
            schedules: true,
            wait_recheck: Duration::from_secs(2),
            callback_queue: "callbacks".to_owned(),
            notifications: Vec::new(),
            notification_queue: "notifications".to_owned(),
        }
    }
}
