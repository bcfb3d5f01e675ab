//! The Prometheus exposition: counters as they stand, gauges from the store's counts and the
//! endpoints' states.

use super::loops::cached_stats;
use super::Engine;
use crate::metrics::Snapshot;
use redial_store::StoreError;
use std::collections::BTreeMap;

impl Engine {
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
                    &crate::metrics::DEAD_LETTER_DEPTH,
                    &[("queue", &c.queue), ("category", cat.as_str())],
                    c.count as f64,
                );
            }
        }
        for ((queue, state), n) in &per_state {
            snap.set(
                &crate::metrics::JOBS,
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
            snap.set(&crate::metrics::OLDEST_DEFERRED_AGE, &[("queue", q)], age);
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
            snap.set(
                &crate::metrics::ENDPOINT_PAUSED,
                &[("endpoint", label)],
                *paused,
            );
            snap.set(
                &crate::metrics::BREAKER_STATE,
                &[("endpoint", label)],
                *breaker,
            );
        }
        for a in inner.alerts.statuses() {
            let firing = if a.firing { 1.0 } else { 0.0 };
            snap.set(&crate::metrics::ALERT_FIRING, &[("alert", &a.name)], firing);
        }
        Ok(inner.metrics.render(&snap))
    }
}
