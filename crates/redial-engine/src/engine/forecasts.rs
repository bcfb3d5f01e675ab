//! Forecasts of backlogs: how long an endpoint's or a group's waiting jobs take to drain at the
//! limits in force, and how many of an endpoint's will miss their deadline. The model is the
//! policy core's (`redial_policy::endpoint::forecast`); this side gathers what it needs: the
//! backlog and the deadlines from the store, the attempt time measured here, and the workers.
//! The API shows them; the alert rule `deadline_at_risk` watches them.

use super::{Engine, Inner};
use redial_policy::endpoint::{EndpointState, Forecast, ForecastInput};
use redial_policy::Timestamp;
use redial_store::StoreError;

/// The most waiting jobs with a deadline one endpoint's or group's forecast reads (those that go
/// first):
/// beyond them, jobs are counted in the drain but not in `with_deadline` or
/// `deadline_at_risk`.
pub const FORECAST_DEADLINES: u32 = 10_000;

impl Engine {
    /// The forecast of `endpoint`'s backlog, now.
    pub async fn endpoint_forecast(&self, endpoint: &str) -> Result<Forecast, StoreError> {
        let now = self.inner.clock.now();
        let backlog = self.inner.store.endpoint_backlog_of(endpoint, now).await?;
        self.inner.forecast(&backlog, now).await
    }

    /// Endpoints with waiting jobs forecast to miss their deadline, and how many each.
    pub async fn deadlines_at_risk(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.inner.deadlines_at_risk(self.inner.clock.now()).await
    }

    /// Evaluates the alert rules now (as the alert loop does at each interval) and returns
    /// their states; the webhook is not told.
    pub async fn evaluate_alerts(&self) -> Result<Vec<crate::alerts::AlertStatus>, StoreError> {
        self.inner.evaluate_alerts(self.inner.clock.now()).await?;
        Ok(self.inner.alerts.statuses())
    }

    /// The forecast of a group of `queue` with `waiting` jobs: at the group's own limits, the
    /// queue's workers and the attempt time its admissions measured here.
    pub(super) async fn group_forecast(
        &self,
        queue: &str,
        group: &str,
        waiting: u64,
    ) -> Result<Forecast, StoreError> {
        let now = self.inner.clock.now();
        let deadlines = if waiting > 0 {
            self.inner
                .store
                .group_deadlines(queue, group, now, FORECAST_DEADLINES)
                .await?
        } else {
            Vec::new()
        };
        let input = ForecastInput {
            due: waiting,
            workers: self.inner.workers(Some(queue)),
            deadlines: &deadlines,
            ..Default::default()
        };
        Ok(match self.inner.groups.get(queue) {
            Some(registry) => registry.forecast(group, now, input),
            None => {
                let cfg = self
                    .inner
                    .config
                    .queues
                    .get(queue)
                    .map(|q| q.groups.limits(group).as_endpoint_config())
                    .unwrap_or_default();
                EndpointState::default().forecast(&cfg, now, &input)
            }
        })
    }
}

impl Inner {
    /// The most attempts the cluster's workers run at once: `queue`'s concurrency, or every
    /// queue's, times the nodes.
    fn workers(&self, queue: Option<&str>) -> Option<u32> {
        let here: usize = self
            .config
            .queues
            .iter()
            .filter(|(name, _)| queue.is_none_or(|q| q == name.as_str()))
            .map(|(_, q)| q.concurrency)
            .sum();
        let nodes = self.endpoints.cluster().1;
        (here > 0).then(|| {
            u32::try_from(here)
                .unwrap_or(u32::MAX)
                .saturating_mul(nodes)
        })
    }

    /// The forecast of one endpoint's backlog.
    pub(super) async fn forecast(
        &self,
        backlog: &redial_store::EndpointBacklog,
        now: Timestamp,
    ) -> Result<Forecast, StoreError> {
        let deadlines = if backlog.due + backlog.later > 0 {
            self.store
                .endpoint_deadlines(&backlog.endpoint, now, FORECAST_DEADLINES)
                .await?
        } else {
            Vec::new()
        };
        let input = ForecastInput {
            due: backlog.due,
            later: backlog.later,
            attempt_time: None,
            workers: self.workers(None),
            deadlines: &deadlines,
        };
        Ok(self.endpoints.forecast(&backlog.endpoint, now, input))
    }

    pub(super) async fn deadlines_at_risk(
        &self,
        now: Timestamp,
    ) -> Result<Vec<(String, u64)>, StoreError> {
        let mut out = Vec::new();
        for b in self.store.endpoint_backlog(now).await? {
            let f = self.forecast(&b, now).await?;
            if f.deadline_at_risk > 0 {
                out.push((b.endpoint, f.deadline_at_risk));
            }
        }
        Ok(out)
    }
}
