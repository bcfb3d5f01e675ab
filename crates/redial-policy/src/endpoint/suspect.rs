//! Suspect first attempts: is the endpoint down, or flaky? Part of the breaker (on with it, and
//! its thresholds).
//!
//! First attempts that failed with no success since (the breaker's `min_throughput` while
//! closed, its `half_open_probes` while half-open) make the endpoint suspect: first attempts
//! wait (as long as the breaker's first opening would last: `min_open_for` in an outage's first
//! minute, then as long as the endpoint has been failing, up to `open_for`), while retries, which a flaky endpoint answers and a down one
//! fails again, tell. Any success ends it; so do the breaker's openings and half-openings, and a
//! hand reset. The failure that made the endpoint suspect has its retry sent at once when that
//! retry is safe to send at once (one per suspicion), so a flaky endpoint is told from a down one
//! in one round trip, not after a backoff.
//!
//! Invariant: suspicion never holds retries, and never holds first attempts past
//! `firsts_held_until`: no retry settled it in time, first attempts go again, one failure from
//! suspect. Whether a retry is wanted at once (`probe_wanted`) is never saved.

use super::admission::{Admission, Hold, HoldKind, Observed, ResultClass};
use super::breaker::BreakerState;
use super::config::EndpointConfig;
use super::state::EndpointState;
use super::Permit;
use crate::time::Timestamp;

impl EndpointState {
    /// While suspect, a first attempt waits until `firsts_held_until`; after it, suspicion ends
    /// with one failure to go before it starts again.
    pub(super) fn check_suspect(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
    ) -> Result<(), Admission> {
        if !cfg.breaker.enabled {
            return Ok(());
        }
        if let Some(until) = self.firsts_held_until {
            if now < until {
                return Err(Admission::HoldFirsts(Hold {
                    kind: HoldKind::Suspect,
                    until: Some(until),
                    reason: format!(
                        "{} first attempts failed and nothing succeeded since; first attempts wait until {until} while retries tell whether it is down or flaky",
                        self.first_failures
                    ),
                }));
            }
            // No retry settled it in time: let first attempts go again, until one more fails.
            self.firsts_held_until = None;
            self.first_failures = self.suspect_after(cfg).saturating_sub(1);
        }
        Ok(())
    }

    /// Failed first attempts with no success since make the endpoint suspect: first attempts
    /// wait (as long as the breaker's first opening would last) while its retries, which a flaky endpoint answers and a down
    /// one fails again, tell. Any success clears it.
    pub(super) fn suspect(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
        permit: &Permit,
        class: ResultClass,
    ) {
        if !cfg.breaker.enabled {
            return;
        }
        match class {
            ResultClass::Success => {
                self.first_failures = 0;
                self.firsts_held_until = None;
                self.probe_wanted = false;
            }
            ResultClass::Failure if !permit.retry && self.breaker_allows_firsts() => {
                self.first_failures = self.first_failures.saturating_add(1);
                if self.first_failures >= self.suspect_after(cfg)
                    && self.firsts_held_until.is_none()
                {
                    let hold = self.first_open_period(cfg, now);
                    self.firsts_held_until = Some(now.saturating_add(hold));
                    self.probe_wanted = true;
                }
            }
            _ => {}
        }
    }

    /// Whether this failed first attempt is the one whose retry goes at once, to tell flaky
    /// from down while first attempts are held: the first such failure since suspicion began,
    /// whose retry is safe to send at once. Taken once.
    pub(super) fn take_retry_now(&mut self, now: Timestamp, permit: &Permit, o: &Observed) -> bool {
        let retry_now = self.probe_wanted
            && !permit.retry
            && o.safe_retry
            && o.class == ResultClass::Failure
            && self.firsts_held_until.is_some_and(|t| now < t);
        if retry_now {
            self.probe_wanted = false;
        }
        retry_now
    }

    /// Whether the endpoint is held as down: suspect (its first attempts wait) or its breaker
    /// not closed. A success that ends this ends an outage.
    pub fn held_as_down(&self) -> bool {
        self.firsts_held_until.is_some() || self.breaker != BreakerState::Closed
    }

    /// Whether the endpoint is in an outage: its breaker not closed, or suspect after failing
    /// for `min_open_for` or more. A success that ends one makes the retries its failures
    /// scheduled due at once; a flaky endpoint's short suspicions (a retry answers within the
    /// second) are not outages, and their retries keep their backoff.
    pub fn in_outage(&self, cfg: &EndpointConfig, now: Timestamp) -> bool {
        self.breaker != BreakerState::Closed
            || (self.firsts_held_until.is_some()
                && self.failure_streak(now) >= cfg.breaker.min_open_for)
    }

    pub(super) fn clear_suspicion(&mut self) {
        self.first_failures = 0;
        self.firsts_held_until = None;
        self.probe_wanted = false;
    }

    /// Whether first attempts are not already held by the breaker (closed or half-open).
    fn breaker_allows_firsts(&self) -> bool {
        !matches!(self.breaker, BreakerState::Open { .. })
    }

    /// Failed first attempts in a row that make the endpoint suspect: the breaker's minimum
    /// while closed, its probes while half-open.
    fn suspect_after(&self, cfg: &EndpointConfig) -> u32 {
        match self.breaker {
            BreakerState::HalfOpen { .. } => cfg.breaker.half_open_probes,
            _ => cfg.breaker.min_throughput,
        }
        .max(1)
    }
}
