//! The retry budget: it limits retries that fail, not retries that succeed.
//!
//! Within its window, the retries that failed plus those in flight may reach `ratio` x the first
//! attempts that ended, plus one for each success (of a first attempt or a retry), plus
//! `min_per_second` x the window (this node's part of it). A retry that succeeds gives its place
//! back: a backlog of retries to an endpoint that answers them drains at the endpoint's pace,
//! one that keeps failing trickles. Spent, it holds retries only (first attempts go), until its
//! oldest failed retry leaves the window or a retry in flight ends; or, with `when_exhausted =
//! fail`, it fails them.
//!
//! Invariant: retries in flight are never saved, so no saved state holds retries forever; every
//! admitted retry gives its place back when its permit does.

use super::admission::{Admission, Hold, HoldKind, ResultClass};
use super::config::{EndpointConfig, WhenExhausted};
use super::state::EndpointState;
use super::window::{add_to, bucket_start, prune, totals, Bucket};
use super::Permit;
use crate::duration::Human;
use crate::time::Timestamp;

impl EndpointState {
    /// A retry may go while the budget allows one more; otherwise it waits (or fails).
    pub(super) fn check_budget(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
    ) -> Result<(), Admission> {
        if !cfg.retry_budget.enabled {
            return Ok(());
        }
        let spent = self.budget_spent(cfg, now);
        let allowed = self.budget_allowed(cfg, now);
        if f64::from(spent.failed_retries + self.retries_in_flight) >= allowed {
            let b = &cfg.retry_budget;
            let reason = format!(
                "retry budget spent: {} retries failed and {} in flight in {} against {} allowed ({}% of {} first attempts + {} successes + {}/s)",
                spent.failed_retries,
                self.retries_in_flight,
                Human(b.window),
                allowed.floor(),
                (b.ratio * 100.0).round(),
                spent.firsts,
                spent.successes,
                self.share.part_f64(b.min_per_second)
            );
            // Failed retries leave the window with their bucket; retries in flight give
            // their place back when they end (then the queue is woken).
            let until = (spent.failed_retries > 0)
                .then(|| {
                    self.budget.iter().find(|b| b.failed_retries > 0).map(|b| {
                        Timestamp::from_unix_millis(
                            b.start
                                + i64::try_from(cfg.retry_budget.window.as_millis())
                                    .unwrap_or(i64::MAX),
                        )
                    })
                })
                .flatten();
            let h = Hold {
                kind: HoldKind::Budget,
                until,
                reason,
            };
            return Err(match b.when_exhausted {
                WhenExhausted::Wait => Admission::HoldRetries(h),
                WhenExhausted::Fail => Admission::FailRetry(h),
            });
        }
        Ok(())
    }

    /// The retry budget learns what the attempt was and how it ended.
    pub(super) fn count_budget(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
        permit: &Permit,
        class: ResultClass,
    ) {
        let bucket = bucket_start(now, cfg.retry_budget.window);
        add_to(&mut self.budget, bucket, |b| {
            b.firsts += u32::from(!permit.retry);
            match class {
                ResultClass::Success => b.successes += 1,
                ResultClass::Failure => b.failed_retries += u32::from(permit.retry),
                ResultClass::Neutral => {}
            }
        });
        prune(&mut self.budget, now, cfg.retry_budget.window);
    }

    /// What the budget window holds now.
    pub(super) fn budget_spent(&mut self, cfg: &EndpointConfig, now: Timestamp) -> Bucket {
        prune(&mut self.budget, now, cfg.retry_budget.window);
        totals(&self.budget)
    }

    /// Retries that may fail or be in flight within the window: `ratio` of the first attempts,
    /// one for each success, and `min_per_second`. Retries that succeed spend nothing.
    pub(super) fn budget_allowed(&mut self, cfg: &EndpointConfig, now: Timestamp) -> f64 {
        let b = &cfg.retry_budget;
        let w = self.budget_spent(cfg, now);
        b.ratio * f64::from(w.firsts)
            + f64::from(w.successes)
            + self.share.part_f64(b.min_per_second) * b.window.as_secs_f64()
    }
}
