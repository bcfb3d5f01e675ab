//! What the state tells without admitting anything: the view people see ([`EndpointView`]), a
//! one-line reason for the holds in force, when they end, what stops every job, and the permits
//! out.
//!
//! Invariant: these answer from the same rules admission follows: `describe` asks a copy of the
//! state the [`EndpointState::check`] a first attempt's admission asks, so the hold it names is
//! the one that would hold such a job now. Besides forgetting a quiet learned pace and dropping
//! window buckets that left their windows (as admission would too), they change nothing.

use super::admission::Admission;
use super::breaker::{open_text, BreakerEvent, BreakerState};
use super::config::EndpointConfig;
use super::pause::{paused_text, HandPause};
use super::state::EndpointState;
use super::window::{prune, totals};
use crate::time::Timestamp;
use serde::Serialize;

/// The endpoint as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EndpointView {
    /// What holds its jobs right now, if anything.
    pub holding: Option<String>,
    /// A pause set by hand, while in force.
    pub paused_by_hand: Option<HandPause>,
    pub paused_until: Option<Timestamp>,
    pub pause_reason: Option<String>,
    /// Configured rate and burst: the cluster's.
    pub rate: Option<String>,
    pub burst: u32,
    /// The nodes the limits are shared among (1 alone). With several, the rate, burst,
    /// concurrency limit, learned remaining count, retry budget's minimum and slow start below
    /// are each node's part of the cluster's, and `in_flight` is this node's.
    pub nodes: u32,
    /// Learned from response headers: the limit as the API gave it, and what this node may
    /// still send of it (with several nodes, the smaller of its part of what the answers said
    /// remains and what is left of its part of the limit in this window).
    pub learned_limit: Option<u64>,
    pub learned_remaining: Option<u64>,
    pub learned_reset_at: Option<Timestamp>,
    /// Requests per second this node sends the endpoint, learned from 429s that carried no
    /// wait and no quota; `None` when it refused nothing of the kind lately.
    pub learned_pace: Option<f64>,
    /// This node's concurrency limit.
    pub concurrency_limit: Option<u32>,
    pub in_flight: u32,
    pub slow_start_since: Option<Timestamp>,
    pub budget_allowed: u64,
    pub budget_used: u32,
    pub budget_remaining: u64,
    pub breaker: &'static str,
    pub breaker_until: Option<Timestamp>,
    /// Failures (of first attempts and retries) and calls that counted, in the breaker's window.
    pub breaker_window_failures: u32,
    /// Of the failures, those of retries: what opens the breaker.
    pub breaker_window_retry_failures: u32,
    pub breaker_window_calls: u32,
    pub breaker_history: Vec<BreakerEvent>,
    /// Since when it is quarantined (down for long: its jobs held, not failed; one probe an
    /// interval), if it is.
    pub quarantined_since: Option<Timestamp>,
    /// Since when it has been failing (the first failure after its last success), if it is.
    pub failing_since: Option<Timestamp>,
    /// When its last outage began (kept after it ended): what "replay what died since the
    /// outage began" replays from.
    pub outage_began: Option<Timestamp>,
}

impl EndpointState {
    /// What people see: the limits in force and the state of each mechanism.
    pub fn view(&mut self, cfg: &EndpointConfig, now: Timestamp, in_flight: u32) -> EndpointView {
        self.pace.forget_if_quiet(now);
        let spent = self.budget_spent(cfg, now);
        let used = spent.failed_retries + self.retries_in_flight;
        let allowed = self.budget_allowed(cfg, now);
        let hold = self.describe(cfg, now, in_flight);
        prune(&mut self.window, now, cfg.breaker.window);
        let w = totals(&self.window);
        EndpointView {
            holding: hold,
            paused_by_hand: self.hand_pause.clone().filter(|p| p.in_force(now)),
            paused_until: self.paused_until.filter(|p| *p > now),
            pause_reason: self
                .pause_reason
                .clone()
                .filter(|_| self.paused_until.is_some_and(|p| p > now)),
            rate: cfg.rate.map(|r| r.to_string()),
            burst: cfg.burst,
            nodes: self.share.of,
            learned_limit: self.quota_limit,
            learned_remaining: self
                .quota_tokens
                .map(|t| self.quota_part_left().map_or(t, |left| t.min(left))),
            learned_reset_at: self.quota_reset_at,
            learned_pace: self.pace.rate().filter(|_| cfg.learn_pace),
            concurrency_limit: self.concurrency_limit(cfg),
            in_flight,
            slow_start_since: self.ramp_started,
            budget_allowed: allowed.floor() as u64,
            budget_used: used,
            budget_remaining: (allowed - f64::from(used)).max(0.0).floor() as u64,
            breaker: self.breaker.name(),
            breaker_until: match self.breaker {
                BreakerState::Open { until } => Some(until),
                _ => None,
            },
            breaker_window_failures: w.firsts + w.failed_retries,
            breaker_window_retry_failures: w.failed_retries,
            breaker_window_calls: w.successes + w.firsts + w.failed_retries,
            breaker_history: self.breaker_history.iter().cloned().collect(),
            quarantined_since: self.quarantined_since,
            failing_since: self.failing_since,
            outage_began: self.outage_began,
        }
    }

    /// A one-line description of the current holds, for reasons (deadline while held).
    pub fn describe(&self, cfg: &EndpointConfig, now: Timestamp, in_flight: u32) -> Option<String> {
        match self.clone().check(cfg, now, false, in_flight) {
            Ok(()) => None,
            Err(
                Admission::Hold(h)
                | Admission::HoldRetries(h)
                | Admission::HoldFirsts(h)
                | Admission::FailRetry(h),
            ) => Some(h.reason),
            Err(Admission::Go(_)) => None,
        }
    }

    /// When this endpoint's current holds end after `now`, if a time is known. Each instant is
    /// taken only if it is still ahead: one that passed (an old rate's slot, a pause that ended
    /// unseen) must not hide one to come.
    pub fn next_change(&self, now: Timestamp) -> Option<Timestamp> {
        let mut t: Option<Timestamp> = None;
        let mut consider = |x: Option<Timestamp>| {
            if let Some(x) = x.filter(|x| *x > now) {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        consider(self.paused_until);
        consider(self.hand_pause.as_ref().and_then(|p| p.until));
        if let BreakerState::Open { until } = self.breaker {
            consider(Some(until));
        }
        consider(self.quota_reset_at);
        consider(self.tat);
        consider(self.pace.next());
        consider(self.firsts_held_until);
        t
    }

    /// What stops every job of the endpoint now, if anything: a pause or an open breaker. Only
    /// reads (unlike [`EndpointState::check`]): for a job admitted a moment ago and about to
    /// start, to see whether a pause or a breaker came down since.
    pub fn stopped_by(&self, now: Timestamp) -> Option<String> {
        if let Some(p) = self.hand_pause.as_ref().filter(|p| p.in_force(now)) {
            return Some(p.describe());
        }
        if let Some(until) = self.paused_until.filter(|u| now < *u) {
            return Some(paused_text(until, self.pause_reason.as_deref()));
        }
        match self.breaker {
            BreakerState::Open { until } if now < until => Some(open_text(until)),
            _ => None,
        }
    }

    /// Permits handed out and not yet handed back that hold a place: (retries in flight, probes
    /// of the current half-open period in flight). Both are zero once every permit is back.
    pub fn permits_out(&self) -> (u32, u32) {
        let probes = match self.breaker {
            BreakerState::HalfOpen { in_flight, .. } => in_flight,
            _ => 0,
        };
        (self.retries_in_flight, probes)
    }
}
