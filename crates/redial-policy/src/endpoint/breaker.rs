//! The circuit breaker: stop sending to an endpoint whose retries keep failing, then let a few
//! probes find out whether it is back.
//!
//! Closed, it counts results in its window (`window`): it opens on failures of retries (jobs
//! that failed before and failed again) against successes. A first attempt that fails says
//! little (a flaky API fails single calls and answers the retry); a retry that fails again says
//! the endpoint is failing. Open, it holds every job until its end; each reopening without a
//! close between doubles the open time (`breaker_opens`), up to `max_open_for`. Half-open, it
//! lets `half_open_probes` probes through and decides on their failure ratio: enough failed
//! retries open it again, enough successes close it (with an empty window, and slow start when
//! no rate or quota paces the endpoint).
//!
//! Invariants: a probe's result counts only in its own half-open period (`breaker_period`), so
//! a late answer of an earlier period cannot close or open it; probes in flight are never saved,
//! so a restored half-open breaker is never stuck on probes that will not answer; the history
//! keeps the last [`HISTORY`] transitions. Does not own suspicion of first attempts (see
//! `suspect.rs`), which its openings and half-openings end.

use super::admission::{hold, Admission, HoldKind, ResultClass};
use super::config::EndpointConfig;
use super::state::EndpointState;
use super::window::{add_to, bucket_start, prune, totals, Bucket};
use super::Permit;
use crate::duration::Human;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

/// The transitions a breaker remembers, newest last.
const HISTORY: usize = 20;
/// For this long after an endpoint began failing, the breaker opens for `min_open_for` at most.
pub const PROBE_OFTEN_FOR: std::time::Duration = std::time::Duration::from_secs(60);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum BreakerState {
    #[default]
    Closed,
    Open {
        until: Timestamp,
    },
    /// Letting `half_open_probes` probes through, and deciding on their failure ratio.
    HalfOpen {
        /// Probes admitted and not yet ended. Never saved: after a restart none is in flight.
        #[serde(skip)]
        in_flight: u32,
        succeeded: u32,
        failed: u32,
    },
}

impl BreakerState {
    pub fn name(&self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open { .. } => "open",
            BreakerState::HalfOpen { .. } => "half_open",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakerEvent {
    pub at: Timestamp,
    pub to: String,
    pub reason: String,
}

impl EndpointState {
    /// Open, the breaker holds every job until its end, then turns half-open (a new period,
    /// suspicion ended). Half-open, it holds once its probes are all out or answered.
    pub(super) fn check_breaker(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
    ) -> Result<(), Admission> {
        match self.breaker {
            BreakerState::Open { until } if now < until => {
                let text = match self.quarantined_since {
                    Some(since) => quarantined_text(since, until),
                    None => open_text(until),
                };
                return hold(HoldKind::Breaker, Some(until), text);
            }
            BreakerState::Open { until } => {
                self.breaker = BreakerState::HalfOpen {
                    in_flight: 0,
                    succeeded: 0,
                    failed: 0,
                };
                self.breaker_period = self.breaker_period.wrapping_add(1);
                self.quarantine_probe_at = self.quarantined_since.map(|_| until);
                self.clear_suspicion();
                self.event(
                    now,
                    "half_open",
                    format!("open period ended at {until}; letting probes through"),
                );
            }
            BreakerState::HalfOpen {
                in_flight,
                succeeded,
                failed,
            } if in_flight + succeeded + failed >= self.probes(cfg) => {
                return hold(
                    HoldKind::Breaker,
                    None,
                    format!(
                        "circuit half-open: {in_flight} probes in flight, {succeeded} succeeded, {failed} failed"
                    ),
                );
            }
            _ => {}
        }
        Ok(())
    }

    /// Probes a half-open period lets through: one while quarantined.
    fn probes(&self, cfg: &EndpointConfig) -> u32 {
        if self.quarantined_since.is_some() {
            1
        } else {
            cfg.breaker.half_open_probes
        }
    }

    /// Counts an admission while half-open as a probe of the current period, which it returns.
    pub(super) fn count_probe(&mut self) -> Option<u32> {
        if let BreakerState::HalfOpen { in_flight, .. } = &mut self.breaker {
            *in_flight += 1;
            return Some(self.breaker_period);
        }
        None
    }

    /// Frees a permit's probe slot; returns whether it was a probe of the current half-open
    /// period.
    pub(super) fn end_probe(&mut self, permit: &Permit) -> bool {
        match (&mut self.breaker, permit.probe) {
            (BreakerState::HalfOpen { in_flight, .. }, Some(period))
                if period == self.breaker_period =>
            {
                *in_flight = in_flight.saturating_sub(1);
                true
            }
            _ => false,
        }
    }

    /// A result: a probe's decides the half-open breaker; any other counts in the closed
    /// breaker's window.
    pub(super) fn record_breaker(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
        probe: bool,
        permit: &Permit,
        class: ResultClass,
    ) {
        // Results of attempts admitted before the breaker opened, or in an earlier half-open
        // period, say nothing about the endpoint now: the probes decide.
        if probe {
            if !self.record_quarantine_probe(cfg, now, class) {
                self.record_probe(cfg, now, permit.retry, class);
            }
        } else if self.breaker == BreakerState::Closed && cfg.breaker.enabled {
            self.record_closed(cfg, now, permit, class);
        }
    }

    /// A probe's result. Neutral results (a 400, a deferral) free the slot for another probe.
    /// Once the failures among `half_open_probes` reach `failure_ratio` the breaker opens again
    /// (for twice as long); once they can no longer reach it, it closes.
    fn record_probe(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
        retry: bool,
        class: ResultClass,
    ) {
        let BreakerState::HalfOpen {
            in_flight,
            mut succeeded,
            mut failed,
        } = self.breaker
        else {
            return;
        };
        match class {
            ResultClass::Success => succeeded += 1,
            // A first attempt's failure says little (flaky APIs fail first calls); it made the
            // endpoint more suspect instead, and its place goes to another probe.
            ResultClass::Failure if !retry => {}
            ResultClass::Failure => failed += 1,
            ResultClass::Neutral => {}
        }
        self.breaker = BreakerState::HalfOpen {
            in_flight,
            succeeded,
            failed,
        };
        let probes = f64::from(cfg.breaker.half_open_probes);
        let ratio = cfg.breaker.failure_ratio;
        if f64::from(failed) >= ratio * probes {
            self.open(
                cfg,
                now,
                format!(
                    "{failed} of {} probes failed ({succeeded} succeeded)",
                    cfg.breaker.half_open_probes
                ),
            );
        } else if f64::from(cfg.breaker.half_open_probes.saturating_sub(succeeded)) < ratio * probes
        {
            self.close(
                cfg,
                now,
                format!(
                    "{succeeded} of {} probes succeeded ({failed} failed)",
                    cfg.breaker.half_open_probes
                ),
            );
        }
    }

    /// Closes the breaker after an outage: an empty window, the open time back to its first
    /// step, and slow start when no rate or quota paces the endpoint.
    pub(super) fn close(&mut self, cfg: &EndpointConfig, now: Timestamp, reason: String) {
        self.breaker = BreakerState::Closed;
        self.breaker_opens = 0;
        self.open_period = None;
        self.window.clear();
        self.event(now, "closed", reason);
        self.last_hold = Some(("circuit breaker".into(), now));
        if cfg.rate.is_none() && self.quota_limit.is_none() {
            self.start_ramp(now);
        }
    }

    /// A result while closed. It opens on failures of retries (jobs that failed before and
    /// failed again) against successes: a first attempt that fails says little (a flaky API fails
    /// single calls and answers the retry), a retry that fails again says the endpoint is failing.
    fn record_closed(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
        permit: &Permit,
        class: ResultClass,
    ) {
        let bucket = bucket_start(now, cfg.breaker.window);
        let failed = class == ResultClass::Failure;
        let add = |b: &mut Bucket| match class {
            ResultClass::Success => b.successes += 1,
            ResultClass::Failure => {
                b.firsts += u32::from(!permit.retry);
                b.failed_retries += u32::from(permit.retry);
            }
            ResultClass::Neutral => {}
        };
        add_to(&mut self.window, bucket, add);
        prune(&mut self.window, now, cfg.breaker.window);
        if !(failed && permit.retry) {
            return;
        }
        let w = totals(&self.window);
        let counted = w.successes + w.failed_retries;
        if counted >= cfg.breaker.min_throughput
            && f64::from(w.failed_retries) >= cfg.breaker.failure_ratio * f64::from(counted)
        {
            self.open(
                cfg,
                now,
                format!(
                    "{} retries failed again against {} successes in {}",
                    w.failed_retries,
                    w.successes,
                    Human(cfg.breaker.window)
                ),
            );
        }
    }

    /// Takes in a hand reset of the breaker made at `at`: the first time it is seen, an open or
    /// half-open breaker closes with an empty window and its open time back to the first step,
    /// and suspicion of first attempts ends. Returns whether anything changed.
    pub fn take_breaker_reset(&mut self, at: Timestamp, now: Timestamp) -> bool {
        if self.breaker_reset_at.is_some_and(|seen| seen >= at) {
            return false;
        }
        self.breaker_reset_at = Some(at);
        self.window.clear();
        self.breaker_opens = 0;
        self.open_period = None;
        self.end_quarantine();
        self.clear_suspicion();
        if self.breaker == BreakerState::Closed {
            return false;
        }
        self.breaker = BreakerState::Closed;
        self.breaker_period = self.breaker_period.wrapping_add(1);
        self.event(now, "closed", format!("reset by hand at {at}"));
        true
    }

    /// For the first [`PROBE_OFTEN_FOR`] of an outage, every opening lasts `min_open_for` (a
    /// second by default): the end of a short outage is found within a second, at a few probes
    /// a second, and a failed probe holds its job rather than spending its attempt. After that,
    /// an opening lasts as long as the endpoint has been failing, between `min_open_for` and
    /// `open_for`, and each reopening (its probes failed) twice as long as the one before, up to
    /// `max_open_for`: one of an hour is probed as rarely as the doubling allows.
    pub(super) fn open(&mut self, cfg: &EndpointConfig, now: Timestamp, reason: String) {
        let b = &cfg.breaker;
        let longest = b.max_open_for.max(b.open_for);
        if self.breaker_opens == 0 {
            // The outage's start, for "replay what died since the outage began".
            self.outage_began = Some(self.failing_since.unwrap_or(now));
        }
        let open_for = match self.open_period {
            _ if self.quarantine_due(cfg, now) => self.enter_quarantine(cfg, now),
            Some(last) if self.breaker_opens > 0 && !self.probed_often(now) => {
                last.saturating_mul(2).min(longest)
            }
            _ => self.first_open_period(cfg, now),
        };
        self.open_period = Some(open_for);
        self.breaker_opens = self.breaker_opens.saturating_add(1);
        let until = now.saturating_add(open_for);
        self.breaker = BreakerState::Open { until };
        self.clear_suspicion();
        self.event(now, "open", reason);
    }

    /// Whether the outage is young enough to be probed about every `min_open_for`: its end is
    /// then found within about that long (its failed probes hold their jobs, they do not spend
    /// their attempts).
    fn probed_often(&self, now: Timestamp) -> bool {
        self.failure_streak(now) < PROBE_OFTEN_FOR
    }

    /// How long the endpoint is held as down when it first looks so (the breaker's first
    /// opening, suspect first attempts): in an outage's first minute `min_open_for`, then as long
    /// as it has been failing, between `min_open_for` and `open_for`.
    pub(super) fn first_open_period(
        &self,
        cfg: &EndpointConfig,
        now: Timestamp,
    ) -> std::time::Duration {
        let b = &cfg.breaker;
        if self.probed_often(now) {
            b.min_open_for.min(b.open_for)
        } else {
            b.fitted(self.failure_streak(now))
        }
    }

    /// How long the endpoint has been failing: since the first failure after its last success
    /// (zero when its last answer was a success).
    pub(super) fn failure_streak(&self, now: Timestamp) -> std::time::Duration {
        self.failing_since
            .map_or(std::time::Duration::ZERO, |since| {
                now.saturating_since(since)
            })
    }

    /// A result moves the failure streak: a failure starts it (if none is going), a success
    /// ends it unless the endpoint is still held as down (a half-open breaker's first good
    /// probe: the outage goes on until the probes close it); a neutral answer (a 400, a
    /// deferral) leaves it. Called after the breaker and suspicion took the result in.
    pub(super) fn track_streak(&mut self, now: Timestamp, class: ResultClass) {
        match class {
            ResultClass::Success if !self.held_as_down() => self.failing_since = None,
            ResultClass::Success => {}
            ResultClass::Failure => {
                self.failing_since.get_or_insert(now);
            }
            ResultClass::Neutral => {}
        }
    }

    /// Remembers a transition, keeping the last [`HISTORY`].
    pub(super) fn event(&mut self, at: Timestamp, to: &str, reason: String) {
        self.breaker_history.push_back(BreakerEvent {
            at,
            to: to.into(),
            reason,
        });
        while self.breaker_history.len() > HISTORY {
            self.breaker_history.pop_front();
        }
    }
}

/// Why an open breaker holds an endpoint's jobs.
pub(super) fn open_text(until: Timestamp) -> String {
    format!("circuit open until {until}")
}

/// Why a quarantined endpoint holds its jobs.
pub(super) fn quarantined_text(since: Timestamp, next_probe: Timestamp) -> String {
    format!("quarantined since {since} (down for long): jobs held, not failed; next probe at {next_probe}")
}
