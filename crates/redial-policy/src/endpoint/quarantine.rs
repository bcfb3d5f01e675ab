//! Quarantine: an endpoint down for long. Part of the breaker (on with it).
//!
//! When the breaker opens again (its probes failed) and the endpoint has been failing for
//! `quarantine_after` or more (since the first failure after its last success), the endpoint is
//! quarantined: it stays open for `quarantine_probe_every` at a time, each half-open period lets
//! one probe through, and a probe that fails costs its job no attempt (the engine holds the job
//! until the next probe instead of failing it: [`Permit::quarantined`]; deadlines still apply).
//! The first probe that succeeds ends it: the breaker closes, with slow start; so do a hand
//! resume and a hand breaker reset.
//!
//! Invariant: a quarantined endpoint's breaker is never closed, and never open longer than
//! `quarantine_probe_every` at a time: one that starts answering is back in service within one
//! probe interval plus slow start.

use super::admission::ResultClass;
use super::breaker::BreakerState;
use super::config::EndpointConfig;
use super::state::EndpointState;
use super::Permit;
use crate::duration::Human;
use crate::time::Timestamp;
use std::time::Duration;

impl EndpointState {
    /// Whether an opening now quarantines the endpoint (or keeps it quarantined).
    pub(super) fn quarantine_due(&self, cfg: &EndpointConfig, now: Timestamp) -> bool {
        let after = cfg.breaker.quarantine_after;
        self.quarantined_since.is_some()
            || (!after.is_zero() && self.breaker_opens > 0 && self.failure_streak(now) >= after)
    }

    /// Quarantines the endpoint (if it was not): returns the open period, one probe interval.
    pub(super) fn enter_quarantine(&mut self, cfg: &EndpointConfig, now: Timestamp) -> Duration {
        if self.quarantined_since.is_none() {
            self.quarantined_since = Some(now);
            let streak = self.failure_streak(now);
            self.event(
                now,
                "quarantined",
                format!(
                    "failing for {} with the breaker open; its jobs are held, not failed, and one probe goes every {}",
                    Human(streak),
                    Human(cfg.breaker.quarantine_probe_every)
                ),
            );
        }
        cfg.breaker.quarantine_probe_every
    }

    /// Ends quarantine (a probe succeeded, or people resumed or reset it by hand).
    pub(super) fn end_quarantine(&mut self) {
        self.quarantined_since = None;
    }

    /// A quarantined endpoint's probe decides at once: a success closes the breaker, a failure
    /// (of a first attempt too: probes cost no attempt now) opens it for another interval.
    /// Returns false when not quarantined, for the breaker's own rule.
    pub(super) fn record_quarantine_probe(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
        class: ResultClass,
    ) -> bool {
        let Some(since) = self.quarantined_since else {
            return false;
        };
        if !matches!(self.breaker, BreakerState::HalfOpen { .. }) {
            return true;
        }
        match class {
            ResultClass::Success => {
                self.end_quarantine();
                self.close(
                    cfg,
                    now,
                    format!(
                        "a probe succeeded after {} in quarantine",
                        Human(now.saturating_since(since))
                    ),
                );
            }
            ResultClass::Failure => self.open(cfg, now, "the quarantine's probe failed".into()),
            // Its place goes to another probe.
            ResultClass::Neutral => {}
        }
        true
    }

    /// Since when the endpoint is quarantined, if it is.
    pub fn quarantined(&self) -> Option<Timestamp> {
        self.quarantined_since
    }
}

impl Permit {
    /// Whether the attempt was a quarantined endpoint's probe: if it fails, its job is held
    /// until the next probe rather than failed (it costs no attempt).
    pub fn quarantined(&self) -> bool {
        self.quarantine
    }
}
