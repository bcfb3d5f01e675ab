//! How often requests go: a configured rate (GCRA), the pace learned from bare 429s, and slow
//! start after a pause or an outage.
//!
//! The configured rate is a GCRA: each admission moves a theoretical arrival time (`tat`) on by
//! one interval, and a request may go once `tat` minus the burst's tolerance is not after now.
//! With several nodes, each sends at its part of the rate (the interval times the nodes). The
//! arrival time keeps its part below the millisecond (never saved: a restart loses less than a
//! millisecond of it), so "30/s" is 30 a second, not 30.3 nor 29.4. The learned pace's own rules
//! are in [`super::pace`]; this module only asks it and tells it what happened.
//!
//! Slow start: after a learned pause ends or the breaker closes, on an endpoint with no
//! configured rate and no learned quota, `ramp_initial` requests go in the first `ramp_step`
//! (this node's part of them), then twice as many in each step as in the one before, until
//! `ramp_for` has passed; and each success since slow start began lets two more go (the
//! allowance doubles each round trip, as TCP's slow start): an endpoint that answers quickly
//! and well is back at full speed in a few round trips, one that answers slowly or fails waits
//! for the steps.
//!
//! Invariants: a request admitted and then released gives its slot back, but never back past
//! now (a returned slot is not a burst saved for later); both rates hold (the configured one
//! and the learned pace), and a job refused by a bare 429 waits for the pace, not its backoff.

use super::admission::{hold, Admission, HoldKind, Observed, ResultClass};
use super::config::{EndpointConfig, Rate};
use super::state::EndpointState;
use super::Permit;
use crate::duration::Human;
use crate::time::Timestamp;
use std::time::Duration;

impl EndpointState {
    /// The configured rate holds a request until its slot.
    pub(super) fn check_rate(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
    ) -> Result<(), Admission> {
        let Some(rate) = cfg.rate else {
            return Ok(());
        };
        let tolerance = self.interval(rate) * self.burst(cfg).saturating_sub(1);
        let earliest_ns =
            self.tat_ns(now) - i128::try_from(tolerance.as_nanos()).unwrap_or(i128::MAX);
        if earliest_ns > ns_of(now) {
            // Rounded up: woken then, the request may go.
            let earliest = Timestamp::from_unix_millis(
                i64::try_from((earliest_ns + 999_999).div_euclid(1_000_000)).unwrap_or(i64::MAX),
            );
            let reason = if self.share.is_whole() {
                format!("rate limit {rate}")
            } else {
                format!(
                    "rate limit {rate} across {} nodes: this node sends one request every {}",
                    self.share.of,
                    Human(self.interval(rate))
                )
            };
            return hold(HoldKind::Rate, Some(earliest), reason);
        }
        Ok(())
    }

    /// Takes the next slot of the configured rate.
    pub(super) fn count_rate(&mut self, cfg: &EndpointConfig, now: Timestamp) {
        if let Some(rate) = cfg.rate {
            let next =
                self.tat_ns(now) + i128::try_from(self.interval(rate).as_nanos()).unwrap_or(0);
            self.set_tat_ns(next);
        }
    }

    /// Gives back the slot of an admission that did not run.
    pub(super) fn release_rate(&mut self, cfg: &EndpointConfig, now: Timestamp) {
        if let (Some(rate), Some(_)) = (cfg.rate, self.tat) {
            // Never back past now: a returned slot is not a burst saved for later.
            let back =
                self.tat_ns(now) - i128::try_from(self.interval(rate).as_nanos()).unwrap_or(0);
            self.set_tat_ns(back.max(ns_of(now)));
        }
    }

    /// The spacing between this node's requests under `rate`: the cluster's spacing times the
    /// nodes, to the nanosecond (rounded up). The arrival time keeps its part below the
    /// millisecond, so "30/s" is 30 a second, not 30.3 (spacing rounded down to 33 ms) nor 29.4
    /// (rounded up to 34 ms).
    fn interval(&self, rate: Rate) -> Duration {
        let nanos = rate.per.as_nanos() * u128::from(self.share.of.max(1));
        let ns = nanos.div_ceil(u128::from(rate.count.max(1)));
        Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }

    /// The theoretical arrival time in nanoseconds since the epoch, never before `now`.
    fn tat_ns(&self, now: Timestamp) -> i128 {
        let tat = self
            .tat
            .map_or(i128::MIN, |t| ns_of(t) + i128::from(self.tat_sub_ns));
        tat.max(ns_of(now))
    }

    fn set_tat_ns(&mut self, ns: i128) {
        self.tat = Some(Timestamp::from_unix_millis(
            i64::try_from(ns.div_euclid(1_000_000)).unwrap_or(i64::MAX),
        ));
        self.tat_sub_ns = u32::try_from(ns.rem_euclid(1_000_000)).unwrap_or(0);
    }

    /// This node's part of the burst (at least one request).
    fn burst(&self, cfg: &EndpointConfig) -> u32 {
        self.share.part32(cfg.burst).max(1)
    }

    /// The pace learned from bare 429s holds a request until its place at that pace.
    pub(super) fn check_pace(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
    ) -> Result<(), Admission> {
        if !cfg.learn_pace {
            return Ok(());
        }
        if let (Some(until), Some(rate)) = (self.pace.hold(now), self.pace.rate()) {
            return hold(
                HoldKind::Rate,
                Some(until),
                format!("pace learned from bare refusals (429s, a limiter's 503s): {rate:.1} requests/s"),
            );
        }
        Ok(())
    }

    /// Counts an admission at the learned pace; returns the pace's epoch, for the permit.
    pub(super) fn count_pace(&mut self, cfg: &EndpointConfig, now: Timestamp) -> u32 {
        if cfg.learn_pace {
            self.pace.admitted(now)
        } else {
            0
        }
    }

    /// Gives back an admission that did not run to the learned pace.
    pub(super) fn release_pace(&mut self, cfg: &EndpointConfig, now: Timestamp) {
        if cfg.learn_pace {
            self.pace.released(now);
        }
    }

    /// What a finished attempt teaches the learned pace: a success lets it grow, a bare
    /// refusal cuts it (once per epoch: see [`super::pace`]).
    pub(super) fn learn_pace(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
        permit: &Permit,
        o: &Observed,
    ) {
        if !cfg.learn_pace {
            return;
        }
        if o.class == ResultClass::Success {
            self.pace.succeeded(now);
        } else if o.is_bare_refusal() {
            let sent = permit.admitted_at.unwrap_or(now);
            self.pace.refused(now, permit.pace_epoch, sent);
        }
    }

    /// When a job this endpoint just refused with a bare 429 may go again, if the endpoint keeps
    /// a learned pace: its next place at that pace. Such a job waits for the pace, not for its own
    /// deferral backoff, so that refused jobs go again as soon as the limiter has room.
    pub fn pace_release(&self, cfg: &EndpointConfig, now: Timestamp) -> Option<Timestamp> {
        if !cfg.learn_pace {
            return None;
        }
        self.pace.rate()?;
        Some(self.pace.next().map_or(now, |t| t.max(now)))
    }

    /// During slow start, a request waits for the next step once this step's allowance went;
    /// slow start ends after `ramp_for`.
    pub(super) fn check_ramp(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
    ) -> Result<(), Admission> {
        let Some(started) = self.ramp_started else {
            return Ok(());
        };
        let elapsed = now.saturating_since(started);
        if elapsed >= cfg.ramp_for {
            self.ramp_started = None;
            return Ok(());
        }
        let step = (elapsed.as_millis() / cfg.ramp_step.as_millis().max(1)) as u32;
        let initial = u64::from(self.share.part32(cfg.ramp_initial.max(1)).max(1));
        let by_time = initial.saturating_mul((1u64 << (step + 1).min(62)) - 1);
        let by_answers = initial.saturating_add(self.ramp_successes.saturating_mul(2));
        let allowed = by_time.max(by_answers);
        if self.ramp_admitted >= allowed {
            let next = started.saturating_add(cfg.ramp_step * (step + 1));
            return hold(
                HoldKind::Ramp,
                Some(next),
                format!("slow start: {allowed} requests so far"),
            );
        }
        Ok(())
    }

    pub(super) fn start_ramp(&mut self, now: Timestamp) {
        self.ramp_started = Some(now);
        self.ramp_admitted = 0;
        self.ramp_successes = 0;
    }

    /// During slow start, a success lets two more requests go.
    pub(super) fn count_ramp_success(&mut self, class: ResultClass) {
        if self.ramp_started.is_some() && class == ResultClass::Success {
            self.ramp_successes += 1;
        }
    }

    /// Counts an admission during slow start.
    pub(super) fn count_ramp(&mut self) {
        if self.ramp_started.is_some() {
            self.ramp_admitted += 1;
        }
    }

    /// Gives back what an admission that did not run took of slow start.
    pub(super) fn release_ramp(&mut self) {
        self.ramp_admitted = self.ramp_admitted.saturating_sub(1);
    }
}

/// A time in nanoseconds since the epoch.
fn ns_of(t: Timestamp) -> i128 {
    i128::from(t.as_unix_millis()) * 1_000_000
}
