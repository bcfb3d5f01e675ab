//! The background loops: heartbeats, wake-ups from other nodes, shared holds, alerts, and
//! maintenance (rescue, promotion, retention).

use super::{Inner, SHARE_INTERVAL, STATS_MAX_AGE};
use redial_policy::{DeadCategory, Timestamp};
use redial_store::{
    CleanupParams, ExpireParams, HeartbeatParams, JobId, RescueParams, StoreError, Wake,
};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

pub(super) async fn heartbeat_loop(inner: Arc<Inner>) {
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
pub(super) async fn wake_loop(
    inner: Arc<Inner>,
    mut wakes: tokio::sync::broadcast::Receiver<Wake>,
) {
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
                inner.wake_all();
                inner.holds_changed.notify_one();
            }
            Err(RecvError::Closed) => return,
        }
    }
}

/// Keeps this node's endpoint holds and the other nodes' in step through the store: publishes
/// a pause or an open breaker learned here, and takes in those learned elsewhere.
pub(super) async fn share_loop(inner: Arc<Inner>) {
    loop {
        let now = inner.clock.now();
        // Controls first: a hold a hand resume or reset ended must not be taken in again. A
        // list read while this node changed a control is dropped (the change applied the newer).
        let version = inner.controls_version.load(Ordering::SeqCst);
        match inner.store.controls_load().await {
            Ok(_) if inner.controls_version.load(Ordering::SeqCst) != version => {}
            Ok(controls) => {
                if inner.apply_controls(controls, now) {
                    tracing::info!("took in pauses, resumes or resets set by hand on another node");
                }
            }
            Err(e) => tracing::error!(error = %e, "reading the controls set by hand failed"),
        }
        take_in_nodes(&inner).await;
        publish_holds(&inner, now).await;
        match inner.store.endpoint_holds_load(now).await {
            Ok(holds) => {
                if inner.endpoints.absorb(holds, now) {
                    tracing::info!("took in endpoint holds shared by another node");
                    inner.wake_all();
                }
            }
            Err(e) => tracing::error!(error = %e, "reading shared endpoint holds failed"),
        }
        // Until the next full pass, holds taught here are published as attempts finish; the
        // others' are read again when the store says they changed.
        let next = tokio::time::Instant::now() + SHARE_INTERVAL;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(next) => break,
                _ = inner.holds_changed.notified() => break,
                _ = inner.holds_to_publish.notified() => {
                    publish_holds(&inner, inner.clock.now()).await;
                }
                _ = inner.stopped.wait() => return,
            }
        }
    }
}

/// Publishes the pauses and open breakers learned here that the other nodes do not know yet.
async fn publish_holds(inner: &Inner, now: redial_policy::Timestamp) {
    let mine = inner.endpoints.holds_to_share(now);
    if !mine.is_empty() {
        if let Err(e) = inner.store.endpoint_holds_share(mine).await {
            tracing::error!(error = %e, "sharing endpoint holds failed; will retry");
            inner.endpoints.reshare();
        }
    }
}

/// Reads which nodes share the store and gives this one its part of every endpoint's limits
/// (its rank among them and their number); wakes the queues when the part changed. A node not
/// listed yet (about to announce itself, or its presence lost) counts itself in.
pub(super) async fn take_in_nodes(inner: &Inner) {
    let mut nodes = match inner.store.nodes_live().await {
        Ok(nodes) => nodes,
        Err(e) => {
            tracing::error!(error = %e, "reading which nodes share the store failed");
            return;
        }
    };
    if nodes.is_empty() {
        return;
    }
    let me = &inner.config.worker_id;
    // The store lists them in byte order, as `String`s compare.
    if let Err(at) = nodes.binary_search(me) {
        nodes.insert(at, me.clone());
    }
    let rank = nodes.iter().position(|n| n == me).unwrap_or(0);
    let of = nodes.len();
    let (rank, of) = (
        u32::try_from(rank).unwrap_or(0),
        u32::try_from(of).unwrap_or(u32::MAX),
    );
    for registry in inner.groups.values() {
        registry.set_cluster(rank, of);
    }
    if inner.endpoints.set_cluster(rank, of) {
        tracing::info!(
            nodes = of,
            rank,
            "endpoint limits are divided among {of} node(s); this node keeps its part"
        );
        inner.wake_all();
    }
}

/// The store's counts, read at most every `STATS_MAX_AGE` (reading them scans the jobs); shared
/// by the metrics' gauges and the alert rules.
pub(super) async fn cached_stats(inner: &Inner) -> Result<redial_store::Stats, StoreError> {
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

impl Inner {
    /// Evaluates the alert rules now, with the counts (deferral ages) and the forecasts
    /// (deadlines at risk) they need; returns the alerts that started or stopped firing.
    pub(super) async fn evaluate_alerts(
        &self,
        now: Timestamp,
    ) -> Result<Vec<crate::alerts::Change>, StoreError> {
        let stats = if self.alerts.needs_stats() {
            Some(cached_stats(self).await?)
        } else {
            None
        };
        let at_risk = if self.alerts.needs_forecasts() {
            Some(self.deadlines_at_risk(now).await?)
        } else {
            None
        };
        self.alerts
            .evaluate(self.store.as_ref(), stats.as_ref(), at_risk.as_deref(), now)
            .await
    }
}

/// Evaluates the alert rules; the maintenance leader tells the webhook about changes.
pub(super) async fn alert_loop(inner: Arc<Inner>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(inner.alerts.interval()) => {}
            _ = inner.stopped.wait() => return,
        }
        let now = inner.clock.now();
        let changes = match inner.evaluate_alerts(now).await {
            Ok(changes) => changes,
            Err(e) => {
                tracing::error!(error = %e, "evaluating alerts failed");
                Vec::new()
            }
        };
        for c in &changes {
            let s = &c.status;
            if s.firing {
                tracing::warn!(alert = %s.name, value = s.value, threshold = s.threshold, summary = %s.summary, "alert firing");
            } else {
                tracing::info!(alert = %s.name, summary = %s.summary, "alert resolved");
            }
        }
        if changes.is_empty() && !inner.alerts.has_untold().await {
            continue;
        }
        if inner.store.try_lead().await.unwrap_or(false) {
            let notices: Vec<_> = changes
                .iter()
                .map(|c| crate::notifications::Notice::of_alert(c, now))
                .collect();
            inner.notify(&notices).await;
            // Cancelled at shutdown: a notification leaves the queue only once taken.
            tokio::select! {
                _ = inner.alerts.notify(&changes) => {}
                _ = inner.stopped.wait() => return,
            }
        } else {
            // The leader tells; what this node kept while it led is no longer its to tell.
            inner.alerts.forget_untold().await;
        }
    }
}

pub(super) async fn maintenance_loop(inner: Arc<Inner>) {
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
        inner
            .leading
            .store(leading, std::sync::atomic::Ordering::Relaxed);
        inner.announce_endpoints().await;
        if leading {
            maintain(&inner, &mut last_cleanup).await;
            // Rescues and deadlines may have finished jobs.
            inner.events_changed();
        }
        tokio::select! {
            _ = tokio::time::sleep(inner.config.maintenance_interval) => {}
            _ = inner.stopped.wait() => return,
        }
    }
}

/// Jobs (new ones, dead ones) one transaction indexes for search, at most.
const SEARCH_CHUNK: u32 = 1000;

/// Transactions of [`SEARCH_CHUNK`] a maintenance tick runs at most (10,000 jobs a tick), so
/// that the indexes keep up with a burst of enqueues or an outage's dead letters.
const SEARCH_CHUNKS_PER_TICK: u32 = 10;

/// Rescue, promotion, deadlines, the dead letters' search index and retention.
pub(super) async fn maintain(inner: &Inner, last_cleanup: &mut Option<std::time::Instant>) {
    {
        let now = inner.clock.now();
        match inner
            .store
            .job_rescue_expired(RescueParams {
                now,
                max_stalls: inner.config.max_stalls,
                presence_grace: inner.config.presence_grace(),
            })
            .await
        {
            Ok(r) if r.requeued > 0 || r.dead > 0 => {
                inner.metrics.add(
                    &crate::metrics::DEAD_LETTERS,
                    &[("category", DeadCategory::UnknownExhausted.as_str())],
                    r.dead,
                );
                tracing::warn!(
                    requeued = r.requeued,
                    dead = r.dead,
                    "rescued jobs whose lease expired"
                );
                inner.wake_all();
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
                    &crate::metrics::DEAD_LETTERS,
                    &[("category", DeadCategory::DeadlineExceeded.as_str())],
                    n,
                );
                tracing::warn!(dead = n, "jobs passed their deadline while waiting");
                // Their callback deliveries, if they have any, are due now.
                inner.wake(&inner.config.callback_queue);
            }
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "expiring deadlines failed"),
        }
        // The search indexes: the terms of the jobs enqueued since (where a store writes them
        // after the insert) and the words of the reasons of jobs that died since; in chunks
        // (each its own transaction, so dispatch goes on between them), a bounded number a tick;
        // a search brings the rest up to date itself.
        for _ in 0..SEARCH_CHUNKS_PER_TICK {
            match inner.store.index_for_search(SEARCH_CHUNK).await {
                Ok(n) if n >= SEARCH_CHUNK => tokio::task::yield_now().await,
                Ok(_) => break,
                Err(e) => {
                    tracing::error!(error = %e, "bringing the search indexes up to date failed");
                    break;
                }
            }
        }
        if last_cleanup.is_none_or(|t| t.elapsed() >= inner.config.cleanup_interval) {
            *last_cleanup = Some(std::time::Instant::now());
            cleanup(inner, now).await;
        }
    }
}

/// Saves the endpoint states that changed, so that pauses, breakers and budgets survive a restart.
pub(super) async fn save_endpoints(inner: &Inner) {
    let records = inner.endpoints.take_dirty(inner.clock.now());
    if records.is_empty() {
        return;
    }
    if let Err(e) = inner.store.endpoint_save(records.clone()).await {
        tracing::error!(error = %e, "saving endpoint state failed; will retry");
        inner.endpoints.mark_dirty(&records);
    }
}

/// Forgets endpoints unseen for `retention.endpoints` that hold nothing and have no job
/// waiting: their entries here, their saved state and their controls. A name that comes back
/// starts afresh. Returns those forgotten.
pub(super) async fn forget_endpoints(inner: &Inner, now: Timestamp) -> Vec<String> {
    let unseen_since = Timestamp::from_unix_millis(now.as_unix_millis().saturating_sub(
        i64::try_from(inner.config.retention.endpoints.as_millis()).unwrap_or(i64::MAX),
    ));
    let mut idle = Vec::new();
    for name in inner.endpoints.forgettable(unseen_since, now) {
        match inner.store.endpoint_backlog_of(&name, now).await {
            Ok(b) if b.due + b.later == 0 => idle.push(name),
            Ok(_) => {}
            Err(e) => {
                tracing::error!(error = %e, "forgetting unseen endpoints failed");
                return Vec::new();
            }
        }
    }
    let gone = inner.endpoints.forget(&idle, unseen_since, now);
    if gone.is_empty() {
        return gone;
    }
    match inner.store.endpoint_forget(gone.clone()).await {
        Ok(()) => tracing::info!(
            endpoints = gone.len(),
            "forgot endpoints unseen for the retention time"
        ),
        Err(e) => tracing::error!(error = %e, "forgetting unseen endpoints failed"),
    }
    gone
}

/// Deletes finished jobs past retention, a bounded batch at a time so the store is never held long.
pub(super) async fn cleanup(inner: &Inner, now: Timestamp) {
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
    forget_endpoints(inner, now).await;
    let events_before = before(inner.config.retention.events);
    loop {
        match inner.store.event_cleanup(events_before, 1000).await {
            Ok(1000) => tokio::task::yield_now().await,
            Ok(_) => break,
            Err(e) => {
                tracing::error!(error = %e, "event log cleanup failed");
                break;
            }
        }
    }
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
