//! How many requests are in flight at once: first contact, and the concurrency limit (static,
//! adaptive, or both).
//!
//! First contact: with `probe_first`, one request goes until the endpoint has answered once
//! (the first answer tells its quota); with `first_contact_ramp`, until it has answered
//! [`CONTACT_ANSWERS`] requests, at most one more is in flight than it answered (the window
//! doubles each round trip, as TCP's slow start), and never more than [`CONTACT_WIDEST`]: a limit
//! met for the first time refuses few.
//!
//! The concurrency limit is this node's part of `concurrency`, or the adaptive limit (AIMD: x0.9
//! on a sign of overload, +1 on a success while at least half the limit is in flight, between 1
//! and the configured limit, or 1000), or the smaller of both.
//!
//! Invariant: every hold here ends when an attempt in flight ends (none has an instant), so the
//! engine wakes the queue then. Does not count attempts in flight: the engine does, and says.

use super::admission::{hold, Admission, HoldKind, Observed, ResultClass};
use super::config::EndpointConfig;
use super::state::EndpointState;

/// First contact: until an endpoint has answered this many requests, at most one more is in
/// flight than it answered (the window doubles each round trip, as TCP's slow start), and never
/// more than [`CONTACT_WIDEST`].
pub const CONTACT_ANSWERS: u32 = 64;
/// The most in flight at first contact: what a limit met for the first time may refuse at once.
pub const CONTACT_WIDEST: u32 = 16;

impl EndpointState {
    /// Until the endpoint has answered, one request; until it has answered enough, the first
    /// contact's window.
    pub(super) fn check_contact(
        &self,
        cfg: &EndpointConfig,
        in_flight: u32,
    ) -> Result<(), Admission> {
        if cfg.probe_first && !self.answered && in_flight >= 1 {
            return hold(
                HoldKind::Probe,
                None,
                "first request to this endpoint in flight; waiting for its answer".into(),
            );
        }
        if cfg.first_contact_ramp
            && self.contact_answers < CONTACT_ANSWERS
            && in_flight >= (self.contact_answers + 1).min(CONTACT_WIDEST)
        {
            return hold(
                HoldKind::Probe,
                None,
                format!(
                    "first contact: {in_flight} in flight after {} answers; more go as answers come",
                    self.contact_answers
                ),
            );
        }
        Ok(())
    }

    /// An answer came: first contact widens.
    pub(super) fn count_answer(&mut self) {
        self.answered = true;
        self.contact_answers = self.contact_answers.saturating_add(1).min(CONTACT_ANSWERS);
    }

    /// The concurrency limit holds once that many are in flight.
    pub(super) fn check_concurrency(
        &self,
        cfg: &EndpointConfig,
        in_flight: u32,
    ) -> Result<(), Admission> {
        let Some(limit) = self.concurrency_limit(cfg) else {
            return Ok(());
        };
        if in_flight >= limit {
            let reason = if self.share.is_whole() {
                format!("concurrency limit {limit} reached")
            } else {
                format!(
                    "concurrency limit reached: {limit} in flight on this node, its part of the limit across {} nodes",
                    self.share.of
                )
            };
            return hold(HoldKind::Concurrency, None, reason);
        }
        Ok(())
    }

    pub(super) fn concurrency_limit(&self, cfg: &EndpointConfig) -> Option<u32> {
        let adaptive = self
            .adaptive_limit
            .filter(|_| cfg.adaptive_concurrency)
            .map(|l| l.floor().max(1.0) as u32);
        match (cfg.concurrency.map(|c| self.share.part32(c)), adaptive) {
            (Some(c), Some(a)) => Some(c.min(a)),
            (c, a) => c.or(a),
        }
    }

    /// Adaptive concurrency (AIMD) learns from an answer: overload cuts the limit by a tenth, a
    /// success while busy raises it by one.
    pub(super) fn adapt_concurrency(&mut self, cfg: &EndpointConfig, o: &Observed) {
        if !cfg.adaptive_concurrency {
            return;
        }
        let max = f64::from(cfg.concurrency.map_or(1000, |c| self.share.part32(c)));
        let limit = self.adaptive_limit.unwrap_or(max.min(10.0));
        let limit = if o.overload {
            (limit * 0.9).max(1.0)
        } else if o.class == ResultClass::Success
            && f64::from(o.others_in_flight + 1) >= limit / 2.0
        {
            (limit + 1.0).min(max)
        } else {
            limit
        };
        self.adaptive_limit = Some(limit);
    }
}
