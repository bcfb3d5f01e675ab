//! Pauses, resumes and breaker resets set by hand. They live in the store, so that every node
//! honours them and they outlast a restart; the node that takes the request applies them at once,
//! the others when their share loop reads the controls again (within `SHARE_INTERVAL`, or at
//! once when the store tells them).

use super::config::{GroupLimits, Groups};
use super::{Engine, Inner};
use redial_policy::endpoint::EndpointView;
use redial_policy::endpoint::HandPause;
use redial_policy::Timestamp;
use redial_store::StoreError;
use redial_store::{Control, ControlKind};
use std::collections::HashMap;

/// A queue as people see it: its configuration and its hand pause.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct QueueView {
    pub name: String,
    pub concurrency: usize,
    /// A pause set by hand, while in force: no job of the queue is leased.
    pub paused_by_hand: Option<HandPause>,
    /// What each group of its jobs may use (as configured).
    pub groups: Groups,
    /// What a dead job does to its ordering key: block or skip.
    pub ordering_on_dead: redial_store::OnDead,
}

/// One group of a queue, as `GET /v1/queues/{name}/groups` shows it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct GroupView {
    pub group: String,
    /// Jobs ready, scheduled or deferred.
    pub waiting: u64,
    /// Jobs leased and running, on every node.
    pub running: u64,
    /// Attempts of the group in flight on this node, as its limits count them (0 when it has
    /// none).
    pub in_flight_here: u32,
    pub limits: GroupLimits,
    /// How long its waiting jobs take to start, at its own limits and the queue's concurrency,
    /// and those of them forecast to miss their deadline.
    pub forecast: redial_policy::endpoint::Forecast,
}

/// A queue's groups with work, most waiting first.
#[derive(Clone, Debug, serde::Serialize)]
pub struct QueueGroups {
    pub queue: String,
    pub groups: Vec<GroupView>,
    /// Groups with waiting or running jobs, all of them (`groups` holds the first ones).
    pub total: u64,
}

impl Engine {
    /// Pauses a queue (none of its jobs is leased; those running finish) or an endpoint (every
    /// job of it is held, on every node) until `until`, or until resumed when `None`.
    pub async fn pause(
        &self,
        kind: ControlKind,
        name: &str,
        until: Option<Timestamp>,
        reason: String,
    ) -> Result<HandPause, StoreError> {
        let pause = HandPause {
            since: self.inner.clock.now(),
            until,
            reason,
        };
        let set = pause.clone();
        self.change_control(kind, name, move |c| c.pause = Some(set))
            .await?;
        tracing::info!(kind = kind.as_str(), name, reason = %pause.reason, until = ?pause.until.map(|u| u.to_string()), "paused by hand");
        self.inner.announce_endpoints().await;
        Ok(pause)
    }

    /// Lifts a hand pause. For an endpoint it also ends the pause its answers set (a
    /// server-given wait, a spent quota): the person resuming takes over, and the next answer
    /// may pause it again.
    pub async fn resume(&self, kind: ControlKind, name: &str) -> Result<(), StoreError> {
        let now = self.inner.clock.now();
        if kind == ControlKind::Endpoint {
            // First, so that no node takes the old hold in again after the resume.
            self.inner
                .store
                .endpoint_holds_clear(name, true, false)
                .await?;
        }
        self.change_control(kind, name, move |c| {
            c.pause = None;
            if kind == ControlKind::Endpoint {
                c.resumed_at = Some(now);
            }
        })
        .await?;
        tracing::info!(kind = kind.as_str(), name, "resumed by hand");
        self.inner.announce_endpoints().await;
        Ok(())
    }

    /// Closes an endpoint's breaker, with an empty window and its open time back to the first
    /// step, on every node.
    pub async fn reset_breaker(&self, endpoint: &str) -> Result<(), StoreError> {
        let now = self.inner.clock.now();
        self.inner
            .store
            .endpoint_holds_clear(endpoint, false, true)
            .await?;
        self.change_control(ControlKind::Endpoint, endpoint, move |c| {
            c.breaker_reset_at = Some(now)
        })
        .await?;
        tracing::info!(endpoint, "breaker reset by hand");
        self.inner.announce_endpoints().await;
        Ok(())
    }

    /// Every configured queue with its hand pause.
    pub fn queue_views(&self) -> Vec<QueueView> {
        let now = self.inner.clock.now();
        let pauses = self.inner.lock_queue_pauses();
        self.inner
            .config
            .queues
            .iter()
            .map(|(name, qc)| QueueView {
                name: name.clone(),
                concurrency: qc.concurrency,
                paused_by_hand: pauses.get(name).filter(|p| p.in_force(now)).cloned(),
                groups: qc.groups.clone(),
                ordering_on_dead: qc.ordering_on_dead,
            })
            .collect()
    }

    /// The groups of `queue` with work (`limit` at most, most waiting first), with what each
    /// may use; `None` for a queue not configured here.
    pub async fn queue_groups(
        &self,
        queue: &str,
        limit: u32,
    ) -> Result<Option<QueueGroups>, StoreError> {
        let Some(qc) = self.inner.config.queues.get(queue) else {
            return Ok(None);
        };
        let counts = self.inner.store.group_counts(queue, limit).await?;
        let registry = self.inner.groups.get(queue);
        let mut groups = Vec::with_capacity(counts.groups.len());
        for g in counts.groups {
            groups.push(GroupView {
                forecast: self.group_forecast(queue, &g.group, g.waiting).await?,
                in_flight_here: registry.map_or(0, |r| r.in_flight(&g.group)),
                limits: qc.groups.limits(&g.group).clone(),
                group: g.group,
                waiting: g.waiting,
                running: g.running,
            });
        }
        Ok(Some(QueueGroups {
            queue: queue.to_owned(),
            groups,
            total: counts.total,
        }))
    }

    async fn change_control(
        &self,
        kind: ControlKind,
        name: &str,
        change: impl FnOnce(&mut Control),
    ) -> Result<(), StoreError> {
        // One change at a time on this node, so two cannot both read the row and the second
        // write back what the first changed. (Two nodes changing one control in the same instant
        // can still lose one of the changes.)
        let _one_at_a_time = self.inner.control_changes.lock().await;
        self.inner
            .controls_version
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // One control read, changed and saved, and taken in alone: the cost of a change does
        // not grow with the number of endpoints (the share loop reads the whole list).
        let store = &self.inner.store;
        let mut control = store
            .control_get(kind, name)
            .await?
            .unwrap_or_else(|| Control::new(kind, name));
        change(&mut control);
        store.control_save(control.clone()).await?;
        self.inner.apply_control(&control, self.inner.clock.now());
        Ok(())
    }

    /// Whether `endpoint` is known: configured, seen by this node (a job of it ran, its state
    /// was saved, a control names it), seen by another (its state saved since this one
    /// started), or with jobs waiting in the store.
    pub async fn endpoint_known(&self, endpoint: &str) -> Result<bool, StoreError> {
        if self.inner.endpoints.known(endpoint) {
            return Ok(true);
        }
        let now = self.inner.clock.now();
        let b = self.inner.store.endpoint_backlog_of(endpoint, now).await?;
        if b.due + b.later > 0 {
            return Ok(true);
        }
        self.inner.store.endpoint_saved(endpoint).await
    }

    /// Forgets, now, the endpoints unseen for `retention.endpoints` that are not configured,
    /// hold nothing and have no job waiting (maintenance does it at each cleanup); returns them.
    pub async fn forget_unseen_endpoints(&self) -> Vec<String> {
        super::loops::forget_endpoints(&self.inner, self.inner.clock.now()).await
    }

    /// One endpoint's limits in force and state (as [`Engine::endpoint_views`] gives each).
    pub fn endpoint_view(&self, endpoint: &str) -> EndpointView {
        self.inner.endpoints.view(endpoint, self.inner.clock.now())
    }
}

impl Inner {
    fn lock_queue_pauses(&self) -> std::sync::MutexGuard<'_, HashMap<String, HandPause>> {
        self.queue_pauses.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The hand pause holding `queue` now, if any.
    pub(super) fn queue_paused(&self, queue: &str, now: Timestamp) -> Option<HandPause> {
        self.lock_queue_pauses()
            .get(queue)
            .filter(|p| p.in_force(now))
            .cloned()
    }

    /// Takes in one control just changed here. Wakes every queue when something changed.
    pub(super) fn apply_control(&self, control: &Control, now: Timestamp) {
        let changed = match control.kind {
            ControlKind::Queue => {
                let mut pauses = self.lock_queue_pauses();
                let before = pauses.get(&control.name).cloned();
                match &control.pause {
                    Some(p) => pauses.insert(control.name.clone(), p.clone()),
                    None => pauses.remove(&control.name),
                };
                before != control.pause
            }
            ControlKind::Endpoint => self.endpoints.apply_control(control, now),
        };
        if changed {
            self.wake_all();
            self.holds_changed.notify_one();
        }
    }

    /// Takes in every control (the whole list: a control missing from it is lifted). Wakes
    /// every queue when something changed.
    pub(super) fn apply_controls(&self, controls: Vec<Control>, now: Timestamp) -> bool {
        let (queues, endpoints): (Vec<_>, Vec<_>) = controls
            .into_iter()
            .partition(|c| c.kind == ControlKind::Queue);
        let pauses: HashMap<String, HandPause> = queues
            .into_iter()
            .filter_map(|c| Some((c.name, c.pause?)))
            .collect();
        let queues_changed = {
            let mut current = self.lock_queue_pauses();
            let changed = *current != pauses;
            *current = pauses;
            changed
        };
        let endpoints_changed = self.endpoints.apply_controls(&endpoints, now);
        if queues_changed || endpoints_changed {
            self.wake_all();
            self.holds_changed.notify_one();
        }
        queues_changed || endpoints_changed
    }
}
